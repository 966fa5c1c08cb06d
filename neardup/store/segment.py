"""Immutable segment files: the fingerprints, row ids and times of one time partition.

File layout (little-endian, every section 8-byte aligned so it can be memory-mapped)::

    header (64 bytes)
      magic        8s   b"NDUPSEG\\x00"
      version      u32  1
      bits         u32  64 or 128
      count        u64  number of rows
      partition    i64  time-partition key (floor(time / partition_seconds))
      min_time     f64
      max_time     f64
      body_xxh64   u64  xxh64 of everything after the header
      reserved     u32
      header_crc   u32  crc32 of the 60 bytes above
    body
      fingerprints u64[count * words]   words = bits // 64, high word first
      rowids       i64[count]           strictly increasing
      times        f64[count]
    band-key section (empty in a store without the MinHash channel: groups and entries 0;
    packed: :mod:`neardup.index.band_packed`)
      groups       u32                  number of key groups (the bands)
      dbits        u8                   0, 8 or 16: bits of a key's top in the directory
      kbits        u8                   bits of a key's other part: 32 - dbits
      rbits        u8                   bits of a row: those the segment's rows need (1-32)
      reserved     u8                   0
      entries      u64                  number of (compact key, row) pairs
      offsets      u64[groups + 1]      first entry of each group; offsets[groups] = entries
      dirs         u32[groups * (2**dbits + 1)]  (none when dbits is 0) per group, the
                                        entries whose key's top dbits bits are below each
                                        value; padded with zeros to 8 bytes
      keys         u8[ceil(entries * kbits / 8)]  the low kbits bits of each low half of a
                                        compact key (:mod:`neardup.index.bands`), packed from
                                        bit 0, least significant first; the keys sorted
                                        within a group; padded to 8
      rows         u8[ceil(entries * rbits / 8)]  position of each entry's row in this
                                        segment (ascending within a key), packed the same;
                                        padded to 8
    sketch section (:mod:`.sketches`; width 0 in a store without the MinHash channel)
      width        u32                  bytes per row's sketch (0: none, nothing follows)
      reserved     u32                  0
      present      u8[count]            1 where the row has a sketch, padded with zeros to 8
      sketches     u8[count * width]    each row's sketch (zeros where absent), padded to 8

A band key takes about 4.8-6 bytes (4.76 in a segment of a million rows, 4.93 of ~20 k): the group (band) is implied
by the offsets and 32 bits of a mix of the key stand for it (a false collision is rejected by
the caller; see :mod:`neardup.index.bands`), their top bits by the directory. The key and row
parts are followed by at least 4 readable bytes (the next part, or the sketch section's head),
which the packed reads rely on (:data:`neardup.index.band_packed.SLACK`). A segment without
band keys (a store without the MinHash channel,
the rows of a bulk load) has an empty section (:attr:`Segment.band_keys` is None). A file of
another version is refused (:class:`UnsupportedVersionError` naming it).

A segment is written to a temporary name (the body hashed as it is written, then the header,
which holds the hash, over a blank one), fsynced, re-read and verified, then renamed into
place (and the directory fsynced); a write that fails removes the temporary file. A
compaction's band-key section may be made while it is written
(:class:`~neardup.index.band_stream.MergedSection`), never held whole. :func:`open_segment`
checks the header CRC and the xxh64 of the whole body (one hash pass, cheap next to reading
the file) and raises :class:`CorruptFileError` naming the file on any mismatch; a damaged
segment is never used. The pages that pass mapped are unmapped again after it (they stay in
the page cache): an open leaves no more of the file in the process's resident set than its
searches then touch.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import os
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash

from .._arrays import advise
from .._durable import datasync, fsync_dir, write_synced
from ..errors import CorruptFileError, UnsupportedVersionError
from ..index.band_packed import PackedSection, pack_section, packed_bytes
from ..index.band_stream import MergedSection
from ..index.bands import BandSection

__all__ = ["HEADER_SIZE", "Segment", "open_segment", "write_segment"]

MAGIC = b"NDUPSEG\x00"
VERSION = 1
_HEADER = struct.Struct("<8sIIQqddQI")
HEADER_SIZE = 64
_CHUNK = 64 * 1024 * 1024


@dataclass
class Segment:
    """A verified, memory-mapped segment (arrays are read-only views of the file)."""

    path: Path
    bits: int
    partition: int
    fingerprints: npt.NDArray[np.uint64]  # (n,) or (n, 2)
    rowids: npt.NDArray[np.int64]
    times: npt.NDArray[np.float64]
    min_time: float
    max_time: float
    checksum: int
    _mm: Any = None
    #: the band-key section (memory-mapped, packed), None when it has no entries
    band_keys: PackedSection | None = None
    #: which rows have a MinHash sketch, and the sketches (memory-mapped); None: no section
    sketch_present: npt.NDArray[np.bool_] | None = None
    sketches: npt.NDArray[np.uint8] | None = None

    #: where the sections that searches probe at random begin (the band keys, the sketches)
    probed_at: int = 0

    def band_runs(self) -> list[PackedSection]:
        """The band-key section as one sorted run (empty when absent); unpacks as (compact
        keys, row ids) for merges."""
        if self.band_keys is None or not len(self.band_keys):
            return []
        return [self.band_keys]

    def read_ahead(self, on: bool) -> None:
        """The kernel's read-ahead on the probed sections: on (as a new mapping has it) or off
        (each fault reads its page only; :mod:`neardup.store.readahead` decides)."""
        if self._mm is not None:
            advise(self._mm, "normal" if on else "random", self.probed_at)

    def probed_bytes(self) -> int:
        """Bytes of the sections searches probe at random (the band keys and the sketches)."""
        return 0 if self._mm is None else max(0, len(self._mm) - self.probed_at)

    def __len__(self) -> int:
        return len(self.rowids)

    def close(self) -> None:
        """Drop the arrays and the mapping (the arrays must not be used afterwards)."""
        self.fingerprints = self.rowids = self.times = None  # type: ignore[assignment]
        self.band_keys = self.sketch_present = self.sketches = None
        mm, self._mm = self._mm, None
        if mm is not None:
            with contextlib.suppress(BufferError):  # a view is still alive; the GC unmaps it
                mm.close()


def _body_hash(parts: list[bytes | memoryview]) -> int:
    h = xxhash.xxh64()
    for _ in _hashed(iter(parts), h):
        pass
    return h.intdigest()


def write_segment(
    path: str | os.PathLike[str],
    fingerprints: npt.NDArray[np.uint64],
    rowids: npt.NDArray[np.int64],
    times: npt.NDArray[np.float64],
    *,
    partition: int,
    band_keys: (
        tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]] | BandSection | MergedSection | None
    ) = None,
    sketches: tuple[npt.NDArray[np.bool_], npt.NDArray[np.uint8]] | None = None,
) -> int:
    """Write a segment atomically (temp + fsync + verify + rename + fsync dir); returns its xxh64.

    Rows must already be sorted by rowid. ``band_keys``: (compact keys, row ids) of the rows'
    band keys (:func:`neardup.fingerprint.minhash.band_entries`), any order (row ids must be rows of
    this segment): written as the segment's band-key section; a :class:`BandSection` whose rows
    are positions in this segment (a flush's); a
    :class:`~neardup.index.band_stream.MergedSection` (a compaction's, made group by group as
    it is written, never held whole); None: an empty section. ``sketches``: (present,
    sketches) of the rows in row order (:mod:`.sketches`); None: no sketch section.
    """
    p = Path(path)
    fps = np.ascontiguousarray(fingerprints, dtype="<u8")
    rid = np.ascontiguousarray(rowids, dtype="<i8")
    tms = np.ascontiguousarray(times, dtype="<f8")
    n = len(rid)
    bits = 64 if fps.ndim == 1 else 128
    if len(fps) != n or len(tms) != n:
        raise ValueError("fingerprints, rowids and times must have the same length")
    body: list[Any] = [fps.data, rid.data, tms.data]
    if isinstance(band_keys, MergedSection):  # a compaction's, made as it is written
        if band_keys.n_rows != n:
            raise ValueError(f"a merged band section for {band_keys.n_rows} rows, not {n}")
        body += _streamed_section(band_keys)
    else:
        body += _packed_section(band_keys, rid, n)
    if sketches is None:
        body.append(struct.pack("<II", 0, 0))
    else:
        present = np.ascontiguousarray(sketches[0], np.uint8)
        sk = np.ascontiguousarray(sketches[1], np.uint8)
        if len(present) != n or sk.ndim != 2 or len(sk) != n or not sk.shape[1]:
            raise ValueError(f"sketches of shape {sk.shape} for {n} rows")
        body += [
            struct.pack("<II", sk.shape[1], 0),
            present.data,
            bytes(_pad8(n)),
            sk.data,
            bytes(_pad8(sk.size)),
        ]
    min_t = float(tms.min()) if n else 0.0
    max_t = float(tms.max()) if n else 0.0
    tmp = p.with_name(p.name + ".tmp")
    try:
        _write_file(tmp, body, bits, n, partition, min_t, max_t)
        seg = open_segment(tmp)  # verify what was written
    except BaseException:
        tmp.unlink(missing_ok=True)  # nothing half-written is left behind
        raise
    seg.close()
    os.replace(tmp, p)
    fsync_dir(p.parent)
    return seg.checksum


def _write_file(
    tmp: Path, body: list[Any], bits: int, n: int, partition: int, min_t: float, max_t: float
) -> None:
    hasher = xxhash.xxh64()
    with open(tmp, "wb") as f:
        # the body is hashed as it is written (part of it may be made as it goes: a merged
        # section); the header, which holds the hash, is written last over a blank one. Synced
        # as it is written: a merge's file queued whole at the disk would hold up the log syncs
        # of requests meanwhile (neardup._durable)
        f.write(bytes(HEADER_SIZE))
        write_synced(f, _hashed(_parts(body), hasher))
        checksum = hasher.intdigest()
        head = _HEADER.pack(MAGIC, VERSION, bits, n, partition, min_t, max_t, checksum, 0)
        head += struct.pack("<I", zlib.crc32(head))
        f.seek(0)
        f.write(head)
        f.flush()
        datasync(f.fileno())


def _packed_section(
    band_keys: tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]] | BandSection | None,
    rid: npt.NDArray[np.int64],
    n: int,
) -> list[Any]:
    """The band-key section's parts of a section given whole (see :func:`write_segment`)."""
    if band_keys is None:
        sec = BandSection.empty()
    elif isinstance(band_keys, BandSection):  # rows are positions here already (flushes)
        sec = _checked_positions(band_keys, n)
    else:
        bk = np.asarray(band_keys[0], np.uint64)
        pos = np.searchsorted(rid, np.asarray(band_keys[1], np.int64))
        if len(bk) != len(band_keys[1]) or (
            len(pos) and (pos.max() >= n or not np.array_equal(rid[pos], band_keys[1]))
        ):
            raise ValueError("band_keys name rows that are not in the segment")
        if len(bk) > 1 and bool(
            np.all((bk[1:] > bk[:-1]) | ((bk[1:] == bk[:-1]) & (pos[1:] > pos[:-1])))
        ):
            sec = BandSection.from_sorted(bk, pos.astype(np.uint32))  # sorted already (flushes)
        else:
            order = np.lexsort((pos, bk))
            sec = BandSection.from_sorted(bk[order], pos[order].astype(np.uint32))
    pk = pack_section(sec.offsets, sec.keys, sec.rows, n)
    del sec
    return _section_parts(
        pk, [pk.kbytes.data], pk.kbytes.nbytes, [pk.rbytes.data], pk.rbytes.nbytes
    )


def _streamed_section(ms: MergedSection) -> list[Any]:
    """The band-key section's parts of a merged section: the same bytes as
    :func:`_packed_section` of the merge gives, the key and row fields made while they are
    written (iterators of parts), each checked to come to the size the head states."""
    keys = _sized(ms.key_bytes(), ms.key_nbytes, "key")
    rows = _sized(ms.row_bytes(), ms.row_nbytes, "row")
    return _section_parts(ms, keys, ms.key_nbytes, rows, ms.row_nbytes)


def _section_parts(
    sec: PackedSection | MergedSection,
    keys: Iterable[Any],
    key_nbytes: int,
    rows: Iterable[Any],
    row_nbytes: int,
) -> list[Any]:
    """The band-key section as the file lays it out (see the module): its head, offsets and
    directory from ``sec``, then the packed key and row fields (``keys``, ``rows``: their
    parts, ``key_nbytes`` and ``row_nbytes`` bytes), each part padded to 8 bytes."""
    return [
        struct.pack("<IBBBBQ", sec.groups, sec.dbits, sec.kbits, sec.rbits, 0, len(sec)),
        np.ascontiguousarray(sec.offsets, dtype="<u8").data,
        np.ascontiguousarray(sec.dirs, dtype="<u4").data,
        bytes(_pad8(sec.dirs.nbytes)),
        keys,
        bytes(_pad8(key_nbytes)),
        rows,
        bytes(_pad8(row_nbytes)),
    ]


def _sized(chunks: Iterator[npt.NDArray[np.uint8]], nbytes: int, what: str) -> Iterator[Any]:
    got = 0
    for c in chunks:
        got += c.nbytes
        yield c
    if got != nbytes:  # a bug, caught before the file is renamed into place
        raise RuntimeError(f"a merged band section gave {got} {what} bytes, not {nbytes}")


def _parts(body: list[Any]) -> Iterator[Any]:
    """The body's bytes-like parts in order, an iterable in ``body`` (a list of parts, an
    iterator of them) read through."""
    for item in body:
        if isinstance(item, (bytes, bytearray, memoryview, np.ndarray)):
            yield item
        else:
            yield from item


def _hashed(parts: Iterator[Any], hasher: Any) -> Iterator[memoryview]:
    """``parts`` passed on as they are fed to ``hasher`` (in pieces of ``_CHUNK``)."""
    for p in parts:
        mv = memoryview(p).cast("B")
        for s in range(0, len(mv), _CHUNK):
            hasher.update(mv[s : s + _CHUNK])
        yield mv


def _pad8(n: int) -> int:
    """Zero bytes that take ``n`` bytes to a multiple of 8."""
    return -n % 8


def _checked_positions(sec: BandSection, n: int) -> BandSection:
    """``sec`` (rows are positions in a segment of ``n`` rows), checked to be a valid section:
    offsets bound the entries, rows are in the segment, each group sorted by (key, row); group
    by group, so no temporary of the whole section's size. ``ValueError`` otherwise."""
    if sec.rowids is not None or sec.base:
        raise ValueError("a segment's band section holds positions (rowids None, base 0)")
    off = np.asarray(sec.offsets, np.int64)
    m = len(sec.keys)
    if (
        len(sec.rows) != m
        or not len(off)
        or off[0] != 0
        or off[-1] != m
        or (np.diff(off) < 0).any()
    ):
        raise ValueError("band section offsets do not bound its entries")
    if m and int(sec.rows.max()) >= n:
        raise ValueError("band_keys name rows that are not in the segment")
    bounds = off.tolist()
    for a, b in itertools.pairwise(bounds):
        k, r = sec.keys[a:b], sec.rows[a:b]
        if b - a > 1 and not bool(
            np.all((k[1:] > k[:-1]) | ((k[1:] == k[:-1]) & (r[1:] > r[:-1])))
        ):
            raise ValueError("band section entries are not sorted by (key, row) in a group")
    return sec


def open_segment(path: str | os.PathLike[str], *, verify: bool = True) -> Segment:
    """Map a segment and verify its header CRC and (when ``verify``) its body checksum and the
    largest row its band-key section names (both read the whole file). ``verify=False`` is for
    a file the caller knows passed them and has not changed since: one just written and read
    back, or one checked in this boot (:mod:`.boot`); the layout's other checks still run.

    Raises
    ------
    CorruptFileError
        Bad magic, header checksum, size or body checksum; the message names the file.
    UnsupportedVersionError
        A segment version this build does not read.
    """
    p = Path(path)
    size = p.stat().st_size
    if size < HEADER_SIZE:
        raise CorruptFileError(
            f"{p}: segment is truncated ({size} bytes, header needs {HEADER_SIZE})"
        )
    with open(p, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        head = mm[:HEADER_SIZE]
        magic, version, bits, n, partition, min_t, max_t, checksum, _r = _HEADER.unpack_from(
            head, 0
        )
        (crc,) = struct.unpack_from("<I", head, 60)
        if magic != MAGIC:
            raise CorruptFileError(f"{p}: not a neardup segment (magic {magic!r})")
        if zlib.crc32(head[:60]) != crc:
            raise CorruptFileError(f"{p}: segment header checksum mismatch; the file is damaged")
        if version != VERSION:
            raise UnsupportedVersionError(
                f"{p}: segment version {version}, this build reads version {VERSION}; "
                "deduplicate into a new data directory"
            )
        if bits not in (64, 128):
            raise CorruptFileError(
                f"{p}: segment header says {bits}-bit fingerprints (64 or 128 expected)"
            )
        words = bits // 64
        expected = HEADER_SIZE + n * (8 * words + 16)
        if size == expected:
            raise UnsupportedVersionError(
                f"{p}: a segment without a band-key section (written by an earlier build); "
                f"this build reads segment version {VERSION}. Deduplicate into a new data "
                "directory"
            )
        if size < expected + 16:
            raise CorruptFileError(
                f"{p}: segment is {size} bytes, too short for its {n} rows and band-key "
                "section; the file is truncated or damaged"
            )
        groups, dbits, kbits, rbits, _r2, m = struct.unpack_from("<IBBBBQ", mm, expected)
        band_at = expected + 16
        if m and not kbits:
            raise UnsupportedVersionError(
                f"{p}: a segment whose band-key section is unpacked (written by an earlier "
                f"build); this build reads segment version {VERSION} with packed sections. "
                "Deduplicate into a new data directory"
            )
        if dbits not in (0, 8, 16) or (m and (kbits != 32 - dbits or not 1 <= rbits <= 32)):
            raise CorruptFileError(
                f"{p}: segment band-key section has a {dbits}-bit directory, {kbits}-bit keys "
                f"and {rbits}-bit rows (0, 8 or 16; 32 less that; 1 to 32 expected); the file "
                "is damaged"
            )
        nd = groups * ((1 << dbits) + 1) if dbits else 0
        expected = band_at + 8 * (groups + 1)
        kb_n, rb_n = packed_bytes(m, kbits), packed_bytes(m, rbits)
        for nbytes in (4 * nd, kb_n, rb_n):
            expected += nbytes + _pad8(nbytes)
        width, sketch_at = 0, expected + 8
        # the band-key section is the file's end and the body is whole (its checksum matches):
        # a segment of the build before the sketch section, not a truncated one
        if size == expected and _body_hash([memoryview(mm)[HEADER_SIZE:]]) == checksum:
            raise UnsupportedVersionError(
                f"{p}: a segment without a sketch section (written by an earlier build); "
                f"this build reads segment version {VERSION} with it. Deduplicate into a new "
                "data directory"
            )
        if size >= sketch_at:
            width, _r3 = struct.unpack_from("<II", mm, expected)
        expected = sketch_at + (n + _pad8(n) + n * width + _pad8(n * width) if width else 0)
        if size != expected:
            raise CorruptFileError(
                f"{p}: segment is {size} bytes but its header describes {n} rows ({expected} bytes); "
                "the file is truncated or damaged"
            )
        body = memoryview(mm)[HEADER_SIZE:]
        if verify and _body_hash([body]) != checksum:
            body.release()
            raise CorruptFileError(
                f"{p}: segment checksum mismatch (xxh64 of the body); the file is damaged and will "
                "not be used. Restore it from a backup, or remove it from MANIFEST.json to drop its rows"
            )
        body.release()
        off = HEADER_SIZE
        fps = np.frombuffer(mm, dtype="<u8", count=n * words, offset=off)
        off += n * words * 8
        rid = np.frombuffer(mm, dtype="<i8", count=n, offset=off)
        off += n * 8
        tms = np.frombuffer(mm, dtype="<f8", count=n, offset=off)
        off += n * 8
        bands = None
        if words == 2:
            fps = fps.reshape(n, 2)
        rowids = rid.view(np.int64)
        off = band_at
        offsets = np.frombuffer(mm, dtype="<u8", count=groups + 1, offset=off)
        off += 8 * (groups + 1)
        dirs = np.frombuffer(mm, dtype="<u4", count=nd, offset=off)
        off += 4 * nd + _pad8(4 * nd)
        kbytes = np.frombuffer(mm, dtype=np.uint8, count=kb_n, offset=off)
        off += kb_n + _pad8(kb_n)
        rbytes = np.frombuffer(mm, dtype=np.uint8, count=rb_n, offset=off)
        if int(offsets[-1]) != m or (
            groups and bool(np.any(np.diff(offsets.astype(np.int64)) < 0))
        ):
            raise CorruptFileError(
                f"{p}: segment band-key section's group offsets do not describe its {m} "
                "entries; the file is damaged"
            )
        if m:
            bands = PackedSection(
                offsets.view(np.uint64), dbits, dirs.view(np.uint32), kbytes, kbits, rbytes,
                rbits, rowids,
            )  # fmt: skip
            wrong = bands.check()
            if wrong is not None:
                raise CorruptFileError(f"{p}: segment band-key section is damaged ({wrong})")
            if verify and bands.max_row() >= n:  # (reads every row entry)
                raise CorruptFileError(
                    f"{p}: segment band-key section names row {bands.max_row()} of {n}; the "
                    "file is damaged"
                )
        present: npt.NDArray[np.bool_] | None = None
        sk: npt.NDArray[np.uint8] | None = None
        if width:
            flags = np.frombuffer(mm, dtype=np.uint8, count=n, offset=sketch_at)
            if n and int(flags.max()) > 1:
                raise CorruptFileError(
                    f"{p}: segment sketch section's presence flags are not 0 or 1; the file "
                    "is damaged"
                )
            at = sketch_at + n + _pad8(n)
            sk = np.frombuffer(mm, dtype=np.uint8, count=n * width, offset=at).reshape(n, width)
            present = flags.view(np.bool_)
        # the checks above read the whole file through the map (the checksum, the row bound):
        # its pages are unmapped again, left in the page cache, so that the process maps only
        # what its searches probe (an open would otherwise make the whole window resident in
        # every server that opens it: docs/store.md, *What an open costs*)
        advise(mm, "dontneed")
        return Segment(
            p,
            bits,
            partition,
            fps.view(np.uint64),
            rowids,
            tms.view(np.float64),
            min_t,
            max_t,
            checksum,
            mm,
            bands,
            present,
            sk,
            band_at,
        )
    except BaseException:
        with contextlib.suppress(BufferError):
            mm.close()
        raise
