"""The verification rule as applied to candidate pairs, by every front-end.

:func:`stage_verify` decides pairs by token similarity (the :class:`~neardup.verify.Verifier`'s
rule) with numba bounds first and the exact LCS only where the bounds cannot (same decisions as
:func:`neardup.rules.reference.stage_verify_reference`, tested): the batch, the online store's
MinHash channel and the distributed verify step call it. :func:`verify_in_chunks` runs it in
chunks for progress, and verifies the pairs only a concentrated corpus produced lazily
(:func:`lazy_rounds`, :func:`keep_skippable`: skipping those that can no longer change the keep
outcome); the distributed engines apply the same rounds to their verified pairs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._arrays import unique_sorted
from ..io.texts import SpanTexts
from ..text.token_kernels import prepared_at
from ..verify.rule import RULE_BOUND, RULE_TRUSTED, Verifier
from .config import Keep, Progress
from .keep import connected_components, stage_representatives
from .plan import LAZY_SIMHASH_PARTNERS

__all__ = [
    "DEFERRED_ROUND_PAIRS",
    "LAZY_MIN_PAIRS_PER_DOC",
    "VERIFY_CHUNK_PAIRS",
    "VERIFY_MAX_CHUNKS",
    "KnownHistograms",
    "bound_rule",
    "deferred_pairs",
    "is_lazy",
    "keep_skippable",
    "lazy_deferred",
    "lazy_rounds",
    "longest_first",
    "simhash_dense",
    "stage_verify",
    "stage_verify_rules",
    "subset_texts",
    "verify_in_chunks",
]


#: what :func:`stage_verify` hands the histograms it made to: (positions, histograms, counts)
HistogramSink = Callable[
    [npt.NDArray[np.int64], npt.NDArray[np.uint8], npt.NDArray[np.int64]], None
]
#: histograms some texts already have, in the same form (positions in ``texts``, their
#: :func:`~neardup.verify.tokens.token_histograms` rows, their exact token counts): what
#: :func:`stage_verify` takes instead of tokenising those texts for its first step
KnownHistograms = tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8], npt.NDArray[np.int64]]

#: what :func:`lazy_rounds` asks before each round: ``skippable(ok, at)``, from the pairs
#: accepted so far (``ok``, over all pairs), whether each pair at the positions ``at`` can no
#: longer change the outcome (:func:`keep_skippable`)
Skippable = Callable[[npt.NDArray[np.bool_], npt.NDArray[np.int64]], npt.NDArray[np.bool_]]

#: :func:`~neardup.batch.run.dedup` verifies the deferred pairs lazily only when there are more
#: than this many per first copy: a concentrated corpus (a shared boilerplate) gives far more,
#: ordinary corpora far fewer (see benchmarks/bad_input_dedup.py)
LAZY_MIN_PAIRS_PER_DOC = 4


def bound_rule(verifier: Verifier) -> dict[str, Any]:
    """The verifier's rule as the overlap bounds take it (``threshold``, ``containment``,
    ``min_containment_tokens`` keywords of :func:`~neardup.verify.overlap.bound_decisions` and
    :func:`~neardup.verify.overlap.histogram_bound_decisions`): what :func:`stage_verify` and
    the online decider's bound on cached histograms both pass."""
    c = verifier.config()
    return {
        "threshold": c["threshold"],
        "containment": c["containment"],
        "min_containment_tokens": c["min_containment_tokens"],
    }


