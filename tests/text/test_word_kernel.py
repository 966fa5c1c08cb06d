"""The token kernels' pre-tokenised text by the word kernel (:mod:`neardup.text.word_kernel`)
against the verifier's regular expressions, on every code point and on generated text."""

from __future__ import annotations

import ast
import os
import random
import subprocess
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.text import word_kernel as words_mod
from neardup.text import wordsplit
from neardup.text.word_kernel import SINGLE, WORD, char_classes, joined_words
from neardup.text.wordsplit import CJK_RANGES, joined_words_reference, split_words
from neardup.verify import Verifier
from neardup.verify.rule import tokenize

EVERY = "".join(map(chr, range(0x110000)))


def _kernel_split(text: str) -> list[str]:
    out = joined_words([text])[0].decode("utf-8")
    return out.split(" ") if out else []


def test_every_code_point_in_order_and_shuffled() -> None:
    # each code point's class and every kind of neighbour: the whole range in order, then
    # shuffled (an ideograph beside a letter, a separator, an astral character, a surrogate)
    assert _kernel_split(EVERY) == split_words(EVERY)
    rng = random.Random(7)
    cps = list(range(0x110000))
    for _ in range(2):
        rng.shuffle(cps)
        text = "".join(map(chr, cps))
        assert _kernel_split(text) == split_words(text)


def test_classes_are_the_regex_word_characters() -> None:
    cls = char_classes()
    assert cls.shape == (0x110000,) and not cls.flags.writeable
    for c in (ord("a"), ord("Z"), ord("7"), 0xE9, 0x0661, 0x10400):  # letters, digits, astral
        assert cls[c] == WORD
    for c in (ord(" "), ord("_"), ord("-"), 0x3002, 0x1F600, 0xD800, 0x30FB):
        assert cls[c] == 0  # space, underscore, CJK full stop, emoji, surrogate, katakana dot
    for a, b in CJK_RANGES:
        inside = [c for c in range(a, b + 1) if chr(c).isalnum()]
        assert inside and all(cls[c] == SINGLE for c in inside)
    assert char_classes() is cls  # made once


def test_joined_words_matches_reference_per_text() -> None:
    texts = [
        "",
        "!!!",
        "héllo, wörld_2",
        "世界abc世",
        "ａｂｃ１２３",  # full-width: the caller normalises; the kernel splits what it is given
        "x\ud800y",  # a lone surrogate is a separator
        "😀émoji😀",
        "한국어 텍스트",
        "カタカナ・ひらがなー",
        "a" * 70_000 + "中",
    ]
    assert joined_words(texts) == joined_words_reference(texts)
    assert joined_words([]) == []
    assert [joined_words([t])[0] for t in texts] == joined_words_reference(texts)


_ALPHABET = st.one_of(
    st.characters(codec="utf-8"),
    st.characters(min_codepoint=0x3040, max_codepoint=0x30FF),
    st.characters(min_codepoint=0x4E00, max_codepoint=0x4E80),
    st.characters(min_codepoint=0xAC00, max_codepoint=0xAC40),
    st.sampled_from(" _-.,!?\t\n'\"@#ｱ①²ǅß"),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(alphabet=_ALPHABET, max_size=60), max_size=6))
def test_generated_texts(texts: list[str]) -> None:
    assert joined_words(texts) == joined_words_reference(texts)
    for t in texts:
        assert _kernel_split(t) == split_words(t)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=80), st.booleans())
def test_tokenize_and_joined_tokens(text: str, strip_social: bool) -> None:
    # tokenize normalises (NFKC, casefold, social markers), then the kernel splits
    t = unicodedata.normalize("NFKC", text).casefold()
    tokens = tokenize(text, strip_social=strip_social)
    if not strip_social:
        assert tokens == split_words(t)
    v = Verifier(strip_social=strip_social)
    assert v.tokens(text) == tokens
    assert v.joined_tokens([text, "plain ascii", text]) == [
        " ".join(tokens).encode("utf-8"),
        b"plain ascii",
        " ".join(tokens).encode("utf-8"),
    ]


def test_social_markers_are_stripped_before_the_kernel() -> None:
    text = "RT @用户: 你好，世界！ https://t.co/x #新闻 café"
    assert tokenize(text) == ["你", "好", "世", "界", "café"]
    assert Verifier().joined_tokens([text]) == ["你 好 世 界 café".encode()]


def test_reference_switch_runs_the_regular_expressions() -> None:
    code = (
        "import sys; from neardup.verify import rule;"
        "out = (rule._PURE_WORDS, rule.tokenize('héllo 世界'), rule.joined_tokens(['世a']));"
        "print(repr((*out, 'neardup.text.word_kernel' in sys.modules)))"
    )
    env = {**os.environ, "NEARDUP_REFERENCE": "text"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    # the kernel's module (and numba with it) is never imported under the switch
    assert ast.literal_eval(out.stdout) == (True, ["héllo", "世", "界"], ["世 a".encode()], False)


def test_the_verifier_imports_without_numba() -> None:
    # the kernel is imported when first asked for: the CLI's and the verifier's imports stay
    # cheap (numba's import alone is ~0.4 s)
    code = (
        "import sys; import neardup.verify.rule, neardup.cli.main;"
        "print('numba' in sys.modules, 'neardup.text.word_kernel' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_module_exports() -> None:
    assert sorted(words_mod.__all__) == ["char_classes", "joined_words"]
    assert sorted(wordsplit.__all__) == ["CJK_CLASS", "CJK_RANGES", "split_words"]


@pytest.mark.parametrize("n", [1, 3, 64])
def test_many_texts_in_one_call(n: int) -> None:
    rng = random.Random(n)
    pool = "的一是在不了有和人这中大为上个国我以要 abc ÄÖÜ 😀_ー"
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 40))) for _ in range(n)]
    assert joined_words(texts) == joined_words_reference(texts)
