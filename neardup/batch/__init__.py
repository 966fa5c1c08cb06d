"""Batch dedup of a corpus.

The run: :func:`dedup` (:mod:`.run`, the orchestrator) with its parameters and result
(:mod:`.config`: :class:`DedupConfig`, :class:`DedupResult`, :class:`PairTable`), from files to
files with :func:`dedup_files` (:mod:`.files`: reading overlapped with hashing, outputs
written together). Its stages, one module each: exact hashes and fingerprints (:mod:`.exact`),
exact groups and their pairs (:mod:`.groups`), candidate pairs (:mod:`.candidate_stage`, over
the channels :mod:`.minhash` and :mod:`.candidates`), verification (:mod:`.verify_stage`), the
keep policy (:mod:`.policy`, over :mod:`.cluster`). Also: scoring against labelled pairs
(:mod:`.evaluate`) and a ``datasets.Dataset`` in and out (:mod:`.datasets`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# public name -> module that defines it (imported on first use)
_EXPORTS: dict[str, str] = {
    "DEFAULT_THRESHOLD": ".minhash",
    "DEFAULT_WORK_NS_PER_DOC": ".candidates",
    "DedupConfig": ".config",
    "DedupResult": ".config",
    "ExactFingerprintPass": ".exact",
    "LshPlan": ".minhash",
    "PairTable": ".config",
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
    "dedup_files": ".files",
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
    "stage_candidates": ".candidate_stage",
    "stage_cluster": ".policy",
    "stage_exact": ".exact",
    "stage_exact_fingerprint": ".exact",
    "stage_fingerprint": ".exact",
    "stage_policy": ".policy",
    "stage_verify": ".verify_stage",
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
    "dedup_files",
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
    from .candidate_stage import stage_candidates
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
    from .config import DedupConfig, DedupResult, PairTable
    from .datasets import dataset_column, dedup_dataset
    from .evaluate import load_labels, pair_slices, prf, score_reported, sweep
    from .exact import (
        ExactFingerprintPass,
        stage_exact,
        stage_exact_fingerprint,
        stage_fingerprint,
    )
    from .files import dedup_files
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
    from .policy import stage_cluster, stage_policy
    from .run import dedup
    from .verify_stage import stage_verify
