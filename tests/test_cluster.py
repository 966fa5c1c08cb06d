"""Union-find clusters: vectorised components agree with the reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.cluster import (
    UnionFind,
    cluster_ids,
    connected_components,
    connected_components_reference,
)
from neardup.errors import InputError


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
