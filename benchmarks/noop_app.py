"""A no-op ASGI app: the latency floor of ``uvicorn`` on this machine (``bench_service.py``).

It reads the request body and answers a fixed check-and-insert-shaped JSON document, doing no
other work, so the single-document latency the load generator measures against it is what the
machine, the event loop, the HTTP server and the load generator cost on their own. The service
benchmark runs it in the same run, at the same rate, with the same event loop and HTTP parser
as ``neardup serve``.
"""

from __future__ import annotations

from typing import Any

_BODY = b'{"id":"x","duplicate":false,"added":true,"matches":[]}'
_HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(_BODY))]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":  # nothing to set up or tear down
        while True:
            kind = (await receive())["type"]
            await send({"type": kind + ".complete"})  # lifespan.startup / .shutdown
            if kind == "lifespan.shutdown":
                return
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": _BODY})
