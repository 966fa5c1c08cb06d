"""The steps of ``bench_window.py`` that run in a process of their own (their memory and CPU
time are theirs alone): ``seed`` fills the store with the generated window, ``drop`` measures
the stopped store's parts and its hour-by-hour retention drop.

    python benchmarks/window_steps.py seed|drop JOB.json   # prints one JSON line

``JOB.json`` is what ``bench_window.py`` writes (the window's spec, the store's folder, ...).
"""

from __future__ import annotations

import collections
import contextlib
import gc
import json
import os
import resource
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import window_corpus as wc  # noqa: E402
from bench_service import code_version, read_memory  # noqa: E402
from bench_store import disk_by_kind  # noqa: E402


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def step_code() -> dict[str, Any]:
    """The code this step runs: its tree's commit when the step started (``code_version``: a
    commit made in the tree while a long run goes on is not the parent's) and the ``neardup``
    package it imported."""
    import neardup

    return code_version() | {"imported": str(Path(neardup.__file__).resolve().parent)}


def seed_child(job: dict[str, Any]) -> dict[str, Any]:
    """Open the store, seed it with the corpus' chunks, close it; runs in its own process."""
    import orjson

    from neardup.online import Deduplicator

    code = step_code()
    if job.get("collector", "settled") == "settled":
        # the garbage collector as `neardup store load` and `neardup serve --seed` run it (the
        # console script's and the server's neardup._gc.settle: the imports frozen, full
        # collections rare); a chunk's million records would otherwise be walked by every full
        # collection the seed's allocations trigger
        gc.collect()
        gc.freeze()
        gc.set_threshold(700, 10, 1000)
    spec = wc.WindowSpec.from_dict(job["spec"])
    t_all = time.perf_counter()
    d = Deduplicator.open(
        job["ns"],
        retention=job["retention_s"],
        partition_seconds=job["partition_seconds"],
        candidates="lsh",
        **job.get("plan", {}),
    )
    open_s = time.perf_counter() - t_all
    loader = getattr(d, "load", None)
    path = job["path"]
    if path == "auto":
        path = "load" if callable(loader) else "check_and_add"
    out: dict[str, Any] = {"path": path, "open_s": open_s, "code": code}
    out["collector"] = job.get("collector", "settled")
    c0 = time.process_time()
    t0 = time.perf_counter()
    chunks = job["chunks"]
    if path in ("as-is", "load"):
        if not callable(loader):
            raise SystemExit("this neardup has no bulk-load API (Deduplicator.load)")
        if path == "as-is":
            # every document stored as it is (Deduplicator.load), nothing decided: a window
            # restored from an export already deduplicated upstream. The planted copies are
            # stored beside their sources, so the window holds every document of the stream
            verb = "loaded"

            def put(lines: list[dict[str, Any]]) -> int:
                return int(d.load(lines))

        else:
            # the bulk path: each chunk decided against the window and among itself as
            # keep-first inserts in that order would (neardup.incremental.dedup_into), the kept
            # documents loaded straight into segments (Deduplicator.load)
            from neardup.incremental import dedup_into

            verb = "seeded"

            def put(lines: list[dict[str, Any]]) -> int:
                into = dedup_into(
                    d,
                    [x["id"] for x in lines],
                    [x["text"] for x in lines],
                    times=[x["time"] for x in lines],
                )
                return int(into.keep.sum())

        rates, loaded = [], 0
        for ch in chunks:
            tc = time.perf_counter()
            lines = [orjson.loads(x) for x in wc.read_chunk(ch["path"]) if x]
            loaded += put(lines)
            rates.append(round(len(lines) / (time.perf_counter() - tc)))
            log(f"  {verb} {ch['hi']:,}/{spec.n:,} ({rates[-1]:,} docs/s; {len(d):,} in the window)")  # fmt: skip
        out["docs_per_s_by_chunk"] = rates
        out["load_result"] = loaded
        out["decisions"] = None
    else:
        scores: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        rates = []
        inflight: collections.deque[tuple[Any, np.ndarray]] = collections.deque()

        def score(fut: Any, pos: np.ndarray) -> None:
            decisions = fut.result()
            info = wc.describe(spec, pos)
            for i, dec in enumerate(decisions):
                role = int(info["role"][i])
                if role == wc.ROLE_ORIGINAL:
                    c = scores["originals"]
                    c["n"] += 1
                    c["added"] += dec.added
                    c["duplicate"] += dec.duplicate
                    continue
                name = wc.slice_name(
                    role == wc.ROLE_DUP, int(info["subkind"][i]), int(info["kind"][i]), bool(info["zh"][i])
                )  # fmt: skip
                src = wc.doc_id(int(info["source"][i]))
                c = scores[name]
                c["n"] += 1
                c["reported"] += any(m.id == src for m in dec.matches)
                c["duplicate"] += dec.duplicate
                c["added"] += dec.added

        for ch in chunks:
            tc = time.perf_counter()
            lines = [orjson.loads(x) for x in wc.read_chunk(ch["path"]) if x]
            for b in range(0, len(lines), job["batch"]):
                docs = lines[b : b + job["batch"]]
                fut, _ = d.submit("check_and_add", docs)
                inflight.append((fut, np.arange(ch["lo"] + b, ch["lo"] + b + len(docs), dtype=np.int64)))  # fmt: skip
                while len(inflight) > job["inflight"]:
                    score(*inflight.popleft())
            while inflight:
                score(*inflight.popleft())
            rates.append(round(len(lines) / (time.perf_counter() - tc)))
            log(f"  seeded {ch['hi']:,}/{spec.n:,} ({rates[-1]:,} check-and-adds/s; {len(d):,} in the window)")  # fmt: skip
        out["docs_per_s_by_chunk"] = rates
        out["decisions"] = {k: dict(v) for k, v in sorted(scores.items())}
    out["seed_loop_s"] = time.perf_counter() - t0
    out["seed_loop_cpu_s"] = time.process_time() - c0
    # the merges the writer would run in the background once seeding stops (ended hours into
    # blocks): run now, so that the server is measured on the layout it keeps, and timed
    tm = time.perf_counter()
    out["compactions"] = d.compact()
    out["compact_s"] = time.perf_counter() - tm
    out["documents"] = len(d)
    out["memory_before_close"] = {k: v for k, v in read_memory(os.getpid()).items()}
    t1 = time.perf_counter()
    d.close()  # flushes the memtable into segments: the server starts from them
    out["close_s"] = time.perf_counter() - t1
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_s"] = ru.ru_utime + ru.ru_stime
    out["peak_rss_bytes"] = ru.ru_maxrss * 1024
    out["seconds"] = time.perf_counter() - t_all
    return out


