"""Request body limit, enforced on the raw bytes before anything is parsed.

:class:`BodyLimitMiddleware` is a plain ASGI middleware: a ``Content-Length`` above the limit is
answered 413 at once; otherwise (and for chunked bodies, which have no length) the body is read
up to the limit and handed on, or answered 413 as soon as the limit is passed. The handlers
then read the body from memory, so nothing downstream ever sees more than ``max_body_bytes``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .schema import dumps

__all__ = ["BodyLimit", "BodyLimitMiddleware", "error_response_bytes"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: bytes of an oversized body read and discarded before answering 413 (beyond it: reset)
DRAIN_BYTES = 64 * 1024 * 1024

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def error_response_bytes(code: str, message: str, field: str | None = None) -> bytes:
    """The JSON error body used by every error answer: ``{"error": {"code", "message"}}``."""
    err: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        err["field"] = field
    return dumps({"error": err})


class BodyLimit:
    """Read a request body of at most ``max_body_bytes``, answering 413 beyond it.

    Parameters
    ----------
    max_body_bytes : int
        Largest accepted body, in bytes.
    """

    def __init__(self, max_body_bytes: int) -> None:
        self.max_body_bytes = int(max_body_bytes)

    async def _drain(self, receive: Receive, remaining: bool) -> bool:
        """Read and discard the rest of the body (at most ``DRAIN_BYTES``) so that the client,
        still sending, reads the 413 instead of a connection reset. Returns False when the
        client went away."""
        budget = DRAIN_BYTES
        while remaining and budget > 0:
            message = await receive()
            if message["type"] == "http.disconnect":
                return False
            budget -= len(message.get("body", b""))
            remaining = message.get("more_body", False)
        return True

    async def _reject(self, send: Send, size: str) -> None:
        body = error_response_bytes(
            "payload_too_large",
            f"the request body is {size} but this server accepts at most "
            f"{self.max_body_bytes} bytes (--max-body-bytes); send smaller batches",
        )
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def read(self, scope: Scope, receive: Receive, send: Send) -> tuple[bytes | None, int]:
        """Read the whole request body, enforcing the limit.

        Returns
        -------
        (body, status)
            ``(bytes, 0)`` when the body is within the limit; ``(None, 413)`` when it was too
            large (the 413 has been sent); ``(None, 0)`` when the client went away.
        """
        limit = self.max_body_bytes
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > limit:
                    if declared <= DRAIN_BYTES and not await self._drain(receive, True):
                        return None, 0
                    await self._reject(send, f"{declared} bytes (Content-Length)")
                    return None, 413
                break
        # Read the whole body (chunked or not) up to the limit.
        message = await receive()
        if message["type"] == "http.request" and not message.get("more_body", False):
            body = message.get("body", b"")  # the common case: one message
            if len(body) <= limit:
                return body, 0
        chunks: list[bytes] = []
        total = 0
        while True:
            if message["type"] == "http.disconnect":
                return None, 0
            chunk = message.get("body", b"")
            more = message.get("more_body", False)
            total += len(chunk)
            if total > limit:
                if await self._drain(receive, more):
                    await self._reject(send, f"more than {limit} bytes")
                    return None, 413
                return None, 0
            if chunk:
                chunks.append(chunk)
            if not more:
                return b"".join(chunks), 0
            message = await receive()


class BodyLimitMiddleware:
    """Answer 413 to any request whose body is larger than ``max_body_bytes``.

    Parameters
    ----------
    app : ASGI application
        The wrapped application.
    max_body_bytes : int
        Largest accepted body, in bytes.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.limit = BodyLimit(max_body_bytes)
        self.max_body_bytes = self.limit.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        body, _ = await self.limit.read(scope, receive, send)
        if body is None:
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


#: body bytes per cost unit of the per-client limit (a request costs 1 + its body / this)
COST_BYTES = 64 * 1024
#: most client addresses tracked; beyond it the fullest (idle) buckets are forgotten
MAX_CLIENTS = 10_000


class RateLimiter:
    """Token buckets per client address for requests that carry no valid token.

    Each address has a bucket of ``burst`` units refilled at ``rate`` units per second; a
    request costs ``1 + body_bytes // COST_BYTES`` (a large check costs in proportion to the
    verification it can cause). A request the bucket cannot pay is answered 429 with
    ``Retry-After`` (whole seconds until it could be paid). ``rate=0`` disables the limit.

    >>> lim = RateLimiter(rate=1.0, burst=2.0, clock=lambda: 0.0)
    >>> lim.take("a"), lim.take("a"), lim.take("a") > 0
    (0.0, 0.0, True)
    """

    def __init__(self, rate: float, burst: float, *, clock: Any = None) -> None:
        import time

        self.rate = float(rate)
        self.burst = float(burst)
        self._clock = clock or time.monotonic
        self._buckets: dict[str, tuple[float, float]] = {}  # address -> (units, at)

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    @staticmethod
    def cost(body_bytes: int) -> float:
        """Units a request with a body of ``body_bytes`` costs."""
        return 1.0 + body_bytes // COST_BYTES

    def take(self, client: str, cost: float = 1.0) -> float:
        """Spend ``cost`` units of ``client``'s bucket: 0.0 when paid, else the seconds until
        it could be (nothing is spent then). A cost above the burst is capped at the burst (a
        request the limit allows at all must be payable from a full bucket)."""
        if self.rate <= 0:
            return 0.0
        now = self._clock()
        units, at = self._buckets.get(client, (self.burst, now))
        units = min(self.burst, units + (now - at) * self.rate)
        cost = min(float(cost), self.burst)
        if units >= cost:
            self._buckets[client] = (units - cost, now)
            if len(self._buckets) > MAX_CLIENTS:
                self._forget(now)
            return 0.0
        self._buckets[client] = (units, now)
        return (cost - units) / self.rate

    def _forget(self, now: float) -> None:
        """Drop the buckets that are full again (those clients lose nothing)."""
        full = [
            k for k, (u, at) in self._buckets.items() if u + (now - at) * self.rate >= self.burst
        ]
        for k in full:
            del self._buckets[k]
        if len(self._buckets) > MAX_CLIENTS:  # still too many: the oldest first
            for k in sorted(self._buckets, key=lambda c: self._buckets[c][1])[
                : len(self._buckets) - MAX_CLIENTS
            ]:
                del self._buckets[k]


def rate_limited_response(retry_after: float) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    """``(429, body, headers)`` of the answer to a request over its client's limit."""
    import math

    seconds = max(1, math.ceil(retry_after))
    body = error_response_bytes(
        "rate_limited",
        f"too many requests without a token from this address; retry in {seconds} s "
        "(or send the server's bearer token: authenticated requests are not limited)",
    )
    return 429, body, [(b"retry-after", str(seconds).encode())]


def client_address(scope: Scope) -> str:
    """The client's address of an ASGI scope (``"unknown"`` when the server gives none)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"
