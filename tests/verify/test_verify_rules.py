"""Which rule decided a pair: Verifier.decide_rules (the decision's own code) agrees with the
scalar reference, and the batch verify stage's rules agree with the exact-LCS reference."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.rules.reference import stage_verify_reference
from neardup.rules.verify import stage_verify_rules
from neardup.verify.rule import (
    RULE_BELOW,
    RULE_BOUND,
    RULE_CONTAINMENT,
    RULE_SIMILARITY,
    RULE_TRUSTED,
    TokenEncoder,
    Verifier,
)

_WORDS = st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "天", "地"])
_TEXT = st.lists(_WORDS, max_size=40).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_TEXT, _TEXT), min_size=1, max_size=10), st.booleans())
def test_decide_rules_names_the_rule_the_scalar_reference_applies(pairs, strict) -> None:
    from rapidfuzz.distance import LCSseq

    v = Verifier(threshold=0.9 if strict else 0.675, min_containment_tokens=5)
    enc = TokenEncoder()
    ea = [enc.encode(v.tokens(a)) for a, _ in pairs]
    eb = [enc.encode(v.tokens(b)) for _, b in pairs]
    lcs = np.array([LCSseq.similarity(x, y) for x, y in zip(ea, eb, strict=True)])
    la = np.array([len(x) for x in ea])
    lb = np.array([len(y) for y in eb])
    ok, score, rule = v.decide_rules(lcs, la, lb)
    ok2, score2 = v.decide(lcs, la, lb)
    assert np.array_equal(ok, ok2) and np.array_equal(score, score2)
    for i, (x, y) in enumerate(zip(ea, eb, strict=True)):
        want_ok, want_score = v.compare_encoded(x, y)
        assert (bool(ok[i]), float(score[i])) == (want_ok, want_score)
        ratio = 2 * lcs[i] / (la[i] + lb[i]) if la[i] and lb[i] else 0.0
        if not want_ok:
            assert rule[i] == RULE_BELOW
        elif ratio >= v.threshold:
            assert rule[i] == RULE_SIMILARITY
        else:  # accepted below the threshold: the containment rule
            assert rule[i] == RULE_CONTAINMENT and min(la[i], lb[i]) >= 5


@settings(max_examples=100, deadline=None)
@given(st.lists(_TEXT, min_size=2, max_size=12), st.data())
def test_the_verify_stage_records_the_rule_that_decided(texts, data) -> None:
    n = len(texts)
    pairs = data.draw(
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=20)
    )
    pairs = [(x, y) for x, y in pairs if x < y]
    a = np.array([p[0] for p in pairs], np.int64)
    b = np.array([p[1] for p in pairs], np.int64)
    d = np.zeros(a.size, np.int32)
    v = Verifier(min_containment_tokens=5)
    ok, score, rule = stage_verify_rules(v, texts, a, b, d)
    ok_ref, score_ref = stage_verify_reference(v, texts, a, b, d)
    assert np.array_equal(ok, ok_ref)
    exact = rule != RULE_BOUND  # reached the exact LCS: the same score as the reference
    assert np.allclose(score[exact], score_ref[exact])
    assert not ok[~exact].any()  # a bound only rejects
    assert set(rule[ok].tolist()) <= {RULE_SIMILARITY, RULE_CONTAINMENT}
    assert set(rule[exact & ~ok].tolist()) <= {RULE_BELOW}


def test_trusted_pairs_say_so() -> None:
    long_a = " ".join(["river bridge council budget library"] * 60)
    long_b = long_a.replace("river", "lake", 1)
    v = Verifier(trust_distance=3)
    ok, score, rule = stage_verify_rules(
        v, [long_a, long_b], np.array([0]), np.array([1]), np.array([2], np.int32)
    )
    assert ok[0] and rule[0] == RULE_TRUSTED and score[0] == 1 - 2 / 64


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 120), st.integers(0, 120)), min_size=1, max_size=40),
    st.sampled_from([0.5, 0.8, 0.9, 1.0]),
    st.sampled_from([0.85, 1.0, 2.0]),
    st.integers(1, 40),
)
def test_cannot_pass_holds_for_every_lcs(lengths, threshold, containment, min_tokens) -> None:
    """A pair the length bound turns down is rejected at every LCS it could have (0 to the
    shorter length), under any threshold and containment rule; one it lets by passes at some
    LCS (the bound gives nothing away); a side of 0 tokens is never turned down."""
    v = Verifier(threshold=threshold, containment=containment, min_containment_tokens=min_tokens)
    la = np.array([a for a, _ in lengths], np.int64)
    lb = np.array([b for _, b in lengths], np.int64)
    out = v.cannot_pass(la, lb)
    for k, (a, b) in enumerate(lengths):
        passes = [
            bool(v.decide_rules(np.array([c]), np.array([a]), np.array([b]))[0][0])
            for c in range(min(a, b) + 1)
        ]
        if a == 0 or b == 0:
            assert not out[k]
        else:
            assert out[k] == (not any(passes))
