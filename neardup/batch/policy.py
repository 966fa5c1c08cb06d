"""The keep policy and clusters: which documents are kept, and their roots and components.

:func:`stage_representatives` (``keep="first"`` / ``"longest"``: greedy against kept
documents, no chaining), :func:`stage_cluster` (connected components of the matched pairs) and
:func:`stage_policy` (a keep mask over components: ``keep="none"``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ..verify.rule import may_drop
from .cluster import cluster_ids, connected_components, greedy_representatives
from .config import Keep, PairTable

__all__ = ["stage_cluster", "stage_policy", "stage_representatives"]


def stage_representatives(
    first: npt.NDArray[np.int64],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int64],
    keep: Keep,
    threshold: float,
    tokens: npt.NDArray[np.int64] | None = None,
) -> npt.NDArray[np.int64]:
    """Keep policy without chaining: ``root`` int64 (n,), ``root[i] == i`` for kept documents,
    else the kept document ``i`` is a verified near (or exact) duplicate of.

    Exact-duplicate groups (``first``: position of each document's first copy) act as units;
    ``a, b`` are the verified near pairs between first copies. Units are visited in input
    order (``keep="first"``) or longest first (``"longest"``; ties: input order), and a unit is
    dropped only for a pair with a unit already kept
    (:func:`~neardup.batch.cluster.greedy_representatives`). A pair never drops a document more than
    ``(2 - threshold) / threshold`` times longer in ``tokens`` (the verifier's token counts; a
    unit's copies have the same; ``None``: characters) than the kept one
    (:func:`neardup.verify.rule.may_drop`): at that length ratio no pair reaches ``threshold``
    by similarity, so the match is containment (the kept text is an excerpt of it) and the
    longer text is kept. Within a unit the first copy (or, for ``"longest"``, the longest copy;
    ties: first) stands for it.
    """
    n = first.size
    units = np.flatnonzero(first == np.arange(n))
    unit_of = np.searchsorted(units, first)
    ulen = np.zeros(units.size, np.int64)
    np.maximum.at(ulen, unit_of, lengths)
    ua, ub = np.searchsorted(units, a), np.searchsorted(units, b)
    if keep == "longest":
        order = np.lexsort((np.arange(units.size), -ulen))
        rank = np.empty(units.size, np.int64)
        rank[order] = np.arange(units.size)
        o = np.lexsort((np.arange(n), -lengths, unit_of))  # each unit's longest member first
        head = np.ones(n, bool)
        head[1:] = unit_of[o][1:] != unit_of[o][:-1]
        member = np.empty(units.size, np.int64)
        member[unit_of[o[head]]] = o[head]
    else:
        rank = np.arange(units.size, dtype=np.int64)
        member = units
    size = ulen if tokens is None else np.asarray(tokens, np.int64)[units]
    la, lb = size[ua], size[ub]
    drop = np.concatenate([may_drop(la, lb, threshold), may_drop(lb, la, threshold)])
    rep = greedy_representatives(units.size, ua, ub, rank, drop)
    return member[rep[unit_of]]


def stage_cluster(n: int, pairs: PairTable) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Union-find over the matched pairs: (root position, dense cluster id), both int64 (n,)."""
    roots = connected_components(n, pairs.a, pairs.b)
    return roots, cluster_ids(roots)


def stage_policy(
    roots: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64], keep: Keep
) -> npt.NDArray[np.bool_]:
    """Keep mask for the policy: first member, longest member (ties: first), or none of a cluster."""
    n = roots.size
    if keep == "first":
        return roots == np.arange(n)
    sizes = np.bincount(roots, minlength=n)
    if keep == "none":
        return sizes[roots] == 1
    # longest: sort by (root, -length, position) and keep the first row of each root
    order = np.lexsort((np.arange(n), -lengths, roots))
    first = np.ones(n, bool)
    first[1:] = roots[order][1:] != roots[order][:-1]
    mask = np.zeros(n, bool)
    mask[order[first]] = True
    return mask
