"""``benchmarks/peers_dedup.py``'s targets: speed-ups are taken against the fastest peer that
finished or was stopped at the time limit, never against one that failed (a peer that exits
at once is not the fastest peer)."""

from __future__ import annotations

import pytest
from doubles import benchmark_module


@pytest.fixture(scope="module")
def pd():
    with benchmark_module("peers_dedup") as module:
        yield module


def _run(wall: float, rc: int = 0, timed_out: bool = False) -> dict:
    return {"wall_s": wall, "cpu_s": wall, "rc": rc, "timed_out": timed_out}


def test_a_failed_peer_is_not_the_fastest(pd) -> None:
    runs = {
        "neardup": _run(10.0),
        "neardup-w1": _run(20.0),
        "datatrove": _run(0.5, rc=1),
        "text-dedup": _run(200.0),
        "datasketch": _run(600.0, rc=-9, timed_out=True),
    }
    t = pd.targets(runs)
    assert t["fastest_peer"] == "text-dedup"
    assert t["neardup_speedup"] == 20.0 and t["neardup_speedup_met"]
    assert t["neardup-w1_speedup"] == 10.0 and t["neardup-w1_speedup_met"]
    assert t["failed_peers"] == ["datatrove"]


def test_a_peer_stopped_at_the_limit_counts_with_its_limit(pd) -> None:
    runs = {"neardup": _run(100.0), "datasketch": _run(600.0, rc=-9, timed_out=True)}
    t = pd.targets(runs)
    assert t["fastest_peer"] == "datasketch" and t["fastest_peer_timed_out"]
    assert t["neardup_speedup"] == 6.0 and not t["neardup_speedup_met"]
    assert "failed_peers" not in t
