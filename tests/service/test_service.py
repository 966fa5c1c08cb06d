"""HTTP service: routes, bodies, errors, limits, auth, namespaces, metrics, OpenAPI, fuzzing.

The app runs under uvicorn in a background thread on a free loopback port, with the real
:class:`neardup.online.Deduplicator` (durable, in a tmp dir) behind it.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from prometheus_client.parser import text_string_to_metric_families

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from neardup.errors import StorageError  # noqa: E402
from neardup.online.settings import DedupSettings  # noqa: E402
from neardup.rules.decision import Decision, Match  # noqa: E402
from neardup.service.app import create_app  # noqa: E402
from neardup.service.config import ServiceConfig, parse_size  # noqa: E402
from neardup.service.metrics import Metrics  # noqa: E402
from neardup.service.namespaces import NamespaceRegistry  # noqa: E402
from neardup.service.schema import (  # noqa: E402
    DocumentBatch,
    PayloadTooLargeError,
    parse_documents,
)
from neardup.service.testing import serve_in_thread  # noqa: E402

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MAX_BATCH = 50
MAX_BODY = 64 * 1024


def words(rng: random.Random, n: int = 40) -> str:
    return " ".join(
        "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(n)
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("svc")
    config = ServiceConfig(
        data_dir=data,
        token=TOKEN,
        max_batch=MAX_BATCH,
        max_body_bytes=MAX_BODY,
        namespaces=("other",),
    )
    with serve_in_thread(create_app(config)) as url:
        yield url


@pytest.fixture(scope="module")
def http(server: str) -> Iterator[httpx.Client]:
    """A client that sends the write token (it reads too) with every request."""
    with httpx.Client(base_url=server, timeout=30, headers=AUTH) as c:
        yield c


@pytest.fixture(scope="module")
def anon(server: str) -> Iterator[httpx.Client]:
    """A client without a token."""
    with httpx.Client(base_url=server, timeout=30) as c:
        yield c


def err(r: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and {"code", "message"} <= set(body["error"]), body
    if code is not None:
        assert body["error"]["code"] == code, body
    return body["error"]


# ---------------------------------------------------------------------------------------------
# documents


def test_check_and_insert_single_and_duplicate(http: httpx.Client) -> None:
    text = words(random.Random(1))
    r = http.post("/v1/check-and-insert", json={"id": "s1", "text": text}, headers=AUTH)
    assert r.status_code == 200, r.text
    a = r.json()
    assert a["id"] == "s1" and a["duplicate"] is False and a["added"] is True and a["matches"] == []
    assert isinstance(a["fingerprint"], str)
    b = http.post("/v1/check-and-insert", json={"id": "s2", "text": text}, headers=AUTH).json()
    assert b["duplicate"] is True and b["added"] is False
    assert b["matches"][0]["id"] == "s1" and b["matches"][0]["distance"] == 0
    assert set(b["matches"][0]) == {"id", "distance", "score"}
    # re-sending an id is idempotent
    c = http.post("/v1/check-and-insert", json={"id": "s1", "text": text}, headers=AUTH).json()
    assert c["added"] is False and c["duplicate"] is True


def test_batch_keeps_exactly_one_of_a_pair(http: httpx.Client) -> None:
    rng = random.Random(2)
    t1, t2 = words(rng), words(rng)
    docs = [
        {"id": "b1", "text": t1},
        {"id": "b2", "text": t1.upper() + "  "},  # same text after normalisation
        {"id": "b3", "text": t2, "time": 1_700_000_000.5, "metadata": {"url": "http://x"}},
    ]
    r = http.post("/v1/check-and-insert", json={"documents": docs}, headers=AUTH)
    res = r.json()["results"]
    assert [x["id"] for x in res] == ["b1", "b2", "b3"]
    assert [x["added"] for x in res] == [True, False, True]
    assert res[1]["duplicate"] and res[1]["matches"][0]["id"] == "b1"
    got = http.get("/v1/docs/b3").json()
    assert got["id"] == "b3" and got["metadata"] == {"url": "http://x"}
    assert got["time"] == pytest.approx(1_700_000_000.5)


def test_check_is_read_only_and_insert_is_unconditional(http: httpx.Client) -> None:
    text = words(random.Random(3))
    r = http.post("/v1/check", json={"documents": [{"id": "c1", "text": text}]})
    assert r.status_code == 200 and r.json()["results"][0]["added"] is False
    err(http.get("/v1/docs/c1"), 404, "not_found")
    a = http.post("/v1/insert", json={"id": "c1", "text": text}, headers=AUTH).json()
    assert a["added"] is True
    b = http.post("/v1/insert", json={"id": "c2", "text": text}, headers=AUTH).json()
    assert b["added"] is True and b["duplicate"] is True and b["matches"][0]["id"] == "c1"
    hit = http.post("/v1/check", json={"id": "probe", "text": text}).json()
    assert hit["duplicate"] and {m["id"] for m in hit["matches"]} == {"c1", "c2"}


def test_empty_batch(http: httpx.Client) -> None:
    r = http.post("/v1/check-and-insert", json={"documents": []}, headers=AUTH)
    assert r.status_code == 200 and r.json() == {"results": []}


def test_get_and_delete_ids_with_slashes(http: httpx.Client, anon: httpx.Client) -> None:
    doc_id = "https://example.com/a/b?c=1#frag ü"
    text = words(random.Random(4))
    assert (
        http.post("/v1/insert", json={"id": doc_id, "text": text}, headers=AUTH).status_code == 200
    )
    path = "/v1/docs/" + quote(doc_id, safe="")
    got = http.get(path).json()
    assert got["id"] == doc_id and got["text"] == text
    err(anon.delete(path), 401, "unauthorized")
    r = http.delete(path, headers=AUTH)
    assert r.status_code == 200 and r.json() == {"id": doc_id, "deleted": True}
    err(http.get(path), 404, "not_found")
    err(http.delete(path, headers=AUTH), 404, "not_found")


def test_metadata_integers_beyond_64_bits_stay_exact_over_http(http: httpx.Client) -> None:
    """orjson reads integers beyond int64/uint64 as floats; such bodies take the exact path."""
    big, neg = 2**70 + 1, -(2**63) - 1
    text = words(random.Random(9))
    meta = f'{{"big": {big}, "neg": {neg}, "ok": 7}}'
    body = f'{{"id": "bigint", "text": "{text}", "metadata": {meta}}}'.encode()
    headers = {**AUTH, "content-type": "application/json"}
    assert http.post("/v1/insert", content=body, headers=headers).status_code == 200
    got = http.get("/v1/docs/bigint")
    assert got.status_code == 200, got.text
    assert str(big) in got.text and str(neg) in got.text, got.text


# ---------------------------------------------------------------------------------------------
# auth


@pytest.mark.parametrize(
    "method,path",
    [
        ("POST", "/v1/insert"),
        ("POST", "/v1/check-and-insert"),
        ("POST", "/v1/ns/other/insert"),
        ("POST", "/v1/ns/other/check-and-insert"),
        ("DELETE", "/v1/docs/x"),
        ("PUT", "/v1/ns/newone"),
    ],
)
@pytest.mark.parametrize("header", [None, "Bearer wrong", "Basic abc", TOKEN])
def test_writes_need_the_token(
    http: httpx.Client, anon: httpx.Client, method: str, path: str, header: str | None
) -> None:
    headers = {} if header is None else {"Authorization": header}
    r = anon.request(method, path, json={"id": "u", "text": "t"}, headers=headers)
    err(r, 401, "unauthorized")
    assert r.headers["www-authenticate"] == "Bearer"
    assert "newone" not in http.get("/v1/ns").json()["namespaces"]


READS = [
    ("POST", "/v1/check"),
    ("POST", "/v1/ns/other/check"),
    ("GET", "/v1/docs/s1"),
    ("GET", "/v1/ns/other/docs/x"),
    ("GET", "/v1/export"),
    ("GET", "/v1/ns/other/export"),
    ("GET", "/v1/ns"),
    ("GET", "/v1/ns/other"),
    ("GET", "/metrics"),
]


@pytest.mark.parametrize(("method", "path"), READS)
@pytest.mark.parametrize("header", [None, "Bearer wrong", "Basic abc"])
def test_reads_need_a_token(anon: httpx.Client, method: str, path: str, header: str | None) -> None:
    """Stored texts, metadata, exports, the namespace list and statistics, metrics and checks
    (a similarity oracle over the stored texts) are not served without a token."""
    headers = {} if header is None else {"Authorization": header}
    r = anon.request(method, path, json={"id": "r", "text": "hello"}, headers=headers)
    e = err(r, 401, "unauthorized")
    assert r.headers["www-authenticate"] == "Bearer" and "token" in e["message"]


def test_what_stays_open_without_a_token(anon: httpx.Client, http: httpx.Client) -> None:
    h = anon.get("/healthz")
    assert h.status_code == 200 and set(h.json()) == {"status", "uptime_s"}  # no names, counts
    full = http.get("/healthz").json()
    assert {"namespaces", "documents", "rss_bytes"} <= set(full)
    assert anon.get("/openapi.json").status_code == 200
    assert anon.get("/docs").status_code == 200


# ---------------------------------------------------------------------------------------------
# limits and bad input


def test_body_too_large_by_content_length(http: httpx.Client) -> None:
    body = json.dumps({"id": "big", "text": "x" * (MAX_BODY + 10)}).encode()
    e = err(http.post("/v1/check", content=body), 413, "payload_too_large")
    assert str(MAX_BODY) in e["message"]


def test_body_too_large_chunked(http: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"id": "big", "text": "'
        for _ in range(MAX_BODY // 1000 + 5):
            yield b"y" * 1000
        yield b'"}'

    r = http.post("/v1/check-and-insert", content=chunks(), headers=AUTH)
    err(r, 413, "payload_too_large")
    err(http.get("/v1/docs/big"), 404)


def test_batch_too_large(http: httpx.Client) -> None:
    docs = [{"id": f"m{i}", "text": "t"} for i in range(MAX_BATCH + 1)]
    e = err(http.post("/v1/check", json={"documents": docs}), 413, "payload_too_large")
    assert str(MAX_BATCH) in e["message"] and "--max-batch" in e["message"]


@pytest.mark.parametrize(
    "body,field",
    [
        ({"documents": [{"id": "a", "text": "x"}, {"id": "b"}]}, "documents[1].text"),
        ({"documents": [{"id": 5, "text": "x"}]}, "documents[0].id"),
        ({"documents": [{"id": "", "text": "x"}]}, "documents[0].id"),
        ({"documents": [{"id": "a", "text": None}]}, "documents[0].text"),
        ({"documents": [{"id": "a", "text": "x", "time": "now"}]}, "documents[0].time"),
        ({"documents": [{"id": "a", "text": "x", "time": -1}]}, "documents[0].time"),
        ({"documents": [{"id": "a", "text": "x", "time": True}]}, "documents[0].time"),
        ({"documents": [{"id": "a", "text": "x", "metadata": [1]}]}, "documents[0].metadata"),
        ({"documents": ["a"]}, "documents[0]"),
        ({"documents": {"id": "a"}}, "documents"),
        ({"text": "x"}, "id"),
        ({"id": "a"}, "text"),
        ({"id": "a" * 2000, "text": "x"}, "id"),
        ({}, "body"),
        ([{"id": "a", "text": "x"}], "body"),
        ("just a string", "body"),
    ],
)
def test_bad_bodies_are_422_naming_the_field(http: httpx.Client, body: Any, field: str) -> None:
    for path in ("/v1/check", "/v1/check-and-insert", "/v1/insert"):
        e = err(http.post(path, json=body, headers=AUTH), 422, "invalid_request")
        assert e["field"] == field and e["message"].startswith(field)
    # nothing of a rejected batch was applied
    err(http.get("/v1/docs/a"), 404)


@pytest.mark.parametrize("raw", [b"", b"{", b"\xff\xfe", b"nul", b'{"id": "a", "text": "x"'])
def test_invalid_json_is_422(http: httpx.Client, raw: bytes) -> None:
    e = err(http.post("/v1/check", content=raw), 422, "invalid_request")
    assert e["field"] == "body"


def test_unknown_route_and_method(http: httpx.Client) -> None:
    err(http.get("/nope"), 404, "not_found")
    err(http.get("/v1/check"), 405, "method_not_allowed")


# ---------------------------------------------------------------------------------------------
# namespaces


def test_unknown_namespace_is_404(http: httpx.Client) -> None:
    for method, path in [
        ("POST", "/v1/ns/missing/check"),
        ("POST", "/v1/ns/missing/insert"),
        ("POST", "/v1/ns/missing/check-and-insert"),
        ("GET", "/v1/ns/missing/docs/x"),
        ("DELETE", "/v1/ns/missing/docs/x"),
        ("GET", "/v1/ns/missing"),
    ]:
        e = err(
            http.request(method, path, json={"id": "a", "text": "t"}, headers=AUTH),
            404,
            "not_found",
        )
        assert "missing" in e["message"] and "PUT /v1/ns/missing" in e["message"]


def test_namespaces_are_independent(http: httpx.Client) -> None:
    text = words(random.Random(5))
    r = http.put("/v1/ns/tenant-a", headers=AUTH)
    assert r.status_code == 201 and r.json() == {"namespace": "tenant-a", "created": True}
    assert http.put("/v1/ns/tenant-a", headers=AUTH).status_code == 200
    a = http.post("/v1/ns/tenant-a/check-and-insert", json={"id": "n1", "text": text}, headers=AUTH)
    assert a.json()["added"] is True
    b = http.post("/v1/ns/other/check-and-insert", json={"id": "n2", "text": text}, headers=AUTH)
    assert b.json()["added"] is True and b.json()["duplicate"] is False
    c = http.post("/v1/check", json={"id": "n3", "text": text}).json()
    assert c["duplicate"] is False
    assert http.get("/v1/ns/tenant-a/docs/n1").status_code == 200
    err(http.get("/v1/docs/n1"), 404)
    info = http.get("/v1/ns/tenant-a").json()
    assert info["namespace"] == "tenant-a" and info["documents"] == 1
    assert {"default", "other", "tenant-a"} <= set(http.get("/v1/ns").json()["namespaces"])


@pytest.mark.parametrize(
    "name", ["Upper", "-dash", "a" * 65, "sp ace", "..", "a%2Fb", "evil%0A", "default%0A"]
)
def test_invalid_namespace_names(http: httpx.Client, name: str) -> None:
    r = http.put(f"/v1/ns/{name}", headers=AUTH)
    assert r.status_code in (404, 422), r.text
    assert r.json()["error"]["code"] in ("invalid_config", "not_found")


# ---------------------------------------------------------------------------------------------
# operations


def test_healthz_and_metrics(http: httpx.Client) -> None:
    h = http.get("/healthz").json()
    assert h["status"] == "ok" and "default" in h["namespaces"] and h["documents"] >= 0
    text = http.get("/metrics")
    assert text.headers["content-type"].startswith("text/plain")
    fams = {f.name: f for f in text_string_to_metric_families(text.text)}
    assert fams["neardup_http_requests"].type == "counter"
    samples = {(s.name, tuple(sorted(s.labels.items()))) for f in fams.values() for s in f.samples}
    assert (
        "neardup_http_requests_total",
        (("method", "GET"), ("route", "/healthz"), ("status", "200")),
    ) in samples
    assert (
        "neardup_http_request_duration_seconds_bucket",
        (("le", "+Inf"), ("route", "/healthz")),
    ) in samples
    assert ("neardup_store_documents", (("namespace", "default"),)) in samples
    assert fams["process_resident_memory_bytes"].type == "gauge"  # process collector
    # cumulative store counts are counters named *_total; the process RSS is not per namespace
    assert fams["neardup_store_checks"].type == "counter"
    # what the bounds turned down before reading rows; the histogram cache's size is a level
    assert fams["neardup_store_length_rejected_hits"].type == "counter"
    assert fams["neardup_store_histogram_rejected_hits"].type == "counter"
    assert fams["neardup_store_summaries_used_rows"].type == "counter"
    assert fams["neardup_store_histogram_cache_rows"].type == "gauge"
    assert "neardup_store_rss_mib" not in fams
    for fam in fams.values():
        if fam.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in fam.samples), fam.name


def test_metrics_render_unit() -> None:
    m = Metrics(buckets=(0.01, 0.1))
    m.observe_request("/a", "GET", 200, 0.005)
    m.observe_request("/a", "GET", 200, 0.05)
    m.observe_request("/a", "GET", 500, 5.0)
    text = m.render({"ns": {"documents": 3, "checks": 7, "name": "x", "flag": True}})
    got = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    hist = "neardup_http_request_duration_seconds"
    assert got[(hist + "_bucket", (("le", "0.01"), ("route", "/a")))] == 1
    assert got[(hist + "_bucket", (("le", "0.1"), ("route", "/a")))] == 2
    assert got[(hist + "_bucket", (("le", "+Inf"), ("route", "/a")))] == 3
    assert got[(hist + "_count", (("route", "/a"),))] == 3
    assert got[("neardup_store_documents", (("namespace", "ns"),))] == 3
    assert got[("neardup_store_checks_total", (("namespace", "ns"),))] == 7
    assert "neardup_store_name" not in text and "neardup_store_flag" not in text
    assert m.requests_total() == 3


def test_openapi_describes_the_routes(http: httpx.Client) -> None:
    spec = http.get("/openapi.json").json()
    paths = spec["paths"]
    for p in ("/v1/check", "/v1/insert", "/v1/check-and-insert", "/v1/ns/{namespace}/check-and-insert",
              "/healthz", "/metrics", "/v1/ns/{namespace}"):  # fmt: skip
        assert p in paths, p
    schemas = spec["components"]["schemas"]
    assert {"Document", "DocumentBatch", "Result", "BatchResult", "ErrorBody"} <= set(schemas)
    body = paths["/v1/check"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert {"$ref": "#/components/schemas/Document"} in body["oneOf"]
    assert "422" in paths["/v1/check"]["post"]["responses"]
    assert http.get("/docs").status_code == 200
    # every route that needs a token says so (the cluster routes did not: /docs' Authorize
    # sent them nothing)
    cluster = [(p, m) for p, ops in paths.items() if p.startswith("/v1/cluster") for m in ops]
    assert len(cluster) == 9
    for p, m in cluster:
        assert paths[p][m].get("security") == [{"bearerToken": []}], (p, m)


# ---------------------------------------------------------------------------------------------
# the hand-written validator agrees with the documented (pydantic) schema

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(-10, 1e10, allow_nan=False)
    | st.text(max_size=5)
)
field_values = (
    json_scalars
    | st.lists(json_scalars, max_size=2)
    | st.dictionaries(st.text(max_size=3), json_scalars, max_size=2)
)
documents = (
    st.dictionaries(
        st.sampled_from(["id", "text", "time", "metadata", "other"]), field_values, max_size=5
    )
    | field_values
)


@pytest.fixture(scope="module")
def preparer() -> Any:
    from neardup import Fingerprinter
    from neardup.online.prepare import DocumentPreparer

    return DocumentPreparer(Fingerprinter(), 64, lambda: 1_700_000_000.0)


@settings(max_examples=300, deadline=None)
@given(docs=st.lists(documents, max_size=4))
def test_validator_agrees_with_schema(preparer: Any, docs: list[Any]) -> None:
    """The one validation on the request path (the store's preparer) accepts exactly what the
    documented (pydantic) schema accepts, less the store's rules the schema cannot state: ids
    unique within a batch, times at most a day ahead."""
    from pydantic import ValidationError

    from neardup.errors import InputError

    try:
        prepared = preparer.prepare(docs)
        ours = True
    except InputError as exc:
        ours = False
        assert exc.field is not None and str(exc).startswith(exc.field), exc
    try:
        model = DocumentBatch.model_validate({"documents": docs}, strict=True)
        theirs = True
    except ValidationError:
        theirs = False
    if theirs:
        ids = [d.id for d in model.documents]
        times = [d.time for d in model.documents if d.time is not None]
        theirs = len(set(ids)) == len(ids) and all(t <= 1_700_000_000.0 + 86400 for t in times)
    assert ours == theirs, docs
    if ours:
        assert prepared.ids == [d.id for d in model.documents]


@pytest.mark.parametrize(
    "doc_id",
    ["a\nb", "a\rb", "tab\there", "nul\x00", "\x7f", "c1\x85", "c1\x9f", "\x1b[31m"],
)
def test_control_characters_in_ids_are_refused(http: httpx.Client, doc_id: str) -> None:
    """An id with a control character is refused (422 naming the field) on every insert
    route and in a batch; the rule is the one the OpenAPI document states."""
    import re

    for path in ("/v1/insert", "/v1/check-and-insert", "/v1/check"):
        e = err(http.post(path, json={"id": doc_id, "text": "some text"}), 422, "invalid_request")
        assert e["field"] == "id" and "control character" in e["message"], e
        bad = re.search("[\\x00-\\x1f\\x7f-\\x9f]", doc_id)
        assert bad is not None and f"U+{ord(bad.group()):04X}" in e["message"]
    batch = {"documents": [{"id": "fine", "text": "x"}, {"id": doc_id, "text": "y"}]}
    e = err(http.post("/v1/insert", json=batch), 422, "invalid_request")
    assert e["field"] == "documents[1].id"
    err(http.get("/v1/docs/fine"), 404)  # nothing of the refused batch was stored
    spec = http.get("/openapi.json").json()["components"]["schemas"]["Document"]
    pattern = spec["properties"]["id"]["pattern"]
    assert re.match(pattern, doc_id) is None and re.match(pattern, "https://x/a b?c#d ü")
    assert "control character" in spec["properties"]["id"]["description"]


def test_parse_documents_shapes() -> None:
    docs, batch = parse_documents({"id": "a", "text": "b", "extra": 1}, max_batch=1)
    assert docs == [{"id": "a", "text": "b", "extra": 1}] and batch is False
    with pytest.raises(PayloadTooLargeError):
        parse_documents({"documents": [{"id": "a", "text": "b"}] * 2}, max_batch=1)


def test_parse_size() -> None:
    assert parse_size("32MiB") == 32 * 2**20
    assert parse_size("512k") == 512_000
    assert parse_size("1 GiB") == 2**30
    assert parse_size(100) == 100
    from neardup.errors import ConfigError

    with pytest.raises(ConfigError, match="32MiB"):
        parse_size("lots")


def test_config_validation() -> None:
    from neardup.errors import ConfigError

    with pytest.raises(ConfigError, match="port"):
        ServiceConfig(None, port=70000)
    with pytest.raises(ConfigError, match="namespace"):
        ServiceConfig(None, namespaces=("BAD NAME",))
    with pytest.raises(ConfigError, match="max_batch"):
        ServiceConfig(None, max_batch=0)
    assert ServiceConfig(None, namespaces=("x",)).namespaces == ("default", "x")


# ---------------------------------------------------------------------------------------------
# fuzzing: malformed requests never produce a 5xx and the server stays up

ROUTES = [
    ("POST", "/v1/check"),
    ("POST", "/v1/insert"),
    ("POST", "/v1/check-and-insert"),
    ("POST", "/v1/ns/other/check-and-insert"),
    ("POST", "/v1/ns/zz/check"),
    ("PUT", "/v1/ns/fuzz"),
    ("GET", "/v1/docs/x"),
    ("DELETE", "/v1/docs/x"),
    ("GET", "/healthz"),
]
json_values = st.recursive(
    json_scalars | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
bodies = (
    json_values.map(lambda v: json.dumps(v).encode())
    | st.dictionaries(
        st.sampled_from(["id", "text", "documents", "time", "metadata"]), json_values, max_size=4
    ).map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=64)
)


@settings(max_examples=80)
@given(route=st.sampled_from(ROUTES), body=bodies, auth=st.booleans())
def test_fuzz_never_5xx(
    anon: httpx.Client, route: tuple[str, str], body: bytes, auth: bool
) -> None:
    method, path = route
    r = anon.request(method, path, content=body, headers=AUTH if auth else {})
    assert r.status_code < 500, (route, body, r.text)
    if r.status_code >= 400:
        assert "error" in r.json()


def test_server_healthy_after_fuzz(http: httpx.Client) -> None:
    assert http.get("/healthz").json()["status"] == "ok"


# ---------------------------------------------------------------------------------------------
# storage failures are 503 and acknowledge nothing


def test_storage_error_is_503(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from neardup.online.deduplicator import Deduplicator

    class FailingWrites(Deduplicator):  # type: ignore[misc]
        fail = False

        def check_and_add(self, docs: Any) -> Any:
            if FailingWrites.fail:
                raise StorageError("cannot write the log: No space left on device")
            return super().check_and_add(docs)

    def factory(config: ServiceConfig, path: Path | None) -> Any:
        return FailingWrites.open(path, config.dedup)

    config = ServiceConfig(data_dir=tmp_path)
    app = create_app(config, registry=NamespaceRegistry(config, factory=factory))
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as c:
        assert (
            c.post("/v1/check-and-insert", json={"id": "ok", "text": "alpha beta"}).status_code
            == 200
        )
        FailingWrites.fail = True
        e = err(
            c.post("/v1/check-and-insert", json={"id": "no", "text": "gamma"}),
            503,
            "storage_unavailable",
        )
        assert "No space" in e["message"]
        FailingWrites.fail = False
        assert c.get("/v1/docs/ok").status_code == 200
        assert c.get("/healthz").status_code == 200


def test_failed_fsync_is_503_and_acknowledges_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real store whose log cannot be synced (disk full): 503, earlier writes intact."""
    import errno
    import os

    config = ServiceConfig(data_dir=tmp_path)
    with serve_in_thread(create_app(config)) as url, httpx.Client(base_url=url) as c:
        ok = c.post("/v1/check-and-insert", json={"id": "ok", "text": "alpha beta gamma delta"})
        assert ok.status_code == 200 and ok.json()["added"]

        def enospc(fd: int) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "fdatasync", enospc, raising=False)
        monkeypatch.setattr(os, "fsync", enospc)
        r = c.post("/v1/check-and-insert", json={"id": "lost", "text": "epsilon zeta eta theta"})
        err(r, 503, "storage_unavailable")
        monkeypatch.undo()
        assert c.get("/v1/docs/ok").json()["id"] == "ok"
        err(c.get("/v1/docs/lost"), 404)  # the refused write is not visible
        assert c.get("/healthz").status_code == 200


