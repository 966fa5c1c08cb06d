"""neardup.explain: the same decisions, rules and keep outcomes as neardup.dedup, from the same
code; alignments that reconstruct the token sequences; the dev set's labelled pairs."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import DedupConfig, dedup
from neardup.batch.exact import stage_exact
from neardup.errors import ConfigError, InputTypeError, NotFoundError
from neardup.review.explain import align, config_from_summary, explain, explain_in_corpus
from neardup.verify.rule import RULE_NAMES, Verifier

WORDS = [
    "river",
    "bridge",
    "council",
    "budget",
    "library",
    "winter",
    "market",
    "harbor",
    "museum",
    "school",
    "station",
    "garden",
    "letter",
    "evening",
    "summer",
    "doctor",
    "village",
    "teacher",
    "festival",
    "hospital",
    "report",
    "island",
    "desert",
]


def _corpus(seed: int, n: int = 40) -> list[str]:
    """Texts drawn from a few bases with scattered edits (near pairs at every similarity), a
    few exact copies and a short excerpt inside a long page (containment)."""
    rng = np.random.default_rng(seed)
    bases = [" ".join(rng.choice(WORDS, int(rng.integers(8, 60)))) for _ in range(5)]
    out = []
    for _ in range(n):
        words = bases[int(rng.integers(0, 5))].split()
        for _ in range(int(rng.integers(0, max(1, len(words) // 3)))):
            words[int(rng.integers(0, len(words)))] = str(rng.choice(WORDS))
        out.append(" ".join(words))
    out.append(out[3].upper())  # an exact copy (normalised)
    page = " ".join(rng.choice(WORDS, 80))
    out.append(page + " " + bases[0] + " " + page)  # bases[0] wrapped in chrome
    return out


def _run(texts: list[str], **opts: Any) -> tuple[dict[tuple[int, int], tuple[str, str]], Any]:
    """What one run decided for every pair of positions a < b."""
    cand: list[Any] = []
    r = dedup(texts, candidates_out=cand, **opts)
    reported = {
        (a, b): RULE_NAMES[ru]
        for a, b, ru in zip(
            r.pairs.a.tolist(), r.pairs.b.tolist(), r.pairs.rule.tolist(), strict=True
        )
    }
    c = cand[0]
    seen = {
        (a, b): RULE_NAMES[ru]
        for a, b, ru in zip(c.a.tolist(), c.b.tolist(), c.rule.tolist(), strict=True)
    }
    first = stage_exact(texts)
    out = {}
    for a in range(len(texts)):
        for b in range(a + 1, len(texts)):
            if (a, b) in reported:
                out[(a, b)] = ("duplicate", reported[(a, b)])
                continue
            fa, fb = sorted((int(first[a]), int(first[b])))
            out[(a, b)] = (
                ("not a duplicate", seen[(fa, fb)])
                if (fa, fb) in seen
                else ("not a candidate", "none")
            )
    return out, r


@pytest.mark.parametrize(
    "opts",
    [{}, {"keep": "longest"}, {"threshold": 0.9}, {"candidates": "simhash"}, {"verify": False}],
    ids=["defaults", "longest", "threshold-0.9", "simhash", "unverified"],
)
def test_explain_decides_every_pair_as_dedup_does(opts: dict[str, Any]) -> None:
    texts = _corpus(7)
    want, r = _run(texts, **opts)
    cfg = DedupConfig(**opts)
    kinds = set()
    for (a, b), (decision, rule) in want.items():
        e = explain(texts[a], texts[b], config=cfg)
        assert (e.decision, e.rule) == (decision, rule), (a, b)
        kinds.add(rule)
        if decision == "duplicate" and cfg.keep != "none":
            if r.root[b] == a:  # the run dropped b for a: so does the pair alone
                assert e.keep["dropped"] == ["B"]
            if e.keep.get("length_guard"):
                assert r.root[b] != a and r.root[a] != b
    if not opts:  # the corpus exercises every rule a run reports
        assert {"exact", "similarity", "containment", "none", "below"} <= kinds


def test_rules_with_their_numbers() -> None:
    base = (
        "the council announced a new budget for the river bridge and the public library this "
        "winter after a long debate in the town hall"
    )  # 24 tokens: enough for containment
    page = " ".join(WORDS * 3)
    e = explain(base, base.upper() + "  ")
    assert (e.decision, e.rule, e.channels, e.score) == ("duplicate", "exact", ("exact",), 1.0)
    # two empty texts are exact copies (a run drops the second): no note that the bound
    # rejected them, which the verifier alone would say
    e = explain("", "  ")
    assert (e.decision, e.rule) == ("duplicate", "exact") and "bound" not in e.to_text()
    e = explain(base, page + " " + base + " " + page)  # an excerpt inside a long page
    assert e.rule == "containment" and e.containment == 1.0 and e.similarity < 0.675
    # the length guard: the longer text is never dropped for an excerpt of it
    assert e.keep["kept"] == ["A", "B"] and e.keep["length_guard"]
    assert "length guard" in e.to_text()
    e = explain(page + " " + base + " " + page, base)
    assert e.rule == "containment" and e.keep["dropped"] == ["B"]
    e = explain(base, "completely unrelated words about a harbor festival in summer")
    assert e.decision == "not a candidate" and e.rule == "none" and e.verdict in ("below", "bound")
    assert not e.duplicate and not e.candidate
    e = explain(base, base + " today", verify=False)
    assert e.rule == "unverified" and e.duplicate
    long_a = " ".join(WORDS * 20)
    long_b = long_a.replace("river", "lake", 1)
    e = explain(long_a, long_b, verifier={"trust_distance": 3})
    assert e.rule == "trusted" and e.simhash["distance"] <= 3
    e = explain(base, base + " today", keep="none")
    assert e.keep["dropped"] == ["A", "B"]


def test_channels_name_the_shared_bands_and_agreement() -> None:
    a = "the quick brown fox jumps over the lazy dog in the park today"
    e = explain(a, a.replace("jumps", "jumped"))
    m = e.minhash
    assert e.channels == ("minhash",) and m["found"]
    assert m["shared_bands"] and m["agreement"] >= m["min_agreement"]
    assert (m["bands"], m["rows"]) == (79, 3)  # the default plan for 0.8
    e = explain(a, a.replace("jumps", "jumped"), threshold=0.95)
    assert (e.minhash["bands"], e.minhash["rows"]) == (18, 7)  # the run's plan for 0.95
    text = explain(a, a.replace("jumps", "jumped")).to_text()
    assert "minhash: finds it" in text and "jumps  ->  jumped" in text


@settings(max_examples=60, deadline=None)
@given(
    a=st.lists(st.sampled_from([*WORDS[:6], "天", "地"]), max_size=30),
    b=st.lists(st.sampled_from([*WORDS[:6], "天", "地"]), max_size=30),
)
def test_alignment_rebuilds_both_token_sequences(a: list[str], b: list[str]) -> None:
    from rapidfuzz.distance import LCSseq

    from neardup.verify.rule import TokenEncoder

    v = Verifier()
    al = align(v, " ".join(a), " ".join(b))
    assert al.runs is not None
    assert tuple(t for r in al.runs for t in r.a) == al.tokens_a
    assert tuple(t for r in al.runs for t in r.b) == al.tokens_b
    enc = TokenEncoder()
    want = LCSseq.similarity(enc.encode(list(al.tokens_a)), enc.encode(list(al.tokens_b)))
    assert al.lcs == want == al.counts()["equal"]
    for r in al.runs:  # a run is what its op says
        assert (r.op == "equal") == (r.a == r.b and bool(r.a))
        assert r.op != "insert" or not r.a
        assert r.op != "delete" or not r.b
    ops = [r.op for r in al.runs]
    assert all(x == "equal" or y == "equal" for x, y in itertools.pairwise(ops))


def test_over_the_lcs_cap_there_is_no_alignment() -> None:
    e = explain("a b c d e f g h", "a b c d e f g x", verifier={"max_lcs_cells": 10})
    assert (
        e.alignment is None
        and e.measure == "overlap"
        and any("max_lcs_cells" in n for n in e.notes)
    )


def test_to_dict_is_json_and_inputs_are_checked() -> None:
    e = explain("alpha beta gamma delta", "alpha beta gamma delta epsilon", ids=("x", "y"))
    d = json.loads(json.dumps(e.to_dict()))
    assert d["ids"] == ["x", "y"] and d["decision"] == e.decision
    assert d["alignment"][0]["op"] == "equal"
    with pytest.raises(InputTypeError):
        explain(b"bytes", "text")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        explain("a", "b", nonsense=1)
    with pytest.raises(ConfigError):
        explain("a", "b", ids=("x",))


def test_config_from_a_run_summary(tmp_path: Path) -> None:
    texts = _corpus(3, 12)
    r = dedup(texts, threshold=0.85, keep="longest")
    cfg = config_from_summary(json.loads(json.dumps(r.stats)))
    assert cfg.threshold == 0.85 and cfg.keep == "longest"
    assert cfg.lsh_plan() == DedupConfig(threshold=0.85).lsh_plan()
    assert cfg.make_verifier().threshold == 0.85
    # a threshold override reaches the verifier (the run's recorded one won: --run R
    # --threshold T explained at the run's threshold)
    a, b = texts[0], texts[0] + " and one more clause added at the end of it"
    what_if = explain(a, b, config=cfg, threshold=0.5)
    assert what_if.thresholds["threshold"] == 0.5
    assert (
        what_if.to_dict()
        == explain(a, b, config=DedupConfig(keep="longest"), threshold=0.5).to_dict()
    )
    with pytest.raises(ConfigError, match="config"):
        config_from_summary({"documents": 3})


def test_explain_in_corpus_orders_by_position(tmp_path: Path) -> None:
    src = tmp_path / "c.jsonl"
    base = "the council announced a new budget for the river bridge and the public library"
    rows = [
        {"id": "p", "text": base},
        {"id": "q", "text": "other"},
        {"id": "r", "text": base + " now"},
    ]
    src.write_text("".join(json.dumps(x) + "\n" for x in rows))
    e = explain_in_corpus([str(src)], "r", "p")
    assert e.ids == ("p", "r") and e.keep["dropped"] == ["B"]
    with pytest.raises(NotFoundError, match="'zz'"):
        explain_in_corpus([str(src)], "p", "zz")


@pytest.mark.shared
def test_labelled_dev_pairs_as_dedup_decides(dev_data: Path) -> None:
    """Every 4th labelled pair of the dev set (in the file's order: all three outcomes among
    them), ``explain`` alone against the run. Every pair is compared by
    ``benchmarks/explain_agreement.py`` (results/explain_agreement.json): a test of all 7,006
    took two minutes of CI."""
    docs = [json.loads(x) for x in (dev_data / "docs.jsonl").open(encoding="utf-8")]
    ids = [d["id"] for d in docs]
    texts = [d["text"] for d in docs]
    pos = {x: i for i, x in enumerate(ids)}
    pairs = []
    with (dev_data / "pairs.csv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row["id_a"] in pos and row["id_b"] in pos:
                pairs.append(tuple(sorted((pos[row["id_a"]], pos[row["id_b"]]))))
    cand: list[Any] = []
    r = dedup(texts, ids=ids, candidates_out=cand, workers=2)
    reported = {
        (a, b): ru
        for a, b, ru in zip(
            r.pairs.a.tolist(), r.pairs.b.tolist(), r.pairs.rule.tolist(), strict=True
        )
    }
    c = cand[0]
    seen = {
        (a, b): ru for a, b, ru in zip(c.a.tolist(), c.b.tolist(), c.rule.tolist(), strict=True)
    }
    first = stage_exact(texts)
    counts: dict[str, int] = {}
    for a, b in pairs[::4]:
        if (a, b) in reported:
            want = ("duplicate", RULE_NAMES[reported[(a, b)]])
        else:
            f = tuple(sorted((int(first[a]), int(first[b]))))
            want = (
                ("not a duplicate", RULE_NAMES[seen[f]])
                if f in seen
                else ("not a candidate", "none")
            )
        e = explain(texts[a], texts[b])
        assert (e.decision, e.rule) == want, (ids[a], ids[b])
        if want[0] == "duplicate" and r.root[b] == a:
            assert e.keep["dropped"] == ["B"]
        counts[want[0]] = counts.get(want[0], 0) + 1
    # the dev set has all three outcomes
    assert set(counts) == {"duplicate", "not a duplicate", "not a candidate"}
