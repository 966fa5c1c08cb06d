"""Normalisation, tokenizers, language detection, stop words, IDF tables."""

from __future__ import annotations

import re
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.errors import ConfigError, FormatError, InputError, InputTypeError
from neardup.text import (
    char_ngrams,
    detect_lang,
    jieba_words,
    normalize,
    stopwords,
    tokenize,
    word_shingles,
    words,
)
from neardup.text.normalize import casefold_nfkc, nfkc, replace_surrogates
from neardup.text.tokenize import _SEP_RUN, prepare, prepare_utf8, prepare_utf8_many
from neardup.text.weights import IdfTable, build_idf, keyword_weights, quantize_idf, shipped_zh_idf


def test_normalize_nfkc_casefold_whitespace():
    assert normalize("  Ｈｅｌｌｏ\u3000WORLD\n\t ") == "hello world"
    assert normalize("Straße") == "strasse"
    assert normalize("ﬁne") == "fine"  # compatibility ligature
    assert normalize("") == ""


def test_normalize_replaces_lone_surrogates():
    assert normalize("a\ud800b") == "a\ufffdb"
    assert replace_surrogates("\udfff") == "\ufffd"


def test_normalize_rejects_non_str():
    with pytest.raises(InputTypeError, match="decode bytes first"):
        normalize(b"abc")  # type: ignore[arg-type]


def test_words_split_on_non_word_characters():
    assert words("Hello, WORLD! it's 3.14 x_y") == ["hello", "world", "it", "s", "3", "14", "x_y"]
    assert words("Ｆｕｌｌ—width “quotes”") == ["full", "width", "quotes"]
    assert words("  \n ") == []


def test_jieba_segments_chinese_and_keeps_ascii_words():
    toks = jieba_words("我们在北京天安门，Hello World")
    assert toks[:4] == ["我们", "在", "北京", "天安门"]
    assert toks[-2:] == ["hello", "world"]


def test_char_ngrams_compact_separators():
    assert char_ngrams("ab,  cd", 3) == ["ab ", "b c", " cd"]
    assert char_ngrams("中文", 3) == ["中文"]
    assert char_ngrams("!!!", 2) == []
    assert char_ngrams("你好，世界", 2) == ["你好", "好 ", " 世", "世界"]


def test_word_shingles_short_rule():
    assert word_shingles(["a", "b", "c"], 2) == ["a b", "b c"]
    assert word_shingles(["a", "b"], 3) == ["a b"]
    assert word_shingles([], 3) == []


def test_tokenize_modes():
    assert tokenize("a b c", "words") == ["a", "b", "c"]
    assert tokenize("a b c", "shingles") == ["a b", "b c"]
    assert tokenize("中文文本", "auto")[0] == "中文"
    assert tokenize("abcd", "chars", 3) == ["abc", "bcd"]


def test_detect_lang():
    assert detect_lang("今天天气很好，我们去公园吧。") == "zh"
    assert detect_lang("The weather is nice today") == "en"
    assert detect_lang("Привет, как дела?") == "other"
    assert detect_lang("") == "en"
    assert detect_lang("iPhone 15 发布会今天举行") == "zh"
    assert detect_lang("iPhone 15 发布会 today") == "en"  # 3 of 16 word chars are Han


def test_stopwords_shipped():
    assert "the" in stopwords("en") and "的" in stopwords("zh")
    with pytest.raises(ConfigError, match="stop words exist for"):
        stopwords("fr")


def test_shipped_zh_idf_table():
    t = shipped_zh_idf()
    assert len(t.idf) > 200_000
    assert t.idf["的"] < t.idf["外星人"]
    hs, ws, default = t.hash_table("xxh64", 0)
    assert len(hs) == len(ws) and (hs[1:] > hs[:-1]).all() and default >= 1


def test_build_save_load_idf(tmp_path):
    t = build_idf([["a", "b"], ["a", "c"], ["a"]])
    assert t.idf["a"] == 0.0 and t.idf["b"] > 1.0
    p = tmp_path / "idf.txt"
    t.save(p)
    t2 = IdfTable.load(p)
    assert t2.idf == pytest.approx(t.idf, abs=1e-6)
    p.write_text("good 1.0\nbad line without number x\n", encoding="utf-8")
    with pytest.raises(FormatError, match=":2:"):
        IdfTable.load(p)
    with pytest.raises(InputError):
        build_idf([])


def test_quantize_and_keywords():
    assert quantize_idf(0.2) == 1 and quantize_idf(7.6) == 8
    import numpy as np

    w = keyword_weights(np.array([10, 5, 1, 10]), np.array([4, 3, 2, 1], np.uint64), 3)
    assert w.tolist() == [5, 3, 0, 5]


