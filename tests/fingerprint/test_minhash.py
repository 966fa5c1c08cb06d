"""MinHash-LSH candidates: signatures equal their reference, pairs equal theirs, the plan's
S-curve, capped buckets, and recall of a pair that does not depend on the corpus around it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.batch.run import dedup
from neardup.errors import ConfigError
from neardup.fingerprint.minhash import (
    NO_SIGNATURE,
    band_key_block,
    band_keys,
    minhash_signatures,
)
from neardup.fingerprint.reference import minhash_signatures_reference
from neardup.rules.lsh import lsh_pairs
from neardup.rules.plan import candidate_probability, plan_lsh, shingle_jaccard
from neardup.rules.reference import lsh_pairs_reference
from neardup.verify.rule import Verifier

WORDS = ["the", "cat", "sat", "on", "mat", "RT", "@bob:", "#tag", "http://x.co/a", "猫", "垫子",
         "naïve", "ÉTÉ", "a1b2", "", " ", "\n", "www.example.com", "//@用户:", "ok!"]  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.sampled_from(WORDS), max_size=30).map(" ".join), max_size=12))
def test_signatures_equal_reference(texts):
    v = Verifier()
    sig, tok = minhash_signatures(v, texts, 24)
    ref, rtok = minhash_signatures_reference(v, texts, 24)
    assert np.array_equal(sig, ref) and np.array_equal(tok, rtok)
    assert all((sig[i] == NO_SIGNATURE).all() for i in np.flatnonzero(tok == 0))


@settings(max_examples=120, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(WORDS), max_size=40).map(" ".join), min_size=1, max_size=6),
    st.booleans(),
)
def test_few_texts_path_equals_the_chunk_loop_and_the_reference(texts, strip):
    """A few texts (a service request, or the few the server decides together) skip the chunk
    loop (run_token_kernel_few): the same signatures as those texts inside a batch too large
    for that path, and as the reference; social markers and non-ASCII texts fall back to the
    loop."""
    from neardup.text.token_kernels import FEW_TEXTS

    v = Verifier(strip_social=strip)
    few, few_tok = minhash_signatures(v, texts, 24)
    padded = texts + ["the cat sat"] * FEW_TEXTS
    many, many_tok = minhash_signatures(v, padded, 24)
    ref, ref_tok = minhash_signatures_reference(v, texts, 24)
    n = len(texts)
    assert np.array_equal(few, many[:n]) and np.array_equal(few_tok, many_tok[:n])
    assert np.array_equal(few, ref) and np.array_equal(few_tok, ref_tok)


@settings(max_examples=120, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(WORDS), max_size=40).map(" ".join), min_size=0, max_size=6),
    st.booleans(),
    st.sampled_from([1, 6, 10]),
)
def test_histograms_of_the_signatures_pass_equal_the_verifiers(texts, strip, bits):
    """The histograms the signatures' pass counts (one tokenisation for the signature, the
    token masks and the verifier's histograms) equal token_histograms' at HIST_BITS, and at
    any width its counts folded; on the few texts' path, the chunk loop (padded past it) and
    with social markers stripped or not; the signatures and counts do not change."""
    from neardup.text.token_kernels import FEW_TEXTS
    from neardup.verify.tokens import HIST_BITS, token_histograms

    v = Verifier(strip_social=strip)
    want, want_n = token_histograms(v, texts)
    sig0, tok0 = minhash_signatures(v, texts, 24)
    for padded in (texts, texts + ["the cat sat"] * FEW_TEXTS):
        n = len(padded)
        hist = np.full((n, 1 << HIST_BITS), 7, np.uint8)  # (every row is overwritten)
        sig, tok = minhash_signatures(v, padded, 24, histograms=hist)
        k = len(texts)
        assert np.array_equal(hist[:k], want) and np.array_equal(tok[:k], want_n)
        assert np.array_equal(sig[:k], sig0) and np.array_equal(tok[:k], tok0)
        coarse = np.zeros((n, 1 << bits), np.uint8)
        minhash_signatures(v, padded, 24, histograms=coarse)
        folded = want.astype(np.int64).reshape(k, 1 << bits, (1 << HIST_BITS) >> bits).sum(2)
        exact = want.max(axis=1, initial=0) < 255
        # (a fold of saturated fine counts is not the coarse count: compared where none is)
        assert np.array_equal(np.minimum(folded, 255)[exact], coarse[:k][exact])


def test_histograms_must_be_a_power_of_two_wide_uint8_row_per_text():
    v = Verifier()
    for bad in (
        np.zeros((2, 1000), np.uint8),
        np.zeros((2, 1024), np.int64),
        np.zeros((3, 1024), np.uint8),
        np.zeros(1024, np.uint8),
        np.zeros((2, 1), np.uint8),
    ):
        with pytest.raises(ValueError, match="histograms must be"):
            minhash_signatures(v, ["a b", "c d"], 8, histograms=bad)


def test_few_texts_path_takes_plain_ascii_and_leaves_the_rest():
    from neardup.fingerprint.minhash import _permutations, _signature_kernel
    from neardup.text.token_kernels import FEW_TEXTS, FEW_TEXTS_CHARS, run_token_kernel_few

    v = Verifier()
    pa, pb = _permutations(8)

    def few(*texts: str) -> bool:
        n = len(texts)
        out = (
            np.empty((n, 8), np.uint16),
            np.zeros(n, np.int64),
            np.zeros((n, 0), np.uint8),
            np.zeros((n, 0), np.uint8),
        )
        return run_token_kernel_few(_signature_kernel, v, list(texts), (pa, pb), out)

    assert few("plain ascii words here")
    assert few("plain ascii", "more words", "")
    assert not few("plain", "RT @bob: a social marker")  # stripped by the chunk loop
    assert not few("plain", "naïve non-ascii")  # tokenised by the reference tokeniser
    assert not few("w " * (FEW_TEXTS_CHARS // 2 + 1))  # long: the chunk loop's bounded buffers
    assert not few(*["w"] * (FEW_TEXTS + 1))
    assert not few()


def test_signatures_without_social_stripping_and_deterministic():
    v = Verifier(strip_social=False)
    texts = ["RT @bob: the cat sat #x", "www.a.com the mat", "plain words here"]
    sig, _ = minhash_signatures(v, texts, 16, workers=2)
    ref, _ = minhash_signatures_reference(v, texts, 16)
    assert np.array_equal(sig, ref)
    again, _ = minhash_signatures(v, texts, 16)
    assert np.array_equal(sig, again)


def test_plan_and_s_curve():
    p = plan_lsh()
    # planned for the least bigram Jaccard at 0.8: 10 tokens, 2 scattered substitutions
    assert p.jaccard == pytest.approx(5 / 13, abs=1e-4) == pytest.approx(shingle_jaccard(0.8))
    assert (p.bands, p.rows) == (79, 3) and p.probability >= 0.99 and p.promised
    # steep around the planned Jaccard: unrelated texts (bigram Jaccard 0.05) rarely collide
    assert candidate_probability(0.05, p.bands, p.rows) < 0.01
    assert candidate_probability(p.jaccard, p.bands, p.rows) >= 0.99
    # a stricter intent needs fewer hashes or gets more rows; a looser one is capped
    strict = plan_lsh(0.95)
    assert strict.probability >= 0.99 and strict.rows > 3 and strict.hashes <= 128
    loose = plan_lsh(0.7)
    assert loose.hashes <= 256 and loose.probability < 0.99 and not loose.promised
    # at 0.5, alternate tokens replaced share no bigram: nothing can be promised
    assert shingle_jaccard(0.5) == 0.0 and plan_lsh(0.5).probability == 0.0
    assert plan_lsh(bands=10, rows=5).hashes == 50
    for bad in ({"threshold": 0}, {"threshold": 1.5}, {"threshold": "x"}, {"bands": 0},
                {"rows": True}, {"bucket_cap": 0}):  # fmt: skip
        with pytest.raises(ConfigError):
            plan_lsh(**bad)


def _corpus(rng: np.random.Generator, n: int, words: int = 20) -> list[str]:
    vocab = np.array([f"w{i}" for i in range(3000)])
    return [" ".join(vocab[rng.integers(0, 3000, words)]) for _ in range(n)]


def _edited(rng: np.random.Generator, text: str, k: int) -> str:
    w = text.split()
    for _ in range(k):
        w[int(rng.integers(0, len(w)))] = f"z{int(rng.integers(0, 10**6))}"
    return " ".join(w)


@pytest.mark.parametrize("workers", [1, 2])
def test_pairs_equal_reference(workers):
    """On one worker, and on two: each band's grouping then runs on a helper thread, one band
    ahead of the pairs."""
    rng = np.random.default_rng(3)
    base = _corpus(rng, 60)
    texts = base + [_edited(rng, t, int(rng.integers(1, 6))) for t in base[:40]]
    v = Verifier()
    plan = plan_lsh(bands=12, rows=2)  # loose: many collisions, some rejected by agreement
    sig, tok = minhash_signatures(v, texts, plan.hashes)
    info: dict = {}
    a, b = lsh_pairs(sig, tok > 0, plan, info, workers)
    ra, rb = lsh_pairs_reference(sig, tok > 0, plan)
    assert np.array_equal(a, ra) and np.array_equal(b, rb)
    assert info["pairs"] == a.size and info["raw_pairs"] >= a.size and info["pairs_skipped"] == 0
    assert a.size >= 30 and np.all(a < b)


def test_the_bands_grouped_ahead_keep_the_callers_kernel_threads(monkeypatch) -> None:
    """The helper thread that groups the bands ahead runs its kernels on as many threads as
    the caller's (a thread-local setting it would otherwise not see)."""
    from neardup import _threads
    from neardup.rules import lsh

    seen: list[int] = []
    block = lsh.band_key_block

    def recording(*args: object) -> object:
        seen.append(_threads.threads_now())
        return block(*args)

    monkeypatch.setattr(lsh, "band_key_block", recording)
    rng = np.random.default_rng(5)
    texts = _corpus(rng, 80)
    plan = plan_lsh()
    sig, tok = minhash_signatures(Verifier(), texts, plan.hashes)
    with _threads.kernel_threads(1):
        lsh_pairs(sig, tok > 0, plan, {}, 2)
    assert seen and set(seen) == {1}


