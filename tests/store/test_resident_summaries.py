"""Long rows' summaries held in memory (neardup.store.resident): the same answers as SQLite's
table through every write (log records, bulk puts, deletes by row id and from a row id), while
the load runs and after it; a delete during the load is not brought back; nothing read from
SQLite once loaded; the store's switch and statistics."""

from __future__ import annotations

import random
import sqlite3
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.errors import ConfigError, StorageError
from neardup.store import StoreSettings
from neardup.store import resident as resident_mod
from neardup.store.meta import MetaDB
from neardup.store.resident import ResidentSummaries
from neardup.store.wal import AddRecord, DeleteRecord


def _add(i: int, summary: bytes | None) -> AddRecord:
    return AddRecord(i, float(i), i, 0, bytes(16), 0, f"id{i}", f"text {i}", None, None, summary)


def _table(path: Path) -> dict[int, bytes]:
    db = sqlite3.connect(path)
    try:
        return {int(r): bytes(s) for r, s in db.execute("SELECT rid, s FROM summaries")}
    finally:
        db.close()


def _held(db: MetaDB) -> dict[int, bytes]:
    res = db._resident
    assert res is not None
    return dict(res._held)


def test_every_write_reaches_the_copy_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite3"
    db = MetaDB(path, resident_summaries=True)
    try:
        assert db._resident is not None and db._resident.wait_loaded(10)
        # log records in order: an add with a summary, one without, a delete of the first
        db.apply([_add(i, b"s%d" % i if i % 2 else None) for i in range(100)])
        db.apply([_add(100, b"late"), DeleteRecord(3, "id3"), DeleteRecord(100, "id100")])
        db.put_summaries([(4, b"bulk4"), (5, b"bulk5")])  # 5 replaces its own
        db.delete_rowids([7, 9, 4])
        db.delete_from(90)
        want = _table(path)
        assert 3 not in want and 5 in want and 4 not in want and max(want) < 90
        assert _held(db) == want
        keys = list(range(-2, 110))
        assert db.summaries(keys) == want
        st = db.read_stats()
        assert st["resident_summaries"] == len(want) and st["resident_summaries_loaded"] == 1
        assert st["resident_summary_bytes"] > sum(map(len, want.values()))
    finally:
        db.close()


def test_a_failed_transaction_leaves_the_copy_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.sqlite3"
    db = MetaDB(path, resident_summaries=True)
    try:
        db.apply([_add(i, b"s%d" % i) for i in range(10)])
        assert db._resident is not None and db._resident.wait_loaded(10)
        before = _held(db)

        def fail(*_: object) -> None:
            raise sqlite3.OperationalError("disk I/O error")

        # the transaction fails after its rows and summaries were written: rolled back
        monkeypatch.setattr(db, "_add_count", fail)
        with pytest.raises(StorageError):
            db.apply([_add(20, b"new"), DeleteRecord(1, "id1")])
        with pytest.raises(StorageError):
            db.delete_rowids([2, 3])
        assert _held(db) == before == _table(path)
    finally:
        db.close()


def test_an_open_loads_every_summary_and_then_reads_none_from_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a folder?#%20" / "m.sqlite3"  # (no URI: these stay a path)
    path.parent.mkdir()
    n = 3 * resident_mod.LOAD_CHUNK + 5
    db = MetaDB(path)
    db.apply([_add(i, None) for i in range(n)])
    db.put_summaries([(i, b"s%d" % i) for i in range(0, n, 2)])
    db.close()
    db = MetaDB(path, resident_summaries=True)
    try:
        assert db._resident is not None and db._resident.wait_loaded(30)
        want = _table(path)
        assert _held(db) == want and len(want) == (n + 1) // 2
        read = []
        orig = db._read_keys
        monkeypatch.setattr(db, "_read_keys", lambda *a: read.append(a) or orig(*a))
        keys = random.Random(1).sample(range(n), 500)
        assert db.summaries(keys) == {k: want[k] for k in keys if k in want}
        assert read == []  # held or absent: nothing asked of SQLite
    finally:
        db.close()


