"""Benchmark the block-compressed tables (neardup.index.compressed) against the uncompressed index.

For each data kind (random / clustered SimHash values, as in bench_index.py) at ``--n``:

* the block-size curve on the sorted fingerprints (table 0): bits per fingerprint (payload +
  in-memory block keys, positions and CRCs) against the raw 64 and the information bound for
  N sorted 64-bit values (64 - log2 N + log2 e), and decode speed (fingerprints/s, one thread);
* the whole index, uncompressed vs ``compress=True`` (same plan, each of ``--index-blocks``):
  bits per fingerprint of every table, bytes per fingerprint of everything a search needs,
  batched queries/s (one search thread: per core) and single-query p50/p99 (``search_one``,
  wall clock), and a check that both return the same results;
* ``--budgets``: further compressed runs with a ``memory_budget`` (bytes per fingerprint), so
  the planner picks fewer tables (e.g. the two-table layout for a 50 M window in 1.2 GB);
* ``--faiss``: faiss ``IndexBinaryMultiHash`` configurations (nhash,b,nflip) on the same
  fingerprints and queries, one OpenMP thread, in a fresh process: memory as RSS growth over ``add`` (faiss holds
  its codes and hash maps), batched queries/s in thread CPU time, and a check that it finds the
  same (query, id) pairs;
* the memory a 50 M-fingerprint window would take at each layout's measured bytes/fp (a table's
  bits per key shrink by log2(50 M / N) at 50 M, so this is an upper bound).

Decode speed and batched queries/s are measured in CPU time of the running thread (best of 3),
so that the other jobs of a shared machine do not count; latencies are wall clock.

Run::

    .venv/bin/python benchmarks/bench_compressed.py                  # N = 1 M
    .venv/bin/python benchmarks/bench_compressed.py --n 1e5 --quick  # smoke test

Prints a table and writes ``benchmarks/results/compressed.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_index import make_data, make_queries  # noqa: E402

from neardup.index import HammingIndex  # noqa: E402
from neardup.index.compressed import (  # noqa: E402
    CompressedSegment,
    EncodedTable,
    decode_table,
    encode_table,
)


def table_bits(t: EncodedTable) -> float:
    """Bits per fingerprint of one compressed table, counting what stays in memory per block."""
    nbytes = t.words.nbytes + t.bkeys.nbytes + t.bstart.nbytes + t.crc.nbytes + t.lens.nbytes
    return 8 * nbytes / max(t.n, 1)


def best_time(fn: Any, repeat: int) -> float:
    """Best of ``repeat`` runs in CPU seconds of this thread: on a shared machine wall time
    mostly measures the other jobs (the batched searches here run on this thread)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t0)
    return best


def curve(keys: np.ndarray, blocks: list[int], repeat: int) -> list[dict[str, float]]:
    out = []
    for b in blocks:
        t = encode_table(keys, b)
        decode_table(t)  # compile / warm
        dt = best_time(lambda t=t: decode_table(t), repeat)
        out.append(
            {
                "block_bytes": b,
                "bits_per_fp": table_bits(t),
                "decode_fp_per_s": len(keys) / dt,
                "fps_per_block": len(keys) / max(len(t.bkeys), 1),
            }
        )
    return out


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def index_run(
    fps: np.ndarray,
    q: np.ndarray,
    compress: bool,
    block_bytes: int,
    k: int,
    single: int,
    budget: float | None = None,
) -> tuple[dict[str, Any], Any]:
    idx = HammingIndex(
        max_distance=k,
        expected_size=len(fps),
        compress=compress,
        block_bytes=block_bytes,
        threads=1,
        memory_budget=budget * len(fps) if budget else None,
    )
    t0 = time.perf_counter()
    idx.add(fps)
    idx.optimize()
    build = time.perf_counter() - t0
    idx.search(q[:64])  # compile / warm
    res = idx.search(q)
    dt = best_time(lambda: idx.search(q), 2)
    lat = []
    for x in q[:single].tolist():
        t1 = time.perf_counter_ns()
        idx.search_one(x)
        lat.append(time.perf_counter_ns() - t1)
    lat_a = np.array(lat[10:] or lat, dtype=np.float64) / 1e3
    seg = idx.snapshot().segments[0]
    tables: list[float] = []
    if isinstance(seg, CompressedSegment):
        tables = [table_bits(seg.ct.table(t)) for t in range(seg.ct.n_tables)]
    return {
        "compress": compress,
        "memory_budget_b_per_fp": budget,
        "plan": idx.plan.name,
        "n_tables": len(idx.plan.tables),
        "build_s": build,
        "bytes_per_fp": idx.nbytes / len(fps),
        "table_bits_per_fp": tables or [64.0] * len(idx.plan.tables),
        "queries_per_s": len(q) / dt,
        "single_p50_us": float(np.percentile(lat_a, 50)),
        "single_p99_us": float(np.percentile(lat_a, 99)),
    }, res


