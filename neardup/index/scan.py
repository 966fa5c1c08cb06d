"""The brute-force scan: Hamming search and self-join without tables, for any distance.

The permuted-table index (:func:`neardup.all_pairs`) is the right tool for small distances
(k <= 6 on 64 bits: a few tables, selective keys). Short texts need much larger candidate
distances (k around 18 of 64), where any exact table scheme degenerates into scanning whole
buckets; there a blocked brute-force scan (``popcount(a ^ b) <= k`` over every pair, numba;
its cost per pair is :data:`neardup.index.plan.SCAN_PAIR_NS`) is faster:
:func:`all_pairs_bruteforce`, :func:`bounded_pairs` (at most so many pairs, the distance lowered
exactly until they fit), :func:`candidate_pairs` (picks tables or the scan). :class:`BruteIndex`
is the range search over fixed arrays with the :class:`~neardup.index.HammingIndex` contract
(the online store's small runs and its ``NEARDUP_REFERENCE=store`` fallback);
:func:`merge_results` unions such results. :func:`neardup.index.reference.all_pairs_reference`
is the NumPy reference they are tested against.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .._jit import kernel, popcount64
from .._threads import kernel_threads, run_ranges
from ..errors import ConfigError
from ..fingerprint.distance import as_fingerprints, hamming_cdist

__all__ = [
    "BOUNDED_TABLES_MIN_N",
    "TABLES_MAX_DISTANCE",
    "BruteIndex",
    "Result",
    "all_pairs_bruteforce",
    "bounded_pairs",
    "candidate_pairs",
    "check_distance",
    "empty_pairs",
    "empty_result",
    "estimate_pairs_within",
    "merge_results",
    "sample_distance_hist",
]

#: up to this distance the permuted-table index is used, above it the brute-force scan
TABLES_MAX_DISTANCE = 6

Pairs = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]


def empty_pairs() -> Pairs:
    """No pairs: ``(a, b, distances)`` of length 0."""
    return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32)


def check_distance(k: int, bits: int) -> None:
    """Refuse a search distance outside ``[0, bits]`` (:class:`ConfigError`)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k <= bits:
        raise ConfigError(f"max_distance must be an int in [0, {bits}], got {k!r}")


@kernel(nogil=True)
def _count_rows(
    r0: int, r1: int, hi: np.ndarray, lo: np.ndarray, k: int, counts: np.ndarray
) -> None:  # pragma: no cover - numba
    # rows r0..r1-1 (run_ranges)
    n = hi.shape[0]
    kk = np.uint64(k)
    for i in range(r0, r1):
        xh = hi[i]
        xl = lo[i]
        c = 0
        for j in range(i + 1, n):
            if popcount64(xh ^ hi[j]) + popcount64(xl ^ lo[j]) <= kk:
                c += 1
        counts[i] = c


@kernel(nogil=True)
def _fill_rows(
    r0: int,
    r1: int,
    hi: np.ndarray,
    lo: np.ndarray,
    k: int,
    offsets: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    d: np.ndarray,
) -> None:  # pragma: no cover - numba
    n = hi.shape[0]
    kk = np.uint64(k)
    for i in range(r0, r1):
        xh = hi[i]
        xl = lo[i]
        p = offsets[i]
        for j in range(i + 1, n):
            dist = popcount64(xh ^ hi[j]) + popcount64(xl ^ lo[j])
            if dist <= kk:
                a[p] = i
                b[p] = j
                d[p] = dist
                p += 1


@kernel(nogil=True)
def _count_rows64(
    r0: int, r1: int, x: np.ndarray, k: int, counts: np.ndarray
) -> None:  # pragma: no cover - numba
    n = x.shape[0]
    kk = np.uint64(k)
    for i in range(r0, r1):
        xi = x[i]
        c = 0
        for j in range(i + 1, n):
            if popcount64(xi ^ x[j]) <= kk:
                c += 1
        counts[i] = c


@kernel(nogil=True)
def _fill_rows64(
    r0: int,
    r1: int,
    x: np.ndarray,
    k: int,
    offsets: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    d: np.ndarray,
) -> None:  # pragma: no cover - numba
    n = x.shape[0]
    kk = np.uint64(k)
    for i in range(r0, r1):
        xi = x[i]
        p = offsets[i]
        for j in range(i + 1, n):
            dist = popcount64(xi ^ x[j])
            if dist <= kk:
                a[p] = i
                b[p] = j
                d[p] = dist
                p += 1


