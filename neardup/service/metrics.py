"""Prometheus metrics in the text exposition format (version 0.0.4), with no extra dependency.

:class:`Metrics` holds counters and one latency histogram per route; :class:`MetricsMiddleware`
feeds it from every HTTP request; :meth:`Metrics.render` writes the text served at
``GET /metrics``, adding gauges from each namespace's :meth:`Deduplicator.stats`.

Series::

    neardup_http_requests_total{route, method, status}            counter
    neardup_http_request_duration_seconds{route}                   histogram
    neardup_documents_total{namespace, op, outcome}                counter (outcome: seen, duplicate, added)
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

__all__ = ["DEFAULT_BUCKETS", "Metrics", "MetricsMiddleware", "process_rss_bytes"]

#: latency histogram bucket upper bounds, in seconds
DEFAULT_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip

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
