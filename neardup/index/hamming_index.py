"""HammingIndex: exact k-bit search over permuted sorted tables, incremental and persistent.

Structure (log-structured, like an LSM tree):

* a small append buffer (``buffer_size`` fingerprints, default 4096) searched by brute force,
  so ``add`` of a small batch costs microseconds and is visible to the next ``search``;
* a list of immutable segments (:class:`~neardup.index.tables.TableSegment`, or
  :class:`~neardup.index.compressed.CompressedSegment` with ``compress=True``), each with its own
  permuted sorted tables. A full buffer (or a large ``add``) becomes a segment; a segment is
  merged with its predecessor while it holds at least ``1 / merge_factor`` of its size, so there
  are ``O(log N)`` segments and each fingerprint is re-sorted ``O(log N)`` times in all;
* ``remove`` sets a tombstone; tombstoned rows are purged when their segment is merged
  (or rebuilt because more than half of it is dead).

Thread safety: mutations hold a lock; searches read a snapshot and never block on a merge.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .._arrays import span
from .._reference import use_reference
from ..errors import ConfigError, IndexStateError, InputError, InputTypeError, NotFoundError
from ..fingerprint.distance import as_fingerprints, int_to_words
from . import _kernels as K
from .compressed import (
    DEFAULT_BLOCK_BYTES,
    DEFAULT_CODEC,
    CompressedSegment,
    check_block_bytes,
    check_codec,
)
from .format import read_index, write_index
from .plan import HEAVY_BUCKET, Plan, plan_index
from .reference import search_reference
from .snapshot import IndexSettings, IndexSnapshot, SealedSegment
from .tables import PlanArrays, TableSegment, plan_arrays

__all__ = ["HammingIndex", "SearchResult"]

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]


class SearchResult(NamedTuple):
    """What :meth:`HammingIndex.search` returns: every match of every query, in CSR form.

    The matches of query ``i`` are ``ids[lims[i]:lims[i + 1]]``, at the Hamming distances
    ``distances[lims[i]:lims[i + 1]]``, sorted by (distance, id). It unpacks as the triple
    ``lims, ids, distances``. (faiss's ``range_search`` returns the same CSR layout in the
    order ``lims, D, I``: distances before ids; here ids come first.)
    """

    lims: I64
    ids: I64
    distances: I32


_EMPTY_I64 = np.empty(0, dtype=np.int64)


#: NEARDUP_REFERENCE=index (read at import) answers every search with the NumPy brute force
_REFERENCE = use_reference("index")
#: default search threads, read once (``os.cpu_count()`` is too slow to call per search)
_DEFAULT_THREADS = min(4, os.cpu_count() or 1)


def _check_int(name: str, value: Any, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ConfigError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    v = int(value)
    if v < lo or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise ConfigError(f"{name} must be {rng}, got {v}")
    return v


class HammingIndex:
    """Exact k-bit Hamming search over ``bits``-bit fingerprints (permuted sorted tables).

    Parameters
    ----------
    bits : {64, 128}, default=64
        Fingerprint width: ``uint64`` arrays of shape (n,) for 64, (n, 2) for 128.
    max_distance : int, default=3
        Largest distance ``k`` searches may ask for; results are exact for every distance up to it.
    expected_size : int or None, default=None
        Expected number of fingerprints, used by the planner (``None``: 10 million).
    memory_budget : float or None, default=None
        Bytes the index may use at ``expected_size`` (``None``: 64 bytes per fingerprint).
    plan : Plan or dict or None, default=None
        Override the planner with an explicit layout (see :func:`neardup.index.plan_index`).
    layout, blocks, prefix_blocks : optional
        Planner overrides, passed to :func:`neardup.index.plan_index`.
    heavy_bucket : int, default=256
        Buckets larger than this are searched by pruned descent (skewed data stays fast).
    buffer_size : int, default=4096
        Adds are buffered (brute-force searched) until this many, then sorted into a segment.
    merge_factor : int, default=4
        LSM tiering factor (see module docstring).
    threads : int or None, default=None
        Threads for batched searches of >= 2048 queries (``None``: ``min(4, os.cpu_count())``).
    background_merges : bool, default=False
        Run large merges (the LSM tiering) on a background thread instead of inside the
        ``add`` that makes them due: an online store's writer then never stalls on one (a
        merge re-sorts every table of both segments; build rates in
        ``benchmarks/bench_index.py``). Searches are exact either way: a merged segment replaces
        its inputs atomically. :meth:`wait_merges` waits for pending merges.
    inline_merge_rows : int, default=16384
        With ``background_merges``, merges of at most this many rows still run inline: they
        are cheap, and keeping the segment count at its minimum keeps searches cheap (moving
        every merge to the thread cost more CPU per document of an online store's batch path:
        see ``benchmarks/bench_store.py``).
    merge_thread_init : callable or None, default=None
        Called first thing on the background merge thread, e.g. to lower its CPU priority so
        that request threads win the CPU over a merge.
    compress : bool, default=False
        Store every sealed segment's tables compressed (:mod:`neardup.index.compressed`): for
        64-bit fingerprints about 5-6 bytes per table instead of 12, and no stored
        fingerprints or row arrays; searches return exactly the same results, at some cost
        per probe. A brute-force plan (small ``expected_size``) has no tables and stays
        uncompressed.
    codec : {"ef", "blocks"}, default="ef"
        The compressed tables' code: ``"ef"``, Elias–Fano (:mod:`neardup.index.codec_ef`:
        every key decodes on its own), or ``"blocks"``, the paper's block code
        (:mod:`neardup.index.codec_blocks`: keys decoded serially within a block). See
        docs/index.md, "Compressed tables", for their sizes and speeds.
    block_bytes : int, default=256
        Block size of ``codec="blocks"`` (a multiple of 8); larger blocks compress better
        and decode more per probe.

    Examples
    --------
    >>> import numpy as np
    >>> idx = HammingIndex(bits=64, max_distance=3, expected_size=1000)
    >>> idx.add(np.array([0b1011, 0b1111, (1 << 40) - 1], dtype=np.uint64))
    array([0, 1, 2])
    >>> idx.search_one(0b0011)
    [(0, 1), (1, 2)]
    >>> res = idx.search(np.array([0b0011, 1 << 50], dtype=np.uint64))
    >>> res.lims.tolist(), res.ids.tolist(), res.distances.tolist()
    ([0, 2, 2], [0, 1], [1, 2])
    >>> lims, ids, dists = res  # also a triple
    """

    def __init__(
        self,
        bits: int = 64,
        max_distance: int = 3,
        expected_size: int | None = None,
        *,
        memory_budget: float | None = None,
        plan: Plan | dict[str, Any] | None = None,
        layout: str | None = None,
        blocks: int | None = None,
        prefix_blocks: int | None = None,
        heavy_bucket: int = HEAVY_BUCKET,
        buffer_size: int = 4096,
        merge_factor: int = 4,
        threads: int | None = None,
        background_merges: bool = False,
        inline_merge_rows: int = 1 << 14,
        merge_thread_init: Callable[[], None] | None = None,
        compress: bool = False,
        codec: str = DEFAULT_CODEC,
        block_bytes: int = DEFAULT_BLOCK_BYTES,
    ) -> None:
        if bits not in (64, 128) or isinstance(bits, bool):
            raise ConfigError(f"bits must be 64 or 128, got {bits!r}")
        self._buffer_size = _check_int("buffer_size", buffer_size, 1)
        self._merge_factor = _check_int("merge_factor", merge_factor, 2)
        if threads is not None:
            _check_int("threads", threads, 1, 1024)
        self._threads = threads
        if plan is not None:
            p = Plan.from_dict(plan) if isinstance(plan, dict) else plan
            if not isinstance(p, Plan):
                raise ConfigError(f"plan must be a Plan or a dict, got {type(plan).__name__}")
            p.validate()
            if p.bits != bits:
                raise ConfigError(
                    f"plan is for {p.bits}-bit fingerprints but bits={bits}; pass bits={p.bits}"
                )
            if p.max_distance != max_distance and max_distance != 3:
                raise ConfigError(
                    f"plan guarantees max_distance={p.max_distance} but max_distance={max_distance} was asked;"
                    " plan again with plan_index(..., max_distance=...)"
                )
            self._plan = p
        else:
            self._plan = plan_index(
                bits,
                max_distance,
                expected_size,
                memory_budget=memory_budget,
                layout=layout,
                blocks=blocks,
                prefix_blocks=prefix_blocks,
                heavy_bucket=heavy_bucket,
                compress=bool(compress),
                codec=check_codec(codec),
                block_bytes=check_block_bytes(block_bytes),
            )
        self._pa: PlanArrays = plan_arrays(self._plan)
        if not isinstance(compress, bool):
            raise ConfigError(f"compress must be True or False, got {compress!r}")
        self._compress = compress
        self._codec = check_codec(codec)
        self._block_bytes = check_block_bytes(block_bytes)
        self._words = bits // 64
        self._lock = threading.RLock()
        self._segments: list[SealedSegment] = []
        self._new_buffer()
        self._next_id = 0
        self._readonly: str | None = None  # reason, when read-only
        self._background = bool(background_merges)
        self._merger: threading.Thread | None = None
        self._busy: tuple[SealedSegment, ...] = ()  # the pair the merge thread is merging
        self._inline_rows = _check_int("inline_merge_rows", inline_merge_rows, 0)
        self._merge_init = merge_thread_init

    # ------------------------------------------------------------------ properties
    @property
    def bits(self) -> int:
        """Fingerprint width (64 or 128)."""
        return self._plan.bits

    @property
    def max_distance(self) -> int:
        """Largest distance searches are exact for."""
        return self._plan.max_distance

    @property
    def plan(self) -> Plan:
        """The table layout in use (inspect with ``plan.describe()``)."""
        return self._plan

    @property
    def read_only(self) -> bool:
        """True for an index loaded with ``mmap=True``."""
        return self._readonly is not None

    @property
    def segment_count(self) -> int:
        """Sealed segments searched besides the write buffer."""
        return len(self._segments)

    @property
    def merging(self) -> bool:
        """A background merge is running."""
        t = self._merger
        return t is not None and t.is_alive()

    def __len__(self) -> int:
        with self._lock:
            return sum(s.n_live for s in self._segments) + int(
                np.count_nonzero(self._buf_alive[: self._buf_n])
            )

    def __contains__(self, id_: object) -> bool:
        if isinstance(id_, bool) or not isinstance(id_, (int, np.integer)):
            return False
        seg_i, _rows = self._locate(np.array([int(id_)], dtype=np.int64))
        return bool(seg_i[0] != -1)

    def __repr__(self) -> str:
        return (
            f"HammingIndex(bits={self.bits}, max_distance={self.max_distance}, n={len(self)},"
            f" plan={self._plan.name!r})"
        )

    @property
    def nbytes(self) -> int:
        """Bytes held by the index arrays (segments and buffer)."""
        with self._lock:
            segs = sum(s.nbytes for s in self._segments)
        return int(segs + self._buf_fps.nbytes + self._buf_ids.nbytes + self._buf_alive.nbytes)

    def describe(self) -> str:
        """The plan, why it is exact, its cost estimate and the current segments."""
        with self._lock:
            segs = list(self._segments)
            nbuf = self._buf_n
        lines = [self._plan.describe()]
        lines.append(
            f"  contents: {len(self):,} fingerprints in {len(segs)} segment(s) + {nbuf} buffered;"
            f" {self.nbytes / max(len(self), 1):.1f} bytes/fingerprint"
        )
        if self._plan.kind == "tables":
            lines.append(
                f"  exactness: pigeonhole over the tables' prefixes (see neardup.index.plan); "
                f"searches with max_distance <= {self.max_distance} return every match"
            )
        if self._compress:
            lines.append(
                "  compressed: Elias-Fano tables (neardup.index.codec_ef)"
                if self._codec == "ef"
                else f"  compressed: the paper's block code, {self._block_bytes}-byte blocks"
                " (neardup.index.codec_blocks)"
            )
        if self._readonly:
            lines.append(f"  read-only: {self._readonly}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ validation
    def _check_fps(self, values: Any, name: str) -> np.ndarray:
        # fast path: an already valid, C-contiguous uint64 array of this width (the common
        # case of callers that hold fingerprints in NumPy) skips the general validation
        if (
            type(values) is np.ndarray
            and values.dtype == np.uint64
            and values.flags.c_contiguous
            and (
                values.ndim == 1
                if self._words == 1
                else (values.ndim == 2 and values.shape[1] == 2)
            )
        ):
            return values.reshape(-1, self._words)
        if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
            values = [int(values)]
        arr = as_fingerprints(values, name=name, bits=self.bits)
        return arr.reshape(-1, self._words)

    def _check_k(self, max_distance: int | None) -> int:
        if max_distance is None:
            return self.max_distance
        if isinstance(max_distance, bool) or not isinstance(max_distance, (int, np.integer)):
            raise ConfigError(f"max_distance must be an int, got {type(max_distance).__name__}")
        k = int(max_distance)
        if k < 0:
            raise ConfigError(f"max_distance must be >= 0, got {k}")
        if k > self.max_distance:
            raise ConfigError(
                f"max_distance ({k}) is above what this index's plan guarantees ({self.max_distance});"
                f" build the index with HammingIndex(max_distance={k}, ...) to search that far"
            )
        return k

    def _check_ids(self, ids: Any, n: int) -> I64:
        if ids is None:
            return np.arange(self._next_id, self._next_id + n, dtype=np.int64)
        arr = np.asarray(ids)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        if arr.dtype.kind not in "iu" and not (arr.size == 0):
            raise InputTypeError(f"ids must be integers (int64), got dtype {arr.dtype}")
        if arr.ndim != 1:
            raise InputError(f"ids must be 1-D, got shape {arr.shape}")
        if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
            raise InputError("ids must fit in int64")
        arr = arr.astype(np.int64)
        if len(arr) != n:
            raise InputError(
                f"ids and fingerprints must have the same length, got {len(arr)} ids for {n} fingerprints"
            )
        # ids strictly increasing (the common case: row ids, running counters) are unique;
        # only otherwise sort to find duplicates
        if len(arr) < 2 or bool((arr[1:] > arr[:-1]).all()):
            return arr
        u, c = np.unique(arr, return_counts=True)
        if len(u) != len(arr):
            dup = u[c > 1][:5].tolist()
            raise InputError(f"duplicate ids within the batch: {dup}; every id must be unique")
        return arr

    def _check_writable(self, verb: str) -> None:
        if self._readonly is not None:
            raise IndexStateError(
                f"can't {verb}: this index is read-only ({self._readonly}); load it with "
                "HammingIndex.load(path, mmap=False) to modify it"
            )

    @property
    def compressed(self) -> bool:
        """True when sealed segments store compressed tables (``compress=True``)."""
        return self._compress

    @property
    def codec(self) -> str:
        """The compressed tables' code (the ``codec`` setting; unused uncompressed)."""
        return self._codec

    @property
    def block_bytes(self) -> int:
        """Block size of ``codec="blocks"`` (the ``block_bytes`` setting)."""
        return self._block_bytes

    # ------------------------------------------------------------------ buffer & segments
    def _build(self, fps: np.ndarray, ids: I64) -> SealedSegment:
        # a brute-force plan keeps only fingerprints and ids: nothing to compress there
        if self._compress and self._pa.n_tables:
            return CompressedSegment.build(fps, ids, self._pa, self._block_bytes, self._codec)
        return TableSegment.build(fps, ids, self._pa)

    def _new_buffer(self) -> None:
        cap = self._buffer_size
        self._buf_fps = np.zeros((cap, self._words), dtype=np.uint64)
        self._buf_ids = np.zeros(cap, dtype=np.int64)
        self._buf_alive = np.zeros(cap, dtype=bool)
        self._buf_n = 0

    def _flush_buffer(self) -> None:
        n = self._buf_n
        if n:
            alive = self._buf_alive[:n]
            fps, ids = self._buf_fps[:n][alive], self._buf_ids[:n][alive]
            if len(ids):
                self._segments = [*self._segments, self._build(fps, ids)]
        self._new_buffer()
        self._compact()

    def _compact(self) -> None:
        # copy-on-write: searches iterate the old list without the lock
        segs = list(self._segments)
        # rebuild mostly-dead segments
        for i, s in enumerate(segs):
            if s.n_dead and s.n_dead * 2 >= s.n:
                f, d = s.live_arrays()
                segs[i] = self._build(f, d)
        segs[:] = [s for s in segs if s.n_live > 0]
        if self._background:
            # small merges stay inline (cheap, and they keep the segment count, i.e. the
            # per-search cost, at its minimum); a merge of more than inline_merge_rows rows
            # goes to the merge thread, and the newer segments pile up behind it meanwhile
            busy = self._busy
            while len(segs) >= 2 and segs[-1].n_live * self._merge_factor >= segs[-2].n_live:
                a, b = segs[-2], segs[-1]
                if a.n_live + b.n_live > self._inline_rows or a in busy or b in busy:
                    break
                segs[-2:] = [self._merged(a, b)]
            self._segments = segs
            if self._merge_due(segs, self._inline_rows) is not None and (
                self._merger is None or not self._merger.is_alive()
            ):
                self._merger = threading.Thread(
                    target=self._merge_loop, name="neardup-index-merge", daemon=True
                )
                self._merger.start()
            return
        while len(segs) >= 2 and segs[-1].n_live * self._merge_factor >= segs[-2].n_live:
            b = segs.pop()
            a = segs.pop()
            segs.append(self._merged(a, b))
        self._segments = segs

    def _merged(self, a: SealedSegment, b: SealedSegment) -> SealedSegment:
        fa, ia = a.live_arrays()
        fb, ib = b.live_arrays()
        return self._build(np.concatenate([fa, fb]), np.concatenate([ia, ib]))

    def _merge_due(self, segs: list[SealedSegment], min_rows: int = 0) -> int | None:
        """Position ``i`` of the adjacent pair (i, i + 1) of more than ``min_rows`` rows
        that the tiering rule merges next (the same rule as the inline merges: the newer one
        within ``merge_factor`` of the older one's size), scanning from the newest end; None
        when none is due."""
        for i in range(len(segs) - 2, -1, -1):
            a, b = segs[i], segs[i + 1]
            if b.n_live * self._merge_factor >= a.n_live and a.n_live + b.n_live > min_rows:
                return i
        return None

    def _merge_loop(self) -> None:
        """Background merges: pick a due pair under the lock, build the merged segment
        without it (the numba kernels release the GIL), swap it in if both inputs are still
        there unchanged (a removal meanwhile: build again)."""
        if self._merge_init is not None:
            self._merge_init()
        while True:
            with self._lock:
                segs = self._segments
                i = self._merge_due(segs, self._inline_rows)
                if i is None:
                    self._merger = None
                    self._busy = ()
                    return
                a, b = segs[i], segs[i + 1]
                dead = (a.n_dead, b.n_dead)
                self._busy = (a, b)  # inline merges leave these two alone
            merged = self._merged(a, b)
            with self._lock:
                self._busy = ()
                segs = self._segments
                j = next((j for j, s in enumerate(segs) if s is a), -1)
                if (
                    j >= 0
                    and j + 1 < len(segs)
                    and segs[j + 1] is b
                    and (a.n_dead, b.n_dead) == dead
                ):
                    self._segments = [*segs[:j], merged, *segs[j + 2 :]]

    def wait_merges(self, timeout: float | None = None) -> bool:
        """Wait until no background merge is pending (``background_merges=True``); returns
        False when ``timeout`` seconds passed first. Immediate without background merges."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                t = self._merger
            if t is None or not t.is_alive():
                return True
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            t.join(left)

    def flush(self) -> None:
        """Sort the buffer into a segment now (searches see buffered adds either way)."""
        with self._lock:
            self._check_writable("flush")
            self._flush_buffer()

    def optimize(self) -> None:
        """Merge everything into one segment and purge removed rows (fastest searches)."""
        with self._lock:
            self._check_writable("optimize")
            self._flush_buffer()
            if len(self._segments) > 1 or any(s.n_dead for s in self._segments):
                parts = [s.live_arrays() for s in self._segments]
                fps = np.concatenate([p[0] for p in parts])
                ids = np.concatenate([p[1] for p in parts])
                self._segments = [self._build(fps, ids)] if len(ids) else []

    # ------------------------------------------------------------------ verbs
    def add(self, fingerprints: Any, ids: Any = None) -> I64:
        """Add fingerprints; returns their int64 ids.

        Parameters
        ----------
        fingerprints : array-like
            ``uint64`` (n,) for 64-bit or (n, 2) for 128-bit (column 0 the high word), or ints.
        ids : array-like of int, optional
            One unique int64 id per fingerprint; default: a running counter.

        Returns
        -------
        numpy.ndarray of int64, shape (n,)

        Raises
        ------
        InputError
            Wrong shape/width, ``ids`` length mismatch, duplicate ids (in the batch or already
            in the index). Nothing is added when it raises.
        IndexStateError
            The index was loaded read-only (``mmap=True``).
        """
        fps = self._check_fps(fingerprints, "fingerprints")
        n = len(fps)
        with self._lock:
            self._check_writable("add")
            ids_arr = self._check_ids(ids, n)
            if n == 0:
                return ids_arr
            # ids at or above the running counter (every id ever added is below it) cannot be
            # present: skip the lookup (appending increasing ids is the common case)
            lo, hi = span(ids_arr)
            if ids is not None and lo < self._next_id:
                seg_i, _rows = self._locate(ids_arr)
                present = ids_arr[seg_i != -1]
                if len(present):
                    raise InputError(
                        f"ids already in the index: {present[:5].tolist()}; remove them first or use new ids"
                    )
            self._next_id = max(self._next_id, hi + 1)
            if n >= self._buffer_size:
                self._segments = [*self._segments, self._build(fps, ids_arr)]
                self._compact()
                return ids_arr
            if self._buf_n + n > self._buffer_size:
                self._flush_buffer()
            s = self._buf_n
            self._buf_fps[s : s + n] = fps
            self._buf_ids[s : s + n] = ids_arr
            self._buf_alive[s : s + n] = True
            self._buf_n = s + n
            return ids_arr

    def _locate(self, ids: I64) -> tuple[I64, I64]:
        """(segment number or -2 for the buffer or -1 if absent, row) of each live id."""
        seg_i = np.full(len(ids), -1, dtype=np.int64)
        rows = np.full(len(ids), -1, dtype=np.int64)
        with self._lock:
            for j, s in enumerate(self._segments):
                r = s.locate(ids)
                hit = (r >= 0) & (seg_i == -1)
                seg_i[hit] = j
                rows[hit] = r[hit]
            n = self._buf_n
            if n:
                bid = self._buf_ids[:n]
                o = np.argsort(bid, kind="stable")
                sb = bid[o]
                lo = np.searchsorted(sb, ids, "left")
                hi = np.searchsorted(sb, ids, "right")
                for qi in np.nonzero(hi > lo)[0]:
                    for p in range(lo[qi], hi[qi]):
                        r = o[p]
                        if self._buf_alive[r]:
                            seg_i[qi] = -2
                            rows[qi] = r
        return seg_i, rows

    def _ids_arg(self, ids: Any) -> I64:
        arr = np.asarray(ids)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        if arr.size and arr.dtype.kind not in "iu":
            raise InputTypeError(f"ids must be integers (int64), got dtype {arr.dtype}")
        return arr.astype(np.int64).reshape(-1)

    def remove(self, ids: Any) -> int:
        """Remove ids (tombstones, purged on merge); unknown ids are ignored. Returns the count removed."""
        arr = self._ids_arg(ids)
        with self._lock:
            self._check_writable("remove")
            seg_i, rows = self._locate(np.unique(arr))
            removed = 0
            for j, s in enumerate(self._segments):
                removed += s.kill(rows[seg_i == j])
            b = rows[seg_i == -2]
            removed += int(np.count_nonzero(self._buf_alive[b]))
            self._buf_alive[b] = False
            if removed:
                self._compact()
            return removed

    def get(self, ids: Any) -> np.ndarray:
        """Fingerprints of ``ids``: uint64 (n,) or (n, 2). Raises NotFoundError for unknown ids."""
        arr = self._ids_arg(ids)
        with self._lock:
            seg_i, rows = self._locate(arr)
            missing = arr[seg_i == -1]
            if len(missing):
                raise NotFoundError(f"ids not in the index: {missing[:5].tolist()}")
            out = np.empty((len(arr), self._words), dtype=np.uint64)
            for j, s in enumerate(self._segments):
                m = seg_i == j
                out[m] = s.fps_at(rows[m])
            m = seg_i == -2
            out[m] = self._buf_fps[rows[m]]
        return out[:, 0].copy() if self._words == 1 else out

    def buffer_rows(self) -> tuple[Any, np.ndarray, I64, np.ndarray]:
        """``(segments version, fingerprints (n, words), ids, alive)`` of the append buffer
        now, for :class:`neardup.index.multi.IndexSet` (``sealed=``); the version is the
        copy-on-write segment list (it changes whenever the sealed segments do)."""
        with self._lock:
            n = self._buf_n
            return (
                self._segments,
                self._buf_fps[:n],
                self._buf_ids[:n],
                self._buf_alive[:n].copy(),
            )

    def _snapshot(self) -> tuple[list[SealedSegment], np.ndarray, I64, np.ndarray]:
        with self._lock:
            n = self._buf_n
            return (
                list(self._segments),
                self._buf_fps[:n],
                self._buf_ids[:n],
                self._buf_alive[:n].copy(),
            )

    def _search_chunk(self, q: np.ndarray, k: int, snap: Any) -> tuple[I64, I64, I32]:
        segs, bfps, bids, balive = snap
        parts = []
        for s in segs:
            parts.append(s.search(q, k, self._pa))
        if len(bids):
            buf = TableSegment(bfps, bids, None, None, None, 0, balive)
            parts.append(buf.search(q, k, self._pa))
        if not parts:
            return _EMPTY_I64, _EMPTY_I64, np.empty(0, np.int32)
        if len(parts) == 1:
            return parts[0]
        return (
            np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]),
        )

    def search(self, queries: Any, max_distance: int | None = None) -> SearchResult:
        """Every stored fingerprint within ``max_distance`` of each query (exact).

        Parameters
        ----------
        queries : array-like
            ``uint64`` (nq,) for 64-bit or (nq, 2) for 128-bit.
        max_distance : int or None, default=None
            ``None``: the index's ``max_distance``. Larger values raise :class:`ConfigError`.

        Returns
        -------
        SearchResult
            A named tuple ``(lims, ids, distances)`` (unpacks as that triple): ``lims`` int64
            (nq + 1,), the matches of query ``i`` are ``ids[lims[i]:lims[i+1]]`` (int64) at
            ``distances[lims[i]:lims[i+1]]`` (int32), sorted by (distance, id) within each
            query. The CSR layout of faiss's ``range_search``, whose order is ``lims, D, I``.
        """
        q = self._check_fps(queries, "queries")
        k = self._check_k(max_distance)
        nq = len(q)
        snap = self._snapshot()
        if _REFERENCE:
            return self._search_reference(q, k, snap)
        threads = self._threads or _DEFAULT_THREADS
        if threads > 1 and nq >= 2048:
            bounds = np.linspace(0, nq, threads + 1).astype(np.int64)
            with ThreadPoolExecutor(threads) as ex:
                futs = [
                    ex.submit(self._search_chunk, q[bounds[i] : bounds[i + 1]], k, snap)
                    for i in range(threads)
                ]
                res = [f.result() for f in futs]
            qi = np.concatenate([r[0] + bounds[i] for i, r in enumerate(res)])
            ids = np.concatenate([r[1] for r in res])
            d = np.concatenate([r[2] for r in res])
        else:
            qi, ids, d = self._search_chunk(q, k, snap)
        csr = K.csr_sort_gil if nq <= 8 else K.csr_sort
        lims, ids, d = csr(nq, qi, ids, d.astype(np.int32, copy=False), k)
        return SearchResult(lims, ids, d)

    def _search_reference(self, q: np.ndarray, k: int, snap: Any) -> SearchResult:
        segs, bfps, bids, balive = snap
        fl = [s.live_arrays() for s in segs] + [(bfps[balive], bids[balive])]
        fps = np.concatenate([f for f, _ in fl]).reshape(-1, self._words)
        ids = np.concatenate([i for _, i in fl])
        if self._words == 1:
            fps, q = fps[:, 0], q[:, 0]
        return SearchResult(*search_reference(fps, ids, q, k))

    def search_one(self, query: Any, max_distance: int | None = None) -> list[tuple[int, int]]:
        """One query (an int, or a (2,) uint64 row for 128-bit) -> ``[(id, distance), ...]``.

        Sorted by (distance, id), like :meth:`search`. This path skips the batch machinery
        (no threads, no CSR assembly), for microsecond single lookups.
        """
        k = self._plan.max_distance if max_distance is None else self._check_k(max_distance)
        if isinstance(query, (int, np.integer)) and not isinstance(query, bool):
            v = int(query)
            if v < 0 or v >> self.bits:
                raise InputError(f"query must be a non-negative {self.bits}-bit int, got {query}")
            if self._words == 1:
                q = np.array([[v]], dtype=np.uint64)
            else:
                q = np.array([int_to_words(v, self.bits)], dtype=np.uint64)
        else:
            arr = np.asarray(query)
            q = self._check_fps(
                arr.reshape(1, -1) if self._words == 2 else arr.reshape(-1), "query"
            )
            if len(q) != 1:
                raise InputError(
                    f"search_one takes one fingerprint, got {len(q)}; use search() for batches"
                )
        if _REFERENCE:
            _lims, ids, d = self._search_reference(q, k, self._snapshot())
            return list(zip(ids.tolist(), d.tolist(), strict=True))
        with self._lock:
            segs = self._segments
            n = self._buf_n
            if n:
                buf = TableSegment(
                    self._buf_fps[:n],
                    self._buf_ids[:n],
                    None,
                    None,
                    None,
                    0,
                    self._buf_alive[:n].copy(),
                )
        out: list[tuple[int, int]] = []
        pa = self._pa
        for seg in segs:
            _qi, ids, d = seg.search(q, k, pa)
            if len(ids):
                out.extend(zip(ids.tolist(), d.tolist(), strict=True))
        if n:
            _qi, ids, d = buf.search(q, k, pa)
            if len(ids):
                out.extend(zip(ids.tolist(), d.tolist(), strict=True))
        if len(out) > 1:
            out.sort(key=lambda t: (t[1], t[0]))
        return out

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the index to ``path`` atomically (temp file + rename); see :mod:`neardup.index.format`."""
        with self._lock:
            write_index(self.snapshot(), Path(path))

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], mmap: bool = False, *, verify: bool = True
    ) -> HammingIndex:
        """Open an index written by :meth:`save`.

        ``mmap=True`` maps the arrays read-only (opens in seconds; adding raises
        :class:`~neardup.errors.IndexStateError`); ``mmap=False`` reads them into memory.
        ``verify`` checks every section's checksum (xxh3-64, GB/s).
        """
        return cls.from_snapshot(read_index(Path(path), mmap=mmap, verify=verify))

    def snapshot(self) -> IndexSnapshot:
        """The index's parts now, as one consistent :class:`~neardup.index.snapshot.IndexSnapshot`
        (plan, settings, sealed segments, append buffer), sharing their arrays: what
        :mod:`neardup.index.format` writes and :class:`~neardup.index.multi.IndexSet` probes.
        Use it right away; it does not follow later changes."""
        with self._lock:
            n = self._buf_n
            return IndexSnapshot(
                plan=self._plan,
                arrays=self._pa,
                settings=IndexSettings(
                    next_id=self._next_id,
                    buffer_size=self._buffer_size,
                    merge_factor=self._merge_factor,
                    compress=self._compress,
                    codec=self._codec,
                    block_bytes=self._block_bytes,
                ),
                segments=tuple(self._segments),
                buffer_fps=self._buf_fps[:n],
                buffer_ids=self._buf_ids[:n],
                buffer_alive=self._buf_alive[:n].copy(),
                read_only=self._readonly,
            )

    @classmethod
    def from_snapshot(cls, snapshot: IndexSnapshot) -> HammingIndex:
        """An index made of ``snapshot``'s parts (what :func:`neardup.index.format.read_index`
        returns): its segments are shared, not copied, and its live buffered rows are added to
        the new buffer (or, for a read-only snapshot, sealed into one more segment)."""
        plan, st = snapshot.plan, snapshot.settings
        idx = cls(
            bits=plan.bits,
            max_distance=plan.max_distance,
            plan=plan,
            buffer_size=st.buffer_size,
            merge_factor=st.merge_factor,
            compress=st.compress,
            codec=st.codec,
            block_bytes=st.block_bytes,
        )
        idx._segments = list(snapshot.segments)
        idx._next_id = st.next_id
        idx._readonly = snapshot.read_only
        bfps, bids = snapshot.live_buffer()
        if len(bids):
            if idx._readonly is not None:
                idx._segments.append(idx._build(np.array(bfps), np.array(bids)))
            else:
                idx._buf_fps[: len(bids)] = bfps
                idx._buf_ids[: len(bids)] = bids
                idx._buf_alive[: len(bids)] = True
                idx._buf_n = len(bids)
        return idx
