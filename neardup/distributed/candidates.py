"""Steps ``keys`` and ``join``: the self-join as a shuffle, so that candidates meet in one
reducer.

``keys`` (per partition): every first copy (the ``dups`` shuffle says which documents are later
copies) emits one record per MinHash band (``band``, the band's key: the rows packed as in
:func:`neardup.rules.lsh.lsh_pairs`) when it has tokens, and one per SimHash block pair
when it has features: the 64 bits cut into ``k + 2`` blocks, a key per pair of blocks (two
fingerprints within ``k`` bits agree on at least two blocks, so they share at least one key;
the layout of :mod:`neardup.index.allpairs`, without probing).

``group`` (per key bucket, the reducer side of the ``keys`` shuffle): the bucket's records sorted
into groups of equal (kind, band or block pair, key) once, only groups of two or more kept and
written to ``groups/p<bucket>.arrow`` (most keys are alone: the file is a small part of the
bucket), and each MinHash band's bucket sizes as a histogram (size -> buckets), taken while the
groups are at hand; the driver sums them per band and sets each band's valve cap exactly as the single machine does
(:func:`neardup.rules.lsh.band_caps`: :func:`neardup.index.band_groups.valve_cap` at the band
budget, ``band_pairs_per_doc`` times the documents with tokens). When some band is over its budget,
``big`` (per key bucket, from its ``groups`` file) sends, for every member of a bucket over its
band's cap, its chosen band there (the band whose bucket's first member, the bucket's first
anchor, is least; the first such band on ties) with that anchor to the member's partition, and
``first`` (per partition) returns each member's chosen band over all key buckets to the key
buckets that hold it: the single machine pairs a member of a thinned bucket once over the bands
(:func:`neardup.index.band_groups.choose_bands`), in that band, unless it is one of the bucket's
first ``cap`` members (the anchors).

``join`` (per key bucket): the groups of the ``group`` step (no step after it reads the key
buckets again).
MinHash groups give their pairs as the single-machine channel does (members in input order;
every pair while the band fits its budget, else the buckets over the band's cap thinned as
above and paired by window and anchors, :func:`~neardup.index.band_groups.thin_big_groups`,
:func:`~neardup.index.band_groups.group_pairs`); SimHash
groups give the pairs within ``k`` bits, each from the first block pair it agrees on only (no
duplicates). The pairs, tagged with their source, are shuffled to the partition of their first
member; the MinHash agreement filter needs both signatures and is applied where they are joined
(:mod:`neardup.distributed.verify`).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from .._arrays import find_sorted
from ..index.band_groups import (
    agreeing_group_pairs,
    group_pairs,
    pairs_per_group,
    signature_words,
    thin_big_groups,
)
from ..rules.plan import LSH_SIMHASH_SHORT_DISTANCE, simhash_pass_distance
from ..rules.plan import splits_short_texts as split_short
from . import _store
from .exact import DUPS_SCHEMA
from .job import Job

__all__ = [
    "RAW_SCHEMA",
    "SRC_LSH",
    "SRC_LSH_CAPPED",
    "SRC_SIMHASH",
    "SRC_SIMHASH_SHORT",
    "step_big",
    "step_first",
    "step_group",
    "step_join",
    "step_keys",
]

#: a pair's sources (or-ed over the key buckets that made it): a MinHash bucket paired in full,
#: the SimHash pass (its texts of ``short_chars`` or more at the pass's distance), a thinned
#: (over-cap) MinHash bucket, the SimHash pass's identical fingerprints of every text (with
#: short texts split off); a pair met only in thinned buckets (or only among SimHash-dense
#: texts) is verified lazily (:mod:`neardup.distributed.lazy`)
SRC_LSH, SRC_SIMHASH, SRC_LSH_CAPPED, SRC_SIMHASH_SHORT = 1, 2, 4, 8
KIND_LSH, KIND_SIMHASH = 0, 1


def _schemas() -> tuple[Any, Any]:
    import pyarrow as pa

    keys = pa.schema(
        [("kind", pa.uint8()), ("sub", pa.int32()), ("key", pa.uint64()), ("pos", pa.int64()),
         ("fp", pa.uint64())]
    )  # fmt: skip
    raw = pa.schema([("a", pa.int64()), ("b", pa.int64()), ("src", pa.uint8()), ("d", pa.uint8())])
    return keys, raw


KEYS_SCHEMA, RAW_SCHEMA = _schemas()


def _groups_schema() -> Any:
    import pyarrow as pa

    # a key bucket's groups of two or more, sorted by (kind, sub, key, pos); ``g`` numbers the
    # groups from 0 in that order (a group is a run of equal ``g``)
    return pa.schema(
        [("kind", pa.uint8()), ("sub", pa.int32()), ("pos", pa.int64()), ("fp", pa.uint64()),
         ("g", pa.int64())]
    )  # fmt: skip


GROUPS_SCHEMA = _groups_schema()


def _valve_schemas() -> tuple[Any, Any]:
    import pyarrow as pa

    # a member of a thinned bucket: its chosen band in key bucket ``bucket`` (the least first
    # member of its thinned buckets, ``anchor``, then the least band)
    big = pa.schema(
        [("pos", pa.int64()), ("band", pa.int32()), ("bucket", pa.int32()),
         ("anchor", pa.int64())]
    )  # fmt: skip
    # a member's chosen band over all key buckets
    first = pa.schema([("pos", pa.int64()), ("band", pa.int32())])
    return big, first


BIG_SCHEMA, FIRST_SCHEMA = _valve_schemas()


def simhash_blocks(k: int, bits: int = 64) -> list[int]:
    """Masks of the ``k + 2`` blocks of the fingerprint (widths differ by at most one bit)."""
    nb = k + 2
    widths = [bits // nb + (1 if i < bits % nb else 0) for i in range(nb)]
    out, shift = [], 0
    for w in widths:
        out.append(((1 << w) - 1) << shift)
        shift += w
    return out


def _block_pairs(k: int) -> list[tuple[int, int]]:
    return list(itertools.combinations(range(k + 2), 2))


def simhash_distance(job: Job) -> int:
    """The SimHash pass's distance of ``job`` (:func:`neardup.rules.plan.simhash_pass_distance`)."""
    return simhash_pass_distance(job.config.get("max_distance"))


