#!/usr/bin/env python3
"""The keep-first bulk seed of a window, stage by stage, optionally A/B against other source
trees in the same run.

    nice -n 5 .venv/bin/python benchmarks/bench_seed.py --corpus /tmp/bw/n1000000/corpus \
        --chunks 3 --tree . --tree /tmp/nd-before --rounds 2

Seeds a fresh ``lsh`` store (hourly partitions, a retention that covers the window) with the
first ``--chunks`` chunks of a ``benchmarks/bench_window.py`` corpus (its ``--data`` folder
kept with ``--keep``), chunk by chunk as ``bench_window.py``'s seed step does:
``neardup.incremental.dedup_into`` of each chunk (checked against what the earlier chunks
stored, then the batch rule over the rest, the kept documents loaded straight into
segments). Per chunk: wall and CPU seconds (the process's, every thread), documents a second,
and the wall and CPU seconds of each stage that ``dedup_into`` reports (``store``: the check
against the store; ``fingerprint`` / ``candidates`` / ``verify`` / ``cluster``: the batch run;
``save``: the load into segments and SQLite).

Each ``--tree`` (a source checkout, run with ``PYTHONPATH`` set to it; default: this one) runs
in its own child process, the trees alternated over ``--rounds`` rounds so that they see the
same machine; the table shows each tree's median over the rounds. A tree's first run compiles
its kernels (numba's cache is per source tree): ``--warm`` (default 1) runs each tree once on
the first chunk before the measured rounds.

Prints a table and writes ``benchmarks/results/bench_seed.json`` (``--out``) with the machine,
the commits and every round.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(corpus: str, chunks: int, store: str) -> dict[str, Any]:
    """In the tree's process: seed ``store`` with the first ``chunks`` chunks; the figures."""
    import orjson
    import window_corpus as wc

    from neardup.incremental import dedup_into
    from neardup.online import Deduplicator

    files = sorted(glob.glob(str(Path(corpus) / "window-*.jsonl.zst")))[:chunks]
    out: list[dict[str, Any]] = []
    stage: dict[str, Any] = {"name": None}

    def progress(name: str, done: int, total: int) -> None:
        if name != stage["name"]:
            now, cpu = time.perf_counter(), _cpu()
            if stage["name"] is not None:
                acc = stage["acc"].setdefault(stage["name"], [0.0, 0.0])
                acc[0] += now - stage["t"]
                acc[1] += cpu - stage["c"]
            stage.update(name=name, t=now, c=cpu)

    with Deduplicator.open(
        store, retention=400 * 3600, partition_seconds=3600, candidates="lsh"
    ) as d:
        for f in files:
            lines = [orjson.loads(x) for x in wc.read_chunk(f) if x]
            ids = [x["id"] for x in lines]
            texts = [x["text"] for x in lines]
            times = [x["time"] for x in lines]
            del lines
            stage.update(name=None, acc={})
            c0, t0 = _cpu(), time.perf_counter()
            into = dedup_into(d, ids, texts, times=times, progress=progress)
            progress("", 0, 0)  # closes the last stage
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
            out.append({
                "chunk": Path(f).name, "docs": len(ids), "kept": int(into.keep.sum()),
                "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                "docs_per_s": round(len(ids) / wall), "cpu_us_per_doc": round(cpu / len(ids) * 1e6, 1),
                "stages": {k: [round(v[0], 3), round(v[1], 3)] for k, v in stage["acc"].items()},
            })  # fmt: skip
        stored = len(d)
    return {"chunks": out, "stored": stored}


