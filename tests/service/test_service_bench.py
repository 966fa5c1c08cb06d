"""The service benchmark's parsers of what the server reports (``benchmarks/bench_service.py``):
stage histograms from ``/metrics`` whatever order prometheus_client writes the labels in (with
``le`` first the old pattern matched no bucket, and every stage was silently left out), and the
start-up lines of the server's log."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench() -> Any:
    spec = importlib.util.spec_from_file_location(
        "bench_service_under_test", ROOT / "benchmarks" / "bench_service.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _page(le_first: bool, counts: tuple[int, int, int], total: float) -> str:
    lines = []
    for le, c in zip(("0.0005", "0.001", "+Inf"), counts, strict=True):
        labels = f'le="{le}",stage="prepare"' if le_first else f'stage="prepare",le="{le}"'
        lines.append(f"neardup_request_stage_seconds_bucket{{{labels}}} {c}.0")
    lines.append(f'neardup_request_stage_seconds_count{{stage="prepare"}} {counts[-1]}.0')
    lines.append(f'neardup_request_stage_seconds_sum{{stage="prepare"}} {total}')
    lines.append('neardup_request_stage_seconds_created{stage="prepare"} 1.7e9')
    lines.append('neardup_event_loop_lag_seconds_bucket{le="0.001"} 3.0')
    lines.append('neardup_event_loop_lag_seconds_bucket{le="+Inf"} 4.0')
    lines.append("neardup_event_loop_lag_seconds_sum 0.01")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("le_first", [True, False])
def test_stage_histograms_parse_in_either_label_order(bench: Any, le_first: bool) -> None:
    before = bench.parse_stage_metrics(_page(le_first, (1, 2, 2), 0.001))
    after = bench.parse_stage_metrics(_page(le_first, (3, 10, 12), 0.011))
    assert after["prepare"] == ([(0.0005, 3.0), (0.001, 10.0), (float("inf"), 12.0)], 0.011)
    assert after["loop_lag"] == ([(0.001, 3.0), (float("inf"), 4.0)], 0.01)
    row = bench.stage_summary(before, after)["prepare"]
    # 10 requests between the snapshots, 0.01 s in all; 2 under 0.5 ms, 8 under 1 ms
    assert row["count"] == 10
    assert row["mean_ms"] == pytest.approx(1.0)
    assert row["p50_le_ms"] == 1.0
    assert row["p99_le_ms"] == float("inf")


def test_startup_log_lines(bench: Any) -> None:
    log = (
        "2026-11-27 07:44:09,722 INFO neardup.store: opened store /d/namespaces/default in "
        "20.36 s: 1235825 documents, 2 segments, 92208 log records replayed, RSS 284 MiB\n"
        "2026-11-27 07:44:34,428 INFO neardup.service: opened /d in 35.16 s: namespaces "
        "default, 1235825 documents, RSS 383.7 MiB (pid 19774)\n"
    )
    assert bench.startup_log(log) == {
        "store_open_s": 20.36,
        "segments": 2,
        "log_records_replayed": 92208,
        "namespaces_open_s": 35.16,
    }
    assert bench.startup_log("") == {}
