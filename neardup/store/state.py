"""What an open store holds in memory (:class:`StoreState`), shared by the modules that act on
it: :mod:`.recovery` (open, replay), :mod:`.applier` (the write path: log, then the memtable and
the pending overlay, SQLite behind), :mod:`.maintenance` (flush, compaction, retention, bulk
loads) and the :class:`~neardup.store.Store` facade (reads). One thread writes it (the online
writer); the fields other threads read are named where they are.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..index.bands import BandIndex
from .applier import MetaApplier, PendingRecords
from .layout import DataDir
from .memindex import MemTable
from .meta import MetaDB
from .segment import Segment
from .settings import StoreSettings
from .sketches import SketchTable
from .wal import WalWriter

__all__ = ["Frozen", "LiveSegment", "StoreState"]


@dataclass
class LiveSegment:
    """A segment the manifest names, with its search index."""

    entry: dict[str, Any]  # manifest entry
    segment: Segment
    index: Any  # BruteIndex or fast index
    dropped: Any = None  # (merge output) deleted row ids the merge left out
    #: every row of this segment older than this has been deleted from SQLite by retention
    #: (in memory; the manifest entry's ``expired_before`` is the part a checkpoint made
    #: durable, written by a flush)
    expired_before: float = -math.inf
    #: the rows by time, made on first use (:meth:`rows_in_time`): None, True where the rows
    #: are in time order already (a stream's segments), else (order, sorted times)
    time_order: Any = None

    def rows_in_time(
        self, lo: float, hi: float, limit: int | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Row ids and times of the rows with ``lo <= time < hi``, in time order: two binary
        searches once the rows' time order is known (a retention pass runs about once a
        second, and scanning a block of millions of times each time stalled the writer).
        ``limit``: only the oldest ``limit`` of them (a budgeted pass reads no more than it
        may delete, not the rest of an hour that is leaving)."""
        seg = self.segment
        ts = np.asarray(seg.times)
        if self.time_order is None:
            if len(ts) < 2 or bool(np.all(ts[1:] >= ts[:-1])):
                self.time_order = True
            else:
                order = np.argsort(ts, kind="stable")
                small = np.int32 if len(ts) < 2**31 else np.int64
                self.time_order = (order.astype(small), ts[order])
        by_time = ts if self.time_order is True else self.time_order[1]
        i, j = (int(x) for x in np.searchsorted(by_time, [lo, hi], side="left"))
        if limit is not None:
            j = min(j, i + max(int(limit), 0))
        if self.time_order is True:
            return np.asarray(seg.rowids[i:j], np.int64), np.asarray(ts[i:j])
        return np.asarray(seg.rowids[self.time_order[0][i:j]], np.int64), by_time[i:j]

    @property
    def partition(self) -> int:
        """The first time partition the segment holds rows of."""
        return int(self.entry["partition"])

    @property
    def last_partition(self) -> int:
        """The last one: a merge of ended partitions spans several (``maintenance.span_block``)."""
        return int(self.entry.get("last_partition", self.entry["partition"]))

    @property
    def partitions(self) -> range:
        return range(self.partition, self.last_partition + 1)


@dataclass
class Frozen:
    """A memtable handed to a background flush, with the log generations that hold its rows."""

    memtable: MemTable
    deleted: set[int]
    gens: list[int]
    bands: BandIndex | None = None
    sketches: SketchTable | None = None
    written: list[LiveSegment] | None = None
    expired: Any = None
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)
    failed_at: float = -math.inf  # monotonic time of the last failed build


