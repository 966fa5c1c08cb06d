"""Data-directory layout: lock file, config file and manifest.

::

    DIR/
      LOCK                  flock()ed by the process that has the store open (holds its pid)
      config.json           fingerprinter / verifier / store settings, checked on every open
      MANIFEST.json         live segments, current log generation, next row id (atomic replace)
      wal-<gen>.log         the write-ahead log (one live generation)
      seg-<part>-<seq>.nds  immutable segments (``.hidx`` beside each: its HammingIndex)
      meta.sqlite3          document metadata (SQLite, WAL mode)

``MANIFEST.json`` and ``config.json`` carry a CRC32 of their canonical JSON body and are replaced
atomically (temp + fsync + rename + fsync of the directory).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import zlib
from pathlib import Path
from typing import Any

from .._durable import fsync_dir
from ..errors import CorruptFileError, IndexStateError, UnsupportedVersionError

__all__ = ["DataDir", "read_json_file", "write_json_file"]

MANIFEST_VERSION = 1


def _canonical(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def write_json_file(path: Path, body: dict[str, Any]) -> None:
    """Write ``{"body": ..., "crc32": ...}`` atomically."""
    data = json.dumps(
        {"body": body, "crc32": zlib.crc32(_canonical(body))}, indent=1, sort_keys=True
    )
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def read_json_file(path: Path) -> dict[str, Any]:
    """Read a file written by :func:`write_json_file`, checking its CRC."""
    try:
        outer = json.loads(path.read_text(encoding="utf-8"))
        body = outer["body"]
        crc = outer["crc32"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptFileError(f"{path}: not a valid neardup JSON file ({exc})") from exc
    if zlib.crc32(_canonical(body)) != crc:
        raise CorruptFileError(f"{path}: checksum mismatch; the file is damaged")
    return body


class DataDir:
    """Paths of one data directory and its exclusive lock."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.root = Path(path)
        self._lock_fd: int | None = None

    @property
    def config_path(self) -> Path:
        return self.root / "config.json"

    @property
    def manifest_path(self) -> Path:
        return self.root / "MANIFEST.json"

    @property
    def meta_path(self) -> Path:
        return self.root / "meta.sqlite3"

    def wal_path(self, generation: int) -> Path:
        return self.root / f"wal-{generation:08d}.log"

    def segment_path(self, partition: int, seq: int) -> Path:
        return self.root / f"seg-{partition}-{seq:08d}.nds"

    def lock(self) -> None:
        """Take the directory lock; :class:`IndexStateError` when another process holds it."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            try:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            finally:
                os.close(fd)
            raise IndexStateError(
                f"data directory {self.root} is already open (locked by pid {holder}); stop "
                "that process (a neardup serve, a store command, a Deduplicator) first, or use "
                "another data directory"
            ) from exc
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:  # e.g. a full disk: release the lock, the caller reports the error
            os.close(fd)
            raise
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def read_manifest(self) -> dict[str, Any] | None:
        if not self.manifest_path.exists():
            return None
        body = read_json_file(self.manifest_path)
        if body.get("version") != MANIFEST_VERSION:
            raise UnsupportedVersionError(
                f"{self.manifest_path}: manifest version {body.get('version')}, this build reads {MANIFEST_VERSION}"
            )
        return body

    def write_manifest(self, body: dict[str, Any]) -> None:
        write_json_file(self.manifest_path, {**body, "version": MANIFEST_VERSION})
