"""The cluster under faults at scale (issue 34): the history of tests/cluster/test_cluster_faults.py
with more operations, kills and pauses.

Three ``neardup serve`` processes (R = 2) and a ``neardup cluster router`` on loopback. Writers
(``--threads``) send through the router, each round: a near-duplicate pair in one batch (B = A
with ~8 % of its words replaced; long posts, short posts, Chinese), a batch of ``--batch`` new
documents, and every third round a delete of an acknowledged document. Meanwhile, in turn, a
random node is SIGKILLed, left down for a few seconds and restarted, and a random node is
SIGSTOPped for ``--pause-seconds`` and resumed, until at least ``--ops`` operations were
acknowledged, ``--kills`` kills and ``--pauses`` pauses done. The router's threads, memory and
descriptors are sampled every second. Then, once the router uses every node again and holds no
hints, the history is checked against every node's export (neardup.cluster.testing.check_history),
and 300 then 2,000 requests for unknown namespaces are sent to the router.

    nice -n 5 .venv/bin/python benchmarks/faults_cluster.py            # ~5-8 min on 2 cores

Prints a table; writes benchmarks/results/faults_cluster.json (with the machine and its load).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from neardup.cluster.testing import LocalCluster, Workload, check_history  # noqa: E402


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text(encoding="ascii").strip()
    except OSError:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())


def machine() -> dict[str, Any]:
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--", "neardup"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return {
        "cpus": os.cpu_count(),
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "code": {"commit": commit or "unknown", "neardup_modified": bool(dirty)},
        "proc_loadavg_start": loadavg(),
        "note": "shared 2-core VM; nodes, router and writers share it; other jobs were running",
    }


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def summary(xs: list[float]) -> dict[str, Any]:
    return {
        "n": len(xs),
        "p50_ms": round(1000 * pct(xs, 0.50), 1),
        "p99_ms": round(1000 * pct(xs, 0.99), 1),
        "max_ms": round(1000 * max(xs), 1) if xs else None,
    }


def unknown_namespaces(url: str, n: int, stats: Any, token: str) -> dict[str, Any]:
    body = {"id": "a", "text": "hello there"}
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, timeout=60, headers=auth) as h:
        before = stats()
        codes: dict[int, int] = {}
        t = time.perf_counter()
        for i in range(n):
            r = h.post(f"/v1/ns/nope-{n}-{i}/check", json=body)
            codes[r.status_code] = codes.get(r.status_code, 0) + 1
        seconds = time.perf_counter() - t
        after = stats()
    return {"requests": n, "statuses": codes, "seconds": round(seconds, 2),
            "before": before, "after": after}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=20_000, help="acknowledged operations, at least")
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--pauses", type=int, default=3)
    ap.add_argument("--pause-seconds", type=float, default=4.0)
    ap.add_argument("--down-seconds", type=float, default=3.0, help="a killed node stays down")
    ap.add_argument("--threads", type=int, default=3)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/faults_cluster.json")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    result: dict[str, Any] = {
        "benchmark": "faults_cluster",
        "machine": machine(),
        "params": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
    }
    with tempfile.TemporaryDirectory(prefix="faults-cluster-") as tmp:
        cluster = LocalCluster(Path(tmp), 3, router_args=["--timeout", "5"])
        t_start = time.time()
        cluster.start()
        result["startup_s"] = round(time.time() - t_start, 1)
        samples: list[dict[str, Any]] = []
        stop_sampling = threading.Event()

        def sample() -> None:
            while not stop_sampling.wait(1.0):
                samples.append({"t": round(time.time() - t_start, 1), **cluster.router.stats()})

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        events: list[dict[str, Any]] = []
        pauses: list[tuple[float, float]] = []
        try:
            work = Workload(
                cluster.router.url, cluster.token, threads=args.threads, batch=args.batch,
                seed=args.seed,
            )  # fmt: skip
            router_cpu0 = cpu_seconds(cluster.router.proc.pid)  # type: ignore[union-attr]
            t_work = time.time()
            work.start()
            kills = done_pauses = 0
            turn = 0
            while (
                work.history.acknowledged < args.ops
                or kills < args.kills
                or done_pauses < args.pauses
            ):
                time.sleep(2.0)
                node = rng.randrange(3)
                if (turn % 2 == 0 and kills < args.kills) or done_pauses >= args.pauses:
                    if kills >= args.kills:
                        continue
                    t0 = time.time()
                    cluster.kill(node)
                    time.sleep(args.down_seconds)
                    restart_s = cluster.restart(node)
                    settled = cluster.wait_settled(90)
                    kills += 1
                    events.append({"kind": "kill", "node": f"n{node}", "t": round(t0 - t_start, 1),
                                   "restart_s": round(restart_s, 1),
                                   "settled_after_s": round(time.time() - t0, 1),
                                   "settled": settled})  # fmt: skip
                else:
                    t0 = time.time()
                    cluster.pause(node)
                    time.sleep(args.pause_seconds)
                    t1 = time.time()
                    cluster.resume(node)
                    settled = cluster.wait_settled(90)
                    done_pauses += 1
                    pauses.append((t0, t1))
                    events.append({"kind": "pause", "node": f"n{node}", "t": round(t0 - t_start, 1),
                                   "paused_s": round(t1 - t0, 1),
                                   "settled_after_s": round(time.time() - t1, 1),
                                   "settled": settled})  # fmt: skip
                turn += 1
                print(
                    f"  {events[-1]['kind']:<5} {events[-1]['node']}  acknowledged "
                    f"{work.history.acknowledged:,}  kills {kills} pauses {done_pauses}",
                    flush=True,
                )
            time.sleep(2.0)
            history = work.stop()
            work_s = time.time() - t_work
            router_cpu = cpu_seconds(cluster.router.proc.pid) - router_cpu0  # type: ignore[union-attr]
            settled = cluster.wait_settled(120)
            stop_sampling.set()
            sampler.join(5)
            check = check_history(cluster, history)
            paused = [s for a, b in pauses for s in history.latencies(a, b)]
            faulted = {
                id(w) for a, b in pauses for w in history.writes if w[0] <= b and w[0] + w[1] >= a
            }
            calm = [w[1] for w in history.writes if id(w) not in faulted]
            result.update(
                {
                    "events": events,
                    "settled_at_end": settled,
                    "work_seconds": round(work_s, 1),
                    "acknowledged_per_s": round(history.acknowledged / work_s, 1),
                    "router_cpu_ms_per_acknowledged_op": round(
                        1000 * router_cpu / max(1, history.acknowledged), 3
                    ),
                    "history": check,
                    "write_latency_while_paused": summary(paused),
                    "write_latency_otherwise": summary(calm),
                    "router_samples": samples,
                    "unknown_namespaces": [
                        unknown_namespaces(
                            cluster.router.url, n, cluster.router.stats, cluster.token
                        )
                        for n in (300, 2000)
                    ],
                }
            )
        finally:
            stop_sampling.set()
            cluster.close()
    result["machine"]["proc_loadavg_end"] = loadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    h = result["history"]
    print()
    print("| what | value |")
    print("|---|---|")
    print(
        f"| acknowledged operations (documents decided + deletes) | {h['acknowledged_operations']:,} |"
    )
    print(
        f"| kills (SIGKILL + restart) / pauses (SIGSTOP {args.pause_seconds:g} s) | {sum(e['kind'] == 'kill' for e in events)} / {len(pauses)} |"
    )
    print(f"| acknowledged inserts: found / lost | {h['inserts_found']:,} / {h['inserts_lost']} |")
    print(
        f"| acknowledged deletes: back on a node / through the router | {h['acknowledged_deletes']:,}: {h['deletes_back_on_a_node']} / {h['deletes_back_through_router']} |"
    )
    print(
        f"| near-duplicate pairs in one batch: kept both (answered / stored) / kept none | {h['pairs']:,}: {h['pairs_kept_both_answered']} / {h['pairs_kept_both_stored']} / {h['pairs_kept_none']} |"
    )
    print(f"| documents with fewer than R copies at the end | {h['documents_under_replicated']} |")
    print(f"| failed (unacknowledged) writes | {h['failed_writes']} |")
    lp, lo = result["write_latency_while_paused"], result["write_latency_otherwise"]
    print(
        f"| write latency while a node is paused: p50 / p99 / max (n) | {lp['p50_ms']} / {lp['p99_ms']} / {lp['max_ms']} ms ({lp['n']}) |"
    )
    print(
        f"| write latency otherwise: p50 / p99 / max (n) | {lo['p50_ms']} / {lo['p99_ms']} / {lo['max_ms']} ms ({lo['n']}) |"
    )
    print(
        f"| acknowledged operations per second; router CPU per operation | {result['acknowledged_per_s']} /s; {result['router_cpu_ms_per_acknowledged_op']} ms |"
    )
    rs = result["router_samples"]
    if rs:
        print(
            f"| router threads min / max over the run | {min(s['threads'] for s in rs)} / {max(s['threads'] for s in rs)} |"
        )
        print(
            f"| router RSS min / max over the run | {min(s['rss_bytes'] for s in rs) / 2**20:.0f} / {max(s['rss_bytes'] for s in rs) / 2**20:.0f} MiB |"
        )
        print(
            f"| router descriptors min / max over the run | {min(s['fds'] for s in rs)} / {max(s['fds'] for s in rs)} |"
        )
    for u in result["unknown_namespaces"]:
        b, a = u["before"], u["after"]
        print(
            f"| {u['requests']:,} unknown namespaces ({u['statuses']}): threads, RSS, fds before -> after | {b['threads']} -> {a['threads']}, {b['rss_bytes'] / 2**20:.0f} -> {a['rss_bytes'] / 2**20:.0f} MiB, {b['fds']} -> {a['fds']} |"
        )
    print(
        f"\nload: {result['machine']['proc_loadavg_start']} -> {result['machine']['proc_loadavg_end']}; JSON: {args.out}"
    )


if __name__ == "__main__":
    main()
