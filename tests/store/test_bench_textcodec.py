"""``benchmarks/bench_textcodec.py``: each zstd level's cost and ratio, its dictionary trained
as a store trains one, the store's level giving the store codec's bytes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from neardup.store.textcodec import LEVEL

ROOT = Path(__file__).resolve().parents[2]


def test_bench_textcodec_measures_each_level(tmp_path: Path) -> None:
    words = [f"w{k}x{k % 7}" for k in range(300)]
    texts = [
        " ".join(words[(i * 13 + j * 7) % 300] for j in range(20 + i % 40)) for i in range(3000)
    ]
    src = tmp_path / "texts.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = tmp_path / "tc.json"
    env = {**os.environ, "NEARDUP_DEV_DATA": str(tmp_path / "no-dev")}
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_textcodec.py"), "--texts", str(src),
           "--levels", f"1,{LEVEL}", "--rounds", "1", "--out", str(out)]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "no dev corpus" in run.stderr
    res = json.loads(out.read_text())
    got = res["sets"]["texts.jsonl"]
    assert got["texts"] == 1500 and set(got["levels"]) == {"1", str(LEVEL)}
    for x in got["levels"].values():
        assert 0 < x["stored_over_given"] < 1 and x["encode_us"] > 0 and x["decode_us"] > 0
    assert res["store_level"] == LEVEL and "(the store's)" in run.stdout
