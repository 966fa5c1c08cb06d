"""HammingIndex and all_pairs agree exactly with the NumPy brute force (ids, distances, order)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import neardup
from neardup.errors import ConfigError, IndexStateError, InputError, InputTypeError, NotFoundError
from neardup.index import HammingIndex, Plan, all_pairs, plan_index
from neardup.index.plan import radius_for
from neardup.index.reference import all_pairs_reference, search_reference

# layouts exercised everywhere: the planner's choice plus forced ones
LAYOUTS = [
    {},
    {"layout": "brute"},
    {"layout": "two-level"},
    {"blocks": 5, "prefix_blocks": 2},
    {"blocks": 2, "prefix_blocks": 1},  # multi-index hashing, radius 1
    {"blocks": 4, "prefix_blocks": 1, "heavy_bucket": 1},  # descent everywhere
]


def _flip(
    rng: np.random.Generator, fps: np.ndarray, max_flips: int, *, exact: bool = False
) -> np.ndarray:
    """Copy of ``fps`` with 0..max_flips (or exactly max_flips) random bits flipped per row."""
    out = fps.copy()
    bits = 64 * (1 if fps.ndim == 1 else 2)
    for i in range(len(out)):
        nf = max_flips if exact else int(rng.integers(0, max_flips + 1))
        for b in rng.choice(bits, nf, replace=False):
            if fps.ndim == 1:
                out[i] ^= np.uint64(1) << np.uint64(b)
            else:
                out[i, b // 64] ^= np.uint64(1) << np.uint64(b % 64)
    return out


def make_set(kind: str, n: int, bits: int, seed: int, k: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = (n,) if bits == 64 else (n, 2)
    rand = rng.integers(0, 2**64, shape, dtype=np.uint64)
    if kind == "random":
        return rand
    if kind == "clustered":  # few centers, members within 2k bits
        centers = rand[: max(n // 50, 1)]
        return _flip(rng, centers[rng.integers(0, len(centers), n)], 2 * k)
    if kind == "duplicates":  # many exact copies, incl. the all-zero "empty page"
        out = rand[rng.integers(0, max(n // 10, 1), n)]
        out[: n // 4] = 0
        return out
    if kind == "adversarial":  # shared high block (one heavy bucket), flips at block edges
        base = rand.copy()
        if bits == 64:
            base &= np.uint64(0x0000FFFFFFFFFFFF)
            base |= np.uint64(0xABCD) << np.uint64(48)
        else:
            base[:, 0] = np.uint64(0xDEADBEEF00000000) | (base[:, 0] & np.uint64(0xFFFFFFFF))
        edges = [15, 16, 31, 32, 47, 48, 63][:7]
        for i in range(0, n, 3):
            for b in rng.choice(edges, k, replace=False):
                if bits == 64:
                    base[i] ^= np.uint64(1) << np.uint64(b)
                else:
                    base[i, 0] ^= np.uint64(1) << np.uint64(b)
        return base
    raise ValueError(kind)


def queries_for(fps: np.ndarray, seed: int, k: int, nq: int = 120) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    planted = fps[rng.integers(0, len(fps), nq)]
    parts = [planted[i :: (k + 2)] for i in range(k + 2)]
    qs = [_flip(rng, p, d, exact=True) for d, p in enumerate(parts[: k + 1])]  # every distance 0..k
    qs.append(_flip(rng, parts[k + 1], k + 1, exact=True))  # just outside
    shape = (nq,) if fps.ndim == 1 else (nq, 2)
    qs.append(rng.integers(0, 2**64, shape, dtype=np.uint64))
    return np.concatenate(qs)


def assert_same(got, want) -> None:
    for g, w, name in zip(got, want, ("lims", "ids", "distances"), strict=True):
        np.testing.assert_array_equal(g, w, err_msg=name)
    assert got[0].dtype == np.int64 and got[1].dtype == np.int64 and got[2].dtype == np.int32


@pytest.mark.parametrize("bits", [64, 128])
@pytest.mark.parametrize("kind", ["random", "clustered", "duplicates", "adversarial"])
@pytest.mark.parametrize("layout", range(len(LAYOUTS)))
def test_search_matches_brute_force(bits: int, kind: str, layout: int) -> None:
    k = 3
    fps = make_set(kind, 1500, bits, seed=layout * 7 + bits)
    idx = HammingIndex(
        bits=bits, max_distance=k, expected_size=len(fps), buffer_size=256, **LAYOUTS[layout]
    )
    idx.add(fps[:1000])
    for s in range(1000, len(fps), 100):  # small batches: buffer, segments, merges
        idx.add(fps[s : s + 100])
    q = queries_for(fps, layout, k)
    ids = np.arange(len(fps))
    for kk in range(k + 1):
        assert_same(idx.search(q, kk), search_reference(fps, ids, q, kk))


@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 400),
    k=st.integers(0, 6),
    bits=st.sampled_from([64, 128]),
    kind=st.sampled_from(["random", "clustered", "duplicates", "adversarial"]),
    layout=st.sampled_from([None, "brute", "tables"]),
)
def test_property_any_k(
    seed: int, n: int, k: int, bits: int, kind: str, layout: str | None
) -> None:
    fps = (
        make_set(kind, n, bits, seed, k=max(k, 1))
        if n
        else np.zeros((0,) if bits == 64 else (0, 2), np.uint64)
    )
    idx = HammingIndex(
        bits=bits, max_distance=k, expected_size=max(n, 1) * 1000, layout=layout, buffer_size=64
    )
    idx.add(fps)
    q = queries_for(fps, seed, k, nq=20) if n else fps
    assert_same(idx.search(q), search_reference(fps, np.arange(n), q, k))


@given(
    seed=st.integers(0, 2**32 - 1),
    ops=st.lists(st.sampled_from(["add", "big", "remove", "flush"]), max_size=12),
)
def test_interleaved_add_remove_merge(seed: int, ops: list[str]) -> None:
    rng = np.random.default_rng(seed)
    pool = make_set("clustered", 3000, 64, seed)
    idx = HammingIndex(max_distance=3, expected_size=3000, buffer_size=32, merge_factor=2)
    live: dict[int, int] = {}
    next_id = 1000
    for op in ops:
        if op in ("add", "big"):
            m = int(rng.integers(1, 20 if op == "add" else 300))
            ids = np.arange(next_id, next_id + m) * 3
            next_id += m
            f = pool[rng.integers(0, len(pool), m)]
            idx.add(f, ids)
            live.update(zip(ids.tolist(), f.tolist(), strict=True))
        elif op == "remove" and live:
            victims = rng.choice(list(live), min(len(live), 25), replace=False)
            assert idx.remove(np.append(victims, -5)) == len(victims)
            for v in victims.tolist():
                del live[v]
        else:
            idx.flush()
        assert len(idx) == len(live)
    ids = np.array(list(live), dtype=np.int64)
    fps = np.array(list(live.values()), dtype=np.uint64)
    q = queries_for(pool, seed, 3, nq=30)
    assert_same(idx.search(q), search_reference(fps, ids, q, 3))
    if len(ids):
        assert int(ids[0]) in idx
        np.testing.assert_array_equal(idx.get(ids), fps)


def test_search_one_and_verbs() -> None:
    idx = HammingIndex(max_distance=3, expected_size=100)
    assert idx.add(np.array([0b1011, 0b1111, (1 << 40) - 1], dtype=np.uint64)).tolist() == [0, 1, 2]
    assert idx.search_one(0b0011) == [(0, 1), (1, 2)]
    assert idx.search_one(0b0011, max_distance=1) == [(0, 1)]
    assert len(idx) == 3 and 1 in idx and 7 not in idx and "x" not in idx
    assert idx.add([0xF << 60], ids=[100]).tolist() == [100]
    assert idx.add([0xF << 56]).tolist() == [101]  # the counter continues past explicit ids
    assert idx.remove([0, 0, 999]) == 1
    assert 0 not in idx and len(idx) == 4
    assert idx.search_one(0b0011) == [(1, 2)]
    assert idx.get([100, 1]).tolist() == [0xF << 60, 0b1111]
    with pytest.raises(NotFoundError, match=r"\[0\]"):
        idx.get([0])
    idx.add([0b0011], ids=[0])  # a removed id can be reused
    assert idx.search_one(0b0011)[0] == (0, 0)
    idx.optimize()
    assert idx.search_one(0b0011) == [(0, 0), (1, 2)]
    assert "exact up to k=3" in idx.describe()


def test_128_bit_same_api() -> None:
    idx = HammingIndex(bits=128, max_distance=4, expected_size=1000)
    a = (1 << 127) | 5
    fps = np.array([[1 << 63, 5], [0, 0xFF], [(1 << 63) | 1, 4]], dtype=np.uint64)
    idx.add(fps)
    assert idx.search_one(a) == [(0, 0), (2, 2)]
    assert idx.search_one(np.array([1 << 63, 5], dtype=np.uint64)) == [(0, 0), (2, 2)]
    _lims, ids, d = idx.search(fps[:1])
    assert ids.tolist() == [0, 2] and d.tolist() == [0, 2]
    assert idx.get([2]).tolist() == [[(1 << 63) | 1, 4]]


def test_all_pairs_matches_reference() -> None:
    for kind, bits in [("clustered", 64), ("duplicates", 64), ("random", 128), ("adversarial", 64)]:
        fps = make_set(kind, 800, bits, seed=3)
        for k in (0, 3, 5):
            want = all_pairs_reference(fps, k)
            for heavy in (1, 1024):  # descent everywhere / plain bucket joins
                got = all_pairs(fps, k, heavy=heavy)
                for g, w in zip(got, want, strict=True):
                    np.testing.assert_array_equal(g, w)
    fps = make_set("clustered", 300, 64, seed=4)
    ids = np.arange(300)[::-1] * 10
    a, b, d = all_pairs(fps, 3, ids=ids)
    pa, pb, pd = all_pairs(fps, 3)
    assert (a < b).all()
    assert sorted(zip(a.tolist(), b.tolist(), d.tolist(), strict=False)) == sorted(
        (min(ids[x], ids[y]), max(ids[x], ids[y]), z) for x, y, z in zip(pa, pb, pd, strict=True)
    )
    assert list(zip(a.tolist(), b.tolist(), strict=False)) == sorted(
        zip(a.tolist(), b.tolist(), strict=False)
    )
    assert neardup.all_pairs is all_pairs and neardup.HammingIndex is HammingIndex


@pytest.mark.parametrize("pieces", [1, 4, 64])
def test_all_pairs_split_tables_match_reference(
    monkeypatch: pytest.MonkeyPatch, pieces: int
) -> None:
    """Tables cut into bucket-aligned row ranges (forced here at small n) give the same pairs;
    the cut covers every row of every table once, on bucket boundaries."""
    from neardup.index import allpairs as AP
    from neardup.index.tables import TableSegment

    monkeypatch.setattr(AP, "SPLIT_MIN_ROWS", 0)
    monkeypatch.setattr(AP, "PIECES_PER_THREAD", pieces)
    split = 0
    for kind, bits in [("clustered", 64), ("duplicates", 64), ("random", 128)]:
        fps = make_set(kind, 1500, bits, seed=5)
        for k in (1, 3):
            want = all_pairs_reference(fps, k)
            for threads, heavy in ((2, 1024), (3, 4)):
                got = all_pairs(fps, k, threads=threads, heavy=heavy)
                for g, w in zip(got, want, strict=True):
                    np.testing.assert_array_equal(g, w)
        idx = HammingIndex(bits=bits, max_distance=3, expected_size=len(fps), buffer_size=len(fps))
        pa = idx.snapshot().arrays
        seg = TableSegment.build(fps.reshape(len(fps), -1), np.arange(len(fps), dtype=np.int64), pa)
        tasks = AP._join_tasks(seg, pa, 1024, 2)
        for t in range(pa.n_tables):
            spans = sorted((lo, hi) for tt, lo, hi in tasks if tt == t)
            assert spans[0][0] == 0 and spans[-1][1] == seg.n
            assert all(x[1] == y[0] for x, y in itertools.pairwise(spans))
            pre = seg.keys[t] >> np.uint64(64 - int(pa.pb[t]))
            for lo, _hi in spans[1:]:
                assert pre[lo] != pre[lo - 1]  # a piece starts on a new bucket
        split += len(tasks) > pa.n_tables
    assert split >= (2 if pieces > 1 else 0)


def _biased(n: int, p_rare: float, seed: int) -> np.ndarray:
    """``n`` 64-bit fingerprints whose bits are each rarely (``p_rare``) off their own usual
    value: skewed like the SimHash of short texts, where common words fix many bits."""
    rng = np.random.default_rng(seed)
    p_one = np.where(rng.random(64) < 0.5, p_rare, 1 - p_rare)
    bits = (rng.random((n, 64)) < p_one).astype(np.uint64)
    return (bits << np.arange(63, -1, -1, dtype=np.uint64)).sum(axis=1, dtype=np.uint64)


def test_all_pairs_on_the_alternative_join_layout_match_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the choice forced down to test sizes (sorting made free, so fewer sampled bucket
    pairs decide), the self-join runs on ``k + 2`` blocks choose 2 and gives the reference's
    pairs, on one or several threads; a memory budget below its tables keeps the planner's."""
    from neardup.index import allpairs as AP

    monkeypatch.setattr(AP, "JOIN_CHOICE_MIN", 0)
    monkeypatch.setattr(AP, "JOIN_SAMPLE", 512)
    monkeypatch.setattr(AP, "JOIN_BUILD_NS", 0.0)
    sets = {(kind, bits): make_set(kind, 2000, bits, seed=6) for kind, bits in
            [("clustered", 64), ("clustered", 128), ("adversarial", 64), ("duplicates", 64)]}  # fmt: skip
    sets["biased", 64] = _biased(2000, 0.15, seed=6)
    alt: set[tuple[str, int, int]] = set()
    for (kind, bits), fps in sets.items():
        f2 = fps.reshape(len(fps), -1)
        for k in (1, 2, 3):
            base = plan_index(bits, k, len(fps))
            plan = AP._join_plan(f2, k, None)
            assert plan.name in (base.name, f"{k + 2} blocks choose 2")
            if plan.name != base.name:
                alt.add((kind, bits, k))
            want = all_pairs_reference(fps, k)
            for threads in (1, 2):
                got = all_pairs(fps, k, threads=threads)
                for g, w in zip(got, want, strict=True):
                    np.testing.assert_array_equal(g, w)
            assert AP._join_plan(f2, k, base.est_bytes_per_fp * len(fps)).name == base.name
    # the alternative layout was exercised, on the skewed sets at every distance
    assert {("biased", 64, k) for k in (1, 2, 3)} <= alt and len(alt) >= 6


