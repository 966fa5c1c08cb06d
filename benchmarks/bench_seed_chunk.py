#!/usr/bin/env python3
"""One chunk of a window's seed, A/B/C: ``neardup.incremental.dedup_into`` of 100 k documents
against a store that holds the chunks before it, with every document's work made first for the
check, the batch run and the load (``signed``: ``SIGN_FIRST``, the default), with the store
check's prepared batches loaded as they are (``reuse``: ``SIGN_FIRST`` off) and with the kept
documents prepared again by ``load`` (``again``: ``REUSE_MAX`` = 0 too), alternating, in one
process. The store's merges of the earlier chunks' segments are run before the measured chunk
(``compact``), so that it pays only for its own. Prints wall and CPU seconds per chunk of each
and writes ``benchmarks/results/bench_seed_chunk.json``.

The chunks are ``benchmarks/bench_window.py``'s generated window (its ``--data`` folder, kept
with ``--keep``, or generated here with ``window_corpus.py`` when absent):

    python benchmarks/bench_seed_chunk.py --corpus /tmp/bw1/n1000000/corpus --before 2 --reps 2
"""

from __future__ import annotations

import argparse
import glob
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import orjson  # noqa: E402
import window_corpus as wc  # noqa: E402
from bench_dedup import machine, write_results  # noqa: E402
from bench_service import code_version  # noqa: E402


def _chunk(path: str) -> tuple[list[str], list[str], list[float]]:
    lines = [orjson.loads(x) for x in wc.read_chunk(path) if x]
    return [x["id"] for x in lines], [x["text"] for x in lines], [x["time"] for x in lines]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", required=True, help="a bench_window corpus folder (window-*.jsonl.zst)")  # fmt: skip
    p.add_argument("--before", type=int, default=2, help="chunks stored before the measured one")
    p.add_argument("--reps", type=int, default=2, help="A/B rounds")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_seed_chunk.json"))  # fmt: skip
    args = p.parse_args(argv)

    from neardup.incremental import dedup_into, stored
    from neardup.online import Deduplicator

    files = sorted(glob.glob(str(Path(args.corpus) / "window-*.jsonl.zst")))
    if len(files) <= args.before:
        raise SystemExit(f"{args.corpus}: {len(files)} chunks, need more than --before {args.before}")  # fmt: skip
    rows: list[dict[str, Any]] = []
    work = Path(tempfile.mkdtemp(prefix="bench-seed-chunk-"))
    try:
        for rep in range(args.reps):
            for mode in ("signed", "reuse", "again"):
                stored.SIGN_FIRST = mode == "signed"
                stored.REUSE_MAX = 0 if mode == "again" else 10**9
                store = work / f"store-{rep}-{mode}"
                with Deduplicator.open(
                    store, retention=400 * 3600, partition_seconds=3600, candidates="lsh"
                ) as d:
                    for f in files[: args.before]:
                        dedup_into(d, *_chunk(f)[:2], times=_chunk(f)[2])
                    # the merges the earlier loads started run now, not inside the measured chunk
                    d.compact()
                    ids, texts, times = _chunk(files[args.before])
                    c0, t0 = _cpu(), time.perf_counter()
                    into = dedup_into(d, ids, texts, times=times)
                    wall, cpu = time.perf_counter() - t0, _cpu() - c0
                    rows.append({"rep": rep, "mode": mode, "stored": len(d) - int(into.keep.sum()), "docs": len(ids), "wall_s": wall, "cpu_s": cpu})  # fmt: skip
                    print(f"{rep}  {rows[-1]['mode']:6}  against {rows[-1]['stored']:,}: wall {wall:.2f} s, CPU {cpu:.2f} s", flush=True)  # fmt: skip
                shutil.rmtree(store, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = {
        "benchmark": "bench_seed_chunk",
        "machine": machine(),
        "code": code_version(),
        "params": vars(args),
        "rows": rows,
    }
    write_results(args.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