# ---------------------------------------------------------------------------------------------
# the document hot path: answers encoded like the reference, requests merged per loop
# iteration, per-stage metrics


decisions_st = st.lists(
    st.builds(
        lambda i, dup, added, fp, ms: Decision(i, dup, added, tuple(ms), fp),
        st.text(min_size=1, max_size=8),
        st.booleans(),
        st.booleans(),
        st.integers(0, 2**128 - 1),
        st.lists(
            st.builds(
                Match,
                st.text(min_size=1, max_size=8),
                st.integers(0, 128),
                st.none() | st.floats(0, 1),
            ),
            max_size=3,
        ),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=200)
@given(decisions_st, st.booleans())
def test_encode_decisions_equals_the_to_dict_reference(decisions: list[Any], batch: bool) -> None:
    from neardup.service.schema import dumps, encode_decisions

    got = encode_decisions(decisions, batch)
    ref = {"results": [d.to_dict() for d in decisions]} if batch else decisions[0].to_dict()
    assert json.loads(got) == json.loads(dumps(ref))


def test_document_route_matching() -> None:
    from neardup.service.documents import DocumentRoutes

    m = DocumentRoutes.match
    assert m("/v1/check-and-insert") == ("/v1/check-and-insert", "default", "check-and-insert")
    assert m("/v1/ns/a.b/insert") == ("/v1/ns/{namespace}/insert", "a.b", "insert")
    for path in ("/v1/ns//check", "/v1/docs/check", "/v1/check/", "/v2/check", "/v1/ns/a/get"):
        assert m(path) is None, path


class _FakeFuture:
    """A concurrent future resolved at once with one decision per document (its id)."""

    def __init__(self, docs: list[dict[str, Any]], fail: BaseException | None = None) -> None:
        self.docs, self.fail = docs, fail

    def done(self) -> bool:
        return True

    def add_done_callback(self, fn: Any) -> None:
        fn(self)

    def exception(self) -> BaseException | None:
        return self.fail

    def result(self) -> list[str]:
        return [d["id"] for d in self.docs]


def test_batcher_merges_requests_of_one_loop_iteration() -> None:
    import asyncio

    from neardup.errors import InputError
    from neardup.service.documents import _Batcher

    calls: list[list[str]] = []

    def submit(method: str, docs: list[dict[str, Any]], *, inline: bool) -> tuple[Any, bool]:
        assert inline  # the loop decides small batches itself when the writer is idle
        ids = [d["id"] for d in docs]
        calls.append(ids)
        if len(set(ids)) < len(ids):
            raise InputError("ids in one batch must be unique")
        if "bad" in ids:
            raise InputError("bad document")
        return _FakeFuture(docs), False

    async def run(groups: list[list[str]]) -> list[Any]:
        b = _Batcher()
        store = object()
        waiters = [b.submit(store, submit, "add", [{"id": i} for i in g]) for g in groups]
        return await asyncio.gather(*waiters, return_exceptions=True)

    # one submit for three requests; each gets its own slice, in order
    out = asyncio.run(run([["a"], ["b", "c"], ["d"]]))
    assert calls == [["a", "b", "c", "d"]]
    assert [o[0] for o in out] == [["a"], ["b", "c"], ["d"]]
    # an id repeated across requests: merged batch refused, then one by one
    calls.clear()
    out = asyncio.run(run([["a"], ["a"]]))
    assert calls == [["a", "a"], ["a"], ["a"]] and [o[0] for o in out] == [["a"], ["a"]]
    # one request the store refuses fails alone
    calls.clear()
    out = asyncio.run(run([["x"], ["bad"], ["y"]]))
    assert isinstance(out[1], InputError) and out[0][0] == ["x"] and out[2][0] == ["y"]


def test_concurrent_single_requests_keep_one_per_pair(tmp_path: Path) -> None:
    """Concurrent single documents (merged per loop iteration): exactly one of each pair of
    identical texts is added, and re-sent ids are idempotent."""
    import concurrent.futures

    rng = random.Random(7)
    texts = [words(rng) for _ in range(30)]
    docs = [{"id": f"p{i}-{k}", "text": texts[i]} for i in range(30) for k in range(2)]
    docs += [{"id": f"p{i}-0", "text": texts[i]} for i in range(0, 30, 3)]  # re-sent ids
    rng.shuffle(docs)
    config = ServiceConfig(data_dir=tmp_path)
    with serve_in_thread(create_app(config)) as url, httpx.Client(base_url=url) as c:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda d: c.post("/v1/check-and-insert", json=d), docs))
        assert all(r.status_code == 200 for r in answers)
        added = {r.json()["id"] for r in answers if r.json()["added"]}
        for i in range(30):
            assert len(added & {f"p{i}-0", f"p{i}-1"}) == 1, i
        assert c.get("/healthz").json()["documents"] == 30
        metrics = c.get("/metrics").text
    got = {
        (s.name, tuple(s.labels.items())): s.value
        for f in text_string_to_metric_families(metrics)
        for s in f.samples
    }
    for stage in ("read", "parse", "prepare", "writer", "resume", "respond"):
        assert got[("neardup_request_stage_seconds_count", (("stage", stage),))] == len(docs)
    assert ("neardup_event_loop_lag_seconds_count", ()) in got


