"""Compressed index segments: permuted sorted tables stored in a codec, searched exactly.

A :class:`CompressedSegment` holds, for ``n`` fingerprints, every table of the plan in one of
two codecs (``HammingIndex(compress=True, codec=...)``):

* ``"ef"`` (the default): the Elias–Fano code (:mod:`neardup.index.codec_ef`), ~2 bits per key
  over the information bound, every key decodable on its own;
* ``"blocks"``: the paper's block code (:mod:`neardup.index.codec_blocks`), keys decoded
  serially from each block's first key.

and the ids of its rows (in table 0's order) as offsets from the smallest id, packed in as
many bits as their span needs (:class:`PackedIds`). For 64-bit fingerprints table 0's keys *are*
the fingerprints (sorted, so a table-0 position is a row) and a hit in a further table is
mapped to its rows by un-permuting its key and looking it up in table 0 (the paper's scheme):
no fingerprints and no row arrays are stored. 128-bit fingerprints keep both (a 64-bit key does
not determine a 128-bit fingerprint).

Searches go through one kernel call per codec for any number of segments
(:class:`CompressedList`: a numba typed list of per-segment array tuples, see
``_typed.typed_list_like``), which also maps rows to ids and drops removed rows. Results equal
the uncompressed index's and brute force (``tests/index/test_index_compressed.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .._jit import kernel
from .._typed import typed_list_append, typed_list_like
from ..errors import ConfigError, CorruptFileError
from .codec_blocks import DEFAULT_BLOCK_BYTES, BlockTables, check_block_bytes, search_blocks
from .codec_ef import EFTables, encode_ef, pack_bits, search_ef, unpack_bits
from .tables import PlanArrays, SegmentRows, _ro, _ro_empty, sorted_table

__all__ = [
    "CODECS",
    "DEFAULT_BLOCK_BYTES",
    "DEFAULT_CODEC",
    "CompressedList",
    "CompressedSegment",
    "PackedIds",
    "check_block_bytes",
    "check_codec",
]

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
Rows = tuple[I64, I64, I32]

#: the table codecs of compressed segments
CODECS = ("ef", "blocks")
#: the default codec: the one that meets both the size and the speed targets (docs/index.md)
DEFAULT_CODEC = "ef"
_MASK64 = (1 << 64) - 1


def check_codec(codec: Any) -> str:
    """``codec`` if it names a codec, else :class:`ConfigError` listing them."""
    if codec not in CODECS:
        raise ConfigError(f"codec must be one of {', '.join(map(repr, CODECS))}, got {codec!r}")
    return str(codec)


# ---------------------------------------------------------------------------- ids
@dataclass(frozen=True)
class PackedIds:
    """``n`` int64 ids as offsets from ``base`` (their minimum), ``bits`` (1..64) each, packed
    least significant first in ``words``: a segment's ids in ``ceil(log2(span + 1))`` bits."""

    n: int
    base: int
    bits: int
    words: U64

    @classmethod
    def of(cls, ids: Any) -> PackedIds:
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if not len(ids):
            return cls(0, 0, 1, np.zeros(1, dtype=np.uint64))
        base = int(ids.min())
        bits = max(1, (int(ids.max()) - base).bit_length())
        off = ids.view(np.uint64) - np.uint64(base & _MASK64)  # wraps: ids span < 2**64
        return cls(len(ids), base, bits, pack_bits(off, bits))

    def at(self, rows: Any) -> I64:
        """The ids of ``rows`` (an index array or a slice)."""
        if isinstance(rows, slice):
            rows = np.arange(*rows.indices(self.n), dtype=np.int64)
        off = unpack_bits(self.words, self.bits, rows)
        return (off + np.uint64(self.base & _MASK64)).view(np.int64)

    def validate(self, what: str) -> None:
        if not (1 <= self.bits <= 64 and len(self.words) == (self.n * self.bits + 63) // 64 + 1):
            raise CorruptFileError(
                f"{what}: packed ids do not match their count; the file is corrupt"
            )


def inverse_pieces(pa: PlanArrays) -> tuple[I64, U64, I64] | None:
    """Pieces (as ``pa.pidx``/``pmask``/``npieces``) mapping each table's 64-bit key back to
    the fingerprint, or None when a key does not determine it (128-bit fingerprints)."""
    if pa.words != 1:
        return None
    T = pa.n_tables
    P = pa.pidx.shape[1]
    idx = np.zeros((max(T, 1), P, 3), dtype=np.int64)
    msk = np.zeros((max(T, 1), P), dtype=np.uint64)
    cnt = np.zeros(max(T, 1), dtype=np.int64)
    for t in range(T):
        cover = 0
        for j in range(int(pa.npieces[t])):
            _w, sshift, dshift = (int(v) for v in pa.pidx[t, j])
            width = int(pa.pmask[t, j]).bit_length()
            idx[t, j] = (0, dshift, sshift)  # key bits at dshift go back to sshift
            msk[t, j] = pa.pmask[t, j]
            cover += width
        if cover != 64:
            return None
        cnt[t] = pa.npieces[t]
    return idx, msk, cnt


# ---------------------------------------------------------------------------- list kernels
@kernel(nogil=True, inline="always")
def _to_ids(out_q, out_r, out_d, lo, c, idw, idbits, base, alive, some_dead):
    """Rows ``[lo, lo + c)`` of the outputs to ids (packed offsets + ``base``), dropping dead
    rows; returns the new end."""
    mask = (np.uint64(2) << np.uint64(idbits - 1)) - np.uint64(1)
    w = lo
    for j in range(lo, lo + c):
        r = out_r[j]
        if some_dead and not alive[r]:
            continue
        b = r * idbits
        x = idw[b >> 6] >> np.uint64(b & 63)
        x |= (idw[(b >> 6) + 1] << np.uint64(1)) << np.uint64(63 - (b & 63))
        out_q[w] = out_q[j]
        out_r[w] = base + np.int64(x & mask)
        out_d[w] = out_d[j]
        w += 1
    return w


@kernel(nogil=True)
def _search_ef_list(q, k, segs, qk, out_q, out_r, out_d):
    """:func:`~neardup.index.codec_ef.search_ef` over every entry of ``segs`` in one call,
    writing (query, *id*, distance); returns the count (call again with that much room when it
    exceeds the outputs)."""
    cap = out_q.shape[0]
    total = 0
    for si in range(len(segs)):
        e = segs[si]
        if e[0] == 0:
            continue
        lo = min(total, cap)
        c = search_ef(
            q, k, e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7], e[8], e[9], e[10], e[11],
            e[12], e[13], e[14], e[15], e[16], e[17], e[18], e[19], e[20], e[21], e[22], e[23],
            qk, out_q[lo:], out_r[lo:], out_d[lo:],
        )  # fmt: skip
        if total + c > cap:
            total += c  # no room: only count (the caller retries with enough)
            continue
        total = _to_ids(out_q, out_r, out_d, lo, c, e[24], e[25], e[26], e[27], e[28] > 0)
    return total


