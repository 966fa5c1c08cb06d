"""benchmarks/bench_long_plans.py: a small kept store searched with three plans (the same
pairs from each, or the run ends), and its refusals."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from doubles import benchmark_module


@pytest.fixture(scope="module")
def blp() -> Iterator[ModuleType]:
    with benchmark_module("bench_long_plans") as module:
        yield module


def test_plans_find_the_same_pairs(blp: ModuleType, tmp_path: Path) -> None:
    import window_corpus as wc

    from neardup.online import Deduplicator

    ns = tmp_path / "ns"
    texts = wc.stream_texts(wc.WindowSpec(n=10_000_000), 0, 3000)
    with Deduplicator.open(ns, candidates="lsh") as d:
        d.load([{"id": f"d{i}", "text": t} for i, t in enumerate(texts)])
    out = tmp_path / "plans.json"
    assert blp.main(["--store", str(ns), "--plans", "4/1,5/2", "--queries", "30", "--repeat", "1", "--out", str(out)]) == 0  # fmt: skip
    res = json.loads(out.read_text())
    assert [r["plan"] for r in res["rows"]] == ["4 blocks choose 1", "5 blocks choose 2"]
    assert res["segment_rows"] > 0
    for band in ("0-200", "200-1000", "1000-3000", "3000-"):
        a, b = (r[band] for r in res["rows"])
        assert a["hits_per_query"] == b["hits_per_query"] and a["us_per_query"] > 0


@pytest.mark.parametrize("plans", ["4", "4/4", "x/1", "3/0"])
def test_refuses_a_malformed_plan(blp: ModuleType, tmp_path: Path, plans: str) -> None:
    (tmp_path / "MANIFEST.json").write_text("{}")
    with pytest.raises(SystemExit) as e:
        blp.main(["--store", str(tmp_path), "--plans", plans])
    assert e.value.code == 2


def test_refuses_a_store_without_a_segment(blp: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "MANIFEST.json").write_text("{}")
    with pytest.raises(SystemExit) as e:
        blp.main(["--store", str(tmp_path)])
    assert e.value.code == 2
