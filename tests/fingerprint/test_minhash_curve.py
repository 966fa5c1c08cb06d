"""The signature scheme's statistics: each value of two signatures agrees with probability the
bigram Jaccard ``J`` of the two texts, and a band of the plan with probability that makes the
S-curve ``1 - (1 - J**r)**b`` hold (at least as steep: never fewer candidates at the planned
Jaccard, never more at low ones), for short, medium and long texts.

Generated pairs of shingle sets with an exact Jaccard, fixed seeds; every tolerance is four
standard deviations of the binomial count the claim predicts (the agreements of different
values are independent or negatively correlated, so the binomial variance is an upper bound),
and each check can fail: a scheme whose values are copied between bins (one-permutation
hashing with densification) puts short texts below the curve and over the binomial variance
(benchmarks/bench_minhash.py prints the same table for the alternatives).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.errors import InputError
from neardup.fingerprint.minhash import sketch_shingles
from neardup.fingerprint.reference import sketch_shingles_reference
from neardup.rules.plan import candidate_probability, plan_lsh

#: b-bit values: two unrelated minima agree with probability 2**-16
NOISE = 2.0**-16


def _pairs(rng: np.random.Generator, n: int, size: int, jaccard: float, trials: int):
    """``trials`` pairs of sets of ``size`` random shingles sharing ``k`` of them, ``k`` the
    nearest to ``jaccard``: ``(sets as CSR (shingles, offsets), the exact Jaccard)``."""
    k = round(2 * jaccard * size / (1 + jaccard))
    union = 2 * size - k
    e = rng.integers(0, 1 << 63, (trials, union), dtype=np.uint64)
    a = e[:, :size]
    b = np.concatenate([e[:, :k], e[:, size:]], axis=1)
    sets = np.stack([a, b], axis=1).reshape(2 * trials, size)
    offsets = np.arange(2 * trials + 1, dtype=np.int64) * size
    return sets.ravel(), offsets, k / union


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 400), min_size=1, max_size=8),
    hashes=st.sampled_from([1, 3, 24, 126, 237]),
    dup=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_sketch_equals_reference(sizes, hashes, dup, seed):
    """Every path of the kernel (most bins empty, some empty, none) against the definition;
    repeated shingles change nothing (a set)."""
    rng = np.random.default_rng(seed)
    parts = [rng.integers(0, 1 << 63, s, dtype=np.uint64) for s in sizes]
    if dup:
        parts = [np.concatenate([p, p[: len(p) // 2]]) for p in parts]
    off = np.zeros(len(parts) + 1, np.int64)
    np.cumsum([len(p) for p in parts], out=off[1:])
    sh = np.concatenate(parts)
    got = sketch_shingles(sh, off, hashes)
    assert np.array_equal(got, sketch_shingles_reference(sh, off, hashes))
    assert np.array_equal(got, sketch_shingles(sh, off, hashes, workers=2))
    if dup:
        uniq = [np.unique(p) for p in parts]
        off2 = np.zeros(len(uniq) + 1, np.int64)
        np.cumsum([len(u) for u in uniq], out=off2[1:])
        assert np.array_equal(got, sketch_shingles(np.concatenate(uniq), off2, hashes))


def test_sketch_refuses_bad_offsets():
    with pytest.raises(InputError, match="offsets"):
        sketch_shingles(np.zeros(3, np.uint64), np.array([0, 2], np.int64), 8)


@pytest.mark.parametrize("size", [5, 9, 20, 40, 120, 600])
def test_each_value_agrees_with_probability_the_jaccard(size):
    rng = np.random.default_rng(1000 + size)
    plan = plan_lsh()
    h = plan.hashes
    trials = 400 if size <= 120 else 150
    for jaccard in (0.1, 0.25, 0.4, 0.6, 0.85):
        sh, off, j = _pairs(rng, 0, size, jaccard, trials)
        sig = sketch_shingles(sh, off, h)
        agree = int((sig[0::2] == sig[1::2]).sum())
        p = j + (1 - j) * NOISE
        mean, sd = trials * h * p, np.sqrt(trials * h * p * (1 - p))
        assert abs(agree - mean) <= 4 * sd, (size, j, agree / (trials * h), p)


@pytest.mark.parametrize("size", [9, 19, 39, 126, 600])
def test_band_candidate_rate_follows_the_s_curve(size):
    """The default plan's bands: at and above the planned Jaccard the candidate rate is at
    least the S-curve's (within binomial noise), at low Jaccard at most it, and everywhere
    within two points of it."""
    rng = np.random.default_rng(2000 + size)
    plan = plan_lsh()
    b, r, h = plan.bands, plan.rows, plan.hashes
    trials = 20_000 if size <= 39 else 6_000
    for jaccard in (0.08, 0.15, 0.3, plan.jaccard, 0.45):
        sh, off, j = _pairs(rng, 0, size, jaccard, trials)
        sig = sketch_shingles(sh, off, h)
        eq = sig[0::2, : b * r] == sig[1::2, : b * r]
        rate = float(eq.reshape(trials, b, r).all(axis=2).any(axis=1).mean())
        curve = float(candidate_probability(j, b, r))
        tol = 4 * np.sqrt(max(curve * (1 - curve), 1e-4) / trials)
        assert abs(rate - curve) <= 0.02 + tol, (size, j, rate, curve)
        if j >= plan.jaccard - 0.02:  # the promise: never fewer candidates than the curve
            assert rate >= curve - tol, (size, j, rate, curve)
        if j <= 0.15:  # unrelated texts: never more candidates than the curve
            assert rate <= curve + tol, (size, j, rate, curve)


@pytest.mark.parametrize("size", [9, 40, 126, 600])
def test_agreement_count_varies_no_more_than_binomially(size):
    """The agreement filter assumes the agreement count of a pair is at most as spread as
    Binomial(hashes, J): values copied between bins would spread it (and drop true pairs)."""
    rng = np.random.default_rng(3000 + size)
    h = plan_lsh().hashes
    trials = 4000 if size <= 126 else 1500
    sh, off, j = _pairs(rng, 0, size, 0.4, trials)
    sig = sketch_shingles(sh, off, h)
    agree = (sig[0::2] == sig[1::2]).sum(axis=1)
    binomial = h * j * (1 - j)
    # the sample variance of n draws has relative standard error sqrt(2 / (n - 1))
    assert agree.var(ddof=1) <= binomial * (1 + 4 * np.sqrt(2 / (trials - 1))), (
        size,
        agree.var(ddof=1),
        binomial,
    )
    assert abs(agree.mean() - h * j) <= 4 * np.sqrt(binomial / trials)