@kernel
def _search_ef_list_gil(q, k, segs, qk, out_q, out_r, out_d):
    """:func:`_search_ef_list` holding the GIL (a few queries; see
    ``_kernels.search_tables_gil``)."""
    return _search_ef_list(q, k, segs, qk, out_q, out_r, out_d)


@kernel(nogil=True)
def _search_blocks_list(q, k, segs, qk, buf, buf0, out_q, out_r, out_d, err):
    """:func:`~neardup.index.codec_blocks.search_blocks` over every entry of ``segs``, as
    :func:`_search_ef_list`; a negative count is the code of a block that does not decode,
    with ``err[0]`` set to its entry."""
    cap = out_q.shape[0]
    total = 0
    for si in range(len(segs)):
        e = segs[si]
        if e[0] == 0:
            continue
        lo = min(total, cap)
        c = search_blocks(
            q, k, e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7], e[8], e[9], e[10], e[11],
            e[12], e[13], e[14], e[15], e[16], e[17], e[18], e[19], e[20], e[21], e[22],
            e[23], e[24], e[25], qk, buf, buf0, out_q[lo:], out_r[lo:], out_d[lo:],
        )  # fmt: skip
        if c < 0:
            err[0] = si
            return c
        if total + c > cap:
            total += c
            continue
        total = _to_ids(out_q, out_r, out_d, lo, c, e[26], e[27], e[28], e[29], e[30] > 0)
    return total


