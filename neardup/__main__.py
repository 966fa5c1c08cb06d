import sys

from neardup.cli.main import run

sys.exit(run())
