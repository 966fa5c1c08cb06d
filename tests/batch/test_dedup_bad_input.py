"""Bad input for ``dedup`` (issue 23): one text repeated, a shared boilerplate, empty and
whitespace-only texts, one very large text. Each must do bounded work (counted in pairs, not
timed) and say what happened in ``stats``."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from neardup.batch.run import dedup

dedup_module = sys.modules["neardup.batch.run"]


def _words(rng: np.random.Generator, k: int) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return ["".join(rng.choice(letters, int(rng.integers(3, 9)))) for _ in range(k)]


def boilerplate_corpus(n: int, seed: int = 0, unique_words: int = 20) -> list[str]:
    """``n`` texts: the same ~2 KB of random words, then ``unique_words`` words of their own."""
    rng = np.random.default_rng(seed)
    boiler = " ".join(_words(rng, 330))
    return [boiler + " " + " ".join(_words(rng, unique_words)) for _ in range(n)]


def _no_chaining(r) -> None:
    pairs = set(zip(r.pairs.a.tolist(), r.pairs.b.tolist(), strict=True))
    for i in np.flatnonzero(~r.keep).tolist():
        root = int(r.root[i])
        assert r.keep[root] and (min(i, root), max(i, root)) in pairs


def test_one_text_repeated_is_exact_work_only():
    r = dedup(["the same text is repeated here again and again"] * 100_000)
    s = r.stats
    assert s["kept"] == 1 and s["exact_duplicates"] == 99_999
    assert s["candidates"] == 0  # only the first copy reaches the near-duplicate stages
    assert len(r.pairs) == 99_999  # first-to-rest: expand_pairs bounds an exact group's pairs


def test_shared_boilerplate_verifies_a_bounded_number_of_pairs():
    n = 5_000
    r = dedup(boilerplate_corpus(n), workers=2)
    s, lsh = r.stats, r.stats["lsh"]
    assert s["kept"] == 1 and s["dropped"] == n - 1
    # every text is a near duplicate of every other: the capped buckets and the pair valve
    # still make ~80 candidates per text; the lazy rounds verify ~3 per text (was all of them)
    assert lsh["capped_buckets"] > 0 and lsh["deferred_pairs"] > 0.9 * s["candidates"]
    assert s["candidates"] - lsh["deferred_skipped"] <= 4 * n
    assert s["verified"] == len(r.pairs) <= 4 * n
    _no_chaining(r)


@pytest.mark.parametrize("keep", ["longest", "none"])
def test_shared_boilerplate_other_keep_policies(keep):
    n = 2_000
    r = dedup(boilerplate_corpus(n, seed=1), keep=keep)
    s = r.stats
    attempted = s["candidates"] - s["lsh"]["deferred_skipped"]
    # longest first: several texts stay kept (below), and their pairs are all verified
    assert attempted <= (4 if keep == "none" else 12) * n
    assert attempted < s["candidates"] / 5
    if keep == "none":
        assert s["clusters"] == 1 and s["kept"] == 0
    else:  # the longest text is paired with only the few texts its capped buckets allow, so
        # some texts are kept (also when every candidate is verified); none is chained
        assert s["kept"] < n // 20
        _no_chaining(r)


@pytest.mark.parametrize("keep", ["first", "longest", "none"])
def test_lazy_verification_keeps_what_full_verification_keeps(monkeypatch, keep):
    """Two boilerplates, texts of each edited, unrelated texts between: with a small bucket cap
    most pairs are deferred; the keep decision equals verifying every candidate."""
    rng = np.random.default_rng(3)
    texts = []
    for k in range(400):
        if k % 3 == 2:
            texts.append(" ".join(_words(rng, 60)))
        else:
            texts.extend(boilerplate_corpus(1, seed=10 + k % 3, unique_words=0))
            words = texts[-1].split()
            for _ in range(int(rng.integers(0, 30))):  # edits: similarity stays >= 0.9
                words[int(rng.integers(0, len(words)))] = _words(rng, 1)[0]
            texts[-1] = " ".join(words)
    lazy = dedup(texts, lsh_bucket_cap=4, lsh_band_pairs_per_doc=1, keep=keep)
    assert lazy.stats["lsh"]["deferred_skipped"] > 0
    full_verify = dedup_module.verify_in_chunks

    def verify_all(*args, **kwargs):
        return full_verify(*args, **{**kwargs, "deferred": None})

    monkeypatch.setattr(dedup_module, "verify_in_chunks", verify_all)
    full = dedup(texts, lsh_bucket_cap=4, lsh_band_pairs_per_doc=1, keep=keep)
    assert "deferred_skipped" not in full.stats["lsh"] or full.stats["lsh"]["deferred_skipped"] == 0
    assert np.array_equal(lazy.keep, full.keep) and np.array_equal(lazy.root, full.root)
    assert lazy.stats["verified"] < full.stats["verified"]
    if keep != "none":
        _no_chaining(lazy)


def test_empty_and_whitespace_only_texts():
    texts = ["", " ", "\n\t ", "\u3000", "a b c", "", "   "] * 1_000
    r = dedup(texts)
    s = r.stats
    assert s["candidates"] == 0
    # every empty or whitespace-only text normalises to "": one exact group, its first kept
    assert r.keep[0] and r.keep[4] and s["kept"] == 2
    assert s["exact_duplicates"] == len(texts) - 2


def test_one_large_text_and_a_near_copy():
    rng = np.random.default_rng(0)
    vocab = _words(rng, 5_000)
    big = " ".join(rng.choice(vocab, 700_000))  # ~5 MB
    assert len(big) > 4_500_000
    r = dedup([big])
    assert r.stats["kept"] == 1 and r.stats["candidates"] == 0
    r = dedup([big, big[: len(big) - 200], "x y z"])
    assert r.stats["candidates"] == 1
    assert r.stats["kept"] == 2 and r.root[1] == 0


def test_ordinary_corpus_verifies_every_candidate():
    """Lazy verification is for concentrated corpora only: on ordinary text every candidate is
    verified (every matched pair reported), and the bucket valve stays idle."""
    from doubles import benchmark_module

    with benchmark_module("bench_dedup") as bd:
        texts = bd.generate("short", 20_000, 0, 0.1)
    r = dedup(texts, workers=2)
    lsh = r.stats["lsh"]
    assert lsh["valve_bands"] == 0 and lsh["capped_buckets"] == 0  # the valve stays idle
    assert lsh["deferred_pairs"] == 0 and lsh["deferred_skipped"] == 0
    assert not lsh["deferred_lazy"]
