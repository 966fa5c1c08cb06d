"""Steps ``keys`` and ``join``: the self-join as a shuffle, so that candidates meet in one
reducer.

``keys`` (per partition): every first copy (the ``dups`` shuffle says which documents are later
copies) emits one record per MinHash band (``band``, the band's key: the rows packed as in
:func:`neardup.batch.minhash.lsh_pairs`) when it has tokens, and one per SimHash block pair
when it has features: the 64 bits cut into ``k + 2`` blocks, a key per pair of blocks (two
fingerprints within ``k`` bits agree on at least two blocks, so they share at least one key;
the layout of :mod:`neardup.index.allpairs`, without probing).

``join`` (per key bucket): records with equal (kind, band or block pair, key) form a group.
MinHash groups give their pairs as the single-machine channel does (members in input order,
groups over ``bucket_cap`` paired by window and anchors, :func:`~neardup.batch.minhash.
_group_pairs`); SimHash groups give the pairs within ``k`` bits, each from the first block pair
it agrees on only (no duplicates). The pairs, tagged with their source, are shuffled to the
partition of their first member; the MinHash agreement filter needs both signatures and is
applied where they are joined (:mod:`neardup.distributed.verify`).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from . import _store
from .exact import DUPS_SCHEMA
from .job import Job

__all__ = ["RAW_SCHEMA", "SRC_LSH", "SRC_SIMHASH", "step_join", "step_keys"]

SRC_LSH, SRC_SIMHASH = 1, 2
KIND_LSH, KIND_SIMHASH = 0, 1


def _schemas() -> tuple[Any, Any]:
    import pyarrow as pa

    keys = pa.schema(
        [("kind", pa.uint8()), ("sub", pa.int32()), ("key", pa.uint64()), ("pos", pa.int64()),
         ("fp", pa.uint64())]
    )  # fmt: skip
    raw = pa.schema([("a", pa.int64()), ("b", pa.int64()), ("src", pa.uint8())])
    return keys, raw


KEYS_SCHEMA, RAW_SCHEMA = _schemas()


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
    from ..batch.candidate_stage import LSH_SIMHASH_DISTANCE

    d = job.config.get("max_distance")
    return LSH_SIMHASH_DISTANCE if d is None else int(d)


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
    for band in range(plan.bands):
        parts.append(
            {"kind": KIND_LSH, "sub": band, "key": band_keys(sig[lsh], band, plan.rows),
             "pos": pos[lsh], "fp": fps[lsh]}
        )  # fmt: skip
    k = simhash_distance(job)
    sh = np.flatnonzero(first_copy & ~docs["empty"].to_numpy())
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
    g = (
        cols["key"]
        ^ (cols["sub"].astype(np.uint64) << np.uint64(48))
        ^ cols["kind"].astype(np.uint64)
    )
    size = _store.shuffle_write(workdir, "keys", task, table, _store.mix_bucket(g, job.buckets))
    return {"records": table.num_rows, "shuffle_bytes": size}


def _all_pairs_in_groups(members: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (earlier, later index into ``members``) inside each group."""
    size = np.diff(bounds)
    gid = np.repeat(np.arange(size.size), size)
    idx_in = np.arange(members.size) - bounds[gid]
    out_a, out_b = [], []
    for t in range(1, int(size.max(initial=1))):
        sel = np.flatnonzero(idx_in >= t)
        out_a.append(sel - t)
        out_b.append(sel)
    if not out_a:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(out_a), np.concatenate(out_b)


def _grouped(kind_rows: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows sorted by (sub, key, pos), kept only in groups of two or more:
    ``(pos, fp, sub, bounds)``."""
    sub = kind_rows["sub"].to_numpy()
    key = kind_rows["key"].to_numpy()
    pos = kind_rows["pos"].to_numpy()
    fp = kind_rows["fp"].to_numpy()
    o = np.lexsort((pos, key, sub))
    sub, key, pos, fp = sub[o], key[o], pos[o], fp[o]
    new = np.ones(pos.size, bool)
    new[1:] = (sub[1:] != sub[:-1]) | (key[1:] != key[:-1])
    gid = np.cumsum(new) - 1
    size = np.bincount(gid) if pos.size else np.zeros(0, np.int64)
    keep = size[gid] > 1 if pos.size else np.zeros(0, bool)
    pos, fp, sub = pos[keep], fp[keep], sub[keep]
    size = size[size > 1]
    bounds = np.zeros(size.size + 1, np.int64)
    np.cumsum(size, out=bounds[1:])
    return pos, fp, sub, bounds


@_store.resumable("join")
def step_join(workdir: str, task: int, job: Job) -> dict[str, Any]:
    """Candidate pairs of key bucket ``task``, shuffled to their first member's partition."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..batch.minhash import group_pairs

    cfg = job.dedup_config()
    plan = cfg.lsh_plan()
    t = _store.read_bucket(workdir, "keys", task, KEYS_SCHEMA)
    # MinHash: the channel's pairing, group by group (members ascending = input order)
    pos, _, _, bounds = _grouped(t.filter(pc.equal(t["kind"], KIND_LSH)))
    la, lb, skipped = group_pairs(pos, bounds, plan.bucket_cap)
    capped = int((np.diff(bounds) > plan.bucket_cap + 1).sum())
    # SimHash: all pairs of a group within k bits, reported by the first block pair they share
    k = simhash_distance(job)
    pos, fp, sub, bounds = _grouped(t.filter(pc.equal(t["kind"], KIND_SIMHASH)))
    ia, ib = _all_pairs_in_groups(pos, bounds)
    x = fp[ia] ^ fp[ib]
    near = np.bitwise_count(x) <= k
    ia, ib, x = ia[near], ib[near], x[near]
    masks = simhash_blocks(k)
    first_combo = np.full(ia.size, -1, np.int64)
    for c, (i, j) in enumerate(_block_pairs(k)):
        both = (x & np.uint64(masks[i] | masks[j])) == 0
        first_combo[(first_combo < 0) & both] = c
    mine = first_combo == sub[ia]
    sa, sb = pos[ia[mine]], pos[ib[mine]]
    a = np.concatenate([la, sa])
    b = np.concatenate([lb, sb])
    src = np.concatenate(
        [np.full(la.size, SRC_LSH, np.uint8), np.full(sa.size, SRC_SIMHASH, np.uint8)]
    )
    raw = pa.table({"a": a, "b": b, "src": src}, schema=RAW_SCHEMA)
    size = _store.shuffle_write(workdir, "raw", task, raw, _store.owner_of(a, job.starts))
    return {
        "lsh_pairs": int(la.size),
        "simhash_pairs": int(sa.size),
        "capped_buckets": capped,
        "pairs_skipped": int(skipped),
        "shuffle_bytes": size,
    }
