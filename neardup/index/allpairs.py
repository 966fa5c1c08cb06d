"""all_pairs: every pair of fingerprints within k bits in one set (the self-join behind dedup).

For layouts whose probe radius is 0 (the usual case, e.g. 4 tables of 16-bit prefixes for
f=64, k=3) the join runs table by table over the sorted keys: every pair inside a prefix
bucket is compared (contiguous memory, no probes), and a bucket larger than ``heavy`` is
joined by a pruned descent per element instead, so skewed data does not go quadratic in the
bucket size. A pair is reported by the first table that holds it (the pigeonhole rule of
:mod:`neardup.index.plan`). Other layouts fall back to searching every fingerprint.

Note: ``c`` identical fingerprints form ``c * (c - 1) / 2`` pairs; collapse exact duplicates
(e.g. by content hash) before joining sets with huge duplicate groups.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from .._arrays import find_sorted, unique_sorted
from .._jit import kernel
from ..errors import ConfigError, InputError
from ..fingerprint.distance import as_fingerprints
from . import _kernels as K
from .hamming_index import HammingIndex
from .plan import (
    JOIN_BUILD_NS,
    JOIN_PAIR_NS,
    TABLES_BUILD_NS,
    TABLES_CAND_NS,
    TABLES_HEAVY,
    TABLES_HEAVY_PAIR_NS,
    TABLES_JOIN_NS,
    TABLES_PAIR_NS,
    TABLES_PROBE_NS,
    Plan,
    plan_index,
    scan_work_ns,
)
from .tables import PlanArrays, TableSegment, plan_arrays, table_prefixes

__all__ = ["all_pairs", "tables_work_ns"]

I64 = npt.NDArray[np.int64]


def _join_table(
    seg: TableSegment, pa: PlanArrays, t: int, k: int, big: int, row_lo: int, row_hi: int
) -> tuple[I64, I64, np.ndarray]:
    cap = max((row_hi - row_lo) // 8, 1024)
    while True:
        out_a = np.empty(cap, dtype=np.int64)
        out_b = np.empty(cap, dtype=np.int64)
        out_d = np.empty(cap, dtype=np.int32)
        cnt = K.self_join_table(
            t, k, seg.keys, seg.rows, seg.fps, pa.pb, pa.probe_radius, pa.pm_key, pa.pm_orig, big,
            row_lo, row_hi, np.empty((4, 256), dtype=np.int64), out_a, out_b, out_d,
        )  # fmt: skip
        if cnt <= cap:
            return out_a[:cnt], out_b[:cnt], out_d[:cnt]
        cap = cnt


#: The self-join's layout (:func:`_join_plan`). Besides the index planner's choice it weighs
#: one with two more blocks keyed by two of them (``k + 2`` blocks choose 2: longer prefixes,
#: smaller buckets, more tables to sort). The planner models uniform fingerprints; real ones are
#: skewed (many times the in-bucket pairs of uniform ones: the clustered data of
#: ``benchmarks/bench_index.py``), so the two are compared on the fingerprints' own buckets,
#: counted on an evenly spaced sample. Every layout gives the same pairs: only the speed
#: depends on the choice.
JOIN_SAMPLE = 1 << 16
#: below this many fingerprints the planner's layout is used as is
JOIN_CHOICE_MIN = 1 << 16
#: bytes the alternative layout's tables may take when ``memory_budget`` is None (the
#: planner's own layout is always allowed)
JOIN_MEMORY = 2 << 30


def _bucket_pairs(sample: np.ndarray, pa: PlanArrays) -> float:
    """Pairs sharing a prefix bucket in every table of ``pa``, summed, among ``sample`` (m, W)."""
    total = 0.0
    for t in range(pa.n_tables):
        c = np.unique(table_prefixes(sample, pa, t), return_counts=True)[1].astype(np.float64)
        total += float((c * (c - 1.0)).sum() / 2.0)
    return total


def _join_plan(fps: np.ndarray, k: int, memory_budget: float | None) -> Plan:
    """The layout :func:`all_pairs` joins ``fps`` (n, W) with: the index planner's, or ``k + 2``
    blocks choose 2 when that fits the memory and either the planner's layout probes
    neighbouring prefixes (radius >= 1) or its modelled work (tables sorted, plus pairs
    compared in buckets, counted on a sample) is smaller. Deterministic in the fingerprints."""
    n, words = fps.shape
    bits = 64 * words
    base = plan_index(bits, k, n, memory_budget=memory_budget)
    probes = base.kind == "tables" and max(t.radius for t in base.tables) > 0
    if base.kind != "tables" or (n < JOIN_CHOICE_MIN and not probes):
        return base
    try:
        alt = plan_index(bits, k, n, blocks=k + 2, prefix_blocks=2)
    except ConfigError:  # k = 0, or prefixes over 64 bits
        return base
    cap = JOIN_MEMORY if memory_budget is None else memory_budget
    if max(t.radius for t in alt.tables) or alt.est_bytes_per_fp * n > cap:
        return base
    if probes:
        # The planner's layout probes neighbouring prefixes (its choice at k = 5 and 6 from
        # ~15 k fingerprints, "3 or 4 blocks choose 1, radius 1"): the self-join cannot join
        # it bucket by bucket and would search every fingerprint instead. k + 2 blocks choose 2
        # is faster at every size (same pairs; see benchmarks/bench_index.py -k 5 or 6, the
        # all_pairs rows).
        return alt
    sample = np.ascontiguousarray(fps[:: max(1, n // JOIN_SAMPLE)])
    m = len(sample)
    scale = n * (n - 1.0) / (m * (m - 1.0))

    def work(p: Plan) -> float:
        return (
            n * p.n_tables * JOIN_BUILD_NS
            + _bucket_pairs(sample, plan_arrays(p)) * scale * JOIN_PAIR_NS
        )

    return alt if work(alt) < work(base) else base


#: pieces per thread that :func:`_join_tasks` aims for (smaller pieces balance better)
PIECES_PER_THREAD = 4
#: below this many fingerprints each table is one task
SPLIT_MIN_ROWS = 65_536


def _join_tasks(
    seg: TableSegment, pa: PlanArrays, big: int, threads: int
) -> list[tuple[int, int, int]]:
    """``(table, row_lo, row_hi)`` tasks for the self-join, largest modelled work first.

    One task per table unless there are several threads and enough rows: then each table is
    cut at prefix-bucket boundaries into pieces of about ``total / (threads *
    PIECES_PER_THREAD)`` modelled work (a bucket of ``s`` rows costs ``s * min(s, big) / 2``:
    its pairs, or a bounded descent per row when it is heavy), so that one skewed table does not
    leave the other threads idle. The pieces cover every bucket exactly once, and the caller
    sorts the pairs, so the result does not depend on the cut."""
    n = seg.n
    tables = range(pa.n_tables)
    keys = seg.keys
    if threads < 2 or n < SPLIT_MIN_ROWS or keys is None:  # None: no tables (brute plan)
        return [(t, 0, n) for t in tables]
    bounds: list[I64] = []
    works: list[npt.NDArray[np.float64]] = []
    for t in tables:
        pb = int(pa.pb[t])
        pre = keys[t] >> np.uint64(64 - pb) if 0 < pb < 64 else keys[t]
        starts = np.flatnonzero(np.concatenate(([True], pre[1:] != pre[:-1])))
        size = np.diff(np.append(starts, n)).astype(np.float64)
        bounds.append(starts)
        works.append(size * np.minimum(size, float(big)) / 2.0 + size)
    total = sum(float(w.sum()) for w in works)
    chunk = total / (threads * PIECES_PER_THREAD)
    tasks: list[tuple[float, int, int, int]] = []
    for t in tables:
        cum = np.cumsum(works[t])
        # a piece ends after the bucket where the running work first reaches a multiple of chunk
        cuts = unique_sorted(np.searchsorted(cum, np.arange(1, int(cum[-1] // chunk) + 1) * chunk))
        ends = np.append(cuts[cuts < cum.size - 1] + 1, cum.size)
        begin = 0
        for e in ends.tolist():
            lo = int(bounds[t][begin])
            hi = int(bounds[t][e]) if e < cum.size else n
            w = float(cum[e - 1] - (cum[begin - 1] if begin else 0.0))
            tasks.append((w, t, lo, hi))
            begin = e
    tasks.sort(key=lambda x: (-x[0], x[1], x[2]))
    return [(t, lo, hi) for _, t, lo, hi in tasks]


def all_pairs(
    fingerprints: Any,
    max_distance: int = 3,
    *,
    ids: Any = None,
    threads: int | None = None,
    memory_budget: float | None = None,
    heavy: int = 16_384,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """Every pair within ``max_distance`` bits among ``fingerprints`` (exact).

    Parameters
    ----------
    fingerprints : array-like
        ``uint64`` (n,) for 64-bit or (n, 2) for 128-bit.
    max_distance : int, default=3
    ids : array-like of int64, optional
        Report these instead of positions (must be unique).
    threads : int or None
        Threads (default: up to 4); tables are sorted and joined in parallel.
    memory_budget : float or None
        Bytes the temporary tables may use (passed to the planner). The layout is the
        planner's, or ``k + 2`` blocks choose 2 when its tables fit (``None``: up to
        :data:`JOIN_MEMORY`) and either the planner's layout probes neighbouring prefixes (k = 5,
        6) or its modelled work on these fingerprints is smaller (see :func:`_join_plan`); the
        pairs are the same either way.
    heavy : int, default=16384
        Buckets larger than this are joined by descent instead of all-pairs comparison. The
        in-bucket join's cost grows with the square of the bucket, the descent's linearly; the
        default is where they cross on skewed fingerprints at k = 3 and 4 (see the all_pairs
        rows of ``benchmarks/bench_index.py``).

    Returns
    -------
    a, b : int64 arrays
        Each pair once with ``a < b``, sorted by (a, b); positions unless ``ids`` is given.
    distances : int32 array

    Examples
    --------
    >>> import numpy as np
    >>> a, b, d = all_pairs(np.array([0, 1, (1 << 40) - 1, 3], dtype=np.uint64), 2)
    >>> list(zip(a.tolist(), b.tolist(), d.tolist()))
    [(0, 1, 1), (0, 3, 2), (1, 3, 1)]
    """
    fps = as_fingerprints(fingerprints)
    if (
        isinstance(max_distance, bool)
        or not isinstance(max_distance, (int, np.integer))
        or max_distance < 0
    ):
        raise ConfigError(f"max_distance must be an int >= 0, got {max_distance!r}")
    bits = 64 if fps.ndim == 1 else 128
    if max_distance >= bits:
        raise ConfigError(f"max_distance ({max_distance}) must be smaller than bits ({bits})")
    n = len(fps)
    ids64 = None
    if ids is not None:
        ids_arr = np.asarray(ids)
        if ids_arr.ndim != 1 or len(ids_arr) != n:
            raise InputError(
                f"ids must be 1-D with one id per fingerprint, got shape {ids_arr.shape} for {n}"
            )
        if ids_arr.size and ids_arr.dtype.kind not in "iu":
            raise InputError(f"ids must be integers, got dtype {ids_arr.dtype}")
        ids64 = ids_arr.astype(np.int64)
        if len(unique_sorted(ids64)) != n:
            raise InputError("ids must be unique")
    if n < 2:
        e = np.empty(0, np.int64)
        return e, e.copy(), np.empty(0, np.int32)
    k = int(max_distance)
    fps2 = fps.reshape(n, -1)
    idx = HammingIndex(
        bits=bits,
        max_distance=k,
        plan=_join_plan(fps2, k, memory_budget),
        buffer_size=max(n, 1),
        threads=threads,
    )
    pa = idx.snapshot().arrays
    if idx.plan.kind == "tables" and int(pa.probe_radius.max()) == 0:
        nthreads = max(1, threads or 4)
        seg = TableSegment.build(
            fps2, np.arange(n, dtype=np.int64), pa, threads=nthreads, searchable=False
        )
        tasks = _join_tasks(seg, pa, heavy, nthreads)
        with ThreadPoolExecutor(max(1, min(nthreads, len(tasks)))) as ex:
            parts = list(ex.map(lambda x: _join_table(seg, pa, x[0], k, heavy, x[1], x[2]), tasks))
        ra = np.concatenate([p[0] for p in parts])
        rb = np.concatenate([p[1] for p in parts])
        d = np.concatenate([p[2] for p in parts])
        if ids64 is None:  # positions: put in (a, b) order by counting (same as the sort below)
            a, b, d = K.pairs_in_order(seg.ids, ra, rb, d, n)
            return a, b, d
        a, b = seg.ids[ra], seg.ids[rb]
        a, b = np.minimum(a, b), np.maximum(a, b)
    else:
        idx.add(fps)
        lims, b, d = idx.search(fps)
        a = np.repeat(np.arange(n, dtype=np.int64), np.diff(lims))
        keep = a < b
        a, b, d = a[keep], b[keep], d[keep]
    if ids64 is not None:
        a, b = ids64[a], ids64[b]
        a, b = np.minimum(a, b), np.maximum(a, b)
    # positions: a * n + b is one int64 key per pair (cheaper to sort than two)
    o = np.argsort(a * n + b) if ids64 is None and n <= (1 << 31) else np.lexsort((b, a))
    return a[o], b[o], d[o].astype(np.int32, copy=False)


# ---------------------------------------------------------------------------------------------
# the work of a self-join at a distance, counted on the fingerprints' own buckets (the cost
# model's terms: neardup.index.plan)


@kernel(nogil=True)
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
        pos, hit = find_sorted(u, q)
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
    ``est_pairs`` output pairs at ``pair_ns`` each (:func:`neardup.rules.passes.pair_work_ns`: with their
    verification). ``uniform=True`` assumes uniform buckets (``n / 2^pb`` each), a
    cheap lower estimate used to skip hopeless distances. Skewed fingerprints (heavy buckets)
    cost more than uniform ones, which is why the buckets are counted. ``workers`` threads
    count the tables' buckets (from ``TABLES_THREADS_MIN`` fingerprints; the kernels release
    the GIL); the terms are added in table order either way, so the value does not depend on it.
    """
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
