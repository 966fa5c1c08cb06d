"""Steps ``keep`` (rounds, one task per partition each) and ``final`` (per partition): the keep
decision, clusters and expanded near pairs, with no pass over the documents on the driver.

The single-machine rule (:func:`neardup.rules.keep.stage_representatives`) is greedy in input
order (or longest first): a unit (an exact group, named by its first copy) is dropped only for a
verified pair with a unit *already kept*. The ``verify`` step turns every verified pair into a
directed edge ``u -> v`` (``u`` earlier in the keep order and allowed to drop ``v`` by the
containment rule) and shuffles it to both owners (``kin`` to ``v``'s partition, ``kout`` to
``u``'s); ``keep="none"`` shuffles the undirected pair to both instead (``kadj``). The rounds
(:mod:`neardup.distributed.rounds`) then run as one task per partition each, messages between
rounds going through the file shuffle ``kmsg/r<round>``; the driver only adds up the counts of
undecided units (greedy) or messages (components) and stops at zero.

``final`` (per partition): the decisions of its units, repeated over the members of their exact
groups (``gmem``, shuffled here by the ``exact`` step), go to the members' partitions
(``decide``); the near pairs are repeated over the members of both groups
(:func:`neardup.rules.groups.stage_expand`'s rule: only when the groups' sizes multiply to at most
``expand_pairs``), the second group's members coming from ``verify`` (``xpand``). A kept unit
needs no decision: the ``write`` step's default (its exact group's head, or itself) is the kept
decision.
"""

from __future__ import annotations

import glob
from typing import Any

import numpy as np

from . import _store
from .exact import GMEM_SCHEMA, PAIRS_SCHEMA
from .job import Job
from .rounds import GreedyEdges, LabelState, greedy_round, label_round

__all__ = [
    "ADJ_SCHEMA",
    "DECIDE_SCHEMA",
    "IN_SCHEMA",
    "OUT_SCHEMA",
    "XPAND_SCHEMA",
    "step_final",
    "step_round",
]


def _schemas() -> dict[str, Any]:
    import pyarrow as pa

    i64, s = pa.int64(), pa.string()
    return {
        "decide": pa.schema([("pos", i64), ("root", i64), ("root_id", s), ("kept", pa.bool_())]),
        "in": pa.schema([("v", i64), ("k1", i64), ("u", i64), ("head", i64), ("head_id", s)]),
        "out": pa.schema([("u", i64), ("v", i64)]),
        "adj": pa.schema([("v", i64), ("v_id", s), ("u", i64)]),
        "xpand": pa.schema(
            [
                ("a", i64),
                ("id_a", s),
                ("b", i64),
                ("w", i64),
                ("id_w", s),
                ("distance", pa.int32()),
                ("score", pa.float64()),
                ("rule", pa.uint8()),
            ]
        ),
        "state": pa.schema(
            [("v", i64), ("k1", i64), ("u", i64), ("st", pa.int8()), ("head", i64), ("head_id", s)]
        ),
        "dec": pa.schema([("v", i64), ("root", i64), ("root_id", s)]),
        "gmsg": pa.schema([("u", i64), ("kept", pa.bool_())]),
        "label": pa.schema([("node", i64), ("label", i64), ("label_id", s)]),
        "lmsg": pa.schema([("node", i64), ("label", i64), ("label_id", s)]),
    }


_S = _schemas()
DECIDE_SCHEMA = _S["decide"]
IN_SCHEMA = _S["in"]
OUT_SCHEMA = _S["out"]
ADJ_SCHEMA = _S["adj"]
XPAND_SCHEMA = _S["xpand"]


def _ids(col: Any) -> np.ndarray:
    return np.asarray(col.to_pylist(), dtype=object)


def _rdir(workdir: str, r: int) -> str:
    return f"{workdir}/kround/r{r:04d}"


def _owner(job: Job) -> Any:
    starts = job.starts
    return lambda x: _store.owner_of(np.asarray(x, np.int64), starts)


def step_round(workdir: str, task: int, job: Job, r: int) -> dict[str, Any]:
    """Round ``r`` of the keep decision (or of the components) on partition ``task``."""
    run = _store.resumable(f"kround/r{r:04d}")(_round)
    out: dict[str, Any] = run(workdir, task, job, r)
    return out