def faiss_run(
    fps: np.ndarray, q: np.ndarray, k: int, cfg: tuple[int, int, int], single: int
) -> tuple[dict[str, Any], set[tuple[int, int]]]:
    """faiss IndexBinaryMultiHash on one OpenMP thread (its fastest configurations are the
    nhash/b/nflip of benchmarks/bench_index.py)."""
    import faiss

    faiss.omp_set_num_threads(1)
    n = len(fps)
    codes = fps.byteswap().view(np.uint8).reshape(n, 8)
    qcodes = q.byteswap().view(np.uint8).reshape(len(q), 8)
    nhash, b, nflip = cfg
    r0 = rss()
    t0 = time.perf_counter()
    index = faiss.IndexBinaryMultiHash(64, nhash, b)
    index.nflip = nflip
    index.add(codes)
    build = time.perf_counter() - t0
    mem = rss() - r0
    index.range_search(qcodes[:64], k + 1)  # warm; range_search reports distance < radius
    res: Any = None

    def go() -> None:
        nonlocal res
        res = index.range_search(qcodes, k + 1)

    dt = best_time(go, 2)
    lims, _d, ids = res
    pairs = {
        (i, int(x)) for i in range(len(q)) for x in ids[int(lims[i]) : int(lims[i + 1])].tolist()
    }
    lat = []
    for i in range(min(single, len(q))):
        t1 = time.perf_counter_ns()
        index.range_search(qcodes[i : i + 1], k + 1)
        lat.append(time.perf_counter_ns() - t1)
    lat_a = np.array(lat[10:] or lat, dtype=np.float64) / 1e3
    return {
        "system": "faiss IndexBinaryMultiHash",
        "config": f"nhash={nhash} b={b} nflip={nflip}",
        "build_s": build,
        "bytes_per_fp": mem / n,
        "queries_per_s": len(q) / dt,
        "single_p50_us": float(np.percentile(lat_a, 50)),
        "single_p99_us": float(np.percentile(lat_a, 99)),
    }, pairs


def _faiss_child(conn: Any, *args: Any) -> None:
    conn.send(faiss_run(*args))
    conn.close()


def faiss_in_child(
    fps: np.ndarray, q: np.ndarray, k: int, cfg: tuple[int, int, int], single: int
) -> tuple[dict[str, Any], set[tuple[int, int]]]:
    """:func:`faiss_run` in a fresh (spawned) process: its RSS growth is faiss's alone (here, or
    in a forked child, malloc would reuse heap memory freed by the runs before)."""
    ctx = mp.get_context("spawn")
    a, b = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_faiss_child, args=(b, fps, q, k, cfg, single))
    p.start()
    b.close()
    out = a.recv()
    p.join()
    return out  # type: ignore[no-any-return]


