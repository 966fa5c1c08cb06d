"""The durable store: write-ahead log + memtable + immutable segments + SQLite metadata.

:class:`Store` is driven by exactly one thread (the :class:`neardup.online.Deduplicator`
writer); only :meth:`Store.get_row`, :meth:`Store.stats` and ``len`` may be called from other
threads. It knows nothing about texts or decisions: it stores rows and answers range searches
over row ids.

Write path (:meth:`Store.commit`): encode records -> append to the log and fsync once (group
commit) -> add to the memtable and to the *pending* overlay -> acknowledge. SQLite is derived
from the log: a background *applier* thread writes the pending records to it in large
transactions (recording the log position applied, in the same transaction) and then drops them
from the overlay, so reads (:meth:`Store.lookup_ids`, :meth:`Store.fetch`,
:meth:`Store.get_row`) consult the overlay first and SQLite second. A restart re-applies only
the log records after the recorded position. A failed append raises :class:`StorageError`
before any in-memory state changes.

Flush (:meth:`Store.flush`, automatic past ``memtable_size`` rows): one segment per time
partition is written (temp, fsync, verify, rename), its HammingIndex saved beside it, a fresh
log generation created, SQLite checkpointed, the manifest replaced atomically, and only then
the old log deleted. A crash at any point leaves either the old or the new manifest, and files
the live manifest does not name are removed on the next open.

Retention (:meth:`Store.expire`): partitions whose whole time range is older than
``now - retention`` are dropped: their rows deleted from SQLite in one transaction, then the
manifest replaced, then the files unlinked. Rows past the window in partitions that have not
ended are deleted from SQLite too (:meth:`Store._expire_rows`, every
:data:`ROW_EXPIRY_STEP_S` of the cutoff's advance): what is past the window is gone for good (a
wider window later does not bring it back) and the document count is what is served. A
retention change first deletes what the old window had left behind (at once when it is
changed on an open store; recorded in ``config.json`` as ``expire_before`` and done on open
when it is changed by reopening).

Recovery (:meth:`Store.__init__`): lock, read manifest, remove orphans, open and verify every
segment (a damaged one raises :class:`CorruptFileError`), replay the log into SQLite and the
memtable (a torn tail is truncated and counted in ``stats()["wal_truncated_bytes"]``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._threads import lower_thread_priority
from ..errors import (
    ConfigError,
    CorruptFileError,
    FormatError,
    InputError,
    NeardupError,
    StorageError,
)
from ..index.bands import BandIndex, BandSection, lookup, section_for_rows
from ..index.compressed import DEFAULT_BLOCK_BYTES, check_block_bytes
from ..index.scan import BruteIndex, Result, empty_result, merge_results
from .layout import DataDir
from .memindex import MemTable, build_index, compress_pays, hamming_index_class
from .meta import NO_CONTENT_HASH, MetaDB, Row, replace_database, salvage, sqlite_error
from .segment import Segment, open_segment, write_segment
from .wal import (
    HEADER_SIZE,
    OP_ADD,
    OP_ADD_KEYS,
    AddRecord,
    DeleteRecord,
    WalWriter,
    frame_records,
    fsync_dir,
    keys_from_log,
    log_keys,
    read_wal,
    storage_error,
)
from .writes import WriteGroup

__all__ = ["Store", "Unsynced", "WriteGroup", "parse_duration"]

log = logging.getLogger("neardup.store")

_SEG_RE = re.compile(r"^seg-(-?\d+)-(\d+)\.nds(\.hidx)?(\.tmp)?$")
_WAL_RE = re.compile(r"^wal-(\d+)\.log$")


@dataclass
class _Frozen:
    """A memtable handed to a background flush, with the log generations that hold its rows."""

    memtable: MemTable
    deleted: set[int]
    gens: list[int]
    bands: BandIndex | None = None
    written: list[Any] | None = None
    expired: Any = None
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)
    failed_at: float = -math.inf  # monotonic time of the last failed build


@dataclass
class _LiveSegment:
    entry: dict[str, Any]  # manifest entry
    segment: Segment
    index: Any  # BruteIndex or fast index
    dropped: Any = None  # (merge output) deleted row ids the merge left out
    #: every row of this segment older than this has been deleted from SQLite by retention
    #: (in memory; the manifest entry's ``expired_before`` is the part a checkpoint made
    #: durable, written by a flush)
    expired_before: float = -math.inf

    @property
    def partition(self) -> int:
        return int(self.entry["partition"])


#: groups of at least this many queries search the segments on a thread pool
PARALLEL_QUERIES = 64
#: the metadata applier waits this long for more records before a transaction (see _Applier)
_APPLY_LINGER_S = 0.02
_SEARCH_THREADS = min(2, os.cpu_count() or 1)
#: the writer waits for the metadata applier when this many records are not yet in SQLite
MAX_PENDING_RECORDS = 200_000
#: most records one applier transaction writes
_APPLY_BATCH = 50_000
#: rows of a replayed log whose band keys go into the memtable at once (bounded temporaries)
_REPLAY_CHUNK = 1 << 18
#: rows past the retention window in partitions that have not ended are deleted from SQLite
#: once the cutoff has moved this many seconds since the last time (reads filter them by time
#: meanwhile); each pass reads the times of the segments that straddle the cutoff
ROW_EXPIRY_STEP_S = 10.0


def _row(r: AddRecord, with_text: bool) -> Row:
    fp = r.fp_hi.to_bytes(8, "little") + r.fp_lo.to_bytes(8, "little")
    return Row(
        r.rowid, r.id, r.time, fp, r.chash, r.flags, r.metadata, r.text if with_text else None
    )


_Record = AddRecord | DeleteRecord
#: what :meth:`_Pending.undo` needs per record: (the record, the entries it replaced by id and
#: by row id)
_UndoLog = list[tuple[_Record, _Record | None, _Record | None]]


class _Pending:
    """Records acknowledged (in the log) but not yet applied to SQLite: the latest record per
    id and per row id (an ``ADD``, or a ``DELETE`` = absent). Shared by the writer (adds), the
    applier (removes what it applied) and readers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_id: dict[str, AddRecord | DeleteRecord] = {}
        self.by_rid: dict[int, AddRecord | DeleteRecord] = {}

    def __len__(self) -> int:
        return len(self.by_rid)

    def add(
        self, records: Iterable[AddRecord | DeleteRecord], *, undo: bool = False
    ) -> _UndoLog | None:
        """Make records visible; with ``undo``, return what :meth:`undo` needs to take them
        back (the entries they replaced)."""
        log: _UndoLog | None = [] if undo else None
        with self.lock:
            by_id, by_rid = self.by_id, self.by_rid
            for r in records:
                if log is not None:
                    log.append((r, by_id.get(r.id), by_rid.get(r.rowid)))
                by_id[r.id] = r
                by_rid[r.rowid] = r
        return log

    def undo(self, log: _UndoLog) -> None:
        """Take back an :meth:`add` (newest first): restore the entries it replaced."""
        with self.lock:
            by_id, by_rid = self.by_id, self.by_rid
            for r, prev_id, prev_rid in reversed(log):
                if by_id.get(r.id) is r:
                    if prev_id is None:
                        del by_id[r.id]
                    else:
                        by_id[r.id] = prev_id
                if by_rid.get(r.rowid) is r:
                    if prev_rid is None:
                        del by_rid[r.rowid]
                    else:
                        by_rid[r.rowid] = prev_rid

    def remove(self, records: Iterable[AddRecord | DeleteRecord]) -> None:
        """Forget applied records (unless a later record for the same id / row replaced them)."""
        with self.lock:
            by_id, by_rid = self.by_id, self.by_rid
            for r in records:
                if by_id.get(r.id) is r:
                    del by_id[r.id]
                if by_rid.get(r.rowid) is r:
                    del by_rid[r.rowid]
            if not by_rid and not by_id:
                # a dict keeps the table it grew to (e.g. 230k entries after a batch burst),
                # and every full garbage collection walks it: start small again
                self.by_id, self.by_rid = {}, {}


@dataclass
class Unsynced:
    """A pipelined commit written to the log but not yet fsynced (see :meth:`Store.commit`)."""

    generation: int
    start: int  # log offset its records start at (the log is cut back here if unsynced)
    end: int  # log offset its records end at
    records: list[AddRecord | DeleteRecord]
    undo_log: _UndoLog
    added: npt.NDArray[np.int64]  # row ids added to the memtable
    deleted: list[int]  # row ids marked deleted


