"""All pairs of fingerprints within a Hamming distance, for any distance.

The permuted-table index (:func:`neardup.all_pairs`) is the right tool for small distances
(k <= 6 on 64 bits: a few tables, selective keys). Short texts need much larger candidate
distances (k around 18 of 64), where any exact table scheme degenerates into scanning whole
buckets; there a blocked brute-force scan (``popcount(a ^ b) <= k`` over every pair, numba;
its cost per pair is ``SCAN_PAIR_NS``) is faster. :func:`candidate_pairs` picks one of the two;
:func:`all_pairs_reference` is the NumPy reference both are tested against.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import numba
import numpy as np
import numpy.typing as npt
from llvmlite import ir
from numba.extending import intrinsic

from .. import _jit  # noqa: F401  (before any @njit: kernels cached outside the package)
from .._threads import numba_threads
from ..errors import ConfigError
from ..fingerprint.distance import as_fingerprints, hamming_cdist

__all__ = [
    "DEFAULT_WORK_NS_PER_DOC",
    "TABLES_MAX_DISTANCE",
    "PassPlan",
    "all_pairs_bruteforce",
    "all_pairs_reference",
    "bounded_pairs",
    "candidate_pairs",
    "plan_pass",
    "planned_pairs",
]

#: up to this distance the permuted-table index is used, above it the brute-force scan
TABLES_MAX_DISTANCE = 6

Pairs = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]


def _empty() -> Pairs:
    return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32)


def _check_k(k: int, bits: int) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k <= bits:
        raise ConfigError(f"max_distance must be an int in [0, {bits}], got {k!r}")


def all_pairs_reference(
    fingerprints: npt.ArrayLike, max_distance: int, *, block: int = 2048
) -> Pairs:
    """Every pair ``a < b`` with ``hamming <= max_distance``, sorted by (a, b). NumPy reference."""
    fps = as_fingerprints(fingerprints)
    bits = 128 if fps.ndim == 2 else 64
    _check_k(max_distance, bits)
    n = fps.shape[0]
    out_a, out_b, out_d = [], [], []
    for s in range(0, n, block):
        d = hamming_cdist(fps[s : s + block], fps)
        i, j = np.nonzero(d <= max_distance)
        gi = i + s
        keep = j > gi
        out_a.append(gi[keep].astype(np.int64))
        out_b.append(j[keep].astype(np.int64))
        out_d.append(d[i[keep], j[keep]].astype(np.int32))
    if not out_a:
        return _empty()
    a, b, d = np.concatenate(out_a), np.concatenate(out_b), np.concatenate(out_d)
    order = np.lexsort((b, a))
    return a[order], b[order], d[order]


def _popcount_intrinsic(typingctx: Any, x: Any) -> Any:  # pragma: no cover - numba
    """``llvm.ctpop.i64``: one POPCNT instruction where the CPU has it (SWAR otherwise)."""
    sig = numba.types.uint64(numba.types.uint64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        fn = builder.module.declare_intrinsic("llvm.ctpop", [ir.IntType(64)])
        return builder.call(fn, [args[0]])

    return sig, codegen


# a numba intrinsic, typed Any: called from kernels only, with numba's (not Python's) signature
_popcount: Any = intrinsic(_popcount_intrinsic)


@numba.njit(cache=True, parallel=True)
def _count_rows(hi: np.ndarray, lo: np.ndarray, k: int) -> np.ndarray:  # pragma: no cover - numba
    n = hi.shape[0]
    counts = np.zeros(n, np.int64)
    kk = np.uint64(k)
    for i in numba.prange(n):
        xh = hi[i]
        xl = lo[i]
        c = 0
        for j in range(i + 1, n):
            if _popcount(xh ^ hi[j]) + _popcount(xl ^ lo[j]) <= kk:
                c += 1
        counts[i] = c
    return counts


@numba.njit(cache=True, parallel=True)
def _fill_rows(
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
    for i in numba.prange(n):
        xh = hi[i]
        xl = lo[i]
        p = offsets[i]
        for j in range(i + 1, n):
            dist = _popcount(xh ^ hi[j]) + _popcount(xl ^ lo[j])
            if dist <= kk:
                a[p] = i
                b[p] = j
                d[p] = dist
                p += 1


@numba.njit(cache=True, parallel=True)
def _count_rows64(x: np.ndarray, k: int) -> np.ndarray:  # pragma: no cover - numba
    n = x.shape[0]
    counts = np.zeros(n, np.int64)
    kk = np.uint64(k)
    for i in numba.prange(n):
        xi = x[i]
        c = 0
        for j in range(i + 1, n):
            if _popcount(xi ^ x[j]) <= kk:
                c += 1
        counts[i] = c
    return counts


@numba.njit(cache=True, parallel=True)
def _fill_rows64(
    x: np.ndarray, k: int, offsets: np.ndarray, a: np.ndarray, b: np.ndarray, d: np.ndarray
) -> None:  # pragma: no cover - numba
    n = x.shape[0]
    kk = np.uint64(k)
    for i in numba.prange(n):
        xi = x[i]
        p = offsets[i]
        for j in range(i + 1, n):
            dist = _popcount(xi ^ x[j])
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
    _check_k(max_distance, bits)
    n = fps.shape[0]
    if n < 2:
        return _empty()
    if fps.ndim == 2:
        hi, lo = np.ascontiguousarray(fps[:, 0]), np.ascontiguousarray(fps[:, 1])
    else:
        hi, lo = np.ascontiguousarray(fps), np.zeros(0, np.uint64)
    with numba_threads(workers):
        k = int(max_distance)
        counts = _count_rows64(hi, k) if fps.ndim == 1 else _count_rows(hi, lo, k)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        total = int(offsets[-1])
        a = np.empty(total, np.int64)
        b = np.empty(total, np.int64)
        d = np.empty(total, np.int32)
        if fps.ndim == 1:
            _fill_rows64(hi, k, offsets, a, b, d)
        else:
            _fill_rows(hi, lo, k, offsets, a, b, d)
    return a, b, d


@numba.njit(cache=True, inline="always")
def _accumulate_hist(xi: Any, x: np.ndarray, j: int, h: np.ndarray) -> None:  # pragma: no cover
    # distances of xi to x[j:] into four interleaved 65-bin histograms h[0..3] (branch-free)
    n = x.shape[0]
    while j + 4 <= n:
        h[0, _popcount(xi ^ x[j])] += 1
        h[1, _popcount(xi ^ x[j + 1])] += 1
        h[2, _popcount(xi ^ x[j + 2])] += 1
        h[3, _popcount(xi ^ x[j + 3])] += 1
        j += 4
    while j < n:
        h[0, _popcount(xi ^ x[j])] += 1
        j += 1


@numba.njit(cache=True, parallel=True)
def _hist_rows64(x: np.ndarray, k: int) -> np.ndarray:  # pragma: no cover - numba
    # Branch-free: every distance goes to a small per-row histogram (four of them, so that
    # consecutive increments do not wait on each other): faster than a branch on
    # ``dist <= k`` when that branch is unpredictable (concentrated fingerprints; see
    # benchmarks/bench_dedup.py --kinds short).
    n = x.shape[0]
    hist = np.zeros((n, k + 1), np.int32)
    for i in numba.prange(n):
        xi = x[i]
        h = np.zeros((4, 65), np.int32)
        _accumulate_hist(xi, x, i + 1, h)
        for d in range(k + 1):
            hist[i, d] = h[0, d] + h[1, d] + h[2, d] + h[3, d]
    return hist


@numba.njit(cache=True, parallel=True)
def _sample_hist64(x: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:  # pragma: no cover
    # branch-free, like _hist_rows64: every distance of row i to all rows goes to one of four
    # interleaved 65-bin histograms; the row itself (distance 0) is taken out afterwards
    hist = np.zeros((rows.shape[0], k + 1), np.int64)
    for r in numba.prange(rows.shape[0]):
        i = rows[r]
        xi = x[i]
        h = np.zeros((4, 65), np.int64)
        _accumulate_hist(xi, x, 0, h)
        h[0, 0] -= 1  # j == i
        for d in range(k + 1):
            hist[r, d] = h[0, d] + h[1, d] + h[2, d] + h[3, d]
    return hist


#: below this many fingerprints :func:`bounded_pairs` always runs the full scan
BOUNDED_TABLES_MIN_N = 20_000
#: cost of one pair enumerated by the permuted tables, in pairs scanned by brute force
TABLES_PAIR_COST = 800
#: rows sampled to estimate how many pairs lie at each distance
BOUNDED_SAMPLE_ROWS = 1024


def estimate_pairs_within(
    x: npt.NDArray[np.uint64], max_distance: int, *, rows: int = BOUNDED_SAMPLE_ROWS
) -> npt.NDArray[np.float64]:
    """Estimated number of pairs at distance <= d, for d = 0..max_distance (float64 (k+1,)).

    Scans ``rows`` rows (a fixed-seed sample, so deterministic) against all others and scales.
    Only used to choose a strategy; never decides which pairs are returned.
    """
    n = x.shape[0]
    pick = np.sort(np.random.default_rng(0).choice(n, size=min(rows, n), replace=False))
    hist = _sample_hist64(x, pick.astype(np.int64), int(max_distance)).sum(axis=0)
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
    with numba_threads(workers):
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
    from ..index import all_pairs

    a, b, d = all_pairs(x, max_distance=g, threads=max(1, int(workers)))
    d = np.asarray(d, np.int32)
    cum = np.cumsum(np.bincount(d, minlength=g + 1)[: g + 1])
    if cum[g] <= max_pairs:
        return None
    fits = np.flatnonzero(cum <= max_pairs)
    used = int(fits[-1]) if fits.size else -1
    if used < 0:
        return (*_empty(), -1)
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
    _check_k(max_distance, bits)
    if fps.shape[0] < 2:
        return (*_empty(), int(max_distance))
    if fps.ndim == 2:
        return (*all_pairs_bruteforce(fps, max_distance, workers=workers), int(max_distance))
    x = np.ascontiguousarray(fps)
    fast = _bounded_by_tables(x, int(max_distance), int(max_pairs), workers)
    if fast is not None:
        return fast
    with numba_threads(workers):
        hist = _hist_rows64(x, int(max_distance))
        cum = np.cumsum(hist.sum(axis=0, dtype=np.int64))
        fits = np.flatnonzero(cum <= max_pairs)
        k = int(fits[-1]) if fits.size else -1
        if k < 0:
            return (*_empty(), -1)
        counts = hist[:, : k + 1].sum(axis=1, dtype=np.int64)
        offsets = np.zeros(x.shape[0] + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        total = int(offsets[-1])
        a = np.empty(total, np.int64)
        b = np.empty(total, np.int64)
        d = np.empty(total, np.int32)
        _fill_rows64(x, k, offsets, a, b, d)
    return a, b, d, k


def candidate_pairs(fingerprints: npt.ArrayLike, max_distance: int, *, workers: int = 1) -> Pairs:
    """All pairs within ``max_distance``: the permuted-table index for small distances
    (<= :data:`TABLES_MAX_DISTANCE` per 64 bits), the brute-force scan above that."""
    fps = as_fingerprints(fingerprints)
    bits = 128 if fps.ndim == 2 else 64
    _check_k(max_distance, bits)
    if fps.shape[0] < 2:
        return _empty()
    if max_distance <= TABLES_MAX_DISTANCE * bits // 64:
        from ..index import all_pairs

        a, b, d = all_pairs(fps, max_distance=int(max_distance))
        return np.asarray(a, np.int64), np.asarray(b, np.int64), np.asarray(d, np.int32)
    return all_pairs_bruteforce(fps, max_distance, workers=workers)


# ---------------------------------------------------------------------------------------------
# work-bounded planning: which distance a pass can afford

#: modelled cost of one pair compared by the brute-force scan (count/histogram pass + fill
#: pass), nanoseconds on one core (calibrated with benchmarks/bench_dedup.py; a constant,
#: never timed)
SCAN_PAIR_NS = 2.7
#: cost model of the permuted-table self-join (:func:`neardup.all_pairs`), single-core ns,
#: calibrated once against runs of benchmarks/bench_index.py (uniform fingerprints) and
#: benchmarks/bench_dedup.py (generated short texts), k = 3..7; constants, never timed:
#: per document and table (permute + sort)
TABLES_BUILD_NS = 40.0
#: per probe of a table with probe radius >= 1 (directory lookup)
TABLES_PROBE_NS = 80.0
#: per candidate compared in a probed bucket (radius >= 1: random access; skewed buckets use
#: the slower descent, so this is set from the skewed short-text run, above the uniform one)
TABLES_CAND_NS = 25.0
#: per pair compared inside a light bucket of a radius-0 table (contiguous self-join)
TABLES_JOIN_NS = 1.2
#: buckets larger than this are modelled as joined by descent ... (all_pairs now descends
#: only above 16,384, and the direct join is faster between the two: the model kept its
#: calibration, so it overestimates such buckets, i.e. it stays on the safe side)
TABLES_HEAVY = 1024
#: ... which costs about this per pair of the bucket: between the two regimes of skewed
#: fingerprints in benchmarks/bench_dedup.py -- generated short posts at k=4 (costlier per
#: pair) and generated long documents at k=2 (much cheaper); the short posts' cost would
#: narrow the long pass to k=1 and lose recall there
TABLES_HEAVY_PAIR_NS = 4.0
#: per pair within the distance (output arrays, sort)
TABLES_PAIR_NS = 300.0
#: verifying a candidate pair costs about this per character of the two texts (tokenising is
#: per document; the overlap bound and, for the few that pass it, the LCS are per pair)
VERIFY_NS_PER_CHAR = 1.5


def pair_work_ns(mean_chars: float) -> float:
    """Modelled cost of one candidate pair whose texts average ``mean_chars`` characters:
    producing it and verifying it (ns)."""
    return TABLES_PAIR_NS + VERIFY_NS_PER_CHAR * 2.0 * max(float(mean_chars), 0.0)


@numba.njit(cache=True, nogil=True)
def _ball_products(
    prefix: np.ndarray, nb: int, flips: np.ndarray
) -> float:  # pragma: no cover - numba
    # sum over flip masks f of sum_b cnt[b] * cnt[b ^ f], cnt[b] = how many prefixes equal b (of
    # nb buckets): candidates met by probing every bucket within the probe radius of each
    # fingerprint's own. Only the non-empty buckets are visited, flip by flip in bucket order
    # (the order of the dense loop over every bucket: the same float sum).
    cnt = np.zeros(nb, np.int64)
    for p in prefix:
        cnt[p] += 1
    nz = np.empty(min(prefix.shape[0], nb), np.int64)
    m = 0
    for b in range(nb):
        if cnt[b]:
            nz[m] = b
            m += 1
    total = 0.0
    for j in range(flips.shape[0]):
        f = np.int64(flips[j])
        for i in range(m):
            b = nz[i]
            total += float(cnt[b]) * float(cnt[b ^ f])
    return total


def _bucket_candidates(prefix: npt.NDArray[np.uint64], pb: int, flips: np.ndarray) -> float:
    """Candidates compared by one table: sum over fingerprints of the probed buckets' sizes
    (``prefix``: each fingerprint's ``pb``-bit prefix; ``flips``: the probe masks)."""
    if pb <= 22:
        return float(_ball_products(prefix, 1 << pb, flips.astype(np.uint64)))
    u, c = np.unique(prefix, return_counts=True)
    total = 0.0
    for f in flips.tolist():
        q = u ^ np.uint64(f)
        pos = np.minimum(np.searchsorted(u, q), u.size - 1)
        hit = u[pos] == q
        total += float((c[hit].astype(np.float64) * c[pos[hit]]).sum())
    return total


#: from this many fingerprints :func:`tables_work_ns` counts the tables on ``workers`` threads
TABLES_THREADS_MIN = 65_536


def _bucket_sizes(prefix: npt.NDArray[np.uint64], pb: int) -> npt.NDArray[np.int64]:
    """Sizes of the non-empty buckets of ``pb``-bit prefixes, in prefix order (what
    ``np.unique(prefix, return_counts=True)[1]`` gives; a count instead of a sort up to
    2^24 buckets)."""
    if pb <= 24:
        c = np.bincount(prefix.astype(np.int64), minlength=1 << pb)
        return c[c > 0]
    return np.unique(prefix, return_counts=True)[1]


def tables_work_ns(
    fingerprints: npt.ArrayLike,
    distance: int,
    est_pairs: float = 0.0,
    *,
    uniform: bool = False,
    pair_ns: float = TABLES_PAIR_NS,
    workers: int = 1,
) -> float:
    """Modelled single-core cost (ns) of :func:`neardup.all_pairs` at ``distance``.

    Takes the layout the index planner chooses (:func:`neardup.index.plan.plan_index`) and
    counts, from the fingerprints' own prefix buckets, the work of every table. (``all_pairs``
    itself may join on another layout, see :func:`neardup.index.allpairs._join_plan`: for
    skewed fingerprints when it models cheaper, and in place of a probing layout at k = 5, 6,
    where this model now overestimates; this model keeps the planner's, so the distances a
    budget affords, and the outputs, do not depend on that choice.) Pairs inside
    each bucket for radius-0 tables (dearer in buckets above :data:`TABLES_HEAVY`, where the
    descent takes over), probes and the sizes of the probed buckets for radius >= 1 tables; plus
    ``est_pairs`` output pairs at ``pair_ns`` each (:func:`pair_work_ns`: with their
    verification). ``uniform=True`` assumes uniform buckets (``n / 2^pb`` each), a
    cheap lower estimate used to skip hopeless distances. Skewed fingerprints (heavy buckets)
    cost more than uniform ones, which is why the buckets are counted. ``workers`` threads
    count the tables' buckets (from ``TABLES_THREADS_MIN`` fingerprints; the kernels release
    the GIL); the terms are added in table order either way, so the value does not depend on it.
    """
    from ..index.plan import plan_index
    from ..index.tables import plan_arrays, table_prefixes

    fps = as_fingerprints(fingerprints)
    n = int(fps.shape[0])
    bits = 128 if fps.ndim == 2 else 64
    plan = plan_index(bits, int(distance), max(n, 1))
    if plan.kind != "tables":
        return scan_work_ns(n)
    pa = plan_arrays(plan)
    f2 = np.ascontiguousarray(fps.reshape(n, -1))

    def counts(t: int) -> tuple[float, float]:  # (candidates, pairs in heavy buckets)
        pb, rho = int(pa.pb[t]), int(pa.probe_radius[t])
        flips = pa.flips[t, : int(pa.nflips[t])]
        if uniform:
            per = n / 2.0**pb
            if not rho and per > TABLES_HEAVY:
                return 0.0, n * per / 2.0
            return (n * flips.size * per if rho else n * per / 2.0), 0.0
        prefix = table_prefixes(f2, pa, t)
        if rho:
            return _bucket_candidates(prefix, pb, flips), 0.0
        c = _bucket_sizes(prefix, pb).astype(np.float64)
        heavy = c > TABLES_HEAVY
        return float((c[~heavy] ** 2).sum() / 2.0), float((c[heavy] ** 2).sum() / 2.0)

    tables = range(pa.n_tables)
    if workers > 1 and not uniform and n >= TABLES_THREADS_MIN and pa.n_tables > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(int(workers), pa.n_tables)) as ex:
            per_table = list(ex.map(counts, tables))
    else:
        per_table = [counts(t) for t in tables]
    total = max(est_pairs, 0.0) * pair_ns
    for t in tables:
        rho = int(pa.probe_radius[t])
        flips = pa.flips[t, : int(pa.nflips[t])]
        cand, heavy_pairs = per_table[t]
        total += n * TABLES_BUILD_NS
        if rho:
            total += n * flips.size * TABLES_PROBE_NS + cand * TABLES_CAND_NS
        else:
            total += cand * TABLES_JOIN_NS + heavy_pairs * TABLES_HEAVY_PAIR_NS
    return total


