"""Deletes that stay deleted, epochs, the write lease (issue 34), on in-process nodes.

The real-process version with SIGKILL and SIGSTOP is tests/cluster/test_cluster_faults.py.
"""

from __future__ import annotations

import contextlib
import time

import pytest

pytest.importorskip("fastapi")

from neardup.cluster import (
    ClusterClient,
    ClusterConfig,
    NodeSpec,
    create_router,
    push_membership,
    rebalance,
)
from neardup.errors import ConfigError, IndexStateError, NotFoundError
from neardup.service import create_app
from neardup.service.client import Client
from neardup.service.config import ServiceConfig
from neardup.service.replication import VERSION_KEY, LeaseHeldError
from neardup.service.testing import free_port, serve_in_thread

TOKEN = "delete-secret"
VN = 64


def text(i: int) -> str:
    return " ".join(f"w{(i * 7919 + j * 104729) % 1_000_003}" for j in range(60))


class Nodes:
    """In-process nodes on fixed ports: one can be stopped and served again at its URL."""

    def __init__(self, tmp_path, n: int) -> None:
        self.tmp = tmp_path
        self.ports = [free_port() for _ in range(n)]
        self.stack = contextlib.ExitStack()
        self.running: dict[int, contextlib.ExitStack] = {}
        for i in range(n):
            self.start(i)

    def url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.ports[i]}"

    def start(self, i: int) -> None:
        s = contextlib.ExitStack()
        config = ServiceConfig(data_dir=self.tmp / f"n{i}", token=TOKEN)
        s.enter_context(serve_in_thread(create_app(config), port=self.ports[i]))
        self.running[i] = s

    def stop(self, i: int) -> None:
        self.running.pop(i).close()

    def close(self) -> None:
        for i in list(self.running):
            self.stop(i)

    def config(self, k: int | None = None, epoch: int = 0) -> ClusterConfig:
        k = len(self.ports) if k is None else k
        return ClusterConfig(
            tuple(NodeSpec(f"n{i}", self.url(i)) for i in range(k)), vnodes=VN, epoch=epoch
        )

    def holders(self, doc_id: str) -> set[int]:
        out = set()
        for i in self.running:
            with Client(self.url(i), token=TOKEN) as c, contextlib.suppress(NotFoundError):
                c.get(doc_id)
                out.add(i)
        return out

    def exported(self, i: int) -> set[str]:
        with Client(self.url(i), token=TOKEN) as c:
            return {d["id"] for d in c._request("GET", "/v1/export?limit=10000")["documents"]}


@pytest.fixture
def three(tmp_path):
    nodes = Nodes(tmp_path, 3)
    try:
        yield nodes
    finally:
        nodes.close()


def test_delete_while_a_replica_is_down_stays_deleted(three, tmp_path):
    path = tmp_path / "cluster.toml"
    three.config().save(path)
    with ClusterClient(path, token=TOKEN, down_seconds=0.2) as cc:
        ids = [f"d{i}" for i in range(60)]
        assert all(
            d.added for d in cc.insert([{"id": i, "text": text(k)} for k, i in enumerate(ids)])
        )
        on_n1 = [i for i in ids if "n1" in cc.targets(i)]
        three.stop(1)
        gone = on_n1[:15] + [i for i in ids if i not in on_n1][:5]
        for i in gone:
            cc.delete(i)  # acknowledged with 2 copies of the tombstone, a hint kept for n1
        assert cc.nodes.hint_count("n1") >= len(gone)
        # n1 comes back: before it serves a request it pulls its peers' tombstones
        three.start(1)
        with Client(three.url(1), token=TOKEN) as direct:
            for i in gone:
                with pytest.raises(NotFoundError):
                    direct.get(i)
        deadline = time.monotonic() + 20
        while cc.nodes.hint_count("n1") and time.monotonic() < deadline:
            time.sleep(0.1)  # the prober replays the hints (nothing left to do there)
        assert cc.nodes.hint_count("n1") == 0 and cc.is_up("n1")
        for i in gone:
            with pytest.raises(NotFoundError):
                cc.get(i)
            assert three.holders(i) == set()
        kept = [i for i in ids if i not in gone]
        assert all(cc.get(i)["id"] == i for i in kept)
        # a repair rebalance copies nothing deleted back
        report = rebalance(cc.config, token=TOKEN)
        assert report.complete
        assert all(three.holders(i) == set() for i in gone)
        assert all(three.holders(i) == {int(n[1:]) for n in cc.targets(i)} for i in kept)


