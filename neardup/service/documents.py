"""The hot path of the service: ``POST {p}/check``, ``{p}/insert``, ``{p}/check-and-insert``.

:class:`DocumentRoutes` answers these requests straight from the ASGI server, before FastAPI's
middleware stack, router and dependency layer (most of the per-request cost of a single-document
request there). It does everything the rest of the application does for a request, in one
place: the request metrics, the body limit (413 on the raw bytes, before parsing), the bearer
token (401/403: a check is a read, an insert a write; :class:`~neardup.service.auth.Authenticator`),
validation (422 naming the field: the body's shape here, each document by the store's own
preparer), the namespace (404), the store call, and the JSON error shape for every
:class:`~neardup.errors.NeardupError`. Every other route goes to
the FastAPI application (which also describes these routes in the OpenAPI document and answers
them with :meth:`DocumentRoutes.decide` when it is mounted without this fast path).

Each document request is timed per stage (see :data:`neardup.service.metrics.STAGES`), so
``/metrics`` shows where the latency goes: parsing, fingerprinting, the writer's queue and
group commit, the hop back to the event loop, and the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import time
from concurrent.futures import Future
from typing import Any

from ..errors import (
    CorruptRecordError,
    InputError,
    NeardupError,
    ServiceUnavailableError,
    StorageError,
    error_code,
    http_status_for,
)
from .auth import Authenticator, is_anonymous
from .limits import (
    BodyLimit,
    RateLimiter,
    client_address,
    error_response_bytes,
    rate_limited_response,
)
from .metrics import Metrics
from .schema import encode_decisions, loads, parse_documents, request_error

__all__ = [
    "OPS",
    "DocumentRoutes",
    "ShutdownAnswerMiddleware",
    "error_parts",
    "in_namespace",
    "shutdown_parts",
]

log = logging.getLogger("neardup.service")

#: route suffix -> (Deduplicator method, whether it writes)
OPS: dict[str, tuple[str, bool]] = {
    "check": ("check", False),
    "insert": ("add", True),
    "check-and-insert": ("check_and_add", True),
}

#: requests at most this large are fingerprinted on the event loop (no worker-thread hop)
INLINE_DOCS = 8
INLINE_BYTES = 64 * 1024

_JSON = (b"content-type", b"application/json")
Headers = list[tuple[bytes, bytes]]


def in_namespace(exc: CorruptRecordError, namespace: str) -> CorruptRecordError:
    """``exc`` with the namespace named at the start of its message (the store knows only its
    directory)."""
    prefix = f"namespace {namespace!r}: "
    if not str(exc).startswith(prefix):
        exc.args = (prefix + str(exc),)
    return exc


def error_parts(method: str, path: str, exc: NeardupError) -> tuple[int, bytes, Headers]:
    """``(status, body, extra headers)`` of the error answer for ``exc`` (its one mapping)."""
    status = http_status_for(exc)
    headers: Headers = [(b"www-authenticate", b"Bearer")] if status == 401 else []
    if isinstance(exc, StorageError):
        log.warning("write refused (%s): %s", path, exc)
    elif status >= 500:
        log.error("%s %s failed: %s: %s", method, path, type(exc).__name__, exc)
    body = error_response_bytes(error_code(exc), str(exc), getattr(exc, "field", None))
    return status, body, headers


def shutdown_parts(method: str, path: str, *, writes: bool) -> tuple[int, bytes, Headers]:
    """The answer to a request still running when the server's ``--graceful-timeout`` ran out
    at shutdown: 503 ``service_unavailable`` (uvicorn's own answer is a plain-text 500).

    A write's outcome is unknown to it then: the writer commits what it has been given before
    the stores close, so the message says its writes may be applied and that re-sending is
    safe (an id already stored answers as a duplicate of itself). ``writes``: whether the
    request may have written (a body still being read has not)."""
    message = (
        "the server is shutting down and stopped waiting for this request (its "
        "--graceful-timeout ran out)"
    )
    if writes:
        message += (
            "; some or all of its writes may still be applied: re-send it once the server is "
            "back (an id already stored is answered as a duplicate of itself)"
        )
    return error_parts(method, path, ServiceUnavailableError(message))


class ShutdownAnswerMiddleware:
    """ASGI middleware: an HTTP request whose task is cancelled (uvicorn cancels the requests
    still running when its graceful shutdown times out) before its answer started is answered
    :func:`shutdown_parts` instead of uvicorn's plain-text 500 (the service's FastAPI routes
    and the cluster router; the document routes answer it themselves)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await _answer_if_cancelled(self.app, scope, receive, send)
        else:
            await self.app(scope, receive, send)


