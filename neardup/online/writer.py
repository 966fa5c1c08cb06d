"""The writer: one thread that takes queued operations in order, decides write groups
(:class:`~neardup.online.decide.Decider`), appends them to the store's log and hands them to
the syncer (:mod:`.commit`), and between groups does the store's housekeeping (retention,
background flushes and merges). Callers may decide small groups in their own thread
(``inline``), taking turns with the thread.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from .._threads import lower_thread_priority
from ..errors import IndexStateError, StorageError
from ..store import Store
from .commit import Inflight, Syncer
from .decide import Decider
from .prepare import Op

__all__ = ["MAX_GROUP_DOCS", "Writer"]

log = logging.getLogger("neardup.store")

#: most documents one write group decides (a single batch larger than this is still one group)
MAX_GROUP_DOCS = 2048
#: no background merge starts within this many seconds of a bulk_load (a seed of many chunks
#: would otherwise rewrite each partition once per chunk)
_BULK_QUIET_S = 10.0


class Writer:
    """The queue and the writer thread of one :class:`~neardup.online.Deduplicator`.

    Parameters
    ----------
    store : Store
        Written by this writer only (reads from other threads as the store allows).
    decider : Decider
        Decides each write group.
    clock : callable
        Unix seconds (retention cutoffs).
    retention : float or None
        Seconds; documents older than ``now - retention`` stop matching and are dropped.
    commit_interval : float
        Seconds the writer waits for more operations to join a group.
    max_segments_per_partition : int
        A partition with more segments is merged in the background.
    save_retention : callable
        Stores a new retention (``set_retention``); called on the writer thread before this
        writer applies it.
    """

    def __init__(
        self,
        store: Store,
        decider: Decider,
        *,
        clock: Callable[[], float],
        retention: float | None,
        commit_interval: float,
        max_segments_per_partition: int,
        save_retention: Callable[[float | None], None],
    ) -> None:
        self.store = store
        self.decider = decider
        self.clock = clock
        self.retention = retention
        self.commit_interval = commit_interval
        self.max_segments_per_partition = max_segments_per_partition
        self._save_retention = save_retention
        self._cv = threading.Condition()
        self._queue: list[Op] = []
        self._closed = False
        self._counters = {
            "checks": 0,
            "adds": 0,
            "duplicates": 0,
            "groups": 0,
            "group_docs": 0,
            "storage_errors": 0,
            "inline_groups": 0,  # groups decided in the caller's thread (submit(inline=True))
        }
        self._last_expire = 0.0
        self._last_expire_mono = -math.inf
        self._stopping = False
        self._writer_busy = False  # the writer thread is deciding a group or housekeeping
        self._inline_busy = False  # a caller is deciding its documents (submit(inline=True))
        # housekeeping due at the end of an inline turn: the turn filled the memtable, or the
        # writer's wait for its next round (retention, a flush to install) ran out during it
        self._duties_due = False
        self._writer_waits = False  # the writer thread waits for an inline turn to end
        self._compactor: threading.Thread | None = None
        self._compacting = False  # compact() is merging in the caller's thread
        self._last_bulk = -math.inf  # monotonic time of the last bulk_load
        self._compact_seen = -1
        # durable stores answer a group once the log's fsync covers it, on this thread
        self._syncer: Syncer | None = (
            Syncer(self.store, self._resolve_group, self._request_recovery)
            if self.store.durable
            else None
        )
        self._thread = threading.Thread(target=self._run, name="neardup-writer", daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called (nothing more is accepted)."""
        return self._closed

    # ------------------------------------------------------------------ callers' side
    def run(self, op: Op) -> Any:
        """Queue ``op`` and wait for its result."""
        with self._cv:
            if self._closed:
                raise IndexStateError("this Deduplicator is closed; open a new one")
            self._queue.append(op)
            self._cv.notify()
        return op.future.result()

    def enqueue(self, op: Op, *, inline: bool = False) -> Future[Any]:
        """Queue a document op and return its future; ``inline``: decide it in the calling
        thread when the writer is idle (see :meth:`Deduplicator.submit
        <neardup.online.Deduplicator.submit>`)."""
        with self._cv:
            if self._closed:
                raise IndexStateError("this Deduplicator is closed; open a new one")
            if not (
                inline
                and not self._queue
                and not self._writer_busy
                and not self._inline_busy
                and not self._duties_due
                and not self._stopping
                and self.commit_interval == 0
            ):
                self._queue.append(op)
                self._cv.notify()
                return op.future
            # the writer is idle: decide here; the writer thread waits for this turn to end
            self._inline_busy = True
        try:
            self._dispatch([op], inline=True)
        except Exception as exc:  # as in the writer thread: fail what was in flight
            log.exception("writer: unexpected error")
            if not op.future.done():
                op.future.set_exception(exc)
        finally:
            flush_due = self.store.flush_due
            with self._cv:
                self._inline_busy = False
                self._counters["inline_groups"] += 1
                self._duties_due = self._duties_due or flush_due
                if self._queue or self._duties_due or self._writer_waits:
                    # queued meanwhile, the memtable is full, or the writer woke up for its
                    # housekeeping (a finished flush, retention) and waits for this turn
                    self._cv.notify()
        return op.future

    def compact(self) -> int:
        """Merge, now, every time partition that holds more than ``max_segments_per_partition``
        segments (into one segment each; deleted rows dropped). Blocks until done, e.g. after
        a large ``bulk_load``, so that later searches visit few segments and no background
        merge competes with the load. Returns the number of merges installed.
        """
        st = self.store
        if not st.durable:
            return 0
        # under the lock _maybe_compact starts a merge under: either its merge is published
        # and joined here, or it sees this one and starts none (two merges of the same
        # segments: the one installed second read segments the first had closed)
        with self._cv:
            self._compacting = True
            compactor = self._compactor
        merges = 0
        try:
            if compactor is not None:
                compactor.join()
            while True:
                st.sync_meta()  # deletes must be in SQLite for the merge to drop their rows
                groups = st.compaction_candidates(self.max_segments_per_partition)
                if not groups:
                    return merges
                for segs in groups:
                    merged = st.build_merged(segs)
                    if self.run(Op("install", arg=(segs, merged))):
                        merges += 1
        finally:
            self._compacting = False

    def stats(self) -> dict[str, Any]:
        """The writer's counters, queue depth, the syncer's fsync timings and whether a merge
        is running."""
        with self._cv:
            s: dict[str, Any] = dict(self._counters)
            s["queue_depth"] = len(self._queue)
        syncer = self._syncer
        if syncer is not None:
            s["wal_syncs"] = syncer.syncs
            s["wal_sync_seconds"] = syncer.sync_seconds
            s["wal_slow_syncs"] = syncer.slow_syncs
            s["wal_max_sync_seconds"] = syncer.max_sync_seconds
        compactor = self._compactor
        s["compacting"] = self._compacting or (compactor is not None and compactor.is_alive())
        # the MinHash channel's band candidates tested on their stored sketches, and those let
        # by to be read (the rest were turned down without their texts)
        s["sketch_checked_rows"] = self.decider.sketch_checked
        s["sketch_passed_rows"] = self.decider.sketch_passed
        # SimHash hits turned down before their rows were read: by their token counts, and by
        # the cached token histograms of rows verified before
        s["length_rejected_hits"] = self.decider.length_rejected
        s["mask_rejected_hits"] = self.decider.mask_rejected
        s["mask_rejected_rows"] = self.decider.mask_rejected_rows
        s["histogram_rejected_hits"] = self.decider.histogram_rejected
        s["histogram_cache_rows"] = len(self.decider.histograms)
        # long rows' stored summaries put into that cache unread, and those set aside (a
        # digest or checksum that does not hold: the row is read instead)
        s["summaries_used_rows"] = self.decider.summaries_used
        s["summaries_set_aside_rows"] = self.decider.summaries_set_aside
        return s

    def close(self) -> bool:
        """Drain queued operations, stop the thread (flushing the memtable to segments);
        False, doing nothing, when already closed or closing."""
        with self._cv:
            if self._closed or self._stopping:
                return False
            self._stopping = True
            compactor = self._compactor  # no merge starts after this (_maybe_compact)
        if compactor is not None:
            compactor.join()
        with self._cv:
            self._closed = True
            stop = Op("stop")
            self._queue.append(stop)
            self._cv.notify()
        self._thread.join()
        return True

    # ------------------------------------------------------------------ the writer thread
    def _take(self) -> list[Op]:
        """The next group (or [] for a round of housekeeping only), once no caller is deciding
        inline; from then until :meth:`_run` clears ``_writer_busy`` nobody decides inline."""
        with self._cv:
            while self._inline_busy or not self._queue:
                if self._inline_busy:
                    self._writer_waits = True  # the caller notifies when its turn ends
                    self._cv.wait()
                    self._writer_waits = False
                    continue
                if self._duties_due:
                    self._duties_due = False
                    self._writer_busy = True
                    return []
                timeout = 1.0 if self.retention is not None else None
                if self.store.flushing:  # come back to install the finished flush
                    timeout = 0.05
                if not self._cv.wait(timeout):  # housekeeping is due (retention, a flush)
                    if not self._inline_busy:
                        self._writer_busy = True
                        return []
                    # a caller is deciding inline: the housekeeping comes at the end of its
                    # turn, before the next (enqueue queues while duties are due); waiting out
                    # the turn and then a whole timeout again, a steady stream of inline
                    # requests (the service's single requests) starves retention, flush
                    # installs and merges (tests/online/test_online.py -k starve)
                    self._duties_due = True
            self._writer_busy = True
            first = self._queue[0]
            if first.kind not in ("check", "add", "check_and_add", "delete"):
                return [self._queue.pop(0)]
            if self.commit_interval > 0:
                deadline = time.monotonic() + self.commit_interval
                while sum(o.n for o in self._queue) < MAX_GROUP_DOCS:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cv.wait(left)
            group: list[Op] = []
            n = 0
            while self._queue:
                op = self._queue[0]
                if op.kind not in ("check", "add", "check_and_add", "delete"):
                    break
                if group and n + op.n > MAX_GROUP_DOCS:
                    break
                group.append(self._queue.pop(0))
                n += op.n
            return group

    def _run(self) -> None:
        while True:
            group = self._take()
            try:
                self._run_group(group)
            finally:
                with self._cv:
                    self._writer_busy = False
            if group and group[0].kind == "stop":
                return
            del group  # the last group's documents and decisions are not kept alive meanwhile

    def _run_group(self, group: list[Op]) -> None:
        """Decide ``group`` (from :meth:`_take`), then the writer's housekeeping."""
        try:
            if group and group[0].kind == "stop":
                self._shutdown(group[0])
                return
            if group:
                self._dispatch(group)
        except Exception as exc:  # never let the writer die; fail what was in flight
            log.exception("writer: unexpected error")
            for op in group:
                if not op.future.done():
                    op.future.set_exception(exc)
        try:
            self._housekeeping()
        except StorageError as exc:
            # e.g. a flush on a full disk: the writes are in the log, the flush is retried;
            # the group's own results (some still waiting for their fsync) are not affected
            log.error("writer housekeeping failed (%s); retrying later", exc)
        except Exception:
            log.exception("writer housekeeping failed; retrying later")

    def _housekeeping(self) -> None:
        """Retention (about once a second), background flushes and merges (writer thread)."""
        if self.retention is not None:
            now, mono = self.clock(), time.monotonic()
            # once a second of the store's clock, or, while a clock jump's backlog is being
            # worked off, of real time (a clock that stands still, e.g. a test's or a paused
            # simulation's, must not leave it half done)
            if now - self._last_expire >= 1.0 or (
                self.store.retention_behind and mono - self._last_expire_mono >= 1.0
            ):
                self._last_expire, self._last_expire_mono = now, mono
                self._sync_barrier()
                self.store.expire(now - self.retention)
        st = self.store
        if st.flush_due:
            self._sync_barrier()  # a flush starts a new log: this one fully synced
        st.maybe_flush(self._cutoff())
        self._maybe_compact()
        st.advise_read_ahead()  # (for a new set of segments)

    def _cutoff(self) -> float | None:
        return None if self.retention is None else self.clock() - self.retention

    def _maybe_compact(self) -> None:
        """Start a background merge when a partition has too many segments."""
        st = self.store
        changes = st.layout_changes
        if not st.durable or self._stopping or self._compacting or changes == self._compact_seen:
            return
        if time.monotonic() - self._last_bulk < _BULK_QUIET_S:
            return  # a series of bulk_load calls: merge once it is over (or call compact())
        if self._compactor is not None and self._compactor.is_alive():
            return
        self._compact_seen = changes
        groups = st.compaction_candidates(self.max_segments_per_partition)
        if groups:
            compactor = threading.Thread(
                target=self._compact, args=(groups,), name="neardup-compactor", daemon=True
            )
            # started and published under the lock, and only while close() has not begun:
            # close() sets _stopping under it and then joins whatever it finds published, so a
            # merge never starts behind close()'s back (it ran against a closed store: a
            # "compaction failed" traceback on every flush followed at once by close())
            with self._cv:
                if self._stopping or self._compacting:
                    return
                compactor.start()
                self._compactor = compactor

    def _compact(self, groups: list[Any]) -> None:
        lower_thread_priority()
        for segs in groups:
            try:
                merged = self.store.build_merged(segs)
            except Exception:
                log.exception("compaction failed; the segments stay as they are")
                continue
            try:
                self.run(Op("install", arg=(segs, merged)))
            except Exception:
                log.exception("installing a compacted segment failed")
                if merged is not None:
                    self.store.discard_merged(merged)

    def _shutdown(self, stop: Op) -> None:
        try:
            self._sync_barrier()
            if self._syncer is not None:
                self._syncer.close()
            self.store.finish_flush(wait=True)
            if self.store.log_has_rows:
                self.store.flush(
                    cutoff=None if self.retention is None else self.clock() - self.retention
                )
            elif self.retention is not None:
                self.store.save_expiry_marks()  # (a flush records them)
        except Exception:
            log.exception("flush on close failed; the log still holds every row")
        stop.future.set_result(None)

    def _dispatch(self, group: list[Op], inline: bool = False) -> None:
        op = group[0]
        if op.kind in ("flush", "bulk", "install", "retention"):
            self._sync_barrier()
        if op.kind == "flush":
            self._guard(
                op,
                lambda: self.store.flush(
                    cutoff=None if self.retention is None else self.clock() - self.retention
                ),
            )
        elif op.kind == "bulk":
            self._guard(op, lambda: self.store.bulk_add(*op.arg))
            self._last_bulk = time.monotonic()
        elif op.kind == "install":
            self._guard(op, lambda: self.store.install_merged(*op.arg))
        elif op.kind == "retention":
            self._guard(op, lambda: self._set_retention(op.arg))
        elif op.kind == "recover":
            self._guard(op, self._recover_failed_sync)
        else:
            self._apply_group(group, inline)

    @staticmethod
    def _guard(op: Op, fn: Callable[[], Any]) -> None:
        try:
            op.future.set_result(fn())
        except Exception as exc:
            op.future.set_exception(exc)

    def _apply_group(self, group: list[Op], inline: bool = False) -> None:
        """Decide ``group``, log it and hand it to the syncer (``inline``: the caller decided
        it in its own thread, and syncs it there too when the syncer is idle)."""
        syncer = self._syncer
        if syncer is not None and syncer.failed is not None:
            self._recover_failed_sync()
        try:
            results, writes = self.decider.decide(group, self._cutoff())
        except Exception as exc:
            for op in group:
                op.future.set_exception(exc)
            return
        try:
            unsynced = self.store.append_group(writes)
        except StorageError as exc:
            self._counters["storage_errors"] += 1
            reads = [op for op in group if op.kind == "check"]
            for op in group:
                if op.kind != "check":
                    op.future.set_exception(exc)
            if reads:  # answer reads as if the failed writes never happened
                self._apply_group(reads, inline)
            return
        n_docs = adds = dups = checks = 0
        for op, res in zip(group, results, strict=True):
            if op.docs is None or isinstance(res, BaseException):
                continue
            n_docs += len(res)
            dups += sum(d.duplicate for d in res)
            if op.kind == "check":
                checks += len(res)
            else:
                adds += sum(d.added for d in res)
        item = Inflight(group, results, unsynced, (n_docs, checks, adds, dups))
        if syncer is None:
            self._resolve_group(item)
        elif not (inline and syncer.try_inline(item)):
            syncer.submit(item)

    def _resolve_group(self, item: Inflight) -> None:
        """Answer a group whose records are durable (writer or syncer thread)."""
        for op, res in zip(item.group, item.results, strict=True):
            if isinstance(res, BaseException):
                op.future.set_exception(res)
            else:
                op.future.set_result(res)
        _n, checks, adds, dups = item.counts
        with self._cv:
            c = self._counters
            c["groups"] += 1
            c["group_docs"] += sum(o.n for o in item.group)
            c["checks"] += checks
            c["adds"] += adds
            c["duplicates"] += dups

    def _fail_group(self, item: Inflight, exc: StorageError) -> None:
        """Refuse a group whose log sync failed (or that came after one)."""
        with self._cv:
            self._counters["storage_errors"] += 1
        for op in item.group:
            if not op.future.done():
                op.future.set_exception(exc)

    def _sync_barrier(self) -> None:
        """Writer thread: wait until every decided group is durable and answered, taking back
        the ones a failed sync refused (before flushes, retention, bulk loads, installs)."""
        if self._syncer is not None:
            self._syncer.drain()
            if self._syncer.failed is not None:
                self._recover_failed_sync()

    def _request_recovery(self) -> None:
        """Syncer thread: have the writer run :meth:`_recover_failed_sync` next."""
        with self._cv:
            self._queue.insert(0, Op("recover"))
            self._cv.notify()

    def _recover_failed_sync(self) -> None:
        """Writer thread: undo the groups a failed fsync refused (newest first), cut the log
        back to its last durable offset, refuse them, then accept writes again."""
        syncer = self._syncer
        if syncer is None or syncer.failed is None:
            return
        syncer.drain()
        items, err = syncer.take_failed()
        ok = True
        try:
            self.store.take_back([it.unsynced for it in items if it.unsynced is not None])
        except StorageError:
            log.exception("cannot cut the log back after a failed sync; refusing writes")
            ok = False
        for it in items:
            self._fail_group(it, err)
        if ok:
            syncer.clear_failure()

    def _set_retention(self, secs: float | None) -> None:
        """(writer) Store a new retention, then apply it from the next housekeeping on."""
        self._save_retention(secs)
        self.retention = secs
        self._last_expire = 0.0
