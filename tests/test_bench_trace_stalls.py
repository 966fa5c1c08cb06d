"""benchmarks/trace_stalls.py: single checks at a rate against a small store, with the long
rows' summaries held in memory and read from SQLite (the same decisions either way)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from doubles import benchmark_module


@pytest.fixture(scope="module")
def ts() -> Iterator[ModuleType]:
    with benchmark_module("trace_stalls") as module:
        yield module


def test_runs_with_summaries_held_and_read(ts: ModuleType, tmp_path: Path) -> None:
    import window_corpus as wc

    from neardup.online import Deduplicator

    ns = tmp_path / "ns"
    texts = wc.stream_texts(wc.WindowSpec(n=10_000_000), 0, 2000)
    with Deduplicator.open(ns, lsh_bands=30, lsh_rows=3, resident_summaries=True) as d:
        d.load([{"id": f"d{i}", "text": t} for i, t in enumerate(texts)])
        assert d.stats()["resident_summaries"] > 0  # the mix holds long texts
    got = {}
    for mode in ("on", "off"):
        out = tmp_path / f"{mode}.json"
        argv = [str(ns), "--n", "60", "--rate", "2000", "--kind", "check", "--resident-summaries", mode, "--out", str(out)]  # fmt: skip
        assert ts.main(argv) == 0
        got[mode] = json.loads(out.read_text())
    assert got["on"]["open_to_summaries_loaded_s"] > 0
    assert got["off"]["open_to_summaries_loaded_s"] is None
    assert got["on"]["params"]["resident_summaries"] == "on"
