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

The memtable's sealed runs and the segments' band-key sections are :class:`BandSection` objects
(:mod:`.band_section`, which also makes them from rows' keys), merged by :mod:`.band_merge`;
both are re-exported here.

The valve: a query's bucket (one band key) of more than ``2 * cap`` rows gives only its ``cap``
oldest and ``cap`` newest rows -- the band self-join's rule for a member that comes last
(:func:`neardup.index.band_groups.group_pairs`: each member with the bucket's first ``cap``
members and its ``cap`` predecessors), so a query against stored rows meets what the batch
pairs a late member of a large bucket with.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._arrays import sorted_pairs, span, unique_inverse, unique_sorted
from .._jit import kernel
from .._threads import run_ranges
from ..fingerprint.minhash import NO_KEYS
from .band_groups import band_groups, group_pairs
from .band_merge import merge_mapped, merge_sections
from .band_packed import PackedSection
from .band_section import (
    _MAX_SPAN,
    BandSection,
    _by_key,
    _column_scratch,
    _sort_column,
    columns_are_groups,
    flatten,
    section_for_rows,
    section_from_rows,
    sections_for_rows,
    sort_entries,
)
from .band_stream import STREAM_ENTRIES, MergedSection
from .section_search import (
    GroupHits,
    SectionGroup,
    _ranges,
    group_of,
    packed_search,
    section_search,
)

__all__ = [
    "STREAM_ENTRIES",
    "BandIndex",
    "BandSection",
    "MergedSection",
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
    :func:`neardup.index.reference.lookup_reference` (tests/online/test_online_lsh_sections.py)."""
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
    stable radix sort (:func:`~neardup.index.band_section._sort_column`): without the GIL,
    where NumPy's sort and ufuncs took it between calls (a dozen a column), so the writer's
    check waited on a preparing thread."""
    n = ent.shape[0]
    h, r, tmp_h, tmp_r, hist = _column_scratch(n)
    for j in range(lo, hi):
        if not _sort_column(ent, j, True, h, r, tmp_h, tmp_r, hist):
            grouped[j] = False
            continue
        k = -1
        prev = np.uint64(0)
        top = np.uint64(j) << np.uint64(32)
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


def _ages(runs: Sequence[BandSection]) -> list[tuple[int, int]]:
    """(smallest, largest) row id of each section."""
    return [(int(x.rows.min()) + x.base, int(x.rows.max()) + x.base) for x in runs]


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
        self._check_span(*span(r))
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
        self._check_span(*span(r))
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
