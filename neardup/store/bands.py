"""The MinHash-LSH candidate channel of the store: band keys per row, searchable by key.

Each document with tokens has ``plan.bands`` band keys (the batch pipeline's
:mod:`neardup.fingerprint.minhash` signatures and band keys, so a key here stands for the key
``neardup dedup`` groups by). The store keeps a *compact key* per (row, band)
(:func:`band_entries`): ``group << 32 | h32``, where ``group`` is the band (the top 16 bits of
the band's 64-bit entry key, :func:`entry_keys`) and ``h32`` 32 bits of a mix of that entry key.
Two rows with the same band key have the same compact key; two with different ones share it
with probability 2**-32 per band and row pair, a false collision that the caller rejects: the
agreement filter compares the signatures themselves, band by band
(:meth:`neardup.online.decide.Decider._lsh_union`), so decisions stay the batch pipeline's.

:class:`BandSection` keeps compact keys grouped by band: a table of group offsets, then per
entry the 32-bit ``h32`` (sorted within its group) and a 32-bit row (a position in a segment, or
an offset from the memtable's first row id): 8 bytes per entry, the layout of a version-3
segment's band-key section (:mod:`neardup.store.segment`), memory-mapped there.
:class:`BandRuns` (the memtable's part) keeps an append buffer sealed every ``buffer`` entries
into sections merged like a binary counter, so adds cost O(log n) amortised and a lookup is one
``searchsorted`` per group and section.

:func:`lookup` bounds the work per query: of a bucket (one band key) with more than
``2 * cap`` rows only the ``cap`` oldest and ``cap`` newest rows are candidates, as the batch
pipeline pairs a late member of a large bucket with the bucket's first ``cap`` members and its
``cap`` predecessors.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from .. import _jit  # noqa: F401  (before any @njit: kernels cached outside the package)

__all__ = [
    "LOG_KEYS_FULL",
    "LOG_KEYS_H32",
    "LOG_KEYS_NONE",
    "BandRuns",
    "BandSection",
    "band_entries",
    "by_key_reference",
    "columns_are_groups",
    "compact_keys",
    "entry_keys",
    "keys_from_log",
    "log_keys",
    "lookup",
    "lookup_reference",
    "merge_sections",
    "merge_sections_reference",
    "section_for_rows",
    "section_from_rows",
    "section_search_reference",
]

_BAND_SHIFT = np.uint64(48)


def entry_keys(keys: npt.NDArray[np.uint64], rows: int) -> npt.NDArray[np.uint64]:
    """Entry keys of band keys ``keys`` (bands, n): the band folded into the key (see module)."""
    from ..fingerprint.minhash import mix64

    nb = keys.shape[0]
    band = np.arange(nb, dtype=np.uint64)[:, None]
    if rows * 16 <= 48 and nb < (1 << 16):
        return keys | (band << _BAND_SHIFT)
    return mix64(keys) ^ mix64(band + np.uint64(0x9E3779B97F4A7C15))


def band_entries(
    sig: npt.NDArray[np.uint16], usable: npt.NDArray[np.bool_], plan: Any
) -> npt.NDArray[np.uint64]:
    """Compact keys (n, bands) of signatures ``sig`` (n, hashes) under ``plan``
    (:func:`compact_keys` of the :func:`entry_keys`); rows that are not ``usable`` (no tokens:
    never candidates, as in the batch pipeline) get an empty key set, marked by
    :data:`NO_KEYS` in every column."""
    from ..fingerprint.minhash import BAND_BLOCK, band_key_block, band_keys

    n = sig.shape[0]
    out = np.empty((plan.bands, n), np.uint64)
    for b0 in range(0, plan.bands, BAND_BLOCK):
        b1 = min(plan.bands, b0 + BAND_BLOCK)
        if plan.rows <= 4:
            out[b0:b1] = band_key_block(sig, b0, b1, plan.rows)
        else:
            for b in range(b0, b1):
                out[b] = band_keys(sig, b, plan.rows)
    ent = compact_keys(entry_keys(out, plan.rows).T)
    ent[~np.asarray(usable, bool)] = NO_KEYS
    return ent


_LOW32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)


def compact_keys(entries: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Compact keys (``group << 32 | h32``, see the module) of 64-bit entry keys: ``group`` is
    the entry key's top 16 bits (the band, for plans of up to 3 rows), ``h32`` the low 32 bits
    of :func:`~neardup.fingerprint.minhash.mix64` of the entry key."""
    from ..fingerprint.minhash import mix64

    e = np.asarray(entries, np.uint64)
    return ((e >> _BAND_SHIFT) << _SHIFT32) | (mix64(e) & _LOW32)