def splits_short_texts(job: Job) -> bool:
    """Whether the SimHash pass searches short texts at distance 0 only, as ``neardup.dedup``
    does on defaults (:func:`neardup.rules.plan.splits_short_texts`): pairs of two texts of at
    least the verifier's ``short_chars`` within :func:`simhash_distance`, every pair at
    distance 0. An explicit ``max_distance`` is searched for every text."""
    # distance 0 is one exact key per text (the whole fingerprint); another short distance
    # would need its own block keys
    assert LSH_SIMHASH_SHORT_DISTANCE == 0
    return split_short(job.config.get("max_distance"))


@_store.resumable("keys")
def step_keys(workdir: str, task: int, job: Job) -> dict[str, Any]:
    """Emit the band and block keys of partition ``task``'s first copies."""
    import pyarrow as pa

    from ..fingerprint.minhash import band_keys

    cfg = job.dedup_config()
    plan = cfg.lsh_plan()
    docs = _store.read_table(f"{workdir}/docs/p{task:05d}.arrow")
    pos = docs["pos"].to_numpy()
    dups = _store.read_bucket(workdir, "dups", task, DUPS_SCHEMA)
    later = dups["pos"].to_numpy()[dups["pos"].to_numpy() != dups["first"].to_numpy()]
    first_copy = ~np.isin(pos, later)
    fps = docs["fp"].to_numpy()
    sig = np.frombuffer(docs["sig"].combine_chunks().buffers()[1], "<u2")
    sig = sig[: pos.size * plan.hashes].reshape(pos.size, plan.hashes)
    parts: list[dict[str, Any]] = []
    lsh = np.flatnonzero(first_copy & (docs["tokens"].to_numpy() > 0))
    sig_lsh = sig[lsh]  # gathered once for every band
    for band in range(plan.bands):
        parts.append(
            {"kind": KIND_LSH, "sub": band, "key": band_keys(sig_lsh, band, plan.rows),
             "pos": pos[lsh], "fp": fps[lsh]}
        )  # fmt: skip
    k = simhash_distance(job)
    sh = np.flatnonzero(first_copy & ~docs["empty"].to_numpy())
    if splits_short_texts(job):
        # every text at distance 0 (the whole fingerprint as the key, sub = the block pairs'
        # count); the block keys below only for texts of short_chars or more
        parts.append(
            {"kind": KIND_SIMHASH, "sub": len(_block_pairs(k)), "key": fps[sh], "pos": pos[sh],
             "fp": fps[sh]}
        )  # fmt: skip
        sh = sh[docs["len"].to_numpy()[sh] >= cfg.make_verifier().short_chars]
    masks = simhash_blocks(k)
    f = fps[sh]
    for c, (i, j) in enumerate(_block_pairs(k)):
        # the two blocks' bits in place (the rest zeroed), tagged with the block pair
        key = f & np.uint64(masks[i] | masks[j])
        parts.append({"kind": KIND_SIMHASH, "sub": c, "key": key, "pos": pos[sh], "fp": f})
    cols = {
        name: np.concatenate([np.broadcast_to(np.asarray(p[name]), p["pos"].shape) for p in parts])
        for name in ("kind", "sub", "key", "pos", "fp")
    }
    table = pa.table(cols, schema=KEYS_SCHEMA)
    # the SimHash pass's documents (the pair valve allows max_candidates_per_doc per document)
    sim = {"sim_docs": int(np.flatnonzero(first_copy & ~docs["empty"].to_numpy()).size),
           "sim_long_docs": int(sh.size)}  # fmt: skip
    g = (
        cols["key"]
        ^ (cols["sub"].astype(np.uint64) << np.uint64(48))
        ^ cols["kind"].astype(np.uint64)
    )
    size = _store.shuffle_write(workdir, "keys", task, table, _store.mix_bucket(g, job.buckets))
    return {"records": table.num_rows, "lsh_docs": int(lsh.size), "shuffle_bytes": size, **sim}


