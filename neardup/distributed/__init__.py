"""Batch dedup beyond one machine: engine-neutral steps over Arrow tables, run by thin Dask and
Spark adapters (or in-process), with the single-machine decisions; and the paper's batch mode
(:func:`batch_query`). See docs/distributed.md."""

from __future__ import annotations

from .batch import batch_query
from .engines import DaskEngine, Engine, LocalEngine, SparkEngine, make_engine
from .run import DistributedResult, run_dedup

__all__ = [
    "DaskEngine",
    "DistributedResult",
    "Engine",
    "LocalEngine",
    "SparkEngine",
    "batch_query",
    "make_engine",
    "run_dedup",
]
