"""benchmarks/bench_cold_reads.py: checks against a small kept store with its database's pages
dropped, one reader against two, the same decisions; its refusals."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from doubles import benchmark_module


@pytest.fixture(scope="module")
def bcr() -> Iterator[ModuleType]:
    with benchmark_module("bench_cold_reads") as module:
        yield module


def _store(tmp_path: Path) -> Path:
    from neardup.online import Deduplicator

    ns = tmp_path / "data" / "namespaces" / "default"
    docs = [{"id": f"x{i}", "text": f"a stored post {i} with words {i * 3} {i * 7} {i % 13}"} for i in range(600)]  # fmt: skip
    with Deduplicator.open(ns) as d:
        d.add(docs)
    return ns


@pytest.mark.parametrize("ids", [[], ["--random-ids"]])
def test_runs_each_setting_on_the_same_texts(
    bcr: ModuleType, tmp_path: Path, ids: list[str]
) -> None:
    ns = _store(tmp_path)
    out = tmp_path / "cold.json"
    argv = [str(ns), "--read-threads", "1,2", "--docs", "300", "--batch", "150", "--rounds", "2", "--out", str(out), *ids]  # fmt: skip
    assert bcr.main(argv) == 0
    res = json.loads(out.read_text())
    assert [m["read_threads"] for m in res["medians"]] == [1, 2]
    assert len(res["runs"]) == 4 and all(r["wall_us_doc"] > 0 for r in res["runs"])
    by_round = {}
    for r in res["runs"]:  # each round's settings made the same decisions (the script checks)
        by_round.setdefault(r["round"], set()).add(r["duplicates"])
    assert all(len(v) == 1 for v in by_round.values())
    assert res["page_cache"].startswith("database dropped") and res["machine"]["cpus"] >= 1
    assert res["ids"] == ("random" if ids else "sequential")


def test_random_ids_are_spread_among_the_windows_own(bcr: ModuleType) -> None:
    ids = bcr.query_ids(1_000, 5, True)
    assert len(set(ids)) == 1_000 and ids == bcr.query_ids(1_000, 5, True)
    assert all(len(i) == 12 and i[0] == "w" and i[1:11].isdigit() and i[-1] == "x" for i in ids)
    assert len({i[1] for i in ids}) == 10  # every leading digit: all over the index
    assert bcr.query_ids(3, 7, False) == ["q7", "q8", "q9"]


def test_compares_summaries_held_and_read(bcr: ModuleType, tmp_path: Path) -> None:
    ns = _store(tmp_path)
    out = tmp_path / "cold.json"
    argv = [str(ns), "--read-threads", "2", "--resident-summaries", "on,off", "--docs", "200", "--batch", "100", "--rounds", "2", "--out", str(out)]  # fmt: skip
    assert bcr.main(argv) == 0
    res = json.loads(out.read_text())
    assert [(m["read_threads"], m["resident_summaries"]) for m in res["medians"]] == [
        (2, True),
        (2, False),
    ]
    held = [r for r in res["runs"] if r["resident_summaries"]]
    assert len(held) == 2 and all(r["open_to_summaries_loaded_s"] > 0 for r in held)
    assert all(r["open_to_summaries_loaded_s"] is None for r in res["runs"] if r not in held)


@pytest.mark.parametrize(
    "extra",
    [
        ["--read-threads", "1,x"],
        ["--read-threads", "0"],
        ["--rounds", "0"],
        ["--docs", "0"],
        ["--resident-summaries", "yes"],
        ["--resident-summaries", "on,on"],
    ],
)
def test_refuses_bad_options(bcr: ModuleType, tmp_path: Path, extra: list[str]) -> None:
    ns = tmp_path / "ns"
    ns.mkdir()
    (ns / "meta.sqlite3").write_bytes(b"")
    with pytest.raises(SystemExit) as e:
        bcr.main([str(ns), *extra])
    assert e.value.code == 2


def test_refuses_a_directory_without_a_store(bcr: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as e:
        bcr.main([str(tmp_path)])
    assert e.value.code == 2
