"""The MinHash channel's candidate pairs under the plan, and the bucket valve's policy.

:func:`lsh_pairs`: per band the ``rows`` values of every signature are packed into one key
(:mod:`neardup.fingerprint.minhash`), the rows are grouped by key and every group yields its
pairs (the band self-join of :mod:`neardup.index.band_groups`), kept when their signatures agree
on at least ``plan.min_agreement`` values. Every pair of a group is compared while the band's
pairs fit its budget (``band_pairs_per_doc`` per document); a band over it (a template repeated
with small changes a million times) pairs the members of its largest groups with the group's
first ``cap`` members and their ``cap`` predecessors instead, the cap chosen to fit the budget
(at least ``bucket_cap``), once per member over the bands; the pairs given up are counted and
the candidates among them estimated by sampling. :func:`band_caps` is the same per-band cap
from bucket-size histograms (the distributed engines count the buckets where they are).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from .._arrays import in_sorted, merge_disjoint, unique_sorted
from .._jit import kernel
from .._threads import kernel_threads, threads_now
from ..fingerprint.minhash import BAND_BLOCK, band_key_block, band_keys
from ..index.band_groups import (
    agreeing_group_pairs,
    agreement,
    band_groups,
    choose_bands,
    pairs_per_group,
    signature_words,
    thin_big_groups,
    valve_cap,
)
from .plan import LshPlan

_T = TypeVar("_T")

__all__ = [
    "MASK_UNKNOWN",
    "SKETCH_BITS",
    "SKETCH_TOKENS_UNKNOWN",
    "VALVE_SAMPLE",
    "agreeing",
    "band_budget",
    "band_caps",
    "group_lsh_pairs",
    "lsh_pairs",
    "query_cap",
    "sketch_agreeing",
    "sketch_bytes",
    "sketch_masks",
    "sketch_tokens",
    "sketches",
    "token_masks",
]

#: pairs sampled from each thinned bucket to estimate the candidates the valve gave up
VALVE_SAMPLE = 64


def band_budget(plan: LshPlan, docs: int) -> int | None:
    """A band's pair budget for ``docs`` documents with tokens (None: no budget)."""
    return None if plan.band_pairs_per_doc is None else plan.band_pairs_per_doc * max(docs, 1)


def query_cap(plan: LshPlan) -> int:
    """The valve's cap for a query against stored buckets (the online store's MinHash channel,
    :meth:`neardup.store.Store.search_bands`): the plan's floor ``bucket_cap``. The same valve
    as the batch's (:func:`~neardup.index.band_groups.group_pairs`: a member that comes last
    meets its bucket's ``cap`` oldest and ``cap`` newest rows), at the cap the batch never goes
    below: the batch raises a band's cap to the largest that fits the band's budget over the
    whole corpus (:func:`band_caps`; no cap at all while the band fits), which a stream cannot
    know ahead, and a query's cost stays bounded by ``2 * bucket_cap`` rows a band. Where a
    band fits its budget but a bucket holds more than ``2 * bucket_cap`` stored rows, a query
    meets fewer of them than the batch would pair it with (docs/service.md)."""
    return plan.bucket_cap


def agreeing(
    stored: npt.NDArray[np.uint16],
    k_of: npt.NDArray[np.int64],
    sig: npt.NDArray[np.uint16],
    q_of: npt.NDArray[np.int64],
    plan: LshPlan,
) -> npt.NDArray[np.bool_]:
    """The agreement filter for a query against stored rows (the online channel): whether the
    pair ``(sig[q_of[m]], stored[k_of[m]])`` agrees on ``>= plan.min_agreement`` values (the
    batch's rule) and on every value of at least one band. The second half stands for the
    batch's grouping by full band keys: a store keeps 32 bits of each key, so a false collision
    of those is dropped here, as the batch never pairs it. One pass per pair, no temporaries
    (:func:`neardup.rules.reference.agreeing_reference` is the NumPy twin)."""
    if stored.shape[1] != sig.shape[1]:
        raise ValueError(f"signatures of {stored.shape[1]} and {sig.shape[1]} values")
    return _agreeing_kernel(
        stored,
        np.ascontiguousarray(k_of, np.int64),
        sig,
        np.ascontiguousarray(q_of, np.int64),
        plan.bands,
        plan.rows,
        plan.min_agreement,
    )


