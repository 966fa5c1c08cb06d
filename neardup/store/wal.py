"""Write-ahead log: length + CRC framed records, group commit, fsync before acknowledging.

File layout (all integers little-endian)::

    header  (32 bytes)
      magic       8s   b"NDUPWAL\\x00"
      version     u32  1 (another version is refused: :class:`UnsupportedVersionError`)
      reserved    u32  0
      generation  u64  sequence number of this log file (matches the manifest)
      pad         u32  0
      header_crc  u32  crc32 of the 28 bytes above
    records, each
      length      u32  payload length in bytes
      crc         u32  crc32 of the payload
      payload     `length` bytes (see below)

Payloads are a compact binary encoding, never pickle:

* ``ADD`` (op 1): ``rowid i64, time f64, fp_hi u64, fp_lo u64, chash 16s, flags u8,
  id_len u32, id utf-8, text_len u32 (0xFFFFFFFF = no text), text utf-8,
  meta_len u32 (0xFFFFFFFF = none), metadata JSON utf-8``.
  64-bit fingerprints are stored in ``fp_hi`` with ``fp_lo = 0``.
* ``DELETE`` (op 2): ``rowid i64, id_len u32, id utf-8``.
* ``ADD_KEYS`` (op 3): an ``ADD`` payload followed by ``keys_len u32, keys`` (the row's
  MinHash band keys, then its MinHash sketch where the add had one, as :func:`log_keys`
  writes them; opaque to the framing), so a replay does not recompute MinHash from the text. A store with the MinHash channel logs every add this
  way; one without it logs plain ``ADD`` records.

The file is extended ahead of its records (``fallocate``, :data:`PREALLOCATE` bytes at a time)
and cut back to its last record when closed: an ``fdatasync`` after an append then has no new
file size to journal (a cheaper sync per group commit; the log's share of a write:
benchmarks/bench_store.py). Unwritten
preallocated space reads as zeros, and a zero length is never a valid frame, so zeros after the
last record are the log's clean end.

Recovery (:func:`read_wal`): records are read until the end of the file (or of its records:
zero padding follows a log whose writer did not close it). A bad record (short read,
impossible length or CRC mismatch) is a *torn tail* when no valid record follows it: the file is
truncated there (the writer died mid-append; that group was never acknowledged). When a valid
record does follow, the damage is in the middle of the log and :class:`CorruptFileError` names
the file and offset; ``repair=True`` truncates at the damage instead (losing what follows, which
is reported).
"""

from __future__ import annotations

import errno
import logging
import os
import re
import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from .._durable import datasync, fsync_dir
from ..errors import CorruptFileError, StorageError, UnsupportedVersionError
from ..fingerprint.minhash import NO_KEYS
from ..index.bands import columns_are_groups

__all__ = [
    "LOG_KEYS_FULL",
    "LOG_KEYS_H32",
    "LOG_KEYS_NONE",
    "OP_ADD",
    "OP_ADD_KEYS",
    "OP_DELETE",
    "AddRecord",
    "DeleteRecord",
    "WalReplay",
    "WalWriter",
    "decode_payload",
    "encode_add",
    "encode_delete",
    "frame",
    "frame_records",
    "keys_from_log",
    "log_keys",
    "read_wal",
    "storage_error",
]

log = logging.getLogger("neardup.store")

MAGIC = b"NDUPWAL\x00"
VERSION = 1
_HEADER = struct.Struct("<8sIIQI")  # magic, version, reserved, generation, pad (28 bytes)
HEADER_SIZE = _HEADER.size + 4
_FRAME = struct.Struct("<II")
_ADD = struct.Struct("<bqdQQ16sB")
_DEL = struct.Struct("<bq")
_U32 = struct.Struct("<I")
_NONE = 0xFFFFFFFF
_NONE_U32 = _U32.pack(_NONE)
#: a single record larger than this is treated as damage, not data
MAX_RECORD = 256 * 1024 * 1024

OP_ADD = 1
OP_DELETE = 2
OP_ADD_KEYS = 3

#: bytes the log file is extended by ahead of its records (see the module docstring)
PREALLOCATE = 8 * 1024 * 1024
_NONZERO = re.compile(rb"[^\x00]")
_ZERO_LENGTH = b"\x00" * 4  # a frame's length field when no frame starts there
_SKIM_OPS = (OP_ADD, OP_ADD_KEYS)


