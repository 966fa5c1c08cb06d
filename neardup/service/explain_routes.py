"""``POST /v1/explain`` and ``POST /v1/ns/{namespace}/explain``: why two documents are (or are
not) near duplicates, answered with the namespace's own settings by
:func:`neardup.review.explain_with_store` (the rule that decides a ``check``, never a second
copy of it). A side is a stored document (``{"id": ...}``) or a text (``{"text": ...}``);
nothing is written. The answer is :meth:`neardup.review.Explanation.to_dict` (the JSON of
``neardup explain --json``). Explaining reads stored texts, so it takes a read token like
``GET /v1/docs/{id}``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from ..errors import CorruptRecordError
from .documents import in_namespace
from .namespaces import NamespaceRegistry
from .schema import dumps, parse_explain

__all__ = ["install"]


def install(
    app: FastAPI,
    registry: NamespaceRegistry,
    reads: list[Any],
    errors: dict[int | str, dict[str, Any]],
) -> None:
    """Add the explain routes to the service's ``app`` (``reads``: its read-access dependency;
    ``errors``: its documented error answers)."""
    from ..review import explain_with_store

    async def explain(namespace: str, request: Request) -> Response:
        # read by hand, as the document routes read theirs: any JSON content type (or none),
        # and the service's error shape for every refusal (parse_explain)
        body = parse_explain(await request.body())
        store = registry.get(namespace)
        overrides = {} if body.threshold is None else {"threshold": body.threshold}
        a = body.a.model_dump(exclude_none=True)
        b = body.b.model_dump(exclude_none=True)
        try:
            result = await run_in_threadpool(explain_with_store, store, a, b, **overrides)
        except CorruptRecordError as exc:
            raise in_namespace(exc, namespace) from None
        return Response(dumps(result.to_dict()), media_type="application/json")

    doc: dict[str, Any] = {
        "tags": ["review"],
        "openapi_extra": {
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/ExplainRequest"}}
                },
            }
        },
        "responses": {200: {"description": "The explanation (`neardup explain --json`)"}, **errors},
        "dependencies": reads,
    }

    @app.post("/v1/explain", summary="Explain a pair with the default namespace's rule", **doc)
    async def explain_default(request: Request) -> Response:
        return await explain("default", request)

    @app.post("/v1/ns/{namespace}/explain", summary="Explain a pair with a namespace's rule", **doc)
    async def explain_ns(namespace: str, request: Request) -> Response:
        return await explain(namespace, request)