@kernel
def _search_blocks_list_gil(q, k, segs, qk, buf, buf0, out_q, out_r, out_d, err):
    """:func:`_search_blocks_list` holding the GIL."""
    return _search_blocks_list(q, k, segs, qk, buf, buf0, out_q, out_r, out_d, err)


_PROTOS: dict[str, tuple[Any, ...]] = {}


def _proto(codec: str) -> tuple[Any, ...]:
    """An entry of :meth:`CompressedSegment.entry`'s numba type for ``codec`` (empty arrays):
    the item type of the codec's typed list."""
    if codec not in _PROTOS:
        u64_1, u64_2 = _ro_empty(np.uint64, 1), _ro_empty(np.uint64, 2)
        i64_1, i64_2 = _ro_empty(np.int64, 1), _ro_empty(np.int64, 2)
        u16_2, u32_1 = _ro_empty(np.uint16, 2), _ro_empty(np.uint32, 1)
        tables: tuple[Any, ...] = (
            (0, 0, u64_2, u64_2, _ro_empty(np.uint32, 2), i64_2, u32_1, u32_1)
            if codec == "ef"
            else (u64_1, u32_1, u64_1, u16_2, u16_2, i64_1, i64_1, 0, i64_2, 0)
        )
        _PROTOS[codec] = (
            0, *tables, _ro_empty(np.uint32, 2), u64_2, _ro_empty(np.int64, 3), u64_2, i64_1,
            _ro_empty(np.int64, 3), u64_2, i64_1, i64_1, i64_1, u64_2, i64_2, i64_1, u64_2,
            u64_2, u64_1, 0, 0, _ro_empty(np.bool_, 1), 0,
        )  # fmt: skip
    return _PROTOS[codec]


