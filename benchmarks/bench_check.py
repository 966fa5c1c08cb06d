#!/usr/bin/env python3
"""What a store check costs per document: an incremental run's step 1, timed apart (and, with
``--op check_and_add``, what the writer's durable check-and-insert of a batch costs), against
one store or, for how the cost grows with the store, several.

``neardup dedup NEW --against/--save STORE`` checks the new documents against the store in
chunks (``neardup.incremental.stored.CHUNK`` documents a write group, read only), while the
next chunk is prepared. This benchmark times only the checks: in a fresh process per run, it
opens ``STORE``, prepares the documents of ``--input`` (a JSONL of ``id``/``text``; the
first ``--n``) in chunks of ``--chunk``, checks one chunk to warm up (not timed), sets the
garbage collector as the console script does (``--collector settled``: the objects so far
frozen, full collections rare; ``default``: Python's own settings) and then checks every chunk
(``Deduplicator.submit_prepared("check", ...)``), timing wall and CPU time per document. A
check changes nothing, so the runs share the store; ``--op check_and_add`` decides and adds
the chunks instead (as the service's batches of ``--chunk`` documents, acknowledged after the
log's fsync), each run on a fresh copy of ``STORE`` in a temporary folder beside it (the copy
is not timed), and ``duplicates`` counts those not added. ``--tree PATH`` (repeatable) times other
checkouts in the same run, alternating, so that a busy neighbour affects all alike; the table
shows the median and the range of ``--repeat`` runs, and the duplicates found (equal across
trees unless a change altered decisions). Several stores (e.g. the same stream loaded to
different sizes) are checked with the same documents one after another, a row each; beside
the times, what the store's counters (``Deduplicator.stats()``) say the check did per
document: the stored rows whose sketches were compared (band candidates), those the sketches
let through, and the SimHash hits turned down by the length, mask and histogram bounds. They
grow with the store where unrelated posts share band keys.

    python benchmarks/bench_check.py STORE --input day9.jsonl
    python benchmarks/bench_check.py STORE --input day9.jsonl --tree . --tree ../before --repeat 3
    python benchmarks/bench_check.py STORE --input day9.jsonl --op check_and_add --chunk 1000
    python benchmarks/bench_check.py SMALL MEDIUM LARGE --input later.jsonl --n 200000 \
        --chunk 25000 --repeat 2

Prints the table and writes ``benchmarks/results/bench_check.json`` (with the machine).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import gc, json, os, sys, time
sys.path.insert(0, sys.argv[1])
from neardup.online import Deduplicator
store, src, n, chunk, collector, op = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7]
verify_meta = sys.argv[8] == "1"
docs = []
with open(src, encoding="utf-8") as f:
    for line in f:
        if len(docs) == n:
            break
        r = json.loads(line)
        docs.append({"id": str(r["id"]), "text": r["text"]})
d = Deduplicator.open(store, verify_meta=verify_meta)
stored = len(d)
t = time.perf_counter()
batches = [d.prepare(docs[i : i + chunk]) for i in range(0, len(docs), chunk)]
prepare_s = time.perf_counter() - t
d.submit_prepared("check", d.prepare(docs[:chunk])).result()  # warm-up (read only), not timed
del docs
if collector == "settled":
    gc.collect()
    gc.freeze()
    gc.set_threshold(700, 10, 1000)  # neardup._gc.LONG_RUN_THRESHOLDS
before = d.stats()
t, c = time.perf_counter(), time.process_time()
dups = 0
for b in batches:
    dups += sum(x.duplicate for x in d.submit_prepared(op, b).result())
wall, cpu = time.perf_counter() - t, time.process_time() - c
after = d.stats()
counters = {k: after[k] - before.get(k, 0) for k in after  # (gauges do not move)
            if type(after[k]) is int and k.endswith(("_rows", "_hits"))
            and after[k] != before.get(k, 0)}
m = sum(len(b) for b in batches)
print(json.dumps({"documents": m, "stored": stored, "duplicates": dups, "prepare_s": prepare_s,
                  "wall_us_per_doc": wall / m * 1e6, "cpu_us_per_doc": cpu / m * 1e6,
                  "counters": counters}))
sys.stdout.flush()
os._exit(0)  # not closed: nothing to write
"""


