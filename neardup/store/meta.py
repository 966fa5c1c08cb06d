"""Document metadata in SQLite (WAL mode): string id <-> int64 row id, time, fingerprint, text.

The write-ahead log is the durability source, so SQLite runs with ``synchronous=NORMAL`` and is
re-derived from the log on open: replaying ``ADD`` as ``INSERT OR REPLACE`` and ``DELETE`` as
``DELETE`` is idempotent. Before a log generation is retired (after a flush to segments) the
database is checkpointed with a full fsync.

String ids live only here (50 M ids never sit in Python dicts); the index holds row ids.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
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
"""
_CHUNK = 900  # stay under SQLite's host-parameter limit


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
        self._db.execute("PRAGMA cache_size=-65536")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def apply(self, records: Iterable[AddRecord | DeleteRecord]) -> None:
        """Apply log records in order, in one transaction (idempotent)."""
        with self._lock:
            cur = self._db.cursor()
            cur.execute("BEGIN")
            try:
                adds: list[tuple[Any, ...]] = []
                for r in records:
                    if isinstance(r, AddRecord):
                        adds.append(_add_params(r))
                        continue
                    if adds:
                        cur.executemany(
                            "INSERT OR REPLACE INTO docs VALUES (?,?,?,?,?,?,?,?)", adds
                        )
                        adds = []
                    cur.execute("DELETE FROM docs WHERE rid = ?", (r.rowid,))
                if adds:
                    cur.executemany("INSERT OR REPLACE INTO docs VALUES (?,?,?,?,?,?,?,?)", adds)
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise

    def insert_rows(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """Bulk insert ``(rid, id, time, fp, chash, flags, metadata, text)`` tuples, one transaction."""
        with self._lock:
            cur = self._db.cursor()
            cur.execute("BEGIN")
            try:
                cur.executemany("INSERT INTO docs VALUES (?,?,?,?,?,?,?,?)", rows)
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise

    def delete_rowids(self, rowids: Sequence[int]) -> int:
        """Delete rows by row id in one transaction; returns how many existed."""
        with self._lock:
            cur = self._db.cursor()
            cur.execute("BEGIN")
            try:
                before = self._db.total_changes
                cur.executemany("DELETE FROM docs WHERE rid = ?", ((int(r),) for r in rowids))
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            return self._db.total_changes - before

    def delete_from(self, rowid: int) -> int:
        """Delete every row with row id >= ``rowid``; returns how many."""
        with self._lock:
            cur = self._db.execute("DELETE FROM docs WHERE rid >= ?", (int(rowid),))
            return int(cur.rowcount)

    def existing_rowids(self, lo: int, hi: int) -> npt.NDArray[np.int64]:
        """Row ids present in ``[lo, hi]`` (sorted int64)."""
        with self._lock:
            cur = self._db.execute("SELECT rid FROM docs WHERE rid BETWEEN ? AND ?", (lo, hi))
            return np.fromiter((r[0] for r in cur), dtype=np.int64)

    def lookup_ids(self, ids: Sequence[str]) -> dict[str, int]:
        """id -> row id for those ids that exist."""
        out: dict[str, int] = {}
        uniq = list(dict.fromkeys(ids))
        with self._lock:
            for s in range(0, len(uniq), _CHUNK):
                chunk = uniq[s : s + _CHUNK]
                q = f"SELECT id, rid FROM docs WHERE id IN ({','.join('?' * len(chunk))})"
                out.update(self._db.execute(q, chunk).fetchall())
        return out

    def fetch(self, rowids: Iterable[int], *, with_text: bool) -> dict[int, Row]:
        """Rows by row id (missing = deleted or expired)."""
        uniq = list(dict.fromkeys(int(r) for r in rowids))
        cols = "rid, id, time, fp, chash, flags, metadata, " + ("text" if with_text else "NULL")
        out: dict[int, Row] = {}
        with self._lock:
            for s in range(0, len(uniq), _CHUNK):
                chunk = uniq[s : s + _CHUNK]
                q = f"SELECT {cols} FROM docs WHERE rid IN ({','.join('?' * len(chunk))})"
                for row in self._db.execute(q, chunk):
                    out[row[0]] = Row(*row)
        return out

    def get(self, id: str) -> Row | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM docs WHERE id = ?", (id,)).fetchone()
        return Row(*row) if row else None

    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM docs").fetchone()[0])

    def max_rowid(self) -> int:
        with self._lock:
            v = self._db.execute("SELECT max(rid) FROM docs").fetchone()[0]
        return -1 if v is None else int(v)

    def rowids_before(self, cutoff: float, limit: int = 100_000) -> list[int]:
        with self._lock:
            return [
                r[0]
                for r in self._db.execute(
                    "SELECT rid FROM docs WHERE time < ? LIMIT ?", (cutoff, limit)
                )
            ]

    def checkpoint(self) -> None:
        """Make everything committed so far durable (full fsync of the database)."""
        if self.path is None:
            return
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(FULL)")
