"""Cluster benchmark (issue 27): check-and-insert through ClusterClient on 1, 2 and 3 local nodes.

Each node is a real ``neardup serve`` process on a loopback port (fresh data directories).
Per node count: documents/s and request latency p50/p99 of ``check_and_insert`` for single
documents (``--single`` requests) and for batches (``--batch`` documents per request), with
R = min(2, nodes). On one node, also the check-only and insert-only rates: the per-node
figures the 16-machine calculation uses. Then a 4th node is added to the 3-node cluster and
:func:`rebalance` runs: copies written against the ideal ``N * R / 4``, and every document is
checked to be on exactly its R targets and found exactly once by a fan-out check (documents
of the 1- and 2-node runs are first moved to their 3-node targets, so the add is measured alone).

The machine matters: all nodes and the client share its cores, so more nodes on one machine
do not add CPU; the figures are per-node costs, not a scaling curve.

    .venv/bin/python benchmarks/bench_cluster.py [--docs 3000 --single 300 --batch 50]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from neardup.cluster import ClusterClient, ClusterConfig, NodeSpec, rebalance  # noqa: E402
from neardup.service.client import Client  # noqa: E402
from neardup.service.testing import ServerProcess  # noqa: E402

TOKEN = "bench-cluster"
WORDS = [f"w{i}" for i in range(5000)]


def text(i: int, n: int = 80) -> str:
    rng = np.random.default_rng(i)
    return " ".join(WORDS[j] for j in rng.integers(0, len(WORDS), n))


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(xs, q) * 1e3) if xs else float("nan")


def run_requests(fn: Any, batches: list[list[dict[str, Any]]]) -> dict[str, Any]:
    lat: list[float] = []
    t0 = time.perf_counter()
    n = 0
    for b in batches:
        t = time.perf_counter()
        fn(b if len(b) > 1 else b[0])
        lat.append(time.perf_counter() - t)
        n += len(b)
    wall = time.perf_counter() - t0
    return {
        "docs_per_s": n / wall,
        "p50_ms": pct(lat, 50),
        "p99_ms": pct(lat, 99),
        "requests": len(lat),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=3000, help="documents in batched requests")
    ap.add_argument("--single", type=int, default=300, help="single-document requests")
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_cluster.json"))
    args = ap.parse_args()
    result: dict[str, Any] = {
        "machine": {"cores": os.cpu_count(), "load_avg_1m_at_start": os.getloadavg()[0]},
        "runs": [],
    }
    with tempfile.TemporaryDirectory(prefix="neardup-bench-cluster-") as tmp:
        procs = [ServerProcess(Path(tmp) / f"n{i}", env={"NEARDUP_TOKEN": TOKEN}) for i in range(4)]
        try:
            for p in procs:
                p.start()
            base = 0
            for n_nodes in (1, 2, 3):
                # fresh ids per run; earlier runs' documents stay on their nodes (other ids)
                cfg = ClusterConfig(
                    tuple(NodeSpec(f"n{i}", procs[i].url) for i in range(n_nodes)),
                    replicas=min(2, n_nodes),
                )
                with ClusterClient(cfg, token=TOKEN, timeout=30) as cc:
                    single = [
                        [{"id": f"s{base + i}", "text": text(base + i)}] for i in range(args.single)
                    ]
                    base += args.single
                    batched = [
                        [
                            {"id": f"b{base + i + j}", "text": text(base + i + j)}
                            for j in range(args.batch)
                        ]
                        for i in range(0, args.docs, args.batch)
                    ]
                    base += args.docs
                    row = {
                        "nodes": n_nodes,
                        "replicas": cfg.replicas,
                        "single": run_requests(cc.check_and_insert, single),
                        "batched": run_requests(cc.check_and_insert, batched),
                    }
                result["runs"].append(row)
                print(
                    f"{n_nodes} node(s), R={cfg.replicas}: single {row['single']['docs_per_s']:7.0f} docs/s "
                    f"p50 {row['single']['p50_ms']:6.1f} p99 {row['single']['p99_ms']:6.1f} ms | "
                    f"batch of {args.batch} {row['batched']['docs_per_s']:7.0f} docs/s "
                    f"p99 {row['batched']['p99_ms']:6.1f} ms"
                )
            # per-node figures on node 0 alone (batched), for the calculation
            with Client(procs[0].url, token=TOKEN, timeout=30) as c:
                docs = [
                    [
                        {"id": f"p{base + i + j}", "text": text(base + i + j)}
                        for j in range(args.batch)
                    ]
                    for i in range(0, args.docs, args.batch)
                ]
                base += args.docs
                per_node = {
                    "check": run_requests(c.check, docs),
                    "insert": run_requests(c.insert, docs),
                }
            result["per_node"] = per_node
            c_check = per_node["check"]["docs_per_s"]
            c_ins = per_node["insert"]["docs_per_s"]
            # by document with fan-out: every node sees every check; each document is written
            # on R nodes. Per document one node spends 1/c_check on its check and R/S of the
            # cluster's writes land on it.
            calc = {}
            for s in (1, 2, 3, 16):
                r = min(2, s)
                per_doc_node_s = 1 / c_check + (r / s) / c_ins
                calc[str(s)] = 1 / per_doc_node_s
            result["calculated_docs_per_s"] = calc
            print(
                f"per node: check {c_check:.0f} docs/s, insert {c_ins:.0f} docs/s; calculated "
                "check-and-insert docs/s on S machines: "
                + ", ".join(f"S={s}: {v:.0f}" for s, v in calc.items())
            )
            # rebalance: add the 4th node to the 3-node cluster
            old = ClusterConfig(
                tuple(NodeSpec(f"n{i}", procs[i].url) for i in range(3)), replicas=2
            )
            new = old.with_node(NodeSpec("n3", procs[3].url))
            # first put every document of the runs above on its 2 targets of the 3-node ring
            # (the 1- and 2-node runs placed theirs by other rings), so the add is measured alone
            rebalance(old, token=TOKEN, page=2000)
            t0 = time.perf_counter()
            rep = rebalance(new, previous=old, token=TOKEN, page=2000)
            took = time.perf_counter() - t0
            with ClusterClient(new, token=TOKEN, timeout=30) as cc:
                ideal = rep.documents * 2 / 4
                # every document exactly on its targets, and found once by a fan-out check
                wrong = 0
                holders: dict[str, set[str]] = {}
                for i in range(4):
                    with Client(procs[i].url, token=TOKEN) as c:
                        after = ""
                        while True:
                            page = c._request("GET", f"/v1/export?after={after}&limit=5000")
                            for d in page["documents"]:
                                holders.setdefault(d["id"], set()).add(f"n{i}")
                            if page["next"] is None:
                                break
                            after = page["next"]
                for doc_id, have in holders.items():
                    if have != set(cc.targets(doc_id)):
                        wrong += 1
                sample = sorted(holders)[:: max(1, len(holders) // 200)]
                found_once = 0
                for doc_id in sample:
                    k = int(doc_id[1:])
                    dec = cc.check({"id": "probe", "text": text(k)})
                    found_once += [m.id for m in dec.matches].count(doc_id) == 1
            result["rebalance"] = {
                "documents": rep.documents,
                "copied": rep.copied,
                "deleted": rep.deleted,
                "ideal_copies": ideal,
                "copied_over_ideal": rep.copied / ideal if ideal else None,
                "seconds": took,
                "documents_not_on_exactly_their_targets": wrong,
                "checked_found_exactly_once": f"{found_once}/{len(sample)}",
            }
            print(
                f"add 4th node: {rep.documents} documents, {rep.copied} copies "
                f"({rep.copied / ideal:.3f}x ideal {ideal:.0f}), {rep.deleted} deleted in {took:.1f} s; "
                f"not on exactly their targets: {wrong}; found exactly once: {found_once}/{len(sample)}"
            )
        finally:
            for p in procs:
                p.kill()
    result["machine"]["load_avg_1m_at_end"] = os.getloadavg()[0]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
