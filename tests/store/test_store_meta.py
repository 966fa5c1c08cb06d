"""SQLite metadata: multi-row inserts are the same as inserting row by row; the kept row count
is the table's; every row's checksum is written and checked; the schema is versioned."""

from __future__ import annotations

import contextlib
import sqlite3
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup._threads import made_ahead
from neardup.errors import CorruptRecordError, UnsupportedVersionError
from neardup.store.meta import SCHEMA_VERSION, MetaDB, row_checksum
from neardup.store.wal import AddRecord, DeleteRecord

# few row ids and ids, so that records of one batch replace each other both ways
adds = st.builds(
    AddRecord,
    rowid=st.integers(0, 12),
    time=st.floats(0, 1e9),
    fp_hi=st.integers(0, 2**64 - 1),
    fp_lo=st.just(0),
    chash=st.binary(min_size=16, max_size=16),
    flags=st.integers(0, 3),
    id=st.sampled_from([f"d{i}" for i in range(10)]),
    text=st.none() | st.text(max_size=8),
    metadata=st.none() | st.just('{"a": 1}'),
)
deletes = st.builds(DeleteRecord, rowid=st.integers(0, 12), id=st.just("x"))
batches = st.lists(st.lists(adds | deletes, max_size=40), min_size=1, max_size=4)


def _one_by_one(cur, verb, rows):  # the reference: executemany, a row at a time
    cur.executemany(f"{verb} INTO docs VALUES (?,?,?,?,?,?,?,?,?)", rows)


def _plain_replace(cur, rows):  # the reference for a batch of adds: INSERT OR REPLACE, in order
    _one_by_one(cur, "INSERT OR REPLACE", rows)
    return 0  # (the reference's kept count is not checked)


def _rows_counted(db: MetaDB) -> int:
    return db._db.execute("SELECT count(*) FROM docs").fetchone()[0]


def _dump(db: MetaDB):
    return (
        db._db.execute("SELECT * FROM docs ORDER BY rid").fetchall(),
        db._db.execute("SELECT * FROM deleted ORDER BY rid").fetchall(),
    )


@settings(max_examples=150)
@given(batches=batches, max_rows=st.sampled_from([1, 2, 4, 256]))
def test_multi_row_apply_equals_row_by_row(batches, max_rows):
    fast, ref = MetaDB(None), MetaDB(None)
    fast._max_rows = max_rows
    ref._replace_rows = _plain_replace  # type: ignore[method-assign]
    for b in batches:
        fast.apply(b)
        ref.apply(b)
        assert fast.count() == _rows_counted(fast)
    assert _dump(fast) == _dump(ref)


def test_statement_sizes_are_powers_of_two_and_few(tmp_path):
    db = MetaDB(tmp_path / "m.sqlite3")
    assert db._max_rows == 256
    recs = [AddRecord(i, 1.0, i, 0, b"c" * 16, 0, f"id{i}", None, None) for i in range(1000)]
    db.apply(recs)
    # 1000 = 3*256 + 128 + 64 + 32 + 8
    assert sorted(k for _, k in db._insert_sql) == [8, 32, 64, 128, 256]
    assert db.count() == 1000
    assert db.lookup_ids(["id0", "id999", "nope"]) == {"id0": 0, "id999": 999}
    db.close()


def test_a_failed_batch_applies_nothing(tmp_path):
    db = MetaDB(tmp_path / "m.sqlite3")
    good = AddRecord(1, 1.0, 1, 0, b"c" * 16, 0, "a", None, None)
    bad = AddRecord(2, 1.0, 2, 0, b"c", 0, "b", None, None)._replace(id=None)  # NOT NULL id
    with pytest.raises(Exception, match="NOT NULL"):
        db.apply([good, bad])
    assert db.count() == 0
    db.close()


