"""The on-disk format of a :class:`~neardup.index.HammingIndex` (never pickle).

Layout, all integers little-endian::

    offset 0   magic      8 bytes  b"NDHAMIDX"
    8          version    u32      1
    12         flags      u32      0
    16         hdr_len    u64      length of the JSON header
    24         hdr_hash   u64      xxh3-64 of the JSON header bytes
    32         header     JSON     plan, state, and for every section: name, dtype ("<u8", ...),
                                   shape, offset, nbytes, xxh3-64
    ...        sections   raw little-endian arrays, each starting at a multiple of 64 bytes
    end - 16   trailer    8 bytes  b"NDHAMEND" + u64 total file length

A compressed segment (:mod:`neardup.index.compressed`; its header entry has ``"compressed":
true``, the ``"codec"``, ``"id_base"`` and ``"id_bits"``) stores, instead of keys/rows/dirs, its
ids as ``ids.packed`` (u8 words: offsets from ``id_base``, ``id_bits`` each) and its tables in
the codec's arrays: for ``"ef"`` (with ``"h"`` and ``"dbits"`` in the header) ``ef.hi`` /
``ef.lo`` (u8 (T, words): unary high parts, packed low bits), ``ef.dirs`` (u4 (T, 2**dbits +
1)), the heavy buckets' ``ef.heavy`` (i8 (H, 5)), ``ef.sub`` and ``ef.hrows`` (u4), and
``ef.sums`` (u8 (T + 1,): xxh3-64 per table and of the heavy arrays); for ``"blocks"`` (with
``"block_bytes"``)
``c.lens`` (u1 (T, 65) Huffman code lengths), ``c.bkeys`` (u8 block keys), ``c.bstart`` (u4
block positions), ``c.crc`` (u4 CRC-32 per block), ``c.words`` (u8 payload), ``c.boff`` /
``c.woff`` (i8 per-table offsets). A section checksum mismatch there is narrowed to the table
(and for blocks the block) whose own checksum fails. This build reads version 1 only.

Readers reject a file whose magic, version, header hash, trailer, length or any section hash
does not match, naming the file and what is wrong (:class:`~neardup.errors.FormatError`,
:class:`~neardup.errors.CorruptFileError`, :class:`~neardup.errors.UnsupportedVersionError`).
The tables are stored already sorted, so loading does no sorting: with ``mmap=True`` the arrays
are views of the mapped file (read-only), and opening costs one pass of xxh3 (GB/s) when
``verify=True``. Writes go to a temporary file that is fsynced and renamed over ``path``.
"""

from __future__ import annotations

import json
import mmap as _mmap
import os
import struct
import sys
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

import numpy as np
import xxhash

from .._arrays import advise
from .._durable import fsync_dir, write_synced
from ..errors import (
    ConfigError,
    CorruptFileError,
    FormatError,
    InputError,
    NotFoundError,
    StorageError,
    UnsupportedVersionError,
)
from .codec_blocks import BlockTables
from .codec_ef import EFTables
from .compressed import CompressedSegment, PackedIds, check_codec
from .plan import Plan
from .snapshot import IndexSettings, IndexSnapshot, SealedSegment
from .tables import PlanArrays, TableSegment, plan_arrays

__all__ = ["FORMAT_VERSION", "MAGIC", "load_index", "read_index", "save_index", "write_index"]

MAGIC = b"NDHAMIDX"
TRAILER = b"NDHAMEND"
FORMAT_VERSION = 1  # the version this build writes
READ_VERSIONS = (1,)
_PRE = struct.Struct("<8sIIQQ")  # magic, version, flags, hdr_len, hdr_hash
_TRL = struct.Struct("<8sQ")
_ALIGN = 64
_DTYPES = {"u8": np.uint64, "i8": np.int64, "u4": np.uint32, "b1": np.bool_, "u1": np.uint8}
#: a compressed segment's section prefix per codec (``s<i>.<prefix>.<field>``)
_PREFIX = {"ef": "ef", "blocks": "c"}


def _le(a: np.ndarray) -> memoryview:
    a = np.ascontiguousarray(a)
    if sys.byteorder != "little" and a.dtype.itemsize > 1:
        a = a.byteswap()
    return a.reshape(-1).data.cast("B") if a.size else memoryview(b"")


