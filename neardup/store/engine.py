"""The durable store's facade: :class:`Store`, over a write-ahead log, a memtable, immutable
segments and SQLite metadata.

:class:`Store` is driven by exactly one thread (the :class:`neardup.online.Deduplicator`
writer); only :meth:`Store.get_row`, :meth:`Store.list_ids`, :meth:`Store.stats` and ``len``
may be called from other threads. It knows nothing about texts or decisions: it stores rows and
answers range searches over row ids. What it holds is a :class:`~neardup.store.state.StoreState`;
the work is done along the store's seams:

* :mod:`.recovery`: opening a directory (lock, settings against ``config.json``, manifest,
  segments, SQLite, log replay, rows restored from SQLite);
* :mod:`.applier`: the one write protocol (:meth:`Store.append_group`, :meth:`Store.sync_log`,
  :meth:`Store.take_back`): a group into the log, the memtable and the pending overlay, and
  into SQLite behind it; reads through the overlay;
* :mod:`.maintenance`: flushes, compaction, retention, bulk loads;
* :mod:`.partitions`: the segment files of the time partitions and their indexes.
"""

from __future__ import annotations

import logging
import os
import time
import types
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from .._arrays import same_objects
from .._memory import process_rss_bytes
from ..errors import StorageError
from ..index.bands import SectionGroup, columns_are_groups, lookup
from ..index.scan import Result, empty_result, merge_results
from ..index.section_search import group_of
from . import applier, maintenance, readahead, recovery
from .layout import DataDir
from .memindex import MemTable, build_index, hamming_index_class
from .meta import MetaDB, Row
from .partitions import discard
from .recovery import CheckConfig
from .settings import StoreSettings
from .sketches import SegmentSketches, Sketches
from .state import LiveSegment, StoreState
from .wal import HEADER_SIZE
from .writes import BulkDocs, WriteGroup

__all__ = ["PARALLEL_QUERIES", "Store"]

log = logging.getLogger("neardup.store")

#: groups of at least this many queries search the segments on a thread pool
PARALLEL_QUERIES = 64
_SEARCH_THREADS = min(2, os.cpu_count() or 1)


