"""Who may read and write what (issue 34 item 6): read-only and namespace-scoped tokens, the
token file, ``--open-reads``, ``--no-auth``, and ``neardup serve`` refusing to start without a
token; through the real server and the console script."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

import neardup  # noqa: E402
from neardup.errors import (  # noqa: E402
    AuthError,
    ConfigError,
    ForbiddenError,
    UnsupportedVersionError,
    http_status_for,
)
from neardup.service.app import create_app  # noqa: E402
from neardup.service.auth import (  # noqa: E402
    Authenticator,
    Grant,
    authenticator_for,
    read_token_file,
)
from neardup.service.config import ServiceConfig  # noqa: E402
from neardup.service.testing import free_port, serve_in_thread  # noqa: E402

WRITE, READ, TENANT_RW, TENANT_R = "w-token-1", "r-token-2", "tenant-rw-3", "tenant-r-4"


def _token_file(path: Path) -> Path:
    path.write_text(
        "# tokens of the test server\n"
        "\n"
        "neardup-tokens 1\n"
        f"{READ}        read    *\n"
        f"{TENANT_RW}   write   tenant-a\n"
        f"{TENANT_R}    read    tenant-a,tenant-b   \n"
    )
    path.chmod(0o600)
    return path


# ---------------------------------------------------------------------------------------------
# the token file


def test_token_file_is_read(tmp_path: Path) -> None:
    tokens = read_token_file(_token_file(tmp_path / "tokens"))
    assert tokens == {
        READ: Grant(write=False),
        TENANT_RW: Grant(write=True, namespaces=frozenset({"tenant-a"})),
        TENANT_R: Grant(write=False, namespaces=frozenset({"tenant-a", "tenant-b"})),
    }


@pytest.mark.parametrize(
    ("text", "error", "needle"),
    [
        ("abc write *\n", ConfigError, ":1: not a neardup token file"),
        ("# c\nneardup-tokens 2\nabc write *\n", UnsupportedVersionError, ":2: token file version"),
        ("neardup-tokens 1\nabc admin *\n", ConfigError, ":2: access must be 'read' or 'write'"),
        ("neardup-tokens 1\nabc write\n", ConfigError, ":2: expected 'TOKEN ACCESS NAMESPACES'"),
        ("neardup-tokens 1\nabc read Tenant\n", ConfigError, ":2: namespace 'Tenant'"),
        ("neardup-tokens 1\nabc read a,,b\n", ConfigError, ":2: namespaces must be"),
        (
            "neardup-tokens 1\nabc read *\n\nabc write *\n",
            ConfigError,
            ":4: this token is already on line 2",
        ),
        ("# only comments\n", ConfigError, "the token file is empty"),
    ],
)
def test_token_file_errors_name_the_file_and_line(
    tmp_path: Path, text: str, error: type, needle: str
) -> None:
    path = tmp_path / "tokens.txt"
    path.write_text(text)
    with pytest.raises(error) as e:
        read_token_file(path)
    assert str(path) in str(e.value) and needle in str(e.value), str(e.value)


def test_a_token_given_twice_is_refused(tmp_path: Path) -> None:
    path = _token_file(tmp_path / "tokens")
    with pytest.raises(ConfigError, match="same token"):
        authenticator_for(READ, token_file=path)
    with pytest.raises(ConfigError, match="not found"):
        authenticator_for(WRITE, token_file=tmp_path / "missing")


def test_the_access_rule() -> None:
    a = authenticator_for(WRITE, READ)
    bearer = "Bearer {}".format
    assert a.authorize(bearer(WRITE), "x", write=True).write
    assert not a.authorize(bearer(READ), "x", write=False).write
    with pytest.raises(ForbiddenError, match="read in every namespace, not write"):
        a.authorize(bearer(READ), "x", write=True)
    for header in (None, "", "Bearer nope", f"Basic {WRITE}", WRITE):
        with pytest.raises(AuthError) as e:
            a.authorize(header, "x", write=False)
        assert type(e.value) is AuthError and http_status_for(e.value) == 401
    assert http_status_for(ForbiddenError("x")) == 403
    assert a.authorize(f"bearer {WRITE}", None, write=False).everywhere  # scheme: any case
    scoped = Authenticator({"s": Grant(write=True, namespaces=frozenset({"a"}))})
    with pytest.raises(ForbiddenError, match="every namespace"):
        scoped.authorize("Bearer s", None, write=False)  # server-wide reads (/metrics)
    assert scoped.readable("Bearer s", ["a", "b", "default"]) == ["a"]
    assert scoped.readable(None, ["a"]) is None
    # open reads: anonymous reads only; no tokens at all: everything open
    opened = authenticator_for(WRITE, open_reads=True)
    assert opened.authorize(None, "x", write=False)
    with pytest.raises(AuthError):
        opened.authorize(None, "x", write=True)
    assert Authenticator({}).authorize(None, "x", write=True).write
    # a token never reads less than no token: with open reads a scoped token reads other
    # namespaces and /metrics as anyone may (it was refused 403 where no token was answered)
    scoped_open = Authenticator(
        {"s": Grant(write=True, namespaces=frozenset({"a"}))}, open_reads=True
    )
    assert scoped_open.authorize("Bearer s", None, write=False) is not None
    assert scoped_open.authorize("Bearer s", "b", write=False) is not None
    assert scoped_open.authorize("Bearer s", "a", write=True).write
    with pytest.raises(ForbiddenError):
        scoped_open.authorize("Bearer s", "b", write=True)


def test_tokens_are_compared_by_digest_and_compare_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison goes through hmac.compare_digest (constant time), never ``==`` on the
    token: count the calls."""
    import hmac

    from neardup.service import auth as auth_mod

    calls: list[int] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append(len(a))
        return real(a, b)

    monkeypatch.setattr(auth_mod.hmac, "compare_digest", counting)
    a = authenticator_for("pässwörd-密码")
    assert a.grant("Bearer " + "pässwörd-密码".encode().decode("latin-1")) is not None
    assert calls == [32]  # one SHA-256 digest comparison
    assert a.grant("Bearer pässwörd") is None