def test_the_valves_pairs_are_the_same_on_one_worker_and_two():
    """A template bucket over the cap in every band (the valve's bands wait for every band's
    grouping): the same pairs and counts whichever thread grouped the bands."""
    rng = np.random.default_rng(7)
    t = _corpus(rng, 1, 60)[0]
    texts = [_edited(rng, t, 1) for _ in range(300)] + _corpus(rng, 200)
    plan = plan_lsh(bucket_cap=8)
    sig, tok = minhash_signatures(Verifier(), texts, plan.hashes)
    got = []
    for workers in (1, 2):
        info: dict = {}
        a, b = lsh_pairs(sig, tok > 0, plan, info, workers)
        got.append((a.tolist(), b.tolist(), info["raw_pairs"], info["capped_buckets"]))
    assert got[0] == got[1] and got[0][3] > 0


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from([(12, 2), (20, 3), (8, 5)]),
    st.integers(1, 5),
)
def test_the_online_agreement_filter_equals_its_numpy_twin(seed, shape, values) -> None:
    """``rules.lsh.agreeing`` (a query against stored rows: enough equal values and one whole
    band equal) equals the NumPy expression; signatures over few distinct values make both
    halves of the rule decide some pairs."""
    from neardup.rules.lsh import agreeing
    from neardup.rules.reference import agreeing_reference

    bands, rows = shape
    plan = plan_lsh(bands=bands, rows=rows)
    rng = np.random.default_rng(seed)
    stored = rng.integers(0, values, (30, plan.hashes), dtype=np.uint16)
    sig = rng.integers(0, values, (20, plan.hashes), dtype=np.uint16)
    k_of = rng.integers(0, 30, 200)
    q_of = rng.integers(0, 20, 200)
    got = agreeing(stored, k_of, sig, q_of, plan)
    want = agreeing_reference(stored, k_of, sig, q_of, plan)
    assert got.dtype == np.bool_ and got.tolist() == want.tolist()


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from([(12, 2), (20, 3), (9, 1), (6, 4), (5, 6)]),
    st.sampled_from([0, 1, 2, 17, 255, 256, 700]),
)
def test_band_entries_equal_their_numpy_definition(seed, shape, n) -> None:
    """The compact band keys (one fused kernel for plans of up to 3 rows: serial for a
    request's few rows, on the thread pool from 256; NumPy above 3 rows) equal the reference's
    band keys, entry keys and compact keys; unusable rows get NO_KEYS."""
    from neardup.fingerprint.minhash import band_entries
    from neardup.fingerprint.reference import band_entries_reference

    bands, rows = shape
    plan = plan_lsh(bands=bands, rows=rows)
    rng = np.random.default_rng(seed)
    sig = rng.integers(0, 2**16, (n, plan.hashes), dtype=np.uint16)
    usable = rng.random(n) < 0.8
    got = band_entries(sig, usable, plan)
    assert got.shape == (n, bands)
    assert got.tolist() == band_entries_reference(sig, usable, plan).tolist()


