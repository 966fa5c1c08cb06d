"""Several ``neardup serve`` nodes as one service: cluster file, client-side routing, rebalancing.

Design (docs/cluster.md, measured by ``benchmarks/bench_sharding.py``): documents are sharded
**by document id** on a :class:`neardup.HashRing`; each document is written to ``replicas`` (R)
distinct nodes, and a check fans out to every live node (each node holds a complete, exact
index of its own documents, so the union of their answers is the cluster's answer).

* **Writes** go to the first R *live* nodes of the document's preference list
  (``ring.nodes_for(id, len(ring))``): with a node down, its copy goes to the next node on the
  ring, so an acknowledged document always has R copies on nodes that were up (a later
  :func:`rebalance` moves it home). A write is acknowledged once ``min_copies`` (default R)
  copies are fsynced.
* **Checks** fan out to every live node; they complete while fewer than R nodes are down
  (every ring range still has a live replica); otherwise :class:`ServiceUnavailableError`.
* A node that errors (5xx, refused, timeout) is **marked down** for ``down_seconds`` and routed
  around; both decisions are logged on the ``neardup.cluster`` logger.
* ``check_and_insert`` is serialized per :class:`ClusterClient` (one lock, the "sequencer"):
  of near-duplicates sent through one client, exactly one is kept. Two *different* clients can
  each keep one of two near-duplicates sent at the same instant; route every writer of a
  namespace through one client (one process) when that matters (docs/cluster.md).

Rebalancing (:func:`rebalance`) lists every node's documents (``GET {p}/export``), copies each
document to the target nodes that lack it, and only then deletes it from nodes that are not
targets; a journal file records the old and new cluster and the progress, and every step is
idempotent, so an interrupted run is resumed by running it again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import (
    ConfigError,
    InputTypeError,
    NeardupError,
    NotFoundError,
    ServiceUnavailableError,
)
from ..service.export import export_page
from .ring import DEFAULT_VNODES, HashRing, key_hash

__all__ = [
    "ClusterClient",
    "ClusterConfig",
    "NodeSpec",
    "RebalanceReport",
    "check_index_settings",
    "export_page",
    "rebalance",
    "start_journal",
]

log = logging.getLogger("neardup.cluster")

#: index settings that must be equal on every node (a node that differs is refused)
INDEX_SETTINGS = ("bits", "max_distance", "search_radius")


# -- the cluster file ---------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeSpec:
    """One node: a unique ``name`` (its ring identity), its base ``url`` and its ``weight``."""

    name: str
    url: str
    weight: float = 1.0


@dataclass(frozen=True)
class ClusterConfig:
    """The cluster file: nodes, vnodes and the replication factor.

    TOML (or JSON with the same keys)::

        vnodes = 6144        # optional
        replicas = 2         # optional (R)
        [[nodes]]
        name = "n1"
        url = "http://10.0.0.1:8080"
        weight = 1.0         # optional
    """

    nodes: tuple[NodeSpec, ...]
    replicas: int = 2
    vnodes: int = DEFAULT_VNODES

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ConfigError("a cluster needs at least one node ([[nodes]] with name and url)")
        seen: set[str] = set()
        for n in self.nodes:
            if not isinstance(n.name, str) or not n.name:
                raise ConfigError(f"every node needs a non-empty name, got {n.name!r}")
            if n.name in seen:
                raise ConfigError(f"duplicate node name {n.name!r} in the cluster file")
            seen.add(n.name)
            parts = urlsplit(n.url) if isinstance(n.url, str) else None
            if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
                raise ConfigError(
                    f"node {n.name!r}: url must be http(s)://host:port, got {n.url!r}"
                )
        r = self.replicas
        if isinstance(r, bool) or not isinstance(r, int) or r < 1:
            raise ConfigError(f"replicas must be a positive integer, got {r!r}")
        if r > len(self.nodes):
            raise ConfigError(
                f"replicas = {r} but the cluster has only {len(self.nodes)} node(s); "
                "replicas must be on distinct nodes: lower replicas or add nodes"
            )
        self.ring()  # weights and vnodes checked by the ring

    def ring(self) -> HashRing:
        return HashRing(
            [n.name for n in self.nodes],
            vnodes=self.vnodes,
            weights={n.name: n.weight for n in self.nodes},
        )

    def node(self, name: str) -> NodeSpec:
        for n in self.nodes:
            if n.name == name:
                return n
        raise NotFoundError(f"node {name!r} is not in the cluster (nodes: {', '.join(self.names)})")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    def with_node(self, spec: NodeSpec) -> ClusterConfig:
        if spec.name in self.names:
            raise ConfigError(f"node {spec.name!r} is already in the cluster; pick another name")
        return ClusterConfig((*self.nodes, spec), self.replicas, self.vnodes)

    def without_node(self, name: str) -> ClusterConfig:
        self.node(name)
        rest = tuple(n for n in self.nodes if n.name != name)
        if len(rest) < self.replicas:
            raise ConfigError(
                f"removing {name!r} leaves {len(rest)} node(s), fewer than replicas = "
                f"{self.replicas}; add a node first or lower replicas"
            )
        return ClusterConfig(rest, self.replicas, self.vnodes)

    # file round trip
    def to_dict(self) -> dict[str, Any]:
        return {
            "vnodes": self.vnodes,
            "replicas": self.replicas,
            "nodes": [{"name": n.name, "url": n.url, "weight": n.weight} for n in self.nodes],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "cluster file") -> ClusterConfig:
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source}: expected a table/object at the top level")
        unknown = sorted(set(data) - {"vnodes", "replicas", "nodes"})
        if unknown:
            raise ConfigError(f"{source}: unknown key(s) {', '.join(unknown)}")
        raw = data.get("nodes")
        if not isinstance(raw, list):
            raise ConfigError(f"{source}: 'nodes' must be a list of {{name, url, weight}} tables")
        nodes = []
        for i, n in enumerate(raw):
            if not isinstance(n, Mapping) or "name" not in n or "url" not in n:
                raise ConfigError(f"{source}: nodes[{i}] needs 'name' and 'url'")
            extra = sorted(set(n) - {"name", "url", "weight"})
            if extra:
                raise ConfigError(f"{source}: nodes[{i}] has unknown key(s) {', '.join(extra)}")
            nodes.append(NodeSpec(n["name"], n["url"], n.get("weight", 1.0)))
        return cls(tuple(nodes), data.get("replicas", 2), data.get("vnodes", DEFAULT_VNODES))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ClusterConfig:
        p = Path(path)
        try:
            raw = p.read_bytes()
        except FileNotFoundError:
            raise ConfigError(
                f"cluster file {p} does not exist; write one (docs/cluster.md)"
            ) from None
        try:
            if p.suffix.lower() == ".json":
                data = json.loads(raw)
            else:
                data = tomllib.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cluster file {p} cannot be parsed: {exc}") from None
        return cls.from_dict(data, source=str(p))

    def dumps(self, fmt: str = "toml") -> str:
        if fmt == "json":
            return json.dumps(self.to_dict(), indent=2) + "\n"
        lines = [f"vnodes = {self.vnodes}", f"replicas = {self.replicas}", ""]
        for n in self.nodes:
            lines += [
                "[[nodes]]",
                f"name = {json.dumps(n.name)}",
                f"url = {json.dumps(n.url)}",
                f"weight = {float(n.weight)!r}",
                "",
            ]
        return "\n".join(lines)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write atomically (temp file, fsync, rename), TOML unless the name ends in .json."""
        p = Path(path)
        _atomic_write(p, self.dumps("json" if p.suffix.lower() == ".json" else "toml"))


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# -- routing -----------------------------------------------------------------------------------
class _NodeFailed(Exception):
    def __init__(self, node: str, exc: BaseException) -> None:
        super().__init__(f"{node}: {exc}")
        self.node = node
        self.exc = exc