#: default work budget of one candidate pass, modelled nanoseconds per document of the pass
#: (the scan fits up to ~23,700 documents; at 1 M documents the tables get 32 us each)
DEFAULT_WORK_NS_PER_DOC = 32_000


@dataclass(frozen=True)
class PassPlan:
    """How one candidate pass is searched; made by :func:`plan_pass`.

    Attributes
    ----------
    docs : int
        Fingerprints in the pass.
    distance : int
        Distance requested.
    distance_planned : int
        Largest distance whose modelled work fits the budget (-1: not even identical
        fingerprints; nothing is searched). The per-document pair valve may lower the distance
        actually used further (exactly, from the real pair counts).
    method : {"scan", "tables", "none"}
        Brute-force scan (:func:`bounded_pairs` / :func:`candidate_pairs`), the permuted-table
        self-join (:func:`neardup.all_pairs`) at ``distance_planned``, or nothing.
    reason : str
        Why, in words (the modelled costs and the budget).
    work_ns : float
        Modelled cost of the chosen search (single-core nanoseconds).
    budget_ns : float or None
        ``work_ns_per_doc * docs``; None when unbounded.
    est_pairs : float or None
        Sampled estimate of the pairs within ``distance_planned`` (None when not sampled).
    """

    docs: int
    distance: int
    distance_planned: int
    method: Literal["scan", "tables", "none"]
    reason: str
    work_ns: float
    budget_ns: float | None
    est_pairs: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def scan_work_ns(n: int) -> float:
    """Modelled single-core cost of the brute-force scan over ``n`` fingerprints (ns)."""
    return n * (n - 1) / 2.0 * SCAN_PAIR_NS