def test_prepare_many_jieba_equals_one_by_one():
    from neardup.text import prepare
    from neardup.text.tokenize import prepare_many

    texts = [
        "我们在北京天安门",
        "hello WORLD",
        "",
        "中文，English 混合。\n第二行",
        "  ",
        "飞碟 51区",
    ]
    got = [t.split() for t in prepare_many(texts, "jieba")]
    assert got == [prepare(t, "jieba").split() for t in texts]


_WS_REGEX = re.compile(r"\s+")
_SPACES = "".join(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())


def test_normalize_whitespace_split_equals_regex_on_every_space():
    # normalize() collapses whitespace with str.split(); the documented form is re.sub(r"\s+")
    assert all(_WS_REGEX.fullmatch(c) for c in _SPACES)
    text = f"{_SPACES}a{_SPACES}B\u00df{_SPACES[::-1]}c{_SPACES}"
    assert normalize(text) == _WS_REGEX.sub(" ", casefold_nfkc(text)).strip() == "a bss c"


@given(
    st.text(max_size=60)
    | st.text(alphabet=st.sampled_from(_SPACES + "aZ\u00df\u3000\uff21"), max_size=30)
)
def test_normalize_equals_regex_definition(text):
    assert normalize(text) == _WS_REGEX.sub(" ", casefold_nfkc(text)).strip()


# ------------------------------------------------------------------ prepare_utf8 fast path
_MIXED = st.text(
    alphabet=st.sampled_from(
        [
            *"abcXYZ019_ .,;:'\"<>=!?-\n\t",
            "é",
            "É",
            "’",
            "“",
            "”",
            "—",
            "ß",
            "Σ",
            "ς",
            "ﬁ",
            "Ｆ",
            "½",
            "℀",
            "İ",
            "™",
            "\u0301",
            *["\u1100", "\u1161", "\u11a8", "\u3131", "\u314f", "가", "\u0bc6", "\u0bbe"],
            *["\u0338", "中", "文", "，", "😀", "\ud800", "\u00a0", "\u2028"],
        ]
    ),
    max_size=80,
)


def _tokens(prepared: str) -> str:
    return _SEP_RUN.sub(" ", prepared).strip(" ")


@given(_MIXED, st.sampled_from(["words", "chars"]))
def test_prepare_utf8_gives_the_tokens_of_prepare(text, mode):
    fast = prepare_utf8(text, mode).decode("utf-8")
    assert _tokens(fast) == _tokens(prepare(text, mode))


@given(st.lists(_MIXED, max_size=12), st.sampled_from(["words", "chars", "jieba"]))
def test_prepare_utf8_many_gives_each_text_the_tokens_of_prepare(texts, mode):
    """Many texts mapped as one array of code points (a lone surrogate anywhere sends the
    batch one by one; a character that may compose, or that becomes several, its text)."""
    import importlib
    from unittest import mock

    tokenize = importlib.import_module("neardup.text.tokenize")
    with mock.patch.object(tokenize, "_MANY_MIN", 1):  # the array path, however few
        got = prepare_utf8_many(texts, mode)
    assert len(got) == len(texts)
    for text, fast in zip(texts, got, strict=True):
        assert _tokens(fast.decode("utf-8")) == _tokens(prepare(text, mode))


def test_prepare_utf8_many_maps_chinese_per_character_and_batches_by_size(monkeypatch):
    """Chinese text (which prepare_utf8 prepares as a whole) is mapped character by character:
    its punctuation becomes spaces, full-width letters fold, ASCII is lowered and keeps its
    punctuation; a text with a character the per-character path cannot map (a combining mark,
    a ligature that becomes two letters) gets prepare_utf8's bytes; any batch size gives the
    same."""
    import importlib

    tokenize = importlib.import_module("neardup.text.tokenize")
    monkeypatch.setattr(tokenize, "_MANY_MIN", 1)  # the array path (a few go one by one)
    texts = [
        "中文，测试。ＡＢＣ abc-Def!",
        "",
        "plain ASCII, Text.",
        "美国飞碟\u0301 争议",  # a combining mark: may compose with its neighbour
        "ﬁne 中文",  # becomes two characters
        "飞碟😀！",
    ]
    got = prepare_utf8_many(texts)
    assert got[0] == "中文 测试 abc abc-def!".encode()
    assert got[1] == b"" and got[2] == b"plain ascii, text."
    assert got[3] == prepare_utf8(texts[3]) and got[4] == prepare_utf8(texts[4])
    assert got[5] == "飞碟  ".encode()  # (an emoji is not a word character)
    monkeypatch.setattr(tokenize, "_MANY_CHARS", 5)  # a batch a text or two
    assert prepare_utf8_many(texts) == got
    monkeypatch.setattr(tokenize, "_MANY_MIN", 8)  # one by one: prepare_utf8's own bytes
    assert prepare_utf8_many(texts) == [prepare_utf8(t) for t in texts]


