"""Several machines: the consistent-hash ring (:mod:`.ring`), the cluster file
(:mod:`.config`), the shared node access with its circuit breakers and hints (:mod:`.nodes`),
the cluster client (:mod:`.client`), rebalancing (:mod:`.rebalancing`), and the router that
serves the single-node API (:mod:`.router`). See docs/cluster.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# public name -> module that defines it (imported on first use)
_EXPORTS: dict[str, str] = {
    "ClusterClient": ".client",
    "ClusterConfig": ".config",
    "DEFAULT_VNODES": ".ring",
    "HashRing": ".ring",
    "KeyRange": ".ring",
    "MAX_POINTS": ".ring",
    "NodePool": ".nodes",
    "NodeSpec": ".config",
    "RebalanceReport": ".rebalancing",
    "RingSnapshot": ".ring",
    "check_index_settings": ".rebalancing",
    "create_router": ".router",
    "export_page": ".rebalancing",
    "key_hash": ".ring",
    "key_hash_many": ".ring",
    "push_membership": ".rebalancing",
    "rebalance": ".rebalancing",
    "start_journal": ".rebalancing",
}

__all__ = [
    "DEFAULT_VNODES",
    "MAX_POINTS",
    "ClusterClient",
    "ClusterConfig",
    "HashRing",
    "KeyRange",
    "NodePool",
    "NodeSpec",
    "RebalanceReport",
    "RingSnapshot",
    "check_index_settings",
    "create_router",
    "export_page",
    "key_hash",
    "key_hash_many",
    "push_membership",
    "rebalance",
    "start_journal",
]

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, __all__)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .client import ClusterClient
    from .config import ClusterConfig, NodeSpec
    from .nodes import NodePool
    from .rebalancing import (
        RebalanceReport,
        check_index_settings,
        export_page,
        push_membership,
        rebalance,
        start_journal,
    )
    from .ring import (
        DEFAULT_VNODES,
        MAX_POINTS,
        HashRing,
        KeyRange,
        RingSnapshot,
        key_hash,
        key_hash_many,
    )
    from .router import create_router
