"""Elias–Fano tables: sorted 64-bit keys at ~2 bits over their information bound, with random
access and no serial chain between keys (the default codec of compressed segments).

A table of ``n`` sorted keys is split at bit ``L = 64 - h`` (``h`` high bits, ``h`` about
``log2 n``; :func:`ef_params` picks the smaller of ``floor`` and ``ceil``):

* ``lo`` (u64 words): the ``L`` low bits of key ``i`` at bits ``[i L, (i + 1) L)``, least
  significant first (a key's low bits are one or two word loads away);
* ``hi`` (u64 words): a bit vector of ``n + 2**h`` bits where key ``i`` sets bit
  ``(key_i >> L) + i`` (its high part in unary: the zeros before a key count its high part,
  the ones before it its index), least significant bit of each word first;
* ``dirs`` (u32): a directory of ``2**dbits + 1`` counts, ``dirs[v]`` the number of keys whose
  top ``dbits`` bits are below ``v``. Key ``dirs[v]`` sits at bit ``(v << (h - dbits)) + dirs[v]``,
  so a probe jumps to its high part's run of ones with one read and skips at most
  ``2**(h - dbits)`` zeros (by popcount, a word at a time).

Per key: ``L`` bits + about 2 bits of unary + the directory (``32 * 2**dbits / n`` bits;
:func:`ef_params` keeps it at 2 bits or less). The information bound of ``n`` sorted 64-bit
keys is ``64 - log2 n + log2 e`` bits per key; the unary part is about half a bit over it
(measured: docs/index.md, "The Elias–Fano layout"). A probe walks the set bits of ``hi`` from
its bucket's start (``cttz``, clear the lowest bit) and reads each key's low bits at a computed
position: every key is decoded independently of the one before it, unlike the block code's
chain (:mod:`neardup.index.codec_blocks`).

Heavy buckets (more than ``max(heavy_bucket, 8 x the mean)`` keys, as in
:mod:`neardup.index.tables`) get a sub-directory of key indices on the next key bits
(``heavy``, ``sub``); a probe visits only the cells within its flip budget and descends a cell
whose keys share one high part on their low bits. In tables after the first, a heavy bucket
also keeps its keys' rows (``hrows``), so an output-heavy query reads a row per hit instead of
looking the fingerprint up in table 0.

All tables of a segment hold the same ``n`` keys, so they share ``h`` and ``dbits`` and their
arrays are stacked: ``hi`` (T, words), ``lo`` (T, words), ``dirs`` (T, 2**dbits + 1), plus
``sums`` (T + 1,): the xxh3-64 of each table's three rows and of the heavy arrays, so
:meth:`EFTables.verify` names the table a flipped bit is in. The pure-Python
:func:`decode_ef_py` is the reference the numba decoders are tested against.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash

from .._jit import kernel
from ..errors import ConfigError, CorruptFileError
from . import _kernels as K

__all__ = [
    "EFTables",
    "decode_ef",
    "ef_get",
    "ef_params",
    "encode_ef",
    "pack_bits",
    "search_ef",
    "unpack_bits",
]

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
_U1 = np.uint64(1)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
#: keys per directory entry at least (32 bits each: 2 bits per key at most; the plan's shortest
#: prefix usually caps it lower). A coarser directory saves half a bit per key at 2 M keys and
#: probes slower there (docs/index.md, "The Elias–Fano layout")
_DIR_KEYS = 16


# ---------------------------------------------------------------------------- fixed-width bits
@kernel(nogil=True, inline="always")
def _mask(width):
    """The low ``width`` (1..64) bits set."""
    return (np.uint64(2) << np.uint64(width - 1)) - _U1


@kernel(nogil=True, inline="always")
def _read(words, i, width, mask):
    """Value ``i`` of ``width`` bits packed least significant first (two word loads; the
    ``<< 1 << (63 - o)`` form gives 0 for ``o == 0`` with no shift by 64)."""
    b = np.int64(i) * width
    w = b >> 6
    o = np.uint64(b & 63)
    return ((words[w] >> o) | ((words[w + 1] << _U1) << (np.uint64(63) - o))) & mask


@kernel(nogil=True, inline="always")
def _read2(words, t, i, width, mask):
    """:func:`_read` on row ``t`` of a 2-d array of words."""
    b = np.int64(i) * width
    w = b >> 6
    o = np.uint64(b & 63)
    return ((words[t, w] >> o) | ((words[t, w + 1] << _U1) << (np.uint64(63) - o))) & mask


@kernel(nogil=True)
def _pack_into(values, width, out):
    mask = _mask(width)
    for i in range(values.shape[0]):
        x = values[i] & mask
        b = np.int64(i) * width
        w = b >> 6
        o = np.uint64(b & 63)
        out[w] |= x << o
        out[w + 1] |= (x >> _U1) >> (np.uint64(63) - o)


@kernel(nogil=True)
def _unpack_at(words, width, idx, out):
    mask = _mask(width)
    for j in range(idx.shape[0]):
        out[j] = _read(words, idx[j], width, mask)


def packed_words(n: int, width: int) -> int:
    """Words holding ``n`` values of ``width`` bits (one spare: a read loads two words)."""
    return (n * width + 63) // 64 + 1


def pack_bits(values: U64, width: int) -> U64:
    """``values`` (uint64) in ``width`` (1..64) bits each, packed least significant first."""
    if not 1 <= width <= 64:
        raise ValueError(f"width must be in 1..64, got {width}")
    v = np.ascontiguousarray(values, dtype=np.uint64)
    out = np.zeros(packed_words(len(v), width), dtype=np.uint64)
    _pack_into(v, np.int64(width), out)
    return out


def unpack_bits(words: U64, width: int, idx: Any) -> U64:
    """The packed values at positions ``idx`` (an int array)."""
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    out = np.empty(len(idx), dtype=np.uint64)
    _unpack_at(words, np.int64(width), idx, out)
    return out


# ---------------------------------------------------------------------------- parameters
def ef_params(n: int, min_pb: int = 64) -> tuple[int, int]:
    """``(h, dbits)`` for ``n`` keys: the high-bit count with the smaller code (``floor`` or
    ``ceil`` of ``log2 n``, in 1..63), and the directory bits: at most one entry per
    :data:`_DIR_KEYS` keys (so the directory costs 2 bits per key or less), 1 to ``h``,
    and no finer than the shortest table prefix ``min_pb`` (a probe of such a table then starts
    exactly at its bucket)."""
    if n < 0 or n >= 1 << 32:
        raise ConfigError(f"an Elias-Fano table holds 0..2**32 - 1 keys, got {n}")
    lg = math.log2(max(n, 2))
    best: tuple[int, int] | None = None
    for h in {max(1, min(63, math.floor(lg))), max(1, min(63, math.ceil(lg)))}:
        bits = n * (64 - h) + (1 << h)
        if best is None or bits < best[0]:
            best = (bits, h)
    assert best is not None
    h = best[1]
    dbits = max(1, min(h, int(min_pb), math.floor(math.log2(max(n, 1) / _DIR_KEYS))))
    return h, dbits


# ---------------------------------------------------------------------------- tables
@kernel(nogil=True)
def _encode_one(keys, h, hi, lo):
    """Table ``keys`` (sorted) into zeroed rows ``hi`` / ``lo``."""
    L = 64 - h
    mask = _mask(L)
    for i in range(keys.shape[0]):
        k = keys[i]
        pos = np.int64(k >> np.uint64(L)) + i
        hi[pos >> 6] |= _U1 << np.uint64(pos & 63)
        x = k & mask
        b = np.int64(i) * L
        w = b >> 6
        o = np.uint64(b & 63)
        lo[w] |= x << o
        lo[w + 1] |= (x >> _U1) >> (np.uint64(63) - o)


@kernel(nogil=True)
def _decode_one(hi, lo, t, n, h, out):
    """Every key of table ``t`` into ``out`` (n,); returns 0, or -1 when ``hi`` holds fewer than
    ``n`` set bits (a corrupt table)."""
    L = 64 - h
    mask = _mask(L)
    i = 0
    nw = hi.shape[1]
    for wi in range(nw):
        w = hi[t, wi]
        while w and i < n:
            hv = (np.int64(wi) << 6) + K._tz(w) - i
            out[i] = (np.uint64(hv) << np.uint64(L)) | _read2(lo, t, i, L, mask)
            w &= w - _U1
            i += 1
        if i >= n:
            return 0
    return 0 if i >= n else -1


@kernel(nogil=True, inline="always")
def _select64(x, r):
    """Position of the ``r``-th (0-based) set bit of ``x`` (which has more than ``r``)."""
    pos = np.int64(0)
    for s in (32, 16, 8, 4, 2, 1):
        c = K._pc(x & ((_U1 << np.uint64(s)) - _U1))
        if r >= c:
            r -= c
            x >>= np.uint64(s)
            pos += s
    return pos


@kernel(nogil=True, inline="always")
def _seek(hi, t, nw, dirs, sh, hv0):
    """The first key whose high part is >= ``hv0`` in table ``t``: returns its index ``i``,
    the word ``wi`` its bit is in, and that word with the bits below it cleared (the walk's
    state). Skips the zeros below ``hv0`` from the directory's entry by popcount; ``wi`` is
    ``nw`` when the bit vector ends first (only a corrupt table)."""
    v = hv0 >> sh
    i = np.int64(dirs[t, v])
    pos = (v << sh) + i
    z = hv0 - (v << sh)  # zeros to skip
    wi = pos >> 6
    if wi >= nw:
        return i, nw, np.uint64(0)
    keep = _ALL << np.uint64(pos & 63)
    w = hi[t, wi] & keep
    while z > 0:
        zw = ~hi[t, wi] & keep
        c = K._pc(zw)
        if c < z:
            z -= c
            i += K._pc(w)
            wi += 1
            if wi >= nw:
                return i, nw, np.uint64(0)
            keep = _ALL
            w = hi[t, wi]
            continue
        b = _select64(zw, z - 1)  # the z-th zero
        below = (_U1 << np.uint64(b)) - _U1
        i += K._pc(w & below)
        w &= ~below
        z = 0
    return i, wi, w


@kernel(nogil=True)
def _select(hi, lo, dirs, t, n, h, dbits, i):
    """Key ``i`` of table ``t`` (random access: the directory entry holding index ``i`` by
    binary search, then a popcount walk to its bit)."""
    L = 64 - h
    sh = h - dbits
    v = K.upper_bound(dirs[t], 0, dirs.shape[1], i) - 1
    r = i - np.int64(dirs[t, v])  # ones to pass from the entry's first key
    pos = (v << sh) + np.int64(dirs[t, v])
    wi = pos >> 6
    w = hi[t, wi] & (_ALL << np.uint64(pos & 63))
    nw = hi.shape[1]
    while True:
        c = K._pc(w)
        if r < c or wi + 1 >= nw:  # (the bound: only a corrupt table runs out of ones)
            break
        r -= c
        wi += 1
        w = hi[t, wi]
    hv = (wi << 6) + _select64(w, r) - i
    return (np.uint64(hv) << np.uint64(L)) | _read2(lo, t, i, L, _mask(L))


@kernel(nogil=True)
def _select_many(hi, lo, dirs, t, n, h, dbits, idx, out):
    for j in range(idx.shape[0]):
        out[j] = _select(hi, lo, dirs, t, n, h, dbits, idx[j])


@kernel(nogil=True)
def _equal_range(hi, lo, dirs, t, n, h, dbits, key):
    """``[a, b)``: the positions of table ``t`` whose key equals ``key`` (a == b: none)."""
    L = 64 - h
    mask = _mask(L)
    nw = hi.shape[1]
    hv0 = np.int64(key >> np.uint64(L))
    want = key & mask
    i, wi, w = _seek(hi, t, nw, dirs, h - dbits, hv0)
    a = np.int64(-1)
    while wi < nw and i < n:
        if w == 0:
            wi += 1
            if wi >= nw or (wi << 6) - i > hv0:
                break
            w = hi[t, wi]
            continue
        if (wi << 6) + K._tz(w) - i > hv0:
            break
        x = _read2(lo, t, i, L, mask)
        if x == want:
            if a < 0:
                a = i
        elif x > want:
            break
        w &= w - _U1
        i += 1
    if a < 0:
        return i, i
    return a, i


@dataclass(frozen=True)
class EFTables:
    """Every table of a segment in the Elias–Fano code (see the module docstring)."""

    n: int
    h: int
    dbits: int
    hi: U64  # (T, words)
    lo: U64  # (T, words)
    dirs: npt.NDArray[np.uint32]  # (T, 2**dbits + 1)
    heavy: I64  # (H, 5): table, prefix, sub bits, offset into sub, into hrows (-1); sorted
    sub: npt.NDArray[np.uint32]  # heavy buckets' sub-directories (absolute key indices)
    hrows: npt.NDArray[np.uint32]  # the rows of heavy buckets' keys in tables >= 1
    sums: U64  # (T + 1,) xxh3-64 of each table's hi, lo and dirs rows; of the heavy arrays

    #: array fields as stored by :mod:`neardup.index.format` (``s<i>.ef.<name>``)
    FIELDS = ("hi", "lo", "dirs", "heavy", "sub", "hrows", "sums")

    @property
    def n_tables(self) -> int:
        return int(self.dirs.shape[0])

    @property
    def nbytes(self) -> int:
        arrays = (self.hi, self.lo, self.dirs, self.heavy, self.sub, self.hrows, self.sums)
        return int(sum(a.nbytes for a in arrays))

    def table_bits(self, t: int) -> float:
        """Bits per key of table ``t`` (its unary, low bits, directory and heavy buckets'
        sub-directories and rows)."""
        nb = self.hi[t].nbytes + self.lo[t].nbytes + self.dirs[t].nbytes
        for _t, _p, sb, off, roff in self.heavy[self.heavy[:, 0] == t].tolist():
            nb += 4 * ((1 << sb) + 1)
            if roff >= 0:
                nb += 4 * int(self.sub[off + (1 << sb)] - self.sub[off])
        return 8.0 * nb / max(self.n, 1)

    def meta(self) -> dict[str, int]:
        """The scalars a file header keeps besides the arrays."""
        return {"h": self.h, "dbits": self.dbits}

    @classmethod
    def from_arrays(cls, n: int, meta: dict[str, Any], arrays: dict[str, Any]) -> EFTables:
        return cls(n=n, h=int(meta["h"]), dbits=int(meta["dbits"]), **arrays)

    def decode(self, t: int) -> U64:
        """Every key of table ``t``, sorted."""
        out = np.empty(self.n, dtype=np.uint64)
        if self.n and _decode_one(self.hi, self.lo, t, self.n, self.h, out) < 0:
            raise CorruptFileError(f"Elias-Fano table {t} holds fewer than {self.n} keys")
        return out

    def keys_at(self, t: int, idx: I64) -> U64:
        """Keys at positions ``idx`` of table ``t`` (random access)."""
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        if len(idx) and (int(idx.min()) < 0 or int(idx.max()) >= self.n):
            raise IndexError(f"positions out of range 0..{self.n - 1}")
        out = np.empty(len(idx), dtype=np.uint64)
        _select_many(self.hi, self.lo, self.dirs, t, self.n, self.h, self.dbits, idx, out)
        return out

    def equal_range(self, t: int, key: int) -> tuple[int, int]:
        """``[a, b)``: positions of table ``t`` holding ``key``."""
        a, b = _equal_range(
            self.hi, self.lo, self.dirs, t, self.n, self.h, self.dbits, np.uint64(key)
        )
        return int(a), int(b)

    def validate(self, what: str) -> None:
        """Cheap structural checks on arrays read from a file (shapes, the directory's counts:
        what keeps a probe inside the arrays); raises :class:`CorruptFileError`."""
        n, h, d = self.n, self.h, self.dbits
        T = self.dirs.shape[0] if self.dirs.ndim == 2 else -1
        ok = (
            1 <= h <= 63
            and 1 <= d <= h
            and self.hi.ndim == 2
            and self.hi.shape == (T, (n + (1 << h) + 63) // 64 + 1)
            and self.lo.shape == (T, packed_words(n, 64 - h))
            and self.dirs.shape == (T, (1 << d) + 1)
        )
        if ok and T:
            dd = self.dirs.astype(np.int64)
            ok = bool((dd[:, 0] == 0).all() and (dd[:, -1] == n).all())
            ok = ok and bool((np.diff(dd, axis=1) >= 0).all())
        ok = ok and self.sums.shape == (T + 1,)
        ok = ok and _heavy_ok(self.heavy, self.sub, self.hrows, T, n)
        if not ok:
            raise CorruptFileError(
                f"{what}: inconsistent Elias-Fano table arrays; the file is corrupt"
            )

    def verify(self, what: str) -> None:
        """Check every table's xxh3-64 (raises :class:`CorruptFileError` naming the table)."""
        for t in range(self.n_tables):
            if _table_sum(self.hi[t], self.lo[t], self.dirs[t]) != int(self.sums[t]):
                raise CorruptFileError(
                    f"{what} table {t}: checksum mismatch in its Elias-Fano arrays; the data is"
                    " corrupt: restore it or rebuild the index"
                )
        if _table_sum(self.heavy, self.sub, self.hrows) != int(self.sums[-1]):
            raise CorruptFileError(
                f"{what}: checksum mismatch in the heavy buckets' arrays; the data is"
                " corrupt: restore it or rebuild the index"
            )


