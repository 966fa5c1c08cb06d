"""Work-bounded candidate planning: exact at the chosen distance, deterministic, bounded."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import dedup
from neardup.index.allpairs import tables_work_ns
from neardup.index.plan import scan_work_ns
from neardup.index.reference import all_pairs_reference
from neardup.index.scan import estimate_pairs_within
from neardup.rules.passes import plan_pass, planned_pairs


def clustered(seed: int, n: int, centers: int, p_flip: float) -> np.ndarray:
    """``n`` fingerprints around ``centers`` random centres, each bit flipped with ``p_flip``."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2**63, centers, dtype=np.int64).view(np.uint64)
    noise = np.zeros(n, np.uint64)
    for bit in range(64):
        noise |= np.where(rng.random(n) < p_flip, np.uint64(1) << np.uint64(bit), np.uint64(0))
    return base[rng.integers(0, centers, n)] ^ noise


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(2, 400),
    centers=st.integers(1, 30),
    p_flip=st.sampled_from([0.0, 0.02, 0.08, 0.2, 0.5]),
    k=st.integers(0, 20),
    work=st.sampled_from([None, 1, 50, 200, 2_000, 10**6]),
    per_doc=st.sampled_from([None, 1, 4, 64]),
)
def test_planned_pairs_equal_the_reference_at_the_used_distance(
    seed, n, centers, p_flip, k, work, per_doc
):
    fps = clustered(seed, n, centers, p_flip)
    max_pairs = None if per_doc is None else per_doc * n
    a, b, d, info = planned_pairs(fps, k, work_ns_per_doc=work, max_pairs=max_pairs)
    used = info["distance_used"]
    assert -1 <= used <= info["distance_planned"] <= k
    assert info["method"] in ("scan", "tables", "none")
    if used < 0:
        assert a.size == 0
        return
    ra, rb, rd = all_pairs_reference(fps, used)
    assert np.array_equal(a, ra) and np.array_equal(b, rb) and np.array_equal(d, rd)
    if max_pairs is not None and fps.ndim == 1 and info["method"] == "tables":
        assert a.size <= max_pairs
    if info["budget_ns"] is not None and info["method"] != "none":
        assert info["work_ns"] <= info["budget_ns"]


def test_scan_when_it_fits_and_tables_when_it_does_not():
    fps = clustered(1, 3_000, 300, 0.05)
    scan = plan_pass(fps, 14, work_ns_per_doc=10**6)
    assert (scan.method, scan.distance_planned) == ("scan", 14)
    narrow = plan_pass(fps, 14, work_ns_per_doc=2_000)  # scan: 4 us per doc > 2 us
    assert narrow.method == "tables" and narrow.distance_planned < 14
    assert narrow.work_ns <= narrow.budget_ns
    # the next distance up would not have fitted (the largest fitting distance is chosen)
    nxt = narrow.distance_planned + 1
    est = estimate_pairs_within(fps, 14)
    assert nxt > 14 or tables_work_ns(fps, nxt, float(est[nxt])) > narrow.budget_ns
    assert scan_work_ns(3_000) > narrow.budget_ns
    unbounded = plan_pass(fps, 14, work_ns_per_doc=None)
    assert unbounded.distance_planned == 14 and unbounded.budget_ns is None


def test_plan_does_not_depend_on_workers():
    fps = clustered(2, 25_000, 2_000, 0.04)
    plans = [plan_pass(fps, 16, max_pairs=64 * 25_000, workers=w) for w in (1, 2, 4)]
    assert plans[0] == plans[1] == plans[2]
    assert plans[0].method == "tables"  # 25k docs: the scan exceeds the default budget
    outs = [planned_pairs(fps, 16, max_pairs=64 * 25_000, workers=w) for w in (1, 2)]
    for x, y in zip(outs[0][:3], outs[1][:3], strict=True):
        assert np.array_equal(x, y)
    assert outs[0][3] == outs[1][3]


def test_concentrated_corpus_stays_bounded():
    # 40k fingerprints all within a few bits of 8 centres: nearly every pair within 14 bits
    fps = clustered(3, 40_000, 8, 0.02)
    max_pairs = 64 * fps.size
    a, _b, _d, info = planned_pairs(fps, 14, max_pairs=max_pairs, workers=2)
    assert info["method"] in ("tables", "none")
    assert info["distance_used"] < 14
    assert a.size <= max_pairs
    if info["method"] == "tables":
        assert info["work_ns"] <= info["budget_ns"]


def test_dedup_records_the_passes_and_explicit_distance_is_not_budgeted():
    texts = [f"post number {i} about the weather in town {i % 7}" for i in range(300)]
    r = dedup(texts, candidate_work_per_doc_ns=1, candidates="simhash")
    passes = r.stats["candidate_passes"]
    assert passes and all(p["distance_used"] <= p["distance"] for p in passes.values())
    assert all("reason" in p and "method" in p for p in passes.values())
    assert any(p["distance_used"] < p["distance"] for p in passes.values())
    # the lsh mode's SimHash pass keeps its distance whatever the budget (no corpus-size
    # dependent default): only the per-document pair bound could lower it
    lsh = dedup(texts, candidate_work_per_doc_ns=1, max_candidates_per_doc=None)
    assert all(p["distance_used"] == p["distance"] for p in lsh.stats["candidate_passes"].values())
    full = dedup(texts, candidate_work_per_doc_ns=None, max_candidates_per_doc=None)
    assert all(p["distance_used"] == p["distance"] for p in full.stats["candidate_passes"].values())
    for mode, name in (("simhash", "all"), ("lsh", "simhash")):
        explicit = dedup(
            texts,
            max_distance=10,
            candidate_work_per_doc_ns=1,
            max_candidates_per_doc=None,
            candidates=mode,
        )
        assert explicit.stats["candidate_passes"][name]["distance_used"] == 10


