"""Store benchmark: seed N fingerprints, restart time, batch check-and-add throughput, latency.

In-process (no HTTP): measures the library the service wraps. Prints a table and writes
``benchmarks/results/store.json``. The writer thread is instrumented: wall and CPU time
(``time.thread_time``) of each stage it runs (index search, id lookup, within-group pairs,
log append + fsync, memtable, SQLite where it is on the writer's path), per 1,000 documents in
the batch run and per call in the single-document run.

    .venv/bin/python benchmarks/bench_store.py --n 2000000 --verify 0
    .venv/bin/python benchmarks/bench_store.py --data DIR --reuse   # an already seeded store
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    words = rng.integers(0, 200_000, (n, 25))
    return [" ".join(f"w{x}" for x in row) for row in words.tolist()]


class WriterProfile:
    """Wall and CPU time of named methods, counted only on the writer thread."""

    def __init__(self) -> None:
        self.wall: collections.Counter[str] = collections.Counter()
        self.cpu: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()

    def wrap(self, obj: Any, name: str, label: str) -> None:
        f = getattr(obj, name, None)
        if f is None:
            return

        def timed(*a: Any, **k: Any) -> Any:
            if threading.current_thread().name != "neardup-writer":
                return f(*a, **k)
            t, c = time.perf_counter(), time.thread_time()
            try:
                return f(*a, **k)
            finally:
                self.wall[label] += time.perf_counter() - t
                self.cpu[label] += time.thread_time() - c
                self.calls[label] += 1

        setattr(obj, name, timed)

    def instrument(self, d: Any) -> None:
        st = d.store
        self.wrap(d._writer, "_apply_group", "group total")
        self.wrap(st, "search", "index search")
        self.wrap(st, "lookup_ids", "id lookup")
        self.wrap(st, "fetch", "row fetch")
        self.wrap(d._decider, "intra_pairs", "within-group pairs")
        self.wrap(st.wal, "append", "log append+fsync")
        self.wrap(st.wal, "commit", "log append+fsync")
        self.wrap(st.meta, "apply", "SQLite apply")
        self.wrap(st.memtable, "add", "memtable add")

    def report(self, per: float) -> dict[str, dict[str, float]]:
        return {
            k: {
                "wall_ms": self.wall[k] * 1000 / per,
                "cpu_ms": self.cpu[k] * 1000 / per,
                "calls": self.calls[k],
            }
            for k in sorted(self.wall, key=lambda x: -self.wall[x])
        }

    def clear(self) -> None:
        self.wall.clear()
        self.cpu.clear()
        self.calls.clear()


def main(argv: list[str] | None = None) -> int:
    from neardup.online.deduplicator import Deduplicator

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2_000_000, help="fingerprints seeded in the window")
    p.add_argument("--chunk", type=int, default=1_000_000, help="bulk_load chunk size")
    p.add_argument("--batch", type=int, default=1000, help="documents per check_and_add call")
    p.add_argument("--batches", type=int, default=40, help="batches in the throughput run")
    p.add_argument("--threads", type=int, default=4, help="concurrent callers")
    p.add_argument("--singles", type=int, default=500, help="single-document calls for latency")
    p.add_argument("--verify", type=int, default=0, help="1 = default Verifier (radius 12)")
    p.add_argument("--data", type=Path, default=None, help="data directory (default: a temp dir)")
    p.add_argument("--reuse", action="store_true", help="--data is already seeded: skip seeding")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "store.json")
    a = p.parse_args(argv)

    data = a.data or Path(tempfile.mkdtemp(prefix="neardup-bench-"))
    res: dict[str, Any] = {
        "n": a.n,
        "batch": a.batch,
        "threads": a.threads,
        "verify": bool(a.verify),
    }
    kw: dict[str, Any] = {"retention": "48h", "verify": bool(a.verify)}
    rng = np.random.default_rng(0)
    now = time.time()
    try:
        t0 = time.perf_counter()
        with Deduplicator(data, **kw) if not a.reuse else contextlib.nullcontext() as d:
            done = 0 if not a.reuse else a.n
            while done < a.n:
                k = min(a.chunk, a.n - done)
                fps = rng.integers(0, 2**64, k, dtype=np.uint64)
                d.bulk_load(
                    [f"s{i}" for i in range(done, done + k)],
                    fps,
                    now - rng.uniform(60, 47 * 3600, k),
                )
                done += k
                print(f"seeded {done:,} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
        res["seed_s"] = time.perf_counter() - t0
        res["disk_bytes"] = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())

        t0 = time.perf_counter()
        d = Deduplicator(data, **kw)
        res["open_s"] = time.perf_counter() - t0
        res["rss_after_open_mib"] = rss_mib()
        st = d.stats()
        res["segments"], res["partitions"] = st["segments"], st["partitions"]

        run = time.time_ns() % 10**9  # fresh ids and texts when a store is reused
        corpus = texts(a.batch * a.batches + a.singles, seed=run)
        batches = [
            [{"id": f"b{run}-{j}", "text": corpus[j]} for j in range(i, i + a.batch)]
            for i in range(0, a.batch * a.batches, a.batch)
        ]
        d.check_and_add(batches[0])  # warm-up (numba, caches)
        prof = WriterProfile()
        prof.instrument(d)
        todo = list(batches[1:])
        lock = threading.Lock()

        def worker() -> None:
            while True:
                with lock:
                    if not todo:
                        return
                    b = todo.pop()
                d.check_and_add(b)

        t0 = time.perf_counter()
        ths = [threading.Thread(target=worker) for _ in range(a.threads)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        dt = time.perf_counter() - t0
        res["batch_docs_per_s"] = a.batch * (a.batches - 1) / dt
        res["writer_per_1000_docs"] = prof.report(a.batch * (a.batches - 1) / 1000)
        prof.clear()

        lat = []
        base = a.batch * a.batches
        for j in range(a.singles):
            t1 = time.perf_counter()
            d.check_and_add({"id": f"one{run}-{j}", "text": corpus[base + j]})
            lat.append((time.perf_counter() - t1) * 1000)
        res["single_p50_ms"] = float(np.percentile(lat, 50))
        res["single_p99_ms"] = float(np.percentile(lat, 99))
        res["writer_per_single"] = prof.report(a.singles)
        res["rss_end_mib"] = rss_mib()
        res["documents"] = len(d)
        t0 = time.perf_counter()
        d.close()
        res["close_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        Deduplicator(data, **kw).close()
        res["reopen_after_writes_s"] = time.perf_counter() - t0
    finally:
        if a.data is None:
            shutil.rmtree(data, ignore_errors=True)

    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1))
    w = max(len(k) for k in res)
    for k, v in res.items():
        if isinstance(v, dict):
            print(f"{k}  (wall ms / cpu ms / calls)")
            for stage, m in v.items():
                print(f"    {stage:<22} {m['wall_ms']:8.3f} {m['cpu_ms']:8.3f} {m['calls']:6d}")
            continue
        print(f"{k:<{w}}  {v:,.3f}" if isinstance(v, float) else f"{k:<{w}}  {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
