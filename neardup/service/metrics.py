"""Prometheus metrics on :mod:`prometheus_client`, one :class:`~prometheus_client.CollectorRegistry`
per application (two apps in one process never share or clash).

:class:`Metrics` holds the service's own counters and histograms; :class:`MetricsMiddleware`
feeds it from every HTTP request; :meth:`Metrics.render` is the text served at ``GET /metrics``.
Store statistics are read at scrape time by a custom collector from each namespace's
:meth:`Deduplicator.stats` (cumulative ones as counters, the rest as gauges); process metrics
(``process_resident_memory_bytes``, ``process_open_fds``, CPU seconds, ...) come from
prometheus_client's process and platform collectors.

Series (the reference list is in docs/service.md)::

    neardup_http_requests_total{route, method, status}              counter
    neardup_http_request_duration_seconds{route}                     histogram
    neardup_documents_total{namespace, op, outcome}                  counter (seen, duplicate, added)
    neardup_request_stage_seconds{stage}                             histogram (see STAGES)
    neardup_event_loop_lag_seconds                                   histogram
    neardup_rate_limited_total{route}                                counter (429 answers)
    neardup_connections_rejected_total                               counter (503: --max-connections)
    neardup_connections_timed_out_total{phase}                       counter (head, body)
    neardup_connections_open                                         gauge
    neardup_store_<counter>_total{namespace}                         counter per cumulative stat
    neardup_store_<stat>{namespace}                                  gauge per other numeric stat
    neardup_uptime_seconds                                           gauge
    process_*, python_info                                           prometheus_client's collectors
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .._memory import process_rss_bytes

__all__ = [
    "CONTENT_TYPE",
    "DEFAULT_BUCKETS",
    "STAGES",
    "STAGE_BUCKETS",
    "STORE_COUNTERS",
    "Metrics",
    "MetricsMiddleware",
    "monitor_loop_lag",
    "process_rss_bytes",
]

#: the exposition format served at /metrics
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

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

#: store statistics that only grow while a store is open: exported as counters
#: (``neardup_store_<name>_total``); every other numeric statistic is a gauge
STORE_COUNTERS: frozenset[str] = frozenset(
    {
        "checks",
        "adds",
        "duplicates",
        "groups",
        "group_docs",
        "storage_errors",
        "inline_groups",
        "wal_syncs",
        "wal_sync_seconds",
        "wal_slow_syncs",
        "wal_truncated_bytes",
        "meta_transactions",
        "replayed_records",
        "flushes",
        "dropped_partitions",
        "compactions",
        "sketch_checked_rows",
        "sketch_passed_rows",
        "length_rejected_hits",
        "mask_rejected_hits",
        "mask_rejected_rows",
        "histogram_rejected_hits",
        "summaries_used_rows",
        "summaries_set_aside_rows",
        "meta_serial_reads",
        "meta_parallel_reads",
    }
)
#: statistics not exported per namespace: process-wide (the process collector has them)
_STORE_SKIP = frozenset({"rss_mib"})


def _metric_name(key: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in key)


class _StoreCollector(Collector):
    """Reads every namespace's statistics at scrape time (one series per namespace)."""

    def __init__(self, source: Callable[[], Mapping[str, Mapping[str, Any]]] | None) -> None:
        self.source = source
        self.started = time.time()

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("neardup_uptime_seconds", "Seconds since the service started.")
        up.add_metric([], time.time() - self.started)
        yield up
        stats = self.source() if self.source is not None else {}
        families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {}
        for ns, values in sorted(stats.items()):
            for key, value in values.items():
                if (
                    key in _STORE_SKIP
                    or isinstance(value, bool)
                    or not isinstance(value, int | float)
                ):
                    continue
                name = "neardup_store_" + _metric_name(str(key))
                fam: CounterMetricFamily | GaugeMetricFamily | None = families.get(name)
                if fam is None:
                    if key in STORE_COUNTERS:
                        fam = CounterMetricFamily(
                            name, f"Store counter '{key}' per namespace.", labels=["namespace"]
                        )
                    else:
                        fam = GaugeMetricFamily(
                            name, f"Store statistic '{key}' per namespace.", labels=["namespace"]
                        )
                    families[name] = fam
                fam.add_metric([ns], float(value))
        yield from (families[k] for k in sorted(families))