def test_config_validates_the_budget():
    from neardup import DedupConfig
    from neardup.errors import ConfigError

    for bad in (0, -5, 1.5, True, "x"):
        with pytest.raises(ConfigError, match="candidate_work_per_doc_ns"):
            DedupConfig(candidate_work_per_doc_ns=bad)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 3)).map(
            lambda t: (t[0] * 0x9E3779B97F4A7C15 % 2**64, t[1])
        ),
        max_size=60,
    ),
    width=st.sampled_from([1, 2]),
)
def test_first_of_equal_rows_equals_the_reference(rows, width):
    from neardup.batch.exact import first_of_equal_rows
    from neardup.batch.reference import first_of_equal_rows_reference

    h = np.array(rows, dtype=np.uint64).reshape(-1, 2)[:, :width]
    assert np.array_equal(first_of_equal_rows(h), first_of_equal_rows_reference(h))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 1000), n=st.integers(1, 300), k=st.integers(0, 64))
def test_sample_histogram_equals_numpy(seed, n, k):
    from neardup.fingerprint.distance import hamming_cdist
    from neardup.index.scan import sample_distance_hist

    fps = clustered(seed, n, 5, 0.05)
    rows = np.sort(np.random.default_rng(seed).choice(n, size=min(n, 7), replace=False))
    got = sample_distance_hist(fps, rows.astype(np.int64), k)
    d = hamming_cdist(fps[rows], fps)
    d[np.arange(rows.size), rows] = 99  # not the row itself
    want = np.stack([np.bincount(r[r <= k], minlength=k + 1)[: k + 1] for r in d])
    assert np.array_equal(got, want)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(0, 3_000),
    pb=st.sampled_from([1, 4, 12, 21, 22, 23, 30]),
    radius=st.integers(0, 2),
    spread=st.sampled_from([1, 7, 300, None]),
)
def test_bucket_candidates_equal_the_definition(seed, n, pb, radius, spread):
    """The probed-bucket count of one table (dense kernel up to 22 prefix bits, sorted counts
    above) is sum over probe masks f and buckets b of count(b) * count(b ^ f), exactly."""
    from collections import Counter
    from itertools import combinations

    from neardup.index.allpairs import _bucket_candidates

    rng = np.random.default_rng(seed)
    top = 1 << pb
    hi = top if spread is None else min(top, spread)  # few distinct prefixes: heavy buckets
    prefix = (rng.integers(0, hi, n) * (top // hi)).astype(np.uint64)
    masks = [0] + [
        sum(1 << b for b in c) for r in range(1, radius + 1) for c in combinations(range(pb), r)
    ]
    flips = np.array(masks, dtype=np.uint64)
    cnt = Counter(prefix.tolist())
    want = sum(c * cnt.get(b ^ f, 0) for b, c in cnt.items() for f in masks)
    assert _bucket_candidates(prefix, pb, flips) == float(want)


@pytest.mark.parametrize("distinct", [1, 7, 3000, 10**9])
def test_first_of_equal_rows_large_unstable_sort(distinct):
    # numpy's default sort is unstable above a few dozen rows: the first position of each group
    # must come from the positions, not the order the sort leaves equal rows in
    from neardup.batch.exact import first_of_equal_rows
    from neardup.batch.reference import first_of_equal_rows_reference

    rng = np.random.default_rng(distinct)
    v = rng.integers(0, distinct, 20_000, dtype=np.uint64)
    h = np.stack([v * np.uint64(0x9E3779B97F4A7C15), v % np.uint64(5)], axis=1)
    assert np.array_equal(first_of_equal_rows(h), first_of_equal_rows_reference(h))
    assert np.array_equal(first_of_equal_rows(h[:, :1]), first_of_equal_rows_reference(h[:, :1]))


@pytest.mark.parametrize("pb", [1, 13, 24, 25, 40])
def test_bucket_sizes_equal_unique_counts(pb):
    from neardup.index.allpairs import _bucket_sizes

    rng = np.random.default_rng(pb)
    prefix = rng.integers(0, 1 << min(pb, 16), 50_000, dtype=np.uint64) << np.uint64(
        max(pb - 16, 0)
    )
    got = _bucket_sizes(prefix, pb)
    assert np.array_equal(got, np.unique(prefix, return_counts=True)[1])


@pytest.mark.parametrize("distance", [3, 4, 5, 7])
def test_tables_work_ns_does_not_depend_on_workers(monkeypatch, distance):
    import neardup.index.allpairs as C

    monkeypatch.setattr(C, "TABLES_THREADS_MIN", 0)
    rng = np.random.default_rng(distance)
    fps = rng.integers(0, 1 << 20, 30_000, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    one = tables_work_ns(fps, distance, 123.0)
    assert one > 0 and tables_work_ns(fps, distance, 123.0, workers=2) == one
    assert tables_work_ns(fps, distance, 123.0, workers=3) == one
