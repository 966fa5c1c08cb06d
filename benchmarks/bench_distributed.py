"""Distributed figures: the paper's batch mode (stored fingerprints probed per second per core
against permuted tables over the query set) and self-dedup on each engine.

    .venv/bin/python benchmarks/bench_distributed.py [--queries 1000000] [--stored 8000000]
        [--docs-copies 4 | --generated N] [--partitions P] [--engines local,dask,spark]
        [--skip-batch] [--out benchmarks/results/distributed.json]

Batch mode: ``--queries`` random 64-bit query fingerprints, ``--stored`` stored ones (1 % of them
within 3 bits of a query), one thread; the table build over the queries is timed apart from the
probe (the kernel batch_query runs), then batch_query end to end, then the general
HammingIndex.search over the same sets for comparison (same pairs, checked).

Self-dedup: the bundled sample repeated ``--docs-copies`` times with distinct ids (the copies are
exact duplicates), or ``--generated N`` short posts from bench_dedup.py's generator (10 % copies,
half edited) in 4 files; single-process :func:`neardup.dedup` vs
:func:`neardup.distributed.run_dedup` on each engine (``--partitions``, default 2 per file), end
to end, per step, shuffle bytes per step; engine start-up and a warm-up job (worker processes,
kernel loading) timed apart; quality (kept, exact/near duplicates, clusters, pairs) compared.
Prints a table and writes JSON (with a "machine" key).

Large runs (10 M posts, one engine per command): ``--data-dir DIR`` keeps the generated files
for the next command; ``--reference-out F`` saves the single-process run's quality figures and a
SHA-256 of its kept ids, ``--skip-single --reference F`` compares with them instead of
rerunning it; ``--buckets`` sets the shuffle buckets (default: the partitions), ``--workers`` the
dask/spark worker counts; ``--log F`` appends each step's start and end with the load average and
the peak RSS of this process and its children (summed, sampled every 0.5 s).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

SAMPLE = Path(__file__).resolve().parents[1] / "neardup" / "data" / "sample" / "sample.jsonl"


def bench_batch(nq: int, ns: int, k: int = 3, index_stored: int = 2_000_000) -> dict[str, Any]:
    from neardup.index import HammingIndex, batch_query
    from neardup.index._batch_kernels import build_tables, probe

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
    # the batch-mode kernel (what batch_query runs): block tables, chunks streamed through
    t0 = time.perf_counter()
    tables = build_tables(q, k)
    build = time.perf_counter() - t0
    probe(s[:1000], tables)  # compile / load the kernel
    t1 = time.perf_counter()
    pairs = 0
    for lo in range(0, ns, 1 << 20):
        pairs += int(probe(s[lo : lo + (1 << 20)], tables, lo)[0].size)
    kernel = time.perf_counter() - t1
    t2 = time.perf_counter()
    whole = batch_query(s, q, k, threads=1)  # end to end: tables, probe, sort of the pairs
    end_to_end = time.perf_counter() - t2
    assert whole[0].size == pairs
    # the general index's batched search over the same tables, for comparison
    ni = min(ns, index_stored)
    index = HammingIndex(64, k, expected_size=nq, threads=1)
    t3 = time.perf_counter()
    index.add(q)
    index_build = time.perf_counter() - t3
    index.search(s[:1000], k)
    t4 = time.perf_counter()
    index_pairs = 0
    for lo in range(0, ni, 1 << 20):
        lims, _, _ = index.search(s[lo : min(ni, lo + (1 << 20))], k)
        index_pairs += int(lims[-1])
    index_probe = time.perf_counter() - t4
    assert index_pairs == int(np.searchsorted(whole[0], ni))  # same pairs on the prefix
    return {
        "queries": nq,
        "stored": ns,
        "max_distance": k,
        "tables": f"{k + 1} blocks (pigeonhole), queries sorted by each",
        "build_s": round(build, 3),
        "probe_s": round(kernel, 3),
        "pairs": pairs,
        "stored_per_s_per_core": round(ns / kernel),
        "batch_query_end_to_end_s": round(end_to_end, 3),
        "batch_query_stored_per_s_per_core": round(ns / end_to_end),
        "hamming_index": {
            "stored": ni,
            "build_s": round(index_build, 3),
            "probe_s": round(index_probe, 3),
            "stored_per_s_per_core": round(ni / index_probe),
        },
    }


def bench_k_sweep(nq: int, ns: int = 200_000, ks: tuple[int, ...] = (4, 5, 6, 8)) -> list[dict]:
    """Stored/s/core of the block kernel and of HammingIndex.search per k (random sets), and
    what batch_query's method="auto" takes."""
    from neardup.index import HammingIndex
    from neardup.index.batch_join import batch_query, batch_tables, choose_method

    rng = np.random.default_rng(3)
    q = rng.integers(0, 2**64, nq, dtype=np.uint64)
    s = rng.integers(0, 2**64, ns, dtype=np.uint64)
    rows = []
    for k in ks:
        tables = batch_tables(q, k, method="blocks")
        batch_query(s[:100], tables, k)
        t0 = time.perf_counter()
        batch_query(s, tables, k)
        blocks = time.perf_counter() - t0
        index = HammingIndex(64, k, expected_size=nq, threads=1)
        index.add(q)
        index.search(s[:100], k)
        t1 = time.perf_counter()
        index.search(s, k)
        idx = time.perf_counter() - t1
        rows.append(
            {"k": k, "blocks_per_s": round(ns / blocks), "index_per_s": round(ns / idx),
             "auto": choose_method(nq, k)}
        )  # fmt: skip
        print(
            f"k={k}: blocks {ns / blocks:,.0f}/s, index {ns / idx:,.0f}/s, auto {rows[-1]['auto']}"
        )
    return rows