def store_parts(ns: Path) -> dict[str, Any]:
    """The store's bytes by part (files closed: the server is stopped): texts inside SQLite
    (summed, or estimated from 20,000 random rows above 2 M), the rest of SQLite, segments,
    segment indexes (.hidx), log; band-key bytes are added by the caller."""
    kinds = disk_by_kind(ns)
    out: dict[str, Any] = {"files": kinds}
    db = ns / "meta.sqlite3"
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
        rows, hi = con.execute("SELECT COUNT(*), COALESCE(MAX(rid), 0) FROM docs").fetchone()
        if rows <= 2_000_000:
            text = con.execute("SELECT COALESCE(SUM(LENGTH(CAST(text AS BLOB))), 0) FROM docs").fetchone()[0]  # fmt: skip
            out["text_bytes_exact"] = True
        else:
            rids = np.random.default_rng(0).integers(1, hi + 1, 20_000).tolist()
            got = []
            for a in range(0, len(rids), 900):
                part = rids[a : a + 900]
                q = f"SELECT LENGTH(CAST(text AS BLOB)) FROM docs WHERE rid IN ({','.join('?' * len(part))})"  # fmt: skip
                got += [r[0] or 0 for r in con.execute(q, part)]
            text = int(rows * (sum(got) / max(1, len(got))))
            out["text_bytes_exact"] = False
        # long rows' token summaries (docs/store.md, *Stored summaries of long rows*)
        has = con.execute("SELECT 1 FROM sqlite_master WHERE name = 'summaries'").fetchone()
        summ = con.execute("SELECT COALESCE(SUM(LENGTH(s)), 0) FROM summaries").fetchone()[0] if has else 0  # fmt: skip
    out["sqlite_rows"] = int(rows)
    out["text_bytes"] = int(text)
    out["summary_bytes"] = int(summ)
    return out


