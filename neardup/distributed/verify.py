"""Steps ``attach`` and ``verify``: candidate pairs joined with their texts, then verified.

``attach`` (per partition, the pairs whose first member it holds): the raw pairs of every key
bucket are merged (one row per pair, its sources or-ed), and the first member's id, text,
length, fingerprint and signature are attached; the rows are shuffled to the partition of the
second member. ``verify`` (per partition) attaches the second member's, keeps the candidates of
the single-machine channel (every SimHash pair; a MinHash pair when the signatures agree on at
least ``min_agreement`` values), and decides them with :func:`neardup.batch.verify_stage.stage_verify` (per
pair decisions: the same as on one machine). Verified near pairs go to
``verified/p<partition>.arrow``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _store
from .candidates import RAW_SCHEMA, SRC_SIMHASH
from .job import Job

__all__ = ["VERIFIED_SCHEMA", "step_attach", "step_verify"]


def _side_fields(prefix: str, width: int) -> list[Any]:
    import pyarrow as pa

    return [
        (f"id_{prefix}", pa.string()),
        (f"text_{prefix}", pa.large_string()),
        (f"len_{prefix}", pa.int64()),
        (f"fp_{prefix}", pa.uint64()),
        (f"sig_{prefix}", pa.binary(width)),
    ]


def _verified_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [("a", pa.int64()), ("b", pa.int64()), ("id_a", pa.string()), ("id_b", pa.string()),
         ("len_a", pa.int64()), ("len_b", pa.int64()), ("distance", pa.int32()),
         ("score", pa.float64())]
    )  # fmt: skip


VERIFIED_SCHEMA = _verified_schema()


def _take_side(docs: Any, pos: np.ndarray, prefix: str) -> dict[str, Any]:
    """Columns of ``docs`` (sorted by position) at positions ``pos``, renamed ``<col>_<prefix>``."""
    at = np.searchsorted(docs["pos"].to_numpy(), pos)
    rows = docs.take(at)
    return {f"{c}_{prefix}": rows[c] for c in ("id", "text", "len", "fp", "sig")}


@_store.resumable("attach")
def step_attach(workdir: str, task: int, job: Job) -> dict[str, Any]:
    """Merge the candidate pairs whose first member is in partition ``task``; attach it."""
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
    cols = {"a": pa.array(a, pa.int64()), "b": pa.array(b, pa.int64()),
            "src": pa.array(src, pa.uint8()), **_take_side(docs, a, "a")}  # fmt: skip
    t = pa.table(cols)
    size = _store.shuffle_write(workdir, "half", task, t, _store.owner_of(b, job.starts))
    return {"pairs": int(a.size), "shuffle_bytes": size}


@_store.resumable("verify")
def step_verify(workdir: str, task: int, job: Job) -> dict[str, Any]:
    """Decide the candidate pairs whose second member is in partition ``task``."""
    import pyarrow as pa

    from ..batch.verify_stage import stage_verify

    cfg = job.dedup_config()
    plan = cfg.lsh_plan()
    width = 2 * plan.hashes
    schema = pa.schema(
        [("a", pa.int64()), ("b", pa.int64()), ("src", pa.uint8()), *_side_fields("a", width)]
    )
    half = _store.read_bucket(workdir, "half", task, schema)
    docs = _store.read_table(f"{workdir}/docs/p{task:05d}.arrow")
    a, b = half["a"].to_numpy(), half["b"].to_numpy()
    side_b = _take_side(docs, b, "b")
    m = a.size

    def sig(col: Any) -> np.ndarray:
        buf = col.combine_chunks() if hasattr(col, "combine_chunks") else col
        arr = np.frombuffer(buf.buffers()[1], "<u2")
        off = buf.offset * plan.hashes
        return arr[off : off + m * plan.hashes].reshape(m, plan.hashes)

    agree = (sig(half["sig_a"]) == sig(side_b["sig_b"])).sum(axis=1) if m else np.zeros(0, np.int64)
    src = half["src"].to_numpy()
    cand = ((src & SRC_SIMHASH) > 0) | (agree >= plan.min_agreement)
    fa = half["fp_a"].to_numpy()
    fb = side_b["fp_b"].to_numpy()
    d = np.bitwise_count(fa ^ fb).astype(np.int32)
    idx = np.flatnonzero(cand)
    a, b, d = a[idx], b[idx], d[idx]
    texts = half["text_a"].take(idx).to_pylist() + side_b["text_b"].take(idx).to_pylist()
    ia = np.arange(idx.size, dtype=np.int64)
    if cfg.verify:
        ok, score = stage_verify(cfg.make_verifier(), texts, ia, ia + idx.size, d)
    else:
        ok, score = np.ones(idx.size, bool), 1.0 - d / 64.0
    sel = idx[ok]
    out = pa.table(
        {"a": a[ok], "b": b[ok], "id_a": half["id_a"].take(sel), "id_b": side_b["id_b"].take(sel),
         "len_a": half["len_a"].take(sel), "len_b": side_b["len_b"].take(sel),
         "distance": d[ok], "score": score[ok]},
        schema=VERIFIED_SCHEMA,
    )  # fmt: skip
    _store.write_table(f"{workdir}/verified/p{task:05d}.arrow", out)
    return {"candidates": int(idx.size), "verified": int(ok.sum())}