def test_recall_of_a_pair_does_not_depend_on_the_corpus():
    rng = np.random.default_rng(5)
    v = Verifier()
    plan = plan_lsh()
    pairs = []
    for _ in range(40):
        t = _corpus(rng, 1, 30)[0]
        pairs.append((t, _edited(rng, t, 2)))  # ~0.87 similar
    small = [x for p in pairs for x in p]
    big = small + _corpus(rng, 5000)
    found = []
    for texts in (small, big):
        sig, tok = minhash_signatures(v, texts, plan.hashes)
        a, b = lsh_pairs(sig, tok > 0, plan)
        got = set(zip(a.tolist(), b.tolist(), strict=True))
        found.append({k for k in range(40) if (2 * k, 2 * k + 1) in got})
    assert found[0] == found[1] and len(found[0]) >= 38


def test_capped_bucket_is_bounded_and_counted():
    rng = np.random.default_rng(7)
    t = _corpus(rng, 1, 60)[0]
    texts = [_edited(rng, t, 1) for _ in range(300)]  # one template, small changes
    plan = plan_lsh(bucket_cap=8)
    sig, tok = minhash_signatures(Verifier(), texts, plan.hashes)
    info: dict = {}
    _, b = lsh_pairs(sig, tok > 0, plan, info)
    assert info["capped_buckets"] > 0 and info["pairs_skipped"] > 0
    assert info["raw_pairs"] <= plan.bands * 300 * 2 * 8  # linear in the bucket, per band
    # every member is paired with the template's first copies: nothing is stranded
    assert set(range(1, 300)) <= set(b.tolist())
    r = dedup(texts, lsh_bucket_cap=8)
    assert r.stats["lsh"]["pairs_skipped"] > 0 and int(r.keep.sum()) <= 3


