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
from :func:`neardup.errors.http_status_for`; the HTTP-only errors add 401 (missing or wrong
token) and 413 (body or batch too large).

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

from ..errors import ConfigError, NeardupError, require

require("fastapi", "service", "the HTTP service")

from fastapi import FastAPI, Request, Security  # noqa: E402
from fastapi.exceptions import RequestValidationError  # noqa: E402
from fastapi.openapi.utils import get_openapi  # noqa: E402
from fastapi.responses import HTMLResponse, PlainTextResponse, Response  # noqa: E402
from fastapi.security import HTTPBearer  # noqa: E402
from pydantic.json_schema import models_json_schema  # noqa: E402
from starlette.concurrency import run_in_threadpool  # noqa: E402
from starlette.exceptions import HTTPException as StarletteHTTPException  # noqa: E402
from starlette.routing import Match  # noqa: E402

from .auth import AuthError, check_write_token  # noqa: E402
from .config import ServiceConfig  # noqa: E402
from .documents import OPS, DocumentRoutes, error_parts, fd_exhausted_parts  # noqa: E402
from .export import export_page  # noqa: E402
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
    401: {"model": ErrorBody, "description": "Write without the right bearer token."},
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
        "file descriptors, or --max-connections are open; nothing acknowledged.",
    },
}

