#!/usr/bin/env python3
"""A window seeded in bulk, then used: ``neardup store load`` of ``--n`` generated short posts
(keep-first, its own process: wall, CPU, peak RSS), the store's bytes per document on disk by
kind, then in this process: the time to open it, ``check_and_add`` in batches of 1,000 fresh
posts (documents/s, CPU per document) and single ``check`` latency (p50 / p99). In process, not
over HTTP: the store's own cost (``bench_service.py`` / ``bench_window.py`` add the service).
Writes ``benchmarks/results/bench_store_scale_<n>.json``.

    python benchmarks/bench_store_scale.py --n 4000000 --work /tmp/nd-scale   # ~4 min, ~9 GiB RSS
    python benchmarks/bench_store_scale.py --n 1000000
    (--n 10000000 peaks near 22 GiB: the edge of a 24 GiB machine)

The load is one ``dedup_into`` call over the whole corpus (the keep-first seed's fast path): its
memory grows with ``--n`` (signatures and band keys of every document at once).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
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


def _disk(store: Path, stored: int) -> dict[str, Any]:
    kinds = {"segments": 0, "segment_indexes": 0, "sqlite": 0, "log": 0, "other": 0}
    for f in store.iterdir():
        size = f.stat().st_size
        if f.name.endswith(".nds"):
            kinds["segments"] += size
        elif f.name.endswith(".hidx"):
            kinds["segment_indexes"] += size
        elif f.name.startswith("meta.sqlite3"):
            kinds["sqlite"] += size
        elif f.name.startswith("wal-"):
            kinds["log"] += size
        else:
            kinds["other"] += size
    total = sum(kinds.values())
    per = {f"{k}_bytes_per_doc": round(v / max(stored, 1), 1) for k, v in kinds.items()}
    return {"bytes": total, "bytes_per_doc": round(total / max(stored, 1), 1), **per}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="generated short posts to load")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--batches", type=int, default=20, help="check_and_add batches of 1,000")
    ap.add_argument("--singles", type=int, default=2000, help="single checks timed")
    ap.add_argument("--work", type=Path, default=None, help="keeps the corpus between runs")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)

    import orjson

    from neardup.online import Deduplicator

    work = a.work or Path(tempfile.mkdtemp(prefix="nd-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / f"short-{a.n}-{a.seed}.jsonl"
    if not corpus.exists():
        write_corpus(corpus, "short", a.n, a.seed, 0.1)
    fresh_n = 1000 * a.batches + a.singles
    fresh = work / f"fresh-{fresh_n}-{a.seed + 1000}.jsonl"
    if not fresh.exists():
        write_corpus(fresh, "short", fresh_n, a.seed + 1000, 0.1)
    data = work / "data"
    subprocess.run(["rm", "-rf", str(data)], check=True)

    w = time.perf_counter()
    cmd = [sys.executable, "-m", "neardup", "store", "load", str(data), str(corpus), "--json", "-q"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None
    stdout = proc.stdout.read()
    _, status, after = os.wait4(proc.pid, 0)  # this child's own usage (not every child's max)
    proc.returncode = os.waitstatus_to_exitcode(status)
    load_wall = time.perf_counter() - w
    if proc.returncode:
        raise SystemExit(f"neardup store load failed (exit {proc.returncode})")
    load = json.loads(stdout)
    load_cpu = after.ru_utime + after.ru_stime
    store = data / "namespaces" / "default"
    stored = int(load["store_documents_after"])
    disk = _disk(store, stored)
    print(f"store load   {a.n:,} posts -> {stored:,} stored in {load_wall:.1f} s "
          f"({a.n / load_wall:,.0f} docs/s, CPU {1e6 * load_cpu / a.n:.1f} µs/doc, peak RSS "
          f"{after.ru_maxrss / 2**20:.1f} GiB; merge {load['compact_s']:.1f} s)")  # fmt: skip
    print(f"disk         {disk['bytes'] / 2**30:.2f} GiB, {disk['bytes_per_doc']:.0f} B/doc "
          f"(segments {disk['segments_bytes_per_doc']:.0f}, indexes "
          f"{disk['segment_indexes_bytes_per_doc']:.0f}, SQLite {disk['sqlite_bytes_per_doc']:.0f})")  # fmt: skip

    docs = [orjson.loads(x) for x in fresh.read_bytes().splitlines()]
    t = time.perf_counter()
    d = Deduplicator.open(store)
    open_s = time.perf_counter() - t
    c, w = _cpu(), time.perf_counter()
    dup = 0
    for b in range(a.batches):
        part = docs[1000 * b : 1000 * (b + 1)]
        got = d.check_and_add([{"id": f"fresh-{x['id']}", "text": x["text"]} for x in part])
        dup += sum(x.duplicate for x in got)
    bw, bc = time.perf_counter() - w, _cpu() - c
    st = d.stats()
    lat = []
    for x in docs[1000 * a.batches :]:
        t = time.perf_counter()
        d.check({"id": "probe", "text": x["text"]})
        lat.append(1e3 * (time.perf_counter() - t))
    d.close()
    lat.sort()
    n_b = 1000 * a.batches
    probe = {
        "open_s": round(open_s, 2),
        "check_and_add_docs_per_s": round(n_b / bw),
        "check_and_add_cpu_us_per_doc": round(1e6 * bc / n_b, 1),
        "check_and_add_duplicates": dup,
        # band candidates tested on their stored sketches / let by to be read (per document)
        "sketch_checked_rows_per_doc": round(st["sketch_checked_rows"] / n_b, 1),
        "sketch_passed_rows_per_doc": round(st["sketch_passed_rows"] / n_b, 2),
        "single_check_p50_ms": round(lat[len(lat) // 2], 3),
        "single_check_p99_ms": round(lat[min(len(lat) - 1, int(0.99 * len(lat)))], 3),
        "probe_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    print(f"open         {open_s:.1f} s")
    print(f"check_and_add {probe['check_and_add_docs_per_s']:,} docs/s, "
          f"{probe['check_and_add_cpu_us_per_doc']} µs CPU/doc (batches of 1,000, in process)")  # fmt: skip
    print(f"sketches     {probe['sketch_checked_rows_per_doc']} band candidates a document "
          f"tested on their sketches, {probe['sketch_passed_rows_per_doc']} read")  # fmt: skip
    print(f"check        p50 {probe['single_check_p50_ms']} ms, p99 {probe['single_check_p99_ms']} ms (single, in process)")  # fmt: skip
    doc = {
        "benchmark": "store_scale",
        "command": "python benchmarks/bench_store_scale.py " + " ".join(argv or sys.argv[1:]),
        "machine": {**machine(), "load": list(os.getloadavg())},
        "n": a.n,
        "load": {
            **load,
            "wall_s": round(load_wall, 2),
            "cpu_s": round(load_cpu, 2),
            "cpu_us_per_doc": round(1e6 * load_cpu / a.n, 1),
            "peak_rss_mib": round(after.ru_maxrss / 1024),
        },
        "disk": disk,
        "probe": probe,
    }
    dest = a.out or ROOT / "benchmarks" / "results" / f"bench_store_scale_{a.n}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {dest}")
    if a.work is None:
        subprocess.run(["rm", "-rf", str(work)], check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
