"""``benchmarks/bench_merge.py`` runs in both its modes: in process (the merge against the
reference) and across checkouts (``--tree``: each in a child process, its section checked
against the reference there), writing what it measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_merge.py"
SMALL = ["--rows", "300", "--segments", "9", "--bands", "5"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(SCRIPT), *SMALL, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)


def test_the_merge_benchmark_times_the_merge_against_the_reference(tmp_path: Path) -> None:
    out = tmp_path / "merge.json"
    run = _run("--out", str(out))
    assert run.returncode == 0, run.stderr
    doc = json.loads(out.read_text())
    assert doc["same_section"] is True and doc["segments"] == 9
    assert doc["entries"] > 0 and doc["merge_mapped"]["cpu_s"] >= 0


def test_the_merge_benchmark_compares_checkouts_in_child_processes(tmp_path: Path) -> None:
    out = tmp_path / "trees.json"
    run = _run("--tree", str(ROOT), "--rounds", "2", "--out", str(out))
    assert run.returncode == 0, run.stderr
    doc = json.loads(out.read_text())
    ((tree, runs),) = doc["runs"].items()
    assert Path(tree) == ROOT and len(runs) == 2
    assert all(r["same_section"] and r["neardup"] == str(ROOT / "neardup") for r in runs)
    assert doc["medians"][tree]["wall_s"] >= 0
    assert "every section equal to the reference's: True" in run.stdout
