"""Request parsing and the documented JSON shapes of the HTTP service.

The batch endpoints are the hot path, so request bodies are parsed with one ``json.loads``
(``orjson``; the stdlib :mod:`json` is the reference it falls back to). :func:`parse_documents`
checks only the body's shape (an object; a ``documents`` array no longer than ``--max-batch``);
each document is validated once, by the store's own
:class:`~neardup.online.prepare.DocumentPreparer` (the one set of rules, :data:`ID_RULE` among
them), whose errors name the field and are answered as 422 ``invalid_request``
(:func:`request_error`). The pydantic models below describe the same shapes for the OpenAPI
document; a test checks that both agree.

A document is ``{"id": str, "text": str, "time": number | null, "metadata": object | null}``;
other keys are ignored (put what you want kept under ``metadata``). A batch is
``{"documents": [document, ...]}``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import InputError
from ..online.prepare import ID_PATTERN, ID_RULE, MAX_ID_LENGTH, json_type_name
from .http_errors import AuthError, PayloadTooLargeError, RequestValidationFailed

__all__ = [
    "ID_PATTERN",
    "ID_RULE",
    "MAX_ID_LENGTH",
    "AuthError",
    "BatchResult",
    "DocRecord",
    "Document",
    "DocumentBatch",
    "ErrorBody",
    "ExplainRequest",
    "ExplainSide",
    "PayloadTooLargeError",
    "RequestValidationFailed",
    "Result",
    "dumps",
    "encode_decisions",
    "loads",
    "parse_documents",
    "parse_explain",
    "request_error",
]


# ---------------------------------------------------------------------------------------------
# JSON encoding


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_LONG_DIGITS = re.compile(rb"\d{19}")


def loads(raw: bytes) -> Any:
    """Decode a JSON request body; raise :class:`RequestValidationFailed` when it is not JSON."""
    if not raw:
        raise RequestValidationFailed(
            "body",
            'the request body is empty; send a JSON object: a document {"id", "text"} '
            'or a batch {"documents": [...]}',
        )
    try:
        # orjson turns integers beyond int64/uint64 into floats; a body with a run of 19 or
        # more digits goes to the stdlib, which keeps every integer exact
        if _LONG_DIGITS.search(raw) is None:
            return orjson.loads(raw)
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestValidationFailed(
            "body", f"the request body is not valid UTF-8 JSON ({exc})"
        ) from None
    except RecursionError:
        raise RequestValidationFailed("body", "the request body is nested too deeply") from None


def dumps(obj: Any) -> bytes:
    """Encode a response body as compact UTF-8 JSON."""
    try:
        return orjson.dumps(obj)
    except TypeError:  # e.g. integers beyond 64 bits in stored metadata
        pass
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def encode_decisions(decisions: list[Any], is_batch: bool) -> bytes:
    """The answer body for a document request: one result, or ``{"results": [...]}``.

    Equal to ``dumps(d.to_dict())`` / ``dumps({"results": [d.to_dict() for d in decisions]})``
    (the reference; a test checks both agree), but builds the dicts in one comprehension and
    lets orjson encode each :class:`~neardup.online.Match` dataclass (``id``, ``distance``,
    ``score``) directly.

    Parameters
    ----------
    decisions : list of neardup.online.Decision
        The store's decisions, in request order.
    is_batch : bool
        Whether the request was a batch.
    """
    results = [
        {
            "id": d.id,
            "duplicate": d.duplicate,
            "added": d.added,
            "matches": d.matches,
            "fingerprint": format(d.fingerprint, "x"),
        }
        for d in decisions
    ]
    try:
        return orjson.dumps(
            {"results": results} if is_batch else results[0],
            option=orjson.OPT_SERIALIZE_NUMPY,
        )
    except TypeError:  # an unexpected type somewhere: the reference path
        pass
    if is_batch:
        return dumps({"results": [d.to_dict() for d in decisions]})
    return dumps(decisions[0].to_dict())


# ---------------------------------------------------------------------------------------------
# Validation of document bodies (the hot path)

_BODY_SHAPE = 'send a document {"id": str, "text": str} or a batch {"documents": [...]}'


def parse_documents(body: object, *, max_batch: int) -> tuple[list[Any], bool]:
    """Check a decoded request body's shape and return ``(documents, is_batch)``.

    Only the shape: the documents themselves are validated once, by the store
    (:class:`~neardup.online.prepare.DocumentPreparer`; its errors go through
    :func:`request_error`).

    Parameters
    ----------
    body : object
        The decoded JSON body.
    max_batch : int
        Largest accepted number of documents in a batch.

    Returns
    -------
    documents : list
        The body's documents as sent (one, or the batch's).
    is_batch : bool
        Whether the body was a batch (the answer is then ``{"results": [...]}``).

    Raises
    ------
    RequestValidationFailed
        The body is not an object, or its ``documents`` is not an array.
    PayloadTooLargeError
        The batch has more than ``max_batch`` documents.
    """
    if not isinstance(body, dict):
        raise RequestValidationFailed(
            "body", f"the body must be a JSON object, got {json_type_name(body)}; {_BODY_SHAPE}"
        )
    if "documents" in body:
        docs = body["documents"]
        if not isinstance(docs, list):
            raise RequestValidationFailed(
                "documents", f"must be an array of documents, got {json_type_name(docs)}"
            )
        if len(docs) > max_batch:
            raise PayloadTooLargeError(
                f"the batch has {len(docs)} documents but this server accepts at most "
                f"{max_batch} per request (--max-batch); split it into smaller batches"
            )
        return docs, True
    if "id" not in body and "text" not in body:
        raise RequestValidationFailed(
            "body", f"the body has neither 'id' nor 'documents'; {_BODY_SHAPE}"
        )
    return [body], False


def request_error(exc: InputError, is_batch: bool) -> InputError:
    """The store's error about a document of a request (``field`` like ``documents[3].id``),
    as the request's 422: :class:`RequestValidationFailed` with the field relative to the
    body (``id`` for a single document, ``documents[3].id`` in a batch). Errors without a
    document field are returned as they are."""
    field = exc.field
    if not field or not field.startswith("documents["):
        return exc
    message = str(exc)
    detail = message[len(field) + 2 :] if message.startswith(field + ": ") else message
    if not is_batch and field.startswith("documents[0]"):
        field = field[len("documents[0]") :].lstrip(".") or "body"
    out = RequestValidationFailed(field, detail)
    out.__cause__ = exc
    return out


# ---------------------------------------------------------------------------------------------
# Pydantic models: the OpenAPI description of the same shapes


class Document(BaseModel):
    """One document to check or insert."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(
        min_length=1,
        max_length=MAX_ID_LENGTH,
        pattern=ID_PATTERN,
        description=f"Caller's document id: {ID_RULE}. A document with another id is answered "
        "422 naming the field.",
    )
    text: str = Field(description="Document text (any language; empty text never matches).")
    time: float | None = Field(
        default=None, ge=0, description="Unix seconds; defaults to the time of arrival."
    )
    metadata: dict[str, Any] | None = Field(default=None, description="Kept with the document.")