def test_large_bodies_take_the_worker_thread_path(tmp_path: Path) -> None:
    """Bodies above the inline size are parsed and queued in a worker thread: same answers,
    same 422 naming the field, same 413 for too many documents."""
    from neardup.service.documents import INLINE_BYTES

    rng = random.Random(11)
    docs = [{"id": f"L{i}", "text": words(rng, 60)} for i in range(300)]
    body = json.dumps({"documents": docs})
    assert len(body) > INLINE_BYTES
    config = ServiceConfig(data_dir=tmp_path, max_batch=300, max_body_bytes=4 * 2**20)
    with serve_in_thread(create_app(config)) as url, httpx.Client(base_url=url) as c:
        bad = [dict(d) for d in docs]
        bad[57]["text"] = 5
        e = err(c.post("/v1/check-and-insert", json={"documents": bad}), 422, "invalid_request")
        assert e["field"] == "documents[57].text"
        err(c.post("/v1/check-and-insert", json={"documents": docs + docs[:1]}), 413)
        r = c.post("/v1/check-and-insert", content=body)
        assert r.status_code == 200
        res = r.json()["results"]
        assert [x["id"] for x in res] == [d["id"] for d in docs] and all(x["added"] for x in res)
        again = c.post("/v1/check", content=body).json()["results"]
        assert all(x["duplicate"] and x["matches"][0]["id"] == x["id"] for x in again)
        assert c.get("/healthz").json()["documents"] == 300


