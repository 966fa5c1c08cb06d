"""Restart time, memory and speed of a store whose segment indexes are compressed
(``compress_tables``: the Elias–Fano code, the index's default codec).

Builds one store of ``--n`` rows (random 64-bit fingerprints, as bench_index.py's ``random``,
spread over ``--partitions`` one-day partitions) with :meth:`neardup.store.Store.bulk_add`,
copies it, and converts the copy with ``compress_tables=True`` (its segment indexes are
rebuilt compressed: the conversion time is reported). Then each store is reopened
``--opens`` times, each in a fresh process:

* open: wall seconds of ``Store(...)`` (segments and their ``.hidx`` side files mmapped and
  checked; the page cache is warm, as on a restart of a running machine);
* RSS after the open and after the searches below: total, anonymous, file-backed
  (``/proc/self/status``: the mapped side files count as file-backed once touched);
* the side files' bytes;
* searches as the online path makes them: groups of 32 queries (one thread, below the store's
  parallel threshold) in thread CPU time, and single-query p50/p99 in wall and in thread CPU
  time (on a shared machine the wall p99 is mostly preemption); queries are
  ``--queries`` planted near-duplicates (distance 0..k) and as many random ones;
* that both stores return the same (query, row id, distance) triples.

The report also has the largest RSS of any child (``peak_child_rss_mib``: the build) and, from
the measured side-file bytes per row, what a ``--window`` of rows would take.

``--segment-rows N`` instead builds only one segment index of N random rows as the store builds
a sealed segment's side file (``neardup.store.memindex.build_index(compress=True)``, saved as
the store saves it; ``--codec blocks`` for the paper's block code) and reports its bytes per
row, plan and peak RSS: the size of the segments of a window too large to build as a store
here (a 50 M two-day window of one-day partitions is two segments of 25 M rows).

Run::

    nice -n 5 .venv/bin/python benchmarks/bench_store_compressed.py --n 2e6
    nice -n 5 .venv/bin/python benchmarks/bench_store_compressed.py --n 1e7 \
        --out benchmarks/results/bench_store_compressed_10m.json
    nice -n 5 .venv/bin/python benchmarks/bench_store_compressed.py --segment-rows 2.5e7 \
        --out benchmarks/results/bench_store_compressed_seg25m.json
    .venv/bin/python benchmarks/bench_store_compressed.py --n 1e5 --opens 1   # smoke test

Prints a table and writes ``benchmarks/results/bench_store_compressed.json`` (with a
``machine`` key).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from bench_index import make_data, make_queries  # noqa: E402

from neardup.store import Store, StoreSettings  # noqa: E402

DAY = 86400.0
K = 3


def status_kib() -> dict[str, int]:
    """VmRSS / RssAnon / RssFile of this process in KiB."""
    out: dict[str, int] = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, val = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(val.split()[0])
    return out


def open_store(path: str, compress: bool | None) -> Store:
    return Store(
        path, StoreSettings(partition_seconds=DAY, compress_tables=compress), bits=64, radius=K
    )


def child_build(path: str, n: int, partitions: int) -> dict[str, Any]:
    fps = make_data("random", n)
    times = (np.arange(n) % partitions).astype(np.float64) * DAY + 1.0
    t0 = time.perf_counter()
    st = open_store(path, False)
    st.bulk_add([f"d{i}" for i in range(n)], fps, times)
    st.close()
    return {"build_s": time.perf_counter() - t0}


def child_convert(path: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    st = open_store(path, True)
    st.close()
    return {"convert_s": time.perf_counter() - t0}


def child_segment(path: str, n: int, codec: str) -> dict[str, Any]:
    from neardup.index.scan import BruteIndex
    from neardup.store.memindex import build_index

    fps = make_data("random", n)
    t0 = time.perf_counter()
    fast = build_index(
        fps, np.arange(n, dtype=np.int64), bits=64, max_distance=K, compress=True, codec=codec
    )
    build_s = time.perf_counter() - t0
    if isinstance(fast, BruteIndex):
        raise SystemExit(f"{n} rows: the store would search this segment by brute force")
    idx = fast.index
    idx.save(path)
    side = os.path.getsize(path)
    return {
        "rows": n,
        "compressed": bool(idx.compressed),
        "codec": idx.codec,
        "plan": idx.plan.name,
        "n_tables": len(idx.plan.tables),
        "build_s": build_s,
        "side_file_bytes": side,
        "side_file_bytes_per_row": side / n,
        "nbytes_per_row": idx.nbytes / n,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def child_open(path: str, n: int, nq: int, single: int) -> dict[str, Any]:
    import neardup.index.compressed  # noqa: F401  (imports and kernel cache: not the store's)
    from neardup.index import HammingIndex

    warm = HammingIndex(max_distance=K, expected_size=1 << 16, compress=True)
    warm.add(np.arange(1 << 15, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    warm.search(np.zeros(2, np.uint64))
    before = status_kib()
    t0 = time.perf_counter()
    st = open_store(path, None)
    open_s = time.perf_counter() - t0
    after_open = status_kib()
    fps = make_data("random", n)
    q = make_queries(fps, nq, K)
    del fps
    st.search(q[:32], K)  # compile / warm the store's search path
    digest = hashlib.sha256()
    t1 = time.thread_time()
    for s in range(0, len(q), 32):
        lims, ids, ds = st.search(q[s : s + 32], K)
        digest.update(np.diff(lims).tobytes() + ids.tobytes() + ds.tobytes())
    batch_cpu = time.thread_time() - t1
    lat, cpu = [], []
    ru0 = resource.getrusage(resource.RUSAGE_THREAD)
    for i in range(min(single, len(q))):
        t2 = time.perf_counter_ns()
        c2 = time.thread_time_ns()
        st.search(q[i : i + 1], K)
        cpu.append(time.thread_time_ns() - c2)
        lat.append(time.perf_counter_ns() - t2)
    ru1 = resource.getrusage(resource.RUSAGE_THREAD)
    lat_a = np.array(lat, dtype=np.float64) / 1e3
    cpu_a = np.array(cpu, dtype=np.float64) / 1e3
    after_search = status_kib()
    side = sum(p.stat().st_size for p in Path(path).glob("*.hidx"))
    out = {
        "compress_tables": st.compress_tables,
        "segments": len(st.segments),
        "open_s": open_s,
        "rss_before_open_mib": before["VmRSS"] / 1024,
        "rss_after_open_mib": after_open["VmRSS"] / 1024,
        "open_rss_growth_mib": (after_open["VmRSS"] - before["VmRSS"]) / 1024,
        "open_anon_growth_mib": (after_open["RssAnon"] - before["RssAnon"]) / 1024,
        "open_file_growth_mib": (after_open["RssFile"] - before["RssFile"]) / 1024,
        "rss_after_search_mib": after_search["VmRSS"] / 1024,
        "search_rss_growth_mib": (after_search["VmRSS"] - before["VmRSS"]) / 1024,
        "side_file_mib": side / 2**20,
        "side_file_bytes_per_row": side / n,
        "queries_per_s_batch32": len(q) / batch_cpu,
        "single_p50_us": float(np.percentile(lat_a, 50)),
        "single_p99_us": float(np.percentile(lat_a, 99)),
        "single_cpu_p50_us": float(np.percentile(cpu_a, 50)),
        "single_cpu_p99_us": float(np.percentile(cpu_a, 99)),
        # during the single queries: page faults and context switches of the thread
        "single_major_faults": ru1.ru_majflt - ru0.ru_majflt,
        "single_minor_faults": ru1.ru_minflt - ru0.ru_minflt,
        "single_voluntary_switches": ru1.ru_nvcsw - ru0.ru_nvcsw,
        "single_involuntary_switches": ru1.ru_nivcsw - ru0.ru_nivcsw,
        "results_sha256": digest.hexdigest(),
    }
    st.close()
    return out


def run_child(*args: str) -> dict[str, Any]:
    cp = subprocess.run(
        [sys.executable, __file__, "--child", *args], check=True, capture_output=True, text=True
    )
    return json.loads(cp.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=float, default=2e6)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--queries", type=int, default=5000, help="planted + as many random")
    ap.add_argument("--single", type=int, default=2000)
    ap.add_argument("--opens", type=int, default=2, help="fresh-process opens per store (best)")
    ap.add_argument("--window", type=float, default=5e7, help="rows of the window estimate")
    ap.add_argument(
        "--segment-rows", type=float, default=0, help="build one segment index of this size only"
    )
    ap.add_argument("--codec", default="ef", help="codec of --segment-rows (ef or blocks)")
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    ap.add_argument("--out", default=str(RESULTS / "bench_store_compressed.json"))
    ap.add_argument("--child", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        verb, path, *rest = args.child
        if verb == "build":
            res = child_build(path, int(rest[0]), int(rest[1]))
        elif verb == "convert":
            res = child_convert(path)
        elif verb == "segment":
            res = child_segment(path, int(rest[0]), rest[1])
        else:
            res = child_open(path, int(rest[0]), int(rest[1]), int(rest[2]))
        print(json.dumps(res))
        return
    n = int(args.n)
    if args.segment_rows:
        segment_only(int(args.segment_rows), args)
        return
    work = Path(args.dir or tempfile.mkdtemp(prefix="bench_store_compressed-"))
    plain, comp = work / "plain", work / "compressed"
    for p in (plain, comp):
        shutil.rmtree(p, ignore_errors=True)
    report: dict[str, Any] = {
        "n": n,
        "k": K,
        "partitions": args.partitions,
        "machine": _machine(),
        "command": " ".join(sys.argv),
    }
    try:
        report["build"] = run_child("build", str(plain), str(n), str(args.partitions))
        shutil.copytree(plain, comp)
        report["convert"] = run_child("convert", str(comp))
        runs: dict[str, list[dict[str, Any]]] = {"plain": [], "compressed": []}
        for _ in range(args.opens):
            for name, p in (("plain", plain), ("compressed", comp)):
                runs[name].append(
                    run_child("open", str(p), str(n), str(args.queries), str(args.single))
                )
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    best = {}
    for name, rs in runs.items():
        b = dict(min(rs, key=lambda r: r["open_s"]))
        b["queries_per_s_batch32"] = max(r["queries_per_s_batch32"] for r in rs)
        for key in ("single_p50_us", "single_p99_us", "single_cpu_p50_us", "single_cpu_p99_us"):
            b[key] = min(r[key] for r in rs)
        best[name] = b
    same = len({r["results_sha256"] for rs in runs.values() for r in rs}) == 1
    report.update(runs=runs, best=best, same_results=same)
    report["peak_child_rss_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    report["window_rows"] = args.window
    report["window_side_files_gb"] = {
        name: b["side_file_bytes_per_row"] * args.window / 1e9 for name, b in best.items()
    }
    report["machine"]["load_avg_at_end"] = os.getloadavg()
    print(f"N = {n:,} rows, {args.partitions} partitions, k = {K}; load {os.getloadavg()}")
    print(f"  build (plain) {report['build']['build_s']:.1f} s; convert to compressed "
          f"{report['convert']['convert_s']:.1f} s")  # fmt: skip
    print(
        f"  {'store':>10} {'segs':>4} {'open s':>7} {'.hidx MiB':>9} {'RSS MiB':>8}"
        f" {'+open':>7} {'anon':>6} {'file':>6} {'+search':>8} {'q/s (32)':>9}"
        f" {'p50 us':>7} {'p99 us':>7} {'cpu p50':>7} {'cpu p99':>7}"
    )
    for name, b in best.items():
        print(
            f"  {name:>10} {b['segments']:>4} {b['open_s']:>7.2f} {b['side_file_mib']:>9.1f}"
            f" {b['rss_after_open_mib']:>8.0f} {b['open_rss_growth_mib']:>7.0f}"
            f" {b['open_anon_growth_mib']:>6.0f} {b['open_file_growth_mib']:>6.0f}"
            f" {b['search_rss_growth_mib']:>8.0f} {b['queries_per_s_batch32']:>9.0f}"
            f" {b['single_p50_us']:>7.1f} {b['single_p99_us']:>7.1f}"
            f" {b['single_cpu_p50_us']:>7.1f} {b['single_cpu_p99_us']:>7.1f}"
        )
    print(f"  same results: {same}; peak child RSS {report['peak_child_rss_mib']:.0f} MiB")
    for name, gb in report["window_side_files_gb"].items():
        print(
            f"  {args.window:,.0f}-row window at this N's side-file bytes/row, {name}: {gb:.2f} GB"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")


def _machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "cpus": os.cpu_count(),
        "load_avg_at_start": os.getloadavg(),
    }


def segment_only(n: int, args: argparse.Namespace) -> None:
    """``--segment-rows``: one segment index of ``n`` rows, built and saved as the store does."""
    work = Path(args.dir or tempfile.mkdtemp(prefix="bench_store_compressed-"))
    report: dict[str, Any] = {
        "segment_rows": n,
        "k": K,
        "machine": _machine(),
        "command": " ".join(sys.argv),
    }
    try:
        work.mkdir(parents=True, exist_ok=True)
        seg = run_child("segment", str(work / "segment.hidx"), str(n), args.codec)
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    report["segment"] = seg
    per_window = args.window / n
    report["window_rows"] = args.window
    report["window_side_files_gb"] = seg["side_file_bytes"] * per_window / 1e9
    report["machine"]["load_avg_at_end"] = os.getloadavg()
    print(f"one segment index of {n:,} rows, k = {K}; load {os.getloadavg()}")
    print(
        f"  {seg['plan']}, codec {seg['codec']}: {seg['side_file_bytes_per_row']:.2f} B/row on disk"
        f" ({seg['nbytes_per_row']:.2f} in memory), built in {seg['build_s']:.1f} s,"
        f" peak RSS {seg['peak_rss_mib']:.0f} MiB"
    )
    print(
        f"  {args.window:,.0f} rows as {per_window:g} such segments:"
        f" {report['window_side_files_gb']:.2f} GB of side files"
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
