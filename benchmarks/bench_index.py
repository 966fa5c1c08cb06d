"""Benchmark neardup.HammingIndex against faiss IndexBinaryMultiHash and a NumPy brute force.

For each size N and data kind (random / clustered) it measures, each configuration in a fresh
subprocess: build time, bytes per fingerprint (RSS growth), batched queries/s (``--threads``),
single-query p50/p99, and recall vs brute force (exact set equality per query). Queries:
``--queries`` planted (a stored fingerprint with 0..k bits flipped) + ``--queries`` random.
Brute force runs on a sample of ``--truth-sample`` queries (NumPy; all N per query).
``all_pairs`` is compared with simhash-pybind's ``find_all`` at ``--allpairs-size``.

Run::

    .venv/bin/python benchmarks/bench_index.py --sizes 1e6,1e7,5e7
    .venv/bin/python benchmarks/bench_index.py --sizes 1e5 --quick   # smoke test

Peers: ``pip install -r benchmarks/requirements-index.txt``. Prints a table and writes
``benchmarks/results/index.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


# ----------------------------------------------------------------------------- data
def make_data(kind: str, n: int, seed: int = 0) -> np.ndarray:
    """``random``: uniform 64-bit. ``clustered``: like real SimHash values of a web crawl —
    2% empty pages (fingerprint 0), 30% near-duplicates (0..5 bits) of n/1000 boilerplate
    centers with Zipf-like cluster sizes, 10% sharing one 16-bit block with otherwise random
    bits (a heavy bucket in one table), the rest uniform."""
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64, n, dtype=np.uint64)
    if kind == "random":
        return fps
    n_empty, n_dup, n_heavy = n // 50, (3 * n) // 10, n // 10
    pos = rng.permutation(n)
    e, d, h = (
        pos[:n_empty],
        pos[n_empty : n_empty + n_dup],
        pos[n_empty + n_dup : n_empty + n_dup + n_heavy],
    )
    fps[e] = 0
    n_centers = max(n // 1000, 1)
    centers = rng.integers(0, 2**64, n_centers, dtype=np.uint64)
    weights = 1.0 / np.arange(1, n_centers + 1)
    owner = rng.choice(n_centers, len(d), p=weights / weights.sum())
    fps[d] = centers[owner] ^ _random_flips(rng, len(d), 5)
    fps[h] = (fps[h] & np.uint64(0xFFFF0000FFFFFFFF)) | np.uint64(0x5A5A << 32)
    return fps


def _random_flips(
    rng: np.random.Generator, n: int, max_flips: int, exact: np.ndarray | None = None
) -> np.ndarray:
    """XOR masks with ``exact[i]`` (or 0..max_flips random) distinct bits set."""
    nf = exact if exact is not None else rng.integers(0, max_flips + 1, n)
    keys = rng.random((n, 64)).argsort(axis=1)[:, :max_flips] if n * 64 <= 5e8 else None
    out = np.zeros(n, dtype=np.uint64)
    for j in range(max_flips):
        if keys is not None:
            bit = keys[:, j].astype(np.uint64)
        else:
            bit = rng.integers(0, 64, n).astype(np.uint64)
        out ^= np.where(nf > j, np.uint64(1) << bit, np.uint64(0))
    return out


def make_queries(fps: np.ndarray, nq: int, k: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    planted = fps[rng.integers(0, len(fps), nq)] ^ _random_flips(
        rng, nq, k, exact=rng.integers(0, k + 1, nq)
    )
    return np.concatenate([planted, rng.integers(0, 2**64, nq, dtype=np.uint64)])


# ----------------------------------------------------------------------------- helpers
def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def brute_truth(fps: np.ndarray, queries: np.ndarray, k: int) -> list[set[int]]:
    out = []
    for q in queries:
        out.append(set(np.flatnonzero(np.bitwise_count(fps ^ q) <= k).tolist()))
    return out


def recall(found: list[set[int]], truth: list[set[int]]) -> tuple[float, bool]:
    tot = sum(len(t) for t in truth)
    hit = sum(len(f & t) for f, t in zip(found, truth, strict=True))
    exact = all(f == t for f, t in zip(found, truth, strict=True))
    return (hit / tot if tot else 1.0), exact


def latencies(fn: Any, queries: np.ndarray) -> tuple[float, float]:
    lat = np.empty(len(queries))
    for i, q in enumerate(queries):
        t = time.perf_counter()
        fn(q)
        lat[i] = time.perf_counter() - t
    return float(np.percentile(lat, 50) * 1e6), float(np.percentile(lat, 99) * 1e6)


# ----------------------------------------------------------------------------- workers
def run_neardup(cfg: dict[str, Any]) -> dict[str, Any]:
    from neardup.index import HammingIndex

    n, k, threads = cfg["n"], cfg["k"], cfg["threads"]
    fps = make_data(cfg["kind"], n)
    q = make_queries(fps, cfg["queries"], k)
    warm = HammingIndex(max_distance=k, expected_size=1000)  # compile/load numba kernels first
    warm.add(fps[:5000])
    warm.search(q[:3000])
    warm.search_one(int(q[0]))
    del warm
    gc.collect()
    r0 = rss()
    t = time.perf_counter()
    idx = HammingIndex(max_distance=k, expected_size=n, threads=threads)
    idx.add(fps)
    build = time.perf_counter() - t
    gc.collect()
    bpf = (rss() - r0) / n
    idx.search(q[:2000])
    t = time.perf_counter()
    lims, ids, _d = idx.search(q)
    qps = len(q) / (time.perf_counter() - t)
    single = np.concatenate(
        [q[: cfg["single"] // 2], q[len(q) // 2 : len(q) // 2 + cfg["single"] // 2]]
    )
    p50, p99 = latencies(lambda x: idx.search_one(int(x)), single)
    sample = np.concatenate(
        [q[: cfg["truth"] // 2], q[len(q) // 2 : len(q) // 2 + cfg["truth"] // 2]]
    )
    sample_pos = np.concatenate(
        [np.arange(cfg["truth"] // 2), len(q) // 2 + np.arange(cfg["truth"] // 2)]
    )
    truth = brute_truth(fps, sample, k)
    found = [set(ids[lims[i] : lims[i + 1]].tolist()) for i in sample_pos]
    rec, exact = recall(found, truth)
    # incremental: 100-item batches on top of the built index (the online service's pattern)
    extra = make_data("random", 50_000, seed=11)
    t = time.perf_counter()
    for s in range(0, len(extra), 100):
        idx.add(extra[s : s + 100])
    add_rate = len(extra) / (time.perf_counter() - t)
    seen = all(idx.search_one(int(x), 0) for x in extra[-100:])
    # persistence: save, then open memory-mapped (with and without checksum verification)
    load = {}
    if cfg.get("save_dir"):
        path = Path(cfg["save_dir"]) / f"bench-{os.getpid()}.idx"
        try:
            idx.optimize()
            t = time.perf_counter()
            idx.save(path)
            load["save_s"] = time.perf_counter() - t
            load["file_bytes_per_fp"] = path.stat().st_size / len(idx)
            for verify in (True, False):
                t = time.perf_counter()
                ro = HammingIndex.load(path, mmap=True, verify=verify)
                ro.search_one(int(q[0]))
                load[f"load_mmap_{'verified' if verify else 'unverified'}_s"] = (
                    time.perf_counter() - t
                )
                del ro
        finally:
            path.unlink(missing_ok=True)
    return {
        **load,
        "incremental_add_items_per_s": add_rate,
        "incremental_adds_visible": bool(seen),
        "system": "neardup",
        "config": idx.plan.name,
        "build_s": build,
        "bytes_per_fp": bpf,
        "index_nbytes_per_fp": idx.nbytes / n,
        "batched_qps": qps,
        "single_p50_us": p50,
        "single_p99_us": p99,
        "recall": rec,
        "exact_match_vs_brute": exact,
        "results": len(ids),
    }


def run_faiss(cfg: dict[str, Any]) -> dict[str, Any]:
    import faiss

    n, k = cfg["n"], cfg["k"]
    faiss.omp_set_num_threads(cfg["threads"])
    fps = make_data(cfg["kind"], n)
    q = make_queries(fps, cfg["queries"], k)
    codes = fps.byteswap().view(np.uint8).reshape(n, 8)  # big-endian bytes: bit order is irrelevant
    qcodes = q.byteswap().view(np.uint8).reshape(len(q), 8)
    nhash, b, nflip = cfg["faiss"]
    gc.collect()
    r0 = rss()
    t = time.perf_counter()
    index = faiss.IndexBinaryMultiHash(64, nhash, b)
    index.nflip = nflip
    index.add(codes)
    build = time.perf_counter() - t
    gc.collect()
    bpf = (rss() - r0) / n
    index.range_search(qcodes[:1000], k + 1)
    t = time.perf_counter()
    lims, _D, ids = index.range_search(
        qcodes, k + 1
    )  # faiss binary range_search: distance < radius
    qps = len(q) / (time.perf_counter() - t)
    single = np.concatenate(
        [qcodes[: cfg["single"] // 2], qcodes[len(q) // 2 : len(q) // 2 + cfg["single"] // 2]]
    )
    p50, p99 = latencies(lambda x: index.range_search(x[None, :], k + 1), single)
    sample = np.concatenate(
        [q[: cfg["truth"] // 2], q[len(q) // 2 : len(q) // 2 + cfg["truth"] // 2]]
    )
    sample_pos = np.concatenate(
        [np.arange(cfg["truth"] // 2), len(q) // 2 + np.arange(cfg["truth"] // 2)]
    )
    truth = brute_truth(fps, sample, k)
    found = [set(ids[lims[i] : lims[i + 1]].tolist()) for i in sample_pos]
    rec, exact = recall(found, truth)
    return {
        "system": "faiss IndexBinaryMultiHash",
        "config": f"nhash={nhash} b={b} nflip={nflip}",
        "build_s": build,
        "bytes_per_fp": bpf,
        "batched_qps": qps,
        "single_p50_us": p50,
        "single_p99_us": p99,
        "recall": rec,
        "exact_match_vs_brute": exact,
        "results": int(lims[-1]),
    }


def run_brute(cfg: dict[str, Any]) -> dict[str, Any]:
    """NumPy brute force (np.bitwise_count over all N per query), on a query sample."""
    n, k = cfg["n"], cfg["k"]
    fps = make_data(cfg["kind"], n)
    q = make_queries(fps, cfg["queries"], k)
    sample = np.concatenate([q[:20], q[len(q) // 2 : len(q) // 2 + 20]])
    t = time.perf_counter()
    for x in sample:
        np.flatnonzero(np.bitwise_count(fps ^ x) <= k)
    dt = (time.perf_counter() - t) / len(sample)
    return {
        "system": "numpy brute force",
        "config": "1 thread, 40-query sample",
        "build_s": 0.0,
        "bytes_per_fp": 8.0,
        "batched_qps": 1 / dt,
        "single_p50_us": dt * 1e6,
        "single_p99_us": None,
        "recall": 1.0,
        "exact_match_vs_brute": True,
    }


def run_allpairs(cfg: dict[str, Any]) -> dict[str, Any]:
    """Self-join of N random fingerprints in which 10% are planted copies (1..k bits flipped)."""
    n, k = cfg["n"], cfg["k"]
    rng = np.random.default_rng(7)
    fps = make_data("random", n)
    m = n // 10
    fps[n - m :] = fps[:m] ^ _random_flips(rng, m, k, exact=rng.integers(1, k + 1, m))
    if cfg["system"] == "neardup":
        from neardup.index import all_pairs

        all_pairs(fps[:20000], k)
        t = time.perf_counter()
        a, _b, _d = all_pairs(fps, k, threads=cfg["threads"])
        return {"system": "neardup all_pairs", "seconds": time.perf_counter() - t, "pairs": len(a)}
    import simhash

    hashes = fps.tolist()
    t = time.perf_counter()
    pairs = simhash.find_all(hashes, cfg["blocks"], k)
    return {
        "system": f"simhash-pybind find_all (blocks={cfg['blocks']})",
        "seconds": time.perf_counter() - t,
        "pairs": len(pairs),
        "note": "find_all works on the set of distinct values: pairs of identical fingerprints are not reported",
    }


WORKERS = {"neardup": run_neardup, "faiss": run_faiss, "brute": run_brute, "allpairs": run_allpairs}


def in_subprocess(cfg: dict[str, Any], timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", json.dumps(cfg)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s", **cfg}
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1:] or ["failed"], **cfg}
    return {
        **json.loads(out.stdout.strip().splitlines()[-1]),
        **{k: cfg[k] for k in ("n", "kind") if k in cfg},
    }


def mem_available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable"):
                return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="1e6,1e7,5e7")
    ap.add_argument("--kinds", default="random,clustered")
    ap.add_argument("-k", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--queries", type=int, default=10_000, help="planted queries (and as many random)"
    )
    ap.add_argument("--single", type=int, default=2000, help="single-query latency sample")
    ap.add_argument(
        "--truth-sample", type=int, default=400, help="queries checked against brute force"
    )
    ap.add_argument("--faiss", default="2,32,1;4,16,0", help="nhash,b,nflip configurations")
    ap.add_argument(
        "--faiss-clustered",
        default="2,32,1",
        help="faiss configurations on clustered data (heavy buckets make nhash=4,b=16 very slow)",
    )
    ap.add_argument(
        "--faiss-max-n", type=float, default=1e7, help="faiss needs ~190 B/fp and minutes to build"
    )
    ap.add_argument("--allpairs-size", type=float, default=1e7)
    ap.add_argument("--simhash-blocks", default="4")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--quick", action="store_true", help="tiny sizes for a smoke test")
    ap.add_argument("--save-dir", default="/tmp", help="where to time save/load (empty: skip)")
    ap.add_argument("--out", default=str(RESULTS / "index.json"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        cfg = json.loads(args.worker)
        print(json.dumps(WORKERS[cfg["worker"]](cfg)))
        return
    if args.quick:
        args.sizes, args.queries, args.single, args.truth_sample, args.allpairs_size = (
            "1e5",
            1000,
            200,
            100,
            1e5,
        )
    sizes = [int(float(s)) for s in args.sizes.split(",") if s]
    kinds = args.kinds.split(",")
    faiss_cfgs = [tuple(int(x) for x in c.split(",")) for c in args.faiss.split(";") if c]
    faiss_clustered = [
        tuple(int(x) for x in c.split(",")) for c in args.faiss_clustered.split(";") if c
    ]
    base = {
        "k": args.k,
        "threads": args.threads,
        "queries": args.queries,
        "single": args.single,
        "save_dir": args.save_dir,
    }
    rows: list[dict[str, Any]] = []
    started = time.time()
    for n in sizes:
        for kind in kinds:
            # brute-force truth costs N per query: fewer sampled queries at the largest sizes
            truth = max(40, min(args.truth_sample, int(4e9 / n)))
            cfg = {**base, "n": n, "kind": kind, "truth": truth}
            rows.append(in_subprocess({**cfg, "worker": "neardup"}, args.timeout))
            _print_row(rows[-1])
            if n <= args.faiss_max_n:
                kind_cfgs = faiss_cfgs if kind == "random" else faiss_clustered
                for fc in kind_cfgs:
                    need = n * 200 + 2e9
                    if mem_available() < need:
                        rows.append(
                            {
                                "system": "faiss IndexBinaryMultiHash",
                                "n": n,
                                "kind": kind,
                                "skipped": f"needs ~{need / 1e9:.1f} GB, {mem_available() / 1e9:.1f} GB available",
                            }
                        )
                        _print_row(rows[-1])
                        continue
                    rows.append(
                        in_subprocess({**cfg, "worker": "faiss", "faiss": fc}, args.timeout)
                    )
                    _print_row(rows[-1])
            rows.append(in_subprocess({**cfg, "worker": "brute"}, args.timeout))
            _print_row(rows[-1])
    ap_rows = []
    if args.allpairs_size:
        n = int(args.allpairs_size)
        cfg = {**base, "n": n, "kind": "random+10% planted pairs", "worker": "allpairs", "truth": 0}
        ap_rows.append(in_subprocess({**cfg, "system": "neardup"}, args.timeout))
        print(ap_rows[-1])
        for b in [int(x) for x in args.simhash_blocks.split(",") if x]:
            ap_rows.append(in_subprocess({**cfg, "system": "simhash", "blocks": b}, args.timeout))
            print(ap_rows[-1])
    report = {
        "benchmark": "index",
        "k": args.k,
        "threads": args.threads,
        "queries": f"{args.queries} planted (0..{args.k} bits flipped) + {args.queries} random",
        "recall_note": f"recall checked against NumPy brute force on min({args.truth_sample}, 4e9/N) (at least 40) of the queries, half planted, half random",
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_avg": os.getloadavg(),
        },
        "wall_s": time.time() - started,
        "search": rows,
        "all_pairs": ap_rows,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=float))
    print(f"wrote {out} in {report['wall_s']:.0f} s; load average at the end {os.getloadavg()}")


def _print_row(r: dict[str, Any]) -> None:
    if "skipped" in r or "error" in r:
        print(
            f"{r.get('n', ''):>10} {r.get('kind', ''):<9} {r.get('system', r.get('worker')):<28} {r.get('skipped') or r.get('error')}"
        )
        return
    p99 = f"{r['single_p99_us']:.0f}" if r.get("single_p99_us") is not None else "-"
    print(
        f"{r['n']:>10} {r['kind']:<9} {r['system']:<28} {r['config']:<24} build {r['build_s']:7.1f}s"
        f" {r['bytes_per_fp']:6.1f} B/fp {r['batched_qps']:10.0f} q/s p50 {r['single_p50_us']:7.1f}us"
        f" p99 {p99:>6}us recall {r['recall']:.4f} exact={r['exact_match_vs_brute']}"
    )
    if "incremental_add_items_per_s" in r:
        print(
            f"{'':>21} incremental add {r['incremental_add_items_per_s']:,.0f} items/s (100-item batches),"
            f" visible={r['incremental_adds_visible']}; save {r.get('save_s', float('nan')):.1f}s,"
            f" mmap load {r.get('load_mmap_verified_s', float('nan')):.2f}s verified"
            f" / {r.get('load_mmap_unverified_s', float('nan')):.3f}s unverified"
        )


if __name__ == "__main__":
    main()