def _one(tree: Path, store: Path, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-check-", dir=store.parent) as tmp:
        if args.op == "check_and_add":  # a fresh copy: the run adds to it
            copy = Path(tmp) / "store"
            shutil.copytree(store, copy, ignore=shutil.ignore_patterns("LOCK"))
            store = copy
        res = subprocess.run(
            [sys.executable, "-c", _CHILD, str(tree), str(store), str(args.input),
             str(args.n), str(args.chunk), args.collector, args.op, str(int(args.verify_meta))],
            capture_output=True, text=True, check=True, timeout=3600,
        )  # fmt: skip
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def main(argv: list[str] | None = None) -> int:
    # the machine every benchmark's JSON records, and how it is written
    from bench_dedup import machine, write_results
    from trees import TREE_HELP, alternate, checkouts

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "store",
        type=Path,
        nargs="+",
        help="existing stores' data directories (several: the same documents checked against "
        "each, a row each)",
    )
    ap.add_argument("--input", type=Path, required=True, help="JSONL of id/text to check")
    ap.add_argument("--n", type=int, default=100_000, help="documents of --input checked")
    ap.add_argument("--chunk", type=int, default=10_000, help="documents per check")
    ap.add_argument("--collector", choices=["settled", "default"], default="settled")
    ap.add_argument("--op", choices=["check", "check_and_add"], default="check")
    ap.add_argument("--tree", type=Path, action="append", help=TREE_HELP)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--no-verify-meta",
        dest="verify_meta",
        action="store_false",
        help="open each store without SQLite's quick_check (neardup serve --no-verify-meta): "
        "at 50 M it reads a 23 GB database for minutes in every run",
    )
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_check.json"
    )
    args = ap.parse_args(argv)
    for store in args.store:
        if not (store / "config.json").exists():
            ap.error(f"no store at {store} (no config.json)")
    if not args.input.is_file():
        ap.error(f"no input file {args.input}")
    if args.n < 1 or args.chunk < 1 or args.repeat < 1:
        ap.error("--n, --chunk and --repeat must be positive")
    trees = checkouts(args.tree)
    rows = []
    print(
        f"{'tree':<30} {'stored':>10} {'checked':>8} {'dups':>6} "
        f"{'wall µs/doc':>16} {'CPU µs/doc':>16} {'sketch rows/doc':>15} {'passed/doc':>10}"
    )
    for store in args.store:

        def run(tree: Path, _round: int, store: Path = store) -> dict[str, Any]:
            return _one(tree, store, args)

        # warm: a first run after a change of the sources compiles; not timed
        runs = alternate(trees, args.repeat, run, warm=True)
        for t, rs in runs.items():
            rows.append(_row(t, store, rs))
    write_results(args.out, {
        "benchmark": "check",
        "command": "python benchmarks/bench_check.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "stores": [str(s) for s in args.store],
        "input": str(args.input),
        "chunk": args.chunk,
        "op": args.op,
        "collector": args.collector,
        "verify_meta": args.verify_meta,
        "repeat": args.repeat,
        "rows": rows,
        "machine": machine(load_average=True),
    })  # fmt: skip
    return 0


def _row(tree: str, store: Path, rs: list[dict[str, Any]]) -> dict[str, Any]:
    """One tree's runs against one store: the JSON row, printed as a line of the table."""
    w = [r["wall_us_per_doc"] for r in rs]
    c = [r["cpu_us_per_doc"] for r in rs]
    n = rs[0]["documents"]
    counters = rs[0].get("counters", {})  # the same work in every run (nothing changes)
    per_doc = {k: round(v / n, 3) for k, v in counters.items()}
    print(
        f"{tree[-30:]:<30} {rs[0]['stored']:>10,} {n:>8,} {rs[0]['duplicates']:>6,} "
        f"{statistics.median(w):>6.1f} ({min(w):.1f}-{max(w):.1f}) "
        f"{statistics.median(c):>6.1f} ({min(c):.1f}-{max(c):.1f}) "
        f"{per_doc.get('sketch_checked_rows', 0):>15.2f} {per_doc.get('sketch_passed_rows', 0):>10.3f}"
    )
    return {
        "tree": tree,
        "store": str(store),
        "stored": rs[0]["stored"],
        "documents": n,
        "duplicates": sorted({r["duplicates"] for r in rs}),
        "wall_us_per_doc": {"median": round(statistics.median(w), 2), "min": round(min(w), 2),
                            "max": round(max(w), 2)},
        "cpu_us_per_doc": {"median": round(statistics.median(c), 2), "min": round(min(c), 2),
                           "max": round(max(c), 2)},
        "counters_per_doc": per_doc,
        "runs": rs,
    }  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
