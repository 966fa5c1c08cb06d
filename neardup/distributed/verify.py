"""Steps ``attach``, ``dense`` and ``verify``: candidate pairs joined with their texts, then
verified.

``attach`` (per partition, the pairs whose first member it holds): the raw pairs of every key
bucket are merged (one row per pair, its sources or-ed), and the first member's id and unit
facts (its exact group's size, longest length and head) are attached; the rows are shuffled to
the partition of the second member. Texts, fingerprints and signatures do not travel with the
pairs: ``verify`` reads the first member's by reference (its position: partition file
``docs/p<owner>.arrow``, memory-mapped, row found by binary search) where it runs, so the
shuffle carries ~60 bytes per candidate pair instead of the text and the 252-byte signature.
Both members of every SimHash pair go to their partitions (``sdeg``), where ``dense`` lists the
texts with more than ``LAZY_SIMHASH_PARTNERS`` SimHash partners.

``verify`` (per partition) attaches the second member's, keeps the candidates of the
single-machine channel (every SimHash pair; a MinHash pair when the signatures agree on at
least ``min_agreement`` values), and decides them with
:func:`neardup.rules.verify.stage_verify` (per pair decisions: the same as on one
machine). Each verified near pair goes to ``pairs`` (its first member's partition), becomes an
edge of the keep rounds (``kin``/``kout``, or ``kadj`` for ``keep="none"``; see ``keep``), and,
when both groups have members to repeat it over, a request with the second group's members to
the first member's partition (``xpand``). The pairs every source of which is a concentrated
one (:func:`neardup.rules.verify.deferred_pairs`: only thinned over-cap buckets, or only the
SimHash pass between two dense texts) are held back in ``deferred/p<partition>.arrow`` for
:mod:`neardup.distributed.lazy`, which verifies them as the single machine does
(:func:`emit_verified` then emits those accepted).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._arrays import find_sorted
from . import _store
from .candidates import RAW_SCHEMA, SRC_LSH, SRC_LSH_CAPPED, SRC_SIMHASH, SRC_SIMHASH_SHORT
from .exact import DUPS_SCHEMA, GMEM_SCHEMA, PAIRS_SCHEMA
from .job import Job
from .keep import ADJ_SCHEMA, IN_SCHEMA, OUT_SCHEMA, XPAND_SCHEMA

__all__ = [
    "HALF_SCHEMA",
    "dense_texts",
    "emit_verified",
    "partners",
    "step_attach",
    "step_dense",
    "step_verify",
]


def _half_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [("a", pa.int64()), ("b", pa.int64()), ("src", pa.uint8()), ("id_a", pa.string()),
         ("ulen_a", pa.int64()), ("gsize_a", pa.int64()), ("head_a", pa.int64()),
         ("head_id_a", pa.string()), ("tok_a", pa.int64())]
    )  # fmt: skip


HALF_SCHEMA = _half_schema()


def _unit_facts(workdir: str, task: int, docs: Any, x: np.ndarray) -> dict[str, Any]:
    """For units ``x`` (first copies in partition ``task``): id, group size, longest length,
    token count (the copies have the same), head (the member that stands for the group) and
    its id (``id``, ``head_id``: pyarrow arrays, so that millions of candidate pairs make no
    Python strings)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    dpos = docs["pos"].to_numpy()
    at = np.searchsorted(dpos, x)
    ids = docs["id"].take(at).combine_chunks() if x.size else pa.array([], pa.string())
    ulen = docs["len"].to_numpy()[at].astype(np.int64)
    tok = docs["tokens"].to_numpy()[at].astype(np.int64)
    gsize = np.ones(x.size, np.int64)
    head, head_id = x.copy(), ids
    dups = _store.read_bucket(workdir, "dups", task, DUPS_SCHEMA)
    if dups.num_rows and x.size:
        dp = dups["pos"].to_numpy()
        o = np.argsort(dp)
        k, hit = find_sorted(dp[o], x)
        i = o[k]
        j = i[hit]
        ulen[hit] = dups["ulen"].to_numpy()[j]
        gsize[hit] = dups["size"].to_numpy()[j]
        head[hit] = dups["head"].to_numpy()[j]
        head_id = pc.if_else(pa.array(hit), dups["head_id"].take(i).combine_chunks(), ids)
    return {"id": ids, "ulen": ulen, "tok": tok, "gsize": gsize, "head": head, "head_id": head_id}


