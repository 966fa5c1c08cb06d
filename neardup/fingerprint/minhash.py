"""MinHash signatures of texts' token bigrams, and the band keys LSH groups them by.

Shingles are *token bigrams* over the verifier's tokens (``Verifier.tokens``: lower-cased ASCII
words, single CJK characters, social markers stripped), so the signatures measure what
verification measures. A text with one token has that token as its only shingle; a text with
none has no signature (``NO_SIGNATURE`` everywhere: it is never a candidate). Each token is
hashed by FNV-1a over its bytes (the token loop of :mod:`neardup.text.token_kernels`), a bigram
by mixing its two token hashes (splitmix64 of ``h1 * K1 + h2``).

The signature (scheme :data:`SIGNATURE_SCHEME`) is one-permutation hashing (Li, Owen & Zhang,
2012) whose empty bins are filled by independent MinHash permutations: each shingle ``x`` is
mixed once more, ``z = mix64(x ^ OPH_SALT)``, and falls into bin ``(z >> 32) * hashes >> 32``
with the value ``z & 0xFFFFFFFF``; a bin keeps the least value that fell into it. A bin no
shingle of the text fell into takes the minimum over the text's shingles of its own permutation
``((A[p] * x + B[p]) mod 2**64) >> 32`` (multiply-shift, odd ``A``; fixed seeds). For any two
texts each value agrees with probability exactly their bigram Jaccard ``J`` (the least element
of the union in a bin, or of the union under the bin's permutation when no element of either
text fell into it, is shared with probability ``J``), as with ``hashes`` independent
permutations, but a text of ``n`` shingles costs ``n`` mixes plus one permutation per empty bin
and shingle: ``O(n + hashes)`` once ``n`` is well above ``hashes``, and never more than the
``n * hashes`` of plain MinHash. The agreements of different values are independent where the
permutations decide and slightly negatively correlated where bins do (a shingle falls into one
bin only), which makes the band curve at least as steep as ``1 - (1 - J**r)**b``:
benchmarks/bench_minhash.py measures the alternatives (plain MinHash, one-permutation hashing
with optimal densification, SuperMinHash, sequential rounds) and tests/fingerprint/
test_minhash_curve.py the curve. The signature keeps the low 16 bits of each value (b-bit
MinHash: two unrelated values agree with probability 2**-16, which adds that to the agreement
rate and nothing else), so ``(n, hashes)`` uint16.

:func:`minhash_signatures` (numba: tokenising, shingling and hashing in one pass per document)
equals :func:`~neardup.fingerprint.reference.minhash_signatures_reference` (NumPy over
``Verifier.tokens``), tested.

A band of ``rows`` signature values is one uint64 key (:func:`band_keys`,
:func:`band_key_block`): exact for up to 4 rows, further groups of four mixed in by
:func:`mix64`. The batch pipeline (:mod:`neardup.rules.lsh`), the online store
(:class:`neardup.index.bands.BandIndex`) and the distributed run group documents by these keys,
so a key means the same everywhere; a store records :data:`SIGNATURE_SCHEME` and refuses keys
made by another scheme.

Compact keys (:func:`band_entries`): the online store keeps one 64-bit *compact key* per (row,
band): ``group << 32 | h32``, where ``group`` is the band (the top 16 bits of the band's 64-bit
entry key, :func:`entry_keys`) and ``h32`` 32 bits of a mix of that entry key. Two rows with
the same band key have the same compact key; two with different ones share it with probability
2**-32 per band and row pair, a false collision that the caller rejects: the agreement filter
compares the signatures themselves, band by band
(:meth:`neardup.online.decide.Decider._lsh_union`), so decisions stay the batch pipeline's. A
row without tokens has no keys (:data:`NO_KEYS` in every column).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._jit import kernel
from .._threads import kernel_threads, run_ranges
from ..errors import InputError
from ..text.token_kernels import (
    BUCKET_MIX,
    FEW_TEXTS,
    MASK_BITS,
    Prepared,
    Tokeniser,
    hash_tokens,
    run_token_kernel,
    run_token_kernel_few,
    token_chunks,
)

__all__ = [
    "BAND_BLOCK",
    "NO_KEYS",
    "NO_SIGNATURE",
    "SIGNATURE_SCHEME",
    "band_entries",
    "band_key_block",
    "band_keys",
    "compact_keys",
    "entry_keys",
    "minhash_signatures",
    "mix64",
    "sketch_shingles",
    "warm_band_entries",
]

#: signature value of a text without tokens
NO_SIGNATURE = 0xFFFF
#: what a signature value (so a band key) means: the shingles, the hashing and the sketch above;
#: stored with the online store's plan, which refuses band keys made by another scheme
SIGNATURE_SCHEME = "bigram-oph-minhash-1"
#: salt of the one-permutation hash (so the bins do not reuse the shingle hash's bits as such)
_OPH_SALT = 0xD6E8FEB86659FD93
_SEED = 0x5EED_D0C5
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


@kernel(inline="always")
def _shingle(h1: np.uint64, h2: np.uint64) -> np.uint64:  # pragma: no cover - numba
    # splitmix64 finaliser of (h1 * K1 + h2): a bigram of two token hashes
    x = h1 * np.uint64(_K1) + h2
    x = (x ^ (x >> np.uint64(30))) * np.uint64(_K2)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(_K3)
    return x ^ (x >> np.uint64(31))


@kernel
def _sketch(
    sh: np.ndarray,
    m: int,
    pa: np.ndarray,
    pb: np.ndarray,
    mins: np.ndarray,
    fm: np.ndarray,
    ea: np.ndarray,
    eb: np.ndarray,
    idx: np.ndarray,
) -> None:  # pragma: no cover - numba
    # The signature of the shingle hashes sh[:m] into mins (uint64, its values before the
    # low 16 bits are kept): one-permutation hashing, then each empty bin's own permutation.
    h = pa.shape[0]
    hh = np.uint64(h)
    top = np.uint64(0xFFFFFFFFFFFFFFFF)
    s32 = np.uint64(32)
    m32 = np.uint64(0xFFFFFFFF)
    salt = np.uint64(_OPH_SALT)
    for p in range(h):
        mins[p] = top
    for i in range(m):
        z = sh[i] ^ salt
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_K2)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_K3)
        z = z ^ (z >> np.uint64(31))
        b = np.int64(((z >> s32) * hh) >> s32)
        mins[b] = min(mins[b], z & m32)  # (branch-free: which bin wins is unpredictable)
    ne = 0
    for p in range(h):
        ne += mins[p] == top
    if ne == 0:
        return
    if 4 * ne >= 3 * h:
        # most bins empty (short texts): every bin's permutation, in the loop the compiler
        # vectorises, and the empty bins take theirs (the same values as the loop below)
        for p in range(h):
            fm[p] = top
        for i in range(m):
            x = sh[i]
            for p in range(h):
                fm[p] = min(fm[p], (pa[p] * x + pb[p]) >> s32)
        for p in range(h):
            mins[p] = fm[p] if mins[p] == top else mins[p]
        return
    ne = 0
    for p in range(h):
        if mins[p] == top:
            idx[ne] = p
            ne += 1
    for q in range(ne):
        ea[q] = pa[idx[q]]
        eb[q] = pb[idx[q]]
        fm[q] = top
    for i in range(m):
        x = sh[i]
        for q in range(ne):
            fm[q] = min(fm[q], (ea[q] * x + eb[q]) >> s32)
    for q in range(ne):
        mins[idx[q]] = fm[q]


@kernel(nogil=True)
def _signature_kernel(
    lo: int,
    hi: int,
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
    buckets: np.ndarray,
    hists: np.ndarray,
    flags: np.ndarray,
) -> None:  # pragma: no cover - numba
    # documents lo..hi-1 (run_ranges); buckets (n, 2**MASK_BITS) and hists (n, 2**k) or
    # (n, 0): not wanted
    h = pa.shape[0]
    low = np.uint64(0xFFFF)
    mins = np.empty(h, np.uint64)
    fm = np.empty(h, np.uint64)
    ea = np.empty(h, np.uint64)
    eb = np.empty(h, np.uint64)
    idx = np.empty(h, np.int64)
    counted = buckets.shape[1] > 0
    mix = np.uint64(BUCKET_MIX)
    shift = np.uint64(64 - MASK_BITS)
    top = np.uint8(255)
    hw = hists.shape[1]
    hcounted = hw > 0
    hbits = 0
    while (1 << hbits) < hw:
        hbits += 1
    hshift = np.uint64(64 - hbits)
    for d in range(lo, hi):
        s = starts[d]
        e = ends[d]
        tmp = np.empty((e - s + 1) // 2 + 1, np.uint64)
        n, hit = hash_tokens(buf, s, e, mode[d] == 2, mode[d] == 0, word, space, mark, tmp)
        counts[d] = n
        flags[d] = hit
        # the token hashes counted before they become shingles (saturating): in the coarse
        # buckets, and in the finer ones of the verifier's histograms
        for row, sh, on in ((buckets[d], shift, counted), (hists[d], hshift, hcounted)):
            if on:
                row[:] = 0
                if not hit:
                    for q in range(n):
                        b = (tmp[q] * mix) >> sh
                        row[b] += np.uint8(row[b] < top)
        if hit or n == 0:  # flagged: the caller strips and redoes it; no tokens: no signature
            for p in range(h):
                out[d, p] = 0xFFFF
            continue
        # the shingles in place of the token hashes (shingle i reads tokens i and i + 1)
        m = n - 1 if n > 1 else 1
        if n > 1:
            for i in range(m):
                tmp[i] = _shingle(tmp[i], tmp[i + 1])
        else:
            tmp[0] = _shingle(tmp[0], np.uint64(0))
        _sketch(tmp, int(m), pa, pb, mins, fm, ea, eb, idx)
        for p in range(h):
            out[d, p] = np.uint16(mins[p] & low)


@kernel(nogil=True)
def _shingle_sets_kernel(
    lo: int,
    hi: int,
    sh: np.ndarray,
    off: np.ndarray,
    pa: np.ndarray,
    pb: np.ndarray,
    out: np.ndarray,
) -> None:  # pragma: no cover - numba
    # sets lo..hi-1 (run_ranges)
    h = pa.shape[0]
    low = np.uint64(0xFFFF)
    mins = np.empty(h, np.uint64)
    fm = np.empty(h, np.uint64)
    ea = np.empty(h, np.uint64)
    eb = np.empty(h, np.uint64)
    idx = np.empty(h, np.int64)
    for d in range(lo, hi):
        m = off[d + 1] - off[d]
        if m == 0:
            for p in range(h):
                out[d, p] = 0xFFFF
            continue
        _sketch(sh[off[d] : off[d + 1]], m, pa, pb, mins, fm, ea, eb, idx)
        for p in range(h):
            out[d, p] = np.uint16(mins[p] & low)


def sketch_shingles(
    shingles: npt.NDArray[np.uint64],
    offsets: npt.NDArray[np.int64],
    hashes: int,
    *,
    workers: int = 1,
) -> npt.NDArray[np.uint16]:
    """The signatures (``(n, hashes)`` uint16) of ``n`` sets of 64-bit shingle hashes, set ``d``
    being ``shingles[offsets[d]:offsets[d + 1]]`` (an empty set: all ``NO_SIGNATURE``): the
    sketch :func:`minhash_signatures` applies to a text's bigram hashes, without the
    tokenising (what the collision-rate tests and benchmarks/bench_minhash.py measure). Equal
    to :func:`neardup.fingerprint.reference.sketch_shingles_reference` (tested)."""
    sh = np.ascontiguousarray(shingles, dtype=np.uint64)
    off = np.ascontiguousarray(offsets, dtype=np.int64)
    if (
        off.ndim != 1
        or off.size < 1
        or off[0] != 0
        or off[-1] != sh.size
        or (np.diff(off) < 0).any()
    ):
        raise InputError(
            f"offsets must rise from 0 to len(shingles) = {sh.size}; got {off.size} offsets "
            "(one more than the sets)"
        )
    pa, pb = _permutations(hashes)
    out = np.empty((off.size - 1, hashes), np.uint16)
    with kernel_threads(workers):
        run_ranges(_shingle_sets_kernel, off.size - 1, sh, off, pa, pb, out, min_items=8)
    return out


def minhash_signatures(
    verifier: Tokeniser,
    texts: Sequence[str],
    hashes: int,
    *,
    workers: int = 1,
    prepared: Prepared | None = None,
    progress: Callable[[int], None] | None = None,
    buckets: npt.NDArray[np.uint8] | None = None,
    histograms: npt.NDArray[np.uint8] | None = None,
) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.int64]]:
    """b-bit MinHash signatures of the texts' token bigrams (:data:`SIGNATURE_SCHEME`, see the
    module): ``(sig uint16 (n, hashes), tokens int64 (n,))``; a text without tokens has
    ``tokens == 0`` and an all-``NO_SIGNATURE`` row. Equal to
    :func:`neardup.fingerprint.reference.minhash_signatures_reference` (tested).

    ``prepared`` (optional) receives the texts that needed Python work (non-ASCII texts
    tokenised by ``Verifier.tokens``, social markers stripped), keyed by position, in the form
    the verification kernels take (:func:`~neardup.verify.tokens.token_hashes`): passed on to
    verification, those texts are not tokenised twice. ``progress(texts done)`` (optional) is
    called after each chunk.

    ``buckets`` (optional, ``(n, 2**MASK_BITS)`` uint8) receives each text's tokens counted in
    the coarse hash buckets of :data:`~neardup.text.token_kernels.MASK_BITS` (bucket ``j``
    holds :func:`~neardup.verify.tokens.token_histograms`' buckets ``j << (HIST_BITS -
    MASK_BITS)`` and up; saturating at 255), in the same pass: what a stored row's token mask
    (:func:`neardup.rules.lsh.sketches`) and a query's side of its bound
    (:func:`neardup.verify.overlap.mask_bound_decisions`) are made of.

    ``histograms`` (optional, ``(n, 2**k)`` uint8, ``1 <= k <= 16``) receives, by the same
    pass, each text's tokens counted in ``2**k`` buckets by the top ``k`` bits of the same
    mixed token hash, saturating at 255: with ``k = HIST_BITS``, what
    :func:`neardup.verify.tokens.token_histograms` makes of the texts (tested), so that a
    service request's texts are not tokenised again for the histogram bound and the long
    rows' summaries."""
    n = len(texts)
    pa, pb = _permutations(hashes)
    sig = np.empty((n, hashes), np.uint16)
    counts = np.zeros(n, np.int64)
    if buckets is None:
        buckets = np.zeros((n, 0), np.uint8)
    elif buckets.shape != (n, 1 << MASK_BITS) or buckets.dtype != np.uint8:
        raise ValueError(f"buckets must be ({n}, {1 << MASK_BITS}) uint8, got {buckets.shape}")
    if histograms is None:
        histograms = np.zeros((n, 0), np.uint8)
    elif (
        histograms.ndim != 2
        or histograms.shape[0] != n
        or histograms.dtype != np.uint8
        or not 2 <= histograms.shape[1] <= 1 << 16
        or histograms.shape[1] & (histograms.shape[1] - 1)
    ):
        raise ValueError(
            f"histograms must be ({n}, 2**k) uint8 with 1 <= k <= 16, got "
            f"{histograms.shape} {histograms.dtype}"
        )
    outs = (sig, counts, buckets, histograms)
    # a service request (or a few decided together): no chunk loop, no threads
    few = 0 < n <= FEW_TEXTS and all(type(t) is str for t in texts)
    if few and run_token_kernel_few(_signature_kernel, verifier, texts, (pa, pb), outs):
        if progress is not None:
            progress(n)
        return sig, counts
    special: Prepared = {}
    with kernel_threads(workers):
        for i, j, chunk in token_chunks(verifier, texts, special):
            run_token_kernel(_signature_kernel, texts, special, i, j, chunk, (pa, pb), outs)
            if prepared is None:  # only this chunk's entries were needed
                special.clear()
            if progress is not None:
                progress(j)
    if prepared is not None:
        prepared.update(special)
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


