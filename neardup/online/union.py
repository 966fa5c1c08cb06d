"""The MinHash channel's candidates of a large write group, merged into its SimHash hits with
array operations: :meth:`neardup.online.decide.Decider._lsh_union` for groups of
:data:`ARRAY_UNION_MIN` documents or more (checked against a 0.8 M store, short posts have ~20
band candidates each, and a Python loop over every (document, candidate) pair was about a
tenth of a check: ``benchmarks/bench_check.py``). A single request keeps the loop, which costs
less than the NumPy calls' fixed overhead on a few pairs. Both give the same candidates, in the
same order, and leave the signature cache the same (``tests/online/test_online_union.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .._arrays import find_sorted, unique_inverse, unique_sorted
from ..fingerprint.minhash import minhash_signatures
from ..rules.lsh import agreeing

__all__ = ["ARRAY_UNION_MIN", "FILTER_BLOCK", "BandKeys", "union_arrays", "without_own_hits"]

#: groups of at least this many documents merge their band candidates with array operations
ARRAY_UNION_MIN = 64
#: (query, stored row) pairs the MinHash agreement filter compares at once (~40 MB of arrays
#: at 237 values)
FILTER_BLOCK = 1 << 15

_I64_MAX = np.iinfo(np.int64).max


@dataclass(frozen=True, slots=True)
class BandKeys:
    """A write group's band candidates (``lsh_rids[i]``: the stored rows query ``i`` found,
    distinct and ascending) made once for the sketch filter and the merge: ``flat``, all of
    them in query order; ``counts``, how many each query has; ``uniq``, the distinct rows,
    ascending; ``inv``, the position of each ``flat`` entry in ``uniq``.

    >>> k = BandKeys.of([np.array([4, 9]), np.array([], np.int64), np.array([2, 4])])
    >>> k.flat.tolist(), k.counts.tolist(), k.uniq.tolist(), k.inv.tolist()
    ([4, 9, 2, 4], [2, 0, 2], [2, 4, 9], [1, 2, 0, 1])
    """

    flat: npt.NDArray[np.int64]
    counts: npt.NDArray[np.int64]
    uniq: npt.NDArray[np.int64]
    inv: npt.NDArray[np.intp]

    @classmethod
    def of(cls, lsh_rids: list[npt.NDArray[np.int64]]) -> BandKeys:
        counts = np.fromiter((len(a) for a in lsh_rids), np.int64, len(lsh_rids))
        if len(lsh_rids) == 1:  # one query's rows: distinct and ascending already
            flat = np.asarray(lsh_rids[0], np.int64)
            return cls(flat, counts, flat, np.arange(flat.size, dtype=np.intp))
        flat = (
            np.concatenate(lsh_rids).astype(np.int64, copy=False)
            if len(lsh_rids)
            else np.zeros(0, np.int64)
        )
        uniq, inv = unique_inverse(flat)
        return cls(flat, counts, uniq.astype(np.int64, copy=False), inv)


def without_own_hits(
    lsh_rids: list[npt.NDArray[np.int64]],
    lims: npt.NDArray[np.int64],
    hit_rids: npt.NDArray[np.int64],
) -> list[npt.NDArray[np.int64]]:
    """Each query's band candidates (``lsh_rids[i]``, distinct and ascending) without its own
    SimHash hits (``hit_rids[lims[i]:lims[i + 1]]``), which it reads and verifies as hits
    whatever their signatures say. A loop over the queries: for the groups the array union
    does not take (fewer than :data:`ARRAY_UNION_MIN`).

    >>> without_own_hits([np.array([2, 5, 9]), np.array([5])], np.array([0, 2, 2]), np.array([9, 4]))
    [array([2, 5]), array([5])]
    """
    out = []
    for i, cand in enumerate(lsh_rids):
        lo, hi = int(lims[i]), int(lims[i + 1])
        if hi > lo and cand.size:
            pos, own = find_sorted(cand, hit_rids[lo:hi])
            if own.any():
                keep = np.ones(cand.size, np.bool_)
                keep[pos[own]] = False
                cand = cand[keep]
        out.append(cand)
    return out


def union_arrays(
    decider: Any,
    fps: npt.NDArray[np.uint64],
    sig: npt.NDArray[np.uint16],
    lims: npt.NDArray[np.int64],
    hit_rids: npt.NDArray[np.int64],
    hit_d: npt.NDArray[np.int32],
    keys: BandKeys,
    rows: dict[int, Any],
    cached: dict[int, int],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]] | None:
    """``Decider._lsh_union`` (its arguments, the band candidates as :class:`BandKeys`;
    ``decider`` gives the plan, verifier, signature cache, store and fingerprint width) by
    array operations: each query's SimHash hits, then the stored rows sharing a band key with
    it (ascending) that are not among those hits and whose signatures agree. None when the
    (query, row) pairs cannot be packed into 64 bits (row ids near 2**63 / queries): the
    caller's loop answers then."""
    n = len(fps)
    counts, b_r, uniq, inv = keys.counts, keys.flat, keys.uniq, keys.inv
    top = max(int(uniq[-1]) if uniq.size else 0, int(hit_rids.max(initial=0))) + 1
    if n and top > _I64_MAX // n:
        return None
    # which band candidates have a signature: cached, or made from a text read for them (the
    # loop's rule: rows without text are no candidates); the cached ones copied before the
    # made ones go in, which may take their slots
    plan = decider.lsh_plan
    sig_at = np.full(uniq.size, -1, np.int64)
    c_r = np.fromiter(cached.keys(), np.int64, len(cached))
    c_s = np.fromiter(cached.values(), np.int64, len(cached))
    at = np.searchsorted(uniq, c_r)
    ok = at < uniq.size
    ok[ok] = uniq[at[ok]] == c_r[ok]
    order = np.argsort(at[ok], kind="stable")
    known_k = at[ok][order]
    known_slot = c_s[ok][order].tolist()
    # the rows read (far fewer than the band candidates: the sketch filter let few through)
    t_r = np.fromiter((r for r, row in rows.items() if row.text is not None), np.int64)
    at = np.searchsorted(uniq, t_r)
    ok = at < uniq.size
    ok[ok] = uniq[at[ok]] == t_r[ok]
    readable = np.zeros(uniq.size, np.bool_)
    readable[at[ok]] = True
    readable[known_k] = False
    need_k = np.flatnonzero(readable)
    if not need_k.size and not cached:
        return lims, hit_rids, hit_d
    parts = [decider.signatures.signatures(known_slot)]
    sig_at[known_k] = np.arange(len(known_k))
    if need_k.size:
        need = uniq[need_k].tolist()
        made = minhash_signatures(decider.verifier, [rows[r].text for r in need], plan.hashes)[0]
        decider.signatures.put(need, made)
        sig_at[need_k] = np.arange(len(known_k), len(known_k) + need_k.size)
        parts.append(made)
    stored_sig = np.concatenate(parts) if len(parts) > 1 else parts[0]
    # the (query, row) pairs to filter: a signature known, not already a SimHash hit
    b_q = np.repeat(np.arange(n, dtype=np.int64), counts)
    k_all = sig_at[inv]
    sel = k_all >= 0
    h_q = np.repeat(np.arange(n, dtype=np.int64), np.diff(lims))
    if hit_rids.size:
        sel &= ~np.isin(b_q * top + b_r, h_q * top + hit_rids.astype(np.int64))
    q_of, k_of, r_of = b_q[sel], k_all[sel], b_r[sel]
    ok = np.zeros(q_of.size, np.bool_)
    for lo in range(0, q_of.size, FILTER_BLOCK):
        hi = lo + FILTER_BLOCK
        ok[lo:hi] = agreeing(stored_sig, k_of[lo:hi], sig, q_of[lo:hi], plan)
    pq, pr = q_of[ok], r_of[ok]
    # the rows that passed: read if not read yet (one the store no longer returns is none)
    upr = unique_sorted(pr)
    upl = upr.tolist()
    unread = {r for r in upl if r not in rows}
    if unread:
        rows.update(decider.store.fetch(unread, with_text=True))
    valid = np.zeros(upr.size, np.bool_)
    words = np.zeros((upr.size, 2), np.uint64)
    for k, r in enumerate(upl):
        row = rows.get(r)
        if row is not None and row.text is not None:
            valid[k] = True
            words[k, 0] = int.from_bytes(row.fp[:8], "little")
            words[k, 1] = int.from_bytes(row.fp[8:], "little")
    pk = np.searchsorted(upr, pr)
    keep = valid[pk]
    pq, pr, pk = pq[keep], pr[keep], pk[keep]
    if decider.bits == 64:
        dist = np.bitwise_count(fps[pq] ^ words[pk, 0])
    else:
        dist = np.bitwise_count(fps[pq, 0] ^ words[pk, 0]) + np.bitwise_count(
            fps[pq, 1] ^ words[pk, 1]
        )
    # each query's hits first, then its band rows (ascending), as the loop appends them
    q_all = np.concatenate([h_q, pq])
    order = np.argsort(q_all, kind="stable")
    new_lims = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(q_all, minlength=n), out=new_lims[1:])
    out_r = np.concatenate([hit_rids.astype(np.int64), pr])[order]
    out_d = np.concatenate([hit_d.astype(np.int32), dist.astype(np.int32)])[order]
    return new_lims, out_r, out_d
