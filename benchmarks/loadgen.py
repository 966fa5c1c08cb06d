"""Bounded HTTP/1.1 load generator for the neardup service (loopback only).

Runs in its own process (``bench_service.py`` starts it) and is built to cost the server as
little CPU as possible on a small shared machine: every request is pre-built as raw bytes
before the clock starts, each connection is a bare asyncio ``Protocol`` (no stream objects,
no tasks per request), and an answer is parsed no further than its status line and
``Content-Length``. It prints one JSON object on stdout, including its own CPU use.

Modes
-----
``throughput``: ``--connections`` connections each send batches of ``--batch`` new documents to
``/v1/check-and-insert`` back to back for ``--duration`` seconds (at most ``--max-requests``).
Reports acknowledged documents/s and batch latency percentiles.

``latency``: single-document ``check-and-insert`` requests on an open-loop schedule of
``--rate`` requests/s for ``--duration`` seconds. Latency is measured from the *scheduled* send
time (so queueing caused by a slow server is counted: no coordinated omission) and, separately,
from the actual send time. At most ``--max-inflight`` requests are outstanding (one per
connection; a request due while every connection is busy waits for one, and that wait counts).

Example::

    python benchmarks/loadgen.py --url http://127.0.0.1:8080 --mode latency --rate 1000 --duration 10
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import hashlib
import json
import random
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
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


def window_texts(n: int, seed: int) -> list[str]:
    """``n`` posts from ``bench_store.py --window``'s generator (4 of 5 short, 1 of 5 long,
    5 % edited copies of earlier ones): the documents the window was seeded with, so the
    load is the same kind of text."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_store import window_texts as generate

    return generate(n, seed, 0)


def file_texts(path: str, n: int, skip: int = 0) -> list[str]:
    """The ``text`` fields of ``n`` lines of JSONL file ``path``, after its first ``skip``
    texts; a file with fewer is refused before anything is sent."""
    out: list[str] = []
    seen = 0
    with open(path, "rb") as fh:
        for line in fh:
            if len(out) == n:
                break
            if line.strip():
                seen += 1
                if seen > skip:
                    out.append(json.loads(line)["text"])
    if len(out) < n:
        raise SystemExit(
            f"loadgen: --texts-file {path} holds {seen:,} texts, this run sends {n:,}"
            + (f" after the first {skip:,}" if skip else "")
            + "; write more (or lower --duration / --rate / --prepare-rate)"
        )
    return out


def texts_for(args: argparse.Namespace, n: int) -> list[str]:
    """The ``n`` texts a run sends: ``--texts random`` (``--words`` words each),
    ``--texts window`` (the window generator, short and long mixed) or ``--texts file`` (the
    first ``n`` of ``--texts-file``)."""
    if args.texts == "window":
        return window_texts(n, args.seed)
    if args.texts == "file":
        return file_texts(args.texts_file, n)
    return make_texts(n, args.words, args.seed)


def request_bytes(host: str, path: str, body: bytes, token: str | None) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
    )
    if token:
        head += f"Authorization: Bearer {token}\r\n"
    return head.encode() + b"\r\n" + body


class Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection with at most one request in flight.

    ``on_answer(conn, status, body)`` is called once per complete answer (``body`` only when
    ``keep_body``; otherwise ``b""``). Parsing stops at the status code and Content-Length.
    """

    def __init__(
        self, on_answer: Callable[[Connection, int, bytes], None], keep_body: bool
    ) -> None:
        self.on_answer = on_answer
        self.keep_body = keep_body
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.need = -1  # bytes of the current answer (head + body) once the head is parsed
        self.status = 0
        self.head_len = 0
        self.closed: asyncio.Future[None] | None = None
        self.t_send = 0.0
        self.scheduled = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.closed = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.closed is not None and not self.closed.done():
            self.closed.set_result(None)

    def send(self, request: bytes) -> None:
        self.transport.write(request)  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        while True:
            if self.need < 0:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                head = bytes(buf[:end])
                self.status = int(head[9:12])
                length = 0
                i = head.lower().find(b"\r\ncontent-length:")
                if i >= 0:
                    j = head.find(b"\r\n", i + 2)
                    length = int(head[i + 17 : j if j >= 0 else len(head)])
                self.head_len = end + 4
                self.need = self.head_len + length
            if len(buf) < self.need:
                return
            body = bytes(buf[self.head_len : self.need]) if self.keep_body else b""
            del buf[: self.need]
            self.need = -1
            self.on_answer(self, self.status, body)


def percentiles(values: list[float] | np.ndarray) -> dict[str, float]:
    if len(values) == 0:
        return {}
    a = np.asarray(values) * 1000.0
    return {
        "p50_ms": float(np.percentile(a, 50)),
        "p90_ms": float(np.percentile(a, 90)),
        "p99_ms": float(np.percentile(a, 99)),
        "p999_ms": float(np.percentile(a, 99.9)),
        "max_ms": float(a.max()),
        "mean_ms": float(a.mean()),
    }


async def _connect(
    url: str, n: int, on_answer: Callable[[Connection, int, bytes], None], keep_body: bool
) -> list[Connection]:
    u = urlsplit(url)
    host, port = u.hostname or "127.0.0.1", u.port or 80
    loop = asyncio.get_running_loop()
    conns = []
    for _ in range(n):
        _, proto = await loop.create_connection(
            lambda: Connection(on_answer, keep_body), host, port
        )
        conns.append(proto)
    return conns


def _close(conns: list[Connection]) -> None:
    for c in conns:
        if c.transport is not None:
            c.transport.close()


def _doc_id(args: argparse.Namespace, mode: str, n: int, seq: str) -> str:
    """A document id: ``{mode}{seed}-{seq}`` (consecutive ids share a long prefix, so the
    server's id index is written in one place), or with ``--random-ids`` 16 hex digits of a
    hash of (seed, mode, n), as ids that are URL or content hashes arrive (spread over the
    whole index)."""
    if not args.random_ids:
        return f"{mode}{args.seed}-{seq}"
    return hashlib.blake2b(f"{args.seed}/{mode}/{n}".encode(), digest_size=8).hexdigest()


async def throughput(args: argparse.Namespace) -> dict[str, Any]:
    u = urlsplit(args.url)
    # documents prepared up front (generation is not timed); the run stops early if they run
    # out (reported as `exhausted_prepared_requests`): --prepare-rate per second of --duration
    n_docs = min(args.max_docs, int(args.duration * args.prepare_rate))
    n_req = min(args.max_requests, max(args.connections, n_docs // args.batch))
    texts = texts_for(args, n_req * args.batch)
    reqs: list[bytes] = []
    for r in range(n_req):
        docs = [
            {
                "id": _doc_id(args, "t", r * args.batch + i, f"{r}-{i}"),
                "text": texts[r * args.batch + i],
            }
            for i in range(args.batch)
        ]
        body = json.dumps({"documents": docs}, separators=(",", ":")).encode()
        reqs.append(request_bytes(u.netloc, "/v1/check-and-insert", body, args.token))
    loop = asyncio.get_running_loop()
    perf = time.perf_counter
    state = {"next": 0, "docs_ok": 0, "added": 0, "open": args.connections}
    lat: list[float] = []
    errors: dict[str, int] = {}
    finished = loop.create_future()
    t_end = 0.0

    def send_next(conn: Connection) -> None:
        if perf() >= t_end or state["next"] >= len(reqs):
            state["open"] -= 1
            if state["open"] == 0 and not finished.done():
                finished.set_result(None)
            return
        req = reqs[state["next"]]
        state["next"] += 1
        conn.t_send = perf()
        conn.send(req)

    def on_answer(conn: Connection, status: int, body: bytes) -> None:
        lat.append(perf() - conn.t_send)
        if status == 200:
            state["docs_ok"] += args.batch
            state["added"] += body.count(b'"added":true')
        else:
            errors[str(status)] = errors.get(str(status), 0) + 1
        send_next(conn)

    conns = await _connect(args.url, args.connections, on_answer, keep_body=True)
    cpu0 = time.process_time()
    start = perf()
    t_end = start + args.duration
    for c in conns:
        send_next(c)
    try:  # bounded: a server that stops answering ends the run
        await asyncio.wait_for(finished, args.duration + args.grace)
    except TimeoutError:
        errors["no_answer"] = sum(1 for _ in conns)
    elapsed = perf() - start
    cpu = time.process_time() - cpu0
    _close(conns)
    return {
        "mode": "throughput",
        "batch": args.batch,
        "connections": args.connections,
        "requests": len(lat),
        "seconds": elapsed,
        "docs_acknowledged": state["docs_ok"],
        "docs_added": state["added"],
        "docs_per_s": state["docs_ok"] / elapsed,
        "errors": errors,
        "batch_latency": percentiles(lat),
        "exhausted_prepared_requests": state["next"] >= len(reqs),
        "loadgen_cpu_s": cpu,
        "loadgen_cpu_share": cpu / elapsed,
    }


async def latency(args: argparse.Namespace) -> dict[str, Any]:
    u = urlsplit(args.url)
    # the first `warm` requests are paced like the rest but not counted: the first few after
    # an idle server (fresh connections, cold caches) are a start-up transient, not the
    # steady state at `rate`; their percentiles are reported apart
    warm = int(args.rate * args.warmup)
    n = warm + min(args.max_requests, int(args.rate * args.duration))
    texts = texts_for(args, n)
    reqs = [
        request_bytes(
            u.netloc,
            "/v1/check-and-insert",
            json.dumps(
                {"id": _doc_id(args, "l", i, str(i)), "text": texts[i]}, separators=(",", ":")
            ).encode(),
            args.token,
        )
        for i in range(n)
    ]
    loop = asyncio.get_running_loop()
    perf = time.perf_counter
    from_schedule = np.zeros(n)
    from_send = np.zeros(n)
    statuses = np.zeros(n, dtype=np.int32)
    idle: collections.deque[Connection] = collections.deque()
    due: collections.deque[int] = collections.deque()  # requests waiting for a connection
    state = {"next": 0, "done": 0, "waited": 0}
    finished = loop.create_future()
    start = 0.0
    interval = 1.0 / args.rate
    index: dict[Connection, int] = {}

    def dispatch(conn: Connection, i: int) -> None:
        index[conn] = i
        conn.scheduled = start + i * interval
        conn.t_send = perf()
        conn.send(reqs[i])

    def on_answer(conn: Connection, status: int, body: bytes) -> None:
        t = perf()
        i = index[conn]
        from_schedule[i] = t - conn.scheduled
        from_send[i] = t - conn.t_send
        statuses[i] = status
        state["done"] += 1
        if due:
            dispatch(conn, due.popleft())
        else:
            idle.append(conn)
        if state["done"] == n and not finished.done():
            finished.set_result(None)

    def tick() -> None:
        # on the loop: send everything that is due by now
        now = perf()
        i = state["next"]
        while i < n and start + i * interval <= now:
            if idle:
                dispatch(idle.popleft(), i)
            else:
                state["waited"] += 1
                due.append(i)
            i += 1
        state["next"] = i

    def pace() -> None:
        # in a thread: sleep (to the microsecond) until each scheduled send, then wake the
        # loop. The event loop's timers have 1 ms resolution: sub-millisecond delays would
        # either spin the loop (CPU taken from the server) or send late (latency added).
        for i in range(n):
            delay = start + i * interval - perf()
            if delay > 0:
                time.sleep(delay)
            if state["next"] > i:  # already sent by a late tick
                continue
            try:
                loop.call_soon_threadsafe(tick)
            except RuntimeError:  # the loop is gone (the run timed out)
                return

    conns = await _connect(args.url, args.max_inflight, on_answer, keep_body=False)
    idle.extend(conns)
    cpu0 = time.process_time()
    start = perf() + 0.05
    pacer = threading.Thread(target=pace, name="loadgen-pacer", daemon=True)
    pacer.start()
    timed_out = False
    if n:
        try:  # bounded: a server that stops answering ends the run
            await asyncio.wait_for(finished, args.duration + args.grace)
        except TimeoutError:
            timed_out = True
    elapsed = perf() - start
    cpu = time.process_time() - cpu0
    _close(conns)
    errors: dict[str, int] = {}
    answered = statuses != 0
    for s, c in zip(
        *np.unique(statuses[answered & (statuses != 200)], return_counts=True), strict=True
    ):
        errors[str(int(s))] = int(c)
    if timed_out:
        errors["no_answer"] = int((~answered).sum())
    if args.dump_latencies:
        scheduled = start + np.arange(n) * interval  # time.perf_counter (CLOCK_MONOTONIC)
        np.save(args.dump_latencies, np.column_stack([scheduled, from_schedule])[answered])
    counted = answered.copy()
    counted[:warm] = False
    warmup = {
        "seconds": warm * interval,
        "requests": int(answered[:warm].sum()),
        "latency_from_schedule": percentiles(from_schedule[:warm][answered[:warm]]),
    }
    from_schedule, from_send = from_schedule[counted], from_send[counted]
    measured_s = elapsed - warm * interval
    return {
        "mode": "latency",
        "target_rate": args.rate,
        "requests": int(counted.sum()),
        "seconds": measured_s,
        "achieved_rate": int(counted.sum()) / measured_s if measured_s > 0 else 0.0,
        "warmup": warmup,
        "errors": errors,
        "requests_waiting_for_a_connection": state["waited"],
        "latency_from_schedule": percentiles(from_schedule),
        "latency_from_send": percentiles(from_send),
        "loadgen_cpu_s": cpu,
        "loadgen_cpu_share": cpu / elapsed if elapsed > 0 else 0.0,
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
    p.add_argument(
        "--max-docs", type=int, default=2_000_000, help="documents prepared at most (throughput)"
    )
    p.add_argument(
        "--prepare-rate",
        type=float,
        default=100_000.0,
        help="throughput: documents prepared per second of --duration (more than the server "
        "can take, so the run lasts --duration)",
    )
    p.add_argument("--words", type=int, default=40, help="words per text (--texts random)")
    p.add_argument(
        "--texts",
        choices=["random", "window", "file"],
        default="random",
        help="random: --words random words over a 50k vocabulary; window: bench_store.py "
        "--window's posts (short and long mixed, 5 %% edited copies); file: the `text` fields "
        "of --texts-file, in order",
    )
    p.add_argument(
        "--texts-file",
        default=None,
        metavar="PATH",
        help="--texts file: a JSONL file with a `text` field per line (bench_window.py writes "
        "the documents that follow its window)",
    )
    p.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    p.add_argument("--token", default=None)
    p.add_argument(
        "--grace", type=float, default=120.0, help="seconds after --duration before giving up"
    )
    p.add_argument(
        "--random-ids",
        action="store_true",
        help="ids as hashes (16 hex digits) instead of a shared prefix and a counter",
    )
    p.add_argument(
        "--warmup",
        type=float,
        default=0.0,
        help="latency mode: seconds of requests at --rate sent first and left out of the "
        "percentiles (reported apart as `warmup`)",
    )
    p.add_argument(
        "--dump-latencies",
        default=None,
        metavar="PATH",
        help="latency mode: also write every request's scheduled send time (time.perf_counter, "
        "CLOCK_MONOTONIC on Linux, so comparable with the server's) and latency, in seconds, "
        "as a two-column .npy array: when did the slow requests happen",
    )
    args = p.parse_args(argv)
    if args.texts == "file" and not args.texts_file:
        p.error("--texts file needs --texts-file PATH")
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
