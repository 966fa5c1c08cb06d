"""The band self-join: rows grouped by band key, and the pairs a group gives under the valve.

What every MinHash-LSH front-end pairs with: the batch channel (:func:`neardup.rules.lsh.lsh_pairs`,
band after band over the signatures' keys), :meth:`neardup.index.bands.BandIndex.pairs` and
the distributed join (:mod:`neardup.distributed.candidates`, per key bucket).

* :func:`band_groups`: the rows whose key occurs twice or more, grouped (members by row): a
  linear pre-filter (a count over hashed key bits) sets aside the rows alone in their bucket,
  only the rest is sorted.
* The valve, one rule: a bucket of ``s`` members is paired in full, or -- at a cap ``c`` --
  each member with the bucket's first ``c`` members (the anchors) and its ``c`` predecessors
  (:func:`group_pairs`, counted by :func:`pairs_per_group`). A member that comes last (a query
  against a stored bucket, :meth:`BandIndex.query_many <neardup.index.bands.BandIndex.query_many>`)
  meets the bucket's ``c`` oldest and ``c`` newest rows, all of them while the bucket holds at
  most ``2 c``. :func:`valve_cap` is the one cap function: the largest cap whose pairs fit a
  budget (None: every bucket in full). :func:`thin_big_groups` and :func:`choose_bands` pair each
  member of an over-cap bucket in one band only.
* :func:`agreeing_group_pairs`: the pairs of :func:`group_pairs` whose MinHash signatures agree on
  enough values, without materialising the others (numba).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .._jit import kernel
from .._threads import kernel_threads, run_ranges
from ._kernels import sort_with_rows

__all__ = [
    "agreeing_group_pairs",
    "agreement",
    "band_groups",
    "choose_bands",
    "group_pairs",
    "pairs_per_group",
    "signature_words",
    "thin_big_groups",
    "valve_cap",
]


@kernel(nogil=True)
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


def band_groups(
    keys: npt.NDArray[np.uint64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Rows whose key occurs at least twice, grouped: ``(members int64, group_start int64)``;
    members sorted by (key, row), ``group_start`` the first index of each group (and the end).

    Linear pre-filter: a count over ~4n buckets of the mixed key's top bits sets aside the rows
    alone in their bucket (most rows, most bands); only the rest is sorted."""
    n = keys.size
    bits = max(10, min(26, (4 * max(n, 1) - 1).bit_length()))
    rows = _shared_bucket_rows(np.ascontiguousarray(keys), bits)
    if rows.size < 2:
        return np.zeros(0, np.int64), np.zeros(1, np.int64)
    # the stable sort's order (rows ascending within a key) by NumPy's vectorised argsort
    ks, order = sort_with_rows(keys[rows])
    return _runs_of_two_or_more(rows[order], ks)


@kernel(nogil=True)
def _runs_of_two_or_more(
    rows: np.ndarray, ks: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - numba
    # the runs of equal ``ks`` (sorted) of two or more rows: (their rows, each run's start and
    # the end), in one pass into room for every row (at most n / 2 runs)
    n = ks.size
    members = np.empty(n, np.int64)
    bounds = np.empty(n // 2 + 1, np.int64)
    bounds[0] = 0
    m = 0
    g = 0
    i = 0
    while i < n:
        j = i + 1
        while j < n and ks[j] == ks[i]:
            j += 1
        if j - i > 1:
            for q in range(i, j):  # a loop: a slice assignment compiles its error path too
                members[m] = rows[q]
                m += 1
            g += 1
            bounds[g] = m
        i = j
    return members[:m], bounds[: g + 1]


def thin_big_groups(
    members: npt.NDArray[np.int64],
    bounds: npt.NDArray[np.int64],
    cap: int,
    here: npt.NDArray[np.bool_],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int, npt.NDArray[np.bool_]]:
    """Groups of more than ``cap + 1`` members keep their first ``cap`` members (the anchors)
    and the members whose band this is (``here``, a mask over ``members``: each member of a
    large group is paired in one band only, :func:`choose_bands`): a template's near copies
    fill a large bucket in nearly every band, and pairing each of them with ``2 cap`` others
    once is the bound, not once per band. Groups thinned to one member go. Returns (members,
    bounds, the number of pairs inside the large groups before thinning, per group returned
    whether it was large before thinning)."""
    size = np.diff(bounds)
    big = size > cap + 1
    if not big.any():
        return members, bounds, 0, np.zeros(size.size, np.bool_)
    total = int((size[big] * (size[big] - 1) // 2).sum())
    idx_in = np.arange(members.size) - np.repeat(bounds[:-1], size)
    keep = ~np.repeat(big, size) | (idx_in < cap) | np.asarray(here, np.bool_)
    gid = np.repeat(np.arange(size.size), size)[keep]
    members = members[keep]
    cnt = np.bincount(gid, minlength=size.size)
    members = members[cnt[gid] > 1]
    was_big = big[cnt > 1]
    size = cnt[cnt > 1]
    bounds = np.zeros(size.size + 1, np.int64)
    np.cumsum(size, out=bounds[1:])
    return members, bounds, total, was_big


def choose_bands(
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


@kernel(nogil=True)
def _group_agreement_kernel(
    lo: int,
    hi: int,
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
    for g in range(lo, hi):
        s0 = bounds[g]
        s = bounds[g + 1] - s0
        rows = np.empty((s, w), np.uint64)
        for i in range(s):
            src = members[s0 + i]
            for q in range(w):  # (a loop: numba's slice assignment is a slow generic path)
                rows[i, q] = words[src, q]
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


@kernel
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
    with kernel_threads(workers):
        run_ranges(
            _group_agreement_kernel, bounds.size - 1, members, bounds, base, c, words,
            int(min_agree) + pad, ok, min_items=16, tasks_per_thread=16,
        )  # fmt: skip
    m = int(ok.sum())
    a, b = np.empty(m, np.int64), np.empty(m, np.int64)
    big = np.empty(m, np.bool_)
    _group_pairs_fill(members, bounds, c, ok, group_big, a, b, big)
    return a, b, big, total


def agreement(
    sig: npt.NDArray[np.uint16], a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Number of equal MinHash values of each pair (NumPy, in blocks that bound the gathers)."""
    out = np.empty(a.size, np.int64)
    step = max(1, (32 << 20) // max(1, 2 * sig.shape[1]))
    for s in range(0, a.size, step):
        out[s : s + step] = (sig[a[s : s + step]] == sig[b[s : s + step]]).sum(axis=1)
    return out
