"""``unique_sorted`` and ``unique_inverse`` are ``np.unique`` for the integer arrays the project
passes them; the other helpers against what NumPy does by brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from neardup._arrays import (
    concat_ascii,
    find_sorted,
    in_sorted,
    merge_disjoint,
    sort_long_runs,
    sorted_pairs,
    unique_inverse,
    unique_sorted,
)


@given(
    hnp.arrays(
        st.sampled_from([np.int64, np.uint64, np.int32, np.uint32]),
        hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=40),
        elements=st.integers(0, 50),
    )
)
def test_unique_sorted_is_np_unique(a: np.ndarray) -> None:
    got = unique_sorted(a)
    want = np.unique(a)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_unique_sorted_extremes() -> None:
    a = np.array([2**64 - 1, 0, 2**63, 2**64 - 1, 0], dtype=np.uint64)
    assert unique_sorted(a).tolist() == [0, 2**63, 2**64 - 1]
    assert unique_sorted(np.zeros(0, np.int64)).tolist() == []
    assert unique_sorted([7]).tolist() == [7]


@given(
    hnp.arrays(
        st.sampled_from([np.int64, np.uint64, np.int32, np.uint32, np.uint16]),
        hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=60),
        elements=st.integers(0, 2**15),
    ),
    st.sampled_from([0, 1, 40, 48, 58]),
)
def test_unique_inverse_is_np_unique(a: np.ndarray, shift: int) -> None:
    """Values shifted up so that value and position bits fill 64 bits or spill past them (the
    fallback to np.unique)."""
    if a.dtype in (np.uint64, np.int64) and a.size:
        a = (a.astype(np.uint64) << np.uint64(shift)).astype(a.dtype)
    u, inv = unique_inverse(a)
    want_u, want_inv = np.unique(a, return_inverse=True)
    assert u.dtype == want_u.dtype
    np.testing.assert_array_equal(u, want_u)
    np.testing.assert_array_equal(inv, want_inv.reshape(-1))
    np.testing.assert_array_equal(u[inv], a.reshape(-1))


@given(
    hnp.arrays(np.int64, st.integers(0, 60), elements=st.integers(-20, 20)),
    hnp.arrays(np.int64, st.integers(0, 60), elements=st.integers(-20, 20)),
)
def test_in_sorted_is_np_isin(a: np.ndarray, s: np.ndarray) -> None:
    s = np.sort(s)  # sorted, duplicates allowed
    assert np.array_equal(in_sorted(a, s), np.isin(a, s))
    assert np.array_equal(in_sorted(a, np.unique(s)), np.isin(a, s))


@given(
    st.sampled_from([np.int64, np.uint64, np.int32, np.uint16]),
    st.lists(st.integers(10, 50), max_size=40),
    hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=30),
    st.data(),
)
def test_find_sorted_is_brute_force(
    dtype: type, s_list: list[int], shape: tuple[int, ...], data: st.DataObject
) -> None:
    """Against a scan of the sorted array: values below, inside and past its range, empty
    arrays on either side, duplicates in it, 2-d values (the shape is kept)."""
    s = np.array(sorted(s_list), dtype)
    v = data.draw(hnp.arrays(dtype, shape, elements=st.integers(0, 60)))
    pos, hit = find_sorted(s, v)
    assert pos.shape == hit.shape == v.shape
    assert pos.dtype == np.intp and hit.dtype == np.bool_
    sl = s.tolist()
    flat = zip(
        pos.reshape(-1).tolist(), hit.reshape(-1).tolist(), v.reshape(-1).tolist(), strict=True
    )
    for p, h, x in flat:
        first = next((k for k, y in enumerate(sl) if y >= x), len(sl))  # searchsorted, "left"
        assert p == min(first, max(len(sl) - 1, 0))
        assert h == (x in sl)
        if h:
            assert sl[p] == x and (p == 0 or sl[p - 1] < x)
    assert np.array_equal(in_sorted(v, s), hit)


def test_find_sorted_extremes() -> None:
    big = np.array([np.iinfo(np.int64).min, 0, np.iinfo(np.int64).max], np.int64)
    pos, hit = find_sorted(big[1:], big)
    assert pos.tolist() == [0, 0, 1] and hit.tolist() == [False, True, True]
    pos, hit = find_sorted(np.zeros(0, np.int64), big)
    assert pos.tolist() == [0, 0, 0] and hit.tolist() == [False, False, False]
    assert pos.dtype == np.intp
    pos, hit = find_sorted(big, np.zeros(0, np.int64))
    assert pos.shape == hit.shape == (0,)
    pos, hit = find_sorted(np.array([5, 2**63 + 5], np.uint64), np.array([2**64 - 1], np.uint64))
    assert pos.tolist() == [1] and hit.tolist() == [False]


@given(st.sets(st.integers(-(2**40), 2**40), max_size=80), st.randoms(use_true_random=False))
def test_merge_disjoint_is_concatenate_and_stable_argsort(values: set[int], rnd) -> None:
    vals = sorted(values)
    in_b = [rnd.random() < 0.5 for _ in vals]
    a = np.array([v for v, f in zip(vals, in_b, strict=True) if not f], np.int64)
    b = np.array([v for v, f in zip(vals, in_b, strict=True) if f], np.int64)
    merged, from_b = merge_disjoint(a, b)
    order = np.argsort(np.concatenate([a, b]), kind="stable")
    assert np.array_equal(merged, np.concatenate([a, b])[order])
    assert np.array_equal(
        from_b, np.concatenate([np.zeros(a.size, bool), np.ones(b.size, bool)])[order]
    )


def test_in_sorted_extremes() -> None:
    big = np.array([np.iinfo(np.int64).min, 0, np.iinfo(np.int64).max], np.int64)
    assert in_sorted(big, big[1:]).tolist() == [False, True, True]
    assert in_sorted(np.zeros(0, np.int64), big).shape == (0,)
    assert in_sorted(big, np.zeros(0, np.int64)).tolist() == [False, False, False]
    assert in_sorted(np.array([2**63 + 5], np.uint64), np.array([5, 2**63 + 5], np.uint64)).all()


def test_unique_inverse_extremes() -> None:
    for a in (
        np.array([2**64 - 1, 0, 2**63, 2**64 - 1, 0], np.uint64),  # no room: np.unique
        np.array([-3, 5, -3], np.int64),  # negative: np.unique
        np.zeros(0, np.int64),
        np.array([7], np.uint32),
        np.arange(70_000, dtype=np.uint64)[::-1] << np.uint64(30),  # 47 + 17 bits: the sort
    ):
        u, inv = unique_inverse(a)
        want_u, want_inv = np.unique(a, return_inverse=True)
        assert u.tolist() == want_u.tolist() and inv.tolist() == want_inv.reshape(-1).tolist()


@given(
    st.lists(st.tuples(st.integers(0, 2**20), st.integers(0, 2**20)), max_size=80),
    st.sampled_from([0, 20, 42, 60]),
    st.booleans(),
)
def test_sorted_pairs_is_lexsort(pairs: list[tuple[int, int]], shift: int, negative: bool) -> None:
    """Pairs that pack into 64 bits (the sort) and pairs that do not or hold a negative value
    (the lexsort) come out in np.lexsort's order."""
    a = np.array([p[0] for p in pairs], np.int64) << np.int64(shift)
    b = np.array([p[1] for p in pairs], np.int64)
    if negative and b.size:
        b[0] = -1
    order = np.lexsort((b, a))
    got_a, got_b = sorted_pairs(a, b)
    assert got_a.tolist() == a[order].tolist() and got_b.tolist() == b[order].tolist()


