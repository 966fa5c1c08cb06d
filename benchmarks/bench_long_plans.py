#!/usr/bin/env python3
"""SimHash table plans for long texts: one kept window segment's fingerprints indexed with
each plan, searched at the store's radius by new texts of each length.

Long texts' SimHash fingerprints cluster (their frequent words fix many bits;
``study_simhash_floods.py``), so a long query's prefix buckets in the store's plan ("4 blocks
choose 1": 16-bit prefixes) hold thousands of rows it must compare. This benchmark builds a
:class:`neardup.HammingIndex` over the first segment of a kept ``bench_window.py`` store with
each ``--plans`` entry (``B/P``: B blocks, P of them in a table's prefix), fingerprints
``--queries`` new texts of each length band (the window's generator with another seed, through
the store's own ``Deduplicator.prepare``), and times a search of each band at distance 3, the
best of ``--repeat``. Every plan must find the same (query, row) pairs (checked: a difference
ends the run). Also: each plan's tables and build time.

    .venv/bin/python benchmarks/bench_long_plans.py \\
        --store DATA/n10000000/server/namespaces/default --plans 4/1,5/2,6/3

Prints a table and writes ``benchmarks/results/bench_long_plans.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

BANDS = ((0, 200), (200, 1000), (1000, 3000), (3000, None))


def band_name(b: tuple[int, int | None]) -> str:
    return f"{b[0]}-{b[1] or ''}"


def queries(store: Path, per_band: int, seed: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """New texts' fingerprints by length band (the store's fingerprinter), and the segment's."""
    import window_corpus as wc

    from neardup.online import Deduplicator

    spec = wc.WindowSpec(n=10_000_000, seed=seed)
    got = wc.texts_by_length(spec, BANDS, per_band, 5_000_000)
    want = {band_name(b): ts for b, ts in zip(BANDS, got, strict=True)}
    with Deduplicator.open(store, verify_meta=False) as d:
        out = {}
        for name, texts in want.items():
            p = d.prepare([{"id": f"q{i}", "text": t} for i, t in enumerate(texts)])
            out[name] = np.ascontiguousarray(np.asarray(p.fps, dtype=np.uint64).reshape(-1))
    from neardup.index import HammingIndex

    # the first segment's index, read as bench_heavy_buckets.py reads it (mapped, read-only)
    first = sorted(store.glob("seg-*.nds.hidx"))[0]
    seg = HammingIndex.load(first, mmap=True).snapshot().segments[0]
    fps = np.ascontiguousarray(np.asarray(seg.fps, dtype=np.uint64).reshape(-1))
    return out, fps


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", type=Path, required=True, help="a kept bench_window store's namespace (server/namespaces/default)")  # fmt: skip
    p.add_argument("--plans", default="4/1,5/2,6/3", help="B/P entries: B blocks, P in a prefix (default 4/1,5/2,6/3)")  # fmt: skip
    p.add_argument("--queries", type=int, default=1500, help="texts a length band (default 1500)")
    p.add_argument("--repeat", type=int, default=3, help="searches of each band, best kept")
    p.add_argument("--seed", type=int, default=2, help="the queries' generator seed (default 2)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_long_plans.json")  # fmt: skip
    a = p.parse_args(argv)
    if not (a.store / "MANIFEST.json").exists():
        p.error(f"--store {a.store}: not a store's data directory (no MANIFEST.json)")
    try:
        plans = [tuple(int(x) for x in e.split("/")) for e in a.plans.split(",")]
        if any(len(x) != 2 or not 1 <= x[1] < x[0] for x in plans):
            raise ValueError
    except ValueError:
        p.error(f"--plans {a.plans!r}: B/P entries with 1 <= P < B, comma-separated (e.g. 4/1,5/2)")  # fmt: skip
    if a.queries < 1 or a.repeat < 1:
        p.error("--queries and --repeat must be at least 1")
    if not any(a.store.glob("seg-*.nds.hidx")):
        p.error(f"--store {a.store}: no segment index (seg-*.nds.hidx); a kept bench_window.py store has them")  # fmt: skip
    from bench_dedup import machine, write_results

    from neardup.index import HammingIndex

    qs, fps = queries(a.store, a.queries, a.seed)
    rows: list[dict[str, Any]] = []
    found: dict[str, int] = {}
    for blocks, prefix in plans:
        t0 = time.perf_counter()
        idx = HammingIndex(bits=64, max_distance=3, expected_size=len(fps), blocks=blocks, prefix_blocks=prefix)  # fmt: skip
        idx.add(fps, np.arange(len(fps), dtype=np.int64))
        idx.search(fps[:1], max_distance=3)  # (builds the tables)
        build = time.perf_counter() - t0
        row: dict[str, Any] = {"plan": idx.plan.name, "tables": len(idx.plan.tables), "build_s": round(build, 2)}  # fmt: skip
        for name, q in qs.items():
            best, pairs = float("inf"), 0
            for _ in range(a.repeat):
                t = time.thread_time()
                _lims, ids, _d = idx.search(q, max_distance=3)
                best = min(best, time.thread_time() - t)
                pairs = len(ids)
            if found.setdefault(name, pairs) != pairs:
                raise SystemExit(f"plan {idx.plan.name} found {pairs} pairs for {name}, another plan {found[name]}")  # fmt: skip
            row[name] = {"us_per_query": round(best / len(q) * 1e6, 2), "hits_per_query": round(pairs / len(q), 2)}  # fmt: skip
        rows.append(row)
        print(f"  {idx.plan.name}: built in {build:.1f} s", file=sys.stderr)
    names = list(qs)
    print(f"one segment of {len(fps):,} rows, distance 3; CPU µs a query (hits a query), best of {a.repeat}")  # fmt: skip
    print(f"{'plan':22} {'tables':>6} " + " ".join(f"{n + ' chars':>20}" for n in names))
    for r in rows:
        cells = " ".join(f"{r[n]['us_per_query']:>11.2f} ({r[n]['hits_per_query']:>5.1f})" for n in names)  # fmt: skip
        print(f"{r['plan']:22} {r['tables']:>6} {cells}")
    write_results(a.out, {
        "benchmark": "bench_long_plans", "machine": machine(load_average=True),
        "command": "benchmarks/bench_long_plans.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "store": str(a.store), "segment_rows": len(fps), "queries_per_band": {n: len(q) for n, q in qs.items()},
        "rows": rows,
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
