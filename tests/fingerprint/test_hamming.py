import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.errors import ConfigError, InputError, InputTypeError
from neardup.fingerprint.distance import (
    as_fingerprints,
    hamming,
    hamming_cdist,
    hamming_many,
    hamming_to_many,
    int_to_words,
    words_to_int,
)

u64 = st.integers(min_value=0, max_value=2**64 - 1)
u128 = st.integers(min_value=0, max_value=2**128 - 1)


@given(u128, u128)
def test_hamming_matches_naive_and_is_symmetric(a, b):
    naive = sum(((a >> i) & 1) != ((b >> i) & 1) for i in range(128))
    assert hamming(a, b) == naive == hamming(b, a)


@given(st.lists(st.tuples(u64, u64), min_size=1, max_size=30))
def test_vectorized_64_agrees_with_scalar(pairs):
    a = np.array([p[0] for p in pairs], dtype=np.uint64)
    b = np.array([p[1] for p in pairs], dtype=np.uint64)
    assert hamming_many(a, b).tolist() == [hamming(x, y) for x, y in pairs]
    assert hamming_to_many(pairs[0][0], b).tolist() == [hamming(pairs[0][0], y) for _, y in pairs]
    d = hamming_cdist(a, b)
    assert d.dtype == np.int32
    assert d.tolist() == [[hamming(x, y) for _, y in pairs] for x, _ in pairs]


@given(st.lists(st.tuples(u128, u128), min_size=1, max_size=20))
def test_vectorized_128_agrees_with_scalar(pairs):
    a = as_fingerprints([p[0] for p in pairs], bits=128)
    b = as_fingerprints([p[1] for p in pairs], bits=128)
    assert a.shape == (len(pairs), 2)
    assert hamming_many(a, b).tolist() == [hamming(x, y) for x, y in pairs]
    assert hamming_cdist(a, b)[0].tolist() == [hamming(pairs[0][0], y) for _, y in pairs]
    assert [words_to_int(r) for r in a] == [p[0] for p in pairs]


def test_words_roundtrip():
    v = (5 << 64) | 7
    assert int_to_words(v, 128) == (5, 7)
    assert words_to_int(np.array([5, 7], dtype=np.uint64)) == v


def test_bad_input_is_named():
    with pytest.raises(InputTypeError, match=r"fingerprints\[1\] is str"):
        as_fingerprints([1, "x"])
    with pytest.raises(InputError, match="dtype float64"):
        as_fingerprints(np.zeros(3))
    with pytest.raises(InputError, match="non-negative"):
        as_fingerprints(np.array([-1], dtype=np.int64))
    with pytest.raises(InputError, match="same shape"):
        hamming_many(np.zeros(2, np.uint64), np.zeros(3, np.uint64))
    with pytest.raises(InputTypeError):
        hamming("a", 1)  # type: ignore[arg-type]
    # numbers that are not fingerprints are refused, not parsed or truncated
    for a in ("10", 1.9, b"1"):
        with pytest.raises(InputTypeError, match="integer fingerprints"):
            hamming(a, 3)  # type: ignore[arg-type]
    assert hamming(np.uint64(3), 1) == 1
    for q in (2**64, -1):
        with pytest.raises(InputError, match="non-negative 64-bit fingerprint"):
            hamming_to_many(q, [0, 1])
    for q in ("7", 1.9, np.array([1, 1], np.uint64)):
        with pytest.raises(InputTypeError, match="query must be one 64-bit fingerprint"):
            hamming_to_many(q, [0, 0])
    assert hamming_to_many(np.array([1, 1], np.uint64), [2**64 + 1, 0]).tolist() == [0, 2]
    for block in (0, -1, 1.5):
        with pytest.raises(ConfigError, match="block must be an int >= 1"):
            hamming_cdist([1, 2], [3, 4, 5], block=block)  # type: ignore[arg-type]