def test_all_pairs_join_layout_is_chosen_from_the_buckets(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 100k fingerprints: skewed ones crowd the planner's 16-bit prefixes and get 5 blocks
    choose 2 (the same pairs as the planner's layout); uniform ones keep the planner's."""
    from neardup.index import allpairs as AP

    n = 100_000
    skewed = _biased(n, 0.15, seed=7)
    uniform = np.random.default_rng(7).integers(0, 2**64, n, dtype=np.uint64)
    base = plan_index(64, 3, n)
    assert AP._join_plan(skewed.reshape(n, 1), 3, None).name == "5 blocks choose 2"
    assert AP._join_plan(uniform.reshape(n, 1), 3, None).name == base.name
    got = all_pairs(skewed, 3, threads=2)
    monkeypatch.setattr(AP, "_join_plan", lambda fps, k, budget: plan_index(64, k, len(fps)))
    want = all_pairs(skewed, 3, threads=2)
    assert len(want[0]) > 10_000
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    monkeypatch.undo()
    # below JOIN_CHOICE_MIN the planner's layout is used without sampling
    small = skewed[: AP.JOIN_CHOICE_MIN - 1].reshape(-1, 1)
    assert AP._join_plan(small, 3, None).name == plan_index(64, 3, len(small)).name


def test_all_pairs_joins_instead_of_probing_at_larger_distances(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """From ~15 k fingerprints the planner's layout at k = 5 and 6 probes neighbouring prefixes
    (radius 1); the self-join takes ``k + 2`` blocks choose 2 instead (faster, see
    ``_join_plan``) and gives the pairs of the brute-force reference (64-bit) and of a search on
    the planner's layout (128-bit, whose reference is slow at this size), on one or two
    threads."""
    from neardup.index import allpairs as AP

    n = 16_000
    for kind, bits, ks in [("clustered", 64, (5, 6)), ("adversarial", 64, (5,)),
                           ("clustered", 128, (5,))]:  # fmt: skip
        fps = make_set(kind, n, bits, seed=11, k=max(ks))
        if bits == 64:
            ra, rb, rd = all_pairs_reference(fps, max(ks))
        for k in ks:
            base = plan_index(bits, k, n)
            assert base.kind == "tables" and max(t.radius for t in base.tables) == 1, base.name
            assert AP._join_plan(fps.reshape(n, -1), k, None).name == f"{k + 2} blocks choose 2"
            # a memory budget below the join's tables keeps the planner's layout
            budget = base.est_bytes_per_fp * n
            assert AP._join_plan(fps.reshape(n, -1), k, budget).name == base.name
            if bits == 64:
                keep = rd <= k
                want = (ra[keep], rb[keep], rd[keep])
            else:
                with monkeypatch.context() as m:
                    m.setattr(AP, "_join_plan", lambda f, kk, budget: plan_index(128, kk, len(f)))
                    want = all_pairs(fps, k, threads=1)
            assert kind == "adversarial" or len(want[0]) > 1000  # (its near pairs are few)
            for threads in (1, 2):
                got = all_pairs(fps, k, threads=threads)
                for g, w in zip(got, want, strict=True):
                    np.testing.assert_array_equal(g, w)


def test_segment_build_on_threads_equals_one_thread() -> None:
    from neardup.index.tables import TableSegment, plan_arrays

    for kind, bits in [("clustered", 64), ("random", 128)]:
        fps = make_set(kind, 2000, bits, seed=8).reshape(2000, -1)
        pa = plan_arrays(plan_index(bits, 3, 2000, blocks=5, prefix_blocks=2))
        ids = np.arange(2000, dtype=np.int64)[::-1].copy()
        one = TableSegment.build(fps, ids, pa)
        two = TableSegment.build(fps, ids, pa, threads=3)
        for name in ("fps", "ids", "keys", "rows", "dirs", "heavy", "hv", "sub"):
            np.testing.assert_array_equal(getattr(two, name), getattr(one, name), err_msg=name)
        # for the self-join: the same sorted tables, without the search directories
        join = TableSegment.build(fps, ids, pa, threads=2, searchable=False)
        for name in ("fps", "ids", "keys", "rows"):
            np.testing.assert_array_equal(getattr(join, name), getattr(one, name), err_msg=name)
        assert join.dirs is None
        with pytest.raises(RuntimeError, match="searchable=False"):
            join.search(fps[:3], 3, pa)


def test_bad_input_messages_and_index_stays_usable() -> None:
    idx = HammingIndex(max_distance=3, expected_size=100)
    idx.add(np.arange(10, dtype=np.uint64))
    with pytest.raises(InputError, match="unsigned 64-bit"):
        idx.add(np.array([1.5]))
    with pytest.raises(InputError, match="shape"):
        idx.add(np.zeros((3, 3), dtype=np.uint64))
    with pytest.raises(InputError, match="128-bit"):
        idx.add(np.zeros((3, 2), dtype=np.uint64))
    with pytest.raises(InputError, match="same length"):
        idx.add(np.arange(3, dtype=np.uint64), ids=[1, 2])
    with pytest.raises(InputError, match="duplicate ids within the batch"):
        idx.add(np.arange(3, dtype=np.uint64), ids=[20, 21, 20])
    with pytest.raises(InputError, match=r"already in the index: \[5\]"):
        idx.add(np.arange(2, dtype=np.uint64), ids=[30, 5])
    with pytest.raises(InputTypeError, match="integers"):
        idx.add(np.arange(2, dtype=np.uint64), ids=[1.5, 2.5])
    with pytest.raises(
        ConfigError, match=r"max_distance \(4\) is above what this index's plan guarantees \(3\)"
    ):
        idx.search(np.arange(2, dtype=np.uint64), max_distance=4)
    with pytest.raises(ConfigError, match=">= 0"):
        idx.search(np.arange(2, dtype=np.uint64), max_distance=-1)
    with pytest.raises(InputTypeError):
        idx.search(["a"])
    assert len(idx) == 10 and 30 not in idx
    assert idx.search_one(3, max_distance=0) == [(3, 0)]
    for kwargs, msg in [
        ({"bits": 32}, "bits must be 64 or 128"),
        ({"max_distance": -1}, "max_distance"),
        ({"max_distance": 64}, "smaller than bits"),
        ({"expected_size": -5}, "expected_size"),
        ({"memory_budget": 0}, "memory_budget"),
        ({"blocks": 3, "prefix_blocks": 3}, "prefix_blocks < blocks"),
        ({"layout": "magic"}, "layout must be"),
        ({"buffer_size": 0}, "buffer_size"),
    ]:
        with pytest.raises(ConfigError, match=msg):
            HammingIndex(**kwargs)


def test_planner_choices_and_plan_roundtrip() -> None:
    p = plan_index(64, 3, 10_000_000)
    assert (p.name, p.n_tables, p.tables[0].prefix_bits, p.est_bytes_per_fp) == (
        "4 blocks choose 1",
        4,
        16,
        52.0,
    )
    assert plan_index(64, 3, 50_000_000).est_bytes_per_fp <= 80
    assert (
        plan_index(64, 3, 10_000_000, memory_budget=10_000_000 * 200).n_tables > 4
    )  # more memory, more tables
    assert plan_index(64, 12, 20_000).kind == "brute"  # small N, large k
    assert plan_index(64, 3, 10_000_000, layout="two-level").n_tables == 16
    assert Plan.from_dict(p.to_dict()) == p
    assert radius_for(4, 3, 1) == 0 and radius_for(6, 3, 3) == 0 and radius_for(4, 10, 1) == 2
    forced = HammingIndex(plan=p)
    assert forced.plan == p and "4 permuted sorted tables" in forced.describe()
    with pytest.raises(ConfigError, match="plan is for 64-bit"):
        HammingIndex(bits=128, plan=p)


def test_readonly_and_threads(tmp_path) -> None:
    fps = make_set("random", 5000, 64, seed=9)
    idx = HammingIndex(max_distance=3, expected_size=5000, threads=2)
    idx.add(fps)
    q = queries_for(fps, 9, 3, nq=2500)  # >= 2048 queries: threaded path
    assert_same(idx.search(q), search_reference(fps, np.arange(5000), q, 3))
    idx.save(tmp_path / "x.idx")
    ro = HammingIndex.load(tmp_path / "x.idx", mmap=True)
    assert ro.read_only
    for call in (lambda: ro.add(fps[:1]), lambda: ro.remove([1]), ro.flush):
        with pytest.raises(IndexStateError, match="mmap=False"):
            call()
    assert_same(ro.search(q[:50]), idx.search(q[:50]))


def test_concurrent_adds_and_searches() -> None:
    import threading

    fps = make_set("random", 6000, 64, seed=21)
    idx = HammingIndex(max_distance=3, expected_size=6000, buffer_size=64, merge_factor=2)
    idx.add(fps[:2000])
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            for i in range(300):
                hits = idx.search_one(int(fps[i % 2000]))
                assert any(h == (i % 2000, 0) for h in hits)  # acknowledged adds stay visible
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    th = threading.Thread(target=reader)
    th.start()
    for s in range(2000, 6000, 50):
        idx.add(fps[s : s + 50])
        assert idx.search_one(int(fps[s]))[0] == (s, 0)  # an add is visible once it returns
    th.join()
    assert not errors
    q = queries_for(fps, 21, 3, nq=60)
    assert_same(idx.search(q), search_reference(fps, np.arange(6000), q, 3))


@pytest.mark.parametrize("bits", [64, 128])
def test_heavy_bucket_subdirectory_is_used_and_exact(bits: int, tmp_path) -> None:
    fps = make_set("adversarial", 4000, bits, seed=8)  # one prefix shared by every fingerprint
    idx = HammingIndex(
        bits=bits, max_distance=3, blocks=4, prefix_blocks=1, heavy_bucket=64, buffer_size=100
    )
    idx.add(fps)
    seg = idx.snapshot().segments[0]
    assert seg.hv.shape[0] >= 1 and seg.heavy is not None  # a sub-directory was built
    q = queries_for(fps, 8, 3)
    want = search_reference(fps, np.arange(4000), q, 3)
    assert_same(idx.search(q), want)
    idx.save(tmp_path / "h.idx")
    assert_same(HammingIndex.load(tmp_path / "h.idx", mmap=True).search(q), want)


@pytest.mark.parametrize("bits", [64, 128])
def test_dense_cells_of_a_heavy_bucket_are_descended_exactly(bits: int) -> None:
    """A heavy bucket's sub-cell with more keys than ``QUERY_LEAF`` is split bit by bit, not
    scanned: tight clusters put most of their members in one cell; the results are brute
    force's."""
    from neardup.index import _kernels as K

    rng = np.random.default_rng(11)
    centers = make_set("random", 3, bits, seed=11)
    fps = _flip(rng, centers[rng.integers(0, 3, 6000)], 5)
    idx = HammingIndex(
        bits=bits, max_distance=3, blocks=4, prefix_blocks=1, heavy_bucket=64, buffer_size=100
    )
    idx.add(fps)
    seg = idx.snapshot().segments[0]
    cells = [np.diff(seg.sub[off : off + (1 << s) + 1]) for _, _, s, off in seg.hv.tolist()]
    assert max(int(c.max()) for c in cells) > K.QUERY_LEAF  # a cell the search descends
    q = queries_for(fps, 11, 3)
    for kk in range(4):
        assert_same(idx.search(q, kk), search_reference(fps, np.arange(len(fps)), q, kk))


def _one_level_reference(bits, k, r, m):
    """The layout enumeration before its k-free part was cached (the definition)."""
    import itertools

    from neardup.index.plan import TableSpec, _merge_ranges, _split, radius_for

    blocks = _split(0, bits, r)
    rho = radius_for(r, k, m)
    tables = []
    if m > r:
        return None
    for combo in itertools.combinations(range(r), m):
        order = [blocks[i] for i in combo] + [blocks[i] for i in range(r) if i not in combo]
        pb = sum(blocks[i][1] for i in combo)
        if pb > 64 or rho >= pb:
            return None
        tables.append(TableSpec(order=_merge_ranges(order), prefix_bits=pb, radius=rho))
    return f"{r} blocks choose {m}" + (f", radius {rho}" if rho else ""), tuple(tables)


@pytest.mark.parametrize("bits", [64, 128])
def test_one_level_layouts_equal_the_uncached_enumeration(bits):
    from neardup.index.plan import _one_level

    for k in [0, 1, 2, 3, 4, 7, 10, 14, 18, 25]:
        for r in range(2, 25):
            for m in range(1, r + 1):
                if math.comb(r, m) > 600:
                    break
                assert _one_level(bits, k, r, m) == _one_level_reference(bits, k, r, m), (k, r, m)


@pytest.mark.parametrize("distinct", [1, 3, 50, 1 << 62])
@pytest.mark.parametrize("n", [0, 1, 17, 5000])
def test_sort_with_rows_is_the_stable_sort(distinct, n):
    from neardup.index import _kernels as K

    rng = np.random.default_rng(n + distinct)
    keys = rng.integers(0, distinct, n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    ks, rows = K.sort_with_rows(keys)
    stable = np.argsort(keys, kind="stable")
    assert rows.dtype == np.int64 and np.array_equal(rows, stable)
    assert np.array_equal(ks, keys[stable])
    from neardup.index.reference import sort_with_rows_reference

    ref_k, ref_r = sort_with_rows_reference(keys, 8)  # same keys; ties possibly reordered
    assert np.array_equal(ref_k, ks) and np.array_equal(keys[ref_r], ks)


@pytest.mark.parametrize("m", [0, 1, 500, 20_000])
def test_pairs_in_order_equals_sorting(m):
    # rows of a segment mapped to positions, (min, max) and sorted by (a, b), stable; hubs
    # with more than 32 partners are sorted by NumPy after the kernel, the rest by its
    # insertion sort
    from neardup.index import _kernels as K

    rng = np.random.default_rng(m)
    n = 1000
    ids = rng.permutation(n).astype(np.int64)
    ra = rng.integers(0, n, m)
    rb = np.where(rng.random(m) < 0.3, 7, rng.integers(0, n, m))  # row 7: a hub
    d = rng.integers(0, 5, m).astype(np.int32)
    a, b, dd = K.pairs_in_order(ids, ra, rb, d, n)
    x, y = np.minimum(ids[ra], ids[rb]), np.maximum(ids[ra], ids[rb])
    o = np.lexsort((y, x))
    assert np.array_equal(a, x[o]) and np.array_equal(b, y[o])
    # equal (a, b) may come with different distances here (not in a join): in their order
    assert np.array_equal(dd, d[o])
    assert dd.dtype == np.int32
