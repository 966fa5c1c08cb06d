"""stage_verify (token-hash bound, then the exact LCS) decides exactly like verifying every pair."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.rules.reference import stage_verify_reference
from neardup.rules.verify import stage_verify
from neardup.text import token_kernels as K
from neardup.verify import reference as R
from neardup.verify import tokens as T
from neardup.verify.rule import Verifier

PIECES = st.sampled_from(
    [
        *"abcXYZ019 .,!?@#:/\n\t-_'\x1c\x00",
        "http://t.co/x ",
        "HTTP",
        "hTtp",
        "WWW.",
        "www.x ",
        "t.cn/",
        "T.CO/",
        "bit.ly/",
        "RT @u: ",
        "#tag# ",
        "é",
        "世",
        "ß",
        "ﬁ",
        "Ａ",
    ]
)
TEXTS = st.lists(st.lists(PIECES, max_size=40).map("".join), max_size=30)


def _same_csr(got, ref):
    assert got[0].dtype == np.uint32 and got[1].dtype == np.int64
    assert np.array_equal(got[1], ref[1])
    assert np.array_equal(got[0], ref[0])


@settings(max_examples=200, deadline=None)
@given(texts=TEXTS, strip=st.booleans())
def test_token_hashes_equal_the_reference(texts, strip):
    v = Verifier(strip_social=strip)
    _same_csr(T.token_hashes(v, texts, workers=2), R.token_hashes_reference(v, texts))


def test_token_hashes_chunks_long_tokens_and_counts(monkeypatch):
    monkeypatch.setattr(K, "HASH_CHUNK_BYTES", 16)
    v = Verifier()
    texts = [
        "The cat sat",
        "on the mat http://x.y/z",
        "中文 the Cat ß",
        "THE CAT, sat!",
        "x" * 50 + " " + "ab" * 9,
        "",
        "a b a b @bob",
        "seventeen-letters abcdefghijklmnopq abcdefgh abcdefghi",
    ] * 3
    got = T.token_hashes(v, texts)
    _same_csr(got, R.token_hashes_reference(v, texts))
    assert np.diff(got[1]).tolist() == [len(v.tokens(t)) for t in texts]
    # equal tokens hash equal whatever the text's path (ASCII kernel or reference tokeniser)
    assert R.token_hash_reference("cat") in got[0][got[1][2] : got[1][3]].tolist()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), max_size=300), st.sampled_from(["any", "adversarial"]))
def test_sort_hashes_sorts_any_hashes(values, kind):
    # "adversarial": equal top bits in descending order, so the insertion sort runs out of its
    # budget of moves and the heapsort finishes
    a = np.array(values, np.uint32)
    if kind == "adversarial":
        a = np.sort(a % np.uint32(1 << 12))[::-1].copy()
    want = np.sort(a)
    for sort in (T._sort_hashes, T._heapsort):
        got = a.copy()
        sort(got)
        np.testing.assert_array_equal(got, want)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "dd", "é", "世"]), max_size=30), st.data())
def test_hash_overlap_bounds_the_token_overlap(a, data):
    # collisions only merge counts, so the overlap of hashes >= the overlap of tokens
    b = data.draw(st.lists(st.sampled_from(["a", "b", "c", "dd", "é", "世"]), max_size=30))
    ha = [R.token_hash_reference(t) % 3 for t in a]  # a deliberately colliding hash
    hb = [R.token_hash_reference(t) % 3 for t in b]
    assert R.overlap_reference(ha, hb) >= R.overlap_reference(a, b)


WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", "far", "away", "Über", "世界", "x1"]


def _pair_arrays(pairs: list[tuple[int, int]], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, SimHash distances) of the pairs ``pairs`` of ``n`` texts: each ordered, taken
    modulo ``n``, a text with itself left out; distances 0-7 in turn."""
    a = np.array([min(x % n, y % n) for x, y in pairs], np.int64)
    b = np.array([max(x % n, y % n) for x, y in pairs], np.int64)
    keep = a != b
    a, b = a[keep], b[keep]
    return a, b, (np.arange(a.size) % 8).astype(np.int32)