class CompressedList:
    """Compressed segments (of any indexes) searched in one kernel call per codec.

    Add each segment with :meth:`append` (its arrays are viewed, not copied); :meth:`search`
    returns (query, id, distance) of every live row within ``k``. The typed lists are made and
    filled by cached kernels (numba compiles ``numba.typed.List``'s own methods again in every
    process, see ``_typed.typed_list_like``)."""

    def __init__(self) -> None:
        self._lists: dict[str, Any] = {}
        self._count = dict.fromkeys(CODECS, 0)
        self._tables = 1
        self._block_bytes = 8

    def __len__(self) -> int:
        return sum(self._count.values())

    def append(self, seg: CompressedSegment, pa: PlanArrays) -> None:
        """Add ``seg`` (searched with plan arrays ``pa``)."""
        c = seg.codec
        if c not in self._lists:
            self._lists[c] = typed_list_like(_proto(c))
        typed_list_append(self._lists[c], seg.entry(pa))
        self._count[c] += 1
        self._tables = max(self._tables, pa.n_tables)
        if isinstance(seg.tables, BlockTables):
            self._block_bytes = max(self._block_bytes, seg.tables.block_bytes)

    def search(self, q: U64, k: int, cap: int = 0) -> Rows:
        """(query, id, distance) of every live row within ``k`` of a query of ``q`` (n, W);
        raises :class:`CorruptFileError` naming a block that does not decode."""
        parts = [self._search(c, q, k, cap) for c in CODECS if self._count[c]]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return _E_I64, _E_I64, _E_I32
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))  # type: ignore[return-value]

    def _search(self, codec: str, q: U64, k: int, cap: int) -> Rows:
        qk = np.empty(9 * self._tables, dtype=np.uint64)
        cap = cap or 4 * len(q) + 64
        small = len(q) <= 8
        segs = self._lists[codec]
        if codec == "blocks":
            buf = np.empty(self._block_bytes * 8 + 2, dtype=np.uint64)
            buf0 = np.empty_like(buf)
            err = np.zeros(1, dtype=np.int64)
        while True:
            out_q = np.empty(cap, dtype=np.int64)
            out_r = np.empty(cap, dtype=np.int64)
            out_d = np.empty(cap, dtype=np.int32)
            fn: Any
            if codec == "ef":
                fn = _search_ef_list_gil if small else _search_ef_list
                cnt = fn(q, k, segs, qk, out_q, out_r, out_d)
            else:
                fn = _search_blocks_list_gil if small else _search_blocks_list
                cnt = fn(q, k, segs, qk, buf, buf0, out_q, out_r, out_d, err)
                if cnt < 0:
                    c = -cnt - 1
                    raise CorruptFileError(
                        f"compressed segment {int(err[0])}: table {c % 1000} block {c // 1000}"
                        " does not decode; the data is corrupt: restore it or rebuild the index"
                    )
            if cnt <= cap:
                return out_q[:cnt], out_r[:cnt], out_d[:cnt]
            cap = int(cnt)


_E_I64 = np.empty(0, dtype=np.int64)
_E_I32 = np.empty(0, dtype=np.int32)