@_store.resumable("attach")
def step_attach(
    workdir: str, task: int, job: Job, valve: tuple[int, int] | None = None
) -> dict[str, Any]:
    """Merge the candidate pairs whose first member is in partition ``task``; attach its id and
    unit facts. ``valve``: the SimHash passes' distances when their pair valve lowered one
    (:func:`neardup.rules.passes.valve_distance`; the texts of ``short_chars`` or more, every
    text): the pass's pairs beyond it are not its candidates."""
    import pyarrow as pa

    raw = _store.read_bucket(workdir, "raw", task, RAW_SCHEMA)
    a, b, src, d = (raw[c].to_numpy() for c in ("a", "b", "src", "d"))
    if valve is not None:
        src = src.copy()
        src[((src & SRC_SIMHASH) > 0) & (d > valve[0])] &= np.uint8(~SRC_SIMHASH & 0xFF)
        if valve[1] < 0:
            src &= np.uint8(~SRC_SIMHASH_SHORT & 0xFF)
        kept = src != 0
        a, b, src = a[kept], b[kept], src[kept]
    # one SimHash source from here on: the passes differ only in their valve
    short = (src & SRC_SIMHASH_SHORT) > 0
    src = np.where(short, (src & np.uint8(~SRC_SIMHASH_SHORT & 0xFF)) | SRC_SIMHASH, src)
    src = src.astype(np.uint8)
    o = np.lexsort((b, a))
    a, b, src = a[o], b[o], src[o]
    new = np.ones(a.size, bool)
    new[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    starts = np.flatnonzero(new)
    src = np.bitwise_or.reduceat(src, starts) if a.size else src
    a, b = a[starts], b[starts]
    docs = _store.read_table(f"{workdir}/docs/p{task:05d}.arrow")
    f = _unit_facts(workdir, task, docs, a)
    t = pa.table(
        {"a": a, "b": b, "src": pa.array(src, pa.uint8()),
         "id_a": f["id"], "ulen_a": f["ulen"], "gsize_a": f["gsize"], "head_a": f["head"],
         "head_id_a": f["head_id"], "tok_a": f["tok"]},
        schema=HALF_SCHEMA,
    )  # fmt: skip
    size = _store.shuffle_write(workdir, "half", task, t, _store.owner_of(b, job.starts))
    # each text's SimHash partners, counted at its partition (step dense): a SimHash pair
    # between two texts of a dense patch is verified lazily (neardup.rules.verify.deferred_pairs)
    sim = (src & SRC_SIMHASH) > 0
    ends = np.concatenate([a[sim], b[sim]])
    size += _store.shuffle_write(
        workdir, "sdeg", task, pa.table({"pos": ends}, schema=_SDEG_SCHEMA),
        _store.owner_of(ends, job.starts),
    )  # fmt: skip
    return {"pairs": int(a.size), "shuffle_bytes": size}


def _sdeg_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("pos", pa.int64())])


_SDEG_SCHEMA = _sdeg_schema()


def _dense_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("pos", pa.int64()), ("partners", pa.int64())])


_DENSE_SCHEMA = _dense_schema()


@_store.resumable("dense")
def step_dense(workdir: str, task: int, job: Job) -> dict[str, Any]:
    """The texts of partition ``task`` with more than ``LAZY_SIMHASH_PARTNERS`` SimHash
    partners (``dense/p<task>.arrow``, ascending; usually none)."""
    import pyarrow as pa

    from ..rules.plan import LAZY_SIMHASH_PARTNERS

    ends = _store.read_bucket(workdir, "sdeg", task, _SDEG_SCHEMA)["pos"].to_numpy()
    pos, count = np.unique(ends, return_counts=True)
    many = count > LAZY_SIMHASH_PARTNERS  # the others can make no pair dense: not written
    _store.write_table(
        f"{workdir}/dense/p{task:05d}.arrow",
        pa.table({"pos": pos[many], "partners": count[many]}, schema=_DENSE_SCHEMA),
    )
    return {"dense": int(many.sum())}


def dense_texts(workdir: str, partitions: int) -> tuple[np.ndarray, np.ndarray]:
    """Every partition's texts of many SimHash partners (step ``dense``): (positions
    ascending, partner counts)."""
    tabs = [_store.read_table(f"{workdir}/dense/p{p:05d}.arrow") for p in range(partitions)]
    if not tabs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    pos = np.concatenate([t["pos"].to_numpy() for t in tabs])
    return pos, np.concatenate([t["partners"].to_numpy() for t in tabs])


def partners(dense: tuple[np.ndarray, np.ndarray], pos: np.ndarray) -> np.ndarray:
    """SimHash partner counts of the texts at ``pos`` from :func:`dense_texts` (0 for a text
    not listed: it has too few to count)."""
    at, count = dense
    if not at.size:
        return np.zeros(pos.size, np.int64)
    i, hit = find_sorted(at, pos)
    return np.where(hit, count[i], 0)


