"""Step ``exact``: one reducer per content-hash bucket groups the copies of each text.

For every group of two or more copies it writes

* ``dups``: each member's first copy, the group's *head* (the member that stands for it: the
  first copy, or with ``keep="longest"`` the longest, ties first), the group's size and longest
  length (``ulen``: the unit's length for the keep order and the containment rule), shuffled to
  the member's partition;
* ``pairs``: the exact pairs (:func:`neardup.rules.groups.stage_exact_pairs`: every pair of a group when
  at most ``expand_pairs``, else first-to-rest), shuffled to the partition of their first member;
* ``gmem``: every member (position, id) shuffled to the partition of its first copy, where the
  keep step repeats a dropped unit's decision and the near pairs over the members.

Whole groups meet in one reducer, so the output equals the single-machine stage's on the same
documents.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _store
from .job import Job
from .read import EXACT_SCHEMA

__all__ = ["DUPS_SCHEMA", "GMEM_SCHEMA", "PAIRS_SCHEMA", "step_exact"]


def _pa() -> Any:
    import pyarrow as pa

    return pa


def _dups_schema() -> Any:
    pa = _pa()
    return pa.schema(
        [("pos", pa.int64()), ("first", pa.int64()), ("first_id", pa.string()),
         ("head", pa.int64()), ("head_id", pa.string()), ("ulen", pa.int64()),
         ("size", pa.int64())]
    )  # fmt: skip


def _gmem_schema() -> Any:
    pa = _pa()
    return pa.schema([("first", pa.int64()), ("pos", pa.int64()), ("id", pa.string())])


def _pairs_schema() -> Any:
    pa = _pa()
    return pa.schema(
        [("a", pa.int64()), ("b", pa.int64()), ("id_a", pa.string()), ("id_b", pa.string()),
         ("distance", pa.int32()), ("score", pa.float64()), ("stage", pa.uint8()),
         ("rule", pa.uint8())]
    )  # fmt: skip


DUPS_SCHEMA = _dups_schema()
PAIRS_SCHEMA = _pairs_schema()
GMEM_SCHEMA = _gmem_schema()


@_store.resumable("exact")
def step_exact(workdir: str, task: int, job: Job) -> dict[str, Any]:
    """Group the copies in bucket ``task``; returns the counts of groups and later copies."""
    pa = _pa()
    from ..rules.config import STAGE_EXACT
    from ..rules.groups import ExactGroups, stage_exact_pairs

    cfg = job.dedup_config()
    t = _store.read_bucket(workdir, "exact", task, EXACT_SCHEMA)
    h0 = t["h0"].to_numpy()
    h1 = t["h1"].to_numpy()
    pos = t["pos"].to_numpy()
    order = np.lexsort((pos, h1, h0))
    h0, h1, pos = h0[order], h1[order], pos[order]
    ids = np.asarray(t["id"].to_pylist(), dtype=object)[order]
    lens = t["len"].to_numpy()[order]
    n = pos.size
    new = np.ones(n, bool)
    new[1:] = (h0[1:] != h0[:-1]) | (h1[1:] != h1[:-1])
    gid = np.cumsum(new) - 1
    size = np.bincount(gid)
    sel = np.flatnonzero(size[gid] > 1)  # members of groups of two or more
    pos, ids, lens, gid = pos[sel], ids[sel], lens[sel], gid[sel]
    starts = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]]) if sel.size else np.zeros(0, int)
    group_of = np.cumsum(np.r_[True, gid[1:] != gid[:-1]]) - 1 if sel.size else gid
    first_i = starts[group_of]  # index (in sel order) of each member's first copy
    if cfg.keep == "longest":  # longest member, ties: first
        o = np.lexsort((pos, -lens, group_of))
        lead = np.ones(sel.size, bool)
        lead[1:] = group_of[o][1:] != group_of[o][:-1]
        head_of_group = o[lead]
        head_i = head_of_group[group_of]
    else:
        head_i = first_i
    gsize = np.bincount(group_of) if sel.size else np.zeros(0, np.int64)
    glen = np.zeros(gsize.size, np.int64)
    np.maximum.at(glen, group_of, lens)
    dups = pa.table(
        {"pos": pos, "first": pos[first_i], "first_id": pa.array(ids[first_i].tolist(), pa.string()),
         "head": pos[head_i], "head_id": pa.array(ids[head_i].tolist(), pa.string()),
         "ulen": glen[group_of], "size": gsize[group_of]},
        schema=DUPS_SCHEMA,
    )  # fmt: skip
    size_dups = _store.shuffle_write(workdir, "dups", task, dups, _store.owner_of(pos, job.starts))
    # exact pairs in compressed coordinates: members sorted by position keep input order
    o = np.argsort(pos, kind="stable")
    rank = np.empty(sel.size, np.int64)
    rank[o] = np.arange(sel.size)
    first_c = rank[first_i][o]
    pt = stage_exact_pairs(ExactGroups.from_first(first_c), cfg.expand_pairs)
    ea, eb = pos[o][pt.a], pos[o][pt.b]
    sid = ids[o]
    pairs = pa.table(
        {"a": ea, "b": eb, "id_a": pa.array(sid[pt.a].tolist(), pa.string()),
         "id_b": pa.array(sid[pt.b].tolist(), pa.string()),
         "distance": np.zeros(ea.size, np.int32), "score": np.ones(ea.size),
         "stage": np.full(ea.size, STAGE_EXACT, np.uint8), "rule": pt.rule},
        schema=PAIRS_SCHEMA,
    )  # fmt: skip
    size_pairs = _store.shuffle_write(
        workdir, "pairs", task, pairs, _store.owner_of(ea, job.starts)
    )
    gmem = pa.table(
        {"first": pos[first_i], "pos": pos, "id": pa.array(ids.tolist(), pa.string())},
        schema=GMEM_SCHEMA,
    )
    size_gmem = _store.shuffle_write(
        workdir, "gmem", task, gmem, _store.owner_of(pos[first_i], job.starts)
    )
    return {
        "groups": int(starts.size),
        "later_copies": int(sel.size - starts.size),
        "exact_pairs": int(ea.size),
        "shuffle_bytes": size_dups + size_pairs + size_gmem,
    }
