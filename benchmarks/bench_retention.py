#!/usr/bin/env python3
"""Retention as the clock moves on: a window of ``--n`` generated short posts over 47 hours in
hourly partitions (an ``lsh`` store, seeded keep-first in one ``dedup_into`` call), then
``--hours`` of the writer's retention pass every ``--step`` seconds of a moved clock, each pass
timed (``Store.expire``: the rows past the window deleted from SQLite, and a segment dropped
when its partitions have ended; ended hours are merged into blocks of a few). What a check waits behind is the longest pass.

    python benchmarks/bench_retention.py --n 1000000

``bench_window.py`` measures the drop with its clock moved an hour at a time (each drop then
deletes the hour's rows at once: the worst case); this one moves it as time does. Prints a
table and writes ``benchmarks/results/bench_retention_<n>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_dedup import machine, write_corpus  # noqa: E402

HOUR = 3600.0


def main(argv: list[str] | None = None) -> int:
    import orjson

    from neardup.incremental import dedup_into
    from neardup.online import Deduplicator

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="generated short posts")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--hours", type=float, default=2.0, help="hours of clock moved")
    ap.add_argument("--step", type=float, default=10.0, help="seconds between retention passes")
    ap.add_argument("--work", type=Path, default=None, help="keeps the corpus between runs")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)

    work = a.work or Path(tempfile.mkdtemp(prefix="nd-retention-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / f"short-{a.n}-{a.seed}.jsonl"
    if not corpus.exists():
        write_corpus(corpus, "short", a.n, a.seed, 0.1)
    docs = [orjson.loads(x) for x in corpus.read_bytes().splitlines()]
    now = time.time()
    span = 47 * HOUR  # the window is 48 h: its oldest hour leaves first
    times = [now - span + span * i / len(docs) for i in range(len(docs))]
    store = work / "store"
    shutil.rmtree(store, ignore_errors=True)
    t = time.perf_counter()
    d = Deduplicator.open(store, retention=48 * HOUR, partition_seconds=HOUR)
    dedup_into(d, [x["id"] for x in docs], [x["text"] for x in docs], times=times)
    d.compact()
    d.close()
    build_s = time.perf_counter() - t
    del docs, times

    clock = [now + HOUR]  # an hour on: the oldest hour is at the edge of the window
    d = Deduplicator.open(store, partition_seconds=HOUR, clock=lambda: clock[0])
    st = d.store
    segments = int(st.stats()["segments"])
    before = len(d)
    passes: list[float] = []
    drops: list[float] = []
    for _ in range(int(a.hours * HOUR / a.step)):
        clock[0] += a.step
        dropped = int(st.stats()["dropped_partitions"])
        w = time.perf_counter()
        st.expire(clock[0] - 48 * HOUR)
        ms = 1e3 * (time.perf_counter() - w)
        (drops if int(st.stats()["dropped_partitions"]) != dropped else passes).append(ms)
    after = len(d)
    d.close()
    passes.sort()
    row = {
        "documents_before": before,
        "documents_after": after,
        "segments": segments,
        "passes": len(passes),
        "pass_p50_ms": round(passes[len(passes) // 2], 2) if passes else None,
        "pass_max_ms": round(passes[-1], 2) if passes else None,
        "drops_ms": [round(x, 2) for x in drops],
        "rows_per_hour": round(a.n / 47),
        "build_s": round(build_s, 1),
    }
    print(
        f"window      {before:,} documents in {segments} segments of hourly partitions (built in {build_s:.0f} s)"
    )
    print(
        f"passes      {len(passes)} every {a.step:g} s: p50 {row['pass_p50_ms']} ms, max {row['pass_max_ms']} ms"
    )
    print(
        f"drops       {len(drops)} passes that dropped a segment: {', '.join(f'{x:.1f}' for x in drops)} ms"
    )
    print(f"after       {after:,} documents ({before - after:,} left the window)")
    doc = {
        "benchmark": "retention",
        "command": "python benchmarks/bench_retention.py " + " ".join(argv or sys.argv[1:]),
        "machine": {**machine(), "load": list(os.getloadavg())},
        "n": a.n,
        "hours": a.hours,
        "step_s": a.step,
        **row,
    }
    dest = a.out or ROOT / "benchmarks" / "results" / f"bench_retention_{a.n}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {dest}")
    if a.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