def test_dedup_finds_wide_short_edits_at_any_size_and_the_budget_stays_idle():
    """An ordinary corpus never triggers the candidate work budget, and the planted pairs
    (short posts, 3 words of 20 changed: SimHash ~10+ bits apart) are found."""
    rng = np.random.default_rng(11)
    texts = _corpus(rng, 30_000)
    planted = []
    for k in range(0, 30_000, 300):
        texts.append(_edited(rng, texts[k], 2))
        planted.append((k, len(texts) - 1))
    r = dedup(texts, workers=2)
    for name, p in r.stats["candidate_passes"].items():
        assert p["distance_used"] == p["distance"], (name, p)
    assert r.stats["lsh"]["pairs_skipped"] == 0
    got = set(zip(r.pairs.a.tolist(), r.pairs.b.tolist(), strict=True))
    recall = sum(p in got for p in planted) / len(planted)
    assert recall >= 0.97, recall
    assert not r.keep[[b for _, b in planted if (_, b) in got]].any()


def test_a_template_bucket_is_paired_once_not_per_band():
    rng = np.random.default_rng(13)
    boiler = " ".join(f"b{i}" for i in range(300))  # every text: the same long boilerplate
    texts = [
        boiler + " " + " ".join(f"u{k}" for k in rng.integers(0, 10**6, 5)) for _ in range(400)
    ]
    plan = plan_lsh(bucket_cap=8)
    sig, tok = minhash_signatures(Verifier(), texts, plan.hashes)
    info: dict = {}
    lsh_pairs(sig, tok > 0, plan, info)
    # one group of (nearly) all 400 in most bands: paired in the first band it appears in only
    assert info["raw_pairs"] <= 3 * 400 * 2 * 8 and info["pairs"] > 0


def test_band_key_block_equals_per_band_keys():
    rng = np.random.default_rng(2)
    for rows in (1, 2, 3, 4):
        sig = rng.integers(0, 1 << 16, (50, rows * 9)).astype(np.uint16)
        block = band_key_block(sig, 2, 9, rows)
        assert block.shape == (7, 50) and block.flags.c_contiguous
        for k, band in enumerate(range(2, 9)):
            assert np.array_equal(block[k], band_keys(sig, band, rows))


