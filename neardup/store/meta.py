"""Document metadata in SQLite (WAL mode): string id <-> int64 row id, time, fingerprint, text.

The write-ahead log is the durability source, so SQLite runs with ``synchronous=NORMAL`` and is
re-derived from the log on open: replaying ``ADD`` as ``INSERT OR REPLACE`` and ``DELETE`` as
``DELETE`` is idempotent. Each :meth:`MetaDB.apply` can record, *in the same transaction*, the
log position it applied up to (table ``wal_applied``), so a restart re-applies only the records
after it (a transaction lost by a power cut loses its position too, and is simply re-applied).
Before a log generation is retired (after a flush to segments) the database is checkpointed
with a full fsync.

Two connections on a file database: one for writes (the store's background applier, bulk
loads, retention) and one for reads, so reads are never queued behind a large write
transaction (SQLite WAL mode: readers see the last committed state).

String ids live only here (50 M ids never sit in Python dicts); the index holds row ids.

The number of rows in ``docs`` is kept in ``doc_count``, changed in the same transaction as
every write to ``docs`` (all of them are methods of :class:`MetaDB`), so :meth:`MetaDB.count`
is one row read instead of ``SELECT count(*)``: on 60 M rows with the file out of the page
cache (after a reboot) that scan took over two minutes of a server's start. Adds are applied as
``INSERT OR IGNORE``, whose change count is exactly the rows inserted; the rare batch that
conflicts with existing rows (a log re-applied after a repair) is then re-applied row by row
with ``INSERT OR REPLACE``, each row counting the rows it replaces, so the table ends as a plain
``INSERT OR REPLACE`` of the batch would leave it. A database written before this table existed
is counted once, on open.

Added rows are written with multi-row ``INSERT`` statements (power-of-two row counts, so a few
statements are prepared once and cached) rather than ``executemany``: the sqlite3 module
releases and re-takes the interpreter lock around every statement step, i.e. once per row with
``executemany``. With another thread busy in Python (the service's event loop, the writer) each
re-take waits for that thread; measured here with one spinning thread, 33 rows took 140-170 ms
with ``executemany`` against 9-14 ms this way (and 0.18-0.36 vs 0.25-0.62 ms with no contention).
"""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .wal import AddRecord, DeleteRecord

