"""What the token-mask bound spares and costs: ``check`` on a copy of an ``lsh`` store, in one
process, with the bound on and off in turn (docs/store.md, *Token masks*).

    .venv/bin/python benchmarks/bench_mask_bound.py \
        --store /tmp/bw/n10000000/server/namespaces/default \
        --texts-file /tmp/bw/n10000000/load-throughput.jsonl --skip 200000 \
        --out benchmarks/results/bench_mask_bound_10m.json

Two trees on two stores differ in more than the bound (the stores' own rows, the box's speed
from one process to the next); this compares the bound alone. Each round checks ``--docs``
fresh documents (the next lines of ``--texts-file``, or ``loadgen.window_texts`` posts without
it) in groups of ``--batch``, nothing added, so every round sees the same window; rounds
alternate the bound on and off (off: ``Decider._mask_bound`` answers "could pass" for every
pair, so every row it would have turned down is read and verified), after one warm-up round.
Fresh documents each round, because a row read in one round has its signature and histogram
cached for the next. Reported per round and on average, in µs a document: the process's CPU,
the decision's thread time, the bound's own calls.

Prints a table and writes JSON (``--out``) with the machine, the commit and every figure.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def run(args: argparse.Namespace) -> dict[str, Any]:
    from loadgen import file_texts, window_texts

    from neardup.online import Deduplicator
    from neardup.online import decide as decide_mod

    n = args.docs
    need = (2 * args.rounds + 1) * n
    texts = (
        file_texts(args.texts_file, args.skip + need)[args.skip :]
        if args.texts_file
        else window_texts(need, args.seed)
    )
    if len(texts) < need:
        raise SystemExit(f"--texts-file has {len(texts)} texts after --skip; {need} needed")
    spent: collections.Counter[str] = collections.Counter()
    decider = decide_mod.Decider
    real_bound = decider._mask_bound

    def timed(fn: Any, label: str) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            t0 = time.thread_time_ns()
            try:
                return fn(*a, **k)
            finally:
                spent[label] += time.thread_time_ns() - t0

        return wrapper

    def could_pass(self: Any, buckets: Any, q_t: Any, q_of: Any, *a: Any) -> Any:
        return np.ones(len(q_of), np.bool_)

    decider.decide = timed(decider.decide, "decide")  # type: ignore[method-assign]
    bound_on = timed(real_bound, "bound")
    work = Path(tempfile.mkdtemp(prefix="nd-mask-"))
    rounds: list[dict[str, Any]] = []
    try:
        shutil.copytree(args.store, work / "store")
        d = Deduplicator.open(work / "store", candidates="lsh")
        if d.lsh_plan is None:
            raise SystemExit(f"--store {args.store}: not an lsh store")
        for r in range(2 * args.rounds + 1):
            on = r % 2 == 0  # the warm-up (round 0) with the bound on
            decider._mask_bound = bound_on if on else could_pass  # type: ignore[method-assign]
            spent.clear()
            part = texts[r * n : (r + 1) * n]
            c0 = os.times()
            for i in range(0, n, args.batch):
                docs = [
                    {"id": f"mask-{r}-{j}", "text": part[j]}
                    for j in range(i, min(n, i + args.batch))
                ]
                d.submit("check", docs, inline=True)[0].result()
            c1 = os.times()
            if r:
                rounds.append(
                    {
                        "bound": "on" if on else "off",
                        "cpu_us": (c1.user - c0.user + c1.system - c0.system) / n * 1e6,
                        "decide_us": spent["decide"] / 1e3 / n,
                        "bound_us": spent["bound"] / 1e3 / n,
                    }
                )
        plan = f"{d.lsh_plan.bands} x {d.lsh_plan.rows}"
        rows = len(d)
        d.close()
    finally:
        decider._mask_bound = real_bound  # type: ignore[method-assign]
        shutil.rmtree(work, ignore_errors=True)
    mean = {
        side: {
            k: float(np.mean([x[k] for x in rounds if x["bound"] == side]))
            for k in ("cpu_us", "decide_us", "bound_us")
        }
        for side in ("on", "off")
    }
    return {"plan": plan, "rows in the window": rows, "rounds": rounds, "mean": mean}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--store", required=True, help="an lsh store's data directory (copied, then used)"
    )
    ap.add_argument("--texts-file", help="JSONL whose text fields are checked (default: posts)")
    ap.add_argument("--skip", type=int, default=0, help="lines of --texts-file skipped first")
    ap.add_argument("--seed", type=int, default=77, help="the posts' seed without --texts-file")
    ap.add_argument("--docs", type=int, default=8000, help="documents a round (default 8000)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds each way (default 3)")
    ap.add_argument("--batch", type=int, default=1000, help="documents a group (default 1000)")
    ap.add_argument("--out", help="JSON file to write")
    args = ap.parse_args()
    if not Path(args.store).is_dir():
        ap.error(f"--store {args.store}: not a directory")
    if args.texts_file and not Path(args.texts_file).is_file():
        ap.error(f"--texts-file {args.texts_file}: not a file")
    if args.docs < 1 or args.batch < 1 or args.rounds < 1 or args.skip < 0:
        ap.error("--docs, --batch and --rounds must be positive, --skip at least 0")
    res = run(args)
    print(f"{res['plan']} plan, {res['rows in the window']:,} rows; µs a document")
    print(f"{'round':8s}{'bound':>6s}{'CPU':>10s}{'decide':>10s}{'bound':>10s}")
    for k, x in enumerate(res["rounds"], 1):
        print(
            f"{k:<8d}{x['bound']:>6s}{x['cpu_us']:10.1f}{x['decide_us']:10.1f}{x['bound_us']:10.1f}"
        )
    for side, m in res["mean"].items():
        print(
            f"{'mean':8s}{side:>6s}{m['cpu_us']:10.1f}{m['decide_us']:10.1f}{m['bound_us']:10.1f}"
        )
    if args.out:
        from bench_dedup import machine, write_results
        from trees import commit_of

        write_results(
            Path(args.out),
            {
                "benchmark": "bench_mask_bound",
                "issue": 36,
                "machine": machine(load_average=True),
                "commit": commit_of(ROOT),
                "params": vars(args),
                **res,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
