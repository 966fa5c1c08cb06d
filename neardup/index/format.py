"""The on-disk format of a :class:`~neardup.index.HammingIndex` (never pickle).

Layout, all integers little-endian::

    offset 0   magic      8 bytes  b"NDHAMIDX"
    8          version    u32      FORMAT_VERSION (1)
    12         flags      u32      0
    16         hdr_len    u64      length of the JSON header
    24         hdr_hash   u64      xxh3-64 of the JSON header bytes
    32         header     JSON     plan, state, and for every section: name, dtype ("<u8", ...),
                                   shape, offset, nbytes, xxh3-64
    ...        sections   raw little-endian arrays, each starting at a multiple of 64 bytes
    end - 16   trailer    8 bytes  b"NDHAMEND" + u64 total file length

Readers reject a file whose magic, version, header hash, trailer, length or any section hash
does not match, naming the file and what is wrong (:class:`~neardup.errors.FormatError`,
:class:`~neardup.errors.CorruptFileError`, :class:`~neardup.errors.UnsupportedVersionError`).
The tables are stored already sorted, so loading does no sorting: with ``mmap=True`` the arrays
are views of the mapped file (read-only), and opening costs one pass of xxh3 (GB/s) when
``verify=True``. Writes go to a temporary file that is fsynced and renamed over ``path``.
"""

from __future__ import annotations

import json
import os
import struct
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import xxhash

from ..errors import (
    CorruptFileError,
    FormatError,
    NotFoundError,
    StorageError,
    UnsupportedVersionError,
)
from .plan import Plan
from .tables import Segment

if TYPE_CHECKING:
    from .hamming_index import HammingIndex

__all__ = ["FORMAT_VERSION", "MAGIC", "load_index", "save_index"]

MAGIC = b"NDHAMIDX"
TRAILER = b"NDHAMEND"
FORMAT_VERSION = 1
_PRE = struct.Struct("<8sIIQQ")  # magic, version, flags, hdr_len, hdr_hash
_TRL = struct.Struct("<8sQ")
_ALIGN = 64
_DTYPES = {"u8": np.uint64, "i8": np.int64, "u4": np.uint32, "b1": np.bool_}


def _le(a: np.ndarray) -> memoryview:
    a = np.ascontiguousarray(a)
    if sys.byteorder != "little" and a.dtype.itemsize > 1:
        a = a.byteswap()
    return memoryview(a.reshape(-1)).cast("B") if a.size else memoryview(b"")


def _dtype_code(a: np.ndarray) -> str:
    for code, dt in _DTYPES.items():
        if a.dtype == dt:
            return code
    raise FormatError(f"cannot store dtype {a.dtype}")


def save_index(index: HammingIndex, path: Path) -> None:
    """Write ``index`` to ``path`` atomically. See the module docstring for the layout."""
    sections: list[tuple[str, np.ndarray]] = []
    seg_meta = []
    for i, s in enumerate(index._segments):
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
    n = index._buf_n
    alive = index._buf_alive[:n]
    sections.append(("buffer.fps", index._buf_fps[:n][alive]))
    sections.append(("buffer.ids", index._buf_ids[:n][alive]))

    table = []
    offset = 0
    for name, a in sections:
        mv = _le(a)
        table.append(
            {
                "name": name,
                "dtype": "<" + _dtype_code(a) if a.dtype.itemsize > 1 else "|b1",
                "shape": list(a.shape),
                "offset": offset,  # relative to the data start
                "nbytes": mv.nbytes,
                "xxh3": xxhash.xxh3_64_intdigest(mv),
            }
        )
        offset += -(-mv.nbytes // _ALIGN) * _ALIGN
    header = {
        "format": "neardup.HammingIndex",
        "plan": index._plan.to_dict(),
        "state": index._state(),
        "segments": seg_meta,
        "sections": table,
    }
    hdr = json.dumps(header, sort_keys=True).encode()
    data_start = -(-(_PRE.size + len(hdr)) // _ALIGN) * _ALIGN
    total = data_start + offset + _TRL.size
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(_PRE.pack(MAGIC, FORMAT_VERSION, 0, len(hdr), xxhash.xxh3_64_intdigest(hdr)))
            f.write(hdr)
            f.write(b"\0" * (data_start - _PRE.size - len(hdr)))
            for (_name, a), meta in zip(sections, table, strict=True):
                mv = _le(a)
                f.write(mv)
                f.write(b"\0" * (-(-meta["nbytes"] // _ALIGN) * _ALIGN - meta["nbytes"]))
            f.write(_TRL.pack(TRAILER, total))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        try:
            dfd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError:
            pass
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StorageError(f"cannot write index file {path}: {exc}") from exc


def load_index(cls: type[HammingIndex], path: Path, *, mmap: bool, verify: bool) -> HammingIndex:
    """Read an index written by :func:`save_index` (see the module docstring)."""
    if not path.exists():
        raise NotFoundError(f"index file {path} does not exist")
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
    buf = np.memmap(path, dtype=np.uint8, mode="r") if mmap else np.fromfile(path, dtype=np.uint8)
    magic, version, _flags, hlen, hhash = _PRE.unpack_from(bytes(buf[: _PRE.size]))
    if magic != MAGIC:
        raise FormatError(
            f"{path} is not a neardup index file (magic {magic!r}, expected {MAGIC!r})"
        )
    if version != FORMAT_VERSION:
        raise UnsupportedVersionError(
            f"{path} has index format version {version}; this build reads version {FORMAT_VERSION}"
            " (upgrade neardup or rebuild the index)"
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
        for sec in header["sections"]:
            off = data_start + int(sec["offset"])
            nb = int(sec["nbytes"])
            if off + nb > size - _TRL.size:
                raise CorruptFileError(
                    f"{path}: section {sec['name']} runs past the end of the file"
                )
            raw = buf[off : off + nb]
            if verify and xxhash.xxh3_64_intdigest(memoryview(raw)) != int(sec["xxh3"]):
                raise CorruptFileError(
                    f"{path}: checksum mismatch in section {sec['name']}; the file is corrupt"
                )
            dt = np.dtype(sec["dtype"])
            arr = raw.view(dt).reshape(sec["shape"])
            if sys.byteorder != "little" and dt.itemsize > 1:
                arr = arr.byteswap().view(dt.newbyteorder("="))
            arrays[sec["name"]] = arr
        segments = []
        for i, meta in enumerate(header["segments"]):
            keys = arrays.get(f"s{i}.keys")
            fps = keys[0].reshape(-1, 1) if meta["fps_is_key0"] else arrays[f"s{i}.fps"]  # type: ignore[index]
            seg = Segment(
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
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptFileError(
            f"{path}: malformed index header ({exc!r}); the file is corrupt"
        ) from exc
    readonly = f"memory-mapped from {path}" if mmap else None
    idx = cls._from_parts(plan, state, segments, readonly)
    if len(bids):
        if mmap:
            idx._segments.append(Segment.build(np.array(bfps), np.array(bids), idx._pa))
        else:
            idx._buf_fps[: len(bids)] = bfps
            idx._buf_ids[: len(bids)] = bids
            idx._buf_alive[: len(bids)] = True
            idx._buf_n = len(bids)
    return idx
