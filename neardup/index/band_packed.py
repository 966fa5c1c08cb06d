"""Band-key sections packed for segments: a directory on each key's top bits, the rest of the
key and the row in as few bits as the segment needs.

A :class:`~neardup.index.band_section.BandSection` keeps a 32-bit key (the low half of a compact key,
:mod:`neardup.index.bands`) and a 32-bit row per entry: 8 bytes, 79 entries a document with the
default plan. Segments hold nearly all of a window's entries, and their sections are what a
large window's disk and mapped memory are made of (docs/store.md). A :class:`PackedSection`
holds the same entries in the same order in fewer bits:

* ``dbits`` (0, 8 or 16): each group's entries are bucketed by their key's top ``dbits`` bits,
  and ``dirs[g * (2**dbits + 1) + b]`` counts the group's entries whose bucket is below ``b``
  (u32; no directory when ``dbits`` is 0: a bucket is the whole group);
* ``kbits = 32 - dbits``: the key's other bits, a field of 16, 24 or 32 bits an entry (the
  bucket gives the top bits back);
* ``rbits``: the entry's row, a field of just the bits the segment's rows need
  (``(rows - 1).bit_length()``: 15 for ~20 k rows, 20 for a million).

Fields are packed one after another from bit 0 of byte 0, each least significant bit first,
and read as one unaligned word, shifted and masked (:func:`field_at`).

:func:`packed_layout` picks ``dbits`` for the fewest bytes: a directory costs 4 bytes a bucket
and saves a key byte an entry per 8 bits, so a group of more than ~262 k entries takes 16 bits
(2 + 0.26 key bytes at 1 M entries), of more than ~1 k takes 8 (3), and a smaller one none (4).
Nothing is lost: :func:`unpack_group` gives back every key and row, so segments merge into
larger ones (:func:`neardup.index.band_merge.merge_mapped`) as before.

Searching (:mod:`neardup.index.section_search`) starts at a key's bucket: one directory read,
then a few entries where the unpacked section searched the whole group. Equal to searching the
unpacked section (tests/index/test_band_packed.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from .._arrays import read_only
from .._jit import kernel, load_u32, prefetch

__all__ = ["PackedSection", "field_at", "pack_section", "packed_layout", "row_bits", "unpack_group"]

#: directory widths a section may take (bits of a key's top)
DIRECTORY_BITS = (0, 8, 16)
#: bytes readable after the end of a packed key or row array: a field is read as one 4-byte
#: word, or two where it straddles one (rows of 27 bits or more; :func:`field_at`).
#: :func:`pack_section` allocates them; in a segment, the key bytes are followed by the row
#: bytes, and the row bytes by the sketch section's 8-byte head
SLACK = 8


def row_bits(rows: int) -> int:
    """Bits of a row field in a segment of ``rows`` rows (at least 1)."""
    return max(1, (max(rows, 1) - 1).bit_length())


def packed_bytes(entries: int, bits: int) -> int:
    """Bytes of ``entries`` fields of ``bits`` bits."""
    return (entries * bits + 7) // 8


def packed_layout(entries: int, groups: int, rows: int) -> tuple[int, int, int]:
    """(``dbits``, ``kbits``, ``rbits``) of a section of ``entries`` over ``groups`` groups
    naming rows below ``rows``: the directory width of the fewest bytes, the key field's
    bits, the row field's bits."""
    rbits = row_bits(rows)
    if not entries or not groups:
        return 0, 32, rbits
    best = min(
        DIRECTORY_BITS,
        key=lambda d: groups * ((1 << d) + 1) * 4 * (d > 0) + entries * (32 - d) // 8,
    )
    return best, 32 - best, rbits


