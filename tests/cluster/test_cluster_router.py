"""The cluster router: neardup.Client against several nodes, one sequencer for all writers."""

from __future__ import annotations

import contextlib
import threading

import pytest

pytest.importorskip("fastapi")

from neardup.cluster.client import ClusterConfig, NodeSpec
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
def router(tmp_path, n: int = 3):
    with contextlib.ExitStack() as stack:
        urls = [
            stack.enter_context(
                serve_in_thread(create_app(ServiceConfig(data_dir=tmp_path / f"n{i}", token=TOKEN)))
            )
            for i in range(n)
        ]
        cfg = ClusterConfig(tuple(NodeSpec(f"n{i}", u) for i, u in enumerate(urls)), vnodes=64)
        yield stack.enter_context(serve_in_thread(create_router(cfg, token=TOKEN))), urls


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
        assert health["status"] == "ok" and health["stored_copies"] == 2 * 19
        with Client(url) as anon, pytest.raises(AuthError):
            anon.insert({"id": "z", "text": "no token"})
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
