"""Checks against a store whose probed sections do or do not fit in memory, with the kernel's
read-ahead on, off and as the store decides (``NEARDUP_READ_AHEAD``).

    sudo .venv/bin/python benchmarks/bench_read_ahead.py --store DIR/n1000000/server/namespaces/default \
        --texts DIR/n1000000/load-latency.jsonl --limits-mb 0,800,500 --modes on,off,auto \
        --out benchmarks/results/bench_read_ahead.json

For each memory limit (MiB; 0: none) and mode: a fresh copy of ``--store`` (the page cache
dropped after the copy, so the run starts cold), opened in a child process that runs in a
memory cgroup of that limit (the limit holds the process's memory and the page cache it
reads into; cgroup v1 or v2, made and removed here), which sends ``--requests`` single
``check``s of new texts (``submit(..., inline=True)``, no HTTP) after opening. Reported per
run: the open's seconds, each check's latency (p50, p99, max, the first 100's mean), CPU per
check, what the process read from disk (``/proc/self/io``) and its major faults during the
checks, its resident file pages at the end, and what ``auto`` chose. Needs root (the
cgroup, dropping the page cache); run the store's kernels once beforehand (a first run's
compile inside a tight limit thrashes). ``--store`` is a data directory such as the 1 M
window ``bench_window.py --n 1000000 --keep`` leaves.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _status() -> dict[str, float]:
    out: dict[str, float] = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("RssAnon", "RssFile"):
                out[k + "_MiB"] = int(v.split()[0]) / 1024
    with open("/proc/self/io") as f:
        io = {k: int(v) for k, v in (line.split(":") for line in f)}
    out["read_MB"] = io["read_bytes"] / 1e6
    out["majflt"] = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
    return out


def child(args: argparse.Namespace) -> None:
    """In the cgroup: open the store, send the checks, print one JSON line."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from loadgen import file_texts

    from neardup.online import Deduplicator

    texts = file_texts(args.texts, args.offset + args.requests)
    t0 = time.perf_counter()
    d = Deduplicator.open(args.child, candidates="lsh")
    opened = time.perf_counter() - t0
    before = _status()
    lat = []
    c0 = os.times()
    for i in range(args.offset, args.offset + args.requests):
        t = time.perf_counter()
        fut, _ = d.submit("check", [{"id": f"c-{i}", "text": texts[i]}], inline=True)
        fut.result()
        lat.append(time.perf_counter() - t)
    c1 = os.times()
    after = _status()
    ms = np.asarray(lat) * 1e3
    chose = d.store._state.read_ahead  # what the store decided (the mode's answer)
    d.close()
    print(
        json.dumps(
            {
                "open_s": opened,
                "read_ahead": chose,
                "cpu_ms": (c1.user - c0.user + c1.system - c0.system) / args.requests * 1e3,
                "p50_ms": float(np.percentile(ms, 50)),
                "p99_ms": float(np.percentile(ms, 99)),
                "max_ms": float(ms.max()),
                "first100_ms": float(ms[:100].mean()),
                "read_MB_per_check": (after["read_MB"] - before["read_MB"]) / args.requests,
                "majflt_per_check": (after["majflt"] - before["majflt"]) / args.requests,
                "rss_file_MiB": after["RssFile_MiB"],
                "rss_anon_MiB": after["RssAnon_MiB"],
            }
        )
    )


def run_one(args: argparse.Namespace, limit: int, mode: str, work: Path) -> dict[str, Any]:
    store = work / "store"
    shutil.rmtree(store, ignore_errors=True)
    shutil.copytree(args.store, store)
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")
    env = {**os.environ, "NEARDUP_READ_AHEAD": mode, "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable, __file__, "--child", str(store), "--texts", str(args.texts),
        "--requests", str(args.requests), "--offset", str(args.offset),
    ]  # fmt: skip
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_drop import in_memory_cgroup

    limited = in_memory_cgroup(limit << 20, "read-ahead") if limit else contextlib.nullcontext([])
    with limited as prefix:
        out = subprocess.run([*prefix, *cmd], env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"limit {limit} MiB, {mode}: the child failed\n{out.stderr[-3000:]}")
    return {"limit_MiB": limit, "mode": mode, **json.loads(out.stdout.strip().splitlines()[-1])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, help="data directory to copy for each run")
    ap.add_argument("--texts", type=Path, required=True, help="JSONL of texts to check")
    ap.add_argument("--limits-mb", default="0,800,500", help="memory limits, MiB (0: none)")
    ap.add_argument("--modes", default="on,off,auto", help="NEARDUP_READ_AHEAD values")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--offset", type=int, default=300, help="texts skipped first")
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temp)")
    ap.add_argument("--out", type=Path, default=None, help="JSON results")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return 0
    if args.store is None:
        ap.error("--store is required")
    if os.geteuid() != 0:
        ap.error("needs root: it makes memory cgroups and drops the page cache")
    limits = [int(x) for x in args.limits_mb.split(",")]
    modes = [m.strip() for m in args.modes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="bench-read-ahead-", dir=args.work))
    rows = []
    try:
        for limit in limits:
            for mode in modes:
                r = run_one(args, limit, mode, work)
                rows.append(r)
                print(json.dumps(r), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cols = [
        "p50_ms",
        "p99_ms",
        "max_ms",
        "first100_ms",
        "cpu_ms",
        "read_MB_per_check",
        "rss_file_MiB",
    ]
    print(f"\n{'limit MiB':>9s} {'mode':>5s} {'chose':>6s} " + " ".join(f"{c:>17s}" for c in cols))
    for r in rows:
        chose = "on" if r["read_ahead"] else "off"
        print(
            f"{r['limit_MiB'] or 'none':>9} {r['mode']:>5s} {chose:>6s} "
            + " ".join(f"{r[c]:17.2f}" for c in cols)
        )
    if args.out:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from bench_dedup import machine, write_results

        params = {k: str(v) for k, v in vars(args).items() if k != "child"}
        write_results(
            args.out,
            {
                "benchmark": "read_ahead",
                "machine": machine(load_average=True),
                "params": params,
                "runs": rows,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
