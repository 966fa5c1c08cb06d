"""Prometheus metrics in the text exposition format (version 0.0.4), with no extra dependency.

:class:`Metrics` holds counters and one latency histogram per route; :class:`MetricsMiddleware`
feeds it from every HTTP request; :meth:`Metrics.render` writes the text served at
``GET /metrics``, adding gauges from each namespace's :meth:`Deduplicator.stats`.

Series::

    neardup_http_requests_total{route, method, status}            counter
    neardup_http_request_duration_seconds{route}                   histogram
    neardup_documents_total{namespace, op, outcome}                counter (outcome: seen, duplicate, added)
    neardup_request_stage_seconds{stage}                           histogram: where a document
                                                                   request's time goes (see STAGES)
    neardup_event_loop_lag_seconds                                 histogram: how late the event
                                                                   loop runs a timer (GIL / CPU)
    neardup_store_<stat>{namespace}                                gauge, one per numeric stat
    neardup_uptime_seconds, neardup_process_resident_memory_bytes  gauges
"""

from __future__ import annotations

import bisect
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

__all__ = [
    "DEFAULT_BUCKETS",
    "STAGES",
    "STAGE_BUCKETS",
    "Metrics",
    "MetricsMiddleware",
    "monitor_loop_lag",
    "process_rss_bytes",
]

#: latency histogram bucket upper bounds, in seconds
DEFAULT_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip

#: finer buckets for the stages of a document request and the event-loop lag, in seconds
STAGE_BUCKETS: tuple[float, ...] = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05,
    0.1, 0.25, 1.0,
)  # fmt: skip

#: the stages of a document request (``POST {p}/check|insert|check-and-insert``), in order:
#: ``read`` the body arrives, ``parse`` JSON decoding and validation, ``prepare`` the store's
#: own validation, fingerprints and content hashes (on the event loop for small requests),
#: ``writer`` queued until the writer thread has decided the group (and, for writes, fsynced
#: its log record), ``resume`` from the writer resolving the request until the event loop runs
#: it again (GIL and loop contention), ``respond`` encoding and sending the answer
STAGES: tuple[str, ...] = ("read", "parse", "prepare", "writer", "resume", "respond")

