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
``save``: the load into segments and SQLite), and the store the next chunk is checked against
(documents, segments, partitions, memtable rows: a check probes every segment).

Each ``--tree`` (a source checkout, run with ``PYTHONPATH`` set to it; default: this one) runs
in its own child process, the trees alternated over ``--rounds`` rounds so that they see the
same machine; the table shows each tree's median over the rounds. A tree's first run compiles
its kernels (numba's cache is per source tree): ``--warm`` (default 1) runs each tree once on
the first chunk before the measured rounds.

Prints a table and writes ``benchmarks/results/bench_seed.json`` (``--out``) with the machine,
the commits and every round.

``--whole``: the chunks in one ``neardup.incremental.load_files`` call instead, as ``neardup
store load DATA FILES --time-field time`` seeds a window (read, one keep-first batch run over
them all, the loads into segments and SQLite, the final merge: stages ``read`` ... ``save``,
``compact``), one row a tree.
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


class _Stages:
    """Wall and CPU seconds of each stage a progress callback names (a stage lasts until the
    next name; ``close()`` ends the last)."""

    def __init__(self) -> None:
        self.name: str | None = None
        self.acc: dict[str, list[float]] = {}
        self.t = self.c = 0.0

    def __call__(self, name: str, done: int, total: int) -> None:
        if name != self.name:
            now, cpu = time.perf_counter(), _cpu()
            if self.name is not None:
                acc = self.acc.setdefault(self.name, [0.0, 0.0])
                acc[0] += now - self.t
                acc[1] += cpu - self.c
            self.name, self.t, self.c = name, now, cpu

    def close(self) -> dict[str, list[float]]:
        self("", 0, 0)
        return {k: [round(v[0], 3), round(v[1], 3)] for k, v in self.acc.items()}


def _figures(name: str, docs: int, kept: int, wall: float, cpu: float, stages: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    return {
        "chunk": name, "docs": docs, "kept": kept, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
        "docs_per_s": round(docs / wall), "cpu_us_per_doc": round(cpu / docs * 1e6, 1),
        "stages": stages,
    }  # fmt: skip


def _open_args() -> dict[str, Any]:
    """The store the seed makes: ``lsh``, hourly partitions, a retention that covers any
    corpus ``bench_window.py`` kept (its times end when it was written)."""
    return {"retention": 400 * 3600, "partition_seconds": 3600, "candidates": "lsh"}


def child(corpus: str, chunks: int, store: str) -> dict[str, Any]:
    """In the tree's process: seed ``store`` with the first ``chunks`` chunks; the figures."""
    import orjson
    import window_corpus as wc

    from neardup.incremental import dedup_into
    from neardup.online import Deduplicator

    files = sorted(glob.glob(str(Path(corpus) / "window-*.jsonl.zst")))[:chunks]
    out: list[dict[str, Any]] = []
    with Deduplicator.open(store, **_open_args()) as d:
        for f in files:
            lines = [orjson.loads(x) for x in wc.read_chunk(f) if x]
            ids = [x["id"] for x in lines]
            texts = [x["text"] for x in lines]
            times = [x["time"] for x in lines]
            del lines
            stages = _Stages()
            c0, t0 = _cpu(), time.perf_counter()
            into = dedup_into(d, ids, texts, times=times, progress=stages)
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
            out.append(_figures(Path(f).name, len(ids), int(into.keep.sum()), wall, cpu, stages.close()))  # fmt: skip
            # what the next chunk is checked against: a check probes every segment
            s = d.stats()
            out[-1]["store_after"] = {k: int(s[k]) for k in ("documents", "segments", "partitions", "memtable_rows")}  # fmt: skip
        stored = len(d)
    return {"chunks": out, "stored": stored}


def child_whole(corpus: str, chunks: int, store: str) -> dict[str, Any]:
    """In the tree's process, ``--whole``: the first ``chunks`` chunks in one
    ``load_files`` call, as ``neardup store load DATA FILES --time-field time`` runs it (read,
    one keep-first run, the loads, the final merge); the figures as one entry."""
    from neardup.incremental import load_files
    from neardup.online import Deduplicator

    files = sorted(glob.glob(str(Path(corpus) / "window-*.jsonl.zst")))[:chunks]
    with Deduplicator.open(store, **_open_args()):
        pass
    stages = _Stages()
    c0, t0 = _cpu(), time.perf_counter()
    res = load_files(files, store, time_field="time", progress=stages)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    name = f"{len(files)} chunks, one load_files"
    return {
        "chunks": [_figures(name, res["documents"], res["loaded"], wall, cpu, stages.close())],
        "stored": res["store_documents_after"],
    }


def _run_tree(
    tree: str, corpus: str, chunks: int, work: Path, whole: bool = False
) -> dict[str, Any]:
    store = tempfile.mkdtemp(prefix="store-", dir=work)
    env = dict(os.environ, PYTHONPATH=str(Path(tree).resolve()))
    try:
        res = subprocess.run(
            [sys.executable, __file__, "--child", corpus, str(chunks), store, "whole" if whole else "chunks"],
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
        run = child_whole if argv[4:5] == ["whole"] else child
        print(json.dumps(run(argv[1], int(argv[2]), argv[3])))
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", required=True, help="a bench_window corpus folder (window-*.jsonl.zst)")  # fmt: skip
    p.add_argument("--chunks", type=int, default=2, help="chunks seeded, in order")
    p.add_argument("--tree", action="append", default=None, help="a source tree (repeat for an A/B; default: this one)")  # fmt: skip
    p.add_argument("--whole", action="store_true", help="the chunks in one load_files call (neardup store load), not one dedup_into a chunk")  # fmt: skip
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
    if args.work:
        Path(args.work).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-seed-", dir=args.work))
    runs: dict[str, list[dict[str, Any]]] = {t: [] for t in trees}
    try:
        for _ in range(args.warm):
            for t in trees:
                _run_tree(t, args.corpus, 1, work)
        for r in range(args.rounds):
            for t in trees if r % 2 == 0 else trees[::-1]:
                runs[t].append(_run_tree(t, args.corpus, args.chunks, work, args.whole))
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
        for i in range(1 if args.whole else args.chunks):
            names = list(runs[t][0]["chunks"][i]["stages"])
            stages = {n: [med_stage(t, i, n, 0), med_stage(t, i, n, 1)] for n in names}
            row = {k: med(t, i, k) for k in ("docs_per_s", "wall_s", "cpu_s", "cpu_us_per_doc")}
            row["stages"] = stages
            after = runs[t][0]["chunks"][i].get("store_after")  # (the first round's)
            row["store_after"] = after
            rows.append(row)
            main_stages = "  ".join(f"{n} {v[0]:.2f}/{v[1]:.2f}" for n, v in stages.items() if v[0] >= 0.05)  # fmt: skip
            if after:
                main_stages += f"  (then {after['segments']} segments)"
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
        "params": {
            "corpus": args.corpus,
            "chunks": args.chunks,
            "whole": args.whole,
            "rounds": args.rounds,
        },
        "trees": summary,
        "runs": runs,
    }
    write_results(args.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
