"""Step ``keep`` (on the driver, over the verified pairs only): the keep decision.

The single-machine rule (:func:`neardup.batch.policy.stage_representatives`) is greedy in input order:
a unit (an exact group) is dropped only for a verified pair with a unit *already kept*, so a
decision depends on decisions before it along chains of pairs. That is not a local rule, and
its distributed formulations (rounds of a lexicographically-first independent set) cost many
shuffles; here it runs on the driver over the documents that take part in a verified near pair
and their exact groups only (``P``), in compressed coordinates (positions renumbered in input
order, so every order-based tie-break is unchanged). A document in no near pair keeps its exact
group's decision, made by the ``exact`` step. Driver memory is ``O(|P|)``: for a crawl with
10 % near duplicates, ~ 0.1 N positions (see docs/distributed.md).

The near pairs are repeated over the members of their exact groups here as well
(:func:`neardup.batch.groups.stage_expand`), and with ``keep="none"`` the connected components of the
pairs are found here (again over ``P`` only). The decisions are shuffled to the documents'
partitions (``decide``), the expanded near pairs to their first member's (``pairs``).
"""

from __future__ import annotations

import glob
from typing import Any

import numpy as np

from . import _store
from .exact import PAIRS_SCHEMA
from .job import Job
from .verify import VERIFIED_SCHEMA

__all__ = ["DECIDE_SCHEMA", "step_keep"]


def _decide_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [("pos", pa.int64()), ("root", pa.int64()), ("root_id", pa.string()),
         ("kept", pa.bool_())]
    )  # fmt: skip


DECIDE_SCHEMA = _decide_schema()


def _concat(files: list[str], schema: Any) -> Any:
    import pyarrow as pa

    tables = [_store.read_table(f) for f in files]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def step_keep(workdir: str, job: Job) -> dict[str, Any]:
    """Decide which documents in near pairs are kept; returns counts (idempotent: its outputs
    are written under the task number 0 of step ``decide``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..batch.cluster import connected_components
    from ..batch.config import STAGE_NEAR
    from ..batch.groups import ExactGroups, stage_expand
    from ..batch.policy import stage_representatives

    if _store.done(workdir, "keep", 0):
        import json

        with open(f"{workdir}/keep/_done/00000.json") as fh:
            return dict(json.load(fh))
    cfg = job.dedup_config()
    v = _concat(sorted(glob.glob(f"{workdir}/verified/p*.arrow")), VERIFIED_SCHEMA)
    a, b = v["a"].to_numpy(), v["b"].to_numpy()
    units = np.unique(np.concatenate([a, b]))
    gfiles = sorted(glob.glob(f"{workdir}/groups/p*.arrow"))
    groups = _concat(gfiles, pa.schema([("first", pa.int64()), ("pos", pa.int64()),
                                        ("id", pa.string()), ("len", pa.int64())]))  # fmt: skip
    if groups.num_rows:
        groups = groups.filter(pc.is_in(groups["first"], value_set=pa.array(units, pa.int64())))
    gpos, gfirst = groups["pos"].to_numpy(), groups["first"].to_numpy()
    # positions taking part, with ids and lengths
    pos_all = np.concatenate([a, b, gpos])
    id_all = np.concatenate(
        [np.asarray(v["id_a"].to_pylist(), object), np.asarray(v["id_b"].to_pylist(), object),
         np.asarray(groups["id"].to_pylist(), object)]
    )  # fmt: skip
    len_all = np.concatenate(
        [v["len_a"].to_numpy(), v["len_b"].to_numpy(), groups["len"].to_numpy()]
    )
    P, at = np.unique(pos_all, return_index=True)
    ids, lengths = id_all[at], len_all[at].astype(np.int64)
    first_c = np.arange(P.size, dtype=np.int64)
    first_c[np.searchsorted(P, gpos)] = np.searchsorted(P, gfirst)
    ac, bc = np.searchsorted(P, a), np.searchsorted(P, b)
    d, score = v["distance"].to_numpy(), v["score"].to_numpy()
    verifier = cfg.make_verifier()
    if cfg.keep == "none":
        eg = first_c != np.arange(P.size)
        roots = connected_components(
            P.size, np.concatenate([ac, first_c[eg]]), np.concatenate([bc, np.flatnonzero(eg)])
        )
        sizes = np.bincount(roots, minlength=P.size)
        kept = sizes[roots] == 1
    else:
        roots = stage_representatives(first_c, ac, bc, lengths, cfg.keep, verifier.threshold)
        kept = roots == np.arange(P.size)
    decide = pa.table(
        {"pos": P, "root": P[roots], "root_id": pa.array(ids[roots].tolist(), pa.string()),
         "kept": kept},
        schema=DECIDE_SCHEMA,
    )  # fmt: skip
    _store.shuffle_write(workdir, "decide", 0, decide, _store.owner_of(P, job.starts))
    near = stage_expand(ExactGroups.from_first(first_c), ac, bc, d, score, cfg.expand_pairs)
    na, nb = P[near.a], P[near.b]
    pairs = pa.table(
        {"a": na, "b": nb, "id_a": pa.array(ids[near.a].tolist(), pa.string()),
         "id_b": pa.array(ids[near.b].tolist(), pa.string()), "distance": near.distance,
         "score": near.score, "stage": np.full(na.size, STAGE_NEAR, np.uint8)},
        schema=PAIRS_SCHEMA,
    )  # fmt: skip
    # map-task number past the exact step's buckets, so the file names never collide
    _store.shuffle_write(workdir, "pairs", job.buckets, pairs, _store.owner_of(na, job.starts))
    out = {"driver_positions": int(P.size), "near_pairs": int(na.size), "verified": int(a.size)}
    import json
    import os

    os.makedirs(f"{workdir}/keep/_done", exist_ok=True)
    with open(f"{workdir}/keep/_done/00000.json", "w") as fh:
        json.dump(out, fh)
    _store.mark_done(workdir, "keep", 0)
    return out