def test_fastapi_routes_answer_like_the_hot_path(tmp_path: Path) -> None:
    """Mounted under a prefix the hot path does not match, so FastAPI's own document routes
    answer: same decisions, same error shapes and codes."""
    import asyncio

    from starlette.applications import Starlette
    from starlette.routing import Mount

    config = ServiceConfig(data_dir=tmp_path, token=TOKEN, max_batch=3)
    registry = NamespaceRegistry(config)
    registry.open()
    app = create_app(config, registry=registry)
    outer = Starlette(routes=[Mount("/api", app=app)])
    text = words(random.Random(21))

    async def run() -> list[httpx.Response]:
        out = []
        for base in ("http://t", "http://t/api"):
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=outer if base.endswith("api") else app),
                base_url=base,
            ) as c:
                doc = {"id": "routed" if base.endswith("api") else "hot", "text": text}
                out.append(await c.post("/v1/check-and-insert", json=doc, headers=AUTH))
                out.append(await c.post("/v1/check", json={"id": "x", "text": text}, headers=AUTH))
                out.append(await c.post("/v1/insert", json={"id": "y", "text": text}))
                out.append(
                    await c.post("/v1/check", json={"documents": [{"id": "z"}]}, headers=AUTH)
                )
                out.append(
                    await c.post("/v1/ns/nope/check", json={"id": "x", "text": "t"}, headers=AUTH)
                )
                out.append(await c.post("/v1/check", json={"documents": [{}] * 4}, headers=AUTH))
                out.append(await c.post("/v1/check", json={"id": "x", "text": text}))
        return out

    try:
        answers = asyncio.run(run())
    finally:
        registry.close()
    hot, routed = answers[:7], answers[7:]
    assert [r.status_code for r in hot] == [200, 200, 401, 422, 404, 413, 401]
    assert [r.status_code for r in routed] == [r.status_code for r in hot]
    for a, b in zip(hot[2:], routed[2:], strict=True):
        assert a.json() == b.json()
    assert hot[0].json()["added"] is True
    assert routed[0].json()["added"] is False and routed[0].json()["matches"][0]["id"] == "hot"
    assert routed[1].json()["duplicate"] is True


