"""The router: the single-node HTTP API in front of a cluster (docs/cluster.md, "The router").

``neardup cluster router -c cluster.toml --port 8090`` serves the document routes of
``neardup serve`` (``{p}/check``, ``{p}/insert``, ``{p}/check-and-insert``, ``GET``/``DELETE``
``{p}/docs/{id}``, ``/healthz``), so an unchanged :class:`neardup.Client` talks to the whole
cluster. It is one writer of each namespace it serves (it holds the namespace's lease on the
nodes; see :class:`~neardup.cluster.ClusterClient`), so of near-duplicates that reach it
together exactly one is kept; a second router on the same namespace is refused (409
``lease_held``) while the first one writes.

Bounded by construction:

* one :class:`~neardup.cluster.nodes.NodePool` (one connection pool, one thread pool, one
  prober) for every namespace; per namespace only a small client object, made once the nodes
  say the namespace exists and kept in a bounded LRU (``max_namespaces``): a request for an
  unknown namespace is answered 404 and leaves nothing behind;
* bodies are limited while they are read (413 past ``max_body_bytes``, chunked too, never read
  whole first), then validated exactly as a node validates them (422 naming the field), before
  any node is asked;
* every error is JSON in the node's shape (``{"error": {"code", "message"}}``, statuses from
  :func:`neardup.errors.http_status_for`).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

from ..errors import (
    AuthError,
    ConfigError,
    ForbiddenError,
    InputError,
    NeardupError,
    NotFoundError,
    ServiceUnavailableError,
    require,
)

require("fastapi", "service", "the cluster router")

from fastapi import FastAPI, Request  # noqa: E402
from fastapi.exceptions import RequestValidationError  # noqa: E402
from fastapi.responses import Response  # noqa: E402
from starlette.concurrency import run_in_threadpool  # noqa: E402
from starlette.exceptions import HTTPException as StarletteHTTPException  # noqa: E402

from ..service.auth import Authenticator, authenticator_for  # noqa: E402
from ..service.config import (  # noqa: E402
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_BODY_BYTES,
    validate_namespace,
)
from ..service.documents import ShutdownAnswerMiddleware, error_parts  # noqa: E402
from ..service.limits import BodyLimitMiddleware, error_response_bytes  # noqa: E402
from ..service.schema import (  # noqa: E402
    dumps,
    encode_decisions,
    loads,
    parse_documents,
    request_error,
)
from .client import ClusterClient, write_options  # noqa: E402
from .config import ClusterConfig  # noqa: E402
from .nodes import NodeAnswerError, NodeDown, NodePool, covered  # noqa: E402

__all__ = ["DEFAULT_MAX_NAMESPACES", "create_router"]

#: namespaces whose client the router keeps (least recently used dropped first)
DEFAULT_MAX_NAMESPACES = 1024

_WRITES = {"check": False, "insert": True, "check-and-insert": True}
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}


def _json(payload: Any, status: int = 200) -> Response:
    body = payload if isinstance(payload, bytes) else dumps(payload)
    return Response(body, status_code=status, media_type="application/json")


class _Namespaces:
    """Namespace name -> :class:`ClusterClient`, for the namespaces the nodes have (bounded)."""

    def __init__(self, pool: NodePool, limit: int, client_kwargs: dict[str, Any]) -> None:
        self.pool = pool
        self.limit = limit
        self.kwargs = client_kwargs
        self._lock = threading.Lock()
        self._clients: OrderedDict[str, ClusterClient] = OrderedDict()

    def get(self, namespace: str) -> ClusterClient:
        validate_namespace(namespace)
        with self._lock:
            cc = self._clients.get(namespace)
            if cc is not None:
                self._clients.move_to_end(namespace)
                return cc
        if not self._exists(namespace):
            raise NotFoundError(
                f"namespace {namespace!r} does not exist on the cluster's nodes; create it on "
                f"every node first (PUT /v1/ns/{namespace} on each)"
            )
        with self._lock:
            cc = self._clients.get(namespace)
            if cc is None:
                cc = ClusterClient(self.pool.config, namespace=namespace, nodes=self.pool,
                                   **self.kwargs)  # fmt: skip
                self._clients[namespace] = cc
                while len(self._clients) > self.limit:
                    _, old = self._clients.popitem(last=False)
                    old.close()
            return cc

    def _exists(self, namespace: str) -> bool:
        """Ask the nodes (the first usable one that answers); nothing is kept for a no."""
        path = f"/v1/ns/{quote(namespace, safe='')}"
        for node in self.pool.usable_nodes():
            try:
                self.pool.request(node, "GET", path, timeout=2.0)
            except NodeAnswerError as exc:
                if exc.status == 404:
                    return False
                raise exc.error from None
            except NodeDown:
                continue
            return True
        raise ServiceUnavailableError("no node of the cluster answered")

    def __len__(self) -> int:
        return len(self._clients)

    def close(self) -> None:
        with self._lock:
            clients = list(self._clients.values())
            self._clients.clear()
        for cc in clients:
            cc.close()


def _check_options(**values: Any) -> None:
    """The router's numbers, refused before it starts (a bad one was met on every request,
    or at startup as a traceback)."""
    import math

    for name in ("timeout", "slow_after"):
        v = values[name]
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
            raise ConfigError(f"{name} must be a number of seconds > 0, got {v!r}")
    for name, low in (("max_batch", 1), ("max_namespaces", 1), ("max_body_bytes", 1024)):
        v = values[name]
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ConfigError(f"{name} must be an integer >= {low}, got {v!r}")


def create_router(
    config: ClusterConfig | str | os.PathLike[str],
    *,
    token: str | None = None,
    node_token: str | None = None,
    auth: Authenticator | None = None,
    timeout: float = 5.0,
    slow_after: float = 0.25,
    min_copies: int | None = None,
    lease_ttl: float = 10.0,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_batch: int = DEFAULT_MAX_BATCH,
    max_namespaces: int = DEFAULT_MAX_NAMESPACES,
    workers: int = 32,
    writer_id: str | None = None,
    transport: Any = None,
) -> FastAPI:
    """The router application.

    Parameters
    ----------
    config : ClusterConfig or path
        The cluster (a path is reloaded when a node reports a newer epoch).
    token : str, optional
        A token that may read and write every namespace through the router (when ``auth`` is
        not given); also sent to the nodes unless ``node_token``.
    node_token : str, optional
        The token sent to the nodes (one that may write every namespace there).
    auth : Authenticator, optional
        Who may read and write through the router (``neardup cluster router`` builds it from
        ``--token``, ``--read-token``, ``--token-file``, ``--open-reads``, as ``neardup
        serve`` does); default: ``token`` alone, or everything open when there is none.
    timeout, slow_after, min_copies, lease_ttl
        As :class:`ClusterClient`.
    max_body_bytes, max_batch
        As ``neardup serve``: 413 past them.
    max_namespaces : int
        Namespace clients kept (LRU).
    writer_id : str, optional
        The router's id in the nodes' leases (``neardup cluster router`` passes
        ``router@HOST:PORT``: a restarted router takes its leases back at once).
    """
    _check_options(
        timeout=timeout, slow_after=slow_after, max_batch=max_batch,
        max_namespaces=max_namespaces, max_body_bytes=max_body_bytes,
    )  # fmt: skip
    send_token = token if node_token is None else node_token
    if auth is None:
        auth = authenticator_for(token)
    pool = NodePool(
        config, token=send_token, timeout=timeout, slow_after=slow_after, workers=workers,
        writer_id=writer_id, transport=transport,
    )  # fmt: skip
    try:  # (refused at start: a bad one was refused on every request, reads too)
        write_options(min_copies, lease_ttl, pool.config.replicas)
    except ConfigError:
        pool.close()
        raise
    spaces = _Namespaces(pool, max_namespaces, {"min_copies": min_copies, "lease_ttl": lease_ttl})

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await run_in_threadpool(pool.join_all)
        try:
            yield
        finally:
            await run_in_threadpool(spaces.close)
            await run_in_threadpool(pool.close)

    app = FastAPI(
        title="neardup cluster router", docs_url=None, redoc_url=None, openapi_url=None,
        lifespan=lifespan,
    )  # fmt: skip  # (no OpenAPI of its own: the nodes' is the API it serves)
    app.state.pool = pool
    app.state.namespaces = spaces

    @app.exception_handler(NeardupError)
    async def _error(request: Request, exc: NeardupError) -> Response:
        node = getattr(exc, "node", None)
        if node is not None and isinstance(exc, AuthError | ForbiddenError):
            # the router's own token was refused by a node: the client was told to send a
            # token it had sent (or that this router does not need)
            exc = ServiceUnavailableError(
                f"node {node} refused the router's node token ({exc}); start the router with "
                "--node-token (or --token) set to a token that may write every namespace on "
                "the nodes"
            )
        status, body, headers = error_parts(request.method, request.url.path, exc)
        return Response(
            body, status_code=status, media_type="application/json",
            headers={k.decode("latin-1"): v.decode("latin-1") for k, v in headers} or None,
        )  # fmt: skip

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "path", "query")]
        where = ".".join(loc) or "request"
        body = error_response_bytes("invalid_request", f"{where}: {first.get('msg')}", where)
        return _json(body, 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        return _json(error_response_bytes(code, str(exc.detail)), exc.status_code)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> Response:
        import logging

        logging.getLogger("neardup.cluster").exception(
            "router: unexpected error in %s %s", request.method, request.url.path
        )
        body = error_response_bytes(
            "internal_error", f"internal error ({type(exc).__name__}); see the router's log"
        )
        return _json(body, 500)

    async def decide(request: Request, namespace: str, op: str) -> Response:
        auth.authorize(request.headers.get("authorization"), namespace, write=_WRITES[op])
        docs, is_batch = parse_documents(loads(await request.body()), max_batch=max_batch)
        cc = spaces.get(namespace)
        if not docs:
            return _json({"results": []})
        fn = {"check": cc.check, "insert": cc.insert, "check-and-insert": cc.check_and_insert}[op]
        try:
            out = await run_in_threadpool(fn, docs)
        except InputError as exc:  # a document refused: named as a node names it (request_error)
            raise request_error(exc, is_batch) from None
        return _json(encode_decisions(out, is_batch))

    for op in _WRITES:

        def bind(op: str = op) -> None:
            async def default_ns(request: Request) -> Response:
                return await decide(request, "default", op)

            async def named_ns(request: Request, namespace: str) -> Response:
                return await decide(request, namespace, op)

            app.add_api_route(f"/v1/{op}", default_ns, methods=["POST"])
            app.add_api_route(f"/v1/ns/{{namespace}}/{op}", named_ns, methods=["POST"])

        bind()

    async def get_doc(request: Request, namespace: str, doc_id: str) -> Response:
        auth.authorize(request.headers.get("authorization"), namespace, write=False)
        cc = await run_in_threadpool(spaces.get, namespace)
        return _json(await run_in_threadpool(cc.get, doc_id))

    async def delete_doc(request: Request, namespace: str, doc_id: str) -> Response:
        auth.authorize(request.headers.get("authorization"), namespace, write=True)
        cc = await run_in_threadpool(spaces.get, namespace)
        await run_in_threadpool(cc.delete, doc_id)
        return _json({"id": doc_id, "deleted": True})

    @app.get("/v1/docs/{doc_id:path}")
    async def get_default(request: Request, doc_id: str) -> Response:
        return await get_doc(request, "default", doc_id)

    @app.get("/v1/ns/{namespace}/docs/{doc_id:path}")
    async def get_named(request: Request, namespace: str, doc_id: str) -> Response:
        return await get_doc(request, namespace, doc_id)

    @app.delete("/v1/docs/{doc_id:path}")
    async def delete_default(request: Request, doc_id: str) -> Response:
        return await delete_doc(request, "default", doc_id)

    @app.delete("/v1/ns/{namespace}/docs/{doc_id:path}")
    async def delete_named(request: Request, namespace: str, doc_id: str) -> Response:
        return await delete_doc(request, namespace, doc_id)

    @app.get("/healthz")
    async def healthz(request: Request) -> Response:
        body, status = await run_in_threadpool(_health, pool, spaces)
        try:  # the nodes and their counts for a token that may read every namespace
            auth.authorize(request.headers.get("authorization"), None, write=False)
        except NeardupError:
            body = {"status": body["status"]}
        return _json(body, status)

    app.add_middleware(ShutdownAnswerMiddleware)
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=max_body_bytes)
    return app


def _health(pool: NodePool, spaces: _Namespaces) -> tuple[dict[str, Any], int]:
    """``/healthz``: node states (the breakers), stored copies, the router's own resources."""
    config, ring = pool.snapshot()
    states = {n: pool.state(n) for n in config.names}
    copies = 0
    for n in [n for n, s in states.items() if s == "closed"]:
        try:
            copies += int(pool.request(n, "GET", "/healthz", timeout=2.0).get("documents") or 0)
        except (NodeDown, NodeAnswerError):
            states[n] = pool.state(n)
    up = [n for n, s in states.items() if s == "closed"]
    ok = covered(config, ring, up)
    return {
        "status": "ok" if ok else "degraded",
        "epoch": config.epoch,
        "nodes": states,
        "hints": pool.hint_count(),
        "stored_copies": copies,
        "namespaces": len(spaces),
        "threads": threading.active_count(),
    }, 200 if ok else 503
