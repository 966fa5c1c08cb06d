"""Files and folders made durable: ``write_synced`` (large files without a backlog of dirty
pages), ``datasync`` (the one spelling of "fdatasync where the platform has it") and
``fsync_dir`` (the one rule for syncing a folder after a create, rename or unlink in it).

A file of hundreds of MB (a merged segment, its ``.hidx`` index) written whole and only then
fsynced reaches the disk at once: the fsync sends every dirty page, and the disk's queue holds
all of them when a request's log ``fdatasync`` arrives, so the request waits for most of the
file. That was a check's stall of about half a second during a merge of a 1 M window
(``python benchmarks/bench_write_stall.py``). Written in chunks, each made durable before
the next one is written, the queue holds at most one chunk, and a log sync waits behind that
much. The merge there took no longer; it runs beside the requests, on its own thread.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from typing import BinaryIO

__all__ = ["SYNC_BYTES", "datasync", "fsync_dir", "write_synced"]

#: bytes written between two syncs of a large file: at most this much of it is queued at the
#: disk ahead of a log sync. On a day this VM's disk wrote ~165 MB/s, the log's syncs beside
#: 4 MiB chunks took 6-20 ms, and 1 MiB kept the checks beside a merge out of a backlog
#: without a slower merge (``python benchmarks/bench_write_stall.py``; docs/store.md)
SYNC_BYTES = 1 << 20


def datasync(fd: int) -> None:
    """``fdatasync`` where available (a file's data and size made durable), else ``fsync``."""
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:  # pragma: no cover - macOS
        os.fsync(fd)


#: what a folder's fsync answers where the filesystem cannot sync a folder (some FUSE and
#: network filesystems): nothing more can be made durable there, so it is not an error
_CANNOT_SYNC_FOLDER = frozenset({errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP})


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync the folder ``path`` so that a create, rename or unlink inside it is durable.

    Raises :class:`OSError` when the sync fails (``EIO``: the folder's entries may not be on
    the disk; the caller names what it was writing). Returns without syncing where a folder
    cannot be synced at all: a filesystem that answers ``EINVAL`` or ``ENOTSUP``, a folder that
    may be written but not read (``EACCES``), Windows (a folder cannot be opened there).
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        if os.name == "nt" or exc.errno in (errno.EACCES, errno.EPERM):
            return
        raise
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _CANNOT_SYNC_FOLDER:
            raise
    finally:
        os.close(fd)


def write_synced(
    f: BinaryIO, parts: Iterable[bytes | bytearray | memoryview], *, chunk: int | None = None
) -> int:
    """Write ``parts`` (bytes-like, C-contiguous) to the binary file ``f`` from its position,
    syncing the data every ``chunk`` bytes (None: :data:`SYNC_BYTES`), then ``fsync`` it:
    durable on return, as after one write and one fsync. Returns the bytes written.

    >>> import tempfile
    >>> with tempfile.TemporaryFile() as f:
    ...     write_synced(f, [b"abc", memoryview(b"defgh")], chunk=4)
    ...     _ = f.seek(0)
    ...     f.read()
    8
    b'abcdefgh'
    """
    if chunk is None:
        chunk = SYNC_BYTES
    if chunk < 1:
        raise ValueError(f"chunk must be at least 1 byte, got {chunk}")
    fd = f.fileno()
    pending = total = 0
    for part in parts:
        mv = memoryview(part).cast("B")
        at, n = 0, len(mv)
        while at < n:
            take = min(n - at, chunk - pending)
            f.write(mv[at : at + take])
            at += take
            pending += take
            if pending >= chunk:
                f.flush()
                datasync(fd)
                pending = 0
        total += n
    f.flush()
    os.fsync(fd)
    return total
