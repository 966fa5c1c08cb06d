"""``benchmarks/trees.py``: the checkouts a benchmark compares, checked before any work, run in
turn round after round (warm runs first when asked), summarised by medians."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from doubles import benchmark_module

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def trees():
    with benchmark_module("trees") as module:
        yield module


def test_checkouts_default_to_this_one_and_refuse_a_folder_without_neardup(
    trees, tmp_path: Path
) -> None:
    assert trees.checkouts(None) == [ROOT]
    assert trees.checkouts([str(ROOT), ROOT / "."]) == [ROOT, ROOT]
    with pytest.raises(SystemExit, match=f"--tree {tmp_path}: no neardup package there"):
        trees.checkouts([ROOT, tmp_path])


def test_alternate_runs_every_tree_in_each_round_in_turn_each_first_in_turn(trees) -> None:
    a, b = Path("/a"), Path("/b")
    calls: list[tuple[str, int]] = []
    said: list[tuple[str, int, int]] = []

    def run(t: Path, r: int) -> int:
        calls.append((t.name, r))
        return len(calls)

    runs = trees.alternate(
        [a, b], 2, run, warm=True, say=lambda t, r, x: said.append((t.name, r, x))
    )
    assert calls == [("a", -1), ("b", -1), ("a", 0), ("b", 0), ("b", 1), ("a", 1)]
    assert runs == {"/a": [3, 6], "/b": [4, 5]}  # the warm runs are not kept
    assert said == [("a", 0, 3), ("b", 0, 4), ("b", 1, 5), ("a", 1, 6)]
    c = Path("/c")
    calls.clear()
    trees.alternate([a, b, c], 3, run)
    firsts = [calls[k][0] for k in (0, 3, 6)]
    assert firsts == ["a", "b", "c"] and sorted(calls) == sorted(
        (t, r) for t in "abc" for r in range(3)
    )
    with pytest.raises(SystemExit, match="at least 1"):
        trees.alternate([a], 0, run)


def test_medians_and_commits(trees, tmp_path: Path) -> None:
    rows = [{"x": 3.0, "y": 1}, {"x": 1.0, "y": 2}, {"x": 2.0, "y": 9}]
    assert trees.medians(rows, ("x", "y")) == {"x": 2.0, "y": 2}
    assert trees.medians(iter(rows), ["x"]) == {"x": 2.0}
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=False).stdout.strip() or None  # fmt: skip
    assert trees.commit_of(ROOT) == head
    assert trees.commit_of(tmp_path) is None


def test_run_child_imports_from_the_tree_and_ends_the_run_on_a_failed_child(
    trees, tmp_path: Path, capsys
) -> None:
    (tmp_path / "probe_mod.py").write_text("WHERE = 'the tree'\n", encoding="utf-8")
    code = "import json, probe_mod; print('noise'); print(json.dumps({'from': probe_mod.WHERE}))"
    assert trees.run_child(tmp_path, [sys.executable, "-c", code]) == {"from": "the tree"}
    failing = [sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"]
    with pytest.raises(SystemExit) as stop:
        trees.run_child(tmp_path, failing)
    assert stop.value.code == 3
    assert "boom" in capsys.readouterr().err


def test_child_options_and_the_runs_json(trees, tmp_path: Path) -> None:
    """The options every child-process benchmark takes, and the JSON it writes: its options
    without ``--child``, each checkout's commit, the medians and every run."""
    import argparse
    import json

    ap = argparse.ArgumentParser()
    trees.add_child_options(ap)
    args = ap.parse_args(["--tree", str(ROOT), "--rounds", "2", "--child"])
    assert args.tree == [str(ROOT)] and args.rounds == 2 and args.child and args.out is None
    assert ap.parse_args([]).rounds == 3
    out = tmp_path / "r.json"
    runs = {str(ROOT): [{"x": 1.0}, {"x": 3.0}]}
    trees.write_runs(out, "demo", args, [ROOT], {str(ROOT): {"x": 2.0}}, runs)
    got = json.loads(out.read_text())
    assert got["benchmark"] == "demo" and "child" not in got["params"]
    assert got["params"]["rounds"] == 2 and got["runs"] == runs
    assert got["commits"] == {str(ROOT): trees.commit_of(ROOT)} and "load_average" in got["machine"]
