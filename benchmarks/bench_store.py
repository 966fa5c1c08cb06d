"""Store benchmark: seed N fingerprints, restart time, batch check-and-add throughput, latency.

In-process (no HTTP): measures the library the service wraps. Prints a table and writes
``benchmarks/results/store.json``. The writer thread is instrumented: wall and CPU time
(``time.thread_time``) of each stage it runs (index search, id lookup, within-group pairs,
log append + fsync, memtable, SQLite where it is on the writer's path), per 1,000 documents in
the batch run and per call in the single-document run.

    .venv/bin/python benchmarks/bench_store.py --n 2000000 --verify 0
    .venv/bin/python benchmarks/bench_store.py --data DIR --reuse   # an already seeded store

``--window N`` measures a window of N *texts* instead (what the MinHash channel needs:
``bulk_load`` has no texts, so it cannot seed band keys), per candidate mode (``--modes``): the
window is filled through ``check_and_add`` in batches of ``--batch`` generated posts (short and
long mixed, 5 % edited copies of earlier ones), then measured: batch check-and-add throughput,
single-document latency, RSS (peak, anonymous and file-backed), memory of the band keys, disk
per million documents by file kind, and the restart of a process SIGKILLed while adding
(``results/store_window.json``)::

    .venv/bin/python benchmarks/bench_store.py --window 1000000 --modes lsh,simhash
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    words = rng.integers(0, 200_000, (n, 25))
    return [" ".join(f"w{x}" for x in row) for row in words.tolist()]


class WriterProfile:
    """Wall and CPU time of named methods, counted only on the writer thread."""

    def __init__(self) -> None:
        self.wall: collections.Counter[str] = collections.Counter()
        self.cpu: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()

    def wrap(self, obj: Any, name: str, label: str) -> None:
        f = getattr(obj, name, None)
        if f is None:
            return

        def timed(*a: Any, **k: Any) -> Any:
            if threading.current_thread().name != "neardup-writer":
                return f(*a, **k)
            t, c = time.perf_counter(), time.thread_time()
            try:
                return f(*a, **k)
            finally:
                self.wall[label] += time.perf_counter() - t
                self.cpu[label] += time.thread_time() - c
                self.calls[label] += 1

        setattr(obj, name, timed)

    def instrument(self, d: Any) -> None:
        st = d.store
        state = st._state  # what the store holds (its log, SQLite, memtable)
        self.wrap(d._writer, "_apply_group", "group total")
        self.wrap(st, "search", "index search")
        self.wrap(st, "lookup_ids", "id lookup")
        self.wrap(st, "fetch", "row fetch")
        self.wrap(d._decider, "intra_pairs", "within-group pairs")
        self.wrap(state.wal, "write", "log write")
        self.wrap(state.wal, "sync", "log fsync")
        self.wrap(state.meta, "apply", "SQLite apply")
        self.wrap(state.memtable, "add", "memtable add")

    def report(self, per: float) -> dict[str, dict[str, float]]:
        return {
            k: {
                "wall_ms": self.wall[k] * 1000 / per,
                "cpu_ms": self.cpu[k] * 1000 / per,
                "calls": self.calls[k],
            }
            for k in sorted(self.wall, key=lambda x: -self.wall[x])
        }

    def clear(self) -> None:
        self.wall.clear()
        self.cpu.clear()
        self.calls.clear()


def window_texts(n: int, seed: int, start: int) -> list[str]:
    """``n`` generated posts: 4 of 5 short (12-40 words), 1 of 5 long (150-400 words), over a
    200k-word vocabulary; 5 % are copies of an earlier post of the same call with one word
    replaced (near duplicates that the MinHash channel, not SimHash distance 3, catches)."""
    rng = np.random.default_rng(seed * 1_000_003 + start)
    lens = np.where(rng.random(n) < 0.8, rng.integers(12, 41, n), rng.integers(150, 401, n))
    words = rng.integers(0, 200_000, int(lens.sum())).tolist()
    out: list[str] = []
    pos = 0
    for k in lens.tolist():
        out.append(" ".join(f"w{x}" for x in words[pos : pos + k]))
        pos += k
    for i in rng.choice(n, n // 20, replace=False).tolist():
        if i == 0:
            continue
        w = out[int(rng.integers(0, i))].split()
        w[int(rng.integers(0, len(w)))] = "edited"
        out[i] = " ".join(w)
    return out


def proc_memory() -> dict[str, float]:
    """This process's VmHWM, VmRSS, RssAnon and RssFile in MiB."""
    out: dict[str, float] = {}
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            k = line.split(":")[0]
            if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                out[k + "_mib"] = int(line.split()[1]) / 1024
    return out


