"""numba kernels for SimHash: tokenize UTF-8 bytes, hash, weight and accumulate per bit.

They implement exactly the definitions of :mod:`neardup._simhash_reference` (tested bit for bit)
and run without the GIL, so :meth:`neardup.Fingerprinter.fingerprint_many` scales with threads.

Features of a document are buffered (hash words + weight), then added to the per-bit sums with
SWAR byte lanes held in registers: lane ``j`` holds eight 8-bit counters for bits
``j, j+8, ..., j+56``; adding ``((h >> j) & 0x0101..01) * w`` updates eight bits at once and the
lanes are spilled into int64 sums before any lane could pass 255 (weights > 255 go straight to
the int64 sums). So a feature costs 8 (64-bit) or 16 (128-bit) multiply-adds instead of 64/128.
"""

from __future__ import annotations

import numpy as np

from .._jit import kernel
from .._search import lower_bound
from ..text.tokenize import prepare_utf8, prepare_utf8_many
from ._hashes import (
    P1,
    P4,
    P5,
    _rotl,
    _xround,
    hash64,
    hash64_cold,
    xavalanche,
    xconverge,
    xlanes,
)

U64 = np.uint64
LANE = U64(0x0101010101010101)

#: byte -> 1 if a word character in prepared text ([0-9a-z_] or any non-ASCII byte)
ISWORD = np.zeros(256, np.uint8)
for _c in b"0123456789abcdefghijklmnopqrstuvwxyz_":
    ISWORD[_c] = 1
ISWORD[0x80:] = 1

MODE_WORDS = 0
MODE_CHARS = 1

# state slots (int64 array)
S_NTOK, S_NBUF, S_UNIT, S_SPACE, S_CARRY_LEN, S_CARRY_CPS, S_STARTED = range(7)
N_STATE = 7
# extra slots of the per-bit sums array (int64[130])
ACC_TOTAL = 128
ACC_NFEAT = 129
#: features buffered per document before they are added to the per-bit sums
FEATURE_BUF = 4096

# Small helpers are ordinary kernels: LLVM inlines them into their callers anyway,
# whereas numba's inline="always" types their bodies again at every call site (a large share
# of this module's first-run compile, for no measured speed). xxh64 and hash64 stay
# inlined into the hot loops.


@kernel
def _spill(acc, base, l0, l1, l2, l3, l4, l5, l6, l7):
    for q in range(8):
        sh = U64(8 * q)
        o = base + 8 * q
        acc[o] += np.int64((l0 >> sh) & U64(255))
        acc[o + 1] += np.int64((l1 >> sh) & U64(255))
        acc[o + 2] += np.int64((l2 >> sh) & U64(255))
        acc[o + 3] += np.int64((l3 >> sh) & U64(255))
        acc[o + 4] += np.int64((l4 >> sh) & U64(255))
        acc[o + 5] += np.int64((l5 >> sh) & U64(255))
        acc[o + 6] += np.int64((l6 >> sh) & U64(255))
        acc[o + 7] += np.int64((l7 >> sh) & U64(255))


@kernel
def _accumulate_unit(hs, k, acc, base):
    """acc[base + b] += number of hs[:k] with bit b set (weights all 1): blocks of 255."""
    z = U64(0)
    f = 0
    while f < k:
        end = min(k, f + 255)
        l0, l1, l2, l3, l4, l5, l6, l7 = z, z, z, z, z, z, z, z
        for g in range(f, end):
            h = hs[g]
            l0 += h & LANE
            l1 += (h >> U64(1)) & LANE
            l2 += (h >> U64(2)) & LANE
            l3 += (h >> U64(3)) & LANE
            l4 += (h >> U64(4)) & LANE
            l5 += (h >> U64(5)) & LANE
            l6 += (h >> U64(6)) & LANE
            l7 += (h >> U64(7)) & LANE
        _spill(acc, base, l0, l1, l2, l3, l4, l5, l6, l7)
        f = end


