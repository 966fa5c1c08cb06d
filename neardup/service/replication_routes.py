"""The ``/v1/cluster`` routes of ``neardup serve``: the node protocol of a cluster (state and
rules in :mod:`.replication`; docs/cluster.md). Registered by :func:`install` in
:func:`neardup.service.create_app`; every route needs a token that may write every namespace (the node's ``--token``, or a token file's ``write *``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from ..errors import InputError
from .auth import Authenticator
from .http_errors import RequestValidationFailed
from .limits import error_response_bytes
from .replication import ClusterNode, StaleEpochError
from .schema import dumps, loads

__all__ = ["install"]


def install(app: Any, registry: Any, config: Any, auth: Authenticator) -> ClusterNode:
    """Add the ``/v1/cluster`` routes to the service ``app`` and run :meth:`ClusterNode.start`
    after the stores are open and before requests are served."""
    node = ClusterNode(
        registry,
        data_dir=config.data_path,
        token=config.token,
        max_batch=config.max_batch,
    )

    def answer(payload: Any, status: int = 200) -> Response:
        body = payload if isinstance(payload, bytes) else dumps(payload)
        return Response(body, status_code=status, media_type="application/json")

    async def guarded(request: Request, fn: Callable[[], Any]) -> Response:
        auth.authorize(request.headers.get("authorization"), None, write=True)
        try:
            return answer(await run_in_threadpool(fn))
        except StaleEpochError as exc:
            body = loads(error_response_bytes(exc.code, str(exc)))
            body["node_epoch"] = exc.node_epoch
            return answer(body, 409)

    async def json_body(request: Request) -> Any:
        body = loads(await request.body())
        if not isinstance(body, dict):
            raise RequestValidationFailed("body", "must be a JSON object")
        return body

    tags = ["cluster"]
    # every route needs the write token (checked in guarded): the scheme in the OpenAPI
    # document, so that /docs' "Authorize" sends it to these routes too
    secured: dict[str, Any] = {"security": [{"bearerToken": []}]}

    @app.get("/v1/cluster", tags=tags, openapi_extra=secured, summary="This node's cluster view")
    async def view(request: Request) -> Response:
        return await guarded(request, node.view)

    @app.put(
        "/v1/cluster",
        tags=tags,
        openapi_extra=secured,
        summary="Join: the cluster's epoch and membership",
    )
    async def join(request: Request) -> Response:
        body = await json_body(request)
        return await guarded(request, lambda: node.join(body))

    @app.post(
        "/v1/cluster/sync",
        tags=tags,
        openapi_extra=secured,
        summary="Pull the peers' tombstones now",
    )
    async def sync(request: Request) -> Response:
        return await guarded(request, node.pull)

    @app.post(
        "/v1/cluster/ns/{namespace}/lease",
        tags=tags,
        openapi_extra=secured,
        summary="Take the write lease",
    )
    async def lease(request: Request, namespace: str) -> Response:
        body = await json_body(request)
        return await guarded(request, lambda: node.lease(namespace, body))

    @app.delete(
        "/v1/cluster/ns/{namespace}/lease",
        tags=tags,
        openapi_extra=secured,
        summary="Give the lease back",
    )
    async def release(request: Request, namespace: str, writer: str) -> Response:
        return await guarded(request, lambda: node.release(namespace, writer))

    @app.post(
        "/v1/cluster/ns/{namespace}/check",
        tags=tags,
        openapi_extra=secured,
        summary="Check for a router",
    )
    async def check(request: Request, namespace: str) -> Response:
        body = await json_body(request)
        return await guarded(request, lambda: node.check(namespace, body))

    @app.post(
        "/v1/cluster/ns/{namespace}/write",
        tags=tags,
        openapi_extra=secured,
        summary="Versioned writes",
    )
    async def write(request: Request, namespace: str) -> Response:
        body = await json_body(request)
        return await guarded(request, lambda: node.write(namespace, body))

    @app.get(
        "/v1/cluster/ns/{namespace}/docs/{doc_id:path}",
        tags=tags,
        openapi_extra=secured,
        summary="Versioned get",
    )
    async def document(request: Request, namespace: str, doc_id: str) -> Response:
        return await guarded(request, lambda: node.document(namespace, doc_id))

    @app.get(
        "/v1/cluster/ns/{namespace}/tombstones",
        tags=tags,
        openapi_extra=secured,
        summary="Tombstones (paged)",
    )
    async def tombstones(
        request: Request, namespace: str, after: int = 0, limit: int = 1000
    ) -> Response:
        if not 1 <= limit <= 10_000 or after < 0:
            raise InputError(f"limit must be in 1..10000 and after >= 0, got {limit}, {after}")
        return await guarded(request, lambda: node.tombstone_page(namespace, after, limit))

    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            await run_in_threadpool(node.start)
            try:
                yield state
            finally:
                node.close()

    app.router.lifespan_context = lifespan
    app.state.cluster_node = node
    return node
