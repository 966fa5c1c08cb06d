"""The keep rule of every front-end: which documents are kept, and what each dropped one
duplicates.

**No chaining.** Items are visited in a given order (input order for ``keep="first"``, longest
first for ``keep="longest"``; the arrival order of a write group online); an item is kept unless
it has a verified pair with an item already kept, and then that kept item is its
representative. So every dropped item is *directly* matched to a kept one: nothing is dropped
through a chain of intermediates (A~B, B~C, A and C unrelated: A and C are both kept).

**The length guard** (:func:`may_drop`): a pair never drops a text more than ``(2 - threshold)
/ threshold`` times longer (in tokens) than the kept one: at that length ratio no pair reaches
the threshold by similarity, so the match is containment (the kept text an excerpt of the
longer one) and the longer text is kept.

One rule in two forms, both here: :func:`greedy_representatives` (a whole graph at once: the
batch, :func:`stage_representatives`, and each partition's part of the distributed rounds,
:func:`greedy_keep` with undecided neighbours) and :class:`KeepFirst` (a group decided member
by member while its matches are verified: the online writer, and :func:`keep_first` for a
group whose matches were verified ahead: the cluster). Tests check that they agree.

:func:`connected_components` (the transitive closure, union-find semantics) is the
``keep="none"`` policy's (every member of a component of two or more is dropped) and a report.
Each component is represented by its member with the smallest position (input order), so labels
do not depend on the order the pairs arrive in.

Examples
--------
>>> import numpy as np
>>> connected_components(5, np.array([0, 3]), np.array([2, 4])).tolist()
[0, 1, 0, 3, 3]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .._arrays import sorted_pairs, unique_inverse
from .._jit import kernel
from ..errors import InputError
from .config import Keep, PairTable

__all__ = [
    "GROUP_ORDER",
    "Found",
    "KeepFirst",
    "UnionFind",
    "cluster_ids",
    "connected_components",
    "greedy_representatives",
    "keep_first",
    "may_drop",
    "stage_cluster",
    "stage_policy",
    "stage_representatives",
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
    _, inverse = unique_inverse(roots)
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


@kernel
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
    # partners of each later item, earliest-visited first: (v, rank of u) in order by one sort
    # of packed pairs (what np.lexsort((rank_arr[u], v)) gives; rank is a permutation, so a
    # rank names its item: order[rank])
    _, ranks = sorted_pairs(v, rank_arr[u])
    partner = order[ranks]
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(v, minlength=n), out=ptr[1:])
    rep = np.empty(n, np.int64)
    _greedy_kernel(order, ptr, partner, rep)
    return rep


def may_drop(kept_tokens: npt.ArrayLike, tokens: npt.ArrayLike, threshold: float) -> Any:
    """Whether a verified match with a kept text of ``kept_tokens`` tokens makes a text of
    ``tokens`` tokens a duplicate (the length guard of every front-end): not when it is more
    than ``(2 - threshold) / threshold`` times longer, since no pair reaches ``ratio >=
    threshold`` at that length ratio (``ratio <= 2 * shorter / (shorter + longer)``): the match
    was containment, the kept text an excerpt of it, and the longer text is kept (the match is
    still reported). Token counts, not characters: a repost's markers and links are not
    tokens. Elementwise on arrays."""
    r = (2.0 - threshold) / threshold
    # the counts are integers: the tolerance only keeps a length ratio of exactly r (15 and
    # 10 tokens at 0.8: (2 - 0.8) / 0.8 is 1.4999999999999998 in floating point) a duplicate,
    # as the pair's ratio, 0.8, reaches the threshold
    return np.asarray(tokens) <= r * np.asarray(kept_tokens) + 1e-9


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
    (:func:`greedy_representatives`). A pair never drops a document more than
    ``(2 - threshold) / threshold`` times longer in ``tokens`` (the verifier's token counts; a
    unit's copies have the same; ``None``: characters) than the kept one
    (:func:`may_drop`): at that length ratio no pair reaches ``threshold``
    by similarity, so the match is containment (the kept text is an excerpt of it) and the
    longer text is kept. Within a unit the first copy (or, for ``"longest"``, the longest copy;
    ties: first) stands for it.
    """
    n = first.size
    head = first == np.arange(n)
    units = np.flatnonzero(head)
    # below[x]: the units before position x, which is np.searchsorted(units, x): one gather a
    # pair instead of a binary search (the lazy verification calls this once a round)
    below = np.cumsum(head, dtype=np.int64)
    below -= head
    unit_of = below[first]
    ulen = np.zeros(units.size, np.int64)
    np.maximum.at(ulen, unit_of, lengths)
    aa = np.asarray(a, dtype=np.int64).ravel()
    bb = np.asarray(b, dtype=np.int64).ravel()
    _check(n, aa, bb)
    ua, ub = below[aa], below[bb]
    if keep == "longest":
        order = np.lexsort((np.arange(units.size), -ulen))
        rank = np.empty(units.size, np.int64)
        rank[order] = np.arange(units.size)
        o = np.lexsort((np.arange(n), -lengths, unit_of))  # each unit's longest member first
        lead = np.ones(n, bool)
        lead[1:] = unit_of[o][1:] != unit_of[o][:-1]
        member = np.empty(units.size, np.int64)
        member[unit_of[o[lead]]] = o[lead]
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


