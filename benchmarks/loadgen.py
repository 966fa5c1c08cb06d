"""Bounded HTTP/1.1 load generator for the neardup service (loopback only).

Runs in its own process (``bench_service.py`` starts it), speaks raw HTTP/1.1 over asyncio
streams with keep-alive (much cheaper per request than an HTTP client library, so the generator
steals less CPU from the server on a small machine), and prints one JSON object on stdout.

Modes
-----
``throughput``: ``--connections`` connections each send batches of ``--batch`` new documents to
``/v1/check-and-insert`` back to back for ``--duration`` seconds (at most ``--max-requests``).
Reports acknowledged documents/s and batch latency percentiles.

``latency``: single-document ``check-and-insert`` requests on an open-loop schedule of
``--rate`` requests/s for ``--duration`` seconds. Latency is measured from the *scheduled* send
time (so queueing caused by a slow server is counted: no coordinated omission) and, separately,
from the actual send time. At most ``--max-inflight`` requests are outstanding.

Example::

    python benchmarks/loadgen.py --url http://127.0.0.1:8080 --mode latency --rate 1000 --duration 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from typing import Any
from urllib.parse import urlsplit

import numpy as np

_VOCAB_SIZE = 50_000


def make_texts(n: int, words: int, seed: int) -> list[str]:
    """``n`` random texts of ``words`` words over a 50k-word synthetic vocabulary."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lens = rng.integers(3, 10, _VOCAB_SIZE)
    vocab = ["".join(rng.choice(letters, k)) for k in lens]
    idx = rng.integers(0, _VOCAB_SIZE, (n, words))
    return [" ".join(vocab[j] for j in row) for row in idx]


def request_bytes(host: str, path: str, body: bytes, token: str | None) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
    )
    if token:
        head += f"Authorization: Bearer {token}\r\n"
    return head.encode() + b"\r\n" + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length = 0
    for line in lines[1:]:
        if line[:15].lower() == b"content-length:":
            length = int(line[15:].strip())
    body = await reader.readexactly(length) if length else b""
    return status, body


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    a = np.asarray(values) * 1000.0
    return {
        "p50_ms": float(np.percentile(a, 50)),
        "p90_ms": float(np.percentile(a, 90)),
        "p99_ms": float(np.percentile(a, 99)),
        "max_ms": float(a.max()),
        "mean_ms": float(a.mean()),
    }


async def throughput(args: argparse.Namespace) -> dict[str, Any]:
    u = urlsplit(args.url)
    # documents prepared up front (generation is not timed); the run stops early if they run out
    n_docs = min(args.max_docs, int(args.duration * 40_000))
    n_req = min(args.max_requests, max(args.connections, n_docs // args.batch))
    texts = make_texts(n_req * args.batch, args.words, args.seed)
    reqs: list[bytes] = []
    for r in range(n_req):
        docs = [
            {"id": f"t{args.seed}-{r}-{i}", "text": texts[r * args.batch + i]}
            for i in range(args.batch)
        ]
        body = json.dumps({"documents": docs}, separators=(",", ":")).encode()
        reqs.append(request_bytes(u.netloc, "/v1/check-and-insert", body, args.token))
    next_req = 0
    lat: list[float] = []
    docs_ok = 0
    added = 0
    errors: dict[str, int] = {}
    t_end = 0.0

    async def conn() -> None:
        nonlocal next_req, docs_ok, added
        reader, writer = await asyncio.open_connection(u.hostname, u.port)
        try:
            while time.perf_counter() < t_end and next_req < len(reqs):
                req = reqs[next_req]
                next_req += 1
                t0 = time.perf_counter()
                writer.write(req)
                status, body = await read_response(reader)
                lat.append(time.perf_counter() - t0)
                if status == 200:
                    docs_ok += args.batch
                    added += body.count(b'"added":true')
                else:
                    errors[str(status)] = errors.get(str(status), 0) + 1
        finally:
            writer.close()

    start = time.perf_counter()
    t_end = start + args.duration
    await asyncio.gather(*(conn() for _ in range(args.connections)))
    elapsed = time.perf_counter() - start
    return {
        "mode": "throughput",
        "batch": args.batch,
        "connections": args.connections,
        "requests": len(lat),
        "seconds": elapsed,
        "docs_acknowledged": docs_ok,
        "docs_added": added,
        "docs_per_s": docs_ok / elapsed,
        "errors": errors,
        "batch_latency": percentiles(lat),
        "exhausted_prepared_requests": next_req >= len(reqs),
    }


async def latency(args: argparse.Namespace) -> dict[str, Any]:
    u = urlsplit(args.url)
    n = min(args.max_requests, int(args.rate * args.duration))
    texts = make_texts(n, args.words, args.seed)
    reqs = [
        request_bytes(
            u.netloc,
            "/v1/check-and-insert",
            json.dumps(
                {"id": f"l{args.seed}-{i}", "text": texts[i]}, separators=(",", ":")
            ).encode(),
            args.token,
        )
        for i in range(n)
    ]
    pool: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    for _ in range(args.max_inflight):
        pool.put_nowait(await asyncio.open_connection(u.hostname, u.port))
    from_schedule: list[float] = []
    from_send: list[float] = []
    errors: dict[str, int] = {}
    waited = 0

    async def one(i: int, scheduled: float) -> None:
        nonlocal waited
        if pool.empty():
            waited += 1  # all connections busy: the request queues here (counted from schedule)
        reader, writer = await pool.get()
        try:
            t0 = time.perf_counter()
            writer.write(reqs[i])
            status, _ = await read_response(reader)
            t1 = time.perf_counter()
            from_schedule.append(t1 - scheduled)
            from_send.append(t1 - t0)
            if status != 200:
                errors[str(status)] = errors.get(str(status), 0) + 1
        finally:
            pool.put_nowait((reader, writer))

    tasks = []
    start = time.perf_counter() + 0.05
    for i in range(n):
        scheduled = start + i / args.rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one(i, scheduled)))
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    while not pool.empty():
        _, w = pool.get_nowait()
        w.close()
    return {
        "mode": "latency",
        "target_rate": args.rate,
        "requests": len(from_send),
        "seconds": elapsed,
        "achieved_rate": len(from_send) / elapsed,
        "errors": errors,
        "requests_waiting_for_a_connection": waited,
        "latency_from_schedule": percentiles(from_schedule),
        "latency_from_send": percentiles(from_send),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--url", required=True)
    p.add_argument("--mode", choices=["throughput", "latency"], required=True)
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--connections", type=int, default=4)
    p.add_argument("--rate", type=float, default=1000.0)
    p.add_argument("--max-inflight", type=int, default=64)
    p.add_argument("--max-requests", type=int, default=200_000)
    p.add_argument("--max-docs", type=int, default=600_000, help="documents prepared (throughput)")
    p.add_argument("--words", type=int, default=40)
    p.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    p.add_argument("--token", default=None)
    args = p.parse_args(argv)
    if urlsplit(args.url).hostname not in ("127.0.0.1", "localhost", "::1"):
        print("loadgen only targets loopback addresses", file=sys.stderr)
        return 2
    fn = throughput if args.mode == "throughput" else latency
    try:
        import uvloop

        result = uvloop.run(fn(args))
    except ImportError:
        result = asyncio.run(fn(args))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
