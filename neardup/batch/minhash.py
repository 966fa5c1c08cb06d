"""MinHash-LSH candidates: near-duplicate pairs whose candidate probability depends only on the
pair's similarity, never on the corpus size.

SimHash puts edited short texts 10-18 bits apart, and an exact Hamming search at radius r costs
C(64, r)-ish or O(N^2); a work budget then has to lower r as N grows, and recall falls with N.
MinHash banding does not: a pair whose token-bigram sets have Jaccard similarity ``J`` shares at
least one of ``bands`` band keys (``rows`` MinHash values each) with probability
``1 - (1 - J**rows)**bands`` (the S-curve, :func:`candidate_probability`), whatever else is in the
corpus, and the work is linear: one signature per document, one sort-free bucketing per band,
plus the pairs that collide.

Shingles are *token bigrams* over the verifier's tokens (``Verifier.tokens``: lower-cased ASCII
words, single CJK characters, social markers stripped), so the channel measures what verification
measures. A text with one token has that token as its only shingle; a text with none has no
signature (it is never a candidate). Each token is hashed by FNV-1a over its bytes (the token
kernel of :mod:`neardup.pipeline.tokens`), a bigram by mixing its two token hashes
(:func:`_shingle`), and permutation ``p`` of a shingle hash ``x`` is
``((A[p] * x + B[p]) mod 2**64) >> 32`` (multiply-shift, odd ``A``; fixed seeds). The signature
keeps the low 16 bits of each minimum (b-bit MinHash: two unrelated minima agree with probability
2**-16, which adds that to the agreement rate and nothing else), so ``(n, hashes)`` uint16.

Candidate pairs (:func:`lsh_pairs`): per band the ``rows`` values are packed into one key; keys
that occur once are set aside by a bincount over hashed key bits (linear), the rest are sorted
and grouped, and every group yields its pairs. A pair is kept when its signatures agree on at
least ``min_agreement`` of all the hashes (an estimate of ``J`` with standard error
``sqrt(J (1 - J) / hashes)``: it discards the pairs that collided in one band by chance before
they cost a verification). Groups larger than ``bucket_cap`` (a template repeated with small
changes a million times) pair each member with the group's first ``bucket_cap`` members and its
``bucket_cap`` predecessors instead of with every member, and only in the first band where
the member falls in such a group; the pairs given up are counted.

:func:`minhash_signatures` (numba: tokenising, shingling and hashing in one pass per document)
equals :func:`minhash_signatures_reference` (NumPy over ``Verifier.tokens``), tested.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numba
import numpy as np
import numpy.typing as npt

from .. import _jit  # noqa: F401  (before any @njit: kernels cached outside the package)
from .._threads import numba_threads
from ..errors import ConfigError
from ..verify.rule import Verifier
from ..verify.tokens import (
    _MARK_LUT,
    _RAW,
    _RAW_CHECK,
    _SPACE_LUT,
    _WORD_LUT,
    _chunk_bounds,
    _chunk_bytes,
    _hash_tokens,
    _pretokenise,
    _stripped,
)

__all__ = [
    "DEFAULT_THRESHOLD",
    "LshPlan",
    "candidate_probability",
    "lsh_pairs",
    "lsh_pairs_reference",
    "minhash_signatures",
    "minhash_signatures_reference",
    "plan_lsh",
    "shingle_jaccard",
]

#: default similarity the channel is planned for: pairs at least this similar (token edit
#: similarity) become candidates with probability >= PLAN_RECALL
DEFAULT_THRESHOLD = 0.8
#: candidate probability the plan guarantees at the threshold's modelled Jaccard
PLAN_RECALL = 0.99
#: most MinHash values per document the planner uses (memory: 2 bytes each)
MAX_HASHES = 128
#: fewest rows per band the planner uses: with 2, unrelated texts that share common word pairs
#: (Jaccard ~0.05) collide with probability ~b/400 per pair, which grows with N^2
MIN_ROWS = 3
#: default bucket size from which a band's group is paired by window instead of all pairs
DEFAULT_BUCKET_CAP = 32
#: signature value of a text without tokens
NO_SIGNATURE = 0xFFFF
_SEED = 0x5EED_D0C5
_M64 = (1 << 64) - 1
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_K1 = 0x9E3779B97F4A7C15
_K2 = 0xBF58476D1CE4E5B9
_K3 = 0x94D049BB133111EB


# ---------------------------------------------------------------------------------------------
# the plan: S-curve, bands and rows


def shingle_jaccard(similarity: float) -> float:
    """Modelled token-bigram Jaccard of two texts at token edit similarity ``similarity``.

    If a fraction ``s`` of the tokens survive scattered edits, a bigram survives when both its
    tokens do (``s**2`` of them), and the Jaccard of the bigram sets is ``s**2 / (2 - s**2)``
    (0.47 at 0.8: the development set's near-duplicates, labelled at edit similarity >= 0.8,
    have bigram Jaccard >= 0.46 at the 1st percentile).
    """
    s2 = float(similarity) ** 2
    return s2 / (2.0 - s2)


def candidate_probability(jaccard: npt.ArrayLike, bands: int, rows: int) -> npt.NDArray[np.float64]:
    """The S-curve: probability that a pair at bigram Jaccard ``jaccard`` shares a band key,
    ``1 - (1 - J**rows)**bands``."""
    j = np.asarray(jaccard, dtype=np.float64)
    return 1.0 - (1.0 - j**rows) ** bands


@dataclass(frozen=True)
class LshPlan:
    """Bands, rows and filters of the MinHash channel (:func:`plan_lsh`)."""

    threshold: float
    jaccard: float
    bands: int
    rows: int
    min_agreement: int
    bucket_cap: int
    probability: float

    @property
    def hashes(self) -> int:
        return self.bands * self.rows

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "hashes": self.hashes}


def plan_lsh(
    threshold: float = DEFAULT_THRESHOLD,
    *,
    bands: int | None = None,
    rows: int | None = None,
    bucket_cap: int = DEFAULT_BUCKET_CAP,
    max_hashes: int = MAX_HASHES,
) -> LshPlan:
    """Bands and rows for pairs at least ``threshold`` similar.

    The modelled Jaccard ``J = shingle_jaccard(threshold)``; ``rows`` (default: the largest
    >= MIN_ROWS whose bands fit ``max_hashes``) and ``bands`` (default: the fewest giving
    ``candidate_probability(J) >= PLAN_RECALL``, at most ``max_hashes // rows``). The agreement
    filter keeps pairs whose signatures agree on at least ``J - 4 sigma`` of the hashes.
    Expert overrides ``bands`` / ``rows`` are used as given.
    """
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise ConfigError(f"threshold must be a number in (0, 1], got {threshold!r}")
    if not 0.0 < threshold <= 1.0:
        raise ConfigError(
            f"threshold must be in (0, 1] (token edit similarity), got {threshold!r}; "
            f"{DEFAULT_THRESHOLD} is the default"
        )
    for name, v in (("bands", bands), ("rows", rows)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 512):
            raise ConfigError(f"lsh_{name} must be an int in [1, 512] or None, got {v!r}")
    if isinstance(bucket_cap, bool) or not isinstance(bucket_cap, int) or bucket_cap < 1:
        raise ConfigError(f"lsh_bucket_cap must be an int >= 1, got {bucket_cap!r}")
    j = shingle_jaccard(threshold)

    def need(r: int) -> int:
        p = j**r
        if p >= 1.0:
            return 1
        return max(1, math.ceil(math.log(1.0 - PLAN_RECALL) / math.log1p(-p)))

    if rows is None:
        r = MIN_ROWS
        if bands is None:
            # the steepest curve (most rows) whose needed bands fit the hash budget
            for cand in range(8, MIN_ROWS - 1, -1):
                if need(cand) * cand <= max_hashes:
                    r = cand
                    break
        else:
            r = max(MIN_ROWS, max_hashes // bands) if bands * MIN_ROWS <= max_hashes else MIN_ROWS
    else:
        r = rows
    b = bands if bands is not None else min(need(r), max(1, max_hashes // r))
    if b * r > 1024:
        raise ConfigError(f"lsh_bands * lsh_rows must be <= 1024 MinHash values, got {b * r}")
    h = b * r
    sigma = math.sqrt(j * (1.0 - j) / h)
    agree = max(r, math.floor(h * max(0.0, j - 4.0 * sigma)))
    return LshPlan(
        threshold=float(threshold),
        jaccard=round(j, 4),
        bands=b,
        rows=r,
        min_agreement=int(min(agree, h)),
        bucket_cap=bucket_cap,
        probability=round(float(candidate_probability(j, b, r)), 4),
    )


def _permutations(hashes: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """(A odd, B) uint64 of the multiply-shift permutations; fixed seed, so signatures are the
    same on every run and machine."""
    rng = np.random.default_rng(_SEED)
    a = rng.integers(0, 1 << 63, hashes, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    b = rng.integers(0, 1 << 63, hashes, dtype=np.uint64)
    return a, b


# ---------------------------------------------------------------------------------------------
# signatures


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
        n, hit = _hash_tokens(buf, s, e, mode[d] == 2, mode[d] == 0, word, space, mark, tmp)
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
    verifier: Verifier,
    texts: Sequence[str],
    hashes: int,
    *,
    workers: int = 1,
    prepared: dict[int, tuple[bytes, int]] | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.int64]]:
    """b-bit MinHash signatures of the texts' token bigrams: ``(sig uint16 (n, hashes), tokens
    int64 (n,))``; a text without tokens has ``tokens == 0`` and an all-``NO_SIGNATURE`` row.
    Equal to :func:`minhash_signatures_reference` (tested).

    ``prepared`` (optional) receives the texts that needed Python work (non-ASCII texts
    tokenised by ``Verifier.tokens``, social markers stripped), keyed by position, in the form
    the verification kernels take (:func:`~neardup.pipeline.tokens.token_hashes`): passed on to
    verification, those texts are not tokenised twice. ``progress(texts done)`` (optional) is
    called after each chunk."""
    n = len(texts)
    pa, pb = _permutations(hashes)
    sig = np.empty((n, hashes), np.uint16)
    counts = np.zeros(n, np.int64)
    strip = bool(verifier.config()["strip_social"])
    special: dict[int, tuple[bytes, int]] = {}
    reuse: list[np.ndarray | None] = [None]
    luts = (_WORD_LUT, _SPACE_LUT, _MARK_LUT)
    with numba_threads(workers):
        for i, j in itertools.pairwise(_chunk_bounds(texts)):
            _pretokenise(verifier, texts, i, j, special)
            buf, starts, ends, mode = _chunk_bytes(
                texts, special, i, j, _RAW_CHECK if strip else _RAW, reuse
            )
            flags = np.empty(j - i, np.bool_)
            _signature_kernel(buf, starts, ends, mode, *luts, pa, pb, sig[i:j], counts[i:j], flags)
            flagged = np.flatnonzero(flags) + i
            if flagged.size:  # strip as ``tokenize`` does, then hash again (mode 1)
                s_sig = np.empty((flagged.size, hashes), np.uint16)
                s_counts = np.empty(flagged.size, np.int64)
                _signature_kernel(
                    *_stripped(texts, flagged, special), *luts, pa, pb, s_sig, s_counts,
                    np.empty(flagged.size, np.bool_),
                )  # fmt: skip
                sig[flagged] = s_sig
                counts[flagged] = s_counts
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
    verifier: Verifier, texts: Sequence[str], hashes: int
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
# candidate pairs


def _band_keys(sig: npt.NDArray[np.uint16], band: int, rows: int) -> npt.NDArray[np.uint64]:
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
        key = v if key is None else _mix64(key) ^ v
    assert key is not None
    return key


#: bands whose keys are made in one pass over the signatures (memory: 16 bytes per band per row)
BAND_BLOCK = 7


def _band_key_block(
    sig: npt.NDArray[np.uint16], b0: int, b1: int, rows: int
) -> npt.NDArray[np.uint64]:
    """Keys of bands ``b0..b1-1`` as ``(b1 - b0, n)`` uint64, equal to :func:`_band_keys` of
    each band: one pass over the signatures' rows instead of one per band (``rows <= 4``)."""
    n, nb = sig.shape[0], b1 - b0
    buf = np.zeros((n, nb, 4), np.uint16)
    buf[:, :, :rows] = sig[:, b0 * rows : b1 * rows].reshape(n, nb, rows)
    return np.ascontiguousarray(buf.view(np.uint64).reshape(n, nb).T)


