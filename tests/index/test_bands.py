"""The band look-up's distinct query keys found column by column
(:func:`neardup.index.bands.unique_by_column`) against the one-sort reference
(:func:`neardup._arrays.unique_inverse`), and :func:`~neardup.index.bands.lookup` through that
path against the brute-force reference."""

from __future__ import annotations

from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup._arrays import unique_inverse
from neardup.fingerprint.minhash import NO_KEYS
from neardup.index import bands
from neardup.index.bands import BandSection, lookup, sort_entries, unique_by_column
from neardup.index.reference import lookup_reference

_SHIFT = np.uint64(32)


def _queries(rng: np.random.Generator, q: int, nb: int, values: int, none: int) -> np.ndarray:
    """(q, nb) compact keys whose group is their column, drawn from ``values`` hashes (few:
    many repeats), ``none`` rows of :data:`NO_KEYS`."""
    h = rng.integers(0, values, (q, nb)).astype(np.uint64)
    ent = h | (np.arange(nb, dtype=np.uint64) << _SHIFT)
    ent[rng.choice(q, min(none, q), replace=False)] = NO_KEYS
    return ent


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    q=st.integers(1, 300),
    nb=st.integers(1, 9),
    values=st.sampled_from([1, 3, 50, 2**32]),
    none=st.integers(0, 5),
)
def test_distinct_keys_by_column_equal_one_sort(seed, q, nb, values, none) -> None:
    rng = np.random.default_rng(seed)
    ent = _queries(rng, q, nb, values, none)
    flat = ent.ravel()
    valid = np.flatnonzero(flat != NO_KEYS)
    got = unique_by_column(ent, valid)
    if valid.size < 2 * nb:  # fewer than two rows with keys: left to the one sort
        assert got is None
        return
    assert got is not None
    want_u, want_inv = unique_inverse(flat[valid])
    assert got[0].dtype == np.uint64 and got[1].dtype == np.intp
    assert got[0].tolist() == want_u.tolist()
    assert got[1].tolist() == want_inv.tolist()


def test_it_declines_what_it_cannot_answer() -> None:
    rng = np.random.default_rng(3)
    ent = _queries(rng, 50, 4, 2**32, 0)
    other = ent.copy()
    other[7, 2] = (np.uint64(1) << _SHIFT) | np.uint64(5)  # column 2 holding a key of group 1
    valid = np.flatnonzero(other.ravel() != NO_KEYS)
    assert unique_by_column(other, valid) is None
    part = ent.copy()
    part[9, 1] = NO_KEYS  # a row with keys in only some columns
    valid = np.flatnonzero(part.ravel() != NO_KEYS)
    assert unique_by_column(part, valid) is None


def test_a_big_lookup_through_the_column_path_equals_the_reference() -> None:
    """Queries above the threshold take the column path (threads included); the rows found are
    the brute-force reference's, with and without the valve."""
    rng = np.random.default_rng(11)
    nb, m = 4, 3000
    ent = _queries(rng, m, nb, 40, 3)  # few values: full buckets, the valve at work
    rowids = np.arange(m, dtype=np.int64) * 2 + 1
    has = ent[:, 0] != NO_KEYS
    k, pos = sort_entries(ent[has].ravel(), np.repeat(np.flatnonzero(has), nb).astype(np.int64))
    section = BandSection.from_sorted(k, pos.astype(np.uint32), rowids=rowids)
    queries = _queries(rng, 700, nb, 60, 4)
    runs = [section]
    calls = []
    real = bands.unique_by_column

    def spy(*a):
        out = real(*a)
        calls.append(out is not None)
        return out

    with (
        mock.patch.object(bands, "_PARALLEL_UNIQUE", 100),
        mock.patch.object(bands, "unique_by_column", spy),
    ):
        for cap in (None, 5):
            got = lookup(runs, queries, cap)
            want = lookup_reference(runs, queries, cap if cap is not None else 10**9)
            assert [g.tolist() for g in got] == [w.tolist() for w in want]
    assert calls == [True, True]