@kernel(nogil=True)
def _band_key_block_kernel(
    lo: int, hi: int, sig: np.ndarray, b0: int, rows: int, out: np.ndarray
) -> None:  # pragma: no cover - numba
    # out[k, i] for rows i in lo..hi-1 (run_ranges): the rows values of band b0 + k of row i,
    # 16 bits each, the first lowest (the little-endian uint64 view of a zero-padded group of
    # four uint16)
    nb = out.shape[0]
    s16 = np.uint64(16)
    s32 = np.uint64(32)
    s48 = np.uint64(48)
    for i in range(lo, hi):
        row = sig[i]
        for k in range(nb):
            c = (b0 + k) * rows
            key = np.uint64(row[c])  # (unrolled: a loop over the rows with a variable shift
            if rows > 1:  # measured several times slower)
                key |= np.uint64(row[c + 1]) << s16
            if rows > 2:
                key |= np.uint64(row[c + 2]) << s32
            if rows > 3:
                key |= np.uint64(row[c + 3]) << s48
            out[k, i] = key


def band_key_block(
    sig: npt.NDArray[np.uint16], b0: int, b1: int, rows: int
) -> npt.NDArray[np.uint64]:
    """Keys of bands ``b0..b1-1`` as ``(b1 - b0, n)`` uint64, equal to :func:`band_keys` of
    each band: one pass over the signatures' rows instead of one per band (``rows <= 4``;
    numba, no temporaries)."""
    if not 1 <= rows <= 4:
        raise InputError(f"band_key_block packs 1 to 4 rows per key, got {rows}")
    out = np.empty((b1 - b0, sig.shape[0]), np.uint64)
    if out.size:
        run_ranges(
            _band_key_block_kernel,
            out.shape[1],
            sig,
            int(b0),
            int(rows),
            out,
            min_items=_PARALLEL_ROWS,
        )
    return out