class TreeRss:
    """Peak resident memory of this process and its children (summed: dask workers, Spark's JVM
    and Python workers), sampled every ``every`` seconds on a thread; per step too (``step``)."""

    def __init__(self, every: float = 0.5) -> None:
        import threading

        import psutil  # type: ignore[import-untyped]

        self.me = psutil.Process()
        self.peak = 0
        self.step = ""
        self.per_step: dict[str, int] = {}
        self.stop = threading.Event()
        self.every = every
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def now(self) -> int:
        import psutil

        total = 0
        for p in [self.me, *self.me.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):  # a child that just ended
                total += p.memory_info().rss
        return total

    def _run(self) -> None:
        while not self.stop.wait(self.every):
            r = self.now()
            self.peak = max(self.peak, r)
            if self.step:
                self.per_step[self.step] = max(self.per_step.get(self.step, 0), r)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def kept_digest(ids: Any) -> str:
    """SHA-256 of the kept ids in order (one per line): the kept set, compared across runs."""
    import hashlib

    h = hashlib.sha256()
    for i in ids:
        h.update(f"{i}\n".encode())
    return h.hexdigest()


def _kept_ids_of(workdir: str) -> Any:
    import glob

    from neardup.distributed import _store

    for f in sorted(glob.glob(os.path.join(workdir, "kept", "p*.arrow"))):
        yield from _store.read_table(f)["id"].to_pylist()


