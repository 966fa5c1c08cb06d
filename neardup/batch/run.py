"""Corpus deduplication: exact + near duplicates, verified, clustered, with a keep policy.

:func:`dedup` runs a chain of small named stages, each a function of arrays, one module each::

    normalize + exact content hash   stage_exact          (.exact: content_hashes)
    fingerprints                     stage_fingerprint    (.exact: Fingerprinter.fingerprint_batch;
                                                          both at once: ExactFingerprintPass)
    exact pairs                      stage_exact_pairs    (.groups)
    candidate pairs                  stage_candidates_lsh (.candidate_stage: MinHash bands +
                                                          small-k SimHash)
                                     stage_candidates     (candidates="simhash": SimHash only)
    verification                     stage_verify         (.verify_stage: token similarity)
    keep policy                      stage_representatives (.policy: greedy against kept
                                                          documents, no chaining;
                                                          keep="none": stage_cluster, components)

Its parameters and result are in :mod:`.config` (:class:`DedupConfig`, :class:`DedupResult`);
:func:`~neardup.batch.files.dedup_files` runs it from files to files.

Exact duplicates are found first; only the first copy of each text goes through the near-duplicate
stages, and its copies join its cluster. Every decision is traceable: :attr:`DedupResult.pairs`
lists each matched pair with its SimHash distance, similarity score and stage.

The result is deterministic: the same input gives the same output for any ``workers`` (ties are
broken by input order).

Examples
--------
>>> r = dedup(["the cat sat on the mat today", "The cat  sat on the mat today", "a dog",
...            "the cat sat on the mat today!"])
>>> r.keep.tolist()
[True, False, True, False]
>>> r.stats["exact_duplicates"], r.stats["near_duplicates"], r.stats["clusters"]
(1, 1, 1)
>>> r.pair_rows()[:2]
[(0, 1, 0, 1.0, 'exact'), (0, 3, 0, 1.0, 'near')]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import InputError, InputTypeError
from ..io.texts import SpanTexts, UniqueIds
from ..verify.rule import RULE_NAMES, RULE_UNVERIFIED
from .candidate_stage import stage_candidates_for
from .cluster import cluster_ids, connected_components
from .config import DedupConfig, DedupResult, PairTable, Progress, with_overrides
from .exact import ExactFingerprintPass, stage_fingerprint
from .groups import ExactGroups, stage_exact_pairs, stage_expand
from .policy import stage_cluster, stage_policy, stage_representatives
from .verify_stage import LAZY_MIN_PAIRS_PER_DOC, subset_texts, verify_in_chunks

__all__ = ["SCORE_BINS", "candidate_scores", "dedup"]

#: bins of ``stats["candidate_scores"]`` over [0, 1] (the last bin holds 1.0)
SCORE_BINS = 100


def candidate_scores(
    score: npt.NDArray[np.float64],
    rule: npt.NDArray[np.uint8],
    skipped: npt.NDArray[np.bool_],
) -> dict[str, Any]:
    """``stats["candidate_scores"]``: the verified candidate pairs (first copies, before exact
    copies are expanded) counted by the rule that decided them and their score, in
    ``SCORE_BINS`` equal bins over [0, 1] (bin ``i`` holds ``i / bins <= score < (i + 1) /
    bins``; the last one holds 1.0 too), plus the ``skipped`` pairs (deferred, never
    verified). What the review report shows a threshold would keep or drop; a ``bound`` pair's
    score is an upper bound on its similarity."""
    done = ~skipped
    sc, ru = score[done], rule[done]
    # (+1e-9: a score equal to an edge, i / bins as a float product, lands in bin i; distinct
    # token-count ratios are farther apart than that)
    k = np.clip(np.floor(sc * SCORE_BINS + 1e-9).astype(np.int64), 0, SCORE_BINS - 1)
    counts = {}
    for code in np.unique(ru).tolist():
        counts[RULE_NAMES[code]] = np.bincount(k[ru == code], minlength=SCORE_BINS).tolist()
    return {"bins": SCORE_BINS, "counts": counts, "skipped": int(skipped.sum())}


def _longest_first(
    lengths: npt.NDArray[np.int64], a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Per pair, the earlier rank of its two texts in longest-first order (ties: input order)."""
    rank = np.empty(lengths.size, np.int64)
    rank[np.lexsort((np.arange(lengths.size), -lengths))] = np.arange(lengths.size)
    return np.minimum(rank[a], rank[b])