@settings(max_examples=120, deadline=None)
@given(
    base=st.lists(
        st.lists(st.sampled_from(WORDS), min_size=0, max_size=40), min_size=2, max_size=8
    ),
    edits=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 39), st.sampled_from(WORDS))),
    pairs=st.lists(st.tuples(st.integers(0, 15), st.integers(0, 15)), min_size=1, max_size=40),
    cfg=st.sampled_from(
        [
            {},
            {"min_containment_tokens": 3},
            {"containment": 1.5},
            {"threshold": 0.4},
            {"strip_social": False},
            {"trust_distance": 3},
        ]
    ),
)
def test_stage_verify_decides_like_verifying_every_pair(base, edits, pairs, cfg):
    # near-duplicate texts: copies of a few bases with word edits, joined by varied separators
    docs = [list(b) for b in base] + [list(b) for b in base]
    for i, j, w in edits:
        d = docs[len(base) + i % len(base)]
        if d:
            d[j % len(d)] = w
    seps = [" ", ", ", "  ", " @u ", "\n"]
    texts = [seps[i % len(seps)].join(d) for i, d in enumerate(docs)]
    n = len(texts)
    a, b, dist = _pair_arrays(pairs, n)
    v = Verifier(**cfg)
    ok, score = stage_verify(v, texts, a, b, dist, workers=2)
    ok_ref, score_ref = stage_verify_reference(v, texts, a, b, dist)
    assert np.array_equal(ok, ok_ref)
    assert np.array_equal(score[ok], score_ref[ok_ref])
    assert (score >= score_ref).all()  # a rejected pair reports an upper bound


@settings(max_examples=120, deadline=None)
@given(
    texts=st.lists(st.lists(PIECES, max_size=40).map("".join), min_size=2, max_size=12),
    pairs=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), min_size=1, max_size=30),
    known=st.sets(st.integers(0, 11)),
    strip=st.booleans(),
)
def test_stage_verify_takes_known_histograms_for_the_same_decisions(texts, pairs, known, strip):
    """Histograms given for some texts (a request's, from its MinHash pass, with the kernel
    forms that pass made: non-ASCII texts pre-tokenised, social markers stripped) replace
    step 1's tokenising of those texts: the same decisions, scores and rules, and the same
    histograms handed to the sink, as without them; given for texts in no pair, they are
    ignored."""
    from neardup.fingerprint.minhash import minhash_signatures
    from neardup.rules.verify import stage_verify_rules

    n = len(texts)
    a, b, dist = _pair_arrays(pairs, n)
    v = Verifier(strip_social=strip)
    at = np.array(sorted(k % n for k in known), np.int64)
    hist = np.zeros((n, 1 << T.HIST_BITS), np.uint8)
    special: dict = {}
    _, tokens = minhash_signatures(v, texts, 8, histograms=hist, prepared=special)
    sunk: list = []
    want = stage_verify_rules(v, texts, a, b, dist, on_histograms=lambda *x: sunk.append(x))
    got = stage_verify_rules(
        v, texts, a, b, dist, on_histograms=lambda *x: sunk.append(x),
        known=(at, hist[at], tokens[at]),
        tokenised={k: special[k] for k in at.tolist() if k in special},
    )  # fmt: skip
    for w, g in zip(want, got, strict=True):
        assert np.array_equal(w, g)
    if a.size:
        for w, g in zip(*sunk, strict=True):
            assert np.array_equal(w, g)


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.lists(st.integers(0, 12), max_size=300), min_size=2, max_size=10),
    pairs=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=30),
    cfg=st.sampled_from(
        [
            (0.675, 0.85, 20),
            (0.675, 0.85, 3),
            (0.675, 1.5, 20),
            (0.3, 0.5, 0),
            (1.0, 1.0, 1),
            (0.999, 0.7, 50),
        ]
    ),
)
def test_bound_early_exit_keeps_every_decision(rows, pairs, cfg):
    from neardup.verify.overlap import bound_decisions

    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    values = np.array([x for r in rows for x in sorted(r)], np.uint32)
    ia = np.array([x % len(rows) for x, _ in pairs], np.int64)
    ib = np.array([y % len(rows) for _, y in pairs], np.int64)
    kw = {"threshold": cfg[0], "containment": cfg[1], "min_containment_tokens": cfg[2]}
    could, ratio = bound_decisions(values, offsets, ia, ib, **kw)
    could_x, ratio_x = bound_decisions(values, offsets, ia, ib, early_exit=True, workers=2, **kw)
    assert np.array_equal(could_x, could)
    assert np.array_equal(ratio_x[could], ratio[could])
    assert (ratio_x >= ratio).all()


