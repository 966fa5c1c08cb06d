"""The nodes of a cluster as one shared resource: connections, a thread pool, a circuit breaker
per node, hints, the version clock and the membership (docs/cluster.md).

One :class:`NodePool` serves every namespace of a process (a router holds one; a
:class:`~neardup.cluster.ClusterClient` makes its own unless given one): one HTTP connection
pool (httpx) for all nodes, one bounded thread pool for the fan-out, one prober thread.

**Circuit breaker**, per node: ``closed`` (used) -> ``suspect`` (a request has waited longer
than ``slow_after`` with no answer: new requests skip it, writes meant for it become hints)
-> ``open`` (a request failed: 5xx, refused, timed out; probed again with ``GET /healthz``
after a back-off that doubles up to ``max_backoff``) -> ``recovering`` (it answered: it pulls
its peers' tombstones, its hints are replayed) -> ``closed``. A suspect node that answers goes
to ``recovering`` when hints were kept for it, else back to ``closed``. No lock is held while
a request waits for a node.

**Hints**: every write a node should have received but did not (it was skipped, or its
request failed) is kept for it, per namespace, in order, and replayed when it is back. The
writes carry versions and the nodes keep tombstones, so a late replay never undoes a newer
write. Hints are bounded by bytes (``hint_bytes``); past it a node's put hints are dropped
(their documents are on other nodes: ``neardup cluster rebalance`` restores placement) and its
delete hints kept (the node also pulls every peer's tombstones when it returns).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..errors import ConfigError, InputError, NeardupError, ServiceUnavailableError
from ..service.replication import LeaseHeldError, StaleEpochError
from .config import ClusterConfig
from .ring import HashRing

__all__ = ["NodeAnswerError", "NodeDown", "NodePool", "covered", "error_from", "namespace_path"]

log = logging.getLogger("neardup.cluster")

#: default size of the shared thread pool (fan-out requests in flight at once)
DEFAULT_WORKERS = 32
#: hinted operations replayed per request
REPLAY_BATCH = 500


class NodeDown(Exception):
    """A node did not answer (refused, timed out, 5xx) or is skipped by its breaker."""

    def __init__(self, node: str, reason: str) -> None:
        super().__init__(f"{node}: {reason}")
        self.node = node
        self.reason = reason


class NodeAnswerError(Exception):
    """A node answered a 4xx: the request's fault (or a protocol refusal), not the node's."""

    def __init__(self, node: str, status: int, error: NeardupError, body: Any) -> None:
        super().__init__(f"{node}: HTTP {status}: {error}")
        self.node = node
        self.status = status
        self.error = error
        self.body = body


@dataclass
class _Node:
    name: str
    url: str
    state: str = "closed"  # closed | suspect | open | recovering
    open_until: float = 0.0
    backoff: float = 0.0
    reason: str = ""
    failures: int = 0
    hints: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    hint_bytes: int = 0
    dropped_hints: int = 0
    latency: float = 0.0  # moving average of its answers' seconds


def _op_bytes(op: Mapping[str, Any]) -> int:
    doc = op.get("doc")
    if doc is None:
        return 64 + len(op.get("id", ""))
    return 128 + len(doc.get("id", "")) + len(doc.get("text", ""))


class NodePool:
    """Shared access to the nodes of one cluster (see the module docstring).

    Parameters
    ----------
    config : ClusterConfig or path
        The cluster (a path is reloaded when a node reports a newer epoch).
    token : str, optional
        The nodes' write token.
    timeout : float, default=5.0
        Seconds a request to one node may take before it has failed.
    slow_after : float, default=0.25
        Seconds after which a node that has not answered is *suspect*: writes meant for it go
        to the next node (hedged) with a hint kept for it, checks stop waiting for it once the
        other answers cover every range. Grows by 2 ms per document of a request.
    down_seconds : float, default=0.5
        First back-off of an open breaker before the node is probed again (then doubled).
    max_backoff : float, default=5.0
        Longest back-off between probes.
    hint_bytes : int, default=64 MiB
        Hint memory per node (see the module docstring).
    workers : int, default=32
        Threads of the shared fan-out pool.
    writer_id : str, optional
        This writer's id in the nodes' namespace leases (default: host, process id and a
        random part). A router passes a stable one (its host and port), so that after a
        restart it takes its own leases back at once instead of waiting for them to expire.
    transport : httpx transport, optional
        For tests.
    """

    def __init__(
        self,
        config: ClusterConfig | str | os.PathLike[str],
        *,
        token: str | None = None,
        timeout: float = 5.0,
        slow_after: float = 0.25,
        down_seconds: float = 0.5,
        max_backoff: float = 5.0,
        hint_bytes: int = 64 * 1024 * 1024,
        workers: int = DEFAULT_WORKERS,
        probe_interval: float = 0.2,
        writer_id: str | None = None,
        transport: Any = None,
    ) -> None:
        import httpx

        self.path = None if isinstance(config, ClusterConfig) else Path(config)
        self.config = config if isinstance(config, ClusterConfig) else ClusterConfig.load(config)
        self.ring = self.config.ring()
        self.token = token
        self.timeout = float(timeout)
        self.slow_after = float(slow_after)
        self.down_seconds = float(down_seconds)
        self.max_backoff = float(max_backoff)
        self.hint_limit = int(hint_bytes)
        self.probe_interval = float(probe_interval)
        #: this writer's id in the nodes' leases: host, process and a random part
        self.writer_id = writer_id or f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"
        headers = {b"Accept": b"application/json"}
        if token is not None:
            headers[b"Authorization"] = f"Bearer {token}".encode()
        self.http = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(self.timeout, connect=min(1.0, self.timeout)),
            limits=httpx.Limits(max_connections=4 * workers, max_keepalive_connections=2 * workers),
            transport=transport,
        )
        self._httpx = httpx
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="neardup-node")
        self._lock = threading.Lock()  # node states, hints, membership
        self._nodes = {n.name: _Node(n.name, n.url) for n in self.config.nodes}
        self._version = 0
        self._version_lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._joined: set[str] = set()
        self._prober = threading.Thread(target=self._probe_loop, name="neardup-prober", daemon=True)
        self._prober.start()

    # -- membership and epochs --------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return self.config.names

    def url(self, node: str) -> str:
        return self._nodes[node].url

    def snapshot(self) -> tuple[ClusterConfig, HashRing]:
        with self._lock:
            return self.config, self.ring

    def reload(self, node_epoch: int) -> None:
        """A node is at ``node_epoch``, newer than ours: read the cluster file again."""
        if self.path is None:
            raise ConfigError(
                f"a node is at cluster epoch {node_epoch} but this client's cluster config is at "
                f"{self.config.epoch}; the membership changed: build the client from the new "
                "cluster file"
            )
        fresh = ClusterConfig.load(self.path)
        if fresh.epoch < node_epoch:
            raise ConfigError(
                f"a node is at cluster epoch {node_epoch} but {self.path} is at {fresh.epoch}: "
                "use the cluster file `neardup cluster add-node/remove-node` wrote"
            )
        self.set_config(fresh)

    def set_config(self, fresh: ClusterConfig) -> None:
        with self._lock:
            if fresh.epoch < self.config.epoch:
                return
            old = self._nodes
            self._nodes = {
                n.name: old[n.name]
                if n.name in old and old[n.name].url == n.url
                else _Node(n.name, n.url)
                for n in fresh.nodes
            }
            self.config = fresh
            self.ring = fresh.ring()
            self._joined.clear()
        log.warning(
            "cluster file reloaded: epoch %d, nodes %s", fresh.epoch, ", ".join(fresh.names)
        )

    def membership(self, node: str, config: ClusterConfig | None = None) -> dict[str, Any]:
        config = config or self.config
        return {
            "epoch": config.epoch,
            "self": node,
            "replicas": config.replicas,
            "nodes": [{"name": n.name, "url": n.url} for n in config.nodes],
        }

    def join(self, node: str, *, breaker: bool = False) -> None:
        """Push the membership and epoch to ``node`` (``PUT /v1/cluster``)."""
        try:
            self.request(
                node, "PUT", "/v1/cluster", self.membership(node), breaker=breaker,
                timeout=min(2.0, self.timeout),
            )  # fmt: skip
        except NodeAnswerError as exc:
            if isinstance(exc.error, StaleEpochError) and exc.error.node_epoch > self.config.epoch:
                self.reload(exc.error.node_epoch)
                return
            raise
        with self._lock:
            self._joined.add(node)

    def join_all(self) -> None:
        """Push the membership to every node that answers (the others get it when they are
        back: the prober joins a node before it is used again)."""
        futures = {n: self.executor.submit(self.join, n, breaker=True) for n in self.names}
        for n, f in futures.items():
            try:
                f.result()
            except (NodeDown, NodeAnswerError) as exc:
                log.warning("could not tell node %s the membership: %s", n, exc)

    # -- versions -----------------------------------------------------------------------------------
    def next_version(self) -> int:
        """A version for one write: nanoseconds, strictly increasing in this process, and above
        every version a node reported (a writer that takes over a namespace continues from the
        last one)."""
        with self._version_lock:
            v = max(time.time_ns(), self._version + 1)
            self._version = v
            return v

    def observe_version(self, v: int) -> None:
        with self._version_lock:
            self._version = max(self._version, int(v))

    # -- breaker --------------------------------------------------------------------------------------
    def state(self, node: str) -> str:
        n = self._nodes.get(node)
        return "open" if n is None else n.state

    def usable(self, node: str) -> bool:
        n = self._nodes.get(node)
        return n is not None and n.state == "closed"

    def usable_nodes(self) -> list[str]:
        return [n for n in self.names if self.usable(n)]

    def reachable_nodes(self) -> list[str]:
        """Nodes not known to be down (closed, suspect or recovering): the last resort when
        the usable ones are not enough."""
        return [n for n in self.names if self.state(n) != "open"]

    def reason(self, node: str) -> str:
        n = self._nodes.get(node)
        return "" if n is None else n.reason

    def _failed(self, node: str, reason: str) -> None:
        with self._lock:
            n = self._nodes.get(node)
            if n is None:
                return
            first = n.state in ("closed", "suspect", "recovering")
            n.backoff = (
                self.down_seconds if first else min(self.max_backoff, max(n.backoff, 0.1) * 2)
            )
            n.state = "open"
            n.open_until = time.monotonic() + n.backoff
            n.reason = reason
            n.failures += 1
        if first:
            log.warning(
                "node %s marked down, routing around it (probed again in %.1f s): %s",
                node,
                n.backoff,
                reason,
            )

    def _answered(self, node: str, seconds: float) -> None:
        n = self._nodes.get(node)
        if n is None:
            return
        n.latency = seconds if not n.latency else 0.8 * n.latency + 0.2 * seconds
        if n.state == "suspect":
            with self._lock:
                if n.state == "suspect":
                    if any(n.hints.values()):
                        n.state = "recovering"
                        log.warning("node %s answered again: replaying its hints", node)
                    else:
                        n.state = "closed"
                        n.reason = ""
                        log.warning("node %s answered again: routing to it", node)
            self._wake.set()

    def suspect(self, node: str, reason: str) -> None:
        """``node`` has not answered for a while: skip it (hints kept) until it does."""
        with self._lock:
            n = self._nodes.get(node)
            if n is None or n.state != "closed":
                return
            n.state = "suspect"
            n.reason = reason
        log.warning("node %s is not answering (%s): routing around it", node, reason)

    def mark_down(self, node: str, reason: str) -> None:
        self._failed(node, reason)

    def slow_limit(self, node: str, n_docs: int = 0) -> float:
        """Seconds without an answer after which ``node`` is suspect, for a request of
        ``n_docs`` documents: ``slow_after`` + 2 ms per document, or 5 times the node's
        recent answer time when that is more (a loaded node is slow, not gone), at most 4
        times ``slow_after``."""
        n = self._nodes.get(node)
        recent = min(5.0 * n.latency, 4 * self.slow_after) if n is not None else 0.0
        return max(self.slow_after + 0.002 * n_docs, recent)

    # -- requests -------------------------------------------------------------------------------------
    def request(
        self,
        node: str,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        breaker: bool = True,
    ) -> Any:
        """One request to ``node``: its JSON answer. Raises :class:`NodeDown` (and opens its
        breaker) when it does not answer or answers 5xx, :class:`NodeAnswerError` on a 4xx."""
        from ..service.schema import dumps

        n = self._nodes.get(node)
        if n is None:
            raise NodeDown(node, "not in the cluster any more")
        httpx = self._httpx
        t0 = time.monotonic()
        try:
            r = self.http.request(
                method,
                n.url.rstrip("/") + path,
                content=None if body is None else dumps(body),
                headers=None if body is None else {"Content-Type": "application/json"},
                params=params,
                timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
        except httpx.TimeoutException as exc:
            reason = f"no answer within {timeout or self.timeout:g} s ({type(exc).__name__})"
            if breaker:
                self._failed(node, reason)
            raise NodeDown(node, reason) from exc
        except httpx.HTTPError as exc:
            reason = f"unreachable ({type(exc).__name__}: {exc})"
            if breaker:
                self._failed(node, reason)
            raise NodeDown(node, reason) from exc
        try:
            data = r.json() if r.content else None
        except ValueError:
            data = None
        if r.status_code >= 500:
            err = error_from(r.status_code, data, f"HTTP {r.status_code}")
            reason = f"HTTP {r.status_code}: {err}"
            if breaker:
                self._failed(node, reason)
            raise NodeDown(node, reason)
        self._answered(node, time.monotonic() - t0)
        if r.status_code >= 400:
            err = error_from(r.status_code, data, f"{method} {path}: HTTP {r.status_code}")
            code = data.get("error", {}).get("code") if isinstance(data, dict) else None
            if code == StaleEpochError.code:
                err = StaleEpochError(str(err), int(data.get("node_epoch", 0)))  # type: ignore[union-attr]
            elif code == LeaseHeldError.code:
                err = LeaseHeldError(str(err))
            err.node = node  # type: ignore[attr-defined]  # (a node's refusal, not the caller's)
            raise NodeAnswerError(node, r.status_code, err, data)
        return data

    def submit(self, node: str, method: str, path: str, body: Any = None, **kw: Any) -> Future[Any]:
        return self.executor.submit(self.request, node, method, path, body, **kw)

    # -- hints -----------------------------------------------------------------------------------------
    def add_hints(self, node: str, namespace: str, ops: Sequence[dict[str, Any]]) -> None:
        """Keep ``ops`` (write operations) for ``node`` until it is back."""
        if not ops:
            return
        with self._lock:
            n = self._nodes.get(node)
            if n is None:
                return
            n.hints.setdefault(namespace, []).extend(ops)
            n.hint_bytes += sum(_op_bytes(o) for o in ops)
            if n.hint_bytes > self.hint_limit:
                dropped = 0
                for q in n.hints.values():
                    keep = [o for o in q if o["op"] != "put"]
                    dropped += len(q) - len(keep)
                    q[:] = keep
                n.hint_bytes = sum(_op_bytes(o) for q in n.hints.values() for o in q)
                n.dropped_hints += dropped
                log.warning(
                    "node %s: hints over %d bytes; %d put hints dropped (their documents are "
                    "on other nodes; run `neardup cluster rebalance` when it is back)",
                    node,
                    self.hint_limit,
                    dropped,
                )
        self._wake.set()

    def hinted_deletes(self, node: str, namespace: str) -> set[str]:
        """Ids ``node`` still has to delete (its hints): its answers may show them."""
        n = self._nodes.get(node)
        if n is None or not n.hints.get(namespace):
            return set()
        with self._lock:
            return {o["id"] for o in n.hints.get(namespace, ()) if o["op"] == "delete"}

    def hint_count(self, node: str | None = None) -> int:
        with self._lock:
            nodes = [self._nodes[node]] if node is not None else list(self._nodes.values())
            return sum(len(q) for n in nodes for q in n.hints.values())

    # -- the prober ------------------------------------------------------------------------------------
    def _probe_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.probe_interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            now = time.monotonic()
            for name in list(self.names):
                n = self._nodes.get(name)
                if n is None:
                    continue
                try:
                    if n.state == "open" and now >= n.open_until:
                        self._probe(name)
                    elif n.state == "recovering" or (n.state == "closed" and n.hints):
                        self._recover(name)
                except Exception:  # the prober must survive anything
                    log.exception("prober: node %s", name)

    def _probe(self, node: str) -> None:
        try:
            self.request(node, "GET", "/healthz", timeout=min(2.0, self.timeout), breaker=False)
        except (NodeDown, NodeAnswerError) as exc:
            self._failed(node, str(exc))
            return
        with self._lock:
            n = self._nodes[node]
            if n.state == "open":
                n.state = "recovering"
        self._recover(node)

    def _recover(self, node: str) -> None:
        """The node answers: tell it the membership, let it pull the tombstones it missed,
        replay its hints; then use it again."""
        try:
            if node not in self._joined:
                self.join(node)
            if self.state(node) == "recovering":
                self.request(node, "POST", "/v1/cluster/sync", {}, breaker=False)
            while True:
                with self._lock:
                    n = self._nodes[node]
                    ns = next((k for k, q in n.hints.items() if q), None)
                    if ns is None:
                        n.hints.clear()
                        n.hint_bytes = 0
                        if n.state in ("recovering", "closed"):
                            was = n.state
                            n.state = "closed"
                            n.reason = ""
                            n.backoff = 0.0
                            if was == "recovering":
                                log.warning("node %s is back: routing to it", node)
                        return
                    batch = n.hints[ns][:REPLAY_BATCH]
                body = {"epoch": self.config.epoch, "ops": batch}
                try:
                    self.request(
                        node, "POST", f"/v1/cluster/ns/{quote(ns, safe='')}/write", body,
                        breaker=False,
                    )  # fmt: skip
                except NodeAnswerError as exc:
                    if exc.status == 404:  # the namespace is gone there: nothing to replay
                        pass
                    elif isinstance(exc.error, StaleEpochError):
                        self._epoch_answer(node, exc.error)
                        return
                    else:
                        raise
                with self._lock:
                    q = n.hints.get(ns, [])
                    # the replayed ops are the queue's head (appends only add at the tail)
                    del q[: len(batch)]
                    n.hint_bytes = max(0, n.hint_bytes - sum(_op_bytes(o) for o in batch))
        except NodeDown as exc:
            self._failed(node, str(exc))
        except NodeAnswerError as exc:
            if isinstance(exc.error, StaleEpochError):
                self._epoch_answer(node, exc.error)
                return
            log.warning("node %s refused its hints (%s); they are kept", node, exc)
            self._failed(node, str(exc))

    def _epoch_answer(self, node: str, err: StaleEpochError) -> None:
        if err.node_epoch > self.config.epoch:
            try:
                self.reload(err.node_epoch)
            except ConfigError as exc:
                log.warning("%s", exc)
        else:
            with self._lock:
                self._joined.discard(node)

    # -- fan-out ------------------------------------------------------------------------------------
    def fan_out(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        enough: Callable[[Collection[str]], bool],
        n_docs: int = 0,
        spares: bool = True,
    ) -> tuple[dict[str, Any], dict[str, BaseException]]:
        """One request to many nodes, the way every cluster read and the lease ask: the usable
        nodes (every reachable one when the usable ones could not be ``enough``: nodes slow
        but not known down are the last resort), gathered by :meth:`gather` until
        ``enough(answering nodes)``; with ``spares``, the reachable nodes not asked first are
        asked too when those asked hang (a paused node). Returns (answers, errors) per node."""
        ask = self.usable_nodes()
        if not enough(ask):
            ask = self.reachable_nodes()

        def call(n: str) -> Callable[[], Any]:
            return lambda: self.request(n, method, path, body)

        spare = {n: call(n) for n in self.reachable_nodes() if n not in ask} if spares else None
        return self.gather({n: call(n) for n in ask}, enough=enough, n_docs=n_docs, spare=spare)

    def gather(
        self,
        calls: Mapping[str, Callable[[], Any]],
        *,
        enough: Callable[[Collection[str]], bool],
        n_docs: int = 0,
        spare: Mapping[str, Callable[[], Any]] | None = None,
    ) -> tuple[dict[str, Any], dict[str, BaseException]]:
        """Run ``calls`` (node -> fn) in parallel; wait until all are done, or until
        ``enough(answers)`` holds and each of the rest has gone past its node's
        :meth:`slow_limit` (those nodes become suspect; their requests finish in the
        background). When every call still pending is past its limit and the answers are not
        enough, the ``spare`` calls (other nodes, e.g. suspect ones that may still answer) are
        started too, so a hung node is not waited for while another could answer. Returns
        (answers, errors) of the calls that finished."""
        from concurrent.futures import FIRST_COMPLETED, wait

        start = time.monotonic()
        futures = {self.executor.submit(fn): n for n, fn in calls.items()}
        limit = {f: start + self.slow_limit(n, n_docs) for f, n in futures.items()}
        answers: dict[str, Any] = {}
        errors: dict[str, BaseException] = {}
        pending = set(futures)
        spares = {n: fn for n, fn in (spare or {}).items() if n not in calls}
        while pending:
            now = time.monotonic()
            ahead = [limit[f] - now for f in pending if limit[f] > now]
            timeout = min(ahead) if ahead else 0.05
            done, pending = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
            for f in done:
                node = futures[f]
                exc = f.exception()
                if exc is None:
                    answers[node] = f.result()
                else:
                    errors[node] = exc
            now = time.monotonic()
            late = bool(pending) and all(limit[f] <= now for f in pending)
            if late and enough(answers):
                for f in pending:
                    self.suspect(futures[f], f"no answer within {limit[f] - start:.2f} s")
                break
            if late and spares:  # not enough, and the nodes asked are late: ask the others
                for n, fn in spares.items():
                    f = self.executor.submit(fn)
                    futures[f] = n
                    limit[f] = now + self.slow_limit(n, n_docs)
                    pending.add(f)
                spares = {}
        return answers, errors

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._prober.join(5.0)
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.http.close()


def namespace_path(namespace: str, what: str) -> str:
    """The path of a namespace's cluster route, e.g. ``/v1/cluster/ns/default/write``."""
    return f"/v1/cluster/ns/{quote(namespace, safe='')}/{what}"


