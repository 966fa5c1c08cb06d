"""The node side of a cluster: what routers, cluster clients and ``neardup cluster`` ask a
node for, under ``/v1/cluster`` (docs/cluster.md, "What a node keeps"). The routes are in
:mod:`.replication_routes`; this module holds the state behind them (no web framework), the
errors and the protocol's constants, which :mod:`neardup.cluster` shares.

Every route needs a token that may write every namespace (they are the cluster's internal protocol):

=======  ====================================  ==================================================
method   path                                  what
=======  ====================================  ==================================================
GET      /v1/cluster                           the node's membership view: epoch, its name, peers
PUT      /v1/cluster                           join: the cluster's epoch, membership, the node's
                                               name (a lower epoch than the node's is refused)
POST     /v1/cluster/sync                      pull the peers' tombstones now (anti-entropy)
POST     /v1/cluster/ns/{ns}/lease             take or renew the namespace's write lease
DELETE   /v1/cluster/ns/{ns}/lease?writer=W    give it back
POST     /v1/cluster/ns/{ns}/check             decisions against this node's window, and the
                                               batch's within-batch matches (``"pairs": true``)
POST     /v1/cluster/ns/{ns}/write             versioned puts, deletes (tombstones), drops
GET      /v1/cluster/ns/{ns}/docs/{id}         a document with its version, or its tombstone
GET      /v1/cluster/ns/{ns}/tombstones        tombstones after a sequence number (paged)
=======  ====================================  ==================================================

What it keeps:

* **Versions**: the router gives each write a version (a hybrid clock in nanoseconds); a put
  stores it in the document's metadata under :data:`VERSION_KEY`.
* **Tombstones** (:class:`neardup.store.TombstoneLog`, ``<namespace>/tombstones.log``): a
  delete is recorded (fsynced) before the document is removed, and only removes a copy whose
  version is not newer; a put whose version is not newer than the id's tombstone is refused
  (answered ``"deleted"``), so a late hint or a rebalance copy never brings a deleted document
  back. Tombstones are kept for the namespace's retention plus :data:`TOMBSTONE_MARGIN`.
* **Epoch**: writes and checks carry the cluster file's epoch; one that differs from the
  node's is answered 409 ``stale_epoch`` with the node's epoch, so a router on an old ring
  reloads its cluster file (or pushes the newer one) instead of writing to old owners.
* **Lease**: one writer (router or cluster client) per namespace at a time. A lease is granted
  to one writer id for ``ttl`` seconds; another writer is answered 409 ``lease_held``; a write
  from a writer that is not the holder is refused the same way. In memory: a restarted node
  grants the lease again (the writer holds a majority of the others).
* **Anti-entropy**: at start (before the first request is served) and on ``POST
  /v1/cluster/sync``, the node pulls from every peer the tombstones that peer recorded since
  the last pull (a cursor per peer, kept in the tombstone log) and applies them.

A node that never joined a cluster (a plain ``neardup serve``) pulls nothing and behaves as
before; these routes only add to it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..errors import ConfigError, IndexStateError, NotFoundError, ServiceUnavailableError
from ..store.layout import read_json_file, write_json_file
from ..store.tombstones import TOMBSTONES_FILE, TombstoneLog
from .http_errors import RequestValidationFailed
from .schema import dumps, parse_documents

__all__ = [
    "EPOCH_FIELD",
    "TOMBSTONE_MARGIN",
    "VERSION_KEY",
    "ClusterNode",
    "LeaseHeldError",
    "StaleEpochError",
    "doc_version",
]

log = logging.getLogger("neardup.cluster")

#: a stored document's metadata key holding the cluster's version of its insert
VERSION_KEY = "neardup:version"
#: the body field that carries the sender's epoch
EPOCH_FIELD = "epoch"
#: tombstones outlive the namespace's retention window by this much (seconds)
TOMBSTONE_MARGIN = 3600.0
#: the node's cluster view, in the data directory
STATE_FILE = "cluster.json"
_STATE_FORMAT = "neardup-node-cluster"
_STATE_VERSION = 1
#: seconds for one request to a peer while pulling its tombstones
PULL_TIMEOUT = 3.0
_PULL_PAGE = 5000
#: most operations in one write request
MAX_OPS = 10_000


class StaleEpochError(IndexStateError):
    """The request's cluster epoch is not the node's (HTTP 409): reload the cluster file, or
    push the newer one to the node."""

    code = "stale_epoch"

    def __init__(self, message: str, node_epoch: int = 0) -> None:
        super().__init__(message)
        self.node_epoch = node_epoch


class LeaseHeldError(IndexStateError):
    """Another writer holds the namespace's write lease (HTTP 409)."""

    code = "lease_held"