def test_resolved_writer_futures_are_handed_over_without_a_loop_iteration() -> None:
    """A group the loop decided itself (future already resolved) reaches its request at once;
    one the writer thread resolves later is handed over on the loop's thread."""
    import asyncio
    import threading
    from concurrent.futures import Future

    from neardup.service.documents import _when_done

    async def run() -> list[tuple[str, str, int]]:
        loop = asyncio.get_running_loop()
        seen: list[tuple[str, str, int]] = []

        def record(f: Future[str], tag: str, t_done: float) -> None:
            seen.append((tag, f.result(), threading.get_ident()))

        now: Future[str] = Future()
        now.set_result("x")
        _when_done(now, loop, record, "now")
        assert len(seen) == 1  # before the loop ran anything else
        later: Future[str] = Future()
        _when_done(later, loop, record, "later")
        assert len(seen) == 1
        threading.Thread(target=later.set_result, args=("y",)).start()
        for _ in range(500):
            await asyncio.sleep(0.01)
            if len(seen) == 2:
                break
        return seen

    seen = asyncio.run(run())
    assert [(tag, value) for tag, value, _ in seen] == [("now", "x"), ("later", "y")]
    assert seen[0][2] == seen[1][2] == threading.get_ident()  # asyncio.run's loop: this thread