class Metrics:
    """The service's metrics in one :class:`~prometheus_client.CollectorRegistry`.

    Parameters
    ----------
    buckets : tuple of float, default=DEFAULT_BUCKETS
        Upper bounds (seconds) of the request-latency histogram.
    process : bool, default=True
        Register prometheus_client's process and platform collectors (``process_*``,
        ``python_info``).
    """

    def __init__(self, buckets: tuple[float, ...] = DEFAULT_BUCKETS, *, process: bool = True):
        self.buckets = tuple(sorted(buckets))
        self.started = time.time()
        self.registry = CollectorRegistry(auto_describe=False)
        self._store = _StoreCollector(None)
        self._store.started = self.started
        self.registry.register(self._store)
        if process:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
        r = self.registry
        self.requests = Counter(
            "neardup_http_requests",
            "HTTP requests by route, method and status.",
            ["route", "method", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "neardup_http_request_duration_seconds",
            "HTTP request latency by route.",
            ["route"],
            buckets=self.buckets,
            registry=r,
        )
        self.documents = Counter(
            "neardup_documents",
            "Documents processed by namespace, operation and outcome.",
            ["namespace", "op", "outcome"],
            registry=r,
        )
        self.stages = Histogram(
            "neardup_request_stage_seconds",
            "Time per stage of a document request (read, parse, prepare, writer, resume, respond).",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.loop_lag = Histogram(
            "neardup_event_loop_lag_seconds",
            "How late the event loop ran a periodic timer.",
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.rate_limited = Counter(
            "neardup_rate_limited",
            "Requests answered 429 by the per-client limit on unauthenticated requests.",
            ["route"],
            registry=r,
        )
        self.connections_rejected = Counter(
            "neardup_connections_rejected",
            "Connections answered 503 and closed because --max-connections were open.",
            registry=r,
        )
        self.connections_timed_out = Counter(
            "neardup_connections_timed_out",
            "Connections closed because a request head or body did not arrive in time.",
            ["phase"],
            registry=r,
        )
        self.connections_open = 0
        self._open_lock = threading.Lock()
        Gauge("neardup_connections_open", "Open HTTP connections.", registry=r).set_function(
            lambda: self.connections_open
        )
        # the children of the fixed label sets, bound once (labels() costs a lock and a lookup)
        self._stage_children = [self.stages.labels(s) for s in STAGES]
        self._request_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}
        # (namespace, op) -> the seen, duplicate and added counters (``labels`` takes a lock
        # and checks its values on every call: three of them a request)
        self._document_children: dict[tuple[str, str], tuple[Any, Any, Any]] = {}

    # -- recording -----------------------------------------------------------------------------
    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one finished request and record its latency."""
        key = (route, method, status)
        pair = self._request_children.get(key)
        if pair is None:
            pair = (self.requests.labels(route, method, str(status)), self.latency.labels(route))
            self._request_children[key] = pair
        pair[0].inc()
        pair[1].observe(seconds)

    def observe_stages(self, durations: tuple[float, ...]) -> None:
        """Record one document request's time per stage (seconds, in the order of STAGES)."""
        for child, seconds in zip(self._stage_children, durations, strict=True):
            child.observe(seconds)

    def observe_loop_lag(self, seconds: float) -> None:
        """Record how late the event loop ran a timer."""
        self.loop_lag.observe(seconds)

    def count_documents(self, namespace: str, op: str, decisions: list[Any]) -> None:
        """Count the documents of one call by outcome (``seen``, ``duplicate``, ``added``)."""
        dup = sum(1 for d in decisions if d.duplicate)
        added = sum(1 for d in decisions if d.added)
        key = (namespace, op)
        children = self._document_children.get(key)
        if children is None:
            labels = self.documents.labels
            children = (
                labels(namespace, op, "seen"),
                labels(namespace, op, "duplicate"),
                labels(namespace, op, "added"),
            )
            self._document_children[key] = children
        seen_c, dup_c, added_c = children
        seen_c.inc(len(decisions))
        dup_c.inc(dup)
        added_c.inc(added)

    def connection_opened(self) -> None:
        with self._open_lock:
            self.connections_open += 1

    def connection_closed(self) -> None:
        with self._open_lock:
            self.connections_open -= 1

    # -- reading -------------------------------------------------------------------------------
    def _value(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        got = self.registry.get_sample_value(name, dict(labels or {}))
        return 0.0 if got is None else float(got)

    def requests_total(self) -> int:
        """Total number of requests observed (for tests and health output)."""
        total = 0.0
        for metric in self.requests.collect():
            total += sum(s.value for s in metric.samples if s.name.endswith("_total"))
        return int(total)

    def stage_summary(self) -> dict[str, dict[str, float]]:
        """Per stage and the loop lag: count, mean and approximate p50 / p99 (bucket upper
        bounds), seconds."""
        out: dict[str, dict[str, float]] = {}
        rows: dict[str, list[tuple[float, float]]] = {}
        sums: dict[str, float] = {}
        for hist in (self.stages, self.loop_lag):
            for metric in hist.collect():
                for s in metric.samples:
                    name = s.labels.get("stage", "loop_lag")
                    if s.name.endswith("_bucket"):
                        rows.setdefault(name, []).append((float(s.labels["le"]), s.value))
                    elif s.name.endswith("_sum"):
                        sums[name] = s.value
        for name in (*STAGES, "loop_lag"):
            cum = sorted(rows.get(name, []))
            n = cum[-1][1] if cum else 0.0
            row = {"count": n, "mean": sums.get(name, 0.0) / n if n else 0.0}
            for q in (0.5, 0.99):
                bound = 0.0
                if n:
                    bound = next((b for b, c in cum if c >= q * n), float("inf"))
                row[f"p{int(q * 100)}"] = bound
            out[name] = row
        return out

    def render(self, namespace_stats: Mapping[str, Mapping[str, Any]] | None = None) -> str:
        """The Prometheus text exposition of every series (store statistics from
        ``namespace_stats``, read by the store collector during this call)."""
        self._store.source = lambda: namespace_stats or {}
        try:
            return generate_latest(self.registry).decode("utf-8")
        finally:
            self._store.source = None


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
