"""``band_groups``: the rows whose band key occurs twice or more, grouped by key, each group's
rows ascending, equal to its NumPy definition (a stable sort by key) whatever the keys' spread:
the kernel behind it takes NumPy's unstable (vectorised) sort and orders each group itself."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.index.band_groups import band_groups


def _definition(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable")  # rows ascending within a key
    k = keys[order]
    new = np.ones(k.size, bool)
    new[1:] = k[1:] != k[:-1]
    start = np.flatnonzero(new)
    size = np.diff(np.append(start, k.size))
    multi = size > 1
    members = order[np.repeat(multi, size)].astype(np.int64)
    bounds = np.concatenate([[0], np.cumsum(size[multi])]).astype(np.int64)
    return members, bounds


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(0, 3000),
    st.sampled_from([1, 2, 7, 100, 5000, 2**64 - 1]),
)
def test_band_groups_equal_their_definition(seed: int, n: int, spread: int) -> None:
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, spread, n, dtype=np.uint64, endpoint=True)
    members, bounds = band_groups(keys)
    want_members, want_bounds = _definition(keys)
    assert np.array_equal(members, want_members)
    assert np.array_equal(bounds, want_bounds)


def test_large_groups_and_singletons_together() -> None:
    """Groups past the kernel's insertion-sort length (sorted another way) beside pairs and
    rows alone in their key."""
    rng = np.random.default_rng(3)
    keys = np.concatenate(
        [np.full(500, 7), rng.integers(10, 10**12, 2000), np.full(40, 9), [11, 11]]
    ).astype(np.uint64)
    keys = keys[rng.permutation(keys.size)]
    members, bounds = band_groups(keys)
    want_members, want_bounds = _definition(keys)
    assert np.array_equal(members, want_members) and np.array_equal(bounds, want_bounds)
    assert sorted(np.diff(bounds).tolist())[-2:] == [40, 500]
