"""Tombstones: which document ids a cluster deleted, at which version, kept past the window.

A cluster node (:mod:`neardup.service.replication`) records every delete the cluster sends it
here before it removes the document, so that an older copy of the document (a hint replayed
late, a rebalance copy from a node that missed the delete) is refused instead of coming back,
and so that a node that was away can pull what it missed from its peers (anti-entropy, paged
by this log's local sequence numbers). One file per namespace, ``<namespace dir>/
tombstones.log``, beside the store's own files (which the store leaves alone).

The store's write-ahead log records deletes by row id and forgets them once the row is
compacted away; a tombstone is by id, carries the cluster's version, and must outlive the
document by the retention window, so it has this small log of its own.

File layout (all integers little-endian)::

    header  (40 bytes)
      magic        8s   b"NDTOMBS\\x00"
      version      u32  1
      flags        u32  0
      incarnation  u64  random, new for each new file: peers' cursors name it
      first_seq    u64  the sequence number the file's first record may take
      pad          u32  0
      header_crc   u32  crc32 of the 36 bytes above
    records, each
      length       u32  payload length in bytes
      crc          u32  crc32 of the payload
      payload:
        TOMB   (kind 1): kind u8, seq u64, version i64, recorded f64, id_len u32, id utf-8
        CURSOR (kind 2): kind u8, incarnation u64, seq u64, name_len u32, peer name utf-8

A bad record with nothing valid after it is a torn tail (the process died mid-append; never
acknowledged) and is cut off; damage followed by valid records is :class:`CorruptFileError`
naming the file and offset. :meth:`TombstoneLog.expire` rewrites the file without tombstones
recorded before a cutoff (temp file, fsync, rename), keeping the sequence numbers and cursors.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import secrets
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO, NamedTuple

from .._durable import fsync_dir
from ..errors import CorruptFileError, UnsupportedVersionError
from .wal import storage_error

__all__ = ["TOMBSTONES_FILE", "Tombstone", "TombstoneLog"]

log = logging.getLogger("neardup.store")

TOMBSTONES_FILE = "tombstones.log"
MAGIC = b"NDTOMBS\x00"
VERSION = 1
_HEADER = struct.Struct("<8sIIQQI")  # 36 bytes, then the crc
HEADER_SIZE = _HEADER.size + 4
_FRAME = struct.Struct("<II")
_TOMB = struct.Struct("<BQqdI")
_CURSOR = struct.Struct("<BQQI")
_KIND_TOMB = 1
_KIND_CURSOR = 2
#: a record longer than this is damage, not data (ids are at most a few KiB)
MAX_RECORD = 1 << 20


class Tombstone(NamedTuple):
    """A deleted id: the cluster's ``version`` of the delete, when it was recorded here (unix
    seconds) and its sequence number in this node's log."""

    id: str
    version: int
    recorded: float
    seq: int


def _encode_tomb(t: Tombstone) -> bytes:
    b = t.id.encode("utf-8", "surrogatepass")
    payload = _TOMB.pack(_KIND_TOMB, t.seq, t.version, t.recorded, len(b)) + b
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def _encode_cursor(peer: str, incarnation: int, seq: int) -> bytes:
    b = peer.encode("utf-8", "surrogatepass")
    payload = _CURSOR.pack(_KIND_CURSOR, incarnation, seq, len(b)) + b
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def _header(incarnation: int, first_seq: int) -> bytes:
    head = _HEADER.pack(MAGIC, VERSION, 0, incarnation, first_seq, 0)
    return head + struct.pack("<I", zlib.crc32(head))