class AddRecord(NamedTuple):
    """An inserted document as logged (fingerprint as two 64-bit words, high first).

    A named tuple: immutable, and cheap to create (the writer makes one per added document).
    """

    rowid: int
    time: float
    fp_hi: int
    fp_lo: int
    chash: bytes
    flags: int
    id: str
    text: str | None
    metadata: str | None  # JSON text
    #: the row's band keys as logged (``ADD_KEYS``; :func:`log_keys`),
    #: None for a plain ``ADD``
    keys: bytes | None = None
    #: the row's stored summary (:meth:`neardup.store.meta.MetaDB.put_summaries`), applied
    #: with the row but not logged: a replayed row has none (it is derived data)
    summary: bytes | None = None


class DeleteRecord(NamedTuple):
    """A deleted document as logged."""

    rowid: int
    id: str


def _put_str(parts: list[bytes], s: str | None) -> None:
    if s is None:
        parts.append(_U32.pack(_NONE))
    else:
        b = s.encode("utf-8", "surrogatepass")
        parts.append(_U32.pack(len(b)))
        parts.append(b)


def encode_add(r: AddRecord) -> bytes:
    """Payload bytes of an ``ADD`` record (``ADD_KEYS`` when ``r.keys`` is set)."""
    ib = r.id.encode("utf-8", "surrogatepass")
    op = OP_ADD if r.keys is None else OP_ADD_KEYS
    head = _ADD.pack(op, r.rowid, r.time, r.fp_hi, r.fp_lo, r.chash, r.flags)
    if r.text is None:
        tl, tb = _NONE_U32, b""
    else:
        tb = r.text.encode("utf-8", "surrogatepass")
        tl = _U32.pack(len(tb))
    if r.metadata is None:
        ml, mb = _NONE_U32, b""
    else:
        mb = r.metadata.encode("utf-8", "surrogatepass")
        ml = _U32.pack(len(mb))
    if r.keys is None:
        return b"".join((head, _U32.pack(len(ib)), ib, tl, tb, ml, mb))
    return b"".join((head, _U32.pack(len(ib)), ib, tl, tb, ml, mb, _U32.pack(len(r.keys)), r.keys))


def frame_records(
    records: Iterable[AddRecord | DeleteRecord], keys: Sequence[bytes] | None = None
) -> bytes:
    """The framed records of one group commit, joined (``frame(encode_add(r))`` for each,
    with the per-record work inlined: the writer encodes every added document here).

    ``keys``: the band keys of each ``ADD`` record, in order (written as ``ADD_KEYS``
    records, taking the place of ``r.keys``)."""
    parts: list[bytes] = []
    app = parts.append
    pack_frame, crc, pack_add, u32 = _FRAME.pack, zlib.crc32, _ADD.pack, _U32.pack
    none = _NONE_U32
    ki = 0
    for r in records:
        if type(r) is AddRecord:
            ib = r.id.encode("utf-8", "surrogatepass")
            text, meta = r.text, r.metadata
            if text is None:
                tl, tb = none, b""
            else:
                tb = text.encode("utf-8", "surrogatepass")
                tl = u32(len(tb))
            if meta is None:
                ml, mb = none, b""
            else:
                mb = meta.encode("utf-8", "surrogatepass")
                ml = u32(len(mb))
            if keys is None:
                kb = r.keys
            else:
                if ki >= len(keys):
                    raise ValueError(f"{len(keys)} band-key entries for more ADD records")
                kb = keys[ki]
                ki += 1
            op = OP_ADD if kb is None else OP_ADD_KEYS
            fields = [pack_add(op, r.rowid, r.time, r.fp_hi, r.fp_lo, r.chash, r.flags)]
            fields += (u32(len(ib)), ib, tl, tb, ml, mb)
            if kb is not None:
                fields += (u32(len(kb)), kb)
            p = b"".join(fields)
        else:
            p = encode_delete(r)  # type: ignore[arg-type]  # not an AddRecord: a DeleteRecord
        app(pack_frame(len(p), crc(p)))
        app(p)
    if keys is not None and ki != len(keys):
        raise ValueError(f"{len(keys)} band-key entries for {ki} ADD records")
    return b"".join(parts)


def encode_delete(r: DeleteRecord) -> bytes:
    """Payload bytes of a ``DELETE`` record."""
    parts = [_DEL.pack(OP_DELETE, r.rowid)]
    _put_str(parts, r.id)
    return b"".join(parts)


