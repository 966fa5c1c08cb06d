"""MinHash-LSH candidates: near-duplicate pairs whose candidate probability depends only on the
pair's similarity, never on the corpus size.

SimHash puts edited short texts 10-18 bits apart, and an exact Hamming search at radius r costs
C(64, r)-ish or O(N^2); a work budget then has to lower r as N grows, and recall falls with N.
MinHash banding does not: a pair whose token-bigram sets have Jaccard similarity ``J`` shares at
least one of ``bands`` band keys (``rows`` MinHash values each) with probability
``1 - (1 - J**rows)**bands`` (the S-curve, :func:`candidate_probability`), whatever else is in the
corpus, and the work is linear: one signature per document, one sort-free bucketing per band,
plus the pairs that collide. The plan (:func:`plan_lsh`) is made for the least bigram Jaccard of
a pair at the threshold (:func:`shingle_jaccard`: texts of at least ``PROMISE_MIN_TOKENS``
tokens, one made from the other by scattered one-token substitutions), so such pairs are found
with probability >= ``PLAN_RECALL`` however short the texts; :func:`plan_promise` says what a
plan promises and :func:`plan_warnings` when it cannot.

Signatures (``(n, hashes)`` uint16, b-bit MinHash of the texts' token bigrams) and band keys
are made in :mod:`neardup.fingerprint.minhash`; their names stay importable from here.

Candidate pairs (:func:`lsh_pairs`): per band the ``rows`` values are packed into one key; keys
that occur once are set aside by a bincount over hashed key bits (linear), the rest are sorted
and grouped, and every group yields its pairs. A pair is kept when its signatures agree on at
least ``min_agreement`` of all the hashes (an estimate of ``J`` with standard error
``sqrt(J (1 - J) / hashes)``: it discards the pairs that collided in one band by chance before
they cost a verification). Every pair of a group is compared (in a numba kernel that keeps the
group's rows in cache and materialises only the agreeing pairs) while the band's pairs fit its
budget (``band_pairs_per_doc`` per document); a band over it (a template repeated with small
changes a million times) pairs the members of its largest groups with the group's first
``cap`` members and their ``cap`` predecessors instead, the cap chosen to fit the budget (at
least ``bucket_cap``), once per member over the bands; the pairs given up are counted and the
candidates among them estimated by sampling.
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
from .._arrays import unique_sorted
from .._threads import numba_threads
from ..errors import ConfigError, UnsupportedVersionError
from ..fingerprint.minhash import (
    BAND_BLOCK,
    NO_SIGNATURE,
    SIGNATURE_SCHEME,
    band_key_block,
    band_keys,
    minhash_signatures,
    minhash_signatures_reference,
)
from ..verify.rule import DEFAULT_THRESHOLD as _VERIFIER_THRESHOLD

__all__ = [
    "BAND_BLOCK",
    "DEFAULT_BAND_PAIRS_PER_DOC",
    "DEFAULT_BUCKET_CAP",
    "DEFAULT_THRESHOLD",
    "NO_SIGNATURE",
    "PLAN_RECALL",
    "PROMISE_MIN_TOKENS",
    "LshPlan",
    "agreeing_group_pairs",
    "candidate_probability",
    "group_pairs",
    "lsh_pairs",
    "lsh_pairs_reference",
    "minhash_signatures",
    "minhash_signatures_reference",
    "pairs_per_group",
    "plan_lsh",
    "plan_promise",
    "plan_warnings",
    "shingle_jaccard",
    "signature_words",
    "valve_cap",
]

#: default threshold: texts at least this similar (token similarity, the verifier's measure)
#: are near duplicates; the one default of the verifier, the plan and every front-end
DEFAULT_THRESHOLD = _VERIFIER_THRESHOLD
#: candidate probability the plan guarantees at the threshold's least Jaccard
PLAN_RECALL = 0.99
#: shortest text (tokens) the promise covers: below it one substitution already costs more than
#: the threshold allows, or breaks every bigram
PROMISE_MIN_TOKENS = 6
#: MinHash values per document the planner prefers: it takes the most rows whose needed bands
#: fit in this many values ...
PREFERRED_HASHES = 128
#: ... and, when no number of rows does, three rows with up to this many values (memory: 2
#: bytes each per document in a batch, the online store 8 bytes per band)
MAX_HASHES = 256
#: fewest rows per band the planner uses: with 2, unrelated texts that share common word pairs
#: (Jaccard ~0.05) collide with probability ~b/400 per pair, which grows with N^2
MIN_ROWS = 3
#: the bucket cap's floor: a band bucket of up to ``cap + 1`` documents is always paired in full
DEFAULT_BUCKET_CAP = 32
#: default band budget: a band's buckets are paired in full while their pairs number at most
#: this many per document of the band; only a band over it thins its largest buckets (the valve).
#: Crowded buckets of ordinary text are keys won by frequent bigrams ("of the"), whose size grows
#: with the corpus: a fixed cap fired on every ordinary corpus of ~100 k short posts or more
#: (docs/dedup.md, "The bucket valve"); the budget keeps the band's work linear in its documents
DEFAULT_BAND_PAIRS_PER_DOC = 16
#: pairs sampled from each thinned bucket to estimate the candidates the valve gave up
VALVE_SAMPLE = 64


# ---------------------------------------------------------------------------------------------
# the plan: S-curve, bands and rows


def _edits_jaccard(n: npt.NDArray[np.int64], similarity: float) -> npt.NDArray[np.float64]:
    """Token-bigram Jaccard of a text of ``n`` tokens and a copy with ``e`` scattered one-token
    substitutions, the most at token similarity ``>= similarity`` (``e = floor((1 - s) n)``):
    each substitution away from the ends and from the others breaks two bigrams, so ``n - 1 -
    2e`` of the ``n - 1`` bigrams are shared, ``(n - 1 - 2e) / (n - 1 + 2e)``."""
    e = np.floor((1.0 - float(similarity)) * n + 1e-9)
    shared = np.maximum(n - 1 - 2 * e, 0)
    return shared / (n - 1 + 2 * e)


def shingle_jaccard(similarity: float) -> float:
    """The least token-bigram Jaccard of two texts at token similarity ``similarity``: texts of
    at least ``PROMISE_MIN_TOKENS`` tokens, one made from the other by scattered one-token
    substitutions (each breaks the two bigrams around it; :func:`_edits_jaccard`), minimised
    over the length. Short texts set it: 0.385 at 0.8 (10 tokens, 2 substitutions: 5 of 13
    bigrams shared), where long texts tend to ``(2s - 1) / (3 - 2s)`` (0.429) and randomly
    placed edits to ``s**2 / (2 - s**2)`` (0.47: adjacent edits break fewer bigrams). 0 at 0.5
    and below: alternate tokens replaced leave no bigram.
    """
    n = np.arange(PROMISE_MIN_TOKENS, 20_000, dtype=np.int64)
    return float(_edits_jaccard(n, similarity).min())


def candidate_probability(jaccard: npt.ArrayLike, bands: int, rows: int) -> npt.NDArray[np.float64]:
    """The S-curve: probability that a pair at bigram Jaccard ``jaccard`` shares a band key,
    ``1 - (1 - J**rows)**bands``."""
    j = np.asarray(jaccard, dtype=np.float64)
    return 1.0 - (1.0 - j**rows) ** bands


@dataclass(frozen=True)
class LshPlan:
    """Bands, rows and filters of the MinHash channel (:func:`plan_lsh`).

    ``jaccard`` is the least bigram Jaccard of a pair at ``threshold`` (:func:`shingle_jaccard`)
    and ``probability`` the candidate probability there; ``signature`` the signature scheme the
    band keys are made with (:data:`neardup.fingerprint.minhash.SIGNATURE_SCHEME`)."""

    threshold: float
    jaccard: float
    bands: int
    rows: int
    min_agreement: int
    bucket_cap: int
    probability: float
    #: the band budget (pairs per document of the band; None: every bucket paired in full)
    band_pairs_per_doc: int | None = DEFAULT_BAND_PAIRS_PER_DOC
    #: the signature scheme the plan's band keys are made with
    signature: str = SIGNATURE_SCHEME
    #: the shortest text (tokens) the promise covers
    min_tokens: int = PROMISE_MIN_TOKENS

    @property
    def hashes(self) -> int:
        return self.bands * self.rows

    @property
    def promised(self) -> bool:
        """Whether pairs at the threshold are found with probability >= ``PLAN_RECALL``."""
        return self.probability >= PLAN_RECALL

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "hashes": self.hashes}

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, where: str = "the stored plan") -> LshPlan:
        """The plan of :meth:`to_dict`'s output (``hashes`` is derived), e.g. a store's.

        Raises
        ------
        UnsupportedVersionError
            ``d`` was made with another signature scheme (or before schemes were recorded):
            its band keys mean something else, so they cannot be matched with this build's."""
        kept = d.get("signature")
        if kept != SIGNATURE_SCHEME:
            made = f"signature scheme {kept!r}" if kept else "an earlier signature scheme"
            raise UnsupportedVersionError(
                f"{where}: its MinHash band keys were made with {made}, and this build makes "
                f"{SIGNATURE_SCHEME!r}: the stored keys cannot be matched against new ones. "
                "Deduplicate into a new data directory (or re-add the documents there)"
            )
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})


