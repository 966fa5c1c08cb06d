"""numba kernels for SimHash: tokenize UTF-8 bytes, hash, weight and accumulate per bit.

They implement exactly the definitions of :mod:`neardup._simhash_reference` (tested bit for bit)
and run without the GIL, so :meth:`neardup.Fingerprinter.fingerprint_many` scales with threads.

Per-bit accumulation uses SWAR byte lanes: ``lanes[j]`` holds eight 8-bit counters for bits
``j, j+8, ..., j+56``; adding ``((h >> j) & 0x0101..01) * w`` updates eight bits at once and the
lanes are flushed into int64 sums before any lane could pass 255 (weights > 255 go straight to
the int64 sums). So a feature costs 8 (64-bit) or 16 (128-bit) multiply-adds instead of 64/128.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .text.tokenize import prepare

U64 = np.uint64
P1 = U64(11400714785074694791)
P2 = U64(14029467366897019727)
P3 = U64(1609587929392839161)
P4 = U64(9650029242287828579)
P5 = U64(2870177450012600261)
M32 = U64(0xFFFFFFFF)
LANE = U64(0x0101010101010101)
FNV_OFF = U64(0xCBF29CE484222325)
FNV_PRIME = U64(0x100000001B3)

#: byte -> 1 if a word character in prepared text ([0-9a-z_] or any non-ASCII byte)
ISWORD = np.zeros(256, np.uint8)
for _c in b"0123456789abcdefghijklmnopqrstuvwxyz_":
    ISWORD[_c] = 1
ISWORD[0x80:] = 1

MODE_WORDS = 0
MODE_CHARS = 1

# state slots (int64 array)
S_NTOK, S_PENDING, S_TOTAL, S_NFEAT, S_SPACE, S_CARRY_LEN, S_CARRY_CPS, S_STARTED = range(8)
N_STATE = 8


@njit(inline="always", cache=True)
def _rotl(x, r):
    return (x << U64(r)) | (x >> U64(64 - r))


@njit(inline="always", cache=True)
def _r64(b, i):
    return (
        U64(b[i])
        | (U64(b[i + 1]) << U64(8))
        | (U64(b[i + 2]) << U64(16))
        | (U64(b[i + 3]) << U64(24))
        | (U64(b[i + 4]) << U64(32))
        | (U64(b[i + 5]) << U64(40))
        | (U64(b[i + 6]) << U64(48))
        | (U64(b[i + 7]) << U64(56))
    )


@njit(inline="always", cache=True)
def _r32(b, i):
    return (
        U64(b[i])
        | (U64(b[i + 1]) << U64(8))
        | (U64(b[i + 2]) << U64(16))
        | (U64(b[i + 3]) << U64(24))
    )


@njit(inline="always", cache=True)
def _xround(acc, x):
    acc = acc + x * P2
    acc = _rotl(acc, 31)
    return acc * P1


@njit(inline="always", cache=True)
def _xmerge(acc, v):
    acc = acc ^ _xround(U64(0), v)
    return acc * P1 + P4


@njit(cache=True)
def xxh64(b, s, e, seed):
    """xxHash64 of b[s:e] (uint8 array) with seed (uint64)."""
    n = e - s
    i = s
    if n >= 32:
        v1 = seed + P1 + P2
        v2 = seed + P2
        v3 = seed
        v4 = seed - P1
        while i + 32 <= e:
            v1 = _xround(v1, _r64(b, i))
            v2 = _xround(v2, _r64(b, i + 8))
            v3 = _xround(v3, _r64(b, i + 16))
            v4 = _xround(v4, _r64(b, i + 24))
            i += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        h = _xmerge(h, v1)
        h = _xmerge(h, v2)
        h = _xmerge(h, v3)
        h = _xmerge(h, v4)
    else:
        h = seed + P5
    h = h + U64(n)
    while i + 8 <= e:
        h = h ^ _xround(U64(0), _r64(b, i))
        h = _rotl(h, 27) * P1 + P4
        i += 8
    if i + 4 <= e:
        h = h ^ (_r32(b, i) * P1)
        h = _rotl(h, 23) * P2 + P3
        i += 4
    while i < e:
        h = h ^ (U64(b[i]) * P5)
        h = _rotl(h, 11) * P1
        i += 1
    h = h ^ (h >> U64(33))
    h = h * P2
    h = h ^ (h >> U64(29))
    h = h * P3
    h = h ^ (h >> U64(32))
    return h


@njit(cache=True)
def fnv1a64(b, s, e, seed):
    h = FNV_OFF ^ seed
    for i in range(s, e):
        h = (h ^ U64(b[i])) * FNV_PRIME
    return h


@njit(cache=True)
def oaat32(b, s, e, seed):
    h = seed & M32
    for i in range(s, e):
        h = (h + U64(b[i])) & M32
        h = (h + (h << U64(10))) & M32
        h = h ^ (h >> U64(6))
    h = (h + (h << U64(3))) & M32
    h = h ^ (h >> U64(11))
    h = (h + (h << U64(15))) & M32
    return h


@njit(inline="always", cache=True)
def _mix(a, b, c):
    a = (a - b - c) & M32
    a = a ^ (c >> U64(13))
    b = (b - c - a) & M32
    b = b ^ ((a << U64(8)) & M32)
    c = (c - a - b) & M32
    c = c ^ (b >> U64(13))
    a = (a - b - c) & M32
    a = a ^ (c >> U64(12))
    b = (b - c - a) & M32
    b = b ^ ((a << U64(16)) & M32)
    c = (c - a - b) & M32
    c = c ^ (b >> U64(5))
    a = (a - b - c) & M32
    a = a ^ (c >> U64(3))
    b = (b - c - a) & M32
    b = b ^ ((a << U64(10)) & M32)
    c = (c - a - b) & M32
    c = c ^ (b >> U64(15))
    return a, b, c


@njit(inline="always", cache=True)
def _rle(b, i, k):
    """Little-endian value of k (0..4) bytes at b[i:]."""
    v = U64(0)
    for j in range(k):
        v = v | (U64(b[i + j]) << U64(8 * j))
    return v


@njit(cache=True)
def lookup2_32(b, s, e, seed):
    a = U64(0x9E3779B9)
    bb = U64(0x9E3779B9)
    c = seed & M32
    n = e - s
    i = s
    while e - i >= 12:
        a = (a + _r32(b, i)) & M32
        bb = (bb + _r32(b, i + 4)) & M32
        c = (c + _r32(b, i + 8)) & M32
        a, bb, c = _mix(a, bb, c)
        i += 12
    c = (c + U64(n)) & M32
    r = e - i
    if r > 8:
        c = (c + (_rle(b, i + 8, r - 8) << U64(8))) & M32
    if r > 4:
        bb = (bb + _rle(b, i + 4, min(r, 8) - 4)) & M32
    if r > 0:
        a = (a + _rle(b, i, min(r, 4))) & M32
    a, bb, c = _mix(a, bb, c)
    return c


@njit(cache=True)
def hash64(b, s, e, hash_id, seed):
    """The 64-bit feature hash of :mod:`neardup.hashing` (hash ids: xxh64 0, fnv1a 1,
    jenkins-oaat 2, jenkins-lookup2 3)."""
    if hash_id == 0:
        return xxh64(b, s, e, seed)
    if hash_id == 1:
        return fnv1a64(b, s, e, seed)
    s2 = (seed * U64(2)) & M32
    s3 = (s2 + U64(1)) & M32
    if hash_id == 2:
        return (oaat32(b, s, e, s2) << U64(32)) | oaat32(b, s, e, s3)
    return (lookup2_32(b, s, e, s2) << U64(32)) | lookup2_32(b, s, e, s3)


@njit(cache=True)
def _flush(lanes, acc, wide):
    nw = 2 if wide else 1
    for k in range(nw):
        for j in range(8):
            c = lanes[8 * k + j]
            for q in range(8):
                acc[64 * k + j + 8 * q] += np.int64((c >> U64(8 * q)) & U64(0xFF))
            lanes[8 * k + j] = U64(0)


@njit(inline="always", cache=True)
def _emit(hi, lo, w, wide, lanes, acc, st):
    st[S_TOTAL] += w
    st[S_NFEAT] += 1
    if w > 255:
        for bit in range(64):
            acc[bit] += w * np.int64((hi >> U64(bit)) & U64(1))
        if wide:
            for bit in range(64):
                acc[64 + bit] += w * np.int64((lo >> U64(bit)) & U64(1))
        return
    if st[S_PENDING] + w > 255:
        _flush(lanes, acc, wide)
        st[S_PENDING] = 0
    st[S_PENDING] += w
    uw = U64(w)
    for j in range(8):
        lanes[j] += ((hi >> U64(j)) & LANE) * uw
    if wide:
        for j in range(8):
            lanes[8 + j] += ((lo >> U64(j)) & LANE) * uw


@njit(cache=True)
def _combine(ring, start, cnt, n, tmp, hash_id, seed):
    """Hash of the LE concatenation of cnt ring entries (oldest first from index start)."""
    for k in range(cnt):
        h = ring[(start + k) % n]
        for q in range(8):
            tmp[8 * k + q] = np.uint8((h >> U64(8 * q)) & U64(0xFF))
    return hash64(tmp, 0, 8 * cnt, hash_id, seed)


@njit(cache=True)
def _push_token(hi, lo, w, n, wide, hash_id, seed, ring_hi, ring_lo, ring_w, tmp, lanes, acc, st):
    if n == 1:
        _emit(hi, lo, w, wide, lanes, acc, st)
        return
    t = st[S_NTOK]
    ring_hi[t % n] = hi
    ring_lo[t % n] = lo
    ring_w[t % n] = w
    t += 1
    st[S_NTOK] = t
    if t >= n:
        start = t % n
        shi = _combine(ring_hi, start, n, n, tmp, hash_id, seed)
        slo = U64(0)
        if wide:
            slo = _combine(ring_lo, start, n, n, tmp, hash_id, seed + U64(1))
        sw = np.int64(0)
        for k in range(n):
            sw += ring_w[k]
        _emit(shi, slo, max(np.int64(1), sw // n), wide, lanes, acc, st)


@njit(cache=True)
def _words_chunk(
    buf,
    s,
    e,
    n,
    hash_id,
    seed,
    wide,
    hs,
    ws,
    default,
    ring_hi,
    ring_lo,
    ring_w,
    tmp,
    lanes,
    acc,
    st,
    isword,
):
    i = s
    nh = hs.shape[0]
    while i < e:
        if isword[buf[i]] == 0:
            i += 1
            continue
        ts = i
        while i < e and isword[buf[i]] != 0:
            i += 1
        hi = hash64(buf, ts, i, hash_id, seed)
        w = default
        if nh > 0:
            j = np.searchsorted(hs, hi)
            if j < nh and hs[j] == hi:
                w = ws[j]
        if w == 0:
            continue
        lo = U64(0)
        if wide:
            lo = hash64(buf, ts, i, hash_id, seed + U64(1))
        _push_token(
            hi, lo, w, n, wide, hash_id, seed, ring_hi, ring_lo, ring_w, tmp, lanes, acc, st
        )


@njit(cache=True)
def _chars_chunk(buf, s, e, n, hash_id, seed, wide, carry, scratch, cps, lanes, acc, st, isword):
    # 1. compact: carry + (word bytes, single spaces between runs; trailing space stays pending)
    m = st[S_CARRY_LEN]
    for k in range(m):
        scratch[k] = carry[k]
    for i in range(s, e):
        c = buf[i]
        if isword[c] != 0:
            if st[S_SPACE] != 0 and st[S_STARTED] != 0:
                scratch[m] = np.uint8(32)
                m += 1
            st[S_SPACE] = 0
            st[S_STARTED] = 1
            scratch[m] = c
            m += 1
        else:
            st[S_SPACE] = 1
    # 2. code point starts
    ncp = 0
    for k in range(m):
        if (scratch[k] & 0xC0) != 0x80:
            cps[ncp] = k
            ncp += 1
    cps[ncp] = m
    st[S_NTOK] += ncp - st[S_CARRY_CPS]
    # 3. n-grams (none fits inside the carry, which has at most n - 1 code points)
    for i in range(0, ncp - n + 1):
        a = cps[i]
        b = cps[i + n]
        hi = hash64(scratch, a, b, hash_id, seed)
        lo = U64(0)
        if wide:
            lo = hash64(scratch, a, b, hash_id, seed + U64(1))
        _emit(hi, lo, np.int64(1), wide, lanes, acc, st)
    # 4. new carry: the last min(n - 1, ncp) code points
    k = min(n - 1, ncp)
    a = cps[ncp - k]
    st[S_CARRY_LEN] = m - a
    st[S_CARRY_CPS] = k
    for q in range(m - a):
        carry[q] = scratch[a + q]


@njit(cache=True)
def _finish(
    mode, n, hash_id, seed, wide, ring_hi, ring_lo, ring_w, carry, tmp, lanes, acc, st, out
):
    """Apply the short-document rule, flush lanes and write the fingerprint words to out."""
    t = st[S_NTOK]
    if mode == MODE_WORDS and n > 1 and 0 < t < n:
        shi = _combine(ring_hi, 0, t, n, tmp, hash_id, seed)
        slo = U64(0)
        if wide:
            slo = _combine(ring_lo, 0, t, n, tmp, hash_id, seed + U64(1))
        sw = np.int64(0)
        for k in range(t):
            sw += ring_w[k]
        _emit(shi, slo, max(np.int64(1), sw // t), wide, lanes, acc, st)
    elif mode == MODE_CHARS and 0 < t < n:
        m = st[S_CARRY_LEN]
        hi = hash64(carry, 0, m, hash_id, seed)
        lo = U64(0)
        if wide:
            lo = hash64(carry, 0, m, hash_id, seed + U64(1))
        _emit(hi, lo, np.int64(1), wide, lanes, acc, st)
    _flush(lanes, acc, wide)
    total = st[S_TOTAL]
    nw = 2 if wide else 1
    for k in range(nw):
        word = U64(0)
        for bit in range(64):
            if 2 * acc[64 * k + bit] > total:
                word |= U64(1) << U64(bit)
        out[k] = word


@njit(cache=True)
def _new_state(n, wide):
    st = np.zeros(N_STATE, np.int64)
    acc = np.zeros(128, np.int64)
    lanes = np.zeros(16, np.uint64)
    ring_hi = np.zeros(max(n, 1), np.uint64)
    ring_lo = np.zeros(max(n, 1), np.uint64)
    ring_w = np.zeros(max(n, 1), np.int64)
    carry = np.zeros(4 * n + 8, np.uint8)
    return st, acc, lanes, ring_hi, ring_lo, ring_w, carry


@njit(cache=True)
def _reset(st, acc, lanes):
    st[:] = 0
    acc[:] = 0
    lanes[:] = 0


@njit(nogil=True, cache=True)
def simhash_docs(buf, offsets, mode, n, hash_id, seed, wide, hs, ws, default, isword, out, nfeat):
    """Fingerprint documents buf[offsets[i]:offsets[i+1]] into out (m, 1|2) and nfeat (m,)."""
    m = offsets.shape[0] - 1
    st, acc, lanes, ring_hi, ring_lo, ring_w, carry = _new_state(n, wide)
    tmp = np.zeros(8 * n + 8, np.uint8)
    maxlen = 0
    for d in range(m):
        maxlen = max(maxlen, offsets[d + 1] - offsets[d])
    if mode == MODE_CHARS:
        scratch = np.zeros(2 * maxlen + 4 * n + 8, np.uint8)
        cps = np.zeros(2 * maxlen + 4 * n + 9, np.int64)
    else:
        scratch = np.zeros(1, np.uint8)
        cps = np.zeros(1, np.int64)
    for d in range(m):
        _reset(st, acc, lanes)
        s = offsets[d]
        e = offsets[d + 1]
        if mode == MODE_WORDS:
            _words_chunk(
                buf,
                s,
                e,
                n,
                hash_id,
                seed,
                wide,
                hs,
                ws,
                default,
                ring_hi,
                ring_lo,
                ring_w,
                tmp,
                lanes,
                acc,
                st,
                isword,
            )
        else:
            _chars_chunk(
                buf, s, e, n, hash_id, seed, wide, carry, scratch, cps, lanes, acc, st, isword
            )
        _finish(
            mode,
            n,
            hash_id,
            seed,
            wide,
            ring_hi,
            ring_lo,
            ring_w,
            carry,
            tmp,
            lanes,
            acc,
            st,
            out[d],
        )
        nfeat[d] = st[S_NFEAT]


@njit(nogil=True, cache=True)
def simhash_chunk(buf, mode, n, hash_id, seed, wide, hs, ws, default, isword, state, finish, out):
    """Streaming: feed one chunk of a long document; ``state`` is the tuple from
    :func:`_new_state` (kept by the caller between chunks); ``finish`` writes ``out``."""
    st, acc, lanes, ring_hi, ring_lo, ring_w, carry = state
    tmp = np.zeros(8 * n + 8, np.uint8)
    e = buf.shape[0]
    if mode == MODE_WORDS:
        _words_chunk(
            buf,
            0,
            e,
            n,
            hash_id,
            seed,
            wide,
            hs,
            ws,
            default,
            ring_hi,
            ring_lo,
            ring_w,
            tmp,
            lanes,
            acc,
            st,
            isword,
        )
    else:
        scratch = np.zeros(2 * e + 4 * n + 8, np.uint8)
        cps = np.zeros(2 * e + 4 * n + 9, np.int64)
        _chars_chunk(buf, 0, e, n, hash_id, seed, wide, carry, scratch, cps, lanes, acc, st, isword)
    if finish:
        _finish(
            mode, n, hash_id, seed, wide, ring_hi, ring_lo, ring_w, carry, tmp, lanes, acc, st, out
        )
    return st[S_NFEAT]


# ---------------------------------------------------------------------------- Python driver
_BATCH_BYTES = 1 << 23
_SPLIT_CHARS = " \n\t\r\f\v\u3000。，！？；、.,;!?"


def split_long(text: str, chunk: int) -> list[tuple[int, int]]:
    """Chunk boundaries of a long text, each cut *before* a whitespace/punctuation character
    found in the last half of the window (a forced cut when there is none)."""
    out = []
    a = 0
    n = len(text)
    while n - a > chunk:
        lim = a + chunk
        lo = a + chunk // 2
        k = max(text.rfind(c, lo, lim) for c in _SPLIT_CHARS)
        if k <= a:
            k = lim
        out.append((a, k))
        a = k
    out.append((a, n))
    return out


def _encode_prepared(t: str, pmode: str) -> bytes:
    if t.isascii():
        return t.lower().encode()
    return prepare(t, pmode).encode()  # type: ignore[arg-type]


def run_group(
    texts, idx, pmode, kmode, n, hash_id, seed, bits, hs, ws, default, fps, nfeat, chunk_chars
):  # type: ignore[no-untyped-def]
    """Fingerprint texts[i] for i in idx into fps[i] / nfeat[i] (rows are disjoint per caller)."""
    mode = MODE_CHARS if kmode == "chars" else MODE_WORDS
    wide = bits == 128
    useed = np.uint64(seed)
    nw = 2 if wide else 1
    parts: list[bytes] = []
    rows: list[int] = []
    size = 0

    def flush() -> None:
        if not rows:
            return
        lens = np.fromiter((len(p) for p in parts), np.int64, len(parts))
        offsets = np.zeros(len(parts) + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        buf = np.frombuffer(b"".join(parts), np.uint8)
        out = np.zeros((len(rows), nw), np.uint64)
        nf = np.zeros(len(rows), np.int64)
        simhash_docs(buf, offsets, mode, n, hash_id, useed, wide, hs, ws, default, ISWORD, out, nf)
        r = np.asarray(rows, np.int64)
        fps[r] = out
        nfeat[r] = nf
        parts.clear()
        rows.clear()

    for i in idx:
        t = texts[i]
        if len(t) > chunk_chars:
            _run_long(
                t, i, pmode, mode, n, hash_id, useed, wide, hs, ws, default, fps, nfeat, chunk_chars
            )
            continue
        p = _encode_prepared(t, pmode)
        parts.append(p)
        rows.append(i)
        size += len(p)
        if size >= _BATCH_BYTES:
            flush()
            size = 0
    flush()


def _run_long(t, i, pmode, mode, n, hash_id, useed, wide, hs, ws, default, fps, nfeat, chunk):  # type: ignore[no-untyped-def]
    state = _new_state(n, wide)
    out = np.zeros(2 if wide else 1, np.uint64)
    bounds = split_long(t, chunk)
    nf = 0
    for k, (a, b) in enumerate(bounds):
        buf = np.frombuffer(_encode_prepared(t[a:b], pmode), np.uint8)
        nf = simhash_chunk(
            buf,
            mode,
            n,
            hash_id,
            useed,
            wide,
            hs,
            ws,
            default,
            ISWORD,
            state,
            k == len(bounds) - 1,
            out,
        )
    fps[i] = out
    nfeat[i] = nf