def all_pairs_bruteforce(
    fingerprints: npt.ArrayLike, max_distance: int, *, workers: int = 1
) -> Pairs:
    """Every pair ``a < b`` with ``hamming <= max_distance``, sorted by (a, b): a parallel scan.

    O(n^2) popcounts (about 1.4 ns per pair per core on 64 bits); the output is identical for
    any ``workers`` and equals :func:`all_pairs_reference`.
    """
    fps = as_fingerprints(fingerprints)
    bits = 128 if fps.ndim == 2 else 64
    check_distance(max_distance, bits)
    n = fps.shape[0]
    if n < 2:
        return empty_pairs()
    if fps.ndim == 2:
        hi, lo = np.ascontiguousarray(fps[:, 0]), np.ascontiguousarray(fps[:, 1])
    else:
        hi, lo = np.ascontiguousarray(fps), np.zeros(0, np.uint64)
    with kernel_threads(workers):
        k = int(max_distance)
        counts = np.zeros(n, np.int64)
        if fps.ndim == 1:
            run_ranges(_count_rows64, n, hi, k, counts, min_items=64, tasks_per_thread=16)
        else:
            run_ranges(_count_rows, n, hi, lo, k, counts, min_items=64, tasks_per_thread=16)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        total = int(offsets[-1])
        a = np.empty(total, np.int64)
        b = np.empty(total, np.int64)
        d = np.empty(total, np.int32)
        if fps.ndim == 1:
            run_ranges(_fill_rows64, n, hi, k, offsets, a, b, d, min_items=64, tasks_per_thread=16)
        else:
            run_ranges(
                _fill_rows, n, hi, lo, k, offsets, a, b, d, min_items=64, tasks_per_thread=16
            )
    return a, b, d


@kernel(inline="always")
def _accumulate_hist(xi: Any, x: np.ndarray, j: int, h: np.ndarray) -> None:  # pragma: no cover
    # distances of xi to x[j:] into four interleaved 65-bin histograms h[0..3] (branch-free)
    n = x.shape[0]
    while j + 4 <= n:
        h[0, popcount64(xi ^ x[j])] += 1
        h[1, popcount64(xi ^ x[j + 1])] += 1
        h[2, popcount64(xi ^ x[j + 2])] += 1
        h[3, popcount64(xi ^ x[j + 3])] += 1
        j += 4
    while j < n:
        h[0, popcount64(xi ^ x[j])] += 1
        j += 1


@kernel(nogil=True)
def _hist_rows64(
    r0: int, r1: int, x: np.ndarray, k: int, hist: np.ndarray
) -> None:  # pragma: no cover - numba
    # Branch-free: every distance goes to a small per-row histogram (four of them, so that
    # consecutive increments do not wait on each other): faster than a branch on
    # ``dist <= k`` when that branch is unpredictable (concentrated fingerprints; see
    # benchmarks/bench_dedup.py --kinds short).
    # hist: (n, k + 1) int32, rows r0..r1-1 written (run_ranges)
    for i in range(r0, r1):
        xi = x[i]
        h = np.zeros((4, 65), np.int32)
        _accumulate_hist(xi, x, i + 1, h)
        for d in range(k + 1):
            hist[i, d] = h[0, d] + h[1, d] + h[2, d] + h[3, d]


@kernel(nogil=True)
def _sample_hist64(
    r0: int, r1: int, x: np.ndarray, rows: np.ndarray, k: int, hist: np.ndarray
) -> None:  # pragma: no cover - numba
    # branch-free, like _hist_rows64: every distance of row i to all rows goes to one of four
    # interleaved 65-bin histograms; the row itself (distance 0) is taken out afterwards.
    # hist: (rows, k + 1) int64, rows r0..r1-1 written (run_ranges)
    for r in range(r0, r1):
        i = rows[r]
        xi = x[i]
        h = np.zeros((4, 65), np.int64)
        _accumulate_hist(xi, x, 0, h)
        h[0, 0] -= 1  # j == i
        for d in range(k + 1):
            hist[r, d] = h[0, d] + h[1, d] + h[2, d] + h[3, d]


#: below this many fingerprints :func:`bounded_pairs` always runs the full scan
BOUNDED_TABLES_MIN_N = 20_000
#: cost of one pair enumerated by the permuted tables, in pairs scanned by brute force
TABLES_PAIR_COST = 800
#: rows sampled to estimate how many pairs lie at each distance
BOUNDED_SAMPLE_ROWS = 1024


