"""``dedup(progress=cb)`` reports counts inside the long stages (issue 20 item 8): documents of
the corpus for exact/fingerprint/candidates, pairs for verify; increasing, with the right
totals, and the chunking behind them changes no result."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from neardup import dedup
from neardup.batch import exact
from neardup.rules import verify as verify_stage


def corpus(n: int = 3_000, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = ["".join(rng.choice(list("abcdefghijklmnop"), 6)) for _ in range(3_000)]
    texts = [" ".join(rng.choice(vocab, int(rng.integers(10, 40)))) for _ in range(n)]
    for i in range(0, n, 3):  # near copies (a word changed) and exact copies
        words = texts[i].split()
        words[0] = "changed"
        texts.append(" ".join(words))
    texts += texts[:200]
    return texts


@pytest.fixture
def small_chunks(monkeypatch):
    from neardup.text import token_kernels as tokens

    monkeypatch.setattr(verify_stage, "VERIFY_CHUNK_PAIRS", 97)
    monkeypatch.setattr(exact, "EXACT_CHUNK_BYTES", 20_000)
    monkeypatch.setattr(exact, "EXACT_NUMBA_MIN_CHARS", 1_000)
    monkeypatch.setattr(tokens, "HASH_CHUNK_BYTES", 10_000)


def test_progress_counts_increase_to_their_totals(small_chunks):
    texts = corpus()
    calls: list[tuple[str, int, int]] = []
    r = dedup(texts, progress=lambda stage, done, total: calls.append((stage, done, total)))
    by_stage: dict[str, list[tuple[int, int]]] = {}
    for stage, done, total in calls:
        by_stage.setdefault(stage, []).append((done, total))
    expect = {
        "exact": len(texts),
        "fingerprint": len(texts),
        "candidates": len(texts),
        "verify": r.stats["candidates"],
    }
    for stage, total in expect.items():
        seen = by_stage[stage]
        assert {t for _, t in seen} == {total}, stage
        done = [d for d, _ in seen]
        assert done[0] == 0 and done[-1] == total, stage
        assert all(x <= y for x, y in itertools.pairwise(done)), stage
        inside = [d for d in done if 0 < d < total]
        assert len(set(inside)) >= 3, (stage, done)  # counts move inside the stage
    assert by_stage["cluster"] == [(0, 1), (1, 1)]


def test_chunked_stages_change_no_result(monkeypatch):
    texts = corpus(seed=1)
    whole = dedup(texts)
    from neardup.text import token_kernels as tokens

    monkeypatch.setattr(verify_stage, "VERIFY_CHUNK_PAIRS", 13)
    monkeypatch.setattr(verify_stage, "VERIFY_MAX_CHUNKS", 10**9)
    monkeypatch.setattr(exact, "EXACT_CHUNK_BYTES", 5_000)
    monkeypatch.setattr(exact, "EXACT_NUMBA_MIN_CHARS", 1_000)
    monkeypatch.setattr(tokens, "HASH_CHUNK_BYTES", 3_000)
    chunked = dedup(texts, progress=lambda *a: None)
    assert whole.pair_rows() == chunked.pair_rows()
    assert np.array_equal(whole.keep, chunked.keep) and np.array_equal(whole.root, chunked.root)
    assert whole.stats["candidates"] == chunked.stats["candidates"] > 0
