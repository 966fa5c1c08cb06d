"""Salvaging a damaged metadata database (``neardup store repair``, ``repair=True`` on open):
:func:`salvage` copies every row that can still be read into a new database, first through the
table's own B-tree by row-id range (a failing range split down to single row ids), then, for
rows a damaged interior page hides, by parsing the table's leaf pages directly
(:func:`scan_leaf_rows`, SQLite's record format read by hand); :func:`replace_database` swaps
the rebuilt file in and keeps the damaged one aside. docs/store.md, *SQLite integrity*.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import sqlite3
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .meta import DOC_COLUMNS, MetaDB

__all__ = ["replace_database", "salvage", "scan_leaf_rows"]

log = logging.getLogger("neardup.store")


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """SQLite's big-endian varint at ``pos``: (value, next position)."""
    v = 0
    for i in range(8):
        b = buf[pos + i]
        v = (v << 7) | (b & 0x7F)
        if b < 0x80:
            return v, pos + i + 1
    return (v << 8) | buf[pos + 8], pos + 9


def _record(payload: bytes) -> list[Any]:
    """Decode a SQLite record (header of serial types, then the values)."""
    hsize, pos = _varint(payload, 0)
    types = []
    while pos < hsize:
        t, pos = _varint(payload, pos)
        types.append(t)
    out: list[Any] = []
    body = hsize
    for t in types:
        if t == 0:
            out.append(None)
        elif 1 <= t <= 6:
            n = (1, 2, 3, 4, 6, 8)[t - 1]
            out.append(int.from_bytes(payload[body : body + n], "big", signed=True))
            body += n
        elif t == 7:
            out.append(struct.unpack(">d", payload[body : body + 8])[0])
            body += 8
        elif t in (8, 9):
            out.append(t - 8)
        elif t >= 12:
            n = (t - 12) // 2
            raw = payload[body : body + n]
            if len(raw) != n:
                raise ValueError("record runs past its payload")
            out.append(raw.decode("utf-8") if t % 2 else bytes(raw))
            body += n
        else:
            raise ValueError(f"reserved serial type {t}")
    return out


def scan_leaf_rows(path: Path) -> Iterator[tuple[Any, ...]]:
    """Every ``docs``-shaped row in the table leaf pages of a SQLite file, read page by page
    without the B-tree above them (what a damaged interior page hides from every query).

    Rows are recognised by their shape (9 columns: NULL row-id alias, text id, real time,
    16-byte fingerprint, 16-byte content hash, int flags, text-or-NULL metadata, text, blob
    (a compressed text) or NULL, int checksum).
    Pages on the free list and freed cells can still hold old rows: the caller keeps only row
    ids that the store's segments hold and that were not deleted.
    """
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size < 100:
            return
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        yield from _scan_pages(data)
    finally:
        data.close()


def _scan_pages(data: Any) -> Iterator[tuple[Any, ...]]:
    page = int.from_bytes(data[16:18], "big")
    page = 65536 if page == 1 else page
    reserved = data[20]
    if data[:16] != b"SQLite format 3\x00" or page < 512 or page & (page - 1) or reserved > 64:
        page, reserved = 4096, 0  # a damaged header: SQLite's default page size
    usable = page - reserved
    max_local = usable - 35
    min_local = (usable - 12) * 32 // 255 - 23
    npages = len(data) // page
    for no in range(1, npages + 1):
        base = (no - 1) * page
        hdr = base + (100 if no == 1 else 0)
        if data[hdr] != 0x0D:  # table b-tree leaf
            continue
        ncells = int.from_bytes(data[hdr + 3 : hdr + 5], "big")
        for c in range(ncells):
            try:
                cell = base + int.from_bytes(data[hdr + 8 + 2 * c : hdr + 10 + 2 * c], "big")
                size, pos = _varint(data, cell)
                rid, pos = _varint(data, pos)
                if size <= max_local:
                    payload = data[pos : pos + size]
                else:
                    k = min_local + (size - min_local) % (usable - 4)
                    local = k if k <= max_local else min_local
                    parts = [data[pos : pos + local]]
                    nxt = int.from_bytes(data[pos + local : pos + local + 4], "big")
                    got, hops = local, 0
                    while got < size and 0 < nxt <= npages and hops < npages:
                        o = (nxt - 1) * page
                        take = min(usable - 4, size - got)
                        parts.append(data[o + 4 : o + 4 + take])
                        got += take
                        nxt = int.from_bytes(data[o : o + 4], "big")
                        hops += 1
                    payload = b"".join(parts)
                    if len(payload) != size:
                        continue
                rec = _record(payload)
            except (ValueError, IndexError, UnicodeDecodeError, struct.error):
                continue
            if (
                len(rec) == DOC_COLUMNS
                and rec[0] is None
                and isinstance(rec[1], str)
                and isinstance(rec[2], (float, int))
                and isinstance(rec[3], bytes)
                and len(rec[3]) == 16
                and isinstance(rec[4], bytes)
                and isinstance(rec[5], int)
                and (rec[6] is None or isinstance(rec[6], str))
                and (rec[7] is None or isinstance(rec[7], (str, bytes)))
                and isinstance(rec[8], int)
            ):
                yield (rid, rec[1], float(rec[2]), rec[3], rec[4], rec[5], rec[6], rec[7], rec[8])


