"""Batch dedup of a corpus: a driver over :mod:`neardup.rules`.

The run: :func:`dedup` (:mod:`.run`, the orchestrator) and its result (:mod:`.result`:
:class:`DedupResult`), from files to files with :func:`dedup_files` (:mod:`.files`: reading
overlapped with hashing, outputs written together); its own stage, exact hashes and
fingerprints (:mod:`.exact`). The decision -- settings, candidates, verification, keep rule,
summary -- is :mod:`neardup.rules`'s, shared with the other front-ends. Also: scoring against
labelled pairs (:mod:`.evaluate`) and a ``datasets.Dataset`` in and out (:mod:`.datasets`).
The pure references of its own fast paths are in :mod:`.reference` (tests).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# public name -> module that defines it (imported on first use)
_EXPORTS: dict[str, str] = {
    "DedupResult": ".result",
    "ExactFingerprintPass": ".exact",
    "dataset_column": ".datasets",
    "dedup": ".run",
    "dedup_dataset": ".datasets",
    "dedup_files": ".files",
    "load_labels": ".evaluate",
    "pair_slices": ".evaluate",
    "prf": ".evaluate",
    "score_reported": ".evaluate",
    "stage_exact": ".exact",
    "stage_exact_fingerprint": ".exact",
    "stage_fingerprint": ".exact",
    "sweep": ".evaluate",
}

__all__ = [
    "DedupResult",
    "ExactFingerprintPass",
    "dataset_column",
    "dedup",
    "dedup_dataset",
    "dedup_files",
    "load_labels",
    "pair_slices",
    "prf",
    "score_reported",
    "stage_exact",
    "stage_exact_fingerprint",
    "stage_fingerprint",
    "sweep",
]

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, __all__)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .datasets import dataset_column, dedup_dataset
    from .evaluate import load_labels, pair_slices, prf, score_reported, sweep
    from .exact import (
        ExactFingerprintPass,
        stage_exact,
        stage_exact_fingerprint,
        stage_fingerprint,
    )
    from .files import dedup_files
    from .result import DedupResult
    from .run import dedup
