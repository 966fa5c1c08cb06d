"""The stored rows' caches (neardup.online.rowcache): a bounded map that evicts the
oldest entry first, and decisions that never depend on it (the same with no cache, a tiny
one and the default, through adds, deletes and checks)."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_online_lsh import _corpus

import neardup.online.bounds as bounds_module
import neardup.online.decide as decide_module
import neardup.online.union as union_module
from neardup._memory import process_rss_bytes
from neardup.online import Deduplicator, DedupSettings
from neardup.online.rowcache import HistogramCache, RowCache, SignatureCache
from neardup.store import Store
from neardup.verify.tokens import HIST_BITS


class _ClockModel:
    """The CLOCK policy spelled out on a list of slots: a hand that clears the marks of rows
    asked for since it last passed and replaces the first unmarked one."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.owner: list[int] = []
        self.value: dict[int, list[int]] = {}
        self.marked: list[bool] = []
        self.hand = 0

    def ask(self, rowids: list[int]) -> dict[int, list[int]]:
        found = {}
        for r in rowids:
            if r in self.value:
                self.marked[self.owner.index(r)] = True
                found[r] = self.value[r]
        return found

    def put(self, r: int, value: list[int]) -> None:
        if not self.capacity or r in self.value:
            return
        if len(self.owner) < self.capacity:
            self.owner.append(r)
            self.marked.append(False)
            self.hand = len(self.owner) % self.capacity
        else:
            while self.marked[self.hand]:
                self.marked[self.hand] = False
                self.hand = (self.hand + 1) % self.capacity
            del self.value[self.owner[self.hand]]
            self.owner[self.hand] = r
            self.hand = (self.hand + 1) % self.capacity
        self.value[r] = value


@settings(max_examples=200, deadline=None)
@given(
    capacity=st.integers(0, 6),
    steps=st.lists(
        st.tuples(
            st.lists(st.integers(0, 12), max_size=8), st.lists(st.integers(0, 12), max_size=6)
        ),
        max_size=14,
    ),
)
def test_cache_equals_a_clock_model(
    capacity: int, steps: list[tuple[list[int], list[int]]]
) -> None:
    """Puts and look-ups interleaved: the cache holds what the CLOCK model holds, with the
    values put."""
    cache = SignatureCache(hashes=4, capacity=capacity)
    model = _ClockModel(capacity)
    for step, (rowids, asked) in enumerate(steps):
        sigs = np.array([[r, step, r ^ step, 7] for r in rowids], np.uint16).reshape(-1, 4)
        cache.put(rowids, sigs)
        for r, s in zip(rowids, sigs.tolist(), strict=True):
            model.put(r, s)
        slots = cache.slots(asked)
        expect = model.ask(asked)
        assert sorted(slots) == sorted(expect)
        assert len(cache) == len(model.value)
        for r, s in slots.items():
            assert cache.signatures([s]).tolist() == [expect[r]]
    assert sorted(cache.slots(list(range(13)))) == sorted(model.value)


def test_rows_asked_for_stay() -> None:
    """A row asked for between puts outlives rows put after it (CLOCK), where first-in
    first-out would evict it first."""
    cache = RowCache(np.dtype(np.int64), capacity=4)
    cache.put([0], np.array([0]))
    for r in range(1, 40):
        assert 0 in cache.slots([0])
        cache.put([r], np.array([r]))
    assert 0 in cache


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmRSS (Linux)")
def test_a_cache_holds_the_memory_of_its_rows_not_of_its_capacity() -> None:
    cache = HistogramCache(capacity=131_072)  # ~137 MB at capacity
    hist = np.ones((1, 1 << HIST_BITS), np.uint8)
    before = process_rss_bytes()
    cache.put([1], hist, np.array([3]), [b"x" * 16])
    assert process_rss_bytes() - before < 16 << 20
    # filled, the rows are kept (nothing copied away by the allocation at capacity)
    cache.put([2, 3], np.repeat(hist * 2, 2, axis=0), np.array([4, 5]), [b"y" * 16] * 2)
    h, n, _ = cache.histograms([cache.slots([1, 2, 3])[r] for r in (1, 2, 3)])
    assert h[:, 0].tolist() == [1, 2, 2] and n.tolist() == [3, 4, 5]


