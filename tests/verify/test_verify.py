"""Verifier: decisions, config, scalar reference vs vectorised path."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.errors import ConfigError, InputError, InputTypeError
from neardup.verify.rule import TokenEncoder, Verifier, tokenize


def test_tokenize_words_cjk_and_social():
    assert tokenize("RT @bob: Hello, World! http://t.co/x #tag") == ["hello", "world"]
    assert tokenize("//@小明: 今天天气好 #新闻#") == ["今", "天", "天", "气", "好"]
    assert tokenize("ＡＢＣ abc") == ["abc", "abc"]  # NFKC + casefold
    assert tokenize("") == []


def test_defaults_and_config_round_trip():
    v = Verifier()
    assert v.candidate_distance(50) == 18 and v.candidate_distance(5000) == 14
    assert v.max_candidate_distance == 18
    assert Verifier.from_config(v.config()) == v
    w = Verifier(threshold=0.9, short_distance=10, long_distance=5)
    assert Verifier.from_config(w.config()) == w and w != v


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"threshold": 0}, "threshold must be in"),
        ({"threshold": 1.5}, "threshold must be in"),
        ({"containment": 0}, "containment must be"),
        ({"short_distance": -1}, "short_distance must be"),
        ({"long_distance": 65}, "<= 64"),
        ({"trust_distance": 20}, "must not exceed long_distance"),
    ],
)
def test_bad_config(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        Verifier(**kwargs)


def test_from_config_unknown_key():
    with pytest.raises(ConfigError, match="unknown Verifier config keys"):
        Verifier.from_config({"nope": 1})


def test_near_duplicates_and_not():
    v = Verifier()
    a = "The quick brown fox jumps over the lazy dog near the river bank today"
    ok, score = v.verify(a, a.replace("quick", "fast"), 5)
    assert ok and 0.9 < score < 1
    ok, score = v.verify(a, "Completely different words about markets and budgets in winter", 5)
    assert not ok and score < 0.3
    assert v.verify("", "", 0) == (False, 0.0)
    assert v.verify("!!!", "hello", 0) == (False, 0.0)


def test_social_repost_is_a_duplicate():
    v = Verifier()
    ok, _ = v.verify(
        "Big news from the city council tonight",
        "RT @cityfan: Big news from the city council tonight 🎉 #news https://t.co/abc",
        12,
    )
    assert ok


def test_template_containment():
    v = Verifier()
    body = " ".join(f"word{i}" for i in range(60))
    wrapped = (
        "Home | News | Sports | Contact us today\n" * 12
        + body
        + "\nCopyright 2024 all rights reserved"
    )
    ok, score = v.verify(body, wrapped, 12)
    assert ok and score == 1.0
    assert v.similarity(body, wrapped) < 0.675  # accepted by containment, not ratio
    # containment needs enough tokens in the shorter text
    short = "word1 word2 word3"
    assert not v.verify(short, wrapped, 12)[0]
    assert not Verifier(containment=2.0).verify(body, wrapped, 12)[0]


def test_trust_distance_skips_similarity_for_long_texts():
    v = Verifier(trust_distance=2)
    long_a, long_b = "a " * 150, "zzz " * 100
    assert v.verify(long_a, long_b, 2) == (True, 1 - 2 / 64)
    assert not v.verify(long_a, long_b, 3)[0]
    assert not v.verify("short a", "short b", 1)[0]  # short texts are always verified


def test_verify_input_types():
    with pytest.raises(InputTypeError, match="text 1 is int"):
        Verifier().verify("a", 3, 0)  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match=r"texts_b\[1\]"):
        Verifier().verify_many(["a", "b"], ["a", None], [0, 0])  # type: ignore[list-item]
    with pytest.raises(InputError, match="equal lengths"):
        Verifier().verify_many(["a"], ["a", "b"], [0])


texts = st.lists(st.sampled_from(["a", "b", "c", "d", "the", "猫", "狗"]), max_size=40).map(
    " ".join
)


@given(st.lists(st.tuples(texts, texts), max_size=15), st.integers(0, 25))
def test_verify_many_agrees_with_scalar_reference(pairs, distance):
    v = Verifier(min_containment_tokens=5)
    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    ok, score = v.verify_many(a, b, [distance] * len(pairs))
    for i, (x, y) in enumerate(pairs):
        ok1, s1 = v.verify(x, y, distance)
        assert ok[i] == ok1
        assert score[i] == pytest.approx(s1)


@given(texts, texts)
def test_similarity_symmetric_and_bounded(x, y):
    v = Verifier()
    s = v.similarity(x, y)
    assert 0.0 <= s <= 1.0
    assert s == pytest.approx(v.similarity(y, x))


def test_token_encoder_is_consistent():
    enc = TokenEncoder()
    s1 = enc.encode(["a", "b", "a"])
    assert len(s1) == 3 and s1[0] == s1[2] != s1[1]
    assert enc.encode(["b"]) == s1[1]
    assert len(enc) == 2


def test_decide_vectorised_edge_cases():
    v = Verifier()
    ok, score = v.decide(np.array([0, 5, 0]), np.array([0, 5, 3]), np.array([4, 5, 0]))
    assert ok.tolist() == [False, True, False]
    assert score.tolist() == [0.0, 1.0, 0.0]


_TOKENS = st.lists(st.integers(0, 12), max_size=40)


@given(st.lists(st.tuples(_TOKENS, _TOKENS), min_size=1, max_size=12))
def test_overlap_kernel_equals_reference_and_bounds_lcs(pairs):
    from rapidfuzz.distance import LCSseq

    from neardup.verify.overlap import (
        bound_decisions,
        encode_sorted,
        overlap_many,
    )
    from neardup.verify.reference import overlap_reference

    seqs = ["".join(chr(0x61 + t) for t in s) for p in pairs for s in p]
    values, offsets = encode_sorted(seqs)
    ia = np.arange(0, len(seqs), 2)
    got = overlap_many(values, offsets, ia, ia + 1, workers=2)
    for m, (x, y) in enumerate(pairs):
        a, b = seqs[2 * m], seqs[2 * m + 1]
        assert got[m] == overlap_reference(x, y) >= LCSseq.similarity(a, b)
    for v in (Verifier(), Verifier(min_containment_tokens=3), Verifier(containment=1.5)):
        c = v.config()
        could, ratio = bound_decisions(
            values,
            offsets,
            ia,
            ia + 1,
            threshold=c["threshold"],
            containment=c["containment"],
            min_containment_tokens=c["min_containment_tokens"],
            workers=2,
        )
        lens = np.diff(offsets)
        ok_ref, _score_ref = v.decide(got, lens[ia], lens[ia + 1])
        assert np.array_equal(could, ok_ref)
        rat = np.where(
            lens[ia] + lens[ia + 1] > 0, 2.0 * got / np.maximum(lens[ia] + lens[ia + 1], 1), 0.0
        )
        assert np.array_equal(ratio, np.where(np.minimum(lens[ia], lens[ia + 1]) > 0, rat, 0.0))


@given(st.lists(st.tuples(_TOKENS, _TOKENS), min_size=1, max_size=12))
def test_compare_indexed_prune_keeps_every_decision(pairs):
    v = Verifier(min_containment_tokens=3)
    enc = TokenEncoder()
    encoded = [enc.encode([f"t{t}" for t in s]) for p in pairs for s in p]
    ia = np.arange(0, len(encoded), 2)
    ok_ref, score_ref = v.compare_encoded_many(
        [encoded[i] for i in ia], [encoded[i + 1] for i in ia]
    )
    ok, score = v.compare_indexed(encoded, ia, ia + 1)
    ok_p, score_p = v.compare_indexed(encoded, ia, ia + 1, prune=True, workers=2)
    assert np.array_equal(ok, ok_ref) and np.array_equal(ok_p, ok_ref)
    assert np.array_equal(score, score_ref)
    assert np.array_equal(score_p[ok_p], score_ref[ok_ref])
    assert (score_p >= score_ref).all()


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80) | st.text(max_size=40))
def test_tokenize_ascii_fast_path_equals_regex(text):
    import re
    import unicodedata

    t = unicodedata.normalize("NFKC", text).casefold()
    if t.isascii():
        assert tokenize(text, strip_social=False) == re.findall(r"[^\W_]+", t)


def test_token_encoder_fast_path_matches_first_appearance():
    enc = TokenEncoder()
    assert enc.encode(["b", "a", "b", "c"]) == "\x01\x02\x01\x03"
    assert enc.encode(["c", "d"]) == "\x03\x04" and len(enc) == 4