def test_sorted_pairs_refuses_unequal_lengths() -> None:
    with pytest.raises(ValueError, match="3 major values for 2 minor"):
        sorted_pairs(np.arange(3), np.arange(2))


@given(st.lists(st.text(alphabet=st.characters(max_codepoint=127), max_size=1200), max_size=12))
def test_concat_ascii_is_join_encode(texts: list[str]) -> None:
    want = "".join(texts).encode("ascii")
    for out in (None, np.empty(0, np.uint8), np.full(20_000, 7, np.uint8)):
        data, lens, buf = concat_ascii(texts, out)
        assert data.tobytes() == want
        assert lens.tolist() == [len(t) for t in texts]
        if out is not None and out.size >= len(want) and data.flags.writeable:
            assert np.shares_memory(data, out)  # the caller's buffer was reused
        again, _, _ = concat_ascii(texts, buf)
        assert again.tobytes() == want


def test_concat_ascii_per_text_path_and_errors() -> None:
    long = ["x" * 600, "Hello " * 200, "y" * 700]
    data, lens, buf = concat_ascii(long)
    assert data.tobytes() == "".join(long).encode() and data.flags.writeable
    assert lens.tolist() == [600, 1200, 700] and np.shares_memory(data, buf)
    with pytest.raises(UnicodeEncodeError):
        concat_ascii(["é" * 600, "z" * 600])


@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 9), st.integers(0, 99)), max_size=120),
    st.integers(0, 5),
)
def test_sort_long_runs_is_a_stable_sort_of_the_long_runs(
    rows: list[tuple[int, int, int]], longer_than: int
) -> None:
    keys = np.array(sorted(r[0] for r in rows), np.int64)
    by = np.array([r[1] for r in rows], np.int64)
    val = np.array([r[2] for r in rows], np.int32)
    want_by, want_val = by.copy(), val.copy()
    for k in np.unique(keys):  # by hand: each long run stably sorted by ``by``
        at = np.flatnonzero(keys == k)
        if at.size > longer_than:
            o = at[np.argsort(by[at], kind="stable")]
            want_by[at], want_val[at] = by[o], val[o]
    before, alone = keys.copy(), by.copy()
    sort_long_runs(keys, longer_than, val, by=by)
    np.testing.assert_array_equal(keys, before)
    np.testing.assert_array_equal(by, want_by)
    np.testing.assert_array_equal(val, want_val)
    sort_long_runs(keys, longer_than, by=alone)  # nothing carried along: any sort of ``by``
    np.testing.assert_array_equal(alone, want_by)


def test_sort_long_runs_of_wide_values_takes_the_two_key_sort() -> None:
    keys = np.array([1, 1, 1, 2, 2, 2], np.int64)
    by = np.array([2**62, -(2**62), 0, 5, 5, -1], np.int64)  # (runs x width past an int64)
    val = np.arange(6, dtype=np.int32)
    sort_long_runs(keys, 2, val, by=by)
    assert by.tolist() == [-(2**62), 0, 2**62, -1, 5, 5] and val.tolist() == [1, 2, 0, 5, 3, 4]
