"""What the decider turns down before reading rows (:class:`ReadBounds`, a part of
:class:`~neardup.online.decide.Decider`): bounds that need only what the store keeps beside a
row (its sketch: token count and token mask; a long row's stored summary) or what the decider
has already read (cached histograms), each a necessary condition of the agreement filter or of
verification, so a row turned down here would have been filtered out or rejected after
reading it. The decisions are the same with and without them (tests/store/test_store_sketches.py,
tests/online/test_rowcache.py, tests/online/test_online_summaries.py); what they spare is
counted in the decider's stats.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..rules.lsh import SKETCH_TOKENS_UNKNOWN, sketch_agreeing, sketch_masks, sketch_tokens
from ..verify.tokens import token_histograms
from .rowcache import HistogramCache
from .summaries import cache_summaries

__all__ = ["BOUND_MIN_HITS", "ReadBounds"]

#: the SimHash hits a group needs before the bounds run for it (:meth:`ReadBounds._length_bound`,
#: then :meth:`ReadBounds._histogram_bound`): below, their fixed cost (a dozen NumPy calls and
#: two kernel calls, a few hundred microseconds on this project's VM) is more than reading and
#: verifying the few rows they could spare, and a single request's one or two hits are
#: usually its near duplicates, which pass them (``benchmarks/bench_request_parts.py``)
BOUND_MIN_HITS = 4
#: :meth:`ReadBounds._histogram_bound` runs for a group only when this many of its SimHash
#: hits' rows are cached: below, its fixed cost (~0.1 ms a call: the queries' histograms and
#: the bound's kernel call) is more than reading those rows saves (docs/store.md, *Cached
#: histograms*)
_HISTOGRAM_MIN_ROWS = 8


def _known(counts: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Token counts as the bounds take them: a sketch's "65,535 or more"
    (:data:`~neardup.rules.lsh.SKETCH_TOKENS_UNKNOWN`) as 0, unknown (bounds nothing)."""
    return np.where(counts < SKETCH_TOKENS_UNKNOWN, counts, 0)


def _hit_pairs(
    lims: npt.NDArray[np.int64], hit_rids: npt.NDArray[np.int64], uniq: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.intp]]:
    """Each SimHash hit's query (by ``lims``) and its row's position in ``uniq``."""
    return np.repeat(np.arange(lims.size - 1), np.diff(lims)), np.searchsorted(uniq, hit_rids)