def salvage(
    src: Path,
    dst: Path,
    *,
    max_rowid: int,
    held: npt.NDArray[np.int64] | None = None,
) -> tuple[int, int]:
    """Copy every row of ``src`` that can still be read into a new database at ``dst``.

    Rows are read by row id range over the table's own B-tree (not its indexes, which a damaged
    page often belongs to); a range that fails is split in two until single row ids. A damaged
    *interior* page hides the leaves under it without an error, so the leaf pages are then
    scanned directly (:func:`scan_leaf_rows`): a row found there is kept when its row id is in
    ``held`` (sorted row ids the store's segments hold) and not in the ``deleted`` table; old
    rows on free pages are never brought back. ``wal_applied`` is not copied: every live log is
    re-applied from its start on the next open (idempotent), which restores the rows it holds.

    Returns (rows kept, row-id ranges that could not be read).
    """
    dst.unlink(missing_ok=True)
    old = sqlite3.connect(str(src), isolation_level=None)
    new = MetaDB(dst)
    kept = bad = 0
    try:
        # the texts' dictionary first, as stored (a damaged one stays damaged: the rows that
        # need it then fail verification instead of being read with another)
        with contextlib.suppress(sqlite3.Error):
            found_dict = old.execute("SELECT k, dict, csum FROM text_dict").fetchone()
            if found_dict is not None:
                with new._lock:
                    new._db.execute("INSERT INTO text_dict VALUES (?, ?, ?)", found_dict)
                new._use_stored_dict()
                new._train = False
        with contextlib.suppress(sqlite3.Error):
            (top,) = old.execute("SELECT max(rid) FROM docs").fetchone()
            if top is not None:
                max_rowid = max(max_rowid, int(top))
        stack = [(max(0, i), min(max_rowid + 1, i + 65536)) for i in range(0, max_rowid + 1, 65536)]
        stack.reverse()
        try:
            old.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.DatabaseError:  # no schema to read through: the leaf scan only
            stack = []
        failures = 0
        while stack:
            a, b = stack.pop()
            try:
                rows = old.execute(
                    "SELECT * FROM docs WHERE rid >= ? AND rid < ? ORDER BY rid", (a, b)
                ).fetchall()
            except sqlite3.DatabaseError:
                failures += 1
                if b - a > 1 and failures < 100_000:  # each bad page costs ~log2(range) reads
                    m = (a + b) // 2
                    stack += [(m, b), (a, m)]
                else:
                    bad += 1
                continue
            if rows:
                new.copy_stored_rows("INSERT OR REPLACE", rows)
                kept += len(rows)
        deleted: list[tuple[int]] = []
        with contextlib.suppress(sqlite3.Error):
            deleted = old.execute("SELECT rid FROM deleted").fetchall()
            with new._lock:
                new._db.executemany("INSERT OR IGNORE INTO deleted VALUES (?)", deleted)
        if held is not None and len(held):  # rows under damaged interior pages
            with new._lock:
                have = np.fromiter(
                    (r[0] for r in new._db.execute("SELECT rid FROM docs")), dtype=np.int64
                )
            skip = np.union1d(have, np.asarray([d[0] for d in deleted], dtype=np.int64))
            found: dict[int, tuple[Any, ...]] = {}
            for row in scan_leaf_rows(src):
                found[int(row[0])] = row  # a later page wins; all of them are checked below
            if found:
                rids = np.fromiter(found, dtype=np.int64, count=len(found))
                ok = np.isin(rids, held) & ~np.isin(rids, skip)
                rows = [found[r] for r in rids[ok].tolist()]
                if rows:
                    new.copy_stored_rows("INSERT OR IGNORE", rows)
                    kept += len(rows)
                    log.warning(
                        "%s: %d rows under damaged B-tree pages recovered from leaf pages",
                        src,
                        len(rows),
                    )
        new.checkpoint()
    finally:
        old.close()
        new.close()
    return kept, bad


def replace_database(path: Path, rebuilt: Path) -> Path:
    """Move the damaged database (and its -wal / -shm files) aside as ``<name>.damaged-<time>``
    and the rebuilt one into its place; returns where the damaged one went."""
    aside = path.with_name(f"{path.name}.damaged-{int(time.time())}")
    for suffix in ("", "-wal", "-shm"):
        f = Path(str(path) + suffix)
        if f.exists():
            os.replace(f, Path(str(aside) + suffix))
    for suffix in ("-wal", "-shm"):
        Path(str(rebuilt) + suffix).unlink(missing_ok=True)
    os.replace(rebuilt, path)
    return aside