def plan_lsh(
    threshold: float = DEFAULT_THRESHOLD,
    *,
    bands: int | None = None,
    rows: int | None = None,
    bucket_cap: int = DEFAULT_BUCKET_CAP,
    max_hashes: int = MAX_HASHES,
    band_pairs_per_doc: int | None = DEFAULT_BAND_PAIRS_PER_DOC,
) -> LshPlan:
    """Bands and rows for pairs at least ``threshold`` similar.

    The least Jaccard of such a pair ``J = shingle_jaccard(threshold)``; ``rows`` (default:
    the most >= MIN_ROWS whose needed bands fit ``PREFERRED_HASHES`` values, else MIN_ROWS) and
    ``bands`` (default: the fewest giving ``candidate_probability(J) >= PLAN_RECALL``, at most
    ``max_hashes // rows``). The agreement filter keeps pairs whose signatures agree on at
    least ``J - 4 sigma`` of the hashes. Expert overrides ``bands`` / ``rows`` are used as
    given. ``bucket_cap`` (the cap's floor) and ``band_pairs_per_doc`` (the band budget) set
    the bucket valve (:func:`valve_cap`).
    """
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise ConfigError(f"threshold must be a number in (0, 1], got {threshold!r}")
    if not 0.0 < threshold <= 1.0:
        raise ConfigError(
            f"threshold must be in (0, 1] (token similarity), got {threshold!r}; "
            f"{DEFAULT_THRESHOLD} is the default"
        )
    for name, v in (("bands", bands), ("rows", rows)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 512):
            raise ConfigError(f"lsh_{name} must be an int in [1, 512] or None, got {v!r}")
    if isinstance(bucket_cap, bool) or not isinstance(bucket_cap, int) or bucket_cap < 1:
        raise ConfigError(f"lsh_bucket_cap must be an int >= 1, got {bucket_cap!r}")
    if band_pairs_per_doc is not None and (
        isinstance(band_pairs_per_doc, bool)
        or not isinstance(band_pairs_per_doc, int)
        or band_pairs_per_doc < 1
    ):
        raise ConfigError(
            "lsh_band_pairs_per_doc must be an int >= 1 (pairs per document of a band) or None "
            f"(no budget: every bucket paired in full), got {band_pairs_per_doc!r}"
        )
    j = shingle_jaccard(threshold)

    def need(r: int) -> int:
        p = j**r
        if p >= 1.0:
            return 1
        if p <= 0.0:  # no bigram survives: no number of bands finds the pair
            return 1 << 30
        return max(1, math.ceil(math.log(1.0 - PLAN_RECALL) / math.log1p(-p)))

    if rows is None:
        r = MIN_ROWS
        if bands is None:
            # the steepest curve (most rows) whose needed bands fit the preferred hash budget
            for cand in range(8, MIN_ROWS - 1, -1):
                if need(cand) * cand <= min(PREFERRED_HASHES, max_hashes):
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
        band_pairs_per_doc=band_pairs_per_doc,
    )


