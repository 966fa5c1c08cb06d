"""The bounded cost of verification: the LCS cap (multiset overlap above it) and long texts."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.errors import ConfigError
from neardup.verify.overlap import lcs_many
from neardup.verify.reference import overlap_reference
from neardup.verify.rule import DEFAULT_MAX_LCS_CELLS, LONG_CHARS, TokenEncoder, Verifier
from neardup.verify.tokens import token_bytes

WORDS = [f"w{i}" for i in range(40)]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _edit(rng: random.Random, text: str, rate: float) -> str:
    toks = text.split()
    for _ in range(int(len(toks) * rate)):
        toks[rng.randrange(len(toks))] = rng.choice(WORDS)
    return " ".join(toks)


def test_config_omits_default_cap_and_round_trips() -> None:
    assert "max_lcs_cells" not in Verifier().config()  # stored configs stay equal
    v = Verifier(max_lcs_cells=1000)
    assert v.config()["max_lcs_cells"] == 1000
    assert Verifier.from_config(v.config()) == v
    with pytest.raises(ConfigError, match="max_lcs_cells"):
        Verifier(max_lcs_cells=0)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(WORDS[:6]), min_size=1, max_size=30),
    st.lists(st.sampled_from(WORDS[:6]), min_size=1, max_size=30),
    st.integers(1, 400),
)
def test_cap_means_overlap_everywhere(a: list[str], b: list[str], cap: int) -> None:
    """Over the cap every path gives the multiset overlap; under it, the LCS."""
    v = Verifier(max_lcs_cells=cap, containment=2.0)
    ta, tb = " ".join(a), " ".join(b)
    enc = TokenEncoder()
    ea, eb = enc.encode(v.tokens(ta)), enc.encode(v.tokens(tb))
    from rapidfuzz.distance import LCSseq

    expect = overlap_reference(ea, eb) if len(ea) * len(eb) > cap else LCSseq.similarity(ea, eb)
    ratio = 2.0 * expect / (len(ea) + len(eb))
    assert v.compare_encoded(ea, eb) == (ratio >= v.threshold, pytest.approx(ratio))
    _, score = v.compare_encoded_many([ea], [eb])
    assert score[0] == pytest.approx(ratio)
    _, score = v.compare_indexed([ea, eb], np.array([0]), np.array([1]))
    assert score[0] == pytest.approx(ratio)
    lcs = lcs_many(token_bytes(v, [ta, tb]), np.array([0]), np.array([1]), max_cells=cap)
    assert int(lcs[0]) == expect


def test_long_texts_decide_as_short_ones_under_the_cap() -> None:
    """The token-hash path of long texts computes the same LCS as the encoded strings."""
    rng = random.Random(5)
    v = Verifier()
    pairs = []
    for rate in (0.05, 0.3, 0.6):
        a = _text(rng, 3000)
        assert len(a) >= LONG_CHARS
        pairs.append((a, _edit(rng, a, rate)))
    ok, score = v.verify_many([p[0] for p in pairs], [p[1] for p in pairs], [5] * 3)
    for (a, b), o, s in zip(pairs, ok.tolist(), score.tolist(), strict=True):
        enc = TokenEncoder()
        assert v.compare_encoded(enc.encode(v.tokens(a)), enc.encode(v.tokens(b))) == (
            o,
            pytest.approx(s),
        )
        assert v.verify(a, b, 5) == (o, pytest.approx(s))


def test_two_megabyte_pair_is_linear() -> None:
    """2 MB edited copies: decided in linear time (the cap keeps the quadratic LCS away)."""
    rng = random.Random(1)
    a = _text(rng, 700_000)[:2_000_000]
    b = _edit(rng, a, 0.02)
    v = Verifier()
    t = time.perf_counter()
    ok, score = v.verify_many([a, a], [b, b], [3, 3])
    cold = time.perf_counter() - t
    assert ok.all() and score[0] > 0.9
    assert len(v.tokens(a)) ** 2 > DEFAULT_MAX_LCS_CELLS
    assert cold < 5.0, cold
    v.prepare([a, b])
    t = time.perf_counter()
    v.verify_many([a], [b], [3])
    warm = time.perf_counter() - t
    assert warm < 0.5, warm  # cached token hashes: no tokenisation


def test_cache_is_bounded() -> None:
    import neardup.verify.rule as vm

    v = Verifier()
    rng = random.Random(2)
    texts = [_text(rng, 3000) for _ in range(3)]
    assert v.prepare(texts) == 3
    assert v.prepare(texts) == 0  # already there
    assert v._cache_tokens <= vm.CACHE_TOKENS
    v.clear_cache()
    assert v._cache_tokens == 0 and not v._cache