def _group_rows(t: Any) -> dict[str, np.ndarray]:
    """The records of a key bucket in groups of two or more, sorted by (kind, sub, key, pos):
    columns ``kind, sub, pos, fp, g`` (``g``: the group's number in that order)."""
    key = t["key"].to_numpy()
    # only records whose key value occurs twice or more can be in a group of two or more (most
    # keys are alone): found with one plain (unstable, vectorised) sort of the keys, so the
    # 4-key lexsort runs over those few rows only (profiled: the lexsort over every record was
    # most of the step); (kind, sub, key, pos) is unique, so the lexsort fixes the order
    ko = np.argsort(key)
    sk = key[ko]
    eq = sk[1:] == sk[:-1]
    twice = np.zeros(key.size, bool)
    twice[1:] |= eq
    twice[:-1] |= eq
    cand = ko[twice]
    kind = t["kind"].to_numpy()[cand]
    sub = t["sub"].to_numpy()[cand]
    key = key[cand]
    pos = t["pos"].to_numpy()[cand]
    o = np.lexsort((pos, key, sub, kind))
    kind, sub, key, pos = kind[o], sub[o], key[o], pos[o]
    new = np.ones(pos.size, bool)
    new[1:] = (kind[1:] != kind[:-1]) | (sub[1:] != sub[:-1]) | (key[1:] != key[:-1])
    gid = np.cumsum(new) - 1
    size = np.bincount(gid) if pos.size else np.zeros(0, np.int64)
    keep = np.flatnonzero(size[gid] > 1) if pos.size else np.zeros(0, np.int64)
    multi = size > 1
    renum = np.cumsum(multi) - 1  # a kept group's number among the kept ones
    return {
        "kind": kind[keep],
        "sub": sub[keep],
        "pos": pos[keep],
        "fp": t["fp"].to_numpy()[cand[o[keep]]],
        "g": renum[gid[keep]].astype(np.int64),
    }


def _run_bounds(g: np.ndarray) -> np.ndarray:
    """Start of each run of equal values of ``g``, and its length at the end (``[0]`` when
    empty): a groups file's group bounds."""
    if not g.size:
        return np.zeros(1, np.int64)
    return np.flatnonzero(np.r_[True, g[1:] != g[:-1], True]).astype(np.int64)


