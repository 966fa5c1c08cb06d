"""The paper's block code for sorted tables (Manku, Jain & Das Sarma, WWW 2007, section 3.1.1):
the ``codec="blocks"`` option of compressed segments (:mod:`neardup.index.compressed`).

A sorted table of 64-bit keys is cut into blocks of ``B`` bytes. The first key of every block
stays in memory uncompressed (the block's key: a probe binary-searches these, under the same
prefix directory as the uncompressed tables). Every further key of the block is stored as

* the canonical Huffman code of ``h``: the 1-based position of the most significant bit where
  the key differs from its predecessor (``h = 64 - clz(key ^ prev)``), or of the symbol 0,
  reserved for "equal to its predecessor" (duplicate fingerprints, where ``h`` is undefined);
* the ``h - 1`` bits below that bit (the bit itself is 1: the table is sorted ascending).

The code is built per table from that table's histogram of ``h``, limited to
:data:`MAX_CODE_LEN` bits so one table look-up decodes a symbol, and stored with the table
(65 code lengths). Keys are packed greedily: a block holds as many entries as fit in its
``B`` bytes. Per block the table keeps its first key (u64), the position of that key (u32) and
a CRC-32 of (key, position, payload) so a flipped bit is caught and named by table and block.

Each key is decoded from its predecessor: a probe decodes, serially, from its block's first key
to its bucket's end. That chain is why the default codec is the Elias–Fano code
(:mod:`neardup.index.codec_ef`), whose keys decode independently; this one is kept as the
paper's scheme (docs/index.md, "Compressed tables", has both measured).

The decoder is numba (``decode_block``); :func:`decode_table_py` is its pure-Python twin, tested
equal under Hypothesis, and :func:`encode_table` the encoder (NumPy for the per-key work, numba
for the sequential bit packing).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .._jit import kernel
from ..errors import ConfigError, CorruptFileError
from . import _kernels as K

__all__ = [
    "DEFAULT_BLOCK_BYTES",
    "MAX_CODE_LEN",
    "BlockTables",
    "EncodedTable",
    "check_block_bytes",
    "decode_table",
    "encode_table",
    "huffman_lengths",
    "search_blocks",
    "verify_table",
]

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]

NSYM = 65  # 0: equal to the predecessor; 1..64: h
MAX_CODE_LEN = 12  # decode-table size 2**12; 65 symbols always fit (Kraft)
#: block size in bytes; chosen from the curve in docs/index.md ("Block compression")
DEFAULT_BLOCK_BYTES = 256


# ---------------------------------------------------------------------------- Huffman code
def huffman_lengths(counts: Any, max_len: int = MAX_CODE_LEN) -> npt.NDArray[np.uint8]:
    """Code lengths (uint8, 0 for unused symbols) of a Huffman code for ``counts``, limited
    to ``max_len`` bits (the JPEG Annex K.3 adjustment). One used symbol gets length 1."""
    c = [int(x) for x in counts]
    used = [s for s, x in enumerate(c) if x > 0]
    lens = np.zeros(len(c), dtype=np.uint8)
    if not used:
        return lens
    if len(used) == 1:
        lens[used[0]] = 1
        return lens
    heap: list[tuple[int, int, list[int]]] = [(c[s], s, [s]) for s in used]
    heapq.heapify(heap)
    depth = dict.fromkeys(used, 0)
    while len(heap) > 1:
        ca, sa, la = heapq.heappop(heap)
        cb, sb, lb = heapq.heappop(heap)
        for s in la:
            depth[s] += 1
        for s in lb:
            depth[s] += 1
        heapq.heappush(heap, (ca + cb, min(sa, sb), la + lb))
    maxd = max(depth.values())
    bl = [0] * (max(maxd, max_len) + 1)
    for d in depth.values():
        bl[d] += 1
    for i in range(maxd, max_len, -1):  # move leaves up until none is deeper than max_len
        while bl[i] > 0:
            j = i - 2
            while bl[j] == 0:
                j -= 1
            bl[i] -= 2
            bl[i - 1] += 1
            bl[j + 1] += 2
            bl[j] -= 1
    # most frequent symbols get the shortest lengths
    order = sorted(used, key=lambda s: (-c[s], s))
    k = 0
    for ln in range(1, max_len + 1):
        for _ in range(bl[ln]):
            lens[order[k]] = ln
            k += 1
    return lens


def canonical_codes(lens: npt.NDArray[np.uint8]) -> U64:
    """Canonical Huffman codes (MSB-first values) for code lengths ``lens``."""
    codes = np.zeros(len(lens), dtype=np.uint64)
    syms = sorted((int(ln), s) for s, ln in enumerate(lens) if ln > 0)
    code = 0
    prev = 0
    for ln, s in syms:
        code <<= ln - prev
        codes[s] = code
        code += 1
        prev = ln
    return codes


def decode_lut(lens: npt.NDArray[np.uint8], max_len: int = MAX_CODE_LEN) -> npt.NDArray[np.uint16]:
    """Look-up table indexed by the next ``max_len`` bits: ``symbol | length << 8``; prefixes
    of no code map to 0xFFFF (only a corrupt stream reaches them)."""
    lut = np.full(1 << max_len, 0xFFFF, dtype=np.uint16)
    codes = canonical_codes(lens)
    for s, ln in enumerate(lens):
        ln = int(ln)
        if ln:
            lo = int(codes[s]) << (max_len - ln)
            lut[lo : lo + (1 << (max_len - ln))] = s | (ln << 8)
    return lut


def probe_lut(lens: npt.NDArray[np.uint8], max_len: int = MAX_CODE_LEN) -> npt.NDArray[np.uint16]:
    """The probe decoder's look-up table: ``h | advance << 7`` where advance is the whole
    entry's length in bits (code + ``h - 1`` low bits), so the next position is one add away
    (the serial chain from one key to the next is what a probe waits on); 0xFFFF (h = 127)
    for prefixes of no code."""
    lut = np.full(1 << max_len, 0xFFFF, dtype=np.uint16)
    codes = canonical_codes(lens)
    for s, ln in enumerate(lens):
        ln = int(ln)
        if ln:
            lo = int(codes[s]) << (max_len - ln)
            lut[lo : lo + (1 << (max_len - ln))] = s | ((ln + max(s - 1, 0)) << 7)
    return lut


# ---------------------------------------------------------------------------- encoder
def _bit_length(x: U64) -> I64:
    """Bit length of each uint64 (0 for 0), exactly (via two exact 32-bit float conversions)."""
    hi = (x >> np.uint64(32)).astype(np.float64)
    lo = (x & np.uint64(0xFFFFFFFF)).astype(np.float64)
    eh = np.frexp(hi)[1].astype(np.int64)
    el = np.frexp(lo)[1].astype(np.int64)
    return np.where(eh > 0, eh + 32, el)


@kernel(nogil=True)
def _assign_blocks(elen, cap_bits):
    """Greedy packing: start positions of blocks holding as many entries as fit in cap_bits."""
    n = elen.shape[0]
    starts = np.empty(max(n, 1), dtype=np.int64)
    nb = 0
    i = 0
    while i < n:
        starts[nb] = i
        nb += 1
        used = 0
        i += 1
        while i < n and used + elen[i] <= cap_bits:
            used += elen[i]
            i += 1
    return starts[:nb]


@kernel(nogil=True, inline="always")
def _put(words, pos, v, nbits):
    if nbits == 0:
        return
    w = pos >> 6
    o = pos & 63
    avail = 64 - o
    if nbits <= avail:
        words[w] |= v << np.uint64(avail - nbits)
    else:
        rem = nbits - avail
        words[w] |= v >> np.uint64(rem)
        words[w + 1] |= v << np.uint64(64 - rem)


@kernel(nogil=True)
def _write_blocks(keys, hs, codes, lens, starts, bw, words):
    n = keys.shape[0]
    nb = starts.shape[0]
    for b in range(nb):
        s = starts[b]
        e = starts[b + 1] if b + 1 < nb else n
        pos = np.int64(b) * bw * 64
        for i in range(s + 1, e):
            h = hs[i]
            _put(words, pos, codes[h], np.int64(lens[h]))
            pos += np.int64(lens[h])
            if h > 1:
                low = keys[i] & ((np.uint64(1) << np.uint64(h - 1)) - np.uint64(1))
                _put(words, pos, low, h - 1)
                pos += h - 1


def _crc_table() -> npt.NDArray[np.uint32]:
    """The reflected CRC-32 table (polynomial 0xEDB88320): the same checksum as zlib.crc32."""
    t = np.zeros(256, dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        t[i] = c
    return t


_CRC_TABLE = _crc_table()


@kernel(nogil=True, inline="always")
def _crc_u64(crc, v, nbytes, table):
    for j in range(nbytes):
        byte = (v >> np.uint64(8 * j)) & np.uint64(0xFF)
        crc = table[(crc ^ np.uint32(byte)) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
    return crc


@kernel(nogil=True)
def _block_crc(words, b, bw, bkey, bstart, table):
    """zlib.crc32 of (key u64 LE, start u32 LE, the block's payload words LE)."""
    crc = np.uint32(0xFFFFFFFF)
    crc = _crc_u64(crc, bkey, 8, table)
    crc = _crc_u64(crc, np.uint64(bstart), 4, table)
    base = np.int64(b) * bw
    for j in range(bw):
        crc = _crc_u64(crc, words[base + j], 8, table)
    return crc ^ np.uint32(0xFFFFFFFF)


@kernel(nogil=True)
def _all_crcs(words, bw, bkeys, bstarts, table):
    nb = bkeys.shape[0]
    out = np.empty(nb, dtype=np.uint32)
    for b in range(nb):
        out[b] = _block_crc(words, b, bw, bkeys[b], bstarts[b], table)
    return out


@dataclass(frozen=True)
class EncodedTable:
    """One compressed table: ``n`` keys in ``len(bkeys)`` blocks of ``block_bytes`` bytes."""

    n: int
    block_bytes: int
    lens: npt.NDArray[np.uint8]  # (65,) code lengths of h (symbol 0: duplicate)
    bkeys: U64  # first key of every block
    bstart: npt.NDArray[np.uint32]  # position of that key in the table
    crc: npt.NDArray[np.uint32]  # per block
    words: U64  # nb * block_bytes / 8 payload words + _PAD zero words


_PAD = 4  # zero words after the last block: the decoder peeks past its position


def check_block_bytes(block_bytes: int) -> int:
    """``block_bytes`` as an int, or :class:`ConfigError` saying what a block size must be."""
    if (
        isinstance(block_bytes, bool)
        or not isinstance(block_bytes, (int, np.integer))
        or not 16 <= int(block_bytes) <= 65536
        or int(block_bytes) % 8
    ):
        raise ConfigError(f"block_bytes must be a multiple of 8 in 16..65536, got {block_bytes!r}")
    return int(block_bytes)


def encode_table(keys: U64, block_bytes: int = DEFAULT_BLOCK_BYTES) -> EncodedTable:
    """Compress sorted uint64 ``keys`` (ascending; duplicates allowed) into blocks."""
    block_bytes = check_block_bytes(block_bytes)
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    n = len(keys)
    if n > 1 and bool((keys[1:] < keys[:-1]).any()):
        raise ValueError("encode_table needs keys sorted ascending")
    hs = np.zeros(n, dtype=np.int64)
    if n > 1:
        hs[1:] = _bit_length(keys[1:] ^ keys[:-1])
    hist = np.bincount(hs[1:], minlength=NSYM) if n > 1 else np.zeros(NSYM, dtype=np.int64)
    lens = huffman_lengths(hist)
    codes = canonical_codes(lens)
    elen = lens[hs].astype(np.int64) + np.maximum(hs - 1, 0)
    bw = block_bytes // 8
    starts = _assign_blocks(elen, block_bytes * 8)
    nb = len(starts)
    words = np.zeros(nb * bw + _PAD, dtype=np.uint64)
    _write_blocks(keys, hs, codes, lens, starts, np.int64(bw), words)
    bkeys = keys[starts].copy()
    bstart = starts.astype(np.uint32)
    crc = _all_crcs(words, np.int64(bw), bkeys, bstart, _CRC_TABLE)
    return EncodedTable(n, block_bytes, lens, bkeys, bstart, crc, words)


# ---------------------------------------------------------------------------- decoder
@kernel(nogil=True, inline="always")
def _peek(words, pos, nbits):
    """The ``nbits`` (1..64) bits at bit position ``pos``, MSB-first."""
    w = pos >> 6
    o = pos & 63
    v = words[w]
    if o:
        v = (v << np.uint64(o)) | (words[w + 1] >> np.uint64(64 - o))
    return v >> np.uint64(64 - nbits)


@kernel(nogil=True)
def decode_block(words, wbase, bw, key, count, lut, out):
    """Decode ``count`` keys of the block at word ``wbase`` (first key ``key``) into ``out``.
    Returns ``count``, or -1 when the stream is corrupt (an unused code or an overrun)."""
    out[0] = key
    return _decode_run(words, wbase * 64, (wbase + bw) * 64, key, lut, out[:count], 1)


@kernel(nogil=True)
def _decode_run(words, pos, end, prev, lut, out, j0):
    """Decode ``out[j0:]`` from bit ``pos`` (block ends at bit ``end``) after key ``prev``."""
    count = out.shape[0]
    for j in range(j0, count):
        if pos >= end:
            return -1
        # one 64-bit window holds the code and, mostly, the low bits after it
        w = pos >> 6
        o = pos & 63
        v = words[w]
        if o:
            v = (v << np.uint64(o)) | (words[w + 1] >> np.uint64(64 - o))
        e = np.int64(lut[np.int64(v >> np.uint64(64 - MAX_CODE_LEN))])
        ln = e >> 8
        h = e & 0xFF
        if ln > MAX_CODE_LEN:
            return -1
        if h == 0:
            pos += ln
            cur = prev
        else:
            if h == 1:
                low = np.uint64(0)
            elif ln + h - 1 <= 64:
                low = (v << np.uint64(ln)) >> np.uint64(65 - h)
            else:
                low = _peek(words, pos + ln, h - 1)
            pos += ln + h - 1
            top = (prev >> np.uint64(h)) << np.uint64(h) if h < 64 else np.uint64(0)
            cur = top | (np.uint64(1) << np.uint64(h - 1)) | low
        out[j] = cur
        prev = cur
    if pos > end:
        return -1
    return count


@kernel(nogil=True)
def _decode_until(words, wbase, bw, key, count, lut, out, last):
    """Like :func:`decode_block` (but with a :func:`probe_lut`), stopping after the first key
    ``> last`` (a probe needs no key past its bucket). Returns how many keys were written, or
    -1 when the stream is corrupt."""
    out[0] = key
    if key > last:
        return np.int64(1)
    pos = wbase * 64
    end = (wbase + bw) * 64
    prev = key
    for j in range(1, count):
        if pos >= end:
            return np.int64(-1)
        w = pos >> 6
        o = pos & 63
        v = words[w]
        if o:
            v = (v << np.uint64(o)) | (words[w + 1] >> np.uint64(64 - o))
        e = np.int64(lut[np.int64(v >> np.uint64(64 - MAX_CODE_LEN))])  # probe_lut
        h = e & 0x7F
        adv = e >> 7
        if h > 64:
            return np.int64(-1)
        if h == 0:
            cur = prev
        else:
            ln = adv - h + 1
            if h == 1:
                low = np.uint64(0)
            elif adv <= 64:
                low = (v << np.uint64(ln)) >> np.uint64(65 - h)
            else:
                low = _peek(words, pos + ln, h - 1)
            top = (prev >> np.uint64(h)) << np.uint64(h) if h < 64 else np.uint64(0)
            cur = top | (np.uint64(1) << np.uint64(h - 1)) | low
        pos += adv
        out[j] = cur
        prev = cur
        if cur > last:
            return np.int64(j + 1)
    if pos > end:
        return np.int64(-1)
    return np.int64(count)


@kernel(nogil=True)
def _decode_quad(words, bw, bkeys, bstart, n, lut, out, b):
    """Blocks ``b`` .. ``b + 3`` together while all have keys left: four independent serial
    chains (a key's position depends on the previous key's code), so the CPU overlaps their
    latencies. Returns -1 when a stream is corrupt, else 0.

    The step is written out here, in :func:`_decode_run` and :func:`_decode_until` on purpose:
    as one shared numba function it is called per key (not inlined by LLVM), and with
    ``inline="always"`` its array arguments are reference-counted inside the loop; both decode
    several times slower (``benchmarks/bench_compressed.py``, decode column)."""
    nb = bkeys.shape[0]
    sa = np.int64(bstart[b + 0])
    ka = bkeys[b + 0]
    pa = (np.int64(b) + 0) * bw * 64
    out[sa] = ka
    sb = np.int64(bstart[b + 1])
    kb = bkeys[b + 1]
    pb = (np.int64(b) + 1) * bw * 64
    out[sb] = kb
    sc = np.int64(bstart[b + 2])
    kc = bkeys[b + 2]
    pc = (np.int64(b) + 2) * bw * 64
    out[sc] = kc
    sd = np.int64(bstart[b + 3])
    kd = bkeys[b + 3]
    pd = (np.int64(b) + 3) * bw * 64
    out[sd] = kd
    se = np.int64(bstart[b + 4]) if b + 4 < nb else n
    m = min(sb - sa, sc - sb, sd - sc, se - sd)
    for j in range(1, m):
        if (
            pa >= (np.int64(b) + 1) * bw * 64
            or pb >= (np.int64(b) + 2) * bw * 64
            or pc >= (np.int64(b) + 3) * bw * 64
            or pd >= (np.int64(b) + 4) * bw * 64
        ):
            return -1
        w_a = pa >> 6
        o_a = pa & 63
        v_a = words[w_a]
        if o_a:
            v_a = (v_a << np.uint64(o_a)) | (words[w_a + 1] >> np.uint64(64 - o_a))
        e_a = np.int64(lut[np.int64(v_a >> np.uint64(64 - MAX_CODE_LEN))])
        ln_a = e_a >> 8
        h_a = e_a & 0xFF
        if ln_a > MAX_CODE_LEN:
            return -1
        if h_a == 0:
            pa += ln_a
        else:
            if h_a == 1:
                low_a = np.uint64(0)
            elif ln_a + h_a - 1 <= 64:
                low_a = (v_a << np.uint64(ln_a)) >> np.uint64(65 - h_a)
            else:
                low_a = _peek(words, pa + ln_a, h_a - 1)
            pa += ln_a + h_a - 1
            top_a = (ka >> np.uint64(h_a)) << np.uint64(h_a) if h_a < 64 else np.uint64(0)
            ka = top_a | (np.uint64(1) << np.uint64(h_a - 1)) | low_a
        out[sa + j] = ka
        w_b = pb >> 6
        o_b = pb & 63
        v_b = words[w_b]
        if o_b:
            v_b = (v_b << np.uint64(o_b)) | (words[w_b + 1] >> np.uint64(64 - o_b))
        e_b = np.int64(lut[np.int64(v_b >> np.uint64(64 - MAX_CODE_LEN))])
        ln_b = e_b >> 8
        h_b = e_b & 0xFF
        if ln_b > MAX_CODE_LEN:
            return -1
        if h_b == 0:
            pb += ln_b
        else:
            if h_b == 1:
                low_b = np.uint64(0)
            elif ln_b + h_b - 1 <= 64:
                low_b = (v_b << np.uint64(ln_b)) >> np.uint64(65 - h_b)
            else:
                low_b = _peek(words, pb + ln_b, h_b - 1)
            pb += ln_b + h_b - 1
            top_b = (kb >> np.uint64(h_b)) << np.uint64(h_b) if h_b < 64 else np.uint64(0)
            kb = top_b | (np.uint64(1) << np.uint64(h_b - 1)) | low_b
        out[sb + j] = kb
        w_c = pc >> 6
        o_c = pc & 63
        v_c = words[w_c]
        if o_c:
            v_c = (v_c << np.uint64(o_c)) | (words[w_c + 1] >> np.uint64(64 - o_c))
        e_c = np.int64(lut[np.int64(v_c >> np.uint64(64 - MAX_CODE_LEN))])
        ln_c = e_c >> 8
        h_c = e_c & 0xFF
        if ln_c > MAX_CODE_LEN:
            return -1
        if h_c == 0:
            pc += ln_c
        else:
            if h_c == 1:
                low_c = np.uint64(0)
            elif ln_c + h_c - 1 <= 64:
                low_c = (v_c << np.uint64(ln_c)) >> np.uint64(65 - h_c)
            else:
                low_c = _peek(words, pc + ln_c, h_c - 1)
            pc += ln_c + h_c - 1
            top_c = (kc >> np.uint64(h_c)) << np.uint64(h_c) if h_c < 64 else np.uint64(0)
            kc = top_c | (np.uint64(1) << np.uint64(h_c - 1)) | low_c
        out[sc + j] = kc
        w_d = pd >> 6
        o_d = pd & 63
        v_d = words[w_d]
        if o_d:
            v_d = (v_d << np.uint64(o_d)) | (words[w_d + 1] >> np.uint64(64 - o_d))
        e_d = np.int64(lut[np.int64(v_d >> np.uint64(64 - MAX_CODE_LEN))])
        ln_d = e_d >> 8
        h_d = e_d & 0xFF
        if ln_d > MAX_CODE_LEN:
            return -1
        if h_d == 0:
            pd += ln_d
        else:
            if h_d == 1:
                low_d = np.uint64(0)
            elif ln_d + h_d - 1 <= 64:
                low_d = (v_d << np.uint64(ln_d)) >> np.uint64(65 - h_d)
            else:
                low_d = _peek(words, pd + ln_d, h_d - 1)
            pd += ln_d + h_d - 1
            top_d = (kd >> np.uint64(h_d)) << np.uint64(h_d) if h_d < 64 else np.uint64(0)
            kd = top_d | (np.uint64(1) << np.uint64(h_d - 1)) | low_d
        out[sd + j] = kd
    # each block's rest, one chain, from where it stands
    if _decode_run(words, pa, (np.int64(b) + 1) * bw * 64, ka, lut, out[sa:sb], max(m, 1)) < 0:
        return -1
    if _decode_run(words, pb, (np.int64(b) + 2) * bw * 64, kb, lut, out[sb:sc], max(m, 1)) < 0:
        return -1
    if _decode_run(words, pc, (np.int64(b) + 3) * bw * 64, kc, lut, out[sc:sd], max(m, 1)) < 0:
        return -1
    if _decode_run(words, pd, (np.int64(b) + 4) * bw * 64, kd, lut, out[sd:se], max(m, 1)) < 0:
        return -1
    return 0


@kernel(nogil=True)
def _decode_all(words, bw, bkeys, bstart, n, lut, out):
    """Decode every block into ``out`` (n,), four blocks at a time; returns 0, or -(b + 1)
    when block b (or another of its group of four) does not decode."""
    nb = bkeys.shape[0]
    b = 0
    while b + 3 < nb:
        if _decode_quad(words, bw, bkeys, bstart, n, lut, out, b) < 0:
            return -(b + 1)
        b += 4
    while b < nb:
        s = np.int64(bstart[b])
        e = np.int64(bstart[b + 1]) if b + 1 < nb else n
        if decode_block(words, np.int64(b) * bw, bw, bkeys[b], e - s, lut, out[s:e]) < 0:
            return -(b + 1)
        b += 1
    return 0


def decode_table(t: EncodedTable) -> U64:
    """All ``t.n`` keys of an encoded table (numba)."""
    out = np.empty(t.n, dtype=np.uint64)
    if t.n:
        r = _decode_all(
            t.words, np.int64(t.block_bytes // 8), t.bkeys, t.bstart, np.int64(t.n),
            decode_lut(t.lens), out,
        )  # fmt: skip
        if r < 0:
            raise CorruptFileError(f"compressed table: block {-r - 1} does not decode")
    return out


def decode_table_py(t: EncodedTable) -> list[int]:
    """Pure-Python twin of :func:`decode_table` (the reference the numba decoder is tested
    against): reads the bit stream with Python ints and a dict of canonical codes."""
    codes = canonical_codes(t.lens)
    by_code = {(int(t.lens[s]), int(codes[s])): s for s in range(NSYM) if t.lens[s]}
    bw = t.block_bytes // 8
    out: list[int] = []
    nb = len(t.bkeys)
    for b in range(nb):
        s = int(t.bstart[b])
        e = int(t.bstart[b + 1]) if b + 1 < nb else t.n
        stream = 0
        for w in t.words[b * bw : (b + 1) * bw].tolist():
            stream = (stream << 64) | int(w)
        total = bw * 64
        pos = 0
        prev = int(t.bkeys[b])
        out.append(prev)
        for _ in range(s + 1, e):
            code, ln = 0, 0
            while (ln, code) not in by_code:
                code = (code << 1) | ((stream >> (total - pos - 1)) & 1)
                pos += 1
                ln += 1
                if ln > MAX_CODE_LEN or pos > total:
                    raise CorruptFileError(f"compressed table: block {b} does not decode")
            h = by_code[(ln, code)]
            if h:
                low = (stream >> (total - pos - (h - 1))) & ((1 << (h - 1)) - 1)
                pos += h - 1
                if pos > total:
                    raise CorruptFileError(f"compressed table: block {b} does not decode")
                prev = ((prev >> h) << h) | (1 << (h - 1)) | low
            out.append(prev)
    return out


def verify_table(t: EncodedTable, what: str = "table") -> None:
    """Raise :class:`CorruptFileError` naming the first block whose CRC-32 does not match."""
    crc = _all_crcs(t.words, np.int64(t.block_bytes // 8), t.bkeys, t.bstart, _CRC_TABLE)
    bad = np.flatnonzero(crc != t.crc)
    if len(bad):
        raise CorruptFileError(
            f"{what}: checksum mismatch in block {int(bad[0])} of {len(t.crc)}"
            f" ({len(bad)} bad block(s)); the data is corrupt: restore it or rebuild the index"
        )


# ---------------------------------------------------------------------------- tables of a segment
@kernel(nogil=True)
def _dirs_all(bkeys, boff, dbits):
    T = boff.shape[0] - 1
    out = np.empty((max(T, 1), (1 << dbits) + 1), dtype=np.int64)
    for t in range(T):
        out[t] = K.directory(bkeys[boff[t] : boff[t + 1]], dbits)
    return out


def _consistent(
    n: int, block_bytes: int, lens: Any, bkeys: Any, bstart: Any, crc: Any, words: Any,
    boff: Any, woff: Any,
) -> bool:  # fmt: skip
    """Whether a segment's block-code arrays fit together (what keeps a probe inside them)."""
    T = lens.shape[0] if lens.ndim == 2 else -1
    ok = (
        lens.shape == (T, NSYM)
        and int(lens.max(initial=0)) <= MAX_CODE_LEN
        and boff.shape == (T + 1,)
        and woff.shape == (T + 1,)
        and int(boff[0]) == 0 == int(woff[0])
        and int(boff[-1]) == len(bkeys) == len(bstart) == len(crc)
        and int(woff[-1]) == len(words)
    )
    bw = block_bytes // 8
    for t in range(T if ok else 0):
        nb = int(boff[t + 1] - boff[t])
        ok = ok and nb >= 0 and int(woff[t + 1] - woff[t]) == nb * bw + _PAD
        if ok and n:
            bs = bstart[int(boff[t]) : int(boff[t + 1])].astype(np.int64)
            ok = nb >= 1 and int(bs[0]) == 0 and bool((np.diff(bs) > 0).all())
            ok = ok and int(bs[-1]) < n
    return bool(ok)


@dataclass(frozen=True)
class BlockTables:
    """Every table of a segment, concatenated for the kernels (table ``t``'s blocks are
    ``boff[t]:boff[t + 1]``, its words start at ``woff[t]``), and what a probe derives from
    them on open: a directory over each table's block keys (``dbits``, at most the plan's
    shortest prefix ``min_pb``) and the decoders' look-up tables."""

    n: int
    block_bytes: int
    lens: npt.NDArray[np.uint8]  # (T, 65)
    bkeys: U64
    bstart: npt.NDArray[np.uint32]
    crc: npt.NDArray[np.uint32]
    words: U64
    boff: I64  # (T + 1,)
    woff: I64  # (T + 1,)
    min_pb: int = 64
    dbits: int = field(init=False)
    dirs: I64 = field(init=False)
    luts: npt.NDArray[np.uint16] = field(init=False)
    pluts: npt.NDArray[np.uint16] = field(init=False)

    #: array fields as stored by :mod:`neardup.index.format` (``s<i>.c.<name>``)
    FIELDS = ("lens", "bkeys", "bstart", "crc", "words", "boff", "woff")

    def __post_init__(self) -> None:
        T = self.n_tables
        nb_min = min((int(self.boff[t + 1] - self.boff[t]) for t in range(T)), default=1)
        dbits = int(min(self.min_pb, max(1, min(20, max(nb_min, 1).bit_length() - 1))))
        object.__setattr__(self, "dbits", dbits)
        object.__setattr__(self, "dirs", _dirs_all(self.bkeys, self.boff, dbits))
        lut = [decode_lut(self.lens[t]) for t in range(T)]
        plut = [probe_lut(self.lens[t]) for t in range(T)]
        empty = np.zeros((0, 1 << MAX_CODE_LEN), dtype=np.uint16)
        object.__setattr__(self, "luts", np.stack(lut) if lut else empty)
        object.__setattr__(self, "pluts", np.stack(plut) if plut else empty)

    @property
    def n_tables(self) -> int:
        return int(self.lens.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of the tables and of what a probe derives from them."""
        arrays = (self.lens, self.bkeys, self.bstart, self.crc, self.words, self.boff, self.woff)
        derived = self.dirs.nbytes + self.luts.nbytes + self.pluts.nbytes
        return int(sum(a.nbytes for a in arrays) + derived)

    def table_bits(self, t: int) -> float:
        """Bits per key of table ``t``: payload, block keys, positions, CRCs, code lengths."""
        e = self.table(t)
        nbytes = e.words.nbytes + e.bkeys.nbytes + e.bstart.nbytes + e.crc.nbytes + e.lens.nbytes
        return 8.0 * nbytes / max(self.n, 1)

    def meta(self) -> dict[str, int]:
        """The scalars a file header keeps besides the arrays."""
        return {"block_bytes": self.block_bytes}

    @classmethod
    def from_arrays(
        cls, n: int, meta: dict[str, Any], arrays: dict[str, Any], min_pb: int, what: str
    ) -> BlockTables:
        """Tables read from a file: the arrays are checked (:meth:`validate`) before the
        probe's directories are built from them."""
        block_bytes = check_block_bytes(int(meta["block_bytes"]))
        if not _consistent(n, block_bytes, **arrays):
            raise CorruptFileError(
                f"{what}: inconsistent compressed table arrays; the file is corrupt"
            )
        return cls(n=n, block_bytes=block_bytes, min_pb=min_pb, **arrays)

    @classmethod
    def from_tables(
        cls, tabs: list[EncodedTable], n: int, block_bytes: int, min_pb: int = 64
    ) -> BlockTables:
        boff = np.zeros(len(tabs) + 1, dtype=np.int64)
        woff = np.zeros(len(tabs) + 1, dtype=np.int64)
        boff[1:] = np.cumsum([len(t.bkeys) for t in tabs])
        woff[1:] = np.cumsum([len(t.words) for t in tabs])

        def cat(name: str, dt: Any) -> Any:
            parts = [getattr(t, name) for t in tabs]
            return np.concatenate(parts).astype(dt) if parts else np.zeros(0, dtype=dt)

        lens = np.stack([t.lens for t in tabs]) if tabs else np.zeros((0, NSYM), np.uint8)
        return cls(n, block_bytes, lens, cat("bkeys", np.uint64), cat("bstart", np.uint32),
                   cat("crc", np.uint32), cat("words", np.uint64), boff, woff, min_pb)  # fmt: skip

    @classmethod
    def encode(cls, tables: Iterable[U64], block_bytes: int, min_pb: int = 64) -> BlockTables:
        """Every sorted key array of ``tables`` (all of one length; an iterator is fine) in
        blocks."""
        tabs = [encode_table(t, block_bytes) for t in tables]
        return cls.from_tables(tabs, tabs[0].n if tabs else 0, block_bytes, min_pb)

    def table(self, t: int) -> EncodedTable:
        b0, b1 = int(self.boff[t]), int(self.boff[t + 1])
        w0, w1 = int(self.woff[t]), int(self.woff[t + 1])
        return EncodedTable(self.n, self.block_bytes, self.lens[t], self.bkeys[b0:b1],
                            self.bstart[b0:b1], self.crc[b0:b1], self.words[w0:w1])  # fmt: skip

    def decode(self, t: int) -> U64:
        """Every key of table ``t``, sorted."""
        return decode_table(self.table(t))

    def keys_at(self, t: int, idx: I64) -> U64:
        """Keys at positions ``idx`` of table ``t``, decoding only their blocks."""
        idx = np.asarray(idx, dtype=np.int64)
        if len(idx) > self.n // 64:
            return self.decode(t)[idx]
        e = self.table(t)
        lut = self.luts[t]
        bw = self.block_bytes // 8
        nb = len(e.bkeys)
        blk = np.searchsorted(e.bstart.astype(np.int64), idx, "right") - 1
        out = np.empty(len(idx), dtype=np.uint64)
        buf = np.empty(self.block_bytes * 8 + 2, dtype=np.uint64)
        for i, (r, b) in enumerate(zip(idx.tolist(), blk.tolist(), strict=True)):
            s = int(e.bstart[b])
            end = int(e.bstart[b + 1]) if b + 1 < nb else self.n
            if decode_block(e.words, np.int64(b * bw), np.int64(bw), e.bkeys[b], end - s, lut,
                            buf) < 0:  # fmt: skip
                raise CorruptFileError(f"compressed table {t}: block {b} does not decode")
            out[i] = buf[r - s]
        return out

    def validate(self, what: str) -> None:
        """Structural checks (cheap) on arrays read from a file: raise CorruptFileError."""
        arrays = {name: getattr(self, name) for name in self.FIELDS}
        if not _consistent(self.n, self.block_bytes, **arrays):
            raise CorruptFileError(
                f"{what}: inconsistent compressed table arrays; the file is corrupt"
            )

    def verify(self, what: str) -> None:
        """Check every block's CRC-32 (raises :class:`CorruptFileError` naming table and block)."""
        for t in range(self.n_tables):
            verify_table(self.table(t), f"{what} table {t}")


# ---------------------------------------------------------------------------- search kernel
@kernel(nogil=True, inline="always")
def _block_count(bstart, b0, b, nb, n):
    s = np.int64(bstart[b0 + b])
    e = np.int64(bstart[b0 + b + 1]) if b + 1 < nb else n
    return s, e


@kernel(nogil=True)
def _table0_rows(fp, bkeys, bstart, words, luts, boff, woff, bw, n, dirs, dbits, buf):
    """[a, b) positions in table 0 whose key equals ``fp`` (a == b: none; -1: corrupt)."""
    nb = boff[1] - boff[0]
    top = np.int64(fp >> np.uint64(64 - dbits))
    lo_d = dirs[0, top]
    hi_d = dirs[0, top + 1]
    bl = K.lower_bound(bkeys, lo_d, hi_d, fp) - 1  # the block before the first block key >= fp
    if bl < 0:
        bl = 0
    bh = K.upper_bound(bkeys, max(bl, lo_d), hi_d, fp)
    if bh <= bl:
        bh = bl + 1
    a = np.int64(-1)
    b = np.int64(-1)
    for blk in range(bl, min(bh, nb)):
        s, e = _block_count(bstart, 0, blk, nb, n)
        r = decode_block(words, woff[0] + blk * bw, bw, bkeys[blk], e - s, luts[0], buf)
        if r < 0:
            return np.int64(-1), np.int64(-1)
        for j in range(e - s):
            if buf[j] == fp:
                if a < 0:
                    a = s + j
                b = s + j + 1
            elif buf[j] > fp:
                break
    if a < 0:
        return np.int64(0), np.int64(0)
    return a, b


@kernel(nogil=True)
def search_blocks(
    q, k, n, bkeys, bstart, words, luts, pluts, boff, woff, bw, dirs, dbits, rows, fps,
    inv_idx, inv_mask, inv_n, pidx, pmask, npieces, pb, probe_radius, flips, flipd, nflips,
    pm_key, pm_orig, qk, buf, buf0, out_q, out_r, out_d,
):  # fmt: skip
    """Every (query, row, distance) within ``k`` in a compressed segment, each pair once:
    the same output protocol as :func:`neardup.index._kernels.search_tables`. Returns the
    count, or -1 - t - 1000 * block when a block does not decode.

    ``rows`` (T - 1, n) maps table positions to rows when the keys do not determine the
    fingerprint (128-bit); else it is empty and a hit in table ``t >= 1`` is un-permuted
    (``inv_*``: pieces of the inverse permutation) and looked up in table 0, whose positions
    are the rows. Runs of equal keys (duplicates) are reported once per table from the run's
    first key, as every row of the run in table 0.
    """
    nq = q.shape[0]
    W = q.shape[1]
    T = luts.shape[0] if k > 0 else min(luts.shape[0], 1)  # exact: table 0 alone (search_tables)
    cap = out_q.shape[0]
    cnt = 0
    kk = np.int64(k)
    has_rows = rows.shape[0] > 0
    one = np.zeros((1, 1), dtype=np.uint64)
    bk2 = bkeys.reshape((1, bkeys.shape[0]))
    wd2 = words.reshape((1, words.shape[0]))
    G = 8  # queries per prefetch group: issue their memory loads before using them
    for qi in range(nq):
        g = qi % G
        if g == 0:
            g1 = min(nq, qi + G)
            for qj in range(qi, g1):
                for t in range(T):
                    kq = K.permute_one(q, qj, t, pidx, pmask, npieces)
                    qk[(qj - qi) * T + t] = kq
                    top0 = np.int64(kq >> np.uint64(64 - dbits))
                    K.prefetch2d(dirs, t, top0)
            for qj in range(qi, g1):
                for t in range(T):
                    top0 = np.int64(qk[(qj - qi) * T + t] >> np.uint64(64 - dbits))
                    lo0 = dirs[t, top0]
                    if lo0 < boff[t + 1] - boff[t]:
                        K.prefetch2d(bk2, 0, boff[t] + lo0)
            for qj in range(qi, g1):  # the exact prefix's block (and the next one's first line)
                for t in range(T):
                    kq = qk[(qj - qi) * T + t]
                    top0 = np.int64(kq >> np.uint64(64 - dbits))
                    nb = boff[t + 1] - boff[t]
                    tb = bkeys[boff[t] : boff[t + 1]]
                    pbase = (kq >> np.uint64(64 - pb[t])) << np.uint64(64 - pb[t])
                    bl = max(K.lower_bound(tb, dirs[t, top0], dirs[t, top0 + 1], pbase) - 1, 0)
                    if bl < nb:
                        w0 = woff[t] + bl * bw
                        for line in range(0, min(bw + 8, 64), 8):
                            K.prefetch2d(wd2, 0, w0 + line)
        for t in range(T):
            b0 = boff[t]
            nb = boff[t + 1] - b0
            tb = bkeys[b0 : b0 + nb]
            p_bits = pb[t]
            qkt = qk[g * T + t]
            shift, low, qpre, dshift = K.probe_prefix(p_bits, dbits, qkt)
            for f in range(nflips[t]):
                d0 = flipd[t, f]
                if d0 > kk:
                    break
                p = qpre ^ flips[t, f]
                base = p << shift if p_bits < 64 else p
                last = base | low
                top = np.int64(p >> dshift)
                lo_d = dirs[t, top]
                hi_d = dirs[t, top + 1]
                # from the block before the first block key >= base (equal keys may span
                # blocks) to the last block whose first key <= last
                bl = K.lower_bound(tb, lo_d, hi_d, base) - 1
                if bl < 0:
                    bl = 0
                bh = K.upper_bound(tb, max(bl, lo_d), hi_d, last)
                if bh <= bl:
                    bh = bl + 1
                have_prev = False
                prev = np.uint64(0)
                done = False
                for blk in range(bl, min(bh, nb)):
                    if done:
                        break
                    s, e = _block_count(bstart, b0, blk, nb, n)
                    r = _decode_until(
                        words, woff[t] + blk * bw, bw, tb[blk], e - s, pluts[t], buf, last
                    )
                    if r < 0:
                        return -1 - t - 1000 * blk
                    for j in range(r):
                        key = buf[j]
                        if key < base:
                            continue
                        if key > last:
                            done = True
                            break
                        dup = have_prev and key == prev
                        have_prev = True
                        prev = key
                        x = key ^ qkt
                        c = K._pc(x)
                        if c > kk:
                            continue
                        pos = s + j
                        x0 = np.uint64(0)
                        x1 = np.uint64(0)
                        if t == 0 or has_rows:
                            row = pos if t == 0 else np.int64(rows[t - 1, pos])
                            if W == 1:
                                dist = c
                            else:
                                x0 = fps[row, 0] ^ q[qi, 0]
                                x1 = fps[row, 1] ^ q[qi, 1]
                                dist = K._pc(x0) + K._pc(x1)
                                if dist > kk:
                                    continue
                            if K._seen_earlier(t, W, x, x0, x1, pm_key, pm_orig, probe_radius):
                                continue
                            if cnt < cap:
                                out_q[cnt] = qi
                                out_r[cnt] = row
                                out_d[cnt] = dist
                            cnt += 1
                            continue
                        # 64-bit, no rows: the key is the fingerprint permuted; find its rows
                        if dup:
                            continue
                        if K._seen_earlier(t, W, x, x0, x1, pm_key, pm_orig, probe_radius):
                            continue
                        one[0, 0] = key
                        fp = K.permute_one(one, 0, t, inv_idx, inv_mask, inv_n)
                        ra, rb = _table0_rows(
                            fp, bkeys, bstart, words, luts, boff, woff, bw, n, dirs, dbits, buf0
                        )
                        if ra < 0:
                            return -1 - 1000 * 0
                        for row in range(ra, rb):
                            if cnt < cap:
                                out_q[cnt] = qi
                                out_r[cnt] = row
                                out_d[cnt] = c
                            cnt += 1
    return cnt
