#!/usr/bin/env python3
"""Single checks while the store writes a large file: a segment merge built beside a steady
stream of ``check_and_add`` requests, in process.

A merge (or a memtable flush, or a bulk load) writes hundreds of MB of segment files. Written
whole and then fsynced, they sit in the page cache as dirty pages until that fsync (or the
kernel's writeback) sends them to the disk at once; a request's log ``fdatasync`` issued
meanwhile queues behind them. This benchmark measures what a single request waits then:

1. copies ``--store`` (a data directory's namespace, e.g. ``bench_window.py --keep``'s
   ``server/namespaces/default``) and ``sync``s the copy's dirty pages to disk first (else the
   copy's own writeback is what the requests wait behind);
2. opens it, warms up, then sends single ``check_and_add`` requests at ``--rate`` per second
   from one thread (open loop: latency from the scheduled send time) for ``--before`` s, while
   a merge of the store's segments (``--merge`` of them, the largest; ``Store.build_merged``,
   what compaction runs on its thread) is built, and for ``--after`` s after it;
3. discards the merge's output (not installed: every run measures the same store).

Per phase (before, during the merge, after): checks, p50 / p99 / max latency, the log's
fdatasyncs (count, the slowest, those over 50 ms) from the writer's counters. The merge's
seconds and bytes written are reported. Each ``--tree`` runs in its own child process, the
trees alternated over ``--rounds`` rounds (medians reported).

    .venv/bin/python benchmarks/bench_write_stall.py --store DIR/n1000000/server/namespaces/default \\
        --tree /tmp/before --tree . --rounds 3 --out benchmarks/results/bench_write_stall.json

Prints a table and writes the JSON (machine, commits, every run). A faster disk shortens the
stall; a larger merge (a bigger window's segments) lengthens it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from trees import (  # noqa: E402
    add_child_options,
    alternate,
    checkouts,
    medians,
    run_child,
    write_runs,
)


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _median(rows: list[dict[str, Any]], key: str) -> float | None:
    """The median of ``key`` over the rows that have one (a phase without checks has none)."""
    got = [r[key] for r in rows if r[key] is not None]
    return medians([{key: x} for x in got], (key,))[key] if got else None


PHASES = ("before", "merge", "after")


def _child(args: argparse.Namespace) -> dict[str, Any]:
    """The run in this process (the tree on ``sys.path``)."""
    from loadgen import percentiles, window_texts

    import neardup
    from neardup.online import Deduplicator

    work = Path(tempfile.mkdtemp(prefix="nd-stall-", dir=args.work))
    try:
        store = work / "store"
        shutil.copytree(args.store, store)
        os.sync()  # the copy's dirty pages are not what the requests should wait behind
        d = Deduplicator.open(store)
        st = d.store
        # texts for the phases and a merge of up to two minutes
        n_total = int(args.rate * (args.before + args.after + 120)) + args.warm_up
        texts = window_texts(n_total, args.seed)
        nxt = [0]

        def one() -> None:
            i = nxt[0]
            nxt[0] += 1
            fut, _ = d.submit(
                "check_and_add", [{"id": f"stall-{i}", "text": texts[i]}], inline=True
            )
            fut.result()

        for _ in range(args.warm_up):  # warm-up: caches, the memtable's buffer
            one()
        lat: list[tuple[float, float]] = []  # (scheduled, latency)
        stop = threading.Event()

        def checker() -> None:
            gap = 1.0 / args.rate
            t0 = time.perf_counter()
            k = 0
            while not stop.is_set() and nxt[0] < n_total:
                due = t0 + k * gap
                now = time.perf_counter()
                if due > now:
                    time.sleep(due - now)
                one()
                lat.append((due, time.perf_counter() - due))
                k += 1

        marks: dict[str, float] = {}
        syncs: dict[str, dict[str, Any]] = {}

        def wal() -> dict[str, Any]:
            s = d.stats()
            return {k: s.get(k) for k in ("wal_syncs", "wal_sync_seconds", "wal_slow_syncs")}

        th = threading.Thread(target=checker, daemon=True)
        syncs["start"] = wal()
        marks["start"] = time.perf_counter()
        th.start()
        time.sleep(args.before)
        segs = sorted(st.segments, key=lambda s: -len(s.segment))[: args.merge]
        rows = sum(len(s.segment) for s in segs)
        syncs["merge_start"] = wal()
        marks["merge_start"] = time.perf_counter()
        merged = st.build_merged(list(segs))
        marks["merge_end"] = time.perf_counter()
        syncs["merge_end"] = wal()
        written = 0
        if merged is not None:
            for suffix in ("", ".hidx"):
                p = merged.segment.path.with_name(merged.segment.path.name + suffix)
                written += p.stat().st_size if p.exists() else 0
        time.sleep(args.after)
        stop.set()
        th.join()
        marks["end"] = time.perf_counter()
        syncs["end"] = wal()
        if merged is not None:
            st.discard_merged(merged)
        d.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    bounds = {
        "before": (marks["start"], marks["merge_start"]),
        "merge": (marks["merge_start"], marks["merge_end"]),
        "after": (marks["merge_end"], marks["end"]),
    }
    sync_marks = {"before": ("start", "merge_start"), "merge": ("merge_start", "merge_end")}
    sync_marks["after"] = ("merge_end", "end")
    out: dict[str, Any] = {
        "neardup": str(Path(neardup.__file__).parent),
        "merge_segments": len(segs),
        "merge_rows": rows,
        "merge_s": marks["merge_end"] - marks["merge_start"],
        "merge_bytes": written,
    }
    for ph in PHASES:
        lo, hi = bounds[ph]
        xs = [x for t, x in lat if lo <= t < hi]
        a, b = (syncs[k] for k in sync_marks[ph])
        pc = percentiles(xs)  # (loadgen's: empty where the phase had no checks)
        out[ph] = {
            "checks": len(xs),
            **{k: pc.get(k) for k in ("p50_ms", "p99_ms", "max_ms")},
            "log_syncs": b["wal_syncs"] - a["wal_syncs"],
            "log_sync_ms_mean": 1000
            * (b["wal_sync_seconds"] - a["wal_sync_seconds"])
            / max(1, b["wal_syncs"] - a["wal_syncs"]),
            "log_slow_syncs": b["wal_slow_syncs"] - a["wal_slow_syncs"],
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", required=True, help="namespace directory to copy and use")
    ap.add_argument("--rate", type=float, default=200.0, help="single checks a second (200)")
    ap.add_argument("--before", type=float, default=5.0, help="seconds before the merge (5)")
    ap.add_argument("--after", type=float, default=5.0, help="seconds after the merge (5)")
    ap.add_argument("--merge", type=int, default=8, help="segments merged, the largest (8)")
    ap.add_argument("--warm-up", type=int, default=300, help="requests before the timing (300)")
    ap.add_argument("--seed", type=int, default=77, help="texts' seed (default 77)")
    ap.add_argument("--work", help="folder for the store's copy (default: the temp folder)")
    add_child_options(ap)
    args = ap.parse_args()
    if not Path(args.store).is_dir():
        ap.error(f"--store {args.store}: not a directory")
    if args.rate <= 0 or args.before <= 0 or args.after < 0 or args.merge < 1 or args.warm_up < 0:
        ap.error("--rate and --before must be > 0, --after and --warm-up >= 0, --merge >= 1")
    if args.child:
        print(json.dumps(_child(args)))
        return 0
    trees = [str(t) for t in checkouts(args.tree)]
    child = [sys.executable, __file__, "--child", "--store", args.store]
    for opt in ("rate", "before", "after", "merge", "warm_up", "seed"):
        child += [f"--{opt.replace('_', '-')}", str(getattr(args, opt))]
    child += ["--work", args.work] if args.work else []

    def say(t: Path, r: int, got: dict[str, Any]) -> None:
        m = got["merge"]
        print(
            f"round {r + 1} {t}: merge {got['merge_s']:.1f} s, checks during it p99 "
            f"{_ms(m['p99_ms'])} max {_ms(m['max_ms'])} ms",
            file=sys.stderr,
        )

    runs = alternate(
        [Path(t) for t in trees], args.rounds, lambda t, r: run_child(t, child), say=say
    )
    keys = ("p50_ms", "p99_ms", "max_ms", "log_sync_ms_mean", "log_slow_syncs", "checks")
    med = {
        t: {
            "merge_s": medians(rs, ("merge_s",))["merge_s"],
            "merge_bytes": rs[0]["merge_bytes"],
            **{ph: {k: _median([x[ph] for x in rs], k) for k in keys} for ph in PHASES},
        }
        for t, rs in runs.items()
    }
    print(f"{'medians':34s}" + "".join(f"{Path(t).name[-16:]:>18s}" for t in trees))
    print(f"{'merge s':34s}" + "".join(f"{med[t]['merge_s']:18.2f}" for t in trees))
    print(
        f"{'merge MB written':34s}" + "".join(f"{med[t]['merge_bytes'] / 1e6:18.0f}" for t in trees)
    )
    for ph in PHASES:
        for k in keys:
            print(f"{ph + ' ' + k:34s}" + "".join(f"{_ms(med[t][ph][k]):>18s}" for t in trees))
    if args.out:
        write_runs(args.out, "write_stall", args, trees, med, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
