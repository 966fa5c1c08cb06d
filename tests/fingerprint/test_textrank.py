"""TextRank weights (seed 003): the NumPy ranking equals its pure reference, is deterministic
integer arithmetic, and Fingerprinter(weights="textrank") round-trips its config and agrees with
the reference path."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import neardup
from neardup.fingerprint import simhash
from neardup.text.reference import textrank_weights_reference
from neardup.text.weights import TEXTRANK_LEVELS, textrank_weights

TEXTS = [
    "The quick brown fox jumps over the lazy dog, and the lazy dog sleeps in the sun.",
    "RT @bob: the council announced a new budget for the river bridge #news",
    "今天天气很好，我们去公园散步吧。公园里有很多人在散步。",
    "第三十六条 官方兽医执行动物防疫监督检查任务时，应当着佩带统一标志的工作服装。",
    "",
    "word",
    "a a a a a a",
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 9), max_size=80), st.booleans())
def test_textrank_equals_the_pure_reference(seq: list[int], wide: bool) -> None:
    if wide:  # 128-bit features: (hi, lo) rows, a few sharing a hi word
        keys = np.array([(x // 3, x % 3) for x in seq], np.uint64).reshape(-1, 2)
        want = textrank_weights_reference([(x // 3, x % 3) for x in seq])
        nodes, w = textrank_weights(keys)
        got = {tuple(r): x for r, x in zip(nodes.tolist(), w.tolist(), strict=True)}
    else:
        big = [x * 0x9E3779B97F4A7C15 % (1 << 64) for x in seq]  # spread over uint64
        want = textrank_weights_reference(big)
        nodes, w = textrank_weights(np.array(big, np.uint64))
        got = dict(zip(nodes.tolist(), w.tolist(), strict=True))
    assert got == want
    if seq:
        assert min(want.values()) >= 1 and max(want.values()) == TEXTRANK_LEVELS


def test_textrank_ranks_central_words_higher() -> None:
    # "river" co-occurs with everything; the words at the ends with few others
    seq = [1, 2, 9, 3, 4, 9, 5, 6, 9, 7, 8, 9, 1, 9]
    w = textrank_weights_reference(seq)
    assert w[9] == TEXTRANK_LEVELS and all(w[9] > w[x] for x in seq if x != 9)
    assert textrank_weights_reference([5]) == {5: TEXTRANK_LEVELS}  # no edges: all equal
    assert textrank_weights_reference([]) == {}


def test_fingerprinter_textrank_config_and_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    fp = neardup.Fingerprinter(weights="textrank")
    assert fp.config()["weights"] == "textrank"
    assert neardup.Fingerprinter.from_config(fp.config()) == fp
    fast = fp.fingerprint_many(TEXTS)
    wide = neardup.Fingerprinter(128, weights="textrank").fingerprint_many(TEXTS)
    assert np.array_equal(wide[:, 0], fast)  # the high word is the 64-bit fingerprint
    monkeypatch.setattr(simhash, "_FORCE_REFERENCE", True)  # the pure ranking
    assert np.array_equal(neardup.Fingerprinter(weights="textrank").fingerprint_many(TEXTS), fast)
    assert [int(x) for x in fast[:3]] == [
        neardup.Fingerprinter(weights="textrank").fingerprint(t) for t in TEXTS[:3]
    ]
    assert fast[4] == 0  # no features: fingerprint 0, as with every weighting


def test_textrank_golden_and_options() -> None:
    fp = neardup.Fingerprinter(weights="textrank")
    # pinned: a change to the definition shows here
    assert fp.fingerprint("The quick brown fox jumps over the lazy dog") == 0x593B03235397E4AA
    assert fp.fingerprint("今天天气很好，我们去公园散步吧") == 0x3C5DE79ECBF5AE68
    shingled = neardup.Fingerprinter(features="words", ngram=2, weights="textrank", stopwords=True)
    assert shingled.fingerprint("The quick brown fox jumps over the lazy dog") == 0xE71A2C63047471C3
    jieba = neardup.Fingerprinter(features="jieba", weights="textrank")
    assert jieba.fingerprint(TEXTS[2]) != fp.fingerprint(TEXTS[2])  # words vs char bigrams
    with pytest.raises(neardup.ConfigError, match="textrank"):
        neardup.Fingerprinter(weights="pagerank")


def test_dedup_with_textrank_fingerprints() -> None:
    texts = [
        "the quick brown fox jumps over the lazy dog",
        "the quick brown fox jumped over the lazy dog",
        "今天天气很好我们去公园散步吧",
    ]
    r = neardup.dedup(texts, fingerprinter={"weights": "textrank"})
    assert r.keep.tolist() == [True, False, True]
    assert r.stats["config"]["fingerprinter"]["weights"] == "textrank"