def test_while_the_load_runs_the_rest_comes_from_sqlite_and_deletes_stay_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.sqlite3"
    n = 4 * 1000 + 7
    db = MetaDB(path)
    db.apply([_add(i, b"s%d" % i) for i in range(n)])
    db.close()
    monkeypatch.setattr(resident_mod, "LOAD_CHUNK", 1000)
    # the load stops between its first chunk's statement and adding what it read
    gate, waiting = threading.Event(), threading.Event()

    class GatedLock:
        def __init__(self) -> None:
            self.lock = threading.Lock()

        def __enter__(self) -> None:
            if threading.current_thread().name == "neardup-summaries-load" and not gate.is_set():
                waiting.set()
                gate.wait(10)
            self.lock.acquire()

        def __exit__(self, *exc: object) -> None:
            self.lock.release()

    real_init = ResidentSummaries.__init__

    def init(self: ResidentSummaries, p: Path) -> None:
        real_init(self, p)
        self._lock = GatedLock()  # type: ignore[assignment]

    monkeypatch.setattr(ResidentSummaries, "__init__", init)
    db = MetaDB(path, resident_summaries=True)
    try:
        res = db._resident
        assert res is not None
        assert waiting.wait(10) and not res.loaded
        # not loaded: what is not held is read from SQLite, the same answers
        keys = [0, 3, 999, 1000, 1500, n - 1, n + 3]
        assert db.summaries(keys) == {k: b"s%d" % k for k in keys if k < n}
        # deleted after the load read its first chunk (3 in it), before it added it
        db.delete_rowids([3, 1500])
        db.delete_from(n - 2)
        db.put_summaries([(2, b"newer")])
        gate.set()
        assert res.wait_loaded(30)
        want = _table(path)
        assert 3 not in want and 1500 not in want and n - 2 not in want and want[2] == b"newer"
        assert _held(db) == want
        assert db.summaries(range(n + 5)) == want
    finally:
        gate.set()
        db.close()


@settings(max_examples=40, deadline=None)
@given(
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("put"), st.lists(st.integers(0, 60), max_size=8)),
            st.tuples(st.just("drop"), st.lists(st.integers(0, 60), max_size=8)),
            st.tuples(st.just("drop_from"), st.integers(0, 60)),
        ),
        max_size=12,
    )
)
def test_the_copy_follows_any_order_of_writes(ops) -> None:
    held = ResidentSummaries(Path("unused"))
    held._loaded.set()  # (no load: an empty database)
    model: dict[int, bytes] = {}
    for k, (op, arg) in enumerate(ops):
        if op == "put":
            pairs = [(r, b"v%d-%d" % (k, r)) for r in arg]
            held.apply([("put", pairs)])
            model.update(pairs)
        elif op == "drop":
            held.apply([("drop", arg)])
            for r in arg:
                model.pop(r, None)
        else:
            held.apply([("drop_from", arg)])
            model = {r: v for r, v in model.items() if r < arg}
    assert held.lookup(range(61)) == (model, [])
    assert held.stats()["resident_summaries"] == len(model)
    assert (
        held.stats()["resident_summary_bytes"]
        == sum(map(len, model.values())) + len(model) * resident_mod.OVERHEAD_BYTES
    )


def test_the_store_switch(tmp_path: Path) -> None:
    assert StoreSettings().resident_summaries is False
    with pytest.raises(ConfigError, match="resident_summaries"):
        StoreSettings(resident_summaries="yes")  # type: ignore[arg-type]
    from neardup.online import Deduplicator

    for on in (True, False):
        with Deduplicator.open(tmp_path / str(on), resident_summaries=on) as d:
            d.check_and_add({"id": "a", "text": "one two three four five six seven"})
            stats = d.stats()
            assert ("resident_summaries" in stats) is on
            assert (d.store._state.db._resident is not None) is on


def test_in_memory_databases_hold_no_copy() -> None:
    db = MetaDB(None, resident_summaries=True)
    try:
        assert db._resident is None and "resident_summaries" not in db.read_stats()
    finally:
        db.close()
