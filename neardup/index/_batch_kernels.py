"""Batch-mode probe kernel: a chunk of stored fingerprints streamed through block tables over
the query set in one numba call, no per-fingerprint Python.

Pigeonhole: the 64 bits are cut into ``k + 1`` blocks, so a (stored, query) pair within ``k``
bits agrees exactly on at least one block. Table ``t`` holds the queries sorted by block ``t``.
A chunk is radix-sorted by the same block and merge-joined with the table: both sides are read
in order, so the probe streams through memory instead of paying a cache miss per bucket (the
cost the general :class:`neardup.HammingIndex` search pays per query and table). A pair is
reported by the first block it agrees on only, so it is found once.

:func:`neardup.index.reference.probe_reference` is the same join in plain Python/NumPy, the twin
the kernel is tested equal to (and both equal to brute force).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .._jit import kernel, popcount64

__all__ = [
    "RADIX_BINS",
    "QueryTables",
    "block_layout",
    "build_tables",
    "probe",
    "probe_kernel",
    "radix_order",
]

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]

#: radix digit width of the chunk sort (a 2^16-entry histogram stays in L2)
_DIGIT = 16
#: the count's length :func:`radix_order` needs
RADIX_BINS = 1 << _DIGIT


def block_layout(max_distance: int) -> tuple[I64, U64]:
    """``(shifts, masks)`` of the ``max_distance + 1`` blocks: block ``t`` of ``x`` is
    ``(x >> shifts[t]) & masks[t]``; widths differ by at most one bit and cover all 64."""
    n = max_distance + 1
    widths = [64 // n + (1 if i < 64 % n else 0) for i in range(n)]
    shifts, masks, top = [], [], 64
    for w in widths:
        top -= w
        shifts.append(top)
        masks.append((1 << w) - 1)
    return np.array(shifts, np.int64), np.array(masks, np.uint64)


class QueryTables:
    """The queries sorted by each block: ``fps[t]`` (uint64) and ``pos[t]`` (int64 positions)."""

    __slots__ = ("fps", "masks", "max_distance", "pos", "shifts")

    def __init__(self, fps: U64, pos: I64, shifts: I64, masks: U64, max_distance: int) -> None:
        self.fps, self.pos, self.shifts, self.masks = fps, pos, shifts, masks
        self.max_distance = max_distance

    @property
    def size(self) -> int:
        return int(self.fps.shape[1])


def build_tables(queries: U64, max_distance: int) -> QueryTables:
    """Sort the queries by each block (stable, so equal blocks keep query order)."""
    q = np.ascontiguousarray(queries, dtype=np.uint64).reshape(-1)
    shifts, masks = block_layout(max_distance)
    t_n = len(shifts)
    fps = np.empty((t_n, q.size), np.uint64)
    pos = np.empty((t_n, q.size), np.int64)
    for t in range(t_n):
        key = (q >> np.uint64(shifts[t])) & masks[t]
        o = np.argsort(key, kind="stable")
        fps[t] = q[o]
        pos[t] = o
    return QueryTables(fps, pos, shifts, masks, max_distance)


@kernel(nogil=True)
def radix_order(vals, idx, sh, m, width, tmp_v, tmp_i, hist):
    """Sort ``vals`` (uint64) in place by their block ``(v >> sh) & m`` (``width`` bits), LSD
    by 16-bit digits, permuting ``idx`` alongside; stable. The values travel with the sort so
    the join reads them in order. ``tmp_*`` scratch of the same length, ``hist`` 2^16."""
    n = vals.shape[0]
    shift = 0
    src_v, src_i, dst_v, dst_i = vals, idx, tmp_v, tmp_i
    swapped = False
    dm = np.uint64((1 << _DIGIT) - 1)
    while shift < width:
        hist[:] = 0
        ds = np.uint64(shift)
        for r in range(n):
            hist[(((src_v[r] >> sh) & m) >> ds) & dm] += 1
        acc = 0
        for b in range(hist.shape[0]):
            c = hist[b]
            hist[b] = acc
            acc += c
        for r in range(n):
            v = src_v[r]
            d = (((v >> sh) & m) >> ds) & dm
            p = hist[d]
            hist[d] = p + 1
            dst_v[p] = v
            dst_i[p] = src_i[r]
        src_v, src_i, dst_v, dst_i = dst_v, dst_i, src_v, src_i
        swapped = not swapped
        shift += _DIGIT
    if swapped:  # loops: a slice assignment compiles its shape error path too
        for r in range(n):
            vals[r] = src_v[r]
            idx[r] = src_i[r]


@kernel(nogil=True)
def probe_kernel(
    stored, base, k, shifts, masks, qfps, qpos, vals, idx, tmp_v, tmp_i, hist, out_s, out_q, out_d
):
    """Every (stored position + ``base``, query position, distance) within ``k``, unsorted.

    ``vals``/``tmp_v`` (uint64) and ``idx``/``tmp_i`` (int64) are scratch of the chunk's length,
    ``hist`` int64 (2^16,). Returns the number of pairs; when it exceeds the outputs' length
    only the first ones were written and the caller retries with larger outputs (growing them
    inside the loop would cost the hot loop reference counting).
    """
    n = stored.shape[0]
    t_n = shifts.shape[0]
    nq = qfps.shape[1]
    cap = out_s.shape[0]
    cnt = 0
    if n == 0 or nq == 0:
        return cnt
    kk = np.int64(k)
    for t in range(t_n):
        sh = np.uint64(shifts[t])
        m = masks[t]
        width = 0
        while width < 64 and (m >> np.uint64(width)) != 0:
            width += 1
        for r in range(n):
            vals[r] = stored[r]
            idx[r] = r
        radix_order(vals, idx, sh, m, width, tmp_v, tmp_i, hist)
        i = 0
        j = 0
        while i < n and j < nq:
            a = (vals[i] >> sh) & m
            # first query whose block is >= a: a few linear steps, then binary search
            steps = 0
            while j < nq and ((qfps[t, j] >> sh) & m) < a and steps < 8:
                j += 1
                steps += 1
            if j < nq and ((qfps[t, j] >> sh) & m) < a:
                lo = j
                hi = nq
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if ((qfps[t, mid] >> sh) & m) < a:
                        lo = mid + 1
                    else:
                        hi = mid
                j = lo
            i2 = i + 1
            while i2 < n and ((vals[i2] >> sh) & m) == a:
                i2 += 1
            j2 = j
            while j2 < nq and ((qfps[t, j2] >> sh) & m) == a:
                j2 += 1
            for ii in range(i, i2):
                v = vals[ii]
                for jj in range(j, j2):
                    x = v ^ qfps[t, jj]
                    d = np.int64(popcount64(x))
                    if d <= kk and not _seen_earlier(x, t, shifts, masks):
                        if cnt < cap:
                            out_s[cnt] = idx[ii] + base
                            out_q[cnt] = qpos[t, jj]
                            out_d[cnt] = d
                        cnt += 1
            i = i2
            j = j2
    return cnt


@kernel(nogil=True, inline="always")
def _seen_earlier(x, t, shifts, masks):
    """True when the pair (XOR ``x``) agrees on a block before ``t`` (reported there)."""
    for u in range(t):  # noqa: SIM110  (numba: a loop, not a generator)
        if ((x >> np.uint64(shifts[u])) & masks[u]) == 0:
            return True
    return False


def probe(stored: U64, tables: QueryTables, base: int = 0) -> tuple[I64, I64, I32]:
    """The kernel over one chunk: ``(stored_pos, query_pos, distance)`` (unsorted)."""
    s = np.ascontiguousarray(stored, dtype=np.uint64).reshape(-1)
    n = s.size
    scratch = (
        np.empty(n, np.uint64),
        np.empty(n, np.int64),
        np.empty(n, np.uint64),
        np.empty(n, np.int64),
        np.empty(1 << _DIGIT, np.int64),
    )
    cap = 64 + n // 16
    while True:
        out = (np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int32))
        cnt = int(
            probe_kernel(
                s,
                np.int64(base),
                np.int64(tables.max_distance),
                tables.shifts,
                tables.masks,
                tables.fps,
                tables.pos,
                *scratch,
                *out,
            )
        )
        if cnt <= cap:
            return out[0][:cnt], out[1][:cnt], out[2][:cnt]
        cap = cnt
