import sys

from neardup.cli.main import main

sys.exit(main())
