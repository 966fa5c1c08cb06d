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

The MinHash references are here too, for tests (not in ``__all__``):
:func:`minhash_signatures_reference` and :func:`sketch_shingles_reference`, the NumPy
definitions of :mod:`neardup.fingerprint.minhash`'s signatures, and
:func:`band_entries_reference`, of its compact band keys. They import that module when
called, not here: the SimHash path imports this module and does not import numba.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..text.hashing import combine64, feature_hash, fnv1a64

if TYPE_CHECKING:  # pragma: no cover - for type checkers only
    from ..text.token_kernels import Tokeniser

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


# ------------------------------------------------------------------------------------ MinHash
_M64 = (1 << 64) - 1


def _shingle_reference(h1: int, h2: int) -> int:
    """A bigram of two token hashes: the splitmix64 finaliser of ``h1 * K1 + h2``."""
    from .minhash import _K1, _K2, _K3

    x = (h1 * _K1 + h2) & _M64
    x = ((x ^ (x >> 30)) * _K2) & _M64
    x = ((x ^ (x >> 27)) * _K3) & _M64
    return x ^ (x >> 31)


def _mix64_reference(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    from .minhash import _K2, _K3

    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(_K2)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(_K3)
    return x ^ (x >> np.uint64(31))


def minhash_signatures_reference(
    verifier: Tokeniser, texts: Sequence[str], hashes: int
) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.int64]]:
    """The definition of :func:`~neardup.fingerprint.minhash.minhash_signatures`:
    ``verifier.tokens`` of each text, FNV-1a 64 per token, bigrams mixed by
    :func:`_shingle_reference`, then the sketch of :func:`sketch_shingles_reference`."""
    from .minhash import NO_SIGNATURE

    n = len(texts)
    sig = np.full((n, hashes), NO_SIGNATURE, np.uint16)
    counts = np.zeros(n, np.int64)
    for d, text in enumerate(texts):
        toks = [fnv1a64(t.encode("utf-8")) for t in verifier.tokens(text)]
        counts[d] = len(toks)
        if not toks:
            continue
        pairs = itertools.pairwise(toks) if len(toks) > 1 else [(toks[0], 0)]
        x = np.array([_shingle_reference(u, v) for u, v in pairs], np.uint64)
        sig[d] = sketch_shingles_reference(x, np.array([0, x.size], np.int64), hashes)[0]
    return sig, counts


def sketch_shingles_reference(
    shingles: npt.NDArray[np.uint64], offsets: npt.NDArray[np.int64], hashes: int
) -> npt.NDArray[np.uint16]:
    """The definition of :func:`~neardup.fingerprint.minhash.sketch_shingles` (NumPy, uint64
    arithmetic wraps mod 2**64): per set, each shingle's bin and value from
    ``mix64(x ^ OPH_SALT)``, the least value per bin; a bin no shingle fell into takes the
    minimum of its own permutation over the set; the low 16 bits."""
    from .minhash import _OPH_SALT, NO_SIGNATURE, _permutations

    pa, pb = _permutations(hashes)
    top = np.uint64(0xFFFFFFFFFFFFFFFF)
    sh = np.asarray(shingles, np.uint64)
    off = np.asarray(offsets, np.int64)
    out = np.full((off.size - 1, hashes), NO_SIGNATURE, np.uint16)
    for d in range(off.size - 1):
        x = sh[off[d] : off[d + 1]]
        if not x.size:
            continue
        z = _mix64_reference(x ^ np.uint64(_OPH_SALT))
        with np.errstate(over="ignore"):
            bins = ((z >> np.uint64(32)) * np.uint64(hashes)) >> np.uint64(32)
            perm = (pa[:, None] * x[None, :] + pb[:, None]) >> np.uint64(32)
        oph = np.full(hashes, top, np.uint64)
        np.minimum.at(oph, bins.astype(np.int64), z & np.uint64(0xFFFFFFFF))
        value = np.where(oph != top, oph, perm.min(axis=1))
        out[d] = (value & np.uint64(0xFFFF)).astype(np.uint16)
    return out


def band_entries_reference(
    sig: npt.NDArray[np.uint16], usable: npt.NDArray[np.bool_], plan: object
) -> npt.NDArray[np.uint64]:
    """The NumPy definition of :func:`neardup.fingerprint.minhash.band_entries`: each band's
    key (:func:`~neardup.fingerprint.minhash.band_keys`), its entry key, its compact key; rows
    that are not usable get :data:`~neardup.fingerprint.minhash.NO_KEYS` in every column."""
    from .minhash import NO_KEYS, band_keys, compact_keys, entry_keys

    bands, rows = int(plan.bands), int(plan.rows)  # type: ignore[attr-defined]
    keys = np.stack([band_keys(sig, b, rows) for b in range(bands)]) if bands else None
    if keys is None or not sig.shape[0]:
        return np.zeros((sig.shape[0], bands), np.uint64)
    ent = compact_keys(entry_keys(keys, rows).T)
    ent[~np.asarray(usable, bool)] = NO_KEYS
    return ent