LCS_WORDS = ["the", "The", "THE", "cat", "sat", "on", "über", "Über", "世", "界", "x1", "a"]
LCS_EXTRA = ["@bob", "http://t.co/a", "#tag", "ﬁsh", "fish", "www.x.org"]


@settings(max_examples=120, deadline=None)
@given(
    docs=st.lists(
        st.lists(st.sampled_from(LCS_WORDS + LCS_EXTRA), max_size=200), min_size=1, max_size=8
    ),
    pairs=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=1, max_size=20),
    strip=st.booleans(),
)
def test_lcs_many_equals_rapidfuzz_on_encoded_tokens(docs, pairs, strip):
    from rapidfuzz.distance import LCSseq

    from neardup.verify.overlap import lcs_many
    from neardup.verify.rule import TokenEncoder

    v = Verifier(strip_social=strip)
    texts = [" ".join(d) for d in docs]
    spans = T.token_bytes(v, texts)
    enc = R.encode_texts_reference(v, texts, TokenEncoder())
    ia = np.array([x % len(texts) for x, _ in pairs], np.int64)
    ib = np.array([y % len(texts) for _, y in pairs], np.int64)
    got = lcs_many(spans, ia, ib, workers=2)
    ref = [LCSseq.similarity(enc[x], enc[y]) for x, y in zip(ia.tolist(), ib.tolist(), strict=True)]
    assert got.tolist() == ref


def test_lcs_many_tells_colliding_hashes_apart(monkeypatch):
    # different tokens forced onto one hash: the byte comparison keeps them apart
    from neardup.verify import overlap

    v = Verifier()
    data = T.token_bytes(v, ["ab ab ab", "cd cd cd", "ab cd ab", "AB x"])
    ia, ib = np.array([0, 0, 2, 3]), np.array([1, 2, 1, 0])
    assert overlap.lcs_many(data, ia, ib).tolist() == [0, 2, 1, 1]  # numba, real hashes
    kernel = overlap._lcs_kernel.py_func  # the same code, run as Python with a constant hash
    real = overlap._doc_tokens

    def one_hash(buf, s, e, pretok, word, space, ts, tl, th):
        n = real(buf, s, e, pretok, word, space, ts, tl, th)
        th[:] = 7
        return n

    monkeypatch.setitem(kernel.__globals__, "_doc_tokens", one_hash)
    # the one popcount is a numba intrinsic (kernels only): its meaning, in Python
    monkeypatch.setitem(kernel.__globals__, "popcount64", lambda x: np.uint64(int(x).bit_count()))
    with np.errstate(over="ignore"):  # uint64 hash arithmetic wraps, as in numba
        got = np.zeros(ia.size, np.int64)
        kernel(0, ia.size, *data, K.WORD_LUT, K.SPACE_LUT, ia, ib, 10**8, got)
        # over the cap (0 cells): the multiset overlap, with the same byte comparison
        over = np.zeros(ia.size, np.int64)
        kernel(0, ia.size, *data, K.WORD_LUT, K.SPACE_LUT, ia, ib, 0, over)
    assert got.tolist() == [0, 2, 1, 1]
    assert over.tolist() == [0, 2, 1, 1]


