"""Batch dedup of a corpus: the run and its stages (:mod:`.run`: :func:`dedup`, :class:`DedupConfig`,
:class:`DedupResult`), candidate channels (:mod:`.minhash`, :mod:`.candidates`), exact groups
(:mod:`.groups`), kept representatives and components (:mod:`.cluster`), scoring against
labelled pairs (:mod:`.evaluate`), and a ``datasets.Dataset`` in and out (:mod:`.datasets`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# public name -> module that defines it (imported on first use)
_EXPORTS: dict[str, str] = {
    "DEFAULT_THRESHOLD": ".minhash",
    "DEFAULT_WORK_NS_PER_DOC": ".candidates",
    "DedupConfig": ".run",
    "DedupResult": ".run",
    "ExactFingerprintPass": ".run",
    "LshPlan": ".minhash",
    "PairTable": ".run",
    "PassPlan": ".candidates",
    "TABLES_MAX_DISTANCE": ".candidates",
    "UnionFind": ".cluster",
    "all_pairs_bruteforce": ".candidates",
    "all_pairs_reference": ".candidates",
    "bounded_pairs": ".candidates",
    "candidate_pairs": ".candidates",
    "candidate_probability": ".minhash",
    "cluster_ids": ".cluster",
    "connected_components": ".cluster",
    "connected_components_reference": ".cluster",
    "dataset_column": ".datasets",
    "dedup": ".run",
    "dedup_dataset": ".datasets",
    "greedy_representatives": ".cluster",
    "greedy_representatives_reference": ".cluster",
    "load_labels": ".evaluate",
    "lsh_pairs": ".minhash",
    "lsh_pairs_reference": ".minhash",
    "minhash_signatures": ".minhash",
    "minhash_signatures_reference": ".minhash",
    "pair_slices": ".evaluate",
    "plan_lsh": ".minhash",
    "plan_pass": ".candidates",
    "planned_pairs": ".candidates",
    "prf": ".evaluate",
    "score_reported": ".evaluate",
    "shingle_jaccard": ".minhash",
    "stage_candidates": ".run",
    "stage_cluster": ".run",
    "stage_exact": ".run",
    "stage_exact_fingerprint": ".run",
    "stage_fingerprint": ".run",
    "stage_policy": ".run",
    "stage_verify": ".run",
    "sweep": ".evaluate",
}

__all__ = [
    "DEFAULT_THRESHOLD",
    "DEFAULT_WORK_NS_PER_DOC",
    "TABLES_MAX_DISTANCE",
    "DedupConfig",
    "DedupResult",
    "ExactFingerprintPass",
    "LshPlan",
    "PairTable",
    "PassPlan",
    "UnionFind",
    "all_pairs_bruteforce",
    "all_pairs_reference",
    "bounded_pairs",
    "candidate_pairs",
    "candidate_probability",
    "cluster_ids",
    "connected_components",
    "connected_components_reference",
    "dataset_column",
    "dedup",
    "dedup_dataset",
    "greedy_representatives",
    "greedy_representatives_reference",
    "load_labels",
    "lsh_pairs",
    "lsh_pairs_reference",
    "minhash_signatures",
    "minhash_signatures_reference",
    "pair_slices",
    "plan_lsh",
    "plan_pass",
    "planned_pairs",
    "prf",
    "score_reported",
    "shingle_jaccard",
    "stage_candidates",
    "stage_cluster",
    "stage_exact",
    "stage_exact_fingerprint",
    "stage_fingerprint",
    "stage_policy",
    "stage_verify",
    "sweep",
]

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, __all__)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .candidates import (
        DEFAULT_WORK_NS_PER_DOC,
        TABLES_MAX_DISTANCE,
        PassPlan,
        all_pairs_bruteforce,
        all_pairs_reference,
        bounded_pairs,
        candidate_pairs,
        plan_pass,
        planned_pairs,
    )
    from .cluster import (
        UnionFind,
        cluster_ids,
        connected_components,
        connected_components_reference,
        greedy_representatives,
        greedy_representatives_reference,
    )
    from .datasets import dataset_column, dedup_dataset
    from .evaluate import load_labels, pair_slices, prf, score_reported, sweep
    from .minhash import (
        DEFAULT_THRESHOLD,
        LshPlan,
        candidate_probability,
        lsh_pairs,
        lsh_pairs_reference,
        minhash_signatures,
        minhash_signatures_reference,
        plan_lsh,
        shingle_jaccard,
    )
    from .run import (
        DedupConfig,
        DedupResult,
        ExactFingerprintPass,
        PairTable,
        dedup,
        stage_candidates,
        stage_cluster,
        stage_exact,
        stage_exact_fingerprint,
        stage_fingerprint,
        stage_policy,
        stage_verify,
    )
