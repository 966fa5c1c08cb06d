"""The online service: an HTTP API (FastAPI + uvicorn) around :class:`neardup.online.Deduplicator`.

* :mod:`neardup.service.app` -- ``create_app(config)``, the ASGI application
* :mod:`neardup.service.documents` -- the hot path: check / insert / check-and-insert requests
* :mod:`neardup.service.config` -- :class:`ServiceConfig`
* :mod:`neardup.service.namespaces` -- namespace -> deduplicator registry under the data dir
* :mod:`neardup.service.schema` -- request parsing and the documented JSON shapes
* :mod:`neardup.service.auth`, :mod:`~neardup.service.limits`, :mod:`~neardup.service.metrics`
* :mod:`neardup.service.client` -- :class:`neardup.Client` (httpx, synchronous)

Run it with ``neardup serve --data DIR`` (see ``docs/service.md``). Importing this package is
cheap; FastAPI is only imported by :mod:`neardup.service.app`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Client", "ServiceConfig", "create_app"]

_EXPORTS = {
    "Client": "neardup.service.client",
    "ServiceConfig": "neardup.service.config",
    "create_app": "neardup.service.app",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'neardup.service' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


if TYPE_CHECKING:  # pragma: no cover
    from .app import create_app
    from .client import Client
    from .config import ServiceConfig
