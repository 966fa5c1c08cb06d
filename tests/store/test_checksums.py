"""Stored texts carry checksums, end to end with the real server (issue 34 item 8): a byte
flipped inside a stored text in the SQLite file (still UTF-8, or not any more) is never served
changed, never a 500; ``neardup store verify`` lists the damaged rows (while serving) and
``neardup store repair`` restores them from the live log or quarantines them."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from neardup.service.testing import ServerProcess  # noqa: E402

TOKEN = "checksum-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _text(tag: str) -> str:
    words = [f"{tag}w{i}" for i in range(30)]
    return f"marker{tag}marker " + " ".join(words)


def _insert(url: str, ids: list[str]) -> None:
    with httpx.Client(base_url=url, headers=AUTH, timeout=60) as c:
        for i in ids:
            r = c.post("/v1/insert", json={"id": i, "text": _text(i)})
            assert r.status_code == 200 and r.json()["added"], r.text


def _flip(meta: Path, tag: str, new: bytes) -> None:
    """Replace the first byte after ``marker<tag>`` in the stored text (every copy in the file),
    as a damaged disk would: the row's checksum is left as it was."""
    data = meta.read_bytes()
    needle = f"marker{tag}marker".encode()
    at = data.find(needle)
    assert at >= 0, tag
    pos = at + len("marker")
    while at >= 0:
        data = data[:pos] + new + data[pos + 1 :]
        at = data.find(needle, at + 1)
        pos = at + len("marker")
    meta.write_bytes(data)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neardup", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_flipped_text_bytes_are_detected_verified_and_repaired(tmp_path: Path) -> None:
    data = tmp_path / "data"
    meta = data / "namespaces" / "default" / "meta.sqlite3"
    srv = ServerProcess(data, env={"NEARDUP_TOKEN": TOKEN})
    srv.start()
    flushed = ["flushedvalid", "flushedbad", "flushedok"]
    _insert(srv.url, flushed)
    assert srv.stop() == 0  # flushed into segments: the log that held them is retired
    srv.start()
    logged = ["loggedvalid", "loggedok"]
    _insert(srv.url, logged)
    time.sleep(1.0)  # SQLite has applied them; they stay in the live log too
    srv.kill()
    db = sqlite3.connect(meta)  # what a reopen does first: the SQLite WAL into the main file
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    _flip(meta, "flushedvalid", b"X")  # still valid UTF-8: would be served changed
    _flip(meta, "flushedbad", b"\xff")  # not UTF-8 any more: was a 500
    _flip(meta, "loggedvalid", b"Y")

    srv.start()  # opens: PRAGMA quick_check does not read text contents
    with httpx.Client(base_url=srv.url, headers=AUTH, timeout=60) as c:
        for doc_id in ("flushedvalid", "flushedbad", "loggedvalid"):
            r = c.get(f"/v1/docs/{doc_id}")
            assert r.status_code == 503, r.text
            e = r.json()["error"]
            assert e["code"] == "corrupt_record", e
            assert "namespace 'default'" in e["message"] and repr(doc_id) in e["message"], e
            assert "neardup store repair" in e["message"]
            # a check whose candidate is the damaged document: the same clear error
            r = c.post("/v1/check", json={"id": "probe", "text": _text(doc_id)})
            assert r.status_code == 503 and r.json()["error"]["code"] == "corrupt_record", r.text
            assert repr(doc_id) in r.json()["error"]["message"]
        for doc_id in ("flushedok", "loggedok"):  # the intact rows are served as stored
            assert c.get(f"/v1/docs/{doc_id}").json()["text"] == _text(doc_id)
        before = c.get("/healthz").json()["documents"]
        assert before == 5

    # verify reads while the server runs: exit 6, every damaged row listed with its id
    out = _cli("store", "verify", str(data))
    assert out.returncode == 6, out.stderr
    for doc_id in ("flushedvalid", "flushedbad", "loggedvalid"):
        assert f"id {doc_id!r}" in out.stdout, out.stdout
    assert "3 damaged" in out.stdout and "neardup: error:" in out.stderr
    assert "Traceback" not in out.stderr
    out = _cli("store", "repair", str(data))  # the server holds the store: refused
    assert out.returncode == 5 and "served by a running neardup serve" in out.stderr, out.stderr
    srv.kill()  # (a clean stop would flush the memtable and retire the log that holds a copy)

    out = _cli("store", "repair", str(data), "--json")
    assert out.returncode == 0, out.stderr
    (rep,) = json.loads(out.stdout)
    actions = {d["id"]: d["action"] for d in rep["damaged"]}
    assert actions == {
        "flushedvalid": "quarantined",
        "flushedbad": "quarantined",
        "loggedvalid": "restored from the log",
    }
    assert rep["restored"] == 1 and rep["quarantined"] == 2
    q = sqlite3.connect(rep["quarantine_file"])
    kept = dict(q.execute("SELECT CAST(id AS TEXT), problem FROM quarantine").fetchall())
    q.close()
    assert set(kept) == {"flushedvalid", "flushedbad"}
    assert "checksum" in kept["flushedvalid"]
    out = _cli("store", "verify", str(data))
    assert out.returncode == 0 and "0 damaged" in out.stdout, out.stdout + out.stderr

    srv.start()
    with httpx.Client(base_url=srv.url, headers=AUTH, timeout=60) as c:
        assert c.get("/v1/docs/loggedvalid").json()["text"] == _text("loggedvalid")
        for doc_id in ("flushedvalid", "flushedbad"):
            assert c.get(f"/v1/docs/{doc_id}").status_code == 404
            r = c.post("/v1/check", json={"id": "probe", "text": _text(doc_id)})
            assert r.status_code == 200 and not r.json()["duplicate"], r.text
        assert c.get("/healthz").json()["documents"] == 3
        # a quarantined id can be sent again
        r = c.post("/v1/insert", json={"id": "flushedvalid", "text": _text("flushedvalid")})
        assert r.status_code == 200 and r.json()["added"], r.text
    assert srv.stop() == 0


def test_a_missing_store_is_not_found_for_verify_and_repair(tmp_path: Path, capsys) -> None:
    """Exit 4, as `explain --store` and `dedup --against` answer a missing store (it was 2)."""
    from neardup.cli.main import main

    for command in ("verify", "repair"):
        assert main(["store", command, str(tmp_path / "nothere")]) == 4
        assert "no store there" in capsys.readouterr().err
