"""What an open may take as checked already: files that passed their checks since the machine
last started (Linux's boot id) and have not changed since (device, inode, size, modification
time).

SQLite in WAL mode and the store's own files survive the death of a process at any point
(SIGKILL included) as they were: every write the process made is the kernel's once made. What
the open's full reads exist to find is damage from outside a process's death: a crash of the
machine or a power loss with a disk that lied about its flushes, a file replaced or rewritten
while the store was closed. A reboot changes the boot id; a restored or rebuilt file its inode;
a segment or index file rewritten in place its modification time. So a restart after a crash
of the process, in the same boot, need not read every page again (minutes at 50 M documents:
docs/store.md, *What an open costs*); ``StoreSettings(verify_meta=True)`` reads them on every
open anyway.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

__all__ = ["BOOT_ID_PATH", "boot_id", "file_stamp", "same_boot_record"]

#: where Linux keeps the random id it draws at every boot (:func:`boot_id`)
BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str | None:
    """The id Linux draws at every boot of this machine, or None where it cannot be read (not
    Linux): then nothing is taken as checked. Read once per process (a boot outlives every
    process in it); an open asks for each segment."""
    return _boot_id_at(BOOT_ID_PATH)


@functools.cache
def _boot_id_at(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def file_stamp(path: str | os.PathLike[str]) -> list[int] | None:
    """``[device, inode, size, modification time in ns]`` of the file at ``path`` (None when it
    cannot be read): what must not have changed for a check to still stand."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [int(info.st_dev), int(info.st_ino), int(info.st_size), int(info.st_mtime_ns)]


def same_boot_record(record: Any, boot: str | None) -> bool:
    """Whether a manifest's record of a passing check (a dict with ``boot_id``) was made in
    this boot (``boot``, :func:`boot_id`; None: never)."""
    return boot is not None and isinstance(record, dict) and record.get("boot_id") == boot
