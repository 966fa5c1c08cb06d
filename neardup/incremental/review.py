"""The review report and clusters of an incremental run (``neardup dedup NEW --against STORE
--report / --clusters-out``).

A run against a store drops new documents for stored ones it never reads in bulk; a person
reviewing the run needs to see those stored documents beside what they dropped. :func:`run_view`
makes the run look like the one keep-first run over the concatenation it stands for (the
stored documents first, then the new ones) to :func:`neardup.review.report.build_review`: the
stored documents that dropped something (their texts read from the store, one by one) come
first, kept; each new document dropped for the store joins the cluster of the first stored
document it matched; the run's own pairs and clusters follow, moved past them. The stored
matches' pairs are verified again here, with the run's rule, only to name the rule that
accepts them (the store decided them; ``neardup explain`` tells the rest).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["RunView", "run_view", "write_view_clusters"]


@dataclasses.dataclass
class RunView:
    """What :func:`neardup.review.report.build_review` reads of a run: the documents' ids,
    their cluster roots, which were kept, the matched pairs and the summary."""

    ids: list[str]
    root: npt.NDArray[np.int64]
    keep: npt.NDArray[np.bool_]
    pairs: Any
    stats: dict[str, Any]
    #: how many of the first documents are stored ones (shown beside what they dropped, not
    #: documents of the run: the report's per-language counts leave them out)
    stored: int = 0


def run_view(
    d: Any,
    into: Any,
    ids: Sequence[str],
    texts: Sequence[str],
    verifier: Any,
    summary: dict[str, Any],
) -> tuple[RunView, list[str]]:
    """(the view, its texts) of a run :func:`neardup.incremental.dedup_into` decided against
    the open store ``d`` with ``pairs=True`` (``into.stored_pairs``); ``verifier`` the run's
    (None: the run did not verify, its pairs' rule is ``unverified``)."""
    from ..batch.exact import stage_exact
    from ..rules.config import PairTable
    from ..rules.verify import stage_verify_rules
    from ..verify.rule import RULE_EXACT, RULE_UNVERIFIED

    stored_ids = list(dict.fromkeys(a for a, _, _, _ in into.stored_pairs))
    s = len(stored_ids)
    where = {x: k for k, x in enumerate(stored_ids)}
    new_at = {x: s + i for i, x in enumerate(ids)}
    stored_texts = []
    for x in stored_ids:
        doc = d.get(x)
        stored_texts.append(doc.get("text") or "")
    all_texts = stored_texts + [str(t) for t in texts]
    n = len(ids)
    root = np.arange(s + n, dtype=np.int64)
    keep = np.concatenate([np.ones(s, np.bool_), np.asarray(into.keep, np.bool_)])
    # the run's own clusters and pairs, over the documents the store did not drop
    rest = np.asarray(into.rest, np.int64)
    result = into.result
    root[s + rest] = s + rest[np.asarray(result.root, np.int64)]
    own = result.pairs
    # the stored matches: each dropped document joins its first match's cluster
    a = np.fromiter((where[x] for x, _, _, _ in into.stored_pairs), np.int64)
    b = np.fromiter((new_at[y] for _, y, _, _ in into.stored_pairs), np.int64)
    dist = np.fromiter((int(k) for _, _, k, _ in into.stored_pairs), np.int32)
    first: dict[int, int] = {}
    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        first.setdefault(y, x)
    for y, x in first.items():
        root[y] = x
    score = np.ones(a.size, np.float64)
    rule = np.full(a.size, RULE_UNVERIFIED, np.uint8)
    stage = np.ones(a.size, np.uint8)
    if a.size:
        copies = stage_exact(all_texts)
        exact = copies[a] == copies[b]
        stage[exact] = 0
        rule[exact] = RULE_EXACT
        near = np.flatnonzero(~exact)
        if verifier is not None and near.size:
            _, sc, rl = stage_verify_rules(verifier, all_texts, a[near], b[near], dist[near])
            score[near], rule[near] = sc, rl
        for k, (_, _, _, sc_store) in enumerate(into.stored_pairs):
            if not exact[k] and verifier is None and sc_store is not None:
                score[k] = float(sc_store)
    pairs = PairTable.concat(
        [
            PairTable(a, b, dist, score, stage, rule),
            PairTable(
                s + rest[own.a], s + rest[own.b], own.distance, own.score, own.stage, own.rule
            ),
        ]
    )
    view = RunView(stored_ids + [str(x) for x in ids], root, keep, pairs, summary, stored=s)
    return view, all_texts


def write_view_clusters(path: str, view: RunView, new: int) -> None:
    """The clusters CSV of an incremental run at ``path``: a row per new document (the last
    ``new`` of ``view``), numbered and sized over every document of the view, so that a
    document the store dropped names the stored document it duplicates as its cluster's
    representative."""
    from ..io.csvout import write_clusters_csv
    from ..io.remote import open_output

    _, cluster = np.unique(view.root, return_inverse=True)
    n = len(view.ids)
    with open_output(path, buffering=1 << 20) as fh:
        write_clusters_csv(
            fh,
            view.ids,
            cluster.astype(np.int64),
            view.root,
            view.keep,
            rows=np.arange(n - new, n, dtype=np.int64),
        )