async def _answer_if_cancelled(app: Any, scope: Any, receive: Any, send: Any) -> None:
    started = False

    async def tracking_send(message: Any) -> None:
        nonlocal started
        if message["type"] == "http.response.start":
            started = True
        await send(message)

    try:
        await app(scope, receive, tracking_send)
    except asyncio.CancelledError:
        if started:
            raise
        method = scope["method"]
        writes = method not in ("GET", "HEAD", "OPTIONS")
        status, payload, headers = shutdown_parts(method, scope["path"], writes=writes)
        await _send_answer(send, status, payload, headers)


async def _send_answer(send: Any, status: int, payload: bytes, headers: Headers) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [_JSON, (b"content-length", b"%d" % len(payload)), *headers],
        }
    )
    await send({"type": "http.response.body", "body": payload})


#: errno values of descriptor exhaustion: answered 503 (the process recovers once
#: connections close), never 500
FD_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE})


def fd_exhausted_parts(exc: BaseException) -> tuple[int, bytes, Headers] | None:
    """The 503 answer when ``exc`` (or its cause) is descriptor exhaustion, else None."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno in FD_EXHAUSTED:
            log.warning("answering 503: %s", exc)
            body = error_response_bytes(
                "too_many_open_files",
                "the server has run out of file descriptors; retry shortly (raise the "
                "descriptor limit or lower --max-connections)",
            )
            return 503, body, [(b"retry-after", b"1")]
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
        seen += 1
    return None


def _long_texts(docs: list[Any]) -> list[str]:
    """The texts of ``docs`` long enough for the verifier's token cache."""
    from ..verify.rule import LONG_CHARS

    out = []
    for d in docs:
        t = d.get("text") if isinstance(d, dict) else None
        if isinstance(t, str) and len(t) >= LONG_CHARS:
            out.append(t)
    return out


def prepare_texts(store: Any, docs: list[Any]) -> None:
    """Tokenise the long texts of ``docs`` into the store's verifier cache, in the calling
    (worker) thread, so that the writer verifies them without tokenising (see
    :meth:`neardup.verify.Verifier.prepare`)."""
    prepare = getattr(getattr(store, "verifier", None), "prepare", None)
    if prepare is not None:
        texts = _long_texts(docs)
        if texts:
            prepare(texts)


def _submitter(store: Any, method: str) -> Any:
    """``store.submit`` when ``store.<method>`` is the :class:`Deduplicator`'s own (so the
    non-blocking path does exactly what the method would), else None."""
    cls: type = type(store)
    return getattr(store, "submit", None) if _own_method(cls, method) else None


@functools.lru_cache(maxsize=64)
def _own_method(cls: type, method: str) -> bool:
    """Whether ``cls.<method>`` is :class:`Deduplicator`'s (per class, cached)."""
    from ..online.deduplicator import Deduplicator

    return getattr(cls, method, None) is getattr(Deduplicator, method)


