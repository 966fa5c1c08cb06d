"""``neardup cluster`` on loopback: status, add-node, remove-node, rebalance, refusals."""

from __future__ import annotations

import contextlib
import json
import re

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


def test_status_only_reads_and_a_stale_file_changes_nothing(tmp_path, capsys, monkeypatch):
    """status pushed the file's membership to every node (a same-epoch edit replaced the
    nodes' view), printed a text line before its --json, and exited 0 with nodes down or a
    refused token; add-node / remove-node with a stale file rewrote it and left a journal
    before the nodes refused them; a repair with a refused token left a journal behind."""
    monkeypatch.setenv("NEARDUP_TOKEN", TOKEN)
    with servers(tmp_path, 3) as urls:
        cfile = tmp_path / "cluster.toml"
        two = (NodeSpec("a", urls[0]), NodeSpec("b", urls[1]))
        ClusterConfig(two, replicas=1, vnodes=64).save(cfile)
        stale = tmp_path / "stale.toml"
        stale.write_bytes(cfile.read_bytes())
        assert main(["cluster", "add-node", "c", urls[2], "-c", str(cfile), "--json"]) == 0
        assert "resuming" not in capsys.readouterr().err  # (nothing was being resumed)
        assert main(["cluster", "status", "-c", str(cfile), "--json"]) == 0
        status = json.loads(capsys.readouterr().out)  # one JSON document
        assert status["epoch"] == 1 and status["rebalance_journal"] is None
        assert [(n["name"], n["up"], n["epoch"]) for n in status["nodes"]] == [
            ("a", True, 1), ("b", True, 1), ("c", True, 1)
        ]  # fmt: skip
        # a namespace the nodes lack: they answered, so they are up (it said DOWN, exit 8)
        assert main(["cluster", "status", "-c", str(cfile), "-n", "nosuch"]) == 4
        out = capsys.readouterr().out
        assert "DOWN" not in out and out.count("no namespace 'nosuch'") == 3
        # a stale file: refused by status, add-node and remove-node, the file untouched
        before = stale.read_bytes()
        for args in (["status"], ["add-node", "d", "http://127.0.0.1:9"], ["remove-node", "b"]):
            assert main(["cluster", *args, "-c", str(stale)]) == 2
            assert "is at cluster epoch 1 but the cluster file is at 0" in capsys.readouterr().err
        assert stale.read_bytes() == before
        assert not list(tmp_path.glob("*.journal"))
        # a journal path that cannot be a file: refused before anything changes (tracebacks)
        for journal, says in ((tmp_path / "no" / "j", "does not exist"), (tmp_path, "a folder")):
            for args in (["remove-node", "b"], ["rebalance"]):
                assert main(["cluster", *args, "-c", str(cfile), "--journal", str(journal)]) == 2
                assert says in capsys.readouterr().err
        assert ClusterConfig.load(cfile).epoch == 1
        # a same-epoch edit of a url: status reads, and no node's view changes
        edited = tmp_path / "edited.toml"
        edited.write_text(cfile.read_text().replace(urls[2], "http://127.0.0.1:9"))
        assert main(["cluster", "status", "-c", str(edited)]) == 8  # c does not answer there
        with Client(urls[0], token=TOKEN) as c:
            view = c._request("GET", "/v1/cluster")
        assert {n["name"]: n["url"] for n in view["nodes"]}["c"] == urls[2]
        out = capsys.readouterr().out
        assert "DOWN" in out and "index bits 64" in out
        # a token the nodes refuse: their error (exit 10), not every node "DOWN" and exit 0;
        # the repair run leaves no journal
        monkeypatch.setenv("NEARDUP_TOKEN", "wrong")
        assert main(["cluster", "status", "-c", str(cfile)]) == 10
        assert main(["cluster", "rebalance", "-c", str(cfile)]) == 10
        assert not list(tmp_path.glob("*.journal"))


def test_router_options_are_checked_before_it_starts(tmp_path, capsys, monkeypatch):
    from neardup.cluster.router import create_router
    from neardup.errors import ConfigError

    monkeypatch.setenv("NEARDUP_TOKEN", TOKEN)
    cfile = tmp_path / "cluster.toml"
    nodes = (NodeSpec("a", "http://127.0.0.1:9"), NodeSpec("b", "http://127.0.0.1:10"))
    cfg = ClusterConfig(nodes, vnodes=8)
    cfg.save(cfile)
    for kw, says in (
        ({"min_copies": 5}, "min_copies must be in 1..replicas (2), got 5"),
        ({"min_copies": 0}, "min_copies must be in 1..replicas"),
        ({"max_batch": 0}, "max_batch must be an integer >= 1"),
        ({"max_namespaces": 0}, "max_namespaces must be an integer >= 1"),
        ({"timeout": -1.0}, "timeout must be a number of seconds > 0"),
        ({"slow_after": 0.0}, "slow_after must be"),
        ({"lease_ttl": 0.0}, "lease_ttl must be"),
    ):
        with pytest.raises(ConfigError, match=re.escape(says)):
            create_router(cfg, token=TOKEN, **kw)
    for args, says in (
        (["--port", "70000"], "port must be an integer in [0, 65535], got 70000"),
        (["--log-level", "loud"], "--log-level must be debug, info, warning or error"),
        (["--min-copies", "5"], "min_copies must be in 1..replicas (2), got 5"),
    ):
        assert main(["cluster", "router", "-c", str(cfile), *args]) == 2
        assert says in capsys.readouterr().err
