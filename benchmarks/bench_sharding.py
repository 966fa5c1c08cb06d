"""Sharding design, simulated in process: by index key vs by document with fan-out (issue 27).

Both designs hold the same permuted-table layout for exact k = 3 search over 64-bit
fingerprints: four 16-bit blocks, one table per block keyed by that block (pigeonhole: a
fingerprint within 3 bits of a query equals it on at least one block). Shards are the nodes of
a :class:`neardup.HashRing` (default vnodes).

``by-key``
    entry (table t, key b) lives on ``ring.node_for(t << 16 | b)``; a query sends its
    fingerprint to the owner of each of its 4 keys (at most 4 shards), each returns the
    matches of one bucket. An insert writes 4 entries to up to 4 shards (x R replicas), and
    the text (for second-stage verification) lives elsewhere: one more hop per candidate.
``by-doc``
    a document lives on ``ring.node_for(doc_id)`` with all 4 of its table entries; a query
    goes to every shard, each probes its 4 local tables.

Per design and shard count: shards touched per query, request+response bytes per query
(fingerprint 8 B + an assumed 64 B per request frame, 16 B per match), entries written per
insert, per-query CPU in the busiest shard (the latency floor with shards in parallel) and
summed over shards (the cluster's CPU per check), and balance (max/mean of stored entries and
of requests served). Writes JSON to benchmarks/results/bench_sharding.json.

    .venv/bin/python benchmarks/bench_sharding.py [--n 400000 --queries 2000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from neardup.cluster.ring import HashRing  # noqa: E402

T = 4  # tables (blocks of 16 bits)
K = 3
FRAME = 64  # bytes assumed per request/response frame (HTTP/2-like headers, small)
MASK16 = np.uint64(0xFFFF)


def block(fps: np.ndarray, t: int) -> np.ndarray:
    return (fps >> np.uint64(16 * t)) & MASK16


class Table:
    """Sorted (key, fingerprint, id) rows: one table's share on one shard."""

    def __init__(self, keys: np.ndarray, fps: np.ndarray, ids: np.ndarray) -> None:
        order = np.argsort(keys, kind="stable")
        self.keys, self.fps, self.ids = keys[order], fps[order], ids[order]

    def probe(self, key: int, q: np.uint64) -> np.ndarray:
        lo, hi = np.searchsorted(self.keys, [key, key + 1])
        if lo == hi:
            return self.ids[:0]
        d = np.bitwise_count(self.fps[lo:hi] ^ q)
        return self.ids[lo:hi][d <= K]


def build_by_key(fps: np.ndarray, ring: HashRing) -> dict[str, list[Table]]:
    ids = np.arange(len(fps), dtype=np.int64)
    snap = ring.snapshot()
    shards: dict[str, list[Table]] = {n: [] for n in snap.nodes}
    for t in range(T):
        keys = block(fps, t)
        owner = snap.index_for_many((np.uint64(t) << np.uint64(16)) | keys)
        for s, name in enumerate(snap.nodes):
            m = owner == s
            shards[name].append(Table(keys[m], fps[m], ids[m]))
    return shards


def build_by_doc(fps: np.ndarray, ring: HashRing) -> dict[str, list[Table]]:
    ids = np.arange(len(fps), dtype=np.int64)
    snap = ring.snapshot()
    owner = snap.index_for_many(ids.astype(np.uint64))  # doc id -> shard
    shards: dict[str, list[Table]] = {}
    for s, name in enumerate(snap.nodes):
        m = owner == s
        shards[name] = [Table(block(fps[m], t), fps[m], ids[m]) for t in range(T)]
    return shards


