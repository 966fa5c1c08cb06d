"""Second-stage verification of candidate pairs on their text, shared by the batch pipeline
and the online store: the rule (:mod:`.rule`), token sequences as strings and the LCS cap
(:mod:`.sequences`), many texts tokenised, encoded and hashed at once (:mod:`.tokens`) and the
overlap bounds and exact LCS (:mod:`.overlap`), with the pure references they are tested
against (:mod:`.reference`, for tests). The ASCII normalisation of the exact stage is
re-exported from :mod:`neardup.text.ascii`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# public name -> module that defines it (imported on first use)
_EXPORTS: dict[str, str] = {
    "DEFAULT_MAX_LCS_CELLS": ".sequences",
    "LONG_CHARS": ".rule",
    "TokenEncoder": ".sequences",
    "Verifier": ".rule",
    "bound_decisions": ".overlap",
    "collapse_ascii_spaces": "..text.ascii",
    "encode_sorted": ".overlap",
    "encode_texts": ".tokens",
    "histogram_bound_decisions": ".overlap",
    "lcs_many": ".overlap",
    "lower_ascii_clean": "..text.ascii",
    "lower_ascii_clean_serial": "..text.ascii",
    "normalized_ascii_digests": "..text.ascii",
    "overlap_many": ".overlap",
    "token_bytes": ".tokens",
    "token_hashes": ".tokens",
    "token_histograms": ".tokens",
    "tokenize": ".rule",
}

__all__ = [
    "DEFAULT_MAX_LCS_CELLS",
    "LONG_CHARS",
    "TokenEncoder",
    "Verifier",
    "bound_decisions",
    "collapse_ascii_spaces",
    "encode_sorted",
    "encode_texts",
    "histogram_bound_decisions",
    "lcs_many",
    "lower_ascii_clean",
    "lower_ascii_clean_serial",
    "normalized_ascii_digests",
    "overlap_many",
    "token_bytes",
    "token_hashes",
    "token_histograms",
    "tokenize",
]

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, __all__)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from ..text.ascii import (
        collapse_ascii_spaces,
        lower_ascii_clean,
        lower_ascii_clean_serial,
        normalized_ascii_digests,
    )
    from .overlap import (
        bound_decisions,
        encode_sorted,
        histogram_bound_decisions,
        lcs_many,
        overlap_many,
    )
    from .rule import LONG_CHARS, Verifier, tokenize
    from .sequences import DEFAULT_MAX_LCS_CELLS, TokenEncoder
    from .tokens import (
        encode_texts,
        token_bytes,
        token_hashes,
        token_histograms,
    )
