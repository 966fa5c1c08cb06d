"""``benchmarks/bench_compact.py`` merges a store's largest partition with its band-key section
built whole, streamed (its rows spilled) and streamed merging twice, each run in a child
process, and finds the same segment bytes every way; the store it is given is copied, not
opened."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from neardup.online import Deduplicator

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_compact.py"


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_the_compaction_benchmark_merges_both_ways_to_the_same_bytes(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with Deduplicator.open(store, max_segments_per_partition=10) as d:
        for c in range(3):  # three segments of one partition
            d.add(
                [
                    {"id": f"{c}-{i}", "text": f"post {c} number {i} about the harbour"}
                    for i in range(200)
                ]
            )
            d.flush()
        d.delete("1-7")
        d.flush()
        assert len(d.store.segments) >= 3
    before = _files(store)
    out = tmp_path / "compact.json"
    cmd = [sys.executable, str(SCRIPT), "--store", str(store), "--rounds", "1", "--out", str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr
    doc = json.loads(out.read_text())
    assert doc["same_segment_bytes"] is True
    rows = {r["mode"]: r for r in doc["rows"]}
    assert set(rows) == {"whole", "streamed", "remerged"}
    assert rows["streamed"]["rows"] == 600 and rows["streamed"]["segments"] >= 3
    assert rows["whole"]["entries"] == rows["streamed"]["entries"] > 0
    assert "the same segment bytes (checksum) in every run: True" in run.stdout
    assert _files(store) == before


def test_the_compaction_benchmark_refuses_a_folder_that_is_not_a_store(tmp_path: Path) -> None:
    cmd = [sys.executable, str(SCRIPT), "--store", str(tmp_path), "--rounds", "1"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 2 and "no MANIFEST.json" in run.stderr
