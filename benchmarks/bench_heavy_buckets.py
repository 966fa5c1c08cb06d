#!/usr/bin/env python3
"""SimHash look-ups on a real window's segments, where fingerprints cluster: the CPU a query
costs in each segment's permuted tables, and how much of it the heavy buckets take.

Texts that share their most frequent tokens get nearby SimHash fingerprints, so the tables'
prefix buckets are far from uniform: in a generated 10 M window a quarter of the queries meet a
bucket over the heavy threshold in one of the four tables, and those queries cost most of the
look-up. This benchmark reads a store's segment indexes (``seg-*.nds.hidx``, memory-mapped,
read-only: the store is not opened or changed), takes ``--queries`` stored fingerprints of the
first segment with ``--flips`` random bits flipped (the window's own distribution; the load a
window meets is drawn from the same generator), and times ``TableSegment.search`` at the
store's radius on each of the next ``--segments`` segments: one thread, its CPU time
(``time.thread_time``), the best of ``--repeat`` calls, per query. Beside it: the share of the
queries that meet a heavy bucket, and their mean bucket size.

Each ``--tree`` (a checkout; default this one) runs in its own child process, the trees
alternated over ``--rounds`` rounds; medians are reported, and the runs must find the same
matches (the count of (query, row) pairs; a difference ends the run with an error).

    .venv/bin/python benchmarks/bench_heavy_buckets.py \\
        --store /tmp/w10m/n10000000/server/namespaces/default --tree . --tree /tmp/nd-before \\
        --out benchmarks/results/bench_heavy_buckets_10m.json

A store to read comes from ``benchmarks/bench_window.py --n N --keep`` (its
``server/namespaces/default``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from trees import (  # noqa: E402
    add_child_options,
    alternate,
    checkouts,
    medians,
    run_child,
    write_runs,
)


def _child(args: argparse.Namespace) -> dict[str, Any]:
    """Time the look-ups with the tree on ``sys.path``; return the figures."""
    import numpy as np

    import neardup
    from neardup.index import HammingIndex
    from neardup.index.tables import table_keys

    files = sorted(Path(args.store).glob("seg-*.nds.hidx"))
    if len(files) < 2:
        raise SystemExit(f"--store {args.store}: fewer than two segment indexes (seg-*.nds.hidx)")
    indexes = [HammingIndex.load(f, mmap=True) for f in files[: args.segments + 1]]
    rng = np.random.default_rng(args.seed)
    src = np.asarray(indexes[0].snapshot().segments[0].fps)
    q = src[rng.integers(0, len(src), args.queries)].copy()
    for _ in range(args.flips):
        q[:, 0] ^= np.uint64(1) << rng.integers(0, 64, len(q)).astype(np.uint64)
    q = np.ascontiguousarray(q)
    per_query, matches, heavy_share, heavy_mean = [], 0, [], []
    for hi in indexes[1:]:
        snap = hi.snapshot()
        seg, pa, k = snap.segments[0], snap.arrays, snap.plan.max_distance
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.thread_time()
            got = seg.search(q, k, pa)
            best = min(best, time.thread_time() - t0)
        per_query.append(best / len(q) * 1e6)
        matches += len(got[0])
        seen = np.zeros(len(q), np.int64)
        for t in range(pa.n_tables):
            shift = np.uint64(64 - seg.dbits)
            top = (table_keys(q, pa, t) >> shift).astype(np.int64)
            seen = np.maximum(seen, seg.dirs[t][top + 1] - seg.dirs[t][top])
        over = seen > seg.heavy.min()
        heavy_share.append(float(over.mean()))
        heavy_mean.append(float(seen[over].mean()) if over.any() else 0.0)
    return {
        "neardup": str(Path(neardup.__file__).parent),
        "us_per_query_segment": float(np.mean(per_query)),
        "segments_us": per_query,
        "matches": matches,
        "heavy_share": float(np.mean(heavy_share)),
        "heavy_mean_bucket": float(np.mean(heavy_mean)),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", required=True, help="a data directory (bench_window.py --keep's)")
    ap.add_argument("--queries", type=int, default=10_000, help="queries (default 10000)")
    ap.add_argument("--flips", type=int, default=1, help="bits flipped per query (default 1)")
    ap.add_argument("--segments", type=int, default=4, help="segments searched (default 4)")
    ap.add_argument("--repeat", type=int, default=3, help="calls per segment, best kept")
    ap.add_argument("--seed", type=int, default=0, help="queries' seed (default 0)")
    add_child_options(ap)
    args = ap.parse_args()
    if not Path(args.store).is_dir():
        ap.error(f"--store {args.store}: not a directory")
    for name in ("queries", "segments", "repeat"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1")
    if args.child:
        print(json.dumps(_child(args)))
        return 0
    trees = checkouts(args.tree)
    child = [sys.executable, __file__, "--child", "--store", args.store]
    for name in ("queries", "flips", "segments", "repeat", "seed"):
        child += [f"--{name}", str(getattr(args, name))]

    def one(t: Path, r: int) -> dict[str, Any]:
        return run_child(t, child)

    def say(t: Path, r: int, got: dict[str, Any]) -> None:
        print(f"round {r + 1} {t}: {got['us_per_query_segment']:.2f} µs a query", file=sys.stderr)

    # the first call of each tree compiles its kernels (an untimed warm run fills the cache)
    runs = alternate(trees, args.rounds, one, warm=True, say=say)
    found = {t: {r["matches"] for r in rs} for t, rs in runs.items()}
    if len(set().union(*found.values())) != 1:
        raise SystemExit(f"the trees found different matches: {found}")
    keys = ("us_per_query_segment", "heavy_share", "heavy_mean_bucket")
    med = {t: medians(rs, keys) for t, rs in runs.items()}
    print(
        f"{'per query and segment (medians)':34s}" + "".join(f"{t.name[-16:]:>18s}" for t in trees)
    )
    print(f"{'CPU µs':34s}" + "".join(f"{med[str(t)][keys[0]]:18.2f}" for t in trees))
    print(
        f"{'queries meeting a heavy bucket':34s}"
        + "".join(f"{med[str(t)][keys[1]]:18.3f}" for t in trees)
    )
    print(
        f"{'their mean bucket (keys)':34s}"
        + "".join(f"{med[str(t)][keys[2]]:18.0f}" for t in trees)
    )
    print(f"matches: {next(iter(found.values())).pop()} (every tree)")
    if args.out:
        write_runs(args.out, "heavy_buckets", args, trees, med, runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