def test_lcs_many_long_sequences_with_carries():
    # hundreds of tokens (several 64-bit words per sequence), seeded
    import random

    from rapidfuzz.distance import LCSseq

    from neardup.verify.overlap import lcs_many
    from neardup.verify.rule import TokenEncoder

    rng = random.Random(7)
    words = LCS_WORDS + LCS_EXTRA
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 400))) for _ in range(40)]
    v = Verifier()
    spans = T.token_bytes(v, texts)
    enc = R.encode_texts_reference(v, texts, TokenEncoder())
    ia = np.array([rng.randrange(40) for _ in range(300)], np.int64)
    ib = np.array([rng.randrange(40) for _ in range(300)], np.int64)
    ref = [LCSseq.similarity(enc[x], enc[y]) for x, y in zip(ia.tolist(), ib.tolist(), strict=True)]
    assert lcs_many(spans, ia, ib, workers=2).tolist() == ref


def test_token_hashes_output_grows_past_its_estimate(monkeypatch):
    # the output is sized from the tokens per character seen so far: sparse ASCII first, then
    # dense text and multi-byte text (more bytes than characters) must grow it correctly
    monkeypatch.setattr(K, "HASH_CHUNK_BYTES", 3000)
    v = Verifier()
    texts = ["x" * 2500] * 3 + ["a b c d e " * 400] * 3 + ["世界 ü " * 800] * 3 + ["ok"] * 5
    for order in (texts, texts[::-1]):
        _same_csr(T.token_hashes(v, order, workers=2), R.token_hashes_reference(v, order))


@settings(max_examples=150, deadline=None)
@given(texts=TEXTS, strip=st.booleans(), small=st.booleans())
def test_token_histograms_equal_the_reference(texts, strip, small):
    v = Verifier(strip_social=strip)
    old = K.HASH_CHUNK_BYTES
    K.HASH_CHUNK_BYTES = 16 if small else old  # many chunks, flagged texts in several
    try:
        hist, counts = T.token_histograms(v, texts, workers=2)
    finally:
        K.HASH_CHUNK_BYTES = old
    ref_hist, ref_counts = R.token_histograms_reference(v, texts)
    assert hist.dtype == np.uint8 and counts.dtype == np.int64
    assert np.array_equal(counts, ref_counts)
    assert np.array_equal(hist, ref_hist)
    # the same counts as token_hashes (the exact token counts stage_verify decides with)
    assert np.array_equal(counts, np.diff(R.token_hashes_reference(v, texts)[1]))


def test_token_histograms_saturate_and_count_exactly():
    v = Verifier()
    hist, counts = T.token_histograms(v, ["the " * 300, "the " * 10 + "cat", "THE, the!"])
    b = R.token_hash_reference("the") >> (32 - T.HIST_BITS)
    assert counts.tolist() == [300, 11, 2]
    assert hist[:, b].tolist() == [T.HIST_MAX, 10, 2] and hist[0].sum() == T.HIST_MAX


#: texts of a small vocabulary, pairs among them and verifier settings: the bounds' cases
PAIR_CASES = {
    "docs": st.lists(st.lists(st.sampled_from(WORDS), max_size=60), min_size=2, max_size=8),
    "pairs": st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=1, max_size=30),
    "cfg": st.sampled_from(
        [{}, {"min_containment_tokens": 3}, {"containment": 1.5}, {"threshold": 0.3}]
    ),
}


def _pair_case(docs, pairs, cfg):
    """(verifier, texts, ia, ib, the verifier's rule as the bounds take it) of a case."""
    from neardup.rules.verify import bound_rule

    v = Verifier(**cfg)
    texts = [" ".join(d) for d in docs]
    n = len(texts)
    ia = np.array([p[0] % n for p in pairs], np.int64)
    ib = np.array([p[1] % n for p in pairs], np.int64)
    return v, texts, ia, ib, bound_rule(v)


