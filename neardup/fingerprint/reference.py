"""Pure-Python SimHash reference: the definition the numba kernels must match bit for bit.

Given prepared text (:func:`neardup.text.prepare`), a feature mode and hash settings:

1. features (module docstring of :mod:`neardup.text.tokenize`), each with words ``(hi, lo)``
   (:mod:`neardup.hashing`) and an integral weight ``w >= 1``; a token whose table weight is 0
   (a stop word) is dropped before shingling; a shingle weighs
   ``max(1, sum(member weights) // len(members))``; a char n-gram weighs 1;
2. per bit ``b`` of each 64-bit word: ``sum_b = sum(w if bit b of the word is 1 else -w)``;
3. bit ``b`` of the fingerprint is 1 iff ``sum_b > 0`` (ties give 0); a document without
   features gets fingerprint 0.

The 64-bit fingerprint is the ``hi`` word; a 128-bit one is ``hi << 64 | lo``.
Weights are integers, so the sums never depend on summation order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ..text.hashing import combine64, feature_hash

__all__ = ["bit_sums", "doc_features", "simhash_from_features"]

_TOKEN = re.compile("[0-9a-z_\u0080-\U0010ffff]+")
_SEP_RUN = re.compile("[^0-9a-z_\u0080-\U0010ffff]+")

Feature = tuple[int, int, int]  # (hi, lo, weight)


def doc_features(
    prepared: str,
    mode: str,
    n: int,
    *,
    hash: str = "xxh64",
    seed: int = 0,
    bits: int = 64,
    table: Mapping[int, int] | None = None,
    default_weight: int = 1,
) -> list[Feature]:
    """Features ``(hi, lo, weight)`` of one prepared text, in text order.

    ``mode`` is ``"words"`` (tokens, shingled when ``n > 1``) or ``"chars"`` (code point
    ``n``-grams). ``table`` maps a token's ``hi`` hash to its weight (0 drops the token).
    """
    table = table or {}
    if mode == "chars":
        s = _SEP_RUN.sub(" ", prepared).strip(" ")
        if not s:
            return []
        grams = [s] if len(s) < n else [s[i : i + n] for i in range(len(s) - n + 1)]
        out = []
        for g in grams:
            hi, lo = feature_hash(g.encode("utf-8"), hash, seed, bits)
            out.append((hi, lo, 1))
        return out
    items: list[Feature] = []
    for tok in _TOKEN.findall(prepared):
        hi, lo = feature_hash(tok.encode("utf-8"), hash, seed, bits)
        w = table.get(hi, default_weight)
        if w > 0:
            items.append((hi, lo, w))
    if n == 1 or not items:
        return items
    groups = [items] if len(items) < n else [items[i : i + n] for i in range(len(items) - n + 1)]
    out = []
    for shingle in groups:
        hi = combine64([f[0] for f in shingle], hash, seed, 0)
        lo = combine64([f[1] for f in shingle], hash, seed, 1) if bits == 128 else 0
        out.append((hi, lo, max(1, sum(f[2] for f in shingle) // len(shingle))))
    return out


def bit_sums(features: Iterable[Feature], bits: int = 64) -> list[int]:
    """Weighted +-sums per fingerprint bit, most significant bit first (length ``bits``)."""
    sums = [0] * bits
    for hi, lo, w in features:
        words = (hi,) if bits == 64 else (hi, lo)
        for k, word in enumerate(words):
            for b in range(64):
                pos = 64 * k + (63 - b)
                sums[pos] += w if (word >> b) & 1 else -w
    return sums


def simhash_from_features(features: Iterable[Feature], bits: int = 64) -> int:
    """The fingerprint (Python int) of weighted features: sign of each bit sum."""
    sums = bit_sums(features, bits)
    fp = 0
    for s in sums:
        fp = (fp << 1) | (1 if s > 0 else 0)
    return fp