class TombstoneLog:
    """The tombstones of one namespace on one node (thread-safe).

    Parameters
    ----------
    path : str or Path or None
        The log file (created when missing); None keeps the tombstones in memory only (a
        store without a data directory).
    clock : callable, default=time.time
        Unix seconds, for ``recorded``.
    sync : bool, default=True
        fsync each append before it returns (tests may turn it off).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        *,
        clock: Callable[[], float] = time.time,
        sync: bool = True,
    ) -> None:
        self.path = None if path is None else Path(path)
        self.clock = clock
        self.sync = sync
        self._lock = threading.Lock()
        self._by_id: dict[str, Tombstone] = {}
        self._seqs: list[int] = []  # the live tombstones' sequence numbers, ascending
        self._order: list[str] = []  # their ids, in the same order
        self._cursors: dict[str, tuple[int, int]] = {}
        self.max_version = 0
        self.appended = 0  # records appended since the file was (re)written
        self._f: BinaryIO | None = None
        if self.path is not None and self.path.exists() and self.path.stat().st_size:
            self.incarnation, self.next_seq = self._load()
        else:
            self.incarnation = secrets.randbits(63) or 1
            self.next_seq = 1
            self._rewrite()
        if self.path is not None:
            self._f = open(self.path, "ab")  # noqa: SIM115 - closed in close()

    # -- reading the file ----------------------------------------------------------------------
    def _load(self) -> tuple[int, int]:
        assert self.path is not None
        data = self.path.read_bytes()
        if len(data) < HEADER_SIZE:
            raise CorruptFileError(f"{self.path}: shorter than its header; the file is damaged")
        head = data[: _HEADER.size]
        (crc,) = struct.unpack_from("<I", data, _HEADER.size)
        magic, version, _flags, incarnation, first_seq, _pad = _HEADER.unpack(head)
        if magic != MAGIC:
            raise CorruptFileError(f"{self.path}: not a neardup tombstone log (bad magic)")
        if zlib.crc32(head) != crc:
            raise CorruptFileError(f"{self.path}: header checksum mismatch; the file is damaged")
        if version != VERSION:
            raise UnsupportedVersionError(
                f"{self.path}: tombstone log version {version}; this build reads {VERSION}"
            )
        pos = HEADER_SIZE
        self.next_seq = first_seq
        end = len(data)
        while pos < end:
            bad = None
            if end - pos < _FRAME.size:
                bad = "a short frame"
            else:
                length, crc = _FRAME.unpack_from(data, pos)
                body = data[pos + _FRAME.size : pos + _FRAME.size + length]
                if not 0 < length <= MAX_RECORD or len(body) != length:
                    bad = "an impossible length"
                elif zlib.crc32(body) != crc:
                    bad = "a checksum mismatch"
            if bad is not None:
                if self._valid_after(data, pos + 1):
                    raise CorruptFileError(
                        f"{self.path}: {bad} at offset {pos} with valid records after it; "
                        "the file is damaged (move it away to rebuild it from the peers)"
                    )
                log.warning("%s: cutting a torn tail at offset %d (%s)", self.path, pos, bad)
                with open(self.path, "r+b") as f:
                    f.truncate(pos)
                    f.flush()
                    os.fsync(f.fileno())
                break
            self._apply(body)
            pos += _FRAME.size + length
        return incarnation, self.next_seq

    @staticmethod
    def _valid_after(data: bytes, start: int) -> bool:
        """Whether a valid frame starts anywhere at or after ``start`` (damage vs torn tail)."""
        end = len(data)
        for p in range(start, end - _FRAME.size):
            length, crc = _FRAME.unpack_from(data, p)
            if 0 < length <= MAX_RECORD and p + _FRAME.size + length <= end:
                body = data[p + _FRAME.size : p + _FRAME.size + length]
                if zlib.crc32(body) == crc and body[:1] in (b"\x01", b"\x02"):
                    return True
        return False

    def _apply(self, body: bytes) -> None:
        kind = body[0]
        if kind == _KIND_TOMB:
            _, seq, version, recorded, n = _TOMB.unpack_from(body)
            doc_id = body[_TOMB.size : _TOMB.size + n].decode("utf-8", "surrogatepass")
            self._put(Tombstone(doc_id, version, recorded, seq))
            self.next_seq = max(self.next_seq, seq + 1)
        elif kind == _KIND_CURSOR:
            _, inc, seq, n = _CURSOR.unpack_from(body)
            name = body[_CURSOR.size : _CURSOR.size + n].decode("utf-8", "surrogatepass")
            self._cursors[name] = (inc, seq)
        else:
            raise CorruptFileError(f"{self.path}: unknown record kind {kind}")

    def _put(self, t: Tombstone) -> None:
        old = self._by_id.get(t.id)
        if old is not None and old.version > t.version:
            return  # never replace a newer tombstone
        if old is not None:
            k = bisect.bisect_left(self._seqs, old.seq)
            if k < len(self._seqs) and self._seqs[k] == old.seq:
                del self._seqs[k]
                del self._order[k]
        self._by_id[t.id] = t
        if not self._seqs or t.seq > self._seqs[-1]:
            self._seqs.append(t.seq)
            self._order.append(t.id)
        else:
            k = bisect.bisect_left(self._seqs, t.seq)
            self._seqs.insert(k, t.seq)
            self._order.insert(k, t.id)
        self.max_version = max(self.max_version, t.version)

    # -- writing ---------------------------------------------------------------------------------
    def _append(self, data: bytes) -> None:
        self.appended += 1
        if self._f is None:
            return
        start = self._f.tell()
        try:
            self._f.write(data)
            self._f.flush()
            if self.sync:
                os.fsync(self._f.fileno())
        except OSError as exc:
            # cut a partial record off, so that later appends do not follow damage
            with contextlib.suppress(OSError):
                self._f.truncate(start)
            raise storage_error(exc, self.path, "append to") from exc  # type: ignore[arg-type]

    def _rewrite(self) -> None:
        """Write the live tombstones and cursors to a new file and swap it in."""
        self.appended = 0
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        parts = [_header(self.incarnation, self.next_seq if not self._seqs else self._seqs[0])]
        parts += [_encode_tomb(self._by_id[i]) for i in self._order]
        parts += [_encode_cursor(p, inc, s) for p, (inc, s) in sorted(self._cursors.items())]
        try:
            with open(tmp, "wb") as f:
                f.write(b"".join(parts))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            fsync_dir(self.path.parent)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise storage_error(exc, self.path, "write") from exc

    def record(self, items: Iterable[tuple[str, int]]) -> list[Tombstone]:
        """Record ``(id, version)`` tombstones (one append and fsync for all); an id whose
        tombstone is already at least as new is left as it is. Returns the new tombstones."""
        now = self.clock()
        newest: dict[str, int] = {}
        for doc_id, version in items:
            if int(version) > newest.get(doc_id, -1):
                newest[doc_id] = int(version)
        with self._lock:
            new: list[Tombstone] = []
            for doc_id, version in newest.items():
                old = self._by_id.get(doc_id)
                if old is not None and old.version >= version:
                    continue
                t = Tombstone(doc_id, version, now, self.next_seq)
                self.next_seq += 1
                new.append(t)
            if new:
                self._append(b"".join(_encode_tomb(t) for t in new))
                for t in new:
                    self._put(t)
            return new

    def set_cursor(self, peer: str, incarnation: int, seq: int) -> None:
        """Remember that the tombstones of ``peer`` (log ``incarnation``) up to ``seq`` are in."""
        with self._lock:
            if self._cursors.get(peer) == (incarnation, seq):
                return
            self._append(_encode_cursor(peer, incarnation, seq))
            self._cursors[peer] = (incarnation, seq)

    def expire(self, cutoff: float) -> int:
        """Forget the tombstones recorded before ``cutoff`` (rewrites the file); returns how
        many. Call with ``now - retention - margin``: a document deleted that long ago is past
        the window on every node."""
        with self._lock:
            old = [t for t in self._by_id.values() if t.recorded < cutoff]
            if not old and self.appended < 4 * max(1024, len(self._by_id)):
                return 0
            for t in old:
                del self._by_id[t.id]
            if old:
                keep = sorted(self._by_id.values(), key=lambda t: t.seq)
                self._seqs = [t.seq for t in keep]
                self._order = [t.id for t in keep]
            if self._f is not None:
                self._f.close()
            try:
                self._rewrite()
            finally:
                if self.path is not None:
                    self._f = open(self.path, "ab")  # noqa: SIM115
            return len(old)

    # -- reading ---------------------------------------------------------------------------------
    def get(self, doc_id: str) -> Tombstone | None:
        return self._by_id.get(doc_id)

    def versions(self, ids: Iterable[str]) -> dict[str, int]:
        """``id -> tombstone version`` of those of ``ids`` that have one."""
        by_id = self._by_id
        return {i: t.version for i in ids if (t := by_id.get(i)) is not None}

    def since(self, after: int, limit: int) -> tuple[list[Tombstone], int | None]:
        """The tombstones with a sequence number above ``after``, in sequence order, at most
        ``limit``; and the ``after`` of the next page (None at the end)."""
        with self._lock:
            k = bisect.bisect_right(self._seqs, after)
            ids = self._order[k : k + limit]
            out = [self._by_id[i] for i in ids]
            more = k + limit < len(self._seqs)
        return out, (out[-1].seq if more and out else None)

    def cursor(self, peer: str) -> tuple[int, int]:
        """``(incarnation, seq)`` pulled from ``peer`` so far; ``(0, 0)`` when never."""
        return self._cursors.get(peer, (0, 0))

    def __len__(self) -> int:
        return len(self._by_id)

    def close(self) -> None:
        with self._lock:
            if self._f is not None and not self._f.closed:
                self._f.close()
