"""Band-key sections: :class:`BandSection`, compact keys grouped by band (a table of group
offsets, then per entry the 32-bit ``h32``, sorted within its group, and a 32-bit row: a
position in a segment, or an offset from the index's first row id; 8 bytes per entry, the layout
of a segment's band-key section, :mod:`neardup.store.segment`), and how they are made: from
rows' keys (:func:`section_from_rows`, a load's and a flush's), cut to the rows of a segment
(:func:`section_for_rows`, :func:`sections_for_rows`), and the stable sort of compact keys the
memtable's merges use (:func:`_by_key`). Merging sections: :mod:`.band_merge`; searching them:
:mod:`.section_search` and :func:`neardup.index.bands.lookup`.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._jit import kernel
from .._threads import run_ranges
from ..fingerprint.minhash import NO_KEYS
from ._batch_kernels import RADIX_BINS, radix_order

__all__ = [
    "BandSection",
    "columns_are_groups",
    "flatten",
    "section_for_rows",
    "section_from_rows",
    "sections_for_rows",
    "sort_entries",
]

# the compact key's layout (neardup.fingerprint.minhash.compact_keys): group << 32 | h32
_LOW32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)


def flatten(
    ent: npt.NDArray[np.uint64], rowids: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    """(entry keys, row ids) of the rows' usable entries, flat (unsorted)."""
    if ent.size == 0:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    nb = ent.shape[1]
    k = ent.ravel()
    r = np.repeat(np.asarray(rowids, np.int64), nb)
    ok = k != NO_KEYS
    return k[ok], r[ok]


