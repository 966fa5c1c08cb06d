"""neardup: near-duplicate text detection at web scale.

SimHash fingerprints (:class:`Fingerprinter`), exact k-bit Hamming search over permuted sorted
tables (:class:`HammingIndex`, :func:`all_pairs`), corpus dedup (:func:`dedup`), and an online
check-and-insert store (:class:`Deduplicator`) served over HTTP (:class:`Client`).

Public names are imported lazily, so ``import neardup`` is cheap and optional extras are only
needed by the parts that use them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # errors
    "NeardupError": "neardup.errors",
    "AuthError": "neardup.errors",
    "PayloadTooLargeError": "neardup.errors",
    "ConfigError": "neardup.errors",
    "InputError": "neardup.errors",
    "InputTypeError": "neardup.errors",
    "RecordError": "neardup.errors",
    "NotFoundError": "neardup.errors",
    "IndexStateError": "neardup.errors",
    "FormatError": "neardup.errors",
    "CorruptFileError": "neardup.errors",
    "CorruptRecordError": "neardup.errors",
    "ForbiddenError": "neardup.errors",
    "UnsupportedVersionError": "neardup.errors",
    "StorageError": "neardup.errors",
    "ServiceUnavailableError": "neardup.errors",
    "MissingDependencyError": "neardup.errors",
    # distances
    "hamming": "neardup.fingerprint",
    "hamming_many": "neardup.fingerprint",
    "hamming_to_many": "neardup.fingerprint",
    "hamming_cdist": "neardup.fingerprint",
    # fingerprints
    "Fingerprinter": "neardup.fingerprint",
    "content_hash": "neardup.fingerprint",
    "content_hash_many": "neardup.fingerprint",
    # index
    "HammingIndex": "neardup.index",
    "all_pairs": "neardup.index",
    # batch dedup
    "dedup": "neardup.batch",
    "DedupConfig": "neardup.rules",
    "DedupResult": "neardup.batch",
    "dedup_dataset": "neardup.batch",
    "dedup_files": "neardup.batch",
    # review: explain a pair
    "explain": "neardup.review.explain",
    "Explanation": "neardup.review.explain",
    # online
    "Deduplicator": "neardup.online",
    "Decision": "neardup.rules",
    "Match": "neardup.rules",
    "Client": "neardup.service.client",
    # cluster
    "HashRing": "neardup.cluster",
    "ClusterClient": "neardup.cluster",
    "ClusterConfig": "neardup.cluster",
}

__all__ = [
    "AuthError",
    "Client",
    "ClusterClient",
    "ClusterConfig",
    "ConfigError",
    "CorruptFileError",
    "CorruptRecordError",
    "Decision",
    "DedupConfig",
    "DedupResult",
    "Deduplicator",
    "Explanation",
    "Fingerprinter",
    "ForbiddenError",
    "FormatError",
    "HammingIndex",
    "HashRing",
    "IndexStateError",
    "InputError",
    "InputTypeError",
    "Match",
    "MissingDependencyError",
    "NeardupError",
    "NotFoundError",
    "PayloadTooLargeError",
    "RecordError",
    "ServiceUnavailableError",
    "StorageError",
    "UnsupportedVersionError",
    "__version__",
    "all_pairs",
    "content_hash",
    "content_hash_many",
    "dedup",
    "dedup_dataset",
    "dedup_files",
    "explain",
    "hamming",
    "hamming_cdist",
    "hamming_many",
    "hamming_to_many",
]

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, __all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .batch import DedupResult, dedup, dedup_dataset, dedup_files
    from .cluster import ClusterClient, ClusterConfig, HashRing
    from .errors import (
        AuthError,
        ConfigError,
        CorruptFileError,
        CorruptRecordError,
        ForbiddenError,
        FormatError,
        IndexStateError,
        InputError,
        InputTypeError,
        MissingDependencyError,
        NeardupError,
        NotFoundError,
        PayloadTooLargeError,
        RecordError,
        ServiceUnavailableError,
        StorageError,
        UnsupportedVersionError,
    )
    from .fingerprint import (
        Fingerprinter,
        content_hash,
        content_hash_many,
        hamming,
        hamming_cdist,
        hamming_many,
        hamming_to_many,
    )
    from .index import HammingIndex, all_pairs
    from .online import Deduplicator
    from .review.explain import Explanation, explain
    from .rules import Decision, DedupConfig, Match
    from .service.client import Client
