"""Band-key sections packed for segments: a directory on each key's top bits, the rest of the
key and the row in as few whole bytes as the segment needs.

A :class:`~neardup.index.bands.BandSection` keeps a 32-bit key (the low half of a compact key,
:mod:`neardup.index.bands`) and a 32-bit row per entry: 8 bytes, 79 entries a document with the
default plan. Segments hold nearly all of a window's entries, and their sections are what a
large window's disk and mapped memory are made of (docs/store.md). A :class:`PackedSection`
holds the same entries in the same order with fewer bytes:

* ``dbits`` (0, 8 or 16): each group's entries are bucketed by their key's top ``dbits`` bits,
  and ``dirs[g * (2**dbits + 1) + b]`` counts the group's entries whose bucket is below ``b``
  (u32; no directory when ``dbits`` is 0: a bucket is the whole group);
* ``kbytes``: the key's other ``32 - dbits`` bits, ``kw = (32 - dbits) / 8`` bytes an entry,
  little-endian (the bucket gives the top bits back);
* ``rbytes``: the entry's row, ``rw`` bytes (3 while a segment has at most 2**24 rows, else 4).

:func:`packed_layout` picks ``dbits`` for the fewest bytes: a directory costs 4 bytes a bucket
and saves a key byte an entry for each 8 bits, so a group of more than ~262 k entries takes 16
bits (2 + 0.25 bytes a key at 1 M entries), of more than ~1 k takes 8 (3 bytes), and a smaller
one none (4). Nothing is lost: :func:`unpack_group` gives back every key and row, so segments
merge into larger ones (:func:`neardup.index.bands.merge_mapped`) as before.

Searching (:mod:`neardup.index.section_search`) starts at a key's bucket: one directory read,
then a few entries where the unpacked section searched the whole group. Equal to searching the
unpacked section (tests/index/test_band_packed.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from .._jit import kernel, load_u32

__all__ = ["PackedSection", "pack_section", "packed_layout", "unpack_group"]

#: directory widths a section may take (bits of a key's top)
DIRECTORY_BITS = (0, 8, 16)
#: bytes readable after the end of a packed key or row array: a field of 2 or 3 bytes is read
#: as a 4-byte word (:func:`key_at`). :func:`pack_section` allocates them; a segment's key
#: bytes are followed by its row bytes, and its row bytes by the sketch section's 8-byte head
SLACK = 4


def packed_layout(entries: int, groups: int, rows: int) -> tuple[int, int, int]:
    """(``dbits``, ``kw``, ``rw``) of a section of ``entries`` over ``groups`` groups naming rows
    below ``rows``: the directory width of the fewest bytes, its key bytes, the row bytes."""
    rw = 3 if rows <= 1 << 24 else 4
    if not entries or not groups:
        return 0, 4, rw
    best = min(
        DIRECTORY_BITS,
        key=lambda d: groups * ((1 << d) + 1) * 4 * (d > 0) + entries * (32 - d) // 8,
    )
    return best, (32 - best) // 8, rw


@kernel(nogil=True, inline="always")
def key_at(kb, kw, i):  # pragma: no cover (numba)
    """The stored key bits of entry ``i`` (``kw`` bytes, little-endian): one unaligned word
    load, masked (the arrays keep :data:`SLACK` readable bytes after their end)."""
    return load_u32(kb, i * kw) & (np.uint32(0xFFFFFFFF) >> np.uint32(32 - 8 * kw))


@kernel(nogil=True, inline="always")
def row_at(rb, rw, i):  # pragma: no cover (numba)
    """The row of entry ``i`` (``rw`` bytes, little-endian), as :func:`key_at` reads keys."""
    return np.int64(load_u32(rb, i * rw) & (np.uint32(0xFFFFFFFF) >> np.uint32(32 - 8 * rw)))


@kernel(nogil=True)
def _pack_kernel(offsets, keys, rows, dbits, kw, rw, dirs, kb, rb):  # pragma: no cover (numba)
    ng = offsets.size - 1
    nd = (1 << dbits) + 1
    shift = np.uint32(32 - dbits)
    for g in range(ng):
        a = np.int64(offsets[g])
        e = np.int64(offsets[g + 1])
        if dbits > 0:
            j = a
            base = g * nd
            for b in range(nd):
                while j < e and np.int64(keys[j] >> shift) < b:
                    j += 1
                dirs[base + b] = j - a
        for i in range(a, e):
            v = keys[i]
            p = i * kw
            for t in range(kw):
                kb[p + t] = np.uint8((v >> np.uint32(8 * t)) & np.uint32(0xFF))
            r = rows[i]
            p = i * rw
            for t in range(rw):
                rb[p + t] = np.uint8((r >> np.uint32(8 * t)) & np.uint32(0xFF))


@kernel(nogil=True)
def _unpack_kernel(offsets, dbits, dirs, kb, kw, rb, rw, g, keys, rows):  # pragma: no cover
    """Group ``g``'s keys (whole 32 bits) and rows into ``keys`` / ``rows``."""
    a = np.int64(offsets[g])
    e = np.int64(offsets[g + 1])
    if dbits == 0:
        for i in range(a, e):
            keys[i - a] = key_at(kb, kw, i)
            rows[i - a] = row_at(rb, rw, i)
        return
    nd = (1 << dbits) + 1
    base = g * nd
    shift = np.uint32(32 - dbits)
    for b in range(nd - 1):
        top = np.uint32(b) << shift
        for i in range(a + np.int64(dirs[base + b]), a + np.int64(dirs[base + b + 1])):
            keys[i - a] = top | key_at(kb, kw, i)
            rows[i - a] = row_at(rb, rw, i)


