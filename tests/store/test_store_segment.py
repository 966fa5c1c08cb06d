"""Segments, manifest, memtable and recovery: checksums, corruption, orphans, brute-force parity."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from doubles import SMAPS, SimpleFingerprinter, mapped_kib
from hypothesis import given
from hypothesis import strategies as st

from neardup.errors import CorruptFileError, InputError
from neardup.fingerprint.distance import hamming_cdist
from neardup.index.scan import BruteIndex
from neardup.online.deduplicator import Deduplicator
from neardup.store.memindex import MemTable
from neardup.store.segment import HEADER_SIZE, open_segment, write_segment
from neardup.store.wal import iter_frames


def _rand(n, bits=64, seed=0):
    rng = np.random.default_rng(seed)
    shape = (n,) if bits == 64 else (n, 2)
    return rng.integers(0, 2**64, shape, dtype=np.uint64)


@pytest.mark.parametrize("bits", [64, 128])
def test_segment_round_trip(tmp_path, bits):
    fps = _rand(100, bits)
    rids = np.arange(100, dtype=np.int64) * 3
    ts = np.linspace(10, 20, 100)
    p = tmp_path / "s.nds"
    write_segment(p, fps, rids, ts, partition=5)
    seg = open_segment(p)
    assert seg.bits == bits and seg.partition == 5 and len(seg) == 100
    np.testing.assert_array_equal(seg.fingerprints, fps)
    np.testing.assert_array_equal(seg.rowids, rids)
    np.testing.assert_array_equal(seg.times, ts)
    assert not seg.fingerprints.flags.writeable
    seg.close()
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.skipif(not SMAPS.exists(), reason="reads /proc/self/smaps (Linux)")
def test_open_leaves_no_page_mapped(tmp_path):
    """The open reads the whole file through its map (the body's checksum) and unmaps those
    pages again: the process holds resident only what its reads then touch (a server opening
    a window is not charged the whole window: docs/store.md, *What an open costs*)."""
    n = 200_000
    p = tmp_path / "s.nds"
    write_segment(p, _rand(n), np.arange(n, dtype=np.int64), np.linspace(0, 1, n), partition=0)
    size_kib = p.stat().st_size // 1024
    seg = open_segment(p)
    try:
        assert mapped_kib(p) < size_kib // 20
        assert int(seg.rowids.sum()) == n * (n - 1) // 2  # a read maps what it touches
        assert mapped_kib(p) >= (8 * n // 1024) * 9 // 10
    finally:
        seg.close()


@given(pos=st.integers(0, HEADER_SIZE + 40 * 24 - 1), bit=st.integers(0, 7))
def test_any_bit_flip_is_detected(tmp_path_factory, pos, bit):
    p = tmp_path_factory.mktemp("seg") / "s.nds"
    write_segment(p, _rand(40), np.arange(40, dtype=np.int64), np.zeros(40), partition=0)
    b = bytearray(p.read_bytes())
    b[pos] ^= 1 << bit
    p.write_bytes(bytes(b))
    with pytest.raises(CorruptFileError, match=r"s\.nds"):
        open_segment(p)


def test_truncated_segment(tmp_path):
    p = tmp_path / "s.nds"
    write_segment(p, _rand(10), np.arange(10, dtype=np.int64), np.zeros(10), partition=0)
    p.write_bytes(p.read_bytes()[:-8])
    with pytest.raises(CorruptFileError, match="truncated or damaged"):
        open_segment(p)


@given(
    n=st.integers(0, 300),
    k=st.integers(0, 12),
    bits=st.sampled_from([64, 128]),
    seed=st.integers(0, 1000),
)
def test_memtable_agrees_with_brute_force(n, k, bits, seed):
    fps = _rand(n, bits, seed)
    # plant near neighbours so the radius matters
    if n > 10:
        fps[5:10] = fps[0:5] ^ np.uint64(0b1011)
    mt = MemTable(bits=bits, max_distance=12, buffer_size=32)
    for s in range(0, n, 37):
        mt.add(
            fps[s : s + 37], np.arange(s, min(n, s + 37), dtype=np.int64), np.zeros(min(37, n - s))
        )
    q = fps[:20] if n else _rand(3, bits, seed + 1)
    lims, ids, ds = mt.search(q, k)
    d = hamming_cdist(q, fps) if n else np.zeros((len(q), 0), np.int32)
    for i in range(len(q)):
        want = sorted((int(d[i, j]), j) for j in range(n) if d[i, j] <= k)
        got = list(
            zip(
                ds[lims[i] : lims[i + 1]].tolist(), ids[lims[i] : lims[i + 1]].tolist(), strict=True
            )
        )
        assert got == want
    f, r, _t = mt.arrays()
    np.testing.assert_array_equal(r, np.arange(n))
    np.testing.assert_array_equal(f, fps)


def test_brute_index_empty():
    b = BruteIndex(np.zeros(0, np.uint64), np.zeros(0, np.int64))
    lims, ids, _ds = b.search(np.array([1], dtype=np.uint64), 3)
    assert lims.tolist() == [0, 0] and len(ids) == 0


def _texts(n, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(f"w{x}" for x in rng.integers(0, 50_000, 30)) for _ in range(n)]


def _dd(path, **kw):
    kw.setdefault("verify", False)
    kw.setdefault("fingerprinter", SimpleFingerprinter())
    kw.setdefault("commit_interval_ms", 0.0)
    return Deduplicator.open(path, **kw)


def _seeded_store(path, n=400):
    texts = _texts(n)
    with _dd(path) as d:
        d.check_and_add([{"id": f"x{i}", "text": t} for i, t in enumerate(texts)])
        d.flush()
    return texts


def test_corrupt_segment_refuses_to_open(tmp_path):
    _seeded_store(tmp_path)
    seg = next(tmp_path.glob("seg-*.nds"))
    b = bytearray(seg.read_bytes())
    b[HEADER_SIZE + 17] ^= 0x40
    seg.write_bytes(bytes(b))
    with pytest.raises(CorruptFileError, match=rf"{seg.name}.*checksum"):
        _dd(tmp_path)
    # the lock was released: a clear error, not a stuck directory
    with pytest.raises(CorruptFileError):
        _dd(tmp_path)


def test_missing_segment_is_reported(tmp_path):
    _seeded_store(tmp_path)
    next(tmp_path.glob("seg-*.nds")).unlink()
    with pytest.raises(CorruptFileError, match="missing"):
        _dd(tmp_path)


def test_corrupt_manifest_is_reported(tmp_path):
    _seeded_store(tmp_path)
    m = tmp_path / "MANIFEST.json"
    body = json.loads(m.read_text())
    body["body"]["next_rowid"] += 1
    m.write_text(json.dumps(body))
    with pytest.raises(CorruptFileError, match=r"MANIFEST\.json.*checksum"):
        _dd(tmp_path)


def test_damaged_segment_index_is_rebuilt(tmp_path):
    texts = _seeded_store(tmp_path)
    for side in tmp_path.glob("*.hidx"):
        b = bytearray(side.read_bytes())
        b[len(b) // 2] ^= 0xFF
        side.write_bytes(bytes(b))
    with _dd(tmp_path) as d:
        assert d.check({"id": "q", "text": texts[7]}).matches[0].id == "x7"


def test_orphans_from_interrupted_flush_are_removed(tmp_path):
    _seeded_store(tmp_path)
    (tmp_path / "seg-0-99999999.nds").write_bytes(b"partial")
    (tmp_path / "seg-0-99999998.nds.tmp").write_bytes(b"partial")
    (tmp_path / "wal-99999999.log").write_bytes(b"")
    with _dd(tmp_path) as d:
        assert len(d) == 400
    names = {p.name for p in tmp_path.iterdir()}
    assert "seg-0-99999999.nds" not in names and "wal-99999999.log" not in names


def test_torn_wal_tail_recovers(tmp_path):
    texts = _texts(30)
    d = _dd(tmp_path)
    for i, t in enumerate(texts):
        d.add({"id": f"x{i}", "text": t})
    d.store.sync_meta()  # the abandoned applier must not commit while the store reopens
    d._writer._closed = True
    d.store._state.wal.close()
    d.store._state.dir.unlock()
    wal = next(tmp_path.glob("wal-*.log"))
    size = os.path.getsize(wal)
    with open(wal, "ab") as f:  # the writer died in the middle of appending a group
        f.write(b"\x40\x00\x00\x00\x12\x34\x56\x78partial")
    with _dd(tmp_path) as d2:
        assert len(d2) == 30 and "x29" in d2
        assert os.path.getsize(wal) == size
        assert d2.stats()["wal_truncated_bytes"] > 0
        assert d2.check_and_add({"id": "y", "text": texts[29]}).duplicate


def _abandoned_store(path, n=30):
    """A store whose process "died": every record applied to SQLite, the log left as it is."""
    texts = _texts(n)
    d = _dd(path)
    for i, t in enumerate(texts):
        d.add({"id": f"x{i}", "text": t})
    d.store.sync_meta()  # the abandoned applier must not commit while the store reopens
    d._writer._closed = True
    d.store._state.wal.close()
    d.store._state.meta.close()
    d.store._state.dir.unlock()
    return texts


def _set_applied(path, offset, drop_rows_after=None):
    """Make SQLite look as if its applier had reached only ``offset`` of log generation 1
    (and, with ``drop_rows_after``, as if rows from that row id on were never written)."""
    import sqlite3

    db = sqlite3.connect(str(path / "meta.sqlite3"))
    db.execute("UPDATE wal_applied SET offset = ? WHERE gen = 1", (offset,))
    if drop_rows_after is not None:
        n = db.execute("DELETE FROM docs WHERE rid >= ?", (drop_rows_after,)).rowcount
        db.execute("UPDATE doc_count SET n = n - ?", (n,))
    db.commit()
    db.close()


def test_wal_damage_in_middle_that_sqlite_applied_is_restored(tmp_path):
    _abandoned_store(tmp_path)
    wal = next(tmp_path.glob("wal-*.log"))
    b = bytearray(wal.read_bytes())
    b[len(b) // 2] ^= 0x08
    wal.write_bytes(bytes(b))
    with _dd(tmp_path) as d2:  # every record was applied: nothing is lost, nothing refused
        assert len(d2) == 30 and all(f"x{i}" in d2 for i in range(30))
        assert d2.store._state.restored_rows >= 1
    with _dd(tmp_path) as d3:  # the damaged log was retired: a clean reopen
        assert len(d3) == 30 and d3.store._state.restored_rows == 0


def test_wal_damage_in_middle_refuses_then_repair(tmp_path):
    _abandoned_store(tmp_path)
    wal = next(tmp_path.glob("wal-*.log"))
    b = bytearray(wal.read_bytes())
    ends = [e for _, e in iter_frames(bytes(b))]
    _set_applied(tmp_path, ends[9], drop_rows_after=10)  # SQLite lags: 10 rows applied
    b[len(b) // 2] ^= 0x08
    wal.write_bytes(bytes(b))
    with pytest.raises(CorruptFileError, match="repair=True"):
        _dd(tmp_path)
    with _dd(tmp_path, repair=True) as d2:
        assert 10 <= len(d2) < 30 and all(f"x{i}" in d2 for i in range(10))


def test_repair_keeps_rows_sqlite_holds(tmp_path):
    """--repair cuts the log at the damage but keeps every row SQLite still holds (it used to
    delete them as rows "the log and segments do not hold")."""
    _abandoned_store(tmp_path)
    wal = next(tmp_path.glob("wal-*.log"))
    b = bytearray(wal.read_bytes())
    _set_applied(tmp_path, next(iter_frames(bytes(b)))[1])  # the position lost, not the rows
    b[len(b) // 2] ^= 0x08
    wal.write_bytes(bytes(b))
    with pytest.raises(CorruptFileError, match="repair=True"):
        _dd(tmp_path)
    with _dd(tmp_path, repair=True) as d2:
        assert len(d2) == 30 and all(f"x{i}" in d2 for i in range(30))
    with _dd(tmp_path) as d3:
        assert len(d3) == 30


@pytest.mark.parametrize("durable", [False, True])
def test_bulk_load(tmp_path, durable):
    path = tmp_path if durable else None
    fps = _rand(1000)
    ids = [f"b{i}" for i in range(1000)]
    with _dd(path) as d:
        assert d.bulk_load(ids, fps) == 1000
        assert len(d) == 1000 and "b5" in d
        with pytest.raises(InputError, match="already exist"):
            d.bulk_load(["b5"], fps[:1])
        with pytest.raises(InputError, match="same length"):
            d.bulk_load(["c"], fps[:2])
        got = d.get("b3")
        assert int(got["fingerprint"], 16) == int(fps[3])
    if durable:
        with _dd(path) as d:
            assert len(d) == 1000 and d.stats()["segment_rows"] == 1000


def test_background_compaction_merges_partition(tmp_path):
    texts = _texts(300, seed=3)
    with _dd(tmp_path, max_segments_per_partition=2) as d:
        for s in range(0, 300, 50):
            d.add([{"id": f"x{i}", "text": texts[i]} for i in range(s, s + 50)])
            d.flush()
            d.delete(f"x{s}")
        d.check({"id": "q", "text": "wake the writer"})
        if d._writer._compactor is not None:
            d._writer._compactor.join()
        d.check({"id": "q", "text": "let the writer install"})
        st = d.stats()
        assert st["compactions"] >= 1 and st["segments"] <= 3
        assert d.check({"id": "q", "text": texts[77]}).matches[0].id == "x77"
        assert not d.check({"id": "q", "text": texts[50]}).duplicate
    with _dd(tmp_path) as d:
        assert len(d) == 294
        assert d.stats()["segment_rows"] < 300  # deleted rows were dropped by the merge
        assert d.check({"id": "q", "text": texts[299]}).matches[0].id == "x299"
    manifest = json.loads((tmp_path / "MANIFEST.json").read_text())["body"]
    assert {p.name for p in tmp_path.glob("seg-*.nds")} == {e["file"] for e in manifest["segments"]}


def test_close_right_after_a_flush_waits_for_the_merge_it_started(tmp_path, caplog):
    """A flush followed at once by close(): the writer's housekeeping may start a merge while
    close() begins. It must either not start or be joined; a merge started behind close()'s
    back ran against a closed store and logged a failure (every round, before the fix)."""
    texts = _texts(200, seed=5)
    for r in range(5):
        path = tmp_path / f"s{r}"
        with caplog.at_level("ERROR", logger="neardup"):
            d = Deduplicator.open(path, max_segments_per_partition=1, commit_interval_ms=0.0)
            for s in range(0, 200, 50):
                d.add([{"id": f"x{i}", "text": texts[i]} for i in range(s, s + 50)])
                d.flush()
            d.close()
        assert not [rec.getMessage() for rec in caplog.records]
        with Deduplicator.open(path) as d:
            assert len(d) == 200


def test_background_flush_is_searchable_and_durable(tmp_path):
    texts = _texts(600, seed=9)
    with _dd(tmp_path, memtable_size=150) as d:
        for s in range(0, 600, 50):
            d.check_and_add([{"id": f"x{i}", "text": texts[i]} for i in range(s, s + 50)])
            # every document is found whether it sits in the memtable, a frozen one or a segment
            assert d.check({"id": "q", "text": texts[s]}).matches[0].id == f"x{s}"
        d.flush()
        assert d.stats()["flushes"] >= 1
    with _dd(tmp_path) as d:
        assert len(d) == 600
        assert d.check({"id": "q", "text": texts[599]}).matches[0].id == "x599"


def test_crash_during_background_flush_replays_both_logs(tmp_path):
    texts = _texts(80, seed=11)
    d = _dd(tmp_path)
    d.add([{"id": f"x{i}", "text": texts[i]} for i in range(40)])
    from neardup.store.maintenance import begin_flush

    frozen = begin_flush(d.store._state)  # frozen memtable, segments never written
    d.add([{"id": f"x{i}", "text": texts[i]} for i in range(40, 80)])
    d.delete("x3")
    assert frozen.gens and len(list(tmp_path.glob("wal-*.log"))) == 2
    # the abandoned instance's threads outlive this simulated crash (a real one kills them):
    # its metadata applier, which lingers for more records, would otherwise commit to SQLite
    # while the reopened store replays (one CI-like full run failed here; not reproduced since)
    d.store.sync_meta()
    d._writer._closed = True  # crash: no close, no install
    d.store._state.wal.close()
    d.store._state.dir.unlock()
    with _dd(tmp_path) as d2:
        assert len(d2) == 79 and "x3" not in d2
        assert d2.check({"id": "q", "text": texts[10]}).matches[0].id == "x10"
        assert d2.check({"id": "q", "text": texts[70]}).matches[0].id == "x70"
    assert len(list(tmp_path.glob("wal-*.log"))) == 1
    with _dd(tmp_path) as d3:
        assert len(d3) == 79 and d3.stats()["replayed_records"] == 0


def test_compact_merges_every_crowded_partition_now(tmp_path):
    texts = _texts(240, seed=5)
    clock = [1_700_000_000.0]
    with _dd(tmp_path, max_segments_per_partition=1, partition_seconds=3600) as d:
        d._writer._compacting = True  # keep the background compactor out: compact() does the work
        for s in range(0, 240, 40):
            t = clock[0] + (s // 40 % 2) * 3600  # alternate between two partitions
            d.add([{"id": f"y{i}", "text": texts[i], "time": t} for i in range(s, s + 40)])
            d.flush()
        d.delete("y3")
        d._writer._compacting = False
        before = d.stats()
        assert before["segments"] == 6 and before["partitions"] == 2
        assert d.compact() >= 2
        after = d.stats()
        assert after["segments"] == 2 and after["segment_rows"] == 239
        assert d.check({"id": "q", "text": texts[123]}).matches[0].id == "y123"
        assert not d.check({"id": "q", "text": texts[3]}).duplicate
        assert d.compact() == 0
    with _dd(tmp_path) as d:
        assert len(d) == 239 and d.stats()["segments"] == 2


def test_no_background_merge_right_after_bulk_loads(tmp_path):
    rng = np.random.default_rng(4)
    with _dd(tmp_path, max_segments_per_partition=1, partition_seconds=86400) as d:
        for c in range(3):
            fps = rng.integers(0, 2**64, 300, dtype=np.uint64)
            d.bulk_load([f"b{c}-{i}" for i in range(300)], fps, np.full(300, 1.7e9))
        d.check({"id": "q", "text": "wake the writer"})
        assert d._writer._compactor is None and d.stats()["segments"] == 3
        assert d.compact() == 1 and d.stats()["segments"] == 1


def test_small_segments_merge_among_themselves_first(tmp_path):
    rng = np.random.default_rng(8)
    with _dd(tmp_path, max_segments_per_partition=2, partition_seconds=86400) as d:
        d.bulk_load([f"big{i}" for i in range(2000)], rng.integers(0, 2**64, 2000, np.uint64))
        for c in range(2):
            d.bulk_load([f"s{c}-{i}" for i in range(100)], rng.integers(0, 2**64, 100, np.uint64))
        d._writer._last_bulk = -1e9  # let the background policy run
        groups = d.store.compaction_candidates(2)
        assert [sorted(len(s.segment) for s in g) for g in groups] == [[100, 100]]
        d.compact()
        assert sorted(len(s.segment) for s in d.store._state.segments) == [200, 2000]
        for c in range(3):  # small ones now reach a quarter of the big one: merge everything
            d.bulk_load([f"t{c}-{i}" for i in range(100)], rng.integers(0, 2**64, 100, np.uint64))
        d.compact()
        assert [len(s.segment) for s in d.store._state.segments] == [2500]


def test_parallel_segment_search_equals_serial(tmp_path, monkeypatch):
    from neardup.store import engine

    rng = np.random.default_rng(12)
    with _dd(tmp_path, max_segments_per_partition=8) as d:
        base = rng.integers(0, 2**64, 400, dtype=np.uint64)
        for c in range(3):
            fps = base ^ np.uint64(1 << c)  # every chunk holds neighbours of the queries
            d.bulk_load([f"c{c}-{i}" for i in range(400)], fps)
        assert d.stats()["segments"] == 3
        q = base[:200].copy()
        monkeypatch.setattr(engine, "PARALLEL_QUERIES", 10**9)
        serial = d.store.search(q, 3)
        monkeypatch.setattr(engine, "PARALLEL_QUERIES", 1)
        monkeypatch.setattr(engine, "_SEARCH_THREADS", 2)
        parallel = d.store.search(q, 3)
        assert d.store._state.search_pool is not None
        for a, b in zip(serial, parallel, strict=True):
            np.testing.assert_array_equal(a, b)
        assert len(serial[1]) >= 600