def _dtype_code(a: np.ndarray) -> str:
    for code, dt in _DTYPES.items():
        if a.dtype == dt:
            return code
    raise FormatError(f"cannot store dtype {a.dtype}")


class _Persistent(Protocol):
    """What :func:`save_index` / :func:`load_index` need of an index class
    (:class:`~neardup.index.HammingIndex`), without importing it."""

    def snapshot(self) -> IndexSnapshot: ...

    @classmethod
    def from_snapshot(cls, snapshot: IndexSnapshot) -> Self: ...


_I = TypeVar("_I", bound=_Persistent)


def save_index(index: _Persistent, path: Path) -> None:
    """Write ``index`` (a :class:`~neardup.index.HammingIndex`) to ``path`` atomically."""
    write_index(index.snapshot(), path)


def load_index(cls: type[_I], path: Path, *, mmap: bool, verify: bool) -> _I:
    """Read an index of class ``cls`` written by :func:`save_index`."""
    return cls.from_snapshot(read_index(path, mmap=mmap, verify=verify))


def write_index(snap: IndexSnapshot, path: Path) -> None:
    """Write the index ``snap`` shows to ``path`` atomically. See the module docstring for
    the layout."""
    sections: list[tuple[str, np.ndarray]] = []
    seg_meta = []
    for i, s in enumerate(snap.segments):
        if isinstance(s, CompressedSegment):
            pk = s.packed
            cmeta: dict[str, Any] = {
                "n": s.n, "compressed": True, "codec": s.codec, "words": s.words,
                "id_base": pk.base, "id_bits": pk.bits, **s.tables.meta(),
            }  # fmt: skip
            seg_meta.append(cmeta)
            sections.append((f"s{i}.ids.packed", pk.words))
            for name in type(s.tables).FIELDS:
                sections.append((f"s{i}.{_PREFIX[s.codec]}.{name}", getattr(s.tables, name)))
            if s.fps_raw is not None:
                sections.append((f"s{i}.fps", s.fps_raw))
            if s.rows is not None:
                sections.append((f"s{i}.rows", s.rows))
            if s.alive is not None and s.n_dead:
                sections.append((f"s{i}.alive", s.alive))
            continue
        shared = s.keys is not None and np.shares_memory(s.fps, s.keys)
        meta: dict[str, Any] = {"n": s.n, "dbits": s.dbits, "fps_is_key0": bool(shared)}
        if not shared:
            sections.append((f"s{i}.fps", s.fps))
        sections.append((f"s{i}.ids", s.ids))
        if s.keys is not None:
            sections.append((f"s{i}.keys", s.keys))
            sections.append((f"s{i}.rows", s.rows))  # type: ignore[arg-type]
            sections.append((f"s{i}.dirs", s.dirs))  # type: ignore[arg-type]
        if s.alive is not None and s.n_dead:
            sections.append((f"s{i}.alive", s.alive))
        if s.keys is not None:
            sections.append((f"s{i}.heavy", s.heavy))  # type: ignore[arg-type]
            sections.append((f"s{i}.hv", s.hv))
            sections.append((f"s{i}.sub", s.sub))
        seg_meta.append(meta)
    buf_fps, buf_ids = snap.live_buffer()
    sections.append(("buffer.fps", buf_fps))
    sections.append(("buffer.ids", buf_ids))

    table: list[dict[str, Any]] = []
    offset = 0
    for name, a in sections:
        mv = _le(a)
        table.append(
            {
                "name": name,
                "dtype": ("<" if a.dtype.itemsize > 1 else "|") + _dtype_code(a),
                "shape": list(a.shape),
                "offset": offset,  # relative to the data start
                "nbytes": mv.nbytes,
                "xxh3": xxhash.xxh3_64_intdigest(mv),
            }
        )
        offset += -(-mv.nbytes // _ALIGN) * _ALIGN
    header = {
        "format": "neardup.HammingIndex",
        "plan": snap.plan.to_dict(),
        "state": snap.settings.to_dict(),
        "segments": seg_meta,
        "sections": table,
    }
    hdr = json.dumps(header, sort_keys=True).encode()
    data_start = -(-(_PRE.size + len(hdr)) // _ALIGN) * _ALIGN
    total = data_start + offset + _TRL.size
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        parts: list[bytes | memoryview] = [
            _PRE.pack(MAGIC, FORMAT_VERSION, 0, len(hdr), xxhash.xxh3_64_intdigest(hdr)),
            hdr,
            b"\0" * (data_start - _PRE.size - len(hdr)),
        ]
        for (_name, a), meta in zip(sections, table, strict=True):
            parts.append(_le(a))
            parts.append(b"\0" * (-(-meta["nbytes"] // _ALIGN) * _ALIGN - meta["nbytes"]))
        parts.append(_TRL.pack(TRAILER, total))
        with open(tmp, "wb") as f:
            # synced as it is written (a store's segment index is written beside requests'
            # log syncs: neardup._durable)
            write_synced(f, parts)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StorageError(f"cannot write index file {path}: {exc}") from exc


def read_index(path: Path, *, mmap: bool, verify: bool) -> IndexSnapshot:
    """Read an index written by :func:`write_index` (see the module docstring): the snapshot
    :meth:`HammingIndex.from_snapshot <neardup.index.HammingIndex.from_snapshot>` opens.

    ``mmap=True`` maps the arrays read-only (the snapshot's ``read_only`` says so); ``verify``
    checks every section's checksum."""
    if not path.exists():
        raise NotFoundError(f"index file {path} does not exist")
    if not path.is_file():
        raise InputError(
            f"{path} is a folder, not an index file; pass the file HammingIndex.save() wrote"
            if path.is_dir()
            else f"{path} is not a regular file; pass the file HammingIndex.save() wrote"
        )
    size = path.stat().st_size
    if size < _PRE.size + _TRL.size:
        with open(path, "rb") as f:
            head = f.read(8)
        if head != MAGIC[: len(head)] or not head:
            raise FormatError(f"{path} is not a neardup index file (bad magic {head!r})")
        raise CorruptFileError(
            f"{path} is truncated ({size} bytes); restore it or rebuild the index"
        )
    buf: Any
    mm: _mmap.mmap | None = None
    if mmap:
        with open(path, "rb") as f:
            mm = _mmap.mmap(f.fileno(), 0, access=_mmap.ACCESS_READ)
        buf = np.frombuffer(mm, dtype=np.uint8)
    else:
        buf = np.fromfile(path, dtype=np.uint8)
    magic, version, _flags, hlen, hhash = _PRE.unpack_from(bytes(buf[: _PRE.size]))
    if magic != MAGIC:
        raise FormatError(
            f"{path} is not a neardup index file (magic {magic!r}, expected {MAGIC!r})"
        )
    if version not in READ_VERSIONS:
        raise UnsupportedVersionError(
            f"{path} has index format version {version}; this build reads versions"
            f" {', '.join(map(str, READ_VERSIONS))} (upgrade neardup or rebuild the index)"
        )
    trl, total = _TRL.unpack_from(bytes(buf[size - _TRL.size :]))
    if trl != TRAILER or total != size:
        raise CorruptFileError(
            f"{path} is truncated or damaged (trailer {trl!r}, recorded length {total}, actual {size});"
            " restore it from a backup or rebuild the index"
        )
    if _PRE.size + hlen > size:
        raise CorruptFileError(f"{path}: header length {hlen} runs past the end of the file")
    hdr = bytes(buf[_PRE.size : _PRE.size + hlen])
    if xxhash.xxh3_64_intdigest(hdr) != hhash:
        raise CorruptFileError(f"{path}: header checksum mismatch; the file is corrupt")
    try:
        header = json.loads(hdr)
        plan = Plan.from_dict(header["plan"])
        data_start = -(-(_PRE.size + hlen) // _ALIGN) * _ALIGN
        arrays: dict[str, np.ndarray] = {}
        bad: list[str] = []  # compressed-table sections whose checksum failed: narrowed below
        for sec in header["sections"]:
            off = data_start + int(sec["offset"])
            nb = int(sec["nbytes"])
            if off + nb > size - _TRL.size:
                raise CorruptFileError(
                    f"{path}: section {sec['name']} runs past the end of the file"
                )
            raw = buf[off : off + nb]
            if verify and xxhash.xxh3_64_intdigest(memoryview(raw)) != int(sec["xxh3"]):
                if ".c." in sec["name"] or ".ef." in sec["name"]:
                    bad.append(sec["name"])
                else:
                    raise CorruptFileError(
                        f"{path}: checksum mismatch in section {sec['name']}; the file is corrupt"
                    )
            dt = np.dtype(sec["dtype"])
            arr = raw.view(dt).reshape(sec["shape"])
            if sys.byteorder != "little" and dt.itemsize > 1:
                arr = arr.byteswap().view(dt.newbyteorder("="))
            arrays[sec["name"]] = arr
        pa = plan_arrays(plan)
        segments: list[SealedSegment] = []
        for i, meta in enumerate(header["segments"]):
            if meta.get("compressed"):
                segments.append(_load_compressed(path, i, meta, arrays, plan, pa, bad))
                continue
            keys = arrays.get(f"s{i}.keys")
            fps = keys[0].reshape(-1, 1) if meta["fps_is_key0"] else arrays[f"s{i}.fps"]  # type: ignore[index]
            seg = TableSegment(
                fps=fps,
                ids=arrays[f"s{i}.ids"],
                keys=keys,
                rows=arrays.get(f"s{i}.rows"),
                dirs=arrays.get(f"s{i}.dirs"),
                dbits=int(meta["dbits"]),
                alive=arrays.get(f"s{i}.alive"),
                heavy=arrays.get(f"s{i}.heavy"),
                hv=arrays.get(f"s{i}.hv"),
                sub=arrays.get(f"s{i}.sub"),
            )
            if seg.keys is not None and (seg.rows is None or seg.dirs is None or seg.heavy is None):
                raise CorruptFileError(f"{path}: segment {i} lacks rows or directory sections")
            segments.append(seg)
        bfps = arrays["buffer.fps"]
        bids = arrays["buffer.ids"]
        state = header["state"]
        if mm is not None:
            # the checksum pass mapped every page: unmapped again (left in the page cache), so
            # that the searches map only what they probe (the store's segments do the same:
            # neardup.store.segment)
            advise(mm, "dontneed")
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptFileError(
            f"{path}: malformed index header ({exc!r}); the file is corrupt"
        ) from exc
    return IndexSnapshot(
        plan=plan,
        arrays=pa,
        settings=IndexSettings.from_dict(state),
        segments=tuple(segments),
        buffer_fps=bfps,
        buffer_ids=bids,
        buffer_alive=np.ones(len(bids), dtype=np.bool_),
        read_only=f"memory-mapped from {path}" if mmap else None,
    )


def _load_compressed(
    path: Path, i: int, meta: dict[str, Any], arrays: dict[str, np.ndarray], plan: Plan,
    pa: PlanArrays, bad: list[str],
) -> CompressedSegment:  # fmt: skip
    """A compressed segment from its sections; a failed section checksum is narrowed to the
    table (and block) whose own checksum fails (or reported as the section when none does)."""
    what = f"{path}: segment {i}"
    if plan.kind != "tables":
        raise CorruptFileError(f"{what} is compressed but the plan has no tables")
    n = int(meta["n"])
    try:
        codec = check_codec(meta.get("codec"))
        prefix = _PREFIX[codec]
        cls = EFTables if codec == "ef" else BlockTables
        fields = {name: arrays[f"s{i}.{prefix}.{name}"] for name in cls.FIELDS}
        tables = (
            EFTables.from_arrays(n, meta, fields)
            if codec == "ef"
            else BlockTables.from_arrays(n, meta, fields, pa.min_pb, what)
        )
    except ConfigError as exc:
        raise CorruptFileError(f"{what}: {exc}") from exc
    ids = PackedIds(n, int(meta["id_base"]), int(meta["id_bits"]), arrays[f"s{i}.ids.packed"])
    ids.validate(what)
    if tables.n_tables != pa.n_tables:
        raise CorruptFileError(f"{what}: compressed tables do not match the plan's {pa.n_tables}")
    tables.validate(what)
    mine = [b for b in bad if b.startswith(f"s{i}.{prefix}.")]
    if mine:
        tables.verify(what)  # raises naming the table (and block)
        raise CorruptFileError(
            f"{path}: checksum mismatch in section {mine[0]}; the file is corrupt"
        )
    return CompressedSegment(
        tables,
        ids,
        pa.words,
        pa,
        fps_raw=arrays.get(f"s{i}.fps"),
        rows=arrays.get(f"s{i}.rows"),
        alive=arrays.get(f"s{i}.alive"),
    )
