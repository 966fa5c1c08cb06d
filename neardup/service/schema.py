"""Request parsing and the documented JSON shapes of the HTTP service.

The batch endpoints are the hot path, so request bodies are parsed with one ``json.loads``
(``orjson``; the stdlib :mod:`json` is the reference it falls back to) and checked by :func:`parse_documents` with plain ``isinstance``
tests instead of one pydantic model per document. The pydantic models below describe the same
shapes for the OpenAPI document; a test checks that both agree.

A document is ``{"id": str, "text": str, "time": number | null, "metadata": object | null}``;
other keys are ignored (put what you want kept under ``metadata``). A batch is
``{"documents": [document, ...]}``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from .http_errors import AuthError, PayloadTooLargeError, RequestValidationFailed

__all__ = [
    "MAX_ID_LENGTH",
    "AuthError",
    "BatchResult",
    "DocRecord",
    "Document",
    "DocumentBatch",
    "ErrorBody",
    "PayloadTooLargeError",
    "RequestValidationFailed",
    "Result",
    "dumps",
    "encode_decisions",
    "loads",
    "parse_documents",
]

#: longest accepted document id, in characters
MAX_ID_LENGTH = 1024


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


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _document(obj: object, where: str) -> dict[str, Any]:
    prefix = f"{where}." if where else ""
    if not isinstance(obj, dict):
        raise RequestValidationFailed(
            where or "body", f"a document must be a JSON object, got {_type_name(obj)}"
        )
    doc_id = obj.get("id")
    if not isinstance(doc_id, str):
        if "id" not in obj:
            raise RequestValidationFailed(f"{prefix}id", "field required (a non-empty string)")
        raise RequestValidationFailed(
            f"{prefix}id", f"must be a non-empty string, got {_type_name(doc_id)}"
        )
    if not doc_id or len(doc_id) > MAX_ID_LENGTH:
        raise RequestValidationFailed(
            f"{prefix}id",
            f"must be 1 to {MAX_ID_LENGTH} characters long, got {len(doc_id)} characters",
        )
    text = obj.get("text")
    if not isinstance(text, str):
        if "text" not in obj:
            raise RequestValidationFailed(f"{prefix}text", "field required (a string)")
        raise RequestValidationFailed(f"{prefix}text", f"must be a string, got {_type_name(text)}")
    out: dict[str, Any] = {"id": doc_id, "text": text}
    t = obj.get("time")
    if t is not None:
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t < 0:
            raise RequestValidationFailed(
                f"{prefix}time",
                f"must be a finite number of unix seconds >= 0 or null, got {t!r:.40}",
            )
        out["time"] = float(t)
    meta = obj.get("metadata")
    if meta is not None:
        if not isinstance(meta, dict):
            raise RequestValidationFailed(
                f"{prefix}metadata", f"must be a JSON object or null, got {_type_name(meta)}"
            )
        out["metadata"] = meta
    return out


def parse_documents(body: object, *, max_batch: int) -> tuple[list[dict[str, Any]], bool]:
    """Check a decoded request body and return ``(documents, is_batch)``.

    Parameters
    ----------
    body : object
        The decoded JSON body.
    max_batch : int
        Largest accepted number of documents in a batch.

    Returns
    -------
    documents : list of dict
        Clean documents with keys ``id``, ``text`` and, when given, ``time`` and ``metadata``.
    is_batch : bool
        Whether the body was a batch (the answer is then ``{"results": [...]}``).

    Raises
    ------
    RequestValidationFailed
        The body does not have the documented shape; the error names the field.
    PayloadTooLargeError
        The batch has more than ``max_batch`` documents.
    """
    if not isinstance(body, dict):
        raise RequestValidationFailed(
            "body", f"the body must be a JSON object, got {_type_name(body)}; {_BODY_SHAPE}"
        )
    if "documents" in body:
        docs = body["documents"]
        if not isinstance(docs, list):
            raise RequestValidationFailed(
                "documents", f"must be an array of documents, got {_type_name(docs)}"
            )
        if len(docs) > max_batch:
            raise PayloadTooLargeError(
                f"the batch has {len(docs)} documents but this server accepts at most "
                f"{max_batch} per request (--max-batch); split it into smaller batches"
            )
        return [_document(d, f"documents[{i}]") for i, d in enumerate(docs)], True
    if "id" not in body and "text" not in body:
        raise RequestValidationFailed(
            "body", f"the body has neither 'id' nor 'documents'; {_BODY_SHAPE}"
        )
    return [_document(body, "")], False


# ---------------------------------------------------------------------------------------------
# Pydantic models: the OpenAPI description of the same shapes


class Document(BaseModel):
    """One document to check or insert."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(min_length=1, max_length=MAX_ID_LENGTH, description="Caller's document id.")
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


class ErrorDetail(BaseModel):
    code: str = Field(description="Machine-readable code, e.g. invalid_request, not_found.")
    message: str = Field(description="What went wrong and how to fix it.")
    field: str | None = Field(default=None, description="The offending field, for 422 answers.")


class ErrorBody(BaseModel):
    """Every error answer has this shape."""

    error: ErrorDetail
