"""Distributed figures: the paper's batch mode (stored fingerprints probed per second per core
against permuted tables over the query set) and self-dedup on each engine.

    .venv/bin/python benchmarks/bench_distributed.py [--queries 1000000] [--stored 8000000]
        [--docs-copies 4] [--engines local,dask] [--out benchmarks/results/distributed.json]

Batch mode: ``--queries`` random 64-bit query fingerprints, ``--stored`` stored ones (1 % of them
within 3 bits of a query), one thread; the table build over the queries is timed apart from the
probe. Self-dedup: the bundled sample repeated ``--docs-copies`` times with distinct ids (the
copies are exact duplicates), single-process :func:`neardup.dedup` vs
:func:`neardup.distributed.run_dedup` on each engine (2 partitions per copy), end to end, per
step, engine start-up apart. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

SAMPLE = Path(__file__).resolve().parents[1] / "neardup" / "data" / "sample" / "sample.jsonl"


def bench_batch(nq: int, ns: int, k: int = 3) -> dict[str, Any]:
    from neardup.distributed import batch_query
    from neardup.index import HammingIndex

    rng = np.random.default_rng(7)
    q = rng.integers(0, 2**64, nq, dtype=np.uint64)
    s = rng.integers(0, 2**64, ns, dtype=np.uint64)
    near = rng.random(ns) < 0.01
    flips = rng.integers(0, 64, (int(near.sum()), 2)).astype(np.uint64)
    s[near] = (
        q[rng.integers(0, nq, int(near.sum()))]
        ^ (np.uint64(1) << flips[:, 0])
        ^ (np.uint64(1) << flips[:, 1])
    )
    t0 = time.perf_counter()
    index = HammingIndex(64, k, expected_size=nq, threads=1)
    index.add(q)
    build = time.perf_counter() - t0
    index.search(s[:1000], k)  # warm the kernels
    t1 = time.perf_counter()
    pairs = 0
    for lo in range(0, ns, 1 << 20):
        lims, _, _ = index.search(s[lo : lo + (1 << 20)], k)
        pairs += int(lims[-1])
    probe = time.perf_counter() - t1
    t2 = time.perf_counter()
    batch_query(s[: 1 << 20], q[:1000], k)  # the function end to end, small
    small = time.perf_counter() - t2
    return {
        "queries": nq,
        "stored": ns,
        "max_distance": k,
        "tables": index.plan.to_dict() if hasattr(index.plan, "to_dict") else str(index.plan),
        "build_s": round(build, 3),
        "probe_s": round(probe, 3),
        "pairs": pairs,
        "stored_per_s_per_core": round(ns / probe),
        "batch_query_1M_vs_1k_s": round(small, 3),
    }


def _corpus(tmp: Path, copies: int) -> list[str]:
    rows = SAMPLE.read_text(encoding="utf-8").splitlines()
    files = []
    for c in range(copies):
        f = tmp / f"copy{c}.jsonl"
        out = []
        for line in rows:
            obj = json.loads(line)
            obj["id"] = f"{c}-{obj['id']}"
            out.append(json.dumps(obj))
        f.write_text("\n".join(out) + "\n")
        files.append(str(f))
    return files


def bench_dedup(copies: int, engines: list[str]) -> list[dict[str, Any]]:
    from neardup.dedup import dedup
    from neardup.distributed import make_engine, run_dedup
    from neardup.io import read_corpus

    out = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        inputs = _corpus(tmp, copies)
        t0 = time.perf_counter()
        with read_corpus(inputs) as c:
            r = dedup(list(c.texts), ids=list(c.ids))
        want = r.stats["kept"]
        out.append(
            {"engine": "single-process dedup()", "documents": r.stats["documents"],
             "elapsed_s": round(time.perf_counter() - t0, 3), "kept": want}
        )  # fmt: skip
        for name in engines:
            for workers in [1, 2] if name != "local" else [1]:
                t0 = time.perf_counter()
                eng = make_engine(name, workers=workers)
                start = time.perf_counter() - t0
                try:
                    t1 = time.perf_counter()
                    res = run_dedup(
                        inputs, str(tmp / f"w-{name}-{workers}"), engine=eng,
                        partitions=2 * copies,
                    )  # fmt: skip
                    run = time.perf_counter() - t1
                finally:
                    eng.close()
                    if name == "spark":
                        eng.spark.stop()  # type: ignore[attr-defined]
                out.append(
                    {"engine": f"{name} x{workers}", "documents": res.stats["documents"],
                     "start_s": round(start, 3), "elapsed_s": round(run, 3),
                     "kept": res.stats["kept"], "same_kept": res.stats["kept"] == want,
                     "shuffle_bytes": res.stats["shuffle_bytes"], "steps_s": res.stats["timings_s"]}
                )  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--queries", type=int, default=1_000_000)
    ap.add_argument("--stored", type=int, default=8_000_000)
    ap.add_argument("--docs-copies", type=int, default=4)
    ap.add_argument("--engines", default="local,dask")
    ap.add_argument("--out", default="benchmarks/results/distributed.json")
    a = ap.parse_args()
    batch = bench_batch(a.queries, a.stored)
    print(
        f"batch mode: tables over {batch['queries']:,} queries (build {batch['build_s']} s), "
        f"{batch['stored']:,} stored probed in {batch['probe_s']} s = "
        f"{batch['stored_per_s_per_core']:,} /s/core, {batch['pairs']:,} pairs"
    )
    rows = bench_dedup(a.docs_copies, [e for e in a.engines.split(",") if e])
    print(f"{'engine':<24}{'docs':>8}{'start s':>9}{'run s':>8}{'kept':>7}  shuffle bytes")
    for r in rows:
        print(
            f"{r['engine']:<24}{r['documents']:>8,}{r.get('start_s', 0):>9.2f}"
            f"{r['elapsed_s']:>8.2f}{r['kept']:>7,}  {r.get('shuffle_bytes', '')}"
        )
    result = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version()},
        "batch": batch,
        "dedup": rows,
    }  # fmt: skip
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
