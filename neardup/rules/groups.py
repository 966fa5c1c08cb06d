"""Exact-duplicate groups as arrays, and the pairs made from them (numba).

A group is a first copy (its *root*: ``first[r] == r``) and the later texts equal to it
(``first[i] == r``). :class:`ExactGroups` holds them in CSR form; :func:`exact_pairs` and
:func:`expanded_pairs` make the exact pairs and repeat near pairs over the groups' members.
:func:`stage_exact_pairs` and :func:`stage_expand` put them in
:class:`~neardup.rules.config.PairTable` form for :func:`~neardup.batch.run.dedup` and the
distributed ``exact`` step (which pairs an exact group reports: all of them up to
``expand_pairs``, else first to rest). They give the pairs of
:mod:`neardup.rules.reference`'s dict-of-lists versions, in the same order (tested), without a
Python loop over the groups (see benchmarks/bench_dedup.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._jit import kernel
from ..verify.rule import RULE_EXACT
from .config import STAGE_EXACT, STAGE_NEAR, PairTable

I64 = npt.NDArray[np.int64]

__all__ = [
    "ExactGroups",
    "exact_pairs",
    "expanded_pairs",
    "stage_exact_pairs",
    "stage_expand",
]


@kernel(nogil=True)
def _csr(first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - numba
    n = first.shape[0]
    off = np.zeros(n + 1, np.int64)
    for i in range(n):
        if first[i] != i:
            off[first[i] + 1] += 1
    for j in range(n):
        off[j + 1] += off[j]
    mem = np.empty(off[n], np.int64)
    pos = off[:-1].copy()
    for i in range(n):  # ascending: members in input order
        f = first[i]
        if f != i:
            mem[pos[f]] = i
            pos[f] += 1
    return off, mem


@dataclass(frozen=True)
class ExactGroups:
    """Members of every exact group of two or more, as arrays.

    ``off`` (n + 1,) and ``mem``: the later members of root ``r`` (ascending) are
    ``mem[off[r]:off[r + 1]]`` (none for a text that is not a root of a group)."""

    off: I64
    mem: I64

    @classmethod
    def from_first(cls, first: npt.ArrayLike) -> ExactGroups:
        """From ``first`` (int64 (n,): the position of each text's first copy)."""
        off, mem = _csr(np.ascontiguousarray(first, dtype=np.int64))
        return cls(off, mem)

    def __len__(self) -> int:
        """Groups of two or more."""
        return int(np.count_nonzero(np.diff(self.off)))

    def roots_in_order(self) -> I64:
        """The roots of the groups of two or more, in the order of each group's second member
        (distinct rows: the order is total)."""
        roots = np.flatnonzero(np.diff(self.off))
        return roots[np.argsort(self.mem[self.off[roots]])]

    def as_dict(self) -> dict[int, list[int]]:
        """``{root: [root, members...]}`` in the order of each group's second member (the
        references' form)."""
        out: dict[int, list[int]] = {}
        for r in self.roots_in_order().tolist():
            out[r] = [r, *self.mem[self.off[r] : self.off[r + 1]].tolist()]
        return out


@kernel(nogil=True)
def _exact_pairs(
    off: np.ndarray, mem: np.ndarray, roots: np.ndarray, expand: int
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - numba
    # roots: the groups' roots in the order their pairs are written (NumPy sorts them outside:
    # a sort inside the kernel compiled numba's own, most of this kernel's compile)
    total = 0
    for r in roots:
        m = off[r + 1] - off[r] + 1
        total += m * (m - 1) // 2 if m * (m - 1) // 2 <= expand else m - 1
    a = np.empty(total, np.int64)
    b = np.empty(total, np.int64)
    k = 0
    for r in roots:
        s = off[r]
        e = off[r + 1]
        m = e - s + 1
        if m * (m - 1) // 2 <= expand:
            for x in range(-1, e - s):  # -1: the root
                u = r if x < 0 else mem[s + x]
                for y in range(x + 1, e - s):
                    a[k] = u
                    b[k] = mem[s + y]
                    k += 1
        else:
            for y in range(s, e):
                a[k] = r
                b[k] = mem[y]
                k += 1
    return a, b


def exact_pairs(groups: ExactGroups, expand_pairs: int) -> tuple[I64, I64]:
    """Exact pairs ``(a, b)``: every pair inside a group when it has at most ``expand_pairs``
    pairs, else its root with each later member; groups in the order of their second member,
    members in input order."""
    return _exact_pairs(groups.off, groups.mem, groups.roots_in_order(), int(expand_pairs))


@kernel(nogil=True)
def _expanded(
    off: np.ndarray,
    mem: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    d: np.ndarray,
    s: np.ndarray,
    expand: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - numba
    total = 0
    for p in range(a.shape[0]):
        gx = off[a[p] + 1] - off[a[p]] + 1
        gy = off[b[p] + 1] - off[b[p]] + 1
        if gx * gy != 1 and gx * gy <= expand:
            total += gx * gy - 1
    oa = np.empty(total, np.int64)
    ob = np.empty(total, np.int64)
    od = np.empty(total, np.int32)
    os_ = np.empty(total, np.float64)
    k = 0
    for p in range(a.shape[0]):
        x = a[p]
        y = b[p]
        gx = off[x + 1] - off[x] + 1
        gy = off[y + 1] - off[y] + 1
        if gx * gy == 1 or gx * gy > expand:
            continue
        for i in range(gx):
            u = x if i == 0 else mem[off[x] + i - 1]
            for j in range(gy):
                w = y if j == 0 else mem[off[y] + j - 1]
                if i == 0 and j == 0:
                    continue
                oa[k] = min(u, w)
                ob[k] = max(u, w)
                od[k] = d[p]
                os_[k] = s[p]
                k += 1
    return oa, ob, od, os_


def expanded_pairs(
    groups: ExactGroups,
    a: I64,
    b: I64,
    d: npt.NDArray[np.int32],
    score: npt.NDArray[np.float64],
    expand_pairs: int,
) -> tuple[I64, I64, npt.NDArray[np.int32], npt.NDArray[np.float64]]:
    """For each near pair ``(a, b)`` of first copies, the pairs between the other members of
    their two groups (``a`` x ``b``'s, without ``(a, b)`` itself; ``(min, max)``, the pair's
    distance and score), unless that is more than ``expand_pairs`` pairs; in the order of the
    near pairs, then of the members."""
    return _expanded(
        groups.off,
        groups.mem,
        np.ascontiguousarray(a, np.int64),
        np.ascontiguousarray(b, np.int64),
        np.ascontiguousarray(d, np.int32),
        np.ascontiguousarray(score, np.float64),
        int(expand_pairs),
    )


def stage_exact_pairs(groups: ExactGroups, expand_pairs: int) -> PairTable:
    """Exact pairs: every pair inside a group when at most ``expand_pairs``, else first-to-rest
    (:func:`exact_pairs`; equals :func:`neardup.rules.reference.stage_exact_pairs_reference`,
    tested)."""
    a, b = exact_pairs(groups, expand_pairs)
    k = a.size
    return PairTable(
        a,
        b,
        np.zeros(k, np.int32),
        np.ones(k, np.float64),
        np.full(k, STAGE_EXACT, np.uint8),
        np.full(k, RULE_EXACT, np.uint8),
    )


def stage_expand(
    groups: ExactGroups,
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    d: npt.NDArray[np.int32],
    score: npt.NDArray[np.float64],
    expand_pairs: int,
    rule: npt.NDArray[np.uint8],
) -> PairTable:
    """Near pairs between first copies, repeated for the other members of their exact groups
    (:func:`expanded_pairs`; equals :func:`neardup.rules.reference.stage_expand_reference`,
    tested); a repeated pair carries its first copies' pair's distance, score and ``rule``."""
    ea, eb, ed, es = expanded_pairs(groups, a, b, d, score, expand_pairs)
    aa = np.concatenate([a, ea])
    # expanded_pairs lists each pair's repeats in the order of the pairs: gx * gy - 1 of them
    # where that is at most expand_pairs (and more than 0)
    later = np.diff(groups.off)
    gx, gy = later[a] + 1, later[b] + 1
    cnt = np.where((gx * gy != 1) & (gx * gy <= expand_pairs), gx * gy - 1, 0)
    return PairTable(
        aa,
        np.concatenate([b, eb]),
        np.concatenate([d, ed]),
        np.concatenate([score, es]),
        np.full(aa.size, STAGE_NEAR, np.uint8),
        np.concatenate([rule, np.repeat(rule, cnt)]).astype(np.uint8),
    )
