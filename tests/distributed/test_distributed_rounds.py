"""neardup.distributed.rounds: the keep decision and the components as per-partition rounds
equal the sequential greedy and union-find on random graphs over random partitions."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.distributed.rounds import simulate_greedy, simulate_labels
from neardup.rules.reference import connected_components_reference, greedy_representatives_reference


def _graph(seed: int, n: int, m: int, parts: int, chain: bool) -> tuple:
    rng = np.random.default_rng(seed)
    if chain and n > 1:  # a long path through every unit, in random partitions
        a = np.arange(n - 1, dtype=np.int64)
        b = a + 1
    else:
        a = rng.integers(0, n, m).astype(np.int64)
        b = rng.integers(0, n, m).astype(np.int64)
        keep = a != b
        a, b = a[keep], b[keep]
        key = np.unique(np.stack([np.minimum(a, b), np.maximum(a, b)]), axis=1)
        a, b = key[0], key[1]
    rank = rng.permutation(n).astype(np.int64)
    part = rng.integers(0, parts, n).astype(np.int64)
    may_drop = rng.random(2 * a.size) < 0.8
    return a, b, rank, part, may_drop


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 60),
    m=st.integers(0, 150),
    parts=st.integers(1, 5),
    chain=st.booleans(),
)
def test_greedy_rounds_equal_sequential_greedy(
    seed: int, n: int, m: int, parts: int, chain: bool
) -> None:
    a, b, rank, part, may_drop = _graph(seed, n, m, parts, chain)
    want = greedy_representatives_reference(n, a, b, rank, may_drop)
    # directed edges as the keep step builds them: earlier-ranked u, allowed to drop v
    first = rank[a] <= rank[b]
    u, v = np.where(first, a, b), np.where(first, b, a)
    ok = np.where(first, may_drop[: a.size], may_drop[a.size :])
    got, rounds = simulate_greedy(n, u[ok], v[ok], rank, part, parts)
    assert got.tolist() == want.tolist()
    assert rounds <= n + 1


def test_greedy_rounds_on_a_chain_in_one_partition_take_one_round() -> None:
    n = 50
    a = np.arange(n - 1, dtype=np.int64)
    got, rounds = simulate_greedy(n, a, a + 1, np.arange(n), np.zeros(n, np.int64), 1)
    assert rounds == 1
    assert got.tolist() == greedy_representatives_reference(n, a, a + 1, np.arange(n)).tolist()


@settings(max_examples=100, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 60),
    m=st.integers(0, 120),
    parts=st.integers(1, 5),
    chain=st.booleans(),
)
def test_label_rounds_equal_union_find(seed: int, n: int, m: int, parts: int, chain: bool) -> None:
    a, b, _, part, _ = _graph(seed, n, m, parts, chain)
    label, _ = simulate_labels(n, a, b, part, parts)
    assert label.tolist() == connected_components_reference(n, a, b).tolist()
