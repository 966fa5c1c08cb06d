"""Exact-duplicate groups as arrays, and the pairs made from them (numba).

A group is a first copy (its *root*: ``first[r] == r``) and the later texts equal to it
(``first[i] == r``). :class:`ExactGroups` holds them in CSR form; :func:`exact_pairs` and
:func:`expanded_pairs` make the exact pairs and repeat near pairs over the groups' members.
:func:`stage_exact_pairs` and :func:`stage_expand` put them in
:class:`~neardup.batch.config.PairTable` form for :func:`~neardup.batch.run.dedup`. They give
the pairs of :func:`stage_exact_pairs_reference` and :func:`stage_expand_reference` (the
dict-of-lists versions over :func:`exact_groups_reference`, kept as references), in the same
order (tested), without a Python loop over the groups (see benchmarks/bench_dedup.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import numpy.typing as npt

from .. import _jit  # noqa: F401  (before any @njit: kernels cached outside the package)
from ..verify.rule import RULE_EXACT
from .config import STAGE_EXACT, STAGE_NEAR, PairTable

I64 = npt.NDArray[np.int64]

__all__ = [
    "ExactGroups",
    "exact_groups_reference",
    "exact_pairs",
    "expanded_pairs",
    "stage_exact_pairs",
    "stage_exact_pairs_reference",
    "stage_expand",
    "stage_expand_reference",
]


@numba.njit(cache=True, nogil=True)
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

    def as_dict(self) -> dict[int, list[int]]:
        """``{root: [root, members...]}`` in the order of each group's second member (the
        references' form)."""
        roots = np.flatnonzero(np.diff(self.off))
        second = self.mem[self.off[roots]]
        out: dict[int, list[int]] = {}
        for r in roots[np.argsort(second)].tolist():
            out[r] = [r, *self.mem[self.off[r] : self.off[r + 1]].tolist()]
        return out


@numba.njit(cache=True, nogil=True)
def _exact_pairs(
    off: np.ndarray, mem: np.ndarray, expand: int
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - numba
    n = off.shape[0] - 1
    ng = 0
    for r in range(n):
        if off[r + 1] > off[r]:
            ng += 1
    roots = np.empty(ng, np.int64)
    second = np.empty(ng, np.int64)
    g = 0
    total = 0
    for r in range(n):
        if off[r + 1] > off[r]:
            roots[g] = r
            second[g] = mem[off[r]]
            g += 1
            m = off[r + 1] - off[r] + 1
            total += m * (m - 1) // 2 if m * (m - 1) // 2 <= expand else m - 1
    a = np.empty(total, np.int64)
    b = np.empty(total, np.int64)
    k = 0
    for q in np.argsort(second):  # groups in the order of their second member
        r = roots[q]
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
    return _exact_pairs(groups.off, groups.mem, int(expand_pairs))


@numba.njit(cache=True, nogil=True)
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


def exact_groups_reference(first: npt.NDArray[np.int64]) -> dict[int, list[int]]:
    """Members (in input order) of every exact group of two or more, keyed by the first member
    (the references' form; :class:`~neardup.batch.groups.ExactGroups` is the pipeline's)."""
    groups: dict[int, list[int]] = {}
    for i in np.flatnonzero(first != np.arange(first.size)).tolist():
        f = int(first[i])
        groups.setdefault(f, [f]).append(i)
    return groups


def stage_exact_pairs(groups: ExactGroups, expand_pairs: int) -> PairTable:
    """Exact pairs: every pair inside a group when at most ``expand_pairs``, else first-to-rest
    (:func:`~neardup.batch.groups.exact_pairs`; equals :func:`stage_exact_pairs_reference`,
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


def stage_exact_pairs_reference(groups: dict[int, list[int]], expand_pairs: int) -> PairTable:
    """Reference for :func:`stage_exact_pairs`, over :func:`exact_groups_reference`' dict."""
    a: list[int] = []
    b: list[int] = []
    for members in groups.values():
        m = len(members)
        if m * (m - 1) // 2 <= expand_pairs:
            for x in range(m):
                for y in range(x + 1, m):
                    a.append(members[x])
                    b.append(members[y])
        else:
            a.extend([members[0]] * (m - 1))
            b.extend(members[1:])
    k = len(a)
    return PairTable(
        np.array(a, np.int64),
        np.array(b, np.int64),
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
    (:func:`~neardup.batch.groups.expanded_pairs`; equals :func:`stage_expand_reference`,
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


def stage_expand_reference(
    groups: dict[int, list[int]],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    d: npt.NDArray[np.int32],
    score: npt.NDArray[np.float64],
    expand_pairs: int,
    rule: npt.NDArray[np.uint8],
) -> PairTable:
    """Reference for :func:`stage_expand`, over :func:`exact_groups_reference`' dict."""
    out_a, out_b, out_d, out_s, out_r = [a], [b], [d], [score], [rule]
    if groups:
        ea: list[int] = []
        eb: list[int] = []
        ed: list[int] = []
        es: list[float] = []
        er: list[int] = []
        rows = zip(a.tolist(), b.tolist(), d.tolist(), score.tolist(), rule.tolist(), strict=True)
        for x, y, dist, sc, ru in rows:
            gx, gy = groups.get(x, [x]), groups.get(y, [y])
            if len(gx) * len(gy) == 1 or len(gx) * len(gy) > expand_pairs:
                continue
            for u in gx:
                for w in gy:
                    if (u, w) != (x, y):
                        ea.append(min(u, w))
                        eb.append(max(u, w))
                        ed.append(dist)
                        es.append(sc)
                        er.append(ru)
        out_a.append(np.array(ea, np.int64))
        out_b.append(np.array(eb, np.int64))
        out_d.append(np.array(ed, np.int32))
        out_s.append(np.array(es, np.float64))
        out_r.append(np.array(er, np.uint8))
    aa = np.concatenate(out_a)
    return PairTable(
        aa,
        np.concatenate(out_b),
        np.concatenate(out_d),
        np.concatenate(out_s),
        np.full(aa.size, STAGE_NEAR, np.uint8),
        np.concatenate(out_r).astype(np.uint8),
    )