def _is_node_failure(exc: BaseException) -> bool:
    """Errors that say the node (not the request) is at fault: 5xx, unreachable, timeouts."""
    if isinstance(exc, ServiceUnavailableError):
        return True
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and status >= 500:
        return True
    return not isinstance(exc, NeardupError)  # an unexpected client-side failure


@dataclass
class _Health:
    down_until: float = 0.0
    reason: str = ""
    failures: int = 0


class ClusterClient:
    """Routes documents to the nodes of a cluster (client-side routing, by document id).

    Parameters
    ----------
    config : ClusterConfig or path
        The cluster (a :class:`ClusterConfig` or a cluster file).
    token : str, optional
        Bearer token for writes (the same on every node).
    namespace : str, default="default"
    timeout : float, default=5.0
        Seconds per request to one node; a node that does not answer in time is marked down.
    down_seconds : float, default=5.0
        How long a failed node is routed around before it is tried again.
    min_copies : int, optional
        Copies that must be fsynced before a write is acknowledged (default R). Lower it to
        keep accepting writes with fewer than R nodes up (then a second failure can lose them).
    client_factory : callable, optional
        ``(url, **kwargs) -> Client`` (tests).
    """

    def __init__(
        self,
        config: ClusterConfig | str | os.PathLike[str],
        *,
        token: str | None = None,
        namespace: str = "default",
        timeout: float = 5.0,
        down_seconds: float = 5.0,
        min_copies: int | None = None,
        client_factory: Callable[..., Any] | None = None,
    ) -> None:
        from ..service.client import Client

        self.config = config if isinstance(config, ClusterConfig) else ClusterConfig.load(config)
        self.ring = self.config.ring()
        self.replicas = self.config.replicas
        self.namespace = namespace
        if min_copies is None:
            min_copies = self.replicas
        if (
            isinstance(min_copies, bool)
            or not isinstance(min_copies, int)
            or not (1 <= min_copies <= self.replicas)
        ):
            raise ConfigError(
                f"min_copies must be in 1..replicas ({self.replicas}), got {min_copies!r}"
            )
        self.min_copies = min_copies
        self.down_seconds = float(down_seconds)
        make = client_factory or Client
        self._clients = {
            n.name: make(n.url, token=token, namespace=namespace, timeout=timeout)
            for n in self.config.nodes
        }
        self._health = {n: _Health() for n in self.config.names}
        self._health_lock = threading.Lock()
        self._sequencer = threading.Lock()
        self._radius: int | None = None
        self._pool = ThreadPoolExecutor(
            max_workers=max(4, 2 * len(self._clients)), thread_name_prefix="neardup-cluster"
        )

    # -- node health ---------------------------------------------------------------------------
    def is_up(self, node: str) -> bool:
        return self._health[node].down_until <= time.monotonic()

    def live_nodes(self) -> list[str]:
        return [n for n in self.config.names if self.is_up(n)]

    def mark_down(self, node: str, reason: str) -> None:
        with self._health_lock:
            h = self._health[node]
            first = h.down_until <= time.monotonic()
            h.down_until = time.monotonic() + self.down_seconds
            h.reason = reason
            h.failures += 1
        if first:
            log.warning(
                "node %s marked down for %.1f s, routing around it: %s",
                node,
                self.down_seconds,
                reason,
            )

    def _mark_up(self, node: str) -> None:
        h = self._health[node]
        if h.failures and h.down_until <= time.monotonic() and h.reason:
            with self._health_lock:
                if h.reason:
                    log.warning("node %s answered again: routing to it", node)
                    h.reason = ""

    def _call(self, node: str, fn: Callable[[Any], Any]) -> Any:
        try:
            out = fn(self._clients[node])
        except Exception as exc:
            if _is_node_failure(exc):
                self.mark_down(node, f"{type(exc).__name__}: {exc}")
                raise _NodeFailed(node, exc) from exc
            raise
        self._mark_up(node)
        return out

    def _fan_out(self, nodes: Sequence[str], fn: Callable[[Any], Any]) -> dict[str, Any]:
        """``fn(client)`` on every node in parallel: {node: result}; failed nodes are left out."""
        return self._run_calls({n: fn for n in nodes})

    def _run_calls(self, calls: Mapping[str, Callable[[Any], Any]]) -> dict[str, Any]:
        futures = {n: self._pool.submit(self._call, n, fn) for n, fn in calls.items()}
        out: dict[str, Any] = {}
        for n, fut in futures.items():
            try:
                out[n] = fut.result()
            except _NodeFailed:
                continue
        return out

    def _check_coverage(self, answered: Iterable[str]) -> None:
        """Raise unless every ring range has a replica among the nodes that answered."""
        missing = set(self.config.names) - set(answered)
        if len(missing) < self.replicas:
            return
        snap = self.ring.snapshot()
        import numpy as np

        table = snap._replica_table(self.replicas)
        down = np.array([n in missing for n in snap.nodes])
        if down[table].all(axis=1).any():
            raise ServiceUnavailableError(
                f"{len(missing)} node(s) are down ({', '.join(sorted(missing))}) and some ring "
                f"ranges have all {self.replicas} replicas among them: a check could miss "
                "duplicates; bring a node back"
            )

    # -- documents -----------------------------------------------------------------------------
    def preference(self, doc_id: str) -> tuple[str, ...]:
        """Every node in the order a document's copies are placed (its R replicas first)."""
        return self.ring.nodes_for(doc_id, len(self.ring))

    def targets(self, doc_id: str) -> tuple[str, ...]:
        """The R nodes that hold ``doc_id`` when every node is up."""
        return self.ring.nodes_for(doc_id, self.replicas)

    @staticmethod
    def _as_list(docs: Any) -> tuple[list[dict[str, Any]], bool]:
        if isinstance(docs, Mapping):
            return [dict(docs)], False
        if isinstance(docs, (str, bytes)):
            raise InputTypeError("documents must be a mapping or a list of mappings")
        items = [dict(d) for d in docs]
        return items, True

    def _check_list(self, docs: list[dict[str, Any]]) -> list[Any]:
        from ..online.deduplicator import Decision, Match

        nodes = self.live_nodes()
        answers = self._fan_out(nodes, lambda c: c.check(docs, namespace=self.namespace))
        if not answers:
            raise ServiceUnavailableError(
                f"no node of the cluster answered ({', '.join(self.config.names)})"
            )
        self._check_coverage(answers)
        merged: list[Any] = []
        for i, d in enumerate(docs):
            best: dict[str, Match] = {}
            fp = 0
            for decisions in answers.values():
                dec = decisions[i]
                fp = dec.fingerprint
                for m in dec.matches:
                    if m.id not in best or m.distance < best[m.id].distance:
                        best[m.id] = m
            matches = tuple(sorted(best.values(), key=lambda m: (m.distance, m.id)))
            merged.append(
                Decision(id=d["id"], duplicate=bool(matches), added=False, matches=matches,
                         fingerprint=fp)
            )  # fmt: skip
        return merged

    def check(self, docs: Any) -> Any:
        """Decisions against every live node; nothing stored."""
        items, batch = self._as_list(docs)
        out = self._check_list(items)
        return out if batch else out[0]

    def _write(self, docs: list[dict[str, Any]]) -> set[str]:
        """Write each document to R live nodes of its preference list; return the ids that
        reached ``min_copies`` copies (the others raise)."""
        copies: dict[str, set[str]] = {d["id"]: set() for d in docs}
        by_id = {d["id"]: d for d in docs}
        pending = list(docs)
        ns = self.namespace
        # each round writes every unfinished document to its next live nodes; a node that
        # fails is marked down, so the next round picks the node after it (bounded by the
        # number of nodes)
        for _round in range(len(self.config.names)):
            plan: dict[str, list[dict[str, Any]]] = {}
            for d in pending:
                have = copies[d["id"]]
                need = self.replicas - len(have)
                for n in self.preference(d["id"]):
                    if need <= 0:
                        break
                    if n in have or not self.is_up(n):
                        continue
                    plan.setdefault(n, []).append(d)
                    need -= 1
            if not plan:
                break
            done = self._run_calls({n: _inserter(batch, ns) for n, batch in plan.items()})
            for n, decisions in done.items():
                for dec in decisions:
                    copies[dec.id].add(n)
            pending = [by_id[i] for i, have in copies.items() if len(have) < self.replicas]
            if not pending:
                break
        short = {i: len(h) for i, h in copies.items() if len(h) < self.min_copies}
        if short:
            raise ServiceUnavailableError(
                f"{len(short)} document(s) could not be written to {self.min_copies} node(s) "
                f"(e.g. {next(iter(short))!r} has {next(iter(short.values()))}); nothing about "
                "them is acknowledged: send them again when nodes are back"
            )
        under = [i for i, h in copies.items() if len(h) < self.replicas]
        if under:
            log.warning(
                "%d document(s) written with fewer than %d copies", len(under), self.replicas
            )
        return set(copies)

    def insert(self, docs: Any) -> Any:
        """Insert unconditionally (duplicates reported cluster-wide)."""
        from ..online.deduplicator import Decision

        items, batch = self._as_list(docs)
        decisions = self._check_list(items)
        self._write(items)
        out = [Decision(d.id, d.duplicate, True, d.matches, d.fingerprint) for d in decisions]
        return out if batch else out[0]

    def check_and_insert(self, docs: Any) -> Any:
        """Insert the documents that are not near-duplicates of anything in the cluster (or of
        an earlier document of the batch); serialized per client (see module docstring)."""
        from ..online.deduplicator import Decision

        items, batch = self._as_list(docs)
        with self._sequencer:
            decisions = self._check_list(items)
            # nodes' checks store nothing, so near-duplicates *within* the batch are found
            # here: documents with an earlier batch member within the search radius are
            # decided one by one after the others are written (rare, so the batch stays one
            # round trip in the common case)
            later = _within_radius_of_earlier(
                [d.fingerprint for d in decisions], self._search_radius()
            )

            # a document whose only match is itself (a re-send) is written again: idempotent,
            # and it restores a copy a failed earlier attempt did not make
            def wanted(d: dict[str, Any], dec: Any) -> bool:
                return not dec.duplicate or all(m.id == d["id"] for m in dec.matches)

            write = [
                d for j, (d, dec) in enumerate(zip(items, decisions, strict=True))
                if j not in later and wanted(d, dec)
            ]  # fmt: skip
            self._write(write)
            for j in sorted(later):
                dec = self._check_list([items[j]])[0]
                decisions[j] = dec
                if wanted(items[j], dec):
                    self._write([items[j]])
                    write.append(items[j])
        written = {d["id"] for d in write}
        out = [
            Decision(
                d.id, d.duplicate, d.id in written and not d.duplicate, d.matches, d.fingerprint
            )
            for d in decisions
        ]
        return out if batch else out[0]

    def _search_radius(self) -> int:
        """The widest candidate radius of the nodes (their stats), cached; 8 when unknown."""
        if self._radius is None:
            ns = self.namespace
            answers = self._fan_out(
                self.live_nodes(), lambda c: c._request("GET", f"/v1/ns/{ns}")["stats"]
            )
            radii = [a.get("search_radius") or a.get("max_distance") for a in answers.values()]
            radii = [r for r in radii if isinstance(r, int)]
            if not radii:
                return 8
            self._radius = max(radii)
        return self._radius

    def get(self, doc_id: str) -> dict[str, Any]:
        """The stored document from its first live replica (any live node as a fallback)."""
        tried = 0
        for n in self.preference(doc_id):
            if not self.is_up(n):
                continue
            tried += 1
            try:
                return self._call(n, lambda c: c.get(doc_id, namespace=self.namespace))
            except (_NodeFailed, NotFoundError):
                continue
        if not tried:
            raise ServiceUnavailableError("no node of the cluster is up")
        raise NotFoundError(f"document {doc_id!r} not found on any live node")

    def delete(self, doc_id: str) -> None:
        """Delete every copy on the live nodes."""
        found = self._fan_out(self.live_nodes(), lambda c: _delete_quiet(c, doc_id, self.namespace))
        if not any(found.values()):
            raise NotFoundError(f"document {doc_id!r} not found on any live node")

    def create_namespace(self, name: str | None = None) -> None:
        for n in self.config.names:
            self._call(n, lambda c: c.create_namespace(name or self.namespace))

    def status(self) -> list[dict[str, Any]]:
        """Per node: url, weight, ring share, up, documents, index settings (or the error)."""
        shares = self.ring.shares()

        def one(c: Any) -> dict[str, Any]:
            h = c.health()
            info = c._request("GET", f"/v1/ns/{self.namespace}")
            return {"documents": h.get("documents"), "stats": info.get("stats", {})}

        answers = self._fan_out(self.config.names, one)
        rows = []
        for spec in self.config.nodes:
            row: dict[str, Any] = {
                "name": spec.name, "url": spec.url, "weight": spec.weight,
                "share": shares[spec.name], "up": spec.name in answers,
            }  # fmt: skip
            if spec.name in answers:
                a = answers[spec.name]
                row["documents"] = a["documents"]
                row["index"] = {k: a["stats"].get(k) for k in INDEX_SETTINGS}
            else:
                row["error"] = self._health[spec.name].reason
            rows.append(row)
        return rows

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for c in self._clients.values():
            c.close()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _within_radius_of_earlier(fps: Sequence[int], radius: int) -> set[int]:
    """Positions whose fingerprint is within ``radius`` bits of an earlier one (64 or 128 bits)."""
    import numpy as np

    hi = np.array([f >> 64 for f in fps], dtype=np.uint64)
    lo = np.array([f & 0xFFFFFFFFFFFFFFFF for f in fps], dtype=np.uint64)
    out: set[int] = set()
    for j in range(1, len(fps)):
        d = np.bitwise_count(lo[:j] ^ lo[j]) + np.bitwise_count(hi[:j] ^ hi[j])
        if d.min() <= radius:
            out.add(j)
    return out