def test_rebalance_deletes_stale_copies_and_reinsert_after_delete_is_a_new_version(three):
    cfg = three.config()
    # no hedging to a third node when a live one is slow: the test counts copies
    with ClusterClient(cfg, token=TOKEN, slow_after=10.0) as cc:
        cc.insert({"id": "x", "text": text(1)})
        cc.delete("x")
        with pytest.raises(NotFoundError):
            cc.delete("x")  # no copy anywhere: 404, the tombstone stays
        # a stale copy (as a node that missed the delete would hold), written past the cluster
        with Client(three.url(2), token=TOKEN) as c:
            c.insert({"id": "x", "text": text(1)})
        with pytest.raises(NotFoundError):
            cc.get("x")  # the tombstone wins over the stale copy, which is deleted on read
        assert three.holders("x") == set()
        with Client(three.url(0), token=TOKEN) as c:
            c.insert({"id": "x", "text": text(1)})
        report = rebalance(cfg, token=TOKEN)
        assert report.tombstoned == 1 and report.copied == 0
        assert three.holders("x") == set()
        # a hint or copy that is older than the tombstone is refused by the node
        with Client(three.url(0), token=TOKEN) as c:
            old = {"op": "put", "doc": {"id": "x", "text": text(1)}, "version": 5}
            r = c._request("POST", "/v1/cluster/ns/default/write", {"ops": [old]})
            assert r["results"] == ["deleted"]
        # re-inserting the id after the delete is a new document (a newer version)
        d = cc.check_and_insert({"id": "x", "text": text(2)})
        assert d.added
        assert cc.get("x")["text"] == text(2)
        assert VERSION_KEY not in (cc.get("x").get("metadata") or {})
        assert rebalance(cfg, token=TOKEN).copied == 0
        assert len(three.holders("x")) == 2


def test_a_client_on_the_old_ring_reloads_after_add_node(tmp_path):
    nodes = Nodes(tmp_path, 4)
    try:
        path = tmp_path / "cluster.toml"
        old = nodes.config(3)
        old.save(path)
        # no hedging on a loaded machine: a write hedged to a spare node (a node slower than
        # slow_after, not down) would leave extra copies, and this test is about the reload
        with ClusterClient(path, token=TOKEN, slow_after=10.0) as stale:
            stale.insert([{"id": f"a{i}", "text": text(i)} for i in range(40)])
            # add-node as the CLI does it: new file (epoch + 1), the nodes told, then rebalance
            new = old.with_node(NodeSpec("n3", nodes.url(3)))
            assert new.epoch == old.epoch + 1
            new.save(path)
            assert rebalance(new, previous=old, token=TOKEN).complete
            # the old client is refused by the nodes (stale epoch), reloads the file, retries
            stale.insert([{"id": f"b{i}", "text": text(100 + i)} for i in range(40)])
            assert stale.config.epoch == new.epoch
            with ClusterClient(new, token=TOKEN) as fresh:
                for i in [f"b{k}" for k in range(40)] + [f"a{k}" for k in range(40)]:
                    assert nodes.holders(i) == {int(n[1:]) for n in fresh.targets(i)}, i
        # a client built from a config object cannot reload: a clear error
        with pytest.raises(ConfigError, match="epoch 1 but this client's cluster config is at 0"):
            ClusterClient(old, token=TOKEN)
        with pytest.raises(ConfigError, match="refused the membership"):
            push_membership(old, token=TOKEN)  # an older epoch than the nodes' is refused
    finally:
        nodes.close()


