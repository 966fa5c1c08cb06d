"""Server CPU per single-document request (the document hot path), with a token on every
request; optionally against another checkout's server in the same run.

    nice -n 5 .venv/bin/python benchmarks/bench_request_cpu.py --requests 3000 --rounds 3 \
        --baseline /tmp/nd-base --out benchmarks/results/bench_request_cpu.json

Starts ``neardup serve`` (``NEARDUP_TOKEN`` set, a fresh data directory) as a child process and
sends, one at a time over one keep-alive connection, ``--requests`` single-document
``POST /v1/check-and-insert`` (writes) then as many ``POST /v1/check`` (reads), every one with
``Authorization: Bearer <token>``. The figure is the server process's CPU time (user + system,
from ``/proc/<pid>/stat``) over each phase divided by its requests: what one request costs the
server, load generator excluded. Each phase runs ``--rounds`` times, each round with fresh
servers (the best and the median are reported).

``--baseline TREE`` starts a second server from another source tree (``PYTHONPATH=TREE``, e.g.
``git archive <commit> neardup | tar -x -C TREE``) beside the first and sends the same requests
to both, alternating one by one, so that both see the same load on a shared machine: their
ratio survives the load, their absolute figures do not. The baseline tree only needs what
every version of ``neardup serve`` has (a token in the environment).

``--micro``: in process, the access check alone per request (the hot path's authorization of
one read and one write), µs per call, best of 5 runs of ``--micro-calls`` calls; for this
tree (and the baseline's, in a child process).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
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


def _phase(servers: list[ServerProcess], path: str, docs: list[bytes]) -> list[dict[str, float]]:
    """Send every request of ``docs`` to each server, alternating; the figures per server."""
    reqs = [_request(path, d) for d in docs]
    socks = [socket.create_connection(("127.0.0.1", s.port)) for s in servers]
    try:
        bufs = [bytearray() for _ in servers]
        for s, b in zip(socks, bufs, strict=True):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(reqs[0])  # warm the connection and the route
            if _read_response(s, b) != 200:
                raise RuntimeError(f"{path}: the first request failed")
        pids = [s.proc.pid for s in servers if s.proc is not None]
        cpu0 = [_cpu_seconds(p) for p in pids]
        wall = [0.0] * len(servers)
        for r in reqs[1:]:
            for k, (s, b) in enumerate(zip(socks, bufs, strict=True)):
                t = time.perf_counter()
                s.sendall(r)
                status = _read_response(s, b)
                wall[k] += time.perf_counter() - t
                if status != 200:
                    raise RuntimeError(f"{path}: HTTP {status}")
        cpu1 = [_cpu_seconds(p) for p in pids]
    finally:
        for s in socks:
            s.close()
    n = len(reqs) - 1
    return [
        {"cpu_us_per_request": (c1 - c0) / n * 1e6, "wall_us_per_request": w / n * 1e6}
        for c0, c1, w in zip(cpu0, cpu1, wall, strict=True)
    ]


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


def _micro_in(tree: str, calls: int) -> dict[str, float]:
    """:func:`_micro` of another source tree, in a child process."""
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2]); "
        "import bench_request_cpu as b; print(json.dumps(b._micro(int(sys.argv[3]))))"
    )
    here = str(Path(__file__).resolve().parent)
    out = subprocess.run(
        [sys.executable, "-c", code, tree, here, str(calls)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": tree},
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--requests", type=int, default=3000, help="requests per phase")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--baseline", default=None, help="another source tree to run beside this one")
    p.add_argument("--micro", action="store_true", help="also time the access check alone")
    p.add_argument("--micro-calls", type=int, default=200_000)
    p.add_argument("--out", type=Path, default=None, help="JSON results file")
    args = p.parse_args(argv)
    names = ["this"] + (["baseline"] if args.baseline else [])
    report: dict[str, Any] = {
        "trees": {
            "this": str(Path(neardup.__file__).resolve().parent),
            **({"baseline": str(Path(args.baseline).resolve())} if args.baseline else {}),
        },
        "command": " ".join(sys.argv),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_avg_at_start": os.getloadavg(),
        },
        "requests": args.requests,
    }
    if args.micro:
        report["micro"] = {"this": _micro(args.micro_calls)}
        if args.baseline:
            report["micro"]["baseline"] = _micro_in(args.baseline, args.micro_calls)
    rows: dict[str, dict[str, list[dict[str, float]]]] = {
        ph: {n: [] for n in names} for ph in ("check-and-insert", "check")
    }
    with tempfile.TemporaryDirectory(prefix="bench_request_cpu-") as tmp:
        for r in range(args.rounds):
            servers = [ServerProcess(Path(tmp) / f"r{r}-this", env={"NEARDUP_TOKEN": TOKEN})]
            if args.baseline:
                env = {"NEARDUP_TOKEN": TOKEN, "PYTHONPATH": args.baseline}
                servers.append(ServerProcess(Path(tmp) / f"r{r}-baseline", env=env))
            try:
                for s in servers:
                    s.start()
                texts = _texts(args.requests + 1, seed=r)
                writes = [
                    json.dumps({"id": f"d{r}-{i}", "text": t}).encode() for i, t in enumerate(texts)
                ]
                reads = [
                    json.dumps({"id": f"q{i}", "text": t}).encode() for i, t in enumerate(texts)
                ]
                for phase, docs in (("check-and-insert", writes), ("check", reads)):
                    path = "/v1/" + phase
                    for n, fig in zip(names, _phase(servers, path, docs), strict=True):
                        rows[phase][n].append(fig)
            finally:
                for s in servers:
                    s.stop()
    report["machine"]["load_avg_at_end"] = os.getloadavg()
    report["phases"] = {}
    print(f"this tree: {report['trees']['this']}")
    if args.baseline:
        print(f"baseline:  {report['trees']['baseline']} (requests alternated with this tree's)")
    print(f"{'phase':<18} {'tree':<9} {'CPU µs/req best':>16} {'median':>8} {'wall µs median':>15}")
    for phase, per in rows.items():
        report["phases"][phase] = {}
        for n, runs in per.items():
            cpu = [x["cpu_us_per_request"] for x in runs]
            wall = [x["wall_us_per_request"] for x in runs]
            report["phases"][phase][n] = {
                "runs": runs,
                "cpu_us_best": min(cpu),
                "cpu_us_median": statistics.median(cpu),
                "wall_us_median": statistics.median(wall),
            }
            print(
                f"{phase:<18} {n:<9} {min(cpu):>16.1f} {statistics.median(cpu):>8.1f} "
                f"{statistics.median(wall):>15.1f}"
            )
        if args.baseline:
            ratios = [
                a["cpu_us_per_request"] / b["cpu_us_per_request"]
                for a, b in zip(per["this"], per["baseline"], strict=True)
            ]
            report["phases"][phase]["cpu_ratio_this_over_baseline"] = ratios
            print(
                f"{'':<18} ratio this / baseline per round: {', '.join(f'{x:.3f}' for x in ratios)}"
            )
    for n, m in report.get("micro", {}).items():
        print(
            f"access check alone ({n}): read {m['read_check_us']:.2f} µs, write {m['write_check_us']:.2f} µs"
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