def test_histogram_cache_round_trip() -> None:
    rng = np.random.default_rng(1)
    hist = rng.integers(0, 256, (3, 1 << HIST_BITS), dtype=np.uint8)
    hashes = [bytes([i]) * 16 for i in range(3)]
    cache = HistogramCache(capacity=2)
    cache.put([10, 11, 12], hist, np.array([5, 6, 7]), hashes)  # 10 makes room for 12
    slots = cache.slots([10, 11, 12])
    assert sorted(slots) == [11, 12]
    h, n, c = cache.histograms([slots[11], slots[12]])
    assert (h == hist[1:]).all() and n.tolist() == [6, 7]
    assert [x.tobytes() for x in c] == hashes[1:]
    with pytest.raises(ValueError, match="2 row ids for 1 histograms"):
        cache.put([1, 2], hist[:1], np.array([1]), hashes[:1])
    assert len(HistogramCache(capacity=0)) == 0


def test_cache_refuses_mismatched_input() -> None:
    with pytest.raises(ValueError, match="capacity"):
        SignatureCache(hashes=3, capacity=-1)
    with pytest.raises(ValueError, match="2 row ids for 1 values"):
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


@pytest.mark.parametrize("array_min", [1, 10**9], ids=["arrays", "loop"])
def test_decisions_do_not_depend_on_the_cache(monkeypatch, array_min: int) -> None:
    """Through the band candidates' merge by arrays (every group) and by the loop."""
    texts = _corpus(7, n_base=90)
    made: dict[int, int] = {}
    real = decide_module.minhash_signatures

    def counting(verifier, texts_, hashes):
        made[size] = made.get(size, 0) + len(texts_)
        return real(verifier, texts_, hashes)

    monkeypatch.setattr(decide_module, "ARRAY_UNION_MIN", array_min)
    for module in (decide_module, union_module):
        monkeypatch.setattr(module, "minhash_signatures", counting)
    runs = {}
    for size in (0, 1, 5, 262_144):
        with Deduplicator.open(settings=DedupSettings(signature_cache_rows=size)) as d:
            assert d.candidates == "lsh"
            runs[size] = _stream(d, texts)
    assert runs[1] == runs[0] and runs[5] == runs[0] and runs[262_144] == runs[0]
    # and on the filter's blocks of pairs (a group's pairs compared a block at a time)
    for module in (decide_module, union_module):
        monkeypatch.setattr(module, "FILTER_BLOCK", 2)
    size = -1
    with Deduplicator.open(settings=DedupSettings(signature_cache_rows=5)) as d:
        assert _stream(d, texts) == runs[0]
    assert sum(x["duplicate"] for x in runs[0]) > 0
    # the cache is used: stored rows seen before are not made again
    assert made[262_144] < made[0] and made[5] <= made[0]


_VOCAB = [
    "river",
    "stone",
    "market",
    "window",
    "garden",
    "signal",
    "harbor",
    "engine",
    "letter",
    "forest",
    "castle",
    "bridge",
    "silver",
    "winter",
    "mirror",
    "planet",
    "shadow",
    "ticket",
    "school",
    "orange",
    "valley",
    "rocket",
    "pencil",
    "cotton",
    "island",
    "summer",
    "basket",
    "copper",
    "dragon",
    "thunder",
    "meadow",
    "lantern",
    "canvas",
    "breeze",
    "saddle",
    "velvet",
    "anchor",
    "marble",
    "pepper",
    "falcon",
]


