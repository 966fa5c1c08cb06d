"""Server CPU per single-document request (the document hot path), with a token on every request.

    nice -n 5 .venv/bin/python benchmarks/bench_request_cpu.py --requests 3000 --rounds 3 \
        --out benchmarks/results/bench_request_cpu.json

Starts ``neardup serve`` (``NEARDUP_TOKEN`` set, a fresh data directory) as a child process and
sends, one at a time over one keep-alive connection, ``--requests`` single-document
``POST /v1/check-and-insert`` (writes) then as many ``POST /v1/check`` (reads), every one with
``Authorization: Bearer <token>``. The figure is the server process's CPU time (user + system,
from ``/proc/<pid>/stat``) over each phase divided by its requests: what one request costs the
server, load generator excluded. Each phase runs ``--rounds`` times (the best and the median are
reported: the machine is shared).

Second, in process, the cost of the access check alone per request (``--micro``): the hot
path's authorization of one read and one write, in µs per call, timed over many calls.

Run it on two checkouts to compare them (``PYTHONPATH=<other tree>``): it uses only what both
the code before and after the reads-need-a-token change have (``ServerProcess``, a token in the
environment).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import neardup
from neardup.service.testing import ServerProcess

TOKEN = "bench-token-0123456789abcdef"


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _request(path: str, body: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def _read_response(sock: socket.socket, buf: bytearray) -> int:
    """Read one response (status line, headers, Content-Length body); return the status."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf += chunk
    head, _, rest = bytes(buf).partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        rest += chunk
    del buf[:]
    buf += rest[length:]
    return status


def _phase(srv: ServerProcess, path: str, docs: list[bytes]) -> dict[str, float]:
    assert srv.proc is not None
    reqs = [_request(path, d) for d in docs]
    with socket.create_connection(("127.0.0.1", srv.port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = bytearray()
        sock.sendall(reqs[0])  # warm the connection and the route
        assert _read_response(sock, buf) == 200
        cpu0, t0 = _cpu_seconds(srv.proc.pid), time.perf_counter()
        for r in reqs[1:]:
            sock.sendall(r)
            status = _read_response(sock, buf)
            if status != 200:
                raise RuntimeError(f"{path}: HTTP {status}")
        cpu1, t1 = _cpu_seconds(srv.proc.pid), time.perf_counter()
    n = len(reqs) - 1
    return {
        "cpu_us_per_request": (cpu1 - cpu0) / n * 1e6,
        "wall_us_per_request": (t1 - t0) / n * 1e6,
    }


def _texts(n: int, seed: int) -> list[str]:
    import random

    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(5000)]
    return [" ".join(rng.choices(vocab, k=40)) for _ in range(n)]


def _micro(calls: int) -> dict[str, float]:
    """µs per access check of one request, as the hot path makes it (whichever the tree has)."""
    scope = {
        "type": "http",
        "headers": [
            (b"host", b"bench"),
            (b"content-type", b"application/json"),
            (b"authorization", f"Bearer {TOKEN}".encode()),
            (b"content-length", b"60"),
        ],
        "client": ("127.0.0.1", 5000),
    }
    from neardup.service.documents import DocumentRoutes
    from neardup.service.limits import RateLimiter
    from neardup.service.metrics import Metrics

    limiter = RateLimiter(50.0, 200.0)
    try:
        from neardup.service.auth import authenticator_for

        routes = DocumentRoutes(
            None,
            Metrics(),
            auth=authenticator_for(TOKEN),
            max_batch=10,
            max_body_bytes=1 << 20,
            limiter=limiter,
        )

        def read() -> Any:
            return routes._admit(scope, "/v1/check", "default", "check", 60)

        def write() -> Any:
            return routes._admit(scope, "/v1/insert", "default", "insert", 60)

    except ImportError:  # the code before: the write token checked by check_write_token
        from neardup.service.auth import check_write_token
        from neardup.service.documents import _headers

        routes = DocumentRoutes(
            None, Metrics(), token=TOKEN, max_batch=10, max_body_bytes=1 << 20, limiter=limiter
        )

        def read() -> Any:
            return routes._over_limit(scope, "/v1/check", "check", 60)

        def write() -> Any:
            routes._over_limit(scope, "/v1/insert", "insert", 60)
            return check_write_token(_headers(scope), TOKEN)

    out: dict[str, float] = {}
    for name, fn in (("read", read), ("write", write)):
        assert fn() is None
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            best = min(best, (time.perf_counter() - t0) / calls * 1e6)
        out[f"{name}_check_us"] = best
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--requests", type=int, default=3000, help="requests per phase")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--micro-calls", type=int, default=100_000)
    p.add_argument(
        "--micro-only", action="store_true", help="only the in-process access-check timing"
    )
    p.add_argument("--label", default="", help="a name for this tree (e.g. before, after)")
    p.add_argument("--out", type=Path, default=None, help="JSON results file")
    args = p.parse_args(argv)
    report: dict[str, Any] = {
        "label": args.label,
        "neardup": str(Path(neardup.__file__).resolve().parent),
        "command": " ".join(sys.argv),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_avg_at_start": os.getloadavg(),
        },
        "requests": args.requests,
    }
    report["micro"] = _micro(args.micro_calls)
    rows: dict[str, list[dict[str, float]]] = {"check-and-insert": [], "check": []}
    with tempfile.TemporaryDirectory(prefix="bench_request_cpu-") as tmp:
        for r in range(0 if args.micro_only else args.rounds):
            srv = ServerProcess(Path(tmp) / f"r{r}", env={"NEARDUP_TOKEN": TOKEN})
            srv.start()
            try:
                texts = _texts(args.requests + 1, seed=r)
                writes = [
                    json.dumps({"id": f"d{r}-{i}", "text": t}).encode() for i, t in enumerate(texts)
                ]
                reads = [
                    json.dumps({"id": f"q{i}", "text": t}).encode() for i, t in enumerate(texts)
                ]
                rows["check-and-insert"].append(_phase(srv, "/v1/check-and-insert", writes))
                rows["check"].append(_phase(srv, "/v1/check", reads))
            finally:
                srv.stop()
    report["machine"]["load_avg_at_end"] = os.getloadavg()
    report["phases"] = {}
    print(f"neardup from {report['neardup']} {args.label}")
    print(f"{'phase':<18} {'CPU µs/req best':>16} {'median':>8} {'wall µs/req median':>19}")
    for name, runs in rows.items():
        if not runs:
            continue
        cpu = [x["cpu_us_per_request"] for x in runs]
        wall = [x["wall_us_per_request"] for x in runs]
        report["phases"][name] = {
            "runs": runs,
            "cpu_us_best": min(cpu),
            "cpu_us_median": statistics.median(cpu),
            "wall_us_median": statistics.median(wall),
        }
        print(
            f"{name:<18} {min(cpu):>16.1f} {statistics.median(cpu):>8.1f} {statistics.median(wall):>19.1f}"
        )
    m = report["micro"]
    print(
        f"access check alone: read {m['read_check_us']:.2f} µs, write {m['write_check_us']:.2f} µs"
    )
    print(
        "load average",
        report["machine"]["load_avg_at_start"],
        "->",
        report["machine"]["load_avg_at_end"],
    )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
