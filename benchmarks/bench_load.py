#!/usr/bin/env python3
"""Seeding a store with texts in bulk: ``Deduplicator.load`` (stored as they are, nothing
decided), ``neardup.incremental.dedup_into`` over an empty store (the keep-first bulk seed: the
batch rule over each chunk against what is stored, the kept ones loaded), and
``check_and_add`` in batches of 1,000 (one by one, the online path), on the same generated
short posts; and ``neardup store load`` (files to store in its own process, start-up included;
keep-first, without and with ``--time-field``). Prints documents/s and CPU per document of each, and whether the keep-first seed
kept the same ids as ``check_and_add``; writes ``benchmarks/results/bench_load.json``.

    python benchmarks/bench_load.py                      # 1 M posts (check_and_add: the first 200 k)
    python benchmarks/bench_load.py --n 200000 --online 50000

``seed`` decides ``--chunk`` documents at a time against what the earlier chunks stored (a
window seeded as it arrives); ``seed (one call)`` hands all of them to one ``dedup_into`` (one
batch run over the corpus, then the loads), what a seed that fits in memory should do.

The store is the default ``lsh`` mode (texts, SimHash fingerprints, MinHash band keys). On this
2-core box the fingerprints and signatures use both cores (numba threads); SQLite's inserts and
the segment writes are one thread, so a bigger machine speeds up the first part only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_dedup import machine, write_corpus  # noqa: E402


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="generated short posts")
    ap.add_argument("--online", type=int, default=200_000, help="of them through check_and_add")
    ap.add_argument("--chunk", type=int, default=100_000, help="documents per load / seed call")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_load.json")
    a = ap.parse_args(argv)

    import orjson

    from neardup.incremental import dedup_into
    from neardup.online import Deduplicator

    work = a.work or Path(tempfile.mkdtemp(prefix="nd-load-"))
    work.mkdir(parents=True, exist_ok=True)
    src = work / f"short-{a.n}-{a.seed}.jsonl"
    if not src.exists():
        write_corpus(src, "short", a.n, a.seed, 0.1)
    docs = [orjson.loads(x) for x in src.read_bytes().splitlines()]
    ids = [d["id"] for d in docs]
    texts = [d["text"] for d in docs]
    rows: list[dict[str, Any]] = []

    def run(name: str, n: int, fn: Any) -> Any:
        shutil.rmtree(work / name, ignore_errors=True)
        with Deduplicator.open(work / name) as d:
            d.check({"id": "warm", "text": "load the kernels before the clock starts"})
            w, c = time.perf_counter(), _cpu()
            out = fn(d)
            wall, cpu = time.perf_counter() - w, _cpu() - c
            stored = len(d)
        row = {"path": name, "documents": n, "stored": stored, "wall_s": round(wall, 2),
               "cpu_s": round(cpu, 2), "docs_per_s": round(n / wall),
               "cpu_us_per_doc": round(1e6 * cpu / n, 1)}  # fmt: skip
        rows.append(row)
        print(f"{name:24} {n:>10,} {stored:>10,} {wall:8.1f} {cpu:8.1f} {row['docs_per_s']:>10,} {row['cpu_us_per_doc']:>8}", flush=True)  # fmt: skip
        return out

    print(f"{'path':24} {'documents':>10} {'stored':>10} {'wall s':>8} {'cpu s':>8} {'docs/s':>10} {'cpu µs':>8}")  # fmt: skip

    def load(d: Any) -> None:
        for lo in range(0, a.n, a.chunk):
            d.load([{"id": ids[i], "text": texts[i]} for i in range(lo, min(a.n, lo + a.chunk))])

    run("load", a.n, load)

    def seed(d: Any, n: int) -> list[str]:
        kept: list[str] = []
        for lo in range(0, n, a.chunk):
            hi = min(n, lo + a.chunk)
            into = dedup_into(d, ids[lo:hi], texts[lo:hi])
            kept += [ids[lo + int(i)] for i in into.keep.nonzero()[0]]
        return kept

    def cli(name: str, path: Path, *flags: str) -> None:
        """``neardup store load`` in its own process: files to store, start-up included."""
        import resource
        import subprocess

        data = work / "cli-data"
        shutil.rmtree(data, ignore_errors=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        w = time.perf_counter()
        cmd = [sys.executable, "-m", "neardup", "store", "load", str(data), str(path), "--json", *flags]  # fmt: skip
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
        wall = time.perf_counter() - w
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        stats = json.loads(out.stdout)
        stored = stats["store_documents_after"]
        row = {"path": name, "documents": a.n, "stored": stored, "wall_s": round(wall, 2),
               "cpu_s": round(cpu, 2), "docs_per_s": round(a.n / wall),
               "cpu_us_per_doc": round(1e6 * cpu / a.n, 1), "peak_rss_mib": round(after.ru_maxrss / 1024)}  # fmt: skip
        rows.append(row)
        print(f"{name:24} {a.n:>10,} {stored:>10,} {wall:8.1f} {cpu:8.1f} {row['docs_per_s']:>10,} {row['cpu_us_per_doc']:>8}", flush=True)  # fmt: skip
        shutil.rmtree(data, ignore_errors=True)

    cli("store load", src)
    timed = work / f"short-{a.n}-{a.seed}-ts.jsonl"
    if not timed.exists():
        now = time.time()
        with timed.open("wb") as fh:
            for k, doc in enumerate(docs):  # arriving over the last 40 hours, in order
                fh.write(orjson.dumps({**doc, "ts": now - 40 * 3600 * (1 - k / a.n)}) + b"\n")
    cli("store load --time-field", timed, "--time-field", "ts", "--retention", "48h")
    run("seed", a.n, lambda d: seed(d, a.n))
    run("seed (one call)", a.n, lambda d: dedup_into(d, ids, texts))
    m = min(a.online, a.n)
    seed_m = run("seed (subset)", m, lambda d: seed(d, m))

    def online(d: Any) -> list[str]:
        kept: list[str] = []
        for lo in range(0, m, 1000):
            got = d.check_and_add([{"id": ids[i], "text": texts[i]} for i in range(lo, min(m, lo + 1000))])  # fmt: skip
            kept += [x.id for x in got if x.added]
        return kept

    online_m = run("check_and_add", m, online)
    same = seed_m == online_m
    diff = len(set(seed_m) ^ set(online_m))
    print(f"keep-first seed vs check_and_add on {m:,}: {len(seed_m):,} and {len(online_m):,} kept, "
          f"{'the same ids' if same else f'{diff:,} ids differ'}")  # fmt: skip
    doc = {
        "benchmark": "load",
        "command": "python benchmarks/bench_load.py " + " ".join(argv or sys.argv[1:]),
        "machine": {**machine(), "load": list(os.getloadavg())},
        "n": a.n,
        "chunk": a.chunk,
        "rows": rows,
        "subset": m,
        "seed_kept": len(seed_m),
        "check_and_add_kept": len(online_m),
        "same_kept_ids": same,
        "ids_differing": diff,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {a.out}")
    if a.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