# ---------------------------------------------------------------------------------------------
# over HTTP


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("auth")
    config = ServiceConfig(
        data_dir=tmp / "data",
        token=WRITE,
        token_file=_token_file(tmp / "tokens"),
        namespaces=("tenant-a", "tenant-b"),
    )
    with serve_in_thread(create_app(config)) as url:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {WRITE}"}) as c:
            for ns in ("default", "tenant-a"):
                p = "/v1" if ns == "default" else f"/v1/ns/{ns}"
                r = c.post(f"{p}/insert", json={"id": "doc", "text": f"stored text of {ns}"})
                assert r.status_code == 200
        yield url


def _status(url: str, token: str | None, method: str, path: str) -> int:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    body = {"id": "new-doc", "text": "another text"} if method == "POST" else None
    return httpx.request(method, url + path, json=body, headers=headers, timeout=30).status_code


@pytest.mark.parametrize(
    ("token", "method", "path", "status"),
    [
        # the write token: everything
        (WRITE, "POST", "/v1/ns/tenant-b/check-and-insert", 200),
        (WRITE, "GET", "/metrics", 200),
        # a read-only token for every namespace: reads, no writes
        (READ, "POST", "/v1/check", 200),
        (READ, "GET", "/v1/docs/doc", 200),
        (READ, "GET", "/v1/ns/tenant-a/export", 200),
        (READ, "GET", "/v1/ns/tenant-a", 200),
        (READ, "GET", "/metrics", 200),
        (READ, "POST", "/v1/insert", 403),
        (READ, "POST", "/v1/ns/tenant-a/check-and-insert", 403),
        (READ, "DELETE", "/v1/docs/doc", 403),
        (READ, "PUT", "/v1/ns/tenant-c", 403),
        # a token that may write tenant-a only
        (TENANT_RW, "POST", "/v1/ns/tenant-a/insert", 200),
        (TENANT_RW, "GET", "/v1/ns/tenant-a/docs/doc", 200),
        (TENANT_RW, "POST", "/v1/check", 403),
        (TENANT_RW, "GET", "/v1/docs/doc", 403),
        (TENANT_RW, "GET", "/v1/export", 403),
        (TENANT_RW, "POST", "/v1/ns/tenant-b/insert", 403),
        (TENANT_RW, "PUT", "/v1/ns/tenant-c", 403),
        (TENANT_RW, "GET", "/metrics", 403),
        # a token that may read tenant-a and tenant-b
        (TENANT_R, "POST", "/v1/ns/tenant-b/check", 200),
        (TENANT_R, "GET", "/v1/ns/tenant-a/docs/doc", 200),
        (TENANT_R, "POST", "/v1/ns/tenant-a/insert", 403),
        (TENANT_R, "POST", "/v1/check", 403),
        # no token, a wrong one
        (None, "POST", "/v1/ns/tenant-a/check", 401),
        ("wrong", "GET", "/v1/ns/tenant-a/docs/doc", 401),
    ],
)
def test_access_over_http(
    server: str, token: str | None, method: str, path: str, status: int
) -> None:
    assert _status(server, token, method, path) == status