@settings(max_examples=60)
@given(
    n=st.integers(0, 700),
    dup=st.none() | st.integers(0, 699),
    max_rows=st.sampled_from([1, 4, 256]),
    bulk=st.booleans(),
)
def test_insert_rows_takes_any_iterable_and_is_all_or_nothing(n, dup, max_rows, bulk):
    db = MetaDB(None)
    db._max_rows = max_rows
    rows = [(i, f"id{i}", 1.0, b"f" * 16, b"c" * 16, 0, None, None) for i in range(n)]
    if dup is not None and dup < n:
        rows.append((n, f"id{dup}", 1.0, b"f" * 16, b"c" * 16, 0, None, None))  # repeated id
        with pytest.raises(sqlite3.IntegrityError):
            db.insert_rows(iter(rows), bulk=bulk)
        assert db.count() == 0
        assert not any(t.name.startswith("neardup-rows-ahead") for t in threading.enumerate())
        return
    db.insert_rows((r for r in rows), bulk=bulk)  # a generator, as bulk_load passes
    stored = db._db.execute("SELECT * FROM docs ORDER BY rid").fetchall()
    assert [r[:8] for r in stored] == rows
    assert [r[8] for r in stored] == [row_checksum(*r) for r in rows]  # each with its checksum


@given(n=st.integers(0, 50), block=st.integers(1, 9), fail_at=st.none() | st.integers(0, 49))
def test_made_ahead_is_the_rows_in_order_and_raises_their_error(n, block, fail_at):
    """A bulk insert's rows made on a helper thread: the same rows in the same order, an error
    making them raised to the caller, and no helper left running either way."""

    def rows():
        for i in range(n):
            if i == fail_at:
                raise ValueError(f"row {i}")
            yield i

    if fail_at is not None and fail_at < n:
        with pytest.raises(ValueError, match=f"row {fail_at}"):
            list(made_ahead(rows(), block))
    else:
        assert list(made_ahead(rows(), block)) == list(range(n))
    assert not any(t.name.startswith("neardup-rows-ahead") for t in threading.enumerate())


def test_made_ahead_stops_its_helper_when_the_caller_stops():
    made = []

    def rows():
        for i in range(10_000):
            made.append(i)
            yield i

    ahead = made_ahead(rows(), 10)
    assert [next(ahead) for _ in range(3)] == [0, 1, 2]
    ahead.close()  # the caller stopped (an insert failed)
    assert not any(t.name.startswith("neardup-rows-ahead") for t in threading.enumerate())
    assert len(made) <= 50  # at most the blocks it had made ahead, not the rest


def _row(rid: int, id: str) -> tuple:
    return (rid, id, 1.0, b"f" * 16, b"c" * 16, 0, None, None)


ops = st.one_of(
    st.tuples(st.just("apply"), st.lists(adds | deletes, max_size=20)),
    st.tuples(st.just("insert_rows"), st.lists(st.integers(0, 30), max_size=6, unique=True)),
    st.tuples(st.just("delete_rowids"), st.lists(st.integers(0, 30), max_size=6)),
    st.tuples(st.just("delete_from"), st.integers(0, 30)),
)


@settings(max_examples=150, deadline=None)
@given(steps=st.lists(ops, max_size=12))
def test_the_kept_count_is_the_number_of_rows_after_any_writes(tmp_path_factory, steps):
    path = tmp_path_factory.mktemp("meta") / "m.sqlite3"
    db = MetaDB(path)
    for op, arg in steps:
        if op == "apply":
            db.apply(arg)
        elif op == "insert_rows":  # row ids 100+, ids that may exist: all or nothing
            rows = [_row(100 + i, f"d{i % 12}") for i in arg]
            with contextlib.suppress(sqlite3.IntegrityError):
                db.insert_rows(rows)
        elif op == "delete_rowids":
            db.delete_rowids(arg)
        else:
            db.delete_from(arg)
        assert db.count() == _rows_counted(db), (op, arg)
    n = db.count()
    db.close()
    again = MetaDB(path)  # kept across a reopen, not recounted
    assert again.count() == n == _rows_counted(again)
    again.close()


def test_a_failed_batch_leaves_the_count_alone(tmp_path):
    db = MetaDB(tmp_path / "m.sqlite3")
    db.apply([AddRecord(1, 1.0, 1, 0, b"c" * 16, 0, "a", None, None)])
    bad = AddRecord(3, 1.0, 3, 0, b"c", 0, "b", None, None)._replace(id=None)
    with pytest.raises(Exception, match="NOT NULL"):
        db.apply([AddRecord(2, 1.0, 2, 0, b"c" * 16, 0, "z", None, None), bad])
    assert db.count() == 1 == _rows_counted(db)
    db.close()


