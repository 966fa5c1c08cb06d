"""Union-find clustering of matched pairs.

Clusters are the connected components of the "is a near-duplicate of" graph. Each cluster is
represented by its member with the smallest position (input order), so cluster labels do not
depend on the order the pairs arrive in.

Examples
--------
>>> import numpy as np
>>> connected_components(5, np.array([0, 3]), np.array([2, 4])).tolist()
[0, 1, 0, 3, 3]
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .errors import InputError

__all__ = ["UnionFind", "cluster_ids", "connected_components", "connected_components_reference"]


class UnionFind:
    """Disjoint sets over ``0..n-1`` with path halving; the root is always the smallest member.

    >>> uf = UnionFind(4)
    >>> _ = uf.union(3, 1); _ = uf.union(1, 2)
    >>> uf.find(2)
    1
    """

    def __init__(self, n: int) -> None:
        if n < 0:
            raise InputError(f"UnionFind size must be >= 0, got {n}")
        self.parent = list(range(n))

    def find(self, x: int) -> int:
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> int:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return ra
        if rb < ra:
            ra, rb = rb, ra
        self.parent[rb] = ra
        return ra


def _check(n: int, a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> None:
    if a.shape != b.shape or a.ndim != 1:
        raise InputError(
            f"pair arrays must be 1-d and equal length, got shapes {a.shape} and {b.shape}"
        )
    if a.size and (min(int(a.min()), int(b.min())) < 0 or max(int(a.max()), int(b.max())) >= n):
        raise InputError(f"pair positions must be in [0, {n}); got values outside that range")


def connected_components_reference(
    n: int, a: npt.ArrayLike, b: npt.ArrayLike
) -> npt.NDArray[np.int64]:
    """Pure-Python reference of :func:`connected_components`."""
    aa = np.asarray(a, dtype=np.int64)
    bb = np.asarray(b, dtype=np.int64)
    _check(n, aa, bb)
    uf = UnionFind(n)
    for x, y in zip(aa.tolist(), bb.tolist(), strict=True):
        uf.union(x, y)
    return np.array([uf.find(i) for i in range(n)], dtype=np.int64)


def connected_components(n: int, a: npt.ArrayLike, b: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Root (smallest member position) of each of ``n`` items after joining every pair.

    Vectorised min-label propagation with pointer jumping; agrees with
    :func:`connected_components_reference`.

    Parameters
    ----------
    n : int
        Number of items.
    a, b : array-like of int64, shape (m,)
        Pair endpoints (positions).

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
    """
    aa = np.asarray(a, dtype=np.int64).ravel()
    bb = np.asarray(b, dtype=np.int64).ravel()
    _check(n, aa, bb)
    label = np.arange(n, dtype=np.int64)
    if aa.size == 0:
        return label
    while True:
        la, lb = label[aa], label[bb]
        m = np.minimum(la, lb)
        new = label.copy()
        np.minimum.at(new, la, m)
        np.minimum.at(new, lb, m)
        # pointer jumping: follow labels to their fixed point
        while True:
            nxt = new[new]
            if np.array_equal(nxt, new):
                break
            new = nxt
        if np.array_equal(new, label):
            return label
        label = new


def cluster_ids(roots: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Dense cluster numbers 0, 1, 2, ... in order of each cluster's first member.

    >>> cluster_ids(np.array([0, 1, 0, 3, 3])).tolist()
    [0, 1, 0, 2, 2]
    """
    _, inverse = np.unique(roots, return_inverse=True)
    return inverse.astype(np.int64)