def disk_by_kind(path: Path) -> dict[str, int]:
    kinds: collections.Counter[str] = collections.Counter()
    for f in path.iterdir():
        if not f.is_file():
            continue
        name = f.name
        kind = (
            "segments"
            if name.endswith(".nds")
            else "segment_indexes"
            if name.endswith(".hidx")
            else "sqlite"
            if name.startswith("meta.sqlite3")
            else "log"
            if name.startswith("wal-")
            else "other"
        )
        kinds[kind] += f.stat().st_size
    return dict(kinds)


_KILLED_CHILD = """
import sys, time
sys.path.insert(0, {root!r})
sys.path.insert(0, {bench!r})
from bench_store import window_texts
from neardup.online.deduplicator import Deduplicator
d = Deduplicator.open({path!r}, memtable_size=max(1_000_000, 2 * {fill}))
done = 0
while done < {fill}:  # a memtable of `fill` rows, only in the log when the process dies
    n = min(100_000, {fill} - done)
    texts = window_texts(n, 9, done)
    for s in range(0, n, 1000):
        d.check_and_add([{{"id": f"f{{done + s + j}}", "text": t}}
                         for j, t in enumerate(texts[s:s + 1000])])
    done += n
print("open", flush=True)
i = 0
while True:
    d.check_and_add([{{"id": f"k{{i}}-{{j}}", "text": f"killed child post {{i}} {{j}} words"}}
                     for j in range(100)])
    i += 1
"""


