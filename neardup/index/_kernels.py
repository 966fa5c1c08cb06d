"""numba kernels for the Hamming index: table probes, pruned descent of heavy buckets, brute force.

All kernels are ``@kernel(nogil=True)`` (:func:`neardup._jit.kernel`) so batched searches can
run on several threads. They return *rows* of one segment; mapping rows to ids, dropping removed
rows and the final (distance, id) ordering happen in :mod:`neardup.index.hamming_index`. The pure
NumPy reference they are tested against is :mod:`neardup.index.reference`.

Fingerprints are ``uint64`` arrays of shape ``(n, W)`` here (``W = 1`` for 64-bit, ``2`` for
128-bit, column 0 the high word). Table ``t`` stores ``keys[t]`` (a permutation of the
fingerprint's bits, truncated to 64 bits, sorted) and ``rows[t - 1]`` (the row each key came
from; table 0 is the identity permutation over the row-sorted fingerprints, so it needs none).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .._arrays import sort_long_runs
from .._jit import kernel, popcount64, prefetch2d
from .._search import lower_bound, upper_bound

LEAF = 16  # a descent range this small is scanned linearly
#: a query's descent range in a heavy bucket this small is scanned linearly. Heavy buckets are
#: where fingerprints cluster (texts sharing their most frequent tokens), so the keys near a
#: query are dense: splitting such a range bit by bit, a binary search per split, visits about
#: as many nodes as it has keys, each dearer than a key's XOR and popcount
#: (benchmarks/bench_heavy_buckets.py)
QUERY_LEAF = 256


def _cttz64(typingctx: Any, x: Any) -> tuple[Any, Any]:
    """Typing and LLVM code of :data:`cttz64`."""
    sig = types.uint64(types.uint64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))

    return sig, codegen


# numba intrinsics, typed Any: called from kernels only, with numba's (not Python's) signature
#: ``cttz64(x)``: count of trailing zero bits of a uint64 (LLVM cttz; 64 for 0): the position
#: of the lowest set bit, what walking a bit vector's set bits needs
cttz64: Any = intrinsic(_cttz64)


@kernel(nogil=True, inline="always")
def _pc(x):
    return np.int64(popcount64(np.uint64(x)))


@kernel(nogil=True, inline="always")
def _tz(x):
    return np.int64(cttz64(np.uint64(x)))


@kernel(nogil=True, inline="always")
def _seen_earlier(t, W, x, x0, x1, pm_key, pm_orig, probe_radius):
    """True when an earlier table than ``t`` also finds this candidate (it reports it there).

    ``x`` is the candidate's permuted-key XOR in table ``t`` (64-bit); ``x0``/``x1`` the XOR of
    the original words (128-bit).
    """
    for t2 in range(t):
        if W == 1:
            pd = _pc(x & pm_key[t, t2])
        else:
            pd = _pc(x0 & pm_orig[t2, 0]) + _pc(x1 & pm_orig[t2, 1])
        if pd <= probe_radius[t2]:
            return True
    return False


@kernel(nogil=True)
def permute_one(fps, i, t, pidx, pmask, npieces):
    """Table ``t``'s 64-bit key of fingerprint row ``i`` of ``fps`` (n, W)."""
    key = np.uint64(0)
    for j in range(npieces[t]):
        v = (fps[i, pidx[t, j, 0]] >> np.uint64(pidx[t, j, 1])) & pmask[t, j]
        key |= v << np.uint64(pidx[t, j, 2])
    return key


@kernel(nogil=True)
def permute_many(fps, t, pidx, pmask, npieces):
    """Table ``t``'s keys of every row of ``fps`` (n, W) -> uint64 (n,)."""
    n = fps.shape[0]
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        out[i] = permute_one(fps, i, t, pidx, pmask, npieces)
    return out