def _groups_of(
    workdir: str, task: int, kind: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Key bucket ``task``'s groups of ``kind`` (from the ``group`` step): ``(pos, fp, sub,
    bounds)``, groups ordered by (sub, key), members ascending (input order)."""
    t = _store.read_table(f"{workdir}/groups/p{task:05d}.arrow")
    kinds = t["kind"].to_numpy()
    lo, hi = np.searchsorted(kinds, [kind, kind + 1])  # rows sorted by kind
    pos = t["pos"].to_numpy()[lo:hi]
    fp = t["fp"].to_numpy()[lo:hi]
    sub = t["sub"].to_numpy()[lo:hi]
    g = t["g"].to_numpy()[lo:hi]
    return pos, fp, sub, _run_bounds(g)


def _lsh_groups(workdir: str, task: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Key bucket ``task``'s MinHash groups of two or more: ``(pos, bounds, band of each
    group)``, groups ordered by (band, key), members ascending (input order)."""
    pos, _, sub, bounds = _groups_of(workdir, task, KIND_LSH)
    return pos, bounds, sub[bounds[:-1]].astype(np.int64)


def _size_hist(bounds: np.ndarray, band: np.ndarray) -> list[list[int]]:
    """Rows ``[band, size, buckets]`` of the MinHash groups (one row per distinct size)."""
    size = np.diff(bounds)
    if not size.size:
        return []
    width = int(size.max()) + 1
    code = np.unique(band * width + size, return_counts=True)
    return [[int(c // width), int(c % width), int(k)] for c, k in zip(*code, strict=True)]


@_store.resumable("group")
def step_group(workdir: str, task: int, job: Job) -> dict[str, Any]:
    """Key bucket ``task`` read and sorted into groups once: its groups of two or more to
    ``groups/p<task>.arrow`` (for ``big`` and ``join``), and its MinHash bucket sizes per band
    as ``hist`` rows ``[band, size, buckets]`` (buckets of two or more members; small: one row
    per distinct size), summed by the driver for :func:`band_caps`."""
    import pyarrow as pa

    cols = _group_rows(_store.read_bucket(workdir, "keys", task, KEYS_SCHEMA))
    table = pa.table(cols, schema=GROUPS_SCHEMA)
    _store.write_table(f"{workdir}/groups/p{task:05d}.arrow", table)
    lsh = cols["kind"] == KIND_LSH
    g = cols["g"][lsh]
    bounds = _run_bounds(g)
    band = cols["sub"][lsh][bounds[:-1]].astype(np.int64)
    return {"hist": _size_hist(bounds, band), "group_rows": table.num_rows,
            "written_bytes": table.nbytes}  # fmt: skip


def _big_mask(bounds: np.ndarray, band: np.ndarray, caps: list[int | None]) -> np.ndarray:
    """Per group: whether its band has a cap and the group has more than ``cap + 1`` members."""
    size = np.diff(bounds)
    cap = np.array([-1 if c is None else c for c in caps], np.int64)[band]
    return (cap >= 0) & (size > cap + 1)


@_store.resumable("big")
def step_big(workdir: str, task: int, job: Job, caps: list[int | None]) -> dict[str, Any]:
    """Members of key bucket ``task``'s thinned buckets, each with its chosen band here (the
    least first member of its thinned buckets, then the least band) and that first member,
    shuffled to their partition."""
    import pyarrow as pa

    pos, bounds, band = _lsh_groups(workdir, task)
    big = _big_mask(bounds, band, caps)
    size = np.diff(bounds)
    member_big = np.repeat(big, size)
    p = pos[member_big]
    b = np.repeat(band, size)[member_big]
    a = np.repeat(pos[bounds[:-1]], size)[member_big]  # groups' members ascend: the least
    o = np.lexsort((b, a, p))  # per member its least (anchor, band)
    p, b, a = p[o], b[o], a[o]
    first = np.ones(p.size, bool)
    first[1:] = p[1:] != p[:-1]
    p, b, a = p[first], b[first], a[first]
    table = pa.table(
        {"pos": p, "band": b.astype(np.int32), "bucket": np.full(p.size, task, np.int32),
         "anchor": a},
        schema=BIG_SCHEMA,
    )  # fmt: skip
    size_b = _store.shuffle_write(workdir, "big", task, table, _store.owner_of(p, job.starts))
    return {"members": int(p.size), "shuffle_bytes": size_b}


@_store.resumable("first")
def step_first(workdir: str, task: int, job: Job) -> dict[str, Any]:
    """Partition ``task``'s members of thinned buckets: each one's chosen band over all key
    buckets (the least anchor, then the least band), sent back to every key bucket that holds
    it."""
    import pyarrow as pa

    t = _store.read_bucket(workdir, "big", task, BIG_SCHEMA)
    pos = t["pos"].to_numpy()
    band = t["band"].to_numpy()
    bucket = t["bucket"].to_numpy()
    o = np.lexsort((band, t["anchor"].to_numpy(), pos))
    pos_s, band_s = pos[o], band[o]
    first = np.ones(pos_s.size, bool)
    first[1:] = pos_s[1:] != pos_s[:-1]
    upos, uband = pos_s[first], band_s[first]
    out = pa.table(
        {"pos": pos, "band": uband[np.searchsorted(upos, pos)].astype(np.int32)},
        schema=FIRST_SCHEMA,
    )
    size = _store.shuffle_write(workdir, "first", task, out, bucket.astype(np.int64))
    return {"members": int(upos.size), "shuffle_bytes": size}


def _valve_pairs(
    workdir: str, task: int, caps: list[int | None], job: Job
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[list[int]]]:
    """Key bucket ``task``'s MinHash pairs under the valve, band by band as
    :func:`neardup.rules.lsh.lsh_pairs` makes them, only those whose signatures agree on
    ``plan.min_agreement`` values (the signatures read by reference from the members' ``docs``
    files; a bucket's other pairs are never materialised: with the band budget a band may make
    up to ``band_pairs_per_doc`` pairs per document): ``(a, b, made in a thinned bucket)``; and
    per band with a cap ``[band, thinned buckets, pairs inside them, pairs made inside them]``."""
    plan = job.dedup_config().lsh_plan()
    pos, bounds, band = _lsh_groups(workdir, task)
    # the signatures of every member of the bucket's groups, read once (u ascending: a member's
    # index in u keeps the input order the pairing relies on)
    u = np.unique(pos)
    sig = _store.by_reference(workdir, job.starts, u, plan.hashes, np.zeros(u.size, bool))["sig"]
    # the signatures as the agreement kernel's 64-bit words, made once for every band (else
    # agreeing_group_pairs repacks all of them per band: a quarter of the step, profiled)
    words64, pad = signature_words(sig)

    def agreeing(
        m: np.ndarray, bd: np.ndarray, cap: int | None, big: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a, b, in_big, _ = agreeing_group_pairs(
            np.searchsorted(u, m).astype(np.int64), bd, cap, sig, plan.min_agreement,
            np.zeros(bd.size - 1, np.bool_) if big is None else big, words=words64, pad=pad,
        )  # fmt: skip
        return u[a], u[b], in_big

    size = np.diff(bounds)
    if not size.size:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0, bool), []
    first_pos = first_band = np.zeros(0, np.int64)
    if any(c is not None for c in caps):
        f = _store.read_bucket(workdir, "first", task, FIRST_SCHEMA)
        fp, fb = f["pos"].to_numpy(), f["band"].to_numpy().astype(np.int64)
        o = np.argsort(fp, kind="stable")
        first_pos, first_band = fp[o], fb[o]
    gstart = np.searchsorted(band, np.arange(len(caps) + 1))  # groups sorted by band
    out_a, out_b, out_big = [], [], []
    stats: list[list[int]] = []
    for b, cap in enumerate(caps):
        g0, g1 = int(gstart[b]), int(gstart[b + 1])
        if g0 == g1:
            continue
        m = pos[bounds[g0] : bounds[g1]]
        bd = bounds[g0 : g1 + 1] - bounds[g0]
        sz = np.diff(bd)
        if cap is None:  # the band fits its budget: every pair
            a, bb, full_big = agreeing(m, bd, None)
            out_a.append(a)
            out_b.append(bb)
            out_big.append(full_big)
            continue
        big = sz > cap + 1
        fb = np.full(m.size, -1, np.int64)  # each member's chosen band (-1: none)
        if first_pos.size:
            k, hit = find_sorted(first_pos, m)
            fb[hit] = first_band[k[hit]]
        # a thinned bucket keeps its anchors and the members whose chosen band it is
        m, nb, in_big, was_big = thin_big_groups(m, bd, cap, fb == b)
        new_sz = np.diff(nb)
        a, bb, in_big_pair = agreeing(m, nb, cap, was_big)
        out_a.append(a)
        out_b.append(bb)
        out_big.append(in_big_pair)
        made_big = int(pairs_per_group(new_sz, cap)[was_big].sum())
        stats.append([b, int(big.sum()), in_big, made_big])
    if not out_a:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0, bool), stats
    return np.concatenate(out_a), np.concatenate(out_b), np.concatenate(out_big), stats


@_store.resumable("join")
def step_join(
    workdir: str, task: int, job: Job, caps: list[int | None] | None = None
) -> dict[str, Any]:
    """Candidate pairs of key bucket ``task``, shuffled to their first member's partition;
    ``caps``: each band's valve cap (:func:`neardup.rules.lsh.band_caps`; None: every band in
    full)."""
    import pyarrow as pa

    cfg = job.dedup_config()
    plan = cfg.lsh_plan()
    # MinHash: the channel's pairing, band by band (members ascending = input order)
    la, lb, lbig, valve = _valve_pairs(workdir, task, list(caps or [None] * plan.bands), job)
    # SimHash: all pairs of a group within k bits, reported by the first block pair they share
    k = simhash_distance(job)
    pos, fp, sub, bounds = _groups_of(workdir, task, KIND_SIMHASH)
    # every pair of a group (indices into pos; no group is over a cap this large)
    ia, ib, _ = group_pairs(
        np.arange(pos.size), bounds, max(int(np.diff(bounds).max(initial=2)), 2)
    )
    x = fp[ia] ^ fp[ib]
    dist = np.bitwise_count(x)
    near = dist <= k
    ia, ib, x, dist = ia[near], ib[near], x[near], dist[near]
    masks = simhash_blocks(k)
    first_combo = np.full(ia.size, -1, np.int64)
    for c, (i, j) in enumerate(_block_pairs(k)):
        both = (x & np.uint64(masks[i] | masks[j])) == 0
        first_combo[(first_combo < 0) & both] = c
    # a pair is reported by the first block pair it shares; an exact-key pair (sub = the block
    # pairs' count: distance 0, any lengths; the short texts' pass) by its exact key (attach
    # merges the repeats)
    exact_key = sub[ia] == len(_block_pairs(k))
    mine = (first_combo == sub[ia]) | exact_key
    sa, sb, sd, sx = pos[ia[mine]], pos[ib[mine]], dist[mine], exact_key[mine]
    a = np.concatenate([la, sa])
    b = np.concatenate([lb, sb])
    src = np.concatenate(
        [
            np.where(lbig, SRC_LSH_CAPPED, SRC_LSH).astype(np.uint8),
            np.where(sx, SRC_SIMHASH_SHORT, SRC_SIMHASH).astype(np.uint8),
        ]
    )
    d = np.concatenate([np.zeros(la.size, np.uint8), sd.astype(np.uint8)])
    raw = pa.table({"a": a, "b": b, "src": src, "d": d}, schema=RAW_SCHEMA)
    size = _store.shuffle_write(workdir, "raw", task, raw, _store.owner_of(a, job.starts))
    return {
        "lsh_pairs": int(la.size),
        "simhash_pairs": int(sa.size),
        # each SimHash pass's pairs by distance, each pair counted once per pass (the passes'
        # pair valve: the driver sums them, attach applies it)
        "simhash_at": np.bincount(sd[~sx], minlength=k + 1)[: k + 1].tolist(),
        "simhash_short_at": [int(sx.sum())],
        "valve": valve,
        "shuffle_bytes": size,
    }