class Store:
    """Rows (row id, fingerprint, time) with durable writes and range search.

    Open one on a data directory (created if missing; None keeps everything in memory) with
    its :class:`StoreSettings`; the settings kept with the data win where these give None
    (:meth:`StoreSettings.resolve`), and :attr:`settings` are the ones in force.

    Parameters
    ----------
    path : path-like or None
        Data directory; None: in memory, nothing durable.
    settings : StoreSettings, default=StoreSettings()
    bits : {64, 128}
        Fingerprint width.
    radius : int
        Largest search distance (indexes are built for it).
    band_keys_of : callable or None
        The MinHash channel: maps texts to their band entry keys (n, bands) uint64
        (:func:`neardup.fingerprint.minhash.band_entries`). With it the memtable keeps band keys (the
        log carries them), segments get them in their band-key section, merges carry them, and
        :meth:`search_bands` answers. None: SimHash only.
    sketch_width : int, default=0
        Bytes of each row's MinHash sketch (:mod:`neardup.store.sketches`), kept beside its
        band keys when the adds give one and read by :meth:`sketches`; 0: none kept.
    check_config : callable or None
        Called with the stored config body (or None) after the directory is locked; returns
        the body to persist (its ``store`` section is the store's own). Raises to refuse the
        open.
    clock : callable, default=time.time
        Unix seconds: where a retention change puts the old window's edge (rows older than
        ``now - old retention`` are deleted before a new retention applies).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        settings: StoreSettings | None = None,
        *,
        bits: int,
        radius: int,
        band_keys_of: Callable[[Sequence[str | None]], npt.NDArray[np.uint64]] | None = None,
        check_config: CheckConfig | None = None,
        clock: Callable[[], float] = time.time,
        sketch_width: int = 0,
    ) -> None:
        t0 = time.perf_counter()
        settings = StoreSettings() if settings is None else settings
        if not isinstance(settings, StoreSettings):
            raise TypeError(f"settings must be a StoreSettings, got {type(settings).__name__}")
        root = None if path is None else DataDir(path)
        st = StoreState(
            root,
            settings,
            bits=bits,
            radius=radius,
            band_keys_of=band_keys_of,
            clock=clock,
            sketch_width=sketch_width if band_keys_of is not None else 0,
        )
        self._state = st
        if root is None:
            st.settings, _ = settings.resolve(None, where="(in memory)", now=clock())
            st.meta = MetaDB(None)
            if check_config is not None:
                check_config(None)
            return
        readahead.choice()  # a bad NEARDUP_READ_AHEAD is refused before the directory opens
        recovery.open_directory(st, check_config)
        self.advise_read_ahead()
        log.info(
            "opened store %s in %.2f s: %d documents, %d segments, %d log records replayed, "
            "RSS %.0f MiB",
            path,
            time.perf_counter() - t0,
            st.documents,
            len(st.segments),
            st.replayed_records,
            process_rss_bytes() / 2**20,
        )

    @staticmethod
    def read_config(path: str | os.PathLike[str] | None) -> dict[str, Any] | None:
        """The config body stored in data directory ``path`` (None: no directory, or one
        without a config yet), read before the store is opened (it decides how to open it)."""
        return recovery.read_config(path)

    # ------------------------------------------------------------------ state
    @property
    def settings(self) -> StoreSettings:
        """The settings in force: the stored width and retention, the table settings."""
        return self._state.settings

    @property
    def durable(self) -> bool:
        """Whether writes go to a log in a data directory (False: in memory only)."""
        return self._state.wal is not None

    @property
    def next_rowid(self) -> int:
        """The row id the next :meth:`allocate` returns."""
        return self._state.next_rowid

    @property
    def segments(self) -> tuple[LiveSegment, ...]:
        """The live segments now, in the store's order (a snapshot: the writer replaces the
        list as it flushes, merges and drops; e.g. for :meth:`build_merged`)."""
        return tuple(self._state.segments)

    def __len__(self) -> int:
        """Documents in the window (any thread)."""
        return max(0, int(self._state.documents))

    # ------------------------------------------------------------------ reads
    def search(self, fps: npt.NDArray[np.uint64], max_distance: int) -> Result:
        """Row ids within ``max_distance`` in the memtable and every live segment (may include
        deleted or expired rows; the caller filters through :meth:`fetch`)."""
        st = self._state
        nq = len(fps)
        if nq == 0:
            return empty_result(0)
        segments = st.segments
        results: list[Result] = []
        frozen = st.frozen
        if frozen is not None:
            results.append(frozen.memtable.search(fps, max_distance))
        if nq >= PARALLEL_QUERIES and len(segments) > 1 and _SEARCH_THREADS > 1:
            # large groups: segments are searched on a small thread pool (the kernels release
            # the GIL) while this thread searches the memtable
            pool = self._search_pool()
            futures = [pool.submit(s.index.search, fps, max_distance) for s in segments]
            results.append(st.memtable.search(fps, max_distance))
            results += [f.result() for f in futures]
            return merge_results(nq, results)
        # small groups: every segment and the memtable's sealed runs in one kernel call, its
        # append buffer compared in the same call (the per-index fixed cost per segment and per
        # memtable run is most of a single-document search otherwise: benchmarks/bench_store.py)
        mt = st.memtable.index
        version = buf = None
        if mt is not None:
            version, *rows = mt.buffer_rows()
            buf = (rows[0], rows[1], rows[2])
        one, rest = self._segment_set(segments, mt, version)
        if buf is not None and one.sealed_ok:
            results.append(one.search(fps, max_distance, extra=buf))
        else:
            # no memtable index (brute-force fallback) or removed rows in it: search it apart
            results.append(st.memtable.search(fps, max_distance))
            results.append(one.search(fps, max_distance))
        results += [s.index.search(fps, max_distance) for s in rest]
        return merge_results(nq, results)

    def search_bands(
        self, entries: npt.NDArray[np.uint64], cap: int
    ) -> list[npt.NDArray[np.int64]]:
        """Row ids sharing a band key with each query (``entries`` (q, bands) entry keys) in the
        memtable, a flushing memtable and every segment with a band-key section; unique and
        sorted per query, at most ``2 * cap`` per bucket (:func:`neardup.index.bands.lookup`).
        May include deleted or expired rows (the caller filters through :meth:`fetch`)."""
        st = self._state
        tables = [st.bandtable]
        frozen = st.frozen
        if frozen is not None and frozen.bands is not None:
            tables.append(frozen.bands)
        runs: list[Any] = [self._band_group(tables)]
        runs += [t.buffer_run() for t in tables]
        return lookup(runs, entries, cap)

    def _band_group(self, tables: Sequence[Any]) -> SectionGroup:
        """Every sorted band-key section, the memtables' (``tables``) and the segments', as one
        :class:`~neardup.index.bands.SectionGroup`: one kernel call searches them all, where a
        group for the memtable and one for the segments cost a single request two calls and
        their array set-up (docs/store.md, *A single request's band look-ups*). Made again
        when a section changes: a memtable seals its buffer every few inserts."""
        st = self._state
        segments = st.segments
        seg = st.segment_bands_cache
        if seg is None or not same_objects(seg[0], segments):
            seg = (list(segments), [r for s in segments for r in s.segment.band_runs()])
            st.segment_bands_cache = seg
        parts = [sec for t in tables for sec in t.sections]
        parts += seg[1]
        st.band_group_cache = group_of(st.band_group_cache, parts)
        return st.band_group_cache[1]

    def sketches(self, rowids: npt.NDArray[np.int64]) -> Sketches:
        """(present, sketches) of ``rowids`` (:mod:`neardup.store.sketches`): from the memtable,
        a flushing memtable and the segments; a row without one (none kept, replayed from the
        log, deleted, gone) has present False. Writer thread, as :meth:`search_bands`."""
        st = self._state
        rowids = np.asarray(rowids, np.int64)
        w = max(st.sketch_width, 1)
        present = np.zeros(len(rowids), np.bool_)
        out = np.zeros((len(rowids), w), np.uint8)
        if not st.sketch_width or not len(rowids):
            return present, out
        tables = [st.sketchtable, st.frozen.sketches if st.frozen is not None else None]
        for t in tables:
            if t is not None:
                p, sk = t.lookup(rowids)
                present |= p
                out[p] = sk[p]
        self._segment_sketches().lookup(rowids, present, out)
        return present, out

    def _segment_sketches(self) -> SegmentSketches:
        """The segments' sketch sections as one :class:`~neardup.store.sketches.SegmentSketches`
        (one kernel call looks rows up in them all), made again when the segments change."""
        st = self._state
        segments = st.segments
        cached = st.sketch_group_cache
        if cached is not None and same_objects(cached[0], segments):
            return cached[1]
        previous = cached[1] if cached is not None else None
        group = SegmentSketches([s.segment for s in segments], max(st.sketch_width, 1), previous)
        st.sketch_group_cache = (list(segments), group)
        return group

    def _segment_set(
        self, segments: list[LiveSegment], mt: Any = None, version: Any = None
    ) -> tuple[Any, list[LiveSegment]]:
        """(an :class:`~neardup.index.multi.IndexSet` over the segments' HammingIndexes and the
        memtable index's sealed runs, the segments it does not cover), rebuilt when either
        changes (the memtable's runs change once per index buffer of adds)."""
        st = self._state
        cached = st.set_cache
        if cached is not None and cached[3] is version and same_objects(cached[0], segments):
            return cached[1], cached[2]
        from ..index.multi import IndexSet
        from .memindex import _FastIndex

        fast = [s for s in segments if isinstance(s.index, _FastIndex)]
        rest = [s for s in segments if not isinstance(s.index, _FastIndex)]
        one = IndexSet([s.index.index for s in fast], sealed=[mt] if mt is not None else [])
        if mt is not None and not one.sealed_ok:  # removed rows in the memtable: search it apart
            one = IndexSet([s.index.index for s in fast])
            one.sealed_ok = False
        st.set_cache = (list(segments), one, rest, version)
        return one, rest

    def _search_pool(self) -> ThreadPoolExecutor:
        st = self._state
        if st.search_pool is None:
            st.search_pool = ThreadPoolExecutor(
                _SEARCH_THREADS, thread_name_prefix="neardup-search"
            )
        return st.search_pool

    def lookup_ids(self, ids: Sequence[str]) -> dict[str, int]:
        """id -> row id for the ids that exist (records not yet in SQLite first)."""
        return applier.lookup_ids(self._state, ids)

    def ids_from(self, rowid: int) -> list[str]:
        """The ids of the documents with row ids ``rowid`` and above, in row id order
        (records not yet in SQLite first): what was written after :attr:`next_rowid` was
        ``rowid``."""
        return applier.ids_from(self._state, rowid)

    def fetch(self, rowids: Iterable[int], *, with_text: bool) -> dict[int, Row]:
        """Rows by row id (missing = deleted or expired; records not yet in SQLite first)."""
        return applier.fetch(self._state, rowids, with_text=with_text)

    def summaries(self, rowids: Iterable[int]) -> dict[int, bytes]:
        """The stored summaries of ``rowids`` (:meth:`MetaDB.put_summaries
        <neardup.store.meta.MetaDB.put_summaries>`; pending records first; rows without one
        left out). Any thread."""
        return applier.summaries(self._state, rowids)

    def get_row(self, id: str) -> Row | None:
        """The stored row of ``id`` or None (any thread)."""
        return applier.get_row(self._state, id)

    def list_ids(self, after: str, limit: int) -> list[str]:
        """Up to ``limit`` stored ids greater than ``after``, in id order (any thread): the
        ones in SQLite and the ones acknowledged but not applied to it yet. An id listed may
        be deleted or expired by the time it is read (:meth:`get_row` says so)."""
        return applier.list_ids(self._state, after, limit)

    # ------------------------------------------------------------------ the write protocol
    def allocate(self, n: int) -> int:
        """Reserve ``n`` row ids; returns the first."""
        st = self._state
        start = st.next_rowid
        st.next_rowid += n
        return start

    def append_group(self, group: WriteGroup) -> applier.Unsynced | None:
        """Log and apply one decided write group (its records in order); :class:`StorageError`
        means nothing was applied. Durable stores write it to the log *without* an fsync and
        apply it in memory (later groups see it): pass the returned :class:`Unsynced` to
        :meth:`sync_log` once written, or to :meth:`take_back` when that sync failed. In
        memory: applied at once, None returned."""
        return applier.append_group(self._state, group)

    def sync_log(self, groups: Sequence[applier.Unsynced]) -> None:
        """fsync the log: every group appended before this call is durable on return, and
        ``groups`` (those not yet synced, oldest first) go on to SQLite. :class:`StorageError`
        when the disk refuses: nothing is acknowledged, take the groups back."""
        applier.sync_log(self._state, groups)

    def take_back(self, groups: Sequence[applier.Unsynced]) -> None:
        """Take back groups whose log sync failed (oldest first): undone in memory, newest
        first, and the log cut back to where the oldest started. :class:`StorageError` when the
        log cannot be cut back (the in-memory state is undone regardless)."""
        applier.take_back(self._state, groups)

    def bulk_add(
        self,
        ids: list[str],
        fps: npt.NDArray[np.uint64],
        times: npt.NDArray[np.float64],
        docs: BulkDocs | None = None,
    ) -> int:
        """Seed new documents (no log, nothing decided; durable on return in a directory),
        with what an add stores beside each fingerprint when ``docs`` is given (texts, content
        hashes, metadata, band keys); :class:`InputError` when an id exists already (nothing
        is loaded)."""
        return maintenance.bulk_add(self._state, ids, fps, times, docs)

    # ------------------------------------------------------------------ housekeeping
    def sync_meta(self) -> None:
        """Wait until SQLite holds every acknowledged record (writer thread)."""
        maintenance.sync_meta(self._state)

    def expire(self, cutoff: float) -> int:
        """Delete what is older than ``cutoff``: whole partitions that ended before it, and
        (every :data:`~neardup.store.maintenance.ROW_EXPIRY_STEP_S` of its advance) the rows
        before it in the others. Returns the rows deleted."""
        return maintenance.expire(self._state, cutoff)

    def save_expiry_marks(self) -> bool:
        """Make how far retention got durable, as a flush does (the writer, at close, when
        there is nothing to flush): the next open does not walk the deleted rows again. True
        when the manifest was written."""
        return maintenance.save_expiry_marks(self._state)

    def set_retention(self, seconds: float | None) -> None:
        """Take and store a new retention window (None: keep everything); what the old window
        left behind is deleted first. :class:`StorageError` when it cannot be stored."""
        maintenance.set_retention(self._state, seconds)

    @property
    def flushing(self) -> bool:
        """A background flush is under way (its segments not yet installed)."""
        return self._state.frozen is not None

    @property
    def retention_behind(self) -> bool:
        """The last retention call left rows past the window for the next ones (a clock
        jump; :data:`~neardup.store.maintenance.EXPIRY_BATCH_ROWS`)."""
        return self._state.rows_expiry_behind

    @property
    def flush_due(self) -> bool:
        """The memtable is full and no flush is under way: :meth:`maybe_flush` starts one."""
        return maintenance.flush_due(self._state)

    @property
    def log_has_rows(self) -> bool:
        """Whether the current log generation holds records not yet written to segments."""
        wal = self._state.wal
        return wal is not None and wal.size > HEADER_SIZE

    def maybe_flush(self, cutoff: float | None = None) -> None:
        """Install a finished background flush; start one when the memtable is full (rows
        older than ``cutoff`` are left out of it)."""
        maintenance.maybe_flush(self._state, cutoff)

    def flush(self, *, cutoff: float | None = None) -> None:
        """Write the memtable to segments now (durable stores; finishes a flush under way
        first)."""
        maintenance.flush(self._state, cutoff)

    def finish_flush(self, *, wait: bool) -> bool:
        """Install a background flush once built (``wait``: wait for it); True when one was."""
        return maintenance.finish_flush(self._state, wait=wait)

    @property
    def layout_changes(self) -> int:
        """A number that changes whenever the set of segments does (flushes, merges, dropped
        partitions): the writer looks for merges to start only when it has moved."""
        st = self._state
        return st.flushes + st.compactions + st.dropped_partitions + len(st.segments)

    def advise_read_ahead(self) -> None:
        """Turn the kernel's read-ahead on the segments' probed sections on or off for the
        segments the store holds now (:mod:`neardup.store.readahead`; once for each set)."""
        readahead.apply(self._state)

    def compaction_candidates(self, max_segments: int) -> list[list[LiveSegment]]:
        """Groups of segments of one partition worth merging (writer thread)."""
        return maintenance.compaction_candidates(self._state, max_segments)

    def build_merged(self, segs: list[LiveSegment]) -> LiveSegment | None:
        """Merge segments into a new file, dropping deleted rows (any thread)."""
        return maintenance.build_merged(self._state, segs)

    def install_merged(self, segs: list[LiveSegment], merged: LiveSegment | None) -> bool:
        """Swap merged segments in (writer thread); False (and the output removed) when the
        inputs are no longer all live."""
        return maintenance.install_merged(self._state, segs, merged)

    def discard_merged(self, merged: LiveSegment) -> None:
        """Remove the files of a merge output that was not installed."""
        discard(merged)

    # ------------------------------------------------------------------ misc
    def warm_up(self) -> None:
        """Load the compiled kernels the first searches and writes would otherwise wait for:
        an index's build and search (the GIL-holding variant for a few queries, the
        GIL-releasing one for more), one search over the segments and the memtable for a few
        queries and for many (the search pool), and a memtable like this store's past its
        first buffer flush (its plan's build and search kernels)."""
        st = self._state
        bits, radius = st.bits, st.radius
        rng = np.random.default_rng(0)
        shape = (300,) if bits == 64 else (300, 2)
        fps = rng.integers(0, 2**64, shape, dtype=np.uint64)
        idx = build_index(fps, np.arange(300, dtype=np.int64), bits=bits, max_distance=radius)
        idx.search(fps[:2], radius)
        idx.search(fps[:16], radius)
        cls = hamming_index_class()
        if st.settings.compress_tables and cls is not None:
            # the compressed tables' build and probe kernels (a few queries and more); a
            # table layout forced, since the planner gives so small an index no tables
            cidx = cls(
                bits=bits,
                max_distance=radius,
                expected_size=300,
                layout="tables",
                compress=True,
                block_bytes=st.settings.table_block_bytes,
            )
            cidx.add(fps, ids=np.arange(300, dtype=np.int64))
            cidx.flush()
            cidx.search(fps[:2], radius)
            cidx.search(fps[:16], radius)
        nq = min(PARALLEL_QUERIES, 2048)
        many = rng.integers(0, 2**64, (nq, *shape[1:]), dtype=np.uint64)
        for m in (2, 16, nq):
            self.search(many[:m], radius)
        mt = MemTable(bits=bits, max_distance=radius, expected_size=st.settings.memtable_size)
        n = mt.buffer_size + 8
        rows = rng.integers(0, 2**64, (n, *shape[1:]), dtype=np.uint64)
        mt.add(rows, np.arange(n, dtype=np.int64), np.zeros(n))
        mt.search(rows[:2], radius)
        mt.search(rows[:16], radius)
        if mt.index is not None:
            # a small group's one kernel call over the segments and the memtable's runs, its
            # buffer compared in the same call (search, above): on a store with no segment yet
            # (a new node) the store's own searches above never reach it, and its first check
            # would compile it (seconds on a fresh cache, holding the GIL)
            from ..index.multi import IndexSet

            _version, buf_fps, buf_ids, buf_alive = mt.index.buffer_rows()
            one = IndexSet([], sealed=[mt.index])
            for m in (2, 16):
                one.search(rows[:m], radius, extra=(buf_fps, buf_ids, buf_alive))
        if st.band_keys_of is not None:  # a write's band entries checked for their layout
            columns_are_groups(np.zeros((1, 3), np.uint64))
        if st.sketch_width:  # the segments' sketch look-up (a request's band candidates)
            seg = types.SimpleNamespace(
                rowids=np.arange(4, dtype=np.int64),
                sketch_present=np.ones(4, np.bool_),
                sketches=np.zeros((4, st.sketch_width), np.uint8),
            )
            want = np.arange(3, dtype=np.int64)
            SegmentSketches([seg], st.sketch_width).lookup(
                want, np.zeros(3, np.bool_), np.zeros((3, st.sketch_width), np.uint8)
            )

    def stats(self) -> dict[str, Any]:
        """Counters for monitoring (any thread)."""
        st = self._state
        parts = {p for s in st.segments for p in s.partitions}
        wal, app, frozen = st.wal, st.applier, st.frozen
        return {
            "documents": st.documents,
            "memtable_rows": len(st.memtable),
            "flushing_rows": len(frozen.memtable) if frozen is not None else 0,
            "memtable_runs": st.memtable.runs,
            "memtable_merging": st.memtable.merging,
            "segments": len(st.segments),
            "segment_rows": int(sum(len(s.segment) for s in st.segments)),
            "partitions": len(parts),
            "wal_bytes": wal.size if wal is not None else 0,
            "wal_generation": wal.generation if wal is not None else 0,
            "wal_truncated_bytes": st.wal_truncated_bytes,
            "meta_pending_records": app.lag if app is not None else 0,
            "meta_transactions": app.transactions if app is not None else 0,
            "replayed_records": st.replayed_records,
            "restored_rows": st.restored_rows,
            "flushes": st.flushes,
            "dropped_partitions": st.dropped_partitions,
            # 1 while rows past the window wait for the next retention passes (a clock jump)
            "retention_behind": int(st.rows_expiry_behind),
            "compactions": st.compactions,
            "compress_tables": bool(st.settings.compress_tables),
            "rss_mib": process_rss_bytes() / 2**20,
            **(st.meta.read_stats() if st.meta is not None else {}),
        }

    def close(self) -> None:
        """Stop the background threads and release the directory (a flush is the caller's:
        what the log holds is replayed on the next open)."""
        st = self._state
        if st.search_pool is not None:
            st.search_pool.shutdown(wait=True)
            st.search_pool = None
        if st.applier is not None:
            try:
                st.applier.close()
            except StorageError:  # the log keeps the records; the next open applies them
                log.exception("metadata not fully applied at close")
            st.applier = None
        if st.wal is not None:
            st.wal.close()
        for s in st.segments:
            s.segment.close()
        st.segments = []
        st.set_cache = st.band_group_cache = st.sketch_group_cache = None
        st.segment_bands_cache = None
        st.db.close()
        if st.dir is not None:
            st.dir.unlock()