_NAME_RE = re.compile(r"[^a-zA-Z0-9_]")


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _fmt(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def process_rss_bytes() -> int:
    """Resident set size of this process in bytes (0 where it cannot be read)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    except (ImportError, OSError):  # pragma: no cover - non-POSIX
        return 0


class Metrics:
    """Thread-safe counters and histograms for the service.

    Parameters
    ----------
    buckets : tuple of float, default=DEFAULT_BUCKETS
        Upper bounds (seconds) of the request-latency histogram.
    """

    def __init__(self, buckets: tuple[float, ...] = DEFAULT_BUCKETS) -> None:
        self.buckets = tuple(sorted(buckets))
        self.started = time.time()
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, str, int], int] = {}
        # route -> [bucket counts..., +Inf count], sum
        self._hist: dict[str, list[float]] = {}
        self._docs: dict[tuple[str, str, str], int] = {}
        # stage -> [bucket counts..., +Inf count, sum]; observed on the event loop only
        self._stages: dict[str, list[float]] = {
            name: [0.0] * (len(STAGE_BUCKETS) + 2) for name in (*STAGES, "loop_lag")
        }

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one finished request and record its latency."""
        with self._lock:
            key = (route, method, status)
            self._requests[key] = self._requests.get(key, 0) + 1
            h = self._hist.get(route)
            if h is None:
                h = self._hist[route] = [0.0] * (len(self.buckets) + 2)
            h[bisect.bisect_left(self.buckets, seconds)] += 1
            h[-1] += seconds

    def observe_stages(self, durations: tuple[float, ...]) -> None:
        """Record one document request's time per stage (seconds, in the order of STAGES)."""
        buckets = STAGE_BUCKETS
        with self._lock:
            for name, seconds in zip(STAGES, durations, strict=True):
                h = self._stages[name]
                h[bisect.bisect_left(buckets, seconds)] += 1
                h[-1] += seconds

    def observe_loop_lag(self, seconds: float) -> None:
        """Record how late the event loop ran a timer."""
        with self._lock:
            h = self._stages["loop_lag"]
            h[bisect.bisect_left(STAGE_BUCKETS, seconds)] += 1
            h[-1] += seconds

    def stage_summary(self) -> dict[str, dict[str, float]]:
        """Per stage: count, mean and approximate p50 / p99 (bucket upper bounds), seconds."""
        with self._lock:
            stages = {k: list(v) for k, v in self._stages.items()}
        out: dict[str, dict[str, float]] = {}
        for name, h in stages.items():
            counts = h[:-1]
            n = sum(counts)
            row = {"count": n, "mean": h[-1] / n if n else 0.0}
            for q in (0.5, 0.99):
                cum, bound = 0.0, float("inf")
                for b, c in zip((*STAGE_BUCKETS, float("inf")), counts, strict=True):
                    cum += c
                    if n and cum >= q * n:
                        bound = b
                        break
                row[f"p{int(q * 100)}"] = bound if n else 0.0
            out[name] = row
        return out

    def count_documents(self, namespace: str, op: str, decisions: list[Any]) -> None:
        """Count the documents of one call by outcome (``seen``, ``duplicate``, ``added``)."""
        dup = sum(1 for d in decisions if d.duplicate)
        added = sum(1 for d in decisions if d.added)
        with self._lock:
            for outcome, n in (("seen", len(decisions)), ("duplicate", dup), ("added", added)):
                key = (namespace, op, outcome)
                self._docs[key] = self._docs.get(key, 0) + n

    def requests_total(self) -> int:
        """Total number of requests observed (for tests and health output)."""
        with self._lock:
            return sum(self._requests.values())

    def render(self, namespace_stats: Mapping[str, Mapping[str, Any]] | None = None) -> str:
        """The Prometheus text exposition of every series."""
        out: list[str] = []
        with self._lock:
            requests = sorted(self._requests.items())
            hist = sorted((k, list(v)) for k, v in self._hist.items())
            docs = sorted(self._docs.items())
        out.append("# HELP neardup_http_requests_total HTTP requests by route, method and status.")
        out.append("# TYPE neardup_http_requests_total counter")
        for (route, method, status), n in requests:
            out.append(
                f'neardup_http_requests_total{{route="{_label(route)}",method="{method}",'
                f'status="{status}"}} {n}'
            )
        out.append("# HELP neardup_http_request_duration_seconds HTTP request latency by route.")
        out.append("# TYPE neardup_http_request_duration_seconds histogram")
        for route, h in hist:
            r = _label(route)
            cum = 0.0
            for bound, n in zip((*self.buckets, float("inf")), h[:-1], strict=True):
                cum += n
                out.append(
                    f'neardup_http_request_duration_seconds_bucket{{route="{r}",le="{_fmt(bound)}"}} {_fmt(cum)}'
                )
            out.append(f'neardup_http_request_duration_seconds_sum{{route="{r}"}} {h[-1]!r}')
            out.append(f'neardup_http_request_duration_seconds_count{{route="{r}"}} {_fmt(cum)}')
        with self._lock:
            stages = {k: list(v) for k, v in self._stages.items()}
        out.append(
            "# HELP neardup_request_stage_seconds Time per stage of a document request "
            "(read, parse, prepare, writer, resume, respond)."
        )
        out.append("# TYPE neardup_request_stage_seconds histogram")
        for name in STAGES:
            out.extend(
                _histogram_lines("neardup_request_stage_seconds", f'stage="{name}"', stages[name])
            )
        out.append(
            "# HELP neardup_event_loop_lag_seconds How late the event loop ran a periodic timer."
        )
        out.append("# TYPE neardup_event_loop_lag_seconds histogram")
        out.extend(_histogram_lines("neardup_event_loop_lag_seconds", "", stages["loop_lag"]))
        out.append(
            "# HELP neardup_documents_total Documents processed by namespace, operation and outcome."
        )
        out.append("# TYPE neardup_documents_total counter")
        for (ns, op, outcome), n in docs:
            out.append(
                f'neardup_documents_total{{namespace="{_label(ns)}",op="{op}",outcome="{outcome}"}} {n}'
            )
        gauges: dict[str, list[str]] = {}
        for ns, stats in sorted((namespace_stats or {}).items()):
            for key, value in stats.items():
                if isinstance(value, bool) or not isinstance(value, int | float):
                    continue
                name = "neardup_store_" + _NAME_RE.sub("_", str(key))
                gauges.setdefault(name, []).append(
                    f'{name}{{namespace="{_label(ns)}"}} {_fmt(value)}'
                )
        for name, lines in sorted(gauges.items()):
            out.append(
                f"# HELP {name} Store statistic '{name[len('neardup_store_') :]}' per namespace."
            )
            out.append(f"# TYPE {name} gauge")
            out.extend(lines)
        out.append("# HELP neardup_uptime_seconds Seconds since the service started.")
        out.append("# TYPE neardup_uptime_seconds gauge")
        out.append(f"neardup_uptime_seconds {time.time() - self.started:.3f}")
        out.append("# HELP neardup_process_resident_memory_bytes Resident memory of the server.")
        out.append("# TYPE neardup_process_resident_memory_bytes gauge")
        out.append(f"neardup_process_resident_memory_bytes {process_rss_bytes()}")
        return "\n".join(out) + "\n"


def _histogram_lines(name: str, labels: str, h: list[float]) -> list[str]:
    """Prometheus lines of one STAGE_BUCKETS histogram ``[counts..., +Inf count, sum]``."""
    sep = "," if labels else ""
    out = []
    cum = 0.0
    for bound, n in zip((*STAGE_BUCKETS, float("inf")), h[:-1], strict=True):
        cum += n
        out.append(f'{name}_bucket{{{labels}{sep}le="{_fmt(bound)}"}} {_fmt(cum)}')
    tail = f"{{{labels}}}" if labels else ""
    out.append(f"{name}_sum{tail} {h[-1]!r}")
    out.append(f"{name}_count{tail} {_fmt(cum)}")
    return out


async def monitor_loop_lag(metrics: Metrics, interval: float = 0.02) -> None:
    """Run until cancelled: sleep ``interval`` seconds and record how late the loop woke up.

    A lag well above the loop's timer resolution (~1 ms) means the event loop was busy or
    waiting for the GIL while requests were ready.
    """
    import asyncio

    perf = time.perf_counter
    while True:
        t = perf()
        await asyncio.sleep(interval)
        metrics.observe_loop_lag(max(0.0, perf() - t - interval))


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class MetricsMiddleware:
    """ASGI middleware that records every HTTP request in a :class:`Metrics`.

    The route label is the matched route's template (``/v1/ns/{namespace}/check``), so label
    cardinality stays bounded; unmatched paths are counted as ``unmatched``.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            self.metrics.observe_request(
                path, scope.get("method", "?"), status, time.perf_counter() - start
            )
