"""Damaged rows of a store's metadata: find them (:func:`verify_store`) and salvage the store
(:func:`repair_store`); ``neardup store verify`` / ``neardup store repair`` are their shells.

Every row of ``meta.sqlite3`` carries a checksum (:func:`neardup.store.meta.row_checksum`).
:func:`verify_store` reads every row as stored bytes and reports those whose checksum does not
match or whose strings are not UTF-8 (and any part of the database SQLite cannot read). It only
reads (SQLite's read-only mode, no lock): it can run beside a serving ``neardup serve``.

:func:`repair_store` needs the store closed (it takes the directory's lock). For each damaged
row:

1. **restored from the log** when a live write-ahead log (one not yet retired by a flush)
   still holds the row's ``ADD`` record, whose own CRC vouches for it: the row is rewritten
   from the record, with a fresh checksum;
2. else **quarantined**: the row's stored bytes (every column, and the problem found) are
   copied into ``quarantine-<UTC time>.sqlite3`` in the store's directory (table
   ``quarantine``), fsynced, and only then is the row deleted from ``docs``, its row id added
   to ``deleted`` (so a compaction drops its fingerprint from the segments and a rebuild of the
   database never brings it back) and the kept count lowered, in one transaction. The document
   is then absent: ``GET`` answers 404 and checks no longer see it; the report lists its id so
   that it can be sent again.

Nothing else is changed. Damage SQLite itself reports (a damaged page, ``PRAGMA quick_check``)
is not repaired here: ``neardup serve --repair`` rebuilds the database (docs/store.md).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._durable import fsync_dir
from ..errors import CorruptFileError, NotFoundError, StorageError, UnsupportedVersionError
from .layout import DataDir
from .meta import _RAW_COLUMNS, SCHEMA_VERSION, row_checksum, row_problem
from .textcodec import load_codec
from .wal import AddRecord, read_wal

__all__ = [
    "DamagedRow",
    "RepairReport",
    "VerifyReport",
    "find_stores",
    "repair_store",
    "verify_store",
]

#: rows read per query while verifying (a bounded read transaction each)
_PAGE = 2000


@dataclass
class DamagedRow:
    """One row that fails its checksum, and what ``repair`` did with it."""

    rowid: int
    id: str  # decoded with replacement characters where the bytes are not UTF-8
    problem: str
    action: str = ""  # "restored from the log" or "quarantined" (repair only)

    def to_dict(self) -> dict[str, Any]:
        out = {"rowid": self.rowid, "id": self.id, "problem": self.problem}
        if self.action:
            out["action"] = self.action
        return out


@dataclass
class VerifyReport:
    """What :func:`verify_store` found in one store."""

    path: Path
    rows: int = 0
    damaged: list[DamagedRow] = field(default_factory=list)
    #: what SQLite could not read (a damaged page or index): ``neardup serve --repair``
    unreadable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.damaged and not self.unreadable

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "rows": self.rows,
            "damaged": [d.to_dict() for d in self.damaged],
            "unreadable": self.unreadable,
        }


@dataclass
class RepairReport(VerifyReport):
    """What :func:`repair_store` did in one store."""

    restored: int = 0
    quarantined: int = 0
    quarantine_file: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out.update(
            restored=self.restored,
            quarantined=self.quarantined,
            quarantine_file=None if self.quarantine_file is None else str(self.quarantine_file),
        )
        return out


def find_stores(data: str | os.PathLike[str]) -> list[tuple[str, Path]]:
    """``(name, store directory)`` of every store under ``data``: the namespaces of a
    ``neardup serve --data`` directory (``DATA/namespaces/<name>/``), or ``data`` itself when it
    is one store's directory.

    Raises :class:`NotFoundError` when ``data`` holds no store.
    """
    root = Path(data)
    if (root / "meta.sqlite3").is_file():
        return [(root.name, root)]
    ns = root / "namespaces"
    if ns.is_dir():
        stores = [(p.name, p) for p in sorted(ns.iterdir()) if (p / "meta.sqlite3").is_file()]
        if stores:
            return stores
    raise NotFoundError(  # (exit 4, as explain --store and dedup --against say it)
        f"{root}: no store there (neither a meta.sqlite3 nor namespaces/<name>/meta.sqlite3); "
        "pass the --data directory of neardup serve, or one store's directory"
    )


def _open_read_only(meta: Path) -> sqlite3.Connection:
    try:
        db = sqlite3.connect(f"file:{meta}?mode=ro", uri=True, isolation_level=None)
        (version,) = db.execute("PRAGMA user_version").fetchone()
    except sqlite3.DatabaseError as exc:
        raise CorruptFileError(f"{meta}: cannot read the metadata database ({exc})") from exc
    if version != SCHEMA_VERSION:
        db.close()
        raise UnsupportedVersionError(
            f"{meta}: metadata schema version {version}; this build reads version {SCHEMA_VERSION}"
        )
    return db


def _scan(db: sqlite3.Connection, report: VerifyReport) -> Iterator[tuple[Any, ...]]:
    """Every row as stored bytes, a page of row ids at a time; what SQLite cannot read is
    noted in ``report.unreadable``."""
    after = -(1 << 63)
    while True:
        try:
            page = db.execute(
                f"SELECT {_RAW_COLUMNS} FROM docs WHERE rid > ? ORDER BY rid LIMIT ?",
                (after, _PAGE),
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            report.unreadable.append(
                f"rows after row id {after}: {exc} (a damaged database page: stop the server "
                "and start it with --repair to rebuild the database)"
            )
            return
        if not page:
            return
        yield from page
        after = page[-1][0]


def verify_store(path: str | os.PathLike[str]) -> VerifyReport:
    """Check every row of the store in ``path`` against its checksum (read-only; the store
    may be open meanwhile)."""
    root = Path(path)
    report = VerifyReport(root)
    db = _open_read_only(root / "meta.sqlite3")
    try:
        codec, codec_problem = load_codec(db)
        for raw in _scan(db, report):
            report.rows += 1
            problem = row_problem(raw, codec=codec, codec_problem=codec_problem)
            if problem is not None:
                report.damaged.append(
                    DamagedRow(int(raw[0]), (raw[1] or b"").decode("utf-8", "replace"), problem)
                )
    finally:
        db.close()
    return report


def _logged_rows(d: DataDir, wanted: set[int]) -> dict[int, AddRecord]:
    """The ``ADD`` records of ``wanted`` row ids in the live logs (the latest of each)."""
    manifest = d.read_manifest() or {}
    gens = [int(g) for g in manifest.get("wal_generations", [manifest.get("wal_generation", 1)])]
    found: dict[int, AddRecord] = {}
    for g in gens:
        p = d.wal_path(g)
        if not p.exists():
            continue
        for r in read_wal(p, truncate=False).records:
            if isinstance(r, AddRecord) and r.rowid in wanted:
                found[r.rowid] = r
    return found


def repair_store(path: str | os.PathLike[str]) -> RepairReport:
    """Restore (from the live logs) or quarantine every damaged row of the store in ``path``
    (module docstring); the store must be closed.

    Raises
    ------
    IndexStateError
        The store is open (by ``neardup serve`` or a :class:`~neardup.online.Deduplicator`).
    StorageError
        The quarantine file or the database cannot be written (nothing was deleted).
    """
    root = Path(path)
    d = DataDir(root)
    d.lock()
    try:
        found = verify_store(root)
        report = RepairReport(
            root, rows=found.rows, damaged=found.damaged, unreadable=found.unreadable
        )
        if not report.damaged:
            return report
        logged = _logged_rows(d, {r.rowid for r in report.damaged})
        meta = d.meta_path
        db = sqlite3.connect(str(meta), isolation_level=None)
        try:
            db.execute("PRAGMA busy_timeout=30000")
            lost = [r for r in report.damaged if r.rowid not in logged]
            raw_rows = {}
            if lost:
                q = f"SELECT {_RAW_COLUMNS} FROM docs WHERE rid IN ({','.join('?' * len(lost))})"
                raw_rows = {row[0]: row for row in db.execute(q, [r.rowid for r in lost])}
                report.quarantine_file = _write_quarantine(root, lost, raw_rows)
            db.execute("BEGIN")
            try:
                for r in report.damaged:
                    rec = logged.get(r.rowid)
                    if rec is not None:
                        fp = rec.fp_hi.to_bytes(8, "little") + rec.fp_lo.to_bytes(8, "little")
                        row = (rec.rowid, rec.id, rec.time, fp, rec.chash, rec.flags)
                        db.execute(
                            "INSERT OR REPLACE INTO docs VALUES (?,?,?,?,?,?,?,?,?)",
                            (
                                *row,
                                rec.metadata,
                                rec.text,
                                row_checksum(*row, rec.metadata, rec.text),
                            ),
                        )
                        r.action = "restored from the log"
                        report.restored += 1
                    else:
                        gone = db.execute("DELETE FROM docs WHERE rid = ?", (r.rowid,)).rowcount
                        db.execute("INSERT OR IGNORE INTO deleted VALUES (?)", (r.rowid,))
                        if gone:
                            db.execute("UPDATE doc_count SET n = n - ? WHERE k = 0", (gone,))
                        r.action = "quarantined"
                        report.quarantined += 1
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("PRAGMA wal_checkpoint(FULL)")
        except sqlite3.Error as exc:
            raise StorageError(f"{meta}: the repair could not be written ({exc})") from exc
        finally:
            db.close()
        return report
    finally:
        d.unlock()


def _write_quarantine(root: Path, rows: list[DamagedRow], raw: dict[int, tuple[Any, ...]]) -> Path:
    """Copy the stored bytes of ``rows`` into a new quarantine database (fsynced) and return
    its path."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = root / f"quarantine-{stamp}.sqlite3"
    n = 1
    while path.exists():
        n += 1
        path = root / f"quarantine-{stamp}-{n}.sqlite3"
    try:
        q = sqlite3.connect(str(path), isolation_level=None)
        try:
            q.execute(
                "CREATE TABLE quarantine (rid INTEGER PRIMARY KEY, id BLOB, time REAL, fp BLOB, "
                "chash BLOB, flags INTEGER, metadata BLOB, text BLOB, csum INTEGER, problem TEXT, "
                "quarantined_at REAL)"
            )
            now = time.time()
            q.execute("BEGIN")
            for r in rows:
                values = raw.get(r.rowid)
                if values is not None:
                    q.execute(
                        "INSERT INTO quarantine VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                        (*values, r.problem, now),
                    )
            q.execute("COMMIT")
        finally:
            q.close()
        with open(path, "rb") as f:
            os.fsync(f.fileno())
        fsync_dir(root)
    except (OSError, sqlite3.Error) as exc:
        raise StorageError(
            f"{path}: cannot write the quarantine file ({exc}); nothing was deleted"
        ) from exc
    return path
