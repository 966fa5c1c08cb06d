"""Pure references of the rules' fast paths, for tests (not in any ``__all__`` of the package):
the keep rule's greedy and components in plain Python, the MinHash channel with dict buckets,
the verification with the exact LCS of every pair. The fast paths are tested equal to these.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..verify.rule import RULE_EXACT, TokenEncoder, Verifier
from .config import STAGE_EXACT, STAGE_NEAR, PairTable
from .keep import UnionFind, _check, _directed
from .plan import LshPlan
from .verify import _trusted

__all__: list[str] = []


def connected_components_reference(
    n: int, a: npt.ArrayLike, b: npt.ArrayLike
) -> npt.NDArray[np.int64]:
    """Pure-Python reference of :func:`~neardup.rules.keep.connected_components`."""
    aa = np.asarray(a, dtype=np.int64)
    bb = np.asarray(b, dtype=np.int64)
    _check(n, aa, bb)
    uf = UnionFind(n)
    for x, y in zip(aa.tolist(), bb.tolist(), strict=True):
        uf.union(x, y)
    return np.array([uf.find(i) for i in range(n)], dtype=np.int64)


def greedy_representatives_reference(
    n: int,
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    rank: npt.ArrayLike,
    may_drop: npt.ArrayLike | None = None,
) -> npt.NDArray[np.int64]:
    """Pure-Python reference of :func:`~neardup.rules.keep.greedy_representatives`."""
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


def agreeing_reference(
    stored: npt.NDArray[np.uint16],
    k_of: npt.NDArray[np.int64],
    sig: npt.NDArray[np.uint16],
    q_of: npt.NDArray[np.int64],
    plan: LshPlan,
) -> npt.NDArray[np.bool_]:
    """NumPy twin of :func:`~neardup.rules.lsh.agreeing`: the pairs' values compared at once,
    the agreement counted and a band of equal values looked for."""
    eq = stored[np.asarray(k_of, np.int64)] == sig[np.asarray(q_of, np.int64)]
    span = plan.bands * plan.rows
    share = eq[:, :span].reshape(len(eq), plan.bands, plan.rows).all(axis=2).any(axis=1)
    return np.asarray((np.count_nonzero(eq, axis=1) >= plan.min_agreement) & share, np.bool_)


def sketch_agreeing_reference(
    stored: npt.NDArray[np.uint8],
    k_of: npt.NDArray[np.int64],
    queries: npt.NDArray[np.uint8],
    q_of: npt.NDArray[np.int64],
    plan: LshPlan,
) -> npt.NDArray[np.bool_]:
    """NumPy twin of :func:`~neardup.rules.lsh.sketch_agreeing`: the half-bytes unpacked into
    one value each, then the same count and band test as :func:`agreeing_reference`."""
    a = stored[np.asarray(k_of, np.int64)]
    b = queries[np.asarray(q_of, np.int64)]
    low = np.asarray((a & 0xF) == (b & 0xF), np.bool_)
    high = np.asarray((a >> 4) == (b >> 4), np.bool_)
    eq = np.stack([low, high], axis=2).reshape(len(a), -1)[:, : plan.hashes]
    span = plan.bands * plan.rows
    share = np.any(np.all(eq[:, :span].reshape(len(eq), plan.bands, plan.rows), axis=2), axis=1)
    return np.asarray((np.count_nonzero(eq, axis=1) >= plan.min_agreement) & share, np.bool_)


def lsh_pairs_reference(
    sig: npt.NDArray[np.uint16], usable: npt.NDArray[np.bool_], plan: LshPlan
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Reference for :func:`~neardup.rules.lsh.lsh_pairs` (no cap): dict buckets per band, every pair of a bucket,
    the agreement counted per pair in Python."""
    idx = np.flatnonzero(usable).tolist()
    found: set[tuple[int, int]] = set()
    r = plan.rows
    for band in range(plan.bands):
        buckets: dict[tuple[int, ...], list[int]] = {}
        for i in idx:
            buckets.setdefault(tuple(sig[i, band * r : (band + 1) * r].tolist()), []).append(i)
        for members in buckets.values():
            for x, y in itertools.combinations(members, 2):
                if int((sig[x] == sig[y]).sum()) >= plan.min_agreement:
                    found.add((x, y))
    pairs = sorted(found)
    return (
        np.array([p[0] for p in pairs], np.int64),
        np.array([p[1] for p in pairs], np.int64),
    )


def stage_verify_reference(
    verifier: Verifier,
    texts: Sequence[str],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    d: npt.NDArray[np.int32],
    workers: int = 1,
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
    """Reference for :func:`~neardup.rules.verify.stage_verify`: the exact LCS of every pair (no bound)."""
    from ..verify.reference import encode_texts_reference

    if a.size == 0:
        return np.zeros(0, bool), np.zeros(0, np.float64)
    encoded = encode_texts_reference(verifier, texts, TokenEncoder())
    ok, score = verifier.compare_indexed(encoded, a, b, workers=workers)
    rule = np.zeros(a.size, np.uint8)  # (rules: stage_verify_rules; not part of the reference)
    ok, score, _ = _trusted(verifier, texts, a, b, d, ok, score, rule)
    return ok, score


def exact_groups_reference(first: npt.NDArray[np.int64]) -> dict[int, list[int]]:
    """Members (in input order) of every exact group of two or more, keyed by the first member
    (the references' form; :class:`~neardup.rules.groups.ExactGroups` is the pipeline's)."""
    groups: dict[int, list[int]] = {}
    for i in np.flatnonzero(first != np.arange(first.size)).tolist():
        f = int(first[i])
        groups.setdefault(f, [f]).append(i)
    return groups


def stage_exact_pairs_reference(groups: dict[int, list[int]], expand_pairs: int) -> PairTable:
    """Reference for :func:`~neardup.rules.groups.stage_exact_pairs`, over :func:`exact_groups_reference`' dict."""
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


def stage_expand_reference(
    groups: dict[int, list[int]],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    d: npt.NDArray[np.int32],
    score: npt.NDArray[np.float64],
    expand_pairs: int,
    rule: npt.NDArray[np.uint8],
) -> PairTable:
    """Reference for :func:`~neardup.rules.groups.stage_expand`, over :func:`exact_groups_reference`' dict."""
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
