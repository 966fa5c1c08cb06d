"""neardup.Client against a real server (uvicorn in a thread, real Deduplicator)."""

from __future__ import annotations

import random
import string
from collections.abc import Iterator

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

import neardup
from neardup.errors import (
    InputError,
    InputTypeError,
    NeardupError,
    NotFoundError,
    ServiceUnavailableError,
)
from neardup.service.app import create_app
from neardup.service.config import ServiceConfig
from neardup.service.http_errors import (
    AuthError,
    PayloadTooLargeError,
    RequestValidationFailed,
)
from neardup.service.testing import free_port, serve_in_thread

TOKEN = "client-token"


def text(seed: int, n: int = 40) -> str:
    rng = random.Random(seed)
    return " ".join(
        "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(n)
    )


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    config = ServiceConfig(data_dir=tmp_path_factory.mktemp("cli"), token=TOKEN, max_batch=20)
    with serve_in_thread(create_app(config)) as u:
        yield u


@pytest.fixture
def client(url: str) -> Iterator[neardup.Client]:
    with neardup.Client(url, token=TOKEN) as c:
        yield c


def test_single_and_batch_decisions(client: neardup.Client) -> None:
    from neardup.rules.decision import Decision, Match

    d = client.check_and_insert({"id": "a", "text": text(1)})
    assert isinstance(d, Decision) and d.added and not d.duplicate and d.matches == ()
    assert isinstance(d.fingerprint, int)
    out = client.check_and_insert([{"id": "b", "text": text(1)}, {"id": "c", "text": text(2)}])
    assert isinstance(out, list) and [x.id for x in out] == ["b", "c"]
    assert out[0].duplicate and not out[0].added and out[0].matches[0].id == "a"
    assert isinstance(out[0].matches[0], Match) and out[0].matches[0].distance == 0
    assert out[1].added
    chk = client.check([{"id": "z", "text": text(2)}])
    assert chk[0].duplicate and not chk[0].added
    ins = client.insert({"id": "d", "text": text(2)})
    assert ins.added and ins.duplicate
    # the client's decisions equal the server's to_dict() output
    assert d.to_dict()["id"] == "a" and d.to_dict()["added"] is True


def test_get_delete_and_odd_ids(client: neardup.Client) -> None:
    doc_id = "https://example.org/x/y?q=1&r=2#top 中文"
    client.insert({"id": doc_id, "text": text(3), "metadata": {"k": [1, 2]}})
    got = client.get(doc_id)
    assert got["id"] == doc_id and got["metadata"] == {"k": [1, 2]} and got["text"] == text(3)
    client.delete(doc_id)
    with pytest.raises(NotFoundError) as ei:
        client.get(doc_id)
    assert ei.value.status_code == 404  # type: ignore[attr-defined]
    with pytest.raises(NotFoundError):
        client.delete(doc_id)
    # the ids "." and "..": the HTTP client dropped them as dot segments (get(".") answered
    # '' and delete(".") deleted nothing, acknowledged)
    for i, odd in enumerate((".", "..", "a/..", "./b")):
        client.insert({"id": odd, "text": text(10 + i)})
        assert client.get(odd)["id"] == odd
        client.delete(odd)
        with pytest.raises(NotFoundError):
            client.get(odd)


def test_errors_map_back_to_classes(client: neardup.Client, url: str) -> None:
    with pytest.raises(RequestValidationFailed) as ei:
        client.check([{"id": "a", "text": "x"}, {"id": "b", "text": 3}])
    assert ei.value.field == "documents[1].text" and isinstance(ei.value, InputError)
    with pytest.raises(PayloadTooLargeError):
        client.check([{"id": str(i), "text": "x"} for i in range(21)])
    with pytest.raises(InputTypeError):
        client.check("not a document")  # type: ignore[call-overload]
    with neardup.Client(url) as anon:
        with pytest.raises(AuthError) as ea:
            anon.insert({"id": "q", "text": "t"})
        assert ea.value.status_code == 401  # type: ignore[attr-defined]
        with pytest.raises(AuthError):  # a check is a read: it needs a token too
            anon.check({"id": "q", "text": "t"})
    with pytest.raises(NotFoundError, match="nope"):
        client.check({"id": "a", "text": "x"}, namespace="nope")


def test_namespaces(client: neardup.Client, url: str) -> None:
    assert client.create_namespace("team-b") is True
    assert client.create_namespace("team-b") is False
    assert "team-b" in client.namespaces()
    with neardup.Client(url, token=TOKEN, namespace="team-b") as nb:
        assert nb.check_and_insert({"id": "a", "text": text(1)}).added  # independent of default
        assert nb.get("a")["id"] == "a"


def test_health_and_metrics(client: neardup.Client) -> None:
    h = client.health()
    assert h["status"] == "ok" and h["documents"] >= 0
    assert "neardup_http_requests_total" in client.metrics()


def test_unreachable_server_is_service_unavailable() -> None:
    with (
        neardup.Client(f"http://127.0.0.1:{free_port()}", timeout=2) as c,
        pytest.raises(ServiceUnavailableError, match="cannot reach"),
    ):
        c.health()


def test_invalid_namespace_name_is_config_error() -> None:
    from neardup.errors import ConfigError

    with pytest.raises(ConfigError):
        neardup.Client("http://127.0.0.1:1", namespace="Bad Name")


def test_bad_arguments_are_named_before_any_request(tmp_path) -> None:
    """No server is needed: each is refused before a request is sent."""
    import datetime

    from neardup.errors import ConfigError, IndexStateError, InputTypeError

    with pytest.raises(ConfigError, match=r"did you mean 'http://127\.0\.0\.1:1'"):
        neardup.Client("127.0.0.1:1")
    with pytest.raises(ConfigError, match="timeout must be"):
        neardup.Client("http://127.0.0.1:1", timeout=-1)
    with neardup.Client("http://127.0.0.1:1") as c:
        with pytest.raises(InputTypeError, match="document id must be a str"):
            c.get(5)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="not a valid name"):
            c.get("a", namespace="no/such")
        with pytest.raises(InputTypeError, match=r"not JSON.*date"):
            c.check({"id": "a", "text": "x", "metadata": {"d": datetime.date(2026, 1, 1)}})
    with pytest.raises(IndexStateError, match="Client is closed"):
        c.get("a")


def test_error_without_json_body() -> None:
    from neardup.service.client import _make_error

    e = _make_error(502, None, "bad gateway")
    assert isinstance(e, ServiceUnavailableError) and e.status_code == 502  # type: ignore[attr-defined]
    assert type(_make_error(418, "x", "teapot")) is InputError
    assert type(_make_error(500, {"error": {"code": "nope", "message": "m"}}, "f")) is NeardupError
