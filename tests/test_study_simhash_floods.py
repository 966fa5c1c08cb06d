"""benchmarks/study_simhash_floods.py: its pair search against a distance matrix, and a small
run end to end (the generated rows always; the dev rows where the dev set is)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from doubles import benchmark_module


@pytest.fixture(scope="module")
def study() -> Iterator[ModuleType]:
    with benchmark_module("study_simhash_floods") as module:
        yield module


def test_close_pairs_are_the_distance_matrix_s(study: ModuleType) -> None:
    from neardup.fingerprint.distance import hamming_cdist

    rng = np.random.default_rng(3)
    base = rng.integers(0, 2**63, size=40, dtype=np.uint64)
    # neighbours 0-5 bits away, so that every distance up to the limit occurs
    flips = [np.uint64(sum(1 << int(b) for b in rng.choice(64, k, replace=False))) for k in range(6)]  # fmt: skip
    fps = np.concatenate([base, base[:30] ^ np.array([flips[i % 6] for i in range(30)], np.uint64)])  # fmt: skip
    dist = hamming_cdist(fps, fps)
    want = {(i, j, int(dist[i, j])) for i in range(len(fps)) for j in range(i + 1, len(fps)) if dist[i, j] <= 3}  # fmt: skip
    got = study.close_pairs(fps, 3)
    assert set(got) == want and len(got) == len(want)
    assert {d for _, _, d in got} == {0, 1, 2, 3}


def test_runs_end_to_end(study: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "floods.json"
    assert study.main(["--per-band", "150", "--data", str(tmp_path / "no-dev"), "--out", str(out)]) == 0  # fmt: skip
    res = json.loads(out.read_text())
    rows = {(r["source"], r["chars"]): r for r in res["rows"]}
    assert set(rows) == {("generated", "200-1000"), ("generated", "1000-3000"), ("generated", "3000-")}  # fmt: skip
    for r in rows.values():
        assert r["texts"] == 150 and r["pairs"] == 150 * 149 // 2
        assert 0 <= r["chance_pairs"] <= r["unlabelled_within"] <= r["within_distance"]