def frame(payload: bytes) -> bytes:
    """``[len u32][crc32 u32][payload]``."""
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def _get_str(buf: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = _U32.unpack_from(buf, pos)
    pos += 4
    if n == _NONE:
        return None, pos
    if pos + n > len(buf):
        raise ValueError("string runs past the end of the record")
    return buf[pos : pos + n].decode("utf-8", "surrogatepass"), pos + n


def _keys_at(buf: bytes, pos: int, end: int) -> bytes:
    """The band keys of an ``ADD_KEYS`` payload: its last field (``keys_len u32, keys``) at
    ``pos``, which must end the payload exactly at ``end``."""
    (n,) = _U32.unpack_from(buf, pos)
    if n == _NONE or pos + 4 + n != end:
        raise ValueError("malformed ADD_KEYS record")
    return buf[pos + 4 : end]


def _skim_add(data: bytes, start: int, end: int) -> AddRecord:
    """The ``ADD`` / ``ADD_KEYS`` payload ``data[start:end]`` without its strings (see
    :func:`read_wal`'s ``skim_until``): the same checks of its lengths as
    :func:`decode_payload`, no UTF-8 decoding, no copy of the payload."""
    op, rowid, t, hi, lo, chash, flags = _ADD.unpack_from(data, start)
    u32 = _U32.unpack_from
    pos = start + _ADD.size
    for i in range(3):  # id, text, metadata
        (n,) = u32(data, pos)
        pos += 4
        if n == _NONE:
            if i == 0:
                raise ValueError("malformed ADD record")
            continue
        pos += n
        if pos > end:
            raise ValueError("string runs past the end of the record")
    keys = None
    if op == OP_ADD_KEYS:
        keys, pos = _keys_at(data, pos, end), end
    elif op != OP_ADD:
        raise ValueError(f"not an ADD record (op {op})")
    if pos != end:
        raise ValueError("malformed ADD record")
    return AddRecord(rowid, t, hi, lo, chash, flags, "", None, None, keys)


def decode_payload(buf: bytes) -> AddRecord | DeleteRecord:
    """Inverse of :func:`encode_add` / :func:`encode_delete`; ``ValueError`` on a malformed payload."""
    if not buf:
        raise ValueError("empty record")
    op = buf[0]
    if op in (OP_ADD, OP_ADD_KEYS):
        _, rowid, t, hi, lo, chash, flags = _ADD.unpack_from(buf, 0)
        pos = _ADD.size
        id_, pos = _get_str(buf, pos)
        text, pos = _get_str(buf, pos)
        meta, pos = _get_str(buf, pos)
        keys = None
        if op == OP_ADD_KEYS:
            keys, pos = _keys_at(buf, pos, len(buf)), len(buf)
        if id_ is None or pos != len(buf):
            raise ValueError("malformed ADD record")
        return AddRecord(rowid, t, hi, lo, chash, flags, id_, text, meta, keys)
    if op == OP_DELETE:
        _, rowid = _DEL.unpack_from(buf, 0)
        id_, pos = _get_str(buf, _DEL.size)
        if id_ is None or pos != len(buf):
            raise ValueError("malformed DELETE record")
        return DeleteRecord(rowid, id_)
    raise ValueError(f"unknown record op {op}")


def _header(generation: int) -> bytes:
    body = _HEADER.pack(MAGIC, VERSION, 0, generation, 0)
    return body + _U32.pack(zlib.crc32(body))


def _check_header(path: Path, data: bytes) -> int:
    """The generation in a log's header; raises on a bad header or another version."""
    if len(data) < HEADER_SIZE:
        raise CorruptFileError(
            f"{path}: write-ahead log header is truncated ({len(data)} of {HEADER_SIZE} bytes)"
        )
    magic, version, _r, generation, _p = _HEADER.unpack_from(data, 0)
    (crc,) = _U32.unpack_from(data, _HEADER.size)
    if magic != MAGIC:
        raise CorruptFileError(f"{path}: not a neardup write-ahead log (magic {magic!r})")
    if zlib.crc32(data[: _HEADER.size]) != crc:
        raise CorruptFileError(f"{path}: write-ahead log header checksum mismatch at offset 0")
    if version != VERSION:
        raise UnsupportedVersionError(
            f"{path}: write-ahead log version {version}, this build reads version {VERSION}; "
            "open it with the build that wrote it, or deduplicate into a new data directory"
        )
    return int(generation)


def _valid_at(data: bytes, pos: int) -> int | None:
    """End offset of a valid record starting at ``pos``, or None."""
    if pos + _FRAME.size > len(data):
        return None
    n, crc = _FRAME.unpack_from(data, pos)
    end = pos + _FRAME.size + n
    if n == 0 or n > MAX_RECORD or end > len(data):
        return None
    payload = data[pos + _FRAME.size : end]
    if zlib.crc32(payload) != crc:
        return None
    return end


def _record_at(data: bytes, pos: int) -> bool:
    """Whether a valid frame whose payload also decodes starts at ``pos``.

    Used to tell damage in the middle (a real record follows) from a torn tail: the bytes of a
    cut record can contain a short frame whose CRC happens to match (found by Hypothesis), but
    not one that also decodes as a well-formed ``ADD`` / ``DELETE`` payload.
    """
    end = _valid_at(data, pos)
    if end is None:
        return False
    try:
        decode_payload(data[pos + _FRAME.size : end])
    except (ValueError, struct.error, UnicodeDecodeError):
        return False
    return True


@dataclass
class WalReplay:
    """Result of reading a log: its records and what recovery did."""

    generation: int
    records: list[AddRecord | DeleteRecord]
    valid_bytes: int
    truncated_bytes: int  # torn tail removed (0 when the file ended cleanly)
    ends: list[int] = field(default_factory=list)  # end offset of each record in the file
    #: offset of damage that SQLite had already applied past (acknowledged records: the caller
    #: restores them from SQLite; the file is left as it is), or that ``repair`` cut at
    damaged_at: int | None = None


def read_wal(
    path: str | os.PathLike[str],
    *,
    truncate: bool = True,
    repair: bool = False,
    applied: int = 0,
    skim_until: int = 0,
) -> WalReplay:
    """Read every record of a log, truncating a torn tail.

    Parameters
    ----------
    path : path-like
        The log file.
    truncate : bool, default=True
        Cut a torn tail off the file on disk (otherwise only report it).
    repair : bool, default=False
        Also stop at damage in the *middle* of the log that ``applied`` does not cover (records
        after it are lost unless SQLite holds them; the loss is logged) instead of raising.
    applied : int, default=0
        Offset up to which SQLite has applied this log (its records were fsynced and
        acknowledged). Damage before it is not a torn tail: when nothing valid follows, reading
        stops there and ``damaged_at`` is set (the file is left untouched, for the caller to
        restore the rows from SQLite); when valid records follow at or before ``applied`` the
        damaged span is skipped.
    skim_until : int, default=0
        ``ADD`` / ``ADD_KEYS`` records that end at or before this offset are *skimmed*: their
        lengths are checked but their id, text and metadata are not decoded (``id`` is ``""``,
        ``text`` and ``metadata`` None). A store's replay passes the offset SQLite applied up
        to: it needs only the row, time, fingerprint and band keys of those records (decoding
        every logged text in Python was the binding part of a restart).

    Raises
    ------
    CorruptFileError
        Bad header, or a damaged record followed by valid ones past ``applied`` (and ``repair``
        is False).
    """
    p = Path(path)
    data = p.read_bytes()
    generation = _check_header(p, data)
    records: list[AddRecord | DeleteRecord] = []
    ends: list[int] = []
    damaged_at: int | None = None
    pos = HEADER_SIZE
    while pos < len(data):
        end = _valid_at(data, pos)
        record: AddRecord | DeleteRecord | None = None
        if end is not None:
            try:
                if end <= skim_until and data[pos + _FRAME.size] in _SKIM_OPS:
                    record = _skim_add(data, pos + _FRAME.size, end)
                else:
                    record = decode_payload(data[pos + _FRAME.size : end])
            except (ValueError, struct.error, UnicodeDecodeError):
                record = None
        if record is None:
            following = _next_record(data, pos + 1, _content_end(data, pos))
            if following is not None and following <= applied:
                # SQLite applied past the damaged span: its records were acknowledged, and
                # SQLite still holds them; read on after it
                log.error(
                    "%s: log records at offsets %d-%d are damaged; SQLite had applied them "
                    "(acknowledged writes): their rows are restored from SQLite",
                    p,
                    pos,
                    following,
                )
                if damaged_at is None:
                    damaged_at = pos
                pos = following
                continue
            if following is not None and not repair:
                raise CorruptFileError(
                    f"{p}: write-ahead log record at offset {pos} is damaged and valid records "
                    f"follow at offset {following}; acknowledged writes may be affected. Restore "
                    "the file from a backup, or open with repair=True to cut the log at "
                    f"offset {pos} (records after it are lost unless SQLite holds them)"
                )
            if following is not None:
                log.error(
                    "%s: repair: log damaged at offset %d; the %d bytes after it are dropped "
                    "(rows SQLite holds are kept)",
                    p,
                    pos,
                    len(data) - pos,
                )
                damaged_at = pos
            elif pos < applied:
                log.error(
                    "%s: the last log records (from offset %d) are damaged, but SQLite had "
                    "applied the log up to offset %d: they were acknowledged, and their rows are "
                    "restored from SQLite (not a torn tail)",
                    p,
                    pos,
                    applied,
                )
                damaged_at = pos
            break
        assert end is not None  # a decoded record has a valid frame
        records.append(record)
        ends.append(end)
        pos = end
    if damaged_at is None and pos < applied:
        log.error(
            "%s: the log ends at offset %d but SQLite had applied it up to offset %d: the rows "
            "of the missing records are restored from SQLite",
            p,
            pos,
            applied,
        )
        damaged_at = pos
    if damaged_at is not None:  # the caller restores from SQLite and retires the file
        return WalReplay(generation, records, pos, 0, ends, damaged_at)
    torn = _content_end(data, pos) - pos  # zeros after the last record are padding
    if torn:
        log.warning(
            "%s: torn tail of %d bytes at offset %d truncated: an append that did not complete "
            "(SQLite had applied the log up to offset %d; nothing it applied is lost)",
            p,
            torn,
            pos,
            applied,
        )
    if truncate and len(data) > pos:  # the torn bytes and the padding
        with open(p, "r+b") as f:
            f.truncate(pos)
            f.flush()
            os.fsync(f.fileno())
    return WalReplay(generation, records, pos, torn, ends)


def _content_end(data: bytes, pos: int) -> int:
    """Offset just past the last non-zero byte at or after ``pos`` (``pos`` when only zeros
    follow): where the preallocated padding starts."""
    end = len(data)
    while end > pos:
        start = max(pos, end - 65536)
        kept = len(data[start:end].rstrip(b"\x00"))
        if kept:
            return start + kept
        end = start
    return pos


def _next_record(data: bytes, start: int, end: int) -> int | None:
    """Offset of the first valid, decodable record starting in ``[start, end)``, or None.
    Runs of zeros are skipped at C speed: a frame's length is at least 1, so no frame starts
    at four zero bytes."""
    q = start
    while q < end:
        if data[q : q + 4] == _ZERO_LENGTH:
            m = _NONZERO.search(data, q, end)
            if m is None:
                return None
            q = max(q + 1, m.start() - 3)
            continue
        if _record_at(data, q):
            return q
        q += 1
    return None


def storage_error(exc: OSError, path: Path, what: str) -> StorageError:
    """The :class:`StorageError` for a failed file operation, naming the file and the cause."""
    return _storage_error(exc, path, what)


def _storage_error(exc: OSError, path: Path, what: str) -> StorageError:
    reason = {
        errno.ENOSPC: "the disk is full",
        errno.EROFS: "the file system is read-only",
        errno.EACCES: "permission denied",
        errno.EDQUOT: "the disk quota is exceeded",
    }.get(exc.errno or 0, exc.strerror or str(exc))
    return StorageError(
        f"cannot {what} {path}: {reason}; nothing from this write was acknowledged. "
        "Free space or fix permissions, then retry"
    )


class WalWriter:
    """Appends framed records to one log file; :meth:`commit` writes a group and fsyncs once.

    A failed write or fsync truncates the file back to the last acknowledged offset and raises
    :class:`StorageError`; the writer stays usable. The file is preallocated ahead of the
    records (:data:`PREALLOCATE`) and cut back to them by :meth:`close`. Open an existing log
    only after :func:`read_wal` has truncated it (its records must end the file).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        generation: int,
        *,
        create: bool,
    ) -> None:
        self.path = Path(path)
        self.generation = generation
        if create:
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                try:
                    os.write(fd, _header(generation))
                    os.fsync(fd)
                finally:
                    os.close(fd)
                fsync_dir(self.path.parent)
            except OSError as exc:
                raise _storage_error(exc, self.path, "create write-ahead log") from exc
        else:
            with open(self.path, "rb") as f:
                _check_header(self.path, f.read(HEADER_SIZE))
        self._fd = os.open(self.path, os.O_WRONLY)
        self.size = os.lseek(self._fd, 0, os.SEEK_END)
        #: bytes the file holds (records + preallocated zeros); None: no preallocation here
        self._allocated: int | None = self.size

    def commit(self, payloads: list[bytes]) -> int:
        """Append framed payloads and fsync; on return they are durable. Returns the file size
        after them (the end offset of the last record)."""
        if not payloads:
            return self.size
        pack, crc = _FRAME.pack, zlib.crc32
        parts: list[bytes] = []
        for p in payloads:
            parts.append(pack(len(p), crc(p)))
            parts.append(p)
        return self.append(b"".join(parts))

    def append(self, data: bytes) -> int:
        """Append already framed records (:func:`frame_records`) and fsync once; returns the
        end offset. A failure truncates back and raises :class:`StorageError`."""
        return self._append(data, sync=True)

    def write(self, data: bytes) -> int:
        """Append framed records *without* fsync (pipelined group commit: the caller
        acknowledges them only after a later :meth:`sync` covers their end offset). A failed
        write truncates back to the end of the previous write and raises
        :class:`StorageError`."""
        return self._append(data, sync=False)

    def sync(self) -> int:
        """fsync what has been written; returns the end offset now durable (callable from
        another thread than :meth:`write`'s: bytes written meanwhile may or may not be
        covered, and are not claimed). Raises :class:`StorageError`."""
        end = self.size
        try:
            datasync(self._fd)
        except OSError as exc:
            raise _storage_error(exc, self.path, "sync") from exc
        return end

    def rollback(self, end: int) -> None:
        """Cut the log back to ``end`` (after a failed :meth:`sync`: nothing past the last
        durable offset may stay, as it was never acknowledged)."""
        try:
            os.ftruncate(self._fd, end)
            os.lseek(self._fd, end, os.SEEK_SET)
        except OSError as exc:
            raise _storage_error(exc, self.path, "truncate") from exc
        self.size = end
        if self._allocated is not None:
            self._allocated = end

    def _preallocate(self, need: int) -> None:
        """Extend the file to at least ``need`` bytes plus :data:`PREALLOCATE` (best effort:
        without it appends still work, their fsyncs just journal the new size)."""
        if self._allocated is None or need <= self._allocated:
            return
        target = need + PREALLOCATE
        try:
            os.posix_fallocate(self._fd, self._allocated, target - self._allocated)
        except (OSError, AttributeError) as exc:
            if getattr(exc, "errno", None) != errno.ENOSPC:
                # not supported here (some file systems, non-Linux): plain appends from now on
                self._allocated = None
            return
        self._allocated = target

    def _append(self, data: bytes, *, sync: bool) -> int:
        if not data:
            return self.size
        start = self.size
        self._preallocate(start + len(data))
        try:
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
            if sync:
                datasync(self._fd)
        except OSError as exc:
            try:
                os.ftruncate(self._fd, start)
                os.lseek(self._fd, start, os.SEEK_SET)
                if self._allocated is not None:
                    self._allocated = start
            except OSError:  # pragma: no cover - best effort; replay treats a partial group as torn
                log.exception("%s: could not truncate after a failed write", self.path)
            raise _storage_error(exc, self.path, "append to") from exc
        self.size = start + len(data)
        return self.size

    def close(self) -> None:
        """Cut the preallocated space off (the file ends at its last record) and close."""
        if self._fd >= 0:
            if self._allocated is not None and self._allocated > self.size:
                try:
                    os.ftruncate(self._fd, self.size)
                except OSError:  # harmless: replay reads the zeros as the log's end
                    log.warning("%s: could not cut the preallocated space", self.path)
            os.close(self._fd)
            self._fd = -1


def iter_frames(data: bytes) -> Iterator[tuple[int, int]]:
    """(offset, end) of each valid framed record after the header; stops at the first bad one."""
    pos = HEADER_SIZE
    while pos < len(data):
        end = _valid_at(data, pos)
        if end is None:
            return
        yield pos, end
        pos = end


# ---------------------------------------------------------------------------------------------
# the band keys an add record carries: their codec (the keys are opaque bytes to the records
# above; the store writes them with log_keys and replays them with keys_from_log)

_LOW32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)

#: how a row's band keys are written in an add record (``OP_ADD_KEYS``, :func:`log_keys`): no keys (the row had
#: no tokens), 32 bits per band (group = band), the whole 64-bit compact key per band
LOG_KEYS_NONE, LOG_KEYS_H32, LOG_KEYS_FULL = 0, 1, 2


def log_keys(
    ent: npt.NDArray[np.uint64], sketches: npt.NDArray[np.uint8] | None = None
) -> list[bytes]:
    """Each row's compact keys ``ent`` (n, bands) as the bytes its log record carries, so the
    log's replay need not recompute MinHash from the text (:func:`keys_from_log` reads them):
    a kind byte, then the low 32 bits of each band's key (:data:`LOG_KEYS_H32`, when
    :func:`columns_are_groups`) or the whole keys (:data:`LOG_KEYS_FULL`), little-endian; a row
    without keys is :data:`LOG_KEYS_NONE` and zeros of the same length. ``sketches`` (n,
    width): each row's sketch follows its keys (:func:`sketches_from_log` reads them)."""
    ent = np.asarray(ent, np.uint64)
    n, nb = ent.shape
    none = ent[:, 0] == NO_KEYS if nb else np.ones(n, bool)
    if columns_are_groups(ent):
        kind, body = LOG_KEYS_H32, (ent & _LOW32).astype("<u4")
    else:
        kind, body = LOG_KEYS_FULL, ent.astype("<u8")
    body[none] = 0
    keys_w = 1 + body.itemsize * nb
    width = keys_w + (0 if sketches is None else sketches.shape[1])
    buf = np.empty((n, width), np.uint8)
    buf[:, 0] = np.where(none, LOG_KEYS_NONE, kind)
    buf[:, 1:keys_w] = body.view(np.uint8).reshape(n, keys_w - 1)
    if sketches is not None:
        if len(sketches) != n:
            raise ValueError(f"{len(sketches)} sketches for {n} rows of band keys")
        buf[:, keys_w:] = sketches
    raw = buf.tobytes()
    return [raw[i : i + width] for i in range(0, n * width, width)]


