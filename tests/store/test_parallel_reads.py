"""Reads of many keys spread over several connections (neardup.store.readers): the same rows,
summaries and ids as one connection reading them one statement after another; compressed
texts decoded on every reader; a damaged row refused from any range; readers closed with the
database; reads spread only while they wait for the disk; the ranges cover the keys."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.errors import ConfigError, CorruptRecordError, IndexStateError
from neardup.store import StoreSettings
from neardup.store.meta import MetaDB
from neardup.store.readers import (
    KINDS,
    PAGE_BLOCKS,
    PARALLEL_MIN_KEYS,
    PROBE_EVERY,
    SLOW_WAIT_US,
    ParallelReads,
    check_read_threads,
    ranges,
    thread_blocks,
)
from neardup.store.textcodec import TEXT_ZSTD_FLAG, TRAIN_MIN_TEXTS
from neardup.store.wal import AddRecord

N = TRAIN_MIN_TEXTS + 3_000  # past the dictionary's training: the last texts stored compressed


def _text(i: int) -> str:
    return f"post {i}: the quick brown fox {i % 97} jumps over the lazy dog {i * 7919 % 1000}"


@pytest.fixture(scope="module")
def db_path(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("reads") / "m.sqlite3"
    db = MetaDB(path)
    recs = [
        AddRecord(i, float(i), i, 0, bytes([i % 256]) * 16, 0, f"id{i:06d}", _text(i), None)
        for i in range(N)
    ]
    for lo in range(0, N, 1_000):  # (the first batch trains the dictionary)
        db.apply(recs[lo : lo + 1_000])
    db.put_summaries([(i, b"s%d" % i) for i in range(0, N, 3)])
    db.close()
    return path


def _reads(db: MetaDB, keys: list[int]):
    ids = [f"id{k:06d}" for k in keys] + ["nobody", "id999999"]
    return (
        db.fetch(keys, with_text=True),
        db.fetch(keys, with_text=False),
        db.summaries(keys),
        db.lookup_ids(ids),
    )


def _as_if_from_the_disk(db: MetaDB) -> MetaDB:
    """``db`` with every kind of read measured as waiting for the disk: its reads of many keys
    go parallel (but the probes)."""
    par = db.parallel_reads
    assert par is not None
    par.waits.update(dict.fromkeys(KINDS, 10 * SLOW_WAIT_US))
    return db


def _reader_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("neardup-meta-read")]


@pytest.mark.parametrize("n_keys", [1, PARALLEL_MIN_KEYS, 2 * PARALLEL_MIN_KEYS, 1_000, 3_000])
def test_many_connections_read_what_one_reads(db_path, n_keys):
    import random

    rng = random.Random(n_keys)
    # shuffled, repeated, and some row ids that hold no row
    keys = [rng.randrange(N + 500) for _ in range(n_keys)]
    one, four = MetaDB(db_path, read_threads=1), MetaDB(db_path, read_threads=4)
    _as_if_from_the_disk(four)
    try:
        for _ in range(2):  # (a probe among them)
            assert _reads(four, keys) == _reads(one, keys)
        rows = four.fetch(keys, with_text=True)
        assert {r: rows[r].text for r in rows} == {k: _text(k) for k in set(keys) if k < N}
    finally:
        one.close()
        four.close()


def test_compressed_texts_are_read_by_every_reader(db_path):
    keys = list(range(N - 4 * 500, N))  # four ranges of 500, past the training
    raw = sqlite3.connect(db_path)
    flags = raw.execute("SELECT flags FROM docs WHERE rid >= ?", (keys[0],)).fetchall()
    raw.close()
    assert len(flags) == len(keys) and all(f & TEXT_ZSTD_FLAG for (f,) in flags)
    db = _as_if_from_the_disk(MetaDB(db_path, read_threads=4))
    try:
        rows = db.fetch(keys, with_text=True)
        assert [rows[k].text for k in keys] == [_text(k) for k in keys]
        assert db.parallel_reads.parallel == 1  # type: ignore[union-attr]
        assert len(db.parallel_reads._readers) == 3  # type: ignore[union-attr]
        assert 1 <= len(_reader_threads()) <= 3  # (the pool starts a thread only when all are busy)
    finally:
        db.close()
    assert _reader_threads() == []  # closed with the database


def test_a_damaged_row_in_any_range_is_refused(tmp_path, db_path):
    path = tmp_path / "m.sqlite3"
    src = sqlite3.connect(db_path)
    dst = sqlite3.connect(path)
    src.backup(dst)
    src.close()
    # a plain (uncompressed) text among the first rows, and damage it in place
    rid = 11
    (text,) = dst.execute("SELECT CAST(text AS BLOB) FROM docs WHERE rid = ?", (rid,)).fetchone()
    dst.execute(
        "UPDATE docs SET text = CAST(? AS TEXT) WHERE rid = ?",
        (text.replace(b"quick", b"quack"), rid),
    )
    dst.commit()
    dst.close()
    db = _as_if_from_the_disk(MetaDB(path, read_threads=4))
    try:
        for keys in (
            list(range(0, 1_000)),
            list(range(1_000, 0, -1)),
            [rid, *range(3_000, 4_000)],
        ):
            with pytest.raises(CorruptRecordError, match=r"'id000011' \(row 11\)"):
                db.fetch(keys, with_text=True)
        # the readers stay usable, and the rest of the rows are served
        assert len(db.fetch(range(12, 1_000), with_text=True)) == 988
    finally:
        db.close()


def test_reads_from_several_threads_at_once(db_path):
    db, ref = _as_if_from_the_disk(MetaDB(db_path, read_threads=3)), MetaDB(db_path)
    errors: list[BaseException] = []
    want = {s: ref.fetch(range(s, s + 700), with_text=True) for s in range(0, 4_200, 700)}

    def run(s: int) -> None:
        try:
            for _ in range(5):
                assert db.fetch(range(s, s + 700), with_text=True) == want[s]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in want]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    db.close()
    ref.close()
    assert errors == []


@pytest.mark.parametrize("counted", [True, False])
def test_reads_spread_while_they_wait_for_the_disk(db_path, counted):
    # counted: the system counts the blocks a thread reads from storage (a read off the CPU
    # that read none waited for no disk); else the time off the CPU alone decides
    clock = {"wall": 0.0, "cpu": 0.0, "wait_us": 0.0, "blocks": 0}

    def wall() -> float:  # each serial read's wait is what clock["wait_us"] says per key
        return clock["wall"]

    def cpu() -> float:
        return clock["cpu"]

    def blocks() -> int:
        return clock["blocks"]

    par = ParallelReads(db_path, 4, clocks=(wall, cpu), blocks=blocks if counted else None)
    keys = list(range(1_000))
    modes: list[str] = []

    def first(part):
        clock["wall"] += clock["wait_us"] * 1e-6 * len(part)
        # (the waits are the disk's: every key's page read from storage)
        clock["blocks"] += PAGE_BLOCKS * len(part) if clock["wait_us"] else 0
        return {k: 0 for k in part}

    def rest(db, codec, part):
        return {k: 1 for k in part}

    def read() -> None:
        before = par.parallel
        got = par.read_keys("rows", keys, first, rest)
        assert sorted(got) == keys
        spread = par.parallel > before
        assert set(got.values()) == ({0, 1} if spread else {0})  # (ranges on the readers)
        modes.append("parallel" if spread else "serial")

    try:
        read()  # from the page cache: stays serial
        read()
        assert modes == ["serial", "serial"] and par.parallel == 0
        clock["wait_us"] = 4 * SLOW_WAIT_US  # the pages left the cache
        read()  # measured slow
        assert par.stats()["meta_read_wait_us_rows"] == pytest.approx(2 * SLOW_WAIT_US)
        modes.clear()
        for _ in range(2 * PROBE_EVERY):
            read()
        assert modes.count("serial") == 2 and modes.count("parallel") == 2 * PROBE_EVERY - 2
        # another kind is measured on its own, and few keys are never spread
        assert par.read_keys("ids", keys, lambda p: {0: 0}, rest) == {0: 0}
        assert par.read_keys("rows", keys[:100], lambda p: {0: 0}, rest) == {0: 0}
        clock["wait_us"] = 0.0  # cached again: back to serial after the next probes
        modes.clear()
        for _ in range(3 * PROBE_EVERY):
            read()
        assert modes[-PROBE_EVERY:] == ["serial"] * PROBE_EVERY
    finally:
        par.close()


def test_a_closed_database_refuses_a_parallel_read(db_path):
    par = ParallelReads(db_path, 4)
    par.close()
    with pytest.raises(IndexStateError, match="closed"):
        par.read(ranges(list(range(1_000)), 4), lambda part: {}, lambda db, codec, part: {})


def test_the_reader_count_is_checked():
    for bad in (0, -1, 65, 2.0, True, "4", None):
        with pytest.raises(ConfigError, match="read_threads"):
            check_read_threads(bad)
    with pytest.raises(ConfigError, match=r"read_threads \(--read-threads\)"):
        StoreSettings(read_threads=0)
    assert StoreSettings(read_threads=1).read_threads == 1


@settings(max_examples=200)
@given(n=st.integers(0, 5_000), threads=st.integers(1, 16))
def test_ranges_cover_the_keys_in_order(n, threads):
    keys = list(range(n))
    parts = ranges(keys, threads)
    assert [k for p in parts for k in p] == keys
    assert 1 <= len(parts) <= threads
    if len(parts) > 1:
        assert min(len(p) for p in parts) >= PARALLEL_MIN_KEYS
        assert max(len(p) for p in parts) - min(len(p) for p in parts) <= 1


def test_the_counts_are_in_the_stores_stats(tmp_path):
    from neardup.online import Deduplicator

    docs = [{"id": f"d{i}", "text": _text(i)} for i in range(300)]
    with Deduplicator.open(tmp_path / "s", read_threads=2) as d:
        d.add(docs)
        d.flush()  # the rows in SQLite
        d.check(docs)  # their 300 ids read at once: a serial read, measured
        stats = d.stats()
    assert stats["meta_serial_reads"] >= 1 and stats["meta_parallel_reads"] == 0
    assert {f"meta_read_wait_us_{k}" for k in KINDS} <= set(stats)
    with Deduplicator.open(None) as m:  # in memory: no readers, no such statistics
        assert "meta_serial_reads" not in m.stats()


@pytest.mark.parametrize("pages", [0, 1, 10])
def test_time_off_the_cpu_without_blocks_from_storage_is_not_the_disk(db_path, pages):
    """A serial read that spent long off the CPU (the interpreter lock, another thread's turn
    at the connection) but read nothing, or a few pages of its 1,000 keys, from storage stays
    serial: on a busy server a window held in the page cache went parallel on such waits."""
    clock = {"wall": 0.0, "blocks": 0}
    par = ParallelReads(
        db_path, 4, clocks=(lambda: clock["wall"], lambda: 0.0), blocks=lambda: clock["blocks"]
    )
    keys = list(range(1_000))

    def first(part):
        clock["wall"] += 10 * SLOW_WAIT_US * 1e-6 * len(part)  # waiting, for the lock
        clock["blocks"] += PAGE_BLOCKS * pages
        return {k: 0 for k in part}

    try:
        for _ in range(3):
            assert par.read_keys("rows", keys, first, lambda db, c, p: {}) == dict.fromkeys(keys, 0)
        assert par.parallel == 0
        # (the time off the CPU in the share of the keys whose pages came from storage)
        wait = 10 * SLOW_WAIT_US * pages / len(keys)
        assert par.stats()["meta_read_wait_us_rows"] == pytest.approx(wait, abs=0.05)
    finally:
        par.close()


def test_the_system_counts_a_threads_reads_from_storage(tmp_path):
    """:func:`thread_blocks` (Linux): a read that had to come from storage counts blocks, one
    from the page cache none (the file's pages dropped with ``posix_fadvise``; a filesystem
    that keeps them, tmpfs, reads none either way: skipped)."""
    import os

    count = thread_blocks()
    if count is None:
        pytest.skip("this system does not count a thread's block reads")
    path = tmp_path / "f"
    path.write_bytes(os.urandom(4 << 20))
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        b0 = count()
        os.pread(fd, 1 << 20, 1 << 20)
        cold = count() - b0
        if cold == 0:
            pytest.skip(f"{tmp_path}: its pages stay cached (tmpfs?)")
        b0 = count()
        os.pread(fd, 1 << 20, 1 << 20)
        assert count() - b0 == 0
    finally:
        os.close(fd)
