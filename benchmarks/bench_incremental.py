"""Incremental dedup at scale (issue 37): N generated documents in B daily batches, each run with
``--save`` against the store the earlier batches filled; per batch: wall and CPU time, documents
dropped for the store, store size; then one run over the concatenation, and whether the kept
ids are the same.

    python benchmarks/bench_incremental.py                      # 1 M documents, 10 batches
    python benchmarks/bench_incremental.py --n 100000 --batches 5
    python benchmarks/bench_incremental.py --engine dask --partitions 4 \
        --out benchmarks/results/bench_incremental_dask.json
    python benchmarks/bench_incremental.py --cli --out benchmarks/results/bench_incremental_cli.json

``--cli`` runs each batch as a user does, ``neardup dedup DAY -o KEPT --save STORE`` in a new
process (its start, imports and the store's open included in the batch's time); without it the
batches are ``dedup_against`` calls in this process.

Prints a table and writes ``benchmarks/results/bench_incremental.json``: whether the time per
batch stays flat as the store grows, and whether the kept ids equal one run's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _cpu() -> float:
    """This process's CPU time and its children's that have ended (a Dask LocalCluster's
    workers, started and stopped by each run)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _cli_batch(day: Path, store: Path, out: Path, eng: dict[str, Any]) -> dict[str, Any]:
    """``neardup dedup DAY -o OUT --save STORE`` in a new process (the neardup this process
    imports); its summary."""
    import subprocess

    import neardup

    summary = out.with_suffix(".summary.json")
    # -P: the working directory (perhaps another checkout) kept off the path, before PYTHONPATH
    cmd = [sys.executable, "-P", "-m", "neardup", "dedup", str(day), "-o", str(out)]
    cmd += ["--save", str(store)]
    cmd += ["--summary-json", str(summary)]
    for k, v in eng.items():
        if v is not None:
            cmd += [f"--{k}", str(v)]
    env = dict(os.environ, PYTHONPATH=str(Path(neardup.__file__).resolve().parents[1]))
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    doc: dict[str, Any] = json.loads(summary.read_text())
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--kind", default="short", help="bench_dedup.generate's kind (short, long)")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--dup-rate", type=float, default=0.1)
    ap.add_argument("--work", type=Path, default=None, help="folder for corpus and store")
    ap.add_argument(
        "--engine", default="local", help="local (the batch), dask or spark (the distributed job)"
    )
    ap.add_argument("--partitions", type=int, default=None, help="the job's read partitions")
    ap.add_argument("--cli", action="store_true", help="each batch a `neardup dedup` process")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "bench_incremental.json")
    args = ap.parse_args(argv)

    from bench_dedup import write_corpus

    from neardup.batch.files import dedup_files
    from neardup.incremental import dedup_against

    work = args.work or Path(tempfile.mkdtemp(prefix="nd-incr-"))
    work.mkdir(parents=True, exist_ok=True)
    src = work / f"{args.kind}-{args.n}-{args.seed}.jsonl"
    if not src.exists():
        t = time.perf_counter()
        write_corpus(src, args.kind, args.n, args.seed, args.dup_rate)
        print(f"generated {args.n:,} documents in {time.perf_counter() - t:.1f} s", flush=True)
    lines = src.read_bytes().splitlines(keepends=True)
    size = -(-len(lines) // args.batches)
    days = []
    for b in range(args.batches):
        p = work / f"day{b}.jsonl"
        p.write_bytes(b"".join(lines[b * size : (b + 1) * size]))
        days.append(p)
    store = work / "store"
    shutil.rmtree(store, ignore_errors=True)
    rows: list[dict[str, Any]] = []
    kept_ids: list[str] = []
    print(f"{'batch':>5} {'docs':>9} {'dropped (store)':>15} {'kept':>9} {'stored after':>13} {'wall s':>7} {'cpu s':>7}")  # fmt: skip
    for b, day in enumerate(days):
        out = work / f"kept{b}.jsonl"
        load = os.getloadavg()
        t, c = time.perf_counter(), _cpu()
        eng = {} if args.engine == "local" else {"engine": args.engine, "partitions": args.partitions}  # fmt: skip
        if args.cli:
            s = _cli_batch(day, store, out, eng)
        else:
            s = dedup_against([str(day)], store, output=out, save=True, **eng)
        wall, cpu = time.perf_counter() - t, _cpu() - c
        kept_ids += [json.loads(x)["id"] for x in out.read_bytes().splitlines()]
        row = {
            "batch": b, "documents": s["documents"], "dropped_for_store": s["dropped_for_store"],
            "kept": s["kept"], "store_documents_before": s["store_documents_before"],
            "store_documents_after": s["store_documents_after"], "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2), "load_before": [round(x, 2) for x in load],
        }  # fmt: skip
        rows.append(row)
        print(f"{b:>5} {row['documents']:>9,} {row['dropped_for_store']:>15,} {row['kept']:>9,} {row['store_documents_after']:>13,} {wall:>7.2f} {cpu:>7.2f}", flush=True)  # fmt: skip
    t, c = time.perf_counter(), _cpu()
    one = dedup_files(str(src), output=work / "one.jsonl")
    one_wall, one_cpu = time.perf_counter() - t, _cpu() - c
    one_ids = [json.loads(x)["id"] for x in (work / "one.jsonl").read_bytes().splitlines()]
    same = one_ids == kept_ids
    print(f"one run over the concatenation: {one.stats['kept']:,} kept in {one_wall:.1f} s wall, {one_cpu:.1f} s CPU; incremental kept {len(kept_ids):,}: {'the same ids' if same else 'DIFFERENT ids'}")  # fmt: skip
    doc = {
        "benchmark": "incremental",
        "command": "python benchmarks/bench_incremental.py " + " ".join(argv or sys.argv[1:]),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "n": args.n,
        "batches": args.batches,
        "kind": args.kind,
        "seed": args.seed,
        "engine": args.engine,
        "partitions": args.partitions,
        "cli": args.cli,
        "rows": rows,
        "one_run": {
            "kept": one.stats["kept"],
            "wall_s": round(one_wall, 2),
            "cpu_s": round(one_cpu, 2),
        },
        "incremental_kept": len(kept_ids),
        "same_kept_ids": same,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