def _round(workdir: str, task: int, job: Job, r: int) -> dict[str, Any]:
    import pyarrow as pa

    cfg = job.dedup_config()
    owner = _owner(job)
    d = _rdir(workdir, r)
    if cfg.keep == "none":
        adj = _store.read_bucket(workdir, "kadj", task, ADJ_SCHEMA)
        if r == 0:
            s = LabelState.build(adj["v"].to_numpy(), _ids(adj["v_id"]), adj["u"].to_numpy())
        else:
            t = _store.read_table(f"{_rdir(workdir, r - 1)}/l{task:05d}.arrow")
            s = LabelState(
                t["node"].to_numpy().copy(), t["label"].to_numpy().copy(), _ids(t["label_id"]),
                adj["v"].to_numpy(), adj["u"].to_numpy(),
            )  # fmt: skip
        m = _store.read_bucket(workdir, f"kmsg/r{r:04d}", task, _S["lmsg"])
        dest, lab, lid, to, passes = label_round(
            s, m["node"].to_numpy(), m["label"].to_numpy(), _ids(m["label_id"]), owner, task,
            r == 0,
        )  # fmt: skip
        _store.write_table(
            f"{d}/l{task:05d}.arrow",
            pa.table({"node": s.node, "label": s.label,
                      "label_id": pa.array(s.label_id.tolist(), pa.string())},
                     schema=_S["label"]),
        )  # fmt: skip
        msgs = pa.table(
            {"node": dest, "label": lab, "label_id": pa.array(lid.tolist(), pa.string())},
            schema=_S["lmsg"],
        )
        size = _store.shuffle_write(workdir, f"kmsg/r{r + 1:04d}", task, msgs, to)
        return {"messages": int(dest.size), "undecided": 0, "local_passes": passes,
                "shuffle_bytes": size}  # fmt: skip
    if r == 0:
        i = _store.read_bucket(workdir, "kin", task, IN_SCHEMA)
        o = _store.read_bucket(workdir, "kout", task, OUT_SCHEMA)
        e = GreedyEdges.build(
            i["v"].to_numpy(), i["k1"].to_numpy(), i["u"].to_numpy(), i["head"].to_numpy(),
            _ids(i["head_id"]), o["u"].to_numpy(), o["v"].to_numpy(),
        )  # fmt: skip
    else:
        t = _store.read_table(f"{_rdir(workdir, r - 1)}/e{task:05d}.arrow")
        o = _store.read_table(f"{_rdir(workdir, r - 1)}/o{task:05d}.arrow")
        e = GreedyEdges(
            t["v"].to_numpy(), t["k1"].to_numpy(), t["u"].to_numpy(),
            t["st"].to_numpy().copy(), t["head"].to_numpy(), _ids(t["head_id"]),
            o["u"].to_numpy(), o["v"].to_numpy(),
        )  # fmt: skip
    m = _store.read_bucket(workdir, f"kmsg/r{r:04d}", task, _S["gmsg"])
    dec = greedy_round(e, m["u"].to_numpy(), m["kept"].to_numpy(zero_copy_only=False), owner,
                       task, r == 0)  # fmt: skip
    _store.write_table(
        f"{d}/e{task:05d}.arrow",
        pa.table({"v": e.v, "k1": e.k1, "u": e.u, "st": e.st, "head": e.head,
                  "head_id": pa.array(e.head_id.tolist(), pa.string())}, schema=_S["state"]),
    )  # fmt: skip
    _store.write_table(
        f"{d}/o{task:05d}.arrow", pa.table({"u": e.ou, "v": e.ov}, schema=OUT_SCHEMA)
    )
    _store.write_table(
        f"{d}/d{task:05d}.arrow",
        pa.table({"v": dec.dropped, "root": dec.root,
                  "root_id": pa.array(dec.root_id.tolist(), pa.string())}, schema=_S["dec"]),
    )  # fmt: skip
    msgs = pa.table({"u": dec.msg_u, "kept": dec.msg_kept}, schema=_S["gmsg"])
    size = _store.shuffle_write(workdir, f"kmsg/r{r + 1:04d}", task, msgs, dec.msg_to)
    return {
        "undecided": int(np.unique(e.v).size),
        "decided": int(dec.kept.size + dec.dropped.size),
        "dropped": int(dec.dropped.size),
        "messages": int(dec.msg_u.size),
        "local_passes": dec.local_passes,
        "shuffle_bytes": size,
    }


