"""Keep-first within one group: which members of a group are kept, given their verified matches.

A *group* is what is decided together: a write group on one node (:class:`~neardup.online.
decide.Decider`), or one batch sent through the cluster (:mod:`neardup.cluster`, whose nodes'
checks give each member's matches against their stored windows, and whose within-batch matches
come from one node's :meth:`Decider.group_matches <neardup.online.decide.Decider.group_matches>`).
Both front-ends call this module, so a batch gives the same kept set on one node and through
the cluster (tests/cluster/test_cluster_rule.py).

The rule, for the members in order:

* a member's matches are its verified matches against the stored window, plus those against
  the members decided **and kept** before it: a member that was not kept never makes a later
  one a duplicate (no chaining: of A, B, C with A~B and B~C only, A and C are kept);
* it is a duplicate when any of its matches *drops* it (:attr:`Found.drops`: the pair was
  accepted by verification and the keep rule's length test lets the longer text go);
* it is kept when the operation forces it (``insert``) or adds it (``check-and-insert``) and it
  is not a duplicate; ``check`` keeps nothing (so members of one check never match each other);
* its reported matches are the closest ``max_matches`` (distance, then ``order``).

Candidates and verification (what becomes a :class:`Found`) stay with the
:class:`~neardup.online.decide.Decider`, next to the index and the texts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import NamedTuple

__all__ = ["GROUP_ORDER", "Found", "KeepFirst", "keep_first"]

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