@kernel(nogil=True)
def _agreeing_kernel(
    stored: npt.NDArray[np.uint16],
    k_of: npt.NDArray[np.int64],
    sig: npt.NDArray[np.uint16],
    q_of: npt.NDArray[np.int64],
    bands: int,
    rows: int,
    min_agree: int,
) -> npt.NDArray[np.bool_]:  # pragma: no cover (numba)
    n = k_of.size
    h = sig.shape[1]
    span = bands * rows
    out = np.zeros(n, np.bool_)
    for m in range(n):
        a = stored[k_of[m]]
        b = sig[q_of[m]]
        agree = 0
        share = False
        for band in range(bands):
            whole = True
            for j in range(band * rows, band * rows + rows):
                if a[j] == b[j]:
                    agree += 1
                else:
                    whole = False
            share = share or whole
        for j in range(span, h):
            if a[j] == b[j]:
                agree += 1
        out[m] = share and agree >= min_agree
    return out


#: bits of each MinHash value a stored row keeps beside its band keys (:func:`sketches`)
SKETCH_BITS = 4
#: a sketch ends with its text's token count, u16 little-endian (:func:`sketch_tokens`); this
#: value stands for "65,535 or more" (not a count a length bound can use)
SKETCH_TOKENS_UNKNOWN = 0xFFFF


#: a sketch's token mask where the text's coarse token buckets are not known (rows whose
#: signatures came without them, e.g. from a batch run): every bucket may be used, no bound
MASK_UNKNOWN = (1 << 64) - 1


def sketch_bytes(hashes: int) -> int:
    """Bytes of one signature's sketch (:func:`sketches`) of ``hashes`` values."""
    return (hashes * SKETCH_BITS + 7) // 8 + 10


def token_masks(buckets: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint64]:
    """Which of the coarse token buckets each text uses (``buckets``: the counts
    :func:`~neardup.fingerprint.minhash.minhash_signatures` fills): bit ``j`` of a text's
    ``uint64`` set where ``buckets[:, j] > 0``.

    >>> b = np.zeros((2, 64), np.uint8); b[0, [0, 3, 63]] = [1, 9, 255]
    >>> [hex(m) for m in token_masks(b).tolist()]
    ['0x8000000000000009', '0x0']
    """
    used = np.asarray(buckets) > 0
    if used.shape[1] != 64:
        raise ValueError(f"token masks are made of 64 buckets a text, got {used.shape[1]}")
    return np.packbits(used, axis=1, bitorder="little").view("<u8").reshape(-1).astype(np.uint64)


def sketches(
    sig: npt.NDArray[np.uint16],
    tokens: npt.ArrayLike,
    masks: npt.ArrayLike | None = None,
) -> npt.NDArray[np.uint8]:
    """The low :data:`SKETCH_BITS` bits of every value of each signature, two values a byte
    (value ``2j`` in the low half of byte ``j``), then the text's token mask (``masks``,
    :func:`token_masks`: u64 little-endian; None: :data:`MASK_UNKNOWN`), then its token count
    (``tokens``, ``Verifier.tokens``: u16 little-endian, :data:`SKETCH_TOKENS_UNKNOWN` from
    65,535 up): ``(n, ceil(hashes / 2) + 10)``. A store keeps these beside a row's band keys
    so that :func:`sketch_agreeing` can turn most band candidates down without the row's text
    (b-bit MinHash, Li & König 2010), a length bound most SimHash hits
    (:meth:`neardup.verify.Verifier.cannot_pass`), and the token-mask bound most of the rest
    of both (:func:`neardup.verify.overlap.mask_bound_decisions`).

    >>> sketches(np.array([[0x1234, 0xABCD, 0x0007]], np.uint16), [300], [0x81]).tolist()
    [[212, 7, 129, 0, 0, 0, 0, 0, 0, 0, 44, 1]]
    """
    sig = np.asarray(sig, np.uint16)
    n, h = sig.shape
    low = (sig & 0xF).astype(np.uint8)
    if h % 2:
        low = np.concatenate([low, np.zeros((n, 1), np.uint8)], axis=1)
    t = np.minimum(np.asarray(tokens, np.int64).reshape(n), SKETCH_TOKENS_UNKNOWN).astype("<u2")
    m = (
        np.full(n, MASK_UNKNOWN, "<u8")
        if masks is None
        else np.asarray(masks, np.uint64).reshape(n).astype("<u8")
    )
    return np.ascontiguousarray(
        np.concatenate(
            [
                low[:, 0::2] | (low[:, 1::2] << 4),
                m.view(np.uint8).reshape(n, 8),
                t.view(np.uint8).reshape(n, 2),
            ],
            1,
        )
    )


