"""The decision rule: each document of a write group against the index hits and the documents
decided before it in the same group (:class:`Decider`). Candidates and verification are here;
keep-first within the group is the keep rule's (:class:`~neardup.rules.keep.KeepFirst`), which the cluster calls too (with :meth:`Decider.group_matches`).

Matching rules, per candidate within the search radius:

* same content hash (:func:`neardup.content_hash`) -> duplicate, distance as found, score 1.0;
* an *empty* text (no features, fingerprint 0) only matches by content hash;
* with a verifier: candidates within ``verifier.candidate_distance(len(text))`` are checked
  with ``verifier.verify(text, stored_text, distance)`` when the stored text is available
  (``store_text=True`` or same group); otherwise (text not stored) the distance rule applies;
* distance rule: duplicate when ``distance <= max_distance``; score None.

With the MinHash channel (``candidates="lsh"``) the candidates are the SimHash hits plus the
stored rows sharing a band key whose signatures agree enough, all verified by the batch
pipeline's own rule (:func:`neardup.rules.verify.stage_verify`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import NotFoundError
from ..fingerprint.distance import hamming_cdist
from ..fingerprint.minhash import minhash_signatures
from ..rules.decision import Decision, Match
from ..rules.keep import GROUP_ORDER, Found, KeepFirst, may_drop
from ..rules.lsh import (
    agreeing,
    query_cap,
    sketches,
    token_masks,
)
from ..rules.plan import LSH_SIMHASH_SHORT_DISTANCE, simhash_pass_pairs
from ..rules.verify import KnownHistograms
from ..store import NO_CONTENT_HASH, Store, WriteGroup
from ..text.token_kernels import prepared_at
from .bounds import BOUND_MIN_HITS, ReadBounds, kept_lims
from .prepare import Op, PreparedDocs, add_lsh_keys
from .rowcache import DEFAULT_CAPACITY, DEFAULT_HISTOGRAM_ROWS, HistogramCache, SignatureCache
from .summaries import added_summaries
from .union import ARRAY_UNION_MIN, FILTER_BLOCK, BandKeys, union_arrays, without_own_hits

__all__ = ["Decider"]


#: candidates of one document that a later round of :meth:`Decider._prefetch` verifies at once,
#: when its first ones did not give ``max_matches`` accepted matches
_REST_PAIRS = 1024

#: groups up to this many documents find their within-group pairs by brute force (an index
#: build costs more than the n^2/2 distances there)
_BRUTE_PAIRS = 256


def _near_hits(
    lims: npt.NDArray[np.int64], hit_rids: npt.NDArray[np.int64], hit_d: npt.NDArray[np.int32]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(lims, row ids) of the hits within the split pass's short distance: those no stored
    row's length turns down (:meth:`Decider._split_pass`)."""
    near = hit_d <= LSH_SIMHASH_SHORT_DISTANCE
    if near.all():
        return lims, hit_rids
    return kept_lims(lims, near), hit_rids[near]


@dataclass(slots=True)
class _GroupView:
    """What the candidate rules read about one write group, flat in arrival order: each
    document's text, content hash, empty flag and id; its index hits (CSR: ``hit_rids`` /
    ``hit_d`` between ``lims[i]`` and ``lims[i + 1]``); the stored rows fetched for them; its
    within-group pairs (``earlier``: position -> [(earlier position, distance)]); the cutoff
    (stored rows older than it do not match); the documents' token histograms and counts where
    their preparation made them (verification's first step takes them)."""

    texts: list[str]
    chash: list[bytes]
    empty: npt.NDArray[np.bool_]
    ids: list[str]
    lims: npt.NDArray[np.int64]
    hit_rids: npt.NDArray[np.int64]
    hit_d: npt.NDArray[np.int32]
    rows: dict[int, Any]
    earlier: dict[int, list[tuple[int, int]]]
    cutoff: float | None
    hists: npt.NDArray[np.uint8] | None = None
    tokens: npt.NDArray[np.int64] | None = None
    special: dict[int, tuple[bytes, int]] | None = None

    def known(self, i: int | None = None) -> tuple[KnownHistograms | None, dict[int, Any] | None]:
        """The documents' histograms and kernel forms as verification takes them (its
        ``known`` and ``tokenised``): all (at their positions) or document ``i``'s (at
        position 0); (None, None) where their preparation made none."""
        if self.hists is None or self.tokens is None or self.special is None:
            return None, None
        if i is None:
            return (np.arange(len(self.texts)), self.hists, self.tokens), self.special
        one = (np.zeros(1, np.int64), self.hists[i : i + 1], self.tokens[i : i + 1])
        return one, prepared_at(self.special, [i])


