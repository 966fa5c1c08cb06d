"""The distributed candidates step applies the single-machine bucket valve exactly: per band,
buckets paired in full while the band's pairs fit its budget, else thinned to the band's cap
(:func:`neardup.index.band_groups.valve_cap`), each document paired in a thinned bucket once over
the bands; so crowded corpora give the same pairs, kept documents and clusters on every
partition count."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _distributed_common import assert_same, distributed, single_machine

from neardup.distributed import run_dedup
from neardup.rules.config import DedupConfig

WORDS = [f"w{i}" for i in range(400)]


def crowded_corpus(tmp: Path, parts: int, big: int = 0) -> list[str]:
    """Templates repeated with small edits (band buckets of 40-70 members: over the valve's
    floor of 32 twice over) among unrelated posts, cut into ``parts`` JSONL files."""
    rng = random.Random(7)
    rows = []
    for t in range(6 if big else 5):
        base = [rng.choice(WORDS) for _ in range(30)]
        for _ in range(40 + 7 * t if t < 5 else big):
            words = list(base)
            for _ in range(rng.randint(1, 2)):
                words[rng.randrange(len(words))] = rng.choice(WORDS)
            if rng.random() < 0.3:
                words.append(rng.choice(WORDS))
            rows.append(" ".join(words))
    rows += [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(120)]
    rng.shuffle(rows)
    rows += rows[:5]  # a few exact copies too
    out = []
    for p in range(parts):
        f = tmp / f"part{p}.jsonl"
        chunk = rows[p * len(rows) // parts : (p + 1) * len(rows) // parts]
        f.write_text(
            "".join(json.dumps({"id": f"d{p}-{i}", "text": x}) + "\n" for i, x in enumerate(chunk))
        )
        out.append(str(f))
    return out


@pytest.mark.parametrize(
    ("budget", "big"),
    # (1, 0), (5, 0): caps at the floor (32); (16, 0): no valve; (12, 160): caps over the floor
    # in some bands. (Lower budgets with ``big`` make the single machine verify the pairs of
    # thinned buckets lazily: test_over_cap_case_equals_the_single_machine.)
    [(1, 0), (5, 0), (16, 0), (12, 160)],
)
def test_valve_equals_single_machine(tmp_path: Path, budget: int, big: int) -> None:
    inputs = crowded_corpus(tmp_path, 2, big)
    cfg = DedupConfig(lsh_band_pairs_per_doc=budget)
    want = single_machine(inputs, cfg)
    lsh = want["stats"]["lsh"]
    # the valve acts below 16 (buckets of more than 33 members thinned), not at 16
    assert (lsh["valve_bands"] > 0) == (lsh["capped_buckets"] > 0) == (budget < 16)
    assert not lsh.get("deferred_lazy")
    for partitions in (1, 3):
        res = run_dedup(inputs, str(tmp_path / f"w{partitions}"), config=cfg, partitions=partitions)
        got = distributed(res)
        assert_same(got, want)
        assert got["stats"]["candidates"] == want["stats"]["candidates"]
        for k in (
            "band_pairs_budget", "valve_bands", "bucket_cap_used", "capped_buckets",
            "pairs_skipped",
        ):  # fmt: skip
            assert got["stats"]["lsh"][k] == lsh[k], k
        caps = got["stats"]["lsh"]["band_caps"]
        assert any(c is not None and c > 32 for c in caps) == (big > 0)


def _same_at_1_and_3_partitions(
    tmp: Path, inputs: list[str], cfg: DedupConfig, want: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    """Run the distributed job at 1 and 3 partitions; each run's outputs and counts (candidates,
    verified) equal the single machine's; yields each run's views for the caller's checks."""
    for partitions in (1, 3):
        res = run_dedup(inputs, str(tmp / f"w{partitions}"), config=cfg, partitions=partitions)
        got = distributed(res)
        assert_same(got, want)
        for k in ("candidates", "verified"):
            assert got["stats"][k] == want["stats"][k], k
        yield got


@pytest.mark.parametrize("keep", ["first", "longest", "none"])
def test_over_cap_case_equals_the_single_machine(tmp_path: Path, keep: str) -> None:
    """The over-cap case: buckets far over a small budget, so that the single machine verifies
    the pairs only thinned buckets gave lazily and skips most of them. The distributed engines
    run the same lazy rounds (steps ``lazy`` and ``deferred``): the same kept documents,
    pairs, rules, roots and counts, the same pairs skipped. Later copies padded with spaces
    (exact duplicates, longer) make a unit's longest copy a later one for keep="longest"."""
    inputs = crowded_corpus(tmp_path, 2, 400)
    rows = [json.loads(x) for x in Path(inputs[0]).read_text().splitlines()]
    extra = tmp_path / "part2.jsonl"
    extra.write_text(
        "".join(
            json.dumps({"id": f"pad-{i}", "text": r["text"].replace(" ", "   ")}) + "\n"
            for i, r in enumerate(rows[::9])
        )
    )
    inputs.append(str(extra))
    cfg = DedupConfig(lsh_band_pairs_per_doc=1, lsh_bucket_cap=4, keep=keep)
    want = single_machine(inputs, cfg)
    lsh = want["stats"]["lsh"]
    assert lsh["deferred_lazy"] and lsh["deferred_skipped"] > 0
    for got in _same_at_1_and_3_partitions(tmp_path, inputs, cfg, want):
        for k in ("deferred_pairs", "deferred_lazy", "deferred_skipped"):
            assert got["stats"]["lsh"][k] == lsh[k], k


@pytest.mark.parametrize("keep", ["first", "none"])
def test_simhash_pair_valve_equals_the_single_machine(tmp_path: Path, keep: str) -> None:
    """A boilerplate of long texts puts more SimHash pairs within the pass's distance than
    ``max_candidates_per_doc`` allows: the single machine lowers the pass's distance
    (``planned_pairs``' pair valve) and counts its pairs as dense; the distributed join counts
    the pass's pairs by distance and the driver applies the same valve
    (``neardup.rules.passes.valve_distance``): the same candidates, verified pairs and
    outputs. (A small MinHash budget thins the texts' buckets, so that the SimHash pairs the
    valve drops are not all MinHash candidates too.)"""
    rng = random.Random(11)
    boiler = [rng.choice(WORDS) for _ in range(300)]
    inputs = crowded_corpus(tmp_path, 2)
    long_rows = []
    for i in range(80):
        words = list(boiler)
        for _ in range(rng.randint(0, 2)):
            words[rng.randrange(len(words))] = rng.choice(WORDS)
        long_rows.append(json.dumps({"id": f"long-{i}", "text": " ".join(words)}) + "\n")
    extra = tmp_path / "part2.jsonl"
    extra.write_text("".join(long_rows))
    inputs.append(str(extra))
    cfg = DedupConfig(
        max_candidates_per_doc=8, lsh_bucket_cap=4, lsh_band_pairs_per_doc=1, keep=keep
    )
    want = single_machine(inputs, cfg)
    passes = want["stats"]["candidate_passes"]
    assert passes["simhash"]["distance_used"] < passes["simhash"]["distance_planned"]
    for got in _same_at_1_and_3_partitions(tmp_path, inputs, cfg, want):
        assert (
            got["stats"]["candidate_passes"]["simhash"]["distance_used"]
            == passes["simhash"]["distance_used"]
        )
