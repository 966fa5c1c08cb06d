"""Steps ``attach`` and ``verify``: candidate pairs joined with their texts, then verified.

``attach`` (per partition, the pairs whose first member it holds): the raw pairs of every key
bucket are merged (one row per pair, its sources or-ed), and the first member's id and unit
facts (its exact group's size, longest length and head) are attached; the rows are shuffled to
the partition of the second member. Texts, fingerprints and signatures do not travel with the
pairs: ``verify`` reads the first member's by reference (its position: partition file
``docs/p<owner>.arrow``, memory-mapped, row found by binary search) where it runs, so the
shuffle carries ~60 bytes per candidate pair instead of the text and the 252-byte signature.

``verify`` (per partition) attaches the second member's, keeps the candidates of the
single-machine channel (every SimHash pair; a MinHash pair when the signatures agree on at
least ``min_agreement`` values), and decides them with
:func:`neardup.rules.verify.stage_verify` (per pair decisions: the same as on one
machine). Each verified near pair goes to ``pairs`` (its first member's partition), becomes an
edge of the keep rounds (``kin``/``kout``, or ``kadj`` for ``keep="none"``; see ``keep``), and,
when both groups have members to repeat it over, a request with the second group's members to
the first member's partition (``xpand``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _store
from .candidates import RAW_SCHEMA, SRC_SIMHASH
from .exact import DUPS_SCHEMA, GMEM_SCHEMA, PAIRS_SCHEMA
from .job import Job
from .keep import ADJ_SCHEMA, IN_SCHEMA, OUT_SCHEMA, XPAND_SCHEMA

__all__ = ["HALF_SCHEMA", "step_attach", "step_verify"]


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
        i = o[np.minimum(np.searchsorted(dp[o], x), dp.size - 1)]
        hit = dp[i] == x
        j = i[hit]
        ulen[hit] = dups["ulen"].to_numpy()[j]
        gsize[hit] = dups["size"].to_numpy()[j]
        head[hit] = dups["head"].to_numpy()[j]
        head_id = pc.if_else(pa.array(hit), dups["head_id"].take(i).combine_chunks(), ids)
    return {"id": ids, "ulen": ulen, "tok": tok, "gsize": gsize, "head": head, "head_id": head_id}


@_store.resumable("attach")
def step_attach(workdir: str, task: int, job: Job) -> dict[str, Any]:
    """Merge the candidate pairs whose first member is in partition ``task``; attach its id and
    unit facts."""
    import pyarrow as pa

    raw = _store.read_bucket(workdir, "raw", task, RAW_SCHEMA)
    a, b, src = (raw[c].to_numpy() for c in ("a", "b", "src"))
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
    return {"pairs": int(a.size), "shuffle_bytes": size}


@_store.resumable("verify")
def step_verify(workdir: str, task: int, job: Job) -> dict[str, Any]:
    """Decide the candidate pairs whose second member is in partition ``task``; shuffle the
    verified ones to the pairs output, the keep rounds and the pair expansion."""
    import pyarrow as pa

    from ..rules.config import STAGE_NEAR
    from ..rules.keep import may_drop
    from ..rules.verify import stage_verify_rules
    from ..verify.rule import RULE_UNVERIFIED

    cfg = job.dedup_config()
    plan = cfg.lsh_plan()
    half = _store.read_bucket(workdir, "half", task, HALF_SCHEMA)
    docs = _store.read_table(f"{workdir}/docs/p{task:05d}.arrow")
    a, b = half["a"].to_numpy(), half["b"].to_numpy()
    at_b = np.searchsorted(docs["pos"].to_numpy(), b)
    src = half["src"].to_numpy()
    # the first member's fingerprint, signature and (for a pair the channel keeps) text, read
    # where the pair is verified: a SimHash pair is a candidate whatever the signatures say
    ref = _store.by_reference(workdir, job.starts, a, plan.hashes, (src & SRC_SIMHASH) > 0)
    sig_b = _store.sig_matrix(docs["sig"], docs.num_rows, plan.hashes)[at_b]
    agree = (ref["sig"] == sig_b).sum(axis=1)
    cand = ((src & SRC_SIMHASH) > 0) | (agree >= plan.min_agreement)
    fb = docs["fp"].to_numpy()[at_b]
    d = np.bitwise_count(ref["fp"] ^ fb).astype(np.int32)
    idx = np.flatnonzero(cand)
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
    remote = ref["bytes"]
    texts = text_a + docs["text"].take(at_b[idx]).to_pylist()
    a, b, d = a[idx], b[idx], d[idx]
    ia = np.arange(idx.size, dtype=np.int64)
    if cfg.verify:
        ok, score, rule = stage_verify_rules(cfg.make_verifier(), texts, ia, ia + idx.size, d)
    else:
        ok, score = np.ones(idx.size, bool), 1.0 - d / 64.0
        rule = np.full(idx.size, RULE_UNVERIFIED, np.uint8)
    sel = idx[ok]
    a, b, d, score = a[ok], b[ok], d[ok], np.asarray(score, np.float64)[ok]
    rule = rule[ok]
    h = half.take(sel)
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
    size += _store.shuffle_write(workdir, "pairs", job.buckets + task, pairs, owner(a, job.starts))
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
        size += _store.shuffle_write(workdir, "kadj", task, adj, owner(adj["v"].to_numpy(),
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
        size += _store.shuffle_write(workdir, "kin", task, kin, owner(v, job.starts))
        kout = pa.table({"u": u, "v": v}, schema=OUT_SCHEMA)
        size += _store.shuffle_write(workdir, "kout", task, kout, owner(u, job.starts))
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
        size += _store.shuffle_write(workdir, "xpand", task, xp, owner(a[xr], job.starts))
    return {
        "candidates": int(idx.size),
        "verified": int(a.size),
        "shuffle_bytes": size,
        "reference_bytes": int(remote),
    }
