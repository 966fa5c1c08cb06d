"""Step ``write`` (per partition): each document's decision, the kept documents and the pairs.

A document's root is, in order of precedence: the keep step's decision (it is in a near pair,
or in the exact group of one), its exact group's head (``dups``), or itself. Outputs, each
written atomically with the partition's success marker last:

* ``kept/p<partition>.arrow``: ``pos, id, text`` of the kept documents;
* ``clusters/p<partition>.arrow``: ``pos, id, root, root_id, kept`` for every document;
* ``pairs_out/p<partition>.arrow``: the pairs whose first member is here, sorted by
  ``(a, b)``; partitions are in input order, so the files in order are sorted globally.

The roots of the dropped documents go to the roots' partitions (``roots``), where step ``count``
counts the distinct ones (the summary's clusters) without gathering them on the driver.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _store
from .exact import DUPS_SCHEMA, PAIRS_SCHEMA
from .job import Job
from .keep import DECIDE_SCHEMA

__all__ = ["step_count", "step_write"]


def _roots_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("root", pa.int64())])


_ROOTS_SCHEMA = _roots_schema()


@_store.resumable("write")
def step_write(workdir: str, task: int, job: Job) -> dict[str, Any]:
    """Write partition ``task``'s outputs; returns its counts."""
    import pyarrow as pa

    cfg = job.dedup_config()
    docs = _store.read_table(f"{workdir}/docs/p{task:05d}.arrow")
    pos = docs["pos"].to_numpy()
    ids = np.asarray(docs["id"].to_pylist(), object)
    root, root_id, kept = pos.copy(), ids.copy(), np.ones(pos.size, bool)
    dups = _store.read_bucket(workdir, "dups", task, DUPS_SCHEMA)
    at = np.searchsorted(pos, dups["pos"].to_numpy())
    if cfg.keep == "none":
        root[at] = dups["first"].to_numpy()
        root_id[at] = np.asarray(dups["first_id"].to_pylist(), object)
        kept[at] = False
    else:
        root[at] = dups["head"].to_numpy()
        root_id[at] = np.asarray(dups["head_id"].to_pylist(), object)
        kept[at] = root[at] == pos[at]
    dec = _store.read_bucket(workdir, "decide", task, DECIDE_SCHEMA)
    at = np.searchsorted(pos, dec["pos"].to_numpy())
    root[at] = dec["root"].to_numpy()
    root_id[at] = np.asarray(dec["root_id"].to_pylist(), object)
    kept[at] = dec["kept"].to_numpy()
    sel = np.flatnonzero(kept)
    _store.write_table(
        f"{workdir}/kept/p{task:05d}.arrow",
        pa.table({"pos": pos[sel], "id": docs["id"].take(sel), "text": docs["text"].take(sel)}),
    )
    _store.write_table(
        f"{workdir}/clusters/p{task:05d}.arrow",
        pa.table(
            {"pos": pos, "id": docs["id"], "root": root,
             "root_id": pa.array(root_id.tolist(), pa.string()), "kept": kept}
        ),
    )  # fmt: skip
    pairs = _store.read_bucket(workdir, "pairs", task, PAIRS_SCHEMA)
    o = np.lexsort((pairs["b"].to_numpy(), pairs["a"].to_numpy()))
    _store.write_table(f"{workdir}/pairs_out/p{task:05d}.arrow", pairs.take(o))
    roots = np.unique(root[~kept])
    size = _store.shuffle_write(
        workdir, "roots", task, pa.table({"root": roots}, schema=_ROOTS_SCHEMA),
        _store.owner_of(roots, job.starts),
    )  # fmt: skip
    return {
        "documents": int(pos.size),
        "kept": int(sel.size),
        "pairs": int(pairs.num_rows),
        "shuffle_bytes": size,
    }


@_store.resumable("count")
def step_count(workdir: str, task: int, job: Job) -> dict[str, Any]:
    """The distinct roots of dropped documents that partition ``task`` holds (clusters)."""
    t = _store.read_bucket(workdir, "roots", task, _ROOTS_SCHEMA)
    return {"clusters": int(np.unique(t["root"].to_numpy()).size)}
