"""``benchmarks/bench_write_stall.py``: checks at a rate while a merge of a copy's segments is
built beside them; the store it copied is left as it was."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from neardup.online import Deduplicator

ROOT = Path(__file__).resolve().parents[2]


def test_bench_write_stall_merges_a_copy_beside_the_checks(tmp_path: Path) -> None:
    store = tmp_path / "store"
    texts = [f"post {k} about " + " ".join(f"w{(k * 7 + j) % 97}" for j in range(12)) for k in range(200)]  # fmt: skip
    with Deduplicator.open(store, candidates="lsh") as d:
        for a in (0, 100):  # two flushes: two segments to merge
            d.load([{"id": f"d{k}", "text": texts[k]} for k in range(a, a + 100)])
            d.flush()
    before = sorted(p.name for p in store.iterdir())
    out = tmp_path / "stall.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_write_stall.py"), "--store", str(store),
           "--work", str(tmp_path), "--rate", "50", "--before", "0.5", "--after", "0.5",
           "--merge", "2", "--warm-up", "20", "--rounds", "1", "--out", str(out)]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    res = json.loads(out.read_text())
    (row,) = next(iter(res["runs"].values()))
    assert row["merge_segments"] == 2 and row["merge_rows"] == 200 and row["merge_bytes"] > 0
    assert row["before"]["checks"] > 0 and row["after"]["checks"] > 0
    assert row["before"]["log_syncs"] > 0  # every check-and-insert synced the log
    assert row["before"]["max_ms"] >= row["before"]["p99_ms"] >= row["before"]["p50_ms"] > 0
    assert "merge s" in run.stdout
    assert sorted(p.name for p in store.iterdir()) == before  # the copy was merged, not the store
    with Deduplicator.open(store) as d:
        assert len(d) == 200
