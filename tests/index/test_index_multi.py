"""IndexSet: one kernel call over several indexes = searching each and merging = brute force."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.errors import ConfigError
from neardup.index import HammingIndex
from neardup.index.multi import IndexSet
from neardup.index.reference import search_reference
from neardup.index.scan import merge_results


def _index(fps: np.ndarray, ids: np.ndarray, bits: int, state: str, tmp_path, name: str):
    idx = HammingIndex(bits=bits, max_distance=3, expected_size=max(len(ids), 16))
    if len(ids):
        idx.add(fps, ids=ids)
    if state == "flushed":
        idx.flush()
    elif state == "mmap":  # read-only arrays, as the store's segments are
        idx.flush()
        path = tmp_path / f"{name}.hidx"
        idx.save(path)
        idx = HammingIndex.load(path, mmap=True)
    elif state == "removed" and len(ids):
        idx.flush()
        idx.remove(ids[::3])
    # "buffered": rows left in the append buffer
    return idx


def _near(rng: np.random.Generator, base: np.ndarray, n: int, bits: int) -> np.ndarray:
    """``n`` fingerprints within 0-4 bits of rows of ``base`` (and a few random ones)."""
    words = 1 if bits == 64 else 2
    b = base.reshape(-1, words)
    q = b[rng.integers(0, len(b), n)].copy()
    for row in q:
        for _ in range(int(rng.integers(0, 5))):
            w = int(rng.integers(0, words))
            row[w] ^= np.uint64(1) << np.uint64(int(rng.integers(0, 64)))
    rand = rng.integers(0, 2**64, (max(1, n // 4), words), dtype=np.uint64)
    out = np.concatenate([q, rand])
    return out[:, 0].copy() if words == 1 else out


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    bits=st.sampled_from([64, 128]),
    sizes=st.lists(st.integers(0, 700), min_size=1, max_size=5),
    states=st.lists(st.sampled_from(["flushed", "mmap", "buffered", "removed"]), min_size=5),
    k=st.integers(0, 3),
    nq=st.integers(1, 40),
)
def test_index_set_equals_per_index_search_and_brute_force(
    tmp_path_factory, seed, bits, sizes, states, k, nq
):
    tmp_path = tmp_path_factory.mktemp("multi")
    rng = np.random.default_rng(seed)
    words = 1 if bits == 64 else 2
    # clustered data: many fingerprints share prefixes and lie within k of each other
    centers = rng.integers(0, 2**64, (8, words), dtype=np.uint64)
    indexes, all_fps, all_ids, start = [], [], [], 0
    for j, n in enumerate(sizes):
        fps = centers[rng.integers(0, 8, n)].copy()
        flips = rng.integers(0, 64, (n, 3))
        for c in range(3):
            fps[np.arange(n), rng.integers(0, words, n)] ^= np.uint64(1) << flips[:, c].astype(
                np.uint64
            )
        fps = fps[:, 0].copy() if words == 1 else fps
        ids = np.arange(start, start + n, dtype=np.int64)
        start += n + 1000
        idx = _index(fps, ids, bits, states[j], tmp_path, f"i{j}")
        indexes.append(idx)
        live = np.isin(ids, ids[::3], invert=True) if states[j] == "removed" else np.ones(n, bool)
        all_fps.append(fps[live])
        all_ids.append(ids[live])
    base = np.concatenate(all_fps) if start else np.zeros((0,) if words == 1 else (0, 2), np.uint64)
    queries = (
        _near(rng, base, nq, bits)
        if len(base)
        else rng.integers(0, 2**64, (nq,) if words == 1 else (nq, 2), dtype=np.uint64)
    )
    got = IndexSet(indexes).search(queries, k)
    merged = merge_results(len(queries), [ix.search(queries, k) for ix in indexes])
    for a, b in zip(got, merged, strict=True):
        np.testing.assert_array_equal(a, b)
    ref_fps = base.reshape(-1, words)
    ref = search_reference(
        ref_fps[:, 0] if words == 1 else ref_fps,
        np.concatenate(all_ids),
        queries,
        k,
    )
    for a, b in zip(got, ref, strict=True):
        np.testing.assert_array_equal(a, b)


def test_index_set_covers_table_segments_in_one_call_and_retries_full_outputs(tmp_path):
    rng = np.random.default_rng(3)
    fps = rng.integers(0, 2**64, 5000, dtype=np.uint64)
    a = _index(fps[:2500], np.arange(2500), 64, "mmap", tmp_path, "a")
    b = _index(fps[2500:], np.arange(2500, 5000), 64, "flushed", tmp_path, "b")
    one = IndexSet([a, b])
    assert one.segments >= 2 and len(one) == 5000
    # every query matches itself and 300 exact copies: far more than the first output guess
    dup = np.full(300, fps[7], dtype=np.uint64)
    c = _index(dup, np.arange(10_000, 10_300), 64, "flushed", tmp_path, "c")
    lims, ids, d = IndexSet([a, b, c]).search(fps[[7, 8]], 3)
    assert lims.tolist() == [0, 301, 302]
    assert ids[:301].tolist() == [7, *range(10_000, 10_300)] and not d[:301].any()
    assert ids[301] == 8


def test_index_set_errors():
    a = HammingIndex(bits=64, max_distance=3)
    b = HammingIndex(bits=128, max_distance=3)
    with pytest.raises(ConfigError, match="one width"):
        IndexSet([a, b])
    with pytest.raises(ConfigError, match="max_distance"):
        IndexSet([a]).search(np.zeros(1, np.uint64), 4)
    lims, ids, d = IndexSet([]).search(np.zeros(2, np.uint64), 3)
    assert lims.tolist() == [0, 0, 0] and len(ids) == 0 and len(d) == 0


# ---------------------------------------------------------------------------------------------
# background merges (HammingIndex(background_merges=True), the online store's memtable)


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    batches=st.lists(st.integers(1, 300), min_size=1, max_size=25),
    removes=st.lists(st.integers(0, 10_000), max_size=30),
)
def test_background_merges_keep_every_search_exact(seed, batches, removes):
    rng = np.random.default_rng(seed)
    idx = HammingIndex(
        bits=64, max_distance=3, buffer_size=64, background_merges=True, inline_merge_rows=0
    )
    ref_fps: list[np.ndarray] = []
    ref_ids: list[np.ndarray] = []
    start = 0
    gone: set[int] = set()
    for j, n in enumerate(batches):
        base = rng.integers(0, 2**64, 1, dtype=np.uint64)[0]
        fps = base ^ (np.uint64(1) << rng.integers(0, 64, n).astype(np.uint64))  # clustered
        ids = np.arange(start, start + n, dtype=np.int64)
        start += n
        idx.add(fps, ids=ids)
        ref_fps.append(fps)
        ref_ids.append(ids)
        if j < len(removes) and start and removes[j] % start not in gone:  # removals race merges
            victim = removes[j] % start
            idx.remove([victim])
            gone.add(victim)
        all_f = np.concatenate(ref_fps)
        all_i = np.concatenate(ref_ids)
        keep = ~np.isin(all_i, list(gone))
        q = all_f[rng.integers(0, len(all_f), 5)] ^ np.uint64(1)
        got = idx.search(q, 3)
        ref = search_reference(all_f[keep], all_i[keep], q, 3)
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_array_equal(a, b)
    assert idx.wait_merges(timeout=60)
    sizes = [s.n_live for s in idx.snapshot().segments]
    # merged down to the tiering rule: no adjacent pair within the merge factor
    assert all(sizes[i + 1] * 4 < sizes[i] for i in range(len(sizes) - 1)), sizes
    assert len(idx) == start - len(gone)


def test_live_arrays_stay_paired_beside_concurrent_removals():
    """The background merge reads a segment's live rows without the index lock while
    ``remove`` marks rows dead: fingerprints and ids must come from one mask (CI once saw
    a merge build from 224 fingerprints and 223 ids)."""
    rng = np.random.default_rng(7)
    n = 400_000
    idx = HammingIndex(bits=64, max_distance=3, buffer_size=n)
    idx.add(rng.integers(0, 2**64, n, dtype=np.uint64), ids=np.arange(n))
    idx.flush()
    (seg,) = idx.snapshot().segments
    victims = rng.permutation(n)[:20_000]
    stop = threading.Event()
    bad: list[tuple[int, int]] = []

    def read() -> None:
        while not stop.is_set():
            f, i = seg.live_arrays()
            if len(f) != len(i):
                bad.append((len(f), len(i)))

    t = threading.Thread(target=read)
    t.start()
    try:
        for v in victims:
            idx.remove([int(v)])
            if bad:
                break
    finally:
        stop.set()
        t.join()
    assert not bad, bad[:3]


def test_background_merges_do_not_block_add():
    idx = HammingIndex(bits=64, max_distance=3, buffer_size=1024, background_merges=True)
    rng = np.random.default_rng(0)
    idx.add(rng.integers(0, 2**64, 200_000, dtype=np.uint64))
    idx.add(rng.integers(0, 2**64, 60_000, dtype=np.uint64))  # a merge of 260k rows is now due
    assert idx._merger is not None  # running in the background, not inside add
    assert idx.wait_merges(timeout=120)
    assert [s.n for s in idx.snapshot().segments] == [260_000]
    small = HammingIndex(bits=64, max_distance=3, buffer_size=1024, background_merges=True)
    small.add(rng.integers(0, 2**64, 5000, dtype=np.uint64))  # small merges stay inline
    assert small._merger is None and len(small._segments) <= 2
    inline = HammingIndex(bits=64, max_distance=3, buffer_size=1024)
    assert inline.wait_merges(timeout=0)  # nothing to wait for without background merges


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_mem=st.integers(0, 3000), k=st.integers(0, 3))
def test_sealed_index_with_its_buffer_as_extra_rows_equals_searching_it(seed, n_mem, k):
    """The store's single-document path: segments + a live memtable's sealed runs in the set,
    its append buffer passed as extra rows, all in one call (also with an empty set)."""
    rng = np.random.default_rng(seed)
    center = rng.integers(0, 2**64, dtype=np.uint64)
    seg = HammingIndex(bits=64, max_distance=3)
    seg.add(center ^ (np.uint64(1) << rng.integers(0, 64, 900).astype(np.uint64)))
    mem = HammingIndex(bits=64, max_distance=3, buffer_size=256, background_merges=True)
    if n_mem:
        fps = center ^ (np.uint64(1) << rng.integers(0, 64, n_mem).astype(np.uint64))
        mem.add(fps, ids=np.arange(10_000, 10_000 + n_mem))
    q = center ^ (np.uint64(1) << rng.integers(0, 64, 6).astype(np.uint64))
    for indexes in ([seg], []):
        _v, bf, bi, ba = mem.buffer_rows()
        one = IndexSet(indexes, sealed=[mem])
        assert one.sealed_ok
        got = one.search(q, k, extra=(bf, bi, ba))
        ref = merge_results(len(q), [ix.search(q, k) for ix in [*indexes, mem]])
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_array_equal(a, b)
    if n_mem > 3:
        mem.remove([10_001])
        assert not IndexSet([seg], sealed=[mem]).sealed_ok or not mem._segments
