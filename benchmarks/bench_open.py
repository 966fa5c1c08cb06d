#!/usr/bin/env python3
"""How long ``Deduplicator.open`` takes on an existing store, in a fresh process each time.

Every ``neardup dedup --save/--against`` run, every ``neardup serve`` start and every restart
after a crash opens the store: the manifest and segments are mapped, the log is replayed and
the kernels the first requests need are loaded (``Deduplicator._warm_up``). Each run here is a
new Python process (the kernel cache warm, as after a first run) that imports neardup, opens
the store and exits without closing it, as a crash would (the next open recovers what an
unfinished background merge left; the documents are untouched), timed from inside: the import,
the open's wall and CPU time, and the numba compiles during the open (count and seconds: a warm
cache should compile nothing, ``tests/store/test_store_startup.py``). ``--tree PATH``
(repeatable) times other checkouts in the same run, alternating, so that a busy neighbour
affects all alike; the table shows the median of ``--repeat`` runs.

    python benchmarks/bench_open.py STORE
    python benchmarks/bench_open.py STORE --tree . --tree ../before --repeat 5

Prints the table and writes ``benchmarks/results/bench_open.json`` (with the machine).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
t0 = time.perf_counter()
from numba.core import event
from neardup.online import Deduplicator
t1 = time.perf_counter()
c1 = time.process_time()
compiles = []
class L(event.Listener):
    def on_start(self, ev): compiles.append(time.perf_counter())
    def on_end(self, ev): compiles[-1] = time.perf_counter() - compiles[-1]
event.register("numba:compile", L())
d = Deduplicator.open(sys.argv[2])
t2 = time.perf_counter()
c2 = time.process_time()
n = len(d)
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "open_cpu_s": c2 - c1,
                  "documents": n, "compiles": len(compiles), "compile_s": sum(compiles)}))
sys.stdout.flush()
os._exit(0)  # not closed: a close would flush and merge
"""


def _one(tree: Path, store: Path) -> dict[str, Any]:
    res = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tree), str(store)],
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def main(argv: list[str] | None = None) -> int:
    # the machine every benchmark's JSON records, and how it is written
    from bench_dedup import write_run

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path, help="an existing store's data directory")
    ap.add_argument(
        "--tree", type=Path, action="append", help="a neardup checkout (default: this one)"
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_open.json")
    args = ap.parse_args(argv)
    if not (args.store / "config.json").exists():
        ap.error(f"no store at {args.store} (no config.json)")
    trees = [t.resolve() for t in (args.tree or [ROOT])]
    for t in trees:  # a first open after a change of the sources compiles: not timed
        _one(t, args.store)
    runs: dict[str, list[dict[str, Any]]] = {str(t): [] for t in trees}
    for _ in range(args.repeat):
        for t in trees:
            runs[str(t)].append(_one(t, args.store))
    rows = []
    print(
        f"{'tree':<40} {'documents':>11} {'open s':>7} {'open CPU s':>10} {'compiles':>8} {'import s':>8}"
    )
    for t, rs in runs.items():
        med = {
            k: statistics.median(r[k] for r in rs)
            for k in ("open_s", "open_cpu_s", "import_s", "compile_s")
        }
        row = {
            "tree": t,
            "documents": rs[0]["documents"],
            "median": {k: round(v, 3) for k, v in med.items()},
            "compiles": [r["compiles"] for r in rs],
            "runs": rs,
        }
        rows.append(row)
        print(
            f"{t[-40:]:<40} {rs[0]['documents']:>11,} {med['open_s']:>7.2f} {med['open_cpu_s']:>10.2f} "
            f"{max(r['compiles'] for r in rs):>8} {med['import_s']:>8.2f}"
        )
    fields = {"store": str(args.store), "repeat": args.repeat, "rows": rows}
    write_run(args.out, "open", __file__, argv, fields)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
