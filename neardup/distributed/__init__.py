"""Batch dedup beyond one machine: engine-neutral steps over Arrow tables, run by thin Dask and
Spark adapters (or in-process), a driver over the single machine's rules
(:mod:`neardup.rules`). The paper's batch mode, a mapper's work, is
:func:`neardup.index.batch_query`. See docs/distributed.md."""

from __future__ import annotations

from .engines import DaskEngine, Engine, LocalEngine, SparkEngine, make_engine
from .run import DistributedResult, run_dedup

__all__ = [
    "DaskEngine",
    "DistributedResult",
    "Engine",
    "LocalEngine",
    "SparkEngine",
    "make_engine",
    "run_dedup",
]