def _mix64(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(_K2)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(_K3)
    return x ^ (x >> np.uint64(31))


def _groups(keys: npt.NDArray[np.uint64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Rows whose key occurs at least twice, grouped: ``(members int64, group_start int64)``;
    members sorted by (key, row), ``group_start`` the first index of each group (and the end).

    Linear pre-filter: a bincount over ~4n buckets of the mixed key's top bits sets aside the
    rows alone in their bucket (most rows, most bands); only the rest is sorted."""
    n = keys.size
    bits = max(10, min(26, (4 * max(n, 1) - 1).bit_length()))
    top = (_mix64(keys) >> np.uint64(64 - bits)).astype(np.int64)
    cnt = np.bincount(top, minlength=1 << bits)
    rows = np.flatnonzero(cnt[top] > 1)
    if rows.size < 2:
        return np.zeros(0, np.int64), np.zeros(1, np.int64)
    k = keys[rows]
    order = np.argsort(k, kind="stable")  # rows ascending within a key
    rows, k = rows[order], k[order]
    new = np.ones(rows.size, bool)
    new[1:] = k[1:] != k[:-1]
    start = np.flatnonzero(new)
    size = np.diff(np.append(start, rows.size))
    multi = size > 1
    keep = np.repeat(multi, size)
    rows = rows[keep]
    size = size[multi]
    bounds = np.zeros(size.size + 1, np.int64)
    np.cumsum(size, out=bounds[1:])
    return rows.astype(np.int64), bounds


def _thin_big_groups(
    members: npt.NDArray[np.int64],
    bounds: npt.NDArray[np.int64],
    cap: int,
    done: npt.NDArray[np.bool_],
    was_big_out: list[npt.NDArray[np.bool_]] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
    """Groups of more than ``cap + 1`` members keep their first ``cap`` members (the anchors)
    and the members not yet paired in a large group of an earlier band (``done``, updated):
    a template's near copies fill a large bucket in nearly every band, and pairing each of them
    with ``2 cap`` others once is the bound, not once per band. Returns (members, bounds, the
    number of pairs inside the large groups before thinning). ``was_big_out`` (optional)
    receives a mask of the members returned whose group was large before thinning."""
    size = np.diff(bounds)
    big = np.flatnonzero(size > cap + 1)
    if not big.size:
        if was_big_out is not None:
            was_big_out.append(np.zeros(members.size, np.bool_))
        return members, bounds, 0
    member_big = np.repeat(size > cap + 1, size)
    total = int((size[big] * (size[big] - 1) // 2).sum())
    keep = np.ones(members.size, bool)
    for g in big.tolist():
        s0, e0 = int(bounds[g]), int(bounds[g + 1])
        rest = members[s0 + cap : e0]
        keep[s0 + cap : e0] = ~done[rest]
        done[members[s0:e0][keep[s0:e0]]] = True
    gid = np.repeat(np.arange(size.size), size)[keep]
    members = members[keep]
    cnt = np.bincount(gid, minlength=size.size)
    members = members[cnt[gid] > 1]  # groups thinned to one member go
    if was_big_out is not None:
        was_big_out.append(member_big[keep][cnt[gid] > 1])
    size = cnt[cnt > 1]
    bounds = np.zeros(size.size + 1, np.int64)
    np.cumsum(size, out=bounds[1:])
    return members, bounds, total


def _group_pairs(
    members: npt.NDArray[np.int64],
    bounds: npt.NDArray[np.int64],
    cap: int,
    big_out: list[npt.NDArray[np.bool_]] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
    """Pairs (earlier row, later row) inside each group: all of them for groups of up to
    ``cap + 1`` members; for larger groups each member with its ``cap`` predecessors and with the
    group's first ``cap`` members. Returns (a, b, pairs made inside the large groups);
    ``big_out`` (optional) receives a mask of the pairs made inside a large group."""
    if bounds.size < 2:
        if big_out is not None:
            big_out.append(np.zeros(0, np.bool_))
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    size = np.diff(bounds)
    gid = np.repeat(np.arange(size.size), size)
    idx_in = np.arange(members.size) - bounds[gid]
    member_big = (size > cap + 1)[gid]
    out_a, out_b, out_big = [], [], []
    longest = int(size.max())
    for t in range(1, min(longest - 1, cap) + 1):  # partner t places back, same group
        sel = np.flatnonzero(idx_in >= t)
        out_a.append(members[sel - t])
        out_b.append(members[sel])
        out_big.append(member_big[sel])
    big = np.flatnonzero(size > cap + 1)
    made = 0
    if big.size:
        for g in big.tolist():  # anchors: the group's first cap members (few groups)
            s, e = int(bounds[g]), int(bounds[g + 1])
            for q in range(cap):  # members more than cap places after anchor q
                later = members[s + q + cap + 1 : e]
                out_a.append(np.full(later.size, members[s + q], np.int64))
                out_b.append(later)
                out_big.append(np.ones(later.size, np.bool_))
        m = size[big]
        made = int((cap * m - cap * (cap + 1) // 2).sum())  # window pairs
        made += int((cap * (m - cap - 1) - cap * (cap - 1) // 2).sum())  # anchor pairs
    if not out_a:
        if big_out is not None:
            big_out.append(np.zeros(0, np.bool_))
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    a, b = np.concatenate(out_a), np.concatenate(out_b)
    if big_out is not None:
        big_out.append(np.concatenate(out_big))
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    return lo, hi, made


@numba.njit(cache=True, parallel=True)
def _agreement_kernel(
    sig: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover - numba
    h = sig.shape[1]
    for k in numba.prange(a.shape[0]):
        x = a[k]
        y = b[k]
        c = 0
        for p in range(h):
            c += sig[x, p] == sig[y, p]
        out[k] = c


def _agreement(
    sig: npt.NDArray[np.uint16],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    workers: int = 1,
) -> npt.NDArray[np.int64]:
    """Number of equal MinHash values of each pair (numba: a row gather and compare without the
    temporaries of :func:`_agreement_reference`, ~10x less time on millions of pairs)."""
    out = np.empty(a.size, np.int64)
    if a.size:
        with numba_threads(workers):
            _agreement_kernel(sig, a, b, out)
    return out


def _agreement_reference(
    sig: npt.NDArray[np.uint16], a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Number of equal MinHash values of each pair (NumPy, in blocks that bound the gathers)."""
    out = np.empty(a.size, np.int64)
    step = max(1, (32 << 20) // max(1, 2 * sig.shape[1]))
    for s in range(0, a.size, step):
        out[s : s + step] = (sig[a[s : s + step]] == sig[b[s : s + step]]).sum(axis=1)
    return out


def lsh_pairs(
    sig: npt.NDArray[np.uint16],
    usable: npt.NDArray[np.bool_],
    plan: LshPlan,
    info: dict[str, Any] | None = None,
    workers: int = 1,
    capped_out: list[npt.NDArray[np.bool_]] | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Candidate pairs ``(a, b)``, ``a < b``, sorted and unique, among ``usable`` rows of
    ``sig``: rows sharing a band key whose signatures agree on ``>= plan.min_agreement`` values.
    Equals :func:`lsh_pairs_reference` when no group exceeds the cap (tested). ``info`` gets
    ``raw_pairs`` (band collisions), ``pairs``, ``capped_buckets`` and ``pairs_skipped``.

    ``capped_out`` (optional) receives one bool mask over the returned pairs: True for a pair
    found only inside capped (larger than ``bucket_cap + 1``) buckets, i.e. only because of a
    pathological bucket (:func:`neardup.dedup.verify_in_chunks` verifies those lazily).
    ``progress(bands done)`` (optional) is called after each band."""
    idx = np.flatnonzero(usable).astype(np.int64)
    s = sig[idx]
    parts_a, parts_b = [], []
    big_codes: list[npt.NDArray[np.int64]] = []
    raw = capped = skipped = 0
    n = idx.size
    done = np.zeros(n, bool)  # rows already paired inside a large group
    block = np.zeros((0, n), np.uint64)
    for band in range(plan.bands):
        if plan.rows > 4:
            keys = _band_keys(s, band, plan.rows)
        else:
            if band % BAND_BLOCK == 0:
                block = _band_key_block(s, band, min(plan.bands, band + BAND_BLOCK), plan.rows)
            keys = block[band % BAND_BLOCK]
        members, bounds = _groups(keys)
        if progress is not None and band:
            progress(band)
        if bounds.size < 2:
            continue
        capped += int((np.diff(bounds) > plan.bucket_cap + 1).sum())
        was_big: list[npt.NDArray[np.bool_]] = []
        members, bounds, in_big = _thin_big_groups(members, bounds, plan.bucket_cap, done, was_big)
        big: list[npt.NDArray[np.bool_]] = []
        a, b, made = _group_pairs(members, bounds, plan.bucket_cap, big)
        skipped += max(0, in_big - made)
        raw += int(a.size)
        ok = _agreement(s, a, b, workers) >= plan.min_agreement
        if capped_out is not None and was_big[0].any():  # groups thinned below the cap too
            gid = np.repeat(np.arange(bounds.size - 1), np.diff(bounds))
            group_was_big = np.zeros(bounds.size - 1, np.bool_)
            group_was_big[gid[was_big[0]]] = True
            gid_of_row = np.zeros(n, np.int64)  # each row is in one group of a band
            gid_of_row[members] = gid
            big[0] |= group_was_big[gid_of_row[a]]
        in_big_group = big[0][ok]
        a, b = a[ok], b[ok]
        if a.size:  # unique per band keeps the pile small when bands agree on many pairs
            if capped_out is not None and in_big_group.any():
                big_codes.append(np.unique(a[in_big_group] * n + b[in_big_group]))
                a, b = a[~in_big_group], b[~in_big_group]
            code = np.unique(a * n + b)
            parts_a.append(code // n)
            parts_b.append(code % n)
    ordinary = (
        np.unique(np.concatenate(parts_a) * n + np.concatenate(parts_b))
        if parts_a
        else np.zeros(0, np.int64)
    )
    only_capped = np.zeros(ordinary.size, np.bool_)
    if big_codes:  # pairs met only in capped buckets
        extra = np.setdiff1d(np.concatenate(big_codes), ordinary)
        code = np.concatenate([ordinary, extra])
        only_capped = np.concatenate([only_capped, np.ones(extra.size, np.bool_)])
        order = np.argsort(code, kind="stable")
        code, only_capped = code[order], only_capped[order]
    else:
        code = ordinary
    a, b = idx[code // n], idx[code % n]
    if capped_out is not None:
        capped_out.append(only_capped)
    if info is not None:
        info.update(
            {
                **plan.to_dict(),
                "docs": int(n),
                "raw_pairs": raw,
                "pairs": int(a.size),
                "capped_buckets": capped,
                # an upper bound: a pair in large groups of several bands counts in each
                "pairs_skipped": min(skipped, n * (n - 1) // 2),
            }
        )
    return a, b


def lsh_pairs_reference(
    sig: npt.NDArray[np.uint16], usable: npt.NDArray[np.bool_], plan: LshPlan
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Reference for :func:`lsh_pairs` (no cap): dict buckets per band, every pair of a bucket,
    the agreement counted per pair in Python."""
    idx = np.flatnonzero(usable).tolist()
    found: set[tuple[int, int]] = set()
    r = plan.rows
    for band in range(plan.bands):
        buckets: dict[tuple[int, ...], list[int]] = {}
        for i in idx:
            buckets.setdefault(tuple(sig[i, band * r : (band + 1) * r].tolist()), []).append(i)
        for members in buckets.values():
            for x, y in itertools.combinations(members, 2):
                if int((sig[x] == sig[y]).sum()) >= plan.min_agreement:
                    found.add((x, y))
    pairs = sorted(found)
    return (
        np.array([p[0] for p in pairs], np.int64),
        np.array([p[1] for p in pairs], np.int64),
    )
