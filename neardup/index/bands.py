"""MinHash-LSH band keys as an index, beside :class:`~neardup.index.HammingIndex`.

:class:`BandIndex` holds rows by *compact* band key (``group << 32 | h32``, 8 bytes a key:
:func:`neardup.fingerprint.minhash.band_entries`, which also makes them): datasketch's
``MinHashLSH`` as arrays, with ``insert`` / ``query`` / ``remove`` for one row, the batch verbs
``insert_many`` / ``query_many`` / ``remove_many``, and the self-join :meth:`BandIndex.pairs`.
It keeps an append buffer sealed every ``buffer`` entries into sorted sections merged like a
binary counter, so inserts cost O(log n) amortised and a query is one ``searchsorted`` per
group and section. The online store keeps its memtable's band keys in one
(:mod:`neardup.store`), its segments' in :class:`BandSection` objects (memory-mapped), and
searches them all at once with :func:`lookup`.

:class:`BandSection` keeps compact keys grouped by band: a table of group offsets, then per
entry the 32-bit ``h32`` (sorted within its group) and a 32-bit row (a position in a segment, or
an offset from the index's first row id): 8 bytes per entry, the layout of a segment's band-key
section (:mod:`neardup.store.segment`).

The valve: a query's bucket (one band key) of more than ``2 * cap`` rows gives only its ``cap``
oldest and ``cap`` newest rows -- the band self-join's rule for a member that comes last
(:func:`neardup.index.band_groups.group_pairs`: each member with the bucket's first ``cap``
members and its ``cap`` predecessors), so a query against stored rows meets what the batch
pairs a late member of a large bucket with.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._arrays import sorted_pairs, unique_inverse, unique_sorted
from .._jit import kernel
from .._threads import run_ranges
from ..fingerprint.minhash import NO_KEYS
from ._batch_kernels import RADIX_BINS, radix_order
from .band_groups import band_groups, group_pairs
from .band_packed import PackedSection, unpack_group
from .section_search import (
    GroupHits,
    SectionGroup,
    _ranges,
    group_of,
    packed_search,
    section_search,
)

__all__ = [
    "BandIndex",
    "BandSection",
    "PackedSection",
    "SectionGroup",
    "columns_are_groups",
    "lookup",
    "merge_mapped",
    "merge_sections",
    "section_for_rows",
    "section_from_rows",
    "sections_for_rows",
    "unique_by_column",
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


#: a run: sorted (compact keys u64, row ids i64) arrays, a :class:`BandSection`, a
#: :class:`~neardup.index.band_packed.PackedSection`, an :class:`Unsorted` buffer or a
#: :class:`~neardup.index.section_search.SectionGroup`
Run = Any


def _search(
    run: Run, uk: npt.NDArray[np.uint64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], Any]:
    """(first, end) entry of each sorted distinct compact key ``uk`` in ``run``, and a function
    from entry positions to row ids."""
    if isinstance(run, BandSection):
        lo, hi = section_search(run.offsets, run.keys, uk)
        return lo, hi, run.row_ids
    if isinstance(run, PackedSection):
        lo, hi = packed_search(run, uk)
        return lo, hi, run.row_ids
    if isinstance(run, Unsorted):
        lo, hi, rows = _match_unsorted(run.keys, run.rids, uk)
        return lo, hi, lambda at: rows[at]
    keys, rids = run
    lo = np.searchsorted(keys, uk, "left")
    hi = np.searchsorted(keys, uk, "right")
    return lo, hi, lambda at: np.asarray(rids[at], np.int64)


def merge_sections(a: BandSection, b: BandSection) -> BandSection:
    """One section of the entries of ``a`` (older rows) and ``b``, both memtable sections on
    the same base: a merge in one pass, allocating only the result (8 bytes per entry), where
    materialising and sorting the compact keys took ~40 (peak memory of the memtable's
    binary-counter merges and of a flush)."""
    if a.rowids is not None or b.rowids is not None or a.base != b.base:
        ka, ra = a
        kb, rb = b
        k, r = _by_key(np.concatenate([ka, kb]), np.concatenate([ra, rb]))
        return BandSection.from_sorted(k, (r - a.base).astype(np.uint32), base=a.base)
    # rows as they are (empty maps): by (key, row), so ``a``'s older rows come first among
    # equal keys
    none = np.zeros(0, np.int64)
    offs, keys, rows = _merge_mapped_kernel(
        a.offsets, a.keys, a.rows, none, b.offsets, b.keys, b.rows, none
    )
    return BandSection(offs, keys, rows, None, a.base)


@kernel(nogil=True)
def _merge_mapped_kernel(
    offs_a: npt.NDArray[np.uint64],
    keys_a: npt.NDArray[np.uint32],
    rows_a: npt.NDArray[np.uint32],
    map_a: npt.NDArray[np.int64],
    offs_b: npt.NDArray[np.uint64],
    keys_b: npt.NDArray[np.uint32],
    rows_b: npt.NDArray[np.uint32],
    map_b: npt.NDArray[np.int64],
) -> tuple[
    npt.NDArray[np.uint64], npt.NDArray[np.uint32], npt.NDArray[np.uint32]
]:  # pragma: no cover (numba)
    """Merge two sections group by group into one whose rows are ``map_x[row]`` (an empty
    map: the rows as they are), by (key, mapped row); an entry whose mapped row is negative
    is left out. Each input must be sorted by (key, mapped row) in a group, which a map that
    increases with the row keeps. :func:`neardup.index.reference.merge_mapped_reference` is the
    NumPy twin."""
    ga = offs_a.size - 1
    gb = offs_b.size - 1
    ng = max(ga, gb)
    n = keys_a.size + keys_b.size
    offs = np.zeros(ng + 1, np.uint64)
    keys = np.empty(n, np.uint32)
    rows = np.empty(n, np.uint32)
    ida = map_a.size == 0
    idb = map_b.size == 0
    o = 0
    for g in range(ng):
        offs[g] = o
        i = np.int64(offs_a[g]) if g < ga else np.int64(0)
        ie = np.int64(offs_a[g + 1]) if g < ga else np.int64(0)
        j = np.int64(offs_b[g]) if g < gb else np.int64(0)
        je = np.int64(offs_b[g + 1]) if g < gb else np.int64(0)
        ra = np.int64(-1)
        rb = np.int64(-1)
        while True:
            while i < ie:  # the next kept entry of a
                ra = np.int64(rows_a[i]) if ida else map_a[rows_a[i]]
                if ra >= 0:
                    break
                i += 1
            while j < je:
                rb = np.int64(rows_b[j]) if idb else map_b[rows_b[j]]
                if rb >= 0:
                    break
                j += 1
            if i >= ie and j >= je:
                break
            if j >= je or (
                i < ie and (keys_a[i] < keys_b[j] or (keys_a[i] == keys_b[j] and ra < rb))
            ):
                keys[o] = keys_a[i]
                rows[o] = np.uint32(ra)
                i += 1
            else:
                keys[o] = keys_b[j]
                rows[o] = np.uint32(rb)
                j += 1
            o += 1
    offs[ng] = o
    return offs, keys[:o], rows[:o]


def merge_mapped(
    sections: Sequence[BandSection | PackedSection], maps: Sequence[npt.NDArray[np.int64]]
) -> BandSection:
    """One section of the entries of ``sections`` with their rows renamed: ``maps[k][row]`` is
    the new row of section ``k``'s ``row`` (its position in the merged segment), negative for a
    row left out (deleted). Every map must increase over the rows it keeps (a merged segment
    keeps its inputs' rows in row-id order), so each input stays sorted: two sections merge as
    sorted runs in one pass, allocating the output only, and three or more (or packed ones, a
    segment's: :class:`PackedSection`, unpacked a group at a time) group by group, each input's
    entries of the group a run of (key, row) words, the runs merged (:func:`_merge_groups`);
    neither materialises, searches and sorts the compact keys of every entry
    (``benchmarks/bench_merge.py`` measures them).

    Raises
    ------
    ValueError
        A map that does not increase over its kept rows, or shorter than its section's rows.
    """
    if len(sections) != len(maps):
        raise ValueError(f"{len(sections)} sections for {len(maps)} maps")
    if not sections:
        return BandSection.empty()
    mapped: list[npt.NDArray[np.int64]] = []
    for sec, m in zip(sections, maps, strict=True):
        m = np.ascontiguousarray(m, np.int64)
        kept = m[m >= 0]
        if len(kept) > 1 and not bool(np.all(kept[1:] > kept[:-1])):
            raise ValueError("a row map must increase over the rows it keeps")
        top = sec.max_row() if isinstance(sec, PackedSection) else int(sec.rows.max(initial=0))
        if len(sec) and (not len(m) or top >= len(m)):
            raise ValueError(f"a map of {len(m)} rows for a section naming row {top}")
        mapped.append(m)
    plain = [sec for sec in sections if isinstance(sec, BandSection)]
    if len(sections) > 2 or len(plain) < len(sections):
        return _merge_groups(sections, mapped)
    none = np.zeros(0, np.int64)
    empty = BandSection.empty()
    nothing = (empty.offsets, empty.keys, empty.rows, none)
    # one or two runs: merged in one pass by the kernel
    level = [(sec.offsets, sec.keys, sec.rows, m) for sec, m in zip(plain, mapped, strict=True)]
    offs, keys, rows = _merge_mapped_kernel(*level[0], *(level[1] if len(level) > 1 else nothing))
    return BandSection(offs, keys, rows, None, 0)


def _merge_groups(
    sections: Sequence[BandSection | PackedSection], maps: Sequence[npt.NDArray[np.int64]]
) -> BandSection:
    """:func:`merge_mapped` of three or more sections: each group's kept entries of every
    section as one ``key << 32 | mapped row`` word each, one sorted run per section (a
    section's group is sorted by (key, row) and its map increases), merged by
    :func:`_merge_runs`: every entry is copied twice and compared with the head of each other
    run, where sorting the group's words cost a vectorised sort of them (and merging the runs
    pairwise as a balanced tree copied each about log2(k) times, into a fresh array each round;
    ``benchmarks/bench_merge.py`` measures them). Rows are unique, so (key, row) orders the
    words as the runs' merge would. From :data:`_MERGE_RUNS_MAX` runs in a group (a head
    compared with every other costs more than the sort) the group's words are sorted."""
    ng = max(len(sec.offsets) - 1 for sec in sections)
    total = sum(len(sec) for sec in sections)
    keys = np.empty(total, np.uint32)
    rows = np.empty(total, np.uint32)
    offs = np.zeros(ng + 1, np.uint64)
    sizes = np.zeros(ng, np.int64)  # each group's entries over the sections
    for sec in sections:
        o = sec.offsets.astype(np.int64)
        sizes[: o.size - 1] += o[1:] - o[:-1]
    buf = np.empty(int(sizes.max()) if ng else 0, np.uint64)  # one group's words at a time
    bounds = np.zeros(len(sections) + 1, np.int64)  # where each non-empty run starts, then n
    at = 0
    for g in range(ng):
        n = 0
        runs = 0
        for sec, m in zip(sections, maps, strict=True):
            if g + 1 >= len(sec.offsets):
                continue
            if isinstance(sec, PackedSection):
                gk, gr = unpack_group(sec, g)
                got = _group_words(gk, gr, m, 0, len(gk), buf, n)
            else:
                lo, hi = int(sec.offsets[g]), int(sec.offsets[g + 1])
                got = _group_words(sec.keys, sec.rows, m, lo, hi, buf, n)
            if got > n:
                bounds[runs] = n
                runs += 1
                n = got
        bounds[runs] = n
        if runs < _MERGE_RUNS_MAX:
            _merge_runs(buf, bounds[: runs + 1], keys, rows, at)
        else:
            w = buf[:n]
            w.sort()
            keys[at : at + n] = w >> _SHIFT32
            rows[at : at + n] = w & _LOW32
        at += n
        offs[g + 1] = at
    return BandSection(offs, keys[:at], rows[:at], None, 0)


#: runs in one group from which :func:`_merge_groups` sorts the group's words instead of
#: merging the runs (each output word is compared with every run's head:
#: ``benchmarks/bench_merge.py --segments`` times both)
_MERGE_RUNS_MAX = 64


@kernel(nogil=True)
def _merge_runs(
    words: npt.NDArray[np.uint64],
    bounds: npt.NDArray[np.int64],
    keys: npt.NDArray[np.uint32],
    rows: npt.NDArray[np.uint32],
    at: int,
) -> None:  # pragma: no cover (numba)
    """The sorted runs ``words[bounds[j]:bounds[j + 1]]`` (distinct words) merged into
    ``keys[at:]`` (each word's high half) and ``rows[at:]`` (its low half): the smallest head
    of the runs not yet used up, found by comparing them all (few runs); a run used up leaves
    the set, so no sentinel value is needed."""
    k = bounds.size - 1
    pos = bounds[:-1].copy()
    end = bounds[1:].copy()
    head = np.empty(k, np.uint64)
    run = np.arange(k)
    live = 0
    for j in range(k):
        if pos[j] < end[j]:
            head[live] = words[pos[j]]
            run[live] = j
            live += 1
    o = at
    while live > 0:
        best = 0
        w = head[0]
        for j in range(1, live):
            if head[j] < w:
                w = head[j]
                best = j
        keys[o] = np.uint32(w >> np.uint64(32))
        rows[o] = np.uint32(w & np.uint64(0xFFFFFFFF))
        o += 1
        r = run[best]
        p = pos[r] + 1
        pos[r] = p
        if p < end[r]:
            head[best] = words[p]
        else:  # the run is used up: the last live one takes its place
            live -= 1
            head[best] = head[live]
            run[best] = run[live]


@kernel(nogil=True)
def _group_words(
    keys: npt.NDArray[np.uint32],
    rows: npt.NDArray[np.uint32],
    row_map: npt.NDArray[np.int64],
    lo: int,
    hi: int,
    out: npt.NDArray[np.uint64],
    at: int,
) -> int:  # pragma: no cover (numba)
    """Entries ``lo..hi`` of a section as ``key << 32 | row_map[row]`` words from ``out[at]``
    on, those whose mapped row is negative left out; returns the next free position."""
    for i in range(lo, hi):
        r = row_map[rows[i]]
        if r >= 0:
            out[at] = (np.uint64(keys[i]) << np.uint64(32)) | np.uint64(r)
            at += 1
    return at


class Unsorted:
    """A run of (compact key, row id) entries in insertion order, not sorted: a memtable's
    append buffer as :func:`lookup` searches it. Every query key is found by a scan of the
    entries (:func:`_match_unsorted`), so a buffer that changes after every single-document
    insert is not sorted again before every single-document search. Rows come in row-id
    order, so a bucket's rows come out oldest first, as from a sorted run."""

    __slots__ = ("keys", "rids")

    def __init__(self, keys: npt.NDArray[np.uint64], rids: npt.NDArray[np.int64]) -> None:
        self.keys = keys
        self.rids = rids

    def __len__(self) -> int:
        return len(self.keys)


_FIB = np.uint64(0x9E3779B97F4A7C15)  # 2**64 / golden ratio: a multiplicative hash


@kernel(nogil=True)
def _match_unsorted(
    keys: npt.NDArray[np.uint64], rids: npt.NDArray[np.int64], uk: npt.NDArray[np.uint64]
) -> tuple[
    npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]
]:  # pragma: no cover (numba)
    """(first, end, rows): the rows of the entries whose key is in the sorted distinct keys
    ``uk``, grouped by key in ``uk``'s order and in entry order within a key (key ``q``'s:
    ``rows[first[q]:end[q]]``). The query keys go into an open-addressing table of at least
    twice their number, so an entry costs one probe or two (a binary search per entry
    mispredicts a branch at most of its steps)."""
    n, nu = keys.size, uk.size
    bits = 4
    while (1 << bits) < 2 * nu:
        bits += 1
    mask = (1 << bits) - 1
    shift = np.uint64(64 - bits)
    slot_key = np.zeros(mask + 1, np.uint64)
    slot_q = np.full(mask + 1, -1, np.int64)
    for q in range(nu):
        h = np.int64((uk[q] * _FIB) >> shift)
        while slot_q[h] >= 0:
            h = (h + 1) & mask
        slot_key[h] = uk[q]
        slot_q[h] = q
    which = np.empty(n, np.int64)
    start = np.zeros(nu + 1, np.int64)
    for i in range(n):
        k = keys[i]
        h = np.int64((k * _FIB) >> shift)
        w = -1
        while slot_q[h] >= 0:
            if slot_key[h] == k:
                w = slot_q[h]
                break
            h = (h + 1) & mask
        which[i] = w
        if w >= 0:
            start[w + 1] += 1
    for q in range(nu):
        start[q + 1] += start[q]
    first = np.empty(nu, np.int64)
    end = np.empty(nu, np.int64)
    for q in range(nu):
        first[q] = start[q]
        end[q] = start[q]
    rows = np.empty(start[nu], np.int64)
    for i in range(n):
        q = which[i]
        if q >= 0:
            rows[end[q]] = rids[i]
            end[q] += 1
    return first, end, rows