@_store.resumable("final")
def step_final(workdir: str, task: int, job: Job, rounds: int) -> dict[str, Any]:
    """Partition ``task``'s decisions over its units' members (``decide``) and its expanded near
    pairs (``pairs``), after ``rounds`` rounds."""
    import pyarrow as pa

    from ..rules.config import STAGE_NEAR

    cfg = job.dedup_config()
    owner = _owner(job)
    if cfg.keep == "none":
        t = _store.read_table(f"{_rdir(workdir, rounds - 1)}/l{task:05d}.arrow")
        unit, root, root_id = t["node"].to_numpy(), t["label"].to_numpy(), _ids(t["label_id"])
    else:
        files = sorted(glob.glob(f"{workdir}/kround/r*/d{task:05d}.arrow"))
        tabs = [_store.read_table(f) for f in files]
        t = pa.concat_tables(tabs) if tabs else _S["dec"].empty_table()
        unit, root, root_id = t["v"].to_numpy(), t["root"].to_numpy(), _ids(t["root_id"])
    # members of this partition's units (a unit in no exact group is its only member)
    g = _store.read_bucket(workdir, "gmem", task, GMEM_SCHEMA)
    gf, gp, gid = g["first"].to_numpy(), g["pos"].to_numpy(), _ids(g["id"])
    o = np.lexsort((gp, gf))
    gf, gp, gid = gf[o], gp[o], gid[o]

    def members(x: np.ndarray, x_id: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(index into x, member position, member id) of every member of units ``x``."""
        lo, hi = np.searchsorted(gf, x, "left"), np.searchsorted(gf, x, "right")
        grouped = hi > lo
        cnt = np.where(grouped, hi - lo, 1)
        idx = np.repeat(np.arange(x.size), cnt)
        off = np.arange(idx.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        mpos, mid = x[idx].astype(np.int64), x_id[idx].copy()
        gi = grouped[idx]
        at = (lo[idx] + off)[gi]
        mpos[gi], mid[gi] = gp[at], gid[at]
        return idx, mpos, mid

    idx, mpos, _ = members(unit, np.zeros(unit.size, object))
    decide = pa.table(
        {"pos": mpos, "root": root[idx], "root_id": pa.array(root_id[idx].tolist(), pa.string()),
         "kept": np.zeros(mpos.size, bool)},
        schema=DECIDE_SCHEMA,
    )  # fmt: skip
    size = _store.shuffle_write(workdir, "decide", task, decide, owner(mpos))
    # near pairs over the members of both groups (the second group's came with the request)
    x = _store.read_bucket(workdir, "xpand", task, XPAND_SCHEMA)
    a = x["a"].to_numpy()
    idx, u, uid = members(a, _ids(x["id_a"]))
    w, wid = x["w"].to_numpy()[idx], _ids(x["id_w"])[idx]
    new = (u != a[idx]) | (w != x["b"].to_numpy()[idx])
    idx, u, uid, w, wid = idx[new], u[new], uid[new], w[new], wid[new]
    swap = u > w
    pa_, pb = np.where(swap, w, u), np.where(swap, u, w)
    ia, ib = np.where(swap, wid, uid), np.where(swap, uid, wid)
    pairs = pa.table(
        {"a": pa_, "b": pb, "id_a": pa.array(ia.tolist(), pa.string()),
         "id_b": pa.array(ib.tolist(), pa.string()),
         "distance": x["distance"].to_numpy()[idx], "score": x["score"].to_numpy()[idx],
         "stage": np.full(pa_.size, STAGE_NEAR, np.uint8), "rule": x["rule"].to_numpy()[idx]},
        schema=PAIRS_SCHEMA,
    )  # fmt: skip
    # map-task numbers past the exact and verify steps' (file names never collide)
    size += _store.shuffle_write(
        workdir, "pairs", job.buckets + len(job.partitions) + task, pairs, owner(pa_)
    )
    return {"decided": int(mpos.size), "expanded_pairs": int(pa_.size), "shuffle_bytes": size}
