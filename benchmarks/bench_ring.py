"""Ring benchmark: balance, keys moved on add/remove, lookup speed; uhashring in the same run.

Balance is each node's exact share of the ring (arcs between points, no key sampling noise),
max/mean over the nodes, p95 over ``--sets`` random node-name sets of ``--nodes`` nodes, for a
curve of vnode counts (the curve that sets ``neardup.cluster.ring.DEFAULT_VNODES``). Moves: the exact
ranges :meth:`HashRing.add_node` / ``remove_node`` return, as a share of the ring, against the
ideal ``1/(n+1)``; a key sample checks that no key moves between two unchanged nodes (and the
same for uhashring). Speed: single ``node_for`` calls on string keys, and batched uint64 keys
through ``index_for_many``; uhashring has no batch call, so its "batch" is a loop.

    .venv/bin/python benchmarks/bench_ring.py               # writes benchmarks/results/bench_ring.json
    .venv/bin/python benchmarks/bench_ring.py --sets 10 --quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from neardup.cluster.ring import DEFAULT_VNODES, HashRing  # noqa: E402

try:
    from uhashring import HashRing as UHashRing
except ImportError:  # reported in the output, not fatal
    UHashRing = None


def names_for(rng: np.random.Generator, n: int) -> list[str]:
    # realistic names: host-like strings with random parts
    return [f"node-{rng.integers(1 << 40):010x}.dc{rng.integers(4)}:{8000 + i}" for i in range(n)]


def balance_ours(sets: list[list[str]], vnodes: int) -> dict[str, Any]:
    ratios = []
    t0 = time.perf_counter()
    for names in sets:
        share = np.array(list(HashRing(names, vnodes=vnodes).shares().values()))
        ratios.append(float(share.max() / share.mean()))
    return summarize(ratios) | {"build_s": (time.perf_counter() - t0) / len(sets)}


def uhash_shares(ring: Any) -> np.ndarray:
    keys = ring.runtime._keys  # sorted points (md5, 128-bit)
    owner = ring.runtime._ring
    space = float(2**128)
    share: dict[str, float] = {}
    for i, k in enumerate(keys):
        prev = keys[i - 1] if i else keys[-1] - 2**128
        share[owner[k]] = share.get(owner[k], 0.0) + (k - prev) / space
    return np.array(list(share.values()))


def balance_uhash(sets: list[list[str]]) -> dict[str, Any]:
    ratios = []
    for names in sets:
        share = uhash_shares(UHashRing(nodes=names))
        ratios.append(float(share.max() / share.mean()))
    return summarize(ratios)


def summarize(ratios: list[float]) -> dict[str, Any]:
    return {
        "p50": float(np.percentile(ratios, 50)),
        "p95": float(np.percentile(ratios, 95)),
        "max": float(max(ratios)),
    }


def moves_ours(names: list[str], vnodes: int, sample: np.ndarray) -> dict[str, Any]:
    ring = HashRing(names, vnodes=vnodes)
    n = len(names)
    before = ring.index_for_many(sample)
    nodes_before = ring.nodes
    added = ring.add_node("node-added")
    after_idx = ring.index_for_many(sample)
    a_names = np.array(ring.nodes, dtype=object)[after_idx]
    b_names = np.array(nodes_before, dtype=object)[before]
    cross = int(((a_names != b_names) & (a_names != "node-added")).sum())
    removed = ring.remove_node(names[0])
    return {
        "ideal": 1 / (n + 1),
        "add_moved": sum(r.fraction for r in added),
        "add_ratio": sum(r.fraction for r in added) * (n + 1),
        "remove_moved": sum(r.fraction for r in removed),
        "remove_ideal": 1 / (n + 1),
        "remove_ratio": sum(r.fraction for r in removed) * (n + 1),
        "add_ranges": len(added),
        "moves_between_unchanged_nodes": cross,
    }


def moves_uhash(names: list[str], sample_keys: list[str]) -> dict[str, Any]:
    ring = UHashRing(nodes=names)
    n = len(names)
    before = [ring.get_node(k) for k in sample_keys]
    ring.add_node("node-added")
    after = [ring.get_node(k) for k in sample_keys]
    moved = sum(a != b for a, b in zip(after, before, strict=True)) / len(sample_keys)
    cross = sum(a != b and a != "node-added" for a, b in zip(after, before, strict=True))
    return {
        "ideal": 1 / (n + 1),
        "add_moved_sampled": moved,
        "add_ratio_sampled": moved * (n + 1),
        "moves_between_unchanged_nodes": cross,
    }


def rate(fn: Any, keys: list[Any], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for k in keys:
            fn(k)
        best = min(best, time.perf_counter() - t0)
    return len(keys) / best


def speed(names: list[str], vnodes: int, n_single: int, n_batch: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    keys = [f"doc-{i}" for i in range(n_single)]
    ring = HashRing(names, vnodes=vnodes)
    out["ours_single_per_s"] = rate(ring.node_for, keys)
    arr = np.random.default_rng(7).integers(0, 2**64 - 1, n_batch, dtype=np.uint64, endpoint=True)
    ring.index_for_many(arr[:16])  # compile / load the kernel first
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        ring.index_for_many(arr)
        best = min(best, time.perf_counter() - t0)
    out["ours_batch_keys_per_s"] = n_batch / best
    snap = ring.snapshot()
    snap.indices_for_many(arr[:16], 2)
    t0 = time.perf_counter()
    snap.indices_for_many(arr, 2)
    out["ours_batch_r2_keys_per_s"] = n_batch / (time.perf_counter() - t0)
    if UHashRing is not None:
        u = UHashRing(nodes=names)
        out["uhashring_single_per_s"] = rate(u.get_node, keys)
        # no batch API: a loop over string keys is what a caller would write
        out["uhashring_batch_keys_per_s"] = out["uhashring_single_per_s"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--sets", type=int, default=50)
    ap.add_argument("--curve", default="1024,2048,4096,6144,8192")
    ap.add_argument("--vnodes", type=int, default=DEFAULT_VNODES, help="for moves and speed")
    ap.add_argument("--single", type=int, default=300_000)
    ap.add_argument("--batch", type=int, default=4_000_000)
    ap.add_argument("--quick", action="store_true", help="smaller curve and key counts")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_ring.json"))
    args = ap.parse_args()
    curve = [int(v) for v in args.curve.split(",")]
    if args.quick:
        curve, args.single, args.batch = [args.vnodes], 100_000, 1_000_000
    rng = np.random.default_rng(2026)
    sets = [names_for(rng, args.nodes) for _ in range(args.sets)]

    result: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "load_avg_1m_at_start": os.getloadavg()[0],
        },
        "nodes": args.nodes,
        "sets": args.sets,
        "vnodes_default": DEFAULT_VNODES,
        "uhashring": UHashRing is not None,
    }
    print(f"balance at {args.nodes} nodes, max/mean share, over {args.sets} node-name sets")
    print(f"{'ring':<22}{'p50':>8}{'p95':>8}{'max':>8}{'build s':>9}")
    result["balance"] = {}
    for v in curve:
        b = balance_ours(sets, v)
        result["balance"][f"neardup vnodes={v}"] = b
        print(
            f"{'neardup vnodes=' + str(v):<22}{b['p50']:8.4f}{b['p95']:8.4f}{b['max']:8.4f}"
            f"{b['build_s']:9.3f}"
        )
    if UHashRing is not None:
        b = balance_uhash(sets)
        result["balance"]["uhashring (160/node)"] = b
        print(f"{'uhashring (160/node)':<22}{b['p50']:8.4f}{b['p95']:8.4f}{b['max']:8.4f}")

    sample = np.random.default_rng(3).integers(0, 2**63, 200_000, dtype=np.uint64)
    m = moves_ours(sets[0], args.vnodes, sample)
    result["moves"] = {"neardup": m}
    print(f"\nmoves at {args.nodes} -> {args.nodes + 1} nodes (ideal {m['ideal']:.5f})")
    print(
        f"neardup: add {m['add_moved']:.5f} ({m['add_ratio']:.3f}x ideal, {m['add_ranges']} ranges), "
        f"remove {m['remove_moved']:.5f} ({m['remove_ratio']:.3f}x), "
        f"between unchanged nodes: {m['moves_between_unchanged_nodes']}"
    )
    if UHashRing is not None:
        mu = moves_uhash(sets[0], [f"k{i}" for i in range(100_000)])
        result["moves"]["uhashring"] = mu
        print(
            f"uhashring: add {mu['add_moved_sampled']:.5f} sampled ({mu['add_ratio_sampled']:.3f}x), "
            f"between unchanged nodes: {mu['moves_between_unchanged_nodes']}"
        )

    s = speed(sets[0], args.vnodes, args.single, args.batch)
    result["speed"] = s
    print(f"\nlookups (vnodes={args.vnodes}, {args.nodes} nodes)")
    print(
        f"neardup single {s['ours_single_per_s'] / 1e6:.2f} M/s, batch "
        f"{s['ours_batch_keys_per_s'] / 1e6:.1f} M keys/s (R=2 {s['ours_batch_r2_keys_per_s'] / 1e6:.1f})"
    )
    if UHashRing is not None:
        print(f"uhashring single {s['uhashring_single_per_s'] / 1e6:.2f} M/s (no batch call)")
    result["machine"]["load_avg_1m_at_end"] = os.getloadavg()[0]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
