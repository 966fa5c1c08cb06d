"""Where a check-and-insert's CPU goes, in process: the stages of ``Deduplicator.submit`` timed
by the CPU time of the thread that runs them.

    .venv/bin/python benchmarks/bench_request_parts.py --store /tmp/nd_w1m/lsh/namespaces/default \
        --requests 4000 --tree . --tree /tmp/nd-before --out benchmarks/results/bench_request_parts.json

Opens a copy of ``--store`` (a data directory, e.g. the 1 M window ``bench_service.py`` seeds;
without it, a fresh ``lsh`` store), runs the merges it owes (``compact()``), then sends
``--requests`` documents through ``submit("check_and_add", ..., inline=True)`` in groups of
``--batch`` (1: the service's single request), the texts ``loadgen.py --texts window`` sends
(or ``--texts-file``'s, after its first ``--skip``), after a warm-up of 300 requests. The process's CPU time (user and system, every thread) per
document is the figure; beside it, per document, the thread CPU time (``time.thread_time``)
spent in each stage (the writer's group: the decision and the log append; the document's
preparation; the log's fsync; the SQLite applier's transactions), so the table says which part
moved. Stages nest (``decide`` holds the band and SimHash look-ups and the id look-up), and a
stage run on another thread (the applier) is its own line. Two lines count every thread's time
in a part that also runs on helper threads, which the calling thread's timer does not see: the
segments' SimHash search (a batch's runs on the store's search pool while the writer searches
the memtable) and the band sections' search kernel (a batch's ranges run on the shared pool
too).

Each ``--tree`` (a source checkout, run with ``PYTHONPATH`` set to it; default: this one) runs
in its own child process, the trees alternated over ``--rounds`` rounds, so that two trees see
the same machine; medians are reported. HTTP is not part of it: ``bench_service.py`` measures
the server end to end.

The table says what share of the timed documents were found duplicates, since a duplicate
costs other stages than a new document: a store ``bench_window.py --keep`` leaves already
holds the first ``server.throughput.docs_acknowledged`` texts of its
``load-throughput.jsonl`` (the throughput phase sent them), so ``--skip`` that many to send
new ones.
"""

from __future__ import annotations

import argparse
import collections
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

#: (module, attribute path, stage name) of what is timed
STAGES = [
    ("neardup.online.writer", "Writer._apply_group", "writer group"),
    ("neardup.online.decide", "Decider.decide", "decide"),
    ("neardup.store.engine", "Store.search_bands", "band look-up"),
    ("neardup.store.engine", "Store.search", "SimHash look-up"),
    ("neardup.store.engine", "Store.lookup_ids", "id look-up"),
    ("neardup.store.engine", "Store.append_group", "log append + memtable"),
    ("neardup.online.prepare", "DocumentPreparer.prepare", "prepare"),
    ("neardup.store.wal", "WalWriter.sync", "log fsync"),
    ("neardup.store.meta", "MetaDB.apply", "SQLite apply"),
    ("neardup.store.memindex", "_FastIndex.search", "segment SimHash search, every thread"),
    ("neardup.index.section_search", "_group_search_kernel", "band section kernel, every thread"),
]


