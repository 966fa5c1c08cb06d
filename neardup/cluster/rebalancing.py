"""Rebalancing: put every document on exactly its R nodes of a cluster file, without ever
bringing a deleted document back (docs/cluster.md, "Membership changes and rebalancing").

:func:`rebalance` first tells every node the target membership and epoch (so a router still on
the old ring is refused from then on and reloads), then lists every node's documents with
their versions (``GET {p}/export``) and every node's tombstones, and:

* a copy whose version is not newer than the id's newest tombstone anywhere is **deleted**
  (the delete it missed, sent as the tombstone itself), never copied;
* a live document is **copied** (its newest version, read from one holder's export pages) to
  every target that lacks it, through the versioned write route, which a node refuses for an
  id it holds a newer tombstone of;
* only after all its targets acknowledged it is it **dropped** from nodes that are not targets
  (a drop removes a copy without a tombstone).

A journal next to the cluster file records the old and new cluster and each step; every step
is idempotent, so an interrupted run is resumed by running it again.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..errors import ConfigError, ServiceUnavailableError
from ..service.export import export_page
from ..service.replication import VERSION_KEY, StaleEpochError, doc_version
from .config import INDEX_SETTINGS, ClusterConfig, NodeSpec, atomic_write
from .nodes import NodeAnswerError, NodeDown, NodePool, namespace_path
from .ring import key_hash

__all__ = [
    "RebalanceReport",
    "check_current",
    "check_index_settings",
    "export_page",
    "push_membership",
    "rebalance",
    "start_journal",
]

log = logging.getLogger("neardup.cluster")


@dataclass
class RebalanceReport:
    """What a :func:`rebalance` run did."""

    scanned: int = 0  # (document, node) pairs listed
    documents: int = 0  # distinct documents seen
    copied: int = 0  # copies written
    deleted: int = 0  # copies removed from nodes that are not targets
    tombstoned: int = 0  # stale copies removed (a delete they had missed)
    skipped_nodes: list[str] = field(default_factory=list)  # nodes that could not be listed
    complete: bool = True  # False when a node was down: run again when it is back

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _union(target: ClusterConfig, previous: ClusterConfig | None) -> ClusterConfig:
    """A config naming every node of ``target`` and ``previous`` (to reach them all)."""
    specs = {n.name: n for n in (previous.nodes if previous else ())} | {
        n.name: n for n in target.nodes
    }
    return ClusterConfig(tuple(specs.values()), 1, target.vnodes, target.epoch)


def push_membership(
    target: ClusterConfig,
    previous: ClusterConfig | None = None,
    *,
    token: str | None = None,
    timeout: float = 10.0,
    pool: NodePool | None = None,
) -> list[str]:
    """Tell every node of ``target`` and ``previous`` the target membership and epoch
    (``PUT /v1/cluster``); returns the nodes that did not answer (they are told when a router
    reaches them again). A node at a newer epoch than ``target`` is a ConfigError."""
    own = pool is None
    pool = pool or NodePool(_union(target, previous), token=token, timeout=timeout)
    missed = []
    try:
        for name in pool.names:
            try:
                pool.request(
                    name, "PUT", "/v1/cluster", pool.membership(name, target), breaker=False
                )
            except NodeDown as exc:
                log.warning("could not tell node %s the new membership: %s", name, exc)
                missed.append(name)
            except NodeAnswerError as exc:
                if not isinstance(exc.error, StaleEpochError):
                    raise exc.error from None  # (a refused token: its own error and exit code)
                raise ConfigError(
                    f"node {name} refused the membership of epoch {target.epoch}: {exc.error}"
                ) from None
    finally:
        if own:
            pool.close()
    return missed


def check_current(
    config: ClusterConfig, *, token: str | None = None, timeout: float = 10.0
) -> dict[str, int | None]:
    """Each node's cluster epoch (``GET /v1/cluster``; None: it did not answer), read only.
    A node at a newer epoch than ``config`` means the file is not the one the last membership
    change wrote: :class:`ConfigError`, before anything is recorded or sent. A node's refusal
    (a token that may not read it) is raised as the node's error."""
    pool = NodePool(_union(config, None), token=token, timeout=timeout)
    epochs: dict[str, int | None] = {}
    try:
        futures = {
            n: pool.executor.submit(pool.request, n, "GET", "/v1/cluster", breaker=False)
            for n in pool.names
        }
        for name, f in futures.items():
            try:
                epochs[name] = int(f.result().get("epoch", 0))
            except NodeDown:
                epochs[name] = None
            except NodeAnswerError as exc:
                raise exc.error from None
    finally:
        pool.close()
    newer = {n: e for n, e in epochs.items() if e is not None and e > config.epoch}
    if newer:
        name, epoch = max(newer.items(), key=lambda kv: kv[1])
        raise ConfigError(
            f"node {name} is at cluster epoch {epoch} but the cluster file is at {config.epoch}: "
            "use the cluster file the last `neardup cluster add-node/remove-node` wrote; "
            "nothing was changed"
        )
    return epochs


