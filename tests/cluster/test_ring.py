"""neardup.cluster.ring: the consistent-hash ring (definition, monotonicity, replicas, errors)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.cluster.ring import HashRing, _xxh64_u64, key_hash, key_hash_many
from neardup.errors import ConfigError, InputTypeError, NotFoundError

VN = 48  # small rings keep the property tests fast; the definition does not depend on it

node_names = st.lists(
    st.text(alphabet="abcdefghij-0123456789", min_size=1, max_size=8),
    min_size=1,
    max_size=7,
    unique=True,
)
u64 = st.integers(min_value=0, max_value=2**64 - 1)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _keys(n: int = 3000, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)


# -- the documented hash ---------------------------------------------------------------------
@given(st.lists(u64, min_size=1, max_size=50), st.integers(0, 2**64 - 1))
@SETTINGS
def test_vectorized_xxh64_equals_xxhash(values, seed):
    got = _xxh64_u64(np.array(values, dtype=np.uint64), seed).tolist()
    want = [xxhash.xxh64_intdigest(v.to_bytes(8, "little"), seed) for v in values]
    assert got == want


def test_key_hash_definition():
    assert key_hash("héllo") == xxhash.xxh64_intdigest("héllo".encode())
    assert key_hash(b"abc") == xxhash.xxh64_intdigest(b"abc")
    assert key_hash(7) == xxhash.xxh64_intdigest((7).to_bytes(8, "little"))
    assert key_hash_many(np.array([7, 8], dtype=np.uint64)).tolist() == [key_hash(7), key_hash(8)]
    assert key_hash_many(["a", b"b", 3]).tolist() == [key_hash("a"), key_hash(b"b"), key_hash(3)]


@pytest.mark.parametrize("bad", [-1, 2**64, 1.5, None, True])
def test_bad_keys_are_refused(bad):
    ring = HashRing(["a", "b"], vnodes=VN)
    with pytest.raises((ConfigError, InputTypeError)):
        ring.node_for(bad)
    with pytest.raises(ConfigError):
        ring.index_for_many(np.array([-1, 2], dtype=np.int64))


# -- lookups -----------------------------------------------------------------------------------
@given(node_names, st.lists(u64, min_size=1, max_size=200))
@SETTINGS
def test_batch_equals_scalar_and_positions(names, keys):
    ring = HashRing(names, vnodes=VN)
    snap = ring.snapshot()
    arr = np.array(keys, dtype=np.uint64)
    idx = ring.index_for_many(arr)
    assert [snap.nodes[i] for i in idx] == [ring.node_for(k) for k in keys]
    # the reference: searchsorted over the sorted points, wrapping past the last
    pos = np.searchsorted(snap.points, key_hash_many(arr), side="left") % len(snap.points)
    assert snap.index_for_many(arr).tolist() == snap._owner[pos].tolist()
    strs = [f"doc-{k}" for k in keys[:50]]
    assert snap.node_for_many(strs) == [snap.node_for(s) for s in strs]


@given(node_names, st.lists(u64, min_size=1, max_size=60), st.integers(1, 7))
@SETTINGS
def test_nodes_for_distinct_owner_first_and_batch(names, keys, n):
    ring = HashRing(names, vnodes=VN)
    if n > len(names):
        with pytest.raises(ConfigError, match="only"):
            ring.nodes_for(keys[0], n)
        return
    snap = ring.snapshot()
    table = snap.indices_for_many(np.array(keys, dtype=np.uint64), n)
    for k, row in zip(keys, table, strict=True):
        reps = ring.nodes_for(k, n)
        assert len(set(reps)) == n
        assert reps[0] == ring.node_for(k)
        assert reps == tuple(snap.nodes[i] for i in row)
        # replicas are a prefix of each other: R=2 is the first two of R=3
        assert ring.nodes_for(k, 1) == reps[:1]


def test_insertion_order_and_weights_do_not_matter_for_others():
    a = HashRing(["n1", "n2", "n3"], vnodes=VN)
    b = HashRing(["n3", "n1"], vnodes=VN)
    b.add_node("n2")
    keys = _keys(2000)
    assert a.index_for_many(keys).tolist() == b.index_for_many(keys).tolist()


def test_same_mapping_in_another_process():
    keys = [f"k{i}" for i in range(300)]
    ring = HashRing(["alpha", "beta", "gamma", "delta"], vnodes=VN)
    code = (
        "from neardup.cluster.ring import HashRing\n"
        f"r = HashRing(['delta', 'gamma', 'beta', 'alpha'], vnodes={VN})\n"
        "print(','.join(r.node_for(f'k{i}') for i in range(300)))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip().split(",") == [ring.node_for(k) for k in keys]


# -- monotonicity and exact moves --------------------------------------------------------------
def _owners(ring: HashRing, keys: np.ndarray) -> list[str]:
    snap = ring.snapshot()
    return [snap.nodes[i] for i in snap.index_for_many(keys)]


def _in_ranges(h: int, ranges) -> list:
    return [r for r in ranges if r.lo <= h <= r.hi]


@given(node_names, st.text(alphabet="xyz", min_size=1, max_size=5), st.integers(0, 10**6))
@SETTINGS
def test_add_node_moves_only_to_it_and_reports_exactly(names, new, seed):
    if new in names:
        return
    ring = HashRing(names, vnodes=VN)
    keys = _keys(1500, seed)
    before = _owners(ring, keys)
    moves = ring.add_node(new)
    after = _owners(ring, keys)
    hashes = key_hash_many(keys).tolist()
    for h, b, a in zip(hashes, before, after, strict=True):
        assert a in (b, new)
        hit = _in_ranges(h, moves)
        if a != b:
            assert len(hit) == 1 and hit[0].src == (b,) and hit[0].dst == (new,)
        else:
            assert not hit
    assert all(m.dst == (new,) and m.lo <= m.hi for m in moves)
    # ranges are disjoint and sorted
    assert all(x.hi < y.lo for x, y in itertools.pairwise(moves))


@given(node_names, st.integers(0, 10**6))
@SETTINGS
def test_remove_node_moves_only_its_keys(names, seed):
    if len(names) < 2:
        return
    ring = HashRing(names, vnodes=VN)
    gone = names[seed % len(names)]
    keys = _keys(1500, seed)
    before = _owners(ring, keys)
    moves = ring.remove_node(gone)
    after = _owners(ring, keys)
    for h, b, a in zip(key_hash_many(keys).tolist(), before, after, strict=True):
        assert (a == b) == (b != gone)
        assert bool(_in_ranges(h, moves)) == (b == gone)
    assert all(m.src == (gone,) for m in moves)


@given(node_names, st.integers(0, 10**6))
@SETTINGS
def test_replica_moves_with_two_replicas_are_exact(names, seed):
    if len(names) < 2:
        return
    ring = HashRing(names, vnodes=VN)
    keys = _keys(800, seed)
    before = [ring.nodes_for(int(k), 2) for k in keys]
    moves = ring.add_node("zz-new", replicas=2)
    after = [ring.nodes_for(int(k), 2) for k in keys]
    for k, b, a in zip(keys.tolist(), before, after, strict=True):
        hit = _in_ranges(key_hash(k), moves)
        assert bool(hit) == (a != b)
        if hit:
            assert hit[0].src == b and hit[0].dst == a and "zz-new" in a
            # replicas only move to the new node: the old set minus one plus the new node
            assert len(set(b) - set(a)) <= 1


def test_fraction_moved_is_close_to_ideal():
    names = [f"node-{i}" for i in range(20)]
    ring = HashRing(names)  # default vnodes: the documented balance
    moves = ring.add_node("node-new")
    moved = sum(m.fraction for m in moves)
    assert moved == pytest.approx(1 / 21, rel=0.05)
    back = ring.remove_node("node-new")
    assert sum(m.fraction for m in back) == pytest.approx(moved)


# -- weights and balance -----------------------------------------------------------------------
def test_weights_are_proportional_and_small_nodes_are_not_starved():
    ring = HashRing(["big", "mid", "tiny"], vnodes=1024, weights={"big": 4, "mid": 1, "tiny": 0.05})
    sh = ring.shares()
    assert sh["big"] / sh["mid"] == pytest.approx(4, rel=0.15)
    assert 0.3 * 0.05 / 5.05 < sh["tiny"] < 3 * 0.05 / 5.05
    assert sum(sh.values()) == pytest.approx(1.0)
    keys = _keys(20000)
    assert "tiny" in set(_owners(ring, keys))


def test_set_weight_moves_only_that_node():
    ring = HashRing(["a", "b", "c"], vnodes=VN)
    keys = _keys(2000)
    before = _owners(ring, keys)
    moves = ring.set_weight("b", 3.0)
    after = _owners(ring, keys)
    assert all(a == b or a == "b" for a, b in zip(after, before, strict=True))
    assert all(m.dst == ("b",) for m in moves)


# -- bad input -------------------------------------------------------------------------------
@pytest.mark.parametrize("w", [0, -1, float("nan"), float("inf"), "2"])
def test_bad_weights(w):
    with pytest.raises(ConfigError, match="weight"):
        HashRing(["a"], weights={"a": w})
    ring = HashRing(["a"], vnodes=VN)
    with pytest.raises(ConfigError, match="weight"):
        ring.add_node("b", w)


def test_bad_membership():
    with pytest.raises(ConfigError, match="duplicate node name 'a'"):
        HashRing(["a", "b", "a"])
    with pytest.raises(ConfigError, match="not in the ring"):
        HashRing(["a"], weights={"b": 2})
    with pytest.raises(ConfigError, match="non-empty string"):
        HashRing(["a", ""])
    with pytest.raises(ConfigError, match="list of node names"):
        HashRing("abc")
    with pytest.raises(ConfigError, match="vnodes"):
        HashRing(["a"], vnodes=0)
    ring = HashRing(["a", "b"], vnodes=VN)
    with pytest.raises(ConfigError, match="already in the ring"):
        ring.add_node("a")
    with pytest.raises(NotFoundError, match="'zz' is not in the ring"):
        ring.remove_node("zz")
    with pytest.raises(ConfigError, match="only 2"):
        ring.nodes_for("k", 3)
    with pytest.raises(ConfigError, match="positive"):
        ring.nodes_for("k", 0)
    with pytest.raises(ConfigError, match="no nodes"):
        HashRing([]).node_for("k")
    with pytest.raises(ConfigError, match="points"):
        HashRing(["a"], vnodes=10**9)
    assert ring.nodes == ("a", "b")  # the failed writes changed nothing


# -- concurrency -------------------------------------------------------------------------------
def test_readers_see_whole_snapshots_while_writers_change_the_ring():
    ring = HashRing([f"n{i}" for i in range(4)], vnodes=VN)
    stop = threading.Event()
    errors: list[str] = []

    def reader() -> None:
        keys = _keys(64)
        while not stop.is_set():
            snap = ring.snapshot()
            got = [snap.nodes[i] for i in snap.index_for_many(keys)]
            if got != [snap.node_for(int(k)) for k in keys]:
                errors.append("snapshot changed under a reader")
            if not set(got) <= set(snap.nodes):
                errors.append("owner outside the snapshot's nodes")
            time.sleep(0.001)  # leave the GIL to the writers (a spinning reader starves them)

    def writer(tag: str) -> None:
        for i in range(15):
            ring.add_node(f"{tag}{i}")
            ring.remove_node(f"{tag}{i}")

    readers = [threading.Thread(target=reader) for _ in range(2)]
    writers = [threading.Thread(target=writer, args=(t,)) for t in "xy"]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not errors
    assert ring.nodes == ("n0", "n1", "n2", "n3")
