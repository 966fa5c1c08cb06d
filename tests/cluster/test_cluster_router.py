"""The cluster router: neardup.Client against several nodes, one sequencer for all writers."""

from __future__ import annotations

import contextlib
import json
import threading

import pytest

pytest.importorskip("fastapi")

from neardup.cluster import ClusterConfig, NodeSpec
from neardup.cluster.router import create_router
from neardup.errors import AuthError, NotFoundError
from neardup.service import create_app
from neardup.service.client import Client
from neardup.service.config import ServiceConfig
from neardup.service.testing import serve_in_thread

TOKEN = "router-secret"


def text(i: int) -> str:
    return " ".join(f"w{(i * 7919 + j * 104729) % 1_000_003}" for j in range(60))


def variant(i: int, k: int) -> str:
    words = text(i).split()
    return (" " * (k + 1)).join(w.upper() if (j + k) % 2 else w for j, w in enumerate(words))


@contextlib.contextmanager
def router(tmp_path, n: int = 3, slow_after: float = 10.0):
    """``n`` nodes and a router over them, in this process. ``slow_after``: how long the router
    waits for a node before it hedges a write to the next one; generous here, where the
    nodes' first requests share a loaded machine (these tests pin where copies go, not
    hedging: tests/cluster/test_cluster_deletes.py does)."""
    with contextlib.ExitStack() as stack:
        urls = [
            stack.enter_context(
                serve_in_thread(create_app(ServiceConfig(data_dir=tmp_path / f"n{i}", token=TOKEN)))
            )
            for i in range(n)
        ]
        cfg = ClusterConfig(tuple(NodeSpec(f"n{i}", u) for i, u in enumerate(urls)), vnodes=64)
        app = create_router(cfg, token=TOKEN, slow_after=slow_after)
        yield stack.enter_context(serve_in_thread(app)), urls


def test_client_through_the_router(tmp_path):
    with router(tmp_path) as (url, nodes), Client(url, token=TOKEN) as c:
        out = c.check_and_insert([{"id": f"d{i}", "text": text(i)} for i in range(20)])
        assert all(d.added for d in out)
        d = c.check_and_insert({"id": "x", "text": variant(3, 1)})
        assert d.duplicate and not d.added and d.matches[0].id == "d3"
        assert c.check({"id": "y", "text": variant(7, 2)}).matches[0].id == "d7"
        assert c.get("d5")["text"] == text(5)
        c.delete("d5")
        with pytest.raises(NotFoundError):
            c.get("d5")
        health = c.health()
        assert health["status"] == "ok"
        assert health["stored_copies"] == 2 * 19  # two copies of each of the 19 left
        with Client(url) as anon:  # reads and writes through the router need a token
            with pytest.raises(AuthError):
                anon.insert({"id": "z", "text": "no token"})
            with pytest.raises(AuthError):
                anon.get("d3")
            with pytest.raises(AuthError):
                anon.check({"id": "y", "text": variant(7, 2)})
            assert set(anon.health()) == {"status"}  # no node names or counts
        # the documents are spread: no node holds all of them
        counts = []
        for u in nodes:
            with Client(u, token=TOKEN) as n:
                counts.append(n.health()["documents"])
        assert sum(counts) == 2 * 19 and max(counts) < 19


