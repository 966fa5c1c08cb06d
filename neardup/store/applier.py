"""The write path: a decided write group into the log, the memtable and the pending overlay,
then (once an fsync covers it) into SQLite by a background thread.

The one write protocol (:class:`~neardup.store.Store`'s ``append_group``, ``sync_log``,
``take_back``): :func:`append_group` encodes a group's records and writes them to the log
*without* an fsync, applies them in memory (the memtable, its band keys, the
:class:`PendingRecords` overlay that reads consult before SQLite) and returns an
:class:`Unsynced`; :func:`sync_log` fsyncs the log and hands the groups it covers to the
:class:`MetaApplier`, which writes them to SQLite in large transactions (recording the log
position reached in the same transaction) and then drops them from the overlay;
:func:`take_back` undoes groups whose fsync failed and cuts the log back. A store without a
directory applies groups to SQLite at once (nothing to sync).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..errors import StorageError
from .meta import MetaDB, Row
from .wal import AddRecord, DeleteRecord, frame_records, log_keys
from .writes import WriteGroup, row_of, rows_of

if TYPE_CHECKING:
    from .state import StoreState

__all__ = [
    "MAX_PENDING_RECORDS",
    "MetaApplier",
    "PendingRecords",
    "Unsynced",
    "add_bands",
    "append_group",
    "fetch",
    "get_row",
    "list_ids",
    "lookup_ids",
    "sync_log",
    "take_back",
]

log = logging.getLogger("neardup.store")

_Record = AddRecord | DeleteRecord
#: what :meth:`PendingRecords.undo` needs per record: (the record, the entries it replaced by id
#: and by row id)
_UndoLog = list[tuple[_Record, _Record | None, _Record | None]]

#: the metadata applier waits this long for more records before a transaction
_APPLY_LINGER_S = 0.02
#: the writer waits for the metadata applier when this many records are not yet in SQLite
MAX_PENDING_RECORDS = 200_000
#: most records one applier transaction writes
_APPLY_BATCH = 50_000


class PendingRecords:
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

    def ids_after(self, after: str) -> list[str]:
        """Ids of pending adds greater than ``after`` (deletes included: the caller reads each
        id, and a deleted one is not found)."""
        with self.lock:
            return [i for i in self.by_id if i > after]


class MetaApplier:
    """Background thread writing committed log records to SQLite, in log order, in large
    transactions; each transaction also records the log position it reached. A failing
    SQLite write is retried (with back-off) and never loses records: they stay in the log and
    in the pending overlay."""

    def __init__(self, meta: MetaDB, pending: PendingRecords) -> None:
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


@dataclass
class Unsynced:
    """A write group written to the log but not yet fsynced (:func:`append_group`): pass it to
    :func:`sync_log` once written, or to :func:`take_back` when that sync failed."""

    generation: int
    start: int  # log offset its records start at (the log is cut back here if unsynced)
    end: int  # log offset its records end at
    records: list[AddRecord | DeleteRecord]
    undo_log: _UndoLog
    added: npt.NDArray[np.int64]  # row ids added to the memtable
    deleted: list[int]  # row ids marked deleted


def add_bands(
    st: StoreState,
    adds: Sequence[AddRecord],
    rids: npt.NDArray[np.int64],
    ent: npt.NDArray[np.uint64] | None = None,
) -> None:
    """Band keys of added rows into the memtable's band table (computed from the records'
    texts when ``ent`` is not given: rows restored from SQLite, or in memory)."""
    if st.band_keys_of is None or not len(rids):
        return
    if ent is None:
        ent = st.band_keys_of([r.text for r in adds])
    st.bandtable.insert_many(rids, ent)


def append_group(st: StoreState, group: WriteGroup) -> Unsynced | None:
    """Log and apply one decided write group, in order; :class:`StorageError` means nothing
    was applied. Durable stores: the records are written to the log without an fsync and
    applied in memory (later groups see them); the :class:`Unsynced` returned goes to
    :func:`sync_log` or :func:`take_back`. In memory: applied at once, None returned."""
    if not group.records:
        return None
    recs = list(group.records)
    added = group.added
    bands = added.bands if added is not None else None
    wal, applier = st.wal, st.applier
    unsynced = None
    if wal is not None and applier is not None:
        logged = None
        if st.band_keys_of is not None:
            # the band keys go into the log (ADD_KEYS), so a replay does not recompute MinHash
            if bands is None:
                texts = [r.text for r in recs if type(r) is AddRecord]
                if texts:
                    bands = st.band_keys_of(texts)
            if bands is not None:
                sk = added.sketches if added is not None and st.sketch_width else None
                logged = log_keys(bands, sk)
        if applier.lag > MAX_PENDING_RECORDS:  # back-pressure: SQLite fell behind
            applier.wait_below(MAX_PENDING_RECORDS // 2)
        start = wal.size
        end = wal.write(frame_records(recs, logged))
        undo_log = st.pending.add(recs, undo=True)
        assert undo_log is not None
        unsynced = Unsynced(wal.generation, start, end, recs, undo_log, np.zeros(0, np.int64), [])
    else:  # in memory: nothing to recover from, apply now
        st.db.apply(recs)
    deleted: list[int] = []
    for r in recs:
        if type(r) is DeleteRecord:
            st.memtable_deleted.add(r.rowid)
            deleted.append(r.rowid)
    if added is None:
        adds = [r for r in recs if type(r) is AddRecord]
        if adds:
            added = rows_of(adds, st.bits)
    if added is not None and len(added.rowids):
        st.memtable.add(added.fingerprints, added.rowids, added.times)
        if st.band_keys_of is not None:
            texts_of = [r for r in recs if type(r) is AddRecord] if bands is None else []
            add_bands(st, texts_of, added.rowids, bands)
        if st.sketchtable is not None and added.sketches is not None:
            st.sketchtable.put(added.rowids, added.sketches)
    n_add = 0 if added is None else len(added.rowids)
    st.count(n_add - len(deleted))
    if unsynced is not None:
        if added is not None:
            unsynced.added = added.rowids
        unsynced.deleted = deleted
    return unsynced


def sync_log(st: StoreState, groups: Sequence[Unsynced]) -> None:
    """fsync the log, then hand ``groups`` (written before this call, oldest first) to the
    SQLite applier: acknowledged from here on. :class:`StorageError` when the disk refuses
    (nothing is handed on; the caller takes the groups back)."""
    assert st.wal is not None
    st.wal.sync()
    applier = st.applier
    if applier is not None:
        for u in groups:
            applier.submit(u.generation, u.end, u.records)


def take_back(st: StoreState, groups: Sequence[Unsynced]) -> None:
    """Take back groups whose log sync failed (oldest first in ``groups``): undo them in
    memory, newest first, then cut the log back to where the oldest started.
    :class:`StorageError` when the log cannot be cut back (the in-memory state is undone
    regardless)."""
    for u in reversed(groups):
        st.pending.undo(u.undo_log)
        for rid in u.deleted:
            st.memtable_deleted.discard(rid)
        st.memtable.remove_rows(u.added)
        st.bandtable.remove_many(u.added)
        st.count(-(len(u.added) - len(u.deleted)))
    if groups and st.wal is not None:
        st.wal.rollback(min(u.start for u in groups))


# ---------------------------------------------------------------------- reads
def _pending_first(
    st: StoreState,
    keys: Iterable[Any],
    by_id: bool,
    of_add: Callable[[AddRecord], Any],
    stored: Callable[[Any], dict[Any, Any]],
) -> dict[Any, Any]:
    """A read by id (``by_id``) or row id that the pending records answer first: ``of_add(r)``
    for a key whose pending record is an add (None: left out), nothing for a pending delete,
    ``stored(rest)`` (SQLite) for the keys no record holds."""
    p = st.pending
    index = p.by_id if by_id else p.by_rid
    if not index:
        return stored(keys)
    out: dict[Any, Any] = {}
    rest: list[Any] = []
    with p.lock:
        get = index.get
        for k in keys:
            r = get(k)
            if r is None:
                rest.append(k)
            elif isinstance(r, AddRecord) and (v := of_add(r)) is not None:
                out[k] = v
    if rest:
        out.update(stored(rest))
    return out


def lookup_ids(st: StoreState, ids: Sequence[str]) -> dict[str, int]:
    """id -> row id for the ids that exist (pending records first, then SQLite)."""
    return _pending_first(st, ids, True, lambda r: r.rowid, st.db.lookup_ids)


def ids_from(st: StoreState, rowid: int) -> list[str]:
    """The ids of the rows with row ids ``rowid`` and above (pending records first: a pending
    add counts, a pending delete hides its row), in row id order."""
    p = st.pending
    with p.lock:
        pending = {r: rec for r, rec in p.by_rid.items() if r >= rowid}
    rows = {r: i for r, i in st.db.ids_from(rowid) if r not in pending}
    rows.update({r: rec.id for r, rec in pending.items() if isinstance(rec, AddRecord)})
    return [rows[r] for r in sorted(rows)]


def fetch(st: StoreState, rowids: Iterable[int], *, with_text: bool) -> dict[int, Row]:
    """Rows by row id (missing = deleted or expired; pending records first)."""
    return _pending_first(
        st,
        rowids,
        False,
        lambda r: row_of(r, with_text),
        lambda rest: st.db.fetch(rest, with_text=with_text),
    )


def summaries(st: StoreState, rowids: Iterable[int]) -> dict[int, bytes]:
    """Stored summaries by row id (pending records first; rows without one left out)."""
    return _pending_first(st, rowids, False, lambda r: r.summary, st.db.summaries)


def get_row(st: StoreState, id: str) -> Row | None:
    """The stored row of ``id`` or None (any thread)."""
    p = st.pending
    with p.lock:
        r = p.by_id.get(id)
    if r is None:
        return st.db.get(id)
    return row_of(r, True) if isinstance(r, AddRecord) else None


def list_ids(st: StoreState, after: str, limit: int) -> list[str]:
    """Up to ``limit`` ids greater than ``after``, in order: SQLite's and those of records
    not applied to it yet (a listed id may have been deleted since; reading it says so)."""
    pend = st.pending.ids_after(after)
    ids = set(st.db.ids_after(after, limit))
    ids.update(pend)
    return sorted(ids)[:limit]
