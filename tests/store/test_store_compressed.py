"""The store's ``compress_tables`` setting: segment indexes with compressed tables.

Every search is compared with :class:`neardup.index.scan.BruteIndex` (the pure NumPy
reference) over the rows the store holds, through flushes, merges, retention, log recovery and
reopens; the setting persists in the config body and old stores keep uncompressed indexes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from neardup.errors import ConfigError
from neardup.index.compressed import CompressedSegment
from neardup.index.scan import BruteIndex
from neardup.store import Store, StoreSettings, WriteGroup
from neardup.store.memindex import _FastIndex, compress_pays

RADIUS = 3
WIDTH = 3600.0
#: rows per segment: compressed tables need ~1,000 or more (compress_pays; smaller ones stay plain)
N = 9000
#: rows of a segment too small for compressed tables
SMALL = 500


def _rows(n: int, bits: int, seed: int) -> np.ndarray:
    """Random fingerprints with planted near duplicates (a few bits flipped)."""
    rng = np.random.default_rng(seed)
    shape = (n,) if bits == 64 else (n, 2)
    fps = rng.integers(0, 2**64, shape, dtype=np.uint64)
    src = rng.integers(0, n, n // 3)
    dst = rng.integers(0, n, n // 3)
    flip = np.uint64(1) << rng.integers(0, 64, n // 3).astype(np.uint64)
    if bits == 64:
        fps[dst] = fps[src] ^ flip
    else:
        fps[dst] = fps[src]
        fps[dst, 1] ^= flip
    return fps


def _queries(fps: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = fps[rng.integers(0, len(fps), 150)].copy()
    col = q if q.ndim == 1 else q[:, 0]
    col ^= np.uint64(1) << rng.integers(0, 64, len(q)).astype(np.uint64)
    return np.concatenate([q, _rows(50, 64 if fps.ndim == 1 else 128, seed + 1)])


def _pairs(res) -> set[tuple[int, int, int]]:
    lims, ids, ds = res
    qi = np.repeat(np.arange(len(lims) - 1), np.diff(lims))
    return set(zip(qi.tolist(), ids.tolist(), ds.tolist(), strict=True))


def _check(st: Store, fps: np.ndarray, rids: np.ndarray, q: np.ndarray) -> None:
    got = _pairs(st.search(q, RADIUS))
    want = _pairs(BruteIndex(fps, rids).search(q, RADIUS))
    assert got == want and want


def _compressed(st: Store) -> list[bool]:
    out = []
    for s in st._state.segments:
        assert isinstance(s.index, _FastIndex)
        out.append(any(isinstance(x, CompressedSegment) for x in s.index.index.snapshot().segments))
    return out


def _bulk(st: Store, fps: np.ndarray, times: np.ndarray, tag: str) -> np.ndarray:
    start = st.next_rowid
    st.bulk_add([f"{tag}{i}" for i in range(len(fps))], fps, times)
    return np.arange(start, start + len(fps), dtype=np.int64)


def _config(path: Path) -> dict:
    return json.loads((path / "config.json").read_text())["body"]


@pytest.mark.parametrize("bits", [64, 128])
def test_segments_compressed_search_exact_and_setting_kept_on_reopen(tmp_path, bits):
    fps = _rows(2 * N, bits, 1)
    times = np.where(np.arange(2 * N) % 2 == 0, 10.0, WIDTH + 10.0)  # two partitions
    q = _queries(fps, 2)
    st = Store(
        tmp_path,
        StoreSettings(partition_seconds=WIDTH, compress_tables=True),
        bits=bits,
        radius=RADIUS,
    )
    try:
        rids = _bulk(st, fps, times, "a")
        # 128-bit compressed tables keep fingerprints and rows: under the planner's default
        # cap they never beat brute force, so those segments keep uncompressed tables
        on = compress_pays(N, bits=bits, max_distance=RADIUS)
        assert on == (bits == 64)
        assert (
            st.settings.compress_tables
            and len(st._state.segments) == 2
            and _compressed(st) == [on, on]
        )
        _check(st, fps, rids, q)
    finally:
        st.close()
    body = _config(tmp_path)
    assert body["store"]["compress_tables"] is True and body["store"]["table_block_bytes"] == 256
    sides = sorted(tmp_path.glob("*.hidx"))
    stamps = [p.stat().st_mtime_ns for p in sides]
    st = Store(
        tmp_path, StoreSettings(partition_seconds=WIDTH), bits=bits, radius=RADIUS
    )  # None: stored
    try:
        assert st.settings.compress_tables and _compressed(st) == [on, on]
        assert [p.stat().st_mtime_ns for p in sides] == stamps  # loaded, not rebuilt
        assert all(s.index.index.read_only for s in st._state.segments)  # mmapped
        _check(st, fps, rids, q)
    finally:
        st.close()


def test_old_store_stays_uncompressed_and_switching_rebuilds(tmp_path):
    fps = _rows(N, 64, 3)
    times = np.full(N, 10.0)
    q = _queries(fps, 4)
    st = Store(tmp_path, StoreSettings(partition_seconds=WIDTH), bits=64, radius=RADIUS)
    try:
        rids = _bulk(st, fps, times, "a")
        assert not st.settings.compress_tables and _compressed(st) == [False]
    finally:
        st.close()
    assert _config(tmp_path)["store"]["compress_tables"] is False  # kept with the data
    st = Store(
        tmp_path,
        StoreSettings(partition_seconds=WIDTH, compress_tables=True),
        bits=64,
        radius=RADIUS,
    )
    try:
        assert _compressed(st) == [True]  # the side file was rebuilt compressed
        _check(st, fps, rids, q)
    finally:
        st.close()
    st = Store(
        tmp_path,
        StoreSettings(partition_seconds=WIDTH, compress_tables=False),
        bits=64,
        radius=RADIUS,
    )
    try:
        assert _compressed(st) == [False]
        _check(st, fps, rids, q)
    finally:
        st.close()
    assert _config(tmp_path)["store"]["compress_tables"] is False


def test_check_config_body_without_the_setting_keeps_the_stored_one(tmp_path):
    """The online layer returns a fresh body on every open (without the store's section, which
    the store writes itself); the stored setting survives it."""

    def check(stored):
        return {"format": 1}

    fps = _rows(N, 64, 5)
    st = Store(tmp_path, StoreSettings(partition_seconds=WIDTH, compress_tables=True, table_block_bytes=512), bits=64, radius=RADIUS, check_config=check)  # fmt: skip
    try:
        rids = _bulk(st, fps, np.full(N, 10.0), "a")
    finally:
        st.close()
    st = Store(
        tmp_path, StoreSettings(partition_seconds=WIDTH), bits=64, radius=RADIUS, check_config=check
    )
    try:
        assert (
            st.settings.compress_tables
            and st.settings.table_block_bytes == 512
            and _compressed(st) == [True]
        )
        assert st._state.segments[0].index.index.block_bytes == 512
        _check(st, fps, rids, _queries(fps, 6))
    finally:
        st.close()
    assert _config(tmp_path) == {
        "format": 1,
        "store": {
            "version": 1,
            "partition_seconds": WIDTH,
            "partition_origin": 0.0,
            "retention": None,
            "compress_tables": True,
            "table_block_bytes": 512,
        },
    }


def test_flush_merge_retention_and_log_recovery(tmp_path):
    assert not compress_pays(SMALL, bits=64, max_distance=RADIUS)
    fps = _rows(2 * N + SMALL, 64, 7)
    q = _queries(fps, 8)

    def log_rows(st: Store, f: np.ndarray, t: float) -> np.ndarray:
        g = WriteGroup()
        start = st.allocate(len(f))
        for i, v in enumerate(f.tolist()):
            g.add(start + i, t, v, 0, bytes(16), False, f"l{start + i}", None, None)
        rids = np.arange(start, start + len(f), dtype=np.int64)
        g.set_added(f, rids, np.full(len(f), t))
        unsynced = st.append_group(g)
        assert unsynced is not None
        st.sync_log([unsynced])
        return rids

    st = Store(
        tmp_path,
        StoreSettings(partition_seconds=WIDTH, compress_tables=True),
        bits=64,
        radius=RADIUS,
    )
    try:
        r1 = _bulk(st, fps[:N], np.full(N, 10.0), "a")
        r2 = log_rows(st, fps[N : 2 * N], 20.0)  # through the log and the memtable
        st.flush()
        assert len(st._state.segments) == 2 and _compressed(st) == [True, True]
        _check(st, fps[: 2 * N], np.concatenate([r1, r2]), q)
        (group,) = st.compaction_candidates(1)
        assert st.install_merged(group, st.build_merged(group))
        assert len(st._state.segments) == 1 and _compressed(st) == [True]
        _check(st, fps[: 2 * N], np.concatenate([r1, r2]), q)
        r3 = log_rows(st, fps[2 * N :], 2 * WIDTH + 5)  # a later partition, left in the log
    finally:
        st.close()
    st = Store(tmp_path, StoreSettings(partition_seconds=WIDTH), bits=64, radius=RADIUS)
    try:
        assert len(st._state.memtable) == SMALL  # replayed from the log
        _check(st, fps, np.concatenate([r1, r2, r3]), q)
        st.flush()
        # a small segment keeps uncompressed tables (compressed, the planner would scan it)
        assert _compressed(st) == [True, False]
        # retention drops the first partition (a batch of rows a call: EXPIRY_BATCH_ROWS)
        assert sum(iter(lambda: st.expire(WIDTH + 1), 0)) == 2 * N
        assert len(st._state.segments) == 1
        _check(st, fps[2 * N :], r3, q)
    finally:
        st.close()


def test_bad_settings_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="compress_tables"):
        Store(
            tmp_path / "a",
            StoreSettings(partition_seconds=WIDTH, compress_tables="yes"),
            bits=64,
            radius=3,
        )  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="block_bytes"):
        Store(
            tmp_path / "b",
            StoreSettings(partition_seconds=WIDTH, table_block_bytes=7),
            bits=64,
            radius=3,
        )
    st = Store(
        None, StoreSettings(partition_seconds=WIDTH, compress_tables=True), bits=64, radius=3
    )
    assert st.settings.compress_tables and st.stats()["compress_tables"]
    st.close()


def test_damaged_compressed_side_file_is_rebuilt(tmp_path, caplog):
    """A flipped byte in a compressed ``.hidx`` fails its checksum on open; the index is
    derived data, so it is rebuilt from the verified segment and searches stay exact."""
    fps = _rows(N, 64, 9)
    st = Store(
        tmp_path,
        StoreSettings(partition_seconds=WIDTH, compress_tables=True),
        bits=64,
        radius=RADIUS,
    )
    try:
        rids = _bulk(st, fps, np.full(N, 10.0), "a")
    finally:
        st.close()
    (side,) = tmp_path.glob("*.hidx")
    data = bytearray(side.read_bytes())
    data[len(data) // 2] ^= 0x10
    side.write_bytes(bytes(data))
    with caplog.at_level("WARNING", logger="neardup.store"):
        st = Store(tmp_path, StoreSettings(partition_seconds=WIDTH), bits=64, radius=RADIUS)
    try:
        assert "unusable index" in caplog.text and "checksum mismatch" in caplog.text
        assert _compressed(st) == [True]
        _check(st, fps, rids, _queries(fps, 10))
    finally:
        st.close()


def test_warm_up_with_compressed_tables_leaves_no_data(tmp_path):
    """warm_up builds and searches a compressed index of its own (forced table layout: the
    planner plans brute force for so few rows) and leaves the store as it was."""
    st = Store(
        tmp_path,
        StoreSettings(partition_seconds=WIDTH, compress_tables=True),
        bits=64,
        radius=RADIUS,
    )
    try:
        st.warm_up()
        assert not st._state.segments and len(st._state.memtable) == 0 and len(st) == 0
    finally:
        st.close()


def test_deduplicator_and_serve_config_carry_the_setting(tmp_path):
    """``Deduplicator.open(compress_tables=True)`` reaches the store, persists, and decides as an
    uncompressed one does (SimHash channel, documents flushed into a compressed segment)."""
    from neardup.online.deduplicator import Deduplicator
    from neardup.online.settings import DedupSettings
    from neardup.service.config import ServiceConfig
    from neardup.service.namespaces import NamespaceRegistry

    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(3000)]
    texts = [" ".join(rng.choice(words, 40)) for _ in range(N + 500)]
    docs = [{"id": str(i), "text": t} for i, t in enumerate(texts)]
    edits = [{"id": f"q{i}", "text": texts[i] + " extra"} for i in range(0, N, 97)]
    decisions = {}
    for on in (True, False):
        path = tmp_path / str(on)
        with Deduplicator.open(path, candidates="simhash", compress_tables=on) as d:
            d.add(docs)
            d.flush()
            assert _compressed(d.store) == [on]
            decisions[on] = [(x.duplicate, [m.id for m in x.matches]) for x in d.check(edits)]
        with Deduplicator.open(path) as d:  # reopened without the option: the stored setting
            assert d.store.settings.compress_tables is on and _compressed(d.store) == [on]
    assert decisions[True] == decisions[False]
    # k = 3 finds a share of the one-word edits (the simhash mode's known recall)
    assert sum(dup for dup, _ in decisions[True]) > 0
    # the service passes it to every namespace's store (``neardup serve --compress-tables``)
    compress = DedupSettings(store=StoreSettings(compress_tables=True))
    reg = NamespaceRegistry(ServiceConfig(data_dir=tmp_path / "svc", dedup=compress))
    reg.open()
    try:
        reg.create("x")
        assert reg.get("x").store.settings.compress_tables is True
    finally:
        reg.close()
