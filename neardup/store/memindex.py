"""Search structures of the store: the in-memory memtable and per-segment indexes.

Everything here speaks the :class:`neardup.HammingIndex` contract (``search(queries,
max_distance) -> (lims, ids, distances)``, CSR, per query sorted by ``(distance, id)``) with
int64 *row ids* as ids. :class:`neardup.index.scan.BruteIndex` is the brute-force search (the
fallback when a :class:`~neardup.HammingIndex` cannot be built); :func:`build_index` picks the
fast index when there is one.

The memtable is one incremental :class:`neardup.HammingIndex` (its own small brute-force
buffer of ``buffer_size`` rows plus log-structured sorted segments), so a group's search over
it is a single call. Without :mod:`neardup.index` (or with ``NEARDUP_REFERENCE=store``) it is
tiered over :class:`BruteIndex`: new rows go into a small buffer; a full buffer is frozen into an
immutable "run"; runs of similar size are merged logarithmically (``O(log n)`` runs).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import numpy.typing as npt

from .._reference import use_reference
from .._threads import lower_thread_priority
from ..index.scan import BruteIndex, Result, empty_result, merge_results

__all__ = [
    "MemTable",
    "build_index",
    "compress_pays",
    "hamming_index_class",
]

log = logging.getLogger("neardup.store")


def hamming_index_class() -> Any | None:
    """:class:`neardup.HammingIndex`, or None under ``NEARDUP_REFERENCE=store`` (brute force)."""
    if use_reference("store"):
        return None
    from ..index import HammingIndex

    return HammingIndex


class _FastIndex:
    """Adapter around a :class:`neardup.HammingIndex` (keeps the call shape in one place)."""

    def __init__(self, index: Any) -> None:
        self.index = index

    def __len__(self) -> int:
        return len(self.index)

    def search(self, queries: npt.NDArray[np.uint64], max_distance: int) -> Result:
        lims, ids, ds = self.index.search(queries, max_distance=max_distance)
        return (
            np.asarray(lims, dtype=np.int64),
            np.asarray(ids, dtype=np.int64),
            np.asarray(ds, dtype=np.int32),
        )


def _size_class(n: int) -> int:
    # plan for the size rounded up to a power of two: the planner caches plans by size, and
    # memtable runs of every size would otherwise each pay a fresh plan search
    # (small indexes only: a segment's plan is searched once and should fit its size)
    return n if n > 1 << 20 else 1 << (n - 1).bit_length()


def compress_pays(
    n: int,
    *,
    bits: int,
    max_distance: int,
    block_bytes: int | None = None,
    codec: str | None = None,
) -> bool:
    """Whether an index of ``n`` rows is built compressed under the store's
    ``compress_tables``: only where the planner gives the compressed index tables. Under its
    default memory cap it plans brute force for small compressed indexes (a few thousand rows
    at k = 3), which would make a small segment's search a scan; those segments keep
    uncompressed tables (a small share of a store's memory)."""
    if n < 256 or hamming_index_class() is None:
        return False
    from ..index import plan_index
    from ..index.compressed import DEFAULT_BLOCK_BYTES, DEFAULT_CODEC

    plan = plan_index(
        bits,
        max_distance,
        _size_class(n),
        compress=True,
        codec=codec or DEFAULT_CODEC,
        block_bytes=DEFAULT_BLOCK_BYTES if block_bytes is None else block_bytes,
    )
    return plan.kind == "tables"


def build_index(
    fingerprints: npt.NDArray[np.uint64],
    ids: npt.NDArray[np.int64],
    *,
    bits: int,
    max_distance: int,
    compress: bool = False,
    block_bytes: int | None = None,
    codec: str | None = None,
) -> BruteIndex | _FastIndex:
    """An immutable index over ``fingerprints`` (ids = row ids): HammingIndex or brute force.

    ``compress``: compressed tables (``HammingIndex(compress=True)`` in ``codec``, None: the
    index's default, Elias–Fano; ``block_bytes`` per block of ``codec="blocks"``) where
    :func:`compress_pays`: the store's ``compress_tables`` setting for segments."""
    cls = hamming_index_class()
    if cls is None or len(ids) < 256:
        return BruteIndex(fingerprints, ids)
    try:
        size_class = _size_class(len(ids))
        extra: dict[str, Any] = {}
        if compress and compress_pays(
            len(ids), bits=bits, max_distance=max_distance, block_bytes=block_bytes, codec=codec
        ):
            extra["compress"] = True
            if block_bytes is not None:
                extra["block_bytes"] = block_bytes
            if codec is not None:
                extra["codec"] = codec
        idx = cls(bits=bits, max_distance=max_distance, expected_size=size_class, **extra)
        idx.add(fingerprints, ids=np.asarray(ids, dtype=np.int64))
    except Exception:
        log.exception("building a HammingIndex failed; using brute-force search for these rows")
        return BruteIndex(fingerprints, ids)
    return _FastIndex(idx)


class MemTable:
    """Mutable in-memory index of the rows not yet written to segments.

    Parameters
    ----------
    bits : {64, 128}
    max_distance : int
        Largest search radius.
    buffer_size : int, default=1024
        Rows searched by brute force before they are sorted into an indexed segment.
    expected_size : int, default=1 << 20
        Rows the memtable is expected to reach (sizes the index plan).
    """

    def __init__(
        self,
        *,
        bits: int,
        max_distance: int,
        buffer_size: int = 1024,
        expected_size: int = 1 << 20,
    ) -> None:
        self.bits = bits
        self.max_distance = max_distance
        self.buffer_size = buffer_size
        self.expected_size = expected_size
        shape = (0,) if bits == 64 else (0, 2)
        self._empty_fp = np.zeros(shape, dtype=np.uint64)
        # every row, in insertion order (for flushes)
        self._fp: list[npt.NDArray[np.uint64]] = []
        self._id: list[npt.NDArray[np.int64]] = []
        self._t: list[npt.NDArray[np.float64]] = []
        self._n = 0
        self._index: Any = self._new_index()
        self._tiered: _TieredRuns | None = (
            None if self._index is not None else _TieredRuns(bits, max_distance, buffer_size)
        )

    def _new_index(self) -> Any:
        cls = hamming_index_class()
        if cls is None:
            return None
        try:
            return cls(
                bits=self.bits,
                max_distance=self.max_distance,
                expected_size=max(self.expected_size, 1024),
                buffer_size=self.buffer_size,
                # the writer adds every group: merges (long on a large memtable; see
                # benchmarks/bench_store.py) must not stall it; they run on the index's merge
                # thread
                background_merges=True,
                # ... at a lower CPU priority: the event loop deciding requests inline wins
                merge_thread_init=lower_thread_priority,
            )
        except Exception:
            log.exception("creating the memtable's HammingIndex failed; using brute-force runs")
            return None

    def __len__(self) -> int:
        return self._n

    @property
    def index(self) -> Any:
        """The memtable's :class:`~neardup.index.HammingIndex` (None on the brute-force
        fallback)."""
        return self._index if self._tiered is None else None

    @property
    def merging(self) -> bool:
        """A background merge of the memtable's index is running."""
        return self._index is not None and self._index.merging

    @property
    def runs(self) -> int:
        """Separately searched parts (index segments or brute-force runs)."""
        if self._tiered is not None:
            return self._tiered.runs
        return (self._index.segment_count if self._index is not None else 0) + 1

    def add(
        self,
        fps: npt.NDArray[np.uint64],
        rowids: npt.NDArray[np.int64],
        times: npt.NDArray[np.float64],
    ) -> None:
        if not len(rowids):
            return
        f = np.ascontiguousarray(fps, dtype=np.uint64)
        r = np.ascontiguousarray(rowids, dtype=np.int64)
        t = np.asarray(times, dtype=np.float64)
        if self._tiered is not None:
            self._tiered.add(f, r, t)
        else:
            self._index.add(f, ids=r)
        self._fp.append(f)
        self._id.append(r)
        self._t.append(t)
        self._n += len(r)

    def search(self, queries: npt.NDArray[np.uint64], max_distance: int) -> Result:
        nq = len(queries)
        if self._n == 0 or nq == 0:
            return empty_result(nq)
        if self._tiered is not None:
            return self._tiered.search(queries, max_distance)
        lims, ids, ds = self._index.search(queries, max_distance=max_distance)
        return lims, ids, ds

    def arrays(
        self,
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """All rows (fingerprints, rowids, times), ordered by rowid."""
        if not self._n:
            return self._empty_fp, np.zeros(0, np.int64), np.zeros(0, np.float64)
        fps = np.concatenate(self._fp)
        rids = np.concatenate(self._id)
        ts = np.concatenate(self._t)
        self._fp, self._id, self._t = [fps], [rids], [ts]
        order = np.argsort(rids, kind="stable")
        return fps[order], rids[order], ts[order]

    def rows_and_times_before(
        self, cutoff: float
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Row ids and times of the rows whose time is older than ``cutoff`` (retention).
        Reads only (a flush's build may read a frozen memtable on its own thread meanwhile)."""
        if not self._n:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        ts = np.concatenate(self._t)
        old = ts < cutoff
        return np.concatenate(self._id)[old], ts[old]

    def remove_rows(self, rowids: npt.NDArray[np.int64]) -> None:
        """Take rows out again (undoing adds whose log write was never made durable)."""
        rids = np.asarray(rowids, dtype=np.int64)
        if not len(rids) or not self._n:
            return
        fps = np.concatenate(self._fp)
        ids = np.concatenate(self._id)
        ts = np.concatenate(self._t)
        keep = ~np.isin(ids, rids)
        self._fp, self._id, self._t = [fps[keep]], [ids[keep]], [ts[keep]]
        self._n = int(keep.sum())
        gone = ids[~keep]
        if self._tiered is not None:  # rebuild the brute-force runs from what is left
            self._tiered.clear()
            if self._n:
                self._tiered.add(fps[keep], ids[keep], ts[keep])
        elif len(gone):
            self._index.remove(gone)

    def clear(self) -> None:
        self._fp, self._id, self._t, self._n = [], [], [], 0
        if self._tiered is not None:
            self._tiered.clear()
        else:
            self._index = self._new_index()
            if self._index is None:
                self._tiered = _TieredRuns(self.bits, self.max_distance, self.buffer_size)


class _TieredRuns:
    """Brute-force buffer + immutable runs merged logarithmically (no fast index needed)."""

    def __init__(self, bits: int, max_distance: int, buffer_size: int) -> None:
        self.bits = bits
        self.max_distance = max_distance
        self.buffer_size = buffer_size
        shape = (0,) if bits == 64 else (0, 2)
        self._empty_fp = np.zeros(shape, dtype=np.uint64)
        self._buf_fp: list[npt.NDArray[np.uint64]] = []
        self._buf_id: list[npt.NDArray[np.int64]] = []
        self._buf_n = 0
        self._buf_index: BruteIndex | None = None
        # runs: (index, fingerprints, rowids)
        self._runs: list[tuple[Any, npt.NDArray[np.uint64], npt.NDArray[np.int64]]] = []

    @property
    def runs(self) -> int:
        return len(self._runs)

    def add(
        self,
        fps: npt.NDArray[np.uint64],
        rowids: npt.NDArray[np.int64],
        times: npt.NDArray[np.float64],
    ) -> None:
        self._buf_fp.append(fps)
        self._buf_id.append(rowids)
        self._buf_n += len(rowids)
        self._buf_index = None
        if self._buf_n >= self.buffer_size:
            self._freeze()

    def _buffer(self) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
        if len(self._buf_fp) > 1:
            self._buf_fp = [np.concatenate(self._buf_fp)]
            self._buf_id = [np.concatenate(self._buf_id)]
        if not self._buf_fp:
            return self._empty_fp, np.zeros(0, np.int64)
        return self._buf_fp[0], self._buf_id[0]

    def _freeze(self) -> None:
        fp, rid = self._buffer()
        self._buf_fp, self._buf_id, self._buf_n, self._buf_index = [], [], 0, None
        self._runs.append((None, fp, rid))
        # merge while the newest run is at least half the size of the one before it
        while len(self._runs) >= 2 and len(self._runs[-1][2]) * 2 >= len(self._runs[-2][2]):
            a, b = self._runs[-2], self._runs[-1]
            self._runs[-2:] = [(None, np.concatenate([a[1], b[1]]), np.concatenate([a[2], b[2]]))]
        self._runs = [
            (
                r[0]
                if r[0] is not None
                else build_index(r[1], r[2], bits=self.bits, max_distance=self.max_distance),
                r[1],
                r[2],
            )
            for r in self._runs
        ]

    def search(self, queries: npt.NDArray[np.uint64], max_distance: int) -> Result:
        nq = len(queries)
        results = [r[0].search(queries, max_distance) for r in self._runs]
        if self._buf_n:
            if self._buf_index is None:
                fp, rid = self._buffer()
                self._buf_index = BruteIndex(fp, rid)
            results.append(self._buf_index.search(queries, max_distance))
        return merge_results(nq, results)

    def clear(self) -> None:
        self._buf_fp, self._buf_id, self._buf_n, self._buf_index = [], [], 0, None
        self._runs = []