def _heavy_ok(heavy: I64, sub: Any, hrows: Any, T: int, n: int) -> bool:
    """Heavy-bucket rows sorted by (table, prefix), their sub-directories inside ``sub`` and
    non-decreasing in ``0..n``, their rows inside ``hrows`` and below ``n``: what keeps a probe
    of a heavy bucket inside the arrays."""
    if heavy.ndim != 2 or heavy.shape[1] != 5 or sub.ndim != 1 or hrows.ndim != 1:
        return False
    if len(hrows) and int(hrows.max()) >= n:
        return False
    if not len(heavy):
        return True
    t, p, sb, off, roff = (heavy[:, j] for j in range(5))
    key_ok = bool(((t[1:] > t[:-1]) | ((t[1:] == t[:-1]) & (p[1:] > p[:-1]))).all())
    if not (key_ok and t.min() >= 0 and t.max() < T and sb.min() >= 1 and sb.max() <= 16):
        return False
    if off.min() < 0 or int((off + (1 << sb) + 1).max()) > len(sub) or roff.min() < -1:
        return False
    for o, b, r in zip(off.tolist(), sb.tolist(), roff.tolist(), strict=True):
        part = sub[o : o + (1 << b) + 1].astype(np.int64)
        if part[-1] > n or (np.diff(part) < 0).any():
            return False
        if r >= 0 and r + int(part[-1] - part[0]) > len(hrows):
            return False
    return True


