"""The keep decision and connected components as rounds of per-partition work (no driver pass).

Both run over the graph of *units* (first copies of exact groups) joined by verified near pairs.
Each partition holds the edges of the units it owns (``owner_of``); a round is one task per
partition: it applies the messages the other partitions sent in the previous round, decides or
relabels what it can (repeating locally until nothing changes, so a chain inside one partition
costs one round), and sends what changed to the owners of the neighbours. The driver only sums
counts and starts the next round.

**Greedy keep** (:func:`greedy_round`), the rule of
:func:`neardup.rules.keep.greedy_representatives`: units are visited in ``rank`` order; ``v``
is dropped for its earliest-ranked in-neighbour ``u`` (a directed edge ``u -> v``: ``u`` earlier,
allowed to drop ``v``) that is kept, and kept when it has none. ``v`` is decided as soon as its
in-neighbours up to the first one not dropped are decided: dropped if that one is kept, kept if
every in-neighbour is dropped. By induction on rank each decision is the sequential one, and the
undecided unit of least rank can always be decided, so the rounds end; their number is at most
the longest directed path (in units), less where a path stays in one partition or a kept
neighbour decides early (measured in docs/distributed.md).

**Min-label components** (:func:`label_round`), for ``keep="none"``: every unit starts with its
own position as label and takes the least label of its neighbours until no label changes; the
rounds are bounded by the diameter of the largest component (in cross-partition hops).

Pure NumPy over arrays; the ``keep`` step module does the files. Equal to the sequential
greedy and to union-find on random graphs split over random partitions
(``tests/distributed/test_distributed_rounds.py``, Hypothesis).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._arrays import find_sorted

__all__ = [
    "DROPPED",
    "KEPT",
    "UNKNOWN",
    "GreedyDecisions",
    "GreedyEdges",
    "LabelState",
    "greedy_round",
    "label_round",
    "simulate_greedy",
    "simulate_labels",
]

I64 = npt.NDArray[np.int64]
Mine = Callable[[I64], npt.NDArray[np.bool_]]

#: in-edge states: what is known of the in-neighbour ``u``
UNKNOWN, KEPT, DROPPED = 0, 1, 2


@dataclass
class GreedyEdges:
    """One partition's greedy state.

    In-edges of its undecided units, sorted by ``(v, k1, u)`` (``(k1, u)``: the rank of ``u``),
    with what is known of ``u`` (``st``) and the document that stands for ``u`` (``head``,
    ``head_id``: the root of a unit ``u`` drops). Out-edges ``(ou, ov)`` of its units whose
    decision is not yet sent."""

    v: I64
    k1: I64
    u: I64
    st: npt.NDArray[np.int8]
    head: I64
    head_id: npt.NDArray[np.object_]
    ou: I64
    ov: I64

    @classmethod
    def build(
        cls,
        v: I64,
        k1: I64,
        u: I64,
        head: I64,
        head_id: npt.NDArray[np.object_],
        ou: I64,
        ov: I64,
    ) -> GreedyEdges:
        o = np.lexsort((u, k1, v))
        st = np.full(v.size, UNKNOWN, np.int8)
        return cls(v[o], k1[o], u[o], st, head[o], head_id[o], ou, ov)

    def take(self, keep: npt.NDArray[np.bool_]) -> None:
        for f in ("v", "k1", "u", "st", "head", "head_id"):
            setattr(self, f, getattr(self, f)[keep])


@dataclass
class GreedyDecisions:
    """Units a round decided: ``kept`` (positions) and ``dropped`` with their ``root``,
    ``root_id``; ``messages``: ``(u, kept, to)`` for the other partitions; ``local_passes``."""

    kept: I64
    dropped: I64
    root: I64
    root_id: npt.NDArray[np.object_]
    msg_u: I64
    msg_kept: npt.NDArray[np.bool_]
    msg_to: I64
    local_passes: int


def _apply(e: GreedyEdges, nodes: I64, kept: npt.NDArray[np.bool_]) -> None:
    """Record that ``nodes`` (ascending) were decided (``kept``) on the in-edges from them."""
    if nodes.size == 0 or e.u.size == 0:
        return
    i, hit = find_sorted(nodes, e.u)
    e.st[hit] = np.where(kept[i[hit]], KEPT, DROPPED)


def greedy_round(
    e: GreedyEdges,
    msg_u: I64,
    msg_kept: npt.NDArray[np.bool_],
    owner: Callable[[I64], I64],
    me: int,
    first: bool,
) -> GreedyDecisions:
    """One round on partition ``me`` (``e`` is updated in place): apply the messages, decide
    until nothing changes locally, and return the decisions and the messages to send.

    ``first``: the first round, where the partition's units with out-edges and no in-edges
    (nothing can drop them) are kept."""
    o = np.argsort(msg_u, kind="stable")
    _apply(e, msg_u[o], msg_kept[o])
    kept_all: list[I64] = []
    dropped_all: list[I64] = []
    root_all: list[I64] = []
    rid_all: list[npt.NDArray[np.object_]] = []
    if first:
        src = np.setdiff1d(np.unique(e.ou), e.v)
        kept_all.append(src)
        _apply(e, src, np.ones(src.size, bool))
    passes = 0
    while e.v.size:
        passes += 1
        n = e.v.size
        starts = np.flatnonzero(np.r_[True, e.v[1:] != e.v[:-1]])
        f = np.where(e.st != DROPPED, np.arange(n), n)
        firstx = np.minimum.reduceat(f, starts)
        keep_v = firstx == n
        fx = np.minimum(firstx, n - 1)
        drop_v = ~keep_v & (e.st[fx] == KEPT)
        newly = keep_v | drop_v
        if not newly.any():
            break
        gv = e.v[starts]
        kept_all.append(gv[keep_v])
        dropped_all.append(gv[drop_v])
        root_all.append(e.head[fx[drop_v]])
        rid_all.append(e.head_id[fx[drop_v]])
        group = np.cumsum(np.r_[True, e.v[1:] != e.v[:-1]]) - 1
        e.take(~newly[group])
        nodes = gv[newly]  # ascending (groups are sorted by v)
        _apply(e, nodes, keep_v[newly])
    kept = np.concatenate(kept_all) if kept_all else np.zeros(0, np.int64)
    dropped = np.concatenate(dropped_all) if dropped_all else np.zeros(0, np.int64)
    root = np.concatenate(root_all) if root_all else np.zeros(0, np.int64)
    root_id = np.concatenate(rid_all) if rid_all else np.zeros(0, object)
    # messages: the decided units' out-edges to other partitions, one per (unit, partition)
    decided = np.concatenate([kept, dropped])
    flag = np.concatenate([np.ones(kept.size, bool), np.zeros(dropped.size, bool)])
    od = np.argsort(decided)
    decided, flag = decided[od], flag[od]
    i, hit = find_sorted(decided, e.ou)
    mu, mk, to = e.ou[hit], flag[i[hit]], owner(e.ov[hit])
    away = to != me
    mu, mk, to = mu[away], mk[away], to[away]
    if mu.size:
        key = np.unique(np.stack([mu, to]), axis=1, return_index=True)[1]
        mu, mk, to = mu[key], mk[key], to[key]
    e.ou, e.ov = e.ou[~hit], e.ov[~hit]
    return GreedyDecisions(kept, dropped, root, root_id, mu, mk, to, passes)


@dataclass
class LabelState:
    """One partition's component state: its units ``node`` (ascending) with ``label`` and
    ``label_id``, and the edges ``(v, u)`` with ``v`` its own (both directions stored)."""

    node: I64
    label: I64
    label_id: npt.NDArray[np.object_]
    v: I64
    u: I64

    @classmethod
    def build(cls, v: I64, v_id: npt.NDArray[np.object_], u: I64) -> LabelState:
        node, at = np.unique(v, return_index=True)
        return cls(node, node.copy(), v_id[at], v, u)


def _lower(s: LabelState, dest: I64, lab: I64, lid: npt.NDArray[np.object_]) -> None:
    """Lower the labels of units ``dest`` to ``lab`` (with ids) where smaller."""
    if dest.size == 0:
        return
    o = np.lexsort((lab, dest))
    dest, lab, lid = dest[o], lab[o], lid[o]
    head = np.r_[True, dest[1:] != dest[:-1]]
    dest, lab, lid = dest[head], lab[head], lid[head]
    at = np.searchsorted(s.node, dest)
    low = lab < s.label[at]
    s.label[at[low]] = lab[low]
    s.label_id[at[low]] = lid[low]


def label_round(
    s: LabelState,
    msg_to_node: I64,
    msg_label: I64,
    msg_id: npt.NDArray[np.object_],
    owner: Callable[[I64], I64],
    me: int,
    first: bool,
) -> tuple[I64, I64, npt.NDArray[np.object_], I64, int]:
    """One min-label round on partition ``me`` (``s`` updated in place): returns the messages
    ``(node, label, label_id, to)`` and the local passes."""
    before = s.label.copy()
    _lower(s, msg_to_node, msg_label, msg_id)
    local = owner(s.u) == me
    lv = np.searchsorted(s.node, s.v[local])
    lu = np.searchsorted(s.node, s.u[local])
    passes = 0
    while lv.size:
        passes += 1
        old = s.label.copy()
        _lower(s, s.node[lv], s.label[lu], s.label_id[lu])
        if np.array_equal(old, s.label):
            break
    changed = np.ones(s.node.size, bool) if first else s.label != before
    rv = np.searchsorted(s.node, s.v[~local])
    send = changed[rv]
    dest = s.u[~local][send]
    lab, lid = s.label[rv[send]], s.label_id[rv[send]]
    if dest.size:
        o = np.lexsort((lab, dest))
        dest, lab, lid = dest[o], lab[o], lid[o]
        head = np.r_[True, dest[1:] != dest[:-1]]
        dest, lab, lid = dest[head], lab[head], lid[head]
    return dest, lab, lid, owner(dest), passes


def simulate_greedy(
    n: int,
    u: I64,
    v: I64,
    rank: I64,
    part: I64,
    parts: int,
) -> tuple[I64, int]:
    """The rounds run in-process over ``parts`` partitions (unit ``x`` owned by ``part[x]``;
    directed edges ``u -> v`` with ``rank[u] < rank[v]``): ``(rep, rounds)``, ``rep`` as
    :func:`neardup.rules.keep.greedy_representatives` returns it. For tests and sizing."""

    def owner(x: I64) -> I64:
        return part[x].astype(np.int64)

    ids = np.arange(n).astype(object)
    states = []
    for p in range(parts):
        inn, out = part[v] == p, part[u] == p
        states.append(
            GreedyEdges.build(v[inn], rank[u[inn]], u[inn], u[inn], ids[u[inn]], u[out], v[out])
        )
    rep = np.arange(n, dtype=np.int64)
    inbox = [(np.zeros(0, np.int64), np.zeros(0, bool))] * parts
    rounds = 0
    while True:
        outs = [
            greedy_round(states[p], inbox[p][0], inbox[p][1], owner, p, rounds == 0)
            for p in range(parts)
        ]
        rounds += 1
        for d in outs:
            rep[d.dropped] = d.root
        inbox = []
        for p in range(parts):
            mu = np.concatenate([d.msg_u[d.msg_to == p] for d in outs])
            mk = np.concatenate([d.msg_kept[d.msg_to == p] for d in outs])
            inbox.append((mu, mk))
        if sum(int(np.unique(s.v).size) for s in states) == 0:
            return rep, rounds
        if rounds > n + 1:  # pragma: no cover - the rounds always progress
            raise RuntimeError("greedy rounds made no progress")


def simulate_labels(n: int, a: I64, b: I64, part: I64, parts: int) -> tuple[I64, int]:
    """Min-label rounds in-process: ``(label, rounds)`` for the units in pairs (others keep
    their own position). For tests and sizing."""

    def owner(x: I64) -> I64:
        return part[x].astype(np.int64)

    v, u = np.concatenate([a, b]), np.concatenate([b, a])
    ids = np.array([f"d{x}" for x in range(n)], dtype=object)
    states = []
    for p in range(parts):
        m = part[v] == p
        states.append(LabelState.build(v[m], ids[v[m]], u[m]))
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, object))
    inbox = [empty] * parts
    rounds = 0
    while True:
        outs = [label_round(states[p], *inbox[p], owner, p, rounds == 0) for p in range(parts)]
        rounds += 1
        inbox = []
        for p in range(parts):
            parts_ = [(d, lab, lid) for d, lab, lid, to, _ in outs]
            sel = [to == p for _, _, _, to, _ in outs]
            inbox.append(
                (
                    np.concatenate([x[0][s] for x, s in zip(parts_, sel, strict=True)]),
                    np.concatenate([x[1][s] for x, s in zip(parts_, sel, strict=True)]),
                    np.concatenate([x[2][s] for x, s in zip(parts_, sel, strict=True)]),
                )
            )
        if sum(x[0].size for x in inbox) == 0:
            label = np.arange(n, dtype=np.int64)
            for s in states:
                label[s.node] = s.label
                assert all(s.label_id == ids[s.label])
            return label, rounds
