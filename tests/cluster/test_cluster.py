"""Union-find clusters: vectorised components agree with the reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.errors import InputError
from neardup.rules.keep import UnionFind, cluster_ids, connected_components
from neardup.rules.reference import connected_components_reference


def test_simple_components():
    roots = connected_components(6, [4, 1, 2], [5, 2, 3])
    assert roots.tolist() == [0, 1, 1, 1, 4, 4]
    assert cluster_ids(roots).tolist() == [0, 1, 1, 1, 2, 2]
    assert connected_components(3, [], []).tolist() == [0, 1, 2]


def test_root_is_smallest_member_whatever_the_order():
    uf = UnionFind(5)
    uf.union(4, 3)
    uf.union(3, 2)
    assert uf.find(4) == 2


def test_bad_pairs():
    with pytest.raises(InputError, match="outside"):
        connected_components(3, [0], [3])
    with pytest.raises(InputError, match="equal length"):
        connected_components(3, [0, 1], [2])


@given(
    st.integers(1, 40).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=60),
        )
    )
)
def test_fast_equals_reference(case):
    n, pairs = case
    a = np.array([p[0] for p in pairs], np.int64)
    b = np.array([p[1] for p in pairs], np.int64)
    fast = connected_components(n, a, b)
    ref = connected_components_reference(n, a, b)
    assert fast.tolist() == ref.tolist()
    # order of pairs does not matter
    perm = np.random.default_rng(0).permutation(len(pairs))
    assert connected_components(n, b[perm], a[perm]).tolist() == ref.tolist()


# -- kept representatives without chaining ---------------------------------------------------

from neardup.rules.keep import greedy_representatives  # noqa: E402
from neardup.rules.reference import greedy_representatives_reference  # noqa: E402


def test_greedy_does_not_chain():
    # 0~1, 1~2, 0 and 2 unrelated: 1 is dropped for 0, 2 is kept (union-find would drop it)
    rep = greedy_representatives(3, [0, 1], [1, 2], np.arange(3))
    assert rep.tolist() == [0, 0, 2]
    assert connected_components(3, [0, 1], [1, 2]).tolist() == [0, 0, 0]


def test_greedy_visit_order_and_may_drop():
    # visited 2, 1, 0 (e.g. longest first): 2 kept, 1 dropped for 2, 0 kept (its only pair is 1)
    assert greedy_representatives(3, [0, 1], [1, 2], [2, 1, 0]).tolist() == [0, 2, 2]
    # a pair that may not drop its later item (containment of a longer text): both kept
    assert greedy_representatives(2, [0], [1], [0, 1], [False, True]).tolist() == [0, 1]
    assert greedy_representatives(2, [0], [1], [1, 0], [False, True]).tolist() == [1, 1]


def test_greedy_validates():
    with pytest.raises(InputError, match="permutation"):
        greedy_representatives(3, [0], [1], [0, 0, 1])
    with pytest.raises(InputError, match="2 entries per pair"):
        greedy_representatives(3, [0], [1], [0, 1, 2], [True])
    with pytest.raises(InputError):
        greedy_representatives(3, [0], [5], [0, 1, 2])


@given(
    st.integers(1, 40).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=80),
            st.permutations(list(range(n))),
            st.lists(st.booleans(), min_size=160, max_size=160),
        )
    )
)
def test_greedy_guarantee_and_reference(case):
    n, pairs, rank, flags = case
    a = np.array([p[0] for p in pairs], np.int64)
    b = np.array([p[1] for p in pairs], np.int64)
    md = np.array(flags[: a.size] + flags[80 : 80 + a.size], bool)
    rep = greedy_representatives(n, a, b, rank, md)
    assert rep.tolist() == greedy_representatives_reference(n, a, b, rank, md).tolist()
    kept = rep == np.arange(n)
    rk = np.asarray(rank)
    allowed = set()  # (kept x, dropped y) links that may drop y
    for k, (x, y) in enumerate(pairs):
        if x == y:
            continue
        if rk[x] <= rk[y] and md[k]:
            allowed.add((x, y))
        if rk[y] < rk[x] and md[a.size + k]:
            allowed.add((y, x))
    for i in range(n):
        if kept[i]:
            # a kept item has no allowed pair with an item kept before it
            assert not any((x, i) in allowed and kept[x] for x in range(n))
        else:
            # a dropped item is paired directly with its kept representative (no chains)
            assert kept[rep[i]] and (int(rep[i]), i) in allowed
