"""The FastAPI application: thin handlers around :class:`neardup.online.Deduplicator`.

Routes (``{p}`` is ``/v1`` for namespace ``default`` and ``/v1/ns/{namespace}`` for any other)::

    POST   {p}/check              read-only decision(s)
    POST   {p}/insert             insert unconditionally (write)
    POST   {p}/check-and-insert   atomic: insert only if not a duplicate (write)
    GET    {p}/docs/{id}          stored document
    DELETE {p}/docs/{id}          delete (write)
    GET    /v1/ns                 namespace names
    PUT    /v1/ns/{namespace}     create a namespace (write)
    GET    /v1/ns/{namespace}     namespace statistics
    GET    /healthz               liveness and document counts
    GET    /metrics               Prometheus text
    GET    /openapi.json, /docs   OpenAPI

Bodies: a document ``{"id", "text", "time"?, "metadata"?}`` answered by one result, or a batch
``{"documents": [...]}`` answered by ``{"results": [...]}``; a result is
``{"id", "duplicate", "added", "matches": [{"id", "distance", "score"}], "fingerprint"}``.

Every error is ``{"error": {"code", "message"}}`` (plus ``"field"`` on 422), with its status
from :func:`neardup.errors.http_status_for`: 401 (no valid token), 403 (a token that may not
do this), 413 (body or batch too large), ...

Who may read and write what: :mod:`neardup.service.auth` (reads need a token unless
``open_reads``; :class:`fastapi.security.HTTPBearer` puts the scheme in the OpenAPI document).

``POST`` requests to the document routes are answered by
:class:`~neardup.service.documents.DocumentRoutes` before this application's middleware stack
(same answers, errors and metrics); they await the writer's outcome without holding a thread,
so concurrent requests share one write-ahead-log fsync (group commit). Other blocking store
calls run in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from ..errors import CorruptRecordError, NeardupError, require

require("fastapi", "service", "the HTTP service")

from fastapi import Depends, FastAPI, Request, Security  # noqa: E402
from fastapi.exceptions import RequestValidationError  # noqa: E402
from fastapi.openapi.utils import get_openapi  # noqa: E402
from fastapi.responses import HTMLResponse, PlainTextResponse, Response  # noqa: E402
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer  # noqa: E402
from pydantic.json_schema import models_json_schema  # noqa: E402
from starlette.concurrency import run_in_threadpool  # noqa: E402
from starlette.exceptions import HTTPException as StarletteHTTPException  # noqa: E402
from starlette.routing import Match  # noqa: E402

from .auth import Authenticator, Grant, authenticator_for  # noqa: E402
from .config import ServiceConfig  # noqa: E402
from .documents import (  # noqa: E402
    OPS,
    DocumentRoutes,
    ShutdownAnswerMiddleware,
    error_parts,
    fd_exhausted_parts,
    in_namespace,
)
from .explain_routes import install as install_explain_routes  # noqa: E402
from .export import export_page  # noqa: E402
from .http_errors import RequestValidationFailed  # noqa: E402
from .limits import (  # noqa: E402
    BodyLimitMiddleware,
    RateLimiter,
    client_address,
    error_response_bytes,
    rate_limited_response,
)
from .metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE  # noqa: E402
from .metrics import Metrics, MetricsMiddleware, monitor_loop_lag, process_rss_bytes  # noqa: E402
from .namespaces import NamespaceRegistry  # noqa: E402
from .replication_routes import install as install_cluster_routes  # noqa: E402
from .schema import (  # noqa: E402
    BatchResult,
    DocRecord,
    Document,
    DocumentBatch,
    ErrorBody,
    ExplainRequest,
    Result,
    dumps,
)

__all__ = ["create_app"]

log = logging.getLogger("neardup.service")

#: statuses of the errors that exist only in the HTTP layer

_HTTP_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {
        "model": ErrorBody,
        "description": "No valid bearer token (reads need one too unless the server runs with "
        "--open-reads).",
    },
    403: {
        "model": ErrorBody,
        "description": "A valid token that may not do this: a read-only token writing, or a "
        "token for other namespaces.",
    },
    429: {
        "model": ErrorBody,
        "description": "Too many requests without a token from this client address "
        "(--read-rate, --read-burst); Retry-After says when to retry.",
    },
    404: {"model": ErrorBody, "description": "Unknown namespace or document."},
    413: {
        "model": ErrorBody,
        "description": "Body larger than --max-body-bytes or batch larger than --max-batch.",
    },
    422: {"model": ErrorBody, "description": "Malformed body; error.field names the field."},
    503: {
        "model": ErrorBody,
        "description": "Storage cannot write (disk full, read-only), the server is out of "
        "file descriptors, or --max-connections are open: nothing acknowledged. Or "
        "(code corrupt_record) a stored document fails its checksum: never served changed; "
        "`neardup store repair` salvages the store.",
    },
}

#: the bearer scheme in the OpenAPI document (the "Authorize" button of /docs); the rule
#: itself is :class:`~neardup.service.auth.Authenticator` (auto_error=False: HTTPBearer
#: only extracts the token, the authenticator answers 401 / 403)
BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="bearerToken",
    description="A token given to `neardup serve` (--token / NEARDUP_TOKEN: read and write "
    "in every namespace; --read-token: read-only; --token-file: read or write, in every "
    "namespace or the ones listed). Writes (insert, check-and-insert, delete, namespace "
    "creation) need a token that may write the namespace; reads (check, get, export, "
    "namespace list and statistics, metrics) one that may read it, unless the server runs "
    "with --open-reads. Requests that carry a valid token are not subject to the per-client "
    "rate limit.",
)

_DOC_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "oneOf": [
                        {"$ref": "#/components/schemas/Document"},
                        {"$ref": "#/components/schemas/DocumentBatch"},
                    ]
                }
            }
        },
    }
}


def _json(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        dumps(payload), status_code=status, media_type="application/json", headers=headers
    )


def _error(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    return Response(
        error_response_bytes(code, message, field),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def _loc_to_field(loc: Sequence[Any]) -> str:
    parts = [p for p in loc if p not in ("body", "path", "query", "header")]
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "body"


def create_app(
    config: ServiceConfig,
    *,
    registry: NamespaceRegistry | None = None,
    factory: Callable[[ServiceConfig, Path | None], Any] | None = None,
) -> FastAPI:
    """Build the service application.

    Parameters
    ----------
    config : ServiceConfig
        Service settings (data directory, token, limits, namespace defaults).
    registry : NamespaceRegistry, optional
        An already opened registry (``neardup serve`` opens it before binding the port so that
        a corrupt store is reported before the server starts). By default the app opens one at
        startup.
    factory : callable, optional
        Deduplicator factory for a registry built here (tests).

    Returns
    -------
    FastAPI
        The ASGI application; its stores are flushed and closed at shutdown.
    """
    if registry is None:
        registry = NamespaceRegistry(config, factory=factory)
    metrics = Metrics()
    max_batch = config.max_batch
    auth = authenticator_for(
        config.token, config.read_token, config.token_file, open_reads=config.open_reads
    )
    if not auth.enabled:
        log.warning(
            "serving without authentication: anyone who can connect can read every stored "
            "text and write"
        )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        t0 = time.perf_counter()
        await run_in_threadpool(registry.open)
        log.info(
            "neardup service ready in %.2f s: %d namespace(s), %d documents, RSS %.1f MiB",
            time.perf_counter() - t0,
            len(registry),
            registry.total_documents(),
            process_rss_bytes() / 2**20,
        )
        lag = asyncio.create_task(monitor_loop_lag(metrics), name="neardup-loop-lag")
        try:
            yield
        finally:
            lag.cancel()
            log.info("shutting down: flushing and closing %d namespace(s)", len(registry))
            t1 = time.perf_counter()
            await run_in_threadpool(registry.close)
            log.info("stores closed in %.2f s", time.perf_counter() - t1)

    limiter = RateLimiter(config.read_rate, config.read_burst)
    routes = DocumentRoutes(
        registry,
        metrics,
        auth=auth,
        max_batch=max_batch,
        max_body_bytes=config.max_body_bytes,
        limiter=limiter,
    )
    app = _ServiceApp(
        routes,
        title="neardup",
        summary="Near-duplicate text detection: durable, time-windowed check-and-insert.",
        version=_version(),
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.config = config
    app.state.registry = registry
    app.state.metrics = metrics
    app.state.auth = auth

    # -- errors --------------------------------------------------------------------------------
    @app.exception_handler(NeardupError)
    async def _neardup_error(request: Request, exc: NeardupError) -> Response:
        return _neardup_response(request.method, request.url.path, exc)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        field = _loc_to_field(first.get("loc", ()))
        return _error(422, "invalid_request", f"{field}: {first.get('msg', 'invalid')}", field)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:  # every method of every route on this path, not the first's
            headers["Allow"] = ", ".join(_allowed_methods(app, request.scope))
        return _error(exc.status_code, code, str(exc.detail), headers=headers or None)

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, exc: Exception) -> Response:
        exhausted = fd_exhausted_parts(exc)
        if exhausted is not None:
            status, body, hdrs = exhausted
            return Response(
                body,
                status_code=status,
                media_type="application/json",
                headers={k.decode(): v.decode() for k, v in hdrs},
            )
        log.exception("unexpected error in %s %s", request.method, request.url.path)
        return _error(
            500, "internal_error", f"internal error ({type(exc).__name__}); see the server log"
        )

    # -- access: one dependency per kind of request (HTTPBearer extracts the token and puts
    # the scheme in the OpenAPI document; the authenticator decides) --------------------------
    def access(write: bool, *, server_wide: bool = False) -> Any:
        async def dependency(
            request: Request,
            credentials: HTTPAuthorizationCredentials | None = Security(BEARER),
        ) -> Grant:
            namespace = None if server_wide else request.path_params.get("namespace", "default")
            return auth.authorize(_bearer(credentials), namespace, write)

        return Depends(dependency)

    read_access, write_access = access(False), access(True)
    reads = [read_access]
    writes = [write_access]

    async def optional_grant(
        credentials: HTTPAuthorizationCredentials | None = Security(BEARER),
    ) -> Grant | None:
        return auth.grant(_bearer(credentials)) if auth.enabled else None

    # -- documents ---------------------------------------------------------------------------
    # POSTs to the document routes are answered by ``routes`` before this application is
    # entered (see _ServiceApp); these FastAPI routes describe them in the OpenAPI document and
    # answer them identically when the application is mounted inside another ASGI app.
    ops = OPS

    async def decide(request: Request, namespace: str, op: str) -> Response:
        payload, _ = await routes.decide(namespace, op, await request.body())
        return Response(payload, media_type="application/json")

    async def get_doc(request: Request, namespace: str, doc_id: str) -> Response:
        store = registry.get(namespace)
        try:
            record = await run_in_threadpool(store.get, doc_id)
        except CorruptRecordError as exc:
            raise in_namespace(exc, namespace) from None
        return _json(record)

    async def delete_doc(request: Request, namespace: str, doc_id: str) -> Response:
        store = registry.get(namespace)
        await run_in_threadpool(store.delete, doc_id)
        return _json({"id": doc_id, "deleted": True})

    summaries = {
        "check": "Check document(s) against the index (read-only)",
        "insert": "Insert document(s) unconditionally, reporting duplicates",
        "check-and-insert": "Atomically insert document(s) that are not near-duplicates",
    }

    def decision_endpoint(op: str, namespaced: bool) -> Callable[..., Any]:
        if namespaced:

            async def endpoint_ns(request: Request, namespace: str) -> Response:
                return await decide(request, namespace, op)

            return endpoint_ns

        async def endpoint(request: Request) -> Response:
            return await decide(request, "default", op)

        return endpoint

    def add_routes(prefix: str, namespaced: bool) -> None:
        tag = "namespaced" if namespaced else "documents"
        sfx = "_ns" if namespaced else ""
        for op in ops:
            app.add_api_route(
                f"{prefix}/{op}",
                decision_endpoint(op, namespaced),
                methods=["POST"],
                summary=summaries[op] + (" in a namespace" if namespaced else ""),
                tags=[tag],
                name=op.replace("-", "_") + sfx,
                openapi_extra=_DOC_BODY,
                responses={200: {"model": Result | BatchResult}, **_ERRORS},
                dependencies=writes if ops[op][1] else reads,
            )
        if namespaced:

            async def get_ep(request: Request, namespace: str, doc_id: str) -> Response:
                return await get_doc(request, namespace, doc_id)

            async def del_ep(request: Request, namespace: str, doc_id: str) -> Response:
                return await delete_doc(request, namespace, doc_id)
        else:

            async def get_ep(request: Request, doc_id: str) -> Response:  # type: ignore[misc]
                return await get_doc(request, "default", doc_id)

            async def del_ep(request: Request, doc_id: str) -> Response:  # type: ignore[misc]
                return await delete_doc(request, "default", doc_id)

        app.add_api_route(
            prefix + "/docs/{doc_id:path}", get_ep, methods=["GET"], tags=[tag],
            summary="Get a stored document", name="get_doc" + sfx,
            responses={200: {"model": DocRecord}, **_ERRORS}, dependencies=reads,
        )  # fmt: skip
        app.add_api_route(
            prefix + "/docs/{doc_id:path}", del_ep, methods=["DELETE"], tags=[tag],
            summary="Delete a stored document", name="delete_doc" + sfx,
            responses=_ERRORS, dependencies=writes,
        )  # fmt: skip

    add_routes("/v1", namespaced=False)
    add_routes("/v1/ns/{namespace}", namespaced=True)

    # -- export: one page of stored documents in id order (cluster rebalancing) ------------------
    async def export(namespace: str, after: str, limit: int) -> Response:
        if not 1 <= limit <= 10_000:  # a bad query value, as limit=abc is: 422 naming it
            raise RequestValidationFailed("limit", f"must be in 1..10000, got {limit}")
        store = registry.get(namespace)
        try:
            return _json(await run_in_threadpool(export_page, store, after, limit))
        except CorruptRecordError as exc:
            raise in_namespace(exc, namespace) from None

    @app.get("/v1/export", tags=["documents"], summary="Export stored documents (paged by id)",
             responses=_ERRORS, dependencies=reads)  # fmt: skip
    async def export_default(after: str = "", limit: int = 1000) -> Response:
        return await export("default", after, limit)

    @app.get("/v1/ns/{namespace}/export", tags=["namespaced"], responses=_ERRORS,
             summary="Export stored documents of a namespace (paged by id)",
             dependencies=reads)  # fmt: skip
    async def export_ns(namespace: str, after: str = "", limit: int = 1000) -> Response:
        return await export(namespace, after, limit)

    # -- explain: a pair with the namespace's own rule (read side) ------------------------------
    install_explain_routes(app, registry, reads, _ERRORS)

    # -- the cluster's node protocol under /v1/cluster (docs/cluster.md) ----------------------
    install_cluster_routes(app, registry, config, auth)

    # -- namespaces ----------------------------------------------------------------------------
    @app.get(
        "/v1/ns",
        tags=["namespaces"],
        summary="List namespaces (those the token may read)",
        responses=_ERRORS,
    )
    async def list_namespaces(
        credentials: HTTPAuthorizationCredentials | None = Security(BEARER),
    ) -> Response:
        names = auth.readable(_bearer(credentials), registry.names())
        if names is None:
            auth.authorize(_bearer(credentials), None, write=False)  # raises the 401
        return _json({"namespaces": names})

    @app.put(
        "/v1/ns/{namespace}",
        tags=["namespaces"],
        summary="Create a namespace",
        responses={
            200: {"description": "The namespace already existed."},
            201: {"description": "The namespace was created."},
            **_ERRORS,
        },
        dependencies=writes,
    )
    async def create_namespace(request: Request, namespace: str) -> Response:
        created = await run_in_threadpool(registry.create, namespace)
        return _json({"namespace": namespace, "created": created}, status=201 if created else 200)

    @app.get(
        "/v1/ns/{namespace}",
        tags=["namespaces"],
        summary="Namespace statistics and search settings",
        responses=_ERRORS,
        dependencies=reads,
    )
    async def namespace_info(namespace: str) -> Response:
        store = registry.get(namespace)
        stats = await run_in_threadpool(store.stats)
        return _json(
            {
                "namespace": namespace,
                "documents": len(store),
                "search": search_settings(store),
                "stats": _jsonable(stats),
            }
        )

    # -- operations ----------------------------------------------------------------------------
    @app.get(
        "/healthz",
        tags=["operations"],
        summary="Liveness; with a token that may read every namespace (or open reads), the "
        "namespaces and the documents served",
    )
    async def healthz(grant: Grant | None = Depends(optional_grant)) -> Response:
        if registry.closed:
            return _json({"status": "shutting_down"}, status=503)
        body: dict[str, Any] = {"status": "ok", "uptime_s": round(time.time() - metrics.started, 3)}
        if auth.open_reads or (grant is not None and grant.everywhere):
            body["namespaces"] = registry.names()
            # documents in the retention window: what reads and checks are answered from
            body["documents"] = registry.total_documents()
            body["rss_bytes"] = process_rss_bytes()
        return _json(body)

    @app.get(
        "/metrics",
        tags=["operations"],
        summary="Prometheus metrics (a token that may read every namespace, unless reads are open)",
        response_class=PlainTextResponse,
        responses=_ERRORS,
        dependencies=[access(False, server_wide=True)],
    )
    async def metrics_endpoint() -> Response:
        stats = await run_in_threadpool(registry.stats)
        return PlainTextResponse(metrics.render(stats), media_type=METRICS_CONTENT_TYPE)

    @app.get("/docs", include_in_schema=False)
    async def docs_page() -> HTMLResponse:
        return HTMLResponse(_docs_html(app.title, app.openapi_url or "/openapi.json"))

    @app.get("/docs/assets/{name}", include_in_schema=False)
    async def docs_asset(request: Request, name: str) -> Response:
        return _asset_response(name, request.headers.get("accept-encoding", ""))

    # -- OpenAPI: add the request-body schemas the handlers validate by hand -------------------
    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title, version=app.version, summary=app.summary, routes=app.routes
        )
        _, defs = models_json_schema(
            [
                (Document, "validation"),
                (DocumentBatch, "validation"),
                (ExplainRequest, "validation"),
            ],
            ref_template="#/components/schemas/{model}",
        )
        schema.setdefault("components", {}).setdefault("schemas", {}).update(defs.get("$defs", {}))
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]

    # outermost first: metrics see every answer, including 413s from the body limit and 429s
    app.add_middleware(ShutdownAnswerMiddleware)  # innermost: the metrics count its 503
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=config.max_body_bytes)
    app.add_middleware(ReadLimitMiddleware, limiter=limiter, auth=auth, metrics=metrics)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app


def _allowed_methods(app: FastAPI, scope: Any) -> list[str]:
    """Every method some route accepts on the path of ``scope`` (for a 405's Allow)."""
    methods: set[str] = set()
    for route in app.router.routes:
        route_methods = getattr(route, "methods", None)
        if route_methods and route.matches(scope)[0] != Match.NONE:
            methods.update(route_methods)
    if DocumentRoutes.match(scope.get("path", "")) is not None:
        methods.add("POST")
    return sorted(methods)


class ReadLimitMiddleware:
    """The per-client limit (:class:`~neardup.service.limits.RateLimiter`) on ``GET`` (and the
    explain ``POST``) under ``/v1/`` without a valid token (the document POSTs are limited by
    :class:`~neardup.service.documents.DocumentRoutes`); answers 429 with Retry-After."""

    def __init__(self, app: Any, limiter: RateLimiter, auth: Authenticator, metrics: Any) -> None:
        self.app = app
        self.limiter = limiter
        self.auth = auth
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if (
            scope["type"] == "http"
            and self.limiter.enabled
            and (
                scope["method"] in ("GET", "HEAD")
                or (scope["method"] == "POST" and scope["path"].endswith("/explain"))
            )
            and scope["path"].startswith("/v1/")
            and not self._authenticated(scope)
        ):
            wait = self.limiter.take(client_address(scope))
            if wait > 0:
                self.metrics.rate_limited.labels("GET /v1").inc()
                status, body, headers = rate_limited_response(wait)
                await send(
                    {
                        "type": "http.response.start",
                        "status": status,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", b"%d" % len(body)),
                            *headers,
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)

    def _authenticated(self, scope: Any) -> bool:
        if not self.auth.enabled:
            return False
        from .documents import _authorization

        return self.auth.grant(_authorization(scope)) is not None


def _bearer(credentials: HTTPAuthorizationCredentials | None) -> str | None:
    """The ``Authorization`` value :class:`~neardup.service.auth.Authenticator` reads, from
    what :class:`~fastapi.security.HTTPBearer` extracted (None: no bearer token)."""
    return None if credentials is None else f"Bearer {credentials.credentials}"


def search_settings(store: Any) -> dict[str, Any]:
    """How a namespace finds candidates, from its :class:`~neardup.online.Deduplicator`: the
    candidate mode and, in ``lsh`` mode, the MinHash plan and the SimHash distance searched
    beside it; in ``simhash`` mode the distance rule and the verification search radius."""
    mode = getattr(store, "candidates", None)
    out: dict[str, Any] = {"candidates": mode}
    plan = getattr(store, "lsh_plan", None)
    verifier = getattr(store, "verifier", None)
    if mode == "lsh" and plan is not None:
        p = plan.to_dict()
        keys = (
            "threshold",
            "bands",
            "rows",
            "hashes",
            "min_agreement",
            "bucket_cap",
            "probability",
        )
        out["lsh"] = {k: p[k] for k in keys if k in p}
        out["simhash_distance"] = getattr(store, "radius", None)
    else:
        out["max_distance"] = getattr(store, "max_distance", None)
        out["search_radius"] = getattr(store, "radius", None)
    # verified against stored documents: only where their texts are kept
    out["verified"] = verifier is not None and bool(getattr(store, "store_text", True))
    return out


def _docs_html(title: str, openapi_url: str) -> str:
    """The /docs page: Swagger UI 5 (OpenAPI 3.1), its files served by this app (no network
    needed: ``neardup/service/static/``, NOTICE there)."""
    import html

    t = html.escape(title)
    spec = html.escape(openapi_url)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{t} - API docs</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head>
<body><div id="swagger-ui"><noscript>This page needs JavaScript; the OpenAPI document is at
<a href="{spec}">{spec}</a>.</noscript></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script>
window.ui = SwaggerUIBundle({{url: "{spec}", dom_id: "#swagger-ui", persistAuthorization: true,
  deepLinking: true}});
</script></body></html>
"""


#: Swagger UI's files, stored gzip-compressed in the package (``static/<name>.gz``)
_ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
}
_asset_cache: dict[str, bytes] = {}


def _asset_bytes(name: str) -> bytes:
    """The gzip-compressed bytes of a /docs asset (read from the package once)."""
    data = _asset_cache.get(name)
    if data is None:
        from importlib.resources import files

        data = files("neardup.service").joinpath("static", name + ".gz").read_bytes()
        _asset_cache[name] = data
    return data


def _asset_response(name: str, accept_encoding: str) -> Response:
    """A /docs asset: sent compressed (``Content-Encoding: gzip``) to clients that accept it
    (every browser), else decompressed; 404 for any other name."""
    kind = _ASSETS.get(name)
    if kind is None:
        return _error(404, "not_found", f"no /docs asset named {name!r}")
    data = _asset_bytes(name)
    headers = {"Cache-Control": "public, max-age=86400", "Vary": "Accept-Encoding"}
    if "gzip" in accept_encoding.lower():
        headers["Content-Encoding"] = "gzip"
        return Response(data, media_type=kind, headers=headers)
    import gzip

    return Response(gzip.decompress(data), media_type=kind, headers=headers)


def _neardup_response(method: str, path: str, exc: NeardupError) -> Response:
    """The error answer for a :class:`NeardupError` (its one status mapping)."""
    status, body, headers = error_parts(method, path, exc)
    return Response(
        body,
        status_code=status,
        media_type="application/json",
        headers={k.decode("latin-1"): v.decode("latin-1") for k, v in headers} or None,
    )


class _ServiceApp(FastAPI):
    """The FastAPI application, with ``POST`` to a document route answered first by
    :class:`~neardup.service.documents.DocumentRoutes` (same answers, errors and metrics,
    without the middleware stack, routing and dependency layers)."""

    def __init__(self, document_routes: DocumentRoutes, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.document_routes = document_routes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            hit = DocumentRoutes.match(scope["path"])
            if hit is not None:
                await self.document_routes(scope, receive, send, hit)
                return
        await super().__call__(scope, receive, send)


def _jsonable(obj: Any) -> Any:
    """Make ``stats()`` output JSON-safe (numpy scalars, paths, tuples)."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    item = getattr(obj, "item", None)
    if callable(item):
        try:
            return item()
        except (TypeError, ValueError):
            pass
    return str(obj)


def _version() -> str:
    from .. import __version__

    return __version__