def test_batcher_skips_cancelled_requests() -> None:
    import asyncio

    from neardup.errors import InputError
    from neardup.service.documents import _Batcher

    def submit(method: str, docs: list[dict[str, Any]], *, inline: bool) -> tuple[Any, bool]:
        if len(docs) > 1 or docs[0]["id"] == "bad":
            raise InputError("refused")
        return _FakeFuture(docs), False

    async def run() -> list[Any]:
        b = _Batcher()
        store = object()
        waiters = [b.submit(store, submit, "add", [{"id": i}]) for i in ("bad", "ok", "gone")]
        waiters[0].cancel()
        waiters[2].cancel()
        await asyncio.sleep(0)  # the flush runs; cancelled requests are skipped, not failed
        await asyncio.sleep(0)
        return [w.cancelled() or w.result()[0] for w in waiters]

    assert asyncio.run(run()) == [True, ["ok"], True]


def test_coalesced_transport_sends_a_response_in_one_write() -> None:
    """The head and body of a document answer leave as one socket write (close flushes)."""
    from neardup.service.documents import _Coalesced

    class Transport:
        def __init__(self) -> None:
            self.writes: list[bytes] = []
            self.closed = False

        def write(self, data: bytes) -> None:
            assert not self.closed
            self.writes.append(data)

        def close(self) -> None:
            self.closed = True

        def get_extra_info(self, name: str) -> str:
            return name.upper()

    t = Transport()
    out = _Coalesced(t)
    out.write(b"HTTP/1.1 200 OK\r\n\r\n")
    out.write(memoryview(b'{"ok":1}'))
    assert t.writes == [] and out.get_extra_info("peername") == "PEERNAME"
    out.flush()
    assert t.writes == [b'HTTP/1.1 200 OK\r\n\r\n{"ok":1}']
    out.flush()  # nothing new: no empty write
    out.write(b"last")
    out.close()  # a connection that is not kept alive: the bytes go out before the close
    assert t.writes[-1] == b"last" and t.closed