def _inserter(batch: list[dict[str, Any]], namespace: str) -> Callable[[Any], Any]:
    return lambda c: c.insert(batch, namespace=namespace)


def _delete_quiet(client: Any, doc_id: str, namespace: str) -> bool:
    try:
        client.delete(doc_id, namespace=namespace)
    except NotFoundError:
        return False
    return True


# -- rebalancing -------------------------------------------------------------------------------
@dataclass
class RebalanceReport:
    """What a :func:`rebalance` run did."""

    scanned: int = 0  # (document, node) pairs listed
    documents: int = 0  # distinct documents seen
    copied: int = 0  # copies written
    deleted: int = 0  # copies removed from nodes that are not targets
    skipped_nodes: list[str] = field(default_factory=list)  # nodes that could not be listed
    complete: bool = True  # False when a node was down: run again when it is back

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _iter_export(client: Any, namespace: str, page: int) -> Iterator[dict[str, Any]]:
    prefix = "/v1" if namespace == "default" else f"/v1/ns/{namespace}"
    after = ""
    while True:
        from urllib.parse import quote

        data = client._request("GET", f"{prefix}/export?after={quote(after, safe='')}&limit={page}")
        yield from data["documents"]
        if data.get("next") is None:
            return
        after = data["next"]


def start_journal(
    journal: str | os.PathLike[str], target: ClusterConfig, previous: ClusterConfig | None
) -> None:
    """Record a membership change before it is applied: :func:`rebalance` with this journal
    resumes it (its configs win), so a crash between saving the new cluster file and moving
    the data loses nothing (a node being removed is still read from)."""
    head = {"target": target.to_dict(), "previous": previous.to_dict() if previous else None}
    _atomic_write(Path(journal), json.dumps(head) + "\n")


