"""Multiset token overlap: a cheap exact upper bound on the LCS of two token sequences.

Every common subsequence uses each token value at most as often as it occurs in both
sequences, so ``LCS(a, b) <= sum_t min(count_a(t), count_b(t))``. Verification decides a pair by
``ratio = 2 LCS / (len_a + len_b)`` or ``containment = LCS / shorter``, both increasing in the
LCS; a pair whose *overlap* already fails both is rejected without the O(len_a * len_b / 64) LCS.
Unrelated long documents share frequent words but rarely half their multiset, so most wide
SimHash candidates of long texts end here (one sorted merge, O(len_a + len_b)).

:func:`overlap_reference` (``collections.Counter``) is the reference the numba kernel is
tested against.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numba
import numpy as np
import numpy.typing as npt

__all__ = ["bound_decisions", "encode_sorted", "overlap_many", "overlap_reference"]


def overlap_reference(a: Sequence[object], b: Sequence[object]) -> int:
    """``sum_t min(count_a(t), count_b(t))`` with ``Counter`` (the reference)."""
    return sum((Counter(a) & Counter(b)).values())


def encode_sorted(encoded: Sequence[str]) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
    """CSR of sorted code points: ``(values uint32 (total,), offsets int64 (n + 1,))``.

    ``encoded`` are :class:`neardup.verify.TokenEncoder` strings (one code point per token, no
    surrogates), so UTF-32 gives the token ids directly.
    """
    lens = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    values = np.frombuffer("".join(encoded).encode("utf-32-le"), dtype="<u4").astype(np.uint32)
    _sort_segments(values, offsets)
    return values, offsets


@numba.njit(cache=True, parallel=True)
def _sort_segments(values: np.ndarray, offsets: np.ndarray) -> None:  # pragma: no cover - numba
    for s in numba.prange(offsets.shape[0] - 1):
        values[offsets[s] : offsets[s + 1]] = np.sort(values[offsets[s] : offsets[s + 1]])


@numba.njit(cache=True, parallel=True)
def _overlap_kernel(
    values: np.ndarray, offsets: np.ndarray, ia: np.ndarray, ib: np.ndarray
) -> np.ndarray:  # pragma: no cover - numba
    m = ia.shape[0]
    out = np.empty(m, np.int64)
    for p in numba.prange(m):
        i = offsets[ia[p]]
        ie = offsets[ia[p] + 1]
        j = offsets[ib[p]]
        je = offsets[ib[p] + 1]
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
    return out


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
    prev = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(workers), numba.config.NUMBA_NUM_THREADS)))
    try:
        return _overlap_kernel(values, offsets, ia, ib)
    finally:
        numba.set_num_threads(prev)


@numba.njit(cache=True, parallel=True)
def _bound_kernel(
    values: np.ndarray,
    offsets: np.ndarray,
    ia: np.ndarray,
    ib: np.ndarray,
    threshold: float,
    containment: float,
    min_tokens: int,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - numba
    m = ia.shape[0]
    could = np.zeros(m, np.bool_)
    ratio = np.zeros(m, np.float64)
    for p in numba.prange(m):
        i = offsets[ia[p]]
        ie = offsets[ia[p] + 1]
        j = offsets[ib[p]]
        je = offsets[ib[p] + 1]
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
        r = 2.0 * np.float64(c) / np.float64(la + lb)
        ratio[p] = r
        if r >= threshold or (
            containment <= 1.0
            and shorter >= min_tokens
            and np.float64(c) / np.float64(shorter) >= containment
        ):
            could[p] = True
    return could, ratio


@numba.njit(cache=True)
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


@numba.njit(cache=True, parallel=True)
def _bound_exit_kernel(
    values: np.ndarray,
    offsets: np.ndarray,
    ia: np.ndarray,
    ib: np.ndarray,
    threshold: float,
    containment: float,
    min_tokens: int,
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - numba
    # _bound_kernel that stops a merge once the overlap cannot reach the least passing value
    # (c + what is left of the shorter remainder < need): same decisions; an early-stopped pair
    # reports the ratio of that bound (>= its overlap ratio)
    m = ia.shape[0]
    could = np.zeros(m, np.bool_)
    ratio = np.zeros(m, np.float64)
    for p in numba.prange(m):
        i = offsets[ia[p]]
        ie = offsets[ia[p] + 1]
        j = offsets[ib[p]]
        je = offsets[ib[p] + 1]
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
        r = 2.0 * np.float64(c) / np.float64(la + lb)
        ratio[p] = r
        if not stopped and (
            r >= threshold
            or (
                containment <= 1.0
                and shorter >= min_tokens
                and np.float64(c) / np.float64(shorter) >= containment
            )
        ):
            could[p] = True
    return could, ratio


def bound_decisions(
    values: npt.NDArray[np.uint32],
    offsets: npt.NDArray[np.int64],
    ia: npt.NDArray[np.int64],
    ib: npt.NDArray[np.int64],
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
    prev = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(workers), numba.config.NUMBA_NUM_THREADS)))
    try:
        return (_bound_exit_kernel if early_exit else _bound_kernel)(
            values,
            offsets,
            ia,
            ib,
            float(threshold),
            float(containment),
            int(min_containment_tokens),
        )
    finally:
        numba.set_num_threads(prev)
