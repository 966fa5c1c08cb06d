"""SQLite's WAL copied into the database on a thread of its own (:class:`Checkpointer`).

SQLite checkpoints a WAL-mode database by itself, on the commit that takes the WAL past 1,000
pages, in the thread that commits. In a store that thread is the writer's: the applier, or a
retention pass that deletes an hour's rows while every check waits behind it. A checkpoint
copies the WAL's pages into ``meta.sqlite3`` and fsyncs both files, so some commits took the
checkpoint's I/O with them (a third of a slow retention pass: ``python
benchmarks/bench_drop.py``, docs/store.md *SQLite behind the log*).

So the write connection turns automatic checkpoints off (``PRAGMA wal_autocheckpoint=0``) and
a :class:`Checkpointer`, with its own connection, runs ``PRAGMA wal_checkpoint(PASSIVE)`` after
commits, at most once every :data:`EVERY_S`. A passive checkpoint takes no lock that a writer
or reader waits for: it copies the frames that no open read still needs and leaves the rest for
next time. Once every frame is copied, the next write transaction starts the WAL again from its
beginning, so the WAL holds about :data:`EVERY_S` of commits (``tests/store/
test_checkpointer.py`` writes through it and bounds the file).

Durability does not change: the store's own log is the durability source, SQLite is re-derived
from it on open, and the full checkpoint before a log generation is retired
(:meth:`~neardup.store.meta.MetaDB.checkpoint`) still runs on the writer, after waiting for a
passive one in flight (:attr:`Checkpointer.lock`). A checkpoint that fails (a full disk) is
logged and tried again after the next commit; the full checkpoint raises the error where a
caller sees it.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

__all__ = ["EVERY_S", "Checkpointer"]

log = logging.getLogger(__name__)

#: the least time between two passive checkpoints: about as often as SQLite's own automatic
#: checkpoint (every 1,000 pages) comes under a service's load, and each checkpoint's pair of
#: fsyncs stays off the log's fsyncs' way at low load
EVERY_S = 1.0


class Checkpointer:
    """Passive checkpoints of the WAL database at ``path``, on a daemon thread, after
    :meth:`committed` is called (at most one every ``every_s``). :meth:`close` stops it."""

    def __init__(self, path: Path, *, every_s: float | None = None) -> None:
        self.path = path
        self.every_s = float(EVERY_S if every_s is None else every_s)
        #: held while a checkpoint runs: the writer's full checkpoint takes it too (SQLite
        #: answers a checkpoint that meets another one "busy", without waiting)
        self.lock = threading.Lock()
        #: checkpoints run, and WAL frames copied by them (counters for tests and metrics)
        self.runs = 0
        self.frames = 0
        self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._dirty = threading.Event()
        self._closing = threading.Event()
        self._last_error: str | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"neardup-checkpoint:{path.name}", daemon=True
        )
        self._thread.start()

    def committed(self) -> None:
        """A write transaction committed: its frames are in the WAL (cheap; any thread)."""
        self._dirty.set()

    def checkpoint_once(self) -> tuple[int, int, int]:
        """One passive checkpoint now, on the calling thread: (busy, frames in the WAL, frames
        copied), as ``PRAGMA wal_checkpoint`` answers; (1, -1, -1) when it failed."""
        try:
            with self.lock:
                row = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            busy, frames, copied = row
        except sqlite3.Error as exc:
            # a full disk or a locked checkpoint: the next commit tries again; a failure is
            # logged once, not once a second
            if str(exc) != self._last_error:
                log.warning("%s: background SQLite checkpoint failed: %s", self.path, exc)
            self._last_error = str(exc)
            return 1, -1, -1
        self._last_error = None
        self.runs += 1
        self.frames += max(0, int(copied))
        return int(busy), int(frames), int(copied)

    def _run(self) -> None:
        while True:
            self._dirty.wait()
            if self._closing.is_set():
                return
            self._dirty.clear()
            self.checkpoint_once()
            if self._closing.wait(self.every_s):
                return

    def close(self) -> None:
        """Stop the thread (after a checkpoint in flight) and close its connection."""
        self._closing.set()
        self._dirty.set()
        self._thread.join()
        self._conn.close()
