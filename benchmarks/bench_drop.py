#!/usr/bin/env python3
"""The retention drop on a kept window, measured alone, optionally with less memory than the
window: the writer's retention passes (each timed) and single checks at ``--rate`` meanwhile,
the slowest of them split into waiting, their own time, and the part a pass overlapped.

    python benchmarks/bench_drop.py --store DATA/n10000000/server/namespaces/default \\
        --work /tmp/drop --hours 6 --memory-limit 4G --drop-caches --texts LOAD.jsonl

A copy of ``--store`` (a data directory ``bench_window.py --keep`` left; the copy is what
changes) is opened with a clock this script moves: the retention cutoff jumps to the end of the
``--hours``-th partition after the oldest segment's first, so everything older leaves at once
(the worst case of an hourly drop), and the run waits until the writer's passes have deleted
it. ``--memory-limit`` runs the measured process in a memory cgroup of that size (root; cgroup
v1, as measured here, or v2 where the memory controller is delegated), page cache included: a 10 M window in 4 GiB reads SQLite's and the segments' pages
from disk as a 50 M window does on a 24 GiB machine, without building one (``--drop-caches``
first, or the pages the copy left in memory stay charged elsewhere). Prints a table and writes
JSON (``--out``). ``bench_window.py`` measures the drop as part of a whole run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def _parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    if t and t[-1] in units:
        return int(float(t[:-1]) * units[t[-1]])
    return int(t)


@contextlib.contextmanager
def in_memory_cgroup(limit: int, tag: str = "drop") -> Iterator[list[str]]:
    """A new memory cgroup of ``limit`` bytes (:func:`memory_cgroup`), as the command prefix
    that runs a command inside it; removed afterwards (``bench_read_ahead.py`` uses it too)."""
    cg = memory_cgroup(limit, tag)
    procs = cg / "cgroup.procs"
    try:
        yield ["sh", "-c", f'echo $$ > "{procs}" && exec "$@"', "sh"]
    finally:
        time.sleep(0.5)
        with contextlib.suppress(OSError):  # a process still in it: left to the system
            cg.rmdir()


def memory_cgroup(limit: int, tag: str = "drop") -> Path:
    """A new memory cgroup of ``limit`` bytes under this process's own (v2, else v1), named
    for ``tag`` and this process."""
    own = Path("/proc/self/cgroup").read_text().splitlines()
    v2 = [line.split(":", 2)[2] for line in own if line.startswith("0::")]
    if Path("/sys/fs/cgroup/cgroup.controllers").exists() and v2:
        base = Path("/sys/fs/cgroup") / v2[0].lstrip("/")
        cg, knob = base / f"neardup-{tag}-{os.getpid()}", "memory.max"
    else:
        v1 = [line.split(":", 2)[2] for line in own if ":memory:" in line]
        if not v1:
            raise SystemExit("no memory cgroup found (cgroup v1 or v2 needed)")
        base = Path("/sys/fs/cgroup/memory") / v1[0].lstrip("/")
        cg, knob = base / f"neardup-{tag}-{os.getpid()}", "memory.limit_in_bytes"
    try:
        cg.mkdir()
        (cg / knob).write_text(str(limit))
    except OSError as exc:
        raise SystemExit(f"cannot make the memory cgroup {cg} ({exc}); run as root") from exc
    return cg


def _spread(ms: Any) -> dict[str, float]:
    import numpy as np

    if not ms.size:
        return {}
    return {"p50": float(np.percentile(ms, 50)), "p90": float(np.percentile(ms, 90)),
            "max": float(ms.max())}  # fmt: skip


def _child(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np
    from loadgen import file_texts
    from window_steps import Checker, latencies, slowest_checks

    from neardup.online import Deduplicator

    ns = Path(args.work)
    cfg = json.loads((ns / "config.json").read_text())["body"]["store"]
    retention, width = float(cfg["retention"]), float(cfg["partition_seconds"])
    manifest = json.loads((ns / "MANIFEST.json").read_text())["body"]
    first = min(int(s["partition"]) for s in manifest["segments"])
    now = [time.time()]
    d = Deduplicator.open(ns, clock=lambda: now[0], verify_meta=False)
    passes: list[tuple[float, float, int, float]] = []  # (began, ended, rows, cutoff)
    real = d.store.expire

    def timed(cutoff: float) -> int:
        a = time.perf_counter()
        rows = int(real(cutoff))
        if rows:
            passes.append((a, time.perf_counter(), rows, cutoff))
        return rows

    d.store.expire = timed  # type: ignore[method-assign]
    checker = Checker(d, file_texts(args.texts, args.n_texts), args.rate)
    checker.start()
    time.sleep(args.settle)
    t_before = time.perf_counter()
    docs0 = len(d)
    target = (first + args.hours) * width
    now[0] = target + retention
    t0 = time.perf_counter()
    while not (any(p[3] >= target for p in passes) and not d.store.retention_behind):
        if time.perf_counter() - t0 > args.timeout:
            raise SystemExit(f"the drop did not end within {args.timeout} s")
        time.sleep(0.05)
    t1 = time.perf_counter()
    time.sleep(args.settle / 2)
    checker.stop.set()
    checker.join()
    rows = docs0 - len(d)
    d.close()

    slow = slowest_checks(checker, t0 - 0.5, t1 + 1.0, passes, args.slowest)
    durs = np.asarray([b - a for a, b, *_ in passes]) * 1000
    return {
        "rows_dropped": rows,
        "passes": len(passes),
        "pass_ms": _spread(durs),
        "writer_s": float(durs.sum() / 1000),
        "all_gone_after_s": t1 - t0,
        "checks_before": latencies(checker.records, 0, t_before),
        "checks_during": latencies(checker.records, t0 - 0.5, t1 + 1.0),
        "check_errors": checker.errors,
        "slowest_checks": [
            {
                "latency_ms": 1000 * lat,
                "waited_ms": 1000 * waited,
                "own_ms": 1000 * own,
                "in_a_pass_ms": 1000 * overlap,
            }
            for lat, waited, own, overlap in slow
        ],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", type=Path, required=True, help="a kept window's data directory (copied)")  # fmt: skip
    ap.add_argument("--work", type=Path, required=True, help="where the copy goes (replaced)")
    ap.add_argument("--texts", required=True, help="JSONL whose `text` fields are checked")
    ap.add_argument("--n-texts", type=int, default=4000, help="texts read from --texts")
    ap.add_argument("--hours", type=int, default=6, help="partitions after the oldest segment's first that leave")  # fmt: skip
    ap.add_argument("--rate", type=float, default=100.0, help="single checks per second")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds of checks before the drop")  # fmt: skip
    ap.add_argument("--memory-limit", default=None, help="memory cgroup for the measured process (e.g. 4G; root)")  # fmt: skip
    ap.add_argument("--drop-caches", action="store_true", help="empty the page cache first (root)")  # fmt: skip
    ap.add_argument("--slowest", type=int, default=10, help="slowest checks listed")
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args)))
        return 0
    from bench_dedup import machine, write_results

    if not (args.store / "MANIFEST.json").exists():
        raise SystemExit(f"--store {args.store}: no MANIFEST.json (a store's data directory?)")
    if args.work.exists():
        shutil.rmtree(args.work)
    shutil.copytree(args.store, args.work)
    if args.drop_caches:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
    cmd = [sys.executable, __file__, "--child", *(argv if argv is not None else sys.argv[1:])]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    limited = (
        in_memory_cgroup(_parse_size(args.memory_limit))
        if args.memory_limit
        else contextlib.nullcontext([])
    )
    with limited as prefix:
        out = subprocess.run(
            [*prefix, *cmd], stdout=subprocess.PIPE, text=True, env=env, check=False
        )
    if out.returncode != 0:
        raise SystemExit(
            f"the measured process failed (exit {out.returncode}); its output is above"
        )
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["params"] = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    res["machine"] = machine(load_average=True)
    pm, dc = res["pass_ms"], res["checks_during"]
    print(f"rows dropped {res['rows_dropped']:,} in {res['passes']} passes, all gone after {res['all_gone_after_s']:.1f} s; writer {res['writer_s']:.2f} s")  # fmt: skip
    print(f"pass ms: p50 {pm['p50']:.1f}, p90 {pm['p90']:.1f}, max {pm['max']:.1f}")
    print(f"checks during: {dc['checks']:,}, p50 {dc['p50_ms']:.1f} ms, p99 {dc['p99_ms']:.1f} ms, max {dc['max_ms']:.1f} ms")  # fmt: skip
    print("slowest checks (latency / waited / own / in a pass, ms):")
    for s in res["slowest_checks"]:
        print(f"  {s['latency_ms']:8.1f} {s['waited_ms']:8.1f} {s['own_ms']:8.1f} {s['in_a_pass_ms']:8.1f}")  # fmt: skip
    if args.out:
        write_results(args.out, res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