#: the bearer scheme in the OpenAPI document (the "Authorize" button of /docs); the check
#: itself stays :func:`check_write_token` (auto_error=False: this dependency never answers)
BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="bearerToken",
    description="The token given to `neardup serve --token` / NEARDUP_TOKEN; needed by "
    "writes (insert, check-and-insert, delete, namespace creation). Requests that carry it "
    "are not subject to the per-client rate limit.",
)
_WRITE_SECURITY = [Security(BEARER)]

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
    token = config.token
    max_batch = config.max_batch

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
        token=token,
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

    # -- documents ---------------------------------------------------------------------------
    # POSTs to the document routes are answered by ``routes`` before this application is
    # entered (see _ServiceApp); these FastAPI routes describe them in the OpenAPI document and
    # answer them identically when the application is mounted inside another ASGI app.
    ops = OPS

    async def decide(request: Request, namespace: str, op: str) -> Response:
        if ops[op][1]:
            check_write_token(request.headers, token)
        payload, _ = await routes.decide(namespace, op, await request.body())
        return Response(payload, media_type="application/json")

    async def get_doc(request: Request, namespace: str, doc_id: str) -> Response:
        store = registry.get(namespace)
        record = await run_in_threadpool(store.get, doc_id)
        return _json(record)

    async def delete_doc(request: Request, namespace: str, doc_id: str) -> Response:
        check_write_token(request.headers, token)
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
                dependencies=_WRITE_SECURITY if ops[op][1] else None,
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
            responses={200: {"model": DocRecord}, **_ERRORS},
        )  # fmt: skip
        app.add_api_route(
            prefix + "/docs/{doc_id:path}", del_ep, methods=["DELETE"], tags=[tag],
            summary="Delete a stored document", name="delete_doc" + sfx,
            responses=_ERRORS, dependencies=_WRITE_SECURITY,
        )  # fmt: skip

    add_routes("/v1", namespaced=False)
    add_routes("/v1/ns/{namespace}", namespaced=True)

    # -- export: one page of stored documents in id order (cluster rebalancing, issue 27) ------
    async def export(namespace: str, after: str, limit: int) -> Response:
        if not 1 <= limit <= 10_000:
            raise ConfigError(f"limit must be in 1..10000, got {limit}")
        store = registry.get(namespace)
        return _json(await run_in_threadpool(export_page, store, after, limit))

    @app.get("/v1/export", tags=["documents"], summary="Export stored documents (paged by id)",
             responses=_ERRORS)  # fmt: skip
    async def export_default(after: str = "", limit: int = 1000) -> Response:
        return await export("default", after, limit)

    @app.get("/v1/ns/{namespace}/export", tags=["namespaced"], responses=_ERRORS,
             summary="Export stored documents of a namespace (paged by id)")  # fmt: skip
    async def export_ns(namespace: str, after: str = "", limit: int = 1000) -> Response:
        return await export(namespace, after, limit)

    # -- the cluster's node protocol under /v1/cluster (docs/cluster.md) ----------------------
    install_cluster_routes(app, registry, config)

    # -- namespaces ----------------------------------------------------------------------------
    @app.get("/v1/ns", tags=["namespaces"], summary="List namespaces")
    async def list_namespaces() -> Response:
        return _json({"namespaces": registry.names()})

    @app.put(
        "/v1/ns/{namespace}",
        tags=["namespaces"],
        summary="Create a namespace",
        responses={
            200: {"description": "The namespace already existed."},
            201: {"description": "The namespace was created."},
            **_ERRORS,
        },
        dependencies=_WRITE_SECURITY,
    )
    async def create_namespace(request: Request, namespace: str) -> Response:
        check_write_token(request.headers, token)
        created = await run_in_threadpool(registry.create, namespace)
        return _json({"namespace": namespace, "created": created}, status=201 if created else 200)

    @app.get(
        "/v1/ns/{namespace}", tags=["namespaces"], summary="Namespace statistics", responses=_ERRORS
    )
    async def namespace_info(namespace: str) -> Response:
        store = registry.get(namespace)
        stats = await run_in_threadpool(store.stats)
        return _json({"namespace": namespace, "documents": len(store), "stats": _jsonable(stats)})

    # -- operations ----------------------------------------------------------------------------
    @app.get("/healthz", tags=["operations"], summary="Liveness and document counts")
    async def healthz() -> Response:
        if registry.closed:
            return _json({"status": "shutting_down"}, status=503)
        return _json(
            {
                "status": "ok",
                "namespaces": registry.names(),
                "documents": registry.total_documents(),
                "uptime_s": round(time.time() - metrics.started, 3),
                "rss_bytes": process_rss_bytes(),
            }
        )

    @app.get(
        "/metrics",
        tags=["operations"],
        summary="Prometheus metrics",
        response_class=PlainTextResponse,
    )
    async def metrics_endpoint() -> Response:
        stats = await run_in_threadpool(registry.stats)
        return PlainTextResponse(metrics.render(stats), media_type=METRICS_CONTENT_TYPE)

    if _SWAGGER_ASSETS is not None:
        from starlette.staticfiles import StaticFiles

        app.mount("/docs/assets", StaticFiles(directory=_SWAGGER_ASSETS), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs_page() -> HTMLResponse:
        return HTMLResponse(_docs_html(app.title, app.openapi_url or "/openapi.json"))

    # -- OpenAPI: add the request-body schemas the handlers validate by hand -------------------
    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title, version=app.version, summary=app.summary, routes=app.routes
        )
        _, defs = models_json_schema(
            [(Document, "validation"), (DocumentBatch, "validation")],
            ref_template="#/components/schemas/{model}",
        )
        schema.setdefault("components", {}).setdefault("schemas", {}).update(defs.get("$defs", {}))
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]

    # outermost first: metrics see every answer, including 413s from the body limit and 429s
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=config.max_body_bytes)
    app.add_middleware(ReadLimitMiddleware, limiter=limiter, token=token, metrics=metrics)
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
    """The per-client limit (:class:`~neardup.service.limits.RateLimiter`) on ``GET`` under
    ``/v1/`` without a valid token (the document POSTs are limited by
    :class:`~neardup.service.documents.DocumentRoutes`); answers 429 with Retry-After."""

    def __init__(self, app: Any, limiter: RateLimiter, token: str | None, metrics: Any) -> None:
        self.app = app
        self.limiter = limiter
        self.token = token
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if (
            scope["type"] == "http"
            and self.limiter.enabled
            and scope["method"] in ("GET", "HEAD")
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
        if self.token is None:
            return False
        from .documents import _headers

        try:
            check_write_token(_headers(scope), self.token)
        except AuthError:
            return False
        return True


def _docs_html(title: str, openapi_url: str) -> str:
    """The /docs page: Swagger UI from the ``swagger_ui_bundle`` package when it is installed
    (served by this app, works offline), else from the jsDelivr CDN with a fallback that says,
    when the CDN cannot be reached, where the OpenAPI document is."""
    import html

    t = html.escape(title)
    spec = html.escape(openapi_url)
    fallback = (
        f"<p>Swagger UI could not be loaded (it comes from a CDN and this browser is offline, "
        f"or the CDN is blocked). The OpenAPI document is at <a href='{spec}'>{spec}</a>; "
        f"<code>pip install swagger-ui-bundle</code> on the server makes /docs work offline.</p>"
    )
    if _SWAGGER_ASSETS is not None:
        css, js = "/docs/assets/swagger-ui.css", "/docs/assets/swagger-ui-bundle.js"
    else:
        css = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui.css"
        js = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js"
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{t} - API docs</title>
<link rel="stylesheet" href="{css}"></head>
<body><div id="swagger-ui"><noscript>{fallback}</noscript></div>
<script>
function neardupNoUi() {{ document.getElementById("swagger-ui").innerHTML = {fallback!r}; }}
</script>
<script src="{js}" onerror="neardupNoUi()"></script>
<script>
if (typeof SwaggerUIBundle === "undefined") {{ neardupNoUi(); }} else {{
  SwaggerUIBundle({{url: "{spec}", dom_id: "#swagger-ui", persistAuthorization: true}});
}}
</script></body></html>
"""


def _swagger_assets() -> Path | None:
    """The directory of Swagger UI's files from the ``swagger_ui_bundle`` package, if
    installed (it is not a dependency: /docs then loads them from a CDN)."""
    try:
        import swagger_ui_bundle
    except ImportError:
        return None
    path = Path(getattr(swagger_ui_bundle, "swagger_ui_path", ""))
    return path if (path / "swagger-ui-bundle.js").is_file() else None


_SWAGGER_ASSETS = _swagger_assets()


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
