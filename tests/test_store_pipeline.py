"""The store's pipelined parts: segment searches started ahead of their group (prefetch), and
SQLite writes in a child process (the service's metadata applier)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.errors import ConfigError, StorageError
from neardup.online import Deduplicator
from neardup.service.config import ServiceConfig
from neardup.store import engine
from neardup.store.applier_proc import MetaApplyProcess, decode_frames
from neardup.store.engine import Store
from neardup.store.meta import MetaDB
from neardup.store.wal import AddRecord, DeleteRecord, frame_records

RNG_SEED = 20261122


def _records(store: Store, fps: np.ndarray, times: np.ndarray, tag: str) -> list[AddRecord]:
    start = store.allocate(len(fps))
    return [
        AddRecord(start + i, float(t), int(f), 0, b"c" * 16, 0, f"{tag}{i}", None, None)
        for i, (f, t) in enumerate(zip(fps.tolist(), times.tolist(), strict=True))
    ]


def _flip(fps: np.ndarray, rng: np.random.Generator, max_bits: int) -> np.ndarray:
    out = fps.copy()
    for i in range(len(out)):
        for b in rng.choice(64, size=int(rng.integers(0, max_bits + 1)), replace=False):
            out[i] ^= np.uint64(1) << np.uint64(int(b))
    return out


@pytest.fixture
def two_threads(monkeypatch):
    monkeypatch.setattr(engine, "_SEARCH_THREADS", 2)  # a 1-CPU runner still prefetches


def _seeded_store(tmp_path, rng):
    """A durable store with 3 partitions x 2 segments of 300 rows (fingerprints in clusters)."""
    store = Store(tmp_path / "s", bits=64, radius=3, partition_seconds=100.0)
    base = rng.integers(0, 2**63, size=200, dtype=np.uint64)
    for rnd in range(2):
        fps = _flip(base[rng.integers(0, len(base), 900)], rng, 3)
        times = np.repeat([10.0, 110.0, 210.0], 300)
        store.commit(_records(store, fps, times, f"r{rnd}-"))
        store.flush()
    assert len(store.segments) == 6
    return store, base


def _same(a, b) -> None:
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_a_prefetch_completed_after_flush_merge_and_expiry_equals_a_search_then(
    tmp_path, two_threads
):
    rng = np.random.default_rng(RNG_SEED)
    store, base = _seeded_store(tmp_path, rng)
    try:
        q = _flip(base[rng.integers(0, len(base), 150)], rng, 2)
        pre = store.prefetch(q, 3)
        assert pre is not None and len(pre.futures) == 6
        # meanwhile: rows in the memtable, a flush (new segments), a merge, an expiry
        store.commit(_records(store, _flip(q[:40], rng, 3), np.full(40, 250.0), "m"))
        store.flush()
        store.commit(_records(store, _flip(q[40:80], rng, 3), np.full(40, 260.0), "n"))
        merged = [g for g in store.compaction_candidates(1) if g[0].partition == 1]
        assert merged
        assert store.install_merged(merged[0], store.build_merged(merged[0]))
        assert store.expire(100.0) > 0  # partition 0 dropped
        got = store.search_parts([q], [pre], 3)
        want = store.search(q, 3)
        _same(got, want)
        assert len(want[1]) > 150  # hits in old, merged, flushed and memtable rows alike
        # parts: one prefetched earlier, one not; their union is the whole search
        pre2 = store.prefetch(q[:100], 3)
        _same(store.search_parts([q[:100], q[100:]], [pre2, None], 3), want)
        # a prefetch for another distance is not used
        pre3 = store.prefetch(q, 1)
        _same(store.search_parts([q], [pre3], 3), want)
    finally:
        store.close()


def test_a_prefetch_that_would_not_pay_is_not_started(tmp_path, two_threads):
    rng = np.random.default_rng(RNG_SEED)
    store, base = _seeded_store(tmp_path, rng)
    try:
        assert store.prefetch(base[: engine.PARALLEL_QUERIES - 1], 3) is None
    finally:
        store.close()
    assert store.prefetch(base, 3) is None  # closed


def test_segments_are_closed_only_after_the_prefetches_that_read_them(tmp_path, two_threads):
    rng = np.random.default_rng(RNG_SEED)
    store, base = _seeded_store(tmp_path, rng)
    try:
        dying = [s for s in store.segments if s.partition == 0]
        events: list[tuple[str, float]] = []
        for s in dying:
            search, close = s.index.search, s.segment.close

            def slow(q, k, search=search):
                time.sleep(0.3)
                out = search(q, k)
                events.append(("searched", time.monotonic()))
                return out

            def closing(close=close):
                events.append(("closed", time.monotonic()))
                close()

            s.index.search = slow
            s.segment.close = closing
        pre = store.prefetch(base, 3)
        assert pre is not None
        assert store.expire(100.0) > 0  # drops partition 0 while its searches run
        kinds = [k for k, _ in sorted(events, key=lambda e: e[1])]
        assert kinds == ["searched", "searched", "closed", "closed"], events
        got = store.search_parts([base], [pre], 3)
        _same(got, store.search(base, 3))
    finally:
        store.close()


# ----------------------------------------------------------------- the applier's child process

adds = st.builds(
    AddRecord,
    rowid=st.integers(0, 2**40),
    time=st.floats(0, 2e9),
    fp_hi=st.integers(0, 2**64 - 1),
    fp_lo=st.integers(0, 2**64 - 1),
    chash=st.binary(min_size=16, max_size=16),
    flags=st.integers(0, 3),
    id=st.text(min_size=1, max_size=12),
    text=st.none() | st.text(max_size=30),
    metadata=st.none() | st.just('{"a": 1}'),
)
deletes = st.builds(DeleteRecord, rowid=st.integers(0, 2**40), id=st.text(max_size=8))


@settings(max_examples=100)
@given(records=st.lists(adds | deletes, max_size=20))
def test_frames_decode_to_the_records_framed(records):
    assert decode_frames(frame_records(records)) == records


def test_a_damaged_frame_is_refused():
    data = bytearray(frame_records([AddRecord(1, 1.0, 2, 0, b"c" * 16, 0, "a", "t", None)]))
    data[-1] ^= 1
    with pytest.raises(ValueError, match="CRC"):
        decode_frames(bytes(data))
    with pytest.raises(ValueError, match="past the end"):
        decode_frames(bytes(data[:-3]))


def _rec(rid: int, id: str) -> AddRecord:
    return AddRecord(rid, 1.0, rid * 7, 0, b"c" * 16, 0, id, f"text {rid}", None)


def _dump(path):
    db = MetaDB(path)
    try:
        return (
            db._db.execute("SELECT * FROM docs ORDER BY rid").fetchall(),
            db._db.execute("SELECT * FROM wal_applied ORDER BY gen").fetchall(),
            db.count(),
        )
    finally:
        db.close()


def test_the_child_applies_what_the_thread_would(tmp_path):
    batches = [
        [_rec(i, f"d{i}") for i in range(300)],
        [DeleteRecord(5, "d5"), _rec(300, "d5"), _rec(301, "x")],
        [_rec(7, "d7")],  # a re-applied record: replaces itself
    ]
    ref = MetaDB(tmp_path / "ref.sqlite3")
    proc = MetaApplyProcess(tmp_path / "child.sqlite3")
    try:
        for n, b in enumerate(batches):
            ref.apply(b, [(1, 100 * (n + 1))])
            # sent as one bytes, or as the log's per-group pieces: the same transaction
            if n % 2:
                proc.apply([frame_records(b[:1]), frame_records(b[1:])], [(1, 100 * (n + 1))])
            else:
                proc.apply(frame_records(b), [(1, 100 * (n + 1))])
    finally:
        proc.close()
        ref.close()
    assert _dump(tmp_path / "child.sqlite3") == _dump(tmp_path / "ref.sqlite3")
    assert proc._proc is None


def test_a_refused_transaction_says_why_and_the_next_one_commits(tmp_path):
    proc = MetaApplyProcess(tmp_path / "m.sqlite3")
    try:
        damaged = bytearray(frame_records([_rec(1, "a"), _rec(2, "b")]))
        damaged[-2] ^= 0xFF
        with pytest.raises(StorageError, match="CRC mismatch"):
            proc.apply(bytes(damaged), [(1, 5)])
        proc.apply(frame_records([_rec(3, "c")]), [(1, 10)])
        assert proc.starts == 1  # the child stayed up
    finally:
        proc.close()
    rows, applied, count = _dump(tmp_path / "m.sqlite3")  # nothing of the refused one
    assert [r[1] for r in rows] == ["c"] and applied == [(1, 10)] and count == 1


def test_a_dead_child_fails_one_transaction_and_is_started_again(tmp_path):
    proc = MetaApplyProcess(tmp_path / "m.sqlite3")
    try:
        proc.apply(frame_records([_rec(1, "a")]), [])
        assert proc._proc is not None
        proc._proc.kill()
        proc._proc.wait()
        proc.apply(frame_records([_rec(2, "b")]), [])  # noticed before sending: started again
        assert proc.starts == 2
        proc._proc.stdout.close()  # the answer cannot be read: this transaction fails...
        with pytest.raises(StorageError, match="still holds every acknowledged row"):
            proc.apply(frame_records([_rec(3, "c")]), [])
        proc.apply(frame_records([_rec(3, "c")]), [])  # ...and the retry commits
        assert proc.starts == 3
    finally:
        proc.close()
    assert [r[1] for r in _dump(tmp_path / "m.sqlite3")[0]] == ["a", "b", "c"]


def test_a_store_with_a_process_applier_keeps_everything_across_a_reopen(tmp_path, two_threads):
    path = tmp_path / "d"
    docs = [
        {"id": f"d{i}", "text": f"document number {i} " + "word " * (i % 7)} for i in range(500)
    ]
    with Deduplicator(path, meta_applier="process", memtable_size=200) as d:
        assert d.store.applier is not None and d.store.applier.proc is not None
        added = [
            x.id for s in range(0, 500, 100) for x in d.check_and_add(docs[s : s + 100]) if x.added
        ]
        assert len(added) > 100
        d.delete(added[0])
        n = len(d)
        d.store.sync_meta()
        assert d.store.stats()["meta_transactions"] > 0
        child = d.store.applier.proc._proc
    assert child is not None and child.poll() is not None  # ended with the store
    with Deduplicator(path) as d2:
        assert len(d2) == n == d2.store.meta.count()
        assert added[0] not in d2 and added[1] in d2
        last = added[-1]
        assert d2.get(last)["text"] == docs[int(last[1:])]["text"]


def test_the_applier_kind_is_checked(tmp_path):
    with pytest.raises(ConfigError, match="meta_applier"):
        Store(tmp_path / "s", bits=64, radius=3, partition_seconds=100.0, meta_applier="fork")
    with pytest.raises(ConfigError, match="meta_applier"):
        ServiceConfig(data_dir=None, meta_applier="fork")


def test_concurrent_prefetching_submitters_get_the_sequential_decisions(tmp_path, two_threads):
    """Batches submitted from several threads while flushes run: each batch's decisions are
    those of the same batches decided one after another in the same queue order."""
    rng = np.random.default_rng(RNG_SEED)
    words = [f"w{i}" for i in range(300)]
    texts = [" ".join(rng.choice(words, 30)) for _ in range(60)]
    batches = [
        [{"id": f"b{b}-{i}", "text": texts[(b * 7 + i) % 60]} for i in range(80)] for b in range(12)
    ]
    with Deduplicator(tmp_path / "a", memtable_size=300, meta_applier="process") as d:
        order: list[int] = []
        futures = {}
        lock = threading.Lock()

        def send(b: int) -> None:
            with lock:  # the queue order is recorded with the submission
                fut, _ = d.submit("check_and_add", batches[b])
                order.append(b)
                futures[b] = fut

        threads = [threading.Thread(target=send, args=(b,)) for b in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        got = {
            b: [(x.id, x.duplicate, [m.id for m in x.matches]) for x in f.result()]
            for b, f in futures.items()
        }
    with Deduplicator(tmp_path / "b", memtable_size=300) as ref:
        want = {}
        for b in order:
            want[b] = [
                (x.id, x.duplicate, [m.id for m in x.matches])
                for x in ref.check_and_add(batches[b])
            ]
    assert got == want
