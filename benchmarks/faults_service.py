"""Figures for the service's fault cases (issue 21 items 2 and 3), against a real
``neardup serve`` process on loopback.

1. The worst verification request: 4 edited copies of a stored 1 MB and 2 MB document in one
   ``/v1/check`` (with the token: a check is a read), while another client inserts into the same namespace in a
   loop: the check's time and how much it adds to the inserts' latency (median and worst,
   against the same inserts with no check running). Run twice: right after the document was
   inserted (its tokens are in the verifier's cache) and after a restart (cold: the writer
   tokenises the stored document once).
2. Floods: ``--slowloris`` clients sending a header line every second and ``--idle`` connections
   that send nothing; the descriptors the server holds while they are connected and once its
   head deadline has passed, and the ``/healthz`` latency meanwhile.

Prints a table and writes ``benchmarks/results/faults_service.json``::

    .venv/bin/python benchmarks/faults_service.py
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from neardup.service.testing import ServerProcess  # noqa: E402

TOKEN = "bench-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def document(rng: random.Random, n_bytes: int) -> str:
    vocab = [f"w{i}" for i in range(5000)]
    out: list[str] = []
    size = 0
    while size < n_bytes:
        w = rng.choice(vocab)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def edited(rng: random.Random, text: str, k: int) -> str:
    words = text.split(" ")
    for _ in range(k):
        words[rng.randrange(len(words))] = "edited"
    return " ".join(words)


def insert_latencies(url: str, stop: threading.Event, out: list[float], tag: str) -> None:
    with httpx.Client(base_url=url, headers=AUTH, timeout=300) as c:
        i = 0
        while not stop.is_set() and i < 100_000:
            t = time.perf_counter()
            r = c.post("/v1/insert", json={"id": f"{tag}-{i}", "text": f"small insert {tag} {i}"})
            out.append(time.perf_counter() - t)
            assert r.status_code == 200, r.text
            i += 1
            time.sleep(0.005)


def worst_check(url: str, copies: list[str]) -> dict[str, Any]:
    base: list[float] = []
    stop = threading.Event()
    th = threading.Thread(target=insert_latencies, args=(url, stop, base, f"b{time.time()}"))
    th.start()
    time.sleep(1.0)
    stop.set()
    th.join()
    during: list[float] = []
    stop = threading.Event()
    th = threading.Thread(target=insert_latencies, args=(url, stop, during, f"d{time.time()}"))
    th.start()
    time.sleep(0.2)
    t = time.perf_counter()
    body = {"documents": [{"id": f"c{i}", "text": x} for i, x in enumerate(copies)]}
    r = httpx.post(url + "/v1/check", json=body, headers=AUTH, timeout=600)
    took = time.perf_counter() - t
    time.sleep(0.2)
    stop.set()
    th.join()
    assert r.status_code == 200, r.text
    dups = sum(x["duplicate"] for x in r.json()["results"])
    return {
        "check_s": round(took, 3),
        "duplicates": dups,
        "insert_p50_idle_ms": round(statistics.median(base) * 1e3, 2),
        "insert_max_idle_ms": round(max(base) * 1e3, 2),
        "insert_p50_during_ms": round(statistics.median(during) * 1e3, 2),
        "insert_max_during_ms": round(max(during) * 1e3, 2),
        "added_worst_ms": round((max(during) - statistics.median(base)) * 1e3, 2),
    }


def verification(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    rows = []
    rng = random.Random(7)
    for mb in args.sizes:
        doc = document(rng, int(mb * 1_000_000))
        copies = [edited(rng, doc, 100) for _ in range(4)]
        data = tmp / f"v{mb}"
        srv = ServerProcess(data, env={"NEARDUP_TOKEN": TOKEN}, args=["--max-body-bytes", "64MiB"])
        srv.start()
        try:
            r = httpx.post(
                srv.url + "/v1/insert", json={"id": "big", "text": doc}, headers=AUTH, timeout=300
            )
            assert r.status_code == 200, r.text
            rows.append({"case": f"check 4 x {mb} MB (warm)", **worst_check(srv.url, copies)})
        finally:
            srv.stop()
        srv.start()  # a restart: the verifier's cache is empty
        try:
            rows.append({"case": f"check 4 x {mb} MB (cold)", **worst_check(srv.url, copies)})
        finally:
            srv.stop()
    return rows


def fd_count(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def healthz_ms(url: str) -> float:
    t = time.perf_counter()
    try:
        httpx.get(url + "/healthz", timeout=10)
    except httpx.TransportError:
        return float("nan")
    return (time.perf_counter() - t) * 1e3


def floods(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    srv = ServerProcess(tmp / "flood", args=["--header-timeout", str(args.header_timeout)])
    srv.start()
    assert srv.proc is not None
    pid = srv.proc.pid
    out: dict[str, Any] = {"fds_before": fd_count(pid), "header_timeout_s": args.header_timeout}
    socks: list[socket.socket] = []
    slow: list[socket.socket] = []
    try:
        for _ in range(args.idle):
            socks.append(socket.create_connection(("127.0.0.1", srv.port)))
        for _ in range(args.slowloris):
            s = socket.create_connection(("127.0.0.1", srv.port))
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            slow.append(s)
        time.sleep(0.5)
        out["fds_connected"] = fd_count(pid)
        out["healthz_ms_connected"] = round(healthz_ms(srv.url), 2)
        t0 = time.monotonic()
        while time.monotonic() - t0 < args.header_timeout + 3:
            for s in slow:
                with contextlib.suppress(OSError):
                    s.sendall(b"X-a: b\r\n")
            time.sleep(1.0)
        out["fds_after_deadline"] = fd_count(pid)
        out["healthz_ms_after"] = round(healthz_ms(srv.url), 2)
        closed = 0
        for s in socks + slow:
            s.setblocking(False)
            try:
                closed += s.recv(1024) == b""
            except BlockingIOError:
                pass
            except OSError:
                closed += 1
        out["connections"] = len(socks) + len(slow)
        out["closed_by_server"] = closed
    finally:
        for s in socks + slow:
            s.close()
        srv.stop()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", type=float, nargs="+", default=[1.0, 2.0], help="MB per document")
    p.add_argument("--slowloris", type=int, default=200)
    p.add_argument("--idle", type=int, default=1000)
    p.add_argument("--header-timeout", type=float, default=10.0)
    p.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "faults_service.json"
    )
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        rows = verification(args, tmp)
        flood = floods(args, tmp)
    print(
        f"{'case':28} {'check s':>8} {'dups':>4} {'ins p50 idle':>12} {'ins max during':>14} {'added ms':>9}"
    )
    for r in rows:
        print(
            f"{r['case']:28} {r['check_s']:>8} {r['duplicates']:>4} {r['insert_p50_idle_ms']:>12} "
            f"{r['insert_max_during_ms']:>14} {r['added_worst_ms']:>9}"
        )
    print()
    for k, v in flood.items():
        print(f"{k:24} {v}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {"verification": rows, "floods": flood, "cpus": os.cpu_count(), "when": time.time()}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
