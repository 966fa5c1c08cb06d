"""Several machines: the consistent-hash ring (:mod:`.ring`), the cluster client and
rebalancing (:mod:`.client`), and the router that serves the single-node API (:mod:`.router`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# public name -> module that defines it (imported on first use)
_EXPORTS: dict[str, str] = {
    "ClusterClient": ".client",
    "ClusterConfig": ".client",
    "DEFAULT_VNODES": ".ring",
    "HashRing": ".ring",
    "KeyRange": ".ring",
    "MAX_POINTS": ".ring",
    "NodeSpec": ".client",
    "RebalanceReport": ".client",
    "RingSnapshot": ".ring",
    "check_index_settings": ".client",
    "create_router": ".router",
    "export_page": ".client",
    "key_hash": ".ring",
    "key_hash_many": ".ring",
    "rebalance": ".client",
    "start_journal": ".client",
}

__all__ = [
    "DEFAULT_VNODES",
    "MAX_POINTS",
    "ClusterClient",
    "ClusterConfig",
    "HashRing",
    "KeyRange",
    "NodeSpec",
    "RebalanceReport",
    "RingSnapshot",
    "check_index_settings",
    "create_router",
    "export_page",
    "key_hash",
    "key_hash_many",
    "rebalance",
    "start_journal",
]

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, __all__)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .client import (
        ClusterClient,
        ClusterConfig,
        NodeSpec,
        RebalanceReport,
        check_index_settings,
        export_page,
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