def sort_entries(
    keys: npt.NDArray[np.uint64], rids: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    """Sorted by (key, row id): a bucket's rows are contiguous, oldest first."""
    order = np.lexsort((rids, keys))
    return keys[order], rids[order]


#: below this many entries :func:`_by_key` takes one stable argsort (fewer NumPy calls)
_SMALL_SORT = 4096


def _by_key(
    keys: npt.NDArray[np.uint64], rids: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    """Sorted by key, stably: rows arrive in row-id order (the writer allocates them
    ascending, the log replays them so), so a bucket stays oldest first.

    A stable argsort of 64-bit keys is NumPy's timsort (17.5 s for the 42 M entries of a
    1 M-row memtable replayed at once, benchmarks/bench_store.py --window --kill-fill). Here:
    a stable sort of the 16-bit groups (NumPy's radix sort), then per group one plain
    (unstable, SIMD) sort of ``h32 << 32 | position``, whose low half restores the input order
    among equal keys. Equal to ``np.argsort(keys, kind="stable")``
    (:func:`neardup.index.reference.by_key_reference`; tests/store/test_store_bands.py)."""
    n = len(keys)
    if n < _SMALL_SORT or n >= _MAX_SPAN:
        order = np.argsort(keys, kind="stable")
        return keys[order], rids[order]
    groups = (keys >> _SHIFT32).astype(np.uint16)
    first = np.argsort(groups, kind="stable")  # radix sort: O(n)
    bounds = np.flatnonzero(np.diff(groups[first])) + 1
    del groups
    comb = keys[first]
    comb &= _LOW32
    comb <<= _SHIFT32
    comb |= np.arange(n, dtype=np.uint64)
    for a, b in zip([0, *bounds.tolist()], [*bounds.tolist(), n], strict=True):
        comb[a:b].sort()
    comb &= _LOW32
    order = first[comb.astype(np.intp)]
    del comb, first
    return keys[order], rids[order]


class BandSection:
    """Compact keys grouped by band (see the module): ``offsets`` (groups + 1,) u64 bound each
    group's entries; ``keys`` u32 the low 32 bits, sorted within a group (equal keys by row);
    ``rows`` u32 each entry's row: ``rowids[rows]`` (a segment's positions) or ``base + rows``
    (the memtable's offsets). Unpacks as ``(compact keys u64, row ids i64)`` (what merges and
    flushes carry; materialised)."""

    __slots__ = ("base", "keys", "offsets", "rowids", "rows")

    def __init__(
        self,
        offsets: npt.NDArray[np.uint64],
        keys: npt.NDArray[np.uint32],
        rows: npt.NDArray[np.uint32],
        rowids: npt.NDArray[np.int64] | None = None,
        base: int = 0,
    ) -> None:
        self.offsets = offsets
        self.keys = keys
        self.rows = rows
        self.rowids = rowids
        self.base = int(base)

    @classmethod
    def empty(cls) -> BandSection:
        """A section of no entries (rows as positions)."""
        return cls(np.zeros(1, np.uint64), np.zeros(0, np.uint32), np.zeros(0, np.uint32), None, 0)

    @classmethod
    def from_sorted(
        cls,
        ck: npt.NDArray[np.uint64],
        rows: npt.NDArray[np.uint32],
        rowids: npt.NDArray[np.int64] | None = None,
        base: int = 0,
    ) -> BandSection:
        """From compact keys sorted (equal keys by row) and their rows."""
        ck = np.ascontiguousarray(ck, np.uint64)
        n_groups = int(ck[-1] >> _SHIFT32) + 1 if len(ck) else 0
        starts = np.arange(n_groups + 1, dtype=np.uint64) << _SHIFT32
        offsets = np.searchsorted(ck, starts).astype(np.uint64)
        if sys.byteorder == "little":  # the low halves, without a 64-bit temporary
            keys = np.ascontiguousarray(ck.view(np.uint32)[0::2])
        else:  # pragma: no cover
            keys = (ck & _LOW32).astype(np.uint32)
        return cls(offsets, keys, np.asarray(rows, np.uint32), rowids, base)

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def nbytes(self) -> int:
        return int(self.keys.nbytes + self.rows.nbytes + self.offsets.nbytes)

    def row_ids(self, at: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Row ids of the entries at positions ``at``."""
        r = self.rows[at]
        if self.rowids is not None:
            return np.asarray(self.rowids[r], np.int64)
        out = r.astype(np.int64)
        out += self.base
        return out

    def compact(self) -> npt.NDArray[np.uint64]:
        """Every entry's compact key (materialised)."""
        out = self.keys.astype(np.uint64)
        off = np.asarray(self.offsets, np.int64).tolist()
        for g in range(1, len(off) - 1):  # group by group: no temporaries of the full size
            out[off[g] : off[g + 1]] |= np.uint64(g) << _SHIFT32
        return out

    def __iter__(self) -> Any:
        yield self.compact()
        yield self.row_ids(np.arange(len(self.keys)))


def columns_are_groups(ent: npt.NDArray[np.uint64]) -> bool:
    """Whether every key of ``ent`` (n, bands) has its column as its group (or is
    :data:`NO_KEYS`): true for plans of up to 3 rows, whose group is the band. One pass
    without the GIL that stops at the first key that is not (a load's 100 k rows: five
    array-sized temporaries in NumPy, on the writer's thread; a request's one row: a few
    NumPy calls); equal to :func:`neardup.index.reference.columns_are_groups_reference`
    (tests/store/test_store_bands.py)."""
    return bool(_columns_are_groups(np.ascontiguousarray(ent, np.uint64)))


@kernel(nogil=True)
def _columns_are_groups(ent: npt.NDArray[np.uint64]) -> bool:  # pragma: no cover (numba)
    n, nb = ent.shape
    for i in range(n):
        for j in range(nb):
            v = ent[i, j]
            if v != _NO_KEYS and (v >> np.uint64(32)) != np.uint64(j):
                return False
    return True


_NO_KEYS = NO_KEYS  # (a module constant the kernel reads)


def section_from_rows(
    ent: npt.NDArray[np.uint64], rowids: npt.NDArray[np.int64], base: int
) -> BandSection:
    """The :class:`BandSection` (rows as offsets from ``base``) of the compact keys ``ent``
    (n, bands) of rows ``rowids``, when :func:`columns_are_groups`: each column is one group,
    sorted by one plain sort of ``h32 << 32 | row offset`` (equal keys by row id), or, for
    many rows in ascending order, by a stable radix sort of its ``h32`` (:func:`_radix_columns`),
    written into the output; no 64-bit temporary of all entries. Rows of :data:`NO_KEYS` are
    left out. Equal to a section of the sorted :func:`flatten` (tests/store/test_store_bands.py)."""
    has = ent[:, 0] != NO_KEYS
    if not has.all():
        ent, rowids = ent[has], rowids[has]
    n, nb = ent.shape
    off = np.asarray(rowids, np.int64) - base
    if n and (int(off.min()) < 0 or int(off.max()) >= _MAX_SPAN):
        raise ValueError("row offsets must lie in [0, 2**32)")
    off_u = off.astype(np.uint64)
    keys = np.empty(n * nb, np.uint32)
    rows = np.empty(n * nb, np.uint32)

    def columns(lo: int, hi: int) -> None:  # NumPy's sorts and ufuncs release the GIL
        comb = np.empty(n, np.uint64)
        for j in range(lo, hi):
            np.bitwise_and(ent[:, j], _LOW32, out=comb)
            comb <<= _SHIFT32
            comb |= off_u
            comb.sort()
            rows[j * n : (j + 1) * n] = comb  # the low halves (uint32 cast keeps them)
            comb >>= _SHIFT32
            keys[j * n : (j + 1) * n] = comb

    # a large section's columns sorted on every kernel thread (a bulk load's or a big
    # insert's: bench_load.py); a small one's on this thread alone
    min_items = 1 if n >= _PARALLEL_SORT_ROWS else max(1, nb)
    if n >= _RADIX_ROWS and bool(np.all(off[1:] > off[:-1])):
        # rows in ascending order (a load's, a flush's): each column's 32-bit keys by the
        # batch join's stable radix sort, which keeps equal keys in row order, in place of a
        # 64-bit sort (bench_seed.py --whole); the same entries
        run_ranges(_radix_columns, nb, np.ascontiguousarray(ent, np.uint64),
                   off.astype(np.uint32), keys, rows, min_items=min_items)  # fmt: skip
    else:
        run_ranges(columns, nb, min_items=min_items)
    offsets = np.arange(nb + 1, dtype=np.uint64) * np.uint64(n)
    return BandSection(offsets, keys, rows, None, base)


#: rows from which :func:`section_from_rows` sorts its columns on several threads
_PARALLEL_SORT_ROWS = 20_000
#: rows from which it radix-sorts them (each column's sort clears a histogram of
#: :data:`~neardup.index._batch_kernels.RADIX_BINS` twice)
_RADIX_ROWS = 16_384


@kernel(nogil=True)
def _radix_columns(
    lo: int,
    hi: int,
    ent: npt.NDArray[np.uint64],
    off: npt.NDArray[np.uint32],
    keys: npt.NDArray[np.uint32],
    rows: npt.NDArray[np.uint32],
) -> None:  # pragma: no cover (numba)
    """Columns ``lo..hi`` of :func:`section_from_rows` for rows whose offsets ``off`` ascend:
    column ``j``'s 32-bit keys sorted with their rows' offsets into ``keys[j n:(j + 1) n]``
    and ``rows[...]`` by :func:`~neardup.index._batch_kernels.radix_order` (stable: equal
    keys stay in row order)."""
    n = ent.shape[0]
    h, r, tmp_h, tmp_r, hist = _column_scratch(n)
    for j in range(lo, hi):
        _sort_column(ent, j, False, h, r, tmp_h, tmp_r, hist)
        at = j * n
        for i in range(n):
            keys[at + i] = np.uint32(h[i])
            rows[at + i] = off[r[i]]


@kernel(nogil=True)
def _column_scratch(n: int) -> Any:  # pragma: no cover (numba)
    """Scratch for :func:`_sort_column` of ``n`` rows: (hashes, rows, their radix sort's two
    buffers, its histogram)."""
    return (
        np.empty(n, np.uint64),
        np.empty(n, np.int64),
        np.empty(n, np.uint64),
        np.empty(n, np.int64),
        np.empty(RADIX_BINS, np.int64),
    )


@kernel(nogil=True)
def _sort_column(
    ent: npt.NDArray[np.uint64],
    j: int,
    grouped_only: bool,
    h: npt.NDArray[np.uint64],
    r: npt.NDArray[np.int64],
    tmp_h: npt.NDArray[np.uint64],
    tmp_r: npt.NDArray[np.int64],
    hist: npt.NDArray[np.int64],
) -> bool:  # pragma: no cover (numba)
    """Column ``j`` of the compact keys ``ent``: its 32-bit hashes into ``h`` with their row
    numbers into ``r``, sorted by the batch join's stable radix sort
    (:func:`~neardup.index._batch_kernels.radix_order`: equal hashes stay in row order). With
    ``grouped_only``, False (nothing sorted) where a key of the column is not of group ``j``.
    A load's section columns (:func:`_radix_columns`) and a big check's distinct keys
    (:func:`neardup.index.bands.unique_by_column`) both sort this way."""
    low = np.uint64(0xFFFFFFFF)
    g = np.uint64(j)
    for i in range(ent.shape[0]):
        v = ent[i, j]
        if grouped_only and (v >> np.uint64(32)) != g:
            return False
        h[i] = v & low
        r[i] = i
    radix_order(h, r, np.uint64(0), low, 32, tmp_h, tmp_r, hist)
    return True


_NO_POS = np.uint32(0xFFFFFFFF)


def section_for_rows(sec: BandSection, rowids: npt.NDArray[np.int64]) -> BandSection:
    """A segment's section from a memtable section ``sec`` (rows as offsets from its base):
    the entries whose row is in ``rowids`` (sorted ascending; the segment's rows), each row
    replaced by its position there, the order kept (by key, then row, within each group).
    Only 32-bit arrays of the entries' size are made (:func:`write_segment
    <neardup.store.segment.write_segment>` takes it as it is); equal to filtering the
    materialised entries (tests/store/test_store_bands.py)."""
    rowids = np.asarray(rowids, np.int64)
    if sec.rowids is not None:
        raise ValueError("section_for_rows takes a memtable section (rows relative to a base)")
    if not len(sec) or not len(rowids):
        return BandSection.empty()
    span = int(sec.rows.max()) + 1
    if len(rowids) >= int(_NO_POS):
        raise ValueError("a segment holds fewer than 2**32 - 1 rows")
    table = np.full(span, _NO_POS, np.uint32)
    off = rowids - sec.base
    inside = np.flatnonzero((off >= 0) & (off < span))
    table[off[inside]] = inside.astype(np.uint32)
    pos = table[sec.rows]
    del table
    keep = pos != _NO_POS
    if keep.all():
        return BandSection(np.array(sec.offsets, np.uint64), sec.keys, pos, None, 0)
    # each group's new start: the entries kept before its old start
    kept_before = np.concatenate(([0], np.cumsum(keep, dtype=np.uint64)))
    offsets = kept_before[np.asarray(sec.offsets, np.int64)]
    if not offsets[-1]:
        return BandSection.empty()
    return BandSection(offsets, sec.keys[keep], pos[keep], None, 0)


def sections_for_rows(
    sec: BandSection, groups: Sequence[npt.NDArray[np.int64]]
) -> list[BandSection]:
    """:func:`section_for_rows` of ``sec`` for each of ``groups`` (disjoint row-id arrays, each
    sorted ascending: the segments one flush writes, one per time partition), in one pass over
    the entries however many groups there are: each entry's group and position looked up once,
    the entries put in group order by one stable sort of their group numbers (a radix sort),
    each group's band offsets summed from one count of its entries per band. A pass per group
    costs the whole section once per segment: a flush whose rows span many partitions paid it
    for each (``benchmarks/bench_seed.py``). Equal to :func:`section_for_rows` group by group
    (tests/store/test_store_bands.py)."""
    if sec.rowids is not None:
        raise ValueError("sections_for_rows takes a memtable section (rows relative to a base)")
    if len(groups) < 2:
        return [section_for_rows(sec, g) for g in groups]
    groups = [np.asarray(g, np.int64) for g in groups]
    if not len(sec) or not sum(len(g) for g in groups):
        return [BandSection.empty() for _ in groups]
    if max(len(g) for g in groups) >= int(_NO_POS):
        raise ValueError("a segment holds fewer than 2**32 - 1 rows")
    span = int(sec.rows.max()) + 1
    n_groups = len(groups)
    # a group number of 16 bits or fewer sorts by radix; the sentinel (no group) sorts last
    gtype = np.uint16 if n_groups < 0xFFFF else np.uint32
    which = np.full(span, n_groups, gtype)
    table = np.full(span, _NO_POS, np.uint32)
    for k, rowids in enumerate(groups):
        off = rowids - sec.base
        inside = np.flatnonzero((off >= 0) & (off < span))
        table[off[inside]] = inside.astype(np.uint32)
        which[off[inside]] = k
    grp = which[sec.rows]
    del which
    bounds = np.asarray(sec.offsets, np.int64)
    n_bands = len(bounds) - 1
    # entries per (group, band): each group's band offsets and its share of the entries
    if (n_groups + 1) * n_bands <= _MAX_COUNTS:
        at = np.repeat(np.arange(n_bands, dtype=np.int32), np.diff(bounds))
        at += grp.astype(np.int32) * np.int32(n_bands)
        counts = np.bincount(at, minlength=(n_groups + 1) * n_bands).reshape(-1, n_bands)
        del at
    else:  # (a plan of very many groups) the groups' entries counted band by band
        counts = np.stack(
            [np.bincount(grp[a:b], minlength=n_groups + 1) for a, b in itertools.pairwise(bounds)],
            axis=1,
        ) if n_bands else np.zeros((n_groups + 1, 0), np.int64)  # fmt: skip
    order = np.argsort(grp, kind="stable")  # each group's entries in their order in ``sec``
    del grp
    ends = np.cumsum(counts.sum(axis=1)[:n_groups]).tolist()
    order = order[: ends[-1]]  # the entries of no group go
    keys = sec.keys[order]
    pos = table[sec.rows[order]]
    del table, order
    out = []
    lo = 0
    for k, hi in enumerate(ends):
        if hi == lo:
            out.append(BandSection.empty())
            continue
        offsets = np.zeros(n_bands + 1, np.uint64)
        np.cumsum(counts[k], dtype=np.uint64, out=offsets[1:])
        out.append(BandSection(offsets, keys[lo:hi], pos[lo:hi], None, 0))
        lo = hi
    return out


#: most (group, band) counters :func:`sections_for_rows` keeps in one table
_MAX_COUNTS = 1 << 24


#: a memtable's band rows are offsets from its first row id, in 32 bits
_MAX_SPAN = 1 << 32
#: adds an append buffer takes before it is sealed into a section