@kernel(nogil=True)
def _max_row_kernel(rb, rw, m):  # pragma: no cover (numba)
    best = np.int64(-1)
    for i in range(m):
        r = row_at(rb, rw, i)
        if r > best:
            best = r
    return best


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


def _ro(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``a`` as a read-only view: a segment's arrays are read-only maps, so every kernel here
    sees read-only arrays and is compiled for them once, whoever made the section."""
    v = a.view()
    v.flags.writeable = False
    return v


class PackedSection:
    """A band-key section in a segment's packed layout (see the module): the entries of a
    :class:`~neardup.index.bands.BandSection` at the same positions. ``rowids`` maps rows to
    row ids (a segment's), or None (rows as they are)."""

    __slots__ = ("_max_row", "dbits", "dirs", "kbytes", "kw", "offsets", "rbytes", "rowids", "rw")

    def __init__(
        self,
        offsets: npt.NDArray[np.uint64],
        dbits: int,
        dirs: npt.NDArray[np.uint32],
        kbytes: npt.NDArray[np.uint8],
        kw: int,
        rbytes: npt.NDArray[np.uint8],
        rw: int,
        rowids: npt.NDArray[np.int64] | None = None,
    ) -> None:
        self.offsets = offsets
        self.dbits = int(dbits)
        self.dirs = dirs
        self.kbytes = kbytes
        self.kw = int(kw)
        self.rbytes = rbytes
        self.rw = int(rw)
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
        if self.dbits not in DIRECTORY_BITS or self.kw != (32 - self.dbits) // 8:
            return f"directory of {self.dbits} bits with {self.kw}-byte keys"
        if self.rw not in (3, 4):
            return f"{self.rw}-byte rows"
        if len(self.kbytes) != m * self.kw or len(self.rbytes) != m * self.rw:
            return "key or row bytes do not match the entries"
        if g < 0 or (np.diff(self.offsets.astype(np.int64)) < 0).any() or self.offsets[0] != 0:
            return "group offsets fall"
        if self.dbits:
            if len(self.dirs) != g * ((1 << self.dbits) + 1):
                return "directory size does not match the groups"
            if not _dirs_ok(_ro(self.offsets), self.dbits, _ro(self.dirs)):
                return "a group's directory does not bound its entries"
        return None

    def max_row(self) -> int:
        """The largest row an entry names (-1: no entries); computed once."""
        if self._max_row is None:
            self._max_row = int(_max_row_kernel(_ro(self.rbytes), self.rw, len(self)))
        return self._max_row

    def group(self, g: int) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
        """Group ``g``'s keys (32 bits) and rows, unpacked."""
        return unpack_group(self, g)

    def row_ids(self, at: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Row ids of the entries at positions ``at``."""
        at = np.asarray(at, np.int64)
        r = np.zeros(at.size, np.int64)
        for t in range(self.rw):
            r |= self.rbytes[at * self.rw + t].astype(np.int64) << (8 * t)
        return np.asarray(self.rowids[r], np.int64) if self.rowids is not None else r

    def unpacked(self) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
        """Every entry's key (32 bits) and row, unpacked (materialised)."""
        m = len(self)
        keys = np.empty(m, np.uint32)
        rows = np.empty(m, np.uint32)
        off = self.offsets.astype(np.int64).tolist()
        for g in range(self.groups):
            keys[off[g] : off[g + 1]], rows[off[g] : off[g + 1]] = self.group(g)
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
            _ro(sec.offsets), sec.dbits, _ro(sec.dirs), _ro(sec.kbytes), sec.kw, _ro(sec.rbytes),
            sec.rw, g, keys, rows,
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
    best, kw, rw = packed_layout(m, groups, n_rows)
    if dbits is None:
        dbits = best
    elif dbits not in DIRECTORY_BITS:
        raise ValueError(f"a directory of {dbits} bits (0, 8 or 16)")
    kw = (32 - dbits) // 8
    if not m:
        offsets = np.zeros(1, np.uint64)
    dirs = np.zeros(groups * ((1 << dbits) + 1) if dbits else 0, np.uint32)
    kb = np.zeros(m * kw + SLACK, np.uint8)[: m * kw]
    rb = np.zeros(m * rw + SLACK, np.uint8)[: m * rw]
    if m:
        _pack_kernel(offsets, keys, rows, dbits, kw, rw, dirs, kb, rb)
    return PackedSection(offsets, dbits, dirs, kb, kw, rb, rw, rowids)
