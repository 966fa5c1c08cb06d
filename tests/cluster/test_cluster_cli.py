"""``neardup cluster`` on loopback: status, add-node, remove-node, rebalance, refusals."""

from __future__ import annotations

import contextlib
import json

import pytest

pytest.importorskip("fastapi")

from neardup.cli.main import main
from neardup.cluster.client import ClusterClient, ClusterConfig, NodeSpec
from neardup.errors import NotFoundError
from neardup.online.settings import DedupSettings
from neardup.service import create_app
from neardup.service.client import Client
from neardup.service.config import ServiceConfig
from neardup.service.testing import serve_in_thread

TOKEN = "cli-secret"


def text(i: int) -> str:
    return " ".join(f"w{(i * 7919 + j * 104729) % 1_000_003}" for j in range(60))


@contextlib.contextmanager
def servers(tmp_path, n: int, **kw):
    with contextlib.ExitStack() as stack:
        yield [
            stack.enter_context(
                serve_in_thread(
                    create_app(ServiceConfig(data_dir=tmp_path / f"s{i}", token=TOKEN, **kw))
                )
            )
            for i in range(n)
        ]


def holders(urls, ids):
    out = {}
    for d in ids:
        out[d] = set()
        for i, u in enumerate(urls):
            with Client(u, token=TOKEN) as c, contextlib.suppress(NotFoundError):
                c.get(d)
                out[d].add(i)
    return out


def test_cluster_commands(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NEARDUP_TOKEN", TOKEN)
    with (
        servers(tmp_path, 3) as urls,
        servers(tmp_path / "odd", 1, dedup=DedupSettings(max_distance=5)) as (odd,),
    ):
        cfile = tmp_path / "cluster.toml"
        ClusterConfig((NodeSpec("a", urls[0]), NodeSpec("b", urls[1])), vnodes=64).save(cfile)
        ids = [f"d{i}" for i in range(40)]
        with ClusterClient(cfile, token=TOKEN) as cc:
            cc.insert([{"id": d, "text": text(i)} for i, d in enumerate(ids)])

        assert main(["cluster", "status", "-c", str(cfile)]) == 0
        out = capsys.readouterr().out
        assert "replicas 2" in out and out.count(" up ") == 2 and "documents" in out

        # a node with other index settings is refused; the file is unchanged
        assert main(["cluster", "add-node", "x", odd, "-c", str(cfile)]) == 2
        assert "index settings" in capsys.readouterr().err
        assert ClusterConfig.load(cfile).names == ("a", "b")
        assert main(["cluster", "add-node", "a", urls[2], "-c", str(cfile)]) == 2
        assert "already in the cluster" in capsys.readouterr().err

        assert main(["cluster", "add-node", "c", urls[2], "-c", str(cfile), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["complete"] and report["copied"] > 0
        cfg = ClusterConfig.load(cfile)
        assert cfg.names == ("a", "b", "c")
        where = holders(urls, ids)
        with ClusterClient(cfg) as cc:
            assert all(where[d] == {"abc".index(n) for n in cc.targets(d)} for d in ids)

        assert main(["cluster", "remove-node", "a", "-c", str(cfile), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["complete"]
        where = holders(urls, ids)
        assert all(where[d] == {1, 2} for d in ids)
        assert main(["cluster", "remove-node", "zz", "-c", str(cfile)]) == 4
        assert "not in the cluster" in capsys.readouterr().err
        assert main(["cluster", "remove-node", "b", "-c", str(cfile)]) == 2  # R = 2 needs 2
        assert "fewer than replicas" in capsys.readouterr().err

        assert main(["cluster", "rebalance", "-c", str(cfile), "--json"]) == 0
        again = json.loads(capsys.readouterr().out)
        assert again["copied"] == again["deleted"] == 0
        assert main(["cluster", "status", "-c", str(tmp_path / "nope.toml")]) == 2


def test_router_refuses_to_start_without_a_token(tmp_path, capsys, monkeypatch):
    for name in ("NEARDUP_TOKEN", "NEARDUP_READ_TOKEN", "NEARDUP_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    cfile = tmp_path / "cluster.toml"
    nodes = (NodeSpec("a", "http://127.0.0.1:9"), NodeSpec("b", "http://127.0.0.1:10"))
    ClusterConfig(nodes, vnodes=8).save(cfile)
    assert main(["cluster", "router", "-c", str(cfile)]) == 2
    err = capsys.readouterr().err
    assert "neardup cluster router needs a token" in err and "--no-auth" in err