def _check_texts(texts: Sequence[str]) -> Sequence[str]:
    if isinstance(texts, str):
        raise InputTypeError("dedup() takes a sequence of texts, not one str; wrap it in a list")
    if isinstance(texts, SpanTexts):  # read by neardup.io: every text is a str or ASCII span
        return texts
    out = list(texts)
    if set(map(type, out)) - {str}:  # (a C-level pass when every text is a str)
        for i, t in enumerate(out):
            if not isinstance(t, str):
                raise InputTypeError(f"texts[{i}] is {type(t).__name__}, expected str")
    return out


def dedup(
    texts: Sequence[str],
    *,
    ids: Sequence[str] | None = None,
    config: DedupConfig | None = None,
    progress: Progress | None = None,
    exact_pass: ExactFingerprintPass | None = None,
    candidates_out: list[PairTable] | None = None,
    **overrides: Any,
) -> DedupResult:
    """Deduplicate a corpus: exact duplicates, then verified near-duplicates, then clusters.

    Parameters
    ----------
    texts : sequence of str
        The documents, in input order.
    ids : sequence of str, optional
        Unique document ids; default ``"0", "1", ...``.
    config : DedupConfig, optional
        Parameters; keyword ``overrides`` (e.g. ``keep="longest"``) replace its fields.
    progress : callable, optional
        Called as ``progress(stage, done, total)`` as stages start and finish.
    exact_pass : ExactFingerprintPass, optional
        A pass already fed (some of) these texts, e.g. while they were read (the CLI does
        this), made with the same fingerprinter settings: its work is used instead of starting
        over (the results are the same). Ignored, and closed, when ``exact`` is off or its
        fingerprinter differs from the configured one.
    candidates_out : list, optional
        Receives one :class:`PairTable` of every candidate pair of first copies the run found,
        accepted or not: ``stage`` 1 when accepted, 0 when rejected (or skipped), ``score``
        and ``rule`` as verification left them (``RULE_BELOW`` / ``RULE_BOUND`` for rejected
        pairs). For inspection and tests (``neardup explain`` is checked against it).

    Returns
    -------
    DedupResult

    Raises
    ------
    InputTypeError
        A text is not a str (names its position).
    InputError
        ``ids`` has the wrong length or repeats an id.
    ConfigError
        Invalid parameters.
    """
    cfg = with_overrides(config, overrides)
    texts = _check_texts(texts)
    n = len(texts)
    if ids is None:
        id_list = [str(i) for i in range(n)]
    elif type(ids) is UniqueIds and len(ids) == n:  # read by neardup.io: str, checked unique
        id_list = ids
    else:
        id_list = [str(x) for x in ids]
        if len(id_list) != n:
            raise InputError(f"ids has {len(id_list)} entries for {n} texts; pass one id per text")
        if len(set(id_list)) != n:
            seen: set[str] = set()
            dup = next(x for x in id_list if x in seen or seen.add(x))  # type: ignore[func-returns-value]
            raise InputError(f"ids must be unique; {dup!r} appears more than once")
    verifier = cfg.make_verifier()
    report = progress or (lambda stage, done, total: None)
    timings: dict[str, float] = {}
    t_start = time.perf_counter()
    lengths = (
        texts.lengths()
        if isinstance(texts, SpanTexts)
        else np.fromiter(map(len, texts), dtype=np.int64, count=n)
    )

    def timed(name: str, total: int | None = None) -> Callable[[], None]:
        """Time a stage; report its start and end (in ``total`` items when it reports counts
        as it goes, else as 0/1 and 1/1)."""
        t0 = time.perf_counter()
        report(name, 0, 1 if total is None else total)

        def done() -> None:
            timings[name] = round(time.perf_counter() - t0, 4)
            report(name, *((1, 1) if total is None else (total, total)))

        return done

    fp = cfg.make_fingerprinter()
    if cfg.exact:  # one pass: exact hashes and the first copies' fingerprints
        report("exact", 0, n)
        report("fingerprint", 0, n)

        def texts_done(k: int) -> None:
            report("exact", k, n)
            report("fingerprint", k, n)

        if exact_pass is None or exact_pass.fp != fp or exact_pass.n > n:
            if exact_pass is not None:
                exact_pass.close()
            exact_pass = ExactFingerprintPass(fp, cfg.workers)
        try:
            first, fps_u, empty_u = exact_pass.finish(texts, timings, texts_done)
        finally:
            exact_pass.close()
        t1 = time.perf_counter()
        is_dup = first != np.arange(n)
        groups = ExactGroups.from_first(first)
        exact = stage_exact_pairs(groups, cfg.expand_pairs)
        timings["exact"] = round(timings["exact"] + time.perf_counter() - t1, 4)
        report("exact", n, n)
        report("fingerprint", n, n)
        unique = np.flatnonzero(~is_dup).astype(np.int64)
    else:
        if exact_pass is not None:
            exact_pass.close()
        done = timed("exact")
        first = np.arange(n, dtype=np.int64)
        is_dup = first != np.arange(n)
        groups = ExactGroups.from_first(first)
        exact = stage_exact_pairs(groups, cfg.expand_pairs)
        done()

        done = timed("fingerprint")
        unique = np.flatnonzero(~is_dup).astype(np.int64)
        fps_u, empty_u = stage_fingerprint(fp, [texts[i] for i in unique.tolist()], cfg.workers)
        done()

    # counted in the corpus's documents, like the other document stages (the candidate stage
    # works on the first copies: k of them done reports k * n / first copies)
    done = timed("candidates", n)
    passes: dict[str, Any] = {}
    lsh_info: dict[str, Any] = {}
    tokenised: dict[int, tuple[bytes, int]] = {}
    deferred: list[npt.NDArray[np.bool_]] = []
    from .minhash import plan_promise, plan_warnings

    plan = cfg.lsh_plan() if cfg.candidates == "lsh" else None
    counted: list[npt.NDArray[np.int64]] = []
    ca, cb, cd = stage_candidates_for(
        cfg,
        subset_texts(texts, unique) if cfg.candidates == "lsh" else [],
        fps_u,
        lengths[unique],
        ~empty_u,
        verifier,
        passes,
        lsh_info,
        tokenised,
        deferred,
        lambda k: report("candidates", k * n // max(int(unique.size), 1), n),
        counted,
    )
    if tokenised:  # those in a pair, re-keyed from position among first copies to texts
        involved = set(ca.tolist()) | set(cb.tolist())
        tokenised = {int(unique[k]): v for k, v in tokenised.items() if k in involved}
    ca, cb = unique[ca], unique[cb]
    # token counts of the first copies (the keep rule's lengths): counted with the signatures,
    # else (SimHash candidates) for the texts in a candidate pair
    tokens = np.zeros(n, np.int64)
    if counted:
        tokens[unique] = counted[0]
    elif ca.size:
        from ..verify.tokens import token_counts

        paired = np.unique(np.concatenate([ca, cb]))
        tokens[paired] = token_counts(verifier, subset_texts(texts, paired))
    done()

    done = timed("verify", ca.size if cfg.verify else None)
    if cfg.verify:

        def skippable(ok: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
            """Pairs that can no longer change the outcome: both texts already in one
            component (keep="none"), or both already dropped for a verified pair with a kept
            text (a pair between two dropped texts never changes the greedy keep)."""
            if cfg.keep == "none":
                comp = connected_components(n, ca[ok], cb[ok])
                return comp[ca] == comp[cb]
            rep = stage_representatives(
                first, ca[ok], cb[ok], lengths, cfg.keep, verifier.threshold, tokens
            )
            dropped = rep != np.arange(n)
            return dropped[ca] & dropped[cb]

        # lazily only when a concentrated corpus made many such pairs: otherwise every
        # candidate is verified and every matched pair reported
        lazy = deferred[0] if deferred else None
        if lazy is not None and lazy.sum() <= LAZY_MIN_PAIRS_PER_DOC * unique.size:
            lazy = None
        ok, score, skipped, rule = verify_in_chunks(
            verifier,
            texts,
            ca,
            cb,
            cd,
            cfg.workers,
            tokenised,
            deferred=lazy,
            skippable=skippable,
            order=_longest_first(lengths, ca, cb) if cfg.keep == "longest" else None,
            progress=progress,
        )
        if deferred:
            lsh_info["deferred_pairs"] = int(deferred[0].sum())
            lsh_info["deferred_lazy"] = lazy is not None
            lsh_info["deferred_skipped"] = int(skipped.sum())
    else:
        bits = 128 if fps_u.ndim == 2 else 64
        ok, score = np.ones(ca.size, bool), 1.0 - cd / bits
        rule = np.full(ca.size, RULE_UNVERIFIED, np.uint8)
        skipped = np.zeros(ca.size, bool)
    tokenised.clear()
    if candidates_out is not None:
        candidates_out.append(
            PairTable(ca, cb, cd, score, np.where(ok, 1, 0).astype(np.uint8), rule)
        )
    near = stage_expand(groups, ca[ok], cb[ok], cd[ok], score[ok], cfg.expand_pairs, rule[ok])
    done()

    done = timed("cluster")
    pairs = PairTable.concat([exact, near])
    if cfg.keep == "none":  # every member of a connected cluster is dropped
        roots, _ = stage_cluster(n, pairs)
        components: npt.NDArray[np.int64] | None = roots
        keep = stage_policy(roots, lengths, cfg.keep)
    else:
        components = stage_cluster(n, pairs)[0] if cfg.components else None
        roots = stage_representatives(
            first, ca[ok], cb[ok], lengths, cfg.keep, verifier.threshold, tokens
        )
        keep = roots == np.arange(n)
    clusters = cluster_ids(roots)
    done()

    elapsed = time.perf_counter() - t_start
    sizes = np.bincount(roots, minlength=n)
    in_cluster = int((sizes[roots] > 1).sum())
    n_clusters = int((sizes > 1).sum())
    exact_dups = int(is_dup.sum())
    stats = {
        "documents": n,
        "exact_duplicates": exact_dups,
        "near_duplicates": in_cluster - n_clusters - exact_dups,
        "clusters": n_clusters,
        "kept": int(keep.sum()),
        "dropped": int(n - keep.sum()),
        "candidates": int(ca.size),
        "candidate_passes": passes,
        "promise": plan_promise(plan),
        "warnings": plan_warnings(plan),
        **({"lsh": lsh_info} if lsh_info else {}),
        "verified": int(ok.sum()),
        "candidate_scores": candidate_scores(score, rule, skipped),
        "pairs": len(pairs),
        "elapsed_s": round(elapsed, 3),
        "docs_per_s": round(n / elapsed, 1) if elapsed > 0 else None,
        "timings_s": timings,
        "config": {
            **cfg.to_dict(),
            "verifier": verifier.config(),
            "fingerprinter": fp.config() if hasattr(fp, "config") else None,
        },
    }
    return DedupResult(
        ids=id_list,
        keep=keep,
        cluster=clusters,
        root=roots,
        pairs=pairs,
        stats=stats,
        components=components if cfg.components else None,
        labelled=ids is not None,
    )