# ---------------------------------------------------------------------------- the segment
class CompressedSegment(SegmentRows):
    """An immutable index segment whose tables are compressed (``tables``: :class:`EFTables`
    or :class:`BlockTables`).

    Per fingerprint it keeps the compressed tables and its id (in table 0's order, packed:
    :class:`PackedIds`), and only for 128-bit fingerprints the fingerprints themselves and each
    further table's rows. Duck-typed like :class:`~neardup.index.tables.TableSegment` for
    :class:`~neardup.index.HammingIndex`; :class:`~neardup.index.multi.IndexSet` searches it
    through a :class:`CompressedList`.
    """

    __slots__ = ("_inv", "_one", "fps_raw", "packed", "rows", "tables", "words")

    def __init__(
        self,
        tables: EFTables | BlockTables,
        ids: PackedIds,
        words: int,
        pa: PlanArrays,
        fps_raw: U64 | None = None,
        rows: npt.NDArray[np.uint32] | None = None,
        alive: npt.NDArray[np.bool_] | None = None,
    ) -> None:
        self.tables = tables
        self.packed = ids
        self.words = words
        self.fps_raw = fps_raw  # (n, 2) for 128-bit; None for 64-bit (decoded from table 0)
        self.rows = rows
        self.alive = alive
        self.n_dead = 0 if alive is None else int(ids.n - np.count_nonzero(alive))
        self._id_index: tuple[I64, I64] | None = None
        self._one: tuple[PlanArrays, int, CompressedList] | None = None  # search(): a list of self
        self._inv = inverse_pieces(pa) if rows is None else None
        if rows is None and self._inv is None and ids.n:
            raise CorruptFileError("compressed segment of 128-bit fingerprints lacks its rows")

    @property
    def codec(self) -> str:
        return "ef" if isinstance(self.tables, EFTables) else "blocks"

    @property
    def n(self) -> int:
        return self.packed.n

    @property
    def ids(self) -> I64:
        """The int64 ids in row order."""
        return self.packed.at(slice(None))

    def ids_at(self, rows: Any) -> I64:
        """The int64 ids of ``rows`` (an index array or a slice)."""
        return self.packed.at(rows)

    @property
    def nbytes(self) -> int:
        total = self.packed.words.nbytes + self.tables.nbytes
        for a in (self.fps_raw, self.rows, self.alive):
            if a is not None:
                total += a.nbytes
        return int(total)

    @classmethod
    def build(
        cls,
        fps: U64,
        ids: I64,
        pa: PlanArrays,
        block_bytes: int = DEFAULT_BLOCK_BYTES,
        codec: str = DEFAULT_CODEC,
    ) -> CompressedSegment:
        """Sort ``fps`` (n, W) into every table of ``pa`` and compress each table in
        ``codec`` (``block_bytes``: the block size of ``"blocks"``)."""
        if pa.n_tables == 0:
            raise ConfigError("compressed segments need a table plan (layout 'tables')")
        check_codec(codec)
        n = fps.shape[0]
        T = pa.n_tables
        key0, order = sorted_table(fps, pa, 0)
        fps_s = np.ascontiguousarray(fps[order])
        ids_s = np.ascontiguousarray(ids[order])
        del order
        inv = inverse_pieces(pa)
        rows = None if inv is not None else np.empty((T - 1, n), dtype=np.uint32)

        def tables(first: list[U64]) -> Iterator[Any]:
            """One table's keys at a time (the codec encodes each before the next is made),
            for the Elias-Fano code with their rows (kept for heavy buckets, 64-bit)."""
            yield first.pop()
            for t in range(1, T):
                kt, o = sorted_table(fps_s, pa, t)
                if rows is not None:
                    rows[t - 1] = o
                yield (kt, o) if codec == "ef" and rows is None else kt
                del kt, o

        first = [key0]
        del key0
        if codec == "ef":
            tabs: EFTables | BlockTables = encode_ef(
                tables(first), pa.min_pb, n=n, n_tables=T, prefix_bits=pa.pb, heavy_min=pa.heavy
            )
        else:
            tabs = BlockTables.encode(tables(first), check_block_bytes(block_bytes), pa.min_pb)
        return cls(tabs, PackedIds.of(ids_s), pa.words, pa, None if inv is not None else fps_s,
                   rows)  # fmt: skip

    @property
    def fps(self) -> U64:
        """Fingerprints (n, W) in row order (decoded from table 0 for 64-bit)."""
        if self.fps_raw is not None:
            return self.fps_raw
        return self.tables.decode(0).reshape(-1, 1)

    def fps_at(self, rows: I64) -> U64:
        """Fingerprints (m, W) of ``rows`` (random access to table 0 for 64-bit)."""
        if self.fps_raw is not None:
            return self.fps_raw[rows]
        return self.tables.keys_at(0, np.asarray(rows, dtype=np.int64)).reshape(-1, 1)

    def live_arrays(self) -> tuple[U64, I64]:
        alive = self.alive
        fps = self.fps
        if alive is None or self.n_dead == 0:
            return fps, self.ids
        mask = alive.copy()
        return fps[mask], self.ids[mask]

    def entry(self, pa: PlanArrays) -> tuple[Any, ...]:
        """This segment as one entry of its codec's list kernel (arrays viewed read-only, no
        copies; rebuilt when rows die, since ``alive`` may be replaced)."""
        rows: Any
        if self._inv is not None:
            inv_idx, inv_mask, inv_n = self._inv
            rows = np.zeros((1, 1), dtype=np.uint32)[:0]
            fps: Any = np.zeros((1, 1), dtype=np.uint64)
        else:
            inv_idx, inv_mask, inv_n = pa.pidx, pa.pmask, pa.npieces
            rows = self.rows if self.rows is not None else np.zeros((0, 1), dtype=np.uint32)
            fps = self.fps_raw
        tb = self.tables
        if isinstance(tb, EFTables):
            tables: tuple[Any, ...] = (
                int(tb.h), int(tb.dbits), _ro(tb.hi, np.uint64, 2), _ro(tb.lo, np.uint64, 2),
                _ro(tb.dirs, np.uint32, 2), _ro(tb.heavy, np.int64, 2), _ro(tb.sub, np.uint32, 1),
                _ro(tb.hrows, np.uint32, 1),
            )  # fmt: skip
        else:
            tables = (
                _ro(tb.bkeys, np.uint64, 1), _ro(tb.bstart, np.uint32, 1),
                _ro(tb.words, np.uint64, 1), _ro(tb.luts, np.uint16, 2),
                _ro(tb.pluts, np.uint16, 2), _ro(tb.boff, np.int64, 1), _ro(tb.woff, np.int64, 1),
                int(tb.block_bytes // 8), _ro(tb.dirs, np.int64, 2), int(tb.dbits),
            )  # fmt: skip
        return (
            int(self.n), *tables, _ro(rows, np.uint32, 2), _ro(fps, np.uint64, 2),
            _ro(inv_idx, np.int64, 3), _ro(inv_mask, np.uint64, 2), _ro(inv_n, np.int64, 1),
            _ro(pa.pidx, np.int64, 3), _ro(pa.pmask, np.uint64, 2),
            _ro(pa.npieces, np.int64, 1), _ro(pa.pb, np.int64, 1),
            _ro(pa.probe_radius, np.int64, 1), _ro(pa.flips, np.uint64, 2),
            _ro(pa.flipd, np.int64, 2), _ro(pa.nflips, np.int64, 1),
            _ro(pa.pm_key, np.uint64, 2), _ro(pa.pm_orig, np.uint64, 2),
            _ro(self.packed.words, np.uint64, 1), int(self.packed.bits), int(self.packed.base),
            _ro(self.alive if self.alive is not None else np.zeros(0, np.bool_), np.bool_, 1),
            int(self.n_dead),
        )  # fmt: skip

    def search(self, q: U64, k: int, pa: PlanArrays, cap: int = 0) -> Rows:
        """(query, id, distance) of every live row within ``k`` of a query."""
        if self.n == 0:
            return _E_I64, _E_I64, _E_I32
        cached = self._one
        if cached is None or cached[0] is not pa or cached[1] != self.n_dead:
            lst = CompressedList()
            lst.append(self, pa)
            cached = self._one = (pa, self.n_dead, lst)
        return cached[2].search(q, k, cap)

    def search_rows(self, q: U64, k: int, pa: PlanArrays) -> Rows:
        """(query, row, distance) of every row (dead ones too) within ``k``: the codec's
        kernel called with every array as an argument (the reference the list path is tested
        against)."""
        e = self.entry(pa)
        kernel: Any = search_ef if self.codec == "ef" else search_blocks
        T = max(pa.n_tables, 1)
        cap = 4 * len(q) + 64
        while True:
            out = (np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int32))
            qk = np.empty(9 * T, dtype=np.uint64)
            if self.codec == "ef":
                cnt = kernel(q, k, *e[:24], qk, *out)
            else:
                buf = np.empty(int(e[8]) * 64 + 2, dtype=np.uint64)
                cnt = kernel(q, k, *e[:26], qk, buf, np.empty_like(buf), *out)
                if cnt < 0:
                    raise CorruptFileError("compressed segment: a block does not decode")
            if cnt <= cap:
                return out[0][:cnt], out[1][:cnt], out[2][:cnt]
            cap = int(cnt)

    def verify(self, what: str = "compressed segment") -> None:
        """Check every table's checksums (raises :class:`CorruptFileError` naming the table,
        and for the block code the block)."""
        self.tables.verify(what)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": self.n,
            "live": self.n_live,
            "bytes": self.nbytes,
            "compressed": True,
            "codec": self.codec,
            "id_bits": self.packed.bits,
        }
        if isinstance(self.tables, BlockTables):
            out["block_bytes"] = self.tables.block_bytes
        return out