def _child(args: argparse.Namespace) -> dict[str, Any]:
    """Run the requests in this process (the tree on ``sys.path``) and return the figures."""
    import importlib

    import neardup
    from neardup.online import Deduplicator

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from loadgen import file_texts, window_texts

    spent: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()  # helper threads add to the same counts

    def timed(owner: Any, name: str, label: str) -> None:
        fn = getattr(owner, name)

        def wrapper(*a: Any, **k: Any) -> Any:
            t0 = time.thread_time_ns()
            try:
                return fn(*a, **k)
            finally:
                took = time.thread_time_ns() - t0
                with lock:
                    spent[label] += took

        setattr(owner, name, wrapper)

    for module, path, label in STAGES:
        owner: Any = importlib.import_module(module)
        *outer, name = path.split(".")
        for part in outer:
            owner = getattr(owner, part)
        timed(owner, name, label)  # a part renamed in the library fails here, not silently

    work = Path(tempfile.mkdtemp(prefix="nd-parts-"))
    try:
        store = work / "store"
        if args.store:
            shutil.copytree(args.store, store)
        # a given store keeps its own retention (bench_window's is the window plus a margin)
        d = Deduplicator.open(
            store, candidates="lsh", **({} if args.store else {"retention": 48 * 3600})
        )
        # the merges the store owes run now, not in the background while requests are timed
        # (the writer starts them at its next housekeeping: their CPU would count as the
        # requests'), and the requests search the layout the store keeps
        d.compact()
        n, b = args.requests, args.batch
        texts = (
            file_texts(args.texts_file, n + 300 + b, args.skip)
            if args.texts_file
            else window_texts(n + 300 + b, args.seed)
        )

        duplicates = 0

        def group(i: int, k: int) -> None:
            nonlocal duplicates
            docs = [{"id": f"parts-{j}", "text": texts[j]} for j in range(i, i + k)]
            fut, _ = d.submit("check_and_add", docs, inline=True)
            duplicates += sum(dec.duplicate for dec in fut.result())

        for i in range(n, n + 300, b):  # warm-up: caches, kernels, the memtable's buffer
            group(i, b)
        spent.clear()
        duplicates = 0
        t0, c0, p0 = time.perf_counter(), os.times(), time.process_time()
        for i in range(0, n, b):
            group(i, b)
        c1, p1, wall = os.times(), time.process_time(), time.perf_counter() - t0
        d.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    per = 1e6 / n
    return {
        "neardup": str(Path(neardup.__file__).parent),
        "wall_us": wall * per,
        # the process's CPU clock (every thread, user and system, to the nanosecond); os.times'
        # split into user and system counts whole clock ticks, so a short run can read zero
        "cpu_us": (p1 - p0) * per,
        "user_us": (c1.user - c0.user) * per,
        "system_us": (c1.system - c0.system) * per,
        "stages_us": {label: spent[label] / 1e3 / n for _, _, label in STAGES},
        "duplicate_share": duplicates / n,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", help="data directory to copy and use (default: a fresh store)")
    ap.add_argument("--requests", type=int, default=4000, help="documents sent (default 4000)")
    ap.add_argument("--batch", type=int, default=1, help="documents per group (default 1)")
    ap.add_argument("--seed", type=int, default=77, help="texts' seed (default 77)")
    ap.add_argument(
        "--texts-file",
        help="JSONL whose text fields are sent instead of generated ones (e.g. the load "
        "bench_window.py --keep leaves beside its store: load-throughput.jsonl)",
    )
    ap.add_argument(
        "--skip",
        type=int,
        default=0,
        help="texts of --texts-file skipped first (e.g. those a kept bench_window.py store "
        "already holds: its JSON's server.throughput.docs_acknowledged)",
    )
    add_child_options(ap)
    args = ap.parse_args()
    if args.requests < 1 or args.batch < 1 or args.requests % args.batch:
        ap.error("--requests must be a positive multiple of --batch")
    if args.skip < 0 or (args.skip and not args.texts_file):
        ap.error("--skip takes a count of --texts-file's texts (0 or more)")
    if args.store and not Path(args.store).is_dir():
        ap.error(f"--store {args.store}: not a directory")
    if args.store and not (Path(args.store) / "MANIFEST.json").is_file():
        # (a server's data directory opened as a store would be a fresh, empty store beside
        # its namespaces: the figures would be an empty window's)
        named = sorted(p.name for p in (Path(args.store) / "namespaces").glob("*"))
        hint = f"; its namespaces: {', '.join(named)} (DIR/namespaces/NAME)" if named else ""
        ap.error(f"--store {args.store}: not a store (no MANIFEST.json){hint}")
    if args.child:
        print(json.dumps(_child(args)))
        return 0
    trees = [str(t) for t in checkouts(args.tree)]
    child = [sys.executable, __file__, "--child", "--requests", str(args.requests)]
    child += ["--batch", str(args.batch), "--seed", str(args.seed)]
    child += ["--store", args.store] if args.store else []
    child += ["--texts-file", args.texts_file, "--skip", str(args.skip)] if args.texts_file else []

    def one(t: Path, r: int) -> dict[str, Any]:
        return run_child(t, child)

    def say(t: Path, r: int, got: dict[str, Any]) -> None:
        print(f"round {r + 1} {t}: {got['cpu_us']:.1f} us of CPU a document", file=sys.stderr)

    runs = alternate([Path(t) for t in trees], args.rounds, one, say=say)
    med = {
        t: {
            **medians(rs, ("cpu_us", "wall_us")),
            "stages_us": medians((x["stages_us"] for x in rs), [s for _, _, s in STAGES]),
        }
        for t, rs in runs.items()
    }
    head = f"{'per document (µs, medians)':40s}" + "".join(
        f"{Path(t).name[-16:]:>18s}" for t in trees
    )
    print(head)
    for key in ("cpu_us", "wall_us"):
        print(f"{key[:-3] + ' (process)':40s}" + "".join(f"{med[t][key]:18.1f}" for t in trees))
    for _, _, s in STAGES:
        print(f"  {s:38s}" + "".join(f"{med[t]['stages_us'][s]:18.1f}" for t in trees))
    shares = {t: max(x["duplicate_share"] for x in runs[t]) for t in trees}
    print(f"{'found duplicates (share, most of a run)':40s}" + "".join(f"{shares[t]:18.3f}" for t in trees))  # fmt: skip
    if max(shares.values()) > 0.5:
        print(
            "note: most documents sent were duplicates of stored ones, which cost other stages "
            "than new documents (a kept bench_window.py store holds the first texts of its "
            "load-throughput.jsonl: --skip them)",
            file=sys.stderr,
        )
    if args.out:
        write_runs(args.out, "request_parts", args, trees, med, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
