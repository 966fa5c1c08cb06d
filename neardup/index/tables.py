"""Permuted sorted tables: plan arrays for the kernels, and immutable index segments.

A :class:`TableSegment` (named so beside the store's :class:`neardup.store.segment.Segment`,
a file of documents) holds ``n`` fingerprints sorted by table 0's key, their int64 ids, a
tombstone mask, and for each table ``t`` the sorted permuted keys ``keys[t]`` (8 B) and, for
``t >= 1``, the row each key came from (``uint32``, 4 B), plus a directory of offsets for the top
``dbits`` bits of the keys (so a probe needs no binary search when the prefix fits the
directory). For 64-bit fingerprints table 0 is the identity permutation, so the fingerprints
*are* ``keys[0]`` and cost nothing extra: 8 B id + 8 B fingerprint + 12 B per further table.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .._arrays import find_sorted
from . import _kernels as K
from .plan import Plan

__all__ = [
    "PlanArrays",
    "SegmentRows",
    "TableSegment",
    "plan_arrays",
    "sorted_table",
    "table_keys",
    "table_prefixes",
]

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class PlanArrays:
    """A :class:`Plan` compiled to the flat arrays the numba kernels take.

    ``probe_radius[t]`` is table ``t``'s probe radius (:attr:`TableSpec.radius
    <neardup.index.plan.TableSpec>`, the ``"radius"`` key of a saved plan, capped at the
    plan's ``max_distance``): prefixes within that many bit flips of the query's are probed.
    It is not the search distance ``k`` (``max_distance``) a search asks for.
    """

    words: int
    n_tables: int
    pidx: I64
    pmask: U64
    npieces: I64
    pb: I64
    probe_radius: I64
    flips: U64
    flipd: I64
    nflips: I64
    pm_key: U64
    pm_orig: U64
    heavy: int
    identity0: bool
    min_pb: int


def _pieces(order: tuple[tuple[int, int], ...]) -> list[tuple[int, int, int, int]]:
    """(src_word, src_shift, width, dst_shift) pieces building a 64-bit key from bit ranges."""
    out = []
    opos = 0
    for s, w in order:
        while w > 0 and opos < 64:
            word, ls = divmod(s, 64)
            take = min(w, 64 - ls, 64 - opos)
            out.append((word, 64 - ls - take, take, 64 - opos - take))
            s += take
            w -= take
            opos += take
    return out


def _mask(width: int) -> int:
    return (1 << width) - 1


def _permute_int(value: int, bits: int, order: tuple[tuple[int, int], ...]) -> int:
    """Permute a Python int (``bits`` wide) into table order, truncated to the first 64 bits."""
    out = 0
    pos = 0
    for s, w in order:
        chunk = (value >> (bits - s - w)) & _mask(w)
        out = (out << w) | chunk
        pos += w
    return out >> (pos - 64) if pos > 64 else out << (64 - pos)


def _ro(a: Any, dtype: Any, ndim: int) -> Any:
    """A read-only, C-contiguous plain ``ndarray`` view (no copy when ``a`` already is one):
    every entry of a typed list then has one numba type, and a plain ndarray (not a
    ``np.memmap`` subclass) keeps numba's argument unboxing on its fast path."""
    v = np.ascontiguousarray(a, dtype=dtype).view(np.ndarray)
    if v.ndim != ndim:
        raise ValueError(f"expected a {ndim}-d array, got shape {v.shape}")
    if v.flags.writeable:
        v = v.view()
        v.flags.writeable = False
    return v


def _ro_empty(dtype: Any, ndim: int) -> Any:
    """A read-only placeholder array of ``dtype`` and ``ndim`` (one element a dimension): an
    absent array's stand-in where a kernel or a typed list needs its type."""
    return _ro(np.zeros((1,) * ndim, dtype=dtype), dtype, ndim)


def plan_arrays(plan: Plan) -> PlanArrays:
    """Compile ``plan`` (kind "tables") for the kernels; brute plans give zero tables."""
    words = plan.bits // 64
    T = len(plan.tables)
    pieces = [_pieces(t.order) for t in plan.tables]
    P = max((len(p) for p in pieces), default=1)
    pidx = np.zeros((max(T, 1), P, 3), dtype=np.int64)
    pmask = np.zeros((max(T, 1), P), dtype=np.uint64)
    npieces = np.zeros(max(T, 1), dtype=np.int64)
    for t, ps in enumerate(pieces):
        npieces[t] = len(ps)
        for j, (word, sshift, width, dshift) in enumerate(ps):
            pidx[t, j] = (word, sshift, dshift)
            pmask[t, j] = _mask(width)
    pb = np.array([spec.prefix_bits for spec in plan.tables] or [64], dtype=np.int64)
    # a table's probe radius (TableSpec.radius), capped at the search distance it serves
    probe_radius = np.array(
        [min(spec.radius, plan.max_distance) for spec in plan.tables] or [0], dtype=np.int64
    )
    flip_lists = []
    for t, spec in enumerate(plan.tables):
        fl: list[tuple[int, int]] = []
        for d in range(int(probe_radius[t]) + 1):
            for bits_ in itertools.combinations(range(spec.prefix_bits), d):
                m = 0
                for b in bits_:
                    m |= 1 << b
                fl.append((m, d))
        flip_lists.append(fl)
    F = max((len(f) for f in flip_lists), default=1)
    flips = np.zeros((max(T, 1), F), dtype=np.uint64)
    flipd = np.zeros((max(T, 1), F), dtype=np.int64)
    nflips = np.zeros(max(T, 1), dtype=np.int64)
    for t, fl in enumerate(flip_lists):
        nflips[t] = len(fl)
        for j, (m, d) in enumerate(fl):
            flips[t, j] = m
            flipd[t, j] = d
    # prefix masks: in the original bit space (per word) and in every table's key space
    pm_orig = np.zeros((max(T, 1), words), dtype=np.uint64)
    pm_key = np.zeros((max(T, 1), max(T, 1)), dtype=np.uint64)
    full = plan.bits
    for t2, spec in enumerate(plan.tables):
        pmask_int = 0
        left = spec.prefix_bits
        for s, w in spec.order:
            take = min(w, left)
            if take <= 0:
                break
            pmask_int |= _mask(take) << (full - s - take)
            left -= take
        for wi in range(words):
            pm_orig[t2, wi] = (pmask_int >> (64 * (words - 1 - wi))) & _mask(64)
        for t, spec_t in enumerate(plan.tables):
            pm_key[t, t2] = _permute_int(pmask_int, full, spec_t.order)
    identity0 = bool(T) and plan.tables[0].order == ((0, plan.bits),)
    return PlanArrays(
        words=words,
        n_tables=T,
        pidx=pidx,
        pmask=pmask,
        npieces=npieces,
        pb=pb,
        probe_radius=probe_radius,
        flips=flips,
        flipd=flipd,
        nflips=nflips,
        pm_key=pm_key,
        pm_orig=pm_orig,
        heavy=int(plan.heavy_bucket),
        identity0=identity0,
        min_pb=int(pb.min()) if T else 64,
    )


_WS_CAP = 256
_E_I64 = np.empty(0, dtype=np.int64)
_E_I32 = np.empty(0, dtype=np.int32)
_tls = threading.local()


def table_keys(fps: U64, pa: PlanArrays, t: int) -> U64:
    """Table ``t``'s 64-bit keys (the permuted fingerprints) of every row of ``fps`` (n, W),
    in row order."""
    return K.permute_many(fps, t, pa.pidx, pa.pmask, pa.npieces)


def sorted_table(fps: U64, pa: PlanArrays, t: int) -> tuple[U64, I64]:
    """Table ``t`` of ``fps`` (n, W): its keys sorted ascending, and the row of ``fps`` each
    came from (ties in row order). What every segment kind builds its tables from."""
    return K.sort_with_rows(table_keys(fps, pa, t))


def table_prefixes(fps: U64, pa: PlanArrays, t: int) -> U64:
    """Table ``t``'s key prefixes (its top ``pa.pb[t]`` bits) of every row of ``fps`` (n, W),
    unsorted: what the prefix buckets of that table are made of."""
    return table_keys(fps, pa, t) >> np.uint64(64 - int(pa.pb[t]))


class _Workspace:
    __slots__ = ("out_d", "out_q", "out_r", "qk", "stack")

    def __init__(self, n_tables: int) -> None:
        self.qk = np.empty(8 * max(n_tables, 1), dtype=np.uint64)
        self.stack = np.empty((4, 256), dtype=np.int64)
        self.out_q = np.empty(_WS_CAP, dtype=np.int64)
        self.out_r = np.empty(_WS_CAP, dtype=np.int64)
        self.out_d = np.empty(_WS_CAP, dtype=np.int32)


def _workspace(n_tables: int) -> _Workspace:
    """Per-thread scratch arrays for the kernels (saves allocations on single lookups)."""
    ws = getattr(_tls, "ws", None)
    if ws is None or ws.qk.shape[0] < 8 * n_tables:
        ws = _tls.ws = _Workspace(n_tables)
    return ws


def _heavy_subdirs(keys: U64, pa: PlanArrays) -> tuple[I64, I64, I64]:
    """Per-table heavy threshold, and sub-directories of the heavy buckets.

    A bucket is heavy when it holds more than ``max(plan.heavy_bucket, 8 x the mean bucket)``
    keys; it then gets a directory on the next ``s`` key bits (``2**s`` ~ size / 8, s <= 16), so
    a probe visits only the sub-cells within its remaining flip budget, then descends.
    Returns ``heavy`` (T,), ``hv`` (H, 4) rows (table, bucket start, s, offset into sub), ``sub``.
    """
    T, n = keys.shape
    heavy = np.empty(T, dtype=np.int64)
    hv_rows: list[tuple[int, int, int, int]] = []
    subs: list[np.ndarray] = []
    off = 0
    for t in range(T):
        pb = int(pa.pb[t])
        heavy[t] = max(pa.heavy, int(8 * n / 2.0**pb))
        if pb >= 64 or n <= heavy[t]:
            continue
        pre = keys[t] >> np.uint64(64 - pb)
        cut = np.flatnonzero(pre[1:] != pre[:-1]) + 1
        starts = np.concatenate([[0], cut])
        ends = np.concatenate([cut, [n]])
        for lo, hi in zip(
            starts[ends - starts > heavy[t]].tolist(),
            ends[ends - starts > heavy[t]].tolist(),
            strict=True,
        ):
            s = int(min(16, 64 - pb, max(1, int(np.log2((hi - lo) / 8)))))
            v = (keys[t][lo:hi] << np.uint64(pb)) >> np.uint64(64 - s)
            offs = np.zeros((1 << s) + 1, dtype=np.int64)
            np.cumsum(np.bincount(v.astype(np.int64), minlength=1 << s), out=offs[1:])
            subs.append(offs + lo)
            hv_rows.append((t, lo, s, off))
            off += len(offs)
    hv = np.array(hv_rows, dtype=np.int64).reshape(-1, 4)
    sub = np.concatenate(subs) if subs else np.zeros(1, dtype=np.int64)
    return heavy, hv, sub


def _dbits(n: int, min_pb: int) -> int:
    return int(min(min_pb, max(1, min(22, int(n).bit_length() - 2))))


class SegmentRows:
    """What every index segment (:class:`TableSegment`, the compressed one) does with its ids
    and tombstones. The segment defines ``n`` and ``ids_at`` and sets ``alive`` (None: every
    row alive), ``n_dead`` and ``_id_index``."""

    __slots__ = ("_id_index", "alive", "n_dead")
    alive: npt.NDArray[np.bool_] | None
    n_dead: int
    _id_index: tuple[I64, I64] | None

    @property
    def n(self) -> int:
        raise NotImplementedError

    def ids_at(self, rows: Any) -> I64:
        raise NotImplementedError

    @property
    def n_live(self) -> int:
        return self.n - self.n_dead

    def id_index(self) -> tuple[I64, I64]:
        """(sorted ids, their rows), built on first use (12 B per fingerprint) and cached."""
        if self._id_index is None:
            ids = self.ids_at(slice(None))
            o = np.argsort(ids, kind="stable")
            self._id_index = (ids[o], o.astype(np.int64))
        return self._id_index

    def locate(self, ids: I64) -> I64:
        """Row of each id among live rows, or -1."""
        sid, srow = self.id_index()
        out = np.full(len(ids), -1, dtype=np.int64)
        if len(sid) == 0:
            return out
        pos, hit = find_sorted(sid, ids)
        rows = srow[pos]
        if self.alive is not None:
            hit &= self.alive[rows]
        out[hit] = rows[hit]
        return out

    def kill(self, rows: I64) -> int:
        """Mark rows removed; returns how many were alive."""
        if len(rows) == 0:
            return 0
        if self.alive is None:
            self.alive = np.ones(self.n, dtype=bool)
        elif not self.alive.flags.writeable:
            self.alive = self.alive.copy()
        was = int(np.count_nonzero(self.alive[rows]))
        self.alive[rows] = False
        self.n_dead += was
        return was


class TableSegment(SegmentRows):
    """An immutable set of fingerprints with its permuted sorted tables (and a tombstone mask)."""

    __slots__ = (
        "_search_args",
        "dbits",
        "dirs",
        "fps",
        "heavy",
        "hv",
        "ids",
        "keys",
        "rows",
        "sub",
    )

    def __init__(
        self,
        fps: U64,
        ids: I64,
        keys: U64 | None,
        rows: npt.NDArray[np.uint32] | None,
        dirs: I64 | None,
        dbits: int,
        alive: npt.NDArray[np.bool_] | None = None,
        heavy: I64 | None = None,
        hv: I64 | None = None,
        sub: I64 | None = None,
    ) -> None:
        self.heavy = heavy  # (T,) bucket size above which a bucket is descended
        self.hv = hv if hv is not None else np.zeros((0, 4), dtype=np.int64)
        self.sub = sub if sub is not None else np.zeros(1, dtype=np.int64)
        self.fps = fps  # (n, W)
        self.ids = ids
        self.keys = keys  # (T, n) or None for brute segments
        self.rows = rows  # (T - 1, n) or None
        self.dirs = dirs  # (T, 2**dbits + 1)
        self.dbits = dbits
        self.alive = alive  # None: every row alive
        self.n_dead = 0 if alive is None else int(len(ids) - np.count_nonzero(alive))
        self._id_index: tuple[I64, I64] | None = None
        self._search_args: tuple[PlanArrays, tuple[Any, ...]] | None = None

    def search_arrays(self, pa: PlanArrays) -> tuple[Any, ...]:
        """:func:`~neardup.index._kernels.search_tables`' arguments from ``keys`` to ``sub``
        for this segment under ``pa``, as read-only views (kept for the last ``pa``): a
        segment searched alone and one in an :class:`~neardup.index.multi.IndexSet`'s list
        pass the kernel the same types, so it compiles once (each signature of it is seconds
        of a first start's compile). A brute segment (no tables) has empty arrays but
        ``fps``."""
        got = self._search_args
        if got is not None and got[0] is pa:
            return got[1]
        brute = self.keys is None
        args = (
            _ro_empty(np.uint64, 2) if brute else _ro(self.keys, np.uint64, 2),
            _ro_empty(np.uint32, 2) if brute or self.rows is None else _ro(self.rows, np.uint32, 2),
            _ro(self.fps, np.uint64, 2),
            _ro_empty(np.int64, 2) if brute else _ro(self.dirs, np.int64, 2),
            int(self.dbits),
            _ro(pa.pidx, np.int64, 3),
            _ro(pa.pmask, np.uint64, 2),
            _ro(pa.npieces, np.int64, 1),
            _ro(pa.pb, np.int64, 1),
            _ro(pa.probe_radius, np.int64, 1),
            _ro(pa.flips, np.uint64, 2),
            _ro(pa.flipd, np.int64, 2),
            _ro(pa.nflips, np.int64, 1),
            _ro(pa.pm_key, np.uint64, 2),
            _ro(pa.pm_orig, np.uint64, 2),
            _ro_empty(np.int64, 1) if brute or self.heavy is None else _ro(self.heavy, np.int64, 1),
            _ro(self.hv, np.int64, 2),
            _ro(self.sub, np.int64, 1),
        )
        self._search_args = (pa, args)
        return args

    @property
    def n(self) -> int:
        return int(self.ids.shape[0])

    def ids_at(self, rows: Any) -> I64:
        """The int64 ids of ``rows``."""
        return self.ids[rows]

    @property
    def nbytes(self) -> int:
        total = self.ids.nbytes
        for a in (self.keys, self.rows, self.dirs, self.alive, self.hv, self.sub):
            if a is not None:
                total += a.nbytes
        if self.keys is None or not np.shares_memory(self.fps, self.keys):
            total += self.fps.nbytes
        return int(total)

    @classmethod
    def build(
        cls, fps: U64, ids: I64, pa: PlanArrays, *, threads: int = 1, searchable: bool = True
    ) -> TableSegment:
        """Sort ``fps`` (n, W) into every table of ``pa``; ``ids`` (n,) travel with their rows.

        ``threads`` > 1 sorts the tables after the first on that many threads (the kernels
        release the GIL; the arrays are the same as with one thread). ``searchable=False``
        leaves out what only :meth:`search` reads (the prefix directories and the heavy
        buckets' sub-directories): a segment for the self-join
        (:func:`neardup.index.allpairs.all_pairs`), which walks the sorted keys alone."""
        n = fps.shape[0]
        T = pa.n_tables
        if T == 0:
            return cls(np.ascontiguousarray(fps), np.ascontiguousarray(ids), None, None, None, 0)
        key0, order = sorted_table(fps, pa, 0)
        keys = np.empty((T, n), dtype=np.uint64)
        keys[0] = key0
        del key0
        if pa.identity0 and pa.words == 1:
            fps_s = keys[0].reshape(n, 1)
        else:
            fps_s = np.ascontiguousarray(fps[order])
        ids_s = np.ascontiguousarray(ids[order])
        del order
        rows = np.empty((max(T - 1, 0), n), dtype=np.uint32)
        dbits = _dbits(n, pa.min_pb) if searchable else 0
        dirs = np.empty((T, (1 << dbits) + 1), dtype=np.int64) if searchable else None
        if dirs is not None:
            dirs[0] = K.directory(keys[0], dbits)

        def table(t: int) -> None:
            kt, o = sorted_table(fps_s, pa, t)
            keys[t] = kt
            rows[t - 1] = o
            del kt, o
            if dirs is not None:
                dirs[t] = K.directory(keys[t], dbits)

        if threads > 1 and T > 2:
            with ThreadPoolExecutor(min(threads, T - 1)) as ex:
                list(ex.map(table, range(1, T)))
        else:
            for t in range(1, T):
                table(t)
        if not searchable:
            return cls(fps_s, ids_s, keys, rows, None, dbits)
        heavy, hv, sub = _heavy_subdirs(keys, pa)
        return cls(fps_s, ids_s, keys, rows, dirs, dbits, None, heavy, hv, sub)

    def fps_at(self, rows: I64) -> U64:
        """Fingerprints (m, W) of ``rows``."""
        return self.fps[rows]

    def live_arrays(self) -> tuple[U64, I64]:
        """(fingerprints (m, W), ids (m,)) of the rows not removed.

        Safe beside a concurrent :meth:`kill` (the background merge calls this without the
        index lock): one copy of the mask selects both arrays, so they always have the same
        rows; the caller detects the kill itself by ``n_dead`` and discards what it built."""
        alive = self.alive
        if alive is None or self.n_dead == 0:
            return self.fps, self.ids
        mask = alive.copy()
        return self.fps[mask], self.ids[mask]

    def search(
        self, q: U64, k: int, pa: PlanArrays, cap: int = 0
    ) -> tuple[I64, I64, npt.NDArray[np.int32]]:
        """(query index, id, distance) of every live row within ``k`` of a query in ``q``."""
        if self.n == 0:
            e = np.empty(0, dtype=np.int64)
            return e, e, np.empty(0, dtype=np.int32)
        if self.keys is not None and self.dirs is None:
            raise RuntimeError("segment built with searchable=False (for the self-join only)")
        ws = _workspace(pa.n_tables)
        small = len(q) <= 8 and not cap
        cap = cap or 4 * len(q) + 64
        while True:
            if small and cap <= _WS_CAP:
                out_q, out_r, out_d = ws.out_q, ws.out_r, ws.out_d
            else:
                out_q = np.empty(cap, dtype=np.int64)
                out_r = np.empty(cap, dtype=np.int64)
                out_d = np.empty(cap, dtype=np.int32)
            args = self.search_arrays(pa)
            if self.keys is None:
                brute = K.search_brute_gil if small else K.search_brute
                cnt = brute(q, args[2], k, out_q, out_r, out_d)
            else:
                probe: Any = K.search_tables_gil if small else K.search_tables
                cnt = probe(q, k, *args, ws.qk, ws.stack, out_q, out_r, out_d)
            if cnt <= len(out_q):
                break
            cap = cnt
            small = False
        if cnt == 0:
            return _E_I64, _E_I64, _E_I32
        if small:  # the workspace is reused by the next call: copy out
            qi, r, d = out_q[:cnt].copy(), out_r[:cnt].copy(), out_d[:cnt].copy()
        else:
            qi, r, d = out_q[:cnt], out_r[:cnt], out_d[:cnt]
        if self.n_dead:
            m = self.alive[r]  # type: ignore[index]
            qi, r, d = qi[m], r[m], d[m]
        return qi, self.ids[r], d

    def describe(self) -> dict[str, Any]:
        return {"n": self.n, "live": self.n_live, "bytes": self.nbytes, "dbits": self.dbits}
