"""Several ``neardup serve`` nodes as one service: client-side routing of one namespace.

Design (docs/cluster.md, measured by ``benchmarks/bench_sharding.py``): documents are sharded
**by document id** on a :class:`neardup.HashRing`; each document is written to ``replicas`` (R)
distinct nodes, and a check fans out to every node (each node holds a complete, exact index of
its own documents, so the union of their answers is the cluster's answer).

* **One writer per namespace**: before it writes, a client takes the namespace's *lease* on a
  majority of the nodes (renewed while it writes); a second router or client is refused with
  :class:`~neardup.service.replication.LeaseHeldError` (409) naming the holder, until the
  holder has been idle for the lease's ``ttl``. Within one client, check-and-inserts are
  serialized (the sequencer), so of near-duplicates sent through it exactly one is kept.
* **One decision rule**: a batch is decided by :func:`neardup.rules.keep_first`, the function
  a node's writer uses: the nodes' checks give each member's matches against their windows,
  one node's :meth:`~neardup.online.Deduplicator.group_matches` the within-batch matches
  (MinHash bands + SimHash, verified on the texts). The same batch keeps the same documents
  through the cluster as on one node (tests/cluster/test_cluster_rule.py).
* **Writes** carry a version (:meth:`NodePool.next_version`) and go to the first R usable
  nodes of the document's preference list; a target that is skipped or does not answer gets
  a **hint** and the copy goes to the next node (hedged after ``slow_after``); acknowledged
  once ``min_copies`` copies are fsynced. **Deletes** are versioned tombstones sent to every
  usable node (hints for the others), acknowledged at ``min_copies``; a node never takes back
  a copy older than its tombstone.
* **Checks** complete as soon as the answers cover every ring range; a node that has not
  answered by then is not waited for. Fewer answers: :class:`ServiceUnavailableError`.
* **Epochs**: a node at another cluster epoch answers 409; the client reloads its cluster file
  (or tells the node the newer membership) and retries once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from ..errors import ConfigError, InputError, InputTypeError, NotFoundError, ServiceUnavailableError
from ..rules.decision import Decision, Match
from ..rules.keep import GROUP_ORDER, Found, keep_first
from ..service.replication import VERSION_KEY, LeaseHeldError, StaleEpochError
from .config import INDEX_SETTINGS, ClusterConfig, NodeSpec
from .nodes import NodeAnswerError, NodeDown, NodePool, covered, namespace_path

__all__ = ["ClusterClient", "ClusterConfig", "NodeSpec"]

log = logging.getLogger("neardup.cluster")

#: matches reported per document (the nodes' default)
MAX_MATCHES = 10


def write_options(min_copies: int | None, lease_ttl: float, replicas: int) -> tuple[int, float]:
    """``(min_copies, lease_ttl)`` of a writer (a :class:`ClusterClient`, the router's
    namespaces) checked: copies in 1..``replicas`` (None: ``replicas``), the lease seconds in
    (0, 600]; :class:`ConfigError` otherwise."""
    if min_copies is None:
        min_copies = replicas
    if (
        isinstance(min_copies, bool)
        or not isinstance(min_copies, int)
        or not 1 <= min_copies <= replicas
    ):
        raise ConfigError(f"min_copies must be in 1..replicas ({replicas}), got {min_copies!r}")
    if isinstance(lease_ttl, bool) or not 0 < float(lease_ttl) <= 600:
        raise ConfigError(f"lease_ttl must be seconds in (0, 600], got {lease_ttl!r}")
    return min_copies, float(lease_ttl)


class ClusterClient:
    """Routes the documents of one namespace to the nodes of a cluster (see the module docs).

    Parameters
    ----------
    config : ClusterConfig or path
        The cluster (a path is reloaded when a node reports a newer epoch).
    token : str, optional
        Bearer token of the nodes (the same on every node).
    namespace : str, default="default"
    timeout : float, default=5.0
        Seconds a request to one node may take; then the node is marked down.
    down_seconds : float, default=0.5
        First back-off before a down node is probed again (doubles up to 10 s).
    min_copies : int, optional
        Copies that must be fsynced before a write (or delete) is acknowledged (default R).
    slow_after : float, default=0.25
        Seconds without an answer after which a node is routed around (see
        :class:`~neardup.cluster.nodes.NodePool`).
    lease_ttl : float, default=10.0
        Seconds the namespace's write lease lasts without a write (renewed while writing).
    nodes : NodePool, optional
        A shared pool (the router's); default: this client makes and closes its own.
    transport : httpx transport, optional
        For tests.
    join : bool, default=True
        Tell every node the membership and epoch at start (``PUT /v1/cluster``), as a writer
        must. False: a client that only reads (``neardup cluster status``) and changes no
        node's view.
    """

    def __init__(
        self,
        config: ClusterConfig | str | os.PathLike[str],
        *,
        token: str | None = None,
        namespace: str = "default",
        timeout: float = 5.0,
        down_seconds: float = 0.5,
        min_copies: int | None = None,
        slow_after: float = 0.25,
        lease_ttl: float = 10.0,
        nodes: NodePool | None = None,
        transport: Any = None,
        join: bool = True,
    ) -> None:
        from ..service.config import validate_namespace

        self.namespace = validate_namespace(namespace)
        self._own = nodes is None
        self.nodes = nodes or NodePool(
            config,
            token=token,
            timeout=timeout,
            slow_after=slow_after,
            down_seconds=down_seconds,
            transport=transport,
        )
        if self._own and join:
            try:
                self.nodes.join_all()
            except BaseException:
                self.nodes.close()
                raise
        self.min_copies, self.lease_ttl = write_options(
            min_copies, lease_ttl, self.nodes.config.replicas
        )
        self._sequencer = threading.Lock()
        self._lease_until = 0.0
        self._closed = False

    # -- cluster view -------------------------------------------------------------------------
    @property
    def config(self) -> ClusterConfig:
        return self.nodes.config

    @property
    def ring(self) -> Any:
        return self.nodes.ring

    @property
    def replicas(self) -> int:
        return self.nodes.config.replicas

    def is_up(self, node: str) -> bool:
        return self.nodes.usable(node)

    def live_nodes(self) -> list[str]:
        return self.nodes.usable_nodes()

    def mark_down(self, node: str, reason: str) -> None:
        self.nodes.mark_down(node, reason)

    def preference(self, doc_id: str) -> tuple[str, ...]:
        """Every node in the order a document's copies are placed (its R replicas first)."""
        return self.nodes.ring.nodes_for(doc_id, len(self.nodes.ring))

    def targets(self, doc_id: str) -> tuple[str, ...]:
        """The R nodes that hold ``doc_id`` when every node is up."""
        return self.nodes.ring.nodes_for(doc_id, self.replicas)

    def _covered(self, answered: Iterable[str]) -> bool:
        """Whether every ring range has a replica among ``answered``."""
        config, ring = self.nodes.snapshot()
        return covered(config, ring, answered)

    def _coverage_error(self, answered: Iterable[str]) -> ServiceUnavailableError:
        missing = set(self.config.names) - set(answered)
        reasons = "; ".join(f"{n}: {self.nodes.reason(n) or 'no answer'}" for n in sorted(missing))
        return ServiceUnavailableError(
            f"{len(missing)} node(s) are down ({', '.join(sorted(missing))}) and some ring "
            f"ranges have all {self.replicas} replicas among them: a check could miss "
            f"duplicates; bring a node back ({reasons})"
        )

    # -- epochs ---------------------------------------------------------------------------------
    def _retrying(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)``, again after a node reported another cluster epoch (the file reloaded,
        or the node told the membership), at most once per node."""
        last = len(self.config.names)  # each retry brings one node (or the file) up to date
        for attempt in range(last + 1):
            try:
                return fn(*args)
            except NodeAnswerError as exc:
                if not isinstance(exc.error, StaleEpochError) or attempt == last:
                    raise exc.error from None
                self._after_stale(exc.node, exc.error)
        raise AssertionError("unreachable")

    def _after_stale(self, node: str, err: StaleEpochError) -> None:
        if err.node_epoch > self.config.epoch:
            self.nodes.reload(err.node_epoch)
            self._lease_until = 0.0
            return
        try:
            self.nodes.join(node)
        except NodeDown as exc:  # gone meanwhile: the retry routes around it
            self.nodes.mark_down(node, str(exc))
        except NodeAnswerError as exc:
            raise exc.error from None

    # -- the lease ------------------------------------------------------------------------------
    def _ensure_lease(self) -> None:
        """(sequencer held) Hold the namespace's write lease on a majority of the nodes."""
        now = time.monotonic()
        if now < self._lease_until - self.lease_ttl / 2:
            return
        body = {"writer": self.nodes.writer_id, "ttl": self.lease_ttl, "epoch": self.config.epoch}
        path = namespace_path(self.namespace, "lease")
        names = self.config.names
        need = len(names) // 2 + 1

        def enough(answered: Collection[str]) -> bool:
            return len(answered) >= need

        answers, errors = self.nodes.fan_out("POST", path, body, enough=enough)
        for a in answers.values():
            self.nodes.observe_version(int(a.get("max_version") or 0))
        if len(answers) >= need:
            self._lease_until = now + self.lease_ttl * 0.8  # a margin for clock drift
            return
        self._lease_until = 0.0
        for n in answers:  # give back what was granted: the other writer may go on
            self.nodes.executor.submit(self._release, n)
        for exc in errors.values():
            if isinstance(exc, NodeAnswerError) and not isinstance(exc.error, LeaseHeldError):
                raise exc  # e.g. a stale epoch: the caller retries
        held = [e for e in errors.values() if isinstance(e, NodeAnswerError)]
        if held:
            raise held[0].error
        raise ServiceUnavailableError(
            f"the write lease of namespace {self.namespace!r} needs {need} of {len(names)} nodes; "
            f"only {len(answers)} answered: bring nodes back"
        )

    def _release(self, node: str) -> None:
        with contextlib.suppress(NodeDown, NodeAnswerError):
            self.nodes.request(
                node, "DELETE", namespace_path(self.namespace, "lease"),
                params={"writer": self.nodes.writer_id}, breaker=False, timeout=2.0,
            )  # fmt: skip

    # -- documents ------------------------------------------------------------------------------
    @staticmethod
    def _as_list(docs: Any) -> tuple[list[dict[str, Any]], bool]:
        if isinstance(docs, Mapping):
            items, batch = [dict(docs)], False
        elif isinstance(docs, str | bytes) or not isinstance(docs, Iterable):
            raise InputTypeError("documents must be a mapping or a list of mappings")
        else:
            items, batch = [], True
            for i, d in enumerate(docs):
                if not isinstance(d, Mapping):
                    raise InputTypeError(
                        f"documents[{i}] must be a mapping {{'id': ..., 'text': ...}}, got "
                        f"{type(d).__name__}"
                    )
                items.append(dict(d))
        for i, d in enumerate(items):
            meta = d.get("metadata")
            if isinstance(meta, Mapping) and VERSION_KEY in meta:
                raise InputError(
                    f"documents[{i}].metadata: the key {VERSION_KEY!r} is reserved by the cluster "
                    "(it holds the version of each write); rename it"
                )
        return items, batch

    def _fan_check(
        self, docs: list[dict[str, Any]], pairs: bool
    ) -> tuple[list[tuple[bool, list[Found], bool, int]], dict[int, list[Found]]]:
        """Check ``docs`` on every usable node. Per document: (a stored match drops it, its
        matches, its id is stored (a re-send), fingerprint); and the within-batch matches."""
        body = {"documents": docs, "pairs": pairs, "epoch": self.config.epoch}
        path = namespace_path(self.namespace, "check")
        answers, errors = self.nodes.fan_out(
            "POST", path, body, enough=self._covered, n_docs=len(docs)
        )
        for exc in errors.values():
            if isinstance(exc, NodeAnswerError):
                raise exc
        if not answers or not self._covered(answers):
            raise self._coverage_error(answers)
        # a node's answer may show documents it has still to delete (its hints): not matches
        gone = {node: self.nodes.hinted_deletes(node, self.namespace) for node in answers}
        merged = []
        for i, d in enumerate(docs):
            best: dict[str, tuple[int, float | None]] = {}
            dup = False
            fp = 0
            for node, ans in answers.items():
                r = ans["results"][i]
                fp = int(r.get("fingerprint") or "0", 16)
                ms = [m for m in r["matches"] if m["id"] not in gone[node]]
                if r["duplicate"] and (ms or not r["matches"]):
                    dup = True
                for m in ms:
                    if m["id"] not in best or m["distance"] < best[m["id"]][0]:
                        best[m["id"]] = (int(m["distance"]), m.get("score"))
            ranked = sorted(best.items(), key=lambda kv: (kv[1][0], kv[0]))
            found = [Found(dist, k, mid, sc, False) for k, (mid, (dist, sc)) in enumerate(ranked)]
            resend = d["id"] in best
            merged.append((dup, found, resend, fp))
        within: dict[int, list[Found]] = {}
        if pairs:
            ans = next(iter(answers.values()))
            for i, j, dist, score, drops in ans.get("pairs", ()):
                within.setdefault(int(i), []).append(
                    Found(int(dist), GROUP_ORDER + int(j), docs[int(j)]["id"], score, bool(drops))
                )
        return merged, within

    def _decide(
        self, items: list[dict[str, Any]], op: str
    ) -> tuple[list[Decision], list[dict[str, Any]]]:
        """Decisions for ``items`` (``op``: check, insert or check_and_insert) and the
        documents to write."""
        stored, within = self._fan_check(items, pairs=op != "check" and len(items) > 1)
        n = len(items)
        adding = [op != "check" and not s[2] for s in stored]
        force = [op == "insert" and not s[2] for s in stored]
        out = keep_first(
            [(s[0], s[1]) for s in stored], within, adding=adding, force=force,
            max_matches=MAX_MATCHES,
        )  # fmt: skip
        decisions = []
        write = []
        for i in range(n):
            dup, kept, top = out[i]
            matches = tuple(Match(f.id, f.distance, f.score) for f in top)
            decisions.append(Decision(items[i]["id"], dup, kept, matches, stored[i][3]))
            # a re-send (its id is stored) is written again: idempotent, and it restores a
            # copy that a failed earlier attempt did not make
            if op != "check" and (kept or stored[i][2]):
                write.append(items[i])
        return decisions, write

    def check(self, docs: Any) -> Any:
        """Decisions against every node; nothing stored, no lease needed."""
        items, batch = self._as_list(docs)
        out = self._retrying(lambda: self._decide(items, "check")[0])
        return out if batch else out[0]

    def insert(self, docs: Any) -> Any:
        """Insert unconditionally (duplicates reported cluster-wide)."""
        return self._write_op(docs, "insert")

    def check_and_insert(self, docs: Any) -> Any:
        """Insert the documents that are not near-duplicates of anything in the cluster or of
        an earlier kept document of the batch (one rule: :func:`neardup.rules.keep_first`)."""
        return self._write_op(docs, "check_and_insert")

    def _write_op(self, docs: Any, op: str) -> Any:
        items, batch = self._as_list(docs)
        now = time.time()
        for d in items:  # one time for every replica (a node would take its own clock)
            if d.get("time") is None:
                d["time"] = now

        def run() -> list[Decision]:
            with self._sequencer:
                self._ensure_lease()
                decisions, write = self._decide(items, op)
                if write:
                    ops = [
                        {"op": "put", "doc": d, "version": self.nodes.next_version()} for d in write
                    ]
                    self._replicate(ops)
                return decisions

        out = self._retrying(run)
        return out if batch else out[0]

    def delete(self, doc_id: str) -> None:
        """Delete ``doc_id`` everywhere: a versioned tombstone on every node (a hint for the
        ones that are away), acknowledged at ``min_copies``. NotFoundError when no node had
        a copy (the tombstone is recorded anyway)."""
        if not isinstance(doc_id, str) or not doc_id:
            raise InputTypeError(f"doc_id must be a non-empty str, got {doc_id!r}")

        def run() -> list[str]:
            with self._sequencer:
                self._ensure_lease()
                op = {"op": "delete", "id": doc_id, "version": self.nodes.next_version()}
                return self._replicate([op])[0]

        results = self._retrying(run)
        if not any(r in ("deleted", "newer") for r in results):
            raise NotFoundError(f"document {doc_id!r} not found on any node")

    def _replicate(self, ops: list[dict[str, Any]]) -> list[list[str]]:
        """Send write ops: puts to R nodes of their preference lists, deletes to every node.
        Returns, per op, the results of the nodes that acknowledged it; raises
        ServiceUnavailableError when one has fewer than ``min_copies``."""
        from concurrent.futures import FIRST_COMPLETED, wait

        config, ring = self.nodes.snapshot()
        ns = self.namespace
        names = config.names
        path = namespace_path(ns, "write")
        acks: list[dict[str, str]] = [{} for _ in ops]
        tried: list[set[str]] = [set() for _ in ops]  # nodes an op was sent to
        hinted: list[set[str]] = [set() for _ in ops]
        prefs: list[tuple[str, ...]] = []
        for op in ops:
            key = op["doc"]["id"] if op["op"] == "put" else op["id"]
            prefs.append(ring.nodes_for(key, len(ring)) if op["op"] == "put" else names)
        want = [config.replicas if op["op"] == "put" else len(names) for op in ops]
        # hints for every node a put should reach (its R ring replicas) or any node for a
        # delete, that is not usable now
        for k, op in enumerate(ops):
            meant = prefs[k][: config.replicas] if op["op"] == "put" else names
            for n in meant:
                if not self.nodes.usable(n):
                    self.nodes.add_hints(n, ns, [op])
                    hinted[k].add(n)

        def assign(k: int) -> str | None:
            for n in prefs[k]:
                if n not in tried[k] and n not in hinted[k] and self.nodes.usable(n):
                    tried[k].add(n)
                    return n
            coming = sum(k in ks for f, (_, ks, _) in inflight.items() if f not in hedged)
            if len(acks[k]) + coming < self.min_copies:
                # the last resort: a node that is slow, or replaying its hints, but not down
                # (a hint kept for it too is replayed later as a no-op)
                for n in prefs[k]:
                    if n in tried[k] or self.nodes.state(n) == "open":
                        continue
                    tried[k].add(n)
                    return n
            return None

        def launch(plan: dict[str, list[int]]) -> None:
            for n, ks in plan.items():
                body = {"epoch": config.epoch, "writer": self.nodes.writer_id,
                        "ops": [ops[k] for k in ks]}  # fmt: skip
                f = self.nodes.submit(n, "POST", path, body)
                f.add_done_callback(self._hint_on_failure(n, [ops[k] for k in ks]))
                limit = time.monotonic() + self.nodes.slow_limit(n, len(ks))
                inflight[f] = (n, ks, limit)

        inflight: dict[Any, tuple[str, list[int], float]] = {}
        hedged: set[Any] = set()
        plan: dict[str, list[int]] = {}
        for k in range(len(ops)):
            for _ in range(want[k] - len(acks[k])):
                node = assign(k)
                if node is None:
                    break
                plan.setdefault(node, []).append(k)
        launch(plan)
        stale: NodeAnswerError | None = None
        while inflight:
            now = time.monotonic()
            ahead = [t - now for f, (_, _, t) in inflight.items() if f not in hedged and t > now]
            done, _ = wait(list(inflight), timeout=min(ahead) if ahead else 0.05,
                           return_when=FIRST_COMPLETED)  # fmt: skip
            plan = {}
            for f in done:
                n, ks, _t = inflight.pop(f)
                hedged.discard(f)
                exc = f.exception()
                if exc is None:
                    for k, r in zip(ks, f.result()["results"], strict=True):
                        acks[k][n] = r
                    continue
                if isinstance(exc, NodeAnswerError):
                    if isinstance(exc.error, StaleEpochError):
                        stale = exc
                        continue
                    raise exc.error
                for k in ks:  # the node failed: the next node takes its copies
                    if ops[k]["op"] == "put":
                        m = assign(k)
                        if m is not None:
                            plan.setdefault(m, []).append(k)
            now = time.monotonic()
            for f, (n, ks, t) in list(inflight.items()):
                if now >= t and f not in hedged:
                    hedged.add(f)
                    self.nodes.suspect(n, "no answer to a write in time")
                    for k in ks:
                        if ops[k]["op"] == "put":
                            m = assign(k)
                            if m is not None:
                                plan.setdefault(m, []).append(k)
            launch(plan)
            # done when every op has its copies, or what is left is waiting on slow nodes
            if all(f in hedged for f in inflight) and all(
                len(acks[k]) >= min(want[k], self.min_copies) for k in range(len(ops))
            ):
                break
        if stale is not None:
            raise stale
        short = [k for k in range(len(ops)) if len(acks[k]) < self.min_copies]
        if short:
            k = short[0]
            what = ops[k]["doc"]["id"] if ops[k]["op"] == "put" else ops[k]["id"]
            raise ServiceUnavailableError(
                f"{len(short)} write(s) reached fewer than {self.min_copies} node(s) (e.g. "
                f"{what!r}: {len(acks[k])}); nothing about them is acknowledged: send them again "
                "when nodes are back"
            )
        return [list(a.values()) for a in acks]

    def _hint_on_failure(self, node: str, ops: list[dict[str, Any]]) -> Any:
        def done(f: Any) -> None:
            exc = f.exception()
            if isinstance(exc, NodeDown):
                self.nodes.add_hints(node, self.namespace, ops)

        return done

    def get(self, doc_id: str) -> dict[str, Any]:
        """The stored document: the newest copy on the usable nodes, unless a tombstone at
        least as new says it was deleted (then NotFoundError; the stale copies are deleted)."""
        from ..service.client import id_segment

        path = namespace_path(self.namespace, "docs/" + id_segment(doc_id))
        # a read asks no spares: it waits for the nodes it asked first
        answers, errors = self.nodes.fan_out("GET", path, enough=self._covered, spares=False)
        for exc in errors.values():
            if isinstance(exc, NodeAnswerError):
                raise exc.error
        if not answers:
            raise ServiceUnavailableError("no node of the cluster answered")
        dead = max((a["tombstone"] or 0 for a in answers.values()), default=0)
        best: dict[str, Any] | None = None
        best_v = -1
        stale = []
        for node, a in answers.items():
            if a["doc"] is None or doc_id in self.nodes.hinted_deletes(node, self.namespace):
                continue
            v = int(a["version"] or 0)
            if dead and v <= dead:
                stale.append(node)
            elif v > best_v:
                best, best_v = a["doc"], v
        if stale:  # read repair: the delete these copies missed
            op = {"op": "delete", "id": doc_id, "version": dead}
            body = {"epoch": self.config.epoch, "ops": [op]}
            for n in stale:
                self.nodes.submit(n, "POST", namespace_path(self.namespace, "write"), body)
        if best is None:
            if not self._covered(answers):
                raise self._coverage_error(answers)
            raise NotFoundError(f"document {doc_id!r} not found")
        meta = best.get("metadata")
        if isinstance(meta, dict) and VERSION_KEY in meta:
            rest = {k: v for k, v in meta.items() if k != VERSION_KEY}
            best = {**best, "metadata": rest or None}
        return best

    def create_namespace(self, name: str | None = None) -> None:
        from urllib.parse import quote

        ns = name or self.namespace
        for n in self.config.names:
            try:
                self.nodes.request(n, "PUT", f"/v1/ns/{quote(ns, safe='')}", {})
            except NodeAnswerError as exc:
                raise exc.error from None
            except NodeDown as exc:
                raise ServiceUnavailableError(str(exc)) from None

    def status(self) -> list[dict[str, Any]]:
        """Per node: url, weight, ring share, state, documents, whether it holds the namespace,
        index settings (or the error: a node that does not answer)."""
        shares = self.ring.shares()
        ns = self.namespace

        def one(n: str) -> dict[str, Any]:
            h = self.nodes.request(n, "GET", "/healthz", breaker=False, timeout=2.0)
            try:
                info = self.nodes.request(n, "GET", f"/v1/ns/{ns}", breaker=False, timeout=2.0)
            except NodeAnswerError as exc:  # the node answers; the namespace is what is missing
                if exc.status != 404:
                    raise
                return {"documents": h.get("documents"), "stats": None}
            return {"documents": h.get("documents"), "stats": info.get("stats", {})}

        futures = {n: self.nodes.executor.submit(one, n) for n in self.config.names}
        rows = []
        for spec in self.config.nodes:
            row: dict[str, Any] = {
                "name": spec.name, "url": spec.url, "weight": spec.weight,
                "share": shares[spec.name], "state": self.nodes.state(spec.name),
                "hints": self.nodes.hint_count(spec.name),
            }  # fmt: skip
            try:
                a = futures[spec.name].result()
            except (NodeDown, NodeAnswerError) as exc:
                row["up"] = False
                row["error"] = str(exc)
            else:
                row["up"] = True
                row["documents"] = a["documents"]
                row["namespace"] = a["stats"] is not None  # False: the node lacks it
                row["index"] = {k: (a["stats"] or {}).get(k) for k in INDEX_SETTINGS}
            rows.append(row)
        return rows

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._lease_until > time.monotonic():
            for n in self.nodes.usable_nodes():
                self._release(n)
        if self._own:
            self.nodes.close()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
