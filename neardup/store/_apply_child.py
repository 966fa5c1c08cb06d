"""Entry point of the metadata applier's child process (see :mod:`neardup.store.applier_proc`):
``python -m neardup.store._apply_child META_SQLITE_PATH``."""

from __future__ import annotations

import sys

from .applier_proc import serve

if __name__ == "__main__":  # pragma: no cover - run as the child process
    if len(sys.argv) != 2:
        print("usage: python -m neardup.store._apply_child META_SQLITE_PATH", file=sys.stderr)
        sys.exit(2)
    sys.exit(serve(sys.argv[1]))
