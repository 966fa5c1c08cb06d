"""A router process for a cluster (issue 27): the single-node HTTP API in front of several nodes.

``neardup cluster router -c cluster.toml --port 8090`` serves the document routes of
``neardup serve`` (``{p}/check``, ``{p}/insert``, ``{p}/check-and-insert``, ``GET``/``DELETE``
``{p}/docs/{id}``, ``/healthz``) and answers them through one
:class:`~neardup.cluster.ClusterClient` per namespace, so an unchanged
:class:`neardup.Client` talks to the whole cluster. Because every writer behind one router
shares its ClusterClient, the router is the namespace's sequencer: of near-duplicates that
reach it together, exactly one is kept (docs/cluster.md).

Errors have the service's shape (``{"error": {"code", "message"}}``, statuses from
:func:`neardup.errors.http_status_for`). Writes need the router's token when one is set.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from ..errors import InputError, NeardupError, error_code, http_status_for, require

require("fastapi", "service", "the cluster router")

from fastapi import FastAPI, Request  # noqa: E402
from fastapi.responses import Response  # noqa: E402
from starlette.concurrency import run_in_threadpool  # noqa: E402

from ..service.auth import check_write_token  # noqa: E402
from ..service.config import validate_namespace  # noqa: E402
from .client import ClusterClient, ClusterConfig  # noqa: E402

__all__ = ["create_router"]

_WRITES = {"check": False, "insert": True, "check-and-insert": True}


def _json(payload: Any, status: int = 200) -> Response:
    return Response(
        json.dumps(payload, ensure_ascii=False, separators=(",", ":")),
        status_code=status,
        media_type="application/json",
    )


def create_router(
    config: ClusterConfig,
    *,
    token: str | None = None,
    node_token: str | None = None,
    client_factory: Callable[..., ClusterClient] | None = None,
    **client_kwargs: Any,
) -> FastAPI:
    """The router application. ``token`` guards its write routes; ``node_token`` is sent to
    the nodes (default: ``token``); ``client_kwargs`` go to every :class:`ClusterClient`."""
    clients: dict[str, ClusterClient] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        for cc in clients.values():
            cc.close()

    app = FastAPI(title="neardup cluster router", docs_url=None, redoc_url=None, lifespan=lifespan)
    lock = threading.Lock()
    make = client_factory or ClusterClient
    send_token = token if node_token is None else node_token

    def cluster(namespace: str) -> ClusterClient:
        with lock:
            cc = clients.get(namespace)
            if cc is None:
                cc = make(config, token=send_token, namespace=namespace, **client_kwargs)
                clients[namespace] = cc
            return cc

    @app.exception_handler(NeardupError)
    async def _error(request: Request, exc: NeardupError) -> Response:
        return _json(
            {"error": {"code": error_code(exc), "message": str(exc)}}, http_status_for(exc)
        )

    async def decide(request: Request, namespace: str, op: str) -> Response:
        if _WRITES[op]:
            check_write_token(request.headers, token)
        try:
            body = json.loads(await request.body())
        except ValueError as exc:
            raise InputError(f"the request body is not JSON ({exc})") from None
        docs = body["documents"] if isinstance(body, dict) and "documents" in body else body
        if not isinstance(docs, dict | list):
            raise InputError("send a document {'id', 'text'} or {'documents': [...]}")
        cc = cluster(validate_namespace(namespace))
        fn = {"check": cc.check, "insert": cc.insert, "check-and-insert": cc.check_and_insert}[op]
        out = await run_in_threadpool(fn, docs)
        if isinstance(out, list):
            return _json({"results": [d.to_dict() for d in out]})
        return _json(out.to_dict())

    for op in _WRITES:

        def bind(op: str = op) -> None:
            async def default_ns(request: Request) -> Response:
                return await decide(request, "default", op)

            async def named_ns(request: Request, namespace: str) -> Response:
                return await decide(request, namespace, op)

            app.add_api_route(f"/v1/{op}", default_ns, methods=["POST"])
            app.add_api_route(f"/v1/ns/{{namespace}}/{op}", named_ns, methods=["POST"])

        bind()

    async def get_doc(namespace: str, doc_id: str) -> Response:
        return _json(await run_in_threadpool(cluster(namespace).get, doc_id))

    async def delete_doc(request: Request, namespace: str, doc_id: str) -> Response:
        check_write_token(request.headers, token)
        await run_in_threadpool(cluster(namespace).delete, doc_id)
        return _json({"id": doc_id, "deleted": True})

    @app.get("/v1/docs/{doc_id:path}")
    async def get_default(doc_id: str) -> Response:
        return await get_doc("default", doc_id)

    @app.get("/v1/ns/{namespace}/docs/{doc_id:path}")
    async def get_named(namespace: str, doc_id: str) -> Response:
        return await get_doc(validate_namespace(namespace), doc_id)

    @app.delete("/v1/docs/{doc_id:path}")
    async def delete_default(request: Request, doc_id: str) -> Response:
        return await delete_doc(request, "default", doc_id)

    @app.delete("/v1/ns/{namespace}/docs/{doc_id:path}")
    async def delete_named(request: Request, namespace: str, doc_id: str) -> Response:
        return await delete_doc(request, validate_namespace(namespace), doc_id)

    @app.get("/healthz")
    async def healthz() -> Response:
        rows = await run_in_threadpool(cluster("default").status)
        up = sum(r["up"] for r in rows)
        ok = up >= len(rows) - config.replicas + 1  # every range has a live replica at worst
        return _json(
            {
                "status": "ok" if ok else "degraded",
                "nodes": {r["name"]: ("up" if r["up"] else "down") for r in rows},
                "stored_copies": sum(r.get("documents") or 0 for r in rows),
            },
            200 if ok else 503,
        )

    return app
