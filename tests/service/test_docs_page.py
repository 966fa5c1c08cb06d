"""``/docs`` renders in a real browser, offline (issue 33 item 10): headless Chromium loads the
page from a real server and Swagger UI (5.x, OpenAPI 3.1) renders every operation of the
OpenAPI document; nothing is loaded from another host."""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from neardup.service.app import create_app  # noqa: E402
from neardup.service.config import ServiceConfig  # noqa: E402
from neardup.service.testing import serve_in_thread  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: the flags docs/service.md gives for checking pages (GUIDE.md: headless, fresh profile)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _dom(url: str) -> str:
    """The page's DOM after its scripts ran (Chromium's --dump-dom, 20 s of virtual time)."""
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory(prefix="neardup-chromium-") as profile:
        out = subprocess.run(
            [
                CHROMIUM,
                *FLAGS,
                f"--user-data-dir={profile}",
                "--virtual-time-budget=20000",
                "--dump-dom",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="Chromium is not installed (Debian package 'chromium': apt-get install chromium); "
    "this test renders /docs in a real browser",
)
def test_docs_page_renders_every_operation_in_a_browser(tmp_path: Path) -> None:
    config = ServiceConfig(data_dir=tmp_path, token="docs-token", namespaces=("other",))
    with serve_in_thread(create_app(config)) as url:
        spec = httpx.get(url + "/openapi.json").json()
        dom = _dom(url + "/docs")
    assert spec["openapi"].startswith("3.1")
    assert "Unable to render this definition" not in dom
    rendered = set(re.findall(r'class="opblock opblock-(\w+)[^"]*"', dom))
    assert {"get", "post", "put", "delete"} <= rendered, rendered
    paths = set(re.findall(r'data-path="([^"]+)"', dom))
    assert paths == set(spec["paths"]), set(spec["paths"]) ^ paths
    n_ops = sum(len(ops) for ops in spec["paths"].values())
    assert len(re.findall(r'class="opblock opblock-', dom)) == n_ops
    assert "btn authorize" in dom  # the bearer scheme: the Authorize button
    assert ">neardup<" in dom or "neardup" in re.sub(r"<[^>]+>", " ", dom)


def test_docs_assets_are_served_from_the_package(tmp_path: Path) -> None:
    """Swagger UI's files come from this server (gzip for clients that accept it, plain for
    others); the page names no other host; the vendored files say where they come from."""
    config = ServiceConfig(data_dir=tmp_path)
    with serve_in_thread(create_app(config)) as url, httpx.Client(base_url=url) as c:
        page = c.get("/docs").text
        assert not re.search(r"(src|href)=\"(https?:)?//", page), page
        js = c.get("/docs/assets/swagger-ui-bundle.js")  # httpx accepts gzip and decodes
        assert js.status_code == 200 and js.headers["content-encoding"] == "gzip"
        assert js.headers["content-type"].startswith("text/javascript")
        assert b"SwaggerUIBundle" in js.content
        plain = c.get("/docs/assets/swagger-ui.css", headers={"Accept-Encoding": "identity"})
        assert "content-encoding" not in plain.headers and b".swagger-ui" in plain.content
        assert c.get("/docs/assets/other.js").status_code == 404
    static = Path(__file__).resolve().parents[2] / "neardup" / "service" / "static"
    notice = (static / "NOTICE").read_text()
    assert "swagger-ui-dist 5." in notice and "Apache License" in notice
    assert "Apache License" in (static / "LICENSE").read_text()
    version = re.search(r"swagger-ui-dist (5\.\d+\.\d+)", notice)
    assert version is not None
    bundle = gzip.decompress((static / "swagger-ui-bundle.js.gz").read_bytes())
    assert len(bundle) > 1_000_000  # the whole bundle, not a stub