def restart_after_sigkill(path: Path, fill: int = 0) -> dict[str, float]:
    """SIGKILL a process adding to the store (after it added ``fill`` documents to a memtable
    that does not flush them), then time opening it and answering a check."""
    import os
    import signal
    import subprocess

    from neardup.online.deduplicator import Deduplicator

    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _KILLED_CHILD.format(
                root=str(ROOT), bench=str(Path(__file__).parent), path=str(path), fill=fill
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    child.stdout.readline()  # opened
    time.sleep(3.0)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    log_bytes = sum(f.stat().st_size for f in path.glob("wal-*.log"))
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    d = Deduplicator.open(path)
    opened = time.perf_counter() - t0
    d.check({"id": "after-restart", "text": "is anything like this stored"})
    first = time.perf_counter() - t0
    replayed = d.store._state.replayed_records
    d.close()
    return {
        "restart_memtable_rows_in_log": fill,
        "restart_log_records_replayed": replayed,
        "restart_log_bytes": log_bytes,
        "restart_open_s": opened,
        "restart_first_check_s": first,
        "restart_load_average": [load, os.getloadavg()[0]],
    }


def window(a: argparse.Namespace) -> int:
    """The ``--window`` run (see the module)."""
    import os
    import platform

    from neardup.online.deduplicator import Deduplicator

    root = Path(a.data) if a.data else Path(tempfile.mkdtemp(prefix="ndwin-"))
    res: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_average_start": list(os.getloadavg()),
            "note": "shared 2-core VM, other engineers' jobs running",
        },
        "window": a.window,
        "batch": a.batch,
    }
    modes = a.modes.split(",")
    if len(modes) > 1:  # one process per mode: each one's peak RSS is its own
        import subprocess

        try:
            for mode in modes:
                part = root / f"{mode}.json"
                argv = [sys.executable, __file__, "--window", str(a.window), "--modes", mode]
                argv += ["--batch", str(a.batch), "--batches", str(a.batches)]
                argv += ["--singles", str(a.singles), "--data", str(root), "--out", str(part)]
                argv += ["--kill-fill", str(a.kill_fill)]
                subprocess.run(argv, check=True)
                res[mode] = json.loads(part.read_text())[mode]
        finally:
            if a.data is None:
                shutil.rmtree(root, ignore_errors=True)
        modes = []
    try:
        for mode in modes:
            path = root / mode
            r: dict[str, Any] = {}
            d = Deduplicator.open(path, candidates=mode)
            t_all = time.perf_counter()
            rates = []
            done = 0
            chunk = 100_000
            while done < a.window:
                n = min(chunk, a.window - done)
                corpus = window_texts(n, 1, done)
                t0 = time.perf_counter()
                for s0 in range(0, n, a.batch):
                    d.check_and_add(
                        [
                            {"id": f"s{done + s0 + i}", "text": t}
                            for i, t in enumerate(corpus[s0 : s0 + a.batch])
                        ]
                    )
                rates.append(n / (time.perf_counter() - t0))
                done += n
                print(f"{mode}: {done:,} in the window, {rates[-1]:,.0f} adds/s", flush=True)
            r["seed_s"] = time.perf_counter() - t_all
            r["seed_adds_per_s_by_100k"] = [round(x) for x in rates]
            corpus = window_texts(a.batch * a.batches + a.singles, 2, 0)
            la0 = os.getloadavg()[0]
            t0 = time.perf_counter()
            c0 = time.process_time()
            dups = 0
            for b in range(a.batches):
                got = d.check_and_add(
                    [
                        {"id": f"b{b}-{i}", "text": t}
                        for i, t in enumerate(corpus[b * a.batch : (b + 1) * a.batch])
                    ]
                )
                dups += sum(x.duplicate for x in got)
            dt = time.perf_counter() - t0
            nb = a.batch * a.batches
            r["batch_docs_per_s"] = nb / dt
            r["batch_cpu_ms_per_doc"] = (time.process_time() - c0) / nb * 1000
            r["batch_duplicates"] = dups
            r["batch_load_average"] = [la0, os.getloadavg()[0]]
            lat = []
            for j in range(a.singles):
                t1 = time.perf_counter()
                d.check_and_add({"id": f"one-{j}", "text": corpus[nb + j]})
                lat.append((time.perf_counter() - t1) * 1000)
            r["single_p50_ms"] = float(np.percentile(lat, 50))
            r["single_p99_ms"] = float(np.percentile(lat, 99))
            r["documents"] = len(d)
            r.update(proc_memory())
            st = d.store
            if st.band_keys_of is not None:
                r["band_memtable_bytes"] = st.bandtable.nbytes
                r["band_memtable_rows"] = len(st.memtable)
                r["band_section_bytes"] = sum(
                    0 if s.segment.band_keys is None else 16 + s.segment.band_keys.nbytes
                    for s in st.segments
                )
                r["band_section_rows"] = sum(
                    len(s.segment) for s in st.segments if s.segment.band_keys is not None
                )
            d.close()
            r["VmHWM_after_close_mib"] = proc_memory()["VmHWM_mib"]  # the flush at close
            disk = disk_by_kind(path)
            r["disk_bytes"] = disk
            r["disk_mib_per_million_docs"] = {
                k: round(v / r["documents"] * 1e6 / 2**20, 1) for k, v in disk.items()
            }
            r.update(restart_after_sigkill(path, a.kill_fill))
            res[mode] = r
            print(mode, json.dumps(r, indent=1), flush=True)
    finally:
        if a.data is None:
            shutil.rmtree(root, ignore_errors=True)
    res["machine"]["load_average_end"] = list(__import__("os").getloadavg())
    out = a.out if a.out.name != "store.json" else a.out.with_name("store_window.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from neardup.online.deduplicator import Deduplicator

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2_000_000, help="fingerprints seeded in the window")
    p.add_argument("--chunk", type=int, default=1_000_000, help="bulk_load chunk size")
    p.add_argument("--batch", type=int, default=1000, help="documents per check_and_add call")
    p.add_argument("--batches", type=int, default=40, help="batches in the throughput run")
    p.add_argument("--threads", type=int, default=4, help="concurrent callers")
    p.add_argument("--singles", type=int, default=500, help="single-document calls for latency")
    p.add_argument("--verify", type=int, default=0, help="1 = default Verifier (radius 12)")
    p.add_argument("--data", type=Path, default=None, help="data directory (default: a temp dir)")
    p.add_argument("--reuse", action="store_true", help="--data is already seeded: skip seeding")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "store.json")
    p.add_argument(
        "--window", type=int, default=0, help="N texts added through check_and_add (see above)"
    )
    p.add_argument("--modes", default="lsh,simhash", help="candidate modes for --window")
    p.add_argument(
        "--kill-fill",
        type=int,
        default=0,
        help="--window: documents the SIGKILLed process adds (to its memtable) before the kill",
    )
    a = p.parse_args(argv)
    if a.window:
        return window(a)

    data = a.data or Path(tempfile.mkdtemp(prefix="neardup-bench-"))
    res: dict[str, Any] = {
        "n": a.n,
        "batch": a.batch,
        "threads": a.threads,
        "verify": bool(a.verify),
    }
    kw: dict[str, Any] = {"retention": "48h", "verify": bool(a.verify)}
    rng = np.random.default_rng(0)
    now = time.time()
    try:
        t0 = time.perf_counter()
        with Deduplicator.open(data, **kw) if not a.reuse else contextlib.nullcontext() as d:
            done = 0 if not a.reuse else a.n
            while done < a.n:
                k = min(a.chunk, a.n - done)
                fps = rng.integers(0, 2**64, k, dtype=np.uint64)
                d.bulk_load(
                    [f"s{i}" for i in range(done, done + k)],
                    fps,
                    now - rng.uniform(60, 47 * 3600, k),
                )
                done += k
                print(f"seeded {done:,} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
        res["seed_s"] = time.perf_counter() - t0
        res["disk_bytes"] = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())

        t0 = time.perf_counter()
        d = Deduplicator.open(data, **kw)
        res["open_s"] = time.perf_counter() - t0
        res["rss_after_open_mib"] = rss_mib()
        st = d.stats()
        res["segments"], res["partitions"] = st["segments"], st["partitions"]

        run = time.time_ns() % 10**9  # fresh ids and texts when a store is reused
        corpus = texts(a.batch * a.batches + a.singles, seed=run)
        batches = [
            [{"id": f"b{run}-{j}", "text": corpus[j]} for j in range(i, i + a.batch)]
            for i in range(0, a.batch * a.batches, a.batch)
        ]
        d.check_and_add(batches[0])  # warm-up (numba, caches)
        prof = WriterProfile()
        prof.instrument(d)
        todo = list(batches[1:])
        lock = threading.Lock()

        def worker() -> None:
            while True:
                with lock:
                    if not todo:
                        return
                    b = todo.pop()
                d.check_and_add(b)

        t0 = time.perf_counter()
        ths = [threading.Thread(target=worker) for _ in range(a.threads)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        dt = time.perf_counter() - t0
        res["batch_docs_per_s"] = a.batch * (a.batches - 1) / dt
        res["writer_per_1000_docs"] = prof.report(a.batch * (a.batches - 1) / 1000)
        prof.clear()

        lat = []
        base = a.batch * a.batches
        for j in range(a.singles):
            t1 = time.perf_counter()
            d.check_and_add({"id": f"one{run}-{j}", "text": corpus[base + j]})
            lat.append((time.perf_counter() - t1) * 1000)
        res["single_p50_ms"] = float(np.percentile(lat, 50))
        res["single_p99_ms"] = float(np.percentile(lat, 99))
        res["writer_per_single"] = prof.report(a.singles)
        res["rss_end_mib"] = rss_mib()
        res["documents"] = len(d)
        t0 = time.perf_counter()
        d.close()
        res["close_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        Deduplicator.open(data, **kw).close()
        res["reopen_after_writes_s"] = time.perf_counter() - t0
    finally:
        if a.data is None:
            shutil.rmtree(data, ignore_errors=True)

    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1))
    w = max(len(k) for k in res)
    for k, v in res.items():
        if isinstance(v, dict):
            print(f"{k}  (wall ms / cpu ms / calls)")
            for stage, m in v.items():
                print(f"    {stage:<22} {m['wall_ms']:8.3f} {m['cpu_ms']:8.3f} {m['calls']:6d}")
            continue
        print(f"{k:<{w}}  {v:,.3f}" if isinstance(v, float) else f"{k:<{w}}  {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
