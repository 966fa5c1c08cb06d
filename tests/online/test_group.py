"""Keep-first within a group (neardup.rules.keep), the rule a node's writer and the cluster
share: it reproduces the writer's decisions, keeps the earlier member, never chains."""

from __future__ import annotations

import random

from neardup.online import Deduplicator
from neardup.rules.keep import GROUP_ORDER, Found, keep_first

WORDS = [f"{a}{b}" for a in ("ka", "lo", "mi", "ne") for b in range(600)]


def batch(rng: random.Random, k: int) -> list[dict[str, str]]:
    """A few documents, each with 0-3 edited copies (2-15 % of the words), shuffled."""
    texts = []
    for _ in range(5):
        base = [rng.choice(WORDS) for _ in range(rng.choice([12, 30, 80]))]
        texts.append(base)
        for _ in range(rng.randint(0, 3)):
            frac = rng.choice([0.02, 0.08, 0.15])
            texts.append([rng.choice(WORDS) if rng.random() < frac else w for w in base])
    rng.shuffle(texts)
    return [{"id": f"b{k}-{i}", "text": " ".join(t)} for i, t in enumerate(texts)]


def test_keep_first_reproduces_the_writer():
    """A node's writer (Decider) and keep_first over Decider.group_matches keep the same
    members of each batch (no chaining, earlier wins)."""
    rng = random.Random(11)
    dropped = 0
    for k in range(25):
        docs = batch(rng, k)
        with Deduplicator.open() as d:
            writer = [x.added for x in d.check_and_add(docs)]
        with Deduplicator.open() as d:
            within = d.group_matches(docs)
            n = len(docs)
            out = keep_first(
                [(False, ())] * n, within, adding=[True] * n, force=[False] * n, max_matches=10
            )
        assert [kept for _, kept, _ in out] == writer
        dropped += writer.count(False)
    assert dropped >= 20  # the batches do hold near-duplicates


def test_no_chaining_in_keep_first():
    # A~B and B~C only: B is dropped by A, so C (matched only by the dropped B) is kept
    pairs = {
        1: [Found(5, GROUP_ORDER + 0, "a", 0.9, True)],
        2: [Found(5, GROUP_ORDER + 1, "b", 0.9, True)],
    }
    out = keep_first([(False, ())] * 3, pairs, adding=[True] * 3, force=[False] * 3, max_matches=10)
    assert [kept for _, kept, _ in out] == [True, False, True]
    assert [dup for dup, _, _ in out] == [False, True, False]
    # insert (force): every member kept, matches with kept earlier members reported
    out = keep_first([(False, ())] * 3, pairs, adding=[True] * 3, force=[True] * 3, max_matches=10)
    assert [kept for _, kept, _ in out] == [True, True, True]
    assert [dup for dup, _, _ in out] == [False, True, True]
    # a member the stored window drops is not kept and matches nothing later
    out = keep_first(
        [(True, ()), (False, ()), (False, ())], pairs, adding=[True] * 3, force=[False] * 3,
        max_matches=10,
    )  # fmt: skip
    assert [kept for _, kept, _ in out] == [False, True, False]
