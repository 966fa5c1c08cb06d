#!/usr/bin/env python3
"""A write group's own MinHash pairs: ``lsh_pairs`` (a round of NumPy calls per band) against
``group_lsh_pairs`` (every band at once, from the group's compact band keys), by group size.

Every write group of the online store that may add documents looks for near pairs inside
itself (``Decider._lsh_intra``): a burst of concurrent single requests decided together (2-10
documents), a batch request (1,000), a bulk load's groups. The texts are the window's generated
posts (``window_corpus``: short posts, news, articles, planted near-duplicates), prepared as
the service prepares them; each size is timed over ``--repeat`` calls, both functions on the
same group, and the pairs are checked equal.

    python benchmarks/bench_group_pairs.py
    python benchmarks/bench_group_pairs.py --sizes 2,10,100,1000 --repeat 50

Prints the table and writes ``benchmarks/results/bench_group_pairs.json`` (with the machine).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
import window_corpus as wc  # noqa: E402

from neardup.online import Deduplicator  # noqa: E402
from neardup.rules.lsh import GROUP_ROWS_MAX, group_lsh_pairs, lsh_pairs  # noqa: E402


def _time(fn: Any, repeat: int) -> tuple[float, float]:
    """(wall, CPU) ms a call, the best of ``repeat`` calls after one warm-up."""
    fn()
    wall, cpu = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return min(wall) * 1e3, min(cpu) * 1e3


def main(argv: list[str] | None = None) -> int:
    # the machine every benchmark's JSON records, and how it is written
    from bench_dedup import write_run

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="2,5,10,100,1000,4000")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_group_pairs.json"
    )
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    if min(sizes) < 2 or args.repeat < 1:
        ap.error("--sizes must be >= 2 and --repeat >= 1")
    texts = wc.stream_texts(wc.WindowSpec(n=max(sizes), seed=args.seed), 0, max(sizes))
    d = Deduplicator.open()
    plan = d._decider.lsh_plan
    rows = []
    print(f"{'group':>7} {'pairs':>7} {'lsh_pairs ms':>13} {'group ms':>9} {'CPU ms':>15} {'x':>6}")
    for n in sizes:
        docs = d.prepare([{"id": f"d{i}", "text": t} for i, t in enumerate(texts[:n])])
        sig, usable, ent = docs.sig, docs.usable, docs.bands
        a, b = lsh_pairs(sig, usable, plan)
        got = group_lsh_pairs(ent, sig, usable, plan)
        if got is None:
            raise SystemExit(
                f"group of {n}: left to lsh_pairs (more than GROUP_ROWS_MAX = {GROUP_ROWS_MAX} "
                "rows, or a band over its budget)"
            )
        if not (np.array_equal(got[0], a) and np.array_equal(got[1], b)):
            raise SystemExit(f"group of {n}: the pairs differ")
        lw, lc = _time(lambda s=sig, u=usable: lsh_pairs(s, u, plan), args.repeat)
        gw, gc_ = _time(lambda e=ent, s=sig, u=usable: group_lsh_pairs(e, s, u, plan), args.repeat)
        rows.append({"group": n, "pairs": int(a.size), "lsh_pairs_ms": round(lw, 3),
                     "lsh_pairs_cpu_ms": round(lc, 3), "group_ms": round(gw, 3),
                     "group_cpu_ms": round(gc_, 3)})  # fmt: skip
        print(
            f"{n:>7,} {a.size:>7,} {lw:>13.3f} {gw:>9.3f} {lc:>7.3f} / {gc_:<6.3f} {lw / gw:>6.1f}"
        )
    d.close()
    fields = {"plan": plan.to_dict(), "repeat": args.repeat, "rows": rows}
    write_run(args.out, "group_pairs", __file__, argv, fields)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
