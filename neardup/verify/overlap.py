"""Multiset token overlap: a cheap exact upper bound on the LCS of two token sequences.

Every common subsequence uses each token value at most as often as it occurs in both
sequences, so ``LCS(a, b) <= sum_t min(count_a(t), count_b(t))``. Verification decides a pair by
``ratio = 2 LCS / (len_a + len_b)`` or ``containment = LCS / shorter``, both increasing in the
LCS; a pair whose *overlap* already fails both is rejected without the O(len_a * len_b / 64) LCS.
Unrelated long documents share frequent words but rarely half their multiset, so most wide
SimHash candidates of long texts end here (one sorted merge, O(len_a + len_b)).

:func:`neardup.verify.reference.overlap_reference` (``collections.Counter``) is the reference
the numba kernel is tested against.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._jit import kernel, popcount64
from .._threads import kernel_threads, run_ranges
from ..text.token_kernels import SPACE_LUT, WORD_LUT
from .sequences import DEFAULT_MAX_LCS_CELLS
from .tokens import HIST_MAX

__all__ = [
    "bound_decisions",
    "encode_sorted",
    "histogram_bound_decisions",
    "lcs_many",
    "mask_bound_decisions",
    "overlap_many",
]


def encode_sorted(encoded: Sequence[str]) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
    """CSR of sorted code points: ``(values uint32 (total,), offsets int64 (n + 1,))``.

    ``encoded`` are :class:`neardup.verify.TokenEncoder` strings (one code point per token, no
    surrogates), so UTF-32 gives the token ids directly.
    """
    lens = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    values = np.frombuffer("".join(encoded).encode("utf-32-le"), dtype="<u4").astype(np.uint32)
    run_ranges(_sort_segments, offsets.size - 1, values, offsets, min_items=64)
    return values, offsets


#: pairs per range of a merge or bound kernel (fewer pairs: the calling thread alone)
PAIR_RANGE = 256


@kernel(nogil=True)
def _sort_segments(
    lo: int, hi: int, values: np.ndarray, offsets: np.ndarray
) -> None:  # pragma: no cover - numba
    for s in range(lo, hi):
        values[offsets[s] : offsets[s + 1]].sort()


@kernel(inline="always")
def _spans(offsets: np.ndarray, a: int, b: int) -> tuple[int, int, int, int]:  # pragma: no cover
    # (start, end) of sequence a, then of sequence b, in a CSR's values
    return offsets[a], offsets[a + 1], offsets[b], offsets[b + 1]


@kernel(nogil=True)
def _overlap_kernel(
    lo: int,
    hi: int,
    values: np.ndarray,
    offsets: np.ndarray,
    ia: np.ndarray,
    ib: np.ndarray,
    out: np.ndarray,
) -> None:  # pragma: no cover - numba
    for p in range(lo, hi):
        i, ie, j, je = _spans(offsets, ia[p], ib[p])
        c = 0
        while i < ie and j < je:
            x = values[i]
            y = values[j]
            if x == y:
                c += 1
                i += 1
                j += 1
            elif x < y:
                i += 1
            else:
                j += 1
        out[p] = c


def overlap_many(
    values: npt.NDArray[np.uint32],
    offsets: npt.NDArray[np.int64],
    ia: npt.NDArray[np.int64],
    ib: npt.NDArray[np.int64],
    *,
    workers: int = 1,
) -> npt.NDArray[np.int64]:
    """Multiset overlap of sequences ``ia[m]`` and ``ib[m]`` of an :func:`encode_sorted` CSR."""
    ia = np.ascontiguousarray(ia, dtype=np.int64)
    ib = np.ascontiguousarray(ib, dtype=np.int64)
    if ia.size == 0:
        return np.zeros(0, np.int64)
    out = np.empty(ia.size, np.int64)
    with kernel_threads(workers):
        run_ranges(_overlap_kernel, ia.size, values, offsets, ia, ib, out, min_items=PAIR_RANGE)
    return out


@kernel(nogil=True)
def _bound_kernel(
    lo: int,
    hi: int,
    values: np.ndarray,
    offsets: np.ndarray,
    ia: np.ndarray,
    ib: np.ndarray,
    threshold: float,
    containment: float,
    min_tokens: int,
    could: np.ndarray,
    ratio: np.ndarray,
) -> None:  # pragma: no cover - numba
    # could, ratio: zeros
    for p in range(lo, hi):
        i, ie, j, je = _spans(offsets, ia[p], ib[p])
        la = ie - i
        lb = je - j
        shorter = min(la, lb)
        if shorter == 0:
            continue
        c = 0
        while i < ie and j < je:  # branch-free merge step (no mispredictions)
            x = values[i]
            y = values[j]
            c += x == y
            i += x <= y
            j += y <= x
        could[p], ratio[p] = _passes(c, la, lb, threshold, containment, min_tokens)


@kernel(inline="always")
def _passes(
    c: int | np.int64, la: int, lb: int, threshold: float, containment: float, min_tokens: int
) -> tuple[bool | np.bool_, float]:  # pragma: no cover - numba
    # Verifier.decide's rule on an overlap (bound) c of texts of la and lb tokens, the same float
    # formulas: (could pass, ratio)
    shorter = min(la, lb)
    r = 2.0 * np.float64(c) / np.float64(la + lb)
    ok = r >= threshold or (
        containment <= 1.0
        and shorter >= min_tokens
        and np.float64(c) / np.float64(shorter) >= containment
    )
    return ok, r


@kernel
def _least_passing(
    total: int, shorter: int, threshold: float, containment: float, min_tokens: int
) -> int:  # pragma: no cover - numba
    # the smallest overlap c for which the decision formulas below pass (both increase with c)
    c = max(0, int(threshold * total / 2.0) - 2)
    while c <= total and not (2.0 * np.float64(c) / np.float64(total) >= threshold):
        c += 1
    if containment <= 1.0 and shorter >= min_tokens:
        k = max(0, int(containment * shorter) - 2)
        while k < c and not (np.float64(k) / np.float64(shorter) >= containment):
            k += 1
        c = min(c, k)
    return c


@kernel(nogil=True)
def _bound_exit_kernel(
    lo: int,
    hi: int,
    values: np.ndarray,
    offsets: np.ndarray,
    ia: np.ndarray,
    ib: np.ndarray,
    threshold: float,
    containment: float,
    min_tokens: int,
    could: np.ndarray,
    ratio: np.ndarray,
) -> None:  # pragma: no cover - numba
    # _bound_kernel that stops a merge once the overlap cannot reach the least passing value
    # (c + what is left of the shorter remainder < need): same decisions; an early-stopped pair
    # reports the ratio of that bound (>= its overlap ratio). could, ratio: zeros
    for p in range(lo, hi):
        i, ie, j, je = _spans(offsets, ia[p], ib[p])
        la = ie - i
        lb = je - j
        shorter = min(la, lb)
        if shorter == 0:
            continue
        need = _least_passing(la + lb, shorter, threshold, containment, min_tokens)
        c = 0
        stopped = False
        while i < ie and j < je:
            for _ in range(64):  # branch-free merge steps
                if i >= ie or j >= je:
                    break
                x = values[i]
                y = values[j]
                c += x == y
                i += x <= y
                j += y <= x
            if c + min(ie - i, je - j) < need:
                c += min(ie - i, je - j)
                stopped = True
                break
        ok, ratio[p] = _passes(c, la, lb, threshold, containment, min_tokens)
        could[p] = ok and not stopped


def bound_decisions(
    values: npt.NDArray[np.uint32],
    offsets: npt.NDArray[np.int64],
    ia: npt.NDArray[np.integer[Any]],
    ib: npt.NDArray[np.integer[Any]],
    *,
    threshold: float,
    containment: float,
    min_containment_tokens: int,
    workers: int = 1,
    early_exit: bool = False,
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
    """``Verifier.decide`` applied to the overlap bound, fused into the merge: ``(could pass
    bool (m,), bound ratio float64 (m,))``. Same float formulas as ``decide`` (tested).

    With ``early_exit`` a merge stops as soon as the overlap can no longer reach the least
    value that passes (the overlap so far plus the shorter remainder is below it): the same
    decisions, and a stopped pair reports the ratio of that (larger) bound."""
    ia = np.ascontiguousarray(ia, dtype=np.int64)
    ib = np.ascontiguousarray(ib, dtype=np.int64)
    if ia.size == 0:
        return np.zeros(0, np.bool_), np.zeros(0, np.float64)
    could = np.zeros(ia.size, np.bool_)
    ratio = np.zeros(ia.size, np.float64)
    with kernel_threads(workers):
        run_ranges(
            _bound_exit_kernel if early_exit else _bound_kernel,
            ia.size,
            values,
            offsets,
            ia,
            ib,
            float(threshold),
            float(containment),
            int(min_containment_tokens),
            could,
            ratio,
            min_items=PAIR_RANGE,
        )
    return could, ratio


@kernel(nogil=True)
def _hist_bound_kernel(
    lo: int,
    hi: int,
    hist: np.ndarray,
    counts: np.ndarray,
    ia: np.ndarray,
    ib: np.ndarray,
    threshold: float,
    containment: float,
    min_tokens: int,
    full: int,
    could: np.ndarray,
    ratio: np.ndarray,
) -> None:  # pragma: no cover - numba
    # _bound_kernel's decision on c = sum over buckets of min(hist[a], hist[b]) (at most the
    # shorter count); a bucket full on both sides makes c the shorter count (no bound).
    # could, ratio: zeros
    nb = hist.shape[1]
    for p in range(lo, hi):
        la = counts[ia[p]]
        lb = counts[ib[p]]
        shorter = min(la, lb)
        if shorter == 0:
            continue
        ra = hist[ia[p]]
        rb = hist[ib[p]]
        c: int | np.int64 = 0
        sat: int | np.int64 | np.bool_ = 0
        for k in range(nb):
            x = np.int64(ra[k])
            y = np.int64(rb[k])
            c += min(x, y)
            sat |= (x >= full) & (y >= full)
        if sat or c > shorter:
            c = shorter
        could[p], ratio[p] = _passes(c, la, lb, threshold, containment, min_tokens)


def histogram_bound_decisions(
    hist: npt.NDArray[np.uint8],
    counts: npt.NDArray[np.int64],
    ia: npt.NDArray[np.int64],
    ib: npt.NDArray[np.int64],
    *,
    threshold: float,
    containment: float,
    min_containment_tokens: int,
    full: int = HIST_MAX,
    workers: int = 1,
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
    """:func:`bound_decisions` on bucket counts (:func:`~neardup.verify.tokens.token_histograms`
    rows): ``(could pass bool (m,), bound ratio float64 (m,))``.

    ``sum_k min(hist[a, k], hist[b, k])`` is at least the multiset overlap of the two token
    sequences (equal tokens share a bucket; per bucket the smaller total is at least the sum of
    the smaller counts), so a pair it rejects is rejected by :func:`bound_decisions` too, and
    its ratio is at least that bound's. A bucket at ``full`` on both sides may hold more than
    it says: such a pair is not bounded (the overlap is taken as the shorter count). O(buckets)
    per pair, no merge: a cheap first filter before the token hashes."""
    ia = np.ascontiguousarray(ia, dtype=np.int64)
    ib = np.ascontiguousarray(ib, dtype=np.int64)
    if ia.size == 0:
        return np.zeros(0, np.bool_), np.zeros(0, np.float64)
    could = np.zeros(ia.size, np.bool_)
    ratio = np.zeros(ia.size, np.float64)
    with kernel_threads(workers):
        run_ranges(
            _hist_bound_kernel,
            ia.size,
            hist,
            counts,
            ia,
            ib,
            float(threshold),
            float(containment),
            int(min_containment_tokens),
            int(full),
            could,
            ratio,
            min_items=PAIR_RANGE,
        )
    return could, ratio


@kernel(nogil=True)
def _mask_bound_kernel(
    lo: int,
    hi: int,
    buckets: np.ndarray,
    q_counts: np.ndarray,
    qi: np.ndarray,
    masks: np.ndarray,
    s_counts: np.ndarray,
    si: np.ndarray,
    threshold: float,
    containment: float,
    min_tokens: int,
    could: np.ndarray,
) -> None:  # pragma: no cover - numba
    # _hist_bound_kernel's decision on c = the query's count in the buckets the stored mask
    # uses (at most the shorter count; a full query bucket the mask uses: no bound); a count
    # of 0 is unknown: could pass. could: zeros
    nb = buckets.shape[1]
    one = np.uint64(1)
    for p in range(lo, hi):
        la = q_counts[qi[p]]
        lb = s_counts[si[p]]
        shorter = min(la, lb)
        if shorter == 0:
            could[p] = True
            continue
        row = buckets[qi[p]]
        m = masks[si[p]]
        c: int | np.int64 = 0
        sat: bool | np.bool_ = False
        for k in range(nb):
            if (m >> np.uint64(k)) & one:
                x = np.int64(row[k])
                c += x
                sat |= x >= 255
        if sat or c > shorter:
            c = shorter
        could[p] = _passes(c, la, lb, threshold, containment, min_tokens)[0]


def mask_bound_decisions(
    buckets: npt.NDArray[np.uint8],
    q_counts: npt.NDArray[np.int64],
    qi: npt.NDArray[np.int64],
    masks: npt.NDArray[np.uint64],
    s_counts: npt.NDArray[np.int64],
    si: npt.NDArray[np.int64],
    *,
    threshold: float,
    containment: float,
    min_containment_tokens: int,
) -> npt.NDArray[np.bool_]:
    """Whether each pair (query ``qi[m]``, stored row ``si[m]``) could pass verification, on
    what a store keeps of a row without its text: :func:`bound_decisions`' rule on the
    overlap bound ``sum of buckets[qi[m], j] over the buckets j that masks[si[m]] uses``.

    ``buckets`` are the queries' tokens counted in the coarse hash buckets
    (:func:`~neardup.fingerprint.minhash.minhash_signatures`' ``buckets``, saturating at 255),
    ``q_counts`` their token counts; ``masks`` are the stored rows' token masks
    (:func:`~neardup.rules.lsh.token_masks`, kept in their sketches), ``s_counts`` their token
    counts. A token of the query that the stored text shares falls in a bucket the stored
    text uses, so the sum is at least the multiset overlap, hence at least the LCS: a pair
    turned down here is rejected by :func:`histogram_bound_decisions` and verification too
    (tested). A saturated query bucket the mask uses, or a count of 0 (unknown), bounds
    nothing: such a pair could pass. Coarser than the histogram bound (64 buckets, one bit
    each on the stored side), but it needs 8 bytes a stored row instead of its text."""
    qi = np.ascontiguousarray(qi, dtype=np.int64)
    si = np.ascontiguousarray(si, dtype=np.int64)
    could = np.zeros(qi.size, np.bool_)
    if qi.size:
        run_ranges(
            _mask_bound_kernel,
            qi.size,
            np.ascontiguousarray(buckets, np.uint8),
            np.ascontiguousarray(q_counts, np.int64),
            qi,
            np.ascontiguousarray(masks, np.uint64),
            np.ascontiguousarray(s_counts, np.int64),
            si,
            float(threshold),
            float(containment),
            int(min_containment_tokens),
            could,
            min_items=PAIR_RANGE,
        )
    return could


# ---------------------------------------------------------------------------------------------
# exact LCS of token sequences located by ``token_spans`` (no vocabulary, no strings)


@kernel
def _doc_tokens(
    buf: np.ndarray,
    s: int,
    e: int,
    pretok: bool,
    word: np.ndarray,
    space: np.ndarray,
    ts: np.ndarray,
    tl: np.ndarray,
    th: np.ndarray,
) -> int | np.int64:  # pragma: no cover - numba
    # the tokens of buf[s:e] (see neardup.verify.tokens.token_bytes) in order: start, length
    # and FNV-1a 64 of the (lower-cased) bytes; branch-free; returns their number
    fnv = np.uint64(0xCBF29CE484222325)
    prime = np.uint64(0x100000001B3)
    lut = space if pretok else word
    low = 0 if pretok else 32
    ks: int | np.int64 = 0
    ke: int | np.int64 = 0
    prev: int | np.int64 = 0
    h = fnv
    for i in range(s, e):
        y = buf[i]
        w = np.int64(lut[y])
        ts[ks] = i
        ks += w & (prev ^ 1)
        th[ke] = h
        tl[ke] = i
        ke += prev & (w ^ 1)
        hb = fnv if w > prev else h
        hn = (hb ^ np.uint64(y | low)) * prime
        h = hn if w else hb
        prev = w
    th[ke] = h
    tl[ke] = e
    for q in range(ks):
        tl[q] -= ts[q]
    return ks


@kernel
def _same_token(
    buf: np.ndarray, a: int, low_a: int, b: int, low_b: int, n: int
) -> bool:  # pragma: no cover - numba
    for q in range(n):  # noqa: SIM110 - numba has no all() over a generator
        if (buf[a + q] | low_a) != (buf[b + q] | low_b):
            return False
    return True


@kernel(inline="always")
def _slot(
    buf: np.ndarray,
    h: np.uint64,
    start: int,
    n: int,
    low: int,
    tha: np.ndarray,
    tsa: np.ndarray,
    tla: np.ndarray,
    low_a: int,
    slot_tok: np.ndarray,
    shift: np.uint64,
) -> int | np.int64:  # pragma: no cover - numba
    # The slot of the token buf[start:start + n] (hash h, OR low) in A's open-addressing table:
    # the slot holding an equal token of A (hash hit confirmed byte by byte), else the empty
    # slot (slot_tok < 0) where it would go. slot_tok: A's token in each slot, -1 when empty
    # (a power of two of slots, 2**(64 - shift), probed linearly from the multiplicative hash).
    mask = slot_tok.shape[0] - 1
    s = np.int64((h * np.uint64(0x9E3779B97F4A7C15)) >> shift)
    while True:
        r = slot_tok[s]
        if r < 0 or (
            tha[r] == h and tla[r] == n and _same_token(buf, tsa[r], low_a, start, low, n)
        ):
            return s
        s = (s + 1) & mask


@kernel(nogil=True)
def _lcs_kernel(
    lo: int,
    hi: int,
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    mode: np.ndarray,
    word: np.ndarray,
    space: np.ndarray,
    ia: np.ndarray,
    ib: np.ndarray,
    max_cells: int,
    out: np.ndarray,
) -> None:  # pragma: no cover - numba
    # Per pair: both texts tokenised from their bytes; A's distinct tokens numbered with a small
    # open-addressing table (a hash hit is confirmed byte by byte: exact); A's position bitmasks;
    # then the bit-parallel LCS (Allison-Dix / Hyyro: V' = (V + (V & M)) | (V & ~M), multi-word
    # with carries) over B's tokens. A pair with na * nb > max_cells gets the multiset overlap
    # of the same token ids instead (linear: the cap on one pair's cost). out: zeros
    ones = np.uint64(0xFFFFFFFFFFFFFFFF)
    for p in range(lo, hi):
        a = ia[p]
        b = ib[p]
        pa = mode[a] == 2
        pb = mode[b] == 2
        low_a = 0 if pa else 32
        low_b = 0 if pb else 32
        cap_a = (ends[a] - starts[a] + 1) // 2 + 1
        cap_b = (ends[b] - starts[b] + 1) // 2 + 1
        tsa = np.empty(cap_a, np.int64)
        tla = np.empty(cap_a, np.int64)
        tha = np.empty(cap_a, np.uint64)
        na = _doc_tokens(buf, starts[a], ends[a], pa, word, space, tsa, tla, tha)
        tsb = np.empty(cap_b, np.int64)
        tlb = np.empty(cap_b, np.int64)
        thb = np.empty(cap_b, np.uint64)
        nb = _doc_tokens(buf, starts[b], ends[b], pb, word, space, tsb, tlb, thb)
        if na == 0 or nb == 0:
            continue
        bits = 1
        while (1 << bits) < 2 * na:
            bits += 1
        cap = 1 << bits
        shift = np.uint64(64 - bits)
        slot_tok = np.full(cap, -1, np.int64)
        slot_id = np.empty(cap, np.int64)
        ids = np.empty(na, np.int64)
        nd = 0
        for q in range(na):
            s = _slot(buf, tha[q], tsa[q], tla[q], low_a, tha, tsa, tla, low_a, slot_tok, shift)
            if slot_tok[s] < 0:
                slot_tok[s] = q
                slot_id[s] = nd
                nd += 1
            ids[q] = slot_id[s]
        if na * nb > max_cells:
            cnt = np.zeros(nd, np.int64)
            for q in range(na):
                cnt[ids[q]] += 1
            c: int | np.int64 = 0
            for q in range(nb):
                s = _slot(buf, thb[q], tsb[q], tlb[q], low_b, tha, tsa, tla, low_a, slot_tok, shift)
                if slot_tok[s] >= 0:
                    u = slot_id[s]
                    if cnt[u] > 0:
                        cnt[u] -= 1
                        c += 1
            out[p] = c
            continue
        w = (na + 63) >> 6
        pm = np.zeros((nd, w), np.uint64)
        for q in range(na):
            pm[ids[q], q >> 6] |= np.uint64(1) << np.uint64(q & 63)
        v = np.full(w, ones, np.uint64)
        for q in range(nb):
            s = _slot(buf, thb[q], tsb[q], tlb[q], low_b, tha, tsa, tla, low_a, slot_tok, shift)
            if slot_tok[s] < 0:  # not in A: the LCS cannot use it
                continue
            u = slot_id[s]
            carry = np.uint64(0)
            for k in range(w):
                x = v[k]
                y = x & pm[u, k]
                z = x + y
                c1 = np.uint64(z < x)
                z2 = z + carry
                c2 = np.uint64(z2 < z)
                carry = c1 | c2
                v[k] = z2 | (x ^ y)
        c = 0
        for k in range(w):
            x = ~v[k]
            if k == w - 1 and (na & 63):
                x &= (np.uint64(1) << np.uint64(na & 63)) - np.uint64(1)
            c += np.int64(popcount64(x))
        out[p] = c


def lcs_many(
    data: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    ia: npt.NDArray[np.int64],
    ib: npt.NDArray[np.int64],
    *,
    workers: int = 1,
    max_cells: int | None = None,
) -> npt.NDArray[np.int64]:
    """Exact LCS length (int64 (m,)) of the token sequences of texts ``ia[m]`` and ``ib[m]``
    of a :func:`neardup.verify.tokens.token_bytes` result: equal to rapidfuzz ``LCSseq`` on
    the :class:`~neardup.verify.TokenEncoder` strings of the same texts (tested), without a
    vocabulary, strings or stored token arrays (each pair tokenises its two texts).

    A pair whose token counts multiply to more than ``max_cells`` (default
    :data:`neardup.verify.DEFAULT_MAX_LCS_CELLS`) gets its multiset token overlap instead (an
    upper bound on the LCS, in linear time), as :class:`~neardup.verify.Verifier` decides it."""

    cells = DEFAULT_MAX_LCS_CELLS if max_cells is None else int(max_cells)
    buf, starts, ends, mode = data
    ia = np.ascontiguousarray(ia, dtype=np.int64)
    ib = np.ascontiguousarray(ib, dtype=np.int64)
    if ia.size == 0:
        return np.zeros(0, np.int64)
    out = np.zeros(ia.size, np.int64)
    with kernel_threads(workers):
        run_ranges(
            _lcs_kernel,
            ia.size,
            buf,
            starts,
            ends,
            mode,
            WORD_LUT,
            SPACE_LUT,
            ia,
            ib,
            cells,
            out,
            tasks_per_thread=16,
        )
    return out