def _generated(tmp: Path, n: int, files: int, templates: int = 0) -> list[str]:
    """``n`` short posts from benchmarks/bench_dedup.py's generator (10 % copies), as JSONL
    (kept in ``tmp`` and reused when the files are there: ``--data-dir``). ``templates``: that
    many of them (every ``n // templates``-th) replaced by a 300-word boilerplate and 20 words
    of their own (the over-cap case: band buckets far over their budget, verified lazily
    on one machine)."""
    import sys

    done = tmp / f"gen{n}-t{templates}.done"
    if done.exists():
        return json.loads(done.read_text())
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_dedup import generate

    texts = generate("short", n, seed=11, dup_rate=0.1)
    if templates:
        rng = np.random.default_rng(12)
        vocab = sorted({w for t in texts[:2000] for w in t.split()})
        base = " ".join(vocab[int(j)] for j in rng.integers(0, len(vocab), 300))
        for i in range(0, n, max(1, n // templates))[:templates]:
            own = " ".join(vocab[int(j)] for j in rng.integers(0, len(vocab), 20))
            texts[i] = f"{base} {own}"
    out = []
    per = -(-n // files)
    for f in range(files):
        p = tmp / f"gen{n}-t{templates}-{f}.jsonl"
        rows = range(f * per, min(n, (f + 1) * per))
        p.write_text("".join(json.dumps({"id": f"d{i}", "text": texts[i]}) + "\n" for i in rows))
        out.append(str(p))
    done.write_text(json.dumps(out))
    return out


def chain_stats(workdir: str) -> dict[str, Any]:
    """The keep graph of a finished ``keep="first"`` job: units with an in-edge, edges, and the
    longest directed path in units (the bound on the keep rounds)."""
    import glob

    from neardup.distributed import _store

    tabs = [_store.read_table(f) for f in sorted(glob.glob(f"{workdir}/kin/m*-r*.arrow"))]
    if not tabs:
        return {"edges": 0, "units_with_in_edges": 0, "longest_path_units": 1}
    u = np.concatenate([t["u"].to_numpy() for t in tabs])
    v = np.concatenate([t["v"].to_numpy() for t in tabs])
    o = np.argsort(v, kind="stable")  # rank = position with keep="first": u < v
    depth: dict[int, int] = {}
    for x, y in zip(u[o].tolist(), v[o].tolist(), strict=True):
        depth[y] = max(depth.get(y, 2), depth.get(x, 1) + 1)
    return {
        "edges": int(u.size),
        "units_with_in_edges": int(np.unique(v).size),
        "longest_path_units": max(depth.values(), default=1),
    }


def bench_rounds(inputs: list[str], partitions: list[int], tmp: Path) -> list[dict[str, Any]]:
    """Keep rounds per partition count (local engine); kept ids and roots checked against the
    single-process :func:`neardup.dedup`."""
    from neardup.batch.run import dedup
    from neardup.distributed import run_dedup
    from neardup.io import read_corpus
    from neardup.rules.config import DedupConfig

    with read_corpus(inputs) as c:
        ids, texts = list(c.ids), list(c.texts)
    rows = []
    for keep in ("first", "none"):
        r = dedup(texts, ids=ids, config=DedupConfig(keep=keep))
        want = ([ids[i] for i in r.kept_indices().tolist()], [ids[x] for x in r.root.tolist()])
        for p in partitions:
            w = str(tmp / f"rounds-{keep}-{p}")
            res = run_dedup(
                inputs,
                w,
                partitions=p,
                config=DedupConfig(keep=keep),
            )
            kept = res.read("kept")["id"].to_pylist()
            roots = res.read("clusters")["root_id"].to_pylist()
            k = res.steps["keep"]
            rows.append(
                {"keep": keep, "partitions": res.stats["partitions"], "rounds": k["rounds"],
                 "keep_s": k["elapsed_s"], "final_s": res.steps["final"]["elapsed_s"],
                 "same_as_single_process": (kept, roots) == want,
                 "undecided_after_round": [r.get("undecided") for r in k["per_round"]],
                 "messages_per_round": [r.get("messages") for r in k["per_round"]],
                 **(chain_stats(w) if keep == "first" and p == partitions[0] else {})}
            )  # fmt: skip
            print(rows[-1])
    return rows


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


QUALITY = ("kept", "exact_duplicates", "near_duplicates", "clusters", "pairs")


def single_reference(inputs: list[str]) -> dict[str, Any]:
    """The single-process :func:`neardup.dedup` run: time, quality figures, kept-ids digest
    (in a function: its memory is freed before the engines run)."""
    from neardup.batch.run import dedup
    from neardup.io import read_corpus

    t0 = time.perf_counter()
    with read_corpus(inputs) as c:
        ids = list(c.ids)
        r = dedup(list(c.texts), ids=ids)
    elapsed = time.perf_counter() - t0
    return {
        "engine": "single-process dedup()", "documents": r.stats["documents"],
        "elapsed_s": round(elapsed, 3), "load_avg": os.getloadavg(),
        "quality": {q: r.stats.get(q) for q in QUALITY},
        "kept_sha256": kept_digest(ids[i] for i in r.kept_indices().tolist()),
        "kept": r.stats["kept"],
        "lsh_valve": {k: r.stats["lsh"].get(k) for k in (
            "valve_bands", "capped_buckets", "deferred_pairs", "deferred_lazy", "deferred_skipped"
        )},
    }  # fmt: skip


def bench_dedup(
    copies: int,
    engines: list[str],
    generated: int = 0,
    partitions: int = 0,
    *,
    templates: int = 0,
    buckets: int = 0,
    workers: tuple[int, ...] = (1, 2),
    data_dir: str | None = None,
    reference: dict[str, Any] | None = None,
    reference_out: str | None = None,
    log: str | None = None,
) -> list[dict[str, Any]]:
    from neardup.distributed import make_engine, run_dedup

    def say(msg: str) -> None:
        if log:
            with open(log, "a") as fh:
                fh.write(f"{time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.2f} {msg}\n")

    out = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        src = Path(data_dir) if data_dir else tmp
        src.mkdir(parents=True, exist_ok=True)
        say(f"inputs: {generated or copies} in {src}")
        inputs = _generated(src, generated, 4, templates) if generated else _corpus(tmp, copies)
        parts = partitions or 2 * len(inputs)
        if reference is None:
            say("single-process dedup() starts")
            reference = single_reference(inputs)
            say(f"single-process dedup() done: {reference['elapsed_s']} s")
            if reference_out:
                Path(reference_out).write_text(json.dumps(reference, indent=2) + "\n")
        else:
            reference = {**reference, "from_file": "--reference (not rerun)"}
        want, want_q = reference["kept"], reference.get("quality")
        out.append(reference)
        for name in engines:
            for nw in workers if name != "local" else (1,):
                t0 = time.perf_counter()
                eng = make_engine(name, workers=nw)
                start = time.perf_counter() - t0
                rss = TreeRss()
                loads: dict[str, float] = {}

                def progress(
                    step: str, done: int, tasks: int, rss: TreeRss = rss,
                    loads: dict[str, float] = loads, tag: str = f"{name} x{nw}",
                ) -> None:  # fmt: skip
                    rss.step = step if done < tasks else ""
                    if done == tasks:
                        loads[step] = round(os.getloadavg()[0], 2)
                    say(f"{tag} {step} {'done' if done == tasks else 'starts'} "
                        f"({tasks} tasks) rss {rss.now() / 2**30:.2f} GiB "
                        f"peak {rss.peak / 2**30:.2f} GiB")  # fmt: skip

                try:
                    # warm-up job: worker processes start, kernels load (engine overhead)
                    t0 = time.perf_counter()
                    run_dedup(
                        _corpus(tmp, 1)[:1], str(tmp / f"warm-{name}-{nw}"), engine=eng,
                        partitions=2,
                    )  # fmt: skip
                    warm = time.perf_counter() - t0
                    say(f"{name} x{nw}: start-up {start:.1f} s, warm-up {warm:.1f} s")
                    t1 = time.perf_counter()
                    res = run_dedup(
                        inputs, str(tmp / f"w-{name}-{nw}"), engine=eng, partitions=parts,
                        buckets=buckets or None, progress=progress,
                    )  # fmt: skip
                    run = time.perf_counter() - t1
                finally:
                    rss.close()
                    eng.close()
                    if name == "spark":
                        eng.spark.stop()  # type: ignore[attr-defined]
                got_q = {q: res.stats.get(q) for q in QUALITY}
                digest = kept_digest(_kept_ids_of(res.workdir))
                out.append(
                    {"engine": f"{name} x{nw}", "documents": res.stats["documents"],
                     "start_s": round(start, 3), "elapsed_s": round(run, 3),
                     "kept": res.stats["kept"], "same_kept": res.stats["kept"] == want and
                     digest == reference.get("kept_sha256", digest),
                     "same_quality": got_q == want_q if want_q else None,
                     # with the lazy verification on one machine (the over-cap case) the
                     # engines report the matched pairs it skipped too: all else equal
                     "same_decisions": {k: v for k, v in got_q.items() if k != "pairs"}
                     == {k: v for k, v in want_q.items() if k != "pairs"} if want_q else None,
                     "quality": got_q, "kept_sha256": digest,
                     "lsh_valve": {k: res.stats["lsh"].get(k) for k in (
                         "valve_bands", "capped_buckets", "deferred_pairs", "deferred_lazy",
                         "deferred_skipped")},
                     "partitions": parts, "buckets": res.stats["buckets"],
                     "load_avg_end": os.getloadavg(), "load_avg_at_step_end": loads,
                     "peak_rss_bytes": rss.peak, "peak_rss_bytes_by_step": rss.per_step,
                     "shuffle_bytes": res.stats["shuffle_bytes"], "steps_s": res.stats["timings_s"],
                     "warmup_s": round(warm, 3),
                     "shuffle_bytes_by_step": {
                         k: v.get("shuffle_bytes", 0) for k, v in res.steps.items()
                     },
                     "written_bytes_by_step": {
                         k: v["written_bytes"] for k, v in res.steps.items() if "written_bytes" in v
                     },
                     "verify_reference_bytes": res.steps["verify"].get("reference_bytes", 0),
                     "keep_rounds": res.steps["keep"]["rounds"],
                     "keep_per_round": res.steps["keep"]["per_round"],
                     **(chain_stats(res.workdir) if name == "local" else {})}
                )  # fmt: skip
                say(f"{name} x{nw} finished: {run:.1f} s, same_kept {out[-1]['same_kept']}, "
                    f"same_quality {out[-1]['same_quality']}, "
                    f"same_decisions {out[-1]['same_decisions']}, peak {rss.peak / 2**30:.2f} GiB")  # fmt: skip
                shutil.rmtree(res.workdir, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--queries", type=int, default=1_000_000)
    ap.add_argument("--stored", type=int, default=8_000_000)
    ap.add_argument("--docs-copies", type=int, default=4)
    ap.add_argument("--engines", default="local,dask")
    ap.add_argument(
        "--generated", type=int, default=0, help="self-dedup N generated short posts instead"
    )
    ap.add_argument("--partitions", type=int, default=0)
    ap.add_argument(
        "--templates",
        type=int,
        default=0,
        help="with --generated: that many posts replaced by edited copies of one template (the "
        "over-cap case: kept ids must still equal the single process's)",
    )
    ap.add_argument("--skip-batch", action="store_true")
    ap.add_argument("--k-sweep", action="store_true", help="blocks vs index for k = 4, 5, 6, 8")
    ap.add_argument("--out", default="benchmarks/results/distributed.json")
    ap.add_argument(
        "--rounds",
        metavar="JSONL",
        help="only the keep rounds over this dataset (e.g. the dev set's docs.jsonl; or "
        "'generated' with --generated N) at --round-partitions, local engine",
    )
    ap.add_argument("--round-partitions", default="1,2,8,32")
    ap.add_argument("--buckets", type=int, default=0, help="shuffle buckets (default: partitions)")
    ap.add_argument("--workers", default="1,2", help="dask/spark worker counts to run")
    ap.add_argument("--data-dir", help="keep the generated inputs here (reused when present)")
    ap.add_argument("--skip-single", action="store_true", help="no single-process run: --reference")
    ap.add_argument("--reference", help="the single-process figures saved by --reference-out")
    ap.add_argument("--reference-out", help="save the single-process figures here")
    ap.add_argument("--log", help="append progress (steps, load, RSS) to this file")
    a = ap.parse_args()
    if a.skip_single and not a.reference:
        ap.error("--skip-single needs --reference FILE (from an earlier --reference-out)")
    if a.rounds:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            src = _generated(tmp, a.generated, 4) if a.rounds == "generated" else [a.rounds]
            parts = [int(x) for x in a.round_partitions.split(",")]
            out = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                               "python": platform.python_version(),
                               "load_avg": os.getloadavg()},
                   "dataset": a.rounds if a.rounds != "generated" else f"generated {a.generated}",
                   "rounds": bench_rounds(src, parts, tmp)}  # fmt: skip
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(out, indent=2) + "\n")
        return
    batch = {} if a.skip_batch else bench_batch(a.queries, a.stored)
    if batch:
        print(
            f"batch mode: tables over {batch['queries']:,} queries (build {batch['build_s']} s), "
            f"{batch['stored']:,} stored probed in {batch['probe_s']} s = "
            f"{batch['stored_per_s_per_core']:,} /s/core, {batch['pairs']:,} pairs; "
            f"HammingIndex.search {batch['hamming_index']['stored_per_s_per_core']:,} /s/core"
        )
    sweep = bench_k_sweep(a.queries) if a.k_sweep else None
    rows = bench_dedup(
        a.docs_copies, [e for e in a.engines.split(",") if e], a.generated, a.partitions,
        templates=a.templates, buckets=a.buckets, workers=tuple(int(x) for x in a.workers.split(",")),
        data_dir=a.data_dir, reference_out=a.reference_out, log=a.log,
        reference=json.loads(Path(a.reference).read_text()) if a.skip_single else None,
    )  # fmt: skip
    print(f"{'engine':<24}{'docs':>9}{'start s':>9}{'warm s':>8}{'run s':>8}{'kept':>9}  shuffle B")
    for r in rows:
        print(
            f"{r['engine']:<24}{r['documents']:>9,}{r.get('start_s', 0):>9.2f}"
            f"{r.get('warmup_s', 0):>8.2f}{r['elapsed_s']:>8.2f}{r['kept']:>9,}"
            f"  {r.get('shuffle_bytes', '')}"
        )
    result = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "load_avg": os.getloadavg()},
        "batch": batch,
        **({"batch_k_sweep": sweep} if sweep else {}),
        "dedup": rows,
    }  # fmt: skip
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
