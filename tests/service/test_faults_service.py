"""Fault injection against the HTTP service (issue 21 items 2, 3, 7, 8; issue 20 item 9).

Loopback only, bounded loops, seconds each: slow and idle connections are closed after their
deadlines, the connection limit answers 503 and the server recovers, descriptor exhaustion
answers 503, the worst verification request (edited copies of a 1 MB stored document) is
bounded and does not hold a concurrent insert, unauthenticated reads are rate limited, a
non-ASCII token works, an empty token is refused, and /metrics parses with conventional names.
The figures for these cases come from ``benchmarks/faults_service.py``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from neardup.service.app import create_app  # noqa: E402
from neardup.service.config import ServiceConfig  # noqa: E402
from neardup.service.testing import free_port, serve_in_thread, wait_healthy  # noqa: E402

TOKEN = "s3cret"


#: a client's timeout: the first document request of a process on a cold kernel cache (this
#: file run alone on a fresh machine) compiles the kernels, well past httpx's 5 s default
_TIMEOUT = 180.0


def _server(tmp_path: Path, **kw: object) -> Iterator[str]:
    config = ServiceConfig(data_dir=tmp_path, **kw)  # type: ignore[arg-type]
    with serve_in_thread(create_app(config)) as url:
        yield url


def _addr(url: str) -> tuple[str, int]:
    host, port = url.rsplit("//", 1)[1].split(":")
    return host, int(port)


def _closed_within(sock: socket.socket, seconds: float, drip: bytes = b"") -> float | None:
    """Seconds until the server closed ``sock`` (sending ``drip`` every 0.1 s meanwhile), or
    None if it was still open after ``seconds``."""
    t0 = time.monotonic()
    sock.settimeout(0.1)
    while time.monotonic() - t0 < seconds:
        try:
            if drip:
                sock.sendall(drip)
            data = sock.recv(65536)
            if data == b"":
                return time.monotonic() - t0
        except TimeoutError:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - t0
    return None


@pytest.fixture
def short_timeouts(tmp_path: Path) -> Iterator[str]:
    yield from _server(tmp_path, header_timeout_s=0.5, body_timeout_s=0.5, keep_alive_timeout_s=1.0)


def test_slowloris_head_is_cut_at_the_header_timeout(short_timeouts: str) -> None:
    with socket.create_connection(_addr(short_timeouts)) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        took = _closed_within(s, 5.0, drip=b"X-a: b\r\n")
    assert took is not None and took < 3.0, took


def test_idle_connection_is_closed(short_timeouts: str) -> None:
    with socket.create_connection(_addr(short_timeouts)) as s:
        took = _closed_within(s, 5.0)
    assert took is not None and took < 3.0, took


def test_idle_keep_alive_is_closed_after_a_response(short_timeouts: str) -> None:
    with socket.create_connection(_addr(short_timeouts)) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(5)
        assert s.recv(65536).startswith(b"HTTP/1.1 200")
        took = _closed_within(s, 5.0)
    assert took is not None and took < 3.0, took


def test_slow_body_is_cut_at_the_body_timeout(short_timeouts: str) -> None:
    with socket.create_connection(_addr(short_timeouts)) as s:
        s.sendall(b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
        took = _closed_within(s, 5.0, drip=b" ")
    assert took is not None and took < 3.0, took


def test_connection_limit_answers_503_and_recovers(tmp_path: Path) -> None:
    for url in _server(tmp_path, max_connections=4, header_timeout_s=30.0):
        held = [socket.create_connection(_addr(url)) for _ in range(4)]
        try:
            time.sleep(0.2)
            with socket.create_connection(_addr(url)) as s:
                s.settimeout(5)
                answer = s.recv(65536)
            assert answer.startswith(b"HTTP/1.1 503"), answer
            assert b"retry-after: 1" in answer.lower() and b"too_many_connections" in answer
        finally:
            for s in held:
                s.close()
        deadline = time.monotonic() + 5
        while True:  # the held connections' slots come back
            r = httpx.get(url + "/healthz", timeout=5)
            if r.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert r.status_code == 200
        metrics = httpx.get(url + "/metrics").text
        assert "neardup_connections_rejected_total 1.0" in metrics


def test_descriptor_exhaustion_answers_503(tmp_path: Path) -> None:
    config = ServiceConfig(data_dir=tmp_path)
    app = create_app(config)
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=_TIMEOUT) as c:
        store = app.state.registry.get("default")

        def no_fds(*args: object, **kw: object) -> None:
            raise OSError(errno.EMFILE, "Too many open files")

        store.submit = no_fds
        r = c.post("/v1/check", json={"id": "a", "text": "some text here"})
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "too_many_open_files"
        assert r.headers["retry-after"] == "1"
        del store.submit  # descriptors are back: so is the service
        assert c.post("/v1/check", json={"id": "a", "text": "some text here"}).status_code == 200


def test_flood_under_a_low_descriptor_limit_never_exhausts(tmp_path: Path) -> None:
    """A real server under a 320-descriptor limit: 150 idle connections (more than its
    default --max-connections of 64) leave it answering, and nothing is answered 500."""
    port = free_port()
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (320, 320)); "
        "from neardup.cli.main import main; sys.argv = sys.argv[1:]; main()"
    )
    cmd = [
        sys.executable, "-c", code, "neardup", "serve", "--data", str(tmp_path / "d"),
        "--port", str(port), "--log-level", "warning", "--header-timeout", "30", "--no-auth",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    held: list[socket.socket] = []
    try:
        wait_healthy(url, 120, proc=proc)
        for _ in range(150):
            held.append(socket.create_connection(("127.0.0.1", port)))
        time.sleep(0.3)
        with httpx.Client(base_url=url, timeout=5) as c:
            r = c.get("/healthz")
            assert r.status_code == 503  # over the limit: answered, not left hanging
        for s in held:
            s.close()
        held.clear()
        deadline = time.monotonic() + 10
        status = 0
        while status != 200 and time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                status = httpx.get(url + "/healthz", timeout=5).status_code
            time.sleep(0.1)
        assert status == 200
        r = httpx.post(url + "/v1/insert", json={"id": "x", "text": "after the flood"}, timeout=30)
        assert r.status_code == 200, r.text
    finally:
        for s in held:
            s.close()
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    assert b"Too many open files" not in err, err.decode()[-2000:]


# ---------------------------------------------------------------------------------------------
# verification cost


def _document(rng: random.Random, n_bytes: int) -> str:
    vocab = [f"{w}{i}" for i, w in enumerate(["alpha", "beta", "gamma", "delta"] * 500)]
    out: list[str] = []
    size = 0
    while size < n_bytes:
        w = rng.choice(vocab)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def _edited(rng: random.Random, text: str, k: int) -> str:
    words = text.split(" ")
    for _ in range(k):
        words[rng.randrange(len(words))] = "edited"
    return " ".join(words)


def test_worst_check_is_bounded_and_does_not_hold_writes(tmp_path: Path) -> None:
    """Four edited copies of a 1 MB stored document: the quadratic LCS took 31.5 s and held an
    insert 29.5 s; bounded now (generous limits here, figures in benchmarks/faults_service.py)."""
    rng = random.Random(3)
    doc = _document(rng, 1_000_000)
    copies = [_edited(rng, doc, 50) for _ in range(4)]
    config = ServiceConfig(data_dir=tmp_path, token=TOKEN, max_body_bytes=16 * 2**20)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with serve_in_thread(create_app(config)) as url, httpx.Client(base_url=url, timeout=60) as c:
        assert c.post("/v1/insert", json={"id": "big", "text": doc}, headers=auth).is_success
        c.post("/v1/insert", json={"id": "warm", "text": "warm up"}, headers=auth)
        t0 = time.perf_counter()
        c.post("/v1/insert", json={"id": "w0", "text": "an idle insert"}, headers=auth)
        idle = time.perf_counter() - t0

        def check() -> float:
            t = time.perf_counter()
            body = {"documents": [{"id": f"c{i}", "text": t_} for i, t_ in enumerate(copies)]}
            r = httpx.post(url + "/v1/check", json=body, timeout=120, headers=auth)
            assert r.status_code == 200, r.text
            assert all(x["duplicate"] for x in r.json()["results"])
            return time.perf_counter() - t

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            fut = pool.submit(check)
            time.sleep(0.05)
            t0 = time.perf_counter()
            r = c.post("/v1/insert", json={"id": "w1", "text": "a concurrent insert"}, headers=auth)
            during = time.perf_counter() - t0
            took = fut.result()
        assert r.status_code == 200
    assert took < 15.0, took
    assert during - idle < 2.0, (during, idle)


# ---------------------------------------------------------------------------------------------
# rate limit, tokens, metrics, OpenAPI


def test_unauthenticated_reads_are_rate_limited(tmp_path: Path) -> None:
    """With --open-reads, reads without a token are served, and limited per client."""
    for url in _server(tmp_path, token=TOKEN, open_reads=True, read_rate=0.5, read_burst=3):
        with httpx.Client(base_url=url, timeout=_TIMEOUT) as c:
            codes = [
                c.post("/v1/check", json={"id": "a", "text": "x y"}).status_code for _ in range(4)
            ]
            assert codes == [200, 200, 200, 429]
            r = c.get("/v1/docs/nope")
            assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
            assert r.json()["error"]["code"] == "rate_limited"
            auth = {"Authorization": f"Bearer {TOKEN}"}  # authenticated: not limited
            assert c.post("/v1/check", json={"id": "a", "text": "x y"}, headers=auth).is_success
            assert c.get("/healthz").status_code == 200  # operations are never limited
            fams = {f.name: f for f in text_string_to_metric_families(c.get("/metrics").text)}
            assert (
                sum(
                    s.value
                    for s in fams["neardup_rate_limited"].samples
                    if s.name.endswith("_total")
                )
                == 2
            )


def test_non_ascii_token_matches(tmp_path: Path) -> None:
    from neardup import Client

    token = "pässwörd-密码"
    for url in _server(tmp_path, token=token):
        with Client(url, token=token) as client:
            assert client.insert({"id": "a", "text": "hello there"}).added
        raw = {"Authorization": b"Bearer " + token.encode()}
        r = httpx.post(url + "/v1/insert", json={"id": "b", "text": "x"}, headers=raw)
        assert r.status_code == 200, r.text
        wrong = {"Authorization": b"Bearer " + "pässwörd".encode()}
        assert (
            httpx.post(url + "/v1/insert", json={"id": "c", "text": "x"}, headers=wrong).status_code
            == 401
        )


def _serve_cli(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "neardup", "serve", "--data", str(tmp_path), *args]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=120, env={**os.environ, **env}, check=False
    )


def test_empty_token_is_refused(tmp_path: Path) -> None:
    out = _serve_cli(tmp_path, "--port", str(free_port()), env={"NEARDUP_TOKEN": ""})
    assert out.returncode != 0
    assert "empty" in out.stderr and "--no-auth" in out.stderr, out.stderr
    out = _serve_cli(tmp_path, "--no-auth", env={"NEARDUP_TOKEN": "abc"})
    assert out.returncode != 0 and "--no-auth" in out.stderr, out.stderr
    assert not (tmp_path / "namespaces").exists()  # refused before opening anything


def test_metrics_parse_and_counters_end_in_total(tmp_path: Path) -> None:
    for url in _server(tmp_path):
        with httpx.Client(base_url=url, timeout=_TIMEOUT) as c:
            c.post("/v1/insert", json={"id": "a", "text": "one two three"})
            c.post("/v1/check", json={"id": "b", "text": "one two three"})
            text = c.get("/metrics").text
    fams = list(text_string_to_metric_families(text))
    names = {f.name for f in fams}
    assert {"neardup_http_requests", "neardup_documents", "neardup_store_checks"} <= names
    assert "process_resident_memory_bytes" in names
    for f in fams:
        if f.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in f.samples), f.name
        if f.name.startswith("neardup_store_"):
            assert "mib" not in f.name
    stores = [f for f in fams if f.name == "neardup_store_documents"]
    assert stores and stores[0].type == "gauge"


def test_openapi_security_scheme_201_and_allow(tmp_path: Path) -> None:
    for url in _server(tmp_path, token=TOKEN):
        with httpx.Client(base_url=url, timeout=_TIMEOUT) as c:
            spec = c.get("/openapi.json").json()
            r405 = c.post("/v1/docs/x")
            docs = c.get("/docs").text
    schemes = spec["components"]["securitySchemes"]
    assert schemes["bearerToken"]["scheme"].lower() == "bearer"
    paths = spec["paths"]
    for path, method in [
        ("/v1/insert", "post"),
        ("/v1/check", "post"),  # a read: it needs a token too
        ("/v1/docs/{doc_id}", "delete"),
        ("/v1/docs/{doc_id}", "get"),
        ("/v1/export", "get"),
        ("/v1/ns/{namespace}", "get"),
        ("/v1/ns/{namespace}", "put"),
        ("/v1/ns", "get"),
        ("/metrics", "get"),
    ]:
        assert paths[path][method]["security"] == [{"bearerToken": []}], (path, method)
        assert {"401", "403"} <= set(paths[path][method]["responses"]), (path, method)
    assert "201" in paths["/v1/ns/{namespace}"]["put"]["responses"]
    assert "unique" in spec["components"]["schemas"]["DocumentBatch"]["description"]
    assert r405.status_code == 405
    assert {m.strip() for m in r405.headers["allow"].split(",")} >= {"GET", "DELETE"}
    # Swagger UI from this server, nothing from a CDN (the page renders offline: tested in a
    # real browser by tests/service/test_docs_page.py)
    assert "/openapi.json" in docs and "/docs/assets/swagger-ui-bundle.js" in docs
    assert "http://" not in docs and "https://" not in docs


def test_a_request_past_the_graceful_timeout_is_answered_503_json(tmp_path: Path) -> None:
    """A shutdown whose --graceful-timeout runs out while a check-and-insert waits for the
    writer answers it 503 ``service_unavailable`` JSON saying its writes may be applied
    (uvicorn's own answer was a plain-text 500)."""
    from concurrent.futures import Future

    config = ServiceConfig(data_dir=tmp_path, token=TOKEN, graceful_timeout_s=1)
    app = create_app(config)
    waiting = concurrent.futures.Future[None]()
    never: Future[Any] = Future()  # the writer never answers this request

    def stuck_submit(method: str, docs: Any, *, inline: bool = False) -> Any:
        waiting.set_result(None)
        return never, False

    auth = {"Authorization": f"Bearer {TOKEN}"}
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        with serve_in_thread(app) as url:
            app.state.registry.get("default").submit = stuck_submit
            answer = pool.submit(
                httpx.post,
                url + "/v1/check-and-insert",
                json={"documents": [{"id": "a", "text": "some text here"}]},
                headers=auth,
                timeout=_TIMEOUT,
            )
            waiting.result(_TIMEOUT)
            t0 = time.monotonic()
        # leaving the block stopped the server: one second of grace, then the answer
        r = answer.result(_TIMEOUT)
    assert time.monotonic() - t0 < 30
    assert r.status_code == 503, r.text
    assert r.headers["content-type"] == "application/json"
    error = r.json()["error"]
    assert error["code"] == "service_unavailable"
    assert "--graceful-timeout" in error["message"]
    assert "may still be applied" in error["message"]


def test_other_routes_cancelled_at_shutdown_are_answered_503_json() -> None:
    """The same for every other route (FastAPI's): a request cancelled before its answer
    started gets the 503 JSON; one cancelled after it started is left to the server."""
    import asyncio

    from neardup.service.documents import ShutdownAnswerMiddleware

    async def forever(scope: Any, receive: Any, send: Any) -> None:
        await asyncio.Event().wait()

    async def half(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await asyncio.Event().wait()

    async def run(app: Any, method: str) -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": method, "path": "/v1/docs/a"}
        task = asyncio.ensure_future(ShutdownAnswerMiddleware(app)(scope, None, send))
        await asyncio.sleep(0.01)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return sent

    sent = asyncio.run(run(forever, "DELETE"))
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[0]["status"] == 503
    body = sent[1]["body"].decode()
    assert "service_unavailable" in body and "may still be applied" in body
    sent = asyncio.run(run(forever, "GET"))
    assert sent[0]["status"] == 503 and "may still be applied" not in sent[1]["body"].decode()
    assert [m["status"] for m in asyncio.run(run(half, "GET"))] == [200]