class _Batcher:
    """Submit small requests that arrive in the same event-loop iteration as one batch.

    The batch is submitted with ``inline=True``: when the writer thread is idle, the event loop
    decides it itself (see :meth:`neardup.online.Deduplicator.submit`), which spares a thread
    wake-up and the interpreter lock's trip between two threads per request.

    Requests for the same store and operation whose handlers run before the loop's next
    iteration (typically several single documents read from different connections in one
    wake-up, which is what happens whenever the server falls behind) are validated,
    fingerprinted and queued for the writer as *one* batch: one ``Deduplicator.submit`` call
    (one fingerprint / content-hash call, one future, one wake-up of the loop) instead of one
    per request. The writer decides a batch in order, exactly as it decides consecutive
    requests in one group, so the answers are the same; each request gets its own slice of
    the decisions. If the merged batch is refused (e.g. two requests carry the same id, which
    one batch may not), every request is submitted on its own and gets its own answer.
    """

    def __init__(self) -> None:
        # (store id, method) -> (submit, [(docs, future)])
        self._pending: dict[tuple[int, str], tuple[Any, list[tuple[list[Any], Any]]]] = {}
        self._scheduled = False

    def submit(self, store: Any, submit: Any, method: str, docs: list[Any]) -> asyncio.Future[Any]:
        """Queue ``docs``; the future resolves to ``(decisions, t_prepared, t_decided)``."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        key = (id(store), method)
        entry = self._pending.get(key)
        if entry is None:
            entry = self._pending[key] = (submit, [])
        entry[1].append((docs, fut))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush, loop)
        return fut

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, {}
        for (_, method), (submit, items) in pending.items():
            if len(items) > 1:
                merged = [d for docs, _ in items for d in docs]
                try:
                    future, _single = submit(method, merged, inline=True)
                except Exception:  # e.g. an id repeated across requests: one by one below
                    pass
                else:
                    _when_done(future, loop, _split, items, time.perf_counter())
                    continue
            for docs, fut in items:
                try:
                    future, _single = submit(method, docs, inline=True)
                except Exception as exc:
                    if not fut.done():  # a cancelled request (shutdown) needs no answer
                        fut.set_exception(exc)
                else:
                    _when_done(future, loop, _split, [(docs, fut)], time.perf_counter())


def _when_done(future: Future[Any], loop: asyncio.AbstractEventLoop, fn: Any, *args: Any) -> None:
    """Call ``fn(future, *args, t_done)`` on the loop once the writer resolves ``future``
    (``t_done``: perf_counter when it was resolved, or when this was called if it already was).

    Must be called on ``loop``'s thread. A future that is already resolved (the loop decided
    and synced the group itself, :meth:`neardup.online.Deduplicator.submit` with
    ``inline=True``) is handed to ``fn`` right here: going through ``call_soon_threadsafe``
    would cost a write to the loop's self-pipe and one more loop iteration before the
    request's coroutine is even scheduled (the single-document latency of
    ``benchmarks/bench_service.py`` shows it).
    """
    perf = time.perf_counter
    if future.done():
        fn(future, *args, perf())
        return

    def done(src: Future[Any]) -> None:  # runs in the writer thread
        t = perf()
        # a closed loop (shutdown) has nobody waiting any more
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(fn, src, *args, t)

    future.add_done_callback(done)


def _split(
    src: Future[Any], items: list[tuple[list[Any], Any]], t_prep: float, t_done: float
) -> None:
    """On the loop: give each request its slice of the writer's decisions (or its error)."""
    exc = src.exception()
    decisions = None if exc is not None else src.result()
    pos = 0
    for docs, fut in items:
        if fut.cancelled():
            pos += len(docs)
            continue
        if decisions is None:
            fut.set_exception(exc)
        else:
            fut.set_result((decisions[pos : pos + len(docs)], t_prep, t_done))
        pos += len(docs)


def _resolve(src: Future[Any], dst: asyncio.Future[Any], t_prep: float, t_done: float) -> None:
    """On the loop: copy the writer's outcome into ``dst``."""
    if dst.cancelled():
        return
    exc = src.exception()
    if exc is not None:
        dst.set_exception(exc)
    else:
        dst.set_result((src.result(), t_prep, t_done))


