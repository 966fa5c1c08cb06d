"""``benchmarks/bench_drop.py``: the retention drop on a copy of a kept store, measured alone
(here without a memory limit, which needs root)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from neardup.online import Deduplicator

ROOT = Path(__file__).resolve().parents[2]
HOUR = 3600.0


def test_bench_drop_drops_the_hours_asked_and_leaves_the_store_it_copied(tmp_path: Path) -> None:
    store = tmp_path / "store"
    now = time.time()
    times = [now - 47 * HOUR + k * 90.0 for k in range(120)]  # three hours and more
    texts = [f"post {k} about " + " ".join(f"w{(k * 7 + j) % 97}" for j in range(12)) for k in range(120)]  # fmt: skip
    with Deduplicator.open(store, retention="48h", partition_seconds=HOUR) as d:
        d.add([{"id": f"d{k}", "text": texts[k], "time": times[k]} for k in range(120)])
        d.flush()
    first = int(min(times) // HOUR)
    expected = sum(t < (first + 2) * HOUR for t in times)
    jsonl = tmp_path / "texts.jsonl"
    jsonl.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[:40]))
    before = sorted(p.name for p in store.iterdir())
    out = tmp_path / "drop.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_drop.py"), "--store", str(store),
           "--work", str(tmp_path / "work"), "--texts", str(jsonl), "--n-texts", "40",
           "--hours", "2", "--rate", "50", "--settle", "0.5", "--out", str(out)]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    res = json.loads(out.read_text())
    assert 0 < expected < 120 and res["rows_dropped"] == expected
    assert res["passes"] >= 1 and res["pass_ms"]["max"] >= res["pass_ms"]["p50"] > 0
    assert res["checks_during"]["checks"] > 0 and res["slowest_checks"]
    for s in res["slowest_checks"]:
        assert s["waited_ms"] >= 0 and 0 <= s["in_a_pass_ms"] <= s["own_ms"] + 1e-6
    assert "slowest checks" in run.stdout
    assert sorted(p.name for p in store.iterdir()) == before  # the copy changed, not the store
    with Deduplicator.open(store) as d:
        assert len(d) == 120
