"""The summary of a dedup run (``stats``, ``--summary-json``): one function for every batch
front-end, so the single machine and the distributed engines report the same keys with the same
meaning (:func:`summary`), and the verified candidates' score histogram
(:func:`candidate_scores`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..verify.rule import RULE_NAMES
from .config import Keep
from .plan import LshPlan, plan_promise, plan_warnings

__all__ = ["SCORE_BINS", "candidate_scores", "summary"]

#: bins of ``stats["candidate_scores"]`` over [0, 1] (the last bin holds 1.0)
SCORE_BINS = 100


def candidate_scores(
    score: npt.NDArray[np.float64],
    rule: npt.NDArray[np.uint8],
    skipped: npt.NDArray[np.bool_],
) -> dict[str, Any]:
    """``stats["candidate_scores"]``: the verified candidate pairs (first copies, before exact
    copies are expanded) counted by the rule that decided them and their score, in
    ``SCORE_BINS`` equal bins over [0, 1] (bin ``i`` holds ``i / bins <= score < (i + 1) /
    bins``; the last one holds 1.0 too), plus the ``skipped`` pairs (deferred, never
    verified). What the review report shows a threshold would keep or drop; a ``bound`` pair's
    score is an upper bound on its similarity."""
    done = ~skipped
    sc, ru = score[done], rule[done]
    # (+1e-9: a score equal to an edge, i / bins as a float product, lands in bin i; distinct
    # token-count ratios are farther apart than that)
    k = np.clip(np.floor(sc * SCORE_BINS + 1e-9).astype(np.int64), 0, SCORE_BINS - 1)
    counts = {}
    for code in np.unique(ru).tolist():
        counts[RULE_NAMES[code]] = np.bincount(k[ru == code], minlength=SCORE_BINS).tolist()
    return {"bins": SCORE_BINS, "counts": counts, "skipped": int(skipped.sum())}


def summary(
    *,
    documents: int,
    exact_duplicates: int,
    kept: int,
    clusters: int,
    keep: Keep,
    candidates: int,
    verified: int,
    pairs: int,
    plan: LshPlan | None,
    elapsed_s: float,
    timings: dict[str, float],
    candidate_passes: dict[str, Any] | None = None,
    lsh: dict[str, Any] | None = None,
    scores: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A run's summary from its counts.

    ``documents``, ``exact_duplicates`` (later copies of an exact group), ``kept``,
    ``clusters`` (groups of two or more: a kept document and what it drops, or with
    ``keep="none"`` a connected component, all of it dropped), ``candidates`` (candidate pairs
    of first copies), ``verified`` (those accepted), ``pairs`` (matched pairs reported). The
    near duplicates are the documents in clusters that are neither the kept member nor an exact
    copy. ``plan`` (None: ``candidates="simhash"``) gives ``promise`` and ``warnings``
    (:func:`~neardup.rules.plan.plan_promise`, :func:`~neardup.rules.plan.plan_warnings`);
    ``candidate_passes``, ``lsh`` and ``scores`` (``candidate_scores``) are reported when
    given; ``extra`` keys (the front-end's own: ``config``, ``engine``, ...) come last."""
    dropped = documents - kept
    in_cluster = dropped if keep == "none" else dropped + clusters
    out: dict[str, Any] = {
        "documents": documents,
        "exact_duplicates": exact_duplicates,
        "near_duplicates": in_cluster - clusters - exact_duplicates,
        "clusters": clusters,
        "kept": kept,
        "dropped": dropped,
        "candidates": candidates,
    }
    if candidate_passes is not None:
        out["candidate_passes"] = candidate_passes
    out["promise"] = plan_promise(plan)
    out["warnings"] = plan_warnings(plan)
    if lsh:
        out["lsh"] = lsh
    out["verified"] = verified
    if scores is not None:
        out["candidate_scores"] = scores
    out["pairs"] = pairs
    out["elapsed_s"] = round(elapsed_s, 3)
    out["docs_per_s"] = round(documents / elapsed_s, 1) if elapsed_s > 0 else None
    out["timings_s"] = timings
    out.update(extra)
    return out