def as_pairs(res: Any) -> set[tuple[int, int]]:
    lims, ids = res[0], res[1]
    return {
        (i, int(x))
        for i in range(len(lims) - 1)
        for x in ids[int(lims[i]) : int(lims[i + 1])].tolist()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=float, default=1e6)
    ap.add_argument("--kinds", default="random,clustered")
    ap.add_argument("--blocks", default="64,128,256,512,1024,2048")
    ap.add_argument(
        "--index-blocks", default="128,256", help="block sizes of the compressed index runs"
    )
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--queries", type=int, default=5000, help="planted + as many random")
    ap.add_argument("--single", type=int, default=2000)
    ap.add_argument(
        "--budgets", default="", help="memory budgets (B/fp) of further compressed runs, e.g. 24"
    )
    ap.add_argument(
        "--faiss", default="", help="faiss nhash,b,nflip configurations, e.g. '2,32,1;4,16,0'"
    )
    ap.add_argument("--window", type=float, default=5e7, help="fingerprints of the window")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(RESULTS / "compressed.json"))
    args = ap.parse_args()
    n = int(args.n)
    repeat = 1 if args.quick else 3
    blocks = [int(b) for b in args.blocks.split(",")]
    bound = 64 - np.log2(n) + np.log2(np.e)
    report: dict[str, Any] = {
        "n": n,
        "k": args.k,
        "bound_bits_per_fp": bound,
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_avg": os.getloadavg(),
        },
        "command": " ".join(sys.argv),
        "kinds": {},
    }
    for kind in args.kinds.split(","):
        fps = make_data(kind, n)
        keys = np.sort(fps)
        cv = curve(keys, blocks, repeat)
        q = make_queries(fps, args.queries, args.k)
        unc, r_u = index_run(fps, q, False, 256, args.k, args.single)
        runs = [("uncompressed", unc)]
        same = True
        for b in (int(x) for x in args.index_blocks.split(",")):
            com, r_c = index_run(fps, q, True, b, args.k, args.single)
            com["block_bytes"] = b
            com["qps_ratio"] = com["queries_per_s"] / unc["queries_per_s"]
            same &= all(np.array_equal(x, y) for x, y in zip(r_u, r_c, strict=True))
            runs.append((f"compressed B={b}", com))
        for bud in (float(x) for x in args.budgets.split(",") if x):
            com, r_c = index_run(fps, q, True, 256, args.k, args.single, bud)
            com["block_bytes"] = 256
            com["qps_ratio"] = com["queries_per_s"] / unc["queries_per_s"]
            same &= all(np.array_equal(x, y) for x, y in zip(r_u, r_c, strict=True))
            runs.append((f"B=256 <={bud:g} B/fp", com))
        for _, r in runs:
            r["window_gb"] = r["bytes_per_fp"] * args.window / 1e9
        fa = []
        want = as_pairs(r_u) if args.faiss else set()
        for c in (x for x in args.faiss.split(";") if x):
            fr, fp_pairs = faiss_in_child(
                fps, q, args.k, tuple(int(v) for v in c.split(",")), args.single
            )
            fr["same_pairs"] = fp_pairs == want
            fa.append(fr)
        report["kinds"][kind] = {
            "curve": cv,
            "uncompressed": unc,
            "compressed": [r for _, r in runs[1:]],
            "same_results": bool(same),
            "faiss": fa,
        }
        print(f"\n{kind}, N = {n:,}: information bound {bound:.2f} bits/fp (raw 64)")
        print(f"  {'B':>6} {'bits/fp':>8} {'x bound':>8} {'fp/block':>9} {'decode Mfp/s':>13}")
        for row in cv:
            print(
                f"  {row['block_bytes']:>6} {row['bits_per_fp']:>8.2f}"
                f" {row['bits_per_fp'] / bound:>8.3f} {row['fps_per_block']:>9.1f}"
                f" {row['decode_fp_per_s'] / 1e6:>13.1f}"
            )
        print(
            f"  {'index':>18} {'tables':>6} {'B/fp':>7} {'table bits/fp':>24} {'q/s':>9}"
            f" {'p50 us':>8} {'p99 us':>8}"
        )
        for name, r in runs:
            tb = ",".join(f"{x:.1f}" for x in r["table_bits_per_fp"])
            print(
                f"  {name:>18} {r['n_tables']:>6} {r['bytes_per_fp']:>7.1f} {tb:>24}"
                f" {r['queries_per_s']:>9.0f} {r['single_p50_us']:>8.1f}"
                f" {r['single_p99_us']:>8.1f}"
            )
        for fr in fa:
            print(
                f"  {'faiss ' + fr['config']:>24} {fr['bytes_per_fp']:>8.1f} B/fp"
                f" {fr['queries_per_s']:>9.0f} q/s p50 {fr['single_p50_us']:.1f} us"
                f" p99 {fr['single_p99_us']:.1f} us same pairs: {fr['same_pairs']}"
            )
        if fa:
            fast = max(fa, key=lambda r: r["queries_per_s"])
            for name, r in runs:
                print(
                    f"  {name:>18}: memory {r['bytes_per_fp'] / fast['bytes_per_fp']:.2f}x,"
                    f" q/s {r['queries_per_s'] / fast['queries_per_s']:.2f}x faiss's fastest;"
                    f" {args.window:,.0f} fp window {r['window_gb']:.2f} GB"
                )
            report["kinds"][kind]["faiss_fastest"] = fast["config"]
        ratios = ", ".join(f"{r['qps_ratio']:.2f}" for _, r in runs[1:])
        print(f"  same results: {same}; compressed/uncompressed q/s: {ratios}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
