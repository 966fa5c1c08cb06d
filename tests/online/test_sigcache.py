"""The stored rows' signature cache (neardup.online.sigcache): a bounded map that evicts the
oldest entry first, and decisions that never depend on it (the same with no cache, a tiny
one and the default, through adds, deletes and checks)."""

from __future__ import annotations

import random
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_online_lsh import _corpus

import neardup.online.decide as decide_module
from neardup.online import Deduplicator, DedupSettings
from neardup.online.sigcache import SignatureCache


@settings(max_examples=150, deadline=None)
@given(
    capacity=st.integers(0, 6),
    puts=st.lists(st.lists(st.integers(0, 12), max_size=8), max_size=12),
)
def test_cache_equals_a_first_in_first_out_model(capacity: int, puts: list[list[int]]) -> None:
    cache = SignatureCache(hashes=4, capacity=capacity)
    model: OrderedDict[int, list[int]] = OrderedDict()
    for step, rowids in enumerate(puts):
        sigs = np.array([[r, step, r ^ step, 7] for r in rowids], np.uint16).reshape(-1, 4)
        cache.put(rowids, sigs)
        for r, s in zip(rowids, sigs.tolist(), strict=True):
            if capacity and r not in model:
                if len(model) == capacity:
                    model.popitem(last=False)
                model[r] = s
        slots = cache.slots(list(range(13)))
        assert sorted(slots) == sorted(model)
        assert len(cache) == len(model)
        for r, s in slots.items():
            assert cache.signatures([s]).tolist() == [model[r]]


def test_cache_refuses_mismatched_input() -> None:
    with pytest.raises(ValueError, match="capacity"):
        SignatureCache(hashes=3, capacity=-1)
    with pytest.raises(ValueError, match="2 row ids for 1 signatures"):
        SignatureCache(hashes=3).put([1, 2], np.zeros((1, 3), np.uint16))


def _stream(d: Deduplicator, texts: list[str]) -> list[dict]:
    """Groups of check-and-adds, deletes of some kept documents, then checks of everything."""
    out: list[dict] = []
    rng = random.Random(3)
    for lo in range(0, len(texts), 9):
        got = d.check_and_add([{"id": f"a{i}", "text": texts[i]} for i in range(lo, lo + 9)
                               if i < len(texts)])  # fmt: skip
        out += [x.to_dict() for x in got]
        kept = [x.id for x in got if not x.duplicate]
        for doc_id in rng.sample(kept, k=len(kept) // 3):
            d.delete(doc_id)
    out += [x.to_dict() for x in d.check([{"id": f"q{i}", "text": t} for i, t in enumerate(texts)])]
    return out


def test_decisions_do_not_depend_on_the_cache(monkeypatch) -> None:
    texts = _corpus(7, n_base=90)
    made: dict[int, int] = {}
    real = decide_module.minhash_signatures

    def counting(verifier, texts_, hashes):
        made[size] = made.get(size, 0) + len(texts_)
        return real(verifier, texts_, hashes)

    monkeypatch.setattr(decide_module, "minhash_signatures", counting)
    runs = {}
    for size in (0, 1, 5, 262_144):
        with Deduplicator.open(settings=DedupSettings(signature_cache_rows=size)) as d:
            assert d.candidates == "lsh"
            runs[size] = _stream(d, texts)
    assert runs[1] == runs[0] and runs[5] == runs[0] and runs[262_144] == runs[0]
    # and on the filter's blocks of pairs (a group's pairs compared a block at a time)
    monkeypatch.setattr(decide_module, "_FILTER_BLOCK", 2)
    size = -1
    with Deduplicator.open(settings=DedupSettings(signature_cache_rows=5)) as d:
        assert _stream(d, texts) == runs[0]
    assert sum(x["duplicate"] for x in runs[0]) > 0
    # the cache is used: stored rows seen before are not made again
    assert made[262_144] < made[0] and made[5] <= made[0]
