"""MinHash-LSH candidates: near-duplicate pairs whose candidate probability depends only on the
pair's similarity, never on the corpus size.

SimHash puts edited short texts 10-18 bits apart, and an exact Hamming search at radius r costs
C(64, r)-ish or O(N^2); a work budget then has to lower r as N grows, and recall falls with N.
MinHash banding does not: a pair whose token-bigram sets have Jaccard similarity ``J`` shares at
least one of ``bands`` band keys (``rows`` MinHash values each) with probability
``1 - (1 - J**rows)**bands`` (the S-curve, :func:`candidate_probability`), whatever else is in the
corpus, and the work is linear: one signature per document, one sort-free bucketing per band,
plus the pairs that collide.

Signatures (``(n, hashes)`` uint16, b-bit MinHash of the texts' token bigrams) and band keys
are made in :mod:`neardup.fingerprint.minhash`; their names stay importable from here.

Candidate pairs (:func:`lsh_pairs`): per band the ``rows`` values are packed into one key; keys
that occur once are set aside by a bincount over hashed key bits (linear), the rest are sorted
and grouped, and every group yields its pairs. A pair is kept when its signatures agree on at
least ``min_agreement`` of all the hashes (an estimate of ``J`` with standard error
``sqrt(J (1 - J) / hashes)``: it discards the pairs that collided in one band by chance before
they cost a verification). Groups larger than ``bucket_cap`` (a template repeated with small
changes a million times) pair each member with the group's first ``bucket_cap`` members and its
``bucket_cap`` predecessors instead of with every member, and only in the first band where
the member falls in such a group; the pairs given up are counted.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numba
import numpy as np
import numpy.typing as npt

from .. import _jit  # noqa: F401  (before any @njit: kernels cached outside the package)
from .._threads import numba_threads
from ..errors import ConfigError
from ..fingerprint.minhash import (
    BAND_BLOCK,
    NO_SIGNATURE,
    band_key_block,
    band_keys,
    minhash_signatures,
    minhash_signatures_reference,
    mix64,
)

__all__ = [
    "BAND_BLOCK",
    "DEFAULT_THRESHOLD",
    "NO_SIGNATURE",
    "LshPlan",
    "candidate_probability",
    "group_pairs",
    "lsh_pairs",
    "lsh_pairs_reference",
    "minhash_signatures",
    "minhash_signatures_reference",
    "plan_lsh",
    "shingle_jaccard",
]

#: default similarity the channel is planned for: pairs at least this similar (token edit
#: similarity) become candidates with probability >= PLAN_RECALL
DEFAULT_THRESHOLD = 0.8
#: candidate probability the plan guarantees at the threshold's modelled Jaccard
PLAN_RECALL = 0.99
#: most MinHash values per document the planner uses (memory: 2 bytes each)
MAX_HASHES = 128
#: fewest rows per band the planner uses: with 2, unrelated texts that share common word pairs
#: (Jaccard ~0.05) collide with probability ~b/400 per pair, which grows with N^2
MIN_ROWS = 3
#: default bucket size from which a band's group is paired by window instead of all pairs
DEFAULT_BUCKET_CAP = 32


# ---------------------------------------------------------------------------------------------
# the plan: S-curve, bands and rows


def shingle_jaccard(similarity: float) -> float:
    """Modelled token-bigram Jaccard of two texts at token edit similarity ``similarity``.

    If a fraction ``s`` of the tokens survive scattered edits, a bigram survives when both its
    tokens do (``s**2`` of them), and the Jaccard of the bigram sets is ``s**2 / (2 - s**2)``
    (0.47 at 0.8: the development set's near-duplicates, labelled at edit similarity >= 0.8,
    have bigram Jaccard >= 0.46 at the 1st percentile).
    """
    s2 = float(similarity) ** 2
    return s2 / (2.0 - s2)


def candidate_probability(jaccard: npt.ArrayLike, bands: int, rows: int) -> npt.NDArray[np.float64]:
    """The S-curve: probability that a pair at bigram Jaccard ``jaccard`` shares a band key,
    ``1 - (1 - J**rows)**bands``."""
    j = np.asarray(jaccard, dtype=np.float64)
    return 1.0 - (1.0 - j**rows) ** bands


@dataclass(frozen=True)
class LshPlan:
    """Bands, rows and filters of the MinHash channel (:func:`plan_lsh`)."""

    threshold: float
    jaccard: float
    bands: int
    rows: int
    min_agreement: int
    bucket_cap: int
    probability: float

    @property
    def hashes(self) -> int:
        return self.bands * self.rows

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "hashes": self.hashes}


def plan_lsh(
    threshold: float = DEFAULT_THRESHOLD,
    *,
    bands: int | None = None,
    rows: int | None = None,
    bucket_cap: int = DEFAULT_BUCKET_CAP,
    max_hashes: int = MAX_HASHES,
) -> LshPlan:
    """Bands and rows for pairs at least ``threshold`` similar.

    The modelled Jaccard ``J = shingle_jaccard(threshold)``; ``rows`` (default: the largest
    >= MIN_ROWS whose bands fit ``max_hashes``) and ``bands`` (default: the fewest giving
    ``candidate_probability(J) >= PLAN_RECALL``, at most ``max_hashes // rows``). The agreement
    filter keeps pairs whose signatures agree on at least ``J - 4 sigma`` of the hashes.
    Expert overrides ``bands`` / ``rows`` are used as given.
    """
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise ConfigError(f"threshold must be a number in (0, 1], got {threshold!r}")
    if not 0.0 < threshold <= 1.0:
        raise ConfigError(
            f"threshold must be in (0, 1] (token edit similarity), got {threshold!r}; "
            f"{DEFAULT_THRESHOLD} is the default"
        )
    for name, v in (("bands", bands), ("rows", rows)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 512):
            raise ConfigError(f"lsh_{name} must be an int in [1, 512] or None, got {v!r}")
    if isinstance(bucket_cap, bool) or not isinstance(bucket_cap, int) or bucket_cap < 1:
        raise ConfigError(f"lsh_bucket_cap must be an int >= 1, got {bucket_cap!r}")
    j = shingle_jaccard(threshold)

    def need(r: int) -> int:
        p = j**r
        if p >= 1.0:
            return 1
        return max(1, math.ceil(math.log(1.0 - PLAN_RECALL) / math.log1p(-p)))

    if rows is None:
        r = MIN_ROWS
        if bands is None:
            # the steepest curve (most rows) whose needed bands fit the hash budget
            for cand in range(8, MIN_ROWS - 1, -1):
                if need(cand) * cand <= max_hashes:
                    r = cand
                    break
        else:
            r = max(MIN_ROWS, max_hashes // bands) if bands * MIN_ROWS <= max_hashes else MIN_ROWS
    else:
        r = rows
    b = bands if bands is not None else min(need(r), max(1, max_hashes // r))
    if b * r > 1024:
        raise ConfigError(f"lsh_bands * lsh_rows must be <= 1024 MinHash values, got {b * r}")
    h = b * r
    sigma = math.sqrt(j * (1.0 - j) / h)
    agree = max(r, math.floor(h * max(0.0, j - 4.0 * sigma)))
    return LshPlan(
        threshold=float(threshold),
        jaccard=round(j, 4),
        bands=b,
        rows=r,
        min_agreement=int(min(agree, h)),
        bucket_cap=bucket_cap,
        probability=round(float(candidate_probability(j, b, r)), 4),
    )


# ---------------------------------------------------------------------------------------------
# candidate pairs


def _groups(keys: npt.NDArray[np.uint64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Rows whose key occurs at least twice, grouped: ``(members int64, group_start int64)``;
    members sorted by (key, row), ``group_start`` the first index of each group (and the end).

    Linear pre-filter: a bincount over ~4n buckets of the mixed key's top bits sets aside the
    rows alone in their bucket (most rows, most bands); only the rest is sorted."""
    n = keys.size
    bits = max(10, min(26, (4 * max(n, 1) - 1).bit_length()))
    top = (mix64(keys) >> np.uint64(64 - bits)).astype(np.int64)
    cnt = np.bincount(top, minlength=1 << bits)
    rows = np.flatnonzero(cnt[top] > 1)
    if rows.size < 2:
        return np.zeros(0, np.int64), np.zeros(1, np.int64)
    k = keys[rows]
    order = np.argsort(k, kind="stable")  # rows ascending within a key
    rows, k = rows[order], k[order]
    new = np.ones(rows.size, bool)
    new[1:] = k[1:] != k[:-1]
    start = np.flatnonzero(new)
    size = np.diff(np.append(start, rows.size))
    multi = size > 1
    keep = np.repeat(multi, size)
    rows = rows[keep]
    size = size[multi]
    bounds = np.zeros(size.size + 1, np.int64)
    np.cumsum(size, out=bounds[1:])
    return rows.astype(np.int64), bounds


def _thin_big_groups(
    members: npt.NDArray[np.int64],
    bounds: npt.NDArray[np.int64],
    cap: int,
    done: npt.NDArray[np.bool_],
    was_big_out: list[npt.NDArray[np.bool_]] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
    """Groups of more than ``cap + 1`` members keep their first ``cap`` members (the anchors)
    and the members not yet paired in a large group of an earlier band (``done``, updated):
    a template's near copies fill a large bucket in nearly every band, and pairing each of them
    with ``2 cap`` others once is the bound, not once per band. Returns (members, bounds, the
    number of pairs inside the large groups before thinning). ``was_big_out`` (optional)
    receives a mask of the members returned whose group was large before thinning."""
    size = np.diff(bounds)
    big = np.flatnonzero(size > cap + 1)
    if not big.size:
        if was_big_out is not None:
            was_big_out.append(np.zeros(members.size, np.bool_))
        return members, bounds, 0
    member_big = np.repeat(size > cap + 1, size)
    total = int((size[big] * (size[big] - 1) // 2).sum())
    keep = np.ones(members.size, bool)
    for g in big.tolist():
        s0, e0 = int(bounds[g]), int(bounds[g + 1])
        rest = members[s0 + cap : e0]
        keep[s0 + cap : e0] = ~done[rest]
        done[members[s0:e0][keep[s0:e0]]] = True
    gid = np.repeat(np.arange(size.size), size)[keep]
    members = members[keep]
    cnt = np.bincount(gid, minlength=size.size)
    members = members[cnt[gid] > 1]  # groups thinned to one member go
    if was_big_out is not None:
        was_big_out.append(member_big[keep][cnt[gid] > 1])
    size = cnt[cnt > 1]
    bounds = np.zeros(size.size + 1, np.int64)
    np.cumsum(size, out=bounds[1:])
    return members, bounds, total


def group_pairs(
    members: npt.NDArray[np.int64],
    bounds: npt.NDArray[np.int64],
    cap: int,
    big_out: list[npt.NDArray[np.bool_]] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
    """Pairs (earlier row, later row) inside each group: all of them for groups of up to
    ``cap + 1`` members; for larger groups each member with its ``cap`` predecessors and with the
    group's first ``cap`` members. Returns (a, b, pairs made inside the large groups);
    ``big_out`` (optional) receives a mask of the pairs made inside a large group."""
    if bounds.size < 2:
        if big_out is not None:
            big_out.append(np.zeros(0, np.bool_))
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    size = np.diff(bounds)
    gid = np.repeat(np.arange(size.size), size)
    idx_in = np.arange(members.size) - bounds[gid]
    member_big = (size > cap + 1)[gid]
    out_a, out_b, out_big = [], [], []
    longest = int(size.max())
    for t in range(1, min(longest - 1, cap) + 1):  # partner t places back, same group
        sel = np.flatnonzero(idx_in >= t)
        out_a.append(members[sel - t])
        out_b.append(members[sel])
        out_big.append(member_big[sel])
    big = np.flatnonzero(size > cap + 1)
    made = 0
    if big.size:
        for g in big.tolist():  # anchors: the group's first cap members (few groups)
            s, e = int(bounds[g]), int(bounds[g + 1])
            for q in range(cap):  # members more than cap places after anchor q
                later = members[s + q + cap + 1 : e]
                out_a.append(np.full(later.size, members[s + q], np.int64))
                out_b.append(later)
                out_big.append(np.ones(later.size, np.bool_))
        m = size[big]
        made = int((cap * m - cap * (cap + 1) // 2).sum())  # window pairs
        made += int((cap * (m - cap - 1) - cap * (cap - 1) // 2).sum())  # anchor pairs
    if not out_a:
        if big_out is not None:
            big_out.append(np.zeros(0, np.bool_))
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    a, b = np.concatenate(out_a), np.concatenate(out_b)
    if big_out is not None:
        big_out.append(np.concatenate(out_big))
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    return lo, hi, made


@numba.njit(cache=True, parallel=True)
def _agreement_kernel(
    sig: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover - numba
    h = sig.shape[1]
    for k in numba.prange(a.shape[0]):
        x = a[k]
        y = b[k]
        c = 0
        for p in range(h):
            c += sig[x, p] == sig[y, p]
        out[k] = c


def _agreement(
    sig: npt.NDArray[np.uint16],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    workers: int = 1,
) -> npt.NDArray[np.int64]:
    """Number of equal MinHash values of each pair (numba: a row gather and compare without the
    temporaries of :func:`_agreement_reference`; the candidates stage of
    benchmarks/bench_dedup.py measures it)."""
    out = np.empty(a.size, np.int64)
    if a.size:
        with numba_threads(workers):
            _agreement_kernel(sig, a, b, out)
    return out


def _agreement_reference(
    sig: npt.NDArray[np.uint16], a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Number of equal MinHash values of each pair (NumPy, in blocks that bound the gathers)."""
    out = np.empty(a.size, np.int64)
    step = max(1, (32 << 20) // max(1, 2 * sig.shape[1]))
    for s in range(0, a.size, step):
        out[s : s + step] = (sig[a[s : s + step]] == sig[b[s : s + step]]).sum(axis=1)
    return out


def lsh_pairs(
    sig: npt.NDArray[np.uint16],
    usable: npt.NDArray[np.bool_],
    plan: LshPlan,
    info: dict[str, Any] | None = None,
    workers: int = 1,
    capped_out: list[npt.NDArray[np.bool_]] | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Candidate pairs ``(a, b)``, ``a < b``, sorted and unique, among ``usable`` rows of
    ``sig``: rows sharing a band key whose signatures agree on ``>= plan.min_agreement`` values.
    Equals :func:`lsh_pairs_reference` when no group exceeds the cap (tested). ``info`` gets
    ``raw_pairs`` (band collisions), ``pairs``, ``capped_buckets`` and ``pairs_skipped``.

    ``capped_out`` (optional) receives one bool mask over the returned pairs: True for a pair
    found only inside capped (larger than ``bucket_cap + 1``) buckets, i.e. only because of a
    pathological bucket (:func:`neardup.batch.run.verify_in_chunks` verifies those lazily).
    ``progress(bands done)`` (optional) is called after each band."""
    idx = np.flatnonzero(usable).astype(np.int64)
    s = sig[idx]
    parts_a, parts_b = [], []
    big_codes: list[npt.NDArray[np.int64]] = []
    raw = capped = skipped = 0
    n = idx.size
    done = np.zeros(n, bool)  # rows already paired inside a large group
    block = np.zeros((0, n), np.uint64)
    for band in range(plan.bands):
        if plan.rows > 4:
            keys = band_keys(s, band, plan.rows)
        else:
            if band % BAND_BLOCK == 0:
                block = band_key_block(s, band, min(plan.bands, band + BAND_BLOCK), plan.rows)
            keys = block[band % BAND_BLOCK]
        members, bounds = _groups(keys)
        if progress is not None and band:
            progress(band)
        if bounds.size < 2:
            continue
        capped += int((np.diff(bounds) > plan.bucket_cap + 1).sum())
        was_big: list[npt.NDArray[np.bool_]] = []
        members, bounds, in_big = _thin_big_groups(members, bounds, plan.bucket_cap, done, was_big)
        big: list[npt.NDArray[np.bool_]] = []
        a, b, made = group_pairs(members, bounds, plan.bucket_cap, big)
        skipped += max(0, in_big - made)
        raw += int(a.size)
        ok = _agreement(s, a, b, workers) >= plan.min_agreement
        if capped_out is not None and was_big[0].any():  # groups thinned below the cap too
            gid = np.repeat(np.arange(bounds.size - 1), np.diff(bounds))
            group_was_big = np.zeros(bounds.size - 1, np.bool_)
            group_was_big[gid[was_big[0]]] = True
            gid_of_row = np.zeros(n, np.int64)  # each row is in one group of a band
            gid_of_row[members] = gid
            big[0] |= group_was_big[gid_of_row[a]]
        in_big_group = big[0][ok]
        a, b = a[ok], b[ok]
        if a.size:  # unique per band keeps the pile small when bands agree on many pairs
            if capped_out is not None and in_big_group.any():
                big_codes.append(np.unique(a[in_big_group] * n + b[in_big_group]))
                a, b = a[~in_big_group], b[~in_big_group]
            code = np.unique(a * n + b)
            parts_a.append(code // n)
            parts_b.append(code % n)
    ordinary = (
        np.unique(np.concatenate(parts_a) * n + np.concatenate(parts_b))
        if parts_a
        else np.zeros(0, np.int64)
    )
    only_capped = np.zeros(ordinary.size, np.bool_)
    if big_codes:  # pairs met only in capped buckets
        extra = np.setdiff1d(np.concatenate(big_codes), ordinary)
        code = np.concatenate([ordinary, extra])
        only_capped = np.concatenate([only_capped, np.ones(extra.size, np.bool_)])
        order = np.argsort(code, kind="stable")
        code, only_capped = code[order], only_capped[order]
    else:
        code = ordinary
    a, b = idx[code // n], idx[code % n]
    if capped_out is not None:
        capped_out.append(only_capped)
    if info is not None:
        info.update(
            {
                **plan.to_dict(),
                "docs": int(n),
                "raw_pairs": raw,
                "pairs": int(a.size),
                "capped_buckets": capped,
                # an upper bound: a pair in large groups of several bands counts in each
                "pairs_skipped": min(skipped, n * (n - 1) // 2),
            }
        )
    return a, b


def lsh_pairs_reference(
    sig: npt.NDArray[np.uint16], usable: npt.NDArray[np.bool_], plan: LshPlan
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Reference for :func:`lsh_pairs` (no cap): dict buckets per band, every pair of a bucket,
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