def test_pairs_per_group_counts_what_group_pairs_makes():
    from neardup.index.band_groups import group_pairs, pairs_per_group

    rng = np.random.default_rng(21)
    for cap in (1, 2, 3, 7, 32):
        size = rng.integers(2, 80, 12)
        bounds = np.concatenate([[0], np.cumsum(size)]).astype(np.int64)
        members = np.arange(int(size.sum()), dtype=np.int64)
        a, _, _ = group_pairs(members, bounds, cap)
        assert a.size == int(pairs_per_group(size, cap).sum())
    assert np.array_equal(pairs_per_group(np.array([2, 5, 40]), None), [1, 10, 780])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(2, 40), min_size=1, max_size=8),
    st.integers(1, 9),
    st.integers(0, 2**32 - 1),
)
def test_agreeing_group_pairs_equal_group_pairs_then_agreement(sizes, cap, seed):
    from neardup.index.band_groups import agreeing_group_pairs, group_pairs
    from neardup.index.band_groups import agreement as _agreement_reference

    rng = np.random.default_rng(seed)
    size = np.array(sizes, np.int64)
    bounds = np.concatenate([[0], np.cumsum(size)]).astype(np.int64)
    rows = rng.choice(500, int(size.sum()), replace=False)  # a row is in one group of a band
    members = np.concatenate([np.sort(g) for g in np.split(rows, np.cumsum(size)[:-1])])
    sig = rng.integers(0, 3, (500, 12)).astype(np.uint16)
    flag = rng.random(size.size) < 0.5
    for c in (cap, None):
        a, b, big, made = agreeing_group_pairs(members, bounds, c, sig, 5, flag)
        ra, rb, _ = group_pairs(members, bounds, int(size.max()) if c is None else c)
        ok = _agreement_reference(sig, ra, rb) >= 5
        assert made == ra.size
        gid = np.repeat(np.arange(size.size), size)
        pos = {int(m): g for m, g in zip(members.tolist(), gid.tolist(), strict=True)}
        want = sorted(zip(ra[ok].tolist(), rb[ok].tolist(), strict=True))
        assert sorted(zip(a.tolist(), b.tolist(), strict=True)) == want
        assert all(bool(f) == bool(flag[pos[x]]) for x, f in zip(a.tolist(), big, strict=True))