def plan_pass(
    fingerprints: npt.ArrayLike,
    max_distance: int,
    *,
    work_ns_per_doc: float | None = DEFAULT_WORK_NS_PER_DOC,
    max_pairs: int | None = None,
    workers: int = 1,
    pair_ns: float = TABLES_PAIR_NS,
) -> PassPlan:
    """Choose the distance and method of one candidate pass so its modelled work fits a budget.

    The budget is ``work_ns_per_doc * n`` modelled nanoseconds. When the brute-force scan
    (:func:`scan_work_ns`, ``n^2 / 2`` pairs) fits, the pass searches ``max_distance`` exactly as
    before. Otherwise the distance is the largest ``r <= max_distance`` for which the
    permuted-table self-join fits (:func:`tables_work_ns`: the planner's layout, with the work
    of every table counted from the fingerprints' own prefix buckets, plus the output pairs
    estimated from a fixed-seed sample by :func:`estimate_pairs_within`), skipping distances
    whose estimated pairs already exceed ``max_pairs`` (the per-document valve would cut them).

    Deterministic: depends on ``n``, the distances, the budget and the fingerprints (fixed-seed
    sample), never on timing, ``workers`` (which only parallelises the sample) or the machine.
    """
    fps = as_fingerprints(fingerprints)
    bits = 128 if fps.ndim == 2 else 64
    _check_k(max_distance, bits)
    n = int(fps.shape[0])
    k = int(max_distance)
    scan = scan_work_ns(n)
    if work_ns_per_doc is None or n < 2:
        why = "no work budget" if work_ns_per_doc is None else "fewer than 2 documents"
        method: Literal["scan", "tables"] = (
            "tables" if k <= TABLES_MAX_DISTANCE * bits // 64 else "scan"
        )
        work = scan if method == "scan" else tables_work_ns(fps, k, uniform=True)
        return PassPlan(n, k, k, method, why, work, None)
    budget = float(work_ns_per_doc) * n
    if scan <= budget:
        return PassPlan(
            n, k, k, "scan",
            f"scan of {n:,} docs ({scan / 1e9:.3g} s modelled) fits the budget ({budget / 1e9:.3g} s)",
            scan, budget,
        )  # fmt: skip
    est: npt.NDArray[np.float64] | None = None
    if bits == 64:
        with numba_threads(workers):
            est = estimate_pairs_within(np.ascontiguousarray(fps), k)
    for r in range(k, -1, -1):
        pairs = float(est[r]) if est is not None else 0.0
        if max_pairs is not None and est is not None and pairs > max_pairs and r > 0:
            continue
        # the output pairs alone exceed the budget: every other term of tables_work_ns is >= 0
        # (and a distance without tables costs the scan, already over it), so no layout is needed
        if pairs * pair_ns > budget:
            continue
        # the uniform-bucket cost is a cheap lower estimate: skip distances it already rules out
        if tables_work_ns(fps, r, pairs, uniform=True, pair_ns=pair_ns) > budget:
            continue
        work = tables_work_ns(fps, r, pairs, pair_ns=pair_ns, workers=workers)
        if work <= budget:
            why = (
                f"scan of {n:,} docs ({scan / 1e9:.3g} s modelled) exceeds the budget "
                f"({budget / 1e9:.3g} s); tables at distance {r} ({work / 1e9:.3g} s, "
                f"~{pairs:,.0f} pairs estimated) fit"
            )
            if r < k:
                why += f", at {r + 1} they would not"
            return PassPlan(n, k, r, "tables", why, work, budget, None if est is None else pairs)
    pairs0 = float(est[0]) if est is not None else 0.0
    return PassPlan(
        n, k, -1, "none",
        f"even distance 0 exceeds the budget ({budget / 1e9:.3g} s modelled; ~{pairs0:,.0f} "
        "identical-fingerprint pairs estimated); no pairs searched",
        0.0, budget, None if est is None else pairs0,
    )  # fmt: skip