@kernel(nogil=True)
def _first_with_bit(a, lo, hi, bit):
    """First index in [lo, hi) whose key has ``bit`` set (keys there agree above ``bit``)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] & bit:
            hi = mid
        else:
            lo = mid + 1
    return lo


@kernel(nogil=True, inline="always")
def probe_prefix(p_bits, dbits, key):
    """A table probe's prefix arithmetic (scalars only, so inlining adds no reference counts):
    the shift that leaves a key's ``p_bits``-bit prefix, the mask of the bits below it, ``key``'s
    prefix, and the shift from a prefix to its ``dbits``-bit directory slot."""
    shift = np.uint64(64 - p_bits)
    low = (np.uint64(1) << shift) - np.uint64(1) if p_bits < 64 else np.uint64(0)
    pre = key >> shift if p_bits < 64 else key
    return shift, low, pre, np.uint64(p_bits - dbits)


@kernel(nogil=True, inline="always")
def _split(tkeys, a, b, bitpos, dd, key, kk, stack, sp):
    """One step of the pruned descent of a heavy bucket: split the keys ``[a, b)`` (equal above
    bit ``bitpos``, counted from the top) on that bit and push onto ``stack`` (rows lo, hi,
    bit, distance so far) the half that differs from ``key`` there, if ``dd + 1 <= kk``, then
    the half that agrees (so it is taken first). Returns the new stack size."""
    bm = np.uint64(1) << np.uint64(63 - bitpos)
    s = _first_with_bit(tkeys, a, b, bm)
    if key & bm:
        sa, sb, oa, ob = s, b, a, s
    else:
        sa, sb, oa, ob = a, s, s, b
    if ob > oa and dd + 1 <= kk:
        stack[0, sp] = oa
        stack[1, sp] = ob
        stack[2, sp] = bitpos + 1
        stack[3, sp] = dd + 1
        sp += 1
    if sb > sa:
        stack[0, sp] = sa
        stack[1, sp] = sb
        stack[2, sp] = bitpos + 1
        stack[3, sp] = dd
        sp += 1
    return sp


@kernel(nogil=True)
def search_tables(
    q,
    k,
    keys,
    rows,
    fps,
    dirs,
    dbits,
    pidx,
    pmask,
    npieces,
    pb,
    probe_radius,
    flips,
    flipd,
    nflips,
    pm_key,
    pm_orig,
    heavy,
    hv,
    sub,
    qk,
    stack,
    out_q,
    out_r,
    out_d,
):
    """Every (query, row, distance) with distance <= k in one table segment, each pair once.

    ``heavy`` (int64 (T,)) is the bucket size above which a bucket is descended instead of
    scanned; ``hv`` (int64 (H, 4): table, bucket start, sub bits, offset into ``sub``, sorted) and
    ``sub`` (int64 offsets) are the sub-directories of heavy buckets on the bits after the prefix.

    Parameters are the segment arrays (see module docstring), the plan arrays built by
    :func:`neardup.index.tables.plan_arrays`, scratch space (``qk`` uint64 (8 * T,), ``stack`` int64
    (4, 256)) and the outputs ``out_q`` / ``out_r`` (int64) and ``out_d`` (int32), filled with
    matches grouped by query in query order. Returns the number of matches; when it exceeds the
    outputs' length only the first ones were written and the caller retries with larger outputs.
    """
    nq = q.shape[0]
    W = q.shape[1]
    # an exact search needs one table: every table holds every row, and a pair at distance
    # 0 is reported from table 0 (the later tables' copies are skipped as seen earlier)
    T = keys.shape[0] if k > 0 else min(keys.shape[0], 1)
    n_keys = keys.shape[1]
    cap = out_q.shape[0]
    cnt = 0
    st_lo = stack[0]
    st_hi = stack[1]
    st_bit = stack[2]
    st_d = stack[3]
    kk = np.int64(k)
    G = 8  # queries per prefetch group: issue their memory loads before using them
    for qi in range(nq):
        g = qi % G
        if g == 0:
            g1 = min(nq, qi + G)
            for qj in range(qi, g1):
                for t in range(T):
                    kq = permute_one(q, qj, t, pidx, pmask, npieces)
                    qk[(qj - qi) * T + t] = kq
                    top0 = np.int64((kq >> np.uint64(64 - pb[t])) >> np.uint64(pb[t] - dbits))
                    prefetch2d(dirs, t, top0)
            for qj in range(qi, g1):
                for t in range(T):
                    kq = qk[(qj - qi) * T + t]
                    top0 = np.int64((kq >> np.uint64(64 - pb[t])) >> np.uint64(pb[t] - dbits))
                    lo0 = dirs[t, top0]
                    if lo0 < n_keys:
                        prefetch2d(keys, t, lo0)
        for t in range(T):
            tkeys = keys[t]
            p_bits = pb[t]
            qkt = qk[g * T + t]
            shift, low, qpre, dshift = probe_prefix(p_bits, dbits, qkt)
            for f in range(nflips[t]):
                d0 = flipd[t, f]
                if d0 > kk:
                    break
                p = qpre ^ flips[t, f]
                top = np.int64(p >> dshift)
                lo = dirs[t, top]
                hi = dirs[t, top + 1]
                if p_bits > dbits and hi > lo:
                    base = p << shift if p_bits < 64 else p
                    lo = lower_bound(tkeys, lo, hi, base)
                    hi = upper_bound(tkeys, lo, hi, base | low)
                if hi <= lo:
                    continue
                big = hi - lo > heavy[t]
                # a heavy bucket with a sub-directory is split into sub-cells first: every
                # cell within the remaining budget of flips on the next s_bits bits
                has_sub = False
                s_bits = 0
                off = 0
                qv = np.uint64(0)
                if big and hv.shape[0] > 0:
                    ha = 0
                    hb = hv.shape[0]
                    while ha < hb:  # first entry >= (t, lo)
                        hm = (ha + hb) >> 1
                        if hv[hm, 0] < t or (hv[hm, 0] == t and hv[hm, 1] < lo):
                            ha = hm + 1
                        else:
                            hb = hm
                    if ha < hv.shape[0] and hv[ha, 0] == t and hv[ha, 1] == lo:
                        has_sub = True
                        s_bits = hv[ha, 2]
                        off = hv[ha, 3]
                        qv = (qkt << np.uint64(p_bits)) >> np.uint64(64 - s_bits)
                jmax = min(kk - d0, s_bits)
                lim = np.uint64(1) << np.uint64(s_bits)
                j = 0
                m = np.uint64(0)
                first = True
                while True:
                    if has_sub:
                        if first:
                            first = False
                        elif j == 0:
                            j = 1
                            m = np.uint64(1)
                        else:
                            gc = m & (~m + np.uint64(1))
                            gr = m + gc
                            m = (((gr ^ m) >> np.uint64(2)) // gc) | gr
                            if m >= lim:
                                j += 1
                                m = (np.uint64(1) << np.uint64(j)) - np.uint64(1)
                        if j > jmax:
                            break
                        v = np.int64(qv ^ m)
                        a0 = sub[off + v]
                        b0 = sub[off + v + 1]
                        if b0 <= a0:
                            continue
                        st_lo[0] = a0
                        st_hi[0] = b0
                        st_bit[0] = p_bits + s_bits
                        st_d[0] = d0 + j
                    else:
                        if not first:
                            break
                        first = False
                        st_lo[0] = lo
                        st_hi[0] = hi
                        st_bit[0] = p_bits
                        st_d[0] = d0
                    sp = 1
                    while sp > 0:
                        sp -= 1
                        a = st_lo[sp]
                        b = st_hi[sp]
                        bitpos = st_bit[sp]
                        dd = st_d[sp]
                        if big and b - a > QUERY_LEAF and bitpos < 64:
                            sp = _split(tkeys, a, b, bitpos, dd, qkt, kk, stack, sp)
                            continue
                        x0 = np.uint64(0)
                        x1 = np.uint64(0)
                        for i in range(a, b):
                            x = tkeys[i] ^ qkt
                            c = _pc(x)
                            if c > kk:
                                continue
                            row = np.int64(i) if t == 0 else np.int64(rows[t - 1, i])
                            if W == 1:
                                dist = c
                            else:
                                x0 = fps[row, 0] ^ q[qi, 0]
                                x1 = fps[row, 1] ^ q[qi, 1]
                                dist = _pc(x0) + _pc(x1)
                                if dist > kk:
                                    continue
                            if _seen_earlier(t, W, x, x0, x1, pm_key, pm_orig, probe_radius):
                                continue
                            if cnt < cap:
                                out_q[cnt] = qi
                                out_r[cnt] = row
                                out_d[cnt] = dist
                            cnt += 1
    return cnt


@kernel(nogil=True)
def search_brute(q, fps, k, out_q, out_r, out_d):
    """Brute force: every (query, row, distance) with distance <= k, grouped by query.

    Same output protocol as :func:`search_tables` (returns the count; retry when it exceeds
    the outputs' length).
    """
    nq = q.shape[0]
    n = fps.shape[0]
    W = q.shape[1]
    cap = out_q.shape[0]
    cnt = 0
    kk = np.int64(k)
    for qi in range(nq):
        q0 = q[qi, 0]
        q1 = q[qi, W - 1]
        for i in range(n):
            d = _pc(fps[i, 0] ^ q0)
            if W == 2:
                d += _pc(fps[i, 1] ^ q1)
            if d <= kk:
                if cnt < cap:
                    out_q[cnt] = qi
                    out_r[cnt] = i
                    out_d[cnt] = d
                cnt += 1
    return cnt


@kernel(nogil=True)
def directory(keys, dbits):
    """Offsets of each ``dbits``-bit key prefix in sorted ``keys`` -> int64 (2**dbits + 1,)."""
    n = keys.shape[0]
    size = np.int64(1) << np.int64(dbits)
    out = np.zeros(size + 1, dtype=np.int64)
    shift = np.uint64(64 - dbits)
    for i in range(n):
        out[np.int64(keys[i] >> shift) + 1] += 1
    for j in range(size):
        out[j + 1] += out[j]
    return out


@kernel(nogil=True)
def self_join_table(
    t,
    k,
    keys,
    rows,
    fps,
    pb,
    probe_radius,
    pm_key,
    pm_orig,
    big,
    row_lo,
    row_hi,
    stack,
    out_a,
    out_b,
    out_d,
):
    """Pairs (row_a, row_b, distance) within ``k`` that table ``t`` of one segment is the first
    to find (tables of probe radius 0 only): all pairs inside each prefix bucket, or, for a bucket
    larger than ``big``, a pruned descent per element. Only the buckets of rows
    ``[row_lo, row_hi)``, which must start and end on bucket boundaries (so a table's work can
    be split). Same output protocol as :func:`search_tables`."""
    n = row_hi
    W = fps.shape[1]
    tkeys = keys[t]
    p_bits = pb[t]
    shift = np.uint64(64 - p_bits)
    kk = np.int64(k)
    cap = out_a.shape[0]
    cnt = 0
    st_lo = stack[0]
    st_hi = stack[1]
    st_bit = stack[2]
    st_d = stack[3]
    lo = row_lo
    while lo < n:
        pre = tkeys[lo] >> shift if p_bits < 64 else tkeys[lo]
        hi = lo + 1
        while hi < n and (tkeys[hi] >> shift if p_bits < 64 else tkeys[hi]) == pre:
            hi += 1
        size = hi - lo
        if size > 1:
            for i in range(lo, hi - 1):
                ki = tkeys[i]
                if size > big:
                    st_lo[0] = i + 1
                    st_hi[0] = hi
                    st_bit[0] = p_bits
                    st_d[0] = 0
                    sp = 1
                else:
                    sp = 0
                    st_lo[0] = i + 1
                    st_hi[0] = hi
                    sp = -1  # plain scan of (i, hi)
                while sp != 0:
                    if sp == -1:
                        a = i + 1
                        b = hi
                        sp = 0
                    else:
                        sp -= 1
                        a = st_lo[sp]
                        b = st_hi[sp]
                        bitpos = st_bit[sp]
                        dd = st_d[sp]
                        if b - a > LEAF and bitpos < 64:
                            sp = _split(tkeys, a, b, bitpos, dd, ki, kk, stack, sp)
                            continue
                    ri = np.int64(i) if t == 0 else np.int64(rows[t - 1, i])
                    for j in range(a, b):
                        x = tkeys[j] ^ ki
                        c = _pc(x)
                        if c > kk:
                            continue
                        rj = np.int64(j) if t == 0 else np.int64(rows[t - 1, j])
                        x0 = np.uint64(0)
                        x1 = np.uint64(0)
                        if W == 1:
                            dist = c
                        else:
                            x0 = fps[ri, 0] ^ fps[rj, 0]
                            x1 = fps[ri, 1] ^ fps[rj, 1]
                            dist = _pc(x0) + _pc(x1)
                            if dist > kk:
                                continue
                        if _seen_earlier(t, W, x, x0, x1, pm_key, pm_orig, probe_radius):
                            continue
                        if cnt < cap:
                            out_a[cnt] = ri
                            out_b[cnt] = rj
                            out_d[cnt] = dist
                        cnt += 1
        lo = hi
    return cnt


#: runs of equal keys longer than this are ordered by NumPy after a kernel
#: (:func:`neardup._arrays.sort_long_runs`), shorter ones by the kernel's insertion sort
_KERNEL_RUN = 16


@kernel(nogil=True)
def _short_ties_ascending(ks, rows):
    """In place: within every run of at most ``_KERNEL_RUN`` equal keys of sorted ``ks``, sort
    ``rows`` ascending; True when a longer run was left (numba's own sort would compile into
    this kernel for those: about a second of a first run)."""
    n = ks.shape[0]
    long = False
    i = 0
    while i < n - 1:
        if ks[i + 1] != ks[i]:
            i += 1
            continue
        j = i + 2
        while j < n and ks[j] == ks[i]:
            j += 1
        if j - i > _KERNEL_RUN:
            long = True
        else:  # in place, no allocation: a band's groups are mostly two or three rows (the
            # keys carried along are all equal here)
            _insertion_sort_by(rows, ks, i, j)
        i = j
    return long


def rows_of_ties_ascending(ks: np.ndarray, rows: np.ndarray) -> None:
    """In place: within every run of equal keys of sorted ``ks``, sort ``rows`` ascending
    (what a stable sort gives), so an unstable sort's order becomes the canonical one."""
    if _short_ties_ascending(ks, rows):
        sort_long_runs(ks, _KERNEL_RUN, by=rows)


def sort_with_rows(keys):
    """Sort uint64 ``keys`` -> (sorted keys, int64 permutation), stable: the rows of equal keys
    in ascending order (on every machine, whatever order NumPy's sort leaves them in).

    NumPy's ``argsort`` (vectorised, e.g. AVX-512, and without the GIL) and a gather beat a
    counting sort on the top bits in numba (:func:`neardup.index.reference.sort_with_rows_reference`) on permuted
    SimHash fingerprints (the build times of ``benchmarks/bench_index.py`` measure it); the
    rows of ties are then put in order."""
    rows = np.argsort(keys)
    ks = keys[rows]
    rows_of_ties_ascending(ks, rows)
    return ks, rows


@kernel(inline="always")
def _insertion_sort_by(keys, vals, lo, hi):
    """Sort ``keys[lo:hi]`` ascending in place (stable), moving ``vals[lo:hi]`` with them."""
    for x in range(lo + 1, hi):
        kx = keys[x]
        vx = vals[x]
        y = x - 1
        while y >= lo and keys[y] > kx:
            keys[y + 1] = keys[y]
            vals[y + 1] = vals[y]
            y -= 1
        keys[y + 1] = kx
        vals[y + 1] = vx


#: an ``a`` of more partners than this is sorted by NumPy after :func:`_pairs_in_order_kernel`
_KERNEL_PARTNERS = 32


def pairs_in_order(
    ids: np.ndarray, ra: np.ndarray, rb: np.ndarray, d: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs of rows ``(ra, rb)`` of a segment as ``(a, b, d)`` with ``a = min(ids[ra],
    ids[rb])``, ``b`` the max, sorted by ``(a, b)`` (stable: equal pairs in their order);
    ``ids`` are positions ``< n``. A counting sort on ``a`` and an insertion sort of each
    ``a``'s (few) partners: what ``np.argsort(a * n + b)`` and three gathers give, in a
    fraction of the time. An ``a`` of many partners is sorted by NumPy after the kernel."""
    a, b, dd, long = _pairs_in_order_kernel(ids, ra, rb, d, n)
    if long:
        sort_long_runs(a, _KERNEL_PARTNERS, dd, by=b)
    return a, b, dd


@kernel(nogil=True)
def _pairs_in_order_kernel(ids, ra, rb, d, n):
    """:func:`pairs_in_order`'s counting sort, and the insertion sort of each ``a``'s partners
    where they are at most ``_KERNEL_PARTNERS``; the last value says whether an ``a`` of more
    was left for NumPy (numba's own sort would compile into this kernel for those: about a
    second of a first run)."""
    m = ra.shape[0]
    start = np.zeros(n + 1, dtype=np.int64)
    for i in range(m):
        x = ids[ra[i]]
        y = ids[rb[i]]
        start[min(x, y) + 1] += 1
    for j in range(n):
        start[j + 1] += start[j]
    pos = start[:-1].copy()
    out_a = np.empty(m, dtype=np.int64)
    out_b = np.empty(m, dtype=np.int64)
    out_d = np.empty(m, dtype=np.int32)
    for i in range(m):
        x = ids[ra[i]]
        y = ids[rb[i]]
        lo = min(x, y)
        p = pos[lo]
        out_a[p] = lo
        out_b[p] = max(x, y)
        out_d[p] = d[i]
        pos[lo] = p + 1
    long = False
    for j in range(n):
        s = start[j]
        e = start[j + 1]
        if e - s > _KERNEL_PARTNERS:
            long = True
            continue
        _insertion_sort_by(out_b, out_d, s, e)
    return out_a, out_b, out_d, long


@kernel(nogil=True)
def csr_sort(nq, qi, ids, d, max_d):
    """Group matches by query and sort each group by (distance, id): the CSR result.

    Returns ``(lims int64 (nq + 1,), ids int64, distances int32)``. Linear counting passes on
    query and distance; only runs of equal (query, distance) are comparison-sorted by id.
    """
    r = qi.shape[0]
    lims = np.zeros(nq + 1, dtype=np.int64)
    for i in range(r):
        lims[qi[i] + 1] += 1
    for j in range(nq):
        lims[j + 1] += lims[j]
    # place by (query, distance) in one scatter: offsets per (query, distance) cell
    nd = max_d + 1
    cell = np.zeros(nq * nd + 1, dtype=np.int64)
    for i in range(r):
        cell[qi[i] * nd + d[i] + 1] += 1
    for j in range(nq * nd):
        cell[j + 1] += cell[j]
    pos = cell[:-1].copy()
    out_i = np.empty(r, dtype=np.int64)
    out_d = np.empty(r, dtype=np.int32)
    for i in range(r):
        c = qi[i] * nd + d[i]
        p = pos[c]
        out_i[p] = ids[i]
        out_d[p] = d[i]
        pos[c] = p + 1
    for c in range(nq * nd):
        a = cell[c]
        b = cell[c + 1]
        if b - a > 1:
            out_i[a:b].sort()  # in place: a slice assignment compiles its shape error path
    return lims, out_i, out_d


# GIL-holding entry points for tiny calls (a few queries): the same compiled code, called from
# a function that does not release the GIL. In a threaded server a microsecond-long kernel that
# releases the GIL hands it to another thread, which may then keep it for far longer than the
# kernel ran (see neardup.online / neardup serve). Batches keep the nogil versions.


@kernel
def search_tables_gil(
    q, k, keys, rows, fps, dirs, dbits, pidx, pmask, npieces, pb, probe_radius, flips, flipd,
    nflips, pm_key, pm_orig, heavy, hv, sub, qk, stack, out_q, out_r, out_d,
):  # fmt: skip
    """:func:`search_tables` holding the GIL."""
    return search_tables(
        q, k, keys, rows, fps, dirs, dbits, pidx, pmask, npieces, pb, probe_radius, flips, flipd,
        nflips, pm_key, pm_orig, heavy, hv, sub, qk, stack, out_q, out_r, out_d,
    )  # fmt: skip


@kernel
def search_brute_gil(q, fps, k, out_q, out_r, out_d):
    """:func:`search_brute` holding the GIL."""
    return search_brute(q, fps, k, out_q, out_r, out_d)


@kernel
def csr_sort_gil(nq, qi, ids, d, max_d):
    """:func:`csr_sort` holding the GIL."""
    return csr_sort(nq, qi, ids, d, max_d)
