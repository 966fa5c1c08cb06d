"""Connection limits and timeouts around uvicorn's HTTP protocols.

uvicorn closes a keep-alive connection that stays idle after a response
(``timeout_keep_alive``) and answers 503 to *requests* beyond ``limit_concurrency``, but a
connection that never sends a complete request head is held forever: slowloris clients (a header
line every few seconds) and idle connections that never send anything each keep a descriptor,
until ``accept()`` fails with EMFILE and new clients get no answer at all. :func:`guarded_protocol`
subclasses uvicorn's protocol class with:

``max_connections``
    A connection accepted while this many are open is answered ``503`` (``Retry-After: 1``) and
    closed at once, so descriptors never run out under a flood (the default leaves room below
    the process's descriptor limit for the stores, the log and the kernel caches).
``header_timeout``
    A request head must be complete within this many seconds of the connection opening, or of
    its first byte after a keep-alive pause (the idle pause itself is ``timeout_keep_alive``).
``body_timeout``
    Once the head is in, the whole body must arrive within this many seconds.

A connection that misses a deadline is closed (counted in
``neardup_connections_timed_out_total{phase}``).
"""

from __future__ import annotations

import asyncio
import logging
import resource
from typing import Any

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_KEEP_ALIVE_TIMEOUT",
    "default_max_connections",
    "guarded_protocol",
    "raise_fd_limit",
]

log = logging.getLogger("neardup.service")

#: seconds for a request head to arrive (slowloris bound)
DEFAULT_HEADER_TIMEOUT = 10.0
#: seconds for a request body to arrive once the head is in (32 MiB at ~1 MB/s)
DEFAULT_BODY_TIMEOUT = 60.0
#: seconds an idle keep-alive connection is kept after a response
DEFAULT_KEEP_ALIVE_TIMEOUT = 5.0
#: descriptors kept free for the stores, logs, sockets of the accept loop and kernel caches
FD_RESERVE = 256

_REJECT = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"content-type: application/json\r\n"
    b"retry-after: 1\r\n"
    b"connection: close\r\n"
)


def _reject_bytes(max_connections: int) -> bytes:
    from .limits import error_response_bytes

    body = error_response_bytes(
        "too_many_connections",
        f"the server has {max_connections} connections open (--max-connections); retry shortly",
    )
    return _REJECT + b"content-length: %d\r\n\r\n" % len(body) + body


def raise_fd_limit(target: int = 65536) -> int:
    """Raise this process's soft descriptor limit towards ``target`` (never above the hard
    limit); return the soft limit in force."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = min(target, hard) if hard != resource.RLIM_INFINITY else target
        if want > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        return int(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    except (ValueError, OSError):  # pragma: no cover - a platform without the call
        return 1024


def default_max_connections(fd_limit: int | None = None) -> int:
    """The default ``--max-connections``: the descriptor limit less ``FD_RESERVE``, at most
    4,096 and at least 16."""
    if fd_limit is None:
        fd_limit = int(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    return max(16, min(4096, fd_limit - FD_RESERVE))


def guarded_protocol(
    base: type,
    *,
    max_connections: int,
    header_timeout: float,
    body_timeout: float,
    metrics: Any = None,
) -> type:
    """A subclass of uvicorn's ``base`` protocol (``HttpToolsProtocol`` or ``H11Protocol``)
    with the connection limit and the head / body deadlines (see the module docstring)."""
    reject = _reject_bytes(max_connections)
    httptools = hasattr(base, "on_headers_complete")

    class Guarded(base):
        _deadline: asyncio.TimerHandle | None = None
        _phase = "head"  # head: waiting for a request head; body: reading one; idle: neither
        _counted = False

        # -- deadlines -------------------------------------------------------------------------
        def _arm(self, phase: str, seconds: float) -> None:
            self._disarm()
            self._phase = phase
            if seconds > 0:
                self._deadline = self.loop.call_later(seconds, self._expired, phase)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self, phase: str) -> None:
            self._deadline = None
            transport = getattr(self, "transport", None)
            if transport is None or transport.is_closing():
                return
            if metrics is not None:
                metrics.connections_timed_out.labels(phase).inc()
            log.debug("closing a connection whose request %s did not arrive in time", phase)
            transport.close()

        # -- connection ------------------------------------------------------------------------
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                if metrics is not None:
                    metrics.connections_rejected.inc()
                self._phase = "idle"
                transport.write(reject)
                transport.close()
                return
            if metrics is not None:
                metrics.connection_opened()
                self._counted = True
            self._arm("head", header_timeout)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if self._counted and metrics is not None:
                self._counted = False
                metrics.connection_closed()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._phase == "idle" and self._deadline is None:
                # the first byte of the next request after a response: its head is due
                self._arm("head", header_timeout)
                self._phase = "head"
            super().data_received(data)
            if not httptools:
                self._h11_progress()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self._phase != "body":
                self._disarm()
                self._phase = "idle"  # uvicorn's keep-alive timeout covers the pause

        # -- httptools callbacks ---------------------------------------------------------------
        def on_headers_complete(self) -> None:
            self._arm("body", body_timeout)
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._disarm()
            self._phase = "idle"
            super().on_message_complete()

        # -- h11: read the parser's state after each chunk -------------------------------------
        def _h11_progress(self) -> None:
            import h11

            state = self.conn.their_state
            if state is h11.SEND_BODY and self._phase == "head":
                self._arm("body", body_timeout)
            elif state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED) and self._phase != "idle":
                self._disarm()
                self._phase = "idle"

    if not httptools:  # h11 has no such callbacks: drop the httptools hooks
        del Guarded.on_headers_complete
        del Guarded.on_message_complete
    Guarded.__name__ = Guarded.__qualname__ = "Guarded" + base.__name__
    return Guarded


def uvicorn_config(app: Any, config: Any, **kwargs: Any) -> Any:
    """A ``uvicorn.Config`` for ``app`` with the limits of ``config`` (a
    :class:`~neardup.service.config.ServiceConfig`): the guarded protocol on uvicorn's
    ``http`` implementation (``kwargs["http"]``, default ``httptools`` when installed), the
    keep-alive timeout, and an h11 head size bound. Other ``kwargs`` go to ``uvicorn.Config``.
    """
    import importlib.util

    import uvicorn

    http = kwargs.pop("http", None)
    if http is None:
        http = "httptools" if importlib.util.find_spec("httptools") is not None else "h11"
    base: type
    if http == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        base = HttpToolsProtocol
    else:
        from uvicorn.protocols.http.h11_impl import H11Protocol

        base = H11Protocol
    max_connections = config.max_connections or default_max_connections()
    protocol = guarded_protocol(
        base,
        max_connections=max_connections,
        header_timeout=config.header_timeout_s,
        body_timeout=config.body_timeout_s,
        metrics=getattr(getattr(app, "state", None), "metrics", None),
    )
    return uvicorn.Config(
        app,
        http=protocol,
        timeout_keep_alive=max(1, round(config.keep_alive_timeout_s)),
        h11_max_incomplete_event_size=64 * 1024,
        **kwargs,
    )