def error_from(status: int, body: Any, fallback: str) -> NeardupError:
    """The :class:`NeardupError` a node's error answer stands for (its ``error.code``; by the
    status when the code is unknown), carrying the node's message and ``status_code``."""
    from ..service import http_errors  # noqa: F401  (registers the HTTP-only classes)

    code, message, fld = None, fallback, None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        code = body["error"].get("code")
        message = str(body["error"].get("message", fallback))
        fld = body["error"].get("field")
    classes: dict[str, type[NeardupError]] = {}
    stack: list[type[NeardupError]] = [NeardupError]
    while stack:
        cls = stack.pop()
        classes.setdefault(cls.code, cls)
        stack.extend(cls.__subclasses__())
    found = classes.get(code) if isinstance(code, str) else None
    if found is None:
        found = (
            ServiceUnavailableError
            if status in (502, 503, 504)
            else InputError
            if 400 <= status < 500
            else NeardupError
        )
    exc = found.__new__(found)
    Exception.__init__(exc, message)
    if fld is not None:
        exc.field = fld  # type: ignore[attr-defined]
    exc.status_code = status  # type: ignore[attr-defined]
    return exc


def covered(config: ClusterConfig, ring: HashRing, answered: Iterable[str]) -> bool:
    """Whether every ring range has one of its R replicas among ``answered``."""
    missing = set(config.names) - set(answered)
    if len(missing) < config.replicas:
        return True
    import numpy as np

    snap = ring.snapshot()
    table = snap._replica_table(config.replicas)
    down = np.array([n in missing for n in snap.nodes])
    return not bool(down[table].all(axis=1).any())
