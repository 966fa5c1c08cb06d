"""Library dedup(): stages, policy, pairs, determinism, candidate scan vs reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import DedupConfig, DedupResult, dedup
from neardup.errors import ConfigError, InputError, InputTypeError
from neardup.index.reference import all_pairs_reference
from neardup.index.scan import all_pairs_bruteforce, candidate_pairs
from neardup.rules.config import PairTable
from neardup.rules.groups import stage_exact_pairs, stage_expand
from neardup.rules.keep import stage_policy
from neardup.verify.rule import RULE_CONTAINMENT, RULE_EXACT

BASE = "the council announced a new budget for the river bridge and the public library this winter"
CORPUS = [
    BASE,  # 0
    "Completely unrelated words about mountain weather and airport railways in summer seasons",  # 1
    BASE.upper(),  # 2: exact duplicate after normalisation
    BASE.replace("new", "large"),  # 3: near duplicate
    "RT @news: " + BASE + " #budget https://t.co/x",  # 4: social repost
    "今天城市的天气很好，我们一起去公园散步吧",  # 5
    "//@小明: 今天城市的天气很好，我们一起去公园散步吧 #散步#",  # 6
    "",  # 7: empty
]


def test_end_to_end_small_corpus():
    r = dedup(CORPUS)
    assert isinstance(r, DedupResult)
    assert r.keep.tolist() == [True, True, False, False, False, True, False, True]
    assert r.root.tolist() == [0, 1, 0, 0, 0, 5, 5, 7]
    assert r.cluster.tolist() == [0, 1, 0, 0, 0, 2, 2, 3]
    s = r.stats
    assert (s["documents"], s["exact_duplicates"], s["near_duplicates"], s["clusters"]) == (
        8,
        1,
        3,
        2,
    )
    rows = r.pair_rows()  # no ids passed: positions as ints
    assert (0, 2, 0, 1.0, "exact") in rows
    stages = {(a, b): st for a, b, _, _, st in rows}
    assert stages[(0, 3)] == "near" and stages[(5, 6)] == "near"
    # the copy of 0 is reported against 0's near duplicates too
    assert (2, 3) in stages and stages[(2, 3)] == "near"


@pytest.mark.parametrize(
    ("keep", "expected"),
    [
        ("first", [True, False, True, False]),
        ("longest", [False, True, True, False]),
        ("none", [False, False, True, False]),
    ],
)
def test_policies(keep, expected):
    roots = np.array([0, 0, 2, 2], np.int64)
    lengths = np.array([5, 9, 3, 3], np.int64)
    assert (
        stage_policy(roots, lengths, keep).tolist() == [expected[0], expected[1], True, False]
        or keep == "none"
    )
    if keep == "none":
        roots = np.array([0, 0, 2, 3])
        assert stage_policy(roots, lengths, "none").tolist() == [False, False, True, True]


def test_keep_policies_end_to_end():
    texts = [
        "short text about the bridge budget",
        "short text about the bridge budget!!! and more",
        "x y z",
    ]
    assert dedup(texts, keep="longest", max_distance=64).keep.tolist()[2] is True
    r = dedup(CORPUS, keep="none")
    assert r.keep.tolist() == [False, True, False, False, False, False, False, True]


def test_deterministic_across_workers():
    rng = np.random.default_rng(1)
    words = [
        "river",
        "city",
        "market",
        "garden",
        "winter",
        "bridge",
        "library",
        "budget",
        "council",
        "school",
    ]
    texts = [" ".join(rng.choice(words, 12)) for _ in range(150)]
    texts += [t + " extra" for t in texts[:40]]
    r1 = dedup(texts, workers=1)
    # 2, 3 (more threads than this box may have) and the default (every CPU it may use)
    for r2 in (dedup(texts, workers=2), dedup(texts, workers=3), dedup(texts)):
        assert r1.keep.tolist() == r2.keep.tolist()
        assert r1.cluster.tolist() == r2.cluster.tolist()
        assert r1.root.tolist() == r2.root.tolist()
        assert r1.pair_rows() == r2.pair_rows()


def test_default_workers_is_every_cpu_the_process_may_use(monkeypatch):
    import os

    from neardup._threads import default_workers

    if hasattr(os, "sched_getaffinity"):
        assert default_workers() == len(os.sched_getaffinity(0))
    assert DedupConfig().workers == default_workers()
    assert dedup(["a b c d e f"]).stats["config"]["workers"] == default_workers()
    # the affinity mask, not the machine's count: a process pinned to 3 of 64 CPUs gets 3
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 5, 9}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert default_workers() == 3
    assert DedupConfig().workers == 3  # read when a config is made, not at import
    # no affinity call (macOS, Windows): os.cpu_count(), at least 1
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert default_workers() == 64
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert default_workers() == 1


def test_signatures_given_decide_as_signatures_made():
    """``dedup(signatures=)`` (what a store's prepared batches hand a run) gives the run made
    without them: exact copies, Chinese texts (pre-tokenised in Python) and edits included;
    a wrong shape or mode is refused before any work."""
    from neardup.fingerprint.minhash import minhash_signatures

    rng = np.random.default_rng(4)
    words = ["river", "city", "market", "garden", "winter", "bridge", "library", "budget"]
    texts = [" ".join(rng.choice(words, int(rng.integers(3, 30)))) for _ in range(200)]
    texts += [t + " extra" for t in texts[:40]] + texts[40:50]  # edits and exact copies
    texts += [
        "今天天气很好我们一起去公园散步然后吃午饭",
        "今天天气很好我们一起去公园散步然后吃晚饭",
    ]
    cfg = DedupConfig()
    sig = minhash_signatures(cfg.make_verifier(), texts, cfg.lsh_plan().hashes)
    made, given = dedup(texts), dedup(texts, signatures=sig)
    assert made.keep.tolist() == given.keep.tolist()
    assert made.cluster.tolist() == given.cluster.tolist()
    assert made.pair_rows() == given.pair_rows()
    with pytest.raises(InputError, match="shape"):
        dedup(texts, signatures=(sig[0][1:], sig[1][1:]))
    with pytest.raises(InputError, match="token counts"):
        dedup(texts, signatures=(sig[0], sig[1][:-1]))
    with pytest.raises(InputError, match="a pair"):
        dedup(texts, signatures=sig[0])
    with pytest.raises(ConfigError, match="candidates"):
        dedup(texts, signatures=sig, candidates="simhash")


@pytest.mark.parametrize("candidates", ["lsh", "simhash"])
@pytest.mark.parametrize("exact", [True, False])
def test_fingerprints_given_decide_as_fingerprints_made(candidates, exact):
    """``dedup(fingerprints=)`` (content hashes, fingerprints and empty flags a store's
    prepared batches hand a run) gives the run made without them: copies that differ in case
    and spacing, texts with no tokens, Chinese texts; a wrong shape is refused before any
    work."""
    from neardup.batch.exact import stage_fingerprint
    from neardup.fingerprint import content_hash_many

    rng = np.random.default_rng(5)
    words = ["river", "city", "market", "garden", "winter", "bridge", "library", "budget"]
    texts = [" ".join(rng.choice(words, int(rng.integers(3, 30)))) for _ in range(200)]
    texts += [t + " extra" for t in texts[:40]] + texts[40:50]  # edits and exact copies
    texts += [t.upper() for t in texts[50:60]] + ["  " + t.replace(" ", "  ") for t in texts[60:65]]
    texts += ["", "... !!", "...  !!", "今天天气很好我们一起去公园散步然后吃午饭", "今天天气很好我们一起去公园散步然后吃晚饭"]  # fmt: skip
    cfg = DedupConfig(candidates=candidates, exact=exact)
    fps, empty = stage_fingerprint(cfg.make_fingerprinter(), texts)
    given_fp = (np.asarray(content_hash_many(texts), np.uint64), fps, empty)
    made, given = dedup(texts, config=cfg), dedup(texts, config=cfg, fingerprints=given_fp)
    assert made.keep.tolist() == given.keep.tolist()
    assert made.cluster.tolist() == given.cluster.tolist()
    assert made.pair_rows() == given.pair_rows()
    assert made.keep.sum() < len(texts) - 40  # (the copies were found)
    with pytest.raises(InputError, match="content hashes"):
        dedup(texts, config=cfg, fingerprints=(given_fp[0][1:], fps, empty))
    with pytest.raises(InputError, match="fingerprints"):
        dedup(texts, config=cfg, fingerprints=(given_fp[0], fps[:-1], empty))
    with pytest.raises(InputError, match="empty flags"):
        dedup(texts, config=cfg, fingerprints=(given_fp[0], fps, empty.astype(np.uint8)))
    with pytest.raises(InputError, match="a triple"):
        dedup(texts, config=cfg, fingerprints=fps)


def test_verify_false_and_max_distance():
    r = dedup(CORPUS, verify=False, max_distance=0)
    assert r.stats["config"]["verify"] is False
    assert all(st in ("exact", "near") for *_, st in r.pair_rows())


def test_ids_and_errors():
    r = dedup(["a b c", "a b c"], ids=["x", "y"])
    assert r.ids == ["x", "y"] and r.pair_rows() == [("x", "y", 0, 1.0, "exact")]
    with pytest.raises(InputError, match="ids has 1 entries for 2 texts"):
        dedup(["a", "b"], ids=["x"])
    with pytest.raises(InputError, match="'x' appears more than once"):
        dedup(["a", "b"], ids=["x", "x"])
    # a subclass of list is checked like any list; only the reader's own UniqueIds is trusted
    with pytest.raises(InputError, match="'x' appears more than once"):
        dedup(["a", "b"], ids=type("MyIds", (list,), {})(["x", "x"]))
    with pytest.raises(InputTypeError, match=r"texts\[1\] is int"):
        dedup(["a", 1])  # type: ignore[list-item]
    with pytest.raises(InputTypeError, match="not one str"):
        dedup("abc")
    # a str, set or dict is not a sequence of ids (a str's characters, a set's order); a dict
    # of texts is not a list of them (its keys were deduplicated)
    for bad in ("ab", {"x", "y"}, {"x": 1, "y": 2}):
        with pytest.raises(InputTypeError, match="ids must be a sequence of ids"):
            dedup(["a", "b"], ids=bad)  # type: ignore[arg-type]
    with pytest.raises(InputTypeError, match=r"pass list\(d.values\(\)\) and ids=list\(d\)"):
        dedup({"i1": "text one", "i2": "text two"})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"takes config=DedupConfig\(...\), got dict"):
        dedup(["a"], config={"keep": "first"})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="keep must be"):
        DedupConfig(keep="all")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_distance must be"):
        DedupConfig(max_distance=65)
    with pytest.raises(ConfigError, match="workers must be"):
        DedupConfig(workers=0)
    with pytest.raises(ConfigError, match="unknown Verifier config keys"):
        DedupConfig(verifier={"bogus": 1})
    with pytest.raises(ConfigError, match="unknown dedup"):
        dedup(["a"], bogus=1)
    assert dedup([]).stats["documents"] == 0


def test_exact_pair_expansion_and_cap():
    from neardup.rules.groups import ExactGroups

    groups = ExactGroups.from_first(np.array([0, 1, 0, 3, 4, 0, 6, 7, 8]))
    assert groups.as_dict() == {0: [0, 2, 5]} and len(groups) == 1
    full = stage_exact_pairs(groups, 10)
    assert list(zip(full.a.tolist(), full.b.tolist(), strict=True)) == [(0, 2), (0, 5), (2, 5)]
    star = stage_exact_pairs(groups, 2)
    assert list(zip(star.a.tolist(), star.b.tolist(), strict=True)) == [(0, 2), (0, 5)]
    rule = np.array([RULE_CONTAINMENT], np.uint8)
    near = stage_expand(
        groups, np.array([0]), np.array([7]), np.array([3], np.int32), np.array([0.9]), 10, rule
    )
    got = sorted(zip(near.a.tolist(), near.b.tolist(), strict=True))
    assert got == [(0, 7), (2, 7), (5, 7)]
    assert near.rule.tolist() == [RULE_CONTAINMENT] * 3  # repeats carry the pair's rule
    assert full.rule.tolist() == [RULE_EXACT] * 3
    assert (
        len(
            stage_expand(
                groups,
                np.array([0]),
                np.array([7]),
                np.array([3], np.int32),
                np.array([0.9]),
                2,
                rule,
            )
        )
        == 1
    )
    t = PairTable.concat([near, full])
    assert t.a.tolist() == sorted(t.a.tolist())


fps64 = st.lists(st.integers(0, 2**64 - 1), max_size=60).map(lambda v: np.array(v, dtype=np.uint64))


@settings(max_examples=40)
@given(fps64, st.integers(0, 64))
def test_bruteforce_scan_equals_reference(fps, k):
    if fps.size:  # plant near neighbours
        fps = np.concatenate([fps, fps ^ np.uint64(0b1011)])
    ref = all_pairs_reference(fps, k)
    for workers in (1, 2):
        got = all_pairs_bruteforce(fps, k, workers=workers)
        for x, y in zip(ref, got, strict=True):
            assert np.array_equal(x, y)


@settings(max_examples=20)
@given(
    st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1)), max_size=30),
    st.integers(0, 128),
)
def test_bruteforce_128_equals_reference(rows, k):
    fps = np.array(rows, dtype=np.uint64).reshape(-1, 2)
    for x, y in zip(all_pairs_reference(fps, k), all_pairs_bruteforce(fps, k), strict=True):
        assert np.array_equal(x, y)


def test_candidate_pairs_dispatch_agrees():
    rng = np.random.default_rng(3)
    base = rng.integers(0, 2**63, 200, dtype=np.int64).view(np.uint64)
    fps = np.concatenate([base, base ^ np.uint64(0b111), base ^ np.uint64(0xFF)])
    for k in (3, 10):
        ref = all_pairs_reference(fps, k)
        got = candidate_pairs(fps, k)
        for x, y in zip(ref, got, strict=True):
            assert np.array_equal(x, y)
    with pytest.raises(ConfigError, match="max_distance must be"):
        candidate_pairs(fps, 65)


def test_bounded_pairs_lowers_the_distance_to_fit():
    from neardup.index.scan import bounded_pairs

    base = np.zeros(50, np.uint64)  # 50 identical fingerprints: 1225 pairs at distance 0
    fps = np.concatenate([base, np.array([0b1, 0b11], np.uint64)])
    a, _, _, used = bounded_pairs(fps, 5, 10_000)
    assert used == 5 and len(a) == len(all_pairs_reference(fps, 5)[0])
    a, _b, d, used = bounded_pairs(fps, 5, 1300)
    assert used == 1 and d.max() <= 1
    assert bounded_pairs(fps, 5, 10)[3] == -1
    r = dedup(["same words here"] * 3 + ["other words there"], max_candidates_per_doc=1)
    assert r.stats["candidate_passes"]


def test_stage_candidates_follows_the_length_rule():
    from neardup.rules.candidates import stage_candidates
    from neardup.verify.rule import Verifier

    rng = np.random.default_rng(5)
    base = rng.integers(0, 2**63, 60, dtype=np.int64).view(np.uint64)
    flips = [np.uint64((1 << int(k)) - 1) for k in rng.integers(0, 22, 240)]
    fps = np.concatenate(
        [base, np.array([base[i % 60] ^ f for i, f in enumerate(flips)], np.uint64)]
    )
    lengths = rng.choice([50, 150, 250, 390, 500, 3000], fps.size).astype(np.int64)
    usable = np.ones(fps.size, bool)
    usable[:3] = False
    v = Verifier()
    a, b, _ = stage_candidates(fps, lengths, usable, v)
    A, B, dist = all_pairs_reference(fps, v.max_candidate_distance)
    short = (np.minimum(lengths[A], lengths[B]) < 200) & (np.maximum(lengths[A], lengths[B]) < 400)
    limit = np.where(short, 18, 14)
    ok = usable[A] & usable[B] & (dist <= limit)
    assert set(zip(a.tolist(), b.tolist(), strict=True)) == set(
        zip(A[ok].tolist(), B[ok].tolist(), strict=True)
    )
    assert a.tolist() == sorted(a.tolist())


@pytest.mark.parametrize("budget", [40, 400, 2_000, 5_000, 9_000, 14_000, 50_000])
def test_bounded_pairs_tables_path_equals_the_scan(monkeypatch, budget):
    # the estimate-then-tables shortcut must give exactly what the full scan gives
    from neardup.index import scan as C

    rng = np.random.default_rng(budget)
    base = rng.integers(0, 2**63, 40, dtype=np.int64).view(np.uint64)
    flips = rng.integers(0, 2**63, 1200, dtype=np.int64).view(np.uint64)
    keep = np.zeros(1200, np.uint64)
    for bit in range(64):  # sparse flips: ~3 bits each, so many pairs at small distances
        keep |= np.where(rng.random(1200) < 0.05, np.uint64(1) << np.uint64(bit), np.uint64(0))
    fps = base[rng.integers(0, 40, 1200)] ^ (flips & keep)
    scan = C.bounded_pairs(fps, 12, budget)
    monkeypatch.setattr(C, "BOUNDED_TABLES_MIN_N", 2)
    monkeypatch.setattr(C, "TABLES_PAIR_COST", 1)
    calls = []
    real = C._bounded_by_tables
    monkeypatch.setattr(C, "_bounded_by_tables", lambda *a: calls.append(r := real(*a)) or r)
    fast = C.bounded_pairs(fps, 12, budget)
    assert fast[3] == scan[3]
    for x, y in zip(fast[:3], scan[:3], strict=True):
        assert x.dtype == y.dtype and np.array_equal(x, y)
    ref = all_pairs_reference(fps, max(scan[3], 0))
    if scan[3] >= 0:
        assert all(np.array_equal(x, y) for x, y in zip(scan[:3], ref, strict=True))
    assert calls


def test_reader_ids_are_taken_as_they_are(tmp_path):
    from neardup.io import read_corpus
    from neardup.io.texts import UniqueIds

    src = tmp_path / "d.jsonl"
    src.write_text('{"id": "a", "text": "x y"}\n{"id": 7, "text": "x y"}\n', encoding="utf-8")
    with read_corpus([str(src)]) as c:
        assert type(c.ids) is UniqueIds and c.ids == ["a", "7"]
        r = dedup(c.texts, ids=c.ids)
    assert r.ids is c.ids and r.pair_rows() == [("a", "7", 0, 1.0, "exact")]


@st.composite
def _firsts(draw):
    """A ``first`` array: each text a root or a later copy of an earlier root."""
    n = draw(st.integers(0, 40))
    first: list[int] = []
    for i in range(n):
        roots = [j for j in range(i) if first[j] == j]
        if roots and draw(st.booleans()):
            first.append(draw(st.sampled_from(roots)))
        else:
            first.append(i)
    return np.array(first, np.int64)


@settings(max_examples=200, deadline=None)
@given(first=_firsts(), expand=st.sampled_from([0, 1, 2, 3, 6, 100]), data=st.data())
def test_exact_groups_pairs_equal_the_dict_references(first, expand, data):
    from neardup.rules.groups import ExactGroups
    from neardup.rules.reference import (
        exact_groups_reference,
        stage_exact_pairs_reference,
        stage_expand_reference,
    )

    groups = ExactGroups.from_first(first)
    ref_groups = exact_groups_reference(first)
    assert groups.as_dict() == ref_groups and list(groups.as_dict()) == list(ref_groups)

    def same(x: PairTable, y: PairTable) -> None:
        for f in ("a", "b", "distance", "score", "stage", "rule"):
            got, want = getattr(x, f), getattr(y, f)
            assert got.dtype == want.dtype and np.array_equal(got, want), f

    same(stage_exact_pairs(groups, expand), stage_exact_pairs_reference(ref_groups, expand))
    roots = np.flatnonzero(first == np.arange(first.size))
    pairs = data.draw(
        st.lists(st.tuples(st.sampled_from(roots.tolist()), st.sampled_from(roots.tolist())))
        if roots.size
        else st.just([])
    )
    pairs = [(x, y) for x, y in pairs if x < y]
    a = np.array([p[0] for p in pairs], np.int64)
    b = np.array([p[1] for p in pairs], np.int64)
    d = np.arange(len(pairs), dtype=np.int32)
    sc = np.linspace(0.5, 1.0, len(pairs))
    ru = (np.arange(len(pairs)) % 3 + 2).astype(np.uint8)  # similarity, containment, trusted
    same(
        stage_expand(groups, a, b, d, sc, expand, ru),
        stage_expand_reference(ref_groups, a, b, d, sc, expand, ru),
    )


# -- the keep policy does not chain; the result's Python API ---------------------------------

from neardup.rules.keep import stage_representatives  # noqa: E402

_BASE = [f"w{i}" for i in range(30)]


def _variant(changes: list[int], tag: str) -> str:
    w = list(_BASE)
    for k in changes:
        w[k] = f"{tag}{k}"
    return " ".join(w)


def test_no_chaining_through_a_dropped_document():
    a = " ".join(_BASE)
    b = _variant(list(range(0, 30, 5)), "b")  # 6 of 30 words changed: ~0.8 similar to a
    c = _variant(list(range(0, 30, 5)) + list(range(2, 30, 5)), "b")  # ~0.8 to b, ~0.6 to a
    r = dedup([a, b, c], components=True)
    got = {(x, y) for x, y, *_ in r.pair_rows()}
    assert (0, 1) in got and (1, 2) in got and (0, 2) not in got
    # union-find would drop c through b; c has no verified pair with a kept document
    assert r.keep.tolist() == [True, False, True]
    assert r.root.tolist() == [0, 0, 2]
    assert r.components.tolist() == [0, 0, 0]
    assert dedup([a, b, c]).components is None


def test_containment_does_not_drop_the_longer_text_for_an_excerpt():
    lengths = np.array([100, 1000, 100])  # 0 is an excerpt of 1; 2 a copy of 0's size
    first = np.arange(3)
    a, b = np.array([0, 0]), np.array([1, 2])
    root = stage_representatives(first, a, b, lengths, "first", 0.675)
    assert root.tolist() == [0, 1, 0]
    # longest first: the long text is kept, its excerpt dropped for it; 2's only pair is 0
    assert stage_representatives(first, a, b, lengths, "longest", 0.675).tolist() == [1, 1, 2]


def test_stage_representatives_refuses_pairs_outside_the_documents():
    first, lengths = np.arange(3), np.array([10, 10, 10])
    for a, b in (([0], [3]), ([-1], [2]), ([0, 1], [2])):
        with pytest.raises(InputError):
            stage_representatives(first, np.array(a), np.array(b), lengths, "first", 0.8)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 29), max_size=9), min_size=2, max_size=14),
    st.sampled_from(["first", "longest"]),
)
def test_every_dropped_document_is_verified_against_a_kept_one(edits, keep):
    texts = [_variant(e, "x") + (" tail" * (i % 3)) for i, e in enumerate(edits)]
    r = dedup(texts, keep=keep)
    got = set(zip(r.pairs.a.tolist(), r.pairs.b.tolist(), strict=True))
    for i in np.flatnonzero(~r.keep).tolist():
        root = int(r.root[i])
        assert r.keep[root] and (min(i, root), max(i, root)) in got


def test_result_repr_pair_rows_and_kept_texts():
    texts = ["the cat sat on the mat today", "The cat  sat on the mat today", "a dog"] * 2000
    r = dedup(texts)
    text = repr(r)
    assert len(text) < 200 and text.startswith("DedupResult(documents=6000, kept=2")
    rows = r.pair_rows()
    assert all(isinstance(x, int) and isinstance(y, int) for x, y, *_ in rows)
    assert r.kept_indices().tolist() == [0, 2]
    assert r.kept_texts(texts) == ["the cat sat on the mat today", "a dog"]
    with pytest.raises(InputError, match="same texts"):
        r.kept_texts(texts[:3])
    named = dedup(["x y", "x y"], ids=["a", "b"])
    assert named.pair_rows() == [("a", "b", 0, 1.0, "exact")]


def test_cli_threshold_and_candidates(tmp_path):
    import json

    from neardup.cli.main import main

    src = tmp_path / "in.jsonl"
    a = " ".join(_BASE)
    b = _variant([0, 5, 10, 15], "b")  # 26 of 30 words kept: ~0.87 similar
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in (a, b)), encoding="utf-8")
    summary = tmp_path / "s.json"
    out = tmp_path / "out.jsonl"
    args = ["dedup", str(src), "-o", str(out), "-q", "--summary-json", str(summary)]
    assert main([*args, "--threshold", "0.8"]) == 0
    s = json.loads(summary.read_text())
    assert len(out.read_text().splitlines()) == 1
    assert s["config"]["threshold"] == 0.8 and s["config"]["verifier"]["threshold"] == 0.8
    assert main([*args, "--threshold", "0.95"]) == 0  # stricter than the pair: both kept
    assert len(out.read_text().splitlines()) == 2
    assert main([*args, "--candidates", "simhash"]) == 0
    assert json.loads(summary.read_text())["config"]["candidates"] == "simhash"


def test_verification_reuses_the_candidate_stage_tokenisation():
    from neardup.fingerprint.minhash import minhash_signatures
    from neardup.rules.verify import stage_verify
    from neardup.verify.rule import Verifier

    v = Verifier()
    texts = ["今天天气很好我们去公园散步吧", "今天天气很好我们去公园散步", "RT @a: the cat sat on the mat",
             "the cat sat on the mat", "naïve café au lait today", "naive cafe au lait today"]  # fmt: skip
    prepared: dict = {}
    minhash_signatures(v, texts, 12, prepared=prepared)
    assert prepared  # the non-ASCII and the social-marker texts
    a, b = np.array([0, 2, 4, 0]), np.array([1, 3, 5, 5])
    d = np.zeros(4, np.int32)
    ok1, s1 = stage_verify(v, texts, a, b, d)
    ok2, s2 = stage_verify(v, texts, a, b, d, tokenised=prepared)
    assert ok1.tolist() == ok2.tolist() and np.allclose(s1, s2)
    assert ok1[0] and ok1[1] and not ok1[3]


def test_a_pair_exactly_at_the_length_guard_is_a_duplicate() -> None:
    """10 and 15 tokens at similarity exactly 0.8: (2 - 0.8) / 0.8 is 1.4999999999999998 in
    floating point, so the longer text was never dropped though the pair reaches the
    threshold; the online store and explain share the guard."""
    import numpy as np

    from neardup.online import Deduplicator
    from neardup.rules.keep import may_drop

    short = "alpha bravo charlie delta echo foxtrot golf hotel india juliet"
    long = short + " kilo lima mike november oscar"
    r = dedup([short, long], ids=["short", "long"])
    assert r.ids and r.stats["dropped"] == 1 and not r.keep[1]
    with Deduplicator.open(None) as d:
        d.add({"id": "short", "text": short})
        assert d.check({"id": "long", "text": long}).duplicate
    for kept, tokens, t in ((10, 15, 0.8), (12, 18, 0.8), (17, 23, 0.85), (33, 67, 0.66)):
        ratio = 2 * kept / (kept + tokens)
        assert bool(may_drop(kept, tokens, t)) == (ratio >= t - 1e-12)
    assert not may_drop(10, 16, 0.8) and np.all(may_drop([10, 10], [15, 16], 0.8) == [True, False])