def kept_lims(lims: npt.NDArray[np.int64], keep: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """Each query's bounds (as ``lims``) among the SimHash hits ``keep`` marks: what is left of
    a query's hits once the others are dropped."""
    kept = np.zeros(keep.size + 1, np.int64)
    np.cumsum(keep, out=kept[1:])
    return kept[lims]


class ReadBounds:
    """The bounds of :class:`~neardup.online.decide.Decider` applied before its rows are read;
    the decider sets the attributes below (writer thread only)."""

    store: Any
    verifier: Any
    lsh_plan: Any
    radius: int
    store_text: bool
    histograms: HistogramCache
    sketch_checked: int
    sketch_passed: int
    summaries_used: int
    summaries_set_aside: int
    length_rejected: int
    mask_rejected: int
    mask_rejected_rows: int
    histogram_rejected: int

    def _length_bound(
        self,
        lims: npt.NDArray[np.int64],
        hit_rids: npt.NDArray[np.int64],
        hit_d: npt.NDArray[np.int32],
        tokens: npt.NDArray[np.int64],
        buckets: npt.NDArray[np.uint8] | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        """The SimHash hits (``lims``, ``hit_rids``, ``hit_d``) without those whose stored
        token count (the end of the row's sketch, :func:`~neardup.rules.lsh.sketch_tokens`)
        and the query's (``tokens``) no verification can pass
        (:meth:`~neardup.verify.Verifier.cannot_pass`), then without those the token-mask
        bound turns down (the queries' coarse token ``buckets`` against the rows' stored
        masks, :meth:`_mask_bound`): verified, they would be rejected, so the decisions are
        the same without reading their rows. A short text's SimHash neighbours can be
        thousands of stored rows (a post of a few frequent tokens), each read, decompressed
        and tokenised to be turned down (docs/service.md, "The 10 M tail"). Rows without a
        sketch, counts of 0 or too large to keep, and pairs the verifier trusts on their
        distance alone keep their hits."""
        uniq = np.unique(hit_rids)
        present, stored = self.store.sketches(uniq)
        if not present.any():
            return lims, hit_rids, hit_d
        row_t = np.where(present, _known(sketch_tokens(stored)), 0)
        q_t = _known(tokens)
        owner, h_k = _hit_pairs(lims, hit_rids, uniq)
        drop = self.verifier.cannot_pass(q_t[owner], row_t[h_k])  # (False where a count is 0)
        lims, hit_rids, hit_d, n = self._without_hits(lims, hit_rids, hit_d, drop)
        self.length_rejected += n
        if buckets is not None and hit_rids.size:  # the hits left, on their token masks
            owner, h_k = _hit_pairs(lims, hit_rids, uniq)
            drop = ~self._mask_bound(buckets, q_t, owner, stored, row_t, h_k)
            lims, hit_rids, hit_d, n = self._without_hits(lims, hit_rids, hit_d, drop)
            self.mask_rejected += n
        if hit_rids.size:  # the rows left: their stored summaries into the histogram cache,
            # so that _histogram_bound turns down those that fail it unread
            left = np.zeros(uniq.size, np.bool_)
            left[np.searchsorted(uniq, hit_rids)] = True
            used, bad = cache_summaries(
                self.store, self.histograms, uniq[left], stored[left], row_t[left]
            )
            self.summaries_used += used
            self.summaries_set_aside += bad
        return lims, hit_rids, hit_d

    def _mask_bound(
        self,
        buckets: npt.NDArray[np.uint8],
        q_t: npt.NDArray[np.int64],
        q_of: npt.NDArray[np.int64],
        stored: npt.NDArray[np.uint8],
        row_t: npt.NDArray[np.int64],
        k_of: npt.NDArray[np.int64],
    ) -> npt.NDArray[np.bool_]:
        """Whether each pair (query ``q_of[m]``, stored row ``k_of[m]``) could pass verification
        on the query's coarse token ``buckets`` and the row's token mask (its sketch,
        ``stored``): :func:`~neardup.verify.overlap.mask_bound_decisions` with the verifier's
        rule (``q_t``, ``row_t``: token counts, 0 where unknown). Rows whose mask is unknown
        (:data:`~neardup.rules.lsh.MASK_UNKNOWN`) could pass."""
        from ..rules.verify import bound_rule
        from ..verify.overlap import mask_bound_decisions

        if not q_of.size:
            return np.zeros(0, np.bool_)
        return mask_bound_decisions(
            buckets, q_t, q_of, sketch_masks(stored), row_t, k_of, **bound_rule(self.verifier)
        )

    def _without_hits(
        self,
        lims: npt.NDArray[np.int64],
        hit_rids: npt.NDArray[np.int64],
        hit_d: npt.NDArray[np.int32],
        drop: npt.NDArray[np.bool_],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32], int]:
        """The SimHash hits without those a bound marked in ``drop``, except the pairs the
        verifier trusts on their distance alone (``trust_distance``), which are never verified;
        and how many were dropped. Both bounds of :meth:`decide` end here."""
        trust = self.verifier.config()["trust_distance"]
        if trust >= 0:
            drop &= hit_d > trust
        n = int(drop.sum())
        if not n:
            return lims, hit_rids, hit_d, 0
        keep = ~drop
        return kept_lims(lims, keep), hit_rids[keep], hit_d[keep], n

    def _histogram_bound(
        self,
        lims: npt.NDArray[np.int64],
        hit_rids: npt.NDArray[np.int64],
        hit_d: npt.NDArray[np.int32],
        texts: list[str],
        chash: list[bytes],
        hists: npt.NDArray[np.uint8] | None = None,
        tokens: npt.NDArray[np.int64] | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        """The SimHash hits (``lims``, ``hit_rids``, ``hit_d``) without those whose cached token
        histogram (:attr:`histograms`) and the query's fail verification's first step, the
        histogram bound (:func:`~neardup.verify.overlap.histogram_bound_decisions`, the same
        call on the same histograms): verified, they would be rejected there, so the
        decisions are the same without reading their rows. The rows within the SimHash radius
        of a long text drawn from a common vocabulary, or of a repetitive short post, are
        hundreds to thousands, the same ones from one such query to the next, and nearly all
        fail the bound (docs/service.md, "The 10 M tail"). Exact copies (the query's content
        hash), texts without tokens and pairs the verifier trusts on their distance alone keep
        their hits. A group with fewer than :data:`_HISTOGRAM_MIN_ROWS` cached rows among its
        hits reads them instead: the bound's fixed cost (the queries' histograms, a kernel
        call) is more than reading a few rows. ``hists`` and ``tokens``: the queries' token
        histograms and counts where their preparation made them (the MinHash pass's), else
        the queries are tokenised here."""
        cache = self.histograms
        if not len(cache):
            return lims, hit_rids, hit_d
        rl = hit_rids.tolist()
        slots = cache.slots(rl)
        if len(slots) < _HISTOGRAM_MIN_ROWS:
            return lims, hit_rids, hit_d
        sel = np.flatnonzero(np.fromiter((r in slots for r in rl), np.bool_, len(rl)))
        from ..rules.verify import bound_rule
        from ..verify.overlap import histogram_bound_decisions

        owner = np.repeat(np.arange(lims.size - 1), np.diff(lims))[sel]
        qs, qi = np.unique(owner, return_inverse=True)
        if hists is not None and tokens is not None:
            q_hist, q_n = hists[qs], tokens[qs]
        else:
            q_hist, q_n = token_histograms(self.verifier, [texts[i] for i in qs.tolist()])
        r_hist, r_n, r_hash = cache.histograms([slots[rl[k]] for k in sel.tolist()])
        could, _ = histogram_bound_decisions(
            np.concatenate([q_hist, r_hist]),
            np.concatenate([q_n, r_n]),
            qi,
            qs.size + np.arange(sel.size),
            **bound_rule(self.verifier),
        )
        q_hash = np.frombuffer(b"".join(chash[i] for i in qs.tolist()), np.uint8).reshape(-1, 16)
        exact = (r_hash == q_hash[qi]).all(axis=1)
        drop = np.zeros(hit_rids.size, np.bool_)
        drop[sel] = ~could & (q_n[qi] > 0) & (r_n > 0) & ~exact
        lims, hit_rids, hit_d, n = self._without_hits(lims, hit_rids, hit_d, drop)
        self.histogram_rejected += n
        return lims, hit_rids, hit_d

    def _sketch_filter(
        self,
        rids: npt.NDArray[np.int64],
        counts: npt.NDArray[np.int64],
        at: npt.NDArray[np.intp],
        q_sk: npt.NDArray[np.uint8],
        tokens: npt.NDArray[np.int64] | None = None,
        buckets: npt.NDArray[np.uint8] | None = None,
    ) -> list[int]:
        """The band candidates of ``rids`` (distinct, ascending) worth reading: those without a
        stored sketch, and those whose sketch passes :func:`~neardup.rules.lsh.sketch_agreeing`
        with at least one query that found them (the group's (query, candidate) entries:
        ``counts[i]`` of query ``i``, in query order, ``at`` the position of each entry's row
        in ``rids``, -1 where it is not there; ``q_sk``: the queries' sketches) and, given the
        queries' token counts and coarse token ``buckets``, whose pair also passes the
        token-mask bound (:meth:`_mask_bound`). The sketch test is a necessary condition of the
        agreement filter, and the mask bound one of verification, so a row left out here
        would have been filtered out or rejected after reading it: the decisions are the same,
        without its text. (Not the mask bound where the verifier trusts pairs on their SimHash
        distance beyond the search radius: a band candidate could be such a pair.)"""
        if not rids.size:
            return []
        present, stored = self.store.sketches(rids)
        if not present.any():
            return rids.tolist()
        q_all = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        k_all = np.maximum(at, 0)
        sel = (at >= 0) & present[k_all]
        k_of, q_of = k_all[sel], q_all[sel]
        ok = sketch_agreeing(stored, k_of, q_sk, q_of, self.lsh_plan)
        passed = np.zeros(len(rids), np.bool_)
        passed[k_of[ok]] = True
        self.sketch_checked += int(present.sum())
        self.sketch_passed += int(passed.sum())
        if (
            buckets is not None
            and tokens is not None
            and self.verifier is not None
            and self.store_text
            and self.verifier.config()["trust_distance"] <= self.radius
            and ok.any()
        ):
            k_ok, q_ok = k_of[ok], q_of[ok]
            could = self._mask_bound(
                buckets, _known(tokens), q_ok, stored, _known(sketch_tokens(stored)), k_ok
            )
            kept = np.zeros(len(rids), np.bool_)
            kept[k_ok[could]] = True
            self.mask_rejected_rows += int((passed & ~kept).sum())
            passed = kept
        return rids[~present | passed].tolist()
