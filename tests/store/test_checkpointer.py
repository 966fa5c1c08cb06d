"""SQLite's WAL is checkpointed on a thread of its own: no write's commit copies the WAL, the WAL
file stays bounded while writes go on, and a store killed meanwhile reopens with every row."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from neardup.store import checkpointer as ckpt_mod
from neardup.store.checkpointer import Checkpointer
from neardup.store.meta import MetaDB

ROW_TEXT = "word " * 200  # ~1 KB a row: a few rows a page


def _rows(lo: int, n: int) -> list[tuple]:
    return [
        (r, f"d{r}", float(r), 0, b"\0" * 16, 0, None, f"{r} {ROW_TEXT}") for r in range(lo, lo + n)
    ]


def _frames(path: Path) -> int:  # a 32-byte header, then 24 bytes before each 4 KiB page
    return max(0, _wal(path) - 32) // (24 + 4096)


def _wal(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def test_commits_leave_the_copy_to_the_checkpointer(tmp_path):
    """With the background thread held off, the WAL only grows: no commit checkpoints it (with
    SQLite's automatic checkpoint it would restart at 1,000 pages); one passive checkpoint then
    copies every frame."""
    path = tmp_path / "meta.sqlite3"
    db = MetaDB(path)
    assert db._checkpointer is not None
    db._checkpointer.close()  # the thread stops; its connection is closed
    db._checkpointer = None
    try:
        for i in range(40):
            db.insert_rows(_rows(i * 100, 100))
        assert _wal(path) > 1_200 * 4096  # past SQLite's 1,000-page automatic checkpoint
        frames = _frames(path)
        c = Checkpointer(path, every_s=3600)
        try:
            busy, in_wal, copied = c.checkpoint_once()
            assert (busy, in_wal == copied) == (0, True) and in_wal == frames
            # the database file now holds the rows: a reader of the main file alone sees them
            assert db.count() == 4_000
        finally:
            c.close()
    finally:
        db.close()


def _write_rounds(db: MetaDB, rounds: int = 300, per_round: int = 50) -> None:
    for i in range(rounds):
        db.insert_rows(_rows(i * per_round, per_round))
        db.delete_rowids(range(i * per_round, i * per_round + per_round // 2))
        if i % 10 == 9:
            time.sleep(0.06)


def test_wal_stays_bounded_under_writes(tmp_path, monkeypatch):
    """Writes go on while the checkpointer runs: the WAL restarts from its beginning after each
    checkpoint, so its file stays a fraction of what the same writes leave with the thread
    held off."""
    held = MetaDB(tmp_path / "held.sqlite3")
    assert held._checkpointer is not None
    held._checkpointer.close()
    held._checkpointer = None
    try:
        _write_rounds(held)
        unbounded = _frames(tmp_path / "held.sqlite3")
    finally:
        held.close()
    monkeypatch.setattr(ckpt_mod, "EVERY_S", 0.05)
    path = tmp_path / "meta.sqlite3"
    db = MetaDB(path)
    c = db._checkpointer
    assert c is not None and c.every_s == 0.05
    try:
        _write_rounds(db)
        assert db.count() == 300 * 25
        assert c.runs >= 5 and c.frames > 0
        assert unbounded > 2_000 and _frames(path) < unbounded / 4, (_frames(path), unbounded)
    finally:
        db.close()
    assert not path.with_name(path.name + "-wal").exists()  # the last close checkpoints it


def test_full_checkpoint_waits_for_a_passive_one(tmp_path):
    """The writer's full checkpoint (before a log generation is retired) completes while the
    background thread checkpoints too."""
    path = tmp_path / "meta.sqlite3"
    db = MetaDB(path)
    stop = threading.Event()

    def hammer() -> None:
        assert db._checkpointer is not None
        while not stop.is_set():
            db._checkpointer.checkpoint_once()

    t = threading.Thread(target=hammer)
    t.start()
    try:
        for i in range(20):
            db.insert_rows(_rows(i * 50, 50))
            db.checkpoint()  # raises StorageError if it could not complete
    finally:
        stop.set()
        t.join()
        db.close()


def test_a_failed_checkpoint_is_logged_once_and_retried(tmp_path, caplog):
    path = tmp_path / "meta.sqlite3"
    sqlite3.connect(path).execute("PRAGMA journal_mode=WAL").close()
    c = Checkpointer(path, every_s=3600)
    try:
        real = c._conn
        c._conn = sqlite3.connect(":memory:")
        c._conn.close()  # every statement now raises ProgrammingError (a sqlite3.Error)
        assert c.checkpoint_once() == (1, -1, -1)
        assert c.checkpoint_once() == (1, -1, -1)
        assert sum("background SQLite checkpoint failed" in r.message for r in caplog.records) == 1
        c._conn = real
        assert c.checkpoint_once()[0] == 0
    finally:
        c.close()


KILLED_WRITER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    from neardup.store import checkpointer
    checkpointer.EVERY_S = 0.01
    from neardup.store.meta import MetaDB
    text = "word " * 200
    db = MetaDB(__import__("pathlib").Path({path!r}))
    r = 0
    while True:
        db.insert_rows([(i, f"d{{i}}", 0.0, 0, bytes(16), 0, None, text) for i in range(r, r + 20)])
        r += 20
        print(r, flush=True)
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_killed_during_checkpoints_reopens_with_every_committed_row(tmp_path):
    """A real process writes with checkpoints every 10 ms and is SIGKILLed; the database opens
    intact and holds every row it reported committed (SQLite's WAL recovery, with its own
    checkpoints running beside the writes)."""
    path = tmp_path / "meta.sqlite3"
    root = str(Path(__file__).resolve().parents[2])
    for round_ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", KILLED_WRITER.format(root=root, path=str(path))],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        acked = 0
        deadline = time.monotonic() + 60
        while acked < 2_000 * (round_ + 1) and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acked = int(line)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert acked >= 2_000
        db = MetaDB(path)
        try:
            assert db.quick_check() == []
            n = db.count()
            assert n >= acked
            assert n == db._db.execute("SELECT count(*) FROM docs").fetchone()[0]
            db.delete_from(0)  # the next round starts from row 0 again
        finally:
            db.close()