def plan_promise(plan: LshPlan | None) -> dict[str, Any]:
    """What a run's candidates promise (``stats["promise"]``, the summary's ``promise``): pairs
    of texts of at least ``min_tokens`` tokens, one made from the other by scattered one-token
    edits, at similarity ``>= threshold``, found with ``probability`` (``kept``: whether that is
    at least ``PLAN_RECALL``). ``None`` (``candidates="simhash"``): nothing is promised."""
    if plan is None:
        return {
            "kept": False,
            "target": PLAN_RECALL,
            "reason": "candidates='simhash': SimHash distances under the work budget, whose "
            "recall depends on the texts and falls as the corpus grows; the MinHash channel "
            "(candidates='lsh', the default) makes the promise",
        }
    return {
        "kept": plan.promised,
        "target": PLAN_RECALL,
        "threshold": plan.threshold,
        "min_tokens": plan.min_tokens,
        "jaccard": plan.jaccard,
        "probability": plan.probability,
        "bands": plan.bands,
        "rows": plan.rows,
    }


def plan_warnings(plan: LshPlan | None) -> list[str]:
    """The warnings a run with ``plan`` must give (none for a plan that keeps the promise, so
    none on defaults): a planned candidate probability below ``PLAN_RECALL`` at the
    threshold."""
    if plan is None or plan.promised:
        return []
    t = plan.threshold
    if plan.jaccard <= 0.0:
        why = (
            f"at similarity {t:g} scattered one-token edits can leave two texts no token pair "
            "(bigram) in common, so no MinHash plan finds them (the SimHash pass finds some)"
        )
    else:
        why = (
            f"{plan.bands} bands x {plan.rows} rows reach that at the least bigram Jaccard of "
            f"such pairs ({plan.jaccard:g})"
        )
    return [
        f"the MinHash candidates find pairs at similarity {t:g} (texts of {plan.min_tokens}+ "
        f"tokens with scattered one-token edits) with probability {plan.probability:.3f}, below "
        f"the {PLAN_RECALL} a plan promises: {why}; near duplicates at that similarity may be "
        "missed (a higher --threshold, or DedupConfig lsh_bands/lsh_rows that reach 0.99)"
    ]