def keys_from_log(
    blobs: Sequence[bytes], bands: int, sketch_width: int = 0
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_], npt.NDArray[np.uint8]]:
    """Inverse of :func:`log_keys`: (the compact keys (n, ``bands``), whether each row's
    sketch was logged, the sketches (n, ``sketch_width``; zeros where not)) of logged rows.
    ``ValueError`` when a blob does not hold ``bands`` keys of a known kind (and, with
    ``sketch_width``, maybe a sketch of that many bytes)."""
    n = len(blobs)
    out = np.empty((n, bands), np.uint64)
    present = np.zeros(n, np.bool_)
    sk = np.zeros((n, sketch_width), np.uint8)
    if not n:
        return out, present, sk
    h32, full = 1 + 4 * bands, 1 + 8 * bands
    lens = np.fromiter(map(len, blobs), np.int64, n)
    cols = np.arange(bands, dtype=np.uint64) << _SHIFT32
    kinds_of = [(h32, LOG_KEYS_H32, "<u4"), (full, LOG_KEYS_FULL, "<u8")]
    widths = [(w, w, kind, dtype) for w, kind, dtype in kinds_of]
    if sketch_width:
        widths += [(w + sketch_width, w, kind, dtype) for w, kind, dtype in kinds_of]
    for width, keys_w, kind, dtype in widths:
        at = np.flatnonzero(lens == width)
        if not at.size:
            continue
        raw = b"".join(blobs[i] for i in at.tolist()) if at.size < n else b"".join(blobs)
        buf = np.frombuffer(raw, np.uint8).reshape(at.size, width)
        kinds = buf[:, 0]
        if not np.isin(kinds, (LOG_KEYS_NONE, kind)).all():
            raise ValueError(f"logged band keys of an unknown kind {sorted(set(kinds.tolist()))}")
        vals = np.ascontiguousarray(buf[:, 1:keys_w]).view(dtype).astype(np.uint64)
        if kind == LOG_KEYS_H32:
            vals |= cols
        vals[kinds == LOG_KEYS_NONE] = NO_KEYS
        out[at] = vals
        if width > keys_w:
            present[at] = True
            sk[at] = buf[:, keys_w:]
    if not np.isin(lens, [w for w, *_ in widths]).all():
        raise ValueError(f"logged band keys do not hold {bands} bands")
    return out, present, sk