def _run_tree(tree: str, corpus: str, chunks: int, work: Path) -> dict[str, Any]:
    store = tempfile.mkdtemp(prefix="store-", dir=work)
    env = dict(os.environ, PYTHONPATH=str(Path(tree).resolve()))
    try:
        res = subprocess.run(
            [sys.executable, __file__, "--child", corpus, str(chunks), store],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
    finally:
        shutil.rmtree(store, ignore_errors=True)
    if res.returncode:
        raise SystemExit(f"tree {tree}: the seed failed:\n{res.stderr[-3000:]}")
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def _commit(tree: str) -> str:
    r = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)  # fmt: skip
    dirty = subprocess.run(["git", "-C", tree, "status", "--porcelain", "--", "neardup"], capture_output=True, text=True)  # fmt: skip
    return (r.stdout.strip() or "unknown") + ("+dirty" if dirty.stdout.strip() else "")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        print(json.dumps(child(argv[1], int(argv[2]), argv[3])))
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", required=True, help="a bench_window corpus folder (window-*.jsonl.zst)")  # fmt: skip
    p.add_argument("--chunks", type=int, default=2, help="chunks seeded, in order")
    p.add_argument("--tree", action="append", default=None, help="a source tree (repeat for an A/B; default: this one)")  # fmt: skip
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--warm", type=int, default=1, help="unmeasured runs of each tree first (kernel compile)")  # fmt: skip
    p.add_argument("--work", type=Path, default=None, help="folder for the stores (default: the temp folder)")  # fmt: skip
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_seed.json")
    args = p.parse_args(argv)
    from bench_dedup import machine, write_results

    files = sorted(glob.glob(str(Path(args.corpus) / "window-*.jsonl.zst")))
    if len(files) < args.chunks:
        raise SystemExit(f"{args.corpus}: {len(files)} chunks, --chunks {args.chunks} asked for; run bench_window.py --keep first")  # fmt: skip
    trees = [str(Path(t).resolve()) for t in (args.tree or [str(ROOT)])]
    work = Path(tempfile.mkdtemp(prefix="bench-seed-", dir=args.work))
    runs: dict[str, list[dict[str, Any]]] = {t: [] for t in trees}
    try:
        for _ in range(args.warm):
            for t in trees:
                _run_tree(t, args.corpus, 1, work)
        for r in range(args.rounds):
            for t in trees if r % 2 == 0 else trees[::-1]:
                runs[t].append(_run_tree(t, args.corpus, args.chunks, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def med(t: str, i: int, key: str) -> float:
        return statistics.median(run["chunks"][i][key] for run in runs[t])

    def med_stage(t: str, i: int, name: str, k: int) -> float:
        return statistics.median(run["chunks"][i]["stages"].get(name, [0.0, 0.0])[k] for run in runs[t])  # fmt: skip

    print(f"{'tree':<34} {'chunk':>5} {'docs/s':>8} {'wall s':>7} {'CPU s':>7} {'CPU us/doc':>10}  stages wall/CPU s")  # fmt: skip
    summary: dict[str, Any] = {}
    for t in trees:
        rows = []
        for i in range(args.chunks):
            names = list(runs[t][0]["chunks"][i]["stages"])
            stages = {n: [med_stage(t, i, n, 0), med_stage(t, i, n, 1)] for n in names}
            row = {k: med(t, i, k) for k in ("docs_per_s", "wall_s", "cpu_s", "cpu_us_per_doc")}
            row["stages"] = stages
            rows.append(row)
            main_stages = "  ".join(f"{n} {v[0]:.2f}/{v[1]:.2f}" for n, v in stages.items() if v[0] >= 0.05)  # fmt: skip
            print(f"{Path(t).name + ' ' + _commit(t):<34} {i:>5} {row['docs_per_s']:>8,.0f} {row['wall_s']:>7.2f} {row['cpu_s']:>7.2f} {row['cpu_us_per_doc']:>10.1f}  {main_stages}")  # fmt: skip
        total_docs = sum(c["docs"] for c in runs[t][0]["chunks"])
        walls = [sum(c["wall_s"] for c in run["chunks"]) for run in runs[t]]
        cpus = [sum(c["cpu_s"] for c in run["chunks"]) for run in runs[t]]
        summary[t] = {
            "commit": _commit(t), "by_chunk": rows,
            "docs_per_s": round(total_docs / statistics.median(walls)),
            "cpu_us_per_doc": round(statistics.median(cpus) / total_docs * 1e6, 1),
        }  # fmt: skip
        print(f"{'':<34} {'all':>5} {summary[t]['docs_per_s']:>8,} {statistics.median(walls):>7.2f} {statistics.median(cpus):>7.2f} {summary[t]['cpu_us_per_doc']:>10.1f}")  # fmt: skip
    out = {
        "benchmark": "bench_seed",
        "command": "benchmarks/bench_seed.py " + " ".join(argv),
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(load_average=True),
        "params": {"corpus": args.corpus, "chunks": args.chunks, "rounds": args.rounds},
        "trees": summary,
        "runs": runs,
    }
    write_results(args.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
