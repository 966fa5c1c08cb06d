"""Benchmark of the HTTP service: durable batch throughput, single-document latency, restart.

Steps (each bounded in time and request count, loopback only):

1. seed a data directory with ``--n`` fingerprints spread over the last 47 hours
   (``Deduplicator.bulk_load``; retention 48 h, so all of them are in the window); with
   ``--reuse``, top it up to ``--n`` when its window has aged below that, then read every file
   of the store once (``--no-warm-cache`` skips it): a reused store may have left the page
   cache since its last run, and a cold SQLite file alone turned a 6-10 s start into more than
   80 s and the latency tail into tens of milliseconds (round 10 in docs/service.md), which a
   long-running server does not see;
2. start ``neardup serve`` as a separate process and time it until ``/healthz`` answers
   (restart to serving, with the seeded segments);
3. from a second process (``benchmarks/loadgen.py``): check-and-insert throughput through the
   batch endpoint, acknowledged after fsync (``--batch`` documents per request, ``--connections``
   connections); then, once the server has digested that burst (metadata applied, no memtable
   flush, merge or segment compaction running; the wait is reported as ``settle_s``),
   single-document latency at a fixed ``--rate`` requests/s: ``--latency-warmup`` seconds
   at that rate first (the first requests after the idle pause meet fresh connections and
   cold caches; their percentiles are reported apart, not counted), then
   ``--latency-duration`` seconds measured;
4. SIGKILL the server and time the restart (log replay + index load) until it serves again;
5. report the server's RSS (current and peak) and write ``benchmarks/results/service.json``;
6. the latency floor (``--no-floor`` skips it): the same single-document load against a no-op
   app (``benchmarks/noop_app.py``) under uvicorn with the same event loop and HTTP parser,
   i.e. what this machine, uvicorn and the load generator cost with no work at all.

Alongside each load phase: the server's CPU time (``/proc/PID/stat``, with its child
processes), the load generator's own CPU share, and, for single documents, the server's
per-stage latency histograms from ``/metrics`` (``neardup_request_stage_seconds``: read,
parse, prepare, writer, resume, respond; p50 / p99 are histogram bucket bounds) and its
event-loop lag, so the table says where the time went. The machine's load average is recorded
before and after.

Targets from the issue (50 M fingerprints): >= 28,000 check-and-inserts/s through the batch
endpoint with durable acknowledgements; single-document p99 <= 5 ms at 1,000 requests/s;
restart to serving <= 30 s.

Example::

    python benchmarks/bench_service.py                    # 1 M fingerprints, ~2 minutes
    python benchmarks/bench_service.py --n 50000000       # the full run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from neardup.service.testing import ServerProcess  # noqa: E402


def seed(
    data: Path, n: int, chunk: int, seed_: int, *, prefix: str = "seed", top_up: bool = False
) -> dict[str, Any]:
    """Bulk-load ``n`` random 64-bit fingerprints with times inside the last 47 hours, ids
    ``{prefix}{i}``. ``top_up``: only as many as the window lacks to hold ``n`` (a reused
    store ages: its oldest partitions leave the 48-hour window), with ids that cannot collide
    with an earlier seeding's."""
    from neardup.online.deduplicator import Deduplicator

    ns = data / "namespaces" / "default"
    ns.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed_)
    now = time.time()
    t0 = time.perf_counter()
    with Deduplicator(ns, retention="48h") as d:
        had = len(d)
        if top_up:
            n = max(0, n - had)
            if n == 0:
                return {"n": 0, "had": had, "seconds": time.perf_counter() - t0}
            print(f"  the window holds {had:,}: topping up {n:,}", file=sys.stderr)
        done = 0
        while done < n:
            k = min(chunk, n - done)
            fps = rng.integers(0, np.iinfo(np.uint64).max, k, dtype=np.uint64, endpoint=True)
            times = now - rng.uniform(60, 47 * 3600, k)
            ids = [f"{prefix}{i}" for i in range(done, done + k)]
            d.bulk_load(ids, fps, times)
            done += k
            print(f"  seeded {done:,}/{n:,} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
        loaded = time.perf_counter() - t0
        # merge the per-chunk segments now, so the first server run does not measure a
        # background compaction
        d.compact()
    size = sum(f.stat().st_size for f in ns.rglob("*") if f.is_file())
    total = time.perf_counter() - t0
    return {
        "n": n,
        "had": had,
        "seconds": total,
        "bulk_load_s": loaded,
        "compact_s": total - loaded,
        "disk_bytes": size,
    }


def resent_documents(thr: dict[str, Any], lat: dict[str, Any]) -> dict[str, bool]:
    """Whether each phase's documents were mostly re-sends, i.e. it inserted (almost) nothing:
    the batch phase when fewer than half of its acknowledged documents were added, the
    single-document phase when it synced the log less than once per 100 requests (every
    insert is synced before it is answered; 1,000 requests/s make hundreds of syncs even
    when requests share them)."""
    batch = thr.get("docs_added", 0) < thr.get("docs_acknowledged", 0) / 2
    syncs = lat.get("wal_fsync", {}).get("count")
    single = syncs is not None and syncs < lat.get("requests", 0) / 100
    return {"batch": bool(batch), "single": bool(single)}


def loadgen(url: str, *args: str, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "loadgen.py"), "--url", url, *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if out.returncode != 0:
        raise SystemExit(f"loadgen failed ({out.returncode}):\n{out.stderr}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds so far of process ``pid`` and of its live child processes
    (work a server hands to a child counts too); 0 where /proc is unavailable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0
    kids: set[int] = set()
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as f:
                kids.update(int(k) for k in f.read().split())
    except (OSError, ValueError):
        pass
    return own + sum(cpu_seconds(k) for k in kids)


def stage_histograms(url: str) -> dict[str, tuple[list[tuple[float, float]], float]]:
    """``{stage: ([(le, cumulative count), ...], sum)}`` from the server's ``/metrics``
    (``neardup_request_stage_seconds`` per stage and ``neardup_event_loop_lag_seconds``)."""
    import re

    import httpx

    text = httpx.get(url + "/metrics", timeout=30).text
    out: dict[str, tuple[list[tuple[float, float]], float]] = {}
    pat = re.compile(
        r"^neardup_(?:request_stage|event_loop_lag)_seconds_(bucket|sum)"
        r'(?:\{(?:stage="(\w+)")?,?(?:le="([^"]+)")?\})? (\S+)$',
        re.M,
    )
    for kind, stage, le, value in pat.findall(text):
        name = stage or "loop_lag"
        buckets, total = out.get(name, ([], 0.0))
        if kind == "bucket":
            buckets.append((float(le.replace("+Inf", "inf")), float(value)))
        else:
            total = float(value)
        out[name] = (buckets, total)
    return out


def stage_summary(
    before: dict[str, tuple[list[tuple[float, float]], float]],
    after: dict[str, tuple[list[tuple[float, float]], float]],
) -> dict[str, dict[str, float]]:
    """Per stage, over the requests between two snapshots: count, mean and the histogram
    bucket bounds holding p50 / p90 / p99 (milliseconds)."""
    out: dict[str, dict[str, float]] = {}
    for name, (b_after, s_after) in after.items():
        b_before, s_before = before.get(name, ([(le, 0.0) for le, _ in b_after], 0.0))
        cum = [(le, c - c0) for (le, c), (_, c0) in zip(b_after, b_before, strict=True)]
        n = cum[-1][1] if cum else 0.0
        if n <= 0:
            continue
        row = {"count": n, "mean_ms": 1000 * (s_after - s_before) / n}
        for q in (50, 90, 99):
            row[f"p{q}_le_ms"] = 1000 * next(le for le, c in cum if c >= q / 100 * n)
        out[name] = row
    return out


def warm_page_cache(data: Path) -> dict[str, float]:
    """Read every file under ``data`` once (sequentially), so that the server starts with the
    store in the page cache as far as memory allows; returns the bytes read and the seconds."""
    t0 = time.perf_counter()
    total = 0
    buf = bytearray(1 << 20)
    for f in sorted(data.rglob("*")):
        if f.is_file():
            with open(f, "rb", buffering=0) as fh:
                while n := fh.readinto(buf):
                    total += n
    return {"bytes": total, "seconds": time.perf_counter() - t0}


def settle(url: str, timeout: float) -> float:
    """Seconds until the default namespace has no background work left (metadata applied,
    no memtable flush, memtable merge or segment compaction running), polled every 0.2 s."""
    import httpx

    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        st = httpx.get(url + "/v1/ns/default", timeout=30).json()["stats"]
        if not (
            st.get("meta_pending_records")
            or st.get("flushing_rows")
            or st.get("memtable_merging")
            or st.get("compacting")
        ):
            break
        time.sleep(0.2)
    return time.perf_counter() - t0


_COUNTERS = ("flushes", "compactions", "memtable_rows")


def wal_stats(url: str) -> dict[str, float]:
    """The default namespace's log fsync counters (``wal_*`` stats) and background-work
    counters (flushes, compactions, memtable rows)."""
    import httpx

    st = httpx.get(url + "/v1/ns/default", timeout=30).json()["stats"]
    return {
        k: float(v)
        for k, v in st.items()
        if (k.startswith("wal_") and "sync" in k) or k in _COUNTERS
    }


def peak_rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def host_counters(pid: int) -> dict[str, float]:
    """What the machine did to the server, for telling a disturbed run from a slow server
    (Linux /proc; empty elsewhere): CPU time stolen by the hypervisor and total CPU time
    (jiffies, all CPUs), the server's minor / major page faults, and the page cache and
    available memory (bytes)."""
    out: dict[str, float] = {}
    try:
        with open("/proc/stat", encoding="ascii") as f:
            cpu = [int(x) for x in f.readline().split()[1:]]
        out["steal_jiffies"], out["cpu_jiffies"] = cpu[7], sum(cpu)
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        out["server_minor_faults"], out["server_major_faults"] = int(fields[7]), int(fields[9])
        with open("/proc/meminfo", encoding="ascii") as f:
            mem = {k: int(v.split()[0]) * 1024 for k, v in (line.split(":", 1) for line in f)}
        out["page_cache_bytes"] = mem.get("Cached", 0)
        out["mem_available_bytes"] = mem.get("MemAvailable", 0)
    except (OSError, IndexError, ValueError):
        return {}
    return out


def cpu_probe(seconds: float = 1.0) -> float:
    """Single-document fingerprints per second on one thread, the way the server computes
    one per request: a fixed workload timed on this machine, before and after the run. On a
    shared VM the same code runs measurably slower at some hours (one of these sessions saw
    36 -> 50 us per text within an hour); compare runs only at similar probe values."""
    from loadgen import make_texts

    from neardup import Fingerprinter

    fp = Fingerprinter()
    texts = make_texts(2000, 40, 7)
    for t in texts[:200]:
        fp.fingerprint_batch([t])
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for t in texts:
            fp.fingerprint_batch([t])
        n += len(texts)
    return n / (time.perf_counter() - t0)


def host_summary(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """``host_counters`` over a phase: steal share, fault counts, memory at its end."""
    if not before or not after:
        return {}
    total = after["cpu_jiffies"] - before["cpu_jiffies"]
    return {
        "cpu_steal_share": (after["steal_jiffies"] - before["steal_jiffies"]) / max(1, total),
        "server_minor_faults": after["server_minor_faults"] - before["server_minor_faults"],
        "server_major_faults": after["server_major_faults"] - before["server_major_faults"],
        "page_cache_bytes": after["page_cache_bytes"],
        "mem_available_bytes": after["mem_available_bytes"],
    }


def floor(args: argparse.Namespace) -> dict[str, Any]:
    """Single-document latency of a no-op app (``benchmarks/noop_app.py``) under uvicorn with
    the event loop and HTTP parser ``neardup serve`` picks, at the same rate and duration:
    what the machine, uvicorn and the load generator cost without any work."""
    import importlib.util
    import socket

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    have = importlib.util.find_spec
    cmd = [
        sys.executable, "-m", "uvicorn", "noop_app:app", "--app-dir", str(ROOT / "benchmarks"),
        "--host", "127.0.0.1", "--port", str(port), "--no-access-log", "--log-level", "warning",
        "--loop", "uvloop" if have("uvloop") else "asyncio",
        "--http", "httptools" if have("httptools") else "h11",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                httpx.post(url, content=b"{}", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        cpu0 = cpu_seconds(proc.pid)
        out = loadgen(
            url, "--mode", "latency", "--rate", str(args.rate),
            "--duration", str(args.latency_duration), "--words", str(args.words),
            "--seed", str(args.docs_seed + 2), "--warmup", str(args.latency_warmup),
            timeout=args.latency_duration + 600,
        )  # fmt: skip
        out["server_cpu_s"] = cpu_seconds(proc.pid) - cpu0
        out["server"] = " ".join(cmd[3:])
    finally:
        proc.kill()
        proc.wait()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--n", type=int, default=1_000_000, help="fingerprints seeded in the window")
    p.add_argument("--seed-chunk", type=int, default=2_000_000)
    p.add_argument(
        "--data", type=Path, default=None, help="data dir (default: a temp dir, removed)"
    )
    p.add_argument("--reuse", action="store_true", help="reuse an already seeded --data")
    p.add_argument(
        "--docs-seed",
        type=int,
        default=None,
        help="seed of the generated documents (batch phase; the latency phase uses seed + 1, "
        "the floor seed + 2; ids carry it). Default: 11 on freshly seeded data, a new seed from "
        "the clock with --reuse (an earlier run's seed would re-send documents the store "
        "already has: nothing is inserted, and the run says so)",
    )
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--connections", type=int, default=4)
    p.add_argument("--duration", type=float, default=15.0, help="seconds of throughput load")
    p.add_argument("--rate", type=float, default=1000.0)
    p.add_argument("--latency-duration", type=float, default=10.0)
    p.add_argument(
        "--latency-warmup",
        type=float,
        default=2.0,
        help="seconds at --rate before the measured --latency-duration (reported apart)",
    )
    p.add_argument(
        "--no-warm-cache",
        action="store_true",
        help="with --reuse, do not read the store's files once before starting the server",
    )
    p.add_argument("--words", type=int, default=40, help="words per generated document")
    p.add_argument("--no-verify", action="store_true", help="serve with --no-verify")
    p.add_argument(
        "--random-ids",
        action="store_true",
        help="document ids as hashes (spread over the server's id index) instead of a shared "
        "prefix and a counter (see loadgen.py)",
    )
    p.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        help="extra `neardup serve` flag (repeatable), e.g. --serve-arg=--writer-thread",
    )
    p.add_argument(
        "--no-floor",
        action="store_true",
        help="skip the latency floor (a no-op app under uvicorn at the same rate, last)",
    )
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "service.json")
    args = p.parse_args(argv)

    if args.docs_seed is None:
        args.docs_seed = time.time_ns() // 1000 % (1 << 30) if args.reuse else 11
        print(f"documents seed {args.docs_seed} (--docs-seed to repeat it)", file=sys.stderr)
    tmp = None
    data = args.data
    if data is None:
        tmp = tempfile.mkdtemp(prefix="neardup-bench-")
        data = Path(tmp) / "data"
    result: dict[str, Any] = {
        "benchmark": "service",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "note": "shared machine; other work was running, numbers are noisy",
        },
        "params": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
    }
    try:
        if not args.reuse:
            print(f"seeding {args.n:,} fingerprints into {data} ...", file=sys.stderr)
            result["seed"] = seed(data, args.n, args.seed_chunk, 1)
        else:  # an aged store holds fewer than --n in its window: fill it back first
            print(f"checking that the window of {data} holds {args.n:,} ...", file=sys.stderr)
            stamp = time.time_ns() // 1000
            result["top_up"] = seed(
                data, args.n, args.seed_chunk, stamp % (1 << 30), prefix=f"top{stamp}-", top_up=True
            )
            if not args.no_warm_cache:
                print("reading the store once (page cache) ...", file=sys.stderr)
                result["warm_cache"] = cache = warm_page_cache(data)
                print(
                    f"read {cache['bytes'] / 2**30:.1f} GiB in {cache['seconds']:.1f} s",
                    file=sys.stderr,
                )
        serve_args = ["--retention", "48h", "--max-batch", str(max(10_000, args.batch))]
        if args.no_verify:
            serve_args.append("--no-verify")
        serve_args += args.serve_arg
        srv = ServerProcess(data, args=serve_args)
        t_start = srv.start(timeout=600)
        print(
            f"server up in {t_start:.1f} s (RSS {srv.rss_bytes() / 2**20:.0f} MiB)",
            file=sys.stderr,
        )
        result["start_to_serving_s"] = t_start
        result["rss_after_start_bytes"] = srv.rss_bytes()

        result["load_average_before"] = os.getloadavg()
        result["cpu_probe_before"] = cpu_probe()
        pid = srv.proc.pid if srv.proc else 0
        print("throughput ...", file=sys.stderr)
        cpu0 = cpu_seconds(pid)
        result["throughput"] = loadgen(
            srv.url, "--mode", "throughput", "--batch", str(args.batch),
            "--connections", str(args.connections), "--duration", str(args.duration),
            "--words", str(args.words), "--seed", str(args.docs_seed),
            *(["--random-ids"] if args.random_ids else []),
            timeout=args.duration + 600,
        )  # fmt: skip
        result["throughput"]["server_cpu_s"] = cpu_seconds(pid) - cpu0
        # the latency target is about steady operation at 1,000 requests/s, not the seconds
        # in which the server digests the burst above (SQLite catching up with up to ~300k
        # acknowledged rows, a memtable flush): wait until that work is done, and say how long
        print("settling ...", file=sys.stderr)
        result["settle_s"] = settle(srv.url, timeout=600)
        print("latency ...", file=sys.stderr)
        stages0 = stage_histograms(srv.url)
        wal0 = wal_stats(srv.url)
        cpu0 = cpu_seconds(pid)
        host0 = host_counters(pid)
        result["latency"] = loadgen(
            srv.url, "--mode", "latency", "--rate", str(args.rate),
            "--duration", str(args.latency_duration), "--words", str(args.words),
            "--seed", str(args.docs_seed + 1), "--warmup", str(args.latency_warmup),
            *(["--random-ids"] if args.random_ids else []),
            timeout=args.latency_duration + 600,
        )  # fmt: skip
        result["latency"]["server_cpu_s"] = cpu_seconds(pid) - cpu0
        result["latency"]["host"] = host_summary(host0, host_counters(pid))
        result["latency"]["server_stages"] = stage_summary(stages0, stage_histograms(srv.url))
        wal1 = wal_stats(srv.url)
        syncs = wal1.get("wal_syncs", 0) - wal0.get("wal_syncs", 0)
        result["latency"]["wal_fsync"] = {
            "count": syncs,
            "mean_ms": 1000
            * (wal1.get("wal_sync_seconds", 0) - wal0.get("wal_sync_seconds", 0))
            / max(1, syncs),
            "over_2ms": wal1.get("wal_slow_syncs", 0) - wal0.get("wal_slow_syncs", 0),
            "max_ms_since_start": 1000 * wal1.get("wal_max_sync_seconds", 0),
        }
        # background work that ran during the latency phase (a flush explains a tail)
        result["latency"]["background"] = {
            k: wal1.get(k, 0) - wal0.get(k, 0) for k in ("flushes", "compactions")
        } | {"memtable_rows_at_end": wal1.get("memtable_rows", 0)}
        result["load_average_after"] = os.getloadavg()
        result["cpu_probe_after"] = cpu_probe()
        result["rss_after_load_bytes"] = srv.rss_bytes()
        result["rss_peak_bytes"] = peak_rss(srv.proc.pid) if srv.proc else 0
        import httpx

        result["documents_in_window"] = httpx.get(srv.url + "/healthz", timeout=30).json()[
            "documents"
        ]

        print("restart after SIGKILL ...", file=sys.stderr)
        srv.kill()
        result["restart_after_kill_s"] = srv.start(timeout=600)
        result["rss_after_restart_bytes"] = srv.rss_bytes()
        t0 = time.perf_counter()
        result["graceful_stop_rc"] = srv.stop(timeout=600)
        result["graceful_stop_s"] = time.perf_counter() - t0
        if not args.no_floor:
            print("latency floor (no-op app) ...", file=sys.stderr)
            result["floor"] = floor(args)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    thr, lat, fl = result["throughput"], result["latency"], result.get("floor")
    warm = lat.get("warmup", {})
    host = lat.get("host", {})
    # a check-and-insert that inserts nothing (re-sent ids: an earlier run's --docs-seed on
    # reused --data) is a read: such a run does not measure the targets
    resent = resent_documents(thr, lat)
    result["resent_documents"] = resent
    targets = {
        "batch_docs_per_s >= 28000": thr["docs_per_s"] >= 28_000 and not resent["batch"],
        "single_p99_ms <= 5 at 1000/s": lat["latency_from_schedule"].get("p99_ms", 1e9) <= 5.0
        and not resent["single"],
        "restart_s <= 30": result["restart_after_kill_s"] <= 30.0,
    }
    result["targets_met"] = targets
    mib = 2**20
    rows = [
        ("fingerprints in window", f"{result['documents_in_window']:,}"),
        ("batch check-and-insert docs/s", f"{thr['docs_per_s']:,.0f}  (batch {thr['batch']}, {thr['connections']} conns, errors {thr['errors']}, {thr['seconds']:.1f} s" + (", ran out of prepared documents" if thr.get("exhausted_prepared_requests") else "") + ")"),
        ("batch latency p50 / p99 ms", f"{thr['batch_latency']['p50_ms']:.1f} / {thr['batch_latency']['p99_ms']:.1f}"),
        ("settle after the batch load s", f"{result['settle_s']:.1f}  (metadata applied, no flush, merge or compaction running)"),
        ("single-doc rate achieved /s", f"{lat['achieved_rate']:,.0f} of {lat['target_rate']:,.0f}"),
        ("single p50 / p99 ms (from schedule)", f"{lat['latency_from_schedule']['p50_ms']:.2f} / {lat['latency_from_schedule']['p99_ms']:.2f}"),
        ("single p50 / p99 ms (from send)", f"{lat['latency_from_send']['p50_ms']:.2f} / {lat['latency_from_send']['p99_ms']:.2f}"),
        ("floor: no-op app p50 / p99 ms", "{p50:.2f} / {p99:.2f}  (same rate and load generator; server CPU {cpu:.3f} ms per request)".format(p50=fl["latency_from_schedule"]["p50_ms"], p99=fl["latency_from_schedule"]["p99_ms"], cpu=1000 * fl["server_cpu_s"] / max(1, fl["requests"] + fl.get("warmup", {}).get("requests", 0))) if fl else "not measured"),
        ("warm-up before it (not counted)", "{s:.1f} s, p50 / p99 / max ms {p50:.2f} / {p99:.2f} / {mx:.1f}".format(s=warm.get("seconds", 0), p50=warm.get("latency_from_schedule", {}).get("p50_ms", 0), p99=warm.get("latency_from_schedule", {}).get("p99_ms", 0), mx=warm.get("latency_from_schedule", {}).get("max_ms", 0))),
        ("log fsyncs in latency phase", "{count:.0f}, mean {mean_ms:.2f} ms, {over_2ms:.0f} over 2 ms, max since start {max_ms_since_start:.1f} ms".format(**lat.get("wal_fsync", {"count": 0, "mean_ms": 0, "over_2ms": 0, "max_ms_since_start": 0}))),
        ("background work in latency phase", str(lat.get("background", {}))),
        ("host in latency phase", "CPU steal {st:.1%}, server page faults minor / major {mi:.0f} / {ma:.0f}, page cache {pc:.1f} GiB, available {av:.1f} GiB".format(st=host.get("cpu_steal_share", 0), mi=host.get("server_minor_faults", 0), ma=host.get("server_major_faults", 0), pc=host.get("page_cache_bytes", 0) / 2**30, av=host.get("mem_available_bytes", 0) / 2**30)),
        ("loadgen CPU share thr / lat", f"{thr.get('loadgen_cpu_share', 0):.2f} / {lat.get('loadgen_cpu_share', 0):.2f} of a core"),
        ("server CPU ms per batch doc / single", f"{1000 * thr['server_cpu_s'] / max(1, thr['docs_acknowledged']):.3f} / {1000 * lat['server_cpu_s'] / max(1, lat['requests'] + warm.get('requests', 0)):.3f}"),
        ("CPU probe before / after", f"{result.get('cpu_probe_before', 0):,.0f} / {result.get('cpu_probe_after', 0):,.0f} single-text fingerprints/s on one thread"),
        ("load average before / after", f"{result['load_average_before'][0]:.2f} / {result['load_average_after'][0]:.2f}"),
        ("store read before start (page cache)", "{:.1f} GiB in {:.1f} s".format(result["warm_cache"]["bytes"] / 2**30, result["warm_cache"]["seconds"]) if "warm_cache" in result else "no"),
        ("start to serving s (seeded)", f"{result['start_to_serving_s']:.1f}"),
        ("restart after SIGKILL s", f"{result['restart_after_kill_s']:.1f}"),
        ("graceful stop s (rc)", f"{result['graceful_stop_s']:.1f} ({result['graceful_stop_rc']})"),
        ("RSS after start / load / peak MiB", f"{result['rss_after_start_bytes'] / mib:.0f} / {result['rss_after_load_bytes'] / mib:.0f} / {result['rss_peak_bytes'] / mib:.0f}"),
    ]  # fmt: skip
    width = max(len(r[0]) for r in rows)
    print()
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    stages = lat.get("server_stages", {})
    if stages:
        print(
            "\nsingle-document stages on the server (ms; p50/p90/p99 are histogram bucket bounds)"
        )
        for name, row in stages.items():
            print(
                f"  {name:<9} mean {row['mean_ms']:7.3f}  p50 <= {row['p50_le_ms']:g}  "
                f"p90 <= {row['p90_le_ms']:g}  p99 <= {row['p99_le_ms']:g}"
            )
    for phase, bad in resent.items():
        if bad:
            print(
                f"WARNING: the {phase} phase inserted (almost) nothing: its documents were "
                f"re-sends (--docs-seed {args.docs_seed} was used on this --data before); "
                "run again with a new --docs-seed"
            )
    for name, ok in targets.items():
        print(f"target {name}: {'met' if ok else 'NOT met'}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
