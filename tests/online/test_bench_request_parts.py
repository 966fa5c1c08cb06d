"""``benchmarks/bench_request_parts.py`` runs and times every stage it names: a stage renamed in
the library fails it (its wrapper cannot be installed), and a stage that no longer runs on the
request path shows as zero."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_parts_benchmark_times_every_stage_of_a_single_request(tmp_path: Path) -> None:
    out = tmp_path / "parts.json"
    script = ROOT / "benchmarks" / "bench_request_parts.py"
    cmd = [sys.executable, str(script), "--requests", "20", "--rounds", "1", "--out", str(out)]
    run = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    med = next(iter(json.loads(out.read_text())["medians"].values()))
    assert med["cpu_us"] > 0
    stages = med["stages_us"]
    # every stage of a single check-and-insert ran (the applier's transactions may land
    # after the last request, so SQLite's line can be zero on a run this short)
    ran = ("writer group", "decide", "band look-up", "SimHash look-up", "id look-up",
           "log append + memtable", "prepare", "log fsync")  # fmt: skip
    for name in ran:
        assert stages[name] > 0, (name, stages)
    assert stages["decide"] <= stages["writer group"]
    # the parts that also run on helper threads are timed too (zero or more on a fresh store)
    for name in ("segment SimHash search, every thread", "band section kernel, every thread"):
        assert stages[name] >= 0, (name, stages)
    assert "band look-up" in run.stdout


def test_the_parts_benchmark_says_when_it_timed_duplicates(tmp_path: Path) -> None:
    """Texts a store already holds are decided as duplicates, which cost other stages than new
    documents: the table reports the share, notes it when most were, and ``--skip`` leaves
    the first texts of ``--texts-file`` out (refused without one)."""
    script = ROOT / "benchmarks" / "bench_request_parts.py"
    texts = tmp_path / "texts.jsonl"
    # the warm-up's 300 + 1 texts stored first, then the 20 timed ones: the same text, so
    # every timed document is a duplicate of a stored one; the 5 skipped lines are not read
    lines = ['{"text": "not read"}'] * 5 + ['{"text": "the same post sent again and again"}'] * 321
    texts.write_text("\n".join(lines) + "\n")
    out = tmp_path / "parts.json"
    cmd = [sys.executable, str(script), "--requests", "20", "--rounds", "1", "--out", str(out)]
    cmd += ["--texts-file", str(texts), "--skip", "5"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr
    (got,) = next(iter(json.loads(out.read_text())["runs"].values()))
    assert got["duplicate_share"] == 1.0
    assert "found duplicates" in run.stdout
    assert "--skip them" in run.stderr
    # one line short once 6 are skipped: refused before anything is sent
    short = subprocess.run(
        [*cmd[:-1], "6"], capture_output=True, text=True, timeout=600, check=False
    )
    assert short.returncode != 0
    assert "after the first 6" in short.stderr
    bad = subprocess.run(
        [sys.executable, str(script), "--skip", "5"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
    assert "--skip takes a count of --texts-file's texts" in bad.stderr