def check_index_settings(config: ClusterConfig, node: NodeSpec, namespace: str = "default") -> None:
    """Refuse a node whose index settings differ from the cluster's (or that is not up)."""
    from ..service.client import Client

    def settings(url: str) -> dict[str, Any]:
        with Client(url, namespace=namespace, timeout=10.0) as c:
            stats = c._request("GET", f"/v1/ns/{namespace}")["stats"]
        return {k: stats.get(k) for k in INDEX_SETTINGS}

    theirs = settings(node.url)
    for spec in config.nodes:
        try:
            ours = settings(spec.url)
        except ServiceUnavailableError:
            continue
        if ours != theirs:
            raise ConfigError(
                f"node {node.name!r} ({node.url}) has index settings {theirs}, the cluster's "
                f"node {spec.name!r} has {ours}; start it with the same --bits/-k/radius settings"
            )
        return
    raise ServiceUnavailableError("no node of the cluster answered: cannot compare index settings")


def rebalance(
    target: ClusterConfig,
    *,
    previous: ClusterConfig | None = None,
    journal: str | os.PathLike[str] | None = None,
    token: str | None = None,
    namespace: str = "default",
    page: int = 1000,
    copy_batch: int = 500,
    timeout: float = 30.0,
    stop_after: int | None = None,
) -> RebalanceReport:
    """Move documents so that each one is on exactly its R target nodes of ``target``.

    Nodes listed are those of ``target`` and ``previous`` (a node being removed is read from
    until it is empty). A document is copied to every target that lacks it, and deleted from
    a non-target node only after all its targets acknowledged it. Documents already on
    their targets are not touched, so the data moved is what the ring change moved (plus any
    copy a degraded write placed off its targets).

    ``journal``: a JSON-lines file; the first line records ``target`` and ``previous``, then
    one line per copy and delete. If the file exists, the run resumes it (its configs win over
    the arguments). ``copy_batch``: documents per insert request of the copies. ``stop_after``
    stops after about that many copies/deletes (whole batches; tests of resuming).
    The journal is removed when a run completes.
    """
    jpath = Path(journal) if journal is not None else None
    if jpath is not None and jpath.exists() and jpath.stat().st_size:
        head = json.loads(jpath.read_text(encoding="utf-8").splitlines()[0])
        target = ClusterConfig.from_dict(head["target"], source=f"{jpath} (target)")
        previous = (
            ClusterConfig.from_dict(head["previous"], source=f"{jpath} (previous)")
            if head.get("previous") else None
        )  # fmt: skip
        log.warning("resuming the rebalance recorded in %s", jpath)
    elif jpath is not None:
        start_journal(jpath, target, previous)
    specs = {n.name: n for n in (previous.nodes if previous else ())} | {
        n.name: n for n in target.nodes
    }
    from ..service.client import Client

    clients = {
        name: Client(s.url, token=token, namespace=namespace, timeout=timeout)
        for name, s in specs.items()
    }
    ring = target.ring()
    report = RebalanceReport()
    steps = 0
    jf = open(jpath, "a", encoding="utf-8") if jpath is not None else None  # noqa: SIM115
    try:
        holders: dict[str, set[str]] = {}
        for name, c in clients.items():
            try:
                for doc in _iter_export(c, namespace, page):
                    holders.setdefault(doc["id"], set()).add(name)
                    report.scanned += 1
            except (ServiceUnavailableError, NeardupError) as exc:
                if not _is_node_failure(exc):
                    raise
                log.warning("rebalance: node %s cannot be listed (%s); run again later", name, exc)
                report.skipped_nodes.append(name)
                report.complete = False
        report.documents = len(holders)
        down = set(report.skipped_nodes)
        want_of = {d: set(ring.nodes_for(d, target.replicas)) for d in holders}
        # copies: each missing copy is read from one live holder's export pages (full
        # documents) and written to its target in batches of ``copy_batch``
        copy_from: dict[str, set[str]] = {}
        for doc_id, have in holders.items():
            if want_of[doc_id] - have:
                source = next((n for n in sorted(have) if n not in down), None)
                if source is None:
                    report.complete = False
                    continue
                copy_from.setdefault(source, set()).add(doc_id)

        def note(entry: dict[str, str]) -> None:
            if jf is not None:
                jf.write(json.dumps(entry) + "\n")
                jf.flush()

        def flush(n: str, batch: list[dict[str, Any]]) -> None:
            nonlocal steps
            if n in down:
                report.complete = False
                return
            try:
                clients[n].insert(batch)
            except NeardupError as exc:
                if not _is_node_failure(exc):
                    raise
                log.warning("rebalance: node %s failed (%s); run again later", n, exc)
                down.add(n)
                report.complete = False
                return
            for doc in batch:
                holders[doc["id"]].add(n)
                note({"copied": doc["id"], "to": n})
            report.copied += len(batch)
            steps += len(batch)

        for source in sorted(copy_from):
            todo = copy_from[source]
            batches: dict[str, list[dict[str, Any]]] = {}
            for doc in _iter_export(clients[source], namespace, page):
                if doc["id"] not in todo:
                    continue
                if "text" not in doc:
                    raise ConfigError(
                        f"document {doc['id']!r} on {source} has no stored text; a cluster needs "
                        "`neardup serve --store-text` (the default) to move documents"
                    )
                body: dict[str, Any] = {
                    k: doc[k] for k in ("id", "text", "time", "metadata") if k in doc
                }
                for n in sorted(want_of[doc["id"]] - holders[doc["id"]]):
                    batch = batches.setdefault(n, [])
                    batch.append(body)
                    if len(batch) >= copy_batch:
                        flush(n, batch)
                        batches[n] = []
                        if stop_after is not None and steps >= stop_after:
                            return report
            for n, batch in batches.items():
                if batch:
                    flush(n, batch)
            if stop_after is not None and steps >= stop_after:
                return report
        # deletes, only where every target acknowledged its copy (copies before deletes)
        for doc_id in sorted(holders, key=key_hash):
            have, want = holders[doc_id], want_of[doc_id]
            if not want <= have:
                continue
            for n in sorted(have - want):
                if n in down:
                    report.complete = False
                    continue
                try:
                    _delete_quiet(clients[n], doc_id, namespace)
                except NeardupError as exc:
                    if not _is_node_failure(exc):
                        raise
                    down.add(n)
                    report.complete = False
                    continue
                have.discard(n)
                report.deleted += 1
                steps += 1
                note({"deleted": doc_id, "from": n})
                if stop_after is not None and steps >= stop_after:
                    return report
        if any(not want_of[d] <= h for d, h in holders.items()):
            report.complete = False
        if report.complete and jpath is not None:
            if jf is not None:
                jf.close()
                jf = None
            jpath.unlink(missing_ok=True)
        return report
    finally:
        if jf is not None:
            jf.close()
        for c in clients.values():
            c.close()