@kernel
def _accumulate(hs, ws, k, acc, base):
    """acc[base + b] += sum of ws[f] over f < k whose hs[f] has bit b set (SWAR lanes in
    registers, spilled before any 8-bit lane can overflow; weights > 255 added directly)."""
    z = U64(0)
    l0, l1, l2, l3, l4, l5, l6, l7 = z, z, z, z, z, z, z, z
    pend = np.int64(0)
    for f in range(k):
        w = ws[f]
        h = hs[f]
        if w > 255:
            for bit in range(64):
                acc[base + bit] += w * np.int64((h >> U64(bit)) & U64(1))
            continue
        if pend + w > 255:
            _spill(acc, base, l0, l1, l2, l3, l4, l5, l6, l7)
            l0, l1, l2, l3, l4, l5, l6, l7 = z, z, z, z, z, z, z, z
            pend = np.int64(0)
        uw = U64(w)
        l0 += (h & LANE) * uw
        l1 += ((h >> U64(1)) & LANE) * uw
        l2 += ((h >> U64(2)) & LANE) * uw
        l3 += ((h >> U64(3)) & LANE) * uw
        l4 += ((h >> U64(4)) & LANE) * uw
        l5 += ((h >> U64(5)) & LANE) * uw
        l6 += ((h >> U64(6)) & LANE) * uw
        l7 += ((h >> U64(7)) & LANE) * uw
        pend += w
    _spill(acc, base, l0, l1, l2, l3, l4, l5, l6, l7)


@kernel
def _drain(fb_hi, fb_lo, fb_w, k, unit, wide, acc):
    """Add k buffered features to the per-bit sums; acc[128] = total weight, acc[129] = count."""
    if k == 0:
        return
    if unit != 0:
        acc[ACC_TOTAL] += k
        _accumulate_unit(fb_hi, k, acc, np.int64(0))
        if wide:
            _accumulate_unit(fb_lo, k, acc, np.int64(64))
    else:
        tw = np.int64(0)
        for f in range(k):
            tw += fb_w[f]
        acc[ACC_TOTAL] += tw
        _accumulate(fb_hi, fb_w, k, acc, np.int64(0))
        if wide:
            _accumulate(fb_lo, fb_w, k, acc, np.int64(64))
    acc[ACC_NFEAT] += k


@kernel
def _put(hi, lo, w, fb_hi, fb_lo, fb_w, wide, acc, st):
    """Buffer one feature (slow path: used outside the hot loops)."""
    k = st[S_NBUF]
    fb_hi[k] = hi
    fb_lo[k] = lo
    fb_w[k] = w
    if w != 1:
        st[S_UNIT] = 0
    k += 1
    if k == fb_hi.shape[0]:
        _drain(fb_hi, fb_lo, fb_w, k, st[S_UNIT], wide, acc)
        k = 0
        st[S_UNIT] = 1
    st[S_NBUF] = k


@kernel
def _wrap(i, n):
    """i mod n for 0 <= i < 2n (no division)."""
    return i - n if i >= n else i


@kernel
def _xxh64_words(ring, start, cnt, n, seed):
    """xxh64 of the little-endian bytes of cnt uint64 ring entries (no byte shuffling)."""
    nbytes = 8 * cnt
    k = 0
    if nbytes >= 32:
        v1, v2, v3, v4 = xlanes(seed)
        while k + 4 <= cnt:
            v1 = _xround(v1, ring[_wrap(start + k, n)])
            v2 = _xround(v2, ring[_wrap(start + k + 1, n)])
            v3 = _xround(v3, ring[_wrap(start + k + 2, n)])
            v4 = _xround(v4, ring[_wrap(start + k + 3, n)])
            k += 4
        h = xconverge(v1, v2, v3, v4)
    else:
        h = seed + P5
    h = h + U64(nbytes)
    while k < cnt:
        h = h ^ _xround(U64(0), ring[_wrap(start + k, n)])
        h = _rotl(h, 27) * P1 + P4
        k += 1
    return xavalanche(h)


@kernel
def _combine(ring, start, cnt, n, tmp, hash_id, seed):
    """Hash of the LE concatenation of cnt ring entries (oldest first from index start)."""
    if hash_id == 0:
        return _xxh64_words(ring, start, cnt, n, seed)
    for k in range(cnt):
        h = ring[_wrap(start + k, n)]
        for q in range(8):
            tmp[8 * k + q] = np.uint8((h >> U64(8 * q)) & U64(0xFF))
    return hash64_cold(tmp, np.int64(0), 8 * cnt, hash_id, seed)