def _prefix(namespace: str) -> str:
    return "/v1" if namespace == "default" else f"/v1/ns/{quote(namespace, safe='')}"


def _iter_export(pool: NodePool, node: str, namespace: str, page: int) -> Iterator[dict[str, Any]]:
    after = ""
    while True:
        data = pool.request(
            node, "GET", f"{_prefix(namespace)}/export", params={"after": after, "limit": page},
            breaker=False,
        )  # fmt: skip
        yield from data["documents"]
        if data.get("next") is None:
            return
        after = data["next"]


def _iter_tombstones(pool: NodePool, node: str, namespace: str) -> Iterator[tuple[str, int]]:
    after = 0
    while True:
        data = pool.request(
            node, "GET", namespace_path(namespace, "tombstones"),
            params={"after": after, "limit": 10_000}, breaker=False,
        )  # fmt: skip
        for t in data["tombstones"]:
            yield str(t[1]), int(t[2])
        if data.get("next") is None:
            return
        after = int(data["next"])


def start_journal(
    journal: str | os.PathLike[str], target: ClusterConfig, previous: ClusterConfig | None
) -> None:
    """Record a membership change before it is applied: :func:`rebalance` with this journal
    resumes it (its configs win), so a crash between saving the new cluster file and moving
    the data loses nothing (a node being removed is still read from)."""
    head = {"target": target.to_dict(), "previous": previous.to_dict() if previous else None}
    atomic_write(Path(journal), json.dumps(head) + "\n")