def _table_sum(*arrays: Any) -> int:
    """xxh3-64 of ``arrays`` (one table's rows of ``hi``, ``lo`` and ``dirs``; or the heavy
    buckets' arrays) as little-endian bytes."""
    x = xxhash.xxh3_64()
    for a in arrays:
        a = np.ascontiguousarray(a).reshape(-1)
        x.update((a.byteswap() if sys.byteorder != "little" else a).data.cast("B"))
    return int(x.intdigest())


def _heavy_buckets(
    keys: U64, rows: npt.NDArray[Any] | None, t: int, pb: int, heavy_min: int, off: int, roff: int
) -> tuple[list[tuple[int, ...]], list[npt.NDArray[np.uint32]], list[npt.NDArray[np.uint32]]]:
    """Heavy buckets of table ``t`` (sorted ``keys``, ``pb``-bit prefixes): a bucket holding
    more than ``max(heavy_min, 8 x the mean bucket)`` keys gets a sub-directory on the next
    ``s`` key bits (``2**s`` ~ size / 8, s <= 16) of the key indices where each sub-cell starts,
    as :mod:`neardup.index.tables` does for uncompressed tables, and with ``rows`` (the row of
    each key) the rows of its keys: a heavy bucket is where an output-heavy query's hits are,
    and a row read there replaces a look-up in table 0 per hit."""
    n = len(keys)
    limit = max(heavy_min, int(8 * n / 2.0**pb))
    out: list[tuple[int, ...]] = []
    subs: list[npt.NDArray[np.uint32]] = []
    rws: list[npt.NDArray[np.uint32]] = []
    if pb >= 64 or n <= limit:
        return out, subs, rws
    pre = keys >> np.uint64(64 - pb)
    cut = np.flatnonzero(pre[1:] != pre[:-1]) + 1
    starts = np.concatenate([[0], cut])
    ends = np.concatenate([cut, [n]])
    big = ends - starts > limit
    for lo_, hi_ in zip(starts[big].tolist(), ends[big].tolist(), strict=True):
        sb = int(min(16, 64 - pb, max(1, int(np.log2((hi_ - lo_) / 8)))))
        v = (keys[lo_:hi_] << np.uint64(pb)) >> np.uint64(64 - sb)
        cells = np.zeros((1 << sb) + 1, dtype=np.int64)
        np.cumsum(np.bincount(v.astype(np.int64), minlength=1 << sb), out=cells[1:])
        out.append((t, int(pre[lo_]), sb, off, -1 if rows is None else roff))
        subs.append((cells + lo_).astype(np.uint32))
        off += len(cells)
        if rows is not None:
            rws.append(np.asarray(rows[lo_:hi_], dtype=np.uint32))
            roff += hi_ - lo_
    return out, subs, rws