@kernel
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
    fb_hi,
    fb_lo,
    fb_w,
    acc,
    st,
    isword,
):
    k = st[S_NBUF]
    unit = st[S_UNIT]
    t = st[S_NTOK]
    cap = fb_hi.shape[0]
    nh = hs.shape[0]
    seed1 = seed + U64(1)
    r = t % n
    i = s
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
            j = lower_bound(hs, 0, nh, hi)  # np.searchsorted's generic code compiles longer
            if j < nh and hs[j] == hi:
                w = ws[j]
            if w == 0:
                continue
        lo = U64(0)
        if wide:
            lo = hash64_cold(buf, ts, i, hash_id, seed1)
        if n == 1:
            fb_hi[k] = hi
            fb_lo[k] = lo
            fb_w[k] = w
            if w != 1:
                unit = 0
        else:
            ring_hi[r] = hi
            ring_lo[r] = lo
            ring_w[r] = w
            t += 1
            r += 1
            if r == n:
                r = 0
            if t < n:
                continue
            start = r
            fb_hi[k] = _combine(ring_hi, start, n, n, tmp, hash_id, seed)
            if wide:
                fb_lo[k] = _combine(ring_lo, start, n, n, tmp, hash_id, seed1)
            else:
                fb_lo[k] = U64(0)
            sw = np.int64(0)
            for q in range(n):
                sw += ring_w[q]
            ww = max(np.int64(1), sw // n)
            fb_w[k] = ww
            if ww != 1:
                unit = 0
        k += 1
        if k == cap:
            _drain(fb_hi, fb_lo, fb_w, k, unit, wide, acc)
            k = 0
            unit = 1
    st[S_NBUF] = k
    st[S_UNIT] = unit
    st[S_NTOK] = t


@kernel
def _chars_chunk(
    buf, s, e, n, hash_id, seed, wide, carry, scratch, cps, fb_hi, fb_lo, fb_w, acc, st, isword
):
    # 1. compact: carry + (word bytes, single spaces between runs; trailing space stays pending)
    m = st[S_CARRY_LEN]
    for q in range(m):
        scratch[q] = carry[q]
    space = st[S_SPACE]
    started = st[S_STARTED]
    for i in range(s, e):
        c = buf[i]
        if isword[c] != 0:
            if space != 0 and started != 0:
                scratch[m] = np.uint8(32)
                m += 1
            space = 0
            started = 1
            scratch[m] = c
            m += 1
        else:
            space = 1
    st[S_SPACE] = space
    st[S_STARTED] = started
    # 2. code point starts
    ncp = 0
    for q in range(m):
        if (scratch[q] & 0xC0) != 0x80:
            cps[ncp] = q
            ncp += 1
    cps[ncp] = m
    st[S_NTOK] += ncp - st[S_CARRY_CPS]
    # 3. n-grams (none fits inside the carry, which has at most n - 1 code points)
    k = st[S_NBUF]
    cap = fb_hi.shape[0]
    seed1 = seed + U64(1)
    for i in range(0, ncp - n + 1):
        a = cps[i]
        b = cps[i + n]
        fb_hi[k] = hash64(scratch, a, b, hash_id, seed)
        if wide:
            fb_lo[k] = hash64_cold(scratch, a, b, hash_id, seed1)
        else:
            fb_lo[k] = U64(0)
        fb_w[k] = 1
        k += 1
        if k == cap:
            _drain(fb_hi, fb_lo, fb_w, k, st[S_UNIT], wide, acc)
            k = 0
    st[S_NBUF] = k
    # 4. new carry: the last min(n - 1, ncp) code points
    q = min(n - 1, ncp)
    a = cps[ncp - q]
    st[S_CARRY_LEN] = m - a
    st[S_CARRY_CPS] = q
    for j in range(m - a):
        carry[j] = scratch[a + j]


@kernel
def _finish(
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
    fb_hi,
    fb_lo,
    fb_w,
    acc,
    st,
    out,
):
    """Apply the short-document rule, drain the buffer and write the fingerprint words."""
    t = st[S_NTOK]
    if mode == MODE_WORDS and n > 1 and 0 < t < n:
        shi = _combine(ring_hi, np.int64(0), t, n, tmp, hash_id, seed)
        slo = U64(0)
        if wide:
            slo = _combine(ring_lo, np.int64(0), t, n, tmp, hash_id, seed + U64(1))
        sw = np.int64(0)
        for q in range(t):
            sw += ring_w[q]
        _put(shi, slo, max(np.int64(1), sw // t), fb_hi, fb_lo, fb_w, wide, acc, st)
    elif mode == MODE_CHARS and 0 < t < n:
        m = st[S_CARRY_LEN]
        hi = hash64_cold(carry, np.int64(0), m, hash_id, seed)
        lo = U64(0)
        if wide:
            lo = hash64_cold(carry, np.int64(0), m, hash_id, seed + U64(1))
        _put(hi, lo, np.int64(1), fb_hi, fb_lo, fb_w, wide, acc, st)
    _drain(fb_hi, fb_lo, fb_w, st[S_NBUF], st[S_UNIT], wide, acc)
    st[S_NBUF] = 0
    total = acc[ACC_TOTAL]
    nw = 2 if wide else 1
    for w in range(nw):
        word = U64(0)
        for bit in range(64):
            if 2 * acc[64 * w + bit] > total:
                word |= U64(1) << U64(bit)
        out[w] = word
    return acc[ACC_NFEAT]


@kernel
def _new_state(n, wide):
    st = np.zeros(N_STATE, np.int64)
    st[S_UNIT] = 1
    acc = np.zeros(130, np.int64)
    fb_hi = np.zeros(FEATURE_BUF, np.uint64)
    fb_lo = np.zeros(FEATURE_BUF, np.uint64)
    fb_w = np.zeros(FEATURE_BUF, np.int64)
    ring_hi = np.zeros(max(n, 1), np.uint64)
    ring_lo = np.zeros(max(n, 1), np.uint64)
    ring_w = np.zeros(max(n, 1), np.int64)
    carry = np.zeros(4 * n + 8, np.uint8)
    return st, acc, fb_hi, fb_lo, fb_w, ring_hi, ring_lo, ring_w, carry


@kernel
def han_counts(buf, s, e, isword):
    """(Han ideographs, word code points) in prepared UTF-8 bytes buf[s:e]: word code points
    are ASCII ``[0-9a-z_]`` and every non-ASCII code point; Han = U+3400-4DBF, U+4E00-9FFF,
    U+F900-FAFF, U+20000-2FFFF."""
    n_han = 0
    n_word = 0
    i = s
    while i < e:
        c = buf[i]
        if c < 0x80:
            if isword[c] != 0:
                n_word += 1
            i += 1
            continue
        if c >= 0xF0 and i + 3 < e:
            cp = (
                ((c & 0x07) << 18)
                | ((buf[i + 1] & 0x3F) << 12)
                | ((buf[i + 2] & 0x3F) << 6)
                | (buf[i + 3] & 0x3F)
            )
            i += 4
        elif c >= 0xE0 and i + 2 < e:
            cp = ((c & 0x0F) << 12) | ((buf[i + 1] & 0x3F) << 6) | (buf[i + 2] & 0x3F)
            i += 3
        else:
            cp = 0
            i += 2 if c >= 0xC0 else 1
        n_word += 1
        if (
            (0x3400 <= cp <= 0x4DBF)
            or (0x4E00 <= cp <= 0x9FFF)
            or (0xF900 <= cp <= 0xFAFF)
            or (0x20000 <= cp <= 0x2FFFF)
        ):
            n_han += 1
    return n_han, n_word


@kernel
def _is_zh(n_han, n_word, th):
    return n_word > 0 and n_han / n_word >= th


@kernel(nogil=True)
def simhash_docs(
    buf,
    starts,
    ends,
    mode,
    n,
    mode2,
    n2,
    th,
    hash_id,
    seed,
    wide,
    hs,
    ws,
    default,
    isword,
    out,
    nfeat,
):
    """Fingerprint documents buf[starts[i]:ends[i]] into out (m, 1|2) and nfeat (m,).

    Documents whose Han share (:func:`han_counts`) is >= th use (mode2, n2), others (mode, n);
    th > 1 disables the switch."""
    m = starts.shape[0]
    nmax = max(n, n2)
    st, acc, fb_hi, fb_lo, fb_w, ring_hi, ring_lo, ring_w, carry = _new_state(nmax, wide)
    tmp = np.zeros(8 * nmax + 8, np.uint8)
    maxlen = 0
    for d in range(m):
        maxlen = max(maxlen, ends[d] - starts[d])
    if mode == MODE_CHARS or (mode2 == MODE_CHARS and th <= 1.0):
        scratch = np.zeros(2 * maxlen + 4 * nmax + 8, np.uint8)
        cps = np.zeros(2 * maxlen + 4 * nmax + 9, np.int64)
    else:
        scratch = np.zeros(1, np.uint8)
        cps = np.zeros(1, np.int64)
    for d in range(m):
        st[:] = 0
        st[S_UNIT] = 1
        acc[:] = 0
        s = starts[d]
        e = ends[d]
        md = mode
        nn = n
        if th <= 1.0:
            n_han, n_word = han_counts(buf, s, e, isword)
            if _is_zh(n_han, n_word, th):
                md = mode2
                nn = n2
        if md == MODE_WORDS:
            _words_chunk(
                buf,
                s,
                e,
                nn,
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
                fb_hi,
                fb_lo,
                fb_w,
                acc,
                st,
                isword,
            )
        else:
            _chars_chunk(
                buf,
                s,
                e,
                nn,
                hash_id,
                seed,
                wide,
                carry,
                scratch,
                cps,
                fb_hi,
                fb_lo,
                fb_w,
                acc,
                st,
                isword,
            )
        nfeat[d] = _finish(
            md,
            nn,
            hash_id,
            seed,
            wide,
            ring_hi,
            ring_lo,
            ring_w,
            carry,
            tmp,
            fb_hi,
            fb_lo,
            fb_w,
            acc,
            st,
            out[d],
        )


@kernel(nogil=True)
def simhash_chunk(buf, mode, n, hash_id, seed, wide, hs, ws, default, isword, state, finish, out):
    """Streaming: feed one chunk of a long document; ``state`` is the tuple from
    :func:`_new_state` (kept by the caller between chunks); ``finish`` writes ``out``."""
    st, acc, fb_hi, fb_lo, fb_w, ring_hi, ring_lo, ring_w, carry = state
    tmp = np.zeros(8 * n + 8, np.uint8)
    e = buf.shape[0]
    if mode == MODE_WORDS:
        _words_chunk(
            buf,
            np.int64(0),
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
            fb_hi,
            fb_lo,
            fb_w,
            acc,
            st,
            isword,
        )
    else:
        scratch = np.zeros(2 * e + 4 * n + 8, np.uint8)
        cps = np.zeros(2 * e + 4 * n + 9, np.int64)
        _chars_chunk(
            buf,
            np.int64(0),
            e,
            n,
            hash_id,
            seed,
            wide,
            carry,
            scratch,
            cps,
            fb_hi,
            fb_lo,
            fb_w,
            acc,
            st,
            isword,
        )
    if finish:
        return _finish(
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
            fb_hi,
            fb_lo,
            fb_w,
            acc,
            st,
            out,
        )
    return acc[ACC_NFEAT]


# ---------------------------------------------------------------------------- Python driver
_BATCH_BYTES = 1 << 23
#: texts of a group prepared at once (:func:`~neardup.text.tokenize.prepare_utf8_many`)
_PREPARE_TEXTS = 8192
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
    return prepare_utf8(t, pmode)  # type: ignore[arg-type]


def run_group(
    texts, idx, pmode, plan, hash_id, seed, bits, hs, ws, default, fps, nfeat, chunk_chars
):
    """Fingerprint texts[i] for i in idx into fps[i] / nfeat[i] (rows are disjoint per caller).

    ``plan`` = (mode, n, mode2, n2, th): see :func:`simhash_docs`."""
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
        ends = np.cumsum(lens)
        buf = np.frombuffer(b"".join(parts), np.uint8)
        out = np.zeros((len(rows), nw), np.uint64)
        nf = np.zeros(len(rows), np.int64)
        _docs_kernel(len(buf))(
            buf, ends - lens, ends, *plan, hash_id, useed, wide, hs, ws, default, ISWORD, out, nf
        )
        r = np.asarray(rows, np.int64)
        fps[r] = out
        nfeat[r] = nf
        parts.clear()
        rows.clear()

    for lo in range(0, len(idx), _PREPARE_TEXTS):
        part = idx[lo : lo + _PREPARE_TEXTS]
        # each text read once (a corpus's texts may be spans of its file, decoded on access)
        got = [texts[i] for i in part]
        # the short texts prepared together (non-ASCII ones as one array, or one rjieba call)
        short = [k for k, t in enumerate(got) if len(t) <= chunk_chars]
        made = prepare_utf8_many([got[k] for k in short], pmode)
        pre = {part[k]: b for k, b in zip(short, made, strict=True)}
        for i, t in zip(part, got, strict=True):
            if len(t) > chunk_chars:
                _run_long(
                    t, i, pmode, plan, hash_id, useed, wide, hs, ws, default, fps, nfeat,
                    chunk_chars,
                )  # fmt: skip
                continue
            p = pre[i]
            parts.append(p)
            rows.append(i)
            size += len(p)
            if size >= _BATCH_BYTES:
                flush()
                size = 0
    flush()


@kernel
def _simhash_docs_gil(
    buf,
    starts,
    ends,
    mode,
    n,
    mode2,
    n2,
    th,
    hash_id,
    seed,
    wide,
    hs,
    ws,
    default,
    isword,
    out,
    nfeat,
):
    """:func:`simhash_docs` without releasing the GIL (the same compiled code, called from
    here): for a few short texts the kernel takes microseconds, and in a threaded server
    releasing the GIL for that long hands it to another thread that may keep it for far
    longer (measured in ``neardup serve``: the event loop then waited on the writer)."""
    simhash_docs(
        buf, starts, ends, mode, n, mode2, n2, th, hash_id, seed, wide, hs, ws, default, isword, out,
        nfeat,
    )  # fmt: skip


#: blocks smaller than this (bytes) are fingerprinted holding the GIL (:func:`_simhash_docs_gil`)
GIL_BYTES = 16_384


def _docs_kernel(nbytes: int):
    return _simhash_docs_gil if nbytes < GIL_BYTES else simhash_docs


def run_ascii(joined, lens, plan, hash_id, seed, bits, hs, ws, default, fps, nfeat):
    """Fast path for a block of ASCII texts joined with one separator character: one
    ``lower()``, one ``encode()`` and one kernel call for the whole block; writes fps / nfeat
    (row views of the block). ASCII text has no Han, so only (mode, n) of ``plan`` is used."""
    buf = np.frombuffer(joined.lower().encode("ascii"), np.uint8)
    ends = np.cumsum(lens + 1) - 1
    starts = ends - lens
    mode, n = plan[0], plan[1]
    _docs_kernel(len(buf))(
        buf,
        starts,
        ends,
        mode,
        n,
        mode,
        n,
        2.0,
        hash_id,
        np.uint64(seed),
        bits == 128,
        hs,
        ws,
        default,
        ISWORD,
        fps,
        nfeat,
    )


def _run_long(t, i, pmode, plan, hash_id, useed, wide, hs, ws, default, fps, nfeat, chunk):
    mode, n, mode2, n2, th = plan
    bounds = split_long(t, chunk)
    if th <= 1.0:  # first pass: Han share of the whole prepared text
        n_han = n_word = 0
        for a, b in bounds:
            buf = np.frombuffer(_encode_prepared(t[a:b], pmode), np.uint8)
            h, w = han_counts(buf, 0, len(buf), ISWORD)
            n_han += h
            n_word += w
        if n_word > 0 and n_han / n_word >= th:
            mode, n = mode2, n2
    state = _new_state(n, wide)
    out = np.zeros(2 if wide else 1, np.uint64)
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