@_store.resumable("verify")
def step_verify(workdir: str, task: int, job: Job, valved: bool = False) -> dict[str, Any]:
    """Decide the candidate pairs whose second member is in partition ``task``; shuffle the
    verified ones to the pairs output, the keep rounds and the pair expansion. The pairs only
    a concentrated corpus made (:func:`neardup.rules.verify.deferred_pairs`) wait in
    ``deferred/p<task>.arrow`` for step ``deferred`` (:mod:`neardup.distributed.lazy`);
    ``valved``: a SimHash pass's pair valve acted (every SimHash pair counts as dense)."""
    import pyarrow as pa

    from ..rules.verify import deferred_pairs, simhash_dense, stage_verify_rules
    from ..verify.rule import RULE_UNVERIFIED

    cfg = job.dedup_config()
    plan = cfg.lsh_plan()
    half = _store.read_bucket(workdir, "half", task, HALF_SCHEMA)
    docs = _store.read_table(f"{workdir}/docs/p{task:05d}.arrow")
    a, b = half["a"].to_numpy(), half["b"].to_numpy()
    at_b = np.searchsorted(docs["pos"].to_numpy(), b)
    src = half["src"].to_numpy()
    sim = (src & SRC_SIMHASH) > 0
    deferred = np.zeros(a.size, bool)
    if cfg.verify:
        dense = dense_texts(workdir, len(job.partitions))
        deferred = deferred_pairs(
            (src & SRC_LSH) > 0,
            (src & SRC_LSH_CAPPED) > 0,
            sim,
            np.ones(a.size, bool)
            if valved
            else simhash_dense(partners(dense, a), partners(dense, b)),
        )
    # the first member's fingerprint, signature and (for a pair the channel keeps) text, read
    # where the pair is verified: a SimHash pair is a candidate whatever the signatures say
    ref = _store.by_reference(workdir, job.starts, a, plan.hashes, sim & ~deferred)
    sig_b = _store.sig_matrix(docs["sig"], docs.num_rows, plan.hashes)[at_b]
    agree = (ref["sig"] == sig_b).sum(axis=1)
    cand = sim | (agree >= plan.min_agreement)
    fb = docs["fp"].to_numpy()[at_b]
    d = np.bitwise_count(ref["fp"] ^ fb).astype(np.int32)
    later = np.flatnonzero(cand & deferred)
    held = half.take(later).append_column("d", pa.array(d[later], pa.int32()))
    _store.write_table(f"{workdir}/deferred/p{task:05d}.arrow", held)
    idx = np.flatnonzero(cand & ~deferred)
    text_a = [ref["text"][i] for i in idx.tolist()]
    lsh_only = idx[[t is None for t in text_a]]
    if lsh_only.size:  # MinHash pairs that passed the agreement filter: their texts now
        more = _store.by_reference(
            workdir, job.starts, a[lsh_only], plan.hashes, np.ones(lsh_only.size, bool)
        )
        ref["bytes"] += more["bytes"]
        for i, t in zip(lsh_only.tolist(), more["text"], strict=True):
            ref["text"][i] = t
        text_a = [ref["text"][i] for i in idx.tolist()]
    texts = text_a + docs["text"].take(at_b[idx]).to_pylist()
    if cfg.verify:
        ia = np.arange(idx.size, dtype=np.int64)
        ok, score, rule = stage_verify_rules(cfg.make_verifier(), texts, ia, ia + idx.size, d[idx])
    else:
        ok, score = np.ones(idx.size, bool), 1.0 - d[idx] / 64.0
        rule = np.full(idx.size, RULE_UNVERIFIED, np.uint8)
    sel = idx[ok]
    size = emit_verified(
        workdir, task, job, docs, half.take(sel), d[sel], np.asarray(score, np.float64)[ok],
        rule[ok], wave=0,
    )  # fmt: skip
    return {
        "candidates": int(idx.size + later.size),
        "deferred": int(later.size),
        "verified": int(sel.size),
        "shuffle_bytes": size,
        "reference_bytes": int(ref["bytes"]),
    }