def sketch_masks(sk: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint64]:
    """The token masks :func:`sketches` wrote before each sketch's token count (``(n,)``
    uint64; :data:`MASK_UNKNOWN` where none was known).

    >>> [hex(m) for m in sketch_masks(sketches(np.zeros((2, 3), np.uint16), [5, 7], [6, 2**63])).tolist()]
    ['0x6', '0x8000000000000000']
    """
    sk = np.ascontiguousarray(np.asarray(sk, np.uint8)[:, -10:-2])
    return sk.view("<u8").reshape(-1).astype(np.uint64)


def sketch_tokens(sk: npt.NDArray[np.uint8]) -> npt.NDArray[np.int64]:
    """The token counts :func:`sketches` wrote at the end of each sketch (``(n,)`` int64;
    :data:`SKETCH_TOKENS_UNKNOWN` where the text had 65,535 or more).

    >>> sketch_tokens(sketches(np.zeros((2, 3), np.uint16), [5, 70000])).tolist()
    [5, 65535]
    """
    sk = np.asarray(sk, np.uint8)
    return sk[:, -2].astype(np.int64) | (sk[:, -1].astype(np.int64) << 8)


def sketch_agreeing(
    stored: npt.NDArray[np.uint8],
    k_of: npt.NDArray[np.int64],
    queries: npt.NDArray[np.uint8],
    q_of: npt.NDArray[np.int64],
    plan: LshPlan,
) -> npt.NDArray[np.bool_]:
    """A necessary condition of :func:`agreeing` on :func:`sketches`: whether the pair
    ``(queries[q_of[m]], stored[k_of[m]])`` agrees on the low bits of ``>= plan.min_agreement``
    values and on every value of at least one band. Two equal values have equal low bits, so a
    pair :func:`agreeing` accepts is never turned down here; a pair turned down needs neither
    its signature nor its text. Unequal values agree on their low bits with probability
    ``2**-SKETCH_BITS``, so some pairs pass that :func:`agreeing` then rejects
    (``benchmarks/bench_store_scale.py`` counts both)."""
    if stored.shape[1] != queries.shape[1]:
        raise ValueError(f"sketches of {stored.shape[1]} and {queries.shape[1]} bytes")
    if 2 * stored.shape[1] < plan.hashes:
        raise ValueError(f"sketches of {stored.shape[1]} bytes for {plan.hashes} values")
    return _sketch_kernel(
        stored,
        np.ascontiguousarray(k_of, np.int64),
        queries,
        np.ascontiguousarray(q_of, np.int64),
        plan.bands,
        plan.rows,
        plan.hashes,
        plan.min_agreement,
        _EQUAL_NIBBLES,
    )


#: equal half-bytes of each byte value (0, 1 or 2): how many of two values a byte of XORed
#: sketches shows to agree
_EQUAL_NIBBLES = np.array(
    [int(x & 0xF == 0) + int(x >> 4 == 0) for x in range(256)], dtype=np.int64
)