def lookup(
    runs: Sequence[Run],
    queries: npt.NDArray[np.uint64],
    cap: int | None,
) -> list[npt.NDArray[np.int64]]:
    """Row ids sharing a compact key with each query (``queries`` (q, bands) compact keys; rows
    of :data:`~neardup.fingerprint.minhash.NO_KEYS` find nothing), unique and sorted per query.
    ``runs``: sorted (compact key, row id) arrays or :class:`BandSection` objects. The valve: a
    bucket of more than ``2 * cap`` rows over all runs gives its ``cap`` smallest and ``cap``
    largest row ids (``cap`` None: every row).

    Vectorised over the queries: each distinct query key is searched once per run, in sorted
    order (neighbouring searches touch the same cache lines), the buckets are gathered with
    array arithmetic and only buckets over the cap are walked in Python; equal to
    :func:`neardup.index.reference.lookup_reference` (tests/online/test_online_lsh.py)."""
    q, nb = queries.shape if queries.ndim == 2 else (0, 0)
    if q == 0:
        return []
    empty = np.zeros(0, np.int64)
    flat = queries.ravel()
    valid = np.flatnonzero(flat != NO_KEYS)
    if not valid.size:
        return [empty] * q
    inv: npt.NDArray[np.int64] | None = None
    if q == 1:  # a single request: only the union of its keys' rows is wanted (NumPy's hash
        # np.unique costs more than a sort of a request's few dozen keys)
        uk = unique_sorted(flat[valid])
    else:  # sorted distinct query keys; a big check's column by column on threads
        by_col = unique_by_column(queries, valid) if valid.size >= _PARALLEL_UNIQUE else None
        uk, inv = by_col if by_col is not None else unique_inverse(flat[valid])
    nu = uk.size
    found: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], Any]] = []
    grouped: list[tuple[SectionGroup, GroupHits]] = []
    total = np.zeros(nu, np.int64)
    for run in runs:
        if not len(run[0] if isinstance(run, tuple) else run):
            continue
        if isinstance(run, SectionGroup):  # every section in one call
            hits = run.search(uk)
            if len(hits):
                total += hits.totals(nu)
                grouped.append((run, hits))
            continue
        lo, hi, get = _search(run, uk)
        total += hi - lo
        found.append((lo, hi, get))
    big = total > 2 * cap if cap is not None else np.zeros(nu, bool)
    seg_u: list[npt.NDArray[np.int64]] = []  # distinct key index of each gathered row
    seg_r: list[npt.NDArray[np.int64]] = []
    for group, hits in grouped:
        gu, gr = group.gather(hits, big)
        if gu.size:
            seg_u.append(gu)
            seg_r.append(gr)
    for lo, hi, get in found:
        cnt = hi - lo
        cnt[big] = 0
        sel = np.flatnonzero(cnt)
        if not sel.size:
            continue
        c = cnt[sel]
        seg_u.append(np.repeat(sel, c))
        seg_r.append(get(_ranges(lo[sel], c)))
    if cap is not None and big.any():
        bu, br = _big_buckets(found, grouped, big, cap)
        seg_u.append(bu)
        seg_r.append(br)
    if not seg_u:
        return [empty] * q
    if inv is None:  # one query: its rows, unique and sorted
        return [unique_sorted(seg_r[0] if len(seg_r) == 1 else np.concatenate(seg_r))]
    # the gathered rows grouped by key (their order within a key does not matter: each
    # query's rows are sorted and made unique below)
    ku, kr = sorted_pairs(np.concatenate(seg_u), np.concatenate(seg_r))
    # each key's rows: a count, not a search per key (most of a big check's keys find none)
    per_key = np.bincount(ku, minlength=nu)
    ustart = np.zeros(nu + 1, np.int64)
    np.cumsum(per_key, out=ustart[1:])
    # every valid query entry gets its key's rows (found through a bool per key: a gather
    # from a small array)
    sel = np.flatnonzero((per_key > 0)[inv])
    if not sel.size:
        return [empty] * q
    at = inv[sel]
    c = per_key[at]
    qi = np.repeat(valid[sel] // nb, c)
    rr = kr[_ranges(ustart[at], c)]
    qi, rr = sorted_pairs(qi, rr)
    keep = np.ones(qi.size, bool)
    keep[1:] = (qi[1:] != qi[:-1]) | (rr[1:] != rr[:-1])
    qi, rr = qi[keep], rr[keep]
    bounds = np.searchsorted(qi, np.arange(q + 1)).tolist()
    return [rr[bounds[k] : bounds[k + 1]] for k in range(q)]


def unique_by_column(
    queries: npt.NDArray[np.uint64], valid: npt.NDArray[np.intp]
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.intp]] | None:
    """:func:`~neardup._arrays.unique_inverse` of ``queries.ravel()[valid]`` (``valid``: the
    positions of the entries other than :data:`NO_KEYS`), found column by column when each
    column is one group (:func:`columns_are_groups`): the distinct keys of a column are
    those of its 32-bit hashes, each column's radix-sorted with their row numbers
    (:func:`_distinct_columns`) on the kernel threads, the columns' results laid end to end
    (their groups are in column order). The smaller sorts cost less than one sort of every
    entry, run on every thread and never wait for the GIL: the check of a big batch against
    the store (``benchmarks/bench_seed.py``).

    None where it does not apply: a column that is not one group, or a row with keys in only
    some of its columns (the caller then takes :func:`~neardup._arrays.unique_inverse`).
    Equal to it wherever it applies (tests/index/test_bands.py)."""
    q, nb = queries.shape
    has = np.flatnonzero(queries[:, 0] != NO_KEYS)
    n = int(has.size)
    if n < 2 or nb == 0 or valid.size != n * nb:
        return None
    ent = np.ascontiguousarray(queries if n == q else queries[has], np.uint64)
    inv = np.empty((n, nb), np.intp)
    distinct = np.empty((nb, n), np.uint64)
    count = np.zeros(nb, np.int64)
    grouped = np.ones(nb, np.bool_)
    run_ranges(_distinct_columns, nb, ent, inv, distinct, count, grouped)
    if not grouped.all():
        return None
    start = np.zeros(nb, np.intp)
    np.cumsum(count[:-1], out=start[1:])
    inv += start
    return np.concatenate([distinct[j, : count[j]] for j in range(nb)]), inv.reshape(-1)