class StoreState:
    """The data of one open store: settings, the memtable (and a frozen one being flushed),
    the live segments and manifest, the log, SQLite and the records not yet applied to it,
    and the counters :meth:`Store.stats <neardup.store.Store.stats>` reports.

    ``settings`` are resolved (the stored width and retention, the table settings) once the
    directory is open; ``settings.retention`` changes with ``set_retention``.
    """

    def __init__(
        self,
        root: DataDir | None,
        settings: StoreSettings,
        *,
        bits: int,
        radius: int,
        band_keys_of: Callable[[Sequence[str | None]], npt.NDArray[np.uint64]] | None,
        clock: Callable[[], float],
        sketch_width: int = 0,
    ) -> None:
        self.dir = root
        self.settings = settings
        self.bits = bits
        self.radius = radius
        self.band_keys_of = band_keys_of
        self.clock = clock
        self.memtable = self.new_memtable()
        self.memtable_deleted: set[int] = set()
        self.bandtable = BandIndex()
        #: bytes of each row's MinHash sketch (0: none kept; :mod:`.sketches`)
        self.sketch_width = sketch_width
        self.sketchtable = self.new_sketchtable()
        self.frozen: Frozen | None = None  # memtable being written to segments in the background
        self.live_gens: list[int] = []  # log generations whose rows are not yet in segments
        self.segments: list[LiveSegment] = []
        self.manifest: dict[str, Any] = {}
        self.wal: WalWriter | None = None
        self.meta: MetaDB | None = None
        #: acknowledged records not yet in SQLite (read by every thread, under its lock)
        self.pending = PendingRecords()
        self.applier: MetaApplier | None = None
        self.next_rowid = 0
        self.next_seq = 0
        self.seq_lock = threading.Lock()
        #: documents in the window (read by any thread; changed under ``count_lock``)
        self.documents = 0
        self.count_lock = threading.Lock()
        self.flushes = 0
        #: read-ahead on the segments' probed sections (None: not decided yet) and the
        #: segments it was decided for (:mod:`neardup.store.readahead`)
        self.read_ahead: bool | None = None
        self.read_ahead_layout: tuple[Path, ...] | None = None
        self.dropped_partitions = 0
        self.compactions = 0
        self.wal_truncated_bytes = 0
        self.replayed_records = 0
        self.restored_rows = 0  # rows recovered from SQLite on open (damaged log records)
        #: a changed retention's old edge still to be expired on open (``expire_before``)
        self.expire_pending: float | None = None
        self.rows_expired_at: float | None = None  # the cutoff of the last row expiry
        #: the last row expiry stopped short of its cutoff (its budget): the next one runs at once
        self.rows_expiry_behind = False
        #: rows the next budgeted retention pass may delete (``maintenance.expire``: sized from
        #: the last pass's rows a second to take about ``EXPIRY_PASS_SECONDS``); None: the cap
        self.expiry_budget: int | None = None
        self.flush_on_open = False  # a damaged log is retired by a flush once open
        self.search_pool: ThreadPoolExecutor | None = None
        # (the segments, an IndexSet over them, segments outside it, the memtable version)
        self.set_cache: tuple[list[LiveSegment], Any, list[LiveSegment], Any] | None = None
        # (the segments, their band-key sections): writer thread only
        self.segment_bands_cache: tuple[list[LiveSegment], list[Any]] | None = None
        # (the memtables' and the segments' band-key sections, them as one SectionGroup):
        # writer thread only
        self.band_group_cache: tuple[list[Any], Any] | None = None
        # (the segments, their sketch sections as one SegmentSketches): writer thread only
        self.sketch_group_cache: tuple[list[LiveSegment], Any] | None = None

    @property
    def db(self) -> MetaDB:
        """The metadata database (open from the start of recovery to :meth:`Store.close`)."""
        assert self.meta is not None
        return self.meta

    def new_memtable(self) -> MemTable:
        return MemTable(
            bits=self.bits, max_distance=self.radius, expected_size=self.settings.memtable_size
        )

    def new_sketchtable(self) -> SketchTable | None:
        return SketchTable(self.sketch_width) if self.sketch_width else None

    def partition_of(self, times: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        """The time partition of each time."""
        width = self.settings.partition_seconds
        assert width is not None
        return np.floor(np.asarray(times, dtype=np.float64) / width).astype(np.int64)

    def count(self, delta: int) -> None:
        """Change the document count (any thread reads it)."""
        with self.count_lock:
            self.documents += delta

    def manifest_with(self, **changes: Any) -> dict[str, Any]:
        """The manifest with these fields changed, the row and segment counters current."""
        return {
            **self.manifest,
            **changes,
            "next_rowid": self.next_rowid,
            "next_seq": self.next_seq,
        }