def _articles(
    seed: int,
    n: int,
    *,
    vocab: list[str] = _VOCAB,
    tokens: tuple[int, int] = (60, 150),
    edits: tuple[int, ...] = (0, 1, 3, 12, 30),
) -> list[str]:
    """Texts of ``tokens`` (60-150) tokens drawn from one small Zipf vocabulary, as the
    window's generated long articles are: their SimHash fingerprints gather within the radius
    of each other, and unrelated ones fail the histogram bound; a fifth are copies with
    ``edits`` tokens replaced (a few: duplicates; more: not), some exact."""
    rng = random.Random(seed)
    weights = [1 / (k + 1) for k in range(len(vocab))]
    out: list[str] = []
    for _ in range(n):
        if out and rng.random() < 0.2:
            w = rng.choice(out).split()
            for _ in range(rng.choice(edits)):
                w[rng.randrange(len(w))] = rng.choice(vocab)
            out.append(" ".join(w))
        else:
            out.append(" ".join(rng.choices(vocab, weights, k=rng.randint(*tokens))))
    return out


@pytest.mark.parametrize("bands", [True, False], ids=["both-channels", "simhash-hits-only"])
def test_the_histogram_bound_changes_no_decision(tmp_path, monkeypatch, bands: bool) -> None:
    """SimHash hits turned down by the cached histograms of rows verified before (unread) are
    hits verification would reject: one at a time and in groups, with deletes, through a
    flush and a reopen (the cache starts empty again), with no cache, a tiny one and the
    default (and the bound tried for any number of cached rows), the decisions and their
    matches are the same. Without the band look-up (stored rows found by SimHash alone), a
    hit dropped wrongly would change a decision, not be found again by the other channel."""
    texts = _articles(11, 520)
    if not bands:
        monkeypatch.setattr(
            Store, "search_bands", lambda self, entries, cap: [np.zeros(0, np.int64)] * len(entries)
        )

    def run(path, rows: int) -> tuple[list, int]:
        out: list = []
        rejected = 0
        d = Deduplicator.open(path, memtable_size=150, histogram_cache_rows=rows)
        for i, t in enumerate(texts[:260]):  # single documents, as the service decides them
            g = d.check_and_add({"id": str(i), "text": t})
            out.append((g.duplicate, g.added, [(m.id, m.distance, m.score) for m in g.matches]))
            if g.added and i % 7 == 5:
                d.delete(str(i))
        d.flush()
        rejected += d._decider.histogram_rejected
        d.close()
        d = Deduplicator.open(path, memtable_size=150, histogram_cache_rows=rows)
        for lo in range(260, len(texts), 40):  # groups, after a reopen
            part = [{"id": str(lo + k), "text": t} for k, t in enumerate(texts[lo : lo + 40])]
            for g in d.check_and_add(part):
                out.append((g.duplicate, g.added, [(m.id, m.distance, m.score) for m in g.matches]))
        for g in d.check([{"id": f"q{i}", "text": t} for i, t in enumerate(texts[::3])]):
            out.append((g.duplicate, g.added, [(m.id, m.distance, m.score) for m in g.matches]))
        rejected += d._decider.histogram_rejected
        d.close()
        return out, rejected

    want, none = run(tmp_path / "every-hit-read", 0)
    assert none == 0
    # the bound for any number of cached rows (a tiny cache holds fewer than the group
    # threshold), then with the threshold as it is
    default_min = bounds_module._HISTOGRAM_MIN_ROWS
    for rows, min_rows, work in ((3, 1, 20), (131_072, 1, 2000), (131_072, default_min, 1000)):
        monkeypatch.setattr(bounds_module, "_HISTOGRAM_MIN_ROWS", min_rows)
        got, rejected = run(tmp_path / f"cache-{rows}-{min_rows}", rows)
        assert got == want
        assert rejected > work  # the bound had work
    assert sum(dup for dup, _, _ in want) > 60  # and the stream has duplicates to find
    assert sum(not dup for dup, _, _ in want) > 300