def encode_ef(
    tables: Iterable[Any],
    min_pb: int = 64,
    *,
    n: int | None = None,
    n_tables: int | None = None,
    prefix_bits: Any = None,
    heavy_min: int = 256,
) -> EFTables:
    """Every sorted key array of ``tables`` (all of length ``n``) as :class:`EFTables`; with
    ``n`` and ``n_tables`` given, ``tables`` may be an iterator (one table's keys in memory at a
    time). ``prefix_bits`` (per table, e.g. a plan's ``pb``): give heavy buckets of those
    prefixes sub-directories (``heavy_min``: the plan's ``heavy_bucket``). An item of
    ``tables`` may be a pair ``(keys, rows)``: the row of each key, kept for heavy buckets."""
    if n is None or n_tables is None:
        tables = list(tables)
        n, n_tables = (len(_keys_of(tables[0])) if tables else 0), len(tables)
    h, dbits = ef_params(n, min_pb)
    T = n_tables
    hi = np.zeros((T, (n + (1 << h) + 63) // 64 + 1), dtype=np.uint64)
    lo = np.zeros((T, packed_words(n, 64 - h)), dtype=np.uint64)
    dirs = np.zeros((T, (1 << dbits) + 1), dtype=np.uint32)
    sums = np.zeros(T + 1, dtype=np.uint64)
    hv: list[tuple[int, ...]] = []
    hsubs: list[npt.NDArray[np.uint32]] = []
    hrws: list[npt.NDArray[np.uint32]] = []
    t = -1
    for t, item in enumerate(tables):
        keys = np.ascontiguousarray(_keys_of(item), dtype=np.uint64)
        if len(keys) != n or t >= T:
            raise ValueError("every table of a segment holds the same number of keys")
        if n > 1 and bool((keys[1:] < keys[:-1]).any()):
            raise ValueError("encode_ef needs keys sorted ascending")
        _encode_one(keys, np.int64(h), hi[t], lo[t])
        dirs[t] = K.directory(keys, dbits)
        sums[t] = _table_sum(hi[t], lo[t], dirs[t])
        if prefix_bits is not None:
            off = sum(len(x) for x in hsubs)
            roff = sum(len(x) for x in hrws)
            rows = item[1] if isinstance(item, tuple) else None
            r, sb, rw = _heavy_buckets(keys, rows, t, int(prefix_bits[t]), heavy_min, off, roff)
            hv += r
            hsubs += sb
            hrws += rw
    if t != T - 1:
        raise ValueError(f"expected {T} tables, got {t + 1}")
    heavy = np.array(hv, dtype=np.int64).reshape(-1, 5)
    sub = np.concatenate(hsubs) if hsubs else np.zeros(1, dtype=np.uint32)
    hrows = np.concatenate(hrws) if hrws else np.zeros(0, dtype=np.uint32)
    sums[T] = _table_sum(heavy, sub, hrows)
    return EFTables(n=n, h=h, dbits=dbits, hi=hi, lo=lo, dirs=dirs, heavy=heavy, sub=sub,
                    hrows=hrows, sums=sums)  # fmt: skip


def _keys_of(item: Any) -> Any:
    return item[0] if isinstance(item, tuple) else item


def decode_ef(ef: EFTables, t: int = 0) -> U64:
    """Every key of table ``t`` (numba)."""
    return ef.decode(t)


def ef_get(ef: EFTables, t: int, idx: Any) -> U64:
    """Keys at positions ``idx`` of table ``t`` (numba, random access)."""
    return ef.keys_at(t, np.asarray(idx, dtype=np.int64))


def decode_ef_py(ef: EFTables, t: int = 0) -> list[int]:
    """Pure-Python twin of :func:`decode_ef` (the reference the numba decoders are tested
    against): walks ``hi`` bit by bit and cuts the low bits out of one Python int."""
    n, h = ef.n, ef.h
    L = 64 - h
    lo_all = 0
    for j, w in enumerate(ef.lo[t].tolist()):
        lo_all |= int(w) << (64 * j)
    out: list[int] = []
    i = 0
    for wi, w in enumerate(ef.hi[t].tolist()):
        for b in range(64):
            if i < n and (int(w) >> b) & 1:
                high = wi * 64 + b - i
                out.append((high << L) | ((lo_all >> (i * L)) & ((1 << L) - 1)))
                i += 1
    if i != n:
        raise CorruptFileError(f"Elias-Fano table {t} holds {i} keys, not {n}")
    return out


# ---------------------------------------------------------------------------- search kernel
@kernel(nogil=True, inline="always")
def _split_lo(lo, t, L, lmask, a, b, bitpos, dd, key, kk, stack, sp):
    """:func:`neardup.index._kernels._split` on keys of one high part (a heavy bucket's cell
    whose prefix covers the high bits): split ``[a, b)`` on bit ``bitpos`` (from the top; a
    low bit) by binary search on the low bits, push the half that differs from ``key`` there
    (if ``dd + 1 <= kk``), then the half that agrees. Returns the new stack size."""
    bm = np.uint64(1) << np.uint64(63 - bitpos)
    lo_i = a
    hi_i = b
    while lo_i < hi_i:  # first row with the bit set (the rows agree above it)
        mid = (lo_i + hi_i) >> 1
        if _read2(lo, t, mid, L, lmask) & bm:
            hi_i = mid
        else:
            lo_i = mid + 1
    if key & bm:
        sa, sb, oa, ob = lo_i, b, a, lo_i
    else:
        sa, sb, oa, ob = a, lo_i, lo_i, b
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
def search_ef(
    q, k, n, h, dbits, hi, lo, dirs, heavy, sub, hrows, rows, fps, inv_idx, inv_mask, inv_n, pidx,
    pmask, npieces, pb, probe_radius, flips, flipd, nflips, pm_key, pm_orig, qk, out_q, out_r,
    out_d,
):  # fmt: skip
    """Every (query, row, distance) within ``k`` in a segment of Elias–Fano tables, each pair
    once: the output protocol of :func:`neardup.index._kernels.search_tables` (returns the
    count; when it exceeds the outputs' length only the first ones were written).

    A probe of prefix ``p`` reads the directory entry of its high part, skips to the bucket's
    first key in ``hi`` and walks its set bits; key ``i`` is ``(bit - i) << L | low_i``. A
    probe's prefix is either within the high bits (the bucket is whole runs of ones) or longer
    (one run, filtered by the key's range). ``rows`` (T - 1, n) maps table positions to rows
    when the keys do not determine the fingerprint (128-bit); else it is empty and a hit in
    table ``t >= 1`` is un-permuted (``inv_*``) and looked up in table 0, whose positions are
    the rows; a run of equal keys is reported once, as every row of the run in table 0. A
    heavy bucket (``heavy``, ``sub``) is visited cell by cell within the flip budget, a cell of
    one high part descended on its low bits (:func:`_split_lo`), and its hits in tables
    ``t >= 1`` read their rows from ``hrows``. The walk stays inside the arrays whatever
    ``hi`` and ``lo`` hold, given arrays that passed :meth:`EFTables.validate` (a table loaded
    unverified and damaged answers wrongly, it does not read past its arrays)."""
    nq = q.shape[0]
    W = q.shape[1]
    T = dirs.shape[0] if k > 0 else min(dirs.shape[0], 1)  # exact: table 0 alone (search_tables)
    cap = out_q.shape[0]
    cnt = 0
    kk = np.int64(k)
    L = 64 - h
    lmask = _mask(L)
    sh = h - dbits
    nw = hi.shape[1]
    has_rows = rows.shape[0] > 0
    nh = heavy.shape[0]
    one = np.zeros((1, 1), dtype=np.uint64)
    stack = np.empty((4, 256), dtype=np.int64)
    st_lo = stack[0]
    st_hi = stack[1]
    st_bit = stack[2]
    st_d = stack[3]
    G = 8  # queries per prefetch group: issue their memory loads before using them
    for qi in range(nq):
        g = qi % G
        if g == 0:
            g1 = min(nq, qi + G)
            for qj in range(qi, g1):
                for t in range(T):
                    kq = K.permute_one(q, qj, t, pidx, pmask, npieces)
                    qk[(qj - qi) * T + t] = kq
                    K.prefetch2d(dirs, t, np.int64(kq >> np.uint64(L)) >> sh)
            for qj in range(qi, g1):  # the exact prefix's first unary word and low bits
                for t in range(T):
                    v = np.int64(qk[(qj - qi) * T + t] >> np.uint64(L)) >> sh
                    i0 = np.int64(dirs[t, v])
                    K.prefetch2d(hi, t, min(((v << sh) + i0) >> 6, nw - 1))
                    K.prefetch2d(lo, t, (i0 * L) >> 6)
        for t in range(T):
            p_bits = pb[t]
            qkt = qk[g * T + t]
            shift, low, qpre, _ds = K.probe_prefix(p_bits, dbits, qkt)
            for f in range(nflips[t]):
                d0 = flipd[t, f]
                if d0 > kk:
                    break
                p = qpre ^ flips[t, f]
                base = p << shift if p_bits < 64 else p
                last = base | low
                # a heavy bucket (a sub-directory on the next s_bits bits) is walked cell by
                # cell: every cell within the remaining budget of flips on those bits
                s_bits = 0
                off = 0
                has_hrows = False  # the bucket's rows are in hrows (heavy, tables >= 1)
                roff = np.int64(0)
                qv = np.uint64(0)
                if nh > 0:
                    ha = 0
                    hb = nh
                    while ha < hb:  # first entry >= (t, p)
                        hm = (ha + hb) >> 1
                        if heavy[hm, 0] < t or (heavy[hm, 0] == t and np.uint64(heavy[hm, 1]) < p):
                            ha = hm + 1
                        else:
                            hb = hm
                    if ha < nh and heavy[ha, 0] == t and np.uint64(heavy[ha, 1]) == p:
                        s_bits = heavy[ha, 2]
                        off = heavy[ha, 3]
                        has_hrows = heavy[ha, 4] >= 0
                        roff = heavy[ha, 4] - np.int64(sub[off])  # + key index: the row
                        qv = (qkt << np.uint64(p_bits)) >> np.uint64(64 - s_bits)
                jmax = min(kk - d0, s_bits)
                lim = np.uint64(1) << np.uint64(s_bits)
                j = 0
                m = np.uint64(0)
                first = True
                have_prev = False
                prev = np.uint64(0)
                sp = 0  # descent stack (rows lo, hi, bit, distance) inside a heavy cell
                hb0 = np.uint64(0)  # the cell's high part, shifted: keys are hb0 | low bits
                while True:  # the ranges of this probe: the bucket, or cells and their leaves
                    direct = False
                    if sp > 0:
                        sp -= 1
                        i = st_lo[sp]
                        end = st_hi[sp]
                        bitpos = st_bit[sp]
                        dd = st_d[sp]
                        if end - i > K.LEAF and bitpos < 64:
                            sp = _split_lo(lo, t, L, lmask, i, end, bitpos, dd, qkt, kk, stack, sp)
                            continue
                        direct = True
                    elif s_bits:
                        if first:
                            first = False
                        elif j == 0:
                            j = 1
                            m = np.uint64(1)
                        else:  # the next mask of j bits (Gosper's hack), else j + 1 bits
                            gc = m & (~m + _U1)
                            gr = m + gc
                            m = (((gr ^ m) >> np.uint64(2)) // gc) | gr
                            if m >= lim:
                                j += 1
                                m = (_U1 << np.uint64(j)) - _U1
                        if j > jmax:
                            break
                        v = np.int64(qv ^ m)
                        i = np.int64(sub[off + v])
                        end = np.int64(sub[off + v + 1])
                        if end <= i:
                            continue
                        cell = base | (np.uint64(v) << np.uint64(64 - p_bits - s_bits))
                        if p_bits + s_bits >= h:  # one high part: descend on the low bits
                            hb0 = (cell >> np.uint64(L)) << np.uint64(L)
                            st_lo[0] = i
                            st_hi[0] = end
                            st_bit[0] = p_bits + s_bits
                            st_d[0] = d0 + j
                            sp = 1
                            continue
                        pos = np.int64(cell >> np.uint64(L)) + i  # its high part's first bit
                        wi = pos >> 6
                        w = hi[t, wi] & (_ALL << np.uint64(pos & 63)) if wi < nw else np.uint64(0)
                    else:
                        if not first:
                            break
                        first = False
                        i, wi, w = _seek(hi, t, nw, dirs, sh, np.int64(base >> np.uint64(L)))
                        end = n
                    hv1 = np.int64(last >> np.uint64(L))
                    while True:  # the candidates of the range
                        # a tight loop to the next key within k (most keys are not), then the
                        # candidate's checks outside it: the loops keep their registers
                        # (benchmarks/bench_compressed.py measured them faster written so)
                        found = False
                        key = np.uint64(0)
                        c = np.int64(0)
                        if direct:
                            while i < end:
                                key = hb0 | _read2(lo, t, i, L, lmask)
                                i += 1
                                c = K._pc(key ^ qkt)
                                if c <= kk:
                                    found = True
                                    break
                        else:
                            while True:
                                if w == 0:
                                    wi += 1
                                    if wi >= nw or (wi << 6) - i > hv1:
                                        break
                                    w = hi[t, wi]
                                    continue
                                hv = (wi << 6) + K._tz(w) - i
                                if hv > hv1 or i >= end:
                                    break
                                w &= w - _U1
                                key = (np.uint64(hv) << np.uint64(L)) | _read2(lo, t, i, L, lmask)
                                i += 1
                                c = K._pc(key ^ qkt)
                                if c <= kk:
                                    found = True
                                    break
                        if not found:
                            break
                        x = key ^ qkt
                        if key < base or key > last:
                            continue
                        pos = i - 1
                        x0 = np.uint64(0)
                        x1 = np.uint64(0)
                        if t == 0 or has_rows or has_hrows:
                            if t == 0:
                                row = pos
                            elif has_rows:
                                row = np.int64(rows[t - 1, pos])
                            else:
                                row = np.int64(hrows[roff + pos])
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
                        dup = have_prev and key == prev
                        have_prev = True
                        prev = key
                        if dup or K._seen_earlier(t, W, x, x0, x1, pm_key, pm_orig, probe_radius):
                            continue
                        one[0, 0] = key
                        fp = K.permute_one(one, 0, t, inv_idx, inv_mask, inv_n)
                        ra, rb = _equal_range(hi, lo, dirs, 0, n, h, dbits, fp)
                        for row in range(ra, rb):
                            if cnt < cap:
                                out_q[cnt] = qi
                                out_r[cnt] = row
                                out_d[cnt] = c
                            cnt += 1
    return cnt
