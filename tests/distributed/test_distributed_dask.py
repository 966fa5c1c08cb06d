"""--engine dask: the single-machine answer on a 2-worker LocalCluster, and a worker killed
mid-job (its task is rerun elsewhere; the output is still complete and duplicate-free)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _distributed_common import (
    assert_same,
    distributed,
    incremental_runs_keep_one_runs,
    sample_slice,
    single_machine,
)

from neardup.rules.config import DedupConfig

pytest.importorskip("dask.distributed", reason="pip install 'dask[distributed]' for --engine dask")

from neardup.distributed import DaskEngine, run_dedup


@pytest.fixture(scope="module")
def dask_engine() -> Iterator[DaskEngine]:
    eng = DaskEngine(workers=2)
    yield eng
    eng.close()


def test_dask_equals_single_machine(tmp_path: Path, dask_engine: DaskEngine) -> None:
    inputs = sample_slice(tmp_path, 600, 2)
    cfg = DedupConfig()
    res = run_dedup(inputs, str(tmp_path / "w"), engine=dask_engine, config=cfg, partitions=4)
    assert_same(distributed(res), single_machine(inputs, cfg))


def test_dask_workers_read_file_urls(tmp_path: Path, dask_engine: DaskEngine) -> None:
    # each task opens its own input: the URL is resolved in the worker process
    inputs = sample_slice(tmp_path, 300, 2)
    urls = [Path(p).resolve().as_uri() for p in inputs]
    res = run_dedup(urls, str(tmp_path / "w"), engine=dask_engine, partitions=3)
    assert_same(distributed(res), single_machine(inputs, DedupConfig()))


def _die_once(flag: str, fn: Any, *args: Any) -> Any:
    """Kill this worker process the first time any task runs (the flag file says it did)."""
    try:
        fd = os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return fn(*args)
    os.close(fd)
    os._exit(1)


class _Killing(DaskEngine):
    def __init__(self, inner: DaskEngine, flag: str, step: str) -> None:
        self.client, self.cluster, self.retries = inner.client, None, inner.retries
        self.flag, self.step = flag, step

    def map(self, fn: Any, args: Any) -> list[Any]:
        if fn.__name__ != self.step:
            return super().map(fn, args)
        return super().map(_die_once, [(self.flag, fn, *a) for a in args])

    def close(self) -> None:
        return None


def test_killed_worker_is_retried_and_output_complete(
    tmp_path: Path, dask_engine: DaskEngine
) -> None:
    import cloudpickle

    cloudpickle.register_pickle_by_value(__import__(__name__))  # workers cannot import tests/
    inputs = sample_slice(tmp_path, 300)
    flag = str(tmp_path / "killed")
    eng = _Killing(dask_engine, flag, "step_verify")
    res = run_dedup(inputs, str(tmp_path / "w"), engine=eng, partitions=3)
    assert os.path.exists(flag)  # a worker did die inside the verify step
    got = distributed(res)
    assert_same(got, single_machine(inputs, DedupConfig()))
    assert len(set(got["pairs"])) == len(got["pairs"])
    dask_engine.client.wait_for_workers(2, timeout=60)


def test_dask_incremental_runs_keep_what_one_run_over_the_concatenation_keeps(
    tmp_path: Path,
) -> None:
    """``neardup dedup DAY --save STORE --engine dask``, day after day: the kept documents of
    the runs are those of one keep-first run over the days together (issue 37)."""
    incremental_runs_keep_one_runs(tmp_path, sample_slice(tmp_path, 900, 3), "dask")
