"""``unique_sorted`` is ``np.unique`` for the integer arrays the project passes it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from neardup._arrays import concat_ascii, unique_sorted


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
