"""The seeds' window, built and run end to end (issue 36): generated posts and articles over
48 hours, with planted near-duplicates arriving over time, in an ``lsh`` store served over HTTP.

One run per size (``--n``, or ``--sizes`` for the growth curve, all in one JSON):

1. **generate** the window (``benchmarks/window_corpus.py``: 80 % posts of 5-60 tokens, 15 %
   news, 5 % long articles, English and Chinese; 5 % planted near-duplicates of earlier
   documents, 2 % planted non-duplicates just below the 0.8 threshold) as zstd JSONL chunks,
   in ``--gen-workers`` processes, and the documents that follow it (the load); generation
   speed is reported;
2. **seed** a store with it, in a child process: through the store's bulk path where this
   neardup has one (``Deduplicator.load``), else through ``check_and_add`` in batches of
   ``--seed-batch`` in arrival order (``--seed-path``; the JSON says which ran); ``--seed-path
   as-is`` loads every document and decides nothing (a window restored from an export that was
   deduplicated upstream: the planted copies are stored beside their sources). The store is an
   ``lsh`` store with hourly partitions (``--partition-hours``) and a retention of the window
   plus ``--margin-hours``, so that nothing leaves the window while it is measured; times span
   ``--hours`` (1 M documents an hour at 48 M, scaled with ``--n``). Reported: time, documents/s,
   CPU per document, the seeding process's peak memory, and, on the ``check_and_add`` path,
   how the planted copies were decided as they arrived;
3. **serve** it (``neardup serve`` in a child process, ``ServerProcess``) and, from this process:
   the planted pairs' **recall and precision** (``--probes`` documents checked in batches of
   ``--probe-batch``: planted near-duplicates and near-threshold non-duplicates of window
   originals, and fresh documents paired with random window originals; a pair is reported when
   the check names the source among its verified matches; F1 from the two; in an ``lsh``
   store the misses split into the plan's, pairs that share no band key with their source
   under the store's plan (signed in this process: no window of any size finds them by
   MinHash), those whose source the store does not hold (a keep-first seed dropped it as a
   near duplicate of an earlier document, so no check can name it), and the store's, missed
   with a key shared); **durable
   check-and-inserts/s** in batches of ``--batch`` on ``--connections`` connections for
   ``--duration`` s and the server's CPU per document (``benchmarks/loadgen.py``, a second
   process); single-request **p50 / p99 at ``--rate`` requests/s** (open loop, from the
   scheduled send time) for ``--latency-duration`` s; the server's RSS (sampled: peak, and the
   median of the latency phase as the steady figure); the disk of the data directory by part;
   **restart after SIGKILL** to the first answer (and whether a sample of checks answers the
   same before and after);
4. **retention drop**, in process on the stopped store with a clock this benchmark moves:
   the cutoff advances one partition at a time (``--drop-hours`` times) while a thread checks
   single documents at ``--drop-check-rate``/s; per drop: the writer's time in the drop (its
   passes, the longest, and when the hour's rows were all deleted), the
   rows dropped, the worst and p99 check latency (from the scheduled time) around it; then
   probes whose sources were in the dropped hours are checked again (they must find nothing).

Targets (issue 36, at 50 M on a 2-core, 24 GiB machine): seeding >= 100,000 documents/s (the
bulk path), RSS <= 8 GiB, disk <= 40 GB (800 bytes per document), batch check-and-inserts
>= 10,000/s, p99 <= 10 ms at 500 requests/s, recall and precision >= 0.99, restart <= 60 s,
no check stalled > 100 ms by a drop. Each size says which it met; below 50 M they say how the
store scales, not whether 50 M meets them.

Before each size the free disk under ``--data`` is checked against an estimate (corpus, store at
``--store-bytes-per-doc``, or the last size's measured figure) and the run refuses to start
when it does not fit.

    nice -n 5 .venv/bin/python benchmarks/bench_window.py --n 1000000
    nice -n 5 .venv/bin/python benchmarks/bench_window.py --sizes 1000000,10000000,50000000 \\
        --data /big/disk/bw

Prints a table and writes ``benchmarks/results/bench_window_<n>.json`` (growth:
``bench_window_growth_<n1>_<n2>...json``) with the machine, the commit, every parameter and
every figure. A size's ``code_by_step`` names the commit each of its processes ran (the
seeding and drop steps note theirs as they start, the server's as it is started, always from
this tree: ``PYTHONPATH``) and warns when one is not the run's own: a commit made in the tree
during a long run is run by the steps that start after it.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import window_corpus as wc  # noqa: E402
from bench_service import (  # noqa: E402
    code_version,
    cpu_probe,
    cpu_seconds,
    first_answer,
    loadgen,
    proc_loadavg,
    read_memory,
    settle,
    startup_log,
    wal_stats,
)
from bench_store import disk_by_kind  # noqa: E402

from neardup.service.testing import ServerProcess  # noqa: E402

GIB = 2**30
#: written beside a kept store once its retention drops start (--reuse-store refuses it)
DROPS_MARK = "drops-ran.json"
#: the code this run began with (``main`` sets it; its steps note their own: ``code_by_step``)
RUN_CODE: dict[str, Any] = {}
#: issue 36's targets at 50 M: figure -> (comparison, value)
TARGETS = {
    "seed_docs_per_s": (">=", 100_000),
    "rss_peak_bytes": ("<=", 8 * GIB),
    "disk_bytes_per_doc": ("<=", 40e9 / 50e6),
    "batch_docs_per_s": (">=", 10_000),
    "single_p99_ms": ("<=", 10.0),
    "recall": (">=", 0.99),
    "precision": (">=", 0.99),
    "restart_s": ("<=", 60.0),
    "drop_max_check_ms": ("<=", 100.0),
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------
# machine, disk


def machine() -> dict[str, Any]:
    mem = 0
    with (
        contextlib.suppress(OSError, ValueError, IndexError),
        open("/proc/meminfo", encoding="ascii") as f,
    ):
        mem = int(f.readline().split()[1]) * 1024
    return {
        "cores": os.cpu_count(),
        "cores_usable": cpu_count(),
        "memory_bytes": mem,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "note": "shared 2-core VM; other engineers' jobs may run beside it (load average below)",
    }


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def free_bytes(path: Path) -> int:
    p = path
    while not p.exists():
        p = p.parent
    return shutil.disk_usage(p).free


def disk_need(args: argparse.Namespace, n: int, store_bpd: float, corpus_reused: bool) -> dict[str, float]:  # fmt: skip
    """Bytes a size needs under --data: the corpus (zstd JSONL, ~0.35 of the texts), the load
    files, the store, and 10 % + 1 GiB of room."""
    spec = wc.WindowSpec(n=max(n, 1000), seed=args.seed, zh=args.zh, mix=args.mix)
    text = wc.mean_text_bytes(spec, 5000)
    corpus = 0.0 if corpus_reused else n * (text + 55) * 0.4
    load = (args.duration * args.prepare_rate + args.rate * (args.latency_duration + args.latency_warmup)) * (text + 12)  # fmt: skip
    store = n * store_bpd
    return {
        "corpus": corpus,
        "load_files": load,
        "store": store,
        "total": 1.1 * (corpus + load + store) + GIB,
        "store_bytes_per_doc": store_bpd,
    }


# ------------------------------------------------------------------------------------------
# step 3: the server


class Sampler(threading.Thread):
    """The server's VmRSS / RssAnon / RssFile every ``interval`` s (a time series)."""

    def __init__(self, interval: float = 0.25) -> None:
        super().__init__(name="rss-sampler", daemon=True)
        self.interval = interval
        self.pid = 0
        self.samples: list[tuple[float, int, int, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            if self.pid:
                m = read_memory(self.pid)
                if m:
                    self.samples.append((time.perf_counter(), m.get("VmRSS", 0), m.get("RssAnon", 0), m.get("RssFile", 0)))  # fmt: skip

    def between(self, a: float, b: float) -> list[tuple[float, int, int, int]]:
        return [s for s in self.samples if a <= s[0] <= b]


def check_probes(url: str, pr: wc.Probes, idx: list[int], batch: int) -> tuple[list[set[str]], float]:  # fmt: skip
    """``check`` the probes ``idx`` in batches; each one's set of reported match ids."""
    from neardup import Client

    out: list[set[str]] = []
    t0 = time.perf_counter()
    with Client(url, timeout=600) as client:
        for a in range(0, len(idx), batch):
            sel = idx[a : a + batch]
            got = client.check([{"id": f"probe-{i}", "text": pr.texts[i]} for i in sel])
            out += [{m.id for m in g.matches} for g in got]
    return out, time.perf_counter() - t0


def score(pr: wc.Probes, idx: list[int], reported: list[set[str]]) -> dict[str, Any]:
    """Recall over the planted near-duplicates, precision over the labelled pairs (planted
    near-duplicates reported, against planted non-duplicates and random pairs reported), F1;
    by slice; and how many matches named a document the probe is not paired with."""
    names = pr.slices()
    tp = fn = fp = tn = other = 0
    slices: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for i, got in zip(idx, reported, strict=True):
        src = wc.doc_id(int(pr.source[i]))
        hit = src in got
        other += len(got - {src})
        c = slices[names[i]]
        c["n"] += 1
        c["reported"] += hit
        if pr.label[i]:
            tp += hit
            fn += not hit
        else:
            fp += hit
            tn += not hit
    recall = tp / (tp + fn) if tp + fn else None
    precision = tp / (tp + fp) if tp + fp else None
    f1 = (
        2 * recall * precision / (recall + precision)
        if recall is not None and precision is not None and recall + precision > 0
        else None
    )
    return {
        "probes": len(idx),
        "near_duplicates": tp + fn,
        "non_duplicates": fp + tn,
        "true_positives": tp,
        "false_negatives": fn,
        "false_positives": fp,
        "recall": recall,
        "precision": precision,
        "f1": f1,
        "other_matches": other,
        "slices": {
            k: dict(v) | {"share_reported": v["reported"] / v["n"]}
            for k, v in sorted(slices.items())
        },
    }


def no_shared_key(spec: wc.WindowSpec, pr: wc.Probes, ns: Path) -> tuple[dict[str, Any], set[int]]:  # fmt: skip
    """(the store's plan, the planted near duplicates that share no MinHash band key with their
    source under it): the MinHash channel cannot find those in a window of any size, so the
    recall they leave is the plan's, not the store's. Signed in this process with an
    in-memory store of the plan in the store's config."""
    from neardup import Deduplicator
    from neardup.fingerprint.minhash import NO_KEYS

    lsh = json.loads((ns / "config.json").read_text())["body"]["lsh"]
    d = Deduplicator.open(None, candidates="lsh", lsh_bands=lsh["bands"], lsh_rows=lsh["rows"])
    out: set[int] = set()
    try:
        dup = np.flatnonzero(pr.label)
        src = pr.source[dup]
        originals, _ = wc.texts(
            spec, src, np.full(src.size, -1, np.int64), np.full(src.size, wc.ROLE_ORIGINAL, np.int64)
        )  # fmt: skip
        for a in range(0, dup.size, 1000):
            sel = dup[a : a + 1000].tolist()
            qa = d.prepare([{"id": f"p{i}", "text": pr.texts[i]} for i in sel])
            qb = d.prepare([{"id": f"s{i}", "text": t} for i, t in zip(sel, originals[a : a + 1000], strict=True)])  # fmt: skip
            shared = ((qa.bands == qb.bands) & (qa.bands != NO_KEYS)).any(axis=1)
            out.update(i for i, ok in zip(sel, shared.tolist(), strict=True) if not ok)
    finally:
        d.close()
    return {"bands": lsh["bands"], "rows": lsh["rows"]}, out


def split_misses(spec: wc.WindowSpec, pr: wc.Probes, ns: Path, reported: list[set[str]], url: str) -> dict[str, Any]:  # fmt: skip
    """The planted near duplicates' misses split into the plan's (no band key shared with the
    source: :func:`no_shared_key`), those whose source the store does not hold (a keep-first
    seed dropped it as a near duplicate of an earlier document: the probe cannot name it; how
    many of them the check still found a duplicate is said) and the store's (a key shared,
    the source stored, yet not reported: the bucket valve, the bounds, verification), by
    slice. ``url``: the server, asked whether each missed probe's source is stored."""
    from neardup import Client, NotFoundError

    plan, none = no_shared_key(spec, pr, ns)
    names = pr.slices()
    missed = {
        i for i in np.flatnonzero(pr.label).tolist()
        if wc.doc_id(int(pr.source[i])) not in reported[i]
    }  # fmt: skip
    gone: set[int] = set()
    with Client(url, timeout=600) as client:
        for i in sorted(missed - none):
            try:
                client.get(wc.doc_id(int(pr.source[i])))
            except NotFoundError:
                gone.add(i)
    near = int(pr.label.sum())
    by: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for i in none:
        by[names[i]]["no_shared_key"] += 1
    for i in gone:
        by[names[i]]["source_not_stored"] += 1
    for i in missed - none - gone:
        by[names[i]]["missed_with_a_shared_key"] += 1
    return {
        "plan": plan,
        "near_duplicates": near,
        "no_shared_key": len(none),
        "plan_recall": 1 - len(none) / near if near else None,
        "no_shared_key_found_anyway": len(none - missed),
        "source_not_stored": len(gone),
        "source_not_stored_found_a_duplicate": sum(1 for i in gone if reported[i]),
        "missed_with_a_shared_key": len(missed - none - gone),
        "by_slice": {k: dict(v) for k, v in sorted(by.items())},
    }


def write_load(path: Path, spec: wc.WindowSpec, lo: int, count: int) -> None:
    """The texts of stream positions [lo, lo + count) as JSONL for ``loadgen.py --texts file``."""
    import orjson

    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        for a in range(lo, lo + count, 100_000):
            texts = wc.stream_texts(spec, a, min(100_000, lo + count - a))
            fh.write(b"".join(orjson.dumps({"text": t}) + b"\n" for t in texts))
    os.replace(tmp, path)


def measure_server(args: argparse.Namespace, run: dict[str, Any], root: Path, ns: Path, pr: wc.Probes, loads: dict[str, Path]) -> dict[str, Any]:  # fmt: skip
    """Start ``neardup serve`` on ``root`` and run step 3 against it."""
    import httpx

    r: dict[str, Any] = {}
    srv_args = ["--log-level", "info", "--max-batch", str(max(10_000, args.batch))]
    # the server imports this tree's neardup whatever the working directory (``python -m``
    # would take the current directory's, or the installed one), and its code is noted as it
    # starts: a commit made in the tree since this run began is what it runs
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    srv = ServerProcess(
        root,
        args=srv_args + ([] if args.verify_meta else ["--no-verify-meta"]),
        env={"PYTHONPATH": path},
    )
    r["code"] = code_version()
    sampler = Sampler()
    sampler.start()
    try:
        log("starting the server ...")
        t = srv.start(timeout=3600)
        sampler.pid = srv.proc.pid if srv.proc else 0
        pid = sampler.pid
        r["start_to_healthz_s"] = t
        r["start_to_first_answer_s"] = t + first_answer(srv.url, 3600)
        r["memory_after_start"] = read_memory(pid)
        r["cpu_probe_before"] = None if args.no_cpu_probe else cpu_probe()

        log(f"recall / precision: checking {len(pr.texts):,} probes ...")
        idx = list(range(len(pr.texts)))
        reported, secs = check_probes(srv.url, pr, idx, args.probe_batch)
        r["quality"] = score(pr, idx, reported) | {
            "seconds": secs,
            "checks_per_s": len(idx) / secs,
            "batch": args.probe_batch,
        }
        q = r["quality"]
        log(f"  recall {q['recall']}, precision {q['precision']}, F1 {q['f1']}")
        if json.loads((ns / "config.json").read_text())["body"].get("candidates") == "lsh":
            spec = wc.WindowSpec.from_dict(run["spec"])
            q["misses"] = m = split_misses(spec, pr, ns, reported, srv.url)
            log(f"  misses: {m['no_shared_key']} planted pairs share no band key with their source (the plan's recall {m['plan_recall']:.4f}), {m['source_not_stored']} sources not stored (the seed dropped them; {m['source_not_stored_found_a_duplicate']} of those probes still found a duplicate), {m['missed_with_a_shared_key']} missed with a shared key")  # fmt: skip

        log(f"throughput: batches of {args.batch} for {args.duration} s (loadavg {proc_loadavg()}) ...")  # fmt: skip
        la0, cpu0, wal0 = proc_loadavg(), cpu_seconds(pid), wal_stats(srv.url)
        ta = time.perf_counter()
        thr = loadgen(
            srv.url, "--mode", "throughput", "--batch", str(args.batch),
            "--connections", str(args.connections), "--duration", str(args.duration),
            "--texts", "file", "--texts-file", str(loads["throughput"]),
            "--prepare-rate", str(args.prepare_rate), "--seed", str(args.seed * 1000 + 1),
            timeout=args.duration + 1800,
        )  # fmt: skip
        tb = time.perf_counter()
        thr["server_cpu_s"] = cpu_seconds(pid) - cpu0
        thr["server_cpu_ms_per_doc"] = 1000 * thr["server_cpu_s"] / max(1, thr["docs_acknowledged"])  # fmt: skip
        thr["proc_loadavg"] = [la0, proc_loadavg()]
        thr["wal"] = {k: v - wal0.get(k, 0) for k, v in wal_stats(srv.url).items()}
        thr["rss_peak_sampled_bytes"] = max((s[1] for s in sampler.between(ta, tb)), default=0)
        r["throughput"] = thr
        log(f"  {thr['docs_per_s']:,.0f} docs/s, {thr['server_cpu_ms_per_doc']:.3f} ms CPU each")
        r["settle_s"] = settle(srv.url, timeout=1800)

        log(f"latency: {args.rate:g} single requests/s for {args.latency_duration} s ...")
        la0, cpu0 = proc_loadavg(), cpu_seconds(pid)
        ta = time.perf_counter()
        lat = loadgen(
            srv.url, "--mode", "latency", "--rate", str(args.rate),
            "--duration", str(args.latency_duration), "--warmup", str(args.latency_warmup),
            "--texts", "file", "--texts-file", str(loads["latency"]),
            "--seed", str(args.seed * 1000 + 2), timeout=args.latency_duration + 1800,
        )  # fmt: skip
        tb = time.perf_counter()
        lat["server_cpu_s"] = cpu_seconds(pid) - cpu0
        sent = lat["requests"] + lat.get("warmup", {}).get("requests", 0)
        lat["server_cpu_ms_per_request"] = 1000 * lat["server_cpu_s"] / max(1, sent)
        lat["proc_loadavg"] = [la0, proc_loadavg()]
        r["latency"] = lat
        steady = sampler.between(ta + args.latency_warmup, tb)
        r["rss_steady_bytes"] = int(statistics.median(s[1] for s in steady)) if steady else None
        r["cpu_probe_after"] = None if args.no_cpu_probe else cpu_probe()
        log(f"  p50 / p99 {lat['latency_from_schedule'].get('p50_ms', 0):.2f} / {lat['latency_from_schedule'].get('p99_ms', 0):.2f} ms")  # fmt: skip

        stats = httpx.get(srv.url + "/v1/ns/default", timeout=60).json()["stats"]
        r["documents_in_window"] = int(stats["documents"])
        r["segments"] = int(stats.get("segments", 0))  # what every query searches
        r["memtable_rows_at_kill"] = int(stats.get("memtable_rows", 0))
        r["disk_at_end_of_load"] = disk_by_kind(ns)
        r["memory_before_kill"] = read_memory(pid)
        r["rss_peak_bytes"] = r["memory_before_kill"].get("VmHWM", 0)

        # the same answers before and after a SIGKILL
        sample = idx[: min(len(idx), 1000)]
        before, _ = check_probes(srv.url, pr, sample, args.probe_batch)
        log("restart after SIGKILL ...")
        srv.kill()
        r["startup_first"] = startup_log(srv.last_stderr)
        sampler.pid = 0
        t = srv.start(timeout=3600)
        sampler.pid = srv.proc.pid if srv.proc else 0
        r["restart_to_healthz_s"] = t
        r["restart_s"] = t + first_answer(srv.url, 3600)
        after, _ = check_probes(srv.url, pr, sample, args.probe_batch)
        r["answers_after_restart"] = {
            "checked": len(sample),
            "different": sum(a != b for a, b in zip(before, after, strict=True)),
        }
        r["memory_after_restart"] = read_memory(sampler.pid)
        r["rss_peak_bytes"] = max(r["rss_peak_bytes"], r["memory_after_restart"].get("VmHWM", 0))
        log(f"  answered {r['restart_s']:.1f} s after the kill ({r['memtable_rows_at_kill']:,} rows only in the log)")  # fmt: skip
        t0 = time.perf_counter()
        r["graceful_stop_rc"] = srv.stop(timeout=1800)
        r["graceful_stop_s"] = time.perf_counter() - t0
        r["startup_after_kill"] = startup_log(srv.last_stderr)
    finally:
        if srv.proc is not None and srv.proc.poll() is None:
            srv.kill()
        sampler.stop.set()
        sampler.join()
    samples = sampler.samples
    r["rss_sampled_peak"] = {
        "VmRSS": max((s[1] for s in samples), default=0),
        "RssAnon": max((s[2] for s in samples), default=0),
        "RssFile": max((s[3] for s in samples), default=0),
    }
    return r


# ------------------------------------------------------------------------------------------
# one size


def child(kind: str, job: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run a step of ``window_steps.py`` in a new process (its memory and CPU its own)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(job, f)
    try:
        out = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("window_steps.py")), kind, f.name],
            stdout=subprocess.PIPE,
            text=True,
            timeout=timeout,
            check=False,
        )
    finally:
        os.unlink(f.name)
    if out.returncode != 0:
        raise SystemExit(f"the {kind} step failed (exit {out.returncode}); its output is above")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def run_size(args: argparse.Namespace, n: int, data: Path, store_bpd: float) -> dict[str, Any]:
    """Steps 1-4 at ``n`` documents in ``data``."""
    ps = int(args.partition_hours * 3600)
    corpus_dir = (args.corpus / str(n)) if args.corpus else data / "corpus"
    manifest = corpus_dir / "corpus.json"
    # the window ends where the current partition starts; a corpus reused from an earlier run
    # keeps its times (the retention grows by the lag instead)
    t0 = math.floor(time.time() / ps) * ps - args.hours * 3600
    spec = wc.WindowSpec(
        n=n, seed=args.seed, t0=float(t0), hours=args.hours, zh=args.zh, mix=args.mix,
        dup_rate=args.dup_rate, neg_rate=args.neg_rate,
    )  # fmt: skip
    reused = False
    if manifest.exists():
        old = json.loads(manifest.read_text()).get("spec", {})
        if old.get("t0", 0) <= t0 and old == wc.as_json(spec.to_dict()) | {"t0": old.get("t0")}:
            spec, reused = wc.WindowSpec.from_dict(old), True
    lag = t0 - spec.t0
    retention = args.hours * 3600 + lag + args.margin_hours * 3600
    res: dict[str, Any] = {
        "n": n,
        "timeline": {
            "t0": spec.t0,
            "hours": args.hours,
            "docs_per_hour": n / args.hours,
            "partition_seconds": ps,
            "retention_s": retention,
            "note": "times span [t0, t0 + hours); the retention is the window plus a margin "
            "(and the age of a reused corpus) so that nothing leaves it while it is measured; "
            "the drop step moves a clock instead",
        },
        "spec": spec.to_dict(),
    }
    need = disk_need(args, n, store_bpd, reused)
    if args.reuse_store and (data / "server" / "namespaces" / "default" / "MANIFEST.json").exists():
        need["total"] -= 1.1 * need["store"]  # the store is there already
    free = free_bytes(data)
    res["disk_check"] = {"free_bytes": free, "need_bytes": need}
    if free < need["total"]:
        raise SystemExit(
            f"bench_window: --n {n:,} needs about {need['total'] / 1e9:.1f} GB free under {data} "
            f"(corpus {need['corpus'] / 1e9:.1f} GB, store {need['store'] / 1e9:.1f} GB at "
            f"{need['store_bytes_per_doc']:,.0f} bytes per document, load files "
            f"{need['load_files'] / 1e9:.1f} GB, 10 % + 1 GiB of room), but {free / 1e9:.1f} GB "
            "are free. Nothing was started: free some space, point --data (and --corpus) at a "
            "bigger disk, or run a smaller --n."
        )
    data.mkdir(parents=True, exist_ok=True)
    root = data / "server"
    ns = root / "namespaces" / "default"
    reuse = args.reuse_store and (ns / "MANIFEST.json").exists()
    if ns.exists() and not reuse:
        shutil.rmtree(ns)
    ns.mkdir(parents=True, exist_ok=True)

    if reuse:  # its corpus is not read again: the spec (its times) and figures of the build's
        if not reused:
            raise SystemExit(f"--reuse-store: {manifest} does not hold this window's spec")
        if (data / DROPS_MARK).exists():
            raise SystemExit(
                f"--reuse-store: the retention drops of an earlier run took the first hours out "
                f"of {ns} ({data / DROPS_MARK}), so its recall and drops would not be this "
                "window's: build it again, or reuse the store of a run stopped before its drops"
            )
        res["corpus"] = {**json.loads(manifest.read_text()), "reused": True}
    else:
        log(f"== {n:,} documents: generating the window into {corpus_dir} ...")
        res["corpus"] = wc.generate(spec, corpus_dir, chunk=args.chunk, workers=args.gen_workers)
    g = res["corpus"]["generation"]
    log(f"  {'reused' if res['corpus'].get('reused') else 'generated'}: {g['docs_per_s'] or 0:,.0f} docs/s with {g['workers']} workers, {res['corpus']['text_bytes'] / n:.0f} text bytes per document")  # fmt: skip
    thr_docs = int(args.duration * args.prepare_rate) + args.batch * args.connections
    lat_docs = int(args.rate * (args.latency_duration + args.latency_warmup)) + 10
    loads = {"throughput": data / "load-throughput.jsonl", "latency": data / "load-latency.jsonl"}
    t = time.perf_counter()
    write_load(loads["throughput"], spec, n, thr_docs)
    write_load(loads["latency"], spec, n + thr_docs, lat_docs)
    res["load_files"] = {"throughput_docs": thr_docs, "latency_docs": lat_docs, "seconds": time.perf_counter() - t}  # fmt: skip
    m = args.probes or min(20_000, max(200, n // 50))
    t = time.perf_counter()
    pr = wc.probes(spec, m)
    res["probes_generated_s"] = time.perf_counter() - t

    if reuse:  # phases 3-4 on the store an earlier run built (its build figures are that run's)
        log(f"reusing the window already built in {ns} (not seeded again)")
        res["seed"] = {"path": "reused", "seconds": None, "docs_per_s": None}
        res["disk_after_seed"] = disk_by_kind(ns)
        return measure_and_drop(args, res, root, ns, pr, loads, spec, retention, ps, n, thr_docs, lat_docs, m)  # fmt: skip
    log(f"seeding ({args.seed_path}) ...")
    la0 = proc_loadavg()
    seed = child(
        "seed",
        {
            "spec": spec.to_dict(), "ns": str(ns), "retention_s": retention,
            "partition_seconds": ps, "chunks": res["corpus"]["chunks"], "path": args.seed_path,
            "batch": args.seed_batch, "inflight": args.seed_inflight,
            "collector": args.seed_collector,
            "plan": {"lsh_bands": args.lsh_bands, "lsh_rows": args.lsh_rows},
        },
        timeout=48 * 3600,
    )  # fmt: skip
    seed["proc_loadavg"] = [la0, proc_loadavg()]
    # the build: from opening an empty store to the closed store (merges run, memtable flushed)
    seed["docs_per_s"] = n / seed["seconds"]
    seed["loop_docs_per_s"] = n / seed["seed_loop_s"]
    seed["cpu_ms_per_doc"] = 1000 * seed["cpu_s"] / n
    seed["loop_cpu_ms_per_doc"] = 1000 * seed["seed_loop_cpu_s"] / n
    if seed.get("decisions"):
        seed["in_stream_recall"] = _in_stream(seed["decisions"])
    res["seed"] = seed
    res["disk_after_seed"] = disk_by_kind(ns)
    log(f"  path {seed['path']}: built in {seed['seconds']:.0f} s, {seed['docs_per_s']:,.0f} docs/s, {seed['cpu_ms_per_doc']:.3f} ms CPU each, {seed['documents']:,} in the window")  # fmt: skip

    return measure_and_drop(args, res, root, ns, pr, loads, spec, retention, ps, n, thr_docs, lat_docs, m)  # fmt: skip


def measure_and_drop(args: argparse.Namespace, res: dict[str, Any], root: Path, ns: Path, pr: wc.Probes, loads: dict[str, Path], spec: wc.WindowSpec, retention: float, ps: int, n: int, thr_docs: int, lat_docs: int, m: int) -> dict[str, Any]:  # fmt: skip
    """Steps 3-4 on the built store."""
    res["server"] = measure_server(args, res, root, ns, pr, loads)

    log("retention drops (in process, a moved clock) ...")
    # from here on the store's first hours leave: --reuse-store refuses it (see main)
    (root.parent / DROPS_MARK).write_text(json.dumps({"hours": args.drop_hours}) + "\n")
    drop = child(
        "drop",
        {
            "spec": spec.to_dict(), "ns": str(ns), "retention_s": retention,
            "partition_seconds": ps, "hours": args.drop_hours, "rate": args.drop_check_rate,
            "check_from": n + thr_docs + lat_docs, "probes": m, "settle_s": args.drop_settle,
            "open_options": {} if args.verify_meta else {"verify_meta": False},
        },
        timeout=48 * 3600,
    )  # fmt: skip
    res["retention"] = drop
    res["disk_parts"] = parts_per_doc(drop["parts"], res["server"], n)
    res["targets"] = targets(res)
    res["code_by_step"] = code_by_step(res)
    return res


def code_by_step(res: dict[str, Any]) -> dict[str, Any]:
    """The commit each step ran (the seeding and drop processes note theirs as they start, the
    server's is noted as it is started) and whether they all equal the run's own (the JSON's
    ``code``, taken when the run began); a step that ran other code is said on stderr, since
    the run's figures then mix two versions."""
    steps = {
        name: {k: v for k, v in res[key]["code"].items() if k in ("commit", "neardup_modified")}
        for name, key in (("seed", "seed"), ("server", "server"), ("drops", "retention"))
        if isinstance(res.get(key), dict) and "code" in res[key]
    }
    start = RUN_CODE or code_version()
    same = all(
        c.get("commit") == start.get("commit")
        and c.get("neardup_modified") == start.get("neardup_modified")
        for c in steps.values()
    )
    if not same:
        log(
            "WARNING: the steps ran other code than the run began with "
            f"({start.get('commit')}): {steps}; the figures mix versions"
        )
    return {"steps": steps, "same_as_run": same}


def _in_stream(decisions: dict[str, dict[str, int]]) -> dict[str, Any]:
    """How the planted copies were decided as they arrived (check_and_add seeding)."""
    tp = sum(v.get("reported", 0) for k, v in decisions.items() if k.startswith("dup/"))
    n_dup = sum(v.get("n", 0) for k, v in decisions.items() if k.startswith("dup/"))
    fp = sum(v.get("reported", 0) for k, v in decisions.items() if k.startswith("non-dup/"))
    n_neg = sum(v.get("n", 0) for k, v in decisions.items() if k.startswith("non-dup/"))
    orig = decisions.get("originals", {})
    return {
        "near_duplicates": n_dup,
        "recall": tp / n_dup if n_dup else None,
        "non_duplicates": n_neg,
        "precision": tp / (tp + fp) if tp + fp else None,
        "originals_flagged_duplicate": orig.get("duplicate", 0),
        "originals": orig.get("n", 0),
    }


def parts_per_doc(parts: dict[str, Any], server: dict[str, Any], n: int) -> dict[str, Any]:
    """Bytes per window document by part, after the run (store closed)."""
    f = parts["files"]
    band = parts.get("band_key_bytes")
    sketch = parts.get("sketch_bytes") or 0
    seg = f.get("segments", 0)
    sq = f.get("sqlite", 0)
    by = {
        "texts (in SQLite)": parts["text_bytes"],
        "long rows' summaries (in SQLite)": parts.get("summary_bytes", 0),
        "SQLite rest (ids, times, fingerprints, metadata, index)": sq
        - parts["text_bytes"]
        - parts.get("summary_bytes", 0),
        "band keys (segment sections)": band,
        "MinHash sketches (segment sections)": sketch,
        "segments rest (fingerprints, row ids, times)": (
            None if band is None else seg - band - sketch
        ),
        "tables (.hidx)": f.get("segment_indexes", 0),
        "log (at the end of the load, before the kill)": sum(
            v for k, v in server.get("disk_at_end_of_load", {}).items() if k == "log"
        ),
    }
    docs = max(1, parts.get("sqlite_rows") or n)
    total = sum(f.values())
    return {
        "documents": docs,
        "bytes_per_doc": {k: None if v is None else round(v / docs, 1) for k, v in by.items()},
        "total_bytes": total,
        "total_bytes_per_doc": round(total / docs, 1),
        "text_bytes_exact": parts.get("text_bytes_exact"),
    }


def targets(res: dict[str, Any]) -> dict[str, Any]:
    srv = res["server"]
    lat = srv["latency"]
    p99 = lat.get("latency_from_schedule", {}).get("p99_ms")
    if lat.get("achieved_rate", 0) < 0.95 * lat.get("target_rate", 1):
        p99 = None  # the rate was not reached: the p99 says nothing about it
    drops = [x["checks"].get("max_ms") for x in res["retention"]["drops"]]
    vals = {
        "seed_docs_per_s": res["seed"]["docs_per_s"],
        "rss_peak_bytes": srv["rss_peak_bytes"],
        "disk_bytes_per_doc": res["disk_parts"]["total_bytes_per_doc"],
        "batch_docs_per_s": srv["throughput"]["docs_per_s"],
        "single_p99_ms": p99,
        "recall": srv["quality"]["recall"],
        "precision": srv["quality"]["precision"],
        "restart_s": srv["restart_s"],
        "drop_max_check_ms": max((x for x in drops if x is not None), default=None),
    }
    out = {}
    for k, (op, target) in TARGETS.items():
        v = vals[k]
        met = None if v is None else (v >= target if op == ">=" else v <= target)
        out[k] = {"value": v, "target": _target_text(k), "met": met}
    # the seeding target is a keep-first seed's: an as-is load decided nothing
    if res["seed"]["path"] == "as-is":
        out["seed_docs_per_s"]["met"] = None
        out["seed_docs_per_s"]["note"] = "as-is load: nothing decided, not a keep-first seed"
    return out


# ------------------------------------------------------------------------------------------
# output


def _target_text(k: str) -> str:
    op, v = TARGETS[k]
    return f"{op} {v / GIB:g} GiB" if k.endswith("_bytes") else f"{op} {v:,g}"


def _worst(w: dict[str, Any] | None) -> str:
    """A drop's worst check split (``window_steps._worst_check``): waiting behind the checks
    before it, its own time, and how much of that a retention pass overlapped."""
    if not w:
        return "-"
    return (
        f"{w['waited_ms']:.1f} / {w['service_ms']:.1f} / {w['overlapping_retention_pass_ms']:.1f}"
    )


def _fmt(v: Any, spec: str = ",.0f") -> str:
    return "-" if v is None else format(v, spec)


def table(results: dict[str, dict[str, Any]]) -> list[tuple[str, list[str]]]:
    rows: list[tuple[str, list[str]]] = []

    def row(name: str, fn: Any) -> None:
        cells = []
        for r in results.values():
            try:
                cells.append(fn(r))
            except (KeyError, TypeError, ValueError, IndexError):
                cells.append("-")
        rows.append((name, cells))

    row("documents in the window (seeded)", lambda r: f"{r['seed']['documents']:,}")
    row("generation docs/s (workers)", lambda r: f"{_fmt(r['corpus']['generation']['docs_per_s'])} ({r['corpus']['generation']['workers']})" + (" reused" if r["corpus"].get("reused") else ""))  # fmt: skip
    row("text bytes per document", lambda r: f"{r['corpus']['text_bytes'] / r['n']:.0f}")
    row("seeding path", lambda r: r["seed"]["path"])
    row("build time s (open, seed, merge, close)", lambda r: f"{r['seed']['seconds']:,.0f} (merge {r['seed'].get('compact_s', 0):,.0f})")  # fmt: skip
    row("build docs/s (seeding loop alone)", lambda r: f"{r['seed']['docs_per_s']:,.0f} ({r['seed']['loop_docs_per_s']:,.0f})")  # fmt: skip
    row("build CPU ms per doc", lambda r: f"{r['seed']['cpu_ms_per_doc']:.3f}")
    row("seeding process peak RSS GiB", lambda r: f"{r['seed']['peak_rss_bytes'] / GIB:.2f}")
    row("in-stream recall / precision (seeding)", lambda r: f"{r['seed']['in_stream_recall']['recall']:.4f} / {r['seed']['in_stream_recall']['precision']:.4f}")  # fmt: skip
    row("segments a query searches (at the kill)", lambda r: f"{r['server']['segments']:,}")
    row("server start to first answer s", lambda r: f"{r['server']['start_to_first_answer_s']:.1f}")  # fmt: skip
    row("probes: recall", lambda r: f"{r['server']['quality']['recall']:.4f}")
    row("probes: precision", lambda r: f"{r['server']['quality']['precision']:.4f}")
    row("probes: F1", lambda r: f"{r['server']['quality']['f1']:.4f}")
    row("  misses: no band key shared (the plan's) / source not stored / a key shared", lambda r: f"{r['server']['quality']['misses']['no_shared_key'] - r['server']['quality']['misses']['no_shared_key_found_anyway']} / {r['server']['quality']['misses']['source_not_stored']} / {r['server']['quality']['misses']['missed_with_a_shared_key']}")  # fmt: skip
    row("  the plan's recall (pairs sharing a band key)", lambda r: f"{r['server']['quality']['misses']['plan_recall']:.4f}")  # fmt: skip
    row("probe checks/s (batches)", lambda r: f"{r['server']['quality']['checks_per_s']:,.0f} ({r['server']['quality']['batch']})")  # fmt: skip
    row("durable check-and-inserts/s (HTTP)", lambda r: f"{r['server']['throughput']['docs_per_s']:,.0f}")  # fmt: skip
    row("server CPU ms per batch doc", lambda r: f"{r['server']['throughput']['server_cpu_ms_per_doc']:.3f}")  # fmt: skip
    row("single rate achieved / target", lambda r: f"{r['server']['latency']['achieved_rate']:,.0f} / {r['server']['latency']['target_rate']:,.0f}")  # fmt: skip
    row("single p50 / p99 ms (from schedule)", lambda r: "{p50_ms:.2f} / {p99_ms:.2f}".format(**r["server"]["latency"]["latency_from_schedule"]))  # fmt: skip
    row("server CPU ms per single request", lambda r: f"{r['server']['latency']['server_cpu_ms_per_request']:.3f}")  # fmt: skip
    row("server RSS peak / steady GiB", lambda r: f"{r['server']['rss_peak_bytes'] / GIB:.2f} / {r['server']['rss_steady_bytes'] / GIB:.2f}")  # fmt: skip
    row("  sampled peak anon / file GiB", lambda r: f"{r['server']['rss_sampled_peak']['RssAnon'] / GIB:.2f} / {r['server']['rss_sampled_peak']['RssFile'] / GIB:.2f}")  # fmt: skip
    row("disk bytes per document (total)", lambda r: f"{r['disk_parts']['total_bytes_per_doc']:,.0f}")  # fmt: skip
    for part in (
        "texts (in SQLite)",
        "long rows' summaries (in SQLite)",
        "SQLite rest (ids, times, fingerprints, metadata, index)",
        "band keys (segment sections)",
        "MinHash sketches (segment sections)",
        "segments rest (fingerprints, row ids, times)",
        "tables (.hidx)",
        "log (at the end of the load, before the kill)",
    ):
        row(f"  {part}", lambda r, p=part: _fmt(r["disk_parts"]["bytes_per_doc"][p]))
    row("restart after SIGKILL s (rows in log)", lambda r: f"{r['server']['restart_s']:.1f} ({r['server']['memtable_rows_at_kill']:,})")  # fmt: skip
    row("answers changed by the restart", lambda r: f"{r['server']['answers_after_restart']['different']} of {r['server']['answers_after_restart']['checked']}")  # fmt: skip
    row("retention drop: rows per hour", lambda r: ", ".join(f"{d['rows_dropped']:,}" for d in r["retention"]["drops"]))  # fmt: skip
    row("  writer's time in the drop ms", lambda r: ", ".join(_fmt(None if d["writer_drop_s"] is None else 1000 * d["writer_drop_s"], ".1f") for d in r["retention"]["drops"]))  # fmt: skip
    row("  passes / longest pass ms / all gone after s", lambda r: ", ".join(f"{d['writer_passes']} / {1000 * d['writer_longest_pass_s']:.1f} / {d['visible_after_s']:.1f}" for d in r["retention"]["drops"]))  # fmt: skip
    row("  worst / p99 check during it ms", lambda r: ", ".join(f"{d['checks']['max_ms']:.1f} / {d['checks']['p99_ms']:.1f}" for d in r["retention"]["drops"]))  # fmt: skip
    row("  its worst: waited / own / in a pass ms", lambda r: ", ".join(_worst(d.get("worst_check")) for d in r["retention"]["drops"]))  # fmt: skip
    row("  worst check before the drops ms", lambda r: f"{r['retention']['checks_before_drops']['max_ms']:.1f}")  # fmt: skip
    row("  dropped hours' probes still found", lambda r: f"{r['retention']['probes_after_drops']['dropped_hours']['source_reported']} of {r['retention']['probes_after_drops']['dropped_hours']['probes']}")  # fmt: skip
    row("/proc/loadavg seeding / batch / single", lambda r: f"{r['seed']['proc_loadavg'][0].split()[0]} / {r['server']['throughput']['proc_loadavg'][0].split()[0]} / {r['server']['latency']['proc_loadavg'][0].split()[0]}")  # fmt: skip
    row("CPU probe before / after (fp/s)", lambda r: f"{r['server']['cpu_probe_before']:,.0f} / {r['server']['cpu_probe_after']:,.0f}")  # fmt: skip
    for k in TARGETS:
        row(f"target {k} {_target_text(k)}", lambda r, k=k: {True: "met", False: "MISSED", None: "-"}[r["targets"][k]["met"]])  # fmt: skip
    return rows


def print_table(results: dict[str, dict[str, Any]]) -> None:
    rows = table(results)
    heads = [f"{int(n):,}" for n in results]
    w0 = max(len(r[0]) for r in rows)
    ws = [max(len(h), *(len(r[1][i]) for r in rows)) for i, h in enumerate(heads)]
    print(f"{'documents':<{w0}}  " + "  ".join(f"{h:>{w}}" for h, w in zip(heads, ws, strict=True)))  # fmt: skip
    for name, cells in rows:
        print(f"{name:<{w0}}  " + "  ".join(f"{c:>{w}}" for c, w in zip(cells, ws, strict=True)))  # fmt: skip


# ------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--n", type=int, default=200_000, help="documents in the window")
    p.add_argument("--sizes", default=None, help="comma-separated sizes: the growth curve, one JSON")  # fmt: skip
    p.add_argument("--data", type=Path, default=None, help="working folder (default: a temp dir, removed)")  # fmt: skip
    p.add_argument("--corpus", type=Path, default=None, help="folder for the generated corpora, kept and reused by spec (default: inside --data)")  # fmt: skip
    p.add_argument("--keep", action="store_true", help="keep --data's stores after the run")
    p.add_argument("--seed", type=int, default=1, help="seed of the generated stream")
    p.add_argument("--zh", type=float, default=0.4, help="share of Chinese documents")
    p.add_argument("--mix", default="0.80,0.15,0.05", help="shares of posts, news, articles")
    p.add_argument("--dup-rate", type=float, default=0.05, help="planted near-duplicates")
    p.add_argument("--neg-rate", type=float, default=0.02, help="planted near-threshold non-duplicates")  # fmt: skip
    p.add_argument("--hours", type=int, default=48, help="hours the window's times span")
    p.add_argument("--partition-hours", type=float, default=1.0, help="store partition width (the retention drop's step)")  # fmt: skip
    p.add_argument("--margin-hours", type=float, default=6.0, help="retention beyond --hours, so nothing leaves the window during the run")  # fmt: skip
    p.add_argument("--gen-workers", type=int, default=cpu_count(), help="processes generating the corpus")  # fmt: skip
    p.add_argument("--chunk", type=int, default=100_000, help="documents per corpus chunk file")
    p.add_argument("--seed-path", choices=["auto", "load", "check_and_add", "as-is"], default="auto", help="auto: the keep-first bulk path (dedup_into, then Deduplicator.load) where present, else check_and_add; as-is: every document loaded, nothing decided (the planted copies stored too)")  # fmt: skip
    p.add_argument("--seed-collector", choices=["settled", "default"], default="settled", help="the seeding process's garbage collector: settled, as neardup store load and serve --seed run it (default), or Python's own settings (a library user's process)")  # fmt: skip
    p.add_argument("--seed-batch", type=int, default=1000, help="documents per check_and_add while seeding")  # fmt: skip
    p.add_argument("--seed-inflight", type=int, default=2, help="check_and_add batches submitted ahead while seeding (in order)")  # fmt: skip
    p.add_argument("--probes", type=int, default=0, help="probes checked for recall and precision (0: n / 50, between 200 and 20,000)")  # fmt: skip
    p.add_argument("--probe-batch", type=int, default=100, help="probes per check request")
    p.add_argument("--batch", type=int, default=1000, help="documents per check-and-insert request")  # fmt: skip
    p.add_argument("--connections", type=int, default=4)
    p.add_argument("--duration", type=float, default=15.0, help="seconds of batch load")
    p.add_argument("--prepare-rate", type=float, default=20_000.0, help="documents prepared per second of --duration (more than the server takes)")  # fmt: skip
    p.add_argument("--rate", type=float, default=500.0, help="single requests per second")
    p.add_argument("--latency-duration", type=float, default=20.0)
    p.add_argument("--latency-warmup", type=float, default=2.0)
    p.add_argument("--drop-hours", type=int, default=2, help="partitions dropped one by one")
    p.add_argument("--drop-settle", type=float, default=3.0, help="seconds of checks before the first drop (half of it after each drop)")  # fmt: skip
    p.add_argument("--no-cpu-probe", action="store_true", help="skip the 1 s fingerprint-speed probe before and after the load phases")  # fmt: skip
    p.add_argument("--drop-check-rate", type=float, default=100.0, help="single checks per second during the drops")  # fmt: skip
    p.add_argument("--store-bytes-per-doc", type=float, default=1_400.0, help="store size estimate for the disk check (a later size uses the last measured figure)")  # fmt: skip
    p.add_argument("--reuse-store", action="store_true", help="with --data of an earlier run kept (--keep): measure its window again, not seeded again (its build figures are that run's). A run that got through its measurements added its load phases' documents and dropped its first --drop-hours: reuse the store of a run stopped before them (a store whose drops ran is refused: drops-ran.json beside it)")  # fmt: skip
    p.add_argument("--no-verify-meta", dest="verify_meta", action="store_false", help="open the store without SQLite's quick_check (neardup serve --no-verify-meta): at 50 M it reads a 23 GB database for minutes; on defaults it runs once a boot, so the seeding's open already ran it")  # fmt: skip
    p.add_argument("--lsh-bands", type=int, default=None, help="the new store's MinHash bands (neardup serve --lsh-bands; default: the planner's)")  # fmt: skip
    p.add_argument("--lsh-rows", type=int, default=None, help="the new store's MinHash rows a band (--lsh-rows)")  # fmt: skip
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args(argv)
    try:
        a.mix = tuple(float(x) for x in a.mix.split(","))
        a.sizes = [int(x) for x in a.sizes.split(",")] if a.sizes else [a.n]
        wc.WindowSpec(n=max(a.sizes), zh=a.zh, mix=a.mix, dup_rate=a.dup_rate, neg_rate=a.neg_rate)  # fmt: skip
    except ValueError as exc:
        p.error(str(exc))
    if min(a.sizes) < 1000:
        p.error("sizes must be at least 1,000 documents")
    if a.drop_hours < 1 or a.drop_hours * a.partition_hours > a.hours / 2:
        p.error("--drop-hours must be >= 1 and drop at most half of --hours")
    if (a.hours * 3600) % int(a.partition_hours * 3600):
        p.error("--hours must be a whole number of --partition-hours")
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tmp = None
    data = args.data
    if data is None:
        tmp = tempfile.mkdtemp(prefix="bench-window-")
        data = Path(tmp)
    if args.out is None:
        name = (
            f"bench_window_{args.sizes[0]}.json"
            if len(args.sizes) == 1
            else "bench_window_growth_" + "_".join(str(s) for s in args.sizes) + ".json"
        )
        args.out = ROOT / "benchmarks" / "results" / name
    RUN_CODE.update(code_version())
    out: dict[str, Any] = {
        "benchmark": "bench_window",
        "issue": 36,
        "machine": machine()
        | {"proc_loadavg_start": proc_loadavg(), "disk_free_start_bytes": free_bytes(data)},
        "code": RUN_CODE,
        "params": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "sizes": {},
    }
    store_bpd = args.store_bytes_per_doc
    try:
        for n in args.sizes:
            res = run_size(args, n, data / f"n{n}", store_bpd)
            out["sizes"][str(n)] = res
            store_bpd = max(store_bpd, 1.1 * res["disk_parts"]["total_bytes_per_doc"])
            if not args.keep:
                shutil.rmtree(data / f"n{n}" / "server", ignore_errors=True)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(out, indent=1) + "\n")  # a partial result is kept
    finally:
        if tmp is not None and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    out["machine"]["proc_loadavg_end"] = proc_loadavg()
    out["machine"]["disk_free_end_bytes"] = free_bytes(data)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print()
    print_table(out["sizes"])
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanup on a polite stop
    sys.exit(main())