@kernel(nogil=True, inline="always")
def field_at(buf, bits, i):  # pragma: no cover (numba)
    """Field ``i`` of ``bits`` (1-32) bits of a packed array: one unaligned word load, shifted
    and masked (two where the field straddles a word: 27 bits or more, at some offsets). The
    array keeps :data:`SLACK` readable bytes after its end."""
    pos = np.int64(i) * bits
    at = pos >> 3
    sh = pos & 7
    if sh + bits <= 32:
        word = load_u32(buf, at) >> np.uint32(sh)
        return word & (np.uint32(0xFFFFFFFF) >> np.uint32(32 - bits))
    wide = np.uint64(load_u32(buf, at)) | (np.uint64(load_u32(buf, at + 4)) << np.uint64(32))
    return np.uint32((wide >> np.uint64(sh)) & np.uint64(0xFFFFFFFF >> (32 - bits)))


@kernel(nogil=True, inline="always")
def key_at(kb, kbits, i):  # pragma: no cover (numba)
    """The stored key bits of entry ``i`` (a ``kbits`` field: 16, 24 or 32 bits, whole bytes:
    one word load and a mask, without :func:`field_at`'s shift and straddle test)."""
    return load_u32(kb, np.int64(i) * (kbits >> 3)) & (
        np.uint32(0xFFFFFFFF) >> np.uint32(32 - kbits)
    )


@kernel(nogil=True, inline="always")
def prefetch_key(kb, kbits, i):  # pragma: no cover (numba)
    """Ask for the cache line of entry ``i``'s key bits (what :func:`key_at` reads) without
    waiting for it; any ``i``, even outside the section (a prefetch never faults)."""
    prefetch(kb, np.int64(i) * (kbits >> 3))


@kernel(nogil=True, inline="always")
def row_at(rb, rbits, i):  # pragma: no cover (numba)
    """The row of entry ``i`` (an ``rbits`` field)."""
    return np.int64(field_at(rb, rbits, i))


@kernel(nogil=True)
def _put_fields(values, bits, mask, out):  # pragma: no cover (numba)
    """``values & mask`` as ``bits``-bit fields into ``out``, one after another: gathered in a
    64-bit word and written four bytes at a time (a store the compiler merges), where a byte
    at a time cost a loop of unpredictable length per field (a seed's final merge packs
    every entry of the window: ``benchmarks/bench_seed.py --whole``, its ``compact`` stage)."""
    acc = np.uint64(0)
    n = np.int64(0)
    p = 0
    for i in range(values.size):
        acc |= np.uint64(values[i] & mask) << np.uint64(n)  # n < 32: the field fits
        n += bits
        if n >= 32:
            out[p] = np.uint8(acc & np.uint64(0xFF))
            out[p + 1] = np.uint8((acc >> np.uint64(8)) & np.uint64(0xFF))
            out[p + 2] = np.uint8((acc >> np.uint64(16)) & np.uint64(0xFF))
            out[p + 3] = np.uint8((acc >> np.uint64(24)) & np.uint64(0xFF))
            acc >>= np.uint64(32)
            n -= 32
            p += 4
    while n > 0:
        out[p] = np.uint8(acc & np.uint64(0xFF))
        acc >>= np.uint64(8)
        n -= 8
        p += 1


@kernel(nogil=True)
def _directories(offsets, keys, dbits, dirs):  # pragma: no cover (numba)
    """Each group's directory: the entries whose key's top ``dbits`` bits are below each
    value."""
    nd = (1 << dbits) + 1
    shift = np.uint32(32 - dbits)
    for g in range(offsets.size - 1):
        a = np.int64(offsets[g])
        e = np.int64(offsets[g + 1])
        j = a
        base = g * nd
        for b in range(nd):
            while j < e and np.int64(keys[j] >> shift) < b:
                j += 1
            dirs[base + b] = j - a


@kernel(nogil=True)
def _unpack_kernel(offsets, dbits, dirs, kb, kbits, rb, rbits, g, keys, rows):  # pragma: no cover
    """Group ``g``'s keys (whole 32 bits) and rows into ``keys`` / ``rows``."""
    a = np.int64(offsets[g])
    e = np.int64(offsets[g + 1])
    if dbits == 0:
        for i in range(a, e):
            keys[i - a] = key_at(kb, kbits, i)
            rows[i - a] = row_at(rb, rbits, i)
        return
    nd = (1 << dbits) + 1
    base = g * nd
    shift = np.uint32(32 - dbits)
    for b in range(nd - 1):
        top = np.uint32(b) << shift
        for i in range(a + np.int64(dirs[base + b]), a + np.int64(dirs[base + b + 1])):
            keys[i - a] = top | key_at(kb, kbits, i)
            rows[i - a] = row_at(rb, rbits, i)


