"""Pure references of verification's fast paths, for tests (not in any ``__all__`` of the
package): texts encoded one by one, token hashes and histograms in plain Python, the multiset
overlap with ``collections.Counter``. The numba paths of :mod:`neardup.verify.tokens` and
:mod:`neardup.verify.overlap` are tested equal to these.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..text.hashing import fnv1a64
from .sequences import TokenEncoder
from .tokens import HIST_BITS, HIST_MAX

if TYPE_CHECKING:  # pragma: no cover - for type checkers only
    from .rule import Verifier

__all__: list[str] = []

_M64 = (1 << 64) - 1
_MIX = 0x9E3779B97F4A7C15


def encode_texts_reference(
    verifier: Verifier, texts: Sequence[str], encoder: TokenEncoder
) -> list[str]:
    """The definition of :func:`~neardup.verify.tokens.encode_texts`: tokenise and encode each
    text in order."""
    return [encoder.encode(verifier.tokens(t)) for t in texts]


def token_hash_reference(token: str) -> int:
    """32-bit hash of a token: FNV-1a (64-bit) over its UTF-8 bytes, then the top 32 bits of
    ``h * 0x9E3779B97F4A7C15`` (mod 2**64). The definition the numba kernel of
    :func:`~neardup.verify.tokens.token_hashes` is tested against."""
    return ((fnv1a64(token.encode("utf-8")) * _MIX) & _M64) >> 32


def token_hashes_reference(
    verifier: Verifier, texts: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """The definition of :func:`~neardup.verify.tokens.token_hashes`: every text's tokens
    (``verifier.tokens``) hashed by :func:`token_hash_reference` and sorted, as a CSR."""
    rows = [sorted(token_hash_reference(t) for t in verifier.tokens(x)) for x in texts]
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    values = np.array([h for r in rows for h in r], dtype=np.uint32)
    return values, offsets


def token_histograms_reference(
    verifier: Verifier, texts: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """The definition of :func:`~neardup.verify.tokens.token_histograms`: per text, how many
    of its tokens (``verifier.tokens``) fall in each of ``2**HIST_BITS`` buckets, the bucket
    being the top ``HIST_BITS`` bits of :func:`token_hash_reference`, counts capped at
    ``HIST_MAX``; and the exact token counts."""
    nb = 1 << HIST_BITS
    hist = np.zeros((len(texts), nb), np.uint8)
    counts = np.zeros(len(texts), np.int64)
    for d, text in enumerate(texts):
        toks = verifier.tokens(text)
        counts[d] = len(toks)
        for t in toks:
            b = token_hash_reference(t) >> (32 - HIST_BITS)
            hist[d, b] = min(HIST_MAX, int(hist[d, b]) + 1)
    return hist, counts


def overlap_reference(a: Sequence[object], b: Sequence[object]) -> int:
    """``sum_t min(count_a(t), count_b(t))`` with ``Counter``: the definition of the multiset
    overlap of :func:`~neardup.verify.overlap.overlap_many`."""
    return sum((Counter(a) & Counter(b)).values())