def test_writers_behind_one_router_keep_exactly_one_near_duplicate(tmp_path):
    with router(tmp_path) as (url, _nodes):
        results = []

        def send(k: int) -> None:
            with Client(url, token=TOKEN) as c:  # separate clients, one router
                results.append(c.check_and_insert({"id": f"c{k}", "text": variant(42, k)}))

        threads = [threading.Thread(target=send, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(r.added for r in results) == 1


@contextlib.contextmanager
def small_router(tmp_path, token: str | None = TOKEN, **kw):
    """Two nodes (token TOKEN) and a router over them; ``token``: the router's."""
    with contextlib.ExitStack() as stack:
        urls = [
            stack.enter_context(
                serve_in_thread(create_app(ServiceConfig(data_dir=tmp_path / f"n{i}", token=TOKEN)))
            )
            for i in range(2)
        ]
        cfg = ClusterConfig(tuple(NodeSpec(f"n{i}", u) for i, u in enumerate(urls)), vnodes=64)
        app = create_router(cfg, token=token, **kw)
        yield stack.enter_context(serve_in_thread(app)), app


BAD_BODIES = [
    b'{"documents":[1]}',
    b'{"documents":["ab"]}',
    b'{"documents":[[["x"]]]}',
    b"[[[[[[[[[[]]]]]]]]]]",
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a":' * 5_000 + b"1" + b"}" * 5_000,
    b"not json",
    b"",
    b"\xff\xfe\x00",
    b'{"documents":"x"}',
    b'{"id": 5, "text": "x"}',
    b'{"id": "a", "text": 7}',
    b'{"documents":[{"id":"a","text":"x","time":-1}]}',
    b'{"documents":[{"id":"a","text":"x","metadata":[1]}]}',
    b"null",
]


def test_router_answers_every_bad_body_with_a_json_4xx(tmp_path):
    import httpx

    with small_router(tmp_path, max_batch=5) as (url, _app):
        auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        for route in ("/v1/check", "/v1/check-and-insert", "/v1/ns/default/insert"):
            for body in BAD_BODIES:
                r = httpx.post(url + route, content=body, headers=auth, timeout=30)
                assert 400 <= r.status_code < 500, (route, body[:40], r.status_code, r.text[:200])
                err = r.json()["error"]
                assert err["code"] and err["message"], r.text
        too_many = {"documents": [{"id": f"x{i}", "text": "t"} for i in range(6)]}
        r = httpx.post(url + "/v1/check", json=too_many, headers=auth)
        assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"
        r = httpx.post(
            url + "/v1/check", json={"documents": [{"id": 1, "text": "t"}]}, headers=auth
        )
        assert r.status_code == 422 and r.json()["error"]["field"] == "documents[0].id"
        r = httpx.get(url + "/v1/nothing-here")
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
        r = httpx.put(url + "/v1/check", content=b"{}")
        assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"
        r = httpx.post(url + "/v1/insert", json={"id": "a", "text": "x"})
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
        r = httpx.post(
            url + "/v1/insert",
            json={"id": "a", "text": "x", "metadata": {"neardup:version": 1}},
            headers=auth,
        )
        assert r.status_code == 422 and "reserved" in r.json()["error"]["message"]


def test_router_refuses_a_large_body_while_reading_it(tmp_path):
    import socket

    import httpx

    with small_router(tmp_path, max_body_bytes=1 << 20) as (url, _app):
        host, port = url.removeprefix("http://").split(":")
        # a declared 200 MB body: answered at once, nothing read
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(
                b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 200000000\r\n\r\n" + b"[" * 1000
            )
            head = s.recv(65536)
        assert head.startswith(b"HTTP/1.1 413") and b"payload_too_large" in head
        # a chunked body: refused once it passes the limit, not read to its end
        sent = 0

        def chunks():
            nonlocal sent
            for _ in range(400):  # 400 x 256 KiB = 100 MiB offered
                sent += 1
                yield b" " * (256 * 1024)

        r = httpx.post(url + "/v1/check", content=chunks(), timeout=60)
        assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"
        assert sent < 400


def test_unknown_namespaces_leave_nothing_behind(tmp_path):
    import httpx

    with small_router(tmp_path) as (url, app):
        body = {"id": "a", "text": "hello there"}
        auth = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=url, timeout=30) as anon:  # no token: 401, nothing kept
            for i in range(20):
                assert anon.post(f"/v1/ns/anon-{i}/check", json=body).status_code == 401
        with httpx.Client(base_url=url, timeout=30, headers=auth) as h:
            assert h.post("/v1/check", json=body).status_code == 200
            before = threading.active_count()
            for i in range(300):
                r = h.post(f"/v1/ns/unknown-{i}/check", json=body)
                assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
            r = h.post("/v1/ns/Bad Name/check", json=body)
            assert r.status_code in (404, 422)
        assert len(app.state.namespaces) == 1  # only "default", which exists
        assert threading.active_count() <= before + 2


def test_router_checks_read_write_and_scoped_tokens(tmp_path):
    """The router authorises as a node does: a read token reads (check, get) and cannot write,
    a namespace-scoped token acts only in its namespaces, and the nodes see the router's own
    node token, never the caller's."""
    import httpx

    from neardup.service.auth import Authenticator as Auth
    from neardup.service.auth import Grant

    auth = Auth(
        {
            TOKEN: Grant(write=True),
            "reader": Grant(write=False),
            "other-ns": Grant(write=True, namespaces=frozenset({"other"})),
        }
    )
    with small_router(tmp_path, auth=auth, node_token=TOKEN) as (url, _app):
        with Client(url, token=TOKEN) as w:
            w.insert({"id": "a", "text": text(1)})
        with Client(url, token="reader") as r:
            assert r.get("a")["text"] == text(1)
            assert r.check({"id": "b", "text": variant(1, 1)}).duplicate
            with pytest.raises(Exception, match="may read"):
                r.insert({"id": "c", "text": text(2)})
        with (
            Client(url, token="other-ns") as o,
            pytest.raises(Exception, match="may read and write in other"),
        ):
            o.get("a")
        r = httpx.delete(url + "/v1/docs/a", headers={"Authorization": "Bearer reader"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"


def test_cluster_routes_need_a_token_that_may_write_everywhere(tmp_path):
    """A node's /v1/cluster routes (membership, tombstones, versioned writes) refuse read-only
    and namespace-scoped tokens: they act on every namespace."""
    import httpx

    tokens = tmp_path / "tokens"
    tokens.write_text("neardup-tokens 1\nscoped write default\nreader read *\n")
    tokens.chmod(0o600)
    app = create_app(ServiceConfig(data_dir=tmp_path / "n", token=TOKEN, token_file=tokens))
    with serve_in_thread(app) as url:
        for token, status in (("reader", 403), ("scoped", 403), (None, 401), (TOKEN, 200)):
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            assert httpx.get(url + "/v1/cluster", headers=headers).status_code == status, token


def test_a_refused_document_is_answered_as_a_node_answers_it(tmp_path):
    """Through the router a bad document was 422 `invalid_type` naming `documents[0].text`
    for a single document, where a node answers `invalid_request` naming `text`."""
    import httpx

    headers = {"Authorization": f"Bearer {TOKEN}"}
    good = [{"id": f"b{i}", "text": text(i)} for i in range(5)]
    bodies = [
        {"id": "t1", "text": 5},
        {"id": "t1", "text": "hello there", "time": "soon"},
        {"documents": [*good[:3], {"id": "b9", "text": ["x"]}, good[4]]},
        {"documents": [*good[:2], {"id": "b9", "text": "x", "time": float("inf")}]},
    ]
    with router(tmp_path) as (url, nodes):
        for op in ("check", "check-and-insert"):
            for body in bodies:
                raw = json.dumps(body, allow_nan=True).encode()
                direct = httpx.post(f"{nodes[0]}/v1/{op}", content=raw, headers=headers)
                routed = httpx.post(f"{url}/v1/{op}", content=raw, headers=headers)
                assert direct.status_code == 422, direct.text
                assert (routed.status_code, routed.json()) == (422, direct.json()), body


def test_a_node_refusing_the_routers_token_is_named(tmp_path):
    """A router without a node token (open to its clients) in front of nodes that need one
    answered every request 401 "this server requires a bearer token": the client was told to
    send a token the router does not need. It is the router's setup that is wrong: 503 naming
    the node and --node-token."""
    from neardup.errors import ServiceUnavailableError

    with (
        small_router(tmp_path, token=None) as (url, _),  # no token at all
        Client(url) as c,
        pytest.raises(ServiceUnavailableError, match="--node-token"),
    ):
        c.check({"id": "a", "text": text(1)})
