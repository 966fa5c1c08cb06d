"""Group commit: the log's fsync behind the writer (:class:`Syncer`).

The writer decides a group, appends its records to the log without an fsync and applies them in
memory (:meth:`Store.append_group <neardup.store.Store.append_group>`), and hands the group (an
:class:`Inflight`) to the syncer, which fsyncs (:meth:`Store.sync_log
<neardup.store.Store.sync_log>`) and only then answers it; a failed fsync refuses that batch
and every later one until the writer has taken them back (:meth:`Store.take_back
<neardup.store.Store.take_back>`): the store's one write protocol.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import StorageError
from ..store import Store, Unsynced
from .prepare import Op

__all__ = ["SLOW_SYNC_S", "Inflight", "Syncer"]

log = logging.getLogger("neardup.store")


@dataclass
class Inflight:
    """A decided group on its way to the log's fsync (pipelined group commit)."""

    group: list[Op]
    results: list[Any]
    unsynced: Unsynced | None  # None: nothing written (reads only, or every op failed)
    counts: tuple[int, int, int, int]  # documents, checks, adds, duplicates


#: an fdatasync slower than this is counted in ``stats()["wal_slow_syncs"]``
SLOW_SYNC_S = 0.002


class Syncer:
    """Pipelined group commit: fsyncs the log behind the writer and only then answers.

    The writer decides a group, writes its records to the log (no fsync), applies them in
    memory and hands the group here; while this thread waits for ``fdatasync`` the writer
    already decides the next group (which sees the previous one's rows, as it must). One
    fsync covers every group written before it started (natural group commit). Nothing is
    acknowledged before the fsync that covers it: a crash loses only unanswered writes.

    A failed fsync fails that batch and every group decided after it (they may build on it);
    the writer then takes them back (:meth:`take_failed`, then
    :meth:`Store.take_back <neardup.store.Store.take_back>`: memtable, pending overlay, the log
    cut back to its last durable offset) before deciding anything else, so nothing refused
    stays visible.

    Parameters
    ----------
    store : Store
        The store whose log is synced (a durable one).
    resolve : callable
        Answers a group once its records are durable (called in order, on this thread or on
        the caller of :meth:`try_inline`).
    request_recovery : callable
        Asks the writer to take back the refused groups before it decides anything else.
    """

    def __init__(
        self,
        store: Store,
        resolve: Callable[[Inflight], None],
        request_recovery: Callable[[], None],
    ) -> None:
        self._store = store
        self._resolve = resolve
        self._request_recovery = request_recovery
        self._cv = threading.Condition()
        self._queue: list[Inflight] = []
        self._busy = False
        self._stop = False
        self._waiters = 0  # threads in drain()
        self.failed: StorageError | None = None
        self.failed_items: list[Inflight] = []
        # fdatasync timings (monitoring: the disk's share of a write's latency)
        self.syncs = 0
        self.sync_seconds = 0.0
        self.slow_syncs = 0  # above SLOW_SYNC_S
        self.max_sync_seconds = 0.0
        self._thread = threading.Thread(target=self._run, name="neardup-syncer", daemon=True)
        self._thread.start()

    def submit(self, item: Inflight) -> None:
        with self._cv:
            err = self.failed
            if err is None:
                self._queue.append(item)
                self._cv.notify()
                return
            self.failed_items.append(item)  # decided on top of a failed sync: refused too
        # normally a recovery is queued already; after one that could not cut the log back,
        # this makes sure the writer refuses the group instead of leaving its caller waiting
        self._request_recovery()

    def try_inline(self, item: Inflight) -> bool:
        """Sync and answer ``item`` in the calling thread when this syncer is idle (nothing
        queued, no fsync in flight, no failure pending); return False, doing nothing, otherwise
        (then :meth:`submit` it). While the caller syncs, it *is* the syncer: the thread waits,
        so there is still one fsync at a time, in order, with the same failure handling.

        For a caller that decided ``item`` inline (the service's event loop): it waits for the
        disk itself instead of handing the group to this thread, whose wake-up after the
        fsync needs the interpreter lock, which that caller holds most of the time (the
        sync latencies as the kernel and as this thread see them: benchmarks/bench_service.py).
        """
        with self._cv:
            if self.failed is not None or self._queue or self._busy or self._stop:
                return False
            self._busy = True
        self._process([item])
        return True

    def drain(self) -> None:
        """Wait until every submitted group is answered (or refused)."""
        with self._cv:
            self._waiters += 1
            try:
                while self._queue or self._busy:
                    self._cv.wait()
            finally:
                self._waiters -= 1

    def take_failed(self) -> tuple[list[Inflight], StorageError]:
        """(writer thread, after :meth:`drain`, with a failure pending) The groups a failed
        fsync refused, oldest first, and its error; they are no longer kept here."""
        with self._cv:
            items, self.failed_items = self.failed_items, []
            err = self.failed
        assert err is not None
        return items, err

    def clear_failure(self) -> None:
        """(writer thread) The refused groups are taken back: accept groups again."""
        with self._cv:
            self.failed = None

    def close(self) -> None:
        self.drain()
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._stop and (not self._queue or self._busy):
                    self._cv.wait()
                if not self._queue:
                    return
                items, self._queue = self._queue, []
                self._busy = True
            self._process(items)
            del items  # not kept alive (and walked by every full GC) while waiting

    def _process(self, items: list[Inflight]) -> None:
        """fsync (when ``items`` wrote anything), then answer them in order, or refuse them and
        every later group; the caller has set ``_busy``, this clears it."""
        store = self._store
        err: StorageError | None = None
        # groups that wrote nothing need no fsync: every earlier write was synced by an
        # earlier batch (batches are answered in order, and a failure stops everything)
        written = [it.unsynced for it in items if it.unsynced is not None]
        if written:
            t0 = time.perf_counter()
            try:
                store.sync_log(written)
            except StorageError as exc:
                err = exc
            except Exception as exc:  # pragma: no cover - treated like a failed sync
                err = StorageError(f"cannot sync the write-ahead log: {exc}")
            took = time.perf_counter() - t0
            self.syncs += 1
            self.sync_seconds += took
            self.slow_syncs += took > SLOW_SYNC_S
            self.max_sync_seconds = max(self.max_sync_seconds, took)
        del written
        if err is None:
            for it in items:
                self._resolve(it)
            with self._cv:
                self._busy = False
                if self._queue or self._waiters:  # the thread (after an inline sync), drain()
                    self._cv.notify_all()
            return
        log.error("write-ahead log sync failed; refusing the groups not yet synced: %s", err)
        with self._cv:
            self.failed = err
            more, self._queue = self._queue, []
            self.failed_items.extend(items + more)
            self._busy = False
            self._cv.notify_all()
        # the writer takes them back first, then refuses them: a caller that sees the
        # error sees a store without them
        self._request_recovery()
