"""A no-op ASGI app: the latency floor of ``uvicorn`` on this machine (``bench_service.py``).

It reads the request body and answers a fixed check-and-insert-shaped JSON document, doing no
other work, so the single-document latency the load generator measures against it is what the
machine, the event loop, the HTTP server and the load generator cost on their own. The service
benchmark runs it in the same run, at the same rate, with the same event loop and HTTP parser
as ``neardup serve``.

With ``NOOP_LOG=PATH`` it is the *durable* floor: each request's body is appended to the file
``PATH`` (preallocated, as the store's log is) and answered only after an ``fdatasync`` that
started after its append, with group commit as the store does it (the requests that arrive
while a sync runs share the next one). That is what one durable check-and-insert costs on this
machine's disk with no other work (``bench_floor.py``).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

_BODY = b'{"id":"x","duplicate":false,"added":true,"matches":[]}'
_HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(_BODY))]


class _GroupSync:
    """fdatasync of one file in a worker thread; callers arriving during a sync wait for the
    next one, which then covers all of them (the store's pipelined group commit, simplified)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._next: asyncio.Future[None] | None = None
        self._running = False
        self._task: asyncio.Task[None] | None = None  # (held: the loop keeps only weak refs)

    async def durable(self) -> None:
        """Return once a sync that started after this call has finished."""
        loop = asyncio.get_running_loop()
        if self._next is None:
            self._next = loop.create_future()
        fut = self._next
        if not self._running:
            self._running = True
            self._task = loop.create_task(self._run())
        await fut

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._next is not None:
                fut, self._next = self._next, None
                try:
                    await loop.run_in_executor(None, os.fdatasync, self.fd)
                except OSError as exc:
                    fut.set_exception(exc)
                else:
                    fut.set_result(None)
        finally:
            self._running = False


_LOG: _GroupSync | None = None
if os.environ.get("NOOP_LOG"):
    _fd = os.open(os.environ["NOOP_LOG"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.posix_fallocate(_fd, 0, 256 << 20)  # as the store's log: appends change no file size
    _LOG = _GroupSync(_fd)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":  # nothing to set up or tear down
        while True:
            kind = (await receive())["type"]
            await send({"type": kind + ".complete"})  # lifespan.startup / .shutdown
            if kind == "lifespan.shutdown":
                return
    if scope["type"] != "http":
        return
    more, body = True, []
    while more:
        msg = await receive()
        body.append(msg.get("body", b""))
        more = msg.get("more_body", False)
    if _LOG is not None:
        os.write(_LOG.fd, b"".join(body))
        await _LOG.durable()
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": _BODY})