def sample_distance_hist(
    x: npt.NDArray[np.uint64], rows: npt.NDArray[np.int64], k: int
) -> npt.NDArray[np.int64]:
    """``(len(rows), k + 1)`` int64: for each sampled row ``x[rows[r]]``, how many other rows
    of ``x`` are at each distance ``0..k`` from it (the kernel threads of the caller)."""
    hist = np.empty((rows.shape[0], int(k) + 1), np.int64)
    run_ranges(_sample_hist64, rows.shape[0], x, rows, int(k), hist, min_items=16)
    return hist


def estimate_pairs_within(
    x: npt.NDArray[np.uint64], max_distance: int, *, rows: int = BOUNDED_SAMPLE_ROWS
) -> npt.NDArray[np.float64]:
    """Estimated number of pairs at distance <= d, for d = 0..max_distance (float64 (k+1,)).

    Scans ``rows`` rows (a fixed-seed sample, so deterministic) against all others and scales.
    Only used to choose a strategy; never decides which pairs are returned.
    """
    n = x.shape[0]
    pick = np.sort(np.random.default_rng(0).choice(n, size=min(rows, n), replace=False))
    hist = sample_distance_hist(x, pick.astype(np.int64), int(max_distance)).sum(axis=0)
    return np.cumsum(hist).astype(np.float64) * (n / pick.size) / 2.0


def _bounded_by_tables(
    x: npt.NDArray[np.uint64], k: int, max_pairs: int, workers: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32], int] | None:
    """:func:`bounded_pairs` without the O(n^2) scan when the bound will cut the distance to
    a table-friendly one; ``None`` when it does not apply (the caller then scans).

    A sampled estimate picks ``g``, the first distance expected not to fit; the permuted-table
    index then finds every pair within ``g`` exactly. If those pairs indeed exceed
    ``max_pairs``, the distance used is below ``g`` and is read off their exact histogram --
    the same answer as the full scan. Otherwise (the estimate was low) ``None``.
    """
    n = x.shape[0]
    if n < BOUNDED_TABLES_MIN_N or k <= TABLES_MAX_DISTANCE:
        return None
    with kernel_threads(workers):
        est = estimate_pairs_within(x, k)
    # g: the first distance expected not to fit (with a margin, so the exact count below
    # rarely disagrees); the tables pay off only when the pairs they enumerate are few next to
    # the n^2/2 pairs a scan touches (measured: one pair out of the tables ~ 800 scanned).
    over = np.flatnonzero(est > 1.25 * max_pairs)
    if not over.size or int(over[0]) > TABLES_MAX_DISTANCE:
        return None
    g = int(over[0])
    if est[g] * TABLES_PAIR_COST > n * (n - 1) / 2:
        return None
    from .allpairs import all_pairs

    a, b, d = all_pairs(x, max_distance=g, threads=max(1, int(workers)))
    d = np.asarray(d, np.int32)
    cum = np.cumsum(np.bincount(d, minlength=g + 1)[: g + 1])
    if cum[g] <= max_pairs:
        return None
    fits = np.flatnonzero(cum <= max_pairs)
    used = int(fits[-1]) if fits.size else -1
    if used < 0:
        return (*empty_pairs(), -1)
    keep = d <= used  # all_pairs is sorted by (a, b); filtering keeps that order
    return np.asarray(a, np.int64)[keep], np.asarray(b, np.int64)[keep], d[keep], used