#: entry key of a row without band keys (no tokens; never stored, never looked up)
NO_KEYS = np.uint64(0xFFFFFFFFFFFFFFFF)


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


#: a sorted run: (compact keys u64, row ids i64) arrays, or a :class:`BandSection`
Run = Any


def _search(
    run: Run, uk: npt.NDArray[np.uint64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], Any]:
    """(first, end) entry of each sorted distinct compact key ``uk`` in ``run``, and a function
    from entry positions to row ids."""
    if isinstance(run, BandSection):
        lo, hi = _section_search_kernel(run.offsets, run.keys, uk)
        return lo, hi, run.row_ids
    keys, rids = run
    lo = np.searchsorted(keys, uk, "left")
    hi = np.searchsorted(keys, uk, "right")
    return lo, hi, lambda at: np.asarray(rids[at], np.int64)


@njit(cache=True, nogil=True)
def _section_search_kernel(
    offsets: npt.NDArray[np.uint64], keys: npt.NDArray[np.uint32], uk: npt.NDArray[np.uint64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:  # pragma: no cover (numba)
    """(first, end) entry of each sorted compact key ``uk`` in a :class:`BandSection`: inside
    its group's range, a galloping search from where the previous key of the group ended (the
    keys are sorted, so a large batch walks each group forward with local steps instead of
    starting every binary search at the top; :func:`section_search_reference` is the NumPy
    twin)."""
    n = uk.size
    lo = np.zeros(n, np.int64)
    hi = np.zeros(n, np.int64)
    ng = offsets.size - 1
    prev_g = np.int64(-1)
    start = np.int64(0)
    for q in range(n):
        g = np.int64(uk[q] >> np.uint64(32))
        if g >= ng:
            continue
        low = np.uint32(uk[q] & np.uint64(0xFFFFFFFF))
        end = np.int64(offsets[g + 1])
        if g != prev_g:
            start = np.int64(offsets[g])
            prev_g = g
        # gallop: the first entry >= low lies in [a, b)
        a = start
        step = np.int64(1)
        while a + step <= end and keys[a + step - 1] < low:
            a += step
            step <<= 1
        b = min(a + step, end)
        while a < b:
            m = (a + b) >> 1
            if keys[m] < low:
                a = m + 1
            else:
                b = m
        lo[q] = a
        b = a
        step = np.int64(1)
        while b + step <= end and keys[b + step - 1] <= low:
            b += step
            step <<= 1
        e = min(b + step, end)
        while b < e:
            m = (b + e) >> 1
            if keys[m] <= low:
                b = m + 1
            else:
                e = m
        hi[q] = b
        start = b
    return lo, hi


@njit(cache=True, nogil=True)
def _merge_sections_kernel(
    offs_a: npt.NDArray[np.uint64],
    keys_a: npt.NDArray[np.uint32],
    rows_a: npt.NDArray[np.uint32],
    offs_b: npt.NDArray[np.uint64],
    keys_b: npt.NDArray[np.uint32],
    rows_b: npt.NDArray[np.uint32],
) -> tuple[
    npt.NDArray[np.uint64], npt.NDArray[np.uint32], npt.NDArray[np.uint32]
]:  # pragma: no cover (numba)
    """Merge two sections (rows relative to one base) group by group, by key, ``a``'s entries
    first among equal keys (``a`` holds the older rows): the output section and nothing else
    is allocated (:func:`merge_sections_reference` is the NumPy twin)."""
    ga = offs_a.size - 1
    gb = offs_b.size - 1
    ng = max(ga, gb)
    n = keys_a.size + keys_b.size
    offs = np.zeros(ng + 1, np.uint64)
    keys = np.empty(n, np.uint32)
    rows = np.empty(n, np.uint32)
    o = 0
    for g in range(ng):
        offs[g] = o
        i = np.int64(offs_a[g]) if g < ga else np.int64(0)
        ie = np.int64(offs_a[g + 1]) if g < ga else np.int64(0)
        j = np.int64(offs_b[g]) if g < gb else np.int64(0)
        je = np.int64(offs_b[g + 1]) if g < gb else np.int64(0)
        while i < ie and j < je:
            if keys_b[j] < keys_a[i]:
                keys[o] = keys_b[j]
                rows[o] = rows_b[j]
                j += 1
            else:
                keys[o] = keys_a[i]
                rows[o] = rows_a[i]
                i += 1
            o += 1
        while i < ie:
            keys[o] = keys_a[i]
            rows[o] = rows_a[i]
            i += 1
            o += 1
        while j < je:
            keys[o] = keys_b[j]
            rows[o] = rows_b[j]
            j += 1
            o += 1
    offs[ng] = o
    return offs, keys, rows


def merge_sections(a: BandSection, b: BandSection) -> BandSection:
    """One section of the entries of ``a`` (older rows) and ``b``, both memtable sections on
    the same base: a merge in one pass, allocating only the result (8 bytes per entry), where
    materialising and sorting the compact keys took ~40 (peak memory of the memtable's
    binary-counter merges and of a flush)."""
    if a.rowids is not None or b.rowids is not None or a.base != b.base:
        return merge_sections_reference(a, b)
    offs, keys, rows = _merge_sections_kernel(a.offsets, a.keys, a.rows, b.offsets, b.keys, b.rows)
    return BandSection(offs, keys, rows, None, a.base)


def merge_sections_reference(a: BandSection, b: BandSection) -> BandSection:
    """NumPy twin of :func:`merge_sections`: both materialised, one stable sort by key."""
    ka, ra = a
    kb, rb = b
    k, r = _by_key(np.concatenate([ka, kb]), np.concatenate([ra, rb]))
    return BandSection.from_sorted(k, (r - a.base).astype(np.uint32), base=a.base)


def section_search_reference(
    offsets: npt.NDArray[np.uint64], keys: npt.NDArray[np.uint32], uk: npt.NDArray[np.uint64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """NumPy twin of the section search: one ``searchsorted`` pair per group present in the
    sorted keys ``uk``."""
    lo = np.zeros(uk.size, np.int64)
    hi = np.zeros(uk.size, np.int64)
    groups, starts = np.unique(uk >> _SHIFT32, return_index=True)
    ends = [*starts[1:].tolist(), uk.size]
    for g, a, b in zip(groups.tolist(), starts.tolist(), ends, strict=True):
        if g + 1 >= len(offsets):
            continue
        o0, o1 = int(offsets[g]), int(offsets[g + 1])
        low = (uk[a:b] & _LOW32).astype(np.uint32)
        lo[a:b] = o0 + np.searchsorted(keys[o0:o1], low, "left")
        hi[a:b] = o0 + np.searchsorted(keys[o0:o1], low, "right")
    return lo, hi


def lookup(
    runs: Sequence[Run],
    queries: npt.NDArray[np.uint64],
    cap: int,
) -> list[npt.NDArray[np.int64]]:
    """Row ids sharing a compact key with each query (``queries`` (q, bands) compact keys; rows
    of :data:`NO_KEYS` find nothing), unique and sorted per query. ``runs``: sorted
    (compact key, row id) arrays or :class:`BandSection` objects. A bucket of more than
    ``2 * cap`` rows over all runs gives its ``cap`` smallest and ``cap`` largest row ids.

    Vectorised over the queries: each distinct query key is searched once per run, in sorted
    order (neighbouring searches touch the same cache lines), the buckets are gathered with
    array arithmetic and only buckets over the cap are walked in Python; equal to
    :func:`lookup_reference` (tests/online/test_online_lsh.py)."""
    q, nb = queries.shape if queries.ndim == 2 else (0, 0)
    if q == 0:
        return []
    empty = np.zeros(0, np.int64)
    flat = queries.ravel()
    valid = np.flatnonzero(flat != NO_KEYS)
    if not valid.size:
        return [empty] * q
    uk, inv = np.unique(flat[valid], return_inverse=True)  # sorted distinct query keys
    inv = inv.ravel()
    nu = uk.size
    found: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], Any]] = []
    total = np.zeros(nu, np.int64)
    for run in runs:
        if not len(run[0] if isinstance(run, tuple) else run):
            continue
        lo, hi, get = _search(run, uk)
        total += hi - lo
        found.append((lo, hi, get))
    big = total > 2 * cap
    seg_u: list[npt.NDArray[np.int64]] = []  # distinct key index of each gathered row
    seg_r: list[npt.NDArray[np.int64]] = []
    for lo, hi, get in found:
        cnt = hi - lo
        cnt[big] = 0
        sel = np.flatnonzero(cnt)
        if not sel.size:
            continue
        c = cnt[sel]
        seg_u.append(np.repeat(sel, c))
        seg_r.append(get(_ranges(lo[sel], c)))
    for u in np.flatnonzero(big).tolist():
        parts = []
        for lo, hi, get in found:
            a, b = int(lo[u]), int(hi[u])
            if a == b:
                continue
            if b - a > 2 * cap:
                parts.append(get(np.arange(a, a + cap)))
                parts.append(get(np.arange(b - cap, b)))
            else:
                parts.append(get(np.arange(a, b)))
        got = np.unique(np.concatenate(parts))
        if got.size > 2 * cap:
            got = np.concatenate([got[:cap], got[-cap:]])
        seg_u.append(np.full(got.size, u, np.int64))
        seg_r.append(np.asarray(got, np.int64))
    if not seg_u:
        return [empty] * q
    ku = np.concatenate(seg_u)
    kr = np.concatenate(seg_r)
    order = np.argsort(ku, kind="stable")
    kr = kr[order]
    ustart = np.searchsorted(ku[order], np.arange(nu + 1))
    # every valid query entry gets its key's rows
    c = np.diff(ustart)[inv]
    sel = np.flatnonzero(c)
    if not sel.size:
        return [empty] * q
    c = c[sel]
    qi = np.repeat(valid[sel] // nb, c)
    rr = kr[_ranges(ustart[inv[sel]], c)]
    order = np.lexsort((rr, qi))
    qi, rr = qi[order], rr[order]
    keep = np.ones(qi.size, bool)
    keep[1:] = (qi[1:] != qi[:-1]) | (rr[1:] != rr[:-1])
    qi, rr = qi[keep], rr[keep]
    bounds = np.searchsorted(qi, np.arange(q + 1)).tolist()
    return [rr[bounds[k] : bounds[k + 1]] for k in range(q)]


def _ranges(starts: npt.NDArray[np.int64], counts: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Concatenated ``arange(starts[k], starts[k] + counts[k])`` (counts > 0)."""
    ends = np.cumsum(counts)
    return np.repeat(starts - ends + counts, counts) + np.arange(int(ends[-1]), dtype=np.int64)


def lookup_reference(
    runs: Sequence[Run],
    queries: npt.NDArray[np.uint64],
    cap: int,
) -> list[npt.NDArray[np.int64]]:
    """:func:`lookup`, one query entry at a time (the twin the tests compare it with)."""
    q, nb = queries.shape if queries.ndim == 2 else (0, 0)
    out: list[list[npt.NDArray[np.int64]]] = [[] for _ in range(q)]
    if q == 0:
        return []
    runs = [tuple(r) if isinstance(r, BandSection) else r for r in runs]
    flat = queries.ravel()
    valid = flat != NO_KEYS
    found: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], Any]] = []
    total = np.zeros(flat.size, np.int64)
    for keys, rids in runs:
        if not len(keys):
            continue
        lo = np.searchsorted(keys, flat, "left")
        hi = np.searchsorted(keys, flat, "right")
        hi[~valid] = lo[~valid]
        total += hi - lo
        found.append((lo, hi, rids))
    hits = np.flatnonzero(total)
    for e in hits.tolist():
        qi = e // nb
        big = total[e] > 2 * cap
        parts = []
        for lo, hi, rids in found:
            a, b = int(lo[e]), int(hi[e])
            if a == b:
                continue
            if big and b - a > 2 * cap:
                parts.append(rids[a : a + cap])
                parts.append(rids[b - cap : b])
            else:
                parts.append(rids[a:b])
        got = np.concatenate(parts) if len(parts) > 1 else parts[0]
        if big:
            got = np.unique(got)
            got = np.concatenate([got[:cap], got[-cap:]]) if got.size > 2 * cap else got
        out[qi].append(np.asarray(got, np.int64))
    return [np.unique(np.concatenate(p)) if p else np.zeros(0, np.int64) for p in out]


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
    (:func:`by_key_reference`; tests/store/test_store_bands.py)."""
    n = len(keys)
    if n < _SMALL_SORT or n >= _MAX_SPAN:
        return by_key_reference(keys, rids)
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


def by_key_reference(
    keys: npt.NDArray[np.uint64], rids: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    """NumPy twin of :func:`_by_key`: one stable argsort of the keys."""
    order = np.argsort(keys, kind="stable")
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
    comb = np.empty(n, np.uint64)
    for j in range(nb):
        np.bitwise_and(ent[:, j], _LOW32, out=comb)
        comb <<= _SHIFT32
        comb |= off_u
        comb.sort()
        rows[j * n : (j + 1) * n] = comb  # the low halves (uint32 cast keeps them)
        comb >>= _SHIFT32
        keys[j * n : (j + 1) * n] = comb
    offsets = np.arange(nb + 1, dtype=np.uint64) * np.uint64(n)
    return BandSection(offsets, keys, rows, None, base)


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


#: how a row's band keys are written in a log record (:func:`log_keys`): no keys (the row had
#: no tokens), 32 bits per band (group = band), the whole 64-bit compact key per band
LOG_KEYS_NONE, LOG_KEYS_H32, LOG_KEYS_FULL = 0, 1, 2


def log_keys(ent: npt.NDArray[np.uint64]) -> list[bytes]:
    """Each row's compact keys ``ent`` (n, bands) as the bytes its log record carries, so the
    log's replay need not recompute MinHash from the text (:func:`keys_from_log` reads them):
    a kind byte, then the low 32 bits of each band's key (:data:`LOG_KEYS_H32`, when
    :func:`columns_are_groups`) or the whole keys (:data:`LOG_KEYS_FULL`), little-endian; a row
    without keys is :data:`LOG_KEYS_NONE` and zeros of the same length."""
    ent = np.asarray(ent, np.uint64)
    n, nb = ent.shape
    none = ent[:, 0] == NO_KEYS if nb else np.ones(n, bool)
    if columns_are_groups(ent):
        kind, body = LOG_KEYS_H32, (ent & _LOW32).astype("<u4")
    else:
        kind, body = LOG_KEYS_FULL, ent.astype("<u8")
    body[none] = 0
    width = 1 + body.itemsize * nb
    buf = np.empty((n, width), np.uint8)
    buf[:, 0] = np.where(none, LOG_KEYS_NONE, kind)
    buf[:, 1:] = body.view(np.uint8).reshape(n, width - 1)
    raw = buf.tobytes()
    return [raw[i : i + width] for i in range(0, n * width, width)]


def keys_from_log(blobs: Sequence[bytes], bands: int) -> npt.NDArray[np.uint64]:
    """Inverse of :func:`log_keys`: the compact keys (n, ``bands``) of logged rows.
    ``ValueError`` when a blob does not hold ``bands`` keys of a known kind."""
    n = len(blobs)
    out = np.empty((n, bands), np.uint64)
    if not n:
        return out
    h32, full = 1 + 4 * bands, 1 + 8 * bands
    lens = np.fromiter(map(len, blobs), np.int64, n)
    cols = np.arange(bands, dtype=np.uint64) << _SHIFT32
    for width, kind, dtype in ((h32, LOG_KEYS_H32, "<u4"), (full, LOG_KEYS_FULL, "<u8")):
        at = np.flatnonzero(lens == width)
        if not at.size:
            continue
        raw = b"".join(blobs[i] for i in at.tolist()) if at.size < n else b"".join(blobs)
        buf = np.frombuffer(raw, np.uint8).reshape(at.size, width)
        kinds = buf[:, 0]
        if not np.isin(kinds, (LOG_KEYS_NONE, kind)).all():
            raise ValueError(f"logged band keys of an unknown kind {sorted(set(kinds.tolist()))}")
        vals = np.ascontiguousarray(buf[:, 1:]).view(dtype).astype(np.uint64)
        if kind == LOG_KEYS_H32:
            vals |= cols
        vals[kinds == LOG_KEYS_NONE] = NO_KEYS
        out[at] = vals
    if ((lens != h32) & (lens != full)).any():
        raise ValueError(f"logged band keys do not hold {bands} bands")
    return out


#: a memtable's band rows are offsets from its first row id, in 32 bits
_MAX_SPAN = 1 << 32
#: adds an append buffer takes before it is sealed into a section
_BUFFER_ADDS = 16


class BandRuns:
    """In-memory (compact key, row id) pairs in sorted runs (the memtable's band keys):
    :class:`BandSection` objects of 8 bytes per entry, and an append buffer."""

    def __init__(self, buffer: int = 1 << 15) -> None:
        self.buffer = int(buffer)
        self.runs: list[BandSection] = []
        self.base: int | None = None  # row id the sections' rows are offsets from
        self._buf_k: list[npt.NDArray[np.uint64]] = []
        self._buf_r: list[npt.NDArray[np.int64]] = []
        self._buf_n = 0
        self._sealed_buf: tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]] | None = None

    def __len__(self) -> int:
        return sum(len(r) for r in self.runs) + self._buf_n

    @property
    def nbytes(self) -> int:
        """Bytes held: 8 per sealed entry (plus group offsets), 16 per buffered entry."""
        return sum(r.nbytes for r in self.runs) + 16 * self._buf_n

    def add(self, ent: npt.NDArray[np.uint64], rowids: npt.NDArray[np.int64]) -> None:
        """Add the compact keys ``ent`` (n, bands) of rows ``rowids``.

        An add of at least ``buffer`` entries whose groups are their columns (plans of up to 3
        rows: every band's keys in its own column) becomes a section at once, column by column
        (:func:`section_from_rows`), instead of going through the append buffer (the log's
        replay adds a whole memtable)."""
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
        self._sealed_buf = None
        # sealed after ``buffer`` entries or _BUFFER_ADDS adds: every lookup sorts the buffer,
        # and single-document groups would sort a full buffer per request
        if self._buf_n >= self.buffer or len(self._buf_k) >= _BUFFER_ADDS:
            self._seal()

    def _add_rows(self, ent: npt.NDArray[np.uint64], rowids: npt.NDArray[np.int64]) -> None:
        """A large add as one section (see :meth:`add`), merged in like a sealed buffer."""
        has = ent[:, 0] != NO_KEYS
        if not has.any():
            return
        r = rowids[has]
        self._check_span(int(r.min()), int(r.max()))
        if self._buf_n:  # older rows first: the runs hold increasing row ranges
            self._seal()
        assert self.base is not None
        run = section_from_rows(ent, rowids, self.base)
        while self.runs and len(self.runs[-1]) <= 2 * len(run):
            run = merge_sections(self.runs.pop(), run)
        self.runs.append(run)

    def _check_span(self, lo: int, hi: int) -> None:
        if self.base is None:
            self.base = lo
        elif lo < self.base:
            self._rebase(lo)
        if hi - self.base >= _MAX_SPAN:
            from ..errors import IndexStateError

            raise IndexStateError(
                f"the memtable's band keys span row ids {self.base}..{hi}, more than 2**32; "
                "flush the memtable more often (a smaller memtable_size)"
            )

    def _rebase(self, base: int) -> None:
        k, r = self.entries()
        self.clear()
        self.base = base
        if len(k):
            self.runs = [self._section(k, r)]

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
        run = self._section(k, r)
        # binary counter: merge while the last run is not more than twice the new one
        while self.runs and len(self.runs[-1]) <= 2 * len(run):
            run = merge_sections(self.runs.pop(), run)
        self.runs.append(run)

    def all_runs(self) -> list[Run]:
        return [*self.runs, self._buffer()]

    def lookup(self, queries: npt.NDArray[np.uint64], cap: int) -> list[npt.NDArray[np.int64]]:
        return lookup(self.all_runs(), queries, cap)

    def entries(self) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
        """Every (compact key, row id), sorted. Changes nothing (a flush reads a frozen
        memtable's entries while the writer still searches it). The runs hold increasing row
        ranges (the oldest first, each sorted by (key, row)), so they are merged section by
        section (:func:`merge_sections`: 8 bytes per entry) and materialised once; rows re-added
        out of order (a rebase) take the general sort."""
        runs: list[BandSection] = [r for r in self.runs if len(r)]
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
        """Every entry as one memtable section (rows as offsets from :attr:`base`), what a
        flush writes (:func:`section_for_rows`): the runs merged section by section, newest
        first (the transient merges stay below the whole), never materialised as 64-bit
        (compact key, row id) arrays (16 bytes per entry, plus a 64-bit position array per
        segment, made the close's flush of a 1 M-row memtable peak at 3.66 GiB:
        benchmarks/bench_store.py --window). Changes nothing."""
        runs: list[BandSection] = [r for r in self.runs if len(r)]
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

    def remove_rows(self, rowids: npt.NDArray[np.int64]) -> None:
        """Drop the entries of ``rowids`` (a failed sync's undo; retention in memory)."""
        if not len(rowids):
            return
        k, r = self.entries()
        keep = ~np.isin(r, np.asarray(rowids, np.int64))
        base = self.base
        self.clear()
        self.base = base
        if keep.any():
            self.runs = [self._section(k[keep], r[keep])]

    def clear(self) -> None:
        self.runs = []
        self.base = None
        self._buf_k, self._buf_r, self._buf_n, self._sealed_buf = [], [], 0, None