@kernel(nogil=True)
def _distinct_columns(
    lo: int,
    hi: int,
    ent: npt.NDArray[np.uint64],
    inv: npt.NDArray[np.intp],
    distinct: npt.NDArray[np.uint64],
    count: npt.NDArray[np.int64],
    grouped: npt.NDArray[np.bool_],
) -> None:  # pragma: no cover (numba)
    """Columns ``lo..hi`` of :func:`unique_by_column`: column ``j``'s distinct keys into
    ``distinct[j, :count[j]]`` (sorted), each entry's rank among them into ``inv[:, j]``;
    ``grouped[j]`` False (and nothing else written) where a key of the column is not of group
    ``j``. The column's 32-bit hashes are sorted with their row numbers by the batch join's
    stable radix sort (:func:`~neardup.index._batch_kernels.radix_order`): without the GIL,
    where NumPy's sort and ufuncs took it between calls (a dozen a column), so the writer's
    check waited on a preparing thread."""
    n = ent.shape[0]
    h = np.empty(n, np.uint64)
    r = np.empty(n, np.int64)
    tmp_h = np.empty(n, np.uint64)
    tmp_r = np.empty(n, np.int64)
    hist = np.empty(RADIX_BINS, np.int64)
    low = np.uint64(0xFFFFFFFF)
    for j in range(lo, hi):
        g = np.uint64(j)
        ok = True
        for i in range(n):
            v = ent[i, j]
            if (v >> np.uint64(32)) != g:
                ok = False
                break
            h[i] = v & low
            r[i] = i
        if not ok:
            grouped[j] = False
            continue
        radix_order(h, r, np.uint64(0), low, 32, tmp_h, tmp_r, hist)
        k = -1
        prev = np.uint64(0)
        top = g << np.uint64(32)
        for i in range(n):
            v = h[i]
            if k < 0 or v != prev:
                k += 1
                distinct[j, k] = top | v
                prev = v
            inv[r[i], j] = k
        count[j] = k + 1


