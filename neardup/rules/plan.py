"""The candidate plan: what the candidate channels search, planned from the threshold.

MinHash-LSH candidates are near-duplicate pairs whose candidate probability depends only on the
pair's similarity, never on the corpus size. SimHash puts edited short texts 10-18 bits apart,
and an exact Hamming search at radius r costs C(64, r)-ish or O(N^2); a work budget then has
to lower r as N grows, and recall falls with N. MinHash banding does not: a pair whose
token-bigram sets have Jaccard similarity ``J`` shares at least one of ``bands`` band keys
(``rows`` MinHash values each) with probability ``1 - (1 - J**rows)**bands`` (the S-curve,
:func:`candidate_probability`), whatever else is in the corpus. The plan (:func:`plan_lsh`) is
made for the least bigram Jaccard of a pair at the threshold (:func:`shingle_jaccard`: texts of
at least ``PROMISE_MIN_TOKENS`` tokens, one made from the other by scattered one-token
substitutions), so such pairs are found with probability >= ``PLAN_RECALL`` however short the
texts; :func:`plan_promise` says what a plan promises and :func:`plan_warnings` when it cannot.
A pair sharing a band key is a candidate when its signatures agree on at least
``min_agreement`` of all the hashes (an estimate of ``J`` with standard error
``sqrt(J (1 - J) / hashes)``: it discards the pairs that collided in one band by chance before
they cost a verification). The bucket valve's floor (``bucket_cap``) and budget
(``band_pairs_per_doc``) are the plan's too (:func:`neardup.index.band_groups.valve_cap`).

The SimHash pass beside the MinHash channel searches ``LSH_SIMHASH_DISTANCE`` bits
(:func:`simhash_pass_distance`), short texts ``LSH_SIMHASH_SHORT_DISTANCE`` only
(:func:`splits_short_texts`; a pair's rule: :func:`simhash_pass_pairs`): the same distances on
one machine, on the distributed engines and in the online store.

Signatures (``(n, hashes)`` uint16, b-bit MinHash of the texts' token bigrams) and band keys
are made in :mod:`neardup.fingerprint.minhash`; the channel's pairs in :mod:`neardup.rules.lsh`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError, UnsupportedVersionError
from ..fingerprint.minhash import SIGNATURE_SCHEME
from ..verify.rule import DEFAULT_THRESHOLD as _VERIFIER_THRESHOLD

__all__ = [
    "DEFAULT_BAND_PAIRS_PER_DOC",
    "DEFAULT_BUCKET_CAP",
    "DEFAULT_THRESHOLD",
    "LAZY_SIMHASH_PARTNERS",
    "LSH_SIMHASH_DISTANCE",
    "LSH_SIMHASH_SHORT_DISTANCE",
    "PLAN_RECALL",
    "PROMISE_MIN_TOKENS",
    "LshPlan",
    "candidate_probability",
    "plan_lsh",
    "plan_promise",
    "plan_warnings",
    "shingle_jaccard",
    "simhash_pass_distance",
    "simhash_pass_pairs",
    "splits_short_texts",
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
        "missed (a higher --threshold, or bands and rows, lsh_bands / lsh_rows, that reach 0.99)"
    ]


# ---------------------------------------------------------------------------------------------
# the SimHash pass beside the MinHash channel

#: SimHash distance of the ``candidates="lsh"`` mode's SimHash pass (exact and small-k near
#: duplicates: the permuted tables, linear in practice; the MinHash channel covers wider edits)
LSH_SIMHASH_DISTANCE = 3
#: ... for pairs of two texts shorter than the verifier's ``short_chars``: short posts crowd
#: SimHash space (the pairs within 3 bits grow much faster than the corpus; see
#: benchmarks/bench_dedup.py --kinds short), and the MinHash channel already finds their edited
#: copies (on the dev set no short pair is found only by distances 1-3;
#: benchmarks/quality_dedup.py)
LSH_SIMHASH_SHORT_DISTANCE = 0
#: a SimHash pair of the ``candidates="lsh"`` mode is verified lazily
#: (:func:`neardup.rules.verify.verify_in_chunks`) when both its texts have more partners than
#: this in the SimHash pass
LAZY_SIMHASH_PARTNERS = 8


def simhash_pass_distance(max_distance: int | None) -> int:
    """The SimHash pass's distance for a config's ``max_distance`` (None: the default,
    :data:`LSH_SIMHASH_DISTANCE`)."""
    return LSH_SIMHASH_DISTANCE if max_distance is None else int(max_distance)


def simhash_pass_pairs(
    d: npt.NDArray[np.integer[Any]],
    len_a: npt.NDArray[np.integer[Any]],
    len_b: npt.NDArray[np.integer[Any]],
    short_chars: int,
    distance: int,
) -> npt.NDArray[np.bool_]:
    """Which pairs the split SimHash pass (:func:`splits_short_texts`) pairs, from their
    distances ``d`` and their texts' lengths in characters: within
    :data:`LSH_SIMHASH_SHORT_DISTANCE`, or within ``distance`` where both texts have
    ``short_chars`` characters or more. The batch's ``stage_candidates_lsh`` searches the
    texts so; the online store searches a short query at the short distance and turns down a
    long one's hits on short stored rows past it with this."""
    d = np.asarray(d)
    both_long = (np.asarray(len_a) >= short_chars) & (np.asarray(len_b) >= short_chars)
    return (d <= LSH_SIMHASH_SHORT_DISTANCE) | ((d <= distance) & both_long)


def splits_short_texts(max_distance: int | None) -> bool:
    """Whether the SimHash pass searches short texts (fewer characters than the verifier's
    ``short_chars``) at :data:`LSH_SIMHASH_SHORT_DISTANCE` only, and the others at
    :func:`simhash_pass_distance`: on defaults. An explicit ``max_distance`` is searched for every
    text."""
    return max_distance is None and simhash_pass_distance(max_distance) > LSH_SIMHASH_SHORT_DISTANCE