def check_index_settings(
    config: ClusterConfig, node: NodeSpec, namespace: str = "default", token: str | None = None
) -> None:
    """Refuse a node whose index settings differ from the cluster's (or that is not up);
    ``token``: one the nodes let read their namespace statistics."""
    pool = NodePool(_union(config.with_node(node), None), token=token, timeout=10.0)
    try:

        def settings(name: str) -> dict[str, Any]:
            try:
                stats = pool.request(name, "GET", f"/v1/ns/{namespace}", breaker=False)["stats"]
            except NodeDown as exc:
                raise ServiceUnavailableError(str(exc)) from None
            except NodeAnswerError as exc:
                raise exc.error from None
            return {k: stats.get(k) for k in INDEX_SETTINGS}

        theirs = settings(node.name)
        for spec in config.nodes:
            try:
                ours = settings(spec.name)
            except ServiceUnavailableError:
                continue
            if ours != theirs:
                raise ConfigError(
                    f"node {node.name!r} ({node.url}) has index settings {theirs}, the cluster's "
                    f"node {spec.name!r} has {ours}; start it with the same --bits/-k/radius "
                    "settings"
                )
            return
        raise ServiceUnavailableError(
            "no node of the cluster answered: cannot compare index settings"
        )
    finally:
        pool.close()


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
    """Move documents so that each live one is on exactly its R target nodes of ``target``.

    Nodes listed are those of ``target`` and ``previous`` (a node being removed is read from
    until it is empty). See the module docstring for what is copied, deleted and dropped.

    ``journal``: a JSON-lines file; the first line records ``target`` and ``previous``, then
    one line per copy and drop. If the file exists, the run resumes it (its configs win over
    the arguments). ``copy_batch``: documents per write request of the copies. ``stop_after``
    stops after about that many copies/drops (whole batches; tests of resuming).
    The journal is removed when a run completes.
    """
    jpath = Path(journal) if journal is not None else None
    made = False  # this call wrote the journal (a repair): removed if it fails before any step
    if jpath is not None and jpath.exists() and jpath.stat().st_size:
        recorded = jpath.read_text(encoding="utf-8")
        head = json.loads(recorded.splitlines()[0])
        given = {
            "target": target.to_dict(),
            "previous": previous.to_dict() if previous else None,
        }
        # (the change add-node just recorded, with no step yet, is not a resume)
        if head != given or recorded.count("\n") > 1:
            log.warning("resuming the rebalance recorded in %s", jpath)
        target = ClusterConfig.from_dict(head["target"], source=f"{jpath} (target)")
        previous = (
            ClusterConfig.from_dict(head["previous"], source=f"{jpath} (previous)")
            if head.get("previous") else None
        )  # fmt: skip
    elif jpath is not None:
        start_journal(jpath, target, previous)
        made = previous is None
    pool = NodePool(_union(target, previous), token=token, timeout=timeout)
    report = RebalanceReport()
    jf = open(jpath, "a", encoding="utf-8") if jpath is not None else None  # noqa: SIM115
    try:
        down = set(push_membership(target, previous, pool=pool))
        _run(
            pool, target, namespace, page, copy_batch, stop_after, report, down,
            lambda entry: _note(jf, entry),
        )  # fmt: skip
    except BaseException:
        # a repair that failed before its first step (a token the nodes refuse) leaves no
        # journal: it recorded no change, and `cluster status` would report one in progress
        if made and jpath is not None and jf is not None:
            jf.flush()
            if jpath.read_text(encoding="utf-8").count("\n") <= 1:
                jf.close()
                jpath.unlink(missing_ok=True)
        raise
    finally:
        if jf is not None:
            jf.close()
        pool.close()
    if report.complete and jpath is not None:
        jpath.unlink(missing_ok=True)
    return report


def _note(jf: Any, entry: dict[str, Any]) -> None:
    if jf is not None:
        jf.write(json.dumps(entry) + "\n")
        jf.flush()