def test_prepare_utf8_keeps_ascii_punctuation_and_maps_non_ascii():
    filler = " plain words," * 20  # mostly-ASCII text takes the per-character path
    assert (
        prepare_utf8("Café’s “Quote”!" + filler, "words") == ("café s  quote !" + filler).encode()
    )
    # mostly non-ASCII text takes the whole-text path (ASCII punctuation becomes a space there)
    assert prepare_utf8("Café’s “Quote”!", "words") == "café s  quote  ".encode()
    assert prepare_utf8("STRAẞE ﬁne", "words") == b"strasse fine"
    assert prepare_utf8("plain ASCII, Text.") == b"plain ascii, text."
    # jamo compose with their neighbours: the whole-text path is taken, same tokens
    assert _tokens(prepare_utf8("\u1100\u1161 x").decode()) == _tokens(prepare("\u1100\u1161 x"))
    assert prepare_utf8("中文", "jieba") == prepare("中文", "jieba").encode()


def test_no_ascii_character_composes_with_a_following_word_character():
    """prepare() leaves ASCII punctuation in place outside jieba mode; that is exact only if
    no canonical composition starts with an ASCII character and continues with a word character
    (the only ones, '<', '=' and '>' + U+0338, continue with a non-word mark)."""
    import unicodedata

    offenders = []
    for cp in range(0x80, 0x30000):
        d = unicodedata.decomposition(chr(cp))
        if d and not d.startswith("<"):
            parts = [int(x, 16) for x in d.split()]
            if len(parts) == 2 and parts[0] < 0x80 and re.match(r"\w", chr(parts[1])):
                offenders.append(hex(cp))
    assert offenders == []


# no composing characters here (those send the text to the whole-text path; tested above)
_MANY = [*"éÉ’“”—ßΣςﬁＦ½℀İ™", "\u0301", "中", "，", "😀", "\u00a0", "\u2028"]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(_MANY), min_size=257, max_size=400), st.integers(0, 2**32))
def test_prepare_utf8_many_non_ascii_characters_vectorised_path(chars, seed):
    """More than _LOOP_MAX non-ASCII characters in mostly-ASCII text: the vectorised path
    (distinct characters by np.unique, bytes.replace) gives the tokens of prepare()."""
    import random

    rng = random.Random(seed)
    text = "".join(c + rng.choice([" Word, ", " ab-CD. ", "xyz ", " Q "]) for c in chars)
    from neardup.text.tokenize import _LOOP_MAX, _prepare_utf8_mostly_ascii

    assert len(chars) > _LOOP_MAX
    fast = _prepare_utf8_mostly_ascii(text)
    assert fast is not None  # the vectorised path ran
    assert _tokens(fast.decode("utf-8")) == _tokens(prepare(text))
    assert _tokens(prepare_utf8(text).decode("utf-8")) == _tokens(prepare(text))


_NFKC_ALPHABET = st.one_of(
    st.characters(min_codepoint=0xFF01, max_codepoint=0xFF9F),  # full-width, half-width kana
    st.sampled_from("\u3000 a A é ß ﬁ ① ㈱ ｶﾞ 가 \u1100\u1161\u11a8 世。，"),
    st.characters(min_codepoint=0x0300, max_codepoint=0x036F),  # combining marks
    st.characters(min_codepoint=0x3099, max_codepoint=0x309A),  # kana voicing marks
    st.characters(codec="utf-8"),
)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=_NFKC_ALPHABET, max_size=40))
def test_nfkc_equals_unicodedata(text: str) -> None:
    assert nfkc(text) == unicodedata.normalize("NFKC", text)


def test_nfkc_every_full_width_character_beside_marks() -> None:
    # a full-width letter before a combining mark composes as its ASCII twin would
    for cp in [*range(0xFF01, 0xFF5F), 0x3000]:
        for after in ("", "\u0301", "\u0308\u0301", "\u3099", "世"):
            for before in ("", "e", "\u0301"):
                text = before + chr(cp) + after
                assert nfkc(text) == unicodedata.normalize("NFKC", text), ascii(text)


@given(st.lists(st.sampled_from([*"@#/.:htpwcnbilyo 中", "http", "www.", "t.co/"])))
def test_has_social_marker_is_a_test_per_marker(pieces):
    from neardup.text.social import SOCIAL_MARKERS, has_social_marker

    text = "".join(pieces)
    assert has_social_marker(text) == any(m in text for m in SOCIAL_MARKERS)