def test_valve_cap_fits_the_band_budget():
    from neardup.index.band_groups import pairs_per_group, valve_cap

    size = np.array([300, 40, 5, 2])
    assert valve_cap(size, 8, None) is None
    assert valve_cap(size, 8, int((size * (size - 1) // 2).sum())) is None  # all fit: no valve
    for budget in (6_000, 10_000, 20_000):
        c = valve_cap(size, 8, budget)
        assert c is not None and c >= 8
        assert pairs_per_group(size, c).sum() <= budget < pairs_per_group(size, c + 1).sum()
    assert valve_cap(size, 8, 10) == 8  # the floor bounds the work whatever the budget


@given(
    st.lists(st.tuples(st.integers(2, 400), st.integers(0, 50)), min_size=1, max_size=12),
    st.integers(1, 40),
    st.integers(0, 200_000),
)
@settings(max_examples=60, deadline=None)
def test_valve_cap_of_a_histogram_equals_the_cap_of_its_buckets(hist, floor, budget):
    from neardup.index.band_groups import valve_cap

    size = np.array([h[0] for h in hist], np.int64)
    count = np.array([h[1] for h in hist], np.int64)
    buckets = np.repeat(size, count)
    want = valve_cap(buckets, floor, budget) if buckets.size else None
    assert valve_cap(size, floor, budget, count) == want


def test_valve_idle_under_budget_equals_reference_and_estimates_what_it_gives_up():
    rng = np.random.default_rng(23)
    t = _corpus(rng, 1, 40)[0]
    texts = [_edited(rng, t, 2) for _ in range(150)] + _corpus(rng, 150)
    v = Verifier()
    sig, tok = minhash_signatures(v, texts, plan_lsh().hashes)
    ra, rb = lsh_pairs_reference(sig, tok > 0, plan_lsh())
    # a bucket of ~150 near copies is far over a cap of 4, but its pairs fit the budget
    info: dict = {}
    a, b = lsh_pairs(sig, tok > 0, plan_lsh(bucket_cap=4, band_pairs_per_doc=64), info)
    assert np.array_equal(a, ra) and np.array_equal(b, rb)
    assert info["valve_bands"] == 0 and info["capped_buckets"] == 0
    assert info["valve_lost_pairs_est"] == 0 and info["valve_recall_loss_est"] == 0.0
    # over the budget the valve thins the bucket and estimates the candidates it gave up
    info = {}
    a, b = lsh_pairs(sig, tok > 0, plan_lsh(bucket_cap=4, band_pairs_per_doc=2), info)
    found = set(zip(a.tolist(), b.tolist(), strict=True))
    lost = len(set(zip(ra.tolist(), rb.tolist(), strict=True)) - found)
    assert info["valve_bands"] > 0 and info["bucket_cap_used"] >= 4 and lost > 1000
    assert abs(info["valve_lost_pairs_est"] - lost) < 0.15 * lost
    assert info["valve_recall_loss_est"] == pytest.approx(lost / (lost + a.size), abs=0.05)


def test_ordinary_short_posts_never_trigger_the_bucket_valve():
    """Generated short posts (60 % Zipfian function words: frequent bigrams win whole band keys
    and their buckets grow with the corpus, as "of the" does in real text) at the largest size
    CI affords: every bucket paired in full. (1 M and 10 M: benchmarks/bench_dedup.py.)"""
    from doubles import benchmark_module

    with benchmark_module("bench_dedup") as bd:
        texts = list(dict.fromkeys(bd.generate("short", 150_000, 0, 0.1)))  # first copies
    plan = plan_lsh()
    sig, tok = minhash_signatures(Verifier(), texts, plan.hashes, workers=2)
    info: dict = {}
    lsh_pairs(sig, tok > 0, plan, info, workers=2)
    assert info["valve_bands"] == 0 and info["capped_buckets"] == 0 and info["pairs_skipped"] == 0
    # buckets past the old fixed cap of 32 are there, and paired in full
    largest = max(
        int(np.unique(band_keys(sig[tok > 0], k, plan.rows), return_counts=True)[1].max())
        for k in range(plan.bands)
    )
    assert largest > 33


def test_group_pairs_counts_the_pairs_it_makes_in_large_groups():
    from neardup.index.band_groups import group_pairs

    for cap in (2, 5, 8):
        for m in range(cap + 2, 3 * cap + 4):  # also cap + 1 < m < 2 cap + 1: few anchors
            a, _, made = group_pairs(np.arange(m, dtype=np.int64), np.array([0, m]), cap)
            assert made == a.size, (cap, m)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from([(12, 2), (20, 3), (9, 1), (6, 4), (79, 3)]),
    st.sampled_from([2, 5, 17, 256, 2**16]),
)
def test_the_sketch_filter_equals_its_numpy_twin_and_never_drops_an_agreeing_pair(
    seed, shape, values
) -> None:
    """``rules.lsh.sketch_agreeing`` (the low 4 bits of every value, two a byte) equals the
    NumPy expression, and lets by every pair ``agreeing`` accepts (a stored row it turns down
    would have been filtered out on its full signature): few distinct values make both filters
    accept some pairs; values above 16 make the sketch accept some that ``agreeing`` rejects."""
    from neardup.rules.lsh import agreeing, sketch_agreeing, sketch_tokens, sketches
    from neardup.rules.reference import sketch_agreeing_reference

    bands, rows = shape
    plan = plan_lsh(bands=bands, rows=rows)
    rng = np.random.default_rng(seed)
    stored = rng.integers(0, values, (30, plan.hashes), dtype=np.uint16)
    sig = rng.integers(0, values, (20, plan.hashes), dtype=np.uint16)
    # some stored rows are queries with a few values changed: near the threshold
    for k in range(10):
        stored[k] = sig[k]
        at = rng.choice(plan.hashes, int(rng.integers(0, plan.hashes)), replace=False)
        stored[k, at] = rng.integers(0, values, len(at), dtype=np.uint16)
    k_of = rng.integers(0, 30, 300)
    q_of = rng.integers(0, 20, 300)
    s_sk, q_sk = sketches(stored, np.arange(30) * 997), sketches(sig, np.arange(20))
    assert s_sk.shape == (30, (plan.hashes + 1) // 2 + 10)  # the token mask u64, count u16
    assert sketch_tokens(s_sk).tolist() == [min(k * 997, 0xFFFF) for k in range(30)]
    # the packing: value 2j in the low half of byte j
    assert ((s_sk[:, : plan.hashes // 2] & 0xF) == (stored[:, 0 : plan.hashes - 1 : 2] & 0xF)).all()
    got = sketch_agreeing(s_sk, k_of, q_sk, q_of, plan)
    want = sketch_agreeing_reference(s_sk, k_of, q_sk, q_of, plan)
    assert got.dtype == np.bool_ and got.tolist() == want.tolist()
    exact = agreeing(stored, k_of, sig, q_of, plan)
    assert not (exact & ~got).any()
    if values <= 16:  # the low bits are the values: the sketch filter is the filter
        assert got.tolist() == exact.tolist()


def _group(rng: np.random.Generator, n: int) -> list[str]:
    """A write group's texts: fresh ones, edited copies and exact copies of them, and some
    without tokens."""
    base = _corpus(rng, max(1, n // 3), int(rng.integers(6, 25)))
    out = list(base)
    while len(out) < n:
        r = rng.random()
        if r < 0.1:
            out.append("")
        elif r < 0.3:
            out.append(out[int(rng.integers(0, len(out)))])
        else:
            out.append(_edited(rng, base[int(rng.integers(0, len(base)))], int(rng.integers(1, 4))))
    return out[:n]


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    n=st.integers(0, 60),
    plan_args=st.sampled_from(
        [{}, {"bands": 12, "rows": 2}, {"bands": 10, "rows": 5}, {"band_pairs_per_doc": 1}]
    ),
)
def test_group_pairs_equal_lsh_pairs(seed: int, n: int, plan_args: dict) -> None:
    """The write group's pairs from its compact band keys, all bands at once, are lsh_pairs'
    (the default plan's exact keys, a loose plan's, and a plan whose keys are hashed), and
    exactly where lsh_pairs' valve acts (a tight budget) the group's path leaves it to it."""
    from neardup.fingerprint.minhash import band_entries
    from neardup.rules.lsh import group_lsh_pairs

    rng = np.random.default_rng(seed)
    texts = _group(rng, n)
    plan = plan_lsh(**plan_args)
    sig, tok = minhash_signatures(Verifier(), texts, plan.hashes)
    usable = tok > 0
    got = group_lsh_pairs(band_entries(sig, usable, plan), sig, usable, plan)
    info: dict = {}
    a, b = lsh_pairs(sig, usable, plan, info)
    if info.get("valve_bands", 0):  # a band over its budget: left to lsh_pairs' valve
        assert got is None
    else:
        assert got is not None
        assert np.array_equal(got[0], a) and np.array_equal(got[1], b)


def test_group_pairs_leave_the_valve_and_floods_to_lsh_pairs(monkeypatch) -> None:
    from neardup.fingerprint.minhash import band_entries
    from neardup.rules import lsh

    rng = np.random.default_rng(11)
    t = _corpus(rng, 1, 40)[0]
    texts = [_edited(rng, t, 1) for _ in range(30)] + _corpus(rng, 20)
    sig, tok = minhash_signatures(Verifier(), texts, plan_lsh().hashes)
    usable = tok > 0
    # a band over its budget: lsh_pairs' valve thins it, so the group's path answers None
    tight = plan_lsh(bucket_cap=4, band_pairs_per_doc=2)
    assert lsh.group_lsh_pairs(band_entries(sig, usable, tight), sig, usable, tight) is None
    plan = plan_lsh()
    ent = band_entries(sig, usable, plan)
    got = lsh.group_lsh_pairs(ent, sig, usable, plan)
    a, b = lsh.lsh_pairs(sig, usable, plan)
    assert got is not None and got[0].size > 100
    assert np.array_equal(got[0], a) and np.array_equal(got[1], b)
    with monkeypatch.context() as m:
        m.setattr(lsh, "GROUP_PAIRS_MAX", 1000)  # more collisions than it pairs at once
        assert lsh.group_lsh_pairs(ent, sig, usable, plan) is None
    monkeypatch.setattr(lsh, "GROUP_ROWS_MAX", len(texts) - 1)  # more rows than it takes
    assert lsh.group_lsh_pairs(ent, sig, usable, plan) is None
