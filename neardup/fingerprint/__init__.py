"""Fingerprints and signatures: SimHash (:mod:`.simhash`, numba kernels in :mod:`._numba`,
the pure reference in :mod:`.reference`), Hamming distances between fingerprints
(:mod:`.distance`), and MinHash signatures with their LSH band keys (:mod:`.minhash`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# public name -> module that defines it (imported on first use)
_EXPORTS: dict[str, str] = {
    "AUTO_EN": ".simhash",
    "AUTO_ZH": ".simhash",
    "BAND_BLOCK": ".minhash",
    "FEATURES": ".simhash",
    "FingerprintBatch": ".simhash",
    "Fingerprinter": ".simhash",
    "NO_SIGNATURE": ".minhash",
    "SIGNATURE_SCHEME": ".minhash",
    "WEIGHTS": ".simhash",
    "as_fingerprints": ".distance",
    "band_key_block": ".minhash",
    "band_keys": ".minhash",
    "content_hash": ".simhash",
    "content_hash_many": ".simhash",
    "fingerprint_bits": ".distance",
    "hamming": ".distance",
    "hamming_cdist": ".distance",
    "hamming_many": ".distance",
    "hamming_to_many": ".distance",
    "int_to_words": ".distance",
    "minhash_signatures": ".minhash",
    "mix64": ".minhash",
    "sketch_shingles": ".minhash",
    "words_to_int": ".distance",
}

__all__ = [
    "AUTO_EN",
    "AUTO_ZH",
    "BAND_BLOCK",
    "FEATURES",
    "NO_SIGNATURE",
    "SIGNATURE_SCHEME",
    "WEIGHTS",
    "FingerprintBatch",
    "Fingerprinter",
    "as_fingerprints",
    "band_key_block",
    "band_keys",
    "content_hash",
    "content_hash_many",
    "fingerprint_bits",
    "hamming",
    "hamming_cdist",
    "hamming_many",
    "hamming_to_many",
    "int_to_words",
    "minhash_signatures",
    "mix64",
    "sketch_shingles",
    "words_to_int",
]

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, __all__)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .distance import (
        as_fingerprints,
        fingerprint_bits,
        hamming,
        hamming_cdist,
        hamming_many,
        hamming_to_many,
        int_to_words,
        words_to_int,
    )
    from .minhash import (
        BAND_BLOCK,
        NO_SIGNATURE,
        SIGNATURE_SCHEME,
        band_key_block,
        band_keys,
        minhash_signatures,
        mix64,
        sketch_shingles,
    )
    from .simhash import (
        AUTO_EN,
        AUTO_ZH,
        FEATURES,
        WEIGHTS,
        FingerprintBatch,
        Fingerprinter,
        content_hash,
        content_hash_many,
    )
