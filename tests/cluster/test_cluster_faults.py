"""The cluster under faults, with real processes (issue 34): three ``neardup serve`` nodes
(R = 2) and a ``neardup cluster router`` on loopback; writers send near-duplicate pairs,
batches and deletes through the router while a node is SIGKILLed and restarted and another is
SIGSTOPped and resumed. Then the history is checked against what every node holds:

* no acknowledged insert lost, no acknowledged delete readable (on any node, or through the
  router), exactly one kept of every near-duplicate pair sent in one batch;
* writes while a node is paused (3 s) are routed around it: p99 <= 2 s, max <= 2.5 s;
* the router's threads and memory stay flat over 300 unknown namespaces.

``benchmarks/faults_cluster.py`` runs the same history at larger counts.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from neardup.cluster.testing import LocalCluster, Workload, check_history  # noqa: E402


def p99(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.99 * len(xs)))]


def test_kill_pause_and_restart_under_writes_and_deletes(tmp_path):
    cluster = LocalCluster(tmp_path, 3, router_args=["--timeout", "5"])
    cluster.start()
    try:
        work = Workload(cluster.router.url, cluster.token, threads=2, batch=6)
        work.start()
        time.sleep(2.0)
        cluster.kill(1)  # SIGKILL: no flush, no goodbye; writes and deletes go on without it
        time.sleep(3.0)
        cluster.restart(1)  # it pulls its peers' tombstones before it serves
        assert cluster.wait_settled(40), cluster.health()
        time.sleep(1.0)
        t0 = time.time()
        cluster.pause(2)  # SIGSTOP: connections accepted, nothing answered
        time.sleep(3.0)
        t1 = time.time()
        cluster.resume(2)
        time.sleep(1.5)
        history = work.stop()
        assert cluster.wait_settled(60), cluster.health()
        result = check_history(cluster, history)

        assert result["acknowledged_operations"] >= 150, result
        assert result["acknowledged_deletes"] >= 5, result
        assert result["inserts_lost"] == 0, result
        assert result["deletes_back_on_a_node"] == 0, result
        assert result["deletes_back_through_router"] == 0, result
        assert result["pairs"] >= 20, result
        assert result["pairs_kept_both_answered"] == 0, result
        assert result["pairs_kept_both_stored"] == 0, result
        assert result["pairs_kept_none"] == 0, result

        # routed around, never waited out: the pause lasts 3 s and a node's timeout is 5 s. A
        # late node costs its slow limit (up to 1 s when the nodes answer slowly: 3 servers, a
        # router and the writers share this machine's cores with the suite) and then the answer
        # of another node; benchmarks/faults_cluster.py measures the unloaded figures
        paused = history.latencies(t0, t1)
        assert len(paused) >= 5, len(paused)
        assert p99(paused) <= 2.0 and max(paused) <= 2.5, sorted(paused)[-5:]

        # the router is bounded: 300 unknown namespaces leave no threads or memory behind
        body = {"id": "a", "text": "hello there"}
        auth = {"Authorization": f"Bearer {cluster.token}"}
        with httpx.Client(base_url=cluster.router.url, timeout=30, headers=auth) as h:
            for i in range(20):  # warm the request path
                h.post(f"/v1/ns/warm-{i}/check", json=body)
            before = cluster.router.stats()
            for i in range(300):
                r = h.post(f"/v1/ns/unknown-{i}/check", json=body)
                assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
            after = cluster.router.stats()
        assert after["threads"] <= before["threads"] + 2, (before, after)
        assert after["rss_bytes"] - before["rss_bytes"] < 16 * 2**20, (before, after)
        assert after["fds"] <= before["fds"] + 4, (before, after)
    finally:
        cluster.close()