def test_namespace_list_shows_what_the_token_may_read(server: str) -> None:
    def names(token: str) -> list[str]:
        r = httpx.get(server + "/v1/ns", headers={"Authorization": f"Bearer {token}"})
        return list(r.json()["namespaces"])

    assert names(WRITE) == names(READ) == ["default", "tenant-a", "tenant-b"]
    assert names(TENANT_RW) == ["tenant-a"]
    assert names(TENANT_R) == ["tenant-a", "tenant-b"]
    full = httpx.get(server + "/healthz", headers={"Authorization": f"Bearer {READ}"}).json()
    assert full["namespaces"] == ["default", "tenant-a", "tenant-b"]
    scoped = httpx.get(server + "/healthz", headers={"Authorization": f"Bearer {TENANT_R}"}).json()
    assert set(scoped) == {"status", "uptime_s"}


def test_the_client_raises_forbidden_for_a_scoped_token(server: str) -> None:
    with neardup.Client(server, token=TENANT_RW, namespace="tenant-a") as c:
        assert c.check_and_insert({"id": "c1", "text": "a text for tenant a only"}).added
        with pytest.raises(ForbiddenError) as e:
            c.get("doc", namespace="default")
        assert e.value.status_code == 403  # type: ignore[attr-defined]
        assert "tenant-a" in str(e.value) and "'default'" in str(e.value)


def test_open_reads_serve_reads_without_a_token(tmp_path: Path) -> None:
    config = ServiceConfig(data_dir=tmp_path, token=WRITE, open_reads=True)
    with serve_in_thread(create_app(config)) as url:
        assert _status(url, WRITE, "POST", "/v1/insert") == 200
        for method, path in [
            ("POST", "/v1/check"),
            ("GET", "/v1/docs/new-doc"),
            ("GET", "/v1/ns"),
            ("GET", "/metrics"),
        ]:
            assert _status(url, None, method, path) == 200, path
        assert _status(url, None, "POST", "/v1/insert") == 401
        assert _status(url, None, "DELETE", "/v1/docs/new-doc") == 401


# ---------------------------------------------------------------------------------------------
# neardup serve


def _serve(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("NEARDUP_TOKEN") and k != "NEARDUP_READ_TOKEN"
    }
    cmd = [sys.executable, "-m", "neardup", "serve", "--data", str(tmp_path / "data"), *args]
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**clean, **(env or {})},
        check=False,
    )


def test_serve_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    out = _serve(tmp_path, "--port", str(free_port()))
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("neardup: error: neardup serve needs a token"), out.stderr
    assert "--no-auth" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "data").exists()  # refused before anything was created


def test_serve_refuses_a_bad_token_file_naming_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "tokens"
    bad.write_text("neardup-tokens 1\nabc writ *\n")
    out = _serve(tmp_path, "--port", str(free_port()), "--token-file", str(bad))
    assert out.returncode == 2 and f"{bad}:2: access must be" in out.stderr, out.stderr
    out = _serve(tmp_path, "--no-auth", "--open-reads")
    assert out.returncode == 2 and "--no-auth" in out.stderr, out.stderr


def test_serve_with_no_auth_warns_in_the_log(tmp_path: Path) -> None:
    from neardup.service.testing import ServerProcess

    srv = ServerProcess(tmp_path / "data", args=["--no-auth", "--log-level", "info"])
    srv.start()
    try:
        r = httpx.get(srv.url + "/v1/ns")
        assert r.status_code == 200  # everything open, on purpose
    finally:
        assert srv.stop() == 0
    assert (
        "WARNING" in srv.last_stderr
        and "--no-auth: serving without authentication" in srv.last_stderr
    )


def test_serve_on_a_busy_port_fails_at_once_with_one_error_line(tmp_path: Path) -> None:
    """Issue 33 item 12: no "ready" before the bind error, a `neardup: error:` line, exit 2,
    and no store opened for nothing."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = _serve(tmp_path, "--no-auth", "--port", str(port), "--log-level", "info")
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert (
        lines[-1].startswith("neardup: error: cannot listen on 127.0.0.1:")
        and "in use" in lines[-1]
    )
    assert "service ready" not in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert not (tmp_path / "data" / "namespaces").exists()


def test_a_token_with_surrounding_whitespace_is_refused_at_start() -> None:
    """``NEARDUP_TOKEN=$'s3cret\\n'`` started a server no request could authenticate with (the
    header's token is compared stripped); the Client's header error read as "server down"."""
    from neardup.errors import ConfigError
    from neardup.service.auth import authenticator_for

    for token in ("s3cret\n", " s3cret", "s3cret "):
        with pytest.raises(ConfigError, match="starts or ends with whitespace"):
            authenticator_for(token)
        with pytest.raises(ConfigError, match="starts or ends with whitespace"):
            neardup.Client("http://127.0.0.1:1", token=token)