@kernel(nogil=True)
def _sketch_kernel(
    stored: npt.NDArray[np.uint8],
    k_of: npt.NDArray[np.int64],
    queries: npt.NDArray[np.uint8],
    q_of: npt.NDArray[np.int64],
    bands: int,
    rows: int,
    hashes: int,
    min_agree: int,
    equal: npt.NDArray[np.int64],
) -> npt.NDArray[np.bool_]:  # pragma: no cover (numba)
    n = k_of.size
    span = bands * rows
    whole_bytes = hashes >> 1
    out = np.zeros(n, np.bool_)
    for m in range(n):
        a = stored[k_of[m]]
        b = queries[q_of[m]]
        # the count first, a byte (two values) at a time; most pairs stop here
        agree = 0
        for i in range(whole_bytes):
            agree += equal[a[i] ^ b[i]]
        if hashes & 1 and ((a[whole_bytes] ^ b[whole_bytes]) & 0xF) == 0:
            agree += 1
        if agree < min_agree:
            continue
        share = False
        for band in range(bands):
            whole = True
            for j in range(band * rows, band * rows + rows):
                if ((a[j >> 1] ^ b[j >> 1]) >> ((j & 1) * 4)) & 0xF:
                    whole = False
                    break
            if whole:
                share = True
                break
        out[m] = share and span > 0
    return out