def emit_verified(
    workdir: str,
    task: int,
    job: Job,
    docs: Any,
    h: Any,
    d: np.ndarray,
    score: np.ndarray,
    rule: np.ndarray,
    wave: int,
) -> int:
    """Shuffle the verified near pairs ``h`` (``half`` rows whose second member is in partition
    ``task``, whose ``docs`` are given; ``d``, ``score``, ``rule`` per pair) to the pairs
    output, the keep rounds and the pair expansion; ``wave`` 0 from step ``verify``, 1 from
    step ``deferred`` (map-task numbers that never collide). Returns the bytes shuffled."""
    import pyarrow as pa

    from ..rules.config import STAGE_NEAR
    from ..rules.keep import may_drop

    cfg = job.dedup_config()
    P = len(job.partitions)
    m_task = task + wave * P
    p_task = job.buckets + task + (2 * P if wave else 0)  # past exact's, verify's and final's
    a, b = h["a"].to_numpy(), h["b"].to_numpy()
    fb_ = _unit_facts(workdir, task, docs, b)
    fb_["id"] = np.asarray(fb_["id"].to_pylist(), dtype=object)
    fb_["head_id"] = np.asarray(fb_["head_id"].to_pylist(), dtype=object)
    id_a = np.asarray(h["id_a"].to_pylist(), dtype=object)
    owner = _store.owner_of
    size = 0
    # the near pairs themselves, to their first member's partition (map task past exact's)
    pairs = pa.table(
        {"a": a, "b": b, "id_a": pa.array(id_a.tolist(), pa.string()),
         "id_b": pa.array(fb_["id"].tolist(), pa.string()), "distance": d, "score": score,
         "stage": np.full(a.size, STAGE_NEAR, np.uint8), "rule": rule},
        schema=PAIRS_SCHEMA,
    )  # fmt: skip
    size += _store.shuffle_write(workdir, "pairs", p_task, pairs, owner(a, job.starts))
    # edges of the keep rounds
    ulen_a, gsize_a = h["ulen_a"].to_numpy(), h["gsize_a"].to_numpy()
    head_a, head_id_a = h["head_a"].to_numpy(), np.asarray(h["head_id_a"].to_pylist(), object)
    if cfg.keep == "none":
        adj = pa.table(
            {"v": np.concatenate([a, b]),
             "v_id": pa.array(id_a.tolist() + fb_["id"].tolist(), pa.string()),
             "u": np.concatenate([b, a])},
            schema=ADJ_SCHEMA,
        )  # fmt: skip
        size += _store.shuffle_write(workdir, "kadj", m_task, adj, owner(adj["v"].to_numpy(),
                                                                          job.starts))  # fmt: skip
    else:
        longest = cfg.keep == "longest"
        ka = -ulen_a if longest else np.zeros(a.size, np.int64)
        kb = -fb_["ulen"] if longest else np.zeros(a.size, np.int64)
        a_first = (ka < kb) | ((ka == kb) & (a <= b))
        u, v = np.where(a_first, a, b), np.where(a_first, b, a)
        k1 = np.where(a_first, ka, kb)
        tok_a = h["tok_a"].to_numpy()
        tok_u = np.where(a_first, tok_a, fb_["tok"])
        tok_v = np.where(a_first, fb_["tok"], tok_a)
        head = np.where(a_first, head_a, fb_["head"])
        head_id = np.where(a_first, head_id_a, fb_["head_id"])
        # the length guard (neardup.rules.keep.may_drop): never drop a much longer text
        may = may_drop(tok_u, tok_v, cfg.make_verifier().threshold)
        u, v, k1, head, head_id = u[may], v[may], k1[may], head[may], head_id[may]
        kin = pa.table(
            {"v": v, "k1": k1, "u": u, "head": head,
             "head_id": pa.array(head_id.tolist(), pa.string())},
            schema=IN_SCHEMA,
        )  # fmt: skip
        size += _store.shuffle_write(workdir, "kin", m_task, kin, owner(v, job.starts))
        kout = pa.table({"u": u, "v": v}, schema=OUT_SCHEMA)
        size += _store.shuffle_write(workdir, "kout", m_task, kout, owner(u, job.starts))
    # requests to repeat the pair over both exact groups' members
    gsize_b = fb_["gsize"]
    prod = gsize_a * gsize_b
    x = np.flatnonzero((prod > 1) & (prod <= cfg.expand_pairs))
    if x.size:
        g = _store.read_bucket(workdir, "gmem", task, GMEM_SCHEMA)
        gf, gp = g["first"].to_numpy(), g["pos"].to_numpy()
        gid = np.asarray(g["id"].to_pylist(), dtype=object)
        o = np.lexsort((gp, gf))
        gf, gp, gid = gf[o], gp[o], gid[o]
        bx = b[x]
        lo, hi = np.searchsorted(gf, bx, "left"), np.searchsorted(gf, bx, "right")
        grouped = hi > lo
        cnt = np.where(grouped, hi - lo, 1)
        rep = np.repeat(np.arange(x.size), cnt)
        off = np.arange(rep.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        w, wid = bx[rep].copy(), fb_["id"][x][rep].copy()
        gi = grouped[rep]
        at = (lo[rep] + off)[gi]
        w[gi], wid[gi] = gp[at], gid[at]
        xr = x[rep]
        xp = pa.table(
            {"a": a[xr], "id_a": pa.array(id_a[xr].tolist(), pa.string()), "b": b[xr], "w": w,
             "id_w": pa.array(wid.tolist(), pa.string()), "distance": d[xr],
             "score": score[xr], "rule": rule[xr]},
            schema=XPAND_SCHEMA,
        )  # fmt: skip
        size += _store.shuffle_write(workdir, "xpand", m_task, xp, owner(a[xr], job.starts))
    return size