def planned_pairs(
    fingerprints: npt.ArrayLike,
    max_distance: int,
    *,
    work_ns_per_doc: float | None = DEFAULT_WORK_NS_PER_DOC,
    max_pairs: int | None = None,
    workers: int = 1,
    pair_ns: float = TABLES_PAIR_NS,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32], dict[str, Any]]:
    """Candidate pairs of one pass under a work budget (:func:`plan_pass`) and a pair valve.

    Returns ``(a, b, d, info)``: every pair ``a < b`` within ``info["distance_used"]``, sorted by
    (a, b), which is exactly :func:`all_pairs_reference` at that distance. ``distance_used`` is
    ``distance_planned`` (work budget), lowered further, exactly, when more than ``max_pairs``
    pairs lie within it (64-bit only; -1 when not even the identical pairs fit). ``info`` is
    :meth:`PassPlan.to_dict` plus ``distance_used``.
    """
    fps = as_fingerprints(fingerprints)
    plan = plan_pass(
        fps,
        max_distance,
        work_ns_per_doc=work_ns_per_doc,
        max_pairs=max_pairs,
        workers=workers,
        pair_ns=pair_ns,
    )
    info = plan.to_dict()
    r = plan.distance_planned
    if plan.method == "none" or fps.shape[0] < 2:
        info["distance_used"] = r if plan.method == "none" else plan.distance
        return (*_empty(), info)
    if plan.method == "scan":
        if max_pairs is not None and fps.ndim == 1:  # the valve at any distance
            a, b, d, used = bounded_pairs(fps, r, max_pairs, workers=workers)
        else:
            a, b, d = candidate_pairs(fps, r, workers=workers)
            used = r
    else:
        from ..index import all_pairs

        g = r
        if (
            plan.budget_ns is None
            and max_pairs is not None
            and fps.ndim == 1
            and fps.shape[0] >= BOUNDED_TABLES_MIN_N
        ):
            # no work budget to have ruled out a distance whose pairs are far more than the
            # pair valve keeps (concentrated fingerprints: a template's copies): search from the
            # first distance a fixed-seed sample says is over, further while it is not
            with numba_threads(workers):
                est = estimate_pairs_within(np.ascontiguousarray(fps), r)
            over = np.flatnonzero(est > 1.25 * max_pairs)
            g = int(over[0]) if over.size else r
        while True:
            a, b, d = all_pairs(fps, max_distance=g, threads=max(1, int(workers)))
            a, b, d = np.asarray(a, np.int64), np.asarray(b, np.int64), np.asarray(d, np.int32)
            if g >= r or (max_pairs is not None and a.size > max_pairs):
                break
            g += 1  # the sample overestimated: every pair within g fits, so look further
        used = g
        if max_pairs is not None and fps.ndim == 1 and a.size > max_pairs:
            cum = np.cumsum(np.bincount(d, minlength=g + 1)[: g + 1])
            fits = np.flatnonzero(cum <= max_pairs)
            used = int(fits[-1]) if fits.size else -1
            keep = d <= used  # sorted by (a, b); filtering keeps that order
            a, b, d = a[keep], b[keep], d[keep]
    info["distance_used"] = int(used)
    return np.asarray(a, np.int64), np.asarray(b, np.int64), np.asarray(d, np.int32), info