def _one_ahead(make: Callable[[int], _T], count: int, workers: int) -> Iterator[_T]:
    """``make(0), ..., make(count - 1)``, in order; with more than one worker each is made on a
    helper thread while the caller works on the one before (a band's grouping, one thread's
    sort and scans, beside the band before's pairs on the kernel threads). ``make`` runs on
    one thread, in order, either way."""
    if workers <= 1 or count <= 1:
        for i in range(count):
            yield make(i)
        return
    threads = threads_now()  # the caller's kernel threads (a thread-local setting)

    def made(i: int) -> _T:
        with kernel_threads(threads):
            return make(i)

    with ThreadPoolExecutor(1, thread_name_prefix="neardup-bands") as ahead:
        nxt = ahead.submit(made, 0)
        for i in range(count):
            got = nxt.result()
            if i + 1 < count:
                nxt = ahead.submit(made, i + 1)
            yield got


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
    Equals :func:`neardup.rules.reference.lsh_pairs_reference` whenever the valve does not act
    (tested).

    The valve, per band (:func:`~neardup.index.band_groups.valve_cap`): while the pairs of all the band's buckets number
    at most ``plan.band_pairs_per_doc`` per document, every bucket is paired in full; otherwise
    the buckets larger than the band's cap are thinned (:func:`~neardup.index.band_groups.group_pairs`' window and anchors,
    once per document over the bands, in the band whose bucket's first member is least:
    :func:`~neardup.index.band_groups.choose_bands`, ``thin_big_groups``), and what that gave up is
    estimated by sampling their pairs. ``info`` gets ``raw_pairs`` (band collisions compared),
    ``pairs``, ``band_pairs_budget``, ``valve_bands``, ``bucket_cap_used``,
    ``capped_buckets``, ``pairs_skipped`` (an upper bound), ``valve_lost_pairs_est`` (agreeing
    pairs no band made) and ``valve_recall_loss_est`` (that as a share of the candidates).

    ``capped_out`` (optional) receives one bool mask over the returned pairs: True for a pair
    found only inside thinned buckets, i.e. only because of a crowded bucket
    (:func:`neardup.rules.verify.verify_in_chunks` verifies those lazily).
    ``progress(bands done)`` (optional) is called after each band."""
    idx = np.flatnonzero(usable).astype(np.int64)
    words, pad = signature_words(sig, idx)
    s = words.view(np.uint16)[:, : sig.shape[1]]  # the usable rows' signatures (a view)
    parts_a, parts_b = [], []
    big_codes: list[npt.NDArray[np.int64]] = []
    raw = capped = skipped = valve_bands = 0
    caps_used: list[int] = []
    n = idx.size
    budget = band_budget(plan, n)
    sample_codes: list[npt.NDArray[np.int64]] = []
    sample_weights: list[npt.NDArray[np.float64]] = []
    block = np.zeros((0, n), np.uint64)

    def groups_of(band: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        nonlocal block
        if plan.rows > 4:
            keys = band_keys(s, band, plan.rows)
        else:
            if band % BAND_BLOCK == 0:
                block = band_key_block(s, band, min(plan.bands, band + BAND_BLOCK), plan.rows)
            keys = block[band % BAND_BLOCK]
        return band_groups(keys)

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
    # each member of their large buckets knows the one band it is paired in (choose_bands)
    over: list[tuple[int, int]] = []
    best_anchor = np.full(n, np.iinfo(np.int64).max, np.int64)
    best_band = np.full(n, -1, np.int64)
    for band, (members, bounds) in enumerate(_one_ahead(groups_of, plan.bands, workers)):
        if progress is not None and band:
            progress(band)
        if bounds.size < 2:
            continue
        size = np.diff(bounds)
        cap = valve_cap(size, plan.bucket_cap, budget)
        if cap is None:  # the band's buckets fit its budget: every pair (no valve)
            pair(members, bounds, None, np.zeros(size.size, np.bool_))
        else:
            choose_bands(members, bounds, cap, band, best_anchor, best_band)
            over.append((band, cap))
    for band, cap in over:  # the valve: the largest buckets thinned to the cap
        members, bounds = band_groups(band_keys(s, band, plan.rows))
        size = np.diff(bounds)
        valve_bands += 1
        caps_used.append(cap)
        capped += int((size > cap + 1).sum())
        codes, weights = _valve_sample(
            s, members, bounds, cap, plan.min_agreement, band, n, plan.bands, plan.rows
        )
        sample_codes.append(codes)
        sample_weights.append(weights)
        members, bounds, in_big, group_big = thin_big_groups(
            members, bounds, cap, best_band[members] == band
        )
        size = np.diff(bounds)
        made_big = int(pairs_per_group(size, cap)[group_big].sum())
        skipped += max(0, in_big - made_big)
        pair(members, bounds, cap, group_big)
    ordinary = (
        unique_sorted(np.concatenate(parts_a) * n + np.concatenate(parts_b))
        if parts_a
        else np.zeros(0, np.int64)
    )
    if big_codes:  # pairs met only in capped buckets
        extra = unique_sorted(np.concatenate(big_codes))
        code, only_capped = merge_disjoint(ordinary, extra[~in_sorted(extra, ordinary)])
    else:
        code, only_capped = ordinary, np.zeros(ordinary.size, np.bool_)
    lost = 0.0
    if sample_codes:  # sampled agreeing pairs of thinned buckets that no band made
        sc, sw = np.concatenate(sample_codes), np.concatenate(sample_weights)
        lost = float(sw[~in_sorted(sc, code)].sum())
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


#: the most (query, query) band collisions :func:`group_lsh_pairs` pairs at once; a group with
#: more (thousands of copies of one text) goes to :func:`lsh_pairs`, band by band
GROUP_PAIRS_MAX = 1 << 22
#: the most rows :func:`group_lsh_pairs` takes (one band's sorted keys carry the row in 16
#: bits): past ~8,000 :func:`lsh_pairs`' band-by-band work costs less, at 3,000 a third of it
#: (``benchmarks/bench_group_pairs.py``)
GROUP_ROWS_MAX = 4096
_LOW48 = np.uint64((1 << 48) - 1)


def group_lsh_pairs(
    ent: npt.NDArray[np.uint64],
    sig: npt.NDArray[np.uint16],
    usable: npt.NDArray[np.bool_],
    plan: LshPlan,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """:func:`lsh_pairs` of a small set of rows (an online write group) from their compact
    band keys ``ent`` (n, bands; :func:`~neardup.fingerprint.minhash.band_entries`, whose keys
    name their band), in a few array operations over all bands at once, where
    :func:`lsh_pairs` makes a round of NumPy calls per band (~2 ms for a group of 100:
    ``benchmarks/bench_group_pairs.py``, which also shows where it stops paying, hence
    :data:`GROUP_ROWS_MAX`). None when the valve could act (a band's collisions over
    its budget), for more rows than :data:`GROUP_ROWS_MAX` or more collisions than
    :data:`GROUP_PAIRS_MAX`: the caller runs :func:`lsh_pairs` then. Otherwise the same pairs
    (tested against it): rows sharing a compact key, whose signatures pass :func:`agreeing`
    (``>= plan.min_agreement`` values and a whole band: a hashed compact key's chance
    collision is no pair, as the batch never groups it)."""
    n = ent.shape[0]
    none = np.zeros(0, np.int64)
    if n > GROUP_ROWS_MAX:
        return None
    idx = np.flatnonzero(np.asarray(usable, np.bool_))
    u = idx.size
    if u < 2:
        return none, none
    nb = ent.shape[1]
    exact = plan.rows * 16 <= 48 and plan.bands < (1 << 16)
    if exact:
        # the key is the band's values below the band number: one band's keys sorted with
        # the row in the low 16 bits (n <= GROUP_ROWS_MAX), each band on its own
        words = (ent[idx].T & _LOW48) << np.uint64(16)
        words |= np.arange(u, dtype=np.uint64)
        words.sort(axis=1)
        flat = words.reshape(-1)
        vals = flat >> np.uint64(16)
        row = (flat & np.uint64(0xFFFF)).astype(np.int64)
        new = np.ones(flat.size, np.bool_)
        new[1:] = vals[1:] != vals[:-1]
        new[::u] = True  # a band's first key starts a bucket
    else:  # hashed keys, the band among their bits: sorted together
        keys = ent[idx].reshape(-1)
        order = np.argsort(keys)
        keys = keys[order]
        row, col = order // nb, order % nb
        new = np.ones(keys.size, np.bool_)
        new[1:] = keys[1:] != keys[:-1]
    m = new.size
    starts = np.flatnonzero(new)
    sizes = np.diff(np.append(starts, m))
    multi = sizes > 1
    st, sz = starts[multi], sizes[multi]
    full = sz * (sz - 1) // 2
    total = int(full.sum())
    if total == 0:
        return none, none
    if total > GROUP_PAIRS_MAX:
        return None
    budget = band_budget(plan, u)
    if budget is not None:  # lsh_pairs pairs a band in full only while it fits its budget
        band = st // u if exact else col[st]
        if (np.bincount(band, weights=full, minlength=nb) > budget).any():
            return None
    # each member of a bucket of two or more pairs with the members after it
    ends = np.repeat(st + sz, sz)
    mem = np.repeat(st, sz) + (np.arange(int(sz.sum())) - np.repeat(np.cumsum(sz) - sz, sz))
    after = ends - mem - 1
    a_at = np.repeat(mem, after)
    first = np.repeat(np.cumsum(after) - after, after)
    b_at = a_at + 1 + (np.arange(a_at.size) - first)
    ra, rb = row[a_at], row[b_at]
    a, b = np.minimum(ra, rb), np.maximum(ra, rb)
    keep = a < b  # (one row's two bands may share a hashed key)
    code = unique_sorted(a[keep] * u + b[keep])
    a, b = idx[code // u], idx[code % u]
    ok = agreeing(sig, a, sig, b, plan)
    return a[ok], b[ok]


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
    ok = agreement(s, x, y) >= min_agree
    x, y, w = x[ok], y[ok], w[ok]
    # a pair no band made sits in a thinned bucket of every band it collides in, and is
    # sampled from each: weighted by 1 / (bands it collides in), it is counted once over them
    h = bands * rows
    same = (s[x, :h] == s[y, :h]).reshape(x.size, bands, rows).all(axis=2).sum(axis=1)
    lo, hi = np.minimum(x, y), np.maximum(x, y)
    return lo * n + hi, w / np.maximum(same, 1)


def band_caps(
    hists: list[list[list[int]]], docs: int, plan: LshPlan
) -> tuple[list[int | None], int | None]:
    """Each band's valve cap (None: every bucket paired in full) from bucket-size histograms
    (rows ``[band, size, buckets]``, summed over the lists), with :func:`lsh_pairs`' rule
    (:func:`~neardup.index.band_groups.valve_cap` at :func:`band_budget`); returns ``(caps,
    budget)``."""
    budget = band_budget(plan, docs)
    per_band: list[dict[int, int]] = [{} for _ in range(plan.bands)]
    for rows in hists:
        for band, size, count in rows:
            d = per_band[band]
            d[size] = d.get(size, 0) + count
    caps: list[int | None] = []
    for d in per_band:
        if not d:
            caps.append(None)
            continue
        sizes = np.array(sorted(d), np.int64)
        counts = np.array([d[x] for x in sorted(d)], np.int64)
        # the band's bucket sizes as a histogram: the cap lsh_pairs computes over them
        caps.append(valve_cap(sizes, plan.bucket_cap, budget, counts))
    return caps, budget
