"""The paper's batch mode (Manku, Jain & Das Sarma, WWW 2007, section 3.2): permuted tables
over the (small) query set, the (large) stored set streamed through them in chunks, the matches
merged, de-duplicated and sorted. On a cluster each mapper streams its share of the stored
set through its own copy of the tables; the function is that mapper's work."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError

__all__ = ["batch_query"]

#: stored fingerprints probed per call of the tables
CHUNK = 1 << 20


def batch_query(
    stored: npt.ArrayLike | Iterable[npt.ArrayLike],
    queries: npt.ArrayLike,
    max_distance: int = 3,
    *,
    stored_offset: int = 0,
    threads: int | None = 1,
    chunk: int = CHUNK,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """Every (stored, query) pair within ``max_distance`` bits: ``(stored_pos, query_pos,
    distance)``, sorted by (stored, query), exact (equals brute force, tested).

    ``stored`` is a uint64 array or an iterable of uint64 chunks (positions count on across
    chunks from ``stored_offset``); the tables (:class:`neardup.HammingIndex`) are built once over
    ``queries`` (64-bit), and each chunk of ``chunk`` stored fingerprints is probed against them.
    """
    from ..index import HammingIndex

    if (
        isinstance(max_distance, bool)
        or not isinstance(max_distance, int)
        or not 0 <= max_distance <= 16
    ):
        raise ConfigError(f"max_distance must be an int in [0, 16], got {max_distance!r}")
    q = np.ascontiguousarray(queries, dtype=np.uint64).reshape(-1)
    index = HammingIndex(64, max_distance, expected_size=max(q.size, 1), threads=threads)
    if q.size:
        index.add(q)
    chunks: Iterable[Any] = [stored] if isinstance(stored, np.ndarray) else stored
    out_s, out_q, out_d = [], [], []
    base = int(stored_offset)
    for c in chunks:
        arr = np.ascontiguousarray(c, dtype=np.uint64).reshape(-1)
        for s in range(0, arr.size, chunk):
            part = arr[s : s + chunk]
            if q.size:
                lims, ids, d = index.search(part, max_distance)
                counts = np.diff(lims)
                out_s.append(np.repeat(np.arange(part.size, dtype=np.int64) + base + s, counts))
                out_q.append(ids.astype(np.int64))
                out_d.append(d.astype(np.int32))
        base += arr.size
    if not out_s:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32)
    sp, qp, dd = np.concatenate(out_s), np.concatenate(out_q), np.concatenate(out_d)
    o = np.lexsort((qp, sp))
    return sp[o], qp[o], dd[o]