@settings(max_examples=120, deadline=None)
@given(**PAIR_CASES)
def test_histogram_bound_never_rejects_what_the_hash_bound_keeps(docs, pairs, cfg):
    from neardup.verify.overlap import bound_decisions, histogram_bound_decisions

    v, texts, ia, ib, rule = _pair_case(docs, pairs, cfg)
    hist, counts = T.token_histograms(v, texts)
    values, offsets = T.token_hashes(v, texts)
    could_h, ratio_h = histogram_bound_decisions(hist, counts, ia, ib, **rule)
    could, ratio = bound_decisions(values, offsets, ia, ib, **rule)
    assert (could_h >= could).all()  # a weaker bound: never rejects a pair the exact one keeps
    assert (ratio_h >= ratio - 1e-12).all()
    # one bucket, full on both sides: no bound but the lengths (overlap <= the shorter count)
    full = np.full_like(hist[:, :1], T.HIST_MAX)
    could_1, ratio_1 = histogram_bound_decisions(full, counts, ia, ib, **rule)
    assert (could_1 >= could).all()
    la, lb = counts[ia], counts[ib]
    shorter = np.minimum(la, lb)
    expect = np.where(shorter > 0, 2.0 * shorter / np.maximum(la + lb, 1), 0.0)
    assert np.array_equal(ratio_1, expect)


def test_histogram_bound_treats_buckets_full_on_both_sides_as_unbounded():
    from neardup.verify.overlap import histogram_bound_decisions

    v = Verifier()
    texts = ["the " * 600, "the " * 600, "the " * 10 + "cat " * 590]
    hist, counts = T.token_histograms(v, texts)
    could, ratio = histogram_bound_decisions(
        hist,
        counts,
        np.array([0, 0]),
        np.array([1, 2]),
        threshold=0.675,
        containment=0.85,
        min_containment_tokens=20,
    )
    assert could.tolist() == [True, False]  # 600 equal tokens pass; 10 of 600 cannot
    assert ratio[0] == 1.0 and ratio[1] < 0.1


def _coarse_reference(v, texts):
    """Each text's tokens (``verifier.tokens``) counted in the 2**MASK_BITS coarse buckets: the
    top MASK_BITS bits of :func:`token_hash_reference`, capped at 255."""
    out = np.zeros((len(texts), 1 << K.MASK_BITS), np.uint8)
    for d, text in enumerate(texts):
        for t in v.tokens(text):
            b = R.token_hash_reference(t) >> (32 - K.MASK_BITS)
            out[d, b] = min(255, int(out[d, b]) + 1)
    return out


@settings(max_examples=150, deadline=None)
@given(texts=TEXTS, strip=st.booleans(), small=st.booleans())
def test_minhash_pass_counts_the_coarse_buckets_of_the_reference(texts, strip, small):
    from neardup.fingerprint.minhash import minhash_signatures

    v = Verifier(strip_social=strip)
    old = K.HASH_CHUNK_BYTES
    K.HASH_CHUNK_BYTES = 16 if small else old  # many chunks, flagged texts in several
    try:
        buckets = np.full((len(texts), 1 << K.MASK_BITS), 7, np.uint8)  # overwritten
        sig, counts = minhash_signatures(v, texts, 12, workers=2, buckets=buckets)
        plain_sig, plain_counts = minhash_signatures(v, texts, 12, workers=2)
    finally:
        K.HASH_CHUNK_BYTES = old
    assert np.array_equal(buckets, _coarse_reference(v, texts))
    # the same signatures and counts whether the buckets are counted or not
    assert np.array_equal(sig, plain_sig) and np.array_equal(counts, plain_counts)
    # a coarse bucket holds the histogram's buckets of the same top bits
    hist, _ = R.token_histograms_reference(v, texts)
    folded = hist.reshape(len(texts), 1 << K.MASK_BITS, 1 << (T.HIST_BITS - K.MASK_BITS))
    folded = folded.astype(np.int64).sum(axis=2)
    assert np.array_equal(buckets > 0, folded > 0)


