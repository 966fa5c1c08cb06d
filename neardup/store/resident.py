"""Long rows' summaries held in memory: :class:`ResidentSummaries`, a part of
:class:`~neardup.store.meta.MetaDB`.

Why: a long text's SimHash neighbours in a large window are hundreds of rows of other long
texts, and the decider turns most of them down on their stored summaries
(:mod:`neardup.online.summaries`) instead of reading their texts. Each of those summaries was
a read of SQLite's ``summaries`` table, nearly always of a row no earlier query had asked for
(a decider's histogram cache does not help: the rows a stream of queries meets are new ones),
and once a window's database outgrows the page cache (50 M documents: 23 GB beside 12 GB of
mapped segments on a 24 GB machine) a read from the disk. The summaries are a small part of
that database (long rows only: ~27 bytes a document of the seeds' mix, 540 each), so a store
can keep every one of them in memory (``StoreSettings.resident_summaries``, off by default:
docs/store.md, *Long rows' summaries in memory*, says what it cost and gave): a read of
summaries is then a dictionary look-up and never touches SQLite.

They are loaded after the store opens, on a thread of their own (one statement per
:data:`LOAD_CHUNK` rows, in row id order, on a query-only connection of its own), so an open
does not wait for them; until the load ends, the summaries it has not reached are read from
SQLite as before. The copy follows every write of the table: :class:`~neardup.store.meta.MetaDB`
hands :meth:`apply` what each transaction that wrote summaries or deleted rows did, once it
has committed. A row deleted while the load runs is remembered until it ends, so the load does not
bring its summary back from an older statement's answer.

A summary is derived data that a decision never needs (a row without one is read as before),
and one is used only after its checksum and its row's current sketch are checked, so the copy
cannot change a decision: at worst a row is read that need not have been.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .readers import read_connection

__all__ = ["LOAD_CHUNK", "ResidentSummaries"]

log = logging.getLogger(__name__)

#: summaries a statement of the load reads (~4 MB); the load takes the copy's lock for each
#: chunk it adds, so a write that waits for it waits for one chunk at most
LOAD_CHUNK = 8192
#: bytes a held summary costs beyond its own: the bytes object's header and the dictionary's
#: entry (key, value and slot), for the memory the store reports
OVERHEAD_BYTES = 33 + 8 + 28 + 24


class ResidentSummaries:
    """Every summary of the metadata database at ``path``, by row id, in memory once
    :attr:`loaded`. :meth:`start` begins the load on its own thread; :meth:`close` stops it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._held: dict[int, bytes] = {}
        self._bytes = 0
        # writes and the load's chunks, one at a time: a chunk must not add back what a delete
        # that committed after its statement took away
        self._lock = threading.Lock()
        self._dropped: set[int] = set()
        self._dropped_from: int | None = None
        self._stop = threading.Event()
        self._loaded = threading.Event()
        self._failed: str | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Load the database's summaries on a thread of its own (once)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._load, name="neardup-summaries-load", daemon=True
            )
            self._thread.start()

    @property
    def loaded(self) -> bool:
        """Whether every summary of the database is held (absence then means none is stored)."""
        return self._loaded.is_set()

    def wait_loaded(self, timeout: float | None = None) -> bool:
        """Wait for the load to end; whether it has (False on a timeout or a failed load)."""
        return self._loaded.wait(timeout)

    def _load(self) -> None:
        try:  # (a path, not a file: URI, which a folder named with ?, # or % would break)
            db = read_connection(self.path)
        except sqlite3.Error as exc:
            self._failed = f"{type(exc).__name__}: {exc}"
            log.warning("%s: summaries not loaded into memory (%s)", self.path, exc)
            return
        try:
            after = -1
            while not self._stop.is_set():
                chunk = db.execute(
                    "SELECT rid, s FROM summaries WHERE rid > ? ORDER BY rid LIMIT ?",
                    (after, LOAD_CHUNK),
                ).fetchall()
                if not chunk:
                    break
                after = int(chunk[-1][0])
                with self._lock:
                    held, dropped, floor = self._held, self._dropped, self._dropped_from
                    for rid, s in chunk:
                        if rid in held or rid in dropped or (floor is not None and rid >= floor):
                            continue
                        b = bytes(s)
                        held[rid] = b
                        self._bytes += len(b)
            else:
                return
            with self._lock:
                self._dropped = set()
                self._dropped_from = None
                self._loaded.set()
        except sqlite3.Error as exc:  # the copy is never needed: say so and read from SQLite
            self._failed = f"{type(exc).__name__}: {exc}"
            log.warning("%s: summaries not loaded into memory (%s)", self.path, exc)
        finally:
            db.close()

    def lookup(self, rowids: Iterable[int]) -> tuple[dict[int, bytes], list[int]]:
        """(the held summaries of ``rowids``, the row ids to read from SQLite: those not held
        while the load runs; none once it has ended)."""
        get = self._held.get
        found: dict[int, bytes] = {}
        rest: list[int] = []
        loaded = self._loaded.is_set()
        for r in rowids:
            b = get(r)
            if b is not None:
                found[r] = b
            elif not loaded:
                rest.append(r)
        return found, rest

    def apply(self, noted: Sequence[tuple[str, Any]]) -> None:
        """What a committed transaction did to the summaries table, in its order: ``("put",
        pairs)``, ``("drop", row ids)``, ``("drop_from", row id)``."""
        for op, arg in noted:
            if op == "put":
                self.put(arg)
            elif op == "drop":
                self.drop(arg)
            else:
                self.drop_from(arg)

    def put(self, pairs: Sequence[tuple[int, bytes]]) -> None:
        """Hold ``(row id, summary)`` pairs a committed transaction wrote (replacing any)."""
        with self._lock:
            held = self._held
            for rid, s in pairs:
                b = bytes(s)
                old = held.get(rid)
                self._bytes += len(b) - (len(old) if old is not None else 0)
                held[rid] = b
                self._dropped.discard(rid)

    def drop(self, rowids: Iterable[int]) -> None:
        """Forget the summaries of rows a committed transaction deleted."""
        with self._lock:
            held = self._held
            loading = not self._loaded.is_set()
            for r in rowids:
                old = held.pop(r, None)
                if old is not None:
                    self._bytes -= len(old)
                if loading:
                    self._dropped.add(r)

    def drop_from(self, rowid: int) -> None:
        """Forget the summaries of every row id ``>= rowid`` (a committed delete of them)."""
        with self._lock:
            for r in [r for r in self._held if r >= rowid]:
                self._bytes -= len(self._held.pop(r))
            if not self._loaded.is_set():
                floor = self._dropped_from
                self._dropped_from = rowid if floor is None else min(floor, rowid)

    def stats(self) -> dict[str, float]:
        """Rows held, their memory (bytes, the dictionary's included), and whether the load
        ended (1) or not yet (0)."""
        n = len(self._held)
        return {
            "resident_summaries": n,
            "resident_summary_bytes": self._bytes + n * OVERHEAD_BYTES,
            "resident_summaries_loaded": int(self._loaded.is_set()),
        }

    def close(self) -> None:
        """Stop the load (at its next chunk) and wait for its thread."""
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join()