class Decider(ReadBounds):
    """Decides write groups against a :class:`~neardup.store.Store` (writer thread only).

    Parameters
    ----------
    store : Store
        Searched for candidates and read for their rows; row ids are allocated from it.
    verifier : Verifier or None
        Verifies candidates on their texts; None: the distance rule only.
    lsh_plan : LshPlan or None
        The MinHash channel's plan; None: SimHash candidates only.
    bits, radius, max_distance, max_matches, store_text
        As the :class:`~neardup.online.Deduplicator` was configured.
    signature_cache_rows : int
        Stored rows whose MinHash signatures are kept (:mod:`neardup.online.rowcache`).
    histogram_cache_rows : int
        Verified stored rows whose token histograms are kept, to turn SimHash hits down
        before their rows are read (:meth:`_histogram_bound`); with the MinHash channel only.
    """

    def __init__(
        self,
        store: Store,
        *,
        verifier: Any,
        lsh_plan: Any,
        bits: int,
        radius: int,
        max_distance: int,
        max_matches: int,
        store_text: bool,
        signature_cache_rows: int = DEFAULT_CAPACITY,
        histogram_cache_rows: int = DEFAULT_HISTOGRAM_ROWS,
        short_chars: int | None = None,
    ) -> None:
        self.store = store
        #: the batch's split SimHash pass (``neardup.rules.plan.splits_short_texts``): texts
        #: shorter than this many characters are searched at ``LSH_SIMHASH_SHORT_DISTANCE``
        #: only, and a pair past it needs both texts this long (None: every text at the radius)
        self.short_chars = short_chars
        self.verifier = verifier
        self.lsh_plan = lsh_plan
        self.bits = bits
        self.radius = radius
        self.max_distance = max_distance
        self.max_matches = max_matches
        self.store_text = store_text
        #: stored rows' MinHash signatures, for the channel's agreement filter (writer only)
        self.signatures = SignatureCache(
            lsh_plan.hashes if lsh_plan is not None else 1, signature_cache_rows
        )
        #: band candidates filtered on their stored sketches, and those the sketches let by
        #: (the rest needed neither their texts nor their signatures)
        self.sketch_checked = 0
        self.sketch_passed = 0
        #: long rows' stored summaries put into the histogram cache, and those set aside
        self.summaries_used = 0
        self.summaries_set_aside = 0
        #: SimHash hits turned down by their token counts before their rows were read
        #: (:meth:`_length_bound`), and by their token masks (:meth:`_mask_bound`)
        self.length_rejected = 0
        self.mask_rejected = 0
        #: band candidates the sketch test let by that their token masks turned down
        #: (:meth:`_sketch_filter`): not read either
        self.mask_rejected_rows = 0
        #: verified stored rows' token histograms (writer only), and the SimHash hits they
        #: turned down before their rows were read (:meth:`_histogram_bound`)
        self.histograms = HistogramCache(
            histogram_cache_rows if lsh_plan is not None and verifier is not None else 0
        )
        self.histogram_rejected = 0

    def decide(self, group: list[Op], cutoff: float | None) -> tuple[list[Any], WriteGroup]:
        """Decide a group in arrival order; returns (results per op: a list of
        :class:`Decision` per document op, None or :class:`NotFoundError` per delete; the
        group's adds and deletes for :meth:`Store.append_group <neardup.store.Store.append_group>`).
        Row ids are allocated here. Stored rows older than ``cutoff`` do not match."""
        doc_ops = [op for op in group if op.docs is not None]
        if self.lsh_plan is not None:
            for op in doc_ops:  # prepared elsewhere without the channel: its keys made here
                dd = op.docs
                if dd is not None and dd.bands is None:
                    add_lsh_keys(dd, self.verifier, self.lsh_plan)
        # everything a group needs from the index and metadata, fetched in bulk
        if doc_ops:
            fps = (
                doc_ops[0].docs.fps  # type: ignore[union-attr]
                if len(doc_ops) == 1
                else np.concatenate([op.docs.fps for op in doc_ops])  # type: ignore[union-attr]
            )
            ids = [i for op in doc_ops for i in op.docs.ids]  # type: ignore[union-attr]
        else:
            fps = np.zeros((0,) if self.bits == 64 else (0, 2), np.uint64)
            ids = []
        flat_texts = [t for op in doc_ops for t in op.docs.texts]  # type: ignore[union-attr]
        flat_chash = [h for op in doc_ops for h in op.docs.chash]  # type: ignore[union-attr]
        short = self.short_chars
        lens = self._split_lengths(flat_texts)
        if self.lsh_plan is not None and lens is not None and short is not None:
            # SimHash hits as the batch's split pass finds them (short texts at the short
            # distance; a long text's hits on short rows are turned down once those are
            # read, below), plus the band keys
            limits = np.where(lens < short, LSH_SIMHASH_SHORT_DISTANCE, self.radius)
            lims, hit_rids, hit_d = self._search_by_limit(fps, limits)
        elif self.lsh_plan is not None:  # SimHash hits within the radius, plus the band keys
            lims, hit_rids, hit_d = self.store.search(fps, self.radius)
        elif self.verifier is None or self.radius == self.max_distance:  # one limit for all
            lims, hit_rids, hit_d = self.store.search(fps, self.max_distance)
        else:
            limits = np.array([self._limit(t) for t in flat_texts], dtype=np.int64)
            lims, hit_rids, hit_d = self._search_by_limit(fps, limits)
        del_ids = [op.arg for op in group if op.kind == "delete"]
        existing = self.store.lookup_ids(ids + del_ids)
        need_text = self.verifier is not None
        lsh_rids = None
        tokens = buckets = hists = special = None
        if self.lsh_plan is not None and doc_ops:
            bands = np.concatenate([op.docs.bands for op in doc_ops])  # type: ignore[union-attr]
            lsh_rids = self.store.search_bands(bands, query_cap(self.lsh_plan))
            tokens = np.concatenate([op.docs.tokens for op in doc_ops])  # type: ignore[union-attr]
            parts = [op.docs.buckets for op in doc_ops]  # type: ignore[union-attr]
            if all(b is not None for b in parts):  # (None: signatures a batch run gave)
                buckets = parts[0] if len(parts) == 1 else np.concatenate(parts)  # type: ignore[arg-type]
            hparts = [op.docs.hists for op in doc_ops]  # type: ignore[union-attr]
            if all(h is not None for h in hparts):  # (None: a bulk load's, a batch run's)
                hists = hparts[0] if len(hparts) == 1 else np.concatenate(hparts)  # type: ignore[arg-type]
                special = PreparedDocs.specials([op.docs for op in doc_ops])  # type: ignore[misc]
            if self.verifier is not None and self.store_text and hit_rids.size >= BOUND_MIN_HITS:
                lims, hit_rids, hit_d = self._length_bound(lims, hit_rids, hit_d, tokens, buckets)
                lims, hit_rids, hit_d = self._histogram_bound(
                    lims, hit_rids, hit_d, flat_texts, flat_chash, hists, tokens
                )
            if hit_rids.size and len(lsh_rids) < ARRAY_UNION_MIN:
                # a query's band candidate that is one of its SimHash hits is read and
                # verified as a hit: the sketch filter and the signature test have nothing to
                # decide for it (the union skips it), and a single request's near duplicate
                # is usually found by both channels
                # (with the split pass, only the hits no stored row's length can turn down)
                own = (lims, hit_rids) if self.short_chars is None else _near_hits(lims, hit_rids, hit_d)  # fmt: skip
                lsh_rids = without_own_hits(lsh_rids, *own)
        want = set(hit_rids.tolist())
        want.update(existing.values())
        cached: dict[int, int] = {}
        keys: BandKeys | None = None
        sig = q_sk = None
        if lsh_rids is not None:
            sig = np.concatenate([op.docs.sig for op in doc_ops])  # type: ignore[union-attr]
            assert tokens is not None
            # for the sketch test, then stored with the added rows
            q_sk = sketches(sig, tokens, None if buckets is None else token_masks(buckets))
            # every band candidate once, ascending (one query's already are), and where each
            # (query, candidate) entry's row is in that list
            keys = BandKeys.of(lsh_rids)
            # a band candidate whose signature is cached is filtered before its row is read;
            # one whose stored sketch already fails the filter is never read
            cached = self.signatures.slots(keys.uniq.tolist())
            unc, at = keys.uniq, keys.inv
            if cached:  # (cached rows are band rows: their positions in it)
                keep = np.ones(unc.size, np.bool_)
                keep[np.searchsorted(unc, np.fromiter(cached, np.int64, len(cached)))] = False
                unc = unc[keep]
                pos = np.cumsum(keep) - 1
                pos[~keep] = -1
                at = pos[at]
            want.update(self._sketch_filter(unc, keys.counts, at, q_sk, tokens, buckets))
        rows = self.store.fetch(want, with_text=need_text) if want else {}
        if lens is not None and hit_rids.size:
            lims, hit_rids, hit_d = self._split_pass(lims, hit_rids, hit_d, lens, rows)
            if lsh_rids is not None and len(lsh_rids) < ARRAY_UNION_MIN:
                # the hits past the short distance that stayed are read and verified as hits:
                # not signed again as band candidates (the array union skips them itself)
                lsh_rids = without_own_hits(lsh_rids, lims, hit_rids)
        # the group's own pairs, i -> [(j, distance)] for j < i within the radius or sharing a
        # band: only a document that may be added (not a check's: keep-first, and checks add
        # nothing) can match a later one, so a group of checks looks for none
        adds = [op.kind != "check" for op in doc_ops for _ in op.docs.ids]  # type: ignore[union-attr]
        may_add = any(adds)
        earlier = self.intra_pairs(fps, lens) if may_add else {}
        if lsh_rids is not None:
            assert sig is not None
            lims, hit_rids, hit_d = self._lsh_union(
                fps, sig, lims, hit_rids, hit_d, lsh_rids, rows, cached, keys
            )
            if may_add:
                usable = np.concatenate([op.docs.usable for op in doc_ops])  # type: ignore[union-attr]
                self._lsh_intra(fps, sig, usable, earlier, bands)
        if may_add and not all(adds):
            earlier = {i: a for i, ps in earlier.items() if (a := [p for p in ps if adds[p[0]]])}
        # the summaries long added rows are stored with (made for every long document of an
        # add: most are added)
        summ = None
        if may_add and q_sk is not None and tokens is not None and self.store_text:
            summ = added_summaries(self.verifier, flat_texts, q_sk, flat_chash, tokens, adds, hists)

        results: list[Any] = []
        writes = WriteGroup()
        # group state: id -> (rowid, global position or None for stored rows)
        id_state: dict[str, tuple[int, int | None] | None] = {}
        deleted_rowids: set[int] = set()
        if cutoff is not None and existing:
            # an id whose row is past the window (the expiry pass removes such rows within
            # seconds) is not stored, as get() says: not a duplicate of itself, not deletable;
            # a document added with it replaces the row (it answered "already stored" and
            # stored nothing)
            adding_ids = {x for op in doc_ops if op.kind != "check" for x in op.docs.ids}  # type: ignore[union-attr]
            for id_, rid in list(existing.items()):
                row = rows.get(rid)
                if row is None or row.time >= cutoff:
                    continue
                del existing[id_]
                if id_ in adding_ids:
                    writes.delete(rid, id_)
                    deleted_rowids.add(rid)
        # keep-first within the group (neardup.rules.keep, shared with the cluster): the
        # earlier documents that were kept, the only ones that can match later ones
        state = KeepFirst(len(fps))
        added_mask = state.kept
        # documents that need the full rules: index hits or near pairs inside the group
        has_hits = (lims[1:] > lims[:-1]).tolist()
        slow = list(has_hits)
        for i in earlier:
            slow[i] = True
        flat_empty = (
            np.concatenate([op.docs.empty for op in doc_ops])  # type: ignore[union-attr]
            if doc_ops
            else np.zeros(0, bool)
        )
        store_text = self.store_text
        next_rid = self.store.next_rowid
        add_pos: list[int] = []  # global positions of added documents, in row id order

        def current(id_: str) -> tuple[int, int | None] | None:
            if id_ in id_state:
                return id_state[id_]
            rid = existing.get(id_)
            return None if rid is None else (rid, None)

        def add_doc(i: int, k: int, id_: str) -> None:
            """Append the add record of document ``k`` of the current op (global position
            ``i``) with the next row id, and note it in the group state."""
            nonlocal next_rid
            fp = fp_ints[i]
            w0, w1 = (fp, 0) if wide is None else (fp >> 64, fp & wide)
            write_add(
                next_rid,
                d_times[k],
                w0,
                w1,
                d_chash[k],
                d_empty[k],
                id_,
                d_texts[k] if store_text else None,
                d_meta[k],
                None if summ is None else summ[i],
            )
            id_state[id_] = (next_rid, i)
            add_pos.append(i)
            next_rid += 1

        # Python ints once per group (indexing NumPy scalars per document is slow); an added
        # document's record takes its two 64-bit words from them
        wide: int | None = None
        if self.bits == 64:
            fp_ints: list[int] = fps.tolist()
        else:
            fp_ints = [(a << 64) | b for a, b in fps.tolist()]
            wide = (1 << 64) - 1
        new_decision = Decision.fast
        write_add = writes.add
        # the verifications the decide loop will ask for, in one call for the whole group
        view = _GroupView(
            flat_texts, flat_chash, flat_empty, ids, lims, hit_rids, hit_d, rows, earlier, cutoff,
            hists, tokens, special,
        )  # fmt: skip
        memo = self._prefetch(slow, view)
        g = 0
        for op in group:
            if op.kind == "delete":
                cur = current(op.arg)
                if cur is None:
                    results.append(NotFoundError(f"document {op.arg!r} not found"))
                    continue
                writes.delete(cur[0], op.arg)
                deleted_rowids.add(cur[0])
                id_state[op.arg] = None
                if cur[1] is not None:
                    state.forget(cur[1])
                results.append(None)
                continue
            docs = op.docs
            assert docs is not None
            out: list[Decision] = []
            d_times = docs.times.tolist()
            d_empty = docs.empty.tolist()
            d_ids, d_texts, d_meta, d_chash = docs.ids, docs.texts, docs.metadata, docs.chash
            adding = op.kind != "check"  # add, or check_and_add when no duplicate
            force = op.kind == "add"
            for k in range(len(d_ids)):
                i = g + k
                id_ = d_ids[k]
                if not slow[i] and id_ not in existing and id_ not in id_state:
                    # no candidate anywhere and a new id: not a duplicate
                    if state.keep_unmatched(i, adding):
                        add_doc(i, k, id_)
                    out.append(new_decision(id_, False, adding, (), fp_ints[i]))
                    continue
                if not (
                    has_hits[i] or (i in earlier and any(added_mask[j] for j, _ in earlier[i]))
                ):
                    found: list[Found] = []
                else:
                    found = self._matches(i, view, deleted_rowids, added_mask, memo)
                cur = current(id_)
                if cur is not None:  # idempotent re-send: report the existing document
                    found.sort(key=lambda f: (f.distance, f.order))  # as KeepFirst does
                    matches = [Match(f.id, f.distance, f.score) for f in found[: self.max_matches]]
                    if not any(m.id == id_ for m in matches):
                        d = (
                            (fp_ints[i] ^ fp_ints[cur[1]]).bit_count()
                            if cur[1] is not None
                            else self._distance_to_row(fps[i], rows.get(cur[0]))
                        )
                        same = cur[1] is not None and flat_chash[cur[1]] == flat_chash[i]
                        same = same or (cur[0] in rows and rows[cur[0]].chash == flat_chash[i])
                        matches = [Match(id_, d, 1.0 if same else None), *matches][
                            : self.max_matches
                        ]
                    out.append(new_decision(id_, True, False, tuple(matches), fp_ints[i]))
                    continue
                dup, add, top = state.decide(
                    i, found, adding=adding, force=force, max_matches=self.max_matches
                )
                if add:
                    add_doc(i, k, id_)
                kept = tuple(Match(f.id, f.distance, f.score) for f in top)
                out.append(new_decision(id_, dup, add, kept, fp_ints[i]))
            results.append(out)
            g += len(d_ids)
        n_add = len(add_pos)
        start = self.store.allocate(n_add)
        rids = np.arange(start, start + n_add, dtype=np.int64)
        if n_add:
            pos = np.asarray(add_pos, dtype=np.int64)
            times = (
                doc_ops[0].docs.times  # type: ignore[union-attr]
                if len(doc_ops) == 1
                else np.concatenate([op.docs.times for op in doc_ops])  # type: ignore[union-attr]
            )
            added_bands = added_sk = None
            if self.lsh_plan is not None:  # band keys made by the preparer, not in the writer
                all_bands = np.concatenate([op.docs.bands for op in doc_ops])  # type: ignore[union-attr]
                added_bands = all_bands[pos]
                assert q_sk is not None
                added_sk = q_sk[pos]
            writes.set_added(fps[pos], rids, times[pos], added_bands, added_sk)
        else:
            writes.set_added(fps[:0], rids, np.zeros(0, np.float64))
        return results, writes

    def _candidates(
        self, i: int, view: _GroupView, deleted: set[int], added_mask: bytearray | None
    ) -> tuple[list[tuple[int, int, str, float | None, bool]], list[tuple[int, int, str, str]]]:
        """(matches found without verification: (distance, order, id, score, may drop);
        candidates to verify, closest first: (distance, order, id, text)) of document ``i``.
        ``order`` is the stored row id, or ``GROUP_ORDER + j`` for document ``j`` of the group.
        Stored rows in ``deleted`` do not match; ``added_mask`` None: every earlier document of
        the group counts as added (what :meth:`_prefetch` plans for)."""
        texts, chash, empty, ids = view.texts, view.chash, view.empty, view.ids
        rows, cutoff = view.rows, view.cutoff
        lo, hi = view.lims[i], view.lims[i + 1]
        text = texts[i]
        limit = self._limit(text)
        q_empty = bool(empty[i])
        q_hash = chash[i]
        # (exact first, distance, order, id, hash, empty, text): exact duplicates need no
        # verification; the rest are verified closest first until max_matches are accepted
        cands: list[tuple[int, int, int, str, bytes, bool, str | None]] = []
        for rid, d in zip(view.hit_rids[lo:hi].tolist(), view.hit_d[lo:hi].tolist(), strict=True):
            if rid in deleted:
                continue
            row = rows.get(rid)
            if row is None or (cutoff is not None and row.time < cutoff):
                continue
            ex = 0 if row.chash == q_hash else 1
            cands.append((ex, d, rid, row.id, row.chash, row.empty, row.text))
        for j, d in view.earlier.get(i, ()):
            if added_mask is None or added_mask[j]:
                ex = 0 if chash[j] == q_hash else 1
                cands.append((ex, d, GROUP_ORDER + j, ids[j], chash[j], bool(empty[j]), texts[j]))
        cands.sort(key=lambda c: (c[0], c[1], c[2]))
        found: list[tuple[int, int, str, float | None, bool]] = []
        pending: list[tuple[int, int, str, str]] = []
        for ex, d, order, cid, _h, c_empty, c_text in cands:
            if ex == 0 and q_hash != NO_CONTENT_HASH:
                found.append((d, order, cid, 1.0, True))
            elif q_empty or c_empty or d > limit:
                continue
            elif self.verifier is not None and c_text is not None:
                pending.append((d, order, cid, c_text))
            elif d <= self.max_distance:
                found.append((d, order, cid, None, True))
        found.sort(key=lambda x: (x[0], x[1]))
        pending.sort(key=lambda x: (x[0], x[1]))
        return found, pending

    def _matches(
        self,
        i: int,
        view: _GroupView,
        deleted: set[int],
        added_mask: bytearray,
        memo: dict[tuple[int, int], tuple[bool, float]] | None = None,
    ) -> list[Found]:
        """The verified matches of document ``i`` (stored rows, and earlier documents of the
        group that ``added_mask`` marks kept), verified closest first until ``max_matches``
        are accepted; :class:`~neardup.rules.keep.KeepFirst` decides from them. ``memo``:
        (document, order) -> (accepted, score) of pairs verified ahead (:meth:`_prefetch`); a
        pair's verification does not depend on the others, so a memo hit decides as verifying
        it here would."""
        text = view.texts[i]
        found, pending = self._candidates(i, view, deleted, added_mask)
        if memo is None:
            memo = {}
        # verify closest first, in chunks, until max_matches are accepted
        pos = 0
        while pending[pos:] and len(found) < self.max_matches:
            chunk = pending[pos : pos + max(4, self.max_matches - len(found))]
            pos += len(chunk)
            miss = [c for c in chunk if (i, c[1]) not in memo]
            if miss:
                ok, scores = self.verify(text, miss, *view.known(i))
                for c, a, sc in zip(miss, ok.tolist(), scores.tolist(), strict=True):
                    memo[(i, c[1])] = (a, sc)
            for c in chunk:
                a, sc = memo[(i, c[1])]
                if a:
                    found.append((c[0], c[1], c[2], float(sc), self._may_drop(text, c[3])))
        return [Found(*f) for f in found]

    def group_matches(self, docs: PreparedDocs) -> dict[int, list[Found]]:
        """The verified matches of each document of ``docs`` with the documents before it in
        ``docs``, as if every one of them were kept: position -> [Found] (``Found.member`` is
        the earlier position). The within-group half of :meth:`decide` (same candidates:
        SimHash within the radius and, with the MinHash channel, shared band keys; same
        verification and keep-rule length test), without the store; what a cluster's batch
        is decided with (:func:`neardup.rules.keep.keep_first`). Every candidate pair is
        verified (``decide`` stops at ``max_matches`` accepted per document). Any thread."""
        n = len(docs.ids)
        if n < 2:
            return {}
        if self.lsh_plan is not None and docs.bands is None:
            add_lsh_keys(docs, self.verifier, self.lsh_plan)
        earlier = self.intra_pairs(docs.fps, self._split_lengths(docs.texts))
        if self.lsh_plan is not None:
            assert docs.sig is not None and docs.usable is not None
            self._lsh_intra(docs.fps, docs.sig, docs.usable, earlier, docs.bands)
        if not earlier:
            return {}
        none = np.zeros(0, np.int64)
        view = _GroupView(
            list(docs.texts), list(docs.chash), docs.empty, list(docs.ids),
            np.zeros(n + 1, np.int64), none, none.astype(np.int32), {}, earlier, None,
            docs.hists, docs.tokens, docs.special,
        )  # fmt: skip
        out: dict[int, list[Found]] = {}
        qa: list[int] = []
        cb: list[int] = []
        ds: list[int] = []
        keys: list[tuple[int, int, str]] = []
        for i in sorted(earlier):
            found, pending = self._candidates(i, view, set(), None)
            out[i] = [Found(*f) for f in found]
            for d, order, cid, _text in pending:
                qa.append(i)
                cb.append(order - GROUP_ORDER)
                ds.append(d)
                keys.append((d, order, cid))
        if keys and self.verifier is not None:
            ok, scores = self._verify_pairs(view.texts, qa, cb, ds, None, None, *view.known())
            for (d, order, cid), i, j, a, sc in zip(
                keys, qa, cb, ok.tolist(), scores.tolist(), strict=True
            ):
                if a:
                    drops = self._may_drop(view.texts[i], view.texts[j])
                    out[i].append(Found(d, order, cid, float(sc), drops))
        return {i: f for i, f in out.items() if f}

    def _prefetch(
        self, slow: list[bool], view: _GroupView
    ) -> dict[tuple[int, int], tuple[bool, float]]:
        """Verify, in a few calls for the whole group, the candidates each document of the
        group would verify in :meth:`_matches` if every earlier document of the group were
        added. Round 1 takes each document's first ``max(4, max_matches)`` candidates (a
        superset of its first chunk). Each later round replays :meth:`_matches`' loop on the
        answers so far and takes, for each document that has not accepted ``max_matches`` yet,
        the rest of its candidates, :data:`_REST_PAIRS` at a time. A document with many
        candidates and few duplicates among them (a text made mostly of one frequent token)
        verifies all of them either way; a call per chunk of it costs more in fixed overhead
        (tokenising, kernel set-up) than its pairs (``benchmarks/bench_verify_calls.py``).
        Returns the memo :meth:`_matches` reads: a pair's verification does not depend on the
        others, and :meth:`_matches` verifies what the memo lacks itself."""
        memo: dict[tuple[int, int], tuple[bool, float]] = {}
        if self.verifier is None:
            return memo
        mm = self.max_matches
        first = max(4, mm)
        all_texts = list(view.texts)
        row_text: dict[int, int] = {}
        stored: dict[int, int] = {}  # text index -> stored row id
        none: set[int] = set()
        # per slow document: [position, matches found without verification, its candidates
        # as (text index, distance, order), candidates replayed, accepted so far]
        plans: list[list[Any]] = []
        for i, s in enumerate(slow):
            if not s:
                continue
            found, pending = self._candidates(i, view, none, None)
            if not pending or len(found) >= mm:
                continue
            cands = []
            for d, order, _cid, c_text in pending:
                if order >= GROUP_ORDER:
                    t = order - GROUP_ORDER
                else:
                    t = row_text.get(order, -1)
                    if t < 0:
                        t = row_text[order] = len(all_texts)
                        all_texts.append(c_text)
                        stored[t] = order
                cands.append((t, d, order))
            plans.append([i, len(found), cands, 0, 0])
        first_round = True
        while plans:
            qa: list[int] = []
            cb: list[int] = []
            ds: list[int] = []
            keys: list[tuple[int, int]] = []
            left: list[list[Any]] = []
            for plan in plans:
                i, n_found, cands, pos, accepted = plan
                if first_round:
                    need = cands[:first]
                else:  # replay _matches' loop on the memo until a chunk needs verifying
                    need = []
                    while pos < len(cands) and n_found + accepted < mm:
                        chunk = cands[pos : pos + max(4, mm - n_found - accepted)]
                        need = [c for c in chunk if (i, c[2]) not in memo]
                        if need:
                            break
                        accepted += sum(memo[(i, c[2])][0] for c in chunk)
                        pos += len(chunk)
                    plan[3], plan[4] = pos, accepted
                    if need:  # the rest of its candidates, not a chunk (at least the chunk)
                        rest = cands[pos : pos + max(_REST_PAIRS, len(chunk))]
                        need = [c for c in rest if (i, c[2]) not in memo]
                for t, d, order in need:
                    qa.append(i)
                    cb.append(t)
                    ds.append(d)
                    keys.append((i, order))
                if need:
                    left.append(plan)
            first_round = False
            if not keys:
                break
            ok, scores = self._verify_pairs(all_texts, qa, cb, ds, stored, view.rows, *view.known())
            for k, a, sc in zip(keys, ok.tolist(), scores.tolist(), strict=True):
                memo[k] = (a, sc)
            plans = left
        return memo

    def _verify_pairs(
        self,
        texts: list[str],
        a: list[int],
        b: list[int],
        d: list[int],
        stored: dict[int, int] | None = None,
        rows: dict[int, Any] | None = None,
        known: KnownHistograms | None = None,
        tokenised: dict[int, Any] | None = None,
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
        """Decide the pairs ``(texts[a[m]], texts[b[m]])`` at SimHash distances ``d`` by the
        rule :meth:`verify` applies. ``stored``: the texts that are stored rows (position ->
        row id, each in ``rows``), whose token histograms, made by the verification's first
        step, are kept in :attr:`histograms`; ``known`` and ``tokenised``: the histograms and
        kernel forms the group's documents have from their preparation, not made again."""
        if self.lsh_plan is None:
            return self.verifier.verify_many([texts[x] for x in a], [texts[y] for y in b], d)
        from ..rules.verify import stage_verify

        sink = None
        if stored and rows is not None and self.histograms.capacity:
            cache = self.histograms

            def sink(
                pos: npt.NDArray[np.int64], hist: npt.NDArray[np.uint8], lens: npt.NDArray[np.int64]
            ) -> None:
                take = [
                    k
                    for k, p in enumerate(pos.tolist())
                    if p in stored and stored[p] not in cache and lens[k] > 0
                ]
                if take:
                    rids = [stored[int(pos[k])] for k in take]
                    cache.put(rids, hist[take], lens[take], [rows[r].chash for r in rids])

        return stage_verify(
            self.verifier,
            texts,
            np.asarray(a, np.int64),
            np.asarray(b, np.int64),
            np.asarray(d, np.int32),
            tokenised=tokenised,
            on_histograms=sink,
            known=known,
        )

    def _may_drop(self, text: str, kept: str) -> bool:
        """Whether a verified match with ``kept`` makes ``text`` a duplicate. With the MinHash
        channel, the batch keep rule (:func:`neardup.rules.keep.may_drop`, in token counts): a
        text more than ``(2 - threshold) / threshold`` times longer than the kept one contains
        it (no pair reaches the threshold by similarity at that ratio) and is kept; the match
        is still reported."""
        if self.lsh_plan is None:
            return True
        v = self.verifier
        return bool(may_drop(len(v.tokens(kept)), len(v.tokens(text)), v.threshold))

    def verify(
        self,
        text: str,
        chunk: list[tuple[int, int, str, str]],
        known: KnownHistograms | None = None,
        tokenised: dict[int, Any] | None = None,
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
        """Decide (text, candidate text) pairs: with the MinHash channel by the batch
        pipeline's own verification (:func:`neardup.rules.verify.stage_verify`: numba bounds, then the
        exact LCS), so online and batch apply one rule; else ``Verifier.verify_many``.
        ``known``, ``tokenised``: ``text``'s histogram and kernel form where its preparation
        made them (at position 0)."""
        if self.lsh_plan is None:
            return self.verifier.verify_many(
                [text] * len(chunk), [c[3] for c in chunk], [c[0] for c in chunk]
            )
        from ..rules.verify import stage_verify

        m = len(chunk)
        return stage_verify(
            self.verifier,
            [text, *(c[3] for c in chunk)],
            np.zeros(m, np.int64),
            np.arange(1, m + 1, dtype=np.int64),
            np.array([c[0] for c in chunk], np.int32),
            tokenised=tokenised,
            known=known,
        )

    def _limit(self, text: str) -> int:
        """Search distance for one query text (the verifier's, capped by the radius)."""
        if self.lsh_plan is not None:  # MinHash candidates are verified at any distance
            return self.bits
        if self.verifier is None or self.radius == self.max_distance:
            return self.max_distance
        return max(
            self.max_distance, min(int(self.verifier.candidate_distance(len(text))), self.radius)
        )

    def _search_by_limit(
        self, fps: npt.NDArray[np.uint64], limits: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        """Search each query only as far as it needs (long texts need less than short ones)."""
        uniq = sorted(set(limits.tolist()))
        if len(uniq) <= 1:
            return self.store.search(fps, int(uniq[0]) if uniq else self.max_distance)
        n = len(fps)
        parts = []
        counts = np.zeros(n, dtype=np.int64)
        for lim in uniq:
            sel = np.flatnonzero(limits == lim)
            r = self.store.search(fps[sel], int(lim))
            counts[sel] = np.diff(r[0])
            parts.append((sel, r))
        lims = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=lims[1:])
        ids = np.empty(int(lims[-1]), dtype=np.int64)
        ds = np.empty(int(lims[-1]), dtype=np.int32)
        for sel, (lo, i, d) in parts:
            c = np.diff(lo)
            dest = np.repeat(lims[sel], c) + (np.arange(len(i)) - np.repeat(lo[:-1], c))
            ids[dest] = i
            ds[dest] = d
        return lims, ids, ds

    def _split_lengths(self, texts: list[str]) -> npt.NDArray[np.int64] | None:
        """The texts' lengths in characters, for the split SimHash pass (None: no split)."""
        if self.short_chars is None:
            return None
        return np.fromiter(map(len, texts), np.int64, len(texts))

    def intra_pairs(
        self, fps: npt.NDArray[np.uint64], lens: npt.NDArray[np.int64] | None = None
    ) -> dict[int, list[tuple[int, int]]]:
        """Pairs of documents in one group within the search radius, keyed by the later one;
        with the split SimHash pass (:attr:`short_chars`), only those it pairs (``lens``: the
        group's texts' lengths in characters; None: every pair within the radius, as without
        the split or in a warm-up)."""
        out: dict[int, list[tuple[int, int]]] = {}
        if len(fps) < 2:
            return out
        if len(fps) <= _BRUTE_PAIRS:  # small groups: one distance matrix, no index build
            dist = hamming_cdist(fps, fps)
            b, a = np.nonzero(np.tril(dist <= self.radius, k=-1))
            d = dist[b, a]
        else:
            from ..index import all_pairs

            # one thread: a thread pool per group costs more than it saves on small groups
            a, b, d = all_pairs(fps, max_distance=self.radius, threads=1)
        if self.short_chars is not None and lens is not None and len(d):
            ok = simhash_pass_pairs(d, lens[a], lens[b], self.short_chars, self.radius)
            a, b, d = a[ok], b[ok], d[ok]
        for x, y, z in zip(a.tolist(), b.tolist(), d.tolist(), strict=True):
            out.setdefault(y, []).append((x, z))
        return out

    def _split_pass(
        self,
        lims: npt.NDArray[np.int64],
        hit_rids: npt.NDArray[np.int64],
        hit_d: npt.NDArray[np.int32],
        lens: npt.NDArray[np.int64],
        rows: dict[int, Any],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        """The SimHash hits the split pass pairs (:func:`~neardup.rules.plan.simhash_pass_pairs`):
        a hit past the short distance on a stored row shorter than :attr:`short_chars`
        characters is turned down, now that ``rows`` holds its text (a row not read is left
        to the later steps; ``lens``: the queries' lengths in characters). Only a long query
        has such hits: a short one searched the short distance. A band candidate it turned
        down is still one (its hits kept it as such)."""
        far = np.flatnonzero(hit_d > LSH_SIMHASH_SHORT_DISTANCE)
        if not far.size:
            return lims, hit_rids, hit_d
        q = np.repeat(np.arange(lims.size - 1), np.diff(lims))
        short_chars = self.short_chars
        assert short_chars is not None
        # a stored row's length, or -1 where it was not read (left to the later steps)
        slen = np.fromiter(
            (
                -1 if (row := rows.get(r)) is None or row.text is None else len(row.text)
                for r in hit_rids[far].tolist()
            ),
            np.int64,
            far.size,
        )
        keep = np.ones(hit_rids.size, np.bool_)
        keep[far] = (slen < 0) | simhash_pass_pairs(
            hit_d[far], lens[q[far]], slen, short_chars, self.radius
        )
        if keep.all():
            return lims, hit_rids, hit_d
        return kept_lims(lims, keep), hit_rids[keep], hit_d[keep]

    def _lsh_union(
        self,
        fps: npt.NDArray[np.uint64],
        sig: npt.NDArray[np.uint16],
        lims: npt.NDArray[np.int64],
        hit_rids: npt.NDArray[np.int64],
        hit_d: npt.NDArray[np.int32],
        lsh_rids: list[npt.NDArray[np.int64]],
        rows: dict[int, Any],
        cached: dict[int, int],
        keys: BandKeys | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        """The candidates of each query: its SimHash hits plus the stored rows sharing a band
        key with it whose signatures agree on >= ``plan.min_agreement`` MinHash values (the
        batch pipeline's filter). A stored row's signature comes from :attr:`signatures`
        (``cached``: row id -> slot) or is made again from its text in ``rows`` (and cached);
        the rows that pass and were not read yet are read here (into ``rows``; one the store
        no longer returns, deleted or gone, is no candidate). A group of ``ARRAY_UNION_MIN``
        documents or more does the same with array operations
        (:func:`neardup.online.union.union_arrays`; ``keys``: ``lsh_rids`` flat and distinct,
        made from them when None)."""
        if len(fps) >= ARRAY_UNION_MIN:
            if keys is None:
                keys = BandKeys.of(lsh_rids)
            out = union_arrays(self, fps, sig, lims, hit_rids, hit_d, keys, rows, cached)
            if out is not None:
                return out
        plan = self.lsh_plan
        need = sorted(
            {
                int(r)
                for a in lsh_rids
                for r in a.tolist()
                if r not in cached and r in rows and rows[r].text is not None
            }
        )
        if not need and not cached:
            return lims, hit_rids, hit_d
        known = list(cached)
        where = {r: k for k, r in enumerate(known)}
        parts = [self.signatures.signatures([cached[r] for r in known])]  # a copy
        if need:
            # the signatures only (their band keys are not needed: the store matched those)
            made = minhash_signatures(self.verifier, [rows[r].text for r in need], plan.hashes)[0]
            self.signatures.put(need, made)
            where.update({r: len(known) + k for k, r in enumerate(need)})
            parts.append(made)
        stored_sig = np.concatenate(parts) if len(parts) > 1 else parts[0]
        passed: list[list[int]] = [[] for _ in range(len(fps))]
        # the (query, stored row) pairs, filtered a block at a time (a large group can hold
        # tens of millions: its comparison arrays stay bounded)
        q_of: list[int] = []
        k_of: list[int] = []
        r_of: list[int] = []

        def flush() -> None:
            ok = agreeing(
                stored_sig, np.asarray(k_of, np.int64), sig, np.asarray(q_of, np.int64), plan
            )
            for m in np.flatnonzero(ok).tolist():
                passed[q_of[m]].append(r_of[m])
            q_of.clear()
            k_of.clear()
            r_of.clear()

        get = where.get
        for i, cand in enumerate(lsh_rids):
            seen = set(hit_rids[lims[i] : lims[i + 1]].tolist())
            for r in cand.tolist():
                k = get(r)
                if k is not None and r not in seen:
                    q_of.append(i)
                    k_of.append(k)
                    r_of.append(r)
            if len(r_of) >= FILTER_BLOCK:
                flush()
        if r_of:
            flush()
        unread = {r for ok in passed for r in ok if r not in rows}
        if unread:
            rows.update(self.store.fetch(unread, with_text=True))
        out_r: list[int] = []
        out_d: list[int] = []
        counts = np.zeros(len(fps), np.int64)
        for i, ok in enumerate(passed):
            before = len(out_r)
            out_r += hit_rids[lims[i] : lims[i + 1]].tolist()
            out_d += hit_d[lims[i] : lims[i + 1]].tolist()
            for r in ok:
                row = rows.get(r)
                if row is not None and row.text is not None:
                    out_r.append(r)
                    out_d.append(self._distance_to_row(fps[i], row))
            counts[i] = len(out_r) - before
        new_lims = np.zeros(len(fps) + 1, np.int64)
        np.cumsum(counts, out=new_lims[1:])
        return new_lims, np.asarray(out_r, np.int64), np.asarray(out_d, np.int32)

    def _lsh_intra(
        self,
        fps: npt.NDArray[np.uint64],
        sig: npt.NDArray[np.uint16],
        usable: npt.NDArray[np.bool_],
        earlier: dict[int, list[tuple[int, int]]],
        ent: npt.NDArray[np.uint64] | None = None,
    ) -> None:
        """Add the group's MinHash pairs (the batch pipeline's
        :func:`~neardup.rules.lsh.lsh_pairs`; from the group's compact band keys ``ent`` by
        :func:`~neardup.rules.lsh.group_lsh_pairs` where it answers) to ``earlier`` (later
        position -> [(earlier position, SimHash distance)])."""
        if len(fps) < 2:
            return
        from ..rules.lsh import group_lsh_pairs, lsh_pairs

        got = None if ent is None else group_lsh_pairs(ent, sig, usable, self.lsh_plan)
        a, b = lsh_pairs(sig, usable, self.lsh_plan) if got is None else got
        for x, y in zip(a.tolist(), b.tolist(), strict=True):
            lst = earlier.setdefault(y, [])
            if all(j != x for j, _ in lst):
                lst.append((x, (self._fp_int(fps[x]) ^ self._fp_int(fps[y])).bit_count()))

    def _fp_int(self, fp: Any) -> int:
        if self.bits == 64:
            return int(fp)
        return (int(fp[0]) << 64) | int(fp[1])

    def _distance_to_row(self, fp: Any, row: Any) -> int:
        if row is None:
            return 0
        hi = int.from_bytes(row.fp[:8], "little")
        lo = int.from_bytes(row.fp[8:], "little")
        stored = hi if self.bits == 64 else (hi << 64) | lo
        return (self._fp_int(fp) ^ stored).bit_count()