class _Coalesced:
    """Stands in for an ASGI server's transport while one response is sent: collects its
    writes and hands them on as one :meth:`flush` (also before ``close``); everything else is
    the real transport's."""

    __slots__ = ("_parts", "_transport")

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> None:
        self._parts.append(bytes(data))

    def flush(self) -> None:
        if self._parts:
            data = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
            self._parts = []
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class DocumentRoutes:
    """Answer the document routes directly (see the module docstring).

    Parameters
    ----------
    registry : NamespaceRegistry
        Namespace name -> deduplicator.
    metrics : Metrics
        Where requests, documents and stage timings are recorded.
    auth : Authenticator
        Who may read and write which namespace.
    max_batch : int
        Most documents per batch (413 above).
    max_body_bytes : int
        Largest body (413 above, on the raw bytes).
    limiter : RateLimiter, optional
        Per-client limit on checks that carry no valid token (429 beyond it).
    """

    def __init__(
        self,
        registry: Any,
        metrics: Metrics,
        *,
        auth: Authenticator,
        max_batch: int,
        max_body_bytes: int,
        limiter: RateLimiter | None = None,
    ) -> None:
        self.registry = registry
        self.metrics = metrics
        self.auth = auth
        self.max_batch = int(max_batch)
        self.limit = BodyLimit(max_body_bytes)
        self.limiter = limiter
        self.batcher = _Batcher()

    def _admit(
        self, scope: Any, route: str, namespace: str, op: str, size: int
    ) -> tuple[int, bytes, Headers] | None:
        """Authorize the request (raises :class:`~neardup.errors.AuthError` 401 /
        :class:`~neardup.errors.ForbiddenError` 403); answer 429 to an anonymous read (open
        reads, or no authentication) whose client's bucket cannot pay for it; None: go on."""
        write = OPS[op][1]
        auth = self.auth
        grant = auth.authorize(_authorization(scope) if auth.enabled else None, namespace, write)
        limiter = self.limiter
        if write or not is_anonymous(grant) or limiter is None or not limiter.enabled:
            return None  # writes are governed by the token; a token is not limited
        wait = limiter.take(client_address(scope), limiter.cost(size))
        if wait <= 0:
            return None
        self.metrics.rate_limited.labels(route).inc()
        return rate_limited_response(wait)

    # -- routing -------------------------------------------------------------------------------
    @staticmethod
    def match(path: str) -> tuple[str, str, str] | None:
        """``(route template, namespace, op)`` for a document route's path, else None.

        >>> DocumentRoutes.match("/v1/ns/tenant-b/check")
        ('/v1/ns/{namespace}/check', 'tenant-b', 'check')
        >>> DocumentRoutes.match("/v1/docs/x") is None
        True
        """
        parts = path.split("/")
        if len(parts) == 3 and parts[1] == "v1" and parts[2] in OPS:  # /v1/<op>
            return path, "default", parts[2]
        # /v1/ns/<namespace>/<op>
        if (
            len(parts) == 5
            and parts[1] == "v1"
            and parts[2] == "ns"
            and parts[3]
            and parts[4] in OPS
        ):
            return "/v1/ns/{namespace}/" + parts[4], parts[3], parts[4]
        return None

    def _parse_and_submit(
        self, store: Any, submit: Any, method: str, body: bytes
    ) -> tuple[Future[Any] | None, bool, float, float]:
        """In a worker thread: ``(writer future or None, is_batch, t_start, t_parsed)``."""
        t0 = time.perf_counter()
        docs, is_batch = parse_documents(loads(body), max_batch=self.max_batch)
        t_parsed = time.perf_counter()
        if not docs:
            return None, is_batch, t0, t_parsed
        prepare_texts(store, docs)
        try:
            future, _ = submit(method, docs)
        except InputError as exc:
            raise request_error(exc, is_batch) from None
        return future, is_batch, t0, t_parsed

    # -- the request ---------------------------------------------------------------------------
    async def __call__(
        self, scope: Any, receive: Any, send: Any, hit: tuple[str, str, str]
    ) -> None:
        """Answer one ``POST`` to a document route (``hit`` from :meth:`match`)."""
        perf = time.perf_counter
        start = perf()
        route, namespace, op = hit
        status = 499  # the client went away before an answer (nginx's convention)
        try:
            try:
                body, status413 = await self.limit.read(scope, receive, send)
            except asyncio.CancelledError:  # shutting down (--graceful-timeout ran out)
                status, answer, extra = shutdown_parts("POST", scope["path"], writes=False)
                await _send_answer(send, status, answer, extra)
                return
            if body is None:
                status = status413 or 499
                return
            t_read = perf()
            headers: Headers = []
            stages: tuple[float, ...] | None = None
            try:
                limited = self._admit(scope, route, namespace, op, len(body))
                if limited is not None:
                    status, payload, headers = limited
                    raise _Answered
                payload, stages = await self.decide(namespace, op, body)
                status = 200
            except _Answered:
                pass
            except asyncio.CancelledError:
                # shutting down and --graceful-timeout ran out while the writer still had the
                # request: answered 503, not uvicorn's plain-text 500 (tests/service/
                # test_faults_service.py)
                status, payload, headers = shutdown_parts("POST", scope["path"], writes=True)
            except NeardupError as exc:
                status, payload, headers = error_parts("POST", scope["path"], exc)
            except Exception as exc:  # a bug: logged, answered like every other 500
                exhausted = fd_exhausted_parts(exc)
                if exhausted is not None:
                    status, payload, headers = exhausted
                else:
                    log.exception("unexpected error in POST %s", scope["path"])
                    status = 500
                    payload = error_response_bytes(
                        "internal_error",
                        f"internal error ({type(exc).__name__}); see the server log",
                    )
            t_send = perf()
            start_msg = {
                "type": "http.response.start",
                "status": status,
                "headers": [_JSON, (b"content-length", b"%d" % len(payload)), *headers],
            }
            body_msg = {"type": "http.response.body", "body": payload}
            cycle = getattr(send, "__self__", None)
            transport = getattr(cycle, "transport", None)
            if cycle is not None and transport is not None and hasattr(transport, "write"):
                # uvicorn writes the head and the body of a response as two socket writes;
                # collected here they leave as one (one send syscall and one wake-up of the
                # client instead of two; benchmarks/bench_service.py measures the event loop's
                # time per request)
                out = _Coalesced(transport)
                cycle.transport = out
                try:
                    await send(start_msg)
                    await send(body_msg)
                finally:
                    if cycle.transport is out:
                        cycle.transport = transport
                    out.flush()
            else:
                await send(start_msg)
                await send(body_msg)
            if stages is not None:
                parse, prepare, writer, resume, encode = stages
                self.metrics.observe_stages(
                    (t_read - start, parse, prepare, writer, resume, encode + perf() - t_send)
                )
        finally:
            self.metrics.observe_request(route, "POST", status, perf() - start)

    async def decide(
        self, namespace: str, op: str, body: bytes
    ) -> tuple[bytes, tuple[float, float, float, float, float]]:
        """Decide a document request's raw body.

        Returns
        -------
        (answer, stages)
            The JSON answer (status 200) and the seconds spent to parse, prepare, wait for
            the writer, resume on the loop and encode (see
            :data:`neardup.service.metrics.STAGES`).

        Raises
        ------
        NeardupError
            Any error the caller answers with :func:`error_parts`.
        """
        perf = time.perf_counter
        t0 = perf()
        method = OPS[op][0]
        store = self.registry.get(namespace)
        submit = _submitter(store, method)
        is_batch = True
        try:
            if submit is not None and len(body) > INLINE_BYTES:
                # a large body is decoded, validated, fingerprinted and queued in a worker
                # thread (one hop), so the event loop keeps serving other requests meanwhile;
                # the request then awaits the writer's outcome without holding a thread
                loop = asyncio.get_running_loop()
                future, is_batch, _, t_parsed = await loop.run_in_executor(
                    None, self._parse_and_submit, store, submit, method, body
                )
                t_prep = perf()
                if future is None:
                    decisions: list[Any] = []
                    t_done = t_back = t_prep
                else:
                    waiter = loop.create_future()
                    _when_done(future, loop, _resolve, waiter, t_prep)
                    decisions, t_prep, t_done = await waiter
                    t_back = perf()
            else:
                docs, is_batch = parse_documents(loads(body), max_batch=self.max_batch)
                t_parsed = perf()
                if not docs:
                    decisions = []
                    t_prep = t_done = t_back = perf()
                elif submit is None:  # a store that overrides the method (or lacks submit)
                    t_prep = perf()
                    decisions = await asyncio.to_thread(getattr(store, method), docs)
                    t_done = t_back = perf()
                elif len(docs) <= INLINE_DOCS and not _long_texts(docs):
                    # small requests are fingerprinted on the event loop (cheaper than a thread
                    # hop), together with the other small requests of this loop iteration
                    decisions, t_prep, t_done = await self.batcher.submit(
                        store, submit, method, docs
                    )
                    t_back = perf()
                else:
                    loop = asyncio.get_running_loop()
                    future, _ = await loop.run_in_executor(
                        None, _prepare_and_submit, store, submit, method, docs
                    )
                    waiter = loop.create_future()
                    _when_done(future, loop, _resolve, waiter, perf())
                    decisions, t_prep, t_done = await waiter
                    t_back = perf()
        except InputError as exc:  # a document the store refused: 422 naming its field
            raise request_error(exc, is_batch) from None
        except CorruptRecordError as exc:
            raise in_namespace(exc, namespace) from None
        self.metrics.count_documents(namespace, op, decisions)
        payload = encode_decisions(decisions, is_batch) if decisions or is_batch else b"{}"
        return payload, (
            t_parsed - t0,
            t_prep - t_parsed,
            t_done - t_prep,
            t_back - t_done,
            perf() - t_back,
        )


class _Answered(Exception):
    """The answer is already decided (429): skip the store."""


def _prepare_and_submit(store: Any, submit: Any, method: str, docs: list[Any]) -> Any:
    """In a worker thread: tokenise the long texts, then queue ``docs`` for the writer."""
    prepare_texts(store, docs)
    return submit(method, docs)


def _authorization(scope: Any) -> bytes | None:
    """The ``Authorization`` header of an ASGI scope, as the bytes that were sent."""
    for k, v in scope.get("headers", ()):
        if k == b"authorization" or k.lower() == b"authorization":
            return bytes(v)
    return None
