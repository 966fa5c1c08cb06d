"""``benchmarks/bench_candidates.py``'s summary bounds: each is an upper bound of the multiset
token overlap, so a pair the verifier accepts is never turned down by one (the benchmark also
fails when that happens), and a mask bounds no tighter than the counts it stands for."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from doubles import benchmark_module
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.fixture(scope="module")
def bc():
    with benchmark_module("bench_candidates") as module:
        yield module


tokens = st.lists(st.integers(0, 2**32 - 1) | st.integers(0, 40), max_size=400)


@settings(max_examples=200, deadline=None)
@given(a=tokens, b=tokens)
def test_summaries_bound_the_overlap(bc, a, b):
    qa, rb = np.array(a, np.uint32), np.array(b, np.uint32)
    ca, cb = collections.Counter(a), collections.Counter(b)
    true = sum(min(n, cb[t]) for t, n in ca.items())
    got = {name: bc.overlap_bound(qa, rb, *scheme) for name, scheme in bc.SCHEMES.items()}
    for name, bound in got.items():
        assert true <= bound <= min(len(a), len(b)), name
    # a set bit stands for any count: a mask bounds no tighter than the counts over its buckets
    assert got["mask 64 x 1 bit"] >= got["64 x 4-bit counts"]
    # a code loses what the exact counts know, never more than the saturating 4 bits lose
    assert got["1,024 x 4-bit ranged codes"] >= got["1,024 x 8-bit counts"]
    assert got["512 x 4-bit counts"] >= got["512 x 8-bit counts"]


def test_the_rule_is_the_verifiers(bc):
    cfg = {"threshold": 0.8, "containment": 0.85, "min_containment_tokens": 20}
    assert bc.passes(8, 10, 10, cfg) and not bc.passes(7, 10, 10, cfg)
    # containment: a short text inside a long one, from min_containment_tokens up
    assert bc.passes(18, 20, 100, cfg) and not bc.passes(18, 19, 100, cfg)
    assert bc.passes(0, 0, 5, cfg)  # no tokens: never turned down
    assert [bc.length_class(t) for t in (1, 60, 61, 300, 301)] == [
        "short", "short", "mid", "mid", "long",
    ]  # fmt: skip


def test_bucket_counts_use_the_top_bits(bc):
    h = np.array([0, 1, 2**31, 2**32 - 1], np.uint32)
    for k in (64, 512):
        c = bc.bucket_counts(h, k)
        assert c.shape == (k,) and c.sum() == h.size
