"""Benchmark compressed tables (neardup.index.compressed: the Elias–Fano and block codecs)
against the uncompressed index and faiss.

For each data kind (random / clustered SimHash values, as in bench_index.py) at ``--n``:

* the codec curve on the sorted fingerprints (table 0): bits per fingerprint (everything a
  table keeps) against the raw 64 and the information bound for N sorted 64-bit values
  (64 - log2 N + log2 e), decode speed (fingerprints/s, one thread) and, for Elias–Fano,
  random access (positions/s); the block code at each of ``--blocks``;
* the whole index, uncompressed vs ``compress=True`` in each of ``--codecs`` (same plan; the
  block code at each of ``--index-blocks``): bits per fingerprint of every table and against
  the bound, bytes per fingerprint of everything a search needs, batched queries/s (one search
  thread: per core) and single-query p50/p99 (``search_one``, wall clock and thread CPU time),
  and a check that every run returns the same results;
* ``--faiss``: faiss configurations on the same fingerprints and queries, one OpenMP thread,
  each in a fresh process: ``mh:nhash,b,nflip`` (IndexBinaryMultiHash), ``hash:b,nflip``
  (IndexBinaryHash), ``flat`` (IndexBinaryFlat, on the first ``--flat-queries`` queries):
  memory as RSS growth over ``add``, batched queries/s in thread CPU time, single-query
  p50/p99, and a check that it finds the same (query, id) pairs; the fastest configuration
  that finds them all is the one the ratios are taken against;
* the memory a ``--window`` of fingerprints would take at each layout's measured bytes/fp (a
  table's bits per key shrink by log2(window / N) at the window's size: an upper bound).

Decode speed and batched queries/s are measured in CPU time of the running thread (best of 3),
so that the other jobs of a shared machine do not count; run it with ``nice -n 5``; the JSON's
``machine`` block has the load average at the start and the end.

Run::

    nice -n 5 .venv/bin/python benchmarks/bench_compressed.py --n 2e6 \\
        --out benchmarks/results/compressed_2m.json
    nice -n 5 .venv/bin/python benchmarks/bench_compressed.py --n 1e7 --kinds random \\
        --out benchmarks/results/compressed_10m.json
    .venv/bin/python benchmarks/bench_compressed.py --n 1e5 --quick --faiss ''   # smoke test

Prints a table and writes ``benchmarks/results/compressed.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import math
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
from neardup.index.codec_blocks import BlockTables  # noqa: E402
from neardup.index.codec_ef import encode_ef  # noqa: E402
from neardup.index.compressed import CompressedSegment  # noqa: E402

DEFAULT_FAISS = "mh:2,32,1;mh:4,16,0;hash:16,3;flat"


def best_time(fn: Any, repeat: int) -> float:
    """Best of ``repeat`` runs in CPU seconds of this thread: on a shared machine wall time
    mostly measures the other jobs (the batched searches here run on this thread)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t0)
    return best


def curve(keys: np.ndarray, blocks: list[int], repeat: int) -> list[dict[str, Any]]:
    """Table 0 of each codec: bits per key, decode (and Elias–Fano random access) speed."""
    out = []
    n = len(keys)
    ef = encode_ef([keys], 16)
    ef.decode(0)  # compile / warm
    idx = np.random.default_rng(0).integers(0, n, min(n, 1_000_000))
    ef.keys_at(0, idx[:10])
    out.append(
        {
            "codec": "ef",
            "bits_per_fp": ef.table_bits(0),
            "decode_fp_per_s": n / best_time(lambda: ef.decode(0), repeat),
            "access_per_s": len(idx) / best_time(lambda: ef.keys_at(0, idx), repeat),
        }
    )
    for b in blocks:
        t = BlockTables.encode([keys], b)
        t.decode(0)
        dt = best_time(lambda t=t: t.decode(0), repeat)
        out.append(
            {
                "codec": "blocks",
                "block_bytes": b,
                "bits_per_fp": t.table_bits(0),
                "decode_fp_per_s": n / dt,
                "fps_per_block": n / max(len(t.bkeys), 1),
            }
        )
    return out


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def latencies(one: Any, qs: list[Any]) -> dict[str, float]:
    """Single-query p50/p99 in wall and thread CPU time (the first 10 warm up)."""
    wall, cpu = [], []
    for x in qs:
        t0 = time.perf_counter_ns()
        c0 = time.thread_time_ns()
        one(x)
        cpu.append(time.thread_time_ns() - c0)
        wall.append(time.perf_counter_ns() - t0)
    w = np.array(wall[10:] or wall, dtype=np.float64) / 1e3
    c = np.array(cpu[10:] or cpu, dtype=np.float64) / 1e3
    return {
        "single_p50_us": float(np.percentile(w, 50)),
        "single_p99_us": float(np.percentile(w, 99)),
        "single_cpu_p50_us": float(np.percentile(c, 50)),
        "single_cpu_p99_us": float(np.percentile(c, 99)),
    }


