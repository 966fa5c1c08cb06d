"""Corpus deduplication: exact + near duplicates, verified, clustered, with a keep policy.

:func:`dedup` runs a chain of small named stages, each a function of arrays; the batch's own
stages are in :mod:`.exact`, the decision's in :mod:`neardup.rules` (shared with the other
front-ends)::

    normalize + exact content hash   stage_exact          (.exact: content_hashes)
    fingerprints                     stage_fingerprint    (.exact: Fingerprinter.fingerprint_batch;
                                                          both at once: ExactFingerprintPass)
    exact pairs                      stage_exact_pairs    (rules.groups)
    candidate pairs                  stage_candidates_for (rules.candidates: MinHash bands +
                                                          small-k SimHash, or SimHash only)
    verification                     verify_in_chunks     (rules.verify: token similarity)
    keep policy                      stage_representatives (rules.keep: greedy against kept
                                                          documents, no chaining;
                                                          keep="none": stage_cluster, components)
    summary                          summary              (rules.summary)

Its parameters are a :class:`~neardup.rules.config.DedupConfig`, its result a
:class:`~neardup.batch.result.DedupResult`; :func:`~neardup.batch.files.dedup_files` runs it
from files to files.

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
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError, InputError, InputTypeError
from ..io.texts import SpanTexts, UniqueIds
from ..rules.candidates import stage_candidates_for
from ..rules.config import DedupConfig, PairTable, Progress, with_overrides
from ..rules.groups import ExactGroups, stage_exact_pairs, stage_expand
from ..rules.keep import cluster_ids, stage_cluster, stage_policy, stage_representatives
from ..rules.summary import candidate_scores, summary
from ..rules.verify import (
    keep_skippable,
    lazy_deferred,
    longest_first,
    subset_texts,
    verify_in_chunks,
)
from ..verify.rule import RULE_UNVERIFIED
from .exact import ExactFingerprintPass, first_of_equal_rows, stage_fingerprint
from .result import DedupResult

__all__ = ["dedup"]


def _check_texts(texts: Sequence[str]) -> Sequence[str]:
    if isinstance(texts, str):
        raise InputTypeError("dedup() takes a sequence of texts, not one str; wrap it in a list")
    if isinstance(texts, Mapping | Set) or not isinstance(texts, Iterable):
        raise InputTypeError(
            f"dedup() takes a sequence of texts (a list), got {type(texts).__name__}"
            + (
                "; for {id: text}, pass list(d.values()) and ids=list(d)"
                if isinstance(texts, Mapping)
                else ""
            )
        )
    if isinstance(texts, SpanTexts):  # read by neardup.io: every text is a str or ASCII span
        return texts
    out = list(texts)
    if set(map(type, out)) - {str}:  # (a C-level pass when every text is a str)
        for i, t in enumerate(out):
            if not isinstance(t, str):
                raise InputTypeError(f"texts[{i}] is {type(t).__name__}, expected str")
    return out


def _check_signatures(
    signatures: Any, n: int, cfg: DedupConfig
) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.int64]]:
    """``dedup(signatures=)`` checked before any work: the ``lsh`` mode, one row of the plan's
    width and one token count per text."""
    if cfg.candidates != "lsh":
        raise ConfigError(
            f"signatures= serves the MinHash channel; this run's candidates are "
            f"{cfg.candidates!r}: drop signatures= or use candidates='lsh'"
        )
    try:
        sig, tokens = signatures
    except (TypeError, ValueError):
        raise InputError(
            "signatures must be a pair (signatures (n, hashes) uint16, token counts (n,) int64)"
        ) from None
    sig = np.asarray(sig)
    tokens = np.asarray(tokens)
    hashes = cfg.lsh_plan().hashes
    if sig.dtype != np.uint16 or sig.shape != (n, hashes):
        raise InputError(
            f"signatures: expected uint16 of shape ({n}, {hashes}) for {n} texts and this "
            f"plan, got {sig.dtype} {sig.shape}"
        )
    if tokens.shape != (n,) or tokens.dtype.kind not in "iu":
        raise InputError(
            f"signatures: expected {n} integer token counts, got {tokens.dtype} {tokens.shape}"
        )
    return sig, tokens.astype(np.int64, copy=False)


def _check_fingerprints(
    fingerprints: Any, n: int
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
    """``dedup(fingerprints=)`` checked before any work: one content hash, fingerprint and
    empty flag per text."""
    try:
        hashes, fps, empty = fingerprints
    except (TypeError, ValueError):
        raise InputError(
            "fingerprints must be a triple (content hashes (n, 2) uint64, fingerprints (n,) "
            "uint64, empty flags (n,) bool)"
        ) from None
    hashes, fps, empty = np.asarray(hashes), np.asarray(fps), np.asarray(empty)
    if hashes.dtype != np.uint64 or hashes.shape != (n, 2):
        raise InputError(
            f"fingerprints: expected content hashes of uint64 shape ({n}, 2) for {n} texts, "
            f"got {hashes.dtype} {hashes.shape}"
        )
    if fps.dtype != np.uint64 or fps.shape[:1] != (n,):
        raise InputError(
            f"fingerprints: expected {n} uint64 fingerprints, got {fps.dtype} {fps.shape}"
        )
    if empty.dtype != np.bool_ or empty.shape != (n,):
        raise InputError(f"fingerprints: expected {n} bool empty flags, got {empty.dtype} {empty.shape}")  # fmt: skip
    return hashes, fps, empty


def dedup(
    texts: Sequence[str],
    *,
    ids: Sequence[str] | None = None,
    config: DedupConfig | None = None,
    progress: Progress | None = None,
    exact_pass: ExactFingerprintPass | None = None,
    candidates_out: list[PairTable] | None = None,
    signatures: tuple[npt.NDArray[np.uint16], npt.NDArray[np.int64]] | None = None,
    work_out: dict[str, Any] | None = None,
    fingerprints: tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64], npt.NDArray[np.bool_]]
    | None = None,
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
    signatures : (numpy.ndarray, numpy.ndarray), optional
        The texts' MinHash signatures ``(n, hashes)`` uint16 and token counts ``(n,)`` int64,
        as :func:`~neardup.fingerprint.minhash.minhash_signatures` makes them for this
        config's verifier and plan (an online store's prepared batches carry them:
        :func:`neardup.incremental.dedup_into` passes those), used instead of making them
        again; the results are the same. ``candidates="lsh"`` only.
    work_out : dict, optional
        Receives the run's work on the first copies of the texts (every kept text is one):
        ``rows`` (their positions), ``fps`` and ``empty`` (fingerprints and empty flags, as the
        config's fingerprinter makes them), ``chash`` (content hashes ``(n, 2)``, as
        :func:`~neardup.fingerprint.content_hash_many` makes them; absent without the exact
        stage and without given ``fingerprints``), and in the ``lsh`` mode ``sig`` and ``tokens``
        (signatures and token counts, as ``signatures`` takes them). An online store made with
        the same fingerprinter, verifier and plan stores the kept texts from these without
        preparing them again (:func:`neardup.incremental.dedup_into`). The signatures are then
        kept alive until the caller drops them.
    fingerprints : (numpy.ndarray, numpy.ndarray, numpy.ndarray), optional
        The texts' content hashes ``(n, 2)`` uint64 (as
        :func:`~neardup.fingerprint.content_hash_many` makes them), fingerprints ``(n,)``
        uint64 and empty flags ``(n,)`` bool, as this config's fingerprinter makes them (an
        online store's prepared batches carry them: :func:`neardup.incremental.dedup_into`
        passes those), used instead of making them again: the exact and fingerprint stages
        are then a sort. The results are the same; ``exact_pass`` is not used.

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
    if signatures is not None:
        signatures = _check_signatures(signatures, n, cfg)
    if fingerprints is not None:
        fingerprints = _check_fingerprints(fingerprints, n)
    if ids is None:
        id_list = [str(i) for i in range(n)]
    elif type(ids) is UniqueIds and len(ids) == n:  # read by neardup.io: str, checked unique
        id_list = ids
    else:
        if isinstance(ids, str | bytes | Mapping | Set) or not isinstance(ids, Iterable):
            raise InputTypeError(
                f"ids must be a sequence of ids, one per text (a list), got {type(ids).__name__}"
            )
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
    # one pass: exact hashes and the first copies' fingerprints (unless given)
    if cfg.exact and fingerprints is None:
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
        hashes = exact_pass.hashes
        t1 = time.perf_counter()
        is_dup = first != np.arange(n)
        groups = ExactGroups.from_first(first)
        exact = stage_exact_pairs(groups, cfg.expand_pairs)
        timings["exact"] = round(timings["exact"] + time.perf_counter() - t1, 4)
        report("exact", n, n)
        report("fingerprint", n, n)
        unique = np.flatnonzero(~is_dup).astype(np.int64)
    else:  # fingerprints given (the exact groups from their hashes), or no exact stage
        if exact_pass is not None:
            exact_pass.close()
        done = timed("exact")
        hashes = fingerprints[0] if fingerprints is not None else None
        if hashes is not None and cfg.exact:
            first = first_of_equal_rows(hashes)
        else:
            first = np.arange(n, dtype=np.int64)
        is_dup = first != np.arange(n)
        groups = ExactGroups.from_first(first)
        exact = stage_exact_pairs(groups, cfg.expand_pairs)
        done()

        done = timed("fingerprint")
        unique = np.flatnonzero(~is_dup).astype(np.int64)
        if fingerprints is not None:
            fps_u, empty_u = fingerprints[1][unique], fingerprints[2][unique]
        else:
            fps_u, empty_u = stage_fingerprint(fp, [texts[i] for i in unique.tolist()], cfg.workers)
        done()

    # counted in the corpus's documents, like the other document stages (the candidate stage
    # works on the first copies: k of them done reports k * n / first copies)
    done = timed("candidates", n)
    passes: dict[str, Any] = {}
    lsh_info: dict[str, Any] = {}
    tokenised: dict[int, tuple[bytes, int]] = {}
    deferred: list[npt.NDArray[np.bool_]] = []
    plan = cfg.lsh_plan() if cfg.candidates == "lsh" else None
    counted: list[npt.NDArray[np.int64]] = []
    signed: list[npt.NDArray[np.uint16]] | None = [] if work_out is not None else None
    bucketed: list[npt.NDArray[np.uint8]] | None = [] if work_out is not None else None
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
        None if signatures is None else (signatures[0][unique], signatures[1][unique]),
        signed,
        bucketed,
    )
    if work_out is not None:
        work_out.update(rows=unique, fps=fps_u, empty=empty_u)
        if hashes is not None:
            work_out.update(chash=np.asarray(hashes, np.uint64)[unique])
        if signed and counted:
            work_out.update(sig=signed[0], tokens=counted[0])
        if bucketed:
            work_out.update(buckets=bucketed[0])
        del signed, bucketed
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
        # lazily only when a concentrated corpus made many such pairs: otherwise every
        # candidate is verified and every matched pair reported
        lazy = lazy_deferred(deferred[0] if deferred else None, int(unique.size))
        ok, score, skipped, rule = verify_in_chunks(
            verifier,
            texts,
            ca,
            cb,
            cd,
            cfg.workers,
            tokenised,
            deferred=lazy,
            skippable=keep_skippable(
                n, first, ca, cb, lengths, cfg.keep, verifier.threshold, tokens
            ),
            order=longest_first(lengths, ca, cb) if cfg.keep == "longest" else None,
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

    stats = summary(
        documents=n,
        exact_duplicates=int(is_dup.sum()),
        kept=int(keep.sum()),
        clusters=int((np.bincount(roots, minlength=n) > 1).sum()),
        keep=cfg.keep,
        candidates=int(ca.size),
        verified=int(ok.sum()),
        pairs=len(pairs),
        plan=plan,
        elapsed_s=time.perf_counter() - t_start,
        timings=timings,
        candidate_passes=passes,
        lsh=lsh_info,
        scores=candidate_scores(score, rule, skipped),
        config={
            **cfg.to_dict(),
            "verifier": verifier.config(),
            "fingerprinter": fp.config() if hasattr(fp, "config") else None,
        },
    )
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
