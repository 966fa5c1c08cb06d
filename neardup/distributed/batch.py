"""The paper's batch mode (Manku, Jain & Das Sarma, WWW 2007, section 3.2): permuted tables
over the (small) query set, the (large) stored set streamed through them in chunks, the matches
merged, de-duplicated and sorted. On a cluster each mapper streams its share of the stored
set through its own copy of the tables; the function is that mapper's work."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError
from ._batch_kernels import QueryTables, build_tables, probe

__all__ = ["QueryTables", "batch_query", "batch_tables"]

#: stored fingerprints probed per call of the tables
CHUNK = 1 << 20


def _check_k(max_distance: object) -> int:
    if (
        isinstance(max_distance, bool)
        or not isinstance(max_distance, int)
        or not 0 <= max_distance <= 16
    ):
        raise ConfigError(f"max_distance must be an int in [0, 16], got {max_distance!r}")
    return max_distance


def batch_tables(queries: npt.ArrayLike, max_distance: int = 3) -> QueryTables:
    """The tables over ``queries`` (uint64) that :func:`batch_query` probes: build them once
    and pass them as its ``queries`` when the stored set arrives in several calls."""
    return build_tables(np.asarray(queries, dtype=np.uint64), _check_k(max_distance))


def batch_query(
    stored: npt.ArrayLike | Iterable[npt.ArrayLike],
    queries: npt.ArrayLike | QueryTables,
    max_distance: int = 3,
    *,
    stored_offset: int = 0,
    threads: int | None = 1,
    chunk: int = CHUNK,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """Every (stored, query) pair within ``max_distance`` bits: ``(stored_pos, query_pos,
    distance)``, sorted by (stored, query), exact (equals brute force, tested).

    ``stored`` is a uint64 array or an iterable of uint64 chunks (positions count on across
    chunks from ``stored_offset``). Block tables are built once over ``queries`` (64-bit; or
    pass tables from :func:`batch_tables`); each
    chunk of ``chunk`` stored fingerprints is streamed through them in one kernel call
    (:mod:`neardup.distributed._batch_kernels`), split over ``threads`` threads (``None``: one
    per CPU).
    """
    _check_k(max_distance)
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ConfigError(f"chunk must be a positive int, got {chunk!r}")
    n_threads = threads if threads is not None else (os.cpu_count() or 1)
    if isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1:
        raise ConfigError(f"threads must be a positive int or None, got {threads!r}")
    if isinstance(queries, QueryTables):
        if queries.max_distance != max_distance:
            raise ConfigError(
                f"the tables were built for max_distance {queries.max_distance}, not "
                f"{max_distance}: build them with batch_tables(queries, {max_distance})"
            )
        tables = queries
    else:
        tables = build_tables(
            np.ascontiguousarray(queries, dtype=np.uint64).reshape(-1), max_distance
        )
    chunks: Iterable[Any] = [stored] if isinstance(stored, np.ndarray) else cast(Any, stored)
    out_s, out_q, out_d = [], [], []
    base = int(stored_offset)
    pool = ThreadPoolExecutor(n_threads) if n_threads > 1 else None
    try:
        for c in chunks:
            arr = np.ascontiguousarray(c, dtype=np.uint64).reshape(-1)
            if tables.size == 0:
                base += arr.size
                continue
            for s in range(0, arr.size, chunk):
                part = arr[s : s + chunk]
                if pool is None or part.size < 4096:
                    res = [probe(part, tables, base + s)]
                else:  # the kernel releases the GIL: one slice of the chunk per thread
                    bounds = np.linspace(0, part.size, n_threads + 1).astype(np.int64)
                    starts = [int(x) for x in bounds]
                    futs = [
                        pool.submit(probe, part[lo:hi], tables, base + s + lo)
                        for lo, hi in itertools.pairwise(starts)
                    ]
                    res = [f.result() for f in futs]
                for a, b, d in res:
                    out_s.append(a)
                    out_q.append(b)
                    out_d.append(d)
            base += arr.size
    finally:
        if pool is not None:
            pool.shutdown()
    if not out_s:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32)
    sp, qp, dd = np.concatenate(out_s), np.concatenate(out_q), np.concatenate(out_d)
    o = np.lexsort((qp, sp))
    return sp[o], qp[o], dd[o]