def stage_verify(
    verifier: Verifier,
    texts: Sequence[str],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    d: npt.NDArray[np.int32],
    workers: int = 1,
    tokenised: dict[int, tuple[bytes, int]] | None = None,
    *,
    on_histograms: HistogramSink | None = None,
    known: KnownHistograms | None = None,
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
    """Decide candidate pairs ``(texts[a[m]], texts[b[m]])``: :func:`stage_verify_rules`
    without the rules, ``(ok, score)``."""
    ok, score, _ = stage_verify_rules(
        verifier, texts, a, b, d, workers, tokenised, on_histograms=on_histograms, known=known
    )
    return ok, score


def stage_verify_rules(
    verifier: Verifier,
    texts: Sequence[str],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    d: npt.NDArray[np.int32],
    workers: int = 1,
    tokenised: dict[int, tuple[bytes, int]] | None = None,
    *,
    on_histograms: HistogramSink | None = None,
    known: KnownHistograms | None = None,
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64], npt.NDArray[np.uint8]]:
    """Decide candidate pairs ``(texts[a[m]], texts[b[m]])``; same decisions as
    :func:`stage_verify_reference` (tested). ``tokenised``: texts already tokenised in Python
    (position in ``texts`` -> kernel bytes and mode, as the candidate stage leaves them).

    1. Every text of a pair: its tokens counted in 1,024 hash buckets and its exact token count
       (:func:`~neardup.verify.tokens.token_histograms`: one pass over the bytes, nothing
       sorted); per pair, the sum of the smaller bucket counts, an upper bound on the multiset
       overlap, rejects the pairs that cannot pass
       (:func:`~neardup.verify.overlap.histogram_bound_decisions`; unrelated long texts:
       nearly all of them).
    2. The texts of the pairs left: their tokens as sorted 32-bit hashes
       (:func:`~neardup.verify.tokens.token_hashes`, no vocabulary); per pair, the multiset
       overlap of the hashes, an upper bound on the LCS (equal tokens hash equal; collisions
       only merge counts), decides the pairs that cannot pass
       (:func:`~neardup.verify.overlap.bound_decisions`, the same formulas as
       :meth:`Verifier.decide`).
    3. The rest: the exact LCS per pair from those texts' bytes
       (:func:`~neardup.verify.tokens.token_bytes`,
       :func:`~neardup.verify.overlap.lcs_many`: tokenised per pair, a per-pair token table
       confirmed byte by byte, bit-parallel LCS), decided by :meth:`Verifier.decide`.

    ``on_histograms``, if given, is called once with what step 1 made: ``(positions in texts
    (k,) int64, histograms (k, 1024) uint8, exact token counts (k,) int64)`` of every text of a
    pair (the online decider keeps the stored rows' ones, :mod:`neardup.online.rowcache`).
    ``known`` (optional) gives some texts' histograms and exact token counts as step 1 makes
    them (a service request's, from its MinHash pass): those texts are not tokenised for it,
    so ``tokenised`` must hold the kernel form of each that needs one (as the pass that made
    the histograms leaves them: :func:`~neardup.fingerprint.minhash.minhash_signatures`'
    ``prepared``), which steps 2 and 3 read.

    Returns (ok bool (m,), score float64 (m,), rule uint8 (m,)). The score of a pair that
    passes (or reaches step 3) is its exact similarity; a pair rejected in step 1 or 2 reports
    that bound's ratio. ``rule`` says what decided each pair, from the step that decided it
    (``neardup.verify.rule.RULE_*``): ``RULE_BOUND`` (step 1 or 2), the rule of
    :meth:`Verifier.decide_rules` (step 3), ``RULE_TRUSTED`` (``trust_distance``).
    """
    from ..verify.overlap import bound_decisions, histogram_bound_decisions, lcs_many
    from ..verify.tokens import token_bytes, token_hashes

    if a.size == 0:
        return np.zeros(0, bool), np.zeros(0, np.float64), np.zeros(0, np.uint8)
    pos = np.full(len(texts), -1, np.int64)
    pos[a] = 0
    pos[b] = 0
    docs = np.flatnonzero(pos == 0)
    pos[docs] = np.arange(docs.size)
    ia, ib = pos[a], pos[b]
    sub = subset_texts(texts, docs)
    prepared = prepared_at(tokenised, docs.tolist()) if tokenised else {}
    rule = bound_rule(verifier)
    hist, lens = _step_histograms(verifier, sub, pos, known, workers, prepared)
    could, score = histogram_bound_decisions(hist, lens, ia, ib, **rule, workers=workers)
    if on_histograms is not None:
        on_histograms(docs, hist, lens)
    del hist
    left = np.flatnonzero(could)  # lens: exact token counts
    if left.size:
        need, xa, xb, again = _pairs_texts(ia[left], ib[left], docs.size, prepared)
        values, offsets = token_hashes(
            verifier, subset_texts(sub, need), workers=workers, prepared=again
        )
        could[left], score[left] = bound_decisions(
            values, offsets, xa, xb, **rule, workers=workers, early_exit=True
        )
        del values, offsets
    ok = np.zeros(a.size, bool)
    decided = np.full(a.size, RULE_BOUND, np.uint8)  # what the bounds rejected keeps this
    todo = np.flatnonzero(could)
    if todo.size:
        need, xa, xb, again = _pairs_texts(ia[todo], ib[todo], docs.size, prepared)
        data = token_bytes(verifier, subset_texts(sub, need), prepared=again)
        lcs = lcs_many(data, xa, xb, workers=workers, max_cells=verifier.max_lcs_cells)
        ok[todo], score[todo], decided[todo] = verifier.decide_rules(
            lcs, lens[ia[todo]], lens[ib[todo]]
        )
    return _trusted(verifier, texts, a, b, d, ok, score, decided)


