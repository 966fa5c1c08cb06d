"""The paper's batch mode (Manku, Jain & Das Sarma, WWW 2007, section 3.2): the batch-mode join.
Permuted tables over the (small) query set, the (large) stored set streamed through them in
chunks, the matches merged, de-duplicated and sorted. On a cluster each mapper streams its
share of the stored set through its own copy of the tables; :func:`batch_query` is that
mapper's work (``neardup batch-query``). The probe kernel is :mod:`neardup.index._batch_kernels`,
its plain-Python twin :func:`neardup.index.reference.probe_reference`."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, cast

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError
from ._batch_kernels import QueryTables, build_tables, probe
from .hamming_index import HammingIndex

__all__ = ["IndexTables", "QueryTables", "batch_query", "batch_tables", "choose_method"]

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


#: above this many expected candidate compares per stored fingerprint (all blocks together) the
#: pigeonhole blocks are too short for the query set and the general index's tables win; against
#: 1 M queries the crossover (`benchmarks/bench_distributed.py --k-sweep`) lies between k = 5
#: (about 5,900 compares) and k = 6 (about 13,700)
MAX_BLOCK_COMPARES = 8000


def choose_method(n_queries: int, max_distance: int) -> Literal["blocks", "index"]:
    """``"blocks"`` (the batch kernel) unless its blocks are so short that each stored
    fingerprint would be compared with more than :data:`MAX_BLOCK_COMPARES` queries."""
    blocks = max_distance + 1
    compares = blocks * n_queries / 2.0 ** (64 // blocks)
    return "index" if compares > MAX_BLOCK_COMPARES else "blocks"


class IndexTables:
    """The queries in a :class:`neardup.HammingIndex` (planned tables with radii), for the
    distances where the pigeonhole blocks are too short (:func:`choose_method`)."""

    def __init__(self, queries: npt.NDArray[np.uint64], max_distance: int, threads: int) -> None:
        self.max_distance = max_distance
        self.size = int(queries.size)
        self.index = HammingIndex(
            64, max_distance, expected_size=max(queries.size, 1), threads=threads
        )
        if queries.size:
            self.index.add(queries)

    def probe(
        self, part: npt.NDArray[np.uint64], base: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        lims, ids, d = self.index.search(part, self.max_distance)
        pos = np.repeat(np.arange(part.size, dtype=np.int64) + base, np.diff(lims))
        return pos, ids.astype(np.int64), d.astype(np.int32)


def batch_tables(
    queries: npt.ArrayLike,
    max_distance: int = 3,
    *,
    method: Literal["auto", "blocks", "index"] = "auto",
    threads: int = 1,
) -> QueryTables | IndexTables:
    """The tables over ``queries`` (uint64) that :func:`batch_query` probes: build them once
    and pass them as its ``queries`` when the stored set arrives in several calls. ``method``
    ``"auto"`` takes :func:`choose_method`'s choice; ``threads`` is for the index's search."""
    k = _check_k(max_distance)
    if method not in ("auto", "blocks", "index"):
        raise ConfigError(f"method must be 'auto', 'blocks' or 'index', got {method!r}")
    q = np.ascontiguousarray(queries, dtype=np.uint64).reshape(-1)
    if method == "auto":
        method = choose_method(q.size, k)
    if method == "index":
        return IndexTables(q, k, threads)
    return build_tables(q, k)


def batch_query(
    stored: npt.ArrayLike | Iterable[npt.ArrayLike],
    queries: npt.ArrayLike | QueryTables | IndexTables,
    max_distance: int = 3,
    *,
    stored_offset: int = 0,
    threads: int | None = 1,
    chunk: int = CHUNK,
    method: Literal["auto", "blocks", "index"] = "auto",
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """Every (stored, query) pair within ``max_distance`` bits: ``(stored_pos, query_pos,
    distance)``, sorted by (stored, query), exact (equals brute force, tested).

    ``stored`` is a uint64 array or an iterable of uint64 chunks (positions count on across
    chunks from ``stored_offset``). Block tables are built once over ``queries`` (64-bit; or
    pass tables from :func:`batch_tables`); each
    chunk of ``chunk`` stored fingerprints is streamed through them in one kernel call
    (:mod:`neardup.index._batch_kernels`), split over ``threads`` threads (``None``: one
    per CPU). Where the blocks are too short for the query set (large ``max_distance``,
    :func:`choose_method`) the queries go into a :class:`neardup.HammingIndex` instead
    (``method`` forces either).
    """
    _check_k(max_distance)
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ConfigError(f"chunk must be a positive int, got {chunk!r}")
    n_threads = threads if threads is not None else (os.cpu_count() or 1)
    if isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1:
        raise ConfigError(f"threads must be a positive int or None, got {threads!r}")
    if isinstance(queries, (QueryTables, IndexTables)):
        if queries.max_distance != max_distance:
            raise ConfigError(
                f"the tables were built for max_distance {queries.max_distance}, not "
                f"{max_distance}: build them with batch_tables(queries, {max_distance})"
            )
        tables = queries
    else:
        tables = batch_tables(queries, max_distance, method=method, threads=n_threads)
    chunks: Iterable[Any] = [stored] if isinstance(stored, np.ndarray) else cast(Any, stored)
    out_s, out_q, out_d = [], [], []
    base = int(stored_offset)
    pool = (
        ThreadPoolExecutor(n_threads) if n_threads > 1 and isinstance(tables, QueryTables) else None
    )
    try:
        for c in chunks:
            arr = np.ascontiguousarray(c, dtype=np.uint64).reshape(-1)
            if tables.size == 0:
                base += arr.size
                continue
            for s in range(0, arr.size, chunk):
                part = arr[s : s + chunk]
                if isinstance(tables, IndexTables):  # threads inside its search
                    res = [tables.probe(part, base + s)]
                elif pool is None or part.size < 4096:
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
