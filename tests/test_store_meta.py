"""SQLite metadata: multi-row inserts are the same as inserting row by row."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.store.meta import MetaDB
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
    cur.executemany(f"{verb} INTO docs VALUES (?,?,?,?,?,?,?,?)", rows)


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
    ref._insert_rows = _one_by_one  # type: ignore[method-assign]
    for b in batches:
        fast.apply(b)
        ref.apply(b)
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
)
def test_insert_rows_takes_any_iterable_and_is_all_or_nothing(n, dup, max_rows):
    db = MetaDB(None)
    db._max_rows = max_rows
    rows = [(i, f"id{i}", 1.0, b"f" * 16, b"c" * 16, 0, None, None) for i in range(n)]
    if dup is not None and dup < n:
        rows.append((n, f"id{dup}", 1.0, b"f" * 16, b"c" * 16, 0, None, None))  # repeated id
        with pytest.raises(sqlite3.IntegrityError):
            db.insert_rows(iter(rows))
        assert db.count() == 0
        return
    db.insert_rows(r for r in rows)  # a generator, as bulk_load passes
    assert db._db.execute("SELECT * FROM docs ORDER BY rid").fetchall() == rows