class _Lease:
    __slots__ = ("expires", "ttl", "writer")

    def __init__(self, writer: str, ttl: float, now: float) -> None:
        self.writer = writer
        self.ttl = ttl
        self.expires = now + ttl


def _int_field(body: Mapping[str, Any], name: str, default: int | None = None) -> int:
    v = body.get(name, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise RequestValidationFailed(name, f"must be an integer >= 0, got {v!r:.40}")
    return v


def doc_version(record: Mapping[str, Any] | None) -> int:
    """The cluster version stored with a document record (0: written without one)."""
    meta = (record or {}).get("metadata")
    v = meta.get(VERSION_KEY, 0) if isinstance(meta, dict) else 0
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


class ClusterNode:
    """The cluster state of one ``neardup serve`` process (see the module docstring).

    Parameters
    ----------
    registry : NamespaceRegistry
        The node's namespaces.
    data_dir : Path or None
        Where the node's cluster view is kept (``cluster.json``); None: in memory.
    token : str or None
        The write token, sent to the peers when pulling their tombstones.
    max_batch : int
        Most documents per check.
    """

    def __init__(
        self,
        registry: Any,
        *,
        data_dir: Path | None,
        token: str | None,
        max_batch: int,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self.data_dir = data_dir
        self.token = token
        self.max_batch = max_batch
        self.monotonic = monotonic
        self.epoch = 0
        self.name: str | None = None
        self.nodes: list[dict[str, str]] = []
        self.replicas = 0
        self._cond = threading.Condition()
        self._inflight = 0
        self._leases: dict[str, _Lease] = {}
        self._tombs: dict[str, TombstoneLog] = {}
        self._ns_locks: dict[str, threading.Lock] = {}
        self._max_version: dict[str, int] = {}
        self._expired_at: dict[str, float] = {}
        self._sync_lock = threading.Lock()
        self._load_state()

    # -- the node's cluster view ----------------------------------------------------------------
    def _state_path(self) -> Path | None:
        return None if self.data_dir is None else self.data_dir / STATE_FILE

    def _load_state(self) -> None:
        path = self._state_path()
        if path is None or not path.exists():
            return
        body = read_json_file(path)
        if body.get("format") != _STATE_FORMAT or body.get("version") != _STATE_VERSION:
            raise ConfigError(
                f"{path}: not a neardup node cluster file of version {_STATE_VERSION}"
            )
        self.epoch = int(body["epoch"])
        self.name = body.get("self")
        self.nodes = list(body.get("nodes", []))
        self.replicas = int(body.get("replicas", 0))

    def view(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "self": self.name,
            "replicas": self.replicas,
            "nodes": self.nodes,
            "namespaces": {
                ns: {"tombstones": len(t), "incarnation": str(t.incarnation)}
                for ns, t in sorted(self._tombs.items())
            },
        }

    def join(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Take the cluster's membership and epoch (``PUT /v1/cluster``); waits for writes of
        the old epoch to finish first, so nothing of it lands after a rebalance lists this
        node."""
        epoch = _int_field(body, "epoch")
        nodes = body.get("nodes")
        if not isinstance(nodes, list) or not all(
            isinstance(n, dict) and isinstance(n.get("name"), str) and isinstance(n.get("url"), str)
            for n in nodes
        ):
            raise RequestValidationFailed("nodes", "must be a list of {name, url} objects")
        name = body.get("self")
        if name is not None and not isinstance(name, str):
            raise RequestValidationFailed("self", "must be the node's name (a string)")
        replicas = _int_field(body, "replicas", 0)
        with self._cond:
            if epoch < self.epoch:
                raise StaleEpochError(
                    f"this node is at cluster epoch {self.epoch}, the request at {epoch}: reload "
                    "the cluster file (a membership change happened)",
                    self.epoch,
                )
            if not self._cond.wait_for(lambda: self._inflight == 0, timeout=30.0):
                raise ServiceUnavailableError("writes of the old epoch did not finish in 30 s")
            self.epoch, self.name, self.replicas = epoch, name, replicas
            self.nodes = [{"name": n["name"], "url": n["url"]} for n in nodes]
            path = self._state_path()
            if path is not None:
                write_json_file(
                    path,
                    {
                        "format": _STATE_FORMAT,
                        "version": _STATE_VERSION,
                        "epoch": self.epoch,
                        "self": self.name,
                        "replicas": self.replicas,
                        "nodes": self.nodes,
                    },
                )
        return self.view()

    def check_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            raise StaleEpochError(
                f"cluster epoch mismatch: this node is at epoch {self.epoch}, the request at "
                f"{epoch}; "
                + (
                    "reload the cluster file (a membership change happened)"
                    if epoch < self.epoch
                    else "push the new membership to this node first (PUT /v1/cluster)"
                ),
                self.epoch,
            )

    # -- leases -------------------------------------------------------------------------------
    def lease(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        writer = body.get("writer")
        if not isinstance(writer, str) or not writer:
            raise RequestValidationFailed("writer", "must be the writer's id (a string)")
        ttl = body.get("ttl", 10.0)
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl <= 600:
            raise RequestValidationFailed("ttl", f"must be seconds in (0, 600], got {ttl!r:.40}")
        self.registry.get(namespace)
        with self._cond:
            self.check_epoch(_int_field(body, EPOCH_FIELD, 0))
            self._take(namespace, writer, float(ttl))
        return {
            "granted": True,
            "writer": writer,
            "ttl": ttl,
            "max_version": self._max_version_of(namespace),
        }

    def _take(self, namespace: str, writer: str, ttl: float | None) -> None:
        """(under the condition) Grant ``writer`` the lease, or raise LeaseHeldError."""
        now = self.monotonic()
        cur = self._leases.get(namespace)
        if cur is not None and cur.writer != writer and cur.expires > now:
            raise LeaseHeldError(
                f"namespace {namespace!r} is written by another router or cluster client "
                f"(writer {cur.writer}) for {cur.expires - now:.1f} s more: one writer per "
                "namespace at a time; send through that router, or stop it"
            )
        if cur is None or cur.writer != writer or ttl is not None:
            self._leases[namespace] = _Lease(writer, ttl or (cur.ttl if cur else 10.0), now)

    def release(self, namespace: str, writer: str) -> dict[str, bool]:
        with self._cond:
            cur = self._leases.get(namespace)
            if cur is not None and cur.writer == writer:
                del self._leases[namespace]
                return {"released": True}
        return {"released": False}

    # -- tombstones -----------------------------------------------------------------------------
    def tombstones(self, namespace: str) -> TombstoneLog:
        log_ = self._tombs.get(namespace)
        if log_ is None:
            store = self.registry.get(namespace)
            with self._cond:
                log_ = self._tombs.get(namespace)
                if log_ is None:
                    path = getattr(store, "path", None)
                    log_ = TombstoneLog(None if path is None else Path(path) / TOMBSTONES_FILE)
                    self._tombs[namespace] = log_
                    self._ns_locks.setdefault(namespace, threading.Lock())
        return log_

    def _lock_of(self, namespace: str) -> threading.Lock:
        self.tombstones(namespace)
        return self._ns_locks[namespace]

    def _max_version_of(self, namespace: str) -> int:
        return max(self._max_version.get(namespace, 0), self.tombstones(namespace).max_version)

    def _note_version(self, namespace: str, version: int) -> None:
        if version > self._max_version.get(namespace, 0):
            self._max_version[namespace] = version

    def _maybe_expire(self, namespace: str, store: Any, tombs: TombstoneLog) -> None:
        now = time.time()
        if now - self._expired_at.get(namespace, 0.0) < 600.0:
            return
        self._expired_at[namespace] = now
        retention = getattr(store, "retention", None)
        if retention is not None:
            n = tombs.expire(now - float(retention) - TOMBSTONE_MARGIN)
            if n:
                log.info("%s: forgot %d tombstones older than the window", namespace, n)

    def _apply_tombstones(self, store: Any, items: list[tuple[str, int]]) -> list[str]:
        """(under the namespace lock, tombstones recorded) Remove the stored copies that are
        not newer than their tombstone; per item: ``"deleted"``, ``"newer"`` (a newer copy is
        kept) or ``"absent"`` (no copy here)."""
        out = []
        drop = []
        for doc_id, version in items:
            try:
                record = store.get(doc_id)
            except NotFoundError:
                out.append("absent")
                continue
            if doc_version(record) > version:
                out.append("newer")
                continue
            drop.append(doc_id)
            out.append("deleted")
        if drop:
            _delete_many(store, drop)
        return out

    # -- writes -------------------------------------------------------------------------------
    def write(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Apply a write request (see :meth:`ClusterClient <neardup.cluster.ClusterClient>`):
        ``{"epoch", "writer"?, "ops": [{"op": "put", "doc", "version"} | {"op": "delete",
        "id", "version"} | {"op": "drop", "id"}]}`` -> ``{"results": [...]}`` with, per op,
        ``"stored"`` (added or already there), ``"deleted"`` (a put refused by a newer
        tombstone, or a delete that removed a copy), ``"newer"`` (a delete that left a newer
        copy), ``"absent"`` (a delete or drop with no copy here) or ``"dropped"``."""
        ops = body.get("ops")
        if not isinstance(ops, list):
            raise RequestValidationFailed("ops", "must be a list of operations")
        if len(ops) > MAX_OPS:
            raise RequestValidationFailed("ops", f"at most {MAX_OPS} operations per request")
        parsed = [_parse_op(op, k, self.max_batch) for k, op in enumerate(ops)]
        writer = body.get("writer")
        if writer is not None and (not isinstance(writer, str) or not writer):
            raise RequestValidationFailed("writer", "must be the writer's id (a string)")
        epoch = _int_field(body, EPOCH_FIELD, 0)
        store = self.registry.get(namespace)
        tombs = self.tombstones(namespace)
        with self._cond:
            self.check_epoch(epoch)
            if writer is not None:
                self._take(namespace, writer, None)
            self._inflight += 1
        try:
            with self._lock_of(namespace):
                results: list[str] = []
                k = 0
                while k < len(parsed):
                    kind = parsed[k][0]
                    run = []
                    while k < len(parsed) and parsed[k][0] == kind:
                        run.append(parsed[k])
                        k += 1
                    if kind == "put":
                        results += self._puts(namespace, store, tombs, run)
                    elif kind == "delete":
                        items = [(op[1], op[2]) for op in run]
                        tombs.record(items)
                        for _, v in items:
                            self._note_version(namespace, v)
                        results += self._apply_tombstones(store, items)
                    else:
                        found = _delete_many(store, [op[1] for op in run])
                        results += ["dropped" if f else "absent" for f in found]
                self._maybe_expire(namespace, store, tombs)
        finally:
            with self._cond:
                self._inflight -= 1
                self._cond.notify_all()
        return {"results": results}

    def _puts(
        self, namespace: str, store: Any, tombs: TombstoneLog, run: list[tuple[Any, ...]]
    ) -> list[str]:
        dead = tombs.versions(op[1]["id"] for op in run)
        out: list[str | None] = []
        docs = []
        for _kind, doc, version in run:
            if dead.get(doc["id"], -1) >= version:
                out.append("deleted")  # deleted at a version at least as new: never back
                continue
            meta = dict(doc.get("metadata") or {})
            meta[VERSION_KEY] = version
            docs.append({**doc, "metadata": meta})
            out.append(None)
            self._note_version(namespace, version)
        if docs:
            store.add(docs)  # an id already stored is an idempotent no-op
        return [r or "stored" for r in out]

    # -- reads --------------------------------------------------------------------------------
    def check(self, namespace: str, body: Mapping[str, Any]) -> bytes:
        docs, _ = parse_documents({"documents": body.get("documents")}, max_batch=self.max_batch)
        self.check_epoch(_int_field(body, EPOCH_FIELD, 0))
        store = self.registry.get(namespace)
        decisions = store.check(docs) if docs else []
        pairs: list[list[Any]] = []
        if body.get("pairs") and len(docs) > 1:
            for i, found in sorted(store.group_matches(docs).items()):
                pairs += [[i, f.member, f.distance, f.score, f.drops] for f in found]
        return dumps(
            {
                "results": [d.to_dict() for d in decisions],
                "pairs": pairs,
            }
        )

    def document(self, namespace: str, doc_id: str) -> dict[str, Any]:
        store = self.registry.get(namespace)
        tomb = self.tombstones(namespace).get(doc_id)
        try:
            record: dict[str, Any] | None = store.get(doc_id)
        except NotFoundError:
            record = None
        return {
            "doc": record,
            "version": None if record is None else doc_version(record),
            "tombstone": None if tomb is None else tomb.version,
        }

    def tombstone_page(self, namespace: str, after: int, limit: int) -> dict[str, Any]:
        tombs = self.tombstones(namespace)
        page, nxt = tombs.since(after, limit)
        return {
            "incarnation": str(tombs.incarnation),
            "tombstones": [[t.seq, t.id, t.version, t.recorded] for t in page],
            "next": nxt,
        }

    # -- anti-entropy ---------------------------------------------------------------------------
    def reconcile(self) -> int:
        """Remove stored copies that a recorded tombstone covers (a crash between recording a
        tombstone and removing the document); returns how many. Run at start."""
        n = 0
        for ns in self.registry.names():
            store = self.registry.get(ns)
            tombs = self.tombstones(ns)
            with self._lock_of(ns):
                self._expired_at[ns] = 0.0
                self._maybe_expire(ns, store, tombs)
                page, _ = tombs.since(0, len(tombs) or 1)
                items = [(t.id, t.version) for t in page if t.id in store]
                if items:
                    n += sum(r == "deleted" for r in self._apply_tombstones(store, items))
        return n

    def pull(self) -> dict[str, Any]:
        """Pull every peer's tombstones recorded since the last pull, for every namespace of
        this node, and apply them. A peer that does not answer is skipped (logged)."""
        import httpx

        report: dict[str, Any] = {"pulled": 0, "applied": 0, "peers": {}}
        peers = [n for n in self.nodes if n.get("name") != self.name]
        if not peers:
            return report
        headers = {b"Authorization": f"Bearer {self.token}".encode()} if self.token else {}
        with self._sync_lock, httpx.Client(timeout=PULL_TIMEOUT, headers=headers) as http:
            for peer in peers:
                try:
                    got, applied = self._pull_peer(http, peer)
                except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
                    report["peers"][peer["name"]] = f"error: {type(exc).__name__}: {exc}"
                    log.warning("could not pull tombstones from %s: %s", peer["name"], exc)
                    continue
                report["peers"][peer["name"]] = "ok"
                report["pulled"] += got
                report["applied"] += applied
        if report["applied"]:
            log.warning(
                "anti-entropy: %d deletes missed while away applied (from %d tombstones)",
                report["applied"],
                report["pulled"],
            )
        return report

    def _pull_peer(self, http: Any, peer: Mapping[str, str]) -> tuple[int, int]:
        got = applied = 0
        base = peer["url"].rstrip("/")
        for ns in self.registry.names():
            tombs = self.tombstones(ns)
            inc, after = tombs.cursor(peer["name"])
            checked = False
            while True:
                r = http.get(
                    f"{base}/v1/cluster/ns/{quote(ns, safe='')}/tombstones",
                    params={"after": after, "limit": _PULL_PAGE},
                )
                if r.status_code == 404:
                    break  # the peer has no such namespace
                r.raise_for_status()
                page = r.json()
                peer_inc = int(page["incarnation"])
                if not checked:
                    checked = True
                    if peer_inc != inc and after:  # a new log on the peer: from its start
                        after = 0
                        continue
                items = [(str(t[1]), int(t[2])) for t in page["tombstones"]]
                if items:
                    store = self.registry.get(ns)
                    with self._lock_of(ns):
                        tombs.record(items)
                        for _, v in items:
                            self._note_version(ns, v)
                        present = [it for it in items if it[0] in store]
                        if present:
                            applied += sum(
                                r == "deleted" for r in self._apply_tombstones(store, present)
                            )
                    got += len(items)
                    after = int(page["tombstones"][-1][0])
                tombs.set_cursor(peer["name"], peer_inc, after)
                if page.get("next") is None:
                    break
        return got, applied

    def start(self) -> None:
        """At start, before requests are served: finish interrupted deletes, then pull what
        the peers deleted meanwhile."""
        done = self.reconcile()
        if done:
            log.warning("removed %d documents whose delete was interrupted", done)
        if self.nodes:
            self.pull()

    def close(self) -> None:
        for t in self._tombs.values():
            t.close()


def _delete_many(store: Any, ids: list[str]) -> list[bool]:
    many = getattr(store, "delete_many", None)
    if many is not None:
        return list(many(ids))
    out = []
    for i in ids:
        try:
            store.delete(i)
        except NotFoundError:
            out.append(False)
        else:
            out.append(True)
    return out


def _parse_op(op: Any, k: int, max_batch: int) -> tuple[Any, ...]:
    where = f"ops[{k}]"
    if not isinstance(op, dict):
        raise RequestValidationFailed(where, "must be an object")
    kind = op.get("op")
    if kind == "put":
        docs, _ = parse_documents({"documents": [op.get("doc")]}, max_batch=max_batch)
        version = op.get("version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise RequestValidationFailed(f"{where}.version", "must be an integer >= 0")
        meta = docs[0].get("metadata")
        if isinstance(meta, dict) and VERSION_KEY in meta:
            meta = {k2: v for k2, v in meta.items() if k2 != VERSION_KEY}
            docs[0]["metadata"] = meta or None
        return ("put", docs[0], version)
    if kind in ("delete", "drop"):
        doc_id = op.get("id")
        if not isinstance(doc_id, str) or not doc_id:
            raise RequestValidationFailed(f"{where}.id", "must be a non-empty string")
        if kind == "drop":
            return ("drop", doc_id)
        version = op.get("version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise RequestValidationFailed(f"{where}.version", "must be an integer >= 0")
        return ("delete", doc_id, version)
    raise RequestValidationFailed(f"{where}.op", "must be 'put', 'delete' or 'drop'")