def index_run(
    fps: np.ndarray, q: np.ndarray, k: int, single: int, bound: float, **kw: Any
) -> tuple[dict[str, Any], Any]:
    idx = HammingIndex(max_distance=k, expected_size=len(fps), threads=1, **kw)
    t0 = time.perf_counter()
    idx.add(fps)
    idx.optimize()
    build = time.perf_counter() - t0
    idx.search(q[:64])  # compile / warm
    res = idx.search(q)
    dt = best_time(lambda: idx.search(q), 3)
    seg = idx.snapshot().segments[0]
    tables: list[float] = []
    if isinstance(seg, CompressedSegment):
        tables = [seg.tables.table_bits(t) for t in range(seg.tables.n_tables)]
    return {
        "compress": bool(kw.get("compress")),
        "codec": kw.get("codec") if kw.get("compress") else None,
        "block_bytes": kw.get("block_bytes") if kw.get("codec") == "blocks" else None,
        "plan": idx.plan.name,
        "n_tables": len(idx.plan.tables),
        "build_s": build,
        "bytes_per_fp": idx.nbytes / len(fps),
        "table_bits_per_fp": tables or [64.0] * len(idx.plan.tables),
        "table_bits_x_bound": max(tables or [64.0]) / bound,
        "queries_per_s": len(q) / dt,
        **latencies(idx.search_one, q[:single].tolist()),
    }, res


def _faiss_index(spec: str) -> Any:
    import faiss

    kind, _, arg = spec.partition(":")
    vals = [int(v) for v in arg.split(",")] if arg else []
    if kind == "mh":
        nhash, b, nflip = vals
        index = faiss.IndexBinaryMultiHash(64, nhash, b)
        index.nflip = nflip
        return index, f"IndexBinaryMultiHash nhash={nhash} b={b} nflip={nflip}"
    if kind == "hash":
        b, nflip = vals
        index = faiss.IndexBinaryHash(64, b)
        index.nflip = nflip
        return index, f"IndexBinaryHash b={b} nflip={nflip}"
    if kind == "flat":
        return faiss.IndexBinaryFlat(64), "IndexBinaryFlat"
    raise SystemExit(
        f"unknown faiss configuration {spec!r} (mh:nhash,b,nflip | hash:b,nflip | flat)"
    )


def faiss_run(
    fps: np.ndarray, q: np.ndarray, k: int, spec: str, single: int
) -> tuple[dict[str, Any], set[tuple[int, int]]]:
    """One faiss configuration on one OpenMP thread."""
    import faiss

    faiss.omp_set_num_threads(1)
    n = len(fps)
    codes = fps.byteswap().view(np.uint8).reshape(n, 8)
    qcodes = q.byteswap().view(np.uint8).reshape(len(q), 8)
    r0 = rss()
    t0 = time.perf_counter()
    index, name = _faiss_index(spec)
    index.add(codes)
    build = time.perf_counter() - t0
    mem = rss() - r0
    index.range_search(qcodes[:16], k + 1)  # warm; range_search reports distance < radius
    res: Any = None

    def go() -> None:
        nonlocal res
        res = index.range_search(qcodes, k + 1)

    dt = best_time(go, 2)
    lims, _d, ids = res
    pairs = {
        (i, int(x)) for i in range(len(q)) for x in ids[int(lims[i]) : int(lims[i + 1])].tolist()
    }
    return {
        "system": "faiss",
        "config": name,
        "spec": spec,
        "queries": len(q),
        "build_s": build,
        "bytes_per_fp": mem / n,
        "queries_per_s": len(q) / dt,
        **latencies(
            lambda i: index.range_search(qcodes[i : i + 1], k + 1), list(range(min(single, len(q))))
        ),
    }, pairs


def _faiss_child(conn: Any, *args: Any) -> None:
    conn.send(faiss_run(*args))
    conn.close()


def faiss_in_child(
    fps: np.ndarray, q: np.ndarray, k: int, spec: str, single: int
) -> tuple[dict[str, Any], set[tuple[int, int]]]:
    """:func:`faiss_run` in a fresh (spawned) process: its RSS growth is faiss's alone (here, or
    in a forked child, malloc would reuse heap memory freed by the runs before)."""
    ctx = mp.get_context("spawn")
    a, b = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_faiss_child, args=(b, fps, q, k, spec, single))
    p.start()
    b.close()
    out = a.recv()
    p.join()
    return out  # type: ignore[no-any-return]


def as_pairs(res: Any, upto: int | None = None) -> set[tuple[int, int]]:
    lims, ids = res[0], res[1]
    nq = len(lims) - 1 if upto is None else upto
    return {(i, int(x)) for i in range(nq) for x in ids[int(lims[i]) : int(lims[i + 1])].tolist()}