def _run(
    pool: NodePool,
    target: ClusterConfig,
    namespace: str,
    page: int,
    copy_batch: int,
    stop_after: int | None,
    report: RebalanceReport,
    down: set[str],
    note: Any,
) -> RebalanceReport:
    holders: dict[str, dict[str, int]] = {}  # id -> node -> version
    dead: dict[str, int] = {}  # id -> newest tombstone version on any node
    for name in pool.names:
        if name in down:
            report.skipped_nodes.append(name)
            report.complete = False
            continue
        try:
            for doc in _iter_export(pool, name, namespace, page):
                holders.setdefault(doc["id"], {})[name] = doc_version(doc)
                report.scanned += 1
            for doc_id, v in _iter_tombstones(pool, name, namespace):
                if v > dead.get(doc_id, -1):
                    dead[doc_id] = v
        except NodeDown as exc:
            log.warning("rebalance: node %s cannot be listed (%s); run again later", name, exc)
            report.skipped_nodes.append(name)
            report.complete = False
            down.add(name)
        except NodeAnswerError as exc:
            if exc.status != 404:  # a node without the namespace holds nothing of it
                raise exc.error from None
    report.documents = len(holders)
    ring = target.ring()
    epoch = target.epoch
    path = namespace_path(namespace, "write")
    steps = 0

    def write(node: str, ops: list[dict[str, Any]]) -> list[str] | None:
        if node in down:
            report.complete = False
            return None
        try:
            return list(pool.request(node, "POST", path, {"epoch": epoch, "ops": ops},
                                     breaker=False)["results"])  # fmt: skip
        except NodeDown as exc:
            log.warning("rebalance: node %s failed (%s); run again later", node, exc)
            down.add(node)
            report.complete = False
            return None
        except NodeAnswerError as exc:
            raise exc.error from None

    # 1. copies that missed a delete: the tombstone itself (never copied anywhere)
    stale: dict[str, list[dict[str, Any]]] = {}
    for doc_id, have in holders.items():
        t = dead.get(doc_id)
        if t is None:
            continue
        for n, v in list(have.items()):
            if v <= t:
                stale.setdefault(n, []).append({"op": "delete", "id": doc_id, "version": t})
                del have[n]
    for n, ops in sorted(stale.items()):
        for k in range(0, len(ops), copy_batch):
            if write(n, ops[k : k + copy_batch]) is not None:
                report.tombstoned += len(ops[k : k + copy_batch])
    live = {d: h for d, h in holders.items() if h}
    want_of = {d: set(ring.nodes_for(d, target.replicas)) for d in live}
    # 2. copies, read from a holder of the newest version
    copy_from: dict[str, set[str]] = {}
    for doc_id, have in live.items():
        if want_of[doc_id] - set(have):
            newest = max(have.values())
            source = next((n for n in sorted(have) if have[n] == newest and n not in down), None)
            if source is None:
                report.complete = False
                continue
            copy_from.setdefault(source, set()).add(doc_id)

    def flush(n: str, batch: list[dict[str, Any]]) -> None:
        nonlocal steps
        results = write(n, batch)
        if results is None:
            return
        for op, r in zip(batch, results, strict=True):
            doc_id = op["doc"]["id"]
            if r == "stored":
                live[doc_id][n] = op["version"]
                note({"copied": doc_id, "to": n})
        report.copied += len(batch)
        steps += len(batch)

    for source in sorted(copy_from):
        todo = copy_from[source]
        batches: dict[str, list[dict[str, Any]]] = {}
        try:
            for doc in _iter_export(pool, source, namespace, page):
                if doc["id"] not in todo:
                    continue
                if "text" not in doc:
                    raise ConfigError(
                        f"document {doc['id']!r} on {source} has no stored text; a cluster needs "
                        "`neardup serve --store-text` (the default) to move documents"
                    )
                version = doc_version(doc)
                body: dict[str, Any] = {k: doc[k] for k in ("id", "text", "time") if k in doc}
                meta = {k: v for k, v in (doc.get("metadata") or {}).items() if k != VERSION_KEY}
                if meta:
                    body["metadata"] = meta
                op = {"op": "put", "doc": body, "version": version}
                for n in sorted(want_of[doc["id"]] - set(live[doc["id"]])):
                    batch = batches.setdefault(n, [])
                    batch.append(op)
                    if len(batch) >= copy_batch:
                        flush(n, batch)
                        batches[n] = []
                        if stop_after is not None and steps >= stop_after:
                            report.complete = False
                            return report
        except NodeDown as exc:
            log.warning("rebalance: node %s failed (%s); run again later", source, exc)
            down.add(source)
            report.complete = False
        for n, batch in batches.items():
            if batch:
                flush(n, batch)
        if stop_after is not None and steps >= stop_after:
            report.complete = False
            return report
    # 3. drops, only where every target acknowledged its copy (copies before drops)
    drops: dict[str, list[str]] = {}
    for doc_id in sorted(live, key=key_hash):
        have, want = live[doc_id], want_of[doc_id]
        if not want <= set(have):
            continue
        for n in sorted(set(have) - want):
            drops.setdefault(n, []).append(doc_id)
    for n, ids in sorted(drops.items()):
        for k in range(0, len(ids), copy_batch):
            chunk = ids[k : k + copy_batch]
            if stop_after is not None:
                chunk = chunk[: max(1, stop_after - steps)]
            if write(n, [{"op": "drop", "id": i} for i in chunk]) is None:
                break
            for i in chunk:
                live[i].pop(n, None)
                note({"deleted": i, "from": n})
            report.deleted += len(chunk)
            steps += len(chunk)
            if stop_after is not None and steps >= stop_after:
                report.complete = False
                return report
    if any(not want_of[d] <= set(h) for d, h in live.items()):
        report.complete = False
    return report
