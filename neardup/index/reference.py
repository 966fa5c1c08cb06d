"""Pure NumPy brute force: the reference every fast path of the index is tested against.

Set ``NEARDUP_REFERENCE=index`` to make :class:`~neardup.index.HammingIndex` answer every
search with these functions (slow, but obviously right).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ..fingerprint.distance import as_fingerprints

__all__ = ["all_pairs_reference", "search_reference"]


def _dist_block(q: np.ndarray, f: np.ndarray) -> npt.NDArray[np.int32]:
    x = np.bitwise_count(q[:, None] ^ f[None, :])
    if x.ndim == 3:
        return x.sum(axis=-1, dtype=np.int32)
    return x.astype(np.int32)


def search_reference(
    fingerprints: np.ndarray,
    ids: np.ndarray,
    queries: np.ndarray,
    max_distance: int,
    *,
    block: int = 256,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """Brute-force range search with the index's output contract.

    Returns ``(lims, ids, distances)``: results of query ``i`` are
    ``ids[lims[i]:lims[i+1]]``, sorted by (distance, id).
    """
    f = as_fingerprints(fingerprints)
    q = as_fingerprints(queries, name="queries")
    ids = np.asarray(ids, dtype=np.int64)
    lims = [0]
    out_i: list[np.ndarray] = []
    out_d: list[np.ndarray] = []
    for s in range(0, len(q), block):
        d = (
            _dist_block(q[s : s + block], f)
            if len(f)
            else np.zeros((len(q[s : s + block]), 0), np.int32)
        )
        for row in d:
            hit = np.nonzero(row <= max_distance)[0]
            hid, hd = ids[hit], row[hit]
            o = np.lexsort((hid, hd))
            out_i.append(hid[o])
            out_d.append(hd[o].astype(np.int32))
            lims.append(lims[-1] + len(hit))
    return (
        np.asarray(lims, dtype=np.int64),
        np.concatenate(out_i) if out_i else np.empty(0, np.int64),
        np.concatenate(out_d) if out_d else np.empty(0, np.int32),
    )


def all_pairs_reference(
    fingerprints: np.ndarray, max_distance: int, *, block: int = 256
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """Every pair of positions ``a < b`` within ``max_distance``, sorted by (a, b)."""
    f = as_fingerprints(fingerprints)
    A: list[np.ndarray] = []
    B: list[np.ndarray] = []
    D: list[np.ndarray] = []
    for s in range(0, len(f), block):
        d = _dist_block(f[s : s + block], f)
        a, b = np.nonzero(d <= max_distance)
        a = a + s
        keep = a < b
        A.append(a[keep])
        B.append(b[keep])
        D.append(d[a[keep] - s, b[keep]])
    if not A:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int32)
    a, b, d = np.concatenate(A), np.concatenate(B), np.concatenate(D)
    o = np.lexsort((b, a))
    return a[o].astype(np.int64), b[o].astype(np.int64), d[o].astype(np.int32)
