"""neardup: near-duplicate text detection at web scale.

SimHash fingerprints (:class:`Fingerprinter`), exact k-bit Hamming search over permuted sorted
tables (:class:`HammingIndex`, :func:`all_pairs`), corpus dedup (:func:`dedup`), and an online
check-and-insert store (:class:`Deduplicator`) served over HTTP (:class:`Client`).

Public names are imported lazily, so ``import neardup`` is cheap and optional extras are only
needed by the parts that use them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
    "UnsupportedVersionError": "neardup.errors",
    "StorageError": "neardup.errors",
    "ServiceUnavailableError": "neardup.errors",
    "MissingDependencyError": "neardup.errors",
    # distances
    "hamming": "neardup.hamming",
    "hamming_many": "neardup.hamming",
    "hamming_to_many": "neardup.hamming",
    "hamming_cdist": "neardup.hamming",
    # fingerprints (issue: fingerprints)
    "Fingerprinter": "neardup.fingerprint",
    "content_hash": "neardup.fingerprint",
    "content_hash_many": "neardup.fingerprint",
    # index (issue: hamming index)
    "HammingIndex": "neardup.index",
    "all_pairs": "neardup.index",
    # batch dedup (issue: neardup dedup)
    "dedup": "neardup.dedup",
    "DedupConfig": "neardup.dedup",
    "DedupResult": "neardup.dedup",
    "dedup_dataset": "neardup.io.hf",
    # online (issue: service)
    "Deduplicator": "neardup.online",
    "Decision": "neardup.online",
    "Match": "neardup.online",
    "Client": "neardup.service.client",
    # cluster (issue 27)
    "HashRing": "neardup.ring",
    "ClusterClient": "neardup.service.cluster",
    "ClusterConfig": "neardup.service.cluster",
}

__all__ = [
    "AuthError",
    "Client",
    "ClusterClient",
    "ClusterConfig",
    "ConfigError",
    "CorruptFileError",
    "Decision",
    "DedupConfig",
    "DedupResult",
    "Deduplicator",
    "Fingerprinter",
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
    "hamming",
    "hamming_cdist",
    "hamming_many",
    "hamming_to_many",
]

# ``hamming`` and ``dedup`` are both a submodule and a public function. Importing a submodule
# sets the package attribute to the module, which would shadow the lazily resolved function, so
# these two are bound eagerly (both modules are cheap to import: NumPy only, no numba).
from .dedup import dedup  # noqa: E402
from .hamming import hamming  # noqa: E402


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'neardup' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .dedup import DedupConfig, DedupResult, dedup
    from .errors import (
        AuthError,
        ConfigError,
        CorruptFileError,
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
    from .fingerprint import Fingerprinter, content_hash, content_hash_many
    from .hamming import hamming, hamming_cdist, hamming_many, hamming_to_many
    from .index import HammingIndex, all_pairs
    from .io.hf import dedup_dataset
    from .online import Decision, Deduplicator, Match
    from .ring import HashRing
    from .service.client import Client
    from .service.cluster import ClusterClient, ClusterConfig