def _step_histograms(
    verifier: Verifier,
    sub: Sequence[str],
    pos: npt.NDArray[np.int64],
    known: KnownHistograms | None,
    workers: int,
    prepared: dict[int, tuple[bytes, int]],
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """Step 1's histograms and exact token counts of ``sub`` (the texts of the pairs; ``pos``:
    each text's position in ``sub``, -1 for one in no pair): those ``known`` gives taken as
    they are, the others made by :func:`~neardup.verify.tokens.token_histograms` (which
    fills ``prepared`` for them, as it does for all of ``sub`` without ``known``)."""
    from ..verify.tokens import token_histograms

    if known is None:
        return token_histograms(verifier, sub, workers=workers, prepared=prepared)
    kp, kh, kl = known
    at = pos[np.asarray(kp, np.int64)]
    use = at >= 0
    if not use.any():
        return token_histograms(verifier, sub, workers=workers, prepared=prepared)
    hist = np.empty((len(sub), kh.shape[1]), np.uint8)
    lens = np.empty(len(sub), np.int64)
    hist[at[use]] = kh[use]
    lens[at[use]] = kl[use]
    rest = np.setdiff1d(np.arange(len(sub)), at[use])
    if rest.size:
        again = prepared_at(prepared, rest.tolist())
        hist[rest], lens[rest] = token_histograms(
            verifier, subset_texts(sub, rest), workers=workers, prepared=again
        )
        for x, j in enumerate(rest.tolist()):  # (what it tokenised in Python, for steps 2-3)
            if x in again:
                prepared[j] = again[x]
    return hist, lens


def _pairs_texts(
    ia: npt.NDArray[np.int64],
    ib: npt.NDArray[np.int64],
    n: int,
    prepared: dict[int, tuple[bytes, int]],
) -> tuple[
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    dict[int, tuple[bytes, int]],
]:
    """The texts (positions in ``0..n``) that the pairs ``(ia[m], ib[m])`` name, sorted; the
    pairs renumbered among them; and their ``prepared`` entries re-keyed the same way: the
    input of the next step of :func:`stage_verify`, which tokenises only those texts."""
    need = unique_sorted(np.concatenate([ia, ib]))
    local = np.empty(n, np.int64)
    local[need] = np.arange(need.size)
    return need, local[ia], local[ib], prepared_at(prepared, need.tolist())


#: candidate pairs per :func:`stage_verify` call in :func:`verify_in_chunks` (progress counts
#: advance per chunk; a text in pairs of several chunks is tokenised once per chunk) ...
VERIFY_CHUNK_PAIRS = 1 << 18
#: ... but at most this many chunks (larger chunks beyond): every chunk tokenises its texts
#: again, which many small chunks over a corpus of short posts make costly (see
#: benchmarks/bench_dedup.py --kinds short)
VERIFY_MAX_CHUNKS = 8
#: pairs of the first round of :func:`verify_in_chunks`' deferred pairs (doubling after)
DEFERRED_ROUND_PAIRS = 1 << 12


def verify_in_chunks(
    verifier: Verifier,
    texts: Sequence[str],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    d: npt.NDArray[np.int32],
    workers: int = 1,
    tokenised: dict[int, tuple[bytes, int]] | None = None,
    *,
    deferred: npt.NDArray[np.bool_] | None = None,
    skippable: Skippable | None = None,
    order: npt.NDArray[np.int64] | None = None,
    progress: Progress | None = None,
) -> tuple[
    npt.NDArray[np.bool_], npt.NDArray[np.float64], npt.NDArray[np.bool_], npt.NDArray[np.uint8]
]:
    """:func:`stage_verify_rules` in chunks of ``VERIFY_CHUNK_PAIRS`` pairs (at most
    ``VERIFY_MAX_CHUNKS`` chunks), reporting
    ``progress("verify", pairs done, pairs)`` after each; the decisions are per pair, so they do
    not depend on the chunks. Returns ``(ok, score, skipped, rule)`` (``rule``: what decided
    each pair; ``RULE_BELOW`` for a skipped one, which was not verified).

    ``deferred`` marks the pairs only a pathological case produced (``deferred_out`` of
    :func:`~neardup.rules.candidates.stage_candidates_lsh`). They are verified after the others, in rounds of
    ``DEFERRED_ROUND_PAIRS`` (doubling), in increasing ``order`` (a key per pair: the keep
    policy's visit rank of its earlier-visited text; ties and ``None``: (a, b)); before each round
    ``skippable(ok, at)`` (from the pairs accepted so far, ``ok``, a mask over the pairs at the
    positions ``at``: the deferred ones not verified yet) says which of those can no longer
    change the outcome, and the first pairs of the others are verified; the pairs
    still skippable when no other is left are not verified (``skipped``; ``ok`` False). With
    :func:`keep_skippable` the outcome is the one verifying every pair would give: a pair
    between two texts dropped (for verified pairs with kept texts) never changes the greedy keep
    policy, one inside a connected component never changes the components. E.g. a corpus where
    every text shares a 2 KB boilerplate: each text's pair with the first text decides it, and
    the other pairs of its capped buckets are skipped.
    """
    m = a.size
    ok = np.zeros(m, bool)
    score = np.zeros(m, np.float64)
    rule = np.zeros(m, np.uint8)
    skipped = np.zeros(m, bool)
    report = progress or (lambda stage, done, total: None)
    done = 0

    step = max(VERIFY_CHUNK_PAIRS, -(-m // VERIFY_MAX_CHUNKS))

    def run(sel: npt.NDArray[np.int64]) -> None:
        nonlocal done
        for s0 in range(0, sel.size, step):
            part = sel[s0 : s0 + step]
            if part.size == m:  # one chunk of everything: no index copies
                ok[:], score[:], rule[:] = stage_verify_rules(
                    verifier, texts, a, b, d, workers, tokenised
                )
            else:
                ok[part], score[part], rule[part] = stage_verify_rules(
                    verifier, texts, a[part], b[part], d[part], workers, tokenised
                )
            done += int(part.size)
            report("verify", done, m)

    if deferred is None or skippable is None or not deferred.any():
        run(np.arange(m, dtype=np.int64))
        return ok, score, skipped, rule
    run(np.flatnonzero(~deferred))
    skipped = lazy_rounds(
        ok, deferred, skippable, run, order, lambda k: report("verify", done + k, m)
    )
    return ok, score, skipped, rule


def lazy_rounds(
    ok: npt.NDArray[np.bool_],
    deferred: npt.NDArray[np.bool_],
    skippable: Skippable,
    run: Callable[[npt.NDArray[np.int64]], None],
    order: npt.NDArray[np.int64] | None = None,
    tell: Callable[[int], None] | None = None,
) -> npt.NDArray[np.bool_]:
    """The lazy verification of the ``deferred`` pairs (the others verified already, their
    results in ``ok``): in rounds of ``DEFERRED_ROUND_PAIRS`` pairs (doubling), in increasing
    ``order`` (ties and None: pair order), the first pairs that ``skippable(ok, pool)`` does not
    rule out are verified by ``run(positions)`` (which fills ``ok``), until every pair left is
    skippable. Returns the mask of the pairs never verified. ``tell(k)`` (optional) hears the
    number of pairs skippable before each round. The single machine's rule
    (:func:`verify_in_chunks`); the distributed engines give it their verified pairs."""
    pool = np.flatnonzero(deferred)
    if order is not None:
        pool = pool[np.argsort(order[pool], kind="stable")]
    size = DEFERRED_ROUND_PAIRS
    while pool.size:  # until every pair left is skippable in the current state
        skip = skippable(ok, pool)
        if tell is not None:
            tell(int(skip.sum()))
        take = np.flatnonzero(~skip)[:size]
        if not take.size:
            break
        run(pool[take])
        keep = np.ones(pool.size, bool)
        keep[take] = False
        pool = pool[keep]
        size *= 2
    skipped = np.zeros(ok.size, bool)
    skipped[pool] = True
    return skipped


def deferred_pairs(
    lsh: npt.NDArray[np.bool_],
    lsh_capped: npt.NDArray[np.bool_],
    simhash: npt.NDArray[np.bool_],
    dense: npt.NDArray[np.bool_],
) -> npt.NDArray[np.bool_]:
    """Which candidate pairs only a concentrated corpus produced (the pairs
    :func:`lazy_rounds` may verify lazily), from each pair's sources: made in a MinHash bucket
    paired in full (``lsh``), in a thinned over-cap bucket (``lsh_capped``), by the SimHash pass
    (``simhash``), and whether the SimHash pass is dense there (``dense``: both texts have
    more than ``LAZY_SIMHASH_PARTNERS`` SimHash partners, :func:`simhash_dense`, or the pass's
    pair valve lowered its distance). A pair is deferred when every source that made it is a
    concentrated one (a thinned bucket, a dense SimHash patch). The single machine's rule and
    the distributed engines' (per-pair source bits)."""
    lazy = lsh_capped | (simhash & dense)
    ordinary = lsh | (simhash & ~dense)
    return lazy & ~ordinary


def simhash_dense(
    partners_a: npt.NDArray[np.int64], partners_b: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    """The ``dense`` of :func:`deferred_pairs` from the two texts' SimHash partner counts:
    both texts in a dense patch of SimHash space (a template and its copies)."""
    return (partners_a > LAZY_SIMHASH_PARTNERS) & (partners_b > LAZY_SIMHASH_PARTNERS)


def lazy_deferred(
    deferred: npt.NDArray[np.bool_] | None, units: int
) -> npt.NDArray[np.bool_] | None:
    """``deferred`` when its pairs are to be verified lazily (more than
    ``LAZY_MIN_PAIRS_PER_DOC`` per first copy: a concentrated corpus), else None (every pair is
    verified and every matched pair reported)."""
    if deferred is None or not is_lazy(int(deferred.sum()), units):
        return None
    return deferred


def is_lazy(deferred: int, units: int) -> bool:
    """Whether ``deferred`` pairs (:func:`deferred_pairs`) among ``units`` first copies are
    verified lazily: more than ``LAZY_MIN_PAIRS_PER_DOC`` per first copy."""
    return deferred > LAZY_MIN_PAIRS_PER_DOC * units


def keep_skippable(
    n: int,
    first: npt.NDArray[np.int64],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int64],
    keep: Keep,
    threshold: float,
    tokens: npt.NDArray[np.int64] | None,
) -> Skippable:
    """The ``skippable`` of :func:`lazy_rounds` for the keep rule over ``n`` documents
    (``first``, ``lengths``, ``tokens`` as :func:`~neardup.rules.keep.stage_representatives`
    takes them) and the candidate pairs ``(a, b)``: from the pairs accepted so far (``ok``),
    the pairs that can no longer change the outcome: both texts already in one component
    (``keep="none"``), or both already dropped for a verified pair with a kept text (a pair
    between two dropped texts never changes the greedy keep)."""

    def skippable(ok: npt.NDArray[np.bool_], at: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        # only the pairs at ``at`` are asked about (the unverified ones, a shrinking share of
        # all): each round gathers its texts' states for those alone
        pa, pb = a[at], b[at]
        if keep == "none":
            comp = connected_components(n, a[ok], b[ok])
            return comp[pa] == comp[pb]
        rep = stage_representatives(first, a[ok], b[ok], lengths, keep, threshold, tokens)
        dropped = rep != np.arange(n)
        return dropped[pa] & dropped[pb]

    return skippable


def longest_first(
    lengths: npt.NDArray[np.int64], a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Per pair, the earlier rank of its two texts in longest-first order (ties: input order):
    the ``order`` of :func:`lazy_rounds` for ``keep="longest"``."""
    rank = np.empty(lengths.size, np.int64)
    rank[np.lexsort((np.arange(lengths.size), -lengths))] = np.arange(lengths.size)
    return np.minimum(rank[a], rank[b])


def subset_texts(texts: Sequence[str], idx: npt.NDArray[np.int64]) -> Sequence[str]:
    """``texts`` at positions ``idx``: spans stay spans (:meth:`SpanTexts.take`: no ``str`` is
    made, escaped ones are not decoded here), other sequences give a list."""
    if isinstance(texts, SpanTexts):
        return texts.take(idx)
    return [texts[i] for i in idx.tolist()]


def _trusted(
    verifier: Verifier,
    texts: Sequence[str],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    d: npt.NDArray[np.int32],
    ok: npt.NDArray[np.bool_],
    score: npt.NDArray[np.float64],
    rule: npt.NDArray[np.uint8],
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64], npt.NDArray[np.uint8]]:
    """``trust_distance``: long pairs at a small SimHash distance pass whatever their score
    (rule ``RULE_TRUSTED``)."""
    cfg = verifier.config()
    if cfg["trust_distance"] < 0:
        return ok, score, rule
    la = np.fromiter((len(texts[i]) for i in a.tolist()), np.int64, a.size)
    lb = np.fromiter((len(texts[i]) for i in b.tolist()), np.int64, b.size)
    trusted = (d <= cfg["trust_distance"]) & (np.minimum(la, lb) >= cfg["short_chars"])
    rule = np.where(trusted, np.uint8(RULE_TRUSTED), rule).astype(np.uint8)
    return ok | trusted, np.where(trusted, 1.0 - d / 64.0, score), rule