# ---------------------------------------------------------------------------------------------
# keep-first within one group, member by member (online writer, cluster)

_BY_DISTANCE = itemgetter(0, 1)  # (distance, order)

#: ``Found.order`` of the group's member ``j`` is ``GROUP_ORDER + j``: after every stored row
#: (whose order is its row id) among matches at one distance
GROUP_ORDER = 1 << 62


class Found(NamedTuple):
    """One verified match of a member (a tuple: it sorts by distance, then order).

    Attributes
    ----------
    distance : int
        SimHash distance between the two fingerprints.
    order : int
        Tie-break among equal distances: the stored row id, or ``GROUP_ORDER + j`` for the
        group's member ``j``.
    id : str
        The matched document's id.
    score : float or None
        Text similarity when verified on the texts (1.0 for an exact duplicate).
    drops : bool
        Whether this match makes the member a duplicate (see the module docstring).
    """

    distance: int
    order: int
    id: str
    score: float | None
    drops: bool

    @property
    def member(self) -> int | None:
        """The group position of the matched member, or None for a stored document."""
        return self.order - GROUP_ORDER if self.order >= GROUP_ORDER else None


class KeepFirst:
    """The keep-first state of one group of ``n`` members, decided in order.

    A *group* is what is decided together: a write group on one node
    (:class:`~neardup.online.decide.Decider`), or one batch sent through the cluster
    (:mod:`neardup.cluster`, whose nodes' checks give each member's matches against their stored
    windows, and whose within-batch matches come from one node's
    :meth:`Decider.group_matches <neardup.online.decide.Decider.group_matches>`). Both call this
    rule, so a batch gives the same kept set on one node and through the cluster
    (tests/cluster/test_cluster_rule.py). For the members in order:

    * a member's matches are its verified matches against the stored window, plus those against
      the members decided **and kept** before it: a member that was not kept never makes a later
      one a duplicate (no chaining);
    * it is a duplicate when any of its matches *drops* it (:attr:`Found.drops`: the pair was
      accepted by verification and :func:`may_drop` lets the longer text go);
    * it is kept when the operation forces it (``insert``) or adds it (``check-and-insert``) and
      it is not a duplicate; ``check`` keeps nothing (so members of one check never match each
      other);
    * its reported matches are the closest ``max_matches`` (distance, then ``order``).

    >>> state = KeepFirst(2)
    >>> state.decide(0, [], adding=True, max_matches=10)[:2]
    (False, True)
    >>> state.decide(1, [Found(2, GROUP_ORDER + 0, "a", 0.9, True)], adding=True,
    ...              max_matches=10)[:2]
    (True, False)
    """

    __slots__ = ("kept",)

    def __init__(self, n: int) -> None:
        self.kept = bytearray(n)

    def counts(self, j: int) -> bool:
        """Whether member ``j`` can match later members (it was kept)."""
        return bool(self.kept[j])

    def decide(
        self,
        i: int,
        found: list[Found],
        *,
        adding: bool,
        force: bool = False,
        stored_dup: bool = False,
        max_matches: int,
    ) -> tuple[bool, bool, list[Found]]:
        """Decide member ``i`` from ``found`` (its matches against the stored window and the
        kept earlier members; sorted here). ``stored_dup``: a match that drops it was found
        but is not in ``found`` (the cluster's nodes report it as a flag). Returns
        ``(duplicate, kept, the closest max_matches matches)``."""
        if found:
            found.sort(key=_BY_DISTANCE)
        dup = stored_dup or any(f.drops for f in found)
        keep = force or (adding and not dup)
        if keep:
            self.kept[i] = 1
        return dup, keep, found[:max_matches]

    def keep_unmatched(self, i: int, adding: bool) -> bool:
        """Member ``i`` has no candidate at all: :meth:`decide` with nothing found."""
        if adding:
            self.kept[i] = 1
        return adding

    def forget(self, j: int) -> None:
        """Member ``j`` was deleted later in the same group: it matches nothing after that."""
        self.kept[j] = 0


def keep_first(
    stored: Sequence[tuple[bool, Sequence[Found]]],
    pairs: Mapping[int, Sequence[Found]],
    *,
    adding: Sequence[bool],
    force: Sequence[bool],
    max_matches: int,
) -> list[tuple[bool, bool, list[Found]]]:
    """Decide a whole group whose within-group matches were all verified ahead.

    Parameters
    ----------
    stored : sequence of (bool, sequence of Found)
        Per member: whether a match against the stored window drops it, and those matches.
    pairs : mapping
        Member ``i`` -> its verified matches with earlier members (``Found.member < i``), as
        if every earlier member were kept (:meth:`Decider.group_matches
        <neardup.online.decide.Decider.group_matches>`); only kept ones count here.
    adding, force : sequence of bool
        Per member: added unless a duplicate (check-and-insert), added anyway (insert).
    max_matches : int
        Matches reported per member.

    Returns
    -------
    list of (duplicate, kept, matches)
    """
    state = KeepFirst(len(stored))
    out = []
    for i, (dup, found) in enumerate(stored):
        mine = list(found)
        for f in pairs.get(i, ()):
            j = f.member
            if j is not None and j < i and state.counts(j):
                mine.append(f)
        out.append(
            state.decide(
                i, mine, adding=adding[i], force=force[i], stored_dup=dup, max_matches=max_matches
            )
        )
    return out
