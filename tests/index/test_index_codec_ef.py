"""The Elias–Fano table codec: encode/decode round trip (numba == pure Python == input), random
access and equal ranges against the sorted array, packed bits, sizes against the information
bound, checksums, and its search kernel against brute force for every distance."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_index import assert_same, make_set, queries_for

from neardup.errors import ConfigError, CorruptFileError
from neardup.index import HammingIndex
from neardup.index.codec_ef import (
    EFTables,
    decode_ef,
    decode_ef_py,
    ef_get,
    ef_params,
    encode_ef,
    pack_bits,
    unpack_bits,
)
from neardup.index.compressed import PackedIds
from neardup.index.reference import search_reference

_KEYS = st.lists(st.integers(0, 2**64 - 1), max_size=400)


def _sorted(vals: list[int], extremes: list[int], dup_every: int, shift: int) -> np.ndarray:
    a = np.array([v >> shift for v in vals] + extremes, dtype=np.uint64)
    if dup_every and len(a):
        a[::dup_every] = a[0]
    return np.sort(a)


@given(
    vals=_KEYS,
    extremes=st.lists(st.sampled_from([0, 1, 2**63 - 1, 2**63, 2**64 - 1]), max_size=6),
    dup_every=st.integers(0, 5),
    shift=st.sampled_from([0, 0, 20, 50, 63]),  # skewed: keys crowded near 0
    min_pb=st.sampled_from([1, 8, 16, 32, 64]),
)
def test_round_trip_random_access_and_equal_ranges(
    vals: list[int], extremes: list[int], dup_every: int, shift: int, min_pb: int
) -> None:
    keys = _sorted(vals, extremes, dup_every, shift)
    rev = np.sort(~keys)  # a second table of the same length
    ef = encode_ef([keys, rev], min_pb)
    ef.validate("t")
    ef.verify("t")
    for t, want in enumerate((keys, rev)):
        np.testing.assert_array_equal(decode_ef(ef, t), want)
        assert decode_ef_py(ef, t) == want.tolist()
        if len(want):
            idx = np.arange(len(want))
            np.testing.assert_array_equal(ef_get(ef, t, idx), want)  # every position
            for x in np.concatenate([want[:: max(1, len(want) // 20)], want[:3] + np.uint64(1)]):
                a, b = ef.equal_range(t, int(x))
                assert (a, b) == (
                    int(np.searchsorted(want, x, "left")),
                    int(np.searchsorted(want, x, "right")),
                )
    h, d = ef_params(len(keys), min_pb)
    assert (ef.h, ef.dbits) == (h, d) and 1 <= h <= 63 and 1 <= d <= min(h, max(min_pb, 1))


def test_a_table_takes_what_the_module_docstring_says() -> None:
    rng = np.random.default_rng(1)
    for n in (1_000, 100_000, 1_000_000):
        keys = np.sort(rng.integers(0, 2**64, n, dtype=np.uint64))
        ef = encode_ef([keys], 16)
        bound = 64 - math.log2(n) + math.log2(math.e)
        unary = (n + (1 << ef.h)) / n
        dirs = 32 * ((1 << ef.dbits) + 1) / n
        # low bits + unary + directory, with at most two spare words per row
        assert ef.table_bits(0) <= (64 - ef.h) + unary + dirs + 2 * 128 / n + 1e-9
        assert dirs <= 2.1 and unary <= 3
        if n >= 100_000:  # the information bound, within a few per cent
            assert ef.table_bits(0) < 1.06 * bound, (n, ef.table_bits(0), bound)


@given(
    vals=st.lists(st.integers(0, 2**64 - 1), max_size=200),
    width=st.integers(1, 64),
    pick=st.lists(st.integers(0, 10**6), max_size=30),
)
def test_packed_bits_round_trip(vals: list[int], width: int, pick: list[int]) -> None:
    v = np.array([x & ((1 << width) - 1) for x in vals], dtype=np.uint64)
    words = pack_bits(v, width)
    np.testing.assert_array_equal(unpack_bits(words, width, np.arange(len(v))), v)
    if len(v):
        idx = np.array([p % len(v) for p in pick], dtype=np.int64)
        np.testing.assert_array_equal(unpack_bits(words, width, idx), v[idx])


@given(
    ids=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=100, unique=True),
    rows=st.lists(st.integers(0, 10**6), max_size=20),
)
def test_packed_ids_span_any_int64_range(ids: list[int], rows: list[int]) -> None:
    a = np.array(ids, dtype=np.int64)
    p = PackedIds.of(a)
    np.testing.assert_array_equal(p.at(slice(None)), a)
    if len(a):
        r = np.array([x % len(a) for x in rows], dtype=np.int64)
        np.testing.assert_array_equal(p.at(r), a[r])
        assert p.bits == max(1, (int(a.max()) - int(a.min())).bit_length())


def test_bad_input_refused() -> None:
    with pytest.raises(ValueError, match="sorted"):
        encode_ef([np.array([3, 1], np.uint64)])
    with pytest.raises(ValueError, match="same number"):
        encode_ef([np.zeros(3, np.uint64), np.zeros(2, np.uint64)])
    with pytest.raises(ConfigError, match="2\\*\\*32"):
        ef_params(1 << 32)
    with pytest.raises(ConfigError, match="codec must be"):
        HammingIndex(compress=True, codec="lz4")


def test_a_flipped_bit_names_the_table() -> None:
    keys = np.sort(np.random.default_rng(2).integers(0, 2**64, 20_000, dtype=np.uint64))
    ef = encode_ef([keys, keys, keys], 16)
    rng = np.random.default_rng(0)
    for part in ("hi", "lo", "dirs"):
        arr = getattr(ef, part).copy()
        t = int(rng.integers(0, 3))
        j = int(rng.integers(0, arr.shape[1]))
        arr[t, j] ^= arr.dtype.type(1 << int(rng.integers(0, 8 * arr.itemsize)))
        bad = EFTables(**{**ef.__dict__, part: arr})
        with pytest.raises(CorruptFileError, match=rf"seg table {t}: checksum mismatch"):
            bad.verify("seg")
    # structural checks catch a directory that would send a probe outside the arrays
    d = ef.dirs.copy()
    d[1, -1] = 10**9
    with pytest.raises(CorruptFileError, match="inconsistent"):
        EFTables(**{**ef.__dict__, "dirs": d}).validate("seg")


def test_a_corrupt_unary_part_never_reads_past_its_arrays() -> None:
    """Loaded without verification, a damaged table answers wrongly at worst: the probes and
    the decoder stay inside the arrays (all ones, all zeros)."""
    rng = np.random.default_rng(3)
    fps = rng.integers(0, 2**64, 5000, dtype=np.uint64)
    idx = HammingIndex(max_distance=3, expected_size=5000, compress=True, layout="tables")
    idx.add(fps)
    idx.optimize()
    seg = idx.snapshot().segments[0]
    for fill in (0, 2**64 - 1):
        hi = seg.tables.hi.copy()
        hi[:, 10:] = np.uint64(fill)
        object.__setattr__(seg.tables, "hi", hi)
        seg._one = None
        idx.search(fps[:300])  # no crash
        with pytest.raises(CorruptFileError, match="checksum mismatch"):
            seg.verify()


# ---------------------------------------------------------------------------- search
@pytest.mark.parametrize("kind", ["adversarial", "duplicates", "clustered"])
def test_heavy_buckets_are_walked_cell_by_cell_exactly(kind: str) -> None:
    """Buckets over the heavy threshold get sub-directories on the next key bits (as the
    uncompressed tables do); a probe then walks only the cells within its flip budget."""
    fps = make_set(kind, 6000, 64, seed=2)
    for heavy in (1, 16, 256):
        idx = HammingIndex(max_distance=3, expected_size=6000, compress=True,
                           layout="tables", heavy_bucket=heavy)  # fmt: skip
        idx.add(fps)
        idx.flush()
        seg = idx.snapshot().segments[0]
        if heavy == 1:
            assert len(seg.tables.heavy) > 0
            tb = seg.tables
        seg.tables.validate("x")
        seg.verify()
        q = queries_for(fps, 2, 3, nq=60)
        for kk in range(4):
            assert_same(idx.search(q, kk), search_reference(fps, np.arange(6000), q, kk))
    assert len(tb.hrows) and (tb.heavy[:, 4] >= 0).any()  # rows kept for tables >= 1 only
    assert (tb.heavy[tb.heavy[:, 0] == 0, 4] == -1).all()
    for part in ("sub", "hrows"):
        arr = getattr(tb, part).copy()
        arr[len(arr) // 2] ^= np.uint32(1)
        with pytest.raises(CorruptFileError, match="heavy buckets' arrays"):
            EFTables(**{**tb.__dict__, part: arr}).verify("seg")
    arr = tb.hrows.copy()
    arr[0] = 6000  # a row past the segment: refused before any probe reads it
    with pytest.raises(CorruptFileError, match="inconsistent"):
        EFTables(**{**tb.__dict__, "hrows": arr}).validate("seg")


@settings(max_examples=60)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 600),
    k=st.integers(0, 6),
    kind=st.sampled_from(["random", "clustered", "duplicates", "adversarial"]),
    layout=st.sampled_from([{}, {"blocks": 2, "prefix_blocks": 1}, {"layout": "two-level"}]),
)
def test_search_equals_brute_force_for_every_distance(
    seed: int, n: int, k: int, kind: str, layout: dict
) -> None:
    fps = make_set(kind, n, 64, seed, k=max(k, 1))
    kw = layout or {"layout": "tables"}
    try:
        idx = HammingIndex(max_distance=k, expected_size=n * 1000, compress=True, **kw)
    except ConfigError:  # a forced layout that does not exist for this k
        return
    idx.add(fps)
    idx.flush()
    q = queries_for(fps, seed, k, nq=20)
    for kk in range(k + 1):
        assert_same(idx.search(q, kk), search_reference(fps, np.arange(n), q, kk))