def same(a: Any, b: Any) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=float, default=1e6)
    ap.add_argument("--kinds", default="random,clustered")
    ap.add_argument("--codecs", default="ef,blocks", help="codecs of the compressed index runs")
    ap.add_argument("--blocks", default="64,256,1024", help="block sizes of the codec curve")
    ap.add_argument("--index-blocks", default="256", help="block sizes of the block-code runs")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--queries", type=int, default=5000, help="planted + as many random")
    ap.add_argument("--single", type=int, default=2000)
    ap.add_argument("--faiss", default=DEFAULT_FAISS, help="';'-separated faiss configurations")
    ap.add_argument("--flat-queries", type=int, default=1000, help="queries of faiss flat")
    ap.add_argument("--window", type=float, default=5e7, help="fingerprints of the window")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(RESULTS / "compressed.json"))
    args = ap.parse_args()
    n = int(args.n)
    repeat = 1 if args.quick else 3
    blocks = [int(b) for b in args.blocks.split(",") if b]
    bound = 64 - math.log2(n) + math.log2(math.e)
    report: dict[str, Any] = {
        "n": n,
        "k": args.k,
        "bound_bits_per_fp": bound,
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpus": os.cpu_count(),
            "load_avg_at_start": os.getloadavg(),
        },
        "command": " ".join(sys.argv),
        "kinds": {},
    }
    for kind in args.kinds.split(","):
        fps = make_data(kind, n)
        cv = curve(np.sort(fps), blocks, repeat)
        q = make_queries(fps, args.queries, args.k)
        unc, r_u = index_run(fps, q, args.k, args.single, bound)
        runs = [("uncompressed", unc)]
        ok = True
        for codec in args.codecs.split(","):
            sizes = [int(b) for b in args.index_blocks.split(",")] if codec == "blocks" else [256]
            for b in sizes:
                com, r_c = index_run(fps, q, args.k, args.single, bound, compress=True,
                                     codec=codec, block_bytes=b)  # fmt: skip
                com["qps_ratio"] = com["queries_per_s"] / unc["queries_per_s"]
                ok &= same(r_u, r_c)
                runs.append((codec if codec == "ef" else f"blocks B={b}", com))
        for _, r in runs:
            r["window_gb"] = r["bytes_per_fp"] * args.window / 1e9
        fa = []
        for spec in (x for x in args.faiss.split(";") if x):
            qf = q[: args.flat_queries] if spec == "flat" else q
            fr, pairs = faiss_in_child(fps, qf, args.k, spec, args.single)
            fr["same_pairs"] = pairs == as_pairs(r_u, len(qf))
            fa.append(fr)
        exact = [f for f in fa if f["same_pairs"]]
        fast = max(exact, key=lambda r: r["queries_per_s"]) if exact else None
        for _, r in runs:
            if fast:
                r["vs_faiss_fastest_qps"] = r["queries_per_s"] / fast["queries_per_s"]
                r["vs_faiss_fastest_memory"] = r["bytes_per_fp"] / fast["bytes_per_fp"]
        report["kinds"][kind] = {
            "curve": cv,
            "uncompressed": unc,
            "compressed": [dict(r, name=name) for name, r in runs[1:]],
            "same_results": bool(ok),
            "faiss": fa,
            "faiss_fastest": fast["config"] if fast else None,
        }
        print(f"\n{kind}, N = {n:,}: information bound {bound:.2f} bits/fp (raw 64)")
        print(f"  {'table 0':>14} {'bits/fp':>8} {'x bound':>8} {'decode Mfp/s':>13}")
        for row in cv:
            name = "ef" if row["codec"] == "ef" else f"blocks B={row['block_bytes']}"
            print(
                f"  {name:>14} {row['bits_per_fp']:>8.2f} {row['bits_per_fp'] / bound:>8.3f}"
                f" {row['decode_fp_per_s'] / 1e6:>13.1f}"
                + (f"  random access {row['access_per_s'] / 1e6:.1f} M/s" if "access_per_s" in row else "")
            )  # fmt: skip
        print(
            f"  {'index':>14} {'tables':>6} {'B/fp':>6} {'max table x bound':>17} {'q/s':>10}"
            f" {'x unc.':>6} {'p50/p99 us':>13} {'cpu p50/p99':>13}"
        )
        for name, r in runs:
            print(
                f"  {name:>14} {r['n_tables']:>6} {r['bytes_per_fp']:>6.1f}"
                f" {r['table_bits_x_bound']:>17.3f} {r['queries_per_s']:>10,.0f}"
                f" {r['queries_per_s'] / unc['queries_per_s']:>6.2f}"
                f" {r['single_p50_us']:>6.1f}/{r['single_p99_us']:<6.1f}"
                f" {r['single_cpu_p50_us']:>6.1f}/{r['single_cpu_p99_us']:<6.1f}"
            )
        for fr in fa:
            print(
                f"  faiss {fr['config']:>40}: {fr['bytes_per_fp']:>6.1f} B/fp"
                f" {fr['queries_per_s']:>10,.0f} q/s ({fr['queries']} queries) p50/p99"
                f" {fr['single_p50_us']:.1f}/{fr['single_p99_us']:.1f} us;"
                f" same pairs: {fr['same_pairs']}"
            )
        if fast:
            for name, r in runs:
                print(
                    f"  {name:>14}: memory {r['vs_faiss_fastest_memory']:.2f}x, q/s"
                    f" {r['vs_faiss_fastest_qps']:.2f}x faiss's fastest ({fast['config']});"
                    f" {args.window:,.0f} fp window {r['window_gb']:.2f} GB"
                )
        print(f"  same results: {ok}")
    report["machine"]["load_avg_at_end"] = os.getloadavg()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