#: query entries (queries × bands) from which :func:`lookup` finds its distinct keys column
#: by column (:func:`unique_by_column`): below it one sort costs less than the threads' wake-ups
_PARALLEL_UNIQUE = 200_000


def _ends(
    lo: npt.NDArray[np.int64], hi: npt.NDArray[np.int64], cap: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(bucket, first entry, count) of the parts of buckets ``[lo, hi)`` the valve reads: of a
    bucket of more than ``2 * cap`` entries its first ``cap`` and its last ``cap`` (its oldest
    and newest rows: equal keys lie in row order), of a smaller one all; ``bucket`` indexes
    ``lo``; empty buckets left out."""
    cnt = hi - lo
    over = np.flatnonzero(cnt > 2 * cap)
    bucket = np.concatenate([np.arange(cnt.size), over])
    starts = np.concatenate([lo, hi[over] - cap])
    counts = np.concatenate([np.where(cnt > 2 * cap, cap, cnt), np.full(over.size, cap)])
    keep = counts > 0
    return bucket[keep], starts[keep], counts[keep]


def _big_buckets(
    found: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], Any]],
    grouped: list[tuple[SectionGroup, GroupHits]],
    big: npt.NDArray[np.bool_],
    cap: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(key index, row id) of what the valve keeps of the keys ``big`` marks (over ``2 * cap``
    entries over all runs): the ``cap`` smallest and ``cap`` largest distinct row ids of each,
    read from each run's and section's bucket ends (:func:`_ends`). Array operations for all
    such keys at once: a store whose buckets fill towards the cap has hundreds of them in a
    check of 2,000 documents, and a Python loop over them grew with the store
    (``benchmarks/bench_incremental.py``)."""
    us: list[npt.NDArray[np.int64]] = []
    rs: list[npt.NDArray[np.int64]] = []
    keys = np.flatnonzero(big)
    for lo, hi, get in found:
        bucket, starts, counts = _ends(lo[keys], hi[keys], cap)
        if counts.size:
            us.append(np.repeat(keys[bucket], counts))
            rs.append(np.asarray(get(_ranges(starts, counts)), np.int64))
    for group, hits in grouped:
        sel = np.flatnonzero(big[hits.key])
        if not sel.size:
            continue
        bucket, starts, counts = _ends(hits.lo[sel], hits.hi[sel], cap)
        at = sel[bucket]
        parts = GroupHits(hits.section[at], hits.key[at], starts, starts + counts)
        gu, gr = group.gather(parts, np.zeros(big.size, np.bool_))
        us.append(gu)
        rs.append(gr)
    u = np.concatenate(us)
    r = np.concatenate(rs)
    u, r = sorted_pairs(u, r)
    new = np.ones(u.size, np.bool_)
    new[1:] = (u[1:] != u[:-1]) | (r[1:] != r[:-1])
    u, r = u[new], r[new]
    first = np.flatnonzero(np.r_[True, u[1:] != u[:-1]])
    size = np.diff(np.r_[first, u.size])
    rank = np.arange(u.size) - np.repeat(first, size)
    per = np.repeat(size, size)
    keep = (rank < cap) | (rank >= per - cap)
    return u[keep], r[keep]


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


def _ages(runs: Sequence[BandSection]) -> list[tuple[int, int]]:
    """(smallest, largest) row id of each section."""
    return [(int(x.rows.min()) + x.base, int(x.rows.max()) + x.base) for x in runs]


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
    :data:`NO_KEYS`): true for plans of up to 3 rows, whose group is the band."""
    cols = np.arange(ent.shape[1], dtype=np.uint64) << _SHIFT32
    return bool((((ent & ~_LOW32) == cols) | (ent == NO_KEYS)).all())


def section_from_rows(
    ent: npt.NDArray[np.uint64], rowids: npt.NDArray[np.int64], base: int
) -> BandSection:
    """The :class:`BandSection` (rows as offsets from ``base``) of the compact keys ``ent``
    (n, bands) of rows ``rowids``, when :func:`columns_are_groups`: each column is one group,
    sorted by one plain sort of ``h32 << 32 | row offset`` (equal keys by row id), written
    into the output; no 64-bit temporary of all entries. Rows of :data:`NO_KEYS` are left
    out. Equal to a section of the sorted :func:`flatten` (tests/store/test_store_bands.py)."""
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
    run_ranges(columns, nb, min_items=1 if n >= _PARALLEL_SORT_ROWS else max(1, nb))
    offsets = np.arange(nb + 1, dtype=np.uint64) * np.uint64(n)
    return BandSection(offsets, keys, rows, None, base)


#: rows from which :func:`section_from_rows` sorts its columns on several threads
_PARALLEL_SORT_ROWS = 20_000

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
_BUFFER_ADDS = 16


class BandIndex:
    """Rows by compact band key, in memory: sorted :class:`BandSection` runs of 8 bytes per
    entry and an append buffer (see the module). Rows are int64 ids; a row's keys are its
    ``bands`` compact keys (:func:`neardup.fingerprint.minhash.band_entries`; a row without
    tokens has :data:`~neardup.fingerprint.minhash.NO_KEYS` and is not indexed).

    >>> import numpy as np
    >>> idx = BandIndex()
    >>> idx.insert_many(np.array([10, 11, 12]), np.array([[1, 2], [1, 5], [7, 5]], np.uint64))
    >>> idx.query(np.array([1, 5], np.uint64)).tolist()
    [10, 11, 12]
    >>> idx.remove(11)
    >>> idx.pairs()
    (array([], dtype=int64), array([], dtype=int64))
    """

    def __init__(self, buffer: int = 1 << 15) -> None:
        self.buffer = int(buffer)
        self.sections: list[BandSection] = []
        self.base: int | None = None  # row id the sections' rows are offsets from
        self._buf_k: list[npt.NDArray[np.uint64]] = []
        self._buf_r: list[npt.NDArray[np.int64]] = []
        self._buf_n = 0
        self._sealed_buf: tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]] | None = None
        self._cat: Unsorted | None = None  # the buffer as one unsorted run (made on demand)
        # (the sections, them as one SectionGroup): remade when the sections change
        self._group: tuple[list[BandSection], SectionGroup] | None = None

    def __len__(self) -> int:
        return sum(len(r) for r in self.sections) + self._buf_n

    @property
    def nbytes(self) -> int:
        """Bytes held: 8 per sealed entry (plus group offsets), 16 per buffered entry."""
        return sum(r.nbytes for r in self.sections) + 16 * self._buf_n

    def insert(self, row: int, keys: npt.ArrayLike) -> None:
        """Index row ``row`` under its compact keys ``keys`` (bands,)."""
        self.insert_many(np.array([row], np.int64), np.asarray(keys, np.uint64).reshape(1, -1))

    def insert_many(self, rows: npt.ArrayLike, keys: npt.NDArray[np.uint64]) -> None:
        """Index rows ``rows`` (n,) under their compact keys ``keys`` (n, bands).

        An insert of at least ``buffer`` entries whose groups are their columns (plans of up to
        3 rows: every band's keys in its own column) becomes a section at once, column by
        column (:func:`section_from_rows`), instead of going through the append buffer (the
        store's log replay inserts a whole memtable)."""
        ent, rowids = np.asarray(keys, np.uint64), np.asarray(rows, np.int64)
        if ent.size >= self.buffer and ent.ndim == 2 and columns_are_groups(ent):
            self._add_rows(ent, np.asarray(rowids, np.int64))
            return
        k, r = flatten(ent, rowids)
        if not len(k):
            return
        self._check_span(int(r.min()), int(r.max()))
        self._buf_k.append(k)
        self._buf_r.append(r)
        self._buf_n += len(k)
        self._sealed_buf = self._cat = None
        # sealed after ``buffer`` entries or _BUFFER_ADDS inserts: every query scans the
        # buffer (Unsorted), and single-document groups would scan a full buffer per request
        if self._buf_n >= self.buffer or len(self._buf_k) >= _BUFFER_ADDS:
            self._seal()

    def _add_rows(self, ent: npt.NDArray[np.uint64], rowids: npt.NDArray[np.int64]) -> None:
        """A large insert as one section (see :meth:`insert_many`), merged in like a sealed
        buffer."""
        has = ent[:, 0] != NO_KEYS
        if not has.any():
            return
        r = rowids[has]
        self._check_span(int(r.min()), int(r.max()))
        if self._buf_n:  # older rows first: the runs hold increasing row ranges
            self._seal()
        assert self.base is not None
        run = section_from_rows(ent, rowids, self.base)
        while self.sections and len(self.sections[-1]) <= 2 * len(run):
            run = merge_sections(self.sections.pop(), run)
        self.sections.append(run)

    def _check_span(self, lo: int, hi: int) -> None:
        if self.base is None:
            self.base = lo
        elif lo < self.base:
            self._rebase(lo)
        if hi - self.base >= _MAX_SPAN:
            from ..errors import IndexStateError

            raise IndexStateError(
                f"the band index's rows span row ids {self.base}..{hi}, more than 2**32; "
                "flush the memtable more often (a smaller memtable_size)"
            )

    def _rebase(self, base: int) -> None:
        k, r = self.entries()
        self.clear()
        self.base = base
        if len(k):
            self.sections = [self._section(k, r)]

    def _section(self, k: npt.NDArray[np.uint64], r: npt.NDArray[np.int64]) -> BandSection:
        assert self.base is not None
        return BandSection.from_sorted(k, (r - self.base).astype(np.uint32), base=self.base)

    def _buffer(self) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
        if self._sealed_buf is None:
            if not self._buf_n:
                self._sealed_buf = (np.zeros(0, np.uint64), np.zeros(0, np.int64))
            else:
                self._sealed_buf = _by_key(np.concatenate(self._buf_k), np.concatenate(self._buf_r))
        return self._sealed_buf

    def _seal(self) -> None:
        k, r = self._buffer()
        self._buf_k, self._buf_r, self._buf_n, self._sealed_buf = [], [], 0, None
        self._cat = None
        run = self._section(k, r)
        # binary counter: merge while the last run is not more than twice the new one
        while self.sections and len(self.sections[-1]) <= 2 * len(run):
            run = merge_sections(self.sections.pop(), run)
        self.sections.append(run)

    def runs(self) -> list[Run]:
        """The runs :func:`lookup` searches (with those of other indexes: the store's frozen
        memtable and segments): the sections as one :class:`SectionGroup` (one kernel call
        searches them all; searched one by one, each cost a search's fixed overhead on every
        single-document request: docs/store.md, *A single request's band look-ups*), and the
        buffer as it is (:class:`Unsorted`: sorting it again after every single-document
        insert cost more than scanning it)."""
        return [self._section_group(), self.buffer_run()]

    def buffer_run(self) -> Unsorted:
        """The append buffer as one :class:`Unsorted` run (the part of :meth:`runs` that is
        not a sorted section)."""
        if self._cat is None:
            if not self._buf_n:
                self._cat = Unsorted(np.zeros(0, np.uint64), np.zeros(0, np.int64))
            elif len(self._buf_k) == 1:
                self._cat = Unsorted(self._buf_k[0], self._buf_r[0])
            else:
                self._cat = Unsorted(np.concatenate(self._buf_k), np.concatenate(self._buf_r))
        return self._cat

    def _section_group(self) -> SectionGroup:
        self._group = group_of(self._group, self.sections)
        return self._group[1]

    def query(self, keys: npt.ArrayLike, cap: int | None = None) -> npt.NDArray[np.int64]:
        """Rows sharing a key with ``keys`` (bands,), unique and sorted (the valve at ``cap``,
        see :func:`lookup`)."""
        return self.query_many(np.asarray(keys, np.uint64).reshape(1, -1), cap)[0]

    def query_many(
        self, keys: npt.NDArray[np.uint64], cap: int | None = None
    ) -> list[npt.NDArray[np.int64]]:
        """:meth:`query` of each row of ``keys`` (q, bands)."""
        return lookup(self.runs(), keys, cap)

    def pairs(self, cap: int | None = None) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The self-join: every pair of rows sharing a key, ``(a, b)`` with ``a < b``, sorted
        and unique; with ``cap``, a bucket of more than ``cap + 1`` rows pairs each row with the
        bucket's first ``cap`` rows and its ``cap`` predecessors (the valve,
        :func:`~neardup.index.band_groups.group_pairs`; rows in id order)."""
        k, r = self.entries()  # by (key, row): a bucket's rows ascending
        members, bounds = band_groups(k)
        if bounds.size < 2:
            z = np.zeros(0, np.int64)
            return z, z.copy()
        longest = int(np.diff(bounds).max())
        a, b, _ = group_pairs(r[members], bounds, longest if cap is None else int(cap))
        code = np.unique(np.stack([a, b], axis=1), axis=0)
        return code[:, 0].copy(), code[:, 1].copy()

    def remove(self, row: int) -> None:
        """Drop row ``row``'s entries."""
        self.remove_many(np.array([row], np.int64))

    def entries(self) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
        """Every (compact key, row id), sorted. Changes nothing (a flush reads a frozen
        memtable's entries while the writer still searches it). The runs hold increasing row
        ranges (the oldest first, each sorted by (key, row)), so they are merged section by
        section (:func:`merge_sections`: 8 bytes per entry) and materialised once; rows re-added
        out of order (a rebase) take the general sort."""
        runs: list[BandSection] = [r for r in self.sections if len(r)]
        k, r = self._buffer()
        if len(k):
            runs.append(self._section(k, r))
        if not runs:
            return np.zeros(0, np.uint64), np.zeros(0, np.int64)
        if all(a[1] < b[0] for a, b in itertools.pairwise(_ages(runs))):
            run = runs[0]
            for nxt in runs[1:]:
                run = merge_sections(run, nxt)
            k, r = run
            return k, r
        parts = [tuple(x) for x in runs]
        return sort_entries(
            np.concatenate([x[0] for x in parts]), np.concatenate([x[1] for x in parts])
        )

    def section(self) -> BandSection:
        """Every entry as one section (rows as offsets from :attr:`base`), what the store's
        flush writes (:func:`section_for_rows`): the runs merged section by section, newest
        first (the transient merges stay below the whole), never materialised as 64-bit
        (compact key, row id) arrays (16 bytes per entry, plus a 64-bit position array per
        segment, made the close's flush of a 1 M-row memtable peak at 3.66 GiB:
        benchmarks/bench_store.py --window). Changes nothing."""
        runs: list[BandSection] = [r for r in self.sections if len(r)]
        k, r = self._buffer()
        if len(k):
            runs.append(self._section(k, r))
        if not runs:
            return BandSection.empty()
        if all(a[1] < b[0] for a, b in itertools.pairwise(_ages(runs))):
            run = runs[-1]
            for older in reversed(runs[:-1]):
                run = merge_sections(older, run)
            return run
        return self._section(*self.entries())  # rows re-added out of order: the general sort

    def remove_many(self, rows: npt.ArrayLike) -> None:
        """Drop the entries of ``rows`` (the store: a failed sync's undo; retention in
        memory)."""
        rowids = np.asarray(rows, np.int64)
        if not len(rowids):
            return
        k, r = self.entries()
        keep = ~np.isin(r, np.asarray(rowids, np.int64))
        base = self.base
        self.clear()
        self.base = base
        if keep.any():
            self.sections = [self._section(k[keep], r[keep])]

    def clear(self) -> None:
        self.sections = []
        self.base = None
        self._buf_k, self._buf_r, self._buf_n, self._sealed_buf = [], [], 0, None
        self._cat = None
