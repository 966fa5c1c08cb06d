"""A new node's first requests wait for no kernel: right after a node starts on an empty data
directory, a cluster client's first replicated insert, check, read, delete and batches, and a
plain client's first check-and-insert, check, read, delete, batches and export, load no numba
kernel that the node's warm-up did not. On a fresh
kernel cache such a kernel is compiled inside the request (seconds, holding the GIL: every
in-process node stalls), and a cluster client marks the node down after its read timeout."""

from __future__ import annotations

import pytest
from doubles import output_of

pytest.importorskip("fastapi")

_SCRIPT = """
import contextlib, tempfile
from pathlib import Path
import httpx
from doubles import loaded_kernels as loaded
from neardup.cluster import ClusterClient, ClusterConfig, NodeSpec
from neardup.service import create_app
from neardup.service.client import Client
from neardup.service.config import ServiceConfig
from neardup.service.testing import free_port, serve_in_thread


def text(i):
    return " ".join(f"w{(i * 7919 + j * 104729) % 1_000_003}" for j in range(60))


def new(before):
    now = loaded()
    return {k: (before.get(k, 0), v) for k, v in now.items() if v != before.get(k, 0)}, now


def many(tag, n=200):
    return [{"id": f"{tag}{i}", "text": text(i + 10)} for i in range(n)]


def reads_and_batches(client, tag):  # a read and a delete of "a", then a batch of each kind
    global seen
    assert client.get("a")["id"] == "a"
    client.delete("a")
    out[f"{tag} get, delete"], seen = new(seen)
    assert not any(d.duplicate for d in client.check_and_insert(many("x")))
    assert all(d.duplicate for d in client.check(many("y")))
    out[f"{tag} batches"], seen = new(seen)


scratch = tempfile.TemporaryDirectory()  # (removed at exit: its finalizer)
tmp = Path(scratch.name)
ports = [free_port() for _ in range(4)]
out = {}
with contextlib.ExitStack() as s:
    for i, p in enumerate(ports):
        app = create_app(ServiceConfig(data_dir=tmp / f"n{i}", token="t"))
        s.enter_context(serve_in_thread(app, port=p))
    nodes = tuple(NodeSpec(f"n{i}", f"http://127.0.0.1:{p}") for i, p in enumerate(ports[:3]))
    cfg = ClusterConfig(nodes, vnodes=64, epoch=0)
    seen = loaded()
    with ClusterClient(cfg, token="t") as cc:
        cc.insert({"id": "a", "text": text(1)})
        out["cluster insert"], seen = new(seen)
        assert cc.check({"id": "b", "text": text(1)}).duplicate
        out["cluster check"], seen = new(seen)
        reads_and_batches(cc, "cluster")
    with Client(f"http://127.0.0.1:{ports[3]}", token="t") as c:
        assert c.check_and_insert({"id": "a", "text": text(1)}).added
        out["node check-and-insert"], seen = new(seen)
        assert c.check({"id": "b", "text": text(1)}).duplicate
        out["node check"], seen = new(seen)
        reads_and_batches(c, "node")
        auth = {"Authorization": "Bearer t"}
        got = httpx.get(f"http://127.0.0.1:{ports[3]}/v1/export", headers=auth)
        assert got.status_code == 200, got.text
        out["node export"], seen = new(seen)
print(out)
"""


def test_a_new_nodes_first_requests_load_no_kernel_the_warm_up_did_not() -> None:
    got = output_of(_SCRIPT)
    steps = (
        "cluster insert", "cluster check", "cluster get, delete", "cluster batches",
        "node check-and-insert", "node check", "node get, delete", "node batches", "node export",
    )  # fmt: skip
    assert got == repr({step: {} for step in steps}), got
