"""--engine spark (local[2]): the single-machine answer; skips without Java or pyspark."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from _distributed_common import (
    assert_same,
    distributed,
    incremental_runs_keep_one_runs,
    sample_slice,
    single_machine,
)

from neardup.rules.config import DedupConfig

pytest.importorskip("pyspark", reason="pip install pyspark for --engine spark")
if shutil.which("java") is None:
    pytest.skip("--engine spark needs Java 17+ (java is not on PATH)", allow_module_level=True)

from neardup.distributed import SparkEngine, run_dedup


@pytest.fixture(scope="session")
def spark_engine() -> Iterator[SparkEngine]:
    eng = SparkEngine(workers=2)
    yield eng
    eng.spark.stop()


@pytest.mark.parametrize(("files", "partitions", "keep"), [(1, 3, "first"), (2, 2, "longest")])
def test_spark_equals_single_machine(
    tmp_path: Path, spark_engine: SparkEngine, files: int, partitions: int, keep: str
) -> None:
    inputs = sample_slice(tmp_path, 300, files)
    cfg = DedupConfig(keep=keep)  # type: ignore[arg-type]
    res = run_dedup(
        inputs, str(tmp_path / "w"), engine=spark_engine, config=cfg, partitions=partitions
    )
    assert_same(distributed(res), single_machine(inputs, cfg))


def test_spark_incremental_runs_keep_what_one_run_over_the_concatenation_keeps(
    tmp_path: Path, spark_engine: SparkEngine
) -> None:
    """``neardup dedup DAY --save STORE --engine spark``, day after day (the command line's
    engine joins the session this module started): the kept documents of the runs are those
    of one keep-first run over the days together (issue 37)."""
    incremental_runs_keep_one_runs(tmp_path, sample_slice(tmp_path, 600, 2), "spark")