class _Applier:
    """Background thread writing committed log records to SQLite, in log order, in large
    transactions; each transaction also records the log position it reached. A failing
    SQLite write is retried (with back-off) and never loses records: they stay in the log and
    in the pending overlay."""

    def __init__(self, meta: MetaDB, pending: _Pending) -> None:
        self.meta = meta
        self.pending = pending
        self._cv = threading.Condition()
        self._queue: deque[tuple[int, int, list[AddRecord | DeleteRecord]]] = deque()
        self._busy = False
        self._stop = False
        self.lag = 0  # records queued or being applied
        self._queued = 0  # records queued, not yet taken
        self._hurry = 0  # callers waiting for the queue to empty: no lingering
        self._lingering = False  # the applier waits for more records before a transaction
        self.error: BaseException | None = None
        self.transactions = 0
        self._thread = threading.Thread(target=self._run, name="neardup-meta-applier", daemon=True)
        self._thread.start()

    def submit(self, generation: int, end: int, records: list[AddRecord | DeleteRecord]) -> None:
        with self._cv:
            self._queue.append((generation, end, records))
            self.lag += len(records)
            self._queued += len(records)
            # while the applier lingers for more, a wake-up per group would only send it back
            # to sleep (a futex wake and a context switch per single document); wake it when
            # it sleeps with nothing to do, or once a transaction's worth is queued
            if not self._lingering or self._queued >= _APPLY_BATCH:
                self._cv.notify_all()

    def _run(self) -> None:
        delay = 0.05
        while True:
            with self._cv:
                while not self._queue and not self._stop:
                    self._cv.wait()
                if not self._queue:
                    return
                # linger a little so that single-document groups become one transaction per
                # _APPLY_LINGER_S instead of one each: fewer wake-ups and commits of a
                # thread that competes with the writer and the event loop for the GIL (reads
                # never wait for SQLite: the pending overlay answers them)
                deadline = time.monotonic() + _APPLY_LINGER_S
                self._lingering = True
                while not self._stop and not self._hurry and self._queued < _APPLY_BATCH:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cv.wait(left)
                self._lingering = False
                batch: list[tuple[int, int, list[AddRecord | DeleteRecord]]] = []
                n = 0
                while self._queue and (not batch or n + len(self._queue[0][2]) <= _APPLY_BATCH):
                    item = self._queue.popleft()
                    batch.append(item)
                    n += len(item[2])
                self._queued -= n
                self._busy = True
            records = [r for item in batch for r in item[2]]
            positions: dict[int, int] = {}
            for g, end, _recs in batch:
                positions[g] = max(positions.get(g, 0), end)
            try:
                self.meta.apply(records, positions.items())
            except Exception as exc:
                log.exception("applying %d log records to SQLite failed; retrying", n)
                with self._cv:
                    self._queue.extendleft(reversed(batch))
                    self._queued += n
                    self._busy = False
                    self.error = exc
                    self._cv.notify_all()
                    self._cv.wait(delay)
                delay = min(delay * 2, 2.0)
                continue
            delay = 0.05
            self.pending.remove(records)
            # drop the batch before waiting for the next one: tens of thousands of records kept
            # alive by this frame would be scanned by every full garbage collection meanwhile
            # (a latency spike for every request in flight: benchmarks/bench_service.py)
            del batch, records, positions, item, _recs
            with self._cv:
                self._busy = False
                self.error = None
                self.lag -= n
                self.transactions += 1
                self._cv.notify_all()

    def wait_below(self, lag: int) -> None:
        """Block until at most ``lag`` records wait (the writer's back-pressure)."""
        with self._cv:
            self._hurry += 1
            self._cv.notify_all()
            try:
                while self.lag > lag and self.error is None:
                    self._cv.wait(1.0)
            finally:
                self._hurry -= 1

    def drain(self) -> None:
        """Block until every submitted record is in SQLite; :class:`StorageError` when SQLite
        keeps failing (the records stay in the log)."""
        with self._cv:
            self._hurry += 1
            self._cv.notify_all()
            try:
                while self._queue or self._busy:
                    if self.error is not None and not self._busy:
                        raise StorageError(
                            f"metadata (SQLite) updates are failing ({self.error}); the log "
                            "still holds every acknowledged row"
                        )
                    self._cv.wait(1.0)
            finally:
                self._hurry -= 1

    def close(self) -> None:
        try:
            self.drain()
        finally:
            with self._cv:
                self._stop = True
                self._queue.clear()
                self._cv.notify_all()
            self._thread.join()


