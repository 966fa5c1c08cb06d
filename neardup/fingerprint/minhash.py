"""MinHash signatures of texts' token bigrams, and the band keys LSH groups them by.

Shingles are *token bigrams* over the verifier's tokens (``Verifier.tokens``: lower-cased ASCII
words, single CJK characters, social markers stripped), so the signatures measure what
verification measures. A text with one token has that token as its only shingle; a text with
none has no signature (``NO_SIGNATURE`` everywhere: it is never a candidate). Each token is
hashed by FNV-1a over its bytes (the token loop of :mod:`neardup.text.token_kernels`), a bigram
by mixing its two token hashes (splitmix64 of ``h1 * K1 + h2``), and permutation ``p`` of a
shingle hash ``x`` is ``((A[p] * x + B[p]) mod 2**64) >> 32`` (multiply-shift, odd ``A``; fixed
seeds). The signature keeps the low 16 bits of each minimum (b-bit MinHash: two unrelated minima
agree with probability 2**-16, which adds that to the agreement rate and nothing else), so
``(n, hashes)`` uint16.

:func:`minhash_signatures` (numba: tokenising, shingling and hashing in one pass per document)
equals :func:`minhash_signatures_reference` (NumPy over ``Verifier.tokens``), tested.

A band of ``rows`` signature values is one uint64 key (:func:`band_keys`,
:func:`band_key_block`): exact for up to 4 rows, further groups of four mixed in by
:func:`mix64`. The batch pipeline (:mod:`neardup.batch.minhash`), the online store
(:mod:`neardup.store.bands`) and the distributed run group documents by these keys, so a key
means the same everywhere.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence

import numba
import numpy as np
import numpy.typing as npt

from .. import _jit  # noqa: F401  (before any @njit: kernels cached outside the package)
from .._threads import numba_threads
from ..text.token_kernels import (
    Prepared,
    Tokeniser,
    hash_tokens,
    run_token_kernel,
    token_chunks,
)

__all__ = [
    "BAND_BLOCK",
    "NO_SIGNATURE",
    "band_key_block",
    "band_keys",
    "minhash_signatures",
    "minhash_signatures_reference",
    "mix64",
]

#: signature value of a text without tokens
NO_SIGNATURE = 0xFFFF
_SEED = 0x5EED_D0C5
_M64 = (1 << 64) - 1
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_K1 = 0x9E3779B97F4A7C15
_K2 = 0xBF58476D1CE4E5B9
_K3 = 0x94D049BB133111EB


@functools.lru_cache(maxsize=8)
def _permutations(hashes: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """(A odd, B) uint64 of the multiply-shift permutations; fixed seed, so signatures are the
    same on every run and machine. Cached (read-only arrays): a new generator per call cost a
    single online request ~0.1 ms, a quarter of its preparation."""
    rng = np.random.default_rng(_SEED)
    a = rng.integers(0, 1 << 63, hashes, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    b = rng.integers(0, 1 << 63, hashes, dtype=np.uint64)
    a.flags.writeable = False
    b.flags.writeable = False
    return a, b


@numba.njit(cache=True, inline="always")
def _shingle(h1: np.uint64, h2: np.uint64) -> np.uint64:  # pragma: no cover - numba
    # splitmix64 finaliser of (h1 * K1 + h2): a bigram of two token hashes
    x = h1 * np.uint64(_K1) + h2
    x = (x ^ (x >> np.uint64(30))) * np.uint64(_K2)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(_K3)
    return x ^ (x >> np.uint64(31))


@numba.njit(cache=True, parallel=True)
def _signature_kernel(
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    mode: np.ndarray,
    word: np.ndarray,
    space: np.ndarray,
    mark: np.ndarray,
    pa: np.ndarray,
    pb: np.ndarray,
    out: np.ndarray,
    counts: np.ndarray,
    flags: np.ndarray,
) -> None:  # pragma: no cover - numba
    h = pa.shape[0]
    s32 = np.uint64(32)
    low = np.uint64(0xFFFF)
    for d in numba.prange(starts.shape[0]):
        s = starts[d]
        e = ends[d]
        tmp = np.empty((e - s + 1) // 2 + 1, np.uint64)
        n, hit = hash_tokens(buf, s, e, mode[d] == 2, mode[d] == 0, word, space, mark, tmp)
        counts[d] = n
        flags[d] = hit
        if hit or n == 0:  # flagged: the caller strips and redoes it; no tokens: no signature
            for p in range(h):
                out[d, p] = 0xFFFF
            continue
        mins = np.full(h, np.uint64(0xFFFFFFFFFFFFFFFF))
        m = n - 1 if n > 1 else 1
        for i in range(m):
            x = _shingle(tmp[i], tmp[i + 1]) if n > 1 else _shingle(tmp[0], np.uint64(0))
            for p in range(h):
                v = (pa[p] * x + pb[p]) >> s32
                if v < mins[p]:
                    mins[p] = v
        for p in range(h):
            out[d, p] = np.uint16(mins[p] & low)


def minhash_signatures(
    verifier: Tokeniser,
    texts: Sequence[str],
    hashes: int,
    *,
    workers: int = 1,
    prepared: Prepared | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.int64]]:
    """b-bit MinHash signatures of the texts' token bigrams: ``(sig uint16 (n, hashes), tokens
    int64 (n,))``; a text without tokens has ``tokens == 0`` and an all-``NO_SIGNATURE`` row.
    Equal to :func:`minhash_signatures_reference` (tested).

    ``prepared`` (optional) receives the texts that needed Python work (non-ASCII texts
    tokenised by ``Verifier.tokens``, social markers stripped), keyed by position, in the form
    the verification kernels take (:func:`~neardup.verify.tokens.token_hashes`): passed on to
    verification, those texts are not tokenised twice. ``progress(texts done)`` (optional) is
    called after each chunk."""
    n = len(texts)
    pa, pb = _permutations(hashes)
    sig = np.empty((n, hashes), np.uint16)
    counts = np.zeros(n, np.int64)
    special: Prepared = {}
    with numba_threads(workers):
        for i, j, chunk in token_chunks(verifier, texts, special):
            run_token_kernel(
                _signature_kernel, texts, special, i, j, chunk, (pa, pb), (sig, counts)
            )
            if prepared is None:  # only this chunk's entries were needed
                special.clear()
            if progress is not None:
                progress(j)
    if prepared is not None:
        prepared.update(special)
    return sig, counts


def _fnv64(token: str) -> int:
    h = _FNV_OFFSET
    for byte in token.encode("utf-8"):
        h = ((h ^ byte) * _FNV_PRIME) & _M64
    return h


def _shingle_reference(h1: int, h2: int) -> int:
    x = (h1 * _K1 + h2) & _M64
    x = ((x ^ (x >> 30)) * _K2) & _M64
    x = ((x ^ (x >> 27)) * _K3) & _M64
    return x ^ (x >> 31)


def minhash_signatures_reference(
    verifier: Tokeniser, texts: Sequence[str], hashes: int
) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.int64]]:
    """The definition of :func:`minhash_signatures`: ``verifier.tokens`` of each text, FNV-1a
    64 per token, bigrams mixed by :func:`_shingle_reference`, the minimum of each permutation
    (NumPy, uint64 arithmetic wraps mod 2**64), its low 16 bits."""
    pa, pb = _permutations(hashes)
    n = len(texts)
    sig = np.full((n, hashes), NO_SIGNATURE, np.uint16)
    counts = np.zeros(n, np.int64)
    for d, text in enumerate(texts):
        toks = [_fnv64(t) for t in verifier.tokens(text)]
        counts[d] = len(toks)
        if not toks:
            continue
        pairs = itertools.pairwise(toks) if len(toks) > 1 else [(toks[0], 0)]
        x = np.array([_shingle_reference(u, v) for u, v in pairs], np.uint64)
        with np.errstate(over="ignore"):
            perm = (pa[:, None] * x[None, :] + pb[:, None]) >> np.uint64(32)
        sig[d] = (perm.min(axis=1) & np.uint64(0xFFFF)).astype(np.uint16)
    return sig, counts


# ---------------------------------------------------------------------------------------------
# band keys


def band_keys(sig: npt.NDArray[np.uint16], band: int, rows: int) -> npt.NDArray[np.uint64]:
    """One uint64 key per row of ``sig`` for band ``band``: the ``rows`` 16-bit values, four at
    a time, copied into a zero-padded (n, 4) uint16 buffer read as uint64 (exact for up to 4
    rows; further groups of four are mixed in). One strided copy per group of four columns."""
    n = sig.shape[0]
    cols = sig[:, band * rows : (band + 1) * rows]
    key: npt.NDArray[np.uint64] | None = None
    for c0 in range(0, rows, 4):
        part = np.zeros((n, 4), np.uint16)
        w = min(4, rows - c0)
        part[:, :w] = cols[:, c0 : c0 + w]
        v = part.view(np.uint64).ravel()
        key = v if key is None else mix64(key) ^ v
    assert key is not None
    return key


#: bands whose keys are made in one pass over the signatures (memory: 16 bytes per band per row)
BAND_BLOCK = 7


def band_key_block(
    sig: npt.NDArray[np.uint16], b0: int, b1: int, rows: int
) -> npt.NDArray[np.uint64]:
    """Keys of bands ``b0..b1-1`` as ``(b1 - b0, n)`` uint64, equal to :func:`band_keys` of
    each band: one pass over the signatures' rows instead of one per band (``rows <= 4``)."""
    n, nb = sig.shape[0], b1 - b0
    buf = np.zeros((n, nb, 4), np.uint16)
    buf[:, :, :rows] = sig[:, b0 * rows : b1 * rows].reshape(n, nb, rows)
    return np.ascontiguousarray(buf.view(np.uint64).reshape(n, nb).T)


def mix64(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(_K2)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(_K3)
    return x ^ (x >> np.uint64(31))
