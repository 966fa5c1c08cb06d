"""Clustering of matched pairs: kept representatives (no chaining) and connected components.

:func:`greedy_representatives` decides what a keep policy keeps: items are visited in a given
order (input order for ``keep="first"``, longest first for ``keep="longest"``); an item is kept
unless it has a matched pair with an item already kept, and then that kept item is its
representative. So every dropped item is *directly* matched to a kept one: nothing is dropped
through a chain of intermediates (A~B, B~C, A and C unrelated: A and C are both kept).

:func:`connected_components` (the transitive closure, union-find semantics) is kept as a
report. Each component is represented by its member with the smallest position (input order),
so labels do not depend on the order the pairs arrive in.

Examples
--------
>>> import numpy as np
>>> connected_components(5, np.array([0, 3]), np.array([2, 4])).tolist()
[0, 1, 0, 3, 3]
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from .. import _jit  # noqa: F401  (before any @njit: kernels cached outside the package)
from ..errors import InputError

__all__ = [
    "UnionFind",
    "cluster_ids",
    "connected_components",
    "connected_components_reference",
    "greedy_representatives",
    "greedy_representatives_reference",
]


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


def _directed(
    n: int,
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    rank: npt.ArrayLike,
    may_drop: npt.ArrayLike | None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Pairs as (earlier-visited u, later-visited v) with ``may_drop`` applied, and the visit
    order: ``(u, v, order)`` (int64)."""
    aa = np.asarray(a, dtype=np.int64).ravel()
    bb = np.asarray(b, dtype=np.int64).ravel()
    _check(n, aa, bb)
    rk = np.asarray(rank, dtype=np.int64).ravel()
    if rk.shape != (n,) or not np.array_equal(np.sort(rk), np.arange(n)):
        raise InputError(f"rank must be a permutation of 0..{n - 1}")
    first = rk[aa] <= rk[bb]
    u = np.where(first, aa, bb)
    v = np.where(first, bb, aa)
    if may_drop is not None:
        md = np.asarray(may_drop, dtype=bool).ravel()
        if md.size != 2 * aa.size:
            raise InputError(
                f"may_drop must have 2 entries per pair ({2 * aa.size}), got {md.size}"
            )
        keep = np.where(first, md[: aa.size], md[aa.size :])
        u, v = u[keep], v[keep]
    keep_self = u != v
    u, v = u[keep_self], v[keep_self]
    order = np.empty(n, np.int64)
    order[rk] = np.arange(n)
    return u, v, order


@numba.njit(cache=True)
def _greedy_kernel(
    order: np.ndarray, ptr: np.ndarray, partner: np.ndarray, rep: np.ndarray
) -> None:  # pragma: no cover - numba
    for i in range(order.shape[0]):
        x = order[i]
        rep[x] = x
        for e in range(ptr[x], ptr[x + 1]):
            p = partner[e]
            if rep[p] == p:  # a kept item visited earlier
                rep[x] = p
                break


def greedy_representatives(
    n: int,
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    rank: npt.ArrayLike,
    may_drop: npt.ArrayLike | None = None,
) -> npt.NDArray[np.int64]:
    """Kept representatives without chaining: ``rep`` int64 (n,), ``rep[i] == i`` for kept items.

    Items are visited in increasing ``rank`` (a permutation of ``0..n-1``). An item is kept
    unless one of its pairs joins it to an item kept earlier; then ``rep[i]`` is that item (the
    earliest-visited one if several). So ``rep[rep[i]] == rep[i]`` and each dropped item is
    paired with its representative.

    Parameters
    ----------
    n : int
    a, b : array-like of int64, shape (m,)
        Matched pairs (positions; either order).
    rank : array-like of int64, shape (n,)
        Visit order: ``rank[i]`` is when item ``i`` is visited.
    may_drop : array-like of bool, shape (2 m,), optional
        ``may_drop[k]``: pair ``k`` may drop ``b[k]`` when ``a[k]`` is kept and visited first;
        ``may_drop[m + k]``: it may drop ``a[k]`` when ``b[k]`` is. ``None``: both.

    Equals :func:`greedy_representatives_reference` (tested).
    """
    u, v, order = _directed(n, a, b, rank, may_drop)
    rank_arr = np.empty(n, np.int64)
    rank_arr[order] = np.arange(n)
    # partners of each later item, earliest-visited first
    o = np.lexsort((rank_arr[u], v))
    partner = u[o]
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(v, minlength=n), out=ptr[1:])
    rep = np.empty(n, np.int64)
    _greedy_kernel(order, ptr, partner, rep)
    return rep


def greedy_representatives_reference(
    n: int,
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    rank: npt.ArrayLike,
    may_drop: npt.ArrayLike | None = None,
) -> npt.NDArray[np.int64]:
    """Pure-Python reference of :func:`greedy_representatives`."""
    u, v, order = _directed(n, a, b, rank, may_drop)
    rank_arr = np.empty(n, np.int64)
    rank_arr[order] = np.arange(n)
    earlier: dict[int, list[int]] = {}
    for x, y in zip(u.tolist(), v.tolist(), strict=True):
        earlier.setdefault(y, []).append(x)
    rep = list(range(n))
    kept = [False] * n
    for x in order.tolist():
        cands = sorted(earlier.get(x, []), key=lambda p: rank_arr[p])
        hit = next((p for p in cands if kept[p]), None)
        if hit is None:
            kept[x] = True
        else:
            rep[x] = hit
    return np.array(rep, dtype=np.int64)
