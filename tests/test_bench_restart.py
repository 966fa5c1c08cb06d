"""benchmarks/bench_restart.py: a real server on a small store, killed after acknowledged adds
and started again, every added document found after the restart; its refusals."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from doubles import benchmark_module


@pytest.fixture(scope="module")
def br() -> Iterator[ModuleType]:
    with benchmark_module("bench_restart") as module:
        yield module


def test_restart_after_sigkill_finds_every_added_document(br: ModuleType, tmp_path: Path) -> None:
    from neardup.online import Deduplicator

    ns = tmp_path / "data" / "namespaces" / "default"
    with Deduplicator.open(ns) as d:
        d.add([{"id": f"x{i}", "text": f"stored text {i} with words {i * 3} {i * 7}"} for i in range(400)])  # fmt: skip
    out = tmp_path / "restart.json"
    assert br.main([str(tmp_path / "data"), "--rounds", "1", "--adds", "300", "--out", str(out)]) == 0  # fmt: skip
    res = json.loads(out.read_text())
    (row,) = res["rows"]
    (run,) = row["runs"]
    assert run["added"] == run["found_after"] == 300
    assert 0 < run["restart_s"] <= run["restart_total_s"] and run["start_s"] > 0
    assert res["machine"]["cpus"] >= 1
    with Deduplicator.open(ns) as d:  # the killed server's adds are in the store
        assert len(d) == 700


@pytest.mark.parametrize("extra", [["--rounds", "0"], ["--adds", "0"]])
def test_refuses_bad_options(br: ModuleType, tmp_path: Path, extra: list[str]) -> None:
    (tmp_path / "namespaces").mkdir()
    with pytest.raises(SystemExit) as e:
        br.main([str(tmp_path), *extra])
    assert e.value.code == 2


def test_refuses_a_directory_without_namespaces(br: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as e:
        br.main([str(tmp_path)])
    assert e.value.code == 2


def test_cold_is_refused_where_the_page_cache_cannot_be_emptied(
    br: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "namespaces").mkdir()
    monkeypatch.setattr(br, "DROP_CACHES", tmp_path / "no" / "drop_caches")
    with pytest.raises(SystemExit) as e:
        br.main([str(tmp_path), "--cold"])
    assert e.value.code == 2