def mix64(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(_K2)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(_K3)
    return x ^ (x >> np.uint64(31))


# ---------------------------------------------------------------------------------------------
# compact band keys (the online store's and the band index's)

_BAND_SHIFT = np.uint64(48)


def entry_keys(keys: npt.NDArray[np.uint64], rows: int) -> npt.NDArray[np.uint64]:
    """Entry keys of band keys ``keys`` (bands, n): the band folded into the key (see "Compact keys" above)."""
    nb = keys.shape[0]
    band = np.arange(nb, dtype=np.uint64)[:, None]
    if rows * 16 <= 48 and nb < (1 << 16):
        return keys | (band << _BAND_SHIFT)
    return mix64(keys) ^ mix64(band + np.uint64(0x9E3779B97F4A7C15))


def band_entries(
    sig: npt.NDArray[np.uint16], usable: npt.NDArray[np.bool_], plan: Any
) -> npt.NDArray[np.uint64]:
    """Compact keys (n, bands) of signatures ``sig`` (n, hashes) under ``plan``
    (:func:`compact_keys` of the :func:`entry_keys`); rows that are not ``usable`` (no tokens:
    never candidates, as in the batch pipeline) get an empty key set, marked by
    :data:`NO_KEYS` in every column."""
    n = sig.shape[0]
    if plan.rows * 16 <= 48 and plan.bands < (1 << 16):  # the band is the key's top bits
        ent = np.empty((n, plan.bands), np.uint64)
        if n:
            run_ranges(
                _compact_entries_kernel,
                n,
                sig,
                np.asarray(usable, np.bool_),
                plan.rows,
                ent,
                min_items=_PARALLEL_ROWS,
            )
        return ent
    out = np.empty((plan.bands, n), np.uint64)
    for b0 in range(0, plan.bands, BAND_BLOCK):
        b1 = min(plan.bands, b0 + BAND_BLOCK)
        if plan.rows <= 4:
            out[b0:b1] = band_key_block(sig, b0, b1, plan.rows)
        else:
            for b in range(b0, b1):
                out[b] = band_keys(sig, b, plan.rows)
    ent = compact_keys(entry_keys(out, plan.rows).T)
    ent[~np.asarray(usable, bool)] = NO_KEYS
    return ent


@kernel(nogil=True, inline="always")
def _compact_entry(
    sig: np.ndarray, usable: np.ndarray, rows: int, out: np.ndarray, i: int
) -> None:  # pragma: no cover - numba
    # band_entries of row i for plans whose band keys fit 48 bits: the band key (rows values,
    # 16 bits each), the band in the top 16 bits (entry_keys), then group << 32 | low half of
    # mix64 (compact_keys), without the (bands, n) temporaries
    nb = out.shape[1]
    if not usable[i]:
        for k in range(nb):
            out[i, k] = np.uint64(0xFFFFFFFFFFFFFFFF)
        return
    k2 = np.uint64(_K2)
    k3 = np.uint64(_K3)
    low = np.uint64(0xFFFFFFFF)
    for k in range(nb):
        c = k * rows
        e = np.uint64(k) << np.uint64(48)
        for r in range(rows):
            e |= np.uint64(sig[i, c + r]) << np.uint64(16 * r)
        x = (e ^ (e >> np.uint64(30))) * k2
        x = (x ^ (x >> np.uint64(27))) * k3
        x = x ^ (x >> np.uint64(31))
        out[i, k] = (np.uint64(k) << np.uint64(32)) | (x & low)


@kernel(nogil=True)
def _compact_entries_kernel(
    lo: int, hi: int, sig: np.ndarray, usable: np.ndarray, rows: int, out: np.ndarray
) -> None:  # pragma: no cover - numba
    # rows lo..hi-1 (run_ranges)
    for i in range(lo, hi):
        _compact_entry(sig, usable, rows, out, i)


#: rows per range of the band-key kernels (fewer rows: the calling thread alone)
_PARALLEL_ROWS = 256


def warm_band_entries(plan: Any) -> None:
    """Load (or compile) the :func:`band_entries` kernel for ``plan`` (a server's warm-up)."""
    band_entries(np.zeros((1, plan.hashes), np.uint16), np.ones(1, np.bool_), plan)


_LOW32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)


def compact_keys(entries: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Compact keys (``group << 32 | h32``, see the module) of 64-bit entry keys: ``group`` is
    the entry key's top 16 bits (the band, for plans of up to 3 rows), ``h32`` the low 32 bits
    of :func:`mix64` of the entry key."""
    e = np.asarray(entries, np.uint64)
    return ((e >> _BAND_SHIFT) << _SHIFT32) | (mix64(e) & _LOW32)


#: entry key of a row without band keys (no tokens; never stored, never looked up)
NO_KEYS = np.uint64(0xFFFFFFFFFFFFFFFF)
