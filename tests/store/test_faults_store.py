"""Fault injection against the store (issue 21): each case that lost acknowledged data or
answered with a raw error replays here, and the test checks that nothing acknowledged is lost and
that the right error (and HTTP status / exit code) comes back.

Cases: a retention or partition width other than the stored one, times the store cannot keep
(1e300, 0 under a retention, far future), a damaged last log record that SQLite had applied, a
full disk at start (a real small tmpfs when running as root, else ENOSPC injected), a damaged
SQLite page, deeply nested metadata, integers beyond 64 bits in metadata.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from doubles import SimpleFingerprinter, as_after_a_reboot

from neardup.errors import (
    ConfigError,
    CorruptFileError,
    InputError,
    NotFoundError,
    StorageError,
    UnsupportedVersionError,
    exit_code_for,
    http_status_for,
)
from neardup.online.deduplicator import Deduplicator
from neardup.rules.decision import Decision
from neardup.store.layout import read_json_file, write_json_file
from neardup.store.wal import iter_frames

HOUR = 3600.0
NOW = 1_790_000_000.0


class Clock:
    def __init__(self, t: float = NOW) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _dd(path: Path | None, **kw: object) -> Deduplicator:
    kw.setdefault("verify", False)
    kw.setdefault("fingerprinter", SimpleFingerprinter())
    return Deduplicator.open(path, **kw)  # type: ignore[arg-type]


def _texts(n: int, seed: int = 0, words: int = 30) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(f"w{x}" for x in rng.integers(0, 1_000_000, words)) for _ in range(n)]


def _docs(n: int, prefix: str = "d", seed: int = 0, **extra: object) -> list[dict[str, object]]:
    return [{"id": f"{prefix}{i}", "text": t, **extra} for i, t in enumerate(_texts(n, seed))]


def _abandon(d: Deduplicator) -> None:
    """Leave the store as a killed process would (log not flushed, SQLite applied)."""
    d.store.sync_meta()
    d._writer._closed = True
    d.store._state.wal.close()
    d.store._state.meta.close()
    d.store._state.dir.unlock()


# ------------------------------------------------------------------ 1. retention / partitions
def test_reopening_with_retention_does_not_drop_a_store_written_without(tmp_path: Path) -> None:
    clock = Clock()
    with _dd(tmp_path, clock=clock) as d:  # no retention: 1-day partitions
        d.add(_docs(300))
    clock.t += 600  # minutes later
    with pytest.raises(ConfigError, match="allow_retention_change") as exc:
        _dd(tmp_path, clock=clock, retention="48h")
    assert http_status_for(exc.value) == 422 and exit_code_for(exc.value) == 2
    assert "--allow-retention-change of neardup serve and neardup store load" in str(exc.value)
    with _dd(tmp_path, clock=clock) as d:
        assert len(d) == 300
    # explicit change: applied, logged, stored; the documents are minutes old and stay
    with _dd(tmp_path, clock=clock, retention="48h", allow_retention_change=True) as d:
        assert len(d) == 300 and d.retention == 48 * HOUR
        assert d.partition_seconds == 86400.0  # the width the data was written with
    with _dd(tmp_path, clock=clock) as d:
        assert d.retention == 48 * HOUR and len(d) == 300


def test_a_shorter_retention_on_reopen_is_refused_and_the_stored_one_used(tmp_path: Path) -> None:
    clock = Clock()
    with _dd(tmp_path, clock=clock, retention="48h") as d:
        d.add(_docs(1000))
    clock.t += 30 * HOUR
    with pytest.raises(ConfigError, match="retention"):
        _dd(tmp_path, clock=clock, retention="24h")
    with _dd(tmp_path, clock=clock) as d:  # retention omitted: the stored 48 h
        assert d.retention == 48 * HOUR and len(d) == 1000
        assert d.get("d999")["id"] == "d999"
    with _dd(tmp_path, clock=clock, retention="48h") as d:  # the same value: fine
        assert len(d) == 1000


def test_partition_width_is_stored_and_another_is_refused(tmp_path: Path) -> None:
    with _dd(tmp_path, clock=Clock(), partition_seconds=HOUR) as d:
        d.add(_docs(10))
    cfg = read_json_file(tmp_path / "config.json")
    assert cfg["store"] == {
        "version": 1,
        "partition_seconds": HOUR,
        "partition_origin": 0.0,
        "retention": None,
        "compress_tables": False,
        "table_block_bytes": 256,
    }
    with pytest.raises(ConfigError, match="partition_seconds=3600"):
        _dd(tmp_path, clock=Clock(), partition_seconds=2 * HOUR)
    with _dd(tmp_path, clock=Clock(), retention="100h", allow_retention_change=True) as d:
        assert d.partition_seconds == HOUR and len(d) == 10


def test_a_config_without_the_stored_width_is_refused_and_nothing_dropped(tmp_path: Path) -> None:
    """Issue 21's log line 'retention: dropped 1 segments (2001 rows)' came from a store whose
    config.json had no "store" section, reopened with another width. Such a config (an
    earlier build's) is refused, naming the file; and a width that does not fit the segments
    is refused too: nothing is dropped either way."""
    clock = Clock()
    with _dd(tmp_path, clock=clock) as d:
        d.add(_docs(400))
        d.flush()
    cfg = tmp_path / "config.json"
    body = read_json_file(cfg)
    without = {k: v for k, v in body.items() if k != "store"}
    write_json_file(cfg, without)
    clock.t += 300
    with pytest.raises(UnsupportedVersionError, match=r"config\.json: no store settings"):
        _dd(tmp_path, clock=clock, retention="48h")
    body["store"]["partition_seconds"] = 6 * HOUR  # a width the segment does not fit
    write_json_file(cfg, body)
    with pytest.raises(ConfigError, match="another partition width"):
        _dd(tmp_path, clock=clock)
    body["store"]["partition_seconds"] = 86400.0
    write_json_file(cfg, body)
    with _dd(tmp_path, clock=clock, retention="48h", allow_retention_change=True) as d:
        assert len(d) == 400 and d.stats()["dropped_partitions"] == 0


def test_set_retention_is_explicit_stored_and_applied(tmp_path: Path, caplog) -> None:
    clock = Clock()
    with _dd(tmp_path, clock=clock, partition_seconds=HOUR) as d:
        d.add(_docs(5, "old"))
        d.flush()
        clock.t += 10 * HOUR
        d.add(_docs(5, "new", seed=1))
        d.flush()
        with caplog.at_level(logging.WARNING, logger="neardup.store"):
            d.set_retention("4h")
        assert "retention changed" in caplog.text
        d.flush()  # the writer's housekeeping runs retention
        assert "old0" not in d and "new0" in d and len(d) == 5
    with _dd(tmp_path, clock=clock) as d:
        assert d.retention == 4 * HOUR and len(d) == 5


# ------------------------------------------------------------------ 4. times the store keeps
@pytest.mark.parametrize(
    "t,needle",
    [
        (1e300, "in the future"),
        (NOW + 2 * 86400, "in the future"),
        (0, "older than the retention window"),
        (NOW - 49 * HOUR, "older than the retention window"),
        (-1.0, ">= 0"),
    ],
)
def test_times_outside_the_kept_window_are_refused(tmp_path: Path, t: float, needle: str) -> None:
    with _dd(tmp_path, clock=Clock(), retention="48h") as d:
        with pytest.raises(InputError, match=needle) as exc:
            d.check_and_add({"id": "x", "text": "some text here", "time": t})
        assert http_status_for(exc.value) == 422 and "documents[0].time" in str(exc.value)
        with pytest.raises(InputError, match="times\\["):
            d.bulk_load(["b"], np.array([1], np.uint64), np.array([t]))
        assert "x" not in d and len(d) == 0


def test_what_is_acknowledged_is_what_a_restart_shows(tmp_path: Path) -> None:
    clock = Clock()
    times = [NOW - 47 * HOUR, NOW - HOUR, NOW, NOW + 3600, NOW + 86000]
    docs = [
        {"id": f"t{i}", "text": t, "time": when}
        for i, (t, when) in enumerate(zip(_texts(5), times, strict=True))
    ]
    with _dd(tmp_path, clock=clock, retention="48h") as d:
        assert all(r.added for r in d.check_and_add(docs))
        d.flush()
    with _dd(tmp_path, clock=clock) as d:
        assert len(d) == 5 and all(d.get(f"t{i}")["time"] == times[i] for i in range(5))
    with _dd(tmp_path, clock=clock, retention="48h") as d:  # also with no time passed: no drop
        assert len(d) == 5
    with _dd(None, clock=clock) as d:  # without retention, old times are fine
        assert d.add({"id": "a", "text": "x y z", "time": 0}).added


# ------------------------------------------------------------------ 5. damaged acknowledged log
def _damage_last_record(path: Path) -> None:
    wal = next(path.glob("wal-*.log"))
    data = bytearray(wal.read_bytes())
    start, end = list(iter_frames(bytes(data)))[-1]
    data[(start + end) // 2] ^= 0x10
    wal.write_bytes(bytes(data))


def test_damaged_last_record_that_sqlite_applied_is_restored(tmp_path: Path, caplog) -> None:
    d = _dd(tmp_path)
    for k in range(0, 2000, 100):
        d.add(_docs(100, f"g{k}-", seed=k))
    assert len(d) == 2000
    _abandon(d)
    _damage_last_record(tmp_path)
    with caplog.at_level(logging.WARNING, logger="neardup.store"), _dd(tmp_path) as d2:
        assert len(d2) == 2000 and "g1900-99" in d2
        assert d2.check({"id": "q", "text": _texts(100, 1900)[99]}).duplicate
        assert d2.store._state.restored_rows == 1 and d2.stats()["wal_truncated_bytes"] == 0
    assert "restored from SQLite" in caplog.text and "torn tail of" not in caplog.text
    with _dd(tmp_path) as d3:
        assert len(d3) == 2000


def test_torn_tail_that_sqlite_never_applied_is_still_truncated(tmp_path: Path, caplog) -> None:
    d = _dd(tmp_path)
    d.add(_docs(50))
    _abandon(d)
    wal = next(tmp_path.glob("wal-*.log"))
    end = list(iter_frames(wal.read_bytes()))[-1][1]
    with open(wal, "r+b") as f:  # the writer died half-way through appending a group
        f.seek(end)
        f.write(b"\x40\x00\x00\x00\x12\x34\x56\x78partial")
    with caplog.at_level(logging.WARNING, logger="neardup.store"), _dd(tmp_path) as d2:
        assert len(d2) == 50 and d2.stats()["wal_truncated_bytes"] > 0
    assert "torn tail" in caplog.text and "restored" not in caplog.text


# ------------------------------------------------------------------ 6. full disk at start
@contextlib.contextmanager
def _small_disk(tmp_path: Path, size: str = "32m") -> Iterator[Path]:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a real full disk needs a tmpfs mount (root); ENOSPC is injected elsewhere")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)])
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(mnt: Path) -> Path:
    filler = mnt / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\xff" * 4096)
    finally:
        os.close(fd)
    return filler


def test_start_on_a_full_disk_fails_cleanly_and_consumes_nothing(tmp_path: Path) -> None:
    with _small_disk(tmp_path) as mnt:
        store = mnt / "store"
        d = _dd(store)
        d.add(_docs(200))
        with sqlite3.connect(str(store / "meta.sqlite3")):
            pass
        _abandon(d)
        # the applier had not applied the log yet: the start must write to SQLite
        db = sqlite3.connect(str(store / "meta.sqlite3"))
        db.execute("UPDATE wal_applied SET offset = 0")
        db.execute("DELETE FROM docs")
        db.execute("UPDATE doc_count SET n = 0")
        db.commit()
        db.close()
        filler = _fill(mnt)
        names = sorted(p.name for p in store.iterdir())
        free = []
        for _ in range(3):
            with pytest.raises(StorageError) as exc:
                _dd(store)
            msg = str(exc.value)
            assert "disk is full" in msg and "\n" not in msg, msg
            assert "cannot rollback" not in msg
            assert http_status_for(exc.value) == 503 and exit_code_for(exc.value) == 7
            free.append(shutil.disk_usage(mnt).free)
            assert sorted(p.name for p in store.iterdir()) == names
        assert free[1] >= free[0] and free[2] >= free[0], free
        # a new namespace on the full disk: 503 (StorageError), nothing left behind
        with pytest.raises(StorageError):
            _dd(mnt / "fresh")
        assert not (mnt / "fresh").exists()
        filler.unlink()
        with _dd(store) as d2:
            assert len(d2) == 200 and "d199" in d2


def test_sqlite_full_error_is_not_hidden_by_a_failed_rollback(tmp_path: Path, monkeypatch) -> None:
    """Without a small disk: SQLite's own "database or disk is full" (it rolls the transaction
    back itself) must come out as StorageError, not as "cannot rollback"."""
    from neardup.store import meta as meta_mod

    db = meta_mod.MetaDB(tmp_path / "m.sqlite3")
    calls = []

    class FullCursor:
        def __init__(self, real: sqlite3.Cursor) -> None:
            self.real = real

        def execute(self, sql: str, *a: object) -> object:
            if sql == "COMMIT":
                calls.append(sql)
                self.real.execute("ROLLBACK")  # what SQLite does on SQLITE_FULL
                err = sqlite3.OperationalError("database or disk is full")
                err.sqlite_errorcode = 13  # type: ignore[attr-defined]
                raise err
            return self.real.execute(sql, *a)

        def __getattr__(self, name: str) -> object:
            return getattr(self.real, name)

    real_db = db._db

    class Conn:
        def cursor(self) -> FullCursor:
            return FullCursor(real_db.cursor())

        def __getattr__(self, name: str) -> object:
            return getattr(real_db, name)

    monkeypatch.setattr(db, "_db", Conn())
    with pytest.raises(StorageError, match="the disk is full") as exc:
        db.delete_from(0)
    assert calls and "cannot rollback" not in str(exc.value)
    assert isinstance(exc.value.__cause__, sqlite3.OperationalError)
    monkeypatch.undo()
    db.close()


def test_enospc_while_opening_is_a_storage_error(tmp_path: Path, monkeypatch) -> None:
    import neardup.store.layout as layout

    def full(*a: object, **k: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(layout, "write_json_file", full)
    with pytest.raises(StorageError, match="disk is full"):
        _dd(tmp_path / "new")
    assert not (tmp_path / "new").exists()


def test_a_flush_that_keeps_failing_does_not_hang_later_flushes(
    tmp_path: Path, monkeypatch
) -> None:
    """Found by benchmarks/faults_store.py on a full tmpfs: a flush whose retried build failed
    left the next flush waiting forever (the writer hung, and every request with it)."""
    import threading

    import neardup.store.partitions as partitions

    real = partitions.write_segment

    def full(*a: object, **k: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    with _dd(tmp_path) as d:
        d.add(_docs(100))
        monkeypatch.setattr(partitions, "write_segment", full)
        for _ in range(3):
            box: list[BaseException | None] = []

            def flush(box: list[BaseException | None] = box) -> None:
                try:
                    d.flush()
                    box.append(None)
                except BaseException as exc:
                    box.append(exc)

            t = threading.Thread(target=flush, daemon=True)
            t.start()
            t.join(20)
            assert not t.is_alive(), "flush hangs after a failed flush"
            assert isinstance(box[0], StorageError) and "No space left" in str(box[0])
        assert d.add({"id": "late", "text": "written while flushes fail"}).added
        monkeypatch.setattr(partitions, "write_segment", real)
        d.flush()
        assert d.stats()["segments"] >= 1 and len(d) == 101
    with _dd(tmp_path) as d2:
        assert len(d2) == 101 and "late" in d2


def test_sqlite_full_during_background_flushes_never_reaches_a_writer(tmp_path: Path) -> None:
    """Found by benchmarks/faults_store.py: SQLite's checkpoint failing on a full disk escaped as
    a raw sqlite3.OperationalError from the writer's housekeeping and failed the requests of
    the group in flight (HTTP 500); now it is a StorageError, logged, and the flush retried."""
    with _dd(tmp_path, memtable_size=50) as d:
        real = d.store._state.meta._db

        failing = ["wal_checkpoint"]

        class Full:
            def execute(self, sql: str, *a: object) -> object:
                if any(f in sql for f in failing):
                    err = sqlite3.OperationalError("database or disk is full")
                    err.sqlite_errorcode = 13  # type: ignore[attr-defined]
                    raise err
                return real.execute(sql, *a)

            def __getattr__(self, name: str) -> object:
                return getattr(real, name)

        d.store._state.meta._db = Full()  # type: ignore[assignment]
        try:
            for k in range(6):  # several automatic flushes come due and fail
                assert all(r.added for r in d.add(_docs(40, f"k{k}-", seed=k)))
            with pytest.raises(StorageError, match="the disk is full"):
                d.flush()
            failing[:] = ["INSERT OR REPLACE INTO wal_applied"]  # a new log's first position
            with pytest.raises(StorageError, match="the disk is full"):
                d.flush()
            assert d.add({"id": "after", "text": "still writable"}).added
        finally:
            d.store._state.meta._db = real
        d.flush()
        assert len(d) == 241
    with _dd(tmp_path) as d2:
        assert len(d2) == 241


# ------------------------------------------------------------------ 7. SQLite damage, metadata
def _corrupt_middle_page(db: Path) -> None:
    size = db.stat().st_size
    page = 4096
    n = size // page
    with open(db, "r+b") as f:
        f.seek((n // 2) * page + 100)
        f.write(bytes(np.random.default_rng(0).integers(0, 256, 2000, dtype=np.uint8)))


def _big_docs(n: int) -> list[dict[str, object]]:
    return [
        {"id": f"b{i}", "text": t, "metadata": {"i": i}}
        for i, t in enumerate(_texts(n, seed=5, words=120))
    ]


def test_damaged_sqlite_is_refused_then_rebuilt_from_the_log(tmp_path: Path) -> None:
    d = _dd(tmp_path)
    docs = _big_docs(1500)
    d.add(docs)
    d.store.sync_meta()
    d.store._state.meta.checkpoint()
    _abandon(d)
    for f in ("meta.sqlite3-wal", "meta.sqlite3-shm"):
        (tmp_path / f).unlink(missing_ok=True)
    _corrupt_middle_page(tmp_path / "meta.sqlite3")
    as_after_a_reboot(tmp_path)
    with pytest.raises(CorruptFileError, match=r"meta\.sqlite3") as exc:
        _dd(tmp_path)
    assert "repair=True" in str(exc.value)
    with _dd(tmp_path, repair=True) as d2:  # the log still holds every row: nothing lost
        assert len(d2) == 1500
        assert all(d2.get(f"b{i}")["metadata"] == {"i": i} for i in range(1500))
    assert list(tmp_path.glob("meta.sqlite3.damaged-*"))
    with _dd(tmp_path) as d3:
        assert len(d3) == 1500


def test_repaired_sqlite_keeps_every_readable_row_and_answers_cleanly(tmp_path: Path) -> None:
    with _dd(tmp_path) as d:
        d.add(_big_docs(1500))
    _corrupt_middle_page(tmp_path / "meta.sqlite3")
    as_after_a_reboot(tmp_path)
    with pytest.raises(CorruptFileError):
        _dd(tmp_path)
    with _dd(tmp_path, repair=True) as d2:
        kept = len(d2)
        assert 1500 - 40 <= kept <= 1500  # only the rows on the damaged page can be gone
        found = 0
        for i in range(1500):
            with contextlib.suppress(NotFoundError):
                found += d2.get(f"b{i}")["metadata"] == {"i": i}
        assert found == kept
        results = d2.check(_big_docs(1500))  # searches meet the lost rows: no error
        assert sum(r.duplicate for r in results) == kept


def test_sqlite_with_a_destroyed_header_is_rebuilt_from_its_leaf_pages(tmp_path: Path) -> None:
    with _dd(tmp_path) as d:
        d.add(_big_docs(600))
    db = tmp_path / "meta.sqlite3"
    with open(db, "r+b") as f:
        f.write(b"\x00" * 100)  # "file is not a database"
    with pytest.raises(CorruptFileError, match="repair=True"):
        _dd(tmp_path)
    with _dd(tmp_path, repair=True) as d2:
        assert len(d2) == 600 and d2.get("b599")["metadata"] == {"i": 599}
    with _dd(tmp_path) as d3:
        assert len(d3) == 600


def test_deeply_nested_metadata_is_refused(tmp_path: Path) -> None:
    deep: dict[str, object] = {}
    cur = deep
    for _ in range(989):
        cur["a"] = {}
        cur = cur["a"]  # type: ignore[assignment]
    with _dd(tmp_path) as d:
        with pytest.raises(InputError, match="nested more than 64") as exc:
            d.add({"id": "x", "text": "t", "metadata": deep})
        assert http_status_for(exc.value) == 422
        ok: dict[str, object] = {"v": 1}
        for _ in range(63):
            ok = {"a": ok}
        assert d.add({"id": "y", "text": "t", "metadata": ok}).added
        with pytest.raises(InputError, match=r"documents\[0\]\.metadata"):
            d.add({"id": "z", "text": "t", "metadata": {"a": ok}})
        assert len(d) == 1


def test_metadata_integers_beyond_64_bits_stay_exact(tmp_path: Path) -> None:
    meta = {"big": 2**63, "bigger": 2**70 + 1, "neg": -(2**65) - 3, "list": [2**64, 1]}
    with _dd(tmp_path) as d:
        d.add({"id": "x", "text": "t", "metadata": meta})
        assert d.get("x")["metadata"] == meta
    with _dd(tmp_path) as d:
        got = d.get("x")["metadata"]
        assert got == meta and all(type(v) is int for v in (got["big"], got["bigger"]))


# ------------------------------------------------------------------ issue 20, item 10
def test_decision_fingerprint_int_and_hex_agree_with_the_http_shape() -> None:
    with _dd(None) as d:
        r = d.check_and_add({"id": "a", "text": "alpha beta gamma delta"})
    assert isinstance(r, Decision) and isinstance(r.fingerprint, int)
    assert r.fingerprint_hex == format(r.fingerprint, "x")
    assert r.to_dict()["fingerprint"] == r.fingerprint_hex
    assert int(r.fingerprint_hex, 16) == r.fingerprint


def test_serve_no_verify_meta_opens_a_damaged_database_that_the_default_refuses(
    tmp_path: Path,
) -> None:
    """``neardup serve --no-verify-meta`` (StoreSettings.verify_meta=False) skips the open's
    ``PRAGMA quick_check``, which reads the whole metadata database. The default checks a
    database that has not passed one since the machine started, and refuses the damaged one
    before serving; ``--verify-meta`` checks on every open, in the same boot too. Real server
    processes."""
    from neardup.errors import ServiceUnavailableError
    from neardup.service.testing import ServerProcess

    ns = tmp_path / "data" / "namespaces" / "default"
    with Deduplicator.open(ns, candidates="simhash", verify=False) as d:
        d.add(_big_docs(1500))
    _corrupt_middle_page(ns / "meta.sqlite3")
    args = ["--candidates", "simhash", "--no-verify"]
    for extra, reboot in ((["--verify-meta"], False), ([], True)):
        if reboot:
            as_after_a_reboot(ns)
        refused = ServerProcess(tmp_path / "data", args=args + extra)
        with pytest.raises(ServiceUnavailableError):
            refused.start(timeout=60)
        assert "meta.sqlite3" in refused.last_stderr and "--repair" in refused.last_stderr
    srv = ServerProcess(tmp_path / "data", args=[*args, "--no-verify-meta"])
    srv.start(timeout=60)
    try:
        import httpx

        r = httpx.post(f"{srv.url}/v1/check", json={"id": "q", "text": "w1 w2 w3"}, timeout=30)
        assert r.status_code == 200
    finally:
        srv.stop()


def test_a_large_databases_quick_check_is_said_and_timed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An open whose ``quick_check`` reads a large metadata database says so first (how large,
    and how to skip it) and how long it took after: a server says nothing else for the minutes
    it takes at 50 M. A default open that skips it (passed in this boot) says that instead. A
    small one, or an open without the check, says nothing."""
    import logging

    from neardup.store import recovery

    ns = tmp_path / "ns"
    with _dd(ns) as d:
        d.add({"id": "a", "text": "alpha beta gamma delta"})

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if "quick_check" in r.getMessage()]

    with caplog.at_level(logging.INFO, logger="neardup.store"):
        for flag in (None, True):
            with _dd(ns, verify_meta=flag):
                pass
        assert not said()
        monkeypatch.setattr(recovery, "QUICK_CHECK_SAY_BYTES", 1)
        with _dd(ns, verify_meta=True):
            pass
        assert len(said()) == 2, said()
        assert "meta.sqlite3" in said()[0] and "GB" in said()[0]
        assert "--no-verify-meta" in said()[0] and "done in" in said()[1]
        caplog.clear()
        with _dd(ns):
            pass
        assert len(said()) == 1 and "skipped" in said()[0] and "--verify-meta" in said()[0]
        caplog.clear()
        with _dd(ns, verify_meta=False):
            pass
        assert not said()