__all__ = ["MetaDB", "Row"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS docs (
    rid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    time REAL NOT NULL,
    fp BLOB NOT NULL,
    chash BLOB NOT NULL,
    flags INTEGER NOT NULL,
    metadata TEXT,
    text TEXT
);
CREATE TABLE IF NOT EXISTS deleted (
    rid INTEGER PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS wal_applied (
    gen INTEGER PRIMARY KEY,
    offset INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS doc_count (
    k INTEGER PRIMARY KEY CHECK (k = 0),
    n INTEGER NOT NULL
);
"""
_CHUNK = 900  # stay under SQLite's host-parameter limit
_DOC_COLUMNS = 8
_MAX_INSERT_ROWS = 256  # rows per multi-row INSERT at most (a power of two)


class Row(NamedTuple):
    rowid: int
    id: str
    time: float
    fp: bytes  # 16 bytes: hi u64 LE, lo u64 LE
    chash: bytes
    flags: int
    metadata: str | None
    text: str | None


def _add_params(r: AddRecord) -> tuple[Any, ...]:
    fp = r.fp_hi.to_bytes(8, "little") + r.fp_lo.to_bytes(8, "little")
    return (r.rowid, r.id, r.time, fp, r.chash, r.flags, r.metadata, r.text)


class MetaDB:
    """Thread-safe wrapper around one SQLite connection (``path=None``: in memory)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._db = sqlite3.connect(
            ":memory:" if path is None else str(path), check_same_thread=False, isolation_level=None
        )
        if path is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            # a full checkpoint waits for a concurrent read instead of giving up
            self._db.execute("PRAGMA busy_timeout=30000")
        self._db.execute("PRAGMA cache_size=-65536")
        self._db.executescript(_SCHEMA)
        # reads: a second connection on a file database (never waits for the writer's
        # transaction); the same one in memory
        self._rlock: threading.RLock = self._lock
        self._rdb = self._db
        if path is not None:
            self._rlock = threading.RLock()
            self._rdb = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
            self._rdb.execute("PRAGMA cache_size=-65536")
            self._rdb.execute("PRAGMA query_only=ON")
            self._rdb.execute("PRAGMA busy_timeout=30000")
        # the largest power-of-two row count whose parameters fit SQLite's limit
        fit = min(
            _MAX_INSERT_ROWS,
            self._db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // _DOC_COLUMNS,
        )
        self._max_rows = 1 << max(0, fit.bit_length() - 1)
        self._insert_sql: dict[tuple[str, int], str] = {}
        with self._lock:  # a database from before doc_count: count it once
            if self._db.execute("SELECT n FROM doc_count").fetchone() is None:
                self._db.execute("INSERT INTO doc_count SELECT 0, count(*) FROM docs")

    def close(self) -> None:
        with self._lock, self._rlock:
            if self._rdb is not self._db:
                self._rdb.close()
            self._db.close()

    def apply(
        self,
        records: Iterable[AddRecord | DeleteRecord],
        positions: Iterable[tuple[int, int]] = (),
    ) -> None:
        """Apply log records in order, in one transaction (idempotent).

        ``positions``: (log generation, end offset of its last applied record) pairs, recorded
        in the same transaction (see :meth:`applied_offset`).
        """
        with self._transaction() as cur:
            delta = 0
            adds: list[tuple[Any, ...]] = []
            for r in records:
                if isinstance(r, AddRecord):
                    adds.append(_add_params(r))
                    continue
                if adds:
                    delta += self._replace_rows(cur, adds)
                    adds = []
                cur.execute("DELETE FROM docs WHERE rid = ?", (r.rowid,))
                delta -= cur.rowcount
                # remembered until compaction drops the row from its segment
                cur.execute("INSERT OR IGNORE INTO deleted VALUES (?)", (r.rowid,))
            if adds:
                delta += self._replace_rows(cur, adds)
            cur.executemany(
                "INSERT OR REPLACE INTO wal_applied VALUES (?, ?)",
                [(int(g), int(o)) for g, o in positions],
            )
            self._add_count(cur, delta)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        """A write transaction on the write connection, under its lock: committed when the
        block ends, rolled back when it raises."""
        with self._lock:
            cur = self._db.cursor()
            cur.execute("BEGIN")
            try:
                yield cur
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise

    def _add_count(self, cur: sqlite3.Cursor, delta: int) -> None:
        if delta:
            cur.execute("UPDATE doc_count SET n = n + ? WHERE k = 0", (delta,))

    def _replace_rows(self, cur: sqlite3.Cursor, rows: list[tuple[Any, ...]]) -> int:
        """``INSERT OR REPLACE`` ``rows`` in order; returns the change in the row count.

        Fast path: ``INSERT OR IGNORE``, whose change count is the rows inserted. When some row
        met an existing row id or id (a log re-applied after a repair), every row is applied
        again with ``INSERT OR REPLACE``, one at a time, counting the rows each one replaces:
        the rows the first pass inserted replace themselves, so the table ends as a plain
        ``INSERT OR REPLACE`` of ``rows`` in order leaves it.
        """
        before = self._db.total_changes
        self._insert_rows(cur, "INSERT OR IGNORE", rows)
        inserted = self._db.total_changes - before
        if inserted == len(rows):
            return inserted
        delta = inserted
        for row in rows:
            (met,) = cur.execute(
                "SELECT count(*) FROM docs WHERE rid = ? OR id = ?", (row[0], row[1])
            ).fetchone()
            self._insert_rows(cur, "INSERT OR REPLACE", (row,))
            delta += 1 - met
        return delta

    def _insert_rows(self, cur: sqlite3.Cursor, verb: str, rows: Iterable[tuple[Any, ...]]) -> None:
        """``{verb} INTO docs`` every row of ``rows`` (any iterable), in order, as statements
        of ``self._max_rows`` rows and, for the last chunk, of decreasing powers of two (see
        the module docstring): the same rows as ``executemany`` one by one (with ``INSERT OR
        REPLACE``, a later row replaces an earlier one with the same row id or id)."""
        it = iter(rows)
        while chunk := list(itertools.islice(it, self._max_rows)):
            pos, n = 0, len(chunk)
            while pos < n:
                k = 1 << ((n - pos).bit_length() - 1)
                sql = self._insert_sql.get((verb, k))
                if sql is None:
                    row = "(" + ",".join("?" * _DOC_COLUMNS) + ")"
                    sql = self._insert_sql[verb, k] = f"{verb} INTO docs VALUES " + ",".join(
                        [row] * k
                    )
                cur.execute(sql, list(itertools.chain.from_iterable(chunk[pos : pos + k])))
                pos += k

    def applied_offset(self, generation: int) -> int:
        """End offset in log ``generation`` up to which records are applied (0: none)."""
        with self._lock:
            row = self._db.execute(
                "SELECT offset FROM wal_applied WHERE gen = ?", (int(generation),)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def set_applied(self, generation: int, offset: int) -> None:
        """Record (or lower, after a log repair) the applied position of one generation."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO wal_applied VALUES (?, ?)", (int(generation), int(offset))
            )

    def forget_generations(self, keep: Iterable[int]) -> None:
        """Drop the applied positions of retired log generations."""
        keep_l = [int(g) for g in keep]
        with self._lock:
            self._db.execute(
                f"DELETE FROM wal_applied WHERE gen NOT IN ({','.join('?' * len(keep_l))})",
                keep_l,
            )

    def insert_rows(self, rows: Iterable[tuple[Any, ...]], *, bulk: bool = False) -> None:
        """Insert ``(rid, id, time, fp, chash, flags, metadata, text)`` tuples, one transaction.

        A duplicate row id or id raises :class:`sqlite3.IntegrityError` and inserts nothing.
        ``bulk=True`` (seeding): no syncs and a 1 GiB page cache during the transaction (the id
        index of tens of millions of rows then stays in memory), then a full checkpoint with
        syncs, so the rows are durable on return either way.
        """
        with self._lock:
            cur = self._db.cursor()
            if bulk and self.path is not None:
                cur.execute("PRAGMA synchronous=OFF")
                cur.execute("PRAGMA cache_size=-1048576")
            try:
                with self._transaction() as tx:
                    before = self._db.total_changes
                    self._insert_rows(tx, "INSERT", rows)
                    self._add_count(tx, self._db.total_changes - before)
            finally:
                if bulk and self.path is not None:
                    cur.execute("PRAGMA synchronous=NORMAL")
                    cur.execute("PRAGMA cache_size=-65536")
            if bulk:
                self.checkpoint()

    def delete_rowids(self, rowids: Sequence[int]) -> int:
        """Delete rows by row id in one transaction; returns how many existed."""
        with self._transaction() as cur:
            before = self._db.total_changes
            cur.executemany("DELETE FROM docs WHERE rid = ?", ((int(r),) for r in rowids))
            gone = self._db.total_changes - before
            self._add_count(cur, -gone)
        return gone

    def delete_from(self, rowid: int) -> int:
        """Delete every row with row id >= ``rowid``; returns how many."""
        with self._transaction() as cur:
            cur.execute("DELETE FROM docs WHERE rid >= ?", (int(rowid),))
            gone = int(cur.rowcount)
            self._add_count(cur, -gone)
        return gone

    def deleted_between(self, lo: int, hi: int) -> npt.NDArray[np.int64]:
        """Row ids deleted (by a ``DELETE`` record) in ``[lo, hi]`` (sorted int64)."""
        with self._rlock:
            cur = self._rdb.execute("SELECT rid FROM deleted WHERE rid BETWEEN ? AND ?", (lo, hi))
            return np.fromiter((r[0] for r in cur), dtype=np.int64)

    def forget_deleted(self, rowids: Sequence[int]) -> None:
        """Drop row ids from the ``deleted`` table (their rows left the segments)."""
        with self._lock:
            self._db.executemany("DELETE FROM deleted WHERE rid = ?", ((int(r),) for r in rowids))

    def lookup_ids(self, ids: Sequence[str]) -> dict[str, int]:
        """id -> row id for those ids that exist."""
        out: dict[str, int] = {}
        uniq = list(dict.fromkeys(ids))
        with self._rlock:
            for s in range(0, len(uniq), _CHUNK):
                chunk = uniq[s : s + _CHUNK]
                q = f"SELECT id, rid FROM docs WHERE id IN ({','.join('?' * len(chunk))})"
                out.update(self._rdb.execute(q, chunk).fetchall())
        return out

    def fetch(self, rowids: Iterable[int], *, with_text: bool) -> dict[int, Row]:
        """Rows by row id (missing = deleted or expired)."""
        uniq = list(dict.fromkeys(int(r) for r in rowids))
        cols = "rid, id, time, fp, chash, flags, metadata, " + ("text" if with_text else "NULL")
        out: dict[int, Row] = {}
        with self._rlock:
            for s in range(0, len(uniq), _CHUNK):
                chunk = uniq[s : s + _CHUNK]
                q = f"SELECT {cols} FROM docs WHERE rid IN ({','.join('?' * len(chunk))})"
                for row in self._rdb.execute(q, chunk):
                    out[row[0]] = Row(*row)
        return out

    def get(self, id: str) -> Row | None:
        with self._rlock:
            row = self._rdb.execute("SELECT * FROM docs WHERE id = ?", (id,)).fetchone()
        return Row(*row) if row else None

    def count(self) -> int:
        """Rows in ``docs`` (kept in ``doc_count``; one row read, not a scan)."""
        with self._rlock:
            return int(self._rdb.execute("SELECT n FROM doc_count WHERE k = 0").fetchone()[0])

    def checkpoint(self) -> None:
        """Make everything committed so far durable (full fsync of the database)."""
        if self.path is None:
            return
        with self._lock:
            busy, _, _ = self._db.execute("PRAGMA wal_checkpoint(FULL)").fetchone()
        if busy:
            from ..errors import StorageError

            raise StorageError(f"{self.path}: SQLite checkpoint could not complete (busy)")
