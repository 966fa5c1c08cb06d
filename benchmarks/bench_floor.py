"""The latency floors of a single-document request on this machine, with no neardup in it.

Two no-op apps (``benchmarks/noop_app.py``) under uvicorn with the event loop and HTTP parser
``neardup serve`` picks, each loaded by ``loadgen.py --mode latency`` at each ``--rates``
requests a second, one after the other:

* ``http``: the app reads the body and answers: what the machine, uvicorn and the load
  generator cost on their own (``bench_service.py`` measures the same in its runs);
* ``durable``: the app also appends the body to a preallocated file in ``--dir`` and answers
  after an ``fdatasync`` that started after the append, with group commit (the requests that
  arrive during a sync share the next one), as the store's log does: what a *durable*
  check-and-insert costs on this disk before any search, decision or SQLite.

A service's single-request p99 cannot be below the durable floor's on the same disk; the
issues' targets (p99 <= 10 ms at 500 requests/s, <= 5 ms at 1,000) are judged against it.
``--dir`` must be on the filesystem the store would use (default: the temp folder).

Example::

    python benchmarks/bench_floor.py --rates 500,1000 --duration 20
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_dedup import machine, write_results  # noqa: E402
from bench_service import floor, floor_cpu_ms  # noqa: E402

KINDS = ("http", "durable")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Both floors at every rate: {"rates": {rate: {kind: loadgen's answer + server CPU}}}."""
    work = Path(tempfile.mkdtemp(prefix="bench-floor-", dir=args.dir))
    out: dict[str, Any] = {"rates": {}}
    try:
        for rate in args.rates:
            one = argparse.Namespace(
                rate=rate,
                latency_duration=args.duration,
                latency_warmup=args.warmup,
                words=args.words,
                docs_seed=args.seed,
                texts="window",
            )
            got: dict[str, Any] = {}
            for kind in KINDS:
                log = str(work / f"floor-{int(rate)}.log") if kind == "durable" else None
                t = time.perf_counter()
                got[kind] = floor(one, log=log)
                got[kind]["wall_s"] = time.perf_counter() - t
                print(f"  {rate:g}/s {kind}: {summary(got[kind])}", file=sys.stderr)
            out["rates"][str(int(rate))] = got
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def summary(r: dict[str, Any]) -> str:
    lat = r["latency_from_schedule"]
    return (
        f"p50 {lat['p50_ms']:.2f} / p99 {lat['p99_ms']:.2f} / max {lat['max_ms']:.2f} ms, "
        f"{r['requests']} requests, server CPU {floor_cpu_ms(r):.3f} ms each"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--rates",
        type=lambda s: [float(x) for x in s.split(",")],
        default=[500.0, 1000.0],
        help="requests a second, comma-separated (default 500,1000)",
    )
    p.add_argument("--duration", type=float, default=20.0, help="seconds measured at each rate")
    p.add_argument("--warmup", type=float, default=3.0, help="seconds at the rate before that")
    p.add_argument("--words", type=int, default=40, help="loadgen --words (random texts only)")
    p.add_argument("--seed", type=int, default=11, help="the load's texts' seed")
    p.add_argument(
        "--dir", default=None, help="folder for the durable floor's file (default: temp folder)"
    )
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_floor.json")
    args = p.parse_args()
    if args.duration <= 0 or args.warmup < 0 or any(r <= 0 for r in args.rates):
        p.error("--duration and --rates must be positive and --warmup at least 0")
    res = run(args)
    print(f"{'rate':>6} {'floor':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'CPU ms':>7}")
    for rate, kinds in res["rates"].items():
        for kind, r in kinds.items():
            lat = r["latency_from_schedule"]
            print(
                f"{rate:>6} {kind:>8} {lat['p50_ms']:>8.2f} {lat['p99_ms']:>8.2f} "
                f"{lat['max_ms']:>8.2f} {floor_cpu_ms(r):>7.3f}"
            )
    write_results(
        args.out,
        {"benchmark": "bench_floor", "params": {**vars(args), "out": str(args.out)}, **res,
         "machine": machine(load_average=True)},
    )  # fmt: skip


if __name__ == "__main__":
    main()
