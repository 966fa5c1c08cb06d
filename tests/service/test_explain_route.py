"""``POST /v1/explain`` (issue 37): a pair explained over HTTP with the namespace's own rule
agrees with what ``check`` decides for the same texts, orders A and B as a keep-first store
does, reads stored texts only with a read token, and refuses bad bodies with 4xx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from neardup.service.app import create_app  # noqa: E402
from neardup.service.config import ServiceConfig  # noqa: E402
from neardup.service.testing import serve_in_thread  # noqa: E402

WRITE, READ, OTHER = "explain-w-1", "explain-r-2", "explain-other-3"

BASE = (
    "the city council approved a new budget for the public library on tuesday evening after a "
    "long debate about opening hours and the cost of repairs to the old building"
)
EDIT = BASE.replace("tuesday", "wednesday").replace("long", "lengthy")
OTHER_TEXT = "a recipe for lemon cake with three eggs, flour, sugar and the zest of two lemons"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp("explain")
    tokens = tmp / "tokens"
    tokens.write_text(f"neardup-tokens 1\n{READ} read *\n{OTHER} read tenant\n")
    tokens.chmod(0o600)
    config = ServiceConfig(
        data_dir=tmp / "data", token=WRITE, token_file=tokens, namespaces=("tenant",)
    )
    with serve_in_thread(create_app(config)) as base:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {WRITE}"}) as c:
            for i, (doc_id, text) in enumerate([("first", BASE), ("cake", OTHER_TEXT)]):
                r = c.post("/v1/insert", json={"id": doc_id, "text": text, "time": 1e9 + i})
                assert r.status_code == 200, r.text
        yield base


def _explain(url: str, body: dict, token: str | None = READ, path: str = "/v1/explain"):
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx.post(url + path, json=body, headers=headers, timeout=60)


def test_explain_agrees_with_check(url: str) -> None:
    check = httpx.post(
        url + "/v1/check",
        json={"id": "new", "text": EDIT},
        headers={"Authorization": f"Bearer {READ}"},
        timeout=60,
    ).json()
    r = _explain(url, {"a": {"text": EDIT}, "b": {"id": "first"}})
    assert r.status_code == 200, r.text
    e = r.json()
    assert e["ids"] == ["first", "text A"]  # the stored document first: the one a store keeps
    assert e["duplicate"] is True and check["duplicate"] is True
    assert [m["id"] for m in check["matches"]] == ["first"]
    assert e["rule"] in ("similarity", "containment", "exact")
    assert any(run["op"] != "equal" for run in e["alignment"])  # the edits are shown
    far = _explain(url, {"a": {"text": OTHER_TEXT + " and icing"}, "b": {"id": "first"}}).json()
    assert far["duplicate"] is False
    assert far["decision"] != "duplicate"


def test_two_stored_documents_earlier_first(url: str) -> None:
    e = _explain(url, {"a": {"id": "cake"}, "b": {"id": "first"}}).json()
    assert e["ids"] == ["first", "cake"] and e["duplicate"] is False


def test_threshold_is_a_what_if(url: str) -> None:
    body = {"a": {"id": "first"}, "b": {"text": EDIT}}
    assert _explain(url, body).json()["duplicate"] is True
    strict = _explain(url, {**body, "threshold": 0.999}).json()
    assert strict["duplicate"] is False and strict["thresholds"]["threshold"] == 0.999


@pytest.mark.parametrize(
    ("body", "status", "field", "says"),
    [
        ({"a": {"id": "missing"}, "b": {"text": EDIT}}, 404, None, "missing"),
        ({"a": {"id": "first", "text": EDIT}, "b": {"text": EDIT}}, 422, "a", "got both"),
        ({"a": {}, "b": {"text": EDIT}}, 422, "a", "got neither"),
        ({"a": {"text": EDIT}}, 422, "b", "field required"),
        ({"a": {"text": EDIT}, "b": {"text": EDIT}, "extra": 1}, 422, "extra", "unknown field"),
        ({"a": {"text": 5}, "b": {"text": EDIT}}, 422, "a.text", "must be a string, got number"),
        ({"a": "x", "b": {"text": EDIT}}, 422, "a", "must be an object"),
        ({"a": {"text": EDIT}, "b": {"text": EDIT}, "threshold": 1.5}, 422, "threshold", "1"),
        ([], 422, "body", "must be a JSON object, got array"),
    ],
)
def test_bad_bodies_are_refused_in_the_services_error_shape(
    url: str, body: dict, status: int, field: str | None, says: str
) -> None:
    r = _explain(url, body)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert says in error["message"] and error.get("field") == field, error


def test_the_body_is_read_as_the_document_routes_read_theirs(url: str) -> None:
    """Malformed JSON was "[16]: JSON decode error" with field "[16]", and a body sent without
    the JSON content type was refused, where the document routes take both in their shape."""
    headers = {"Authorization": f"Bearer {READ}"}
    for path in ("/v1/explain", "/v1/check"):
        r = httpx.post(url + path, content=b'{"a": ', headers=headers, timeout=60)
        assert r.status_code == 422
        assert r.json()["error"]["field"] == "body"
        assert "not valid UTF-8 JSON" in r.json()["error"]["message"]
        r = httpx.post(url + path, content=b"", headers=headers, timeout=60)
        assert r.status_code == 422 and "the request body is empty" in r.text
    raw = json.dumps({"a": {"id": "first"}, "b": {"text": EDIT}}).encode()
    for ctype in (None, "text/plain"):
        h = headers if ctype is None else {**headers, "Content-Type": ctype}
        r = httpx.post(url + "/v1/explain", content=raw, headers=h, timeout=60)
        assert r.status_code == 200 and r.json()["duplicate"] is True, r.text


def test_stored_texts_need_a_read_token(url: str) -> None:
    body = {"a": {"id": "first"}, "b": {"text": EDIT}}
    assert _explain(url, body, token=None).status_code == 401
    assert _explain(url, body, token=OTHER).status_code == 403  # may read another namespace
    assert _explain(url, body, token=OTHER, path="/v1/ns/tenant/explain").status_code == 404
    ok = _explain(url, {"a": {"text": BASE}, "b": {"text": EDIT}}, token=OTHER, path="/v1/ns/tenant/explain")  # fmt: skip
    assert ok.status_code == 200 and ok.json()["duplicate"] is True


def test_explain_is_in_the_openapi_document(url: str) -> None:
    schema = httpx.get(url + "/openapi.json", timeout=30).json()
    paths = schema["paths"]
    assert "post" in paths["/v1/explain"] and "post" in paths["/v1/ns/{namespace}/explain"]
    body = paths["/v1/explain"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/ExplainRequest"}
    assert set(schema["components"]["schemas"]["ExplainRequest"]["properties"]) == {
        "a",
        "b",
        "threshold",
    }