def test_minhash_pass_counts_buckets_of_one_request_and_of_long_texts():
    from neardup.fingerprint.minhash import minhash_signatures

    v = Verifier()
    few = ["the cat sat on the mat", "RT @x: the dog", ""]  # the few-texts path (and a flagged one)
    long = ["the " * 600 + "cat", "世界 ü " * 900, "ok"] * 30  # the chunk loop, a saturated bucket
    for texts in (few, long):
        buckets = np.zeros((len(texts), 1 << K.MASK_BITS), np.uint8)
        minhash_signatures(v, texts, 16, buckets=buckets)
        assert np.array_equal(buckets, _coarse_reference(v, texts))
    assert buckets[0].max() == 255
    with pytest.raises(ValueError, match="buckets must be"):
        minhash_signatures(v, few, 16, buckets=np.zeros((2, 64), np.uint8))


@settings(max_examples=120, deadline=None)
@given(**PAIR_CASES)
def test_mask_bound_never_rejects_what_the_histogram_bound_keeps(docs, pairs, cfg):
    from neardup.fingerprint.minhash import minhash_signatures
    from neardup.rules.lsh import sketch_masks, sketches, token_masks
    from neardup.verify.overlap import histogram_bound_decisions, mask_bound_decisions

    v, texts, ia, ib, rule = _pair_case(docs, pairs, cfg)
    n = len(texts)
    buckets = np.zeros((n, 1 << K.MASK_BITS), np.uint8)
    sig, counts = minhash_signatures(v, texts, 8, buckets=buckets)
    masks = sketch_masks(sketches(sig, counts, token_masks(buckets)))  # as a store keeps them
    hist, _ = T.token_histograms(v, texts)
    could_h, _ = histogram_bound_decisions(hist, counts, ia, ib, **rule)
    could_m = mask_bound_decisions(buckets, counts, ia, masks, counts, ib, **rule)
    # a weaker bound: never rejects a pair the histogram bound (so verification) keeps
    assert (could_m >= could_h).all()
    # unknown masks and unknown counts bound nothing the lengths do not
    unknown = np.full(n, (1 << 64) - 1, np.uint64)
    could_u = mask_bound_decisions(buckets, counts, ia, unknown, counts, ib, **rule)
    la, lb = counts[ia], counts[ib]
    could_len, _ = histogram_bound_decisions(
        np.full((n, 1), T.HIST_MAX, np.uint8), counts, ia, ib, **rule
    )
    assert np.array_equal(
        could_u | (np.minimum(la, lb) == 0), could_len | (np.minimum(la, lb) == 0)
    )
    zero = np.zeros(n, np.int64)
    assert mask_bound_decisions(buckets, zero, ia, masks, counts, ib, **rule).all()


def test_mask_bound_turns_down_texts_of_other_tokens_and_not_saturated_ones():
    from neardup.fingerprint.minhash import minhash_signatures
    from neardup.rules.lsh import token_masks
    from neardup.verify.overlap import mask_bound_decisions

    v = Verifier()
    texts = [
        "the quick brown fox jumps over the lazy dog",
        "the quick brown fox jumped over the lazy dog",
        "seven silver engines hum beneath a copper harbor at dawn",
        "the " * 600,
        "the " * 300 + "cat " * 300,
    ]
    buckets = np.zeros((len(texts), 1 << K.MASK_BITS), np.uint8)
    _, counts = minhash_signatures(v, texts, 8, buckets=buckets)
    masks = token_masks(buckets)
    rule = {"threshold": 0.8, "containment": 0.85, "min_containment_tokens": 20}
    could = mask_bound_decisions(
        buckets, counts, np.array([0, 0, 3]), masks, counts, np.array([1, 2, 4]), **rule
    )
    # an edit passes; unrelated words cannot share 80 % of their tokens (unless their
    # buckets collide: not these); a saturated bucket the row uses bounds nothing
    assert could.tolist() == [True, False, True]
