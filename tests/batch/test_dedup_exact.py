"""content_hashes (one numba pass over joined ASCII runs) equals content_hash_many."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import DedupConfig, dedup
from neardup.batch import exact as D
from neardup.errors import InputError
from neardup.fingerprint.simhash import content_hash_many

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


POOL = st.lists(st.lists(PIECES, max_size=20).map("".join), min_size=1, max_size=8)


@st.composite
def corpora(draw):
    """Texts drawn from a small pool (many exact and normalised copies), some varied."""
    pool = draw(POOL)
    picks = draw(st.lists(st.integers(0, len(pool) - 1), max_size=40))
    upper = draw(st.lists(st.booleans(), min_size=len(picks), max_size=len(picks)))
    return [pool[k].upper() if u else pool[k] for k, u in zip(picks, upper, strict=True)]


@settings(max_examples=150, deadline=None)
@given(
    texts=corpora(),
    chunk=st.sampled_from([1, 7, 64, 8 << 20]),
    workers=st.sampled_from([1, 2, 3]),
    config=st.sampled_from([None, {"bits": 128}, {"features": "shingles", "ngram": 2}]),
    long_chars=st.sampled_from([3, 1 << 22]),
    seen_chars=st.sampled_from([0, 1 << 30]),
)
def test_stage_exact_fingerprint_equals_the_two_stages(
    texts, chunk, workers, config, long_chars, seen_chars
):
    F = importlib.import_module("neardup.fingerprint.simhash")
    fp = DedupConfig(fingerprinter=config).make_fingerprinter()
    saved = D.EXACT_CHUNK_BYTES, D.EXACT_NUMBA_MIN_CHARS, F.CHUNK_CHARS, D.EXACT_SEEN_MIN_CHARS
    D.EXACT_CHUNK_BYTES, D.EXACT_NUMBA_MIN_CHARS = chunk, 0
    F.CHUNK_CHARS = long_chars  # longer texts: left to fingerprint_batch
    # copies from earlier chunks looked up in the dict (0) or fingerprinted again (2**30)
    D.EXACT_SEEN_MIN_CHARS = seen_chars
    try:
        timings: dict[str, float] = {}
        first, fps_u, empty_u = D.stage_exact_fingerprint(texts, fp, workers, timings)
        ref_first = D.stage_exact(texts, workers)
        unique = np.flatnonzero(ref_first == np.arange(len(texts)))
        ref_fps, ref_empty = D.stage_fingerprint(fp, [texts[i] for i in unique.tolist()], 1)
    finally:
        D.EXACT_CHUNK_BYTES, D.EXACT_NUMBA_MIN_CHARS, F.CHUNK_CHARS = saved[:3]
        D.EXACT_SEEN_MIN_CHARS = saved[3]
    assert first.dtype == np.int64 and np.array_equal(first, ref_first)
    assert fps_u.dtype == np.uint64 and fps_u.shape == ref_fps.shape
    assert np.array_equal(fps_u, ref_fps)
    assert np.array_equal(empty_u, ref_empty)
    assert set(timings) == {"exact", "fingerprint"}


def test_stage_exact_fingerprint_small_input_and_reference_fingerprinter(monkeypatch):
    texts = ["The  cat sat", "the cat sat", "Über alles", "über alles", "", "a dog"]
    fp = DedupConfig().make_fingerprinter()
    ref_first = D.stage_exact(texts)
    unique = np.flatnonzero(ref_first == np.arange(len(texts)))
    ref_fps, ref_empty = D.stage_fingerprint(fp, [texts[i] for i in unique.tolist()])
    for small in (0, 1 << 20):  # fused pass, the two stages
        monkeypatch.setattr(D, "EXACT_NUMBA_MIN_CHARS", small)
        first, fps_u, empty_u = D.stage_exact_fingerprint(texts, fp, 2)
        assert first.tolist() == [0, 0, 2, 2, 4, 5]
        assert np.array_equal(fps_u, ref_fps) and np.array_equal(empty_u, ref_empty)
    monkeypatch.setattr(D, "EXACT_NUMBA_MIN_CHARS", 0)
    md5 = DedupConfig(fingerprinter={**fp.config(), "hash": "md5"}).make_fingerprinter()
    first, fps_u, _ = D.stage_exact_fingerprint(texts, md5, 2)  # no kernel path: two stages
    assert np.array_equal(fps_u, md5.fingerprint_many([texts[i] for i in unique.tolist()]))
    assert D.stage_exact_fingerprint([], fp)[0].shape == (0,)


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(st.text(alphabet=st.characters(max_codepoint=127), max_size=30), max_size=20))
def test_lower_ascii_clean_serial_equals_parallel(texts):
    from neardup.text.ascii import lower_ascii_clean, lower_ascii_clean_serial

    data = "".join(texts).encode("ascii")
    lens = np.fromiter(map(len, texts), np.int64, len(texts))
    a = lower_ascii_clean(data, lens, workers=2)
    b = lower_ascii_clean_serial(data, lens, out=np.empty(3, np.uint8))
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x, y)
    assert b[0].tobytes() == data.lower()


@settings(max_examples=100, deadline=None)
@given(
    texts=corpora(),
    cuts=st.lists(st.integers(0, 40), max_size=6),
    chunk=st.sampled_from([1, 7, 64]),
    workers=st.sampled_from([1, 2]),
)
def test_exact_fingerprint_pass_fed_in_pieces_equals_the_two_stages(texts, cuts, chunk, workers):
    """Fed as a reader would (the list growing between calls), the pass gives the stages'
    results whatever the cuts."""
    fp = DedupConfig().make_fingerprinter()
    saved = D.EXACT_CHUNK_BYTES, D.EXACT_NUMBA_MIN_CHARS
    D.EXACT_CHUNK_BYTES, D.EXACT_NUMBA_MIN_CHARS = chunk, 0
    p = D.ExactFingerprintPass(fp, workers)
    try:
        growing: list[str] = []
        for c in sorted(cuts):
            growing.extend(texts[len(growing) : c])
            p.feed(growing)
        growing.extend(texts[len(growing) :])
        first, fps_u, empty_u = p.finish(growing)
        ref_first = D.stage_exact(texts)
    finally:
        p.close()
        D.EXACT_CHUNK_BYTES, D.EXACT_NUMBA_MIN_CHARS = saved
    unique = np.flatnonzero(ref_first == np.arange(len(texts)))
    ref_fps, ref_empty = D.stage_fingerprint(fp, [texts[i] for i in unique.tolist()])
    assert np.array_equal(first, ref_first)
    assert np.array_equal(fps_u, ref_fps) and np.array_equal(empty_u, ref_empty)


def test_dedup_with_a_prefed_pass_equals_dedup(monkeypatch):
    monkeypatch.setattr(D, "EXACT_CHUNK_BYTES", 40)
    monkeypatch.setattr(D, "EXACT_NUMBA_MIN_CHARS", 0)
    texts = [f"document {i % 7} about the river bridge and the library, take {i % 3}" for i in
             range(60)] + ["Über die Brücke", "über die brücke", ""]  # fmt: skip
    ref = dedup(texts, workers=2)

    def same(r):
        assert r.keep.tolist() == ref.keep.tolist() and r.cluster.tolist() == ref.cluster.tolist()
        assert r.pair_rows() == ref.pair_rows()

    p = D.ExactFingerprintPass(DedupConfig().make_fingerprinter(), 2)
    p.feed(texts[:30])
    same(dedup(texts, workers=2, exact_pass=p))
    # other fingerprinter settings, more texts fed than given, exact off: ignored (closed)
    p = D.ExactFingerprintPass(DedupConfig(fingerprinter={"bits": 128}).make_fingerprinter())
    p.feed(texts)
    same(dedup(texts, workers=2, exact_pass=p))
    p = D.ExactFingerprintPass(DedupConfig().make_fingerprinter())
    p.feed([*texts, "one more"])
    same(dedup(texts, workers=2, exact_pass=p))
    p = D.ExactFingerprintPass(DedupConfig().make_fingerprinter())
    p.feed(texts)
    r = dedup(texts, workers=2, exact=False, exact_pass=p)
    assert r.stats["exact_duplicates"] == 0
    with pytest.raises(InputError):
        q = D.ExactFingerprintPass(DedupConfig().make_fingerprinter())
        q.feed(texts)
        q.finish(texts[:5])
    q.close()
