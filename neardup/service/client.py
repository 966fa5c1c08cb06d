"""A synchronous Python client for the neardup HTTP service (``neardup serve``).

>>> import neardup
>>> client = neardup.Client("http://127.0.0.1:8080", token="s3cret")     # doctest: +SKIP
>>> client.check_and_insert({"id": "a", "text": "Hello world"})           # doctest: +SKIP
Decision(id='a', duplicate=False, added=True, matches=(), fingerprint=...)

Answers come back as :class:`neardup.online.Decision` objects (one for a document, a list for a
list of documents). Error answers are raised as the matching :class:`~neardup.errors.NeardupError`
subclass (``NotFoundError`` for 404, ``InputError`` for 422, ``StorageError`` for a 503 from a
full disk, ...); the HTTP status is on ``exc.status_code``. A server that cannot be reached
raises :class:`~neardup.errors.ServiceUnavailableError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, overload
from urllib.parse import quote

from ..errors import (
    ConfigError,
    IndexStateError,
    InputError,
    InputTypeError,
    NeardupError,
    RecordError,
    ServiceUnavailableError,
    require,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..online.deduplicator import Decision

__all__ = ["Client", "id_segment"]

Document = Mapping[str, Any]


def id_segment(doc_id: str) -> str:
    """A document id as one URL path segment: every reserved character escaped, and the ids
    ``.`` and ``..`` as ``%2E`` / ``%2E%2E`` (left as they are, the HTTP client removes them
    as dot segments: ``get(".")`` read the namespace's path and answered ``''``)."""
    if not isinstance(doc_id, str):
        raise InputTypeError(f"a document id must be a str, got {type(doc_id).__name__}")
    seg = quote(doc_id, safe="")
    return seg.replace(".", "%2E") if seg in (".", "..") else seg


def _error_classes() -> dict[str, type[NeardupError]]:
    """``error code -> class`` for every NeardupError subclass (the server's ``error.code``)."""
    from . import http_errors  # noqa: F401  (registers the HTTP-only subclasses)

    out: dict[str, type[NeardupError]] = {}
    stack: list[type[NeardupError]] = [NeardupError]
    while stack:
        cls = stack.pop()
        out.setdefault(cls.code, cls)
        stack.extend(cls.__subclasses__())
    return out


def _make_error(status: int, body: Any, fallback: str) -> NeardupError:
    code, message, field = None, fallback, None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        code = err.get("code")
        message = str(err.get("message", fallback))
        field = err.get("field")
    cls = _error_classes().get(code) if isinstance(code, str) else None
    if cls is None:
        if status in (502, 503, 504):
            cls = ServiceUnavailableError
        elif 400 <= status < 500:
            cls = InputError
        else:
            cls = NeardupError
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    if field is not None or code == "invalid_request":
        exc.field = field  # type: ignore[attr-defined]
    if isinstance(exc, RecordError):
        exc.path, exc.line = None, None
    exc.status_code = status  # type: ignore[attr-defined]
    return exc


class Client:
    """Client of one neardup server and namespace.

    Parameters
    ----------
    base_url : str, default="http://127.0.0.1:8080"
        Server address.
    token : str or None, default=None
        Bearer token for writes (``neardup serve --token``).
    namespace : str, default="default"
        Namespace to use; other namespaces must be created first (:meth:`create_namespace`).
    timeout : float, default=30.0
        Seconds per request (connect, read and write).
    max_connections : int, default=64
        Connection pool size (the client can be shared by threads).
    transport : httpx.BaseTransport, optional
        Custom transport (tests, proxies).

    Notes
    -----
    The constructor does no I/O. Use the client as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        *,
        token: str | None = None,
        namespace: str = "default",
        timeout: float = 30.0,
        max_connections: int = 64,
        transport: Any = None,
    ) -> None:
        httpx = require("httpx", "service", "neardup.Client")
        from .config import validate_namespace

        self.namespace = validate_namespace(namespace)
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"base_url must be an http:// or https:// URL, got {base_url!r}"
                + (f"; did you mean 'http://{base_url}'?" if isinstance(base_url, str) else "")
            )
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
        ):
            raise ConfigError(f"timeout must be a number of seconds > 0 or None, got {timeout!r}")
        self.base_url = base_url.rstrip("/")
        headers: dict[str, str | bytes] = {"Accept": "application/json"}
        if token is not None and (token != token.strip() or any(c in token for c in "\r\n")):
            raise ConfigError(
                "token starts or ends with whitespace or holds a line break (a newline from "
                "echo or a file?): remove it"
            )
        if token is not None:
            # bytes: httpx would encode a str header as ASCII (a non-ASCII token goes as UTF-8,
            # which is how the server compares it)
            headers["Authorization"] = f"Bearer {token}".encode()
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout,
            limits=httpx.Limits(max_connections=max_connections),
            transport=transport,
        )
        self._httpx = httpx

    # -- plumbing ------------------------------------------------------------------------------
    def _prefix(self, namespace: str | None) -> str:
        from .config import validate_namespace

        ns = self.namespace if namespace is None else validate_namespace(namespace)
        return "/v1" if ns == "default" else f"/v1/ns/{quote(ns, safe='')}"

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        content = None
        headers = None
        if self._http.is_closed:
            raise IndexStateError("this Client is closed; make a new one")
        if body is not None:
            try:
                text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            except (TypeError, ValueError) as exc:  # a date, a NumPy number, NaN: named here
                raise InputTypeError(
                    f"the request body is not JSON ({exc}); send ids, texts, numbers and "
                    "metadata that JSON holds (e.g. a date as an ISO string, a NumPy number as "
                    "int() / float())"
                ) from None
            content = text.encode("utf-8", "surrogatepass")
            headers = {"Content-Type": "application/json"}
        try:
            response = self._http.request(method, path, content=content, headers=headers)
        except self._httpx.TimeoutException as exc:
            raise ServiceUnavailableError(
                f"neardup server at {self.base_url} did not answer {method} {path} in time ({exc}); "
                "raise timeout= or check the server"
            ) from exc
        except self._httpx.TransportError as exc:
            raise ServiceUnavailableError(
                f"cannot reach the neardup server at {self.base_url} ({exc}); is `neardup serve` running?"
            ) from exc
        ctype = response.headers.get("content-type", "")
        data: Any = None
        if ctype.startswith("application/json"):
            try:
                data = response.json()
            except ValueError:
                data = None
        if response.status_code >= 400:
            raise _make_error(
                response.status_code,
                data,
                f"{method} {path} failed with HTTP {response.status_code}: {response.text[:200]}",
            )
        return data if data is not None else response.text

    @staticmethod
    def _body(docs: Document | Iterable[Document]) -> tuple[Any, bool]:
        if isinstance(docs, Mapping):
            return dict(docs), False
        if isinstance(docs, str | bytes):
            raise InputTypeError(
                "documents must be a mapping {'id': ..., 'text': ...} or a list of them, got a "
                f"{type(docs).__name__}"
            )
        items = list(docs)
        for i, d in enumerate(items):
            if not isinstance(d, Mapping):
                raise InputTypeError(
                    f"documents[{i}] must be a mapping {{'id': ..., 'text': ...}}, got {type(d).__name__}"
                )
        return {"documents": [dict(d) for d in items]}, True

    def _decide(self, op: str, docs: Document | Iterable[Document], namespace: str | None) -> Any:
        from ..online.deduplicator import Decision, Match

        body, is_batch = self._body(docs)
        data = self._request("POST", f"{self._prefix(namespace)}/{op}", body)

        def decision(r: dict[str, Any]) -> Decision:
            return Decision(
                id=r["id"],
                duplicate=bool(r["duplicate"]),
                added=bool(r.get("added", False)),
                matches=tuple(
                    Match(id=m["id"], distance=int(m["distance"]), score=m.get("score"))
                    for m in r.get("matches", ())
                ),
                fingerprint=int(r.get("fingerprint") or "0", 16),
            )

        if is_batch:
            return [decision(r) for r in data["results"]]
        return decision(data)

    # -- documents -----------------------------------------------------------------------------
    @overload
    def check(self, docs: Document, *, namespace: str | None = None) -> Decision: ...
    @overload
    def check(
        self, docs: Iterable[Document], *, namespace: str | None = None
    ) -> list[Decision]: ...
    def check(self, docs: Any, *, namespace: str | None = None) -> Any:
        """Check one document (a mapping) or several (a list); nothing is stored.

        Returns a :class:`~neardup.online.Decision` for a mapping, a list for a list.
        """
        return self._decide("check", docs, namespace)

    @overload
    def insert(self, docs: Document, *, namespace: str | None = None) -> Decision: ...
    @overload
    def insert(
        self, docs: Iterable[Document], *, namespace: str | None = None
    ) -> list[Decision]: ...
    def insert(self, docs: Any, *, namespace: str | None = None) -> Any:
        """Insert unconditionally (duplicates are still reported); durable when it returns."""
        return self._decide("insert", docs, namespace)

    @overload
    def check_and_insert(self, docs: Document, *, namespace: str | None = None) -> Decision: ...
    @overload
    def check_and_insert(
        self, docs: Iterable[Document], *, namespace: str | None = None
    ) -> list[Decision]: ...
    def check_and_insert(self, docs: Any, *, namespace: str | None = None) -> Any:
        """Insert only documents that are not near-duplicates (atomic); durable when it returns."""
        return self._decide("check-and-insert", docs, namespace)

    def get(self, doc_id: str, *, namespace: str | None = None) -> dict[str, Any]:
        """The stored document ``{"id", "time", "fingerprint", "metadata", "text"?}``.

        Raises :class:`~neardup.errors.NotFoundError` when the id is unknown.
        """
        return self._request("GET", f"{self._prefix(namespace)}/docs/{id_segment(doc_id)}")

    def delete(self, doc_id: str, *, namespace: str | None = None) -> None:
        """Delete a stored document (NotFoundError when the id is unknown)."""
        self._request("DELETE", f"{self._prefix(namespace)}/docs/{id_segment(doc_id)}")

    # -- namespaces and operations -----------------------------------------------------------
    def create_namespace(self, name: str | None = None) -> bool:
        """Create namespace ``name`` (default: this client's); False when it already existed."""
        ns = self.namespace if name is None else name
        data = self._request("PUT", f"/v1/ns/{quote(ns, safe='')}")
        return bool(data["created"])

    def namespaces(self) -> list[str]:
        """Names of the server's namespaces."""
        return list(self._request("GET", "/v1/ns")["namespaces"])

    def health(self) -> dict[str, Any]:
        """``GET /healthz``: ``{"status": "ok", "namespaces", "documents", ...}``."""
        return self._request("GET", "/healthz")

    def metrics(self) -> str:
        """``GET /metrics`` (Prometheus text)."""
        return str(self._request("GET", "/metrics"))

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.base_url!r}, namespace={self.namespace!r})"
