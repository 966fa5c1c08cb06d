"""The SimHash candidate pass's planning policy: which distance a pass can afford.

A pass's budget is ``work_ns_per_doc`` modelled nanoseconds per document; :func:`plan_pass`
picks the largest distance whose modelled work -- the index's one cost model
(:mod:`neardup.index.plan`: the brute-force scan's :func:`~neardup.index.plan.scan_work_ns`, the
self-join's :func:`~neardup.index.allpairs.tables_work_ns`), plus the output pairs with their
verification (:func:`pair_work_ns`) -- fits it, and :func:`planned_pairs` runs the pass (the
searches themselves are :mod:`neardup.index`'s) under the per-document pair valve.
Deterministic: a model, never a timer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .._threads import kernel_threads
from ..fingerprint.distance import as_fingerprints
from ..index.allpairs import all_pairs, tables_work_ns
from ..index.plan import TABLES_PAIR_NS, scan_work_ns
from ..index.scan import (
    BOUNDED_TABLES_MIN_N,
    TABLES_MAX_DISTANCE,
    bounded_pairs,
    candidate_pairs,
    check_distance,
    empty_pairs,
    estimate_pairs_within,
)

__all__ = [
    "DEFAULT_WORK_NS_PER_DOC",
    "VERIFY_NS_PER_CHAR",
    "PassPlan",
    "pair_work_ns",
    "plan_pass",
    "planned_pairs",
    "valve_distance",
]

#: verifying a candidate pair costs about this per character of the two texts (tokenising is
#: per document; the overlap bound and, for the few that pass it, the LCS are per pair)
VERIFY_NS_PER_CHAR = 1.5


def pair_work_ns(mean_chars: float) -> float:
    """Modelled cost of one candidate pair whose texts average ``mean_chars`` characters:
    producing it and verifying it (ns)."""
    return TABLES_PAIR_NS + VERIFY_NS_PER_CHAR * 2.0 * max(float(mean_chars), 0.0)


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
    check_distance(max_distance, bits)
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
        with kernel_threads(workers):
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
        return (*empty_pairs(), info)
    if plan.method == "scan":
        if max_pairs is not None and fps.ndim == 1:  # the valve at any distance
            a, b, d, used = bounded_pairs(fps, r, max_pairs, workers=workers)
        else:
            a, b, d = candidate_pairs(fps, r, workers=workers)
            used = r
    else:
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
            with kernel_threads(workers):
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
            used = valve_distance(np.bincount(d, minlength=g + 1)[: g + 1], max_pairs)
            keep = d <= used  # sorted by (a, b); filtering keeps that order
            a, b, d = a[keep], b[keep], d[keep]
    info["distance_used"] = int(used)
    return np.asarray(a, np.int64), np.asarray(b, np.int64), np.asarray(d, np.int32), info


def valve_distance(pairs_at: npt.ArrayLike, max_pairs: int | None) -> int:
    """The pair valve of a SimHash pass: the largest distance ``g`` whose pairs (``pairs_at[d]``
    pairs at distance ``d``, for every distance up to the pass's) number at most ``max_pairs``
    in all; the pass's own distance when they all fit (or no bound), -1 when not even the
    identical pairs fit. :func:`planned_pairs` applies it to the pairs it found, the
    distributed engines to the pairs their join counted.

    >>> valve_distance([10, 5, 40, 100], 60), valve_distance([10, 5], 100), valve_distance([9], 8)
    (2, 1, -1)
    """
    at = np.asarray(pairs_at, np.int64)
    cum = np.cumsum(at)
    if max_pairs is None or not cum.size or cum[-1] <= max_pairs:
        return int(at.size) - 1
    fits = np.flatnonzero(cum <= max_pairs)
    return int(fits[-1]) if fits.size else -1