def run(design: str, fps: np.ndarray, queries: np.ndarray, n_shards: int) -> dict[str, Any]:
    ring = HashRing([f"shard-{i}" for i in range(n_shards)])
    snap = ring.snapshot()
    t0 = time.perf_counter()
    shards = (build_by_key if design == "by-key" else build_by_doc)(fps, ring)
    build_s = time.perf_counter() - t0
    served = dict.fromkeys(snap.nodes, 0)
    stored = {n: sum(len(t.keys) for t in tabs) for n, tabs in shards.items()}
    busiest: list[float] = []
    total: list[float] = []
    touched: list[int] = []
    nbytes: list[int] = []
    found = 0
    for q in queries:
        per_shard: dict[str, float] = {}
        matches: set[int] = set()
        if design == "by-key":
            for t in range(T):
                key = int(block(q, t))
                name = snap.node_for((t << 16) | key)
                c0 = time.perf_counter()
                hits = shards[name][t].probe(key, q)
                per_shard[name] = per_shard.get(name, 0.0) + time.perf_counter() - c0
                matches.update(hits.tolist())
            req_frames = T  # one request per table (two tables on one shard could share one)
        else:
            for name, tabs in shards.items():
                c0 = time.perf_counter()
                for t in range(T):
                    matches.update(tabs[t].probe(int(block(q, t)), q).tolist())
                per_shard[name] = time.perf_counter() - c0
            req_frames = n_shards
        for name in per_shard:
            served[name] += 1
        busiest.append(max(per_shard.values()))
        total.append(sum(per_shard.values()))
        touched.append(len(per_shard))
        nbytes.append(req_frames * (2 * FRAME + 8) + 16 * len(matches))
        found += len(matches)
    srv = np.array(list(served.values()), dtype=float)
    sto = np.array(list(stored.values()), dtype=float)
    return {
        "design": design,
        "shards": n_shards,
        "build_s": build_s,
        "shards_touched_per_query": float(np.mean(touched)),
        "bytes_per_query": float(np.mean(nbytes)),
        "entries_written_per_insert": T,
        "shards_written_per_insert": T if design == "by-key" else 1,
        "busiest_shard_us_p50": float(np.percentile(busiest, 50) * 1e6),
        "busiest_shard_us_p99": float(np.percentile(busiest, 99) * 1e6),
        "cluster_cpu_us_per_query": float(np.mean(total) * 1e6),
        "stored_max_over_mean": float(sto.max() / sto.mean()),
        "served_max_over_mean": float(srv.max() / srv.mean()),
        "matches_found": found,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=400_000)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--shards", default="4,16")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_sharding.json"))
    args = ap.parse_args()
    rng = np.random.default_rng(27)
    fps = rng.integers(0, 2**64 - 1, args.n, dtype=np.uint64, endpoint=True)
    # half the queries are stored fingerprints with 0-3 bits flipped, half are random
    half = args.queries // 2
    src = fps[rng.integers(0, args.n, half)]
    flips = np.zeros(half, dtype=np.uint64)
    for _ in range(K):
        bit = rng.integers(0, 64, half).astype(np.uint64)
        flips |= np.where(rng.random(half) < 0.8, np.uint64(1) << bit, np.uint64(0))
    queries = np.concatenate(
        [src ^ flips, rng.integers(0, 2**64 - 1, args.queries - half, dtype=np.uint64)]
    )
    rows = []
    for s in [int(x) for x in args.shards.split(",")]:
        for design in ("by-key", "by-doc"):
            r = run(design, fps, queries, s)
            rows.append(r)
    assert len({r["matches_found"] for r in rows}) == 1, "designs disagree on the matches"
    cols = [
        ("design", "{:<7}"), ("shards", "{:>6}"), ("shards_touched_per_query", "{:>8.2f}"),
        ("bytes_per_query", "{:>8.0f}"), ("shards_written_per_insert", "{:>6}"),
        ("busiest_shard_us_p50", "{:>8.1f}"), ("busiest_shard_us_p99", "{:>8.1f}"),
        ("cluster_cpu_us_per_query", "{:>9.1f}"), ("stored_max_over_mean", "{:>7.3f}"),
        ("served_max_over_mean", "{:>7.3f}"),
    ]  # fmt: skip
    print(f"N={args.n} fingerprints, {args.queries} queries (half near-duplicates), k={K}, T={T}")
    print("design  shards  touched  B/query  writes  busy p50  busy p99  cpu us/q  stored  served")
    for r in rows:
        print("  ".join(fmt.format(r[c]) for c, fmt in cols))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"n": args.n, "queries": args.queries, "rows": rows}, indent=2) + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
