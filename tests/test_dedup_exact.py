"""content_hashes (one numba pass over joined ASCII runs) equals content_hash_many."""

from __future__ import annotations

import importlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.fingerprint import content_hash_many

D = importlib.import_module("neardup.dedup")  # the module, not the dedup() function

PIECES = st.sampled_from(
    [*"aZ09 .,!\t\n\r\x0b\x0c\x1c\x1f\x00\x7f~", "  ", " x ", "AbC", "é", "世", "İ", "ﬁ"]
)
TEXTS = st.lists(st.lists(PIECES, max_size=20).map("".join), max_size=40)


@settings(max_examples=200, deadline=None)
@given(texts=TEXTS, chunk=st.sampled_from([1, 7, 64, 8 << 20]), workers=st.sampled_from([1, 2]))
def test_content_hashes_equal_content_hash_many(texts, chunk, workers):
    saved = D.EXACT_CHUNK_BYTES, D.EXACT_NUMBA_MIN_CHARS
    D.EXACT_CHUNK_BYTES, D.EXACT_NUMBA_MIN_CHARS = chunk, 0
    try:
        got = D.content_hashes(texts, workers=workers)
    finally:
        D.EXACT_CHUNK_BYTES, D.EXACT_NUMBA_MIN_CHARS = saved
    ref = content_hash_many(texts, normalize=True).reshape(len(texts), 2)
    assert got.dtype == np.uint64 and got.shape == (len(texts), 2)
    assert np.array_equal(got, ref)


def test_stage_exact_groups_normalised_copies(monkeypatch):
    texts = ["The  cat", "the cat", "THE CAT ", "dog", "Über", "über", "", ""]
    for small in (0, 1 << 20):  # numba path, content_hash_many path
        monkeypatch.setattr(D, "EXACT_NUMBA_MIN_CHARS", small)
        assert D.stage_exact(texts, workers=2).tolist() == [0, 0, 0, 3, 4, 4, 6, 6]
