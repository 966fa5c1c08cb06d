"""The candidate stage: the pairs of first copies worth verifying, as the plan says.

:func:`stage_candidates_lsh` (``candidates="lsh"``, the default): the MinHash channel
(:mod:`neardup.rules.lsh`) plus a SimHash pass at a small distance (:mod:`neardup.rules.plan`).
:func:`stage_candidates` (``candidates="simhash"``): SimHash only, at the verifier's
length-dependent distances under the work budget (:func:`~neardup.rules.passes.plan_pass`).
Both give ``(a, b, distance)``, ``a < b``, sorted, positions among the texts passed.
:func:`stage_candidates_for` calls the one of a :class:`~neardup.rules.config.DedupConfig`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .._arrays import in_sorted, unique_sorted
from ..verify.rule import Verifier
from .plan import (
    LSH_SIMHASH_DISTANCE,
    LSH_SIMHASH_SHORT_DISTANCE,
    LshPlan,
    simhash_pass_distance,
    splits_short_texts,
)
from .verify import deferred_pairs, simhash_dense

if TYPE_CHECKING:
    from .config import DedupConfig

__all__ = [
    "stage_candidates",
    "stage_candidates_for",
    "stage_candidates_lsh",
]


def _pairs_within(
    fps: npt.NDArray[np.uint64],
    k: int,
    subset: npt.NDArray[np.int64],
    workers: int,
    per_doc: int | None = None,
    info: dict[str, Any] | None = None,
    name: str = "pass",
    work_ns: int | None = None,
    lengths: npt.NDArray[np.int64] | None = None,
) -> tuple[Any, Any, Any]:
    from .passes import pair_work_ns, planned_pairs

    if subset.size < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32)
    max_pairs = None if per_doc is None else per_doc * int(subset.size)
    mean_chars = float(lengths[subset].mean()) if lengths is not None else 0.0
    a, b, d, plan = planned_pairs(
        fps[subset],
        k,
        work_ns_per_doc=work_ns,
        max_pairs=max_pairs,
        workers=workers,
        pair_ns=pair_work_ns(mean_chars),
    )
    if info is not None:
        info[name] = plan
    return subset[a], subset[b], d


def stage_candidates(
    fps: npt.NDArray[np.uint64],
    lengths: npt.NDArray[np.int64],
    usable: npt.NDArray[np.bool_],
    verifier: Verifier,
    max_distance: int | None = None,
    workers: int = 1,
    max_candidates_per_doc: int | None = None,
    info: dict[str, Any] | None = None,
    work_per_doc_ns: int | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """Candidate pairs ``(a, b, distance)``, a < b, sorted, among ``usable`` documents.

    With ``max_distance`` set, one pass at that distance. Otherwise a pair is a candidate when
    its distance is within the short-text distance if its shorter text has fewer than
    ``short_chars`` characters and its longer one fewer than ``2 * short_chars``, else within the
    long-text distance. (A text more than twice as long as a short one can only match it by
    containment — the short text wrapped in more content — and then the long text's content
    dominates its fingerprint.) Every pair is scanned once whatever the mix of lengths.

    With ``max_candidates_per_doc``, a brute-force pass never yields more than that many pairs
    per document of the pass: when the fingerprints are so concentrated that more pairs fall
    within the distance, the distance is lowered until they fit (recorded in ``info``).

    With ``work_per_doc_ns`` (default distances only), each pass searches the largest distance
    whose modelled work fits ``work_per_doc_ns * docs`` (:func:`~neardup.rules.passes.plan_pass`);
    ``info[pass]`` records requested and used distance, method and reason.
    """
    idx = np.flatnonzero(usable).astype(np.int64)
    if max_distance is not None:
        return _pairs_within(fps, max_distance, idx, workers, max_candidates_per_doc, info, "all")
    w = work_per_doc_ns
    k_long = verifier.candidate_distance(1 << 62)
    k_short = verifier.candidate_distance(0)
    if k_short <= k_long:
        return _pairs_within(
            fps, k_long, idx, workers, max_candidates_per_doc, info, "all", w, lengths
        )
    # Each pair is scanned once: S = texts that can be in a short pair (< 2 * short_chars),
    # S_short = texts < short_chars, L = the rest.  A: S x S at k_short; B: pairs touching L
    # among L + (S - S_short) at k_long; C: S_short x L at k_long.
    cut = verifier.short_chars
    li = lengths[idx]
    in_s = li < 2 * cut
    s_all, big = idx[in_s], idx[~in_s]
    s_short = idx[li < cut]
    parts = []
    a, b, d = _pairs_within(
        fps, k_short, s_all, workers, max_candidates_per_doc, info, "short", w, lengths
    )
    keep = (d <= k_long) | (np.minimum(lengths[a], lengths[b]) < cut)
    parts.append((a[keep], b[keep], d[keep]))
    if big.size:
        pool = idx[li >= cut]  # big + (S - S_short), ascending as idx is
        a, b, d = _pairs_within(
            fps, k_long, pool, workers, max_candidates_per_doc, info, "long", w, lengths
        )
        keep = (lengths[a] >= 2 * cut) | (lengths[b] >= 2 * cut)
        parts.append((a[keep], b[keep], d[keep]))
        if s_short.size:
            pool = idx[(li >= 2 * cut) | (li < cut)]  # big + S_short
            a, b, d = _pairs_within(
                fps, k_long, pool, workers, max_candidates_per_doc, info, "cross", w, lengths
            )
            la, lb = lengths[a] < cut, lengths[b] < cut
            keep = la != lb
            parts.append((a[keep], b[keep], d[keep]))
    if len(parts) == 1:  # one pass over an increasing subset: already sorted by (a, b)
        return parts[0]
    a = np.concatenate([p[0] for p in parts])
    b = np.concatenate([p[1] for p in parts])
    d = np.concatenate([p[2] for p in parts])
    order = np.lexsort((b, a))
    return a[order], b[order], d[order]


def stage_candidates_lsh(
    texts: Sequence[str],
    fps: npt.NDArray[np.uint64],
    lengths: npt.NDArray[np.int64],
    usable: npt.NDArray[np.bool_],
    verifier: Verifier,
    plan: LshPlan,
    simhash_distance: int = LSH_SIMHASH_DISTANCE,
    workers: int = 1,
    max_candidates_per_doc: int | None = None,
    info: dict[str, Any] | None = None,
    lsh_info: dict[str, Any] | None = None,
    work_per_doc_ns: int | None = None,
    prepared: dict[int, tuple[bytes, int]] | None = None,
    deferred_out: list[npt.NDArray[np.bool_]] | None = None,
    progress: Callable[[int], None] | None = None,
    short_distance: int | None = None,
    tokens_out: list[npt.NDArray[np.int64]] | None = None,
    signatures: tuple[npt.NDArray[np.uint16], npt.NDArray[np.int64]] | None = None,
    signatures_out: list[npt.NDArray[np.uint16]] | None = None,
    buckets_out: list[npt.NDArray[np.uint8]] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """Candidate pairs ``(a, b, distance)``, a < b, sorted, unique: the union of

    * the MinHash channel (:func:`~neardup.rules.lsh.lsh_pairs` over the texts' token
      bigrams, ``plan``): a pair's candidate probability depends on its similarity only;
    * a SimHash pass at ``simhash_distance`` among ``usable`` fingerprints (the permuted tables;
      the work budget ``work_per_doc_ns`` stays as a safety valve, recorded in ``info["simhash"]``).

    ``distance`` is the pair's SimHash distance. ``lsh_info`` receives the channel's plan and
    counts (``raw_pairs``, ``pairs``, ``capped_buckets``, ``pairs_skipped``) and timings;
    ``prepared`` the texts' Python tokenisation (:func:`~neardup.fingerprint.minhash.minhash_signatures`),
    for :func:`~neardup.rules.verify.stage_verify`.

    ``deferred_out`` (optional) receives a bool mask over the pairs: True for a pair that only a
    concentrated corpus produced (met only in capped MinHash buckets, or in the SimHash pass
    when the per-document pair valve lowered its distance or both texts have more than
    ``LAZY_SIMHASH_PARTNERS`` partners there); :func:`dedup` verifies those lazily
    (:func:`~neardup.rules.verify.verify_in_chunks`).

    ``tokens_out`` (optional) receives every text's token count (``Verifier.tokens``, counted
    by the signatures' pass; the keep rule's lengths), and ``signatures_out`` (optional) the
    signatures (kept alive for the caller: a store loading the kept texts without signing them
    again, :func:`neardup.incremental.dedup_into`), and ``buckets_out`` (optional) the texts'
    tokens counted in the coarse hash buckets by the same pass (``minhash_signatures``'
    ``buckets``: the token masks such a store keeps; nothing where ``signatures`` were given).

    ``signatures`` (optional): the texts' ``(signatures, token counts)`` as
    :func:`~neardup.fingerprint.minhash.minhash_signatures` makes them for ``verifier`` and
    ``plan`` (an online store's prepared batches carry them), used instead of making them again
    (``prepared`` then stays empty: verification tokenises what it needs).

    ``progress(k)`` (optional) reports texts done, ``k`` of ``len(texts)``, weighted by phase
    (SimHash pass 20 %, signatures 40 %, band pairs 40 %: their shares on short posts).
    """
    from ..fingerprint.distance import hamming_many
    from ..fingerprint.minhash import minhash_signatures
    from .lsh import lsh_pairs

    n = len(texts)
    idx = np.flatnonzero(usable).astype(np.int64)
    if short_distance is None or short_distance >= simhash_distance:
        sa, sb, _ = _pairs_within(
            fps, simhash_distance, idx, workers, max_candidates_per_doc, info, "simhash",
            work_per_doc_ns, lengths,
        )  # fmt: skip
    else:  # texts of short_chars or more at simhash_distance, every text at short_distance
        long_idx = idx[lengths[idx] >= verifier.short_chars]
        a1, b1, _ = _pairs_within(
            fps, simhash_distance, long_idx, workers, max_candidates_per_doc, info, "simhash",
            work_per_doc_ns, lengths,
        )  # fmt: skip
        a2, b2, _ = _pairs_within(
            fps, short_distance, idx, workers, max_candidates_per_doc, info, "simhash_short",
            work_per_doc_ns, lengths,
        )  # fmt: skip
        m0 = max(n, 1)
        code = unique_sorted(np.concatenate([a1 * m0 + b1, a2 * m0 + b2]))
        sa, sb = code // m0, code % m0
    tell = progress or (lambda k: None)
    tell(n // 5)
    t0 = time.perf_counter()
    if signatures is not None:
        sig, tokens = signatures
    else:
        buckets = None
        if buckets_out is not None:
            from ..text.token_kernels import MASK_BITS

            buckets = np.zeros((n, 1 << MASK_BITS), np.uint8)
            buckets_out.append(buckets)
        sig, tokens = minhash_signatures(
            verifier,
            texts,
            plan.hashes,
            workers=workers,
            prepared=prepared,
            progress=lambda j: tell(n // 5 + 2 * n * j // (5 * max(n, 1))),
            buckets=buckets,
        )
    t1 = time.perf_counter()
    if tokens_out is not None:
        tokens_out.append(tokens)
    if signatures_out is not None:
        signatures_out.append(sig)
    capped: list[npt.NDArray[np.bool_]] = []
    la, lb = lsh_pairs(
        sig,
        tokens > 0,
        plan,
        lsh_info,
        workers,
        capped,
        lambda band: tell(3 * n // 5 + 2 * n * band // (5 * plan.bands)),
    )
    del sig
    if lsh_info is not None:
        lsh_info["signatures_s"] = round(t1 - t0, 4)
        lsh_info["pairs_s"] = round(time.perf_counter() - t1, 4)
    m = max(n, 1)
    code = unique_sorted(np.concatenate([sa * m + sb, la * m + lb]))
    a, b = code // m, code % m
    if deferred_out is not None:
        plans = [(info or {}).get(k, {}) for k in ("simhash", "simhash_short")]
        if any(  # the pair valve acted
            p.get("distance_used", 0) < p.get("distance_planned", 0) for p in plans
        ):
            dense = np.ones(code.size, bool)
        else:
            deg = np.bincount(np.concatenate([sa, sb]), minlength=m)
            dense = simhash_dense(deg[a], deg[b])
        lsh_code = la * m + lb  # code, lsh_code and the SimHash codes: each sorted, unique
        deferred_out.append(
            deferred_pairs(
                in_sorted(code, lsh_code[~capped[0]]),
                in_sorted(code, lsh_code[capped[0]]),
                in_sorted(code, sa * m + sb),
                dense,
            )
        )
    d = hamming_many(fps[a], fps[b]) if a.size else np.zeros(0, np.int32)
    if lsh_info is not None:
        lsh_info["simhash_pairs"] = int(sa.size)
        lsh_info["union_pairs"] = int(a.size)
    return a, b, d.astype(np.int32)


def stage_candidates_for(
    cfg: DedupConfig,
    texts: Sequence[str],
    fps: npt.NDArray[np.uint64],
    lengths: npt.NDArray[np.int64],
    usable: npt.NDArray[np.bool_],
    verifier: Verifier,
    info: dict[str, Any] | None = None,
    lsh_info: dict[str, Any] | None = None,
    prepared: dict[int, tuple[bytes, int]] | None = None,
    deferred_out: list[npt.NDArray[np.bool_]] | None = None,
    progress: Callable[[int], None] | None = None,
    tokens_out: list[npt.NDArray[np.int64]] | None = None,
    signatures: tuple[npt.NDArray[np.uint16], npt.NDArray[np.int64]] | None = None,
    signatures_out: list[npt.NDArray[np.uint16]] | None = None,
    buckets_out: list[npt.NDArray[np.uint8]] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """The candidate pairs of :func:`~neardup.batch.run.dedup` for ``cfg``, among ``texts``
    (the first copies; ``fps``, ``lengths`` and ``usable`` theirs): :func:`stage_candidates_lsh`
    (``candidates="lsh"``) or :func:`stage_candidates`, called with the settings ``dedup`` uses.
    One home for that call, so ``neardup explain`` finds a pair's candidates as a run does.
    ``info``, ``lsh_info``, ``prepared``, ``deferred_out``, ``progress``, ``tokens_out``,
    ``signatures``, ``signatures_out`` and ``buckets_out`` as those take them (the last five
    only in the ``lsh`` mode). The ``lsh``
    mode's SimHash pass has no work budget: it keeps its distance at any corpus size (as the
    distributed run does); only the per-document pair bound guards concentrated input."""
    if cfg.candidates == "lsh":
        return stage_candidates_lsh(
            texts,
            fps,
            lengths,
            usable,
            verifier,
            cfg.lsh_plan(),
            simhash_pass_distance(cfg.max_distance),
            cfg.workers,
            cfg.max_candidates_per_doc,
            info,
            lsh_info,
            None,
            prepared,
            deferred_out,
            progress,
            LSH_SIMHASH_SHORT_DISTANCE if splits_short_texts(cfg.max_distance) else None,
            tokens_out,
            signatures,
            signatures_out,
            buckets_out,
        )
    return stage_candidates(
        fps,
        lengths,
        usable,
        verifier,
        cfg.max_distance,
        cfg.workers,
        cfg.max_candidates_per_doc,
        info,
        cfg.candidate_work_per_doc_ns,
    )