def test_namespace_stats_show_the_candidate_mode_and_its_search(
    http: httpx.Client, tmp_path: Path
) -> None:
    """Issue 33 item 12: an lsh store's statistics name the mode and the MinHash plan it
    searches with (not only a SimHash radius); a simhash store's its distances."""
    info = http.get("/v1/ns/default").json()
    search = info["search"]
    assert search["candidates"] == "lsh" and search["verified"] is True
    assert search["lsh"]["bands"] == 79 and search["lsh"]["rows"] == 3
    assert {"threshold", "min_agreement", "bucket_cap", "probability"} <= set(search["lsh"])
    assert search["simhash_distance"] == 3 and "search_radius" not in search
    config = ServiceConfig(
        data_dir=tmp_path, dedup=DedupSettings(candidates="simhash", candidate_radius=6)
    )
    with serve_in_thread(create_app(config)) as url:
        other = httpx.get(url + "/v1/ns/default").json()["search"]
    assert other == {
        "candidates": "simhash",
        "max_distance": 3,
        "search_radius": 6,
        "verified": True,
    }


def test_a_server_start_says_it_compiles_kernels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a cold kernel cache the namespaces' warm-up compiles for about a minute before
    anything is served: the server says so when the first compile starts (stderr, at any
    log level from warning), and stops announcing once its stores are open."""
    import numba

    from neardup import _jit
    from neardup.service import server as server_mod

    def add_one(x):  # type: ignore[no-untyped-def]
        return x + 1

    add_one.__module__ = "neardup.test_fake"  # counted like a neardup kernel

    def open_compiling(self: Any) -> None:  # a store's warm-up compiling, then a refusal
        numba.njit(add_one)(1)
        raise StorageError("the disk refused (test)")

    import logging

    pkg_log = logging.getLogger("neardup")  # run_server sets it up: put back after
    for attr in ("handlers", "level", "propagate"):
        value = getattr(pkg_log, attr)
        monkeypatch.setattr(pkg_log, attr, list(value) if attr == "handlers" else value)
    from neardup.online import warm

    helpers: list[Any] = []  # the compile helper: started with the notice, stopped after

    def start(settings: Any) -> list[Any]:
        helpers.append(["started", settings])
        return helpers[-1]

    monkeypatch.setattr(warm, "start_serve_helper", start)
    monkeypatch.setattr(_jit, "stop_helper", lambda h: h.append("stopped"))
    monkeypatch.setattr(_jit._stats, "count", 0)
    monkeypatch.setattr(NamespaceRegistry, "open", open_compiling)
    config = ServiceConfig(data_dir=tmp_path, token=TOKEN, port=0)
    with pytest.raises(StorageError, match="refused"):
        server_mod.run_server(config, log_level="warning")
    err = capsys.readouterr().err
    assert "compiling kernels on first use" in err and "the server answers when it is done" in err
    assert _jit._stats.announce is None
    assert helpers == [["started", config.dedup, "stopped"]]
    with pytest.raises(ValueError, match="kind"):
        _jit.announce_compiles(print, "lunch")
