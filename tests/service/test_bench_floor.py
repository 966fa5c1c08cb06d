"""``benchmarks/bench_floor.py`` and the durable no-op app it loads: every answer comes after an
fdatasync that started after its request's bytes were written, and requests share syncs."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _noop_app(log: Path, monkeypatch):
    monkeypatch.setenv("NOOP_LOG", str(log))
    spec = importlib.util.spec_from_file_location(
        "noop_app_durable", ROOT / "benchmarks" / "noop_app.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_durable_noop_answers_after_a_sync_that_covers_its_write(tmp_path, monkeypatch):
    events: list[tuple[str, float, float]] = []  # (what, start, end)
    lock = threading.Lock()
    real = os.fdatasync

    def timed_sync(fd: int) -> None:
        t = time.perf_counter()
        time.sleep(0.004)  # a slow disk: requests pile up behind each sync
        real(fd)
        with lock:
            events.append(("sync", t, time.perf_counter()))

    mod = _noop_app(tmp_path / "floor.log", monkeypatch)
    monkeypatch.setattr(os, "fdatasync", timed_sync)
    written: dict[int, float] = {}
    answered: dict[int, float] = {}

    async def one(i: int) -> None:
        await asyncio.sleep(0.0005 * i)
        body = json.dumps({"id": f"d{i}", "text": "x" * 50}).encode()
        sent: list[dict] = []

        async def receive() -> dict:
            written[i] = time.perf_counter()  # (the app writes right after its last receive)
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(msg: dict) -> None:
            sent.append(msg)

        await mod.app({"type": "http"}, receive, send)
        answered[i] = time.perf_counter()
        assert sent[0]["status"] == 200

    async def main() -> None:
        await asyncio.gather(*(one(i) for i in range(60)))

    asyncio.run(main())
    syncs = [(s, e) for _, s, e in events]
    assert 1 < len(syncs) < 60  # grouped: fewer syncs than requests
    for i in range(60):
        assert any(s >= written[i] and e <= answered[i] for s, e in syncs), i
    assert (tmp_path / "floor.log").stat().st_size >= 60 * 40


def test_bench_floor_runs_both_floors(tmp_path):
    out = tmp_path / "floor.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_floor.py"), "--rates", "50",
           "--duration", "1", "--warmup", "0.5", "--dir", str(tmp_path), "--out", str(out)]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    res = json.loads(out.read_text())
    kinds = res["rates"]["50"]
    assert set(kinds) == {"http", "durable"}
    for r in kinds.values():
        assert r["requests"] > 0 and r["latency_from_schedule"]["p99_ms"] > 0
    assert "durable" in run.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["floor.json"]  # its log file removed