class Checker(threading.Thread):
    """Single ``check`` calls on an open-loop schedule (``rate``/s); each latency is measured
    from its scheduled time, so a stall shows as the wait of every check due during it."""

    def __init__(self, d: Any, texts: list[str], rate: float) -> None:
        super().__init__(name="drop-checker", daemon=True)
        self.d, self.texts, self.rate = d, texts, rate
        self.records: list[tuple[float, float]] = []  # (scheduled, latency)
        self.started: list[float] = []  # when each check began (after any wait for the last)
        self.stop = threading.Event()
        self.errors = 0

    def run(self) -> None:
        start = time.perf_counter()
        i = 0
        while not self.stop.is_set():
            due = start + i / self.rate
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            began = time.perf_counter()
            try:
                self.d.check({"id": f"drop-check-{i}", "text": self.texts[i % len(self.texts)]})
            except Exception:
                self.errors += 1
            self.started.append(began)  # first: a record always has its start
            self.records.append((due, time.perf_counter() - due))
            i += 1


def latencies(records: list[tuple[float, float]], lo: float, hi: float) -> dict[str, Any]:
    """Count, max, p99 and p50 (ms) of the checks scheduled in ``[lo, hi]`` (``records``:
    :attr:`Checker.records`)."""
    lat = [x for t, x in records if lo <= t <= hi]
    if not lat:
        return {"checks": 0}
    a = np.asarray(lat) * 1000
    return {
        "checks": len(lat),
        "max_ms": float(a.max()),
        "p99_ms": float(np.percentile(a, 99)),
        "p50_ms": float(np.percentile(a, 50)),
    }


def _p90(xs: list[float]) -> float | None:
    return float(np.percentile(xs, 90)) if xs else None


def slowest_checks(
    checker: Checker,
    lo: float,
    hi: float,
    passes: list[tuple[float, float, int, float]],
    n: int = 1,
) -> list[tuple[float, float, float, float]]:
    """The ``n`` slowest checks scheduled in ``[lo, hi]``, slowest first, each as (latency,
    waited, own time, the part of its own time a retention pass overlapped), in seconds:
    waiting is for the checks before it; ``passes`` are the writer's expire calls (began,
    ended, ...). A stall during a drop is the drop's only where the overlap is most of it;
    otherwise it is the check's own work (e.g. rows read from disk)."""
    records = list(checker.records)
    picked = sorted(
        (k for k, (due, _) in enumerate(records) if lo <= due <= hi),
        key=lambda k: records[k][1],
        reverse=True,
    )[:n]
    out = []
    for k in picked:
        due, lat = records[k]
        began, end = checker.started[k], due + lat
        overlap = sum(max(0.0, min(end, b) - max(began, a)) for a, b, *_ in passes)
        out.append((lat, began - due, end - began, overlap))
    return out


def _worst_check(
    checker: Checker, lo: float, hi: float, passes: list[tuple[float, float, int, float]]
) -> dict[str, Any]:
    """:func:`slowest_checks`' first, by name (empty where no check was scheduled then)."""
    worst = slowest_checks(checker, lo, hi, passes)
    if not worst:
        return {}
    lat, waited, own, overlap = worst[0]
    return {
        "latency_ms": 1000 * lat,
        "waited_ms": 1000 * waited,
        "service_ms": 1000 * own,
        "overlapping_retention_pass_ms": 1000 * overlap,
    }