@kernel(nogil=True)
def _max_row_kernel(rb, rbits, m):  # pragma: no cover (numba)
    best = np.int64(-1)
    for i in range(m):
        r = row_at(rb, rbits, i)
        if r > best:
            best = r
    return best


@kernel(nogil=True)
def _rows_at(rb, rbits, at, out):  # pragma: no cover (numba)
    for j in range(at.size):
        out[j] = row_at(rb, rbits, at[j])


@kernel(nogil=True)
def _dirs_ok(offsets, dbits, dirs):  # pragma: no cover (numba)
    """Whether every group's directory starts at 0, never falls, and ends at its size."""
    nd = (1 << dbits) + 1
    for g in range(offsets.size - 1):
        size = np.int64(offsets[g + 1]) - np.int64(offsets[g])
        base = g * nd
        if dirs[base] != 0 or np.int64(dirs[base + nd - 1]) != size:
            return False
        for b in range(1, nd):
            if dirs[base + b] < dirs[base + b - 1]:
                return False
    return True


class PackedSection:
    """A band-key section in a segment's packed layout (see the module): the entries of a
    :class:`~neardup.index.band_section.BandSection` at the same positions. ``rowids`` maps rows to
    row ids (a segment's), or None (rows as they are)."""

    __slots__ = (
        "_max_row", "dbits", "dirs", "kbits", "kbytes", "offsets", "rbits", "rbytes", "rowids",
    )  # fmt: skip

    def __init__(
        self,
        offsets: npt.NDArray[np.uint64],
        dbits: int,
        dirs: npt.NDArray[np.uint32],
        kbytes: npt.NDArray[np.uint8],
        kbits: int,
        rbytes: npt.NDArray[np.uint8],
        rbits: int,
        rowids: npt.NDArray[np.int64] | None = None,
    ) -> None:
        self.offsets = offsets
        self.dbits = int(dbits)
        self.dirs = dirs
        self.kbytes = kbytes
        self.kbits = int(kbits)
        self.rbytes = rbytes
        self.rbits = int(rbits)
        self.rowids = rowids
        self._max_row: int | None = None

    def __len__(self) -> int:
        return int(self.offsets[-1]) if len(self.offsets) else 0

    @property
    def groups(self) -> int:
        return len(self.offsets) - 1

    @property
    def nbytes(self) -> int:
        return int(self.offsets.nbytes + self.dirs.nbytes + self.kbytes.nbytes + self.rbytes.nbytes)

    def check(self) -> str | None:
        """What is wrong with the layout (a damaged file's), or None: the widths, the array
        sizes and every group's directory are checked, so the kernels read inside the arrays."""
        m = len(self)
        g = self.groups
        if self.dbits not in DIRECTORY_BITS or self.kbits != 32 - self.dbits:
            return f"directory of {self.dbits} bits with {self.kbits}-bit keys"
        if not 1 <= self.rbits <= 32:
            return f"{self.rbits}-bit rows"
        if len(self.kbytes) != packed_bytes(m, self.kbits) or len(self.rbytes) != packed_bytes(
            m, self.rbits
        ):
            return "key or row bytes do not match the entries"
        if g < 0 or (np.diff(self.offsets.astype(np.int64)) < 0).any() or self.offsets[0] != 0:
            return "group offsets fall"
        if self.dbits:
            if len(self.dirs) != g * ((1 << self.dbits) + 1):
                return "directory size does not match the groups"
            if not _dirs_ok(read_only(self.offsets), self.dbits, read_only(self.dirs)):
                return "a group's directory does not bound its entries"
        return None

    def max_row(self) -> int:
        """The largest row an entry names (-1: no entries); computed once."""
        if self._max_row is None:
            self._max_row = int(_max_row_kernel(read_only(self.rbytes), self.rbits, len(self)))
        return self._max_row

    def row_ids(self, at: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Row ids of the entries at positions ``at``."""
        at = np.ascontiguousarray(at, np.int64)
        r = np.empty(at.size, np.int64)
        _rows_at(read_only(self.rbytes), self.rbits, read_only(at), r)
        return np.asarray(self.rowids[r], np.int64) if self.rowids is not None else r

    def unpacked(self) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
        """Every entry's key (32 bits) and row, unpacked (materialised)."""
        m = len(self)
        keys = np.empty(m, np.uint32)
        rows = np.empty(m, np.uint32)
        off = self.offsets.astype(np.int64).tolist()
        for g in range(self.groups):
            keys[off[g] : off[g + 1]], rows[off[g] : off[g + 1]] = unpack_group(self, g)
        return keys, rows

    def compact(self) -> npt.NDArray[np.uint64]:
        """Every entry's compact key (``group << 32 | key``, materialised)."""
        keys, _ = self.unpacked()
        out = keys.astype(np.uint64)
        off = self.offsets.astype(np.int64).tolist()
        for g in range(1, self.groups):
            out[off[g] : off[g + 1]] |= np.uint64(g) << np.uint64(32)
        return out

    def __iter__(self) -> Iterator[npt.NDArray[Any]]:
        """Unpacks as ``(compact keys u64, row ids i64)``, as a ``BandSection`` does."""
        yield self.compact()
        yield self.row_ids(np.arange(len(self)))


def unpack_group(
    sec: PackedSection, g: int
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
    """Group ``g`` of ``sec``: its keys (whole 32 bits) and rows."""
    n = int(sec.offsets[g + 1]) - int(sec.offsets[g])
    keys = np.empty(n, np.uint32)
    rows = np.empty(n, np.uint32)
    if n:
        _unpack_kernel(
            read_only(sec.offsets), sec.dbits, read_only(sec.dirs), read_only(sec.kbytes), sec.kbits,
            read_only(sec.rbytes), sec.rbits, g, keys, rows,
        )  # fmt: skip
    return keys, rows


def pack_section(
    offsets: npt.NDArray[np.uint64],
    keys: npt.NDArray[np.uint32],
    rows: npt.NDArray[np.uint32],
    n_rows: int,
    rowids: npt.NDArray[np.int64] | None = None,
    *,
    dbits: int | None = None,
) -> PackedSection:
    """The packed form of a section (``offsets``, ``keys`` sorted within each group, ``rows``
    below ``n_rows``), in the layout :func:`packed_layout` picks (``dbits``: this directory
    width instead, 0, 8 or 16)."""
    offsets = np.ascontiguousarray(offsets, np.uint64)
    keys = np.ascontiguousarray(keys, np.uint32)
    rows = np.ascontiguousarray(rows, np.uint32)
    m = len(keys)
    groups = len(offsets) - 1 if m else 0
    best, kbits, rbits = packed_layout(m, groups, n_rows)
    if dbits is None:
        dbits = best
    elif dbits not in DIRECTORY_BITS:
        raise ValueError(f"a directory of {dbits} bits (0, 8 or 16)")
    kbits = 32 - dbits
    if not m:
        offsets = np.zeros(1, np.uint64)
    elif int(rows.max()) >= n_rows:
        raise ValueError(f"a section naming row {int(rows.max())} of {n_rows}")
    dirs = np.zeros(groups * ((1 << dbits) + 1) if dbits else 0, np.uint32)
    kb = np.zeros(packed_bytes(m, kbits) + SLACK, np.uint8)[: packed_bytes(m, kbits)]
    rb = np.zeros(packed_bytes(m, rbits) + SLACK, np.uint8)[: packed_bytes(m, rbits)]
    if m:
        if dbits:
            _directories(offsets, keys, dbits, dirs)
        _put_fields(keys, kbits, np.uint32(0xFFFFFFFF >> dbits), kb)
        _put_fields(rows, rbits, np.uint32(0xFFFFFFFF), rb)
    return PackedSection(offsets, dbits, dirs, kb, kbits, rb, rbits, rowids)
