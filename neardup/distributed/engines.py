"""Thin engine adapters: each runs a list of independent tasks and returns their results in
order. All the logic is in the steps; an engine only places tasks on workers and retries the
ones whose worker died (a task is idempotent: it rewrites the same files, see ``_store``).

* ``local``: in this process, one task after another.
* ``dask``: ``dask.distributed``; a ``LocalCluster`` (one single-threaded worker process per
  core by default) or the scheduler at ``scheduler`` (``tcp://HOST:PORT``). Failed tasks are
  retried (``retries``), a killed worker's tasks are rescheduled by the scheduler.
* ``spark``: ``pyspark``; ``local[N, retries+1]`` by default (local mode allows no task retry
  unless asked), a master URL (``spark://HOST:7077``, ``yarn``) otherwise. Each task is one
  Spark task (an RDD of task numbers, one per partition).

On a cluster the work directory must be storage every worker sees (a shared file system).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ConfigError, MissingDependencyError

__all__ = ["DaskEngine", "Engine", "LocalEngine", "SparkEngine", "make_engine"]

Task = Callable[..., Any]


class Engine:
    """Runs independent tasks; ``name``; ``close()``."""

    name = "engine"

    def map(self, fn: Task, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        raise NotImplementedError

    def close(self) -> None:
        return None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalEngine(Engine):
    name = "local"

    def map(self, fn: Task, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        return [fn(*a) for a in args]


class DaskEngine(Engine):
    """``dask.distributed`` client: a LocalCluster of ``workers`` processes, or ``scheduler``."""

    name = "dask"

    def __init__(
        self, scheduler: str | None = None, workers: int | None = None, retries: int = 3
    ) -> None:
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError as exc:
            raise MissingDependencyError(
                "--engine dask needs dask.distributed: pip install 'neardup[dask]' "
                "(or pip install 'dask[distributed]' pyarrow)"
            ) from exc
        self.retries = retries
        self.cluster = None
        if scheduler:
            self.client = Client(scheduler)
        else:
            self.cluster = LocalCluster(
                n_workers=workers or os.cpu_count() or 1,
                threads_per_worker=1,
                processes=True,
                # the scheduler serves HTTP (metrics) even without a dashboard, on 8787 unless
                # told: a second job (or a test beside one) would warn and move. A free port on
                # loopback only.
                dashboard_address="127.0.0.1:0",
            )
            self.client = Client(self.cluster)

    def map(self, fn: Task, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        if not args:
            return []
        futures = [
            self.client.submit(
                fn,
                *a,
                pure=False,
                retries=self.retries,
                key=f"{fn.__name__}-{i}-{os.urandom(4).hex()}",
            )
            for i, a in enumerate(args)
        ]
        return list(self.client.gather(futures))

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def _spark_call(item: tuple[int, Task, tuple[Any, ...]]) -> tuple[int, Any]:
    i, fn, a = item
    return i, fn(*a)


class SparkEngine(Engine):
    """A SparkSession: ``local[workers, retries + 1]`` by default, else ``master``."""

    name = "spark"

    def __init__(
        self, master: str | None = None, workers: int | None = None, retries: int = 3
    ) -> None:
        try:
            from pyspark.sql import SparkSession
        except ImportError as exc:
            raise MissingDependencyError(
                "--engine spark needs pyspark (and Java 17+): pip install 'neardup[spark]'"
            ) from exc
        # workers run this interpreter (its packages) unless the cluster says otherwise
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        master = master or f"local[{workers or os.cpu_count() or 1},{retries + 1}]"
        b = SparkSession.builder.master(master).appName("neardup-dedup")
        b = (
            b.config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.task.maxFailures", retries + 1)
        )
        try:
            self.spark = b.getOrCreate()
        except Exception as exc:  # no Java, or the master is unreachable
            raise ConfigError(f"cannot start Spark (master {master!r}): {exc}") from exc
        self.sc = self.spark.sparkContext

    def map(self, fn: Task, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        if not args:
            return []
        items = [(i, fn, a) for i, a in enumerate(args)]
        out = self.sc.parallelize(items, len(items)).map(_spark_call).collect()
        return [r for _, r in sorted(out, key=lambda t: t[0])]

    def close(self) -> None:
        # a session shared by the process (tests) is stopped by its owner
        return None


def make_engine(
    name: str,
    *,
    scheduler: str | None = None,
    master: str | None = None,
    workers: int | None = None,
) -> Engine:
    """The engine called ``name`` (``local``, ``dask`` or ``spark``)."""
    if name == "local":
        return LocalEngine()
    if name == "dask":
        return DaskEngine(scheduler, workers)
    if name == "spark":
        return SparkEngine(master, workers)
    raise ConfigError(f"engine must be 'local', 'dask' or 'spark', got {name!r}")