# ---------------------------------------------------------------------------------------------
# candidate pairs


@numba.njit(cache=True)
def _shared_bucket_rows(keys: np.ndarray, bits: int) -> np.ndarray:  # pragma: no cover - numba
    # the rows whose mixed key's top ``bits`` bits are those of another row: a saturating
    # one-byte count per bucket, then the rows of buckets counted twice (ascending)
    n = keys.shape[0]
    shift = np.uint64(64 - bits)
    cnt = np.zeros(1 << bits, np.uint8)
    top = np.empty(n, np.uint32)
    for i in range(n):
        x = keys[i]
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
        t = np.uint32(x >> shift)
        top[i] = t
        if cnt[t] < 2:
            cnt[t] += 1
    m = 0
    for i in range(n):
        m += cnt[top[i]] > 1
    rows = np.empty(m, np.int64)
    m = 0
    for i in range(n):
        if cnt[top[i]] > 1:
            rows[m] = i
            m += 1
    return rows


def _groups(keys: npt.NDArray[np.uint64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Rows whose key occurs at least twice, grouped: ``(members int64, group_start int64)``;
    members sorted by (key, row), ``group_start`` the first index of each group (and the end).

    Linear pre-filter: a count over ~4n buckets of the mixed key's top bits sets aside the rows
    alone in their bucket (most rows, most bands); only the rest is sorted."""
    n = keys.size
    bits = max(10, min(26, (4 * max(n, 1) - 1).bit_length()))
    rows = _shared_bucket_rows(np.ascontiguousarray(keys), bits)
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
    return rows, bounds


def _thin_big_groups(
    members: npt.NDArray[np.int64],
    bounds: npt.NDArray[np.int64],
    cap: int,
    here: npt.NDArray[np.bool_],
    was_big_out: list[npt.NDArray[np.bool_]] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
    """Groups of more than ``cap + 1`` members keep their first ``cap`` members (the anchors)
    and the members whose band this is (``here``, by row: each member of a large group is
    paired in one band only, :func:`_valve_bands`): a template's near copies fill a large
    bucket in nearly every band, and pairing each of them with ``2 cap`` others once is the
    bound, not once per band. Returns (members, bounds, the number of pairs inside the large
    groups before thinning). ``was_big_out`` (optional) receives a mask of the members
    returned whose group was large before thinning."""
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
        keep[s0 + cap : e0] = here[members[s0 + cap : e0]]
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


def _choose_bands(
    members: npt.NDArray[np.int64],
    bounds: npt.NDArray[np.int64],
    cap: int,
    band: int,
    best_anchor: npt.NDArray[np.int64],
    best_band: npt.NDArray[np.int64],
) -> None:
    """The band each member of a large group is paired in (``best_band``, updated band after
    band): the band where its group's first member (the least row: the bucket's first anchor)
    is least, the first such band on ties. A member is paired with its thinned group's anchors
    in one band only, so that band's anchors should reach back furthest: with the first band
    instead, a template's copies whose first thinned bucket missed the template's first copy
    (its edit changed that band) were paired with later copies only, all dropped for the
    first one, and were kept (tests/fingerprint/test_minhash.py)."""
    size = np.diff(bounds)
    big = size > cap + 1
    if not big.any():
        return
    rows = members[np.repeat(big, size)]
    anchor = np.repeat(members[bounds[:-1]][big], size[big])
    better = anchor < best_anchor[rows]
    best_anchor[rows[better]] = anchor[better]
    best_band[rows[better]] = band


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
        made = int(pairs_per_group(size[big], cap).sum())  # window and anchor pairs
    if not out_a:
        if big_out is not None:
            big_out.append(np.zeros(0, np.bool_))
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    a, b = np.concatenate(out_a), np.concatenate(out_b)
    if big_out is not None:
        big_out.append(np.concatenate(out_big))
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    return lo, hi, made


def pairs_per_group(size: npt.NDArray[np.int64], cap: int | None) -> npt.NDArray[np.int64]:
    """Pairs :func:`group_pairs` makes in groups of ``size`` members at ``cap`` (None: all
    pairs): member ``i`` of a group (0-based, rows ascending) is paired with every earlier
    member ``j`` with ``j < cap`` (the anchors) or ``i - j <= cap`` (its predecessors)."""
    s = np.asarray(size, np.int64)
    full = s * (s - 1) // 2
    if cap is None:
        return full
    c = int(cap)
    window = c * s - c * (c + 1) // 2  # sum over i of min(i, c)
    t = np.maximum(s - c - 1, 0)  # anchor q < c pairs with the t - q members past i = q + c
    anchors = np.where(t >= c, c * t - c * (c - 1) // 2, t * (t + 1) // 2)
    return np.where(s > c + 1, window + anchors, full)


def valve_cap(
    size: npt.NDArray[np.int64],
    floor: int,
    budget: int | None,
    count: npt.NDArray[np.int64] | None = None,
) -> int | None:
    """The cap of one band: None (every bucket paired in full) when the pairs of all its
    buckets (``size``: members per bucket) fit ``budget``; otherwise the largest cap ``>=
    floor`` whose pairs (:func:`pairs_per_group`) fit it, and ``floor`` when none does (the
    floor bounds the work at ``2 * floor`` pairs per document whatever the input).
    ``count`` (optional): how many buckets have each ``size`` (a histogram; the same cap as
    ``np.repeat(size, count)``)."""
    size = np.asarray(size, np.int64)
    weight = None if count is None else np.asarray(count, np.int64)

    def pairs(cap: int | None) -> int:
        p = pairs_per_group(size, cap)
        return int(p.sum() if weight is None else (p * weight).sum())

    if weight is not None:
        size = size[weight > 0]
        weight = weight[weight > 0]
    if budget is None or size.size == 0 or pairs(None) <= budget:
        return None
    lo, hi = floor, int(size.max())  # pairs(hi) > budget: hi - 1 >= every group's size - 1
    if pairs(lo) > budget:
        return floor
    while hi - lo > 1:  # pairs(lo) <= budget < pairs(hi); pairs grow with the cap
        mid = (lo + hi) // 2
        if pairs(mid) <= budget:
            lo = mid
        else:
            hi = mid
    return lo


@numba.njit(cache=True, parallel=True)
def _group_agreement_kernel(
    members: np.ndarray,
    bounds: np.ndarray,
    base: np.ndarray,
    cap: int,
    words: np.ndarray,
    need: int,
    ok: np.ndarray,
) -> None:  # pragma: no cover - numba
    # every pair group_pairs makes, in its order per group (i ascending, then j ascending):
    # whether the two signatures agree on >= need values. ``words``: the signatures as uint64
    # words of four 16-bit values; equal lanes counted four at a time, branch-free (SWAR: a lane
    # of x ^ y is zero iff adding 0x7FFF to its low 15 bits does not carry into its top bit and
    # its top bit is 0; the top bits, shifted to each lane's bit 0, are summed per lane). The
    # group's rows are gathered first: its pairs then read one contiguous block, in cache
    w = words.shape[1]
    lo15 = np.uint64(0x7FFF7FFF7FFF7FFF)
    lane = np.uint64(0xFFFF)
    for g in numba.prange(bounds.shape[0] - 1):
        s0 = bounds[g]
        s = bounds[g + 1] - s0
        rows = np.empty((s, w), np.uint64)
        for i in range(s):
            rows[i, :] = words[members[s0 + i], :]
        k = base[g]
        for i in range(1, s):
            for part in range(2):
                j0 = 0 if part == 0 else max(cap, i - cap)
                j1 = min(cap, i) if part == 0 else i
                for j in range(j0, j1):
                    acc = np.uint64(0)
                    for q in range(w):
                        z = rows[i, q] ^ rows[j, q]
                        acc += (~(((z & lo15) + lo15) | z | lo15)) >> np.uint64(15)
                    c = (
                        (acc & lane)
                        + ((acc >> np.uint64(16)) & lane)
                        + ((acc >> np.uint64(32)) & lane)
                        + (acc >> np.uint64(48))
                    )
                    ok[k] = c >= need
                    k += 1


def signature_words(
    sig: npt.NDArray[np.uint16], rows: npt.NDArray[np.int64] | None = None
) -> tuple[npt.NDArray[np.uint64], int]:
    """``sig`` (its ``rows``, default all) as (n, ceil(h / 4)) uint64 words (zero-padded: the
    pad lanes of two rows always agree) and the number of pad lanes, to subtract from an
    agreement count: what :func:`agreeing_group_pairs` takes as ``words``/``pad`` when it is
    called band after band over the same signatures. The rows are gathered in blocks, so no
    copy of ``sig[rows]`` (the size of the words) is made beside them."""
    h = sig.shape[1]
    n = sig.shape[0] if rows is None else rows.size
    w = -(-h // 4)
    buf = np.zeros((n, 4 * w), np.uint16)
    if rows is None:
        buf[:, :h] = sig
    else:
        for c in range(0, n, 1 << 16):
            buf[c : c + (1 << 16), :h] = sig[rows[c : c + (1 << 16)]]
    return buf.view(np.uint64), 4 * w - h


@numba.njit(cache=True)
def _group_pairs_fill(
    members: np.ndarray,
    bounds: np.ndarray,
    cap: int,
    ok: np.ndarray,
    big: np.ndarray,
    out_a: np.ndarray,
    out_b: np.ndarray,
    out_big: np.ndarray,
) -> None:  # pragma: no cover - numba
    k = 0
    w = 0
    for g in range(bounds.shape[0] - 1):
        s0 = bounds[g]
        s = bounds[g + 1] - s0
        for i in range(1, s):
            for part in range(2):
                j0 = 0 if part == 0 else max(cap, i - cap)
                j1 = min(cap, i) if part == 0 else i
                for j in range(j0, j1):
                    if ok[k]:
                        out_a[w] = members[s0 + j]
                        out_b[w] = members[s0 + i]
                        out_big[w] = big[g]
                        w += 1
                    k += 1


def agreeing_group_pairs(
    members: npt.NDArray[np.int64],
    bounds: npt.NDArray[np.int64],
    cap: int | None,
    sig: npt.NDArray[np.uint16],
    min_agree: int,
    group_big: npt.NDArray[np.bool_],
    workers: int = 1,
    words: npt.NDArray[np.uint64] | None = None,
    pad: int = 0,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bool_], int]:
    """The pairs of :func:`group_pairs` (members sorted by row within each group) whose
    signatures agree on ``>= min_agree`` values, without materialising the others: ``(a, b,
    made inside a group flagged in group_big, pairs made)``; a < b. The band budget bounds the
    pairs made, so the one byte per pair this keeps is bounded too."""
    size = np.diff(bounds)
    made = pairs_per_group(size, cap)
    total = int(made.sum())
    if total == 0:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0, np.bool_), 0
    base = np.zeros(size.size, np.int64)
    np.cumsum(made[:-1], out=base[1:])
    c = int(size.max()) if cap is None else int(cap)
    ok = np.empty(total, np.bool_)
    if words is None:
        words, pad = signature_words(sig)
    with numba_threads(workers):
        _group_agreement_kernel(members, bounds, base, c, words, int(min_agree) + pad, ok)
    m = int(ok.sum())
    a, b = np.empty(m, np.int64), np.empty(m, np.int64)
    big = np.empty(m, np.bool_)
    _group_pairs_fill(members, bounds, c, ok, group_big, a, b, big)
    return a, b, big, total


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
    Equals :func:`lsh_pairs_reference` whenever the valve does not act (tested).

    The valve, per band (:func:`valve_cap`): while the pairs of all the band's buckets number
    at most ``plan.band_pairs_per_doc`` per document, every bucket is paired in full; otherwise
    the buckets larger than the band's cap are thinned (:func:`group_pairs`' window and anchors,
    once per document over the bands, in the band whose bucket's first member is least:
    :func:`_choose_bands`, :func:`_thin_big_groups`), and what that gave up is
    estimated by sampling their pairs. ``info`` gets ``raw_pairs`` (band collisions compared),
    ``pairs``, ``band_pairs_budget``, ``valve_bands``, ``bucket_cap_used``,
    ``capped_buckets``, ``pairs_skipped`` (an upper bound), ``valve_lost_pairs_est`` (agreeing
    pairs no band made) and ``valve_recall_loss_est`` (that as a share of the candidates).

    ``capped_out`` (optional) receives one bool mask over the returned pairs: True for a pair
    found only inside thinned buckets, i.e. only because of a crowded bucket (:func:`neardup.batch.run.verify_in_chunks` verifies those lazily).
    ``progress(bands done)`` (optional) is called after each band."""
    idx = np.flatnonzero(usable).astype(np.int64)
    words, pad = signature_words(sig, idx)
    s = words.view(np.uint16)[:, : sig.shape[1]]  # the usable rows' signatures (a view)
    parts_a, parts_b = [], []
    big_codes: list[npt.NDArray[np.int64]] = []
    raw = capped = skipped = valve_bands = 0
    caps_used: list[int] = []
    n = idx.size
    budget = None if plan.band_pairs_per_doc is None else plan.band_pairs_per_doc * max(n, 1)
    sample_codes: list[npt.NDArray[np.int64]] = []
    sample_weights: list[npt.NDArray[np.float64]] = []
    block = np.zeros((0, n), np.uint64)

    def band_groups(band: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        nonlocal block
        if plan.rows > 4:
            keys = band_keys(s, band, plan.rows)
        else:
            if band % BAND_BLOCK == 0:
                block = band_key_block(s, band, min(plan.bands, band + BAND_BLOCK), plan.rows)
            keys = block[band % BAND_BLOCK]
        return _groups(keys)

    def pair(
        members: npt.NDArray[np.int64],
        bounds: npt.NDArray[np.int64],
        cap: int | None,
        group_big: npt.NDArray[np.bool_],
    ) -> None:
        nonlocal raw
        a, b, in_big_group, made = agreeing_group_pairs(
            members, bounds, cap, s, plan.min_agreement, group_big, workers, words, pad
        )
        raw += made
        if a.size:  # unique per band keeps the pile small when bands agree on many pairs
            if capped_out is not None and in_big_group.any():
                big_codes.append(unique_sorted(a[in_big_group] * n + b[in_big_group]))
                a, b = a[~in_big_group], b[~in_big_group]
            code = unique_sorted(a * n + b)
            parts_a.append(code // n)
            parts_b.append(code % n)

    # every band whose buckets fit its budget is paired at once; the bands over it wait until
    # each member of their large buckets knows the one band it is paired in (_choose_bands)
    over: list[tuple[int, int]] = []
    best_anchor = np.full(n, np.iinfo(np.int64).max, np.int64)
    best_band = np.full(n, -1, np.int64)
    for band in range(plan.bands):
        members, bounds = band_groups(band)
        if progress is not None and band:
            progress(band)
        if bounds.size < 2:
            continue
        size = np.diff(bounds)
        cap = valve_cap(size, plan.bucket_cap, budget)
        if cap is None:  # the band's buckets fit its budget: every pair (no valve)
            pair(members, bounds, None, np.zeros(size.size, np.bool_))
        else:
            _choose_bands(members, bounds, cap, band, best_anchor, best_band)
            over.append((band, cap))
    for band, cap in over:  # the valve: the largest buckets thinned to the cap
        members, bounds = _groups(band_keys(s, band, plan.rows))
        size = np.diff(bounds)
        valve_bands += 1
        caps_used.append(cap)
        capped += int((size > cap + 1).sum())
        codes, weights = _valve_sample(
            s, members, bounds, cap, plan.min_agreement, band, n, plan.bands, plan.rows
        )
        sample_codes.append(codes)
        sample_weights.append(weights)
        was_big: list[npt.NDArray[np.bool_]] = []
        members, bounds, in_big = _thin_big_groups(members, bounds, cap, best_band == band, was_big)
        size = np.diff(bounds)
        group_big = was_big[0][bounds[:-1]] if size.size else np.zeros(0, np.bool_)
        made_big = int(pairs_per_group(size, cap)[group_big].sum())
        skipped += max(0, in_big - made_big)
        pair(members, bounds, cap, group_big)
    ordinary = (
        unique_sorted(np.concatenate(parts_a) * n + np.concatenate(parts_b))
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
    lost = 0.0
    if sample_codes:  # sampled agreeing pairs of thinned buckets that no band made
        sc, sw = np.concatenate(sample_codes), np.concatenate(sample_weights)
        lost = float(sw[~np.isin(sc, code)].sum())
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
                "band_pairs_budget": budget,
                "valve_bands": valve_bands,
                "bucket_cap_used": min(caps_used) if caps_used else None,
                "capped_buckets": capped,
                # an upper bound: a pair in large groups of several bands counts in each
                "pairs_skipped": min(skipped, n * (n - 1) // 2),
                # candidates (agreeing pairs) the valve gave up, estimated from VALVE_SAMPLE
                # pairs of each thinned bucket, and that as a share of the candidates
                "valve_lost_pairs_est": round(lost),
                "valve_recall_loss_est": round(lost / (lost + a.size), 6) if lost else 0.0,
            }
        )
    return a, b


def _valve_sample(
    s: npt.NDArray[np.uint16],
    members: npt.NDArray[np.int64],
    bounds: npt.NDArray[np.int64],
    cap: int,
    min_agree: int,
    band: int,
    n: int,
    bands: int,
    rows: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """VALVE_SAMPLE random pairs of each bucket the valve thins (before thinning; seeded by the
    band): the codes ``a * n + b`` of those that agree on ``>= min_agree`` values, each with the
    weight ``C(size, 2) / VALVE_SAMPLE`` (it stands for that many pairs of its bucket) divided by
    the number of bands the pair collides in."""
    size = np.diff(bounds)
    big = np.flatnonzero(size > cap + 1)
    if not big.size:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    rng = np.random.default_rng(band)
    m = VALVE_SAMPLE
    sz = size[big]
    gi = rng.integers(0, sz[:, None], (big.size, m))
    gj = rng.integers(0, sz[:, None] - 1, (big.size, m))
    gj = gj + (gj >= gi)  # distinct positions
    x = members[bounds[big][:, None] + gi].ravel()
    y = members[bounds[big][:, None] + gj].ravel()
    w = np.repeat((sz * (sz - 1) / 2.0) / m, m)
    ok = _agreement_reference(s, x, y) >= min_agree
    x, y, w = x[ok], y[ok], w[ok]
    # a pair no band made sits in a thinned bucket of every band it collides in, and is
    # sampled from each: weighted by 1 / (bands it collides in), it is counted once over them
    h = bands * rows
    same = (s[x, :h] == s[y, :h]).reshape(x.size, bands, rows).all(axis=2).sum(axis=1)
    lo, hi = np.minimum(x, y), np.maximum(x, y)
    return lo * n + hi, w / np.maximum(same, 1)


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
