#!/usr/bin/env python3
"""The online store's verification calls: batches of check-and-inserts of generated short posts
against a store of them, with the writer's CPU per document and how the candidate pairs reach
the verifier (calls for the whole group, calls for one document); optionally against another
source tree in the same run.

    python benchmarks/bench_verify_calls.py
    python benchmarks/bench_verify_calls.py --stored 300000 --queries 100000 --baseline /tmp/nd-base

Short posts of ``bench_dedup.generate("short", ...)`` hold texts made mostly of one frequent
token: each shares band keys with hundreds of stored posts and duplicates few of them, so it
verifies nearly all of its candidates (``Decider._prefetch``). This loads ``--stored`` posts
into a fresh store (``Deduplicator.load``), prepares ``--queries`` other posts (10 % of them
copies, half edited) in batches of ``--batch``, then times their check-and-inserts (submitted
in order, the writer grouping them as it does under load) by the process's CPU time. The
verifier's entry points are wrapped to count their calls and pairs.

``--baseline TREE`` runs the same in a child process from another source tree (e.g. ``git
archive <commit> neardup | tar -x -C TREE``: its ``neardup`` is imported), alternating with this tree for ``--rounds``
rounds: the two see the same machine load. Writes ``benchmarks/results/bench_verify_calls.json``
with the machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def measure(
    tree: str, stored: int, queries: int, batch: int, seed: int, query_seed: int
) -> dict[str, Any]:
    """One round in this process, with the neardup of the source tree ``tree``."""
    sys.path.insert(0, str(HERE))
    from bench_dedup import generate  # (puts this checkout first on sys.path)

    sys.path.insert(0, tree)
    import neardup

    if Path(neardup.__file__).resolve().parent != Path(tree, "neardup").resolve():
        raise SystemExit(f"imported {neardup.__file__}, not the neardup of {tree}")
    from neardup.online import Deduplicator
    from neardup.online.decide import Decider

    calls = {"group_calls": 0, "group_pairs": 0, "document_calls": 0, "document_pairs": 0}
    verify, verify_pairs = Decider.verify, Decider._verify_pairs

    def per_document(self: Any, text: str, chunk: list[Any]) -> Any:
        calls["document_calls"] += 1
        calls["document_pairs"] += len(chunk)
        return verify(self, text, chunk)

    def per_group(self: Any, texts: Any, a: list[int], b: list[int], d: list[int]) -> Any:
        calls["group_calls"] += 1
        calls["group_pairs"] += len(a)
        return verify_pairs(self, texts, a, b, d)

    Decider.verify = per_document  # type: ignore[method-assign]
    Decider._verify_pairs = per_group  # type: ignore[method-assign]
    base = generate("short", stored, seed, 0.1)
    new = generate("short", queries, query_seed, 0.1)
    with (
        tempfile.TemporaryDirectory(prefix="nd-verify-calls-") as tmp,
        Deduplicator.open(Path(tmp) / "store") as d,
    ):
        t = time.perf_counter()
        for k in range(0, stored, 100_000):
            d.load([{"id": f"s{i}", "text": x} for i, x in enumerate(base[k : k + 100_000], k)])
        load_s = time.perf_counter() - t
        docs = [{"id": f"q{i}", "text": x} for i, x in enumerate(new)]
        preps = [d.prepare(docs[k : k + batch]) for k in range(0, queries, batch)]
        for k in calls:
            calls[k] = 0
        c0, t0 = time.process_time(), time.perf_counter()
        futures = [d.submit_prepared("check_and_add", p) for p in preps]
        results = [f.result() for f in futures]
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    return {
        "neardup": str(Path(neardup.__file__).parent),
        "stored": stored,
        "queries": queries,
        "load_s": round(load_s, 1),
        "cpu_us_per_doc": round(cpu / queries * 1e6, 1),
        "wall_us_per_doc": round(wall / queries * 1e6, 1),
        "duplicates": sum(x.duplicate for r in results for x in r),
        **calls,
    }


def _child(tree: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable, __file__, "--child", tree, "--stored", str(args.stored), "--queries",
        str(args.queries), "--batch", str(args.batch), "--seed", str(args.seed), "--query-seed",
        str(args.query_seed),
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stored", type=int, default=900_000, help="posts loaded into the store")
    p.add_argument("--queries", type=int, default=30_000, help="posts checked and inserted")
    p.add_argument("--batch", type=int, default=1000, help="documents per check-and-insert")
    p.add_argument("--seed", type=int, default=5, help="seed of the stored posts")
    p.add_argument("--query-seed", type=int, default=78, help="seed of the posts checked")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--baseline", default=None, help="another source tree, run beside this one")
    p.add_argument("--out", type=Path, default=HERE / "results" / "bench_verify_calls.json")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        row = measure(args.child, args.stored, args.queries, args.batch, args.seed, args.query_seed)
        print(json.dumps(row))
        return 0
    sys.path.insert(0, str(HERE))
    from bench_dedup import machine

    trees = {"this tree": str(HERE.parent)}
    if args.baseline:
        trees["baseline"] = args.baseline
    rows = []
    for r in range(args.rounds):
        for name, tree in trees.items():
            row = {"tree": name, "round": r, **_child(tree, args)}
            rows.append(row)
            print(
                f"{name:>10} round {r}: {row['cpu_us_per_doc']:6.1f} µs CPU a document "
                f"({row['wall_us_per_doc']:.1f} wall), verification calls: "
                f"{row['group_calls']:,} for groups ({row['group_pairs']:,} pairs), "
                f"{row['document_calls']:,} for one document ({row['document_pairs']:,} "
                f"pairs); {row['duplicates']:,} duplicates",
                flush=True,
            )
    best = {name: min(x["cpu_us_per_doc"] for x in rows if x["tree"] == name) for name in trees}
    print("best µs CPU a document:", ", ".join(f"{k} {v}" for k, v in best.items()))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "benchmark": "bench_verify_calls",
                "machine": machine(load_average=True),
                "params": {k: v for k, v in vars(args).items() if k not in ("out", "child")},
                "rows": rows,
                "best_cpu_us_per_doc": best,
            },
            indent=1,
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