def test_a_second_writer_is_refused_while_the_first_writes(three):
    cfg = three.config()
    with ClusterClient(cfg, token=TOKEN, lease_ttl=2.0) as first:
        first.insert({"id": "a", "text": text(1)})
        second = ClusterClient(cfg, token=TOKEN, lease_ttl=2.0)
        with second:
            with pytest.raises(LeaseHeldError, match="one writer per namespace") as exc:
                second.check_and_insert({"id": "b", "text": text(2)})
            assert isinstance(exc.value, IndexStateError)  # 409
            assert second.check({"id": "b", "text": text(1)}).duplicate  # reads need no lease
            first.close()  # gives the lease back
            assert second.check_and_insert({"id": "b", "text": text(2)}).added
    # behind routers: the second router answers 409 lease_held in the node's error shape
    with (
        serve_in_thread(create_router(cfg, token=TOKEN, lease_ttl=5.0)) as r1,
        serve_in_thread(create_router(cfg, token=TOKEN, lease_ttl=5.0)) as r2,
        Client(r1, token=TOKEN) as c1,
        Client(r2, token=TOKEN) as c2,
    ):
        assert c1.check_and_insert({"id": "c", "text": text(3)}).added
        with pytest.raises(IndexStateError, match="one writer per namespace") as exc:
            c2.check_and_insert({"id": "d", "text": text(4)})
        assert exc.value.status_code == 409  # type: ignore[attr-defined]


def test_hung_node_is_routed_around_without_waiting_for_its_timeout(three, tmp_path):
    import socket

    hang = socket.socket()
    hang.bind(("127.0.0.1", 0))
    hang.listen(64)
    try:
        cfg = ClusterConfig(
            (*three.config().nodes, NodeSpec("hang", f"http://127.0.0.1:{hang.getsockname()[1]}")),
            vnodes=VN,
        )
        # timeout 5 s: no write may wait for it (the lease and check do not need the hung
        # node, writes meant for it are hedged to the next node with a hint kept)
        with ClusterClient(cfg, token=TOKEN, timeout=5.0) as cc:
            worst = 0.0
            for i in range(12):
                t = time.perf_counter()
                assert cc.check_and_insert({"id": f"h{i}", "text": text(300 + i)}).added
                worst = max(worst, time.perf_counter() - t)
            assert worst < 1.5, worst
            assert not cc.is_up("hang")
            hinted = [f"h{i}" for i in range(12) if "hang" in cc.targets(f"h{i}")]
            assert cc.nodes.hint_count("hang") >= len(hinted) > 0
            # R copies on the live nodes (a third can appear where a live node was slower
            # than slow_after on a busy box: hedging is what this test wants from the client)
            assert all(len(three.holders(f"h{i}")) >= 2 for i in range(12))
    finally:
        hang.close()


def test_gather_asks_the_spare_nodes_when_an_asked_one_hangs() -> None:
    """A node asked first that hangs (SIGSTOP) is not waited for while another node, slow but
    not known down, could answer: past the hung node's slow limit the spare calls start, and the
    fan-out returns with them (the CI failure: writes waited out a whole pause when the lease or
    a check had asked the paused node and one other, and the third was suspect)."""
    import threading

    from neardup.cluster.config import ClusterConfig, NodeSpec
    from neardup.cluster.nodes import NodePool

    config = ClusterConfig(
        tuple(NodeSpec(n, f"http://127.0.0.1:9/{n}") for n in ("a", "b", "c")), vnodes=8
    )
    pool = NodePool(config, slow_after=0.05, probe_interval=60.0)
    hang = threading.Event()
    try:
        t0 = time.monotonic()
        answers, errors = pool.gather(
            {"a": lambda: "a", "b": lambda: hang.wait(30) and "b"},
            enough=lambda got: len(got) >= 2,
            spare={"c": lambda: "c"},
        )
        took = time.monotonic() - t0
        assert answers == {"a": "a", "c": "c"} and not errors
        assert took < 5.0, took  # not the hung node's 30 s
        # without spares it waits for the hung node (the answers would not be enough)
        hang.set()
        answers, _ = pool.gather(
            {"a": lambda: "a", "b": lambda: "b"}, enough=lambda got: len(got) >= 2
        )
        assert answers == {"a": "a", "b": "b"}
    finally:
        hang.set()
        pool.close()