def drop_child(job: dict[str, Any]) -> dict[str, Any]:
    """Open the stopped store with a clock this process moves; measure the store's parts, then
    advance the cutoff one partition at a time while checking single documents."""
    from neardup.online import Deduplicator

    code = step_code()
    spec = wc.WindowSpec.from_dict(job["spec"])
    ns = Path(job["ns"])
    out: dict[str, Any] = {"parts": store_parts(ns), "code": code}
    now = [time.time()]
    t0 = time.perf_counter()
    d = Deduplicator.open(ns, clock=lambda: now[0], **job.get("open_options", {}))
    out["open_s"] = time.perf_counter() - t0
    band = sketch = None
    with contextlib.suppress(ImportError, AttributeError, TypeError):  # the segment files' sections
        from neardup.store.segment import open_segment

        band = sketch = 0
        for path in ns.glob("*.nds"):
            seg = open_segment(path, verify=False)
            if seg.band_keys is not None:
                band += 16 + seg.band_keys.nbytes
            if getattr(seg, "sketches", None) is not None:
                sketch += seg.sketches.nbytes + len(seg)  # and a presence byte a row
            seg.close()
    out["parts"]["band_key_bytes"] = band
    out["parts"]["sketch_bytes"] = sketch
    out["documents_before"] = len(d)
    drops: list[dict[str, Any]] = []
    expire_calls: list[tuple[float, float, int, float]] = []
    store = d.store
    real_expire = getattr(store, "expire", None)
    if callable(real_expire):  # the writer's time in each expire that deletes something

        def timed_expire(cutoff: float) -> int:
            a = time.perf_counter()
            rows = int(real_expire(cutoff))
            if rows:
                expire_calls.append((a, time.perf_counter(), rows, cutoff))
            return rows

        store.expire = timed_expire
    checker = Checker(d, wc.stream_texts(spec, job["check_from"], 2000), job["rate"])
    checker.start()
    time.sleep(job["settle_s"])
    base = latencies(checker.records, 0, time.perf_counter())
    ps, retention = job["partition_seconds"], job["retention_s"]
    for k in range(1, job["hours"] + 1):
        dropped0 = d.stats()["dropped_partitions"]
        docs0 = len(d)
        calls0 = len(expire_calls)
        t_adv = time.perf_counter()
        now[0] = spec.t0 + k * ps + retention  # the cutoff moves to the end of partition k - 1
        # the hour has left once an expire at the new cutoff deleted its rows: its segment's
        # drop, or, where the hour is part of a block of ended hours whose file stays until its
        # last hour leaves (docs/store.md, "Blocks of ended partitions"), its rows' deletion
        # (a store that deletes a large backlog a batch per pass is behind until the last one)
        while not any(c[3] >= now[0] - retention for c in expire_calls[calls0:]) or d.stats().get("retention_behind", 0):  # fmt: skip
            if time.perf_counter() - t_adv > 600:
                raise SystemExit(f"partition {k - 1} did not leave within 600 s")
            time.sleep(0.002)
        t_vis = time.perf_counter()
        time.sleep(max(0.5, job["settle_s"] / 2))
        calls = expire_calls[calls0:]
        drops.append(
            {
                "hour": k,
                "rows_dropped": docs0 - len(d),
                "partitions_dropped_with_their_files": d.stats()["dropped_partitions"] - dropped0,
                "visible_after_s": t_vis - t_adv,
                "writer_drop_s": sum(c[1] - c[0] for c in calls) if calls else None,
                "writer_passes": len(calls),
                "writer_longest_pass_s": max((c[1] - c[0] for c in calls), default=None),
                "writer_p90_pass_s": _p90([c[1] - c[0] for c in calls]),
                "checks": latencies(checker.records, t_adv - 0.5, t_vis + 1.0),
                "worst_check": _worst_check(checker, t_adv - 0.5, t_vis + 1.0, calls),
            }
        )
        log(f"  drop {k}: {drops[-1]['rows_dropped']:,} rows, writer {drops[-1]['writer_drop_s']}, worst check {drops[-1]['checks'].get('max_ms', 0):.1f} ms")  # fmt: skip
    checker.stop.set()
    checker.join()
    out["checks_before_drops"] = base
    out["check_errors"] = checker.errors
    out["drops"] = drops
    # probes paired with the dropped hours find nothing now; the others as before
    cut_ms = 1000 * (spec.t0 + job["hours"] * ps)
    pr = wc.probes(spec, job["probes"])
    dup = np.flatnonzero(pr.label)
    old = spec.times_ms(pr.source[dup]) < cut_ms
    gone, kept = dup[old].tolist(), dup[~old].tolist()
    res = {}
    for name, idx in (("dropped_hours", gone[:1000]), ("kept_hours", kept[:1000])):
        found = 0
        for a in range(0, len(idx), 100):
            sel = idx[a : a + 100]
            got = d.check([{"id": f"after-drop-{i}", "text": pr.texts[i]} for i in sel])
            found += sum(
                any(m.id == wc.doc_id(int(pr.source[i])) for m in g.matches)
                for i, g in zip(sel, got, strict=True)
            )
        res[name] = {"probes": len(idx), "source_reported": found}
    out["probes_after_drops"] = res
    out["documents_after"] = len(d)
    d.close()
    return out


def main(argv: list[str]) -> int:
    steps = {"seed": seed_child, "drop": drop_child}
    if len(argv) != 2 or argv[0] not in steps:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(steps[argv[0]](json.loads(Path(argv[1]).read_text()))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
