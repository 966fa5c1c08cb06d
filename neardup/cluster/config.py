"""The cluster file: the nodes, the replication factor, the ring's vnodes and the epoch.

TOML (or JSON with the same keys, by the ``.json`` suffix)::

    epoch = 3            # optional: bumped by every membership change (add-node, remove-node)
    vnodes = 6144        # optional
    replicas = 2         # optional (R)
    [[nodes]]
    name = "n1"
    url = "http://10.0.0.1:8080"
    weight = 1.0         # optional

The **epoch** orders membership changes: ``neardup cluster add-node`` / ``remove-node`` write the
file with the epoch + 1 and push it to every node; a node answers a request of another epoch
with 409 ``stale_epoch``, so a router or client still on the old ring reloads the file instead
of writing to the old owners (docs/cluster.md, "Epochs").
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .._durable import fsync_dir
from ..errors import ConfigError, NotFoundError
from .ring import DEFAULT_VNODES, HashRing

__all__ = ["INDEX_SETTINGS", "ClusterConfig", "NodeSpec", "atomic_write"]

#: index settings that must be equal on every node (a node that differs is refused)
INDEX_SETTINGS = ("bits", "max_distance", "search_radius")


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
    epoch: int = 0

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ConfigError("a cluster needs at least one node ([[nodes]] with name and url)")
        seen: set[str] = set()
        where: dict[tuple[str, str, int | None, str], str] = {}
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
            # one server under two names would hold both names' copies: R copies on fewer
            # than R servers (a rebalance onto it deleted the second copies it counted there)
            default_port = 443 if parts.scheme == "https" else 80
            try:
                port = parts.port or default_port
            except ValueError as exc:
                raise ConfigError(f"node {n.name!r}: url {n.url!r}: {exc}") from None
            address = (parts.scheme, (parts.hostname or "").lower(), port, parts.path.rstrip("/"))
            if address in where:
                raise ConfigError(
                    f"node {n.name!r} has the url of node {where[address]!r} ({n.url}); every "
                    "node is its own server: one server under two names would hold both "
                    "names' copies"
                )
            where[address] = n.name
        r = self.replicas
        if isinstance(r, bool) or not isinstance(r, int) or r < 1:
            raise ConfigError(f"replicas must be a positive integer, got {r!r}")
        if r > len(self.nodes):
            raise ConfigError(
                f"replicas = {r} but the cluster has only {len(self.nodes)} node(s); "
                "replicas must be on distinct nodes: lower replicas or add nodes"
            )
        e = self.epoch
        if isinstance(e, bool) or not isinstance(e, int) or e < 0:
            raise ConfigError(f"epoch must be an integer >= 0, got {e!r}")
        self.ring()  # weights and vnodes checked by the ring

    def ring(self) -> HashRing:
        return HashRing(
            [n.name for n in self.nodes],
            vnodes=self.vnodes,
            weights={n.name: n.weight for n in self.nodes},
        )

    def with_epoch(self, epoch: int) -> ClusterConfig:
        return replace(self, epoch=epoch)

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
        return ClusterConfig((*self.nodes, spec), self.replicas, self.vnodes, self.epoch + 1)

    def without_node(self, name: str) -> ClusterConfig:
        self.node(name)
        rest = tuple(n for n in self.nodes if n.name != name)
        if len(rest) < self.replicas:
            raise ConfigError(
                f"removing {name!r} leaves {len(rest)} node(s), fewer than replicas = "
                f"{self.replicas}; add a node first or lower replicas"
            )
        return ClusterConfig(rest, self.replicas, self.vnodes, self.epoch + 1)

    # file round trip
    def to_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "vnodes": self.vnodes,
            "replicas": self.replicas,
            "nodes": [{"name": n.name, "url": n.url, "weight": n.weight} for n in self.nodes],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "cluster file") -> ClusterConfig:
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source}: expected a table/object at the top level")
        unknown = sorted(set(data) - {"epoch", "vnodes", "replicas", "nodes"})
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
        return cls(
            tuple(nodes),
            data.get("replicas", 2),
            data.get("vnodes", DEFAULT_VNODES),
            data.get("epoch", 0),
        )

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
        lines = [
            f"epoch = {self.epoch}",
            f"vnodes = {self.vnodes}",
            f"replicas = {self.replicas}",
            "",
        ]
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
        atomic_write(p, self.dumps("json" if p.suffix.lower() == ".json" else "toml"))


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file, fsync, rename)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