class DocumentBatch(BaseModel):
    """A batch of documents, decided in order (earlier documents win).

    Ids must be unique within one batch: a repeated id is answered 422 naming both positions.
    An id that is already stored is not an error: its result reports the stored document
    (``duplicate: true``, ``added: false``)."""

    documents: list[Document] = Field(
        description="The documents, in order; their ids must be unique within the batch."
    )


class MatchModel(BaseModel):
    id: str
    distance: int = Field(description="Hamming distance between the fingerprints.")
    score: float | None = Field(description="Text similarity in [0, 1] when verified.")


class Result(BaseModel):
    """The decision for one document."""

    id: str
    duplicate: bool
    added: bool = Field(description="Whether the document is now stored (always false for check).")
    matches: list[MatchModel]
    fingerprint: str = Field(description="SimHash fingerprint, hexadecimal.")


class BatchResult(BaseModel):
    """The decisions for a batch, in the order of the documents."""

    results: list[Result]


class DocRecord(BaseModel):
    """A stored document."""

    model_config = ConfigDict(extra="allow")

    id: str
    time: float
    fingerprint: str
    metadata: dict[str, Any] | None = None
    text: str | None = None


class ExplainSide(BaseModel):
    """One side of a pair to explain: a stored document by ``id``, or a ``text`` not stored."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(default=None, description="A stored document's id.")
    text: str | None = Field(default=None, description="A text (not stored, nothing written).")


class ExplainRequest(BaseModel):
    """Two documents to explain with the namespace's own settings (``POST /v1/explain``)."""

    model_config = ConfigDict(extra="forbid")

    a: ExplainSide = Field(description='{"id": ...} or {"text": ...}')
    b: ExplainSide = Field(description='{"id": ...} or {"text": ...}')
    threshold: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="What counts as a near duplicate, if not the namespace's (what-if).",
    )


_EXPLAIN_SHAPE = 'send {"a": SIDE, "b": SIDE}, each SIDE {"id": stored id} or {"text": ...}'


def parse_explain(raw: bytes) -> ExplainRequest:
    """An explain request's body, decoded and checked as the document routes check theirs:
    any JSON content type (or none), and every refusal a :class:`RequestValidationFailed`
    naming the field (``a.id``), in the service's error shape."""
    if not raw:
        raise RequestValidationFailed("body", f"the request body is empty; {_EXPLAIN_SHAPE}")
    body = loads(raw)
    if not isinstance(body, dict):
        raise RequestValidationFailed(
            "body", f"the body must be a JSON object, got {json_type_name(body)}; {_EXPLAIN_SHAPE}"
        )
    try:
        req = ExplainRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first.get("loc", ())) or "body"
        kind, value = first.get("type", ""), first.get("input")
        if kind == "missing":
            why = "field required" + ("" if "." in loc else f"; {_EXPLAIN_SHAPE}")
        elif kind == "extra_forbidden":
            why = f"unknown field; {_EXPLAIN_SHAPE}" + (
                ", and an optional threshold" if "." not in loc else ""
            )
        elif kind == "string_type":
            why = f"must be a string, got {json_type_name(value)}"
        elif kind in ("model_type", "model_attributes_type", "dict_type"):
            why = f'must be an object {{"id": ...}} or {{"text": ...}}, got {json_type_name(value)}'
        else:
            why = str(first.get("msg", "invalid")).lower()
        raise RequestValidationFailed(loc, why) from None
    for name in ("a", "b"):
        side = getattr(req, name)
        if (side.id is None) == (side.text is None):
            raise RequestValidationFailed(
                name,
                'give "id" (a stored document) or "text" (a text not stored): one of them, got '
                + ("both" if side.id is not None else "neither"),
            )
    return req


class ErrorDetail(BaseModel):
    code: str = Field(description="Machine-readable code, e.g. invalid_request, not_found.")
    message: str = Field(description="What went wrong and how to fix it.")
    field: str | None = Field(default=None, description="The offending field, for 422 answers.")


class ErrorBody(BaseModel):
    """Every error answer has this shape."""

    error: ErrorDetail