def _rss_mib() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def fp_words(fps: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """(n, 2) hi/lo words for 64-bit (hi = fp, lo = 0) or 128-bit fingerprints."""
    if fps.ndim == 2:
        return fps
    out = np.zeros((len(fps), 2), dtype=np.uint64)
    out[:, 0] = fps
    return out


class Store:
    """Rows (row id, fingerprint, time) with durable writes and range search.

    Parameters
    ----------
    path : path-like or None
        Data directory (created if missing); None keeps everything in memory.
    bits : {64, 128}
    radius : int
        Largest search distance (indexes are built for it).
    partition_seconds : float
        Width of a time partition.
    memtable_size : int
        Rows in memory before an automatic flush to segments.
    check_config : callable
        Called with the stored config body (or None) after the directory is locked; returns
        the body to persist. Raises to refuse the open.
    repair : bool
        Truncate a log damaged in the middle instead of refusing to open (keeping every row
        SQLite still holds), and rebuild a damaged SQLite database from what is readable.
    verify_meta : bool
        Run SQLite's ``PRAGMA quick_check`` on open (a damaged database is refused, or rebuilt
        with ``repair``).
    band_keys_of : callable or None
        The MinHash channel: maps texts to their band entry keys (n, bands) uint64
        (:func:`neardup.fingerprint.minhash.band_entries`). With it the memtable keeps band keys
        (rebuilt from the log's texts on recovery), segments get a band-key section, merges
        carry it, and :meth:`search_bands` answers. None: SimHash only.
    compress_tables : bool or None
        Build and save every segment's index (its ``.hidx`` side file) with block-compressed
        tables (``HammingIndex(compress=True)``: about half the memory and file size of a
        segment index, exact results, slower probes; docs/store.md). Stored in the config body's
        ``store`` section, so a reopen keeps it; None: the stored setting (off for stores that
        never set it). A side file that does not match the setting is rebuilt on open.
        The memtable's index stays uncompressed (it changes with every write).
    table_block_bytes : int or None
        Block size of compressed tables (a multiple of 8 in 16..65536); None: the stored one,
        else :data:`neardup.index.compressed.DEFAULT_BLOCK_BYTES`. Applies to indexes built
        from then on.
    clock : callable, default=time.time
        Unix seconds: where a retention change puts the old window's edge (rows older than
        ``now - old retention`` are deleted before a new retention applies).

    The partition width is part of the data: ``check_config`` may return it under
    ``body["store"]["partition_seconds"]`` (it then replaces ``partition_seconds``), and every
    segment's times must fall inside its partition under that width, else the open is refused
    (nothing is deleted). A store whose config predates the ``store`` section gets the width its
    segments were written with (the given one when it fits, else inferred).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        *,
        bits: int,
        radius: int,
        partition_seconds: float,
        memtable_size: int = 1_000_000,
        check_config: Callable[[dict[str, Any] | None], dict[str, Any]] | None = None,
        repair: bool = False,
        verify_meta: bool = True,
        band_keys_of: Callable[[Sequence[str | None]], npt.NDArray[np.uint64]] | None = None,
        compress_tables: bool | None = None,
        table_block_bytes: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        t0 = time.perf_counter()
        self.clock = clock
        #: the retention the store runs under (the config body's), None: keep everything
        self.retention: float | None = None
        self._expire_pending: float | None = None  # see _open: a changed retention's leftovers
        self._rows_expired_at: float | None = None  # the cutoff of the last _expire_rows
        if compress_tables is not None and not isinstance(compress_tables, bool):
            raise ConfigError(
                f"compress_tables must be True, False or None (the stored setting), got "
                f"{compress_tables!r}"
            )
        if table_block_bytes is not None:
            table_block_bytes = check_block_bytes(table_block_bytes)
        self._compress_arg = compress_tables
        self._block_arg = table_block_bytes
        #: segment indexes are built with block-compressed tables (resolved on open)
        self.compress_tables = bool(compress_tables)
        self.table_block_bytes = table_block_bytes or DEFAULT_BLOCK_BYTES
        self.band_keys_of = band_keys_of
        self.bandtable = BandIndex()
        self.verify_meta = verify_meta
        self.restored_rows = 0  # rows recovered from SQLite on open (damaged log records)
        self._flush_on_open = False
        self.bits = bits
        self.radius = radius
        self.partition_seconds = float(partition_seconds)
        self.memtable_size = memtable_size
        self.memtable = MemTable(bits=bits, max_distance=radius, expected_size=memtable_size)
        self.memtable_deleted: set[int] = set()
        self.frozen: _Frozen | None = None  # memtable being written to segments in the background
        self.live_gens: list[int] = []  # log generations whose rows are not yet in segments
        self.segments: list[_LiveSegment] = []
        self.wal: WalWriter | None = None
        self.wal_truncated_bytes = 0
        self.replayed_records = 0
        self.next_rowid = 0
        self.next_seq = 0
        self.flushes = 0
        self.dropped_partitions = 0
        self.compactions = 0
        self._seq_lock = threading.Lock()
        self._count_lock = threading.Lock()
        self.pending = _Pending()
        self.applier: _Applier | None = None
        self._pool: ThreadPoolExecutor | None = None
        # (the segments, an IndexSet over them, segments outside it): see _segment_set
        self._set_cache: tuple[list[_LiveSegment], Any, list[_LiveSegment], Any] | None = None
        self.dir: DataDir | None = None
        if path is None:
            self.meta = MetaDB(None)
            if check_config is not None:
                self.retention = _retention_of(check_config(None))
            self.documents = 0
            return
        self.dir = DataDir(path)
        root = self.dir.root
        before = {f.name for f in root.iterdir()} if root.is_dir() else None
        try:
            self.dir.lock()
        except OSError as exc:
            if not before:  # leave no new directory behind
                with contextlib.suppress(OSError):
                    (root / "LOCK").unlink()
                    root.rmdir()
            raise storage_error(exc, root, "open the data directory") from exc
        try:
            self._open(check_config, repair)
            self.applier = _Applier(self.meta, self.pending)
            if self._expire_pending is not None:
                self._finish_retention_change()
            if self._flush_on_open:
                # the damaged log is retired only once its rows are in segments: a crash before
                # that finds the same log and restores the same rows again
                self.flush()
                log.warning(
                    "%s: damaged log retired: its rows (%d restored from SQLite) are in segments",
                    root,
                    self.restored_rows,
                )
        except BaseException as exc:
            self._abandon_open(before)
            if isinstance(exc, NeardupError) or not isinstance(exc, Exception):
                raise
            err = (
                storage_error(exc, root, "open the store in")
                if isinstance(exc, OSError)
                else sqlite_error(exc, root / "meta.sqlite3", "open the store in")
            )
            if err is exc:
                raise
            raise err from exc
        log.info(
            "opened store %s in %.2f s: %d documents, %d segments, %d log records replayed, RSS %.0f MiB",
            path,
            time.perf_counter() - t0,
            self.documents,
            len(self.segments),
            self.replayed_records,
            _rss_mib(),
        )

    # ------------------------------------------------------------------ open / recovery
    #: files an open may create; a failed open removes those that were not there before it
    _CREATED = re.compile(
        r"^(config\.json|MANIFEST\.json|meta\.sqlite3(-wal|-shm)?|wal-\d+\.log|.*\.tmp)$"
    )

    def _abandon_open(self, before: set[str] | None) -> None:
        """Undo a failed open: close what it opened and remove the files it created (on a full
        disk a retried start must not find less space each time)."""
        if self.applier is not None:
            with contextlib.suppress(Exception):
                self.applier.close()
            self.applier = None
        if self.wal is not None:
            with contextlib.suppress(Exception):
                self.wal.close()
            self.wal = None
        for s in self.segments:
            with contextlib.suppress(Exception):
                s.segment.close()
        self.segments = []
        if getattr(self, "meta", None) is not None:
            with contextlib.suppress(Exception):
                self.meta.close()
        assert self.dir is not None
        root = self.dir.root
        with contextlib.suppress(OSError):
            for f in root.iterdir():
                if (before is None or f.name not in before) and self._CREATED.match(f.name):
                    log.info("%s: removing what the failed open created", f)
                    f.unlink(missing_ok=True)
        self.dir.unlock()
        if not before:  # the directory was new (or empty): leave nothing behind
            with contextlib.suppress(OSError):
                (root / "LOCK").unlink()
                root.rmdir()

    def _open(
        self, check_config: Callable[[dict[str, Any] | None], dict[str, Any]] | None, repair: bool
    ) -> None:
        d = self.dir
        assert d is not None
        from .layout import read_json_file, write_json_file

        stored = read_json_file(d.config_path) if d.config_path.exists() else None
        body = check_config(stored) if check_config is not None else stored
        store_cfg = (body or {}).get("store")
        if store_cfg and store_cfg.get("partition_seconds"):
            self.partition_seconds = float(store_cfg["partition_seconds"])
        body = self._resolve_compression(stored, body)
        manifest = d.read_manifest()
        if manifest is None:
            manifest = {
                "segments": [],
                "wal_generation": 1,
                "wal_generations": [1],
                "gen_start_rowid": {"1": 0},
                "next_rowid": 0,
                "next_seq": 0,
            }
        self.manifest = manifest
        self.next_rowid = int(manifest["next_rowid"])
        self.next_seq = int(manifest["next_seq"])
        gen = int(manifest["wal_generation"])
        gens = [int(g) for g in manifest.get("wal_generations", [gen])]
        live = {e["file"] for e in manifest["segments"]}
        for f in d.root.iterdir():
            m = _SEG_RE.match(f.name)
            if m and (m.group(4) or f.name.removesuffix(".hidx") not in live):
                log.warning(
                    "%s: removing file not named by the manifest (left by an interrupted flush)", f
                )
                f.unlink()
            w = _WAL_RE.match(f.name)
            if w and int(w.group(1)) not in gens:
                log.info("%s: removing retired log generation", f)
                f.unlink()
        for entry in manifest["segments"]:
            self.segments.append(self._load_segment(entry))
            self.next_rowid = max(self.next_rowid, int(entry["max_rowid"]) + 1)
        # the width decides which partition each stored row is in, so which rows retention
        # drops: it must be the one the segments were written with
        legacy = stored is not None and "store" not in stored
        self.partition_seconds = self._check_partitions(
            self.partition_seconds, infer=legacy or stored is None
        )
        if body is not None:
            if body.get("store") is not None:
                body["store"]["partition_seconds"] = self.partition_seconds
                self._note_retention_change(stored, body["store"])
            if body != stored:
                write_json_file(d.config_path, body)
        self.retention = _retention_of(body)
        self.meta = self._open_meta(d, repair)
        self.live_gens = []
        restore = False
        replayed: list[npt.NDArray[np.int64]] = []
        for g in gens:  # older generations: frozen memtables whose flush did not finish
            wal_path = d.wal_path(g)
            if not wal_path.exists():
                if g != gen:
                    raise CorruptFileError(f"{wal_path}: log named by the manifest is missing")
                continue
            applied = self.meta.applied_offset(g)
            # records SQLite applied are skimmed (no strings decoded): the memtable needs their
            # numbers and band keys; texts only where a version 1 log has no keys
            replay = read_wal(
                wal_path,
                repair=repair,
                applied=applied,
                skim_until=applied,
                skim_ops=(OP_ADD_KEYS,) if self.band_keys_of is not None else (OP_ADD, OP_ADD_KEYS),
            )
            if replay.generation != g:
                raise CorruptFileError(
                    f"{wal_path}: header says generation {replay.generation}, manifest says {g}"
                )
            self.wal_truncated_bytes += replay.truncated_bytes
            self.replayed_records += len(replay.records)
            restore = restore or replay.damaged_at is not None
            todo = [r for r, e in zip(replay.records, replay.ends, strict=True) if e > applied]
            self.meta.apply(todo, [(g, max(applied, replay.valid_bytes))])
            replayed.append(self._replay_memtable(replay.records))
            if g != gen:
                self.live_gens.append(g)
        if restore:
            starts = manifest.get("gen_start_rowid") or {}
            lo = min((int(starts.get(str(g), 0)) for g in gens), default=0)
            self._restore_from_meta(lo, replayed)
            self._flush_on_open = True
        wal_path = d.wal_path(gen)
        if wal_path.exists():
            self.wal = WalWriter(wal_path, gen, create=False)
        else:
            self.meta.set_applied(gen, 0)
            self.wal = WalWriter(wal_path, gen, create=True)
            if not d.manifest_path.exists():
                d.write_manifest(self.manifest)
        self.live_gens.append(gen)
        orphans = self.meta.delete_from(self.next_rowid)
        if orphans:  # rows of a bulk load whose segments never reached the manifest
            log.warning(
                "%s: removed %d metadata rows the log and segments do not hold", d.root, orphans
            )
        self.documents = self.meta.count()

    def _resolve_compression(
        self, stored: dict[str, Any] | None, body: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """Settle ``compress_tables`` / ``table_block_bytes`` (given, else stored, else off) and
        put them in the config body to persist (only once a store uses them: an old store's
        config is left as it was). Returns the body to write (maybe new, for a store opened
        without ``check_config``)."""
        kept = (stored or {}).get("store") or {}
        on = self._compress_arg
        if on is None:
            on = bool(kept.get("compress_tables", False))
        blk = self._block_arg or kept.get("table_block_bytes") or DEFAULT_BLOCK_BYTES
        try:
            blk = check_block_bytes(blk)
        except ConfigError as exc:
            raise CorruptFileError(f"config.json: store.table_block_bytes: {exc}") from exc
        self.compress_tables, self.table_block_bytes = on, blk
        if not on and "compress_tables" not in kept and self._block_arg is None:
            return body  # never used: write nothing new
        if body is None:
            if self._compress_arg is None and self._block_arg is None:
                return body
            body = {"store": {"partition_seconds": self.partition_seconds}}
        elif body is stored:  # compared with the stored body to decide whether to write it
            body = json.loads(json.dumps(body))
        sec = body.get("store")
        if sec is None:
            sec = body["store"] = {"partition_seconds": self.partition_seconds}
        sec["compress_tables"] = on
        sec["table_block_bytes"] = blk
        return body

    def _open_meta(self, d: DataDir, repair: bool) -> MetaDB:
        """Open SQLite and (``verify_meta``) run ``PRAGMA quick_check``. A damaged database is
        refused, naming it; with ``repair`` it is rebuilt from every row it can still read (the
        damaged file is kept beside it) and every live log is re-applied on top."""
        path = d.meta_path
        try:
            meta = MetaDB(path)
            problems = meta.quick_check() if self.verify_meta else []
        except sqlite3.DatabaseError as exc:
            if "meta" in locals():
                meta.close()
            problems = [str(exc)]
            if not repair:
                raise sqlite_error(exc, path, "open") from exc
        if not problems:
            return meta
        if not repair:
            meta.close()
            raise CorruptFileError(
                f"{path}: SQLite integrity check failed ({'; '.join(problems[:3])}); nothing was "
                "changed. Open with repair=True (neardup serve --repair) to rebuild it from every "
                "row it can still read plus the log, or restore it from a backup"
            )
        with contextlib.suppress(Exception):
            meta.close()
        rebuilt = path.with_name(path.name + ".rebuild")
        held = (
            np.unique(np.concatenate([s.segment.rowids for s in self.segments]))
            if self.segments
            else None
        )
        kept, bad = salvage(path, rebuilt, max_rowid=self.next_rowid, held=held)
        aside = replace_database(path, rebuilt)
        fsync_dir(d.root)
        log.error(
            "%s: repair: SQLite database damaged (%s); rebuilt with %d readable rows "
            "(%d unreadable row-id ranges); the damaged file is kept as %s",
            path,
            "; ".join(problems[:3]),
            kept,
            bad,
            aside.name,
        )
        return MetaDB(path)

    def _check_partitions(self, width: float, *, infer: bool) -> float:
        """The partition width every live segment fits (its times inside its partition).

        ``width`` when they all fit. Otherwise, for a store whose config does not record the
        width (``infer``), the first of the usual widths (1 day, then whole hours) they all fit;
        else :class:`ConfigError`: refusing to open deletes nothing, a wrong width would make
        retention drop rows of the wrong time."""
        segs = [s for s in self.segments if len(s.segment)]

        def fits_one(s: _LiveSegment, w: float) -> bool:
            return (
                math.floor(s.segment.min_time / w) == s.partition
                and math.floor(s.segment.max_time / w) == s.partition
            )

        def fits(w: float) -> bool:
            return all(fits_one(s, w) for s in segs)

        if fits(width):
            return width
        bad = next(s for s in segs if not fits_one(s, width))
        if infer:
            for w in [86400.0] + [3600.0 * k for k in range(1, 24 * 366)]:
                if fits(w):
                    log.warning(
                        "%s: segments were written with %.0f s partitions, not %.0f s; using "
                        "%.0f s (a store's partition width cannot change)",
                        self.dir.root if self.dir else None,
                        w,
                        width,
                        w,
                    )
                    return w
        raise ConfigError(
            f"{bad.segment.path}: partition {bad.partition} holds times {bad.segment.min_time} to "
            f"{bad.segment.max_time}, which are not in that partition at a width of {width:g} s; "
            "the store was written with another partition width. Nothing was changed: pass "
            "partition_seconds= the width the store was created with"
        )

    def _restore_from_meta(self, lo: int, replayed: list[npt.NDArray[np.int64]]) -> None:
        """Put back rows whose log records are damaged but which SQLite had already applied
        (acknowledged writes): every SQLite row from row id ``lo`` (the first row of the oldest
        live log) that no segment and no readable log record holds goes to the memtable; rows
        deleted there are marked deleted. The caller then flushes, which retires the log."""
        held = [r for r in replayed if len(r)]
        for s in self.segments:
            rids = s.segment.rowids
            if len(rids) and int(rids[-1]) >= lo:
                held.append(np.asarray(rids[rids >= lo]))
        skip = np.unique(np.concatenate(held)) if held else np.zeros(0, np.int64)
        rows = self.meta.rows_from(lo, skip)
        adds = [
            AddRecord(
                r.rowid,
                r.time,
                int.from_bytes(r.fp[:8], "little"),
                int.from_bytes(r.fp[8:], "little"),
                r.chash,
                r.flags,
                r.id,
                r.text,
                r.metadata,
            )
            for r in rows
        ]
        if adds:
            arrays = self._arrays(adds)
            self.memtable.add(*arrays)
            self._add_bands(adds, arrays[1])
            self.next_rowid = max(self.next_rowid, adds[-1].rowid + 1)
        self.memtable_deleted.update(self.meta.deleted_between(lo, self.next_rowid).tolist())
        self.restored_rows = len(adds)
        log.error(
            "%s: %d acknowledged rows whose log records are damaged were restored from SQLite",
            self.dir.root if self.dir else None,
            len(adds),
        )

    def _replay_memtable(
        self, records: Sequence[AddRecord | DeleteRecord]
    ) -> npt.NDArray[np.int64]:
        adds = [r for r in records if isinstance(r, AddRecord)]
        for r in records:
            if isinstance(r, DeleteRecord):
                self.memtable_deleted.add(r.rowid)
            self.next_rowid = max(self.next_rowid, r.rowid + 1)
        if adds:
            arrays = self._arrays(adds)
            self.memtable.add(*arrays)
            # in chunks: each becomes one band section at once (BandIndex.insert_many), merged in one
            # numba pass; bounded temporaries for a full memtable
            for c in range(0, len(adds), _REPLAY_CHUNK):
                part = adds[c : c + _REPLAY_CHUNK]
                self._add_bands(part, arrays[1][c : c + _REPLAY_CHUNK], self._logged_bands(part))
            return arrays[1]
        return np.zeros(0, np.int64)

    def _logged_bands(self, adds: Sequence[AddRecord]) -> npt.NDArray[np.uint64] | None:
        """The band keys of replayed rows: read from their ``ADD_KEYS`` records, computed from
        the texts of rows logged without them (a version 1 log); None without the channel."""
        if self.band_keys_of is None or not adds:
            return None
        bands = self.band_keys_of([]).shape[1]
        have = [i for i, r in enumerate(adds) if r.keys is not None]
        if not have:
            return self.band_keys_of([r.text for r in adds])
        try:
            got = keys_from_log([adds[i].keys for i in have], bands)  # type: ignore[misc]
        except ValueError as exc:  # a store's plan is fixed: a mismatch means other keys
            log.warning("logged band keys not used (%s): computed from the texts", exc)
            return self.band_keys_of(self._replayed_texts(adds))
        if len(have) == len(adds):
            return got
        ent = np.empty((len(adds), bands), np.uint64)
        ent[have] = got
        miss = [i for i, r in enumerate(adds) if r.keys is None]
        ent[miss] = self.band_keys_of([adds[i].text for i in miss])
        return ent

    def _replayed_texts(self, adds: Sequence[AddRecord]) -> list[str | None]:
        """The texts of replayed records; skimmed ones (``read_wal``'s ``skim_until``: id
        ``""``, text not decoded) are read from SQLite, which holds them."""
        skimmed = [r.rowid for r in adds if r.id == "" and r.keys is not None]
        rows = self.meta.fetch(skimmed, with_text=True) if skimmed else {}
        return [
            (rows[r.rowid].text if r.rowid in rows else None)
            if r.id == "" and r.keys is not None
            else r.text
            for r in adds
        ]

    def _add_bands(
        self,
        adds: Sequence[AddRecord],
        rids: npt.NDArray[np.int64],
        ent: npt.NDArray[np.uint64] | None = None,
    ) -> None:
        """Band keys of added rows into the memtable's band table (computed from the records'
        texts when ``ent`` is not given: recovery)."""
        if self.band_keys_of is None or not len(rids):
            return
        if ent is None:  # restored from SQLite, or written without the keys
            ent = self.band_keys_of([r.text for r in adds])
        self.bandtable.insert_many(rids, ent)

    def _arrays(
        self, adds: Sequence[AddRecord]
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        if self.bits == 64:
            fps = np.fromiter((r.fp_hi for r in adds), dtype=np.uint64, count=len(adds))
        else:
            fps = np.array([(r.fp_hi, r.fp_lo) for r in adds], dtype=np.uint64).reshape(-1, 2)
        rids = np.fromiter((r.rowid for r in adds), dtype=np.int64, count=len(adds))
        ts = np.fromiter((r.time for r in adds), dtype=np.float64, count=len(adds))
        return fps, rids, ts

    def _load_segment(self, entry: dict[str, Any]) -> _LiveSegment:
        assert self.dir is not None
        path = self.dir.root / entry["file"]
        if not path.exists():
            raise CorruptFileError(
                f"{path}: segment named by the manifest is missing; restore it, or remove its entry "
                "from MANIFEST.json to drop its rows"
            )
        seg = open_segment(path)
        if seg.checksum != int(entry["xxh64"]) or len(seg) != int(entry["count"]):
            seg.close()
            raise CorruptFileError(
                f"{path}: segment does not match its manifest entry (checksum or row count)"
            )
        mark = entry.get("expired_before")
        return _LiveSegment(
            entry,
            seg,
            self._segment_index(seg, entry),
            expired_before=-math.inf if mark is None else float(mark),
        )

    def _segment_index(self, seg: Segment, entry: dict[str, Any]) -> Any:
        try:
            return self._fast_segment_index(seg, entry)
        except Exception:  # a broken index must not take the store down: search exactly, slowly
            log.exception(
                "%s: building the segment's HammingIndex failed; using brute-force search", seg.path
            )
            return BruteIndex(seg.fingerprints, seg.rowids)

    def _fast_segment_index(self, seg: Segment, entry: dict[str, Any]) -> Any:
        cls = hamming_index_class()
        if cls is None or len(seg) < 256:
            return BruteIndex(seg.fingerprints, seg.rowids)
        from .memindex import _FastIndex

        side = seg.path.with_name(seg.path.name + ".hidx")
        if side.exists() and int(entry.get("radius", -1)) >= self.radius:
            try:
                # mmap: a compressed index's blocks are decoded per probe, never whole
                idx = cls.load(side, mmap=True)
                if len(idx) != len(seg):
                    log.warning(
                        "%s: index holds %d rows, segment %d; rebuilding", side, len(idx), len(seg)
                    )
                elif idx.compressed != (
                    self.compress_tables
                    and compress_pays(
                        len(seg),
                        bits=self.bits,
                        max_distance=self.radius,
                        block_bytes=self.table_block_bytes,
                    )
                ):
                    log.info(
                        "%s: rebuilding the segment index %s (compress_tables=%s)",
                        side,
                        "compressed" if self.compress_tables else "uncompressed",
                        self.compress_tables,
                    )
                else:
                    return _FastIndex(idx)
            except FormatError as exc:
                log.warning(
                    "%s: unusable index (%s); rebuilding it from the verified segment", side, exc
                )
        fast = build_index(
            seg.fingerprints,
            seg.rowids,
            bits=self.bits,
            max_distance=self.radius,
            compress=self.compress_tables,
            block_bytes=self.table_block_bytes,
        )
        if isinstance(fast, BruteIndex):
            return fast
        try:
            fast.index.save(side)
            entry["radius"] = self.radius
        except Exception as exc:
            side.unlink(missing_ok=True)
            log.warning("%s: could not save segment index (%s)", side, exc)
        return fast

    # ------------------------------------------------------------------ reads
    def search(self, fps: npt.NDArray[np.uint64], max_distance: int) -> Result:
        """Row ids within ``max_distance`` in the memtable and every live segment (may include
        deleted or expired rows; the caller filters through :meth:`fetch`)."""
        nq = len(fps)
        if nq == 0:
            return empty_result(0)
        segments = self.segments
        results: list[Result] = []
        frozen = self.frozen
        if frozen is not None:
            results.append(frozen.memtable.search(fps, max_distance))
        if nq >= PARALLEL_QUERIES and len(segments) > 1 and _SEARCH_THREADS > 1:
            # large groups: segments are searched on a small thread pool (the kernels release
            # the GIL) while this thread searches the memtable
            pool = self._search_pool()
            futures = [pool.submit(s.index.search, fps, max_distance) for s in segments]
            results.append(self.memtable.search(fps, max_distance))
            results += [f.result() for f in futures]
            return merge_results(nq, results)
        # small groups: every segment and the memtable's sealed runs in one kernel call, its
        # append buffer compared in the same call (the per-index fixed cost per segment and per
        # memtable run is most of a single-document search otherwise: benchmarks/bench_store.py)
        mt = self.memtable.index
        version = buf = None
        if mt is not None:
            version, *rows = mt.buffer_rows()
            buf = (rows[0], rows[1], rows[2])
        one, rest = self._segment_set(segments, mt, version)
        if buf is not None and one.sealed_ok:
            results.append(one.search(fps, max_distance, extra=buf))
        else:
            # no memtable index (brute-force fallback) or removed rows in it: search it apart
            results.append(self.memtable.search(fps, max_distance))
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
        runs = list(self.bandtable.runs())
        frozen = self.frozen
        if frozen is not None and frozen.bands is not None:
            runs += frozen.bands.runs()
        for s in self.segments:
            runs += s.segment.band_runs()
        return lookup(runs, entries, cap)

    def _segment_set(
        self, segments: list[_LiveSegment], mt: Any = None, version: Any = None
    ) -> tuple[Any, list[_LiveSegment]]:
        """(an :class:`~neardup.index.multi.IndexSet` over the segments' HammingIndexes and the
        memtable index's sealed runs, the segments it does not cover), rebuilt when either
        changes (the memtable's runs change once per index buffer of adds)."""
        cached = self._set_cache
        if (
            cached is not None
            and cached[3] is version
            and len(cached[0]) == len(segments)
            and all(a is b for a, b in zip(cached[0], segments, strict=True))
        ):
            return cached[1], cached[2]
        from ..index.multi import IndexSet
        from .memindex import _FastIndex

        fast = [s for s in segments if isinstance(s.index, _FastIndex)]
        rest = [s for s in segments if not isinstance(s.index, _FastIndex)]
        one = IndexSet([s.index.index for s in fast], sealed=[mt] if mt is not None else [])
        if mt is not None and not one.sealed_ok:  # removed rows in the memtable: search it apart
            one = IndexSet([s.index.index for s in fast])
            one.sealed_ok = False
        self._set_cache = (list(segments), one, rest, version)
        return one, rest

    def _search_pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(_SEARCH_THREADS, thread_name_prefix="neardup-search")
        return self._pool

    def lookup_ids(self, ids: Sequence[str]) -> dict[str, int]:
        """id -> row id for the ids that exist (pending records first, then SQLite)."""
        p = self.pending
        if not p.by_id:
            return self.meta.lookup_ids(ids)
        out: dict[str, int] = {}
        rest: list[str] = []
        with p.lock:
            get = p.by_id.get
            for i in ids:
                r = get(i)
                if r is None:
                    rest.append(i)
                elif isinstance(r, AddRecord):
                    out[i] = r.rowid
        if rest:
            out.update(self.meta.lookup_ids(rest))
        return out

    def fetch(self, rowids: Iterable[int], *, with_text: bool) -> dict[int, Row]:
        """Rows by row id (missing = deleted or expired; pending records first)."""
        p = self.pending
        if not p.by_rid:
            return self.meta.fetch(rowids, with_text=with_text)
        out: dict[int, Row] = {}
        rest: list[int] = []
        with p.lock:
            get = p.by_rid.get
            for rid in rowids:
                r = get(rid)
                if r is None:
                    rest.append(rid)
                elif isinstance(r, AddRecord):
                    out[rid] = _row(r, with_text)
        if rest:
            out.update(self.meta.fetch(rest, with_text=with_text))
        return out

    def get_row(self, id: str) -> Row | None:
        """The stored row of ``id`` or None (any thread)."""
        p = self.pending
        with p.lock:
            r = p.by_id.get(id)
        if r is None:
            return self.meta.get(id)
        return _row(r, True) if isinstance(r, AddRecord) else None

    def sync_meta(self) -> None:
        """Wait until SQLite holds every committed record (writer thread)."""
        if self.applier is not None:
            self.applier.drain()

    # ------------------------------------------------------------------ writes
    def allocate(self, n: int) -> int:
        start = self.next_rowid
        self.next_rowid += n
        return start

    def commit(
        self,
        records: Sequence[AddRecord | DeleteRecord],
        arrays: tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64], npt.NDArray[np.float64]]
        | None = None,
        *,
        durable: bool = True,
        bands: npt.NDArray[np.uint64] | None = None,
    ) -> Unsynced | None:
        """Apply records in order; :class:`StorageError` means nothing was applied.

        ``arrays``: the ``ADD`` records' (fingerprints, row ids, times) in record order, when
        the caller has them as arrays already (else they are gathered from the records).

        ``durable=False`` (pipelined group commit, durable mode only): the records are written
        to the log but not fsynced; they are applied in memory (later groups see them) and an
        :class:`Unsynced` is returned. The caller must pass it to :meth:`acknowledge` once a
        :meth:`WalWriter.sync <neardup.store.wal.WalWriter.sync>` covers its end, or to
        :meth:`undo` (newest first) when that sync failed.

        ``bands``: the added rows' band entry keys (n_add, bands), in ``arrays`` order, when the
        store has the MinHash channel (else computed from the records' texts).
        """
        if not records:
            return None
        undo_log = None
        unsynced = None
        recs = list(records)
        logged = None
        if self.band_keys_of is not None and self.wal is not None and self.wal.version >= 2:
            # the band keys go into the log (ADD_KEYS), so a replay does not recompute MinHash
            if bands is None:
                adds = [r for r in recs if type(r) is AddRecord]
                if adds:
                    bands = self.band_keys_of([r.text for r in adds])
            if bands is not None:
                logged = log_keys(bands)
        if self.wal is not None and self.applier is not None:
            applier = self.applier
            if applier.lag > MAX_PENDING_RECORDS:  # back-pressure: SQLite fell behind
                applier.wait_below(MAX_PENDING_RECORDS // 2)
            if durable:
                end = self.wal.append(frame_records(recs, logged))
                self.pending.add(recs)
                applier.submit(self.wal.generation, end, recs)
            else:
                start = self.wal.size
                end = self.wal.write(frame_records(recs, logged))
                undo_log = self.pending.add(recs, undo=True)
        else:  # in memory: nothing to recover from, apply now
            self.meta.apply(recs)
        deleted: list[int] = []
        for r in recs:
            if type(r) is DeleteRecord:
                self.memtable_deleted.add(r.rowid)
                deleted.append(r.rowid)
        if arrays is None:
            adds = [r for r in recs if type(r) is AddRecord]
            if adds:
                arrays = self._arrays(adds)
        if arrays is not None and len(arrays[1]):
            self.memtable.add(*arrays)
            if self.band_keys_of is not None:
                adds = [r for r in recs if type(r) is AddRecord] if bands is None else []
                self._add_bands(adds, arrays[1], bands)
        n_add = 0 if arrays is None else len(arrays[1])
        with self._count_lock:
            self.documents += n_add - len(deleted)
        if undo_log is not None:
            assert self.wal is not None
            unsynced = Unsynced(
                self.wal.generation,
                start,
                end,
                recs,
                undo_log,
                np.zeros(0, np.int64) if arrays is None else arrays[1],
                deleted,
            )
        return unsynced

    def acknowledge(self, unsynced: Unsynced) -> None:
        """Records of a pipelined commit are durable now: hand them to the SQLite applier."""
        if self.applier is not None:
            self.applier.submit(unsynced.generation, unsynced.end, unsynced.records)

    def undo(self, unsynced: Unsynced) -> None:
        """Take back a pipelined commit whose log sync failed (writer thread; newest first;
        the log itself is cut back with ``wal.rollback``)."""
        self.pending.undo(unsynced.undo_log)
        for rid in unsynced.deleted:
            self.memtable_deleted.discard(rid)
        self.memtable.remove_rows(unsynced.added)
        self.bandtable.remove_many(unsynced.added)
        with self._count_lock:
            self.documents -= len(unsynced.added) - len(unsynced.deleted)

    # ------------------------------------------------------------------ the writer's intents
    @property
    def durable(self) -> bool:
        """Whether writes go to a log in a data directory (False: in memory only)."""
        return self.wal is not None

    @property
    def log_has_rows(self) -> bool:
        """Whether the current log generation holds records not yet written to segments."""
        return self.wal is not None and self.wal.size > HEADER_SIZE

    @property
    def layout_changes(self) -> int:
        """A number that changes whenever the set of segments does (flushes, merges, dropped
        partitions): the writer looks for merges to start only when it has moved."""
        return self.flushes + self.compactions + self.dropped_partitions + len(self.segments)

    def append_group(self, group: WriteGroup, *, durable: bool = True) -> Unsynced | None:
        """Log and apply one decided write group (:meth:`commit` of its records, in order).

        ``durable=False``: pipelined group commit (see :meth:`commit`): the records are written
        to the log, not fsynced; the returned :class:`Unsynced` goes to :meth:`acknowledge`
        once :meth:`sync_log` covers it, or to :meth:`take_back` when that sync failed.
        """
        added = group.added
        return self.commit(
            group.records,
            None if added is None else added[:3],
            durable=durable,
            bands=added[3] if added is not None and len(added) > 3 else None,
        )

    def sync_log(self) -> None:
        """fsync the log: every group appended before this call is durable on return
        (:class:`StorageError` when the disk refuses)."""
        assert self.wal is not None
        self.wal.sync()

    def take_back(self, commits: Sequence[Unsynced]) -> None:
        """Take back pipelined commits whose log sync failed (oldest first in ``commits``):
        undo them in memory, newest first, then cut the log back to where the oldest started.
        :class:`StorageError` when the log cannot be cut back (the in-memory state is undone
        regardless)."""
        for u in reversed(commits):
            self.undo(u)
        if commits and self.wal is not None:
            self.wal.rollback(min(u.start for u in commits))

    @property
    def flushing(self) -> bool:
        """A background flush is under way (its segments not yet installed)."""
        return self.frozen is not None

    @property
    def flush_due(self) -> bool:
        """The memtable is full and no flush is under way: :meth:`maybe_flush` starts one."""
        return self.frozen is None and len(self.memtable) >= self.memtable_size

    def maybe_flush(self, cutoff: float | None = None) -> None:
        """Install a finished background flush; start one when the memtable is full."""
        if self.wal is None:
            return
        self.finish_flush(wait=False)
        if self.flush_due:
            frozen = self.begin_flush()
            threading.Thread(
                target=self._background_flush,
                args=(frozen, cutoff),
                name="neardup-flush",
                daemon=True,
            ).start()

    def _background_flush(self, frozen: _Frozen, cutoff: float | None) -> None:
        lower_thread_priority()
        self.build_flush(frozen, cutoff)

    def partition_of(self, times: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        return np.floor(np.asarray(times, dtype=np.float64) / self.partition_seconds).astype(
            np.int64
        )

    def _write_segments(
        self,
        fps: npt.NDArray[np.uint64],
        rids: npt.NDArray[np.int64],
        ts: npt.NDArray[np.float64],
        bands: tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]] | BandSection | None = None,
    ) -> list[_LiveSegment]:
        """One segment per partition; ``bands`` (compact keys and row ids, or a memtable
        :class:`BandSection`; rows not in ``rids`` are left out) becomes each segment's
        band-key section (None: version-1 segments)."""
        assert self.dir is not None
        parts = self.partition_of(ts)
        written: list[_LiveSegment] = []
        try:
            for p in np.unique(parts).tolist():
                sel = parts == p
                order = np.argsort(rids[sel], kind="stable")
                f, r, t = fps[sel][order], rids[sel][order], ts[sel][order]
                bk: Any = None
                if isinstance(bands, BandSection):
                    bk = section_for_rows(bands, r)
                elif bands is not None:
                    inside = np.isin(bands[1], r)
                    bk = (bands[0][inside], bands[1][inside])
                written.append(self._new_segment(int(p), f, r, t, bk))
        except BaseException as exc:
            for s in written:
                s.segment.close()
                for suffix in ("", ".hidx"):
                    Path(str(s.segment.path) + suffix).unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise StorageError(
                    f"cannot write segment in {self.dir.root}: {exc}; the log still holds every row"
                ) from exc
            raise
        return written

    def _new_segment(
        self,
        partition: int,
        f: npt.NDArray[np.uint64],
        r: npt.NDArray[np.int64],
        t: npt.NDArray[np.float64],
        band_keys: tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]] | BandSection | None = None,
    ) -> _LiveSegment:
        assert self.dir is not None
        with self._seq_lock:
            seq = self.next_seq
            self.next_seq += 1
        path = self.dir.segment_path(partition, seq)
        checksum = write_segment(path, f, r, t, partition=partition, band_keys=band_keys)
        entry = {
            "file": path.name,
            "partition": partition,
            "count": len(r),
            "xxh64": checksum,
            "min_rowid": int(r[0]) if len(r) else -1,
            "max_rowid": int(r[-1]) if len(r) else -1,
            "radius": -1,
        }
        seg = open_segment(path)
        return _LiveSegment(entry, seg, self._segment_index(seg, entry))

    # ------------------------------------------------------------------ compaction
    def compaction_candidates(self, max_segments: int) -> list[list[_LiveSegment]]:
        """Groups of segments of one partition worth merging (writer thread)."""
        by_part: dict[int, list[_LiveSegment]] = {}
        for s in self.segments:
            by_part.setdefault(s.partition, []).append(s)
        out: list[list[_LiveSegment]] = []
        for segs in by_part.values():
            if len(segs) <= max_segments:
                continue
            # size-tiered: small segments (e.g. memtable flushes) are merged among themselves
            # until together they reach a quarter of the largest, so a large partition is not
            # rewritten for every small flush; more than max_segments + 2 merges everything
            big = max(segs, key=lambda s: len(s.segment))
            small = [s for s in segs if s is not big]
            n_small = sum(len(s.segment) for s in small)
            if len(segs) > max_segments + 2 or 4 * n_small >= len(big.segment):
                out.append(segs)
            elif len(small) >= 2:
                out.append(small)
        return out

    def build_merged(self, segs: list[_LiveSegment]) -> _LiveSegment | None:
        """Merge segments into a new file, dropping deleted rows (any thread; files are immutable)."""
        fps = np.concatenate([s.segment.fingerprints for s in segs])
        rids = np.concatenate([s.segment.rowids for s in segs])
        ts = np.concatenate([s.segment.times for s in segs])
        # deleted rows: the (small) table of applied deletes plus deletes still pending; no
        # scan of the live rows, so the writer's lookups never wait for a merge
        lo, hi = int(rids.min()), int(rids.max())
        gone = self.meta.deleted_between(lo, hi)
        with self.pending.lock:
            pend = [
                rid
                for rid, r in self.pending.by_rid.items()
                if type(r) is DeleteRecord and lo <= rid <= hi
            ]
        if pend:
            gone = np.concatenate([gone, np.asarray(pend, dtype=np.int64)])
        keep = ~np.isin(rids, gone) if len(gone) else np.ones(len(rids), bool)
        order = np.argsort(rids[keep], kind="stable")
        if not keep.any():
            return None
        bk = None
        if self.band_keys_of is not None:  # the inputs' sections, less the deleted rows
            runs = [r for s in segs for r in s.segment.band_runs()]
            k = np.concatenate([x for x, _ in runs]) if runs else np.zeros(0, np.uint64)
            r = np.concatenate([y for _, y in runs]) if runs else np.zeros(0, np.int64)
            if len(gone):
                alive = ~np.isin(r, gone)
                k, r = k[alive], r[alive]
            bk = (k, r)
        try:
            out = self._new_segment(
                segs[0].partition, fps[keep][order], rids[keep][order], ts[keep][order], bk
            )
        except OSError as exc:
            raise StorageError(f"compaction could not write a segment: {exc}") from exc
        out.dropped = rids[~keep]
        return out

    def install_merged(self, segs: list[_LiveSegment], merged: _LiveSegment | None) -> bool:
        """Swap merged segments in (writer thread); False (and the output removed) if the inputs
        are no longer all live (e.g. dropped by retention meanwhile)."""
        assert self.dir is not None
        if not all(s in self.segments for s in segs):
            if merged is not None:
                self._discard(merged)
            return False
        if merged is not None:  # retention deleted at least what every input had deleted
            merged.expired_before = min(s.expired_before for s in segs)
            marks = [s.entry.get("expired_before") for s in segs]
            if all(m is not None for m in marks):
                merged.entry["expired_before"] = min(float(m) for m in marks if m is not None)
        alive = [s for s in self.segments if s not in segs] + (
            [merged] if merged is not None else []
        )
        manifest = {
            **self.manifest,
            "segments": [s.entry for s in alive],
            "next_rowid": self.next_rowid,
            "next_seq": self.next_seq,
        }
        try:
            self.dir.write_manifest(manifest)
        except OSError as exc:
            if merged is not None:
                self._discard(merged)
            raise StorageError(f"compaction could not update the manifest: {exc}") from exc
        self.manifest = manifest
        self.segments = alive
        dropped = (
            merged.dropped
            if merged is not None and merged.dropped is not None
            else np.concatenate([s.segment.rowids for s in segs])  # all rows were deleted
        )
        for s in segs:
            self._discard(s)
        self.compactions += 1
        if len(dropped):
            try:  # bookkeeping only: those rows are gone from every segment now
                self.meta.forget_deleted(dropped.tolist())
            except Exception:
                log.warning("could not prune the deleted-rows table", exc_info=True)
        return True

    def discard_merged(self, merged: _LiveSegment) -> None:
        """Remove the files of a merge output that was not installed."""
        self._discard(merged)

    @staticmethod
    def _discard(s: _LiveSegment) -> None:
        path = s.segment.path
        s.segment.close()
        path.unlink(missing_ok=True)
        Path(str(path) + ".hidx").unlink(missing_ok=True)

    def flush(self, *, cutoff: float | None = None) -> None:
        """Write the memtable to segments now (durable mode only; finishes a pending flush first)."""
        if self.wal is None or self.dir is None:
            return
        self.finish_flush(wait=True)
        frozen = self.begin_flush()
        self.build_flush(frozen, cutoff)
        self.finish_flush(wait=True)

    def begin_flush(self) -> _Frozen:
        """Freeze the memtable and start a new log generation (writer thread; fast).

        The manifest then names both generations, so a crash before the segments are installed
        replays both.
        """
        assert self.wal is not None and self.dir is not None
        if self.frozen is not None:
            raise StorageError("a flush is already in progress")
        old = self.wal
        gen = old.generation + 1
        new_path = self.dir.wal_path(gen)
        manifest = {
            **self.manifest,
            "segments": [s.entry for s in self.segments],
            "wal_generation": gen,
            "wal_generations": [*self.live_gens, gen],
            # the first row id each live log can hold (recovery restores rows from there)
            "gen_start_rowid": {
                **{
                    k: v
                    for k, v in (self.manifest.get("gen_start_rowid") or {}).items()
                    if int(k) in self.live_gens
                },
                str(gen): self.next_rowid,
            },
            "next_rowid": self.next_rowid,
            "next_seq": self.next_seq,
        }
        try:
            new_path.unlink(missing_ok=True)
            self.meta.set_applied(gen, 0)
            new = WalWriter(new_path, gen, create=True)
            self.dir.write_manifest(manifest)
        except (OSError, StorageError) as exc:
            new_path.unlink(missing_ok=True)
            raise StorageError(f"flush failed ({exc}); the log still holds every row") from exc
        old.close()
        self.manifest = manifest
        self.wal = new
        frozen = _Frozen(self.memtable, self.memtable_deleted, list(self.live_gens), self.bandtable)
        self.bandtable = BandIndex()
        self.live_gens = [gen]
        self.memtable = MemTable(
            bits=self.bits, max_distance=self.radius, expected_size=self.memtable_size
        )
        self.memtable_deleted = set()
        self.frozen = frozen
        return frozen

    def build_flush(self, frozen: _Frozen, cutoff: float | None) -> None:
        """Write a frozen memtable's segments (any thread; touches no shared state but files)."""
        try:
            fps, rids, ts = frozen.memtable.arrays()
            keep = np.ones(len(rids), bool)
            if frozen.deleted:
                keep &= ~np.isin(rids, np.fromiter(frozen.deleted, dtype=np.int64))
            expired = np.zeros(0, np.int64)
            if cutoff is not None:
                exp = keep & (ts < cutoff)
                expired = rids[exp]
                keep &= ~exp
            bk = None
            if self.band_keys_of is not None and frozen.bands is not None:
                bk = frozen.bands.section()  # 8 bytes per entry, never materialised
            frozen.written = self._write_segments(fps[keep], rids[keep], ts[keep], bk)
            frozen.expired = expired
        except BaseException as exc:
            frozen.error = exc
        finally:
            frozen.done.set()

    def finish_flush(self, *, wait: bool) -> bool:
        """Install a built flush (writer thread): checkpoint SQLite, replace the manifest,
        retire the old logs. Returns True if one was installed. A failed build is retried."""
        frozen = self.frozen
        if frozen is None or not (frozen.done.is_set() or wait):
            return False
        if not wait and time.monotonic() - frozen.failed_at < 1.0:
            return False  # it just failed (a full disk?): retry about once a second
        frozen.done.wait()
        assert self.dir is not None
        if frozen.error is not None:
            err, frozen.error = frozen.error, None
            frozen.done.clear()
            log.error("background flush failed (%s); retrying", err)
            self.build_flush(frozen, None)  # sets done again, also when it fails
            if frozen.error is not None:
                # keep the error (and done set): the next call retries the build; clearing
                # done here left every later flush waiting forever for a build nobody ran
                err = frozen.error
                frozen.failed_at = time.monotonic()
                if isinstance(err, StorageError):
                    raise err
                raise StorageError(f"flush failed ({err}); the log still holds every row") from err
        written = frozen.written or []
        expired = frozen.expired if frozen.expired is not None else np.zeros(0, np.int64)
        manifest = {
            **self.manifest,
            "segments": [s.entry for s in self.segments] + [s.entry for s in written],
            "wal_generations": list(self.live_gens),
            "gen_start_rowid": {
                k: v
                for k, v in (self.manifest.get("gen_start_rowid") or {}).items()
                if int(k) in self.live_gens
            },
            "next_rowid": self.next_rowid,
            "next_seq": self.next_seq,
        }
        try:
            self.sync_meta()  # the retired logs' records must be in SQLite before the checkpoint
            if len(expired):
                self.meta.delete_rowids(expired.tolist())
            self.meta.checkpoint()
            # retention's deletions are durable now: record how far each segment's went
            for s in self.segments:
                if s.expired_before > -math.inf:
                    s.entry["expired_before"] = s.expired_before
            self.dir.write_manifest(manifest)
        except (OSError, StorageError) as exc:
            for s in written:
                self._discard(s)
            frozen.written = None
            frozen.done.clear()
            threading.Thread(target=self.build_flush, args=(frozen, None), daemon=True).start()
            raise StorageError(f"flush failed ({exc}); the log still holds every row") from exc
        self.manifest = manifest
        self.segments.extend(written)
        self.frozen = None
        for g in frozen.gens:
            self.dir.wal_path(g).unlink(missing_ok=True)
        fsync_dir(self.dir.root)
        try:
            self.meta.forget_generations(self.live_gens)
        except Exception:  # bookkeeping only
            log.warning("could not drop applied positions of retired logs", exc_info=True)
        if len(expired):
            with self._count_lock:
                self.documents -= len(expired)
        self.flushes += 1
        return True

    def expire(self, cutoff: float) -> int:
        """Drop every partition that ends at or before ``cutoff``; returns rows dropped."""
        ps = self.partition_seconds
        # both the partition's end and the newest row must be older than the cutoff: a width
        # that did not match the data could otherwise drop recent rows
        dead = [
            s
            for s in self.segments
            if (s.partition + 1) * ps <= cutoff and s.segment.max_time < cutoff
        ]
        dropped = 0
        if dead:
            assert self.dir is not None
            rowids = np.concatenate([s.segment.rowids for s in dead]).tolist()
            self.sync_meta()
            dropped = self.meta.delete_rowids(rowids)
            alive = [s for s in self.segments if s not in dead]
            manifest = {
                **self.manifest,
                "segments": [s.entry for s in alive],
                "next_rowid": self.next_rowid,
                "next_seq": self.next_seq,
            }
            try:
                self.dir.write_manifest(manifest)
            except OSError as exc:
                raise StorageError(f"cannot update manifest for retention: {exc}") from exc
            self.manifest = manifest
            self.segments = alive
            for s in dead:
                path = s.segment.path
                s.segment.close()
                path.unlink(missing_ok=True)
                Path(str(path) + ".hidx").unlink(missing_ok=True)
            self.dropped_partitions += len({s.partition for s in dead})
            log.info(
                "retention: dropped %d segments (%d rows) older than %s", len(dead), dropped, cutoff
            )
        if self.wal is None and len(self.memtable):
            dropped += self._expire_memory(cutoff)
        with self._count_lock:
            self.documents -= dropped
        last = self._rows_expired_at
        if last is None or cutoff - last >= ROW_EXPIRY_STEP_S:
            dropped += self._expire_rows(cutoff)
        return dropped

    def _expire_rows(self, cutoff: float, *, full: bool = False) -> int:
        """Delete from SQLite every row older than ``cutoff`` that a partition not yet dropped
        still holds (segments, the memtable, a flush under way): past the window, gone for
        good. Writer thread. ``full``: scan every segment from its start (a retention change);
        else each from where the last pass got to. Returns the rows deleted.

        Segment rows stay in their immutable files (searches find their row ids, which no
        longer fetch) until the partition is dropped; memtable rows are left out of its flush.
        """
        doomed: list[npt.NDArray[np.int64]] = []
        marked: list[_LiveSegment] = []
        for seg in self.segments:
            lo = -math.inf if full else seg.expired_before
            if seg.segment.min_time >= cutoff or lo >= cutoff:
                continue
            ts = seg.segment.times
            sel = ts < cutoff
            if lo > -math.inf:
                sel &= ts >= lo
            if sel.any():
                doomed.append(np.asarray(seg.segment.rowids[sel]))
            marked.append(seg)
        mem = self.memtable.rows_before(cutoff)
        if len(mem) and self.memtable_deleted:
            mem = mem[~np.isin(mem, np.fromiter(self.memtable_deleted, dtype=np.int64))]
        doomed.append(mem)
        if self.frozen is not None:  # its build already left out rows older than its cutoff
            doomed.append(self.frozen.memtable.rows_before(cutoff))
        rids = np.unique(np.concatenate(doomed)) if doomed else np.zeros(0, np.int64)
        gone = 0
        if len(rids):
            self.sync_meta()  # every acknowledged row is in SQLite: its delete counts
            gone = self.meta.delete_rowids(rids.tolist())
            self.memtable_deleted.update(mem.tolist())
            with self._count_lock:
                self.documents -= gone
            if gone:
                log.info("retention: deleted %d rows older than %s", gone, cutoff)
        for seg in marked:
            seg.expired_before = max(seg.expired_before, cutoff)
        self._rows_expired_at = cutoff
        return gone

    def _note_retention_change(
        self, stored: dict[str, Any] | None, store_cfg: dict[str, Any]
    ) -> None:
        """(open) When the retention stored with the data changes, everything the old window
        had left behind must go before the new one applies: record its edge (``now - old
        retention``) as ``expire_before`` in the config body about to be written, kept until
        :meth:`_finish_retention_change` has deleted those rows (a crash in between finds it
        again)."""
        old_cfg = (stored or {}).get("store") or {}
        pending = old_cfg.get("expire_before")
        old = old_cfg.get("retention")
        if old is not None and store_cfg.get("retention") != old:
            edge = self.clock() - float(old)
            pending = edge if pending is None else max(float(pending), edge)
        if pending is not None:
            store_cfg["expire_before"] = float(pending)
            self._expire_pending = float(pending)

    def _finish_retention_change(self) -> None:
        """(open) Delete the rows a changed retention's old window had left behind, then drop
        the ``expire_before`` mark from the config."""
        from .layout import read_json_file, write_json_file

        assert self.dir is not None and self._expire_pending is not None
        self._expire_rows(self._expire_pending, full=True)
        cfg_path = self.dir.config_path
        body = read_json_file(cfg_path)
        body.get("store", {}).pop("expire_before", None)
        try:
            write_json_file(cfg_path, body)
        except OSError as exc:
            raise StorageError(f"cannot update {cfg_path}: {exc}") from exc
        self._expire_pending = None
        self._rows_expired_at = None

    def _expire_memory(self, cutoff: float) -> int:
        """In-memory mode: rebuild the memtable without rows of partitions that ended."""
        fps, rids, ts = self.memtable.arrays()
        ends = (self.partition_of(ts) + 1) * self.partition_seconds
        dead = ends <= cutoff
        if not dead.any():
            return 0
        n = self.meta.delete_rowids(rids[dead].tolist())
        self.memtable.clear()
        self.memtable.add(fps[~dead], rids[~dead], ts[~dead])
        self.bandtable.remove_many(rids[dead])
        return n

    def bulk_load(
        self,
        rows: Iterable[tuple[Any, ...]],
        fps: npt.NDArray[np.uint64],
        rids: npt.NDArray[np.int64],
        ts: npt.NDArray[np.float64],
    ) -> None:
        """Seed rows straight into segments (durable mode) or the memtable (in memory).

        Metadata first (one transaction; an id that exists raises
        :class:`sqlite3.IntegrityError` and nothing is loaded), then the segments and the
        manifest. Rows whose segments never reached the manifest (a crash in between) have row
        ids beyond every logged or stored row and are removed on the next open.
        """
        self.sync_meta()  # pending ids must be in SQLite so its UNIQUE(id) sees them
        if self.wal is None or self.dir is None:
            self.meta.insert_rows(rows)
            self.memtable.add(fps, rids, ts)
        else:
            try:
                self.meta.insert_rows(rows, bulk=True)
            except OSError as exc:
                raise StorageError(f"bulk load failed: {exc}") from exc
            try:
                written = self._write_segments(fps, rids, ts)
                manifest = {
                    **self.manifest,
                    "segments": [s.entry for s in self.segments] + [s.entry for s in written],
                    "next_rowid": self.next_rowid,
                    "next_seq": self.next_seq,
                }
                try:
                    self.dir.write_manifest(manifest)
                except OSError as exc:
                    for w in written:
                        self._discard(w)
                    raise StorageError(f"bulk load failed: {exc}") from exc
            except BaseException:
                self.meta.delete_rowids(rids.tolist())
                raise
            self.manifest = manifest
            self.segments.extend(written)
        with self._count_lock:
            self.documents += len(rids)

    @staticmethod
    def read_config(path: str | os.PathLike[str] | None) -> dict[str, Any] | None:
        """The config body stored in data directory ``path`` (None: no directory, or one
        without a config yet), read before the store is opened (it decides how to open it)."""
        from .layout import read_json_file

        if path is None:
            return None
        cfg = DataDir(path).config_path
        return read_json_file(cfg) if cfg.exists() else None

    def save_retention(self, seconds: float | None) -> None:
        """Store a new retention window (``None``: keep everything) in the config body's
        ``store`` section; in memory, nothing to store. :class:`StorageError` when it cannot
        be written."""
        from .layout import read_json_file, write_json_file

        old = self.retention
        if old is not None and seconds != old:
            # what the old window left behind goes before a new one applies (a wider window
            # must not bring it back): deleted now, before the new retention is stored
            self._expire_rows(self.clock() - old, full=True)
        self.retention = seconds
        self._rows_expired_at = None
        if self.dir is None:
            return
        cfg_path = self.dir.config_path
        try:
            body = read_json_file(cfg_path)
            body.setdefault("store", {})["retention"] = seconds
            body["store"].setdefault("partition_seconds", self.partition_seconds)
            write_json_file(cfg_path, body)
        except OSError as exc:
            raise StorageError(f"cannot store the new retention in {cfg_path}: {exc}") from exc

    def bulk_add(
        self, ids: list[str], fps: npt.NDArray[np.uint64], times: npt.NDArray[np.float64]
    ) -> int:
        """Seed new documents without texts (:meth:`bulk_load` of their rows, row ids allocated
        here); :class:`InputError` when an id exists already (nothing is loaded)."""
        start = self.allocate(len(ids))
        rids = np.arange(start, start + len(ids), dtype=np.int64)
        fp_bytes = fp_words(fps).astype("<u8").tobytes()
        ts = times.tolist()
        # insert in id order: the UNIQUE(id) B-tree then grows at its right edge
        order = sorted(range(len(ids)), key=ids.__getitem__)
        rows = (
            (
                start + i,
                ids[i],
                ts[i],
                fp_bytes[16 * i : 16 * i + 16],
                NO_CONTENT_HASH,
                0,
                None,
                None,
            )
            for i in order
        )
        try:
            self.bulk_load(rows, fps, rids, times)
        except sqlite3.IntegrityError:
            existing = self.lookup_ids(ids)
            first = next(iter(existing), None)
            raise InputError(
                f"bulk_load: {len(existing)} ids already exist (e.g. {first!r}); bulk_load only "
                "adds new ids"
            ) from None
        return len(ids)

    def warm_up(self) -> None:
        """Load the compiled kernels the first searches and writes would otherwise wait for:
        an index's build and search (the GIL-holding variant for a few queries, the
        GIL-releasing one for more), one search over the segments and the memtable for a few
        queries and for many (the search pool), and a memtable like this store's past its
        first buffer flush (its plan's build and search kernels)."""
        rng = np.random.default_rng(0)
        shape = (300,) if self.bits == 64 else (300, 2)
        fps = rng.integers(0, 2**64, shape, dtype=np.uint64)
        idx = build_index(
            fps, np.arange(300, dtype=np.int64), bits=self.bits, max_distance=self.radius
        )
        idx.search(fps[:2], self.radius)
        idx.search(fps[:16], self.radius)
        cls = hamming_index_class()
        if self.compress_tables and cls is not None:
            # the compressed tables' build and probe kernels (a few queries and more); a
            # table layout forced, since the planner gives so small an index no tables
            cidx = cls(
                bits=self.bits,
                max_distance=self.radius,
                expected_size=300,
                layout="tables",
                compress=True,
                block_bytes=self.table_block_bytes,
            )
            cidx.add(fps, ids=np.arange(300, dtype=np.int64))
            cidx.flush()
            cidx.search(fps[:2], self.radius)
            cidx.search(fps[:16], self.radius)
        nq = min(PARALLEL_QUERIES, 2048)
        many = rng.integers(0, 2**64, (nq, *shape[1:]), dtype=np.uint64)
        for m in (2, 16, nq):
            self.search(many[:m], self.radius)
        mt = MemTable(bits=self.bits, max_distance=self.radius, expected_size=self.memtable_size)
        n = mt.buffer_size + 8
        rows = rng.integers(0, 2**64, (n, *shape[1:]), dtype=np.uint64)
        mt.add(rows, np.arange(n, dtype=np.int64), np.zeros(n))
        mt.search(rows[:2], self.radius)
        mt.search(rows[:16], self.radius)

    # ------------------------------------------------------------------ misc
    def stats(self) -> dict[str, Any]:
        parts = {s.partition for s in self.segments}
        return {
            "documents": self.documents,
            "memtable_rows": len(self.memtable),
            "flushing_rows": len(self.frozen.memtable) if self.frozen is not None else 0,
            "memtable_runs": self.memtable.runs,
            "memtable_merging": self.memtable.merging,
            "segments": len(self.segments),
            "segment_rows": int(sum(len(s.segment) for s in self.segments)),
            "partitions": len(parts),
            "wal_bytes": self.wal.size if self.wal is not None else 0,
            "wal_generation": self.wal.generation if self.wal is not None else 0,
            "wal_truncated_bytes": self.wal_truncated_bytes,
            "meta_pending_records": self.applier.lag if self.applier is not None else 0,
            "meta_transactions": self.applier.transactions if self.applier is not None else 0,
            "replayed_records": self.replayed_records,
            "restored_rows": self.restored_rows,
            "flushes": self.flushes,
            "dropped_partitions": self.dropped_partitions,
            "compactions": self.compactions,
            "compress_tables": self.compress_tables,
            "rss_mib": _rss_mib(),
        }

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self.applier is not None:
            try:
                self.applier.close()
            except StorageError:  # the log keeps the records; the next open applies them
                log.exception("metadata not fully applied at close")
            self.applier = None
        if self.wal is not None:
            self.wal.close()
        for s in self.segments:
            s.segment.close()
        self.segments = []
        self._set_cache = None
        self.meta.close()
        if self.dir is not None:
            self.dir.unlock()


def _retention_of(body: dict[str, Any] | None) -> float | None:
    """The retention (seconds) in a config body's ``store`` section, None when it has none."""
    value = ((body or {}).get("store") or {}).get("retention")
    return None if value is None else float(value)


def parse_duration(value: str | float | int | None, *, name: str = "retention") -> float | None:
    """``"48h"``, ``"30m"``, ``"2d"``, ``"90s"`` or a number of seconds -> seconds (None stays None)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigError(
            f"{name} must be a duration like '48h' or a number of seconds, got {value!r}"
        )
    if isinstance(value, (int, float)):
        secs = float(value)
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", str(value))
        if not m:
            raise ConfigError(
                f"{name} must be a duration like '48h', '30m', '7d' or seconds, got {value!r}"
            )
        secs = (
            float(m.group(1))
            * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]
        )
    if not math.isfinite(secs) or secs <= 0:
        raise ConfigError(f"{name} must be a positive duration, got {value!r}")
    return secs