def bounded_pairs(
    fingerprints: npt.ArrayLike, max_distance: int, max_pairs: int, *, workers: int = 1
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32], int]:
    """Like :func:`all_pairs_bruteforce`, but never returns more than ``max_pairs`` pairs.

    A first scan counts the pairs at each distance <= ``max_distance``; the distance actually
    used is the largest ``k' <= max_distance`` whose pairs fit in ``max_pairs`` (-1 when not even
    the identical pairs fit). Guards against corpora whose fingerprints are so concentrated that
    nearly every pair is within the distance. Returns ``(a, b, d, k_used)``; 64-bit only
    (128-bit fingerprints are scanned without a bound).
    """
    fps = as_fingerprints(fingerprints)
    bits = 128 if fps.ndim == 2 else 64
    check_distance(max_distance, bits)
    if fps.shape[0] < 2:
        return (*empty_pairs(), int(max_distance))
    if fps.ndim == 2:
        return (*all_pairs_bruteforce(fps, max_distance, workers=workers), int(max_distance))
    x = np.ascontiguousarray(fps)
    fast = _bounded_by_tables(x, int(max_distance), int(max_pairs), workers)
    if fast is not None:
        return fast
    with kernel_threads(workers):
        hist = np.empty((x.shape[0], int(max_distance) + 1), np.int32)
        run_ranges(
            _hist_rows64, x.shape[0], x, int(max_distance), hist, min_items=64,
            tasks_per_thread=16,
        )  # fmt: skip
        cum = np.cumsum(hist.sum(axis=0, dtype=np.int64))
        fits = np.flatnonzero(cum <= max_pairs)
        k = int(fits[-1]) if fits.size else -1
        if k < 0:
            return (*empty_pairs(), -1)
        counts = hist[:, : k + 1].sum(axis=1, dtype=np.int64)
        offsets = np.zeros(x.shape[0] + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        total = int(offsets[-1])
        a = np.empty(total, np.int64)
        b = np.empty(total, np.int64)
        d = np.empty(total, np.int32)
        run_ranges(
            _fill_rows64, x.shape[0], x, k, offsets, a, b, d, min_items=64, tasks_per_thread=16
        )
    return a, b, d, k


def candidate_pairs(fingerprints: npt.ArrayLike, max_distance: int, *, workers: int = 1) -> Pairs:
    """All pairs within ``max_distance``: the permuted-table index for small distances
    (<= :data:`TABLES_MAX_DISTANCE` per 64 bits), the brute-force scan above that."""
    fps = as_fingerprints(fingerprints)
    bits = 128 if fps.ndim == 2 else 64
    check_distance(max_distance, bits)
    if fps.shape[0] < 2:
        return empty_pairs()
    if max_distance <= TABLES_MAX_DISTANCE * bits // 64:
        from .allpairs import all_pairs

        a, b, d = all_pairs(fps, max_distance=int(max_distance))
        return np.asarray(a, np.int64), np.asarray(b, np.int64), np.asarray(d, np.int32)
    return all_pairs_bruteforce(fps, max_distance, workers=workers)


# ---------------------------------------------------------------------------------------------
# range search over fixed arrays (the HammingIndex contract: CSR, per query by (distance, id))

Result = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]


def empty_result(nq: int) -> Result:
    return (
        np.zeros(nq + 1, dtype=np.int64),
        np.zeros(0, dtype=np.int64),
        np.zeros(0, dtype=np.int32),
    )


class BruteIndex:
    """Exact brute-force range search over fixed arrays (the reference implementation).

    Parameters
    ----------
    fingerprints : ndarray of uint64, shape (n,) or (n, 2)
    ids : ndarray of int64, shape (n,)
    """

    def __init__(self, fingerprints: npt.NDArray[np.uint64], ids: npt.NDArray[np.int64]) -> None:
        self.fingerprints = fingerprints
        self.ids = np.asarray(ids, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, queries: npt.NDArray[np.uint64], max_distance: int) -> Result:
        nq = len(queries)
        n = len(self.ids)
        if n == 0 or nq == 0:
            return empty_result(nq)
        block = max(1, (1 << 22) // n)
        qs, ids, ds = [], [], []
        for s in range(0, nq, block):
            d = hamming_cdist(queries[s : s + block], self.fingerprints)
            qi, col = np.nonzero(d <= max_distance)
            qs.append(qi + s)
            ids.append(self.ids[col])
            ds.append(d[qi, col])
        return _to_csr(
            nq, np.concatenate(qs), np.concatenate(ids), np.concatenate(ds).astype(np.int32)
        )


def _to_csr(
    nq: int, qi: npt.NDArray[Any], ids: npt.NDArray[np.int64], ds: npt.NDArray[np.int32]
) -> Result:
    order = np.lexsort((ids, ds, qi))
    lims = np.zeros(nq + 1, dtype=np.int64)
    np.cumsum(np.bincount(qi, minlength=nq), out=lims[1:])
    return lims, ids[order].astype(np.int64, copy=False), ds[order].astype(np.int32, copy=False)


def merge_results(nq: int, results: list[Result]) -> Result:
    """Union of several CSR results for the same queries, per query sorted by (distance, id)."""
    results = [r for r in results if len(r[1])]
    if not results:
        return empty_result(nq)
    if len(results) == 1:
        return results[0]
    qi = np.concatenate([np.repeat(np.arange(nq), np.diff(r[0])) for r in results])
    ids = np.concatenate([r[1] for r in results])
    ds = np.concatenate([r[2] for r in results])
    return _to_csr(nq, qi, ids, ds)