def test_a_database_of_the_old_schema_is_refused(tmp_path):
    """Rows without checksums (schema version 0, nothing released) are not opened: one clear
    error naming the file, and the file is left as it was."""
    path = tmp_path / "old.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(
        """
        CREATE TABLE docs (rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, time REAL NOT NULL,
            fp BLOB NOT NULL, chash BLOB NOT NULL, flags INTEGER NOT NULL, metadata TEXT, text TEXT);
        CREATE TABLE deleted (rid INTEGER PRIMARY KEY);
        CREATE TABLE wal_applied (gen INTEGER PRIMARY KEY, offset INTEGER NOT NULL);
        """
    )
    old.executemany(
        "INSERT INTO docs VALUES (?,?,?,?,?,?,?,?)", [_row(i, f"x{i}") for i in range(37)]
    )
    old.commit()
    old.close()
    with pytest.raises(UnsupportedVersionError, match=r"old\.sqlite3: metadata schema version 0"):
        MetaDB(path)
    again = sqlite3.connect(path)
    assert again.execute("PRAGMA user_version").fetchone() == (0,)
    assert again.execute("SELECT count(*) FROM docs").fetchone() == (37,)
    again.close()
    new = MetaDB(tmp_path / "new.sqlite3")
    assert new._db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,) == (1,)
    new.close()


def _flip_in_text(path, rid: int, old: bytes, new: bytes) -> None:
    """Change stored bytes of row ``rid``'s text in place (as a damaged disk would), bypassing
    the checksum."""
    db = sqlite3.connect(path)
    (text,) = db.execute("SELECT CAST(text AS BLOB) FROM docs WHERE rid = ?", (rid,)).fetchone()
    assert old in text
    db.execute(
        "UPDATE docs SET text = CAST(? AS TEXT) WHERE rid = ?", (text.replace(old, new, 1), rid)
    )
    db.commit()
    db.close()


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        (b"quick", b"quack", "text fails its checksum"),  # still valid UTF-8
        (b"quick", b"qu\xffck", "text"),  # not UTF-8 any more
    ],
)
def test_a_damaged_text_is_refused_naming_the_row(tmp_path, old, new, problem):
    path = tmp_path / "m.sqlite3"
    db = MetaDB(path)
    text = "the quick brown fox"
    db.apply(
        [
            AddRecord(1, 1.0, 1, 0, b"c" * 16, 0, "intact", "another text", None),
            AddRecord(2, 1.0, 2, 0, b"c" * 16, 0, "hit", text, '{"k": 1}'),
        ]
    )
    db.close()
    _flip_in_text(path, 2, old, new)
    db = MetaDB(path)
    with pytest.raises(CorruptRecordError, match=problem) as e:
        db.get("hit")
    assert (e.value.doc_id, e.value.rowid) == ("hit", 2) and "m.sqlite3" in str(e.value)
    with pytest.raises(CorruptRecordError, match=r"'hit' \(row 2\)"):
        db.fetch([1, 2], with_text=True)
    assert db.get("intact").text == "another text"  # the other rows are served
    assert db.fetch([1], with_text=True)[1].text == "another text"
    # without the text, the rest of the row is checked (and intact here)
    assert db.fetch([2], with_text=False)[2].id == "hit"
    db.close()


def test_a_damaged_id_or_metadata_is_refused_without_reading_the_text(tmp_path):
    path = tmp_path / "m.sqlite3"
    db = MetaDB(path)
    db.apply([AddRecord(5, 1.0, 1, 0, b"c" * 16, 0, "doc-5", "text", '{"url": "x"}')])
    db.close()
    raw = sqlite3.connect(path)
    raw.execute("UPDATE docs SET metadata = ? WHERE rid = 5", ('{"url": "y"}',))
    raw.commit()
    raw.close()
    db = MetaDB(path)
    for with_text in (True, False):
        with pytest.raises(CorruptRecordError, match="id, metadata or fingerprint"):
            db.fetch([5], with_text=with_text)
    db.close()
