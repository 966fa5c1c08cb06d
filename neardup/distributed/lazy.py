"""Steps ``lazy`` and ``deferred``: the pairs only a concentrated corpus made, verified as the
single machine verifies them.

Step ``verify`` holds back the candidate pairs every source of which is a concentrated one (met
only in thinned over-cap MinHash buckets, or only among texts with many SimHash partners:
:func:`neardup.rules.verify.deferred_pairs`) in ``deferred/p<partition>.arrow``. When they are
few (at most ``LAZY_MIN_PAIRS_PER_DOC`` per first copy, :func:`neardup.rules.verify.is_lazy`:
every ordinary corpus) step ``deferred`` verifies all of them where they are, as ``verify``
would have. When they are many (a boilerplate shared by thousands of texts), step ``lazy`` (one
task) runs the single machine's lazy rounds over them (:func:`neardup.rules.verify.lazy_rounds`
with :func:`~neardup.rules.verify.keep_skippable`): it reads the deferred pairs, the near pairs
``verify`` accepted and the facts of the units they touch (length, token count, the copy that
stands for the unit), verifies the deferred pairs in the same order and rounds, each round's
texts read by reference, until every pair left can no longer change the keep decision, and
writes the accepted ones to ``lazy/p00000.arrow``; step ``deferred`` then emits those. So the
kept documents, the pairs reported and the counts are the single machine's, and the work is
bounded the same way. Its state is the concentrated part only: the deferred pairs, the accepted
near pairs and the units they touch.
"""

from __future__ import annotations

import glob
import itertools
from typing import Any

import numpy as np

from .._arrays import find_sorted
from . import _store
from .job import Job
from .verify import _unit_facts, emit_verified

__all__ = ["step_deferred", "step_lazy"]


def _decided_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [("a", pa.int64()), ("b", pa.int64()), ("score", pa.float64()), ("rule", pa.uint8())]
    )


DECIDED_SCHEMA = _decided_schema()
_LAZY_FILE = "lazy/p00000.arrow"


def _deferred(workdir: str, task: int) -> Any:
    return _store.read_table(f"{workdir}/deferred/p{task:05d}.arrow")


def _units(workdir: str, job: Job, x: np.ndarray) -> dict[str, np.ndarray]:
    """For units ``x`` (ascending, any partitions): own length, the group's longest length,
    token count and head (the copy that stands for the group)."""
    out = {k: np.zeros(x.size, np.int64) for k in ("len", "ulen", "tok", "head")}
    owner = _store.owner_of(x, job.starts)
    cuts: list[int] = []
    if x.size:
        cuts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1], True]).tolist()
    for s, e in itertools.pairwise(cuts):
        p = int(owner[s])
        docs = _store.read_table(f"{workdir}/docs/p{p:05d}.arrow")
        f = _unit_facts(workdir, p, docs, x[s:e])
        out["len"][s:e] = docs["len"].to_numpy()[np.searchsorted(docs["pos"].to_numpy(), x[s:e])]
        out["ulen"][s:e], out["tok"][s:e], out["head"][s:e] = f["ulen"], f["tok"], f["head"]
    return out


def _texts(workdir: str, job: Job, pos: np.ndarray) -> tuple[list[Any], int]:
    ref = _store.by_reference(workdir, job.starts, pos, 0, np.ones(pos.size, bool))
    return ref["text"], int(ref["bytes"])


@_store.resumable("lazy")
def step_lazy(workdir: str, task: int, job: Job) -> dict[str, Any]:
    """The lazy rounds over every partition's deferred pairs (one task); the accepted ones to
    ``lazy/p00000.arrow``."""
    import pyarrow as pa

    from ..rules.config import STAGE_NEAR
    from ..rules.verify import keep_skippable, lazy_rounds, longest_first, stage_verify_rules

    cfg = job.dedup_config()
    verifier = cfg.make_verifier()
    P = len(job.partitions)
    held = pa.concat_tables([_deferred(workdir, p) for p in range(P)])
    da, db, dd = (held[c].to_numpy() for c in ("a", "b", "d"))
    o = np.lexsort((db, da))  # pair order: the single machine's candidate order
    da, db, dd = da[o], db[o], dd[o]
    # the near pairs step verify accepted (its map tasks of the pairs shuffle)
    files = [
        f for t in range(P)
        for f in sorted(glob.glob(f"{workdir}/pairs/m{job.buckets + t:05d}-r*.arrow"))
    ]  # fmt: skip
    near = [_store.read_table(f) for f in files]
    ea = np.concatenate([t["a"].to_numpy() for t in near] or [np.zeros(0, np.int64)])
    eb = np.concatenate([t["b"].to_numpy() for t in near] or [np.zeros(0, np.int64)])
    if near:
        stage = np.concatenate([t["stage"].to_numpy() for t in near])
        ea, eb = ea[stage == STAGE_NEAR], eb[stage == STAGE_NEAR]
    # the units these pairs touch, renumbered in input order; with keep="longest" a unit whose
    # longest copy is a later one gets that copy too (as on one machine, the copy stands for
    # the unit, so the unit's first copy counts as not kept: keep_skippable's view)
    x = np.unique(np.concatenate([ea, eb, da, db]))
    f = _units(workdir, job, x)
    k = x.size
    extra = np.flatnonzero(f["head"] != x) if cfg.keep == "longest" else np.zeros(0, np.int64)
    first = np.concatenate([np.arange(k), extra])
    lengths = np.concatenate([f["len"], f["ulen"][extra]])
    tokens = np.concatenate([f["tok"], f["tok"][extra]])
    a = np.searchsorted(x, np.concatenate([ea, da]))
    b = np.searchsorted(x, np.concatenate([eb, db]))
    ne = ea.size
    ok = np.zeros(a.size, bool)
    ok[:ne] = True
    deferred = np.zeros(a.size, bool)
    deferred[ne:] = True
    score = np.zeros(da.size, np.float64)
    rule = np.zeros(da.size, np.uint8)
    done = np.zeros(da.size, bool)
    read = 0

    def run(sel: np.ndarray) -> None:
        nonlocal read
        j = sel - ne
        texts, nbytes = _texts(workdir, job, np.concatenate([da[j], db[j]]))
        read += nbytes
        m = np.arange(j.size, dtype=np.int64)
        ok[sel], score[j], rule[j] = stage_verify_rules(verifier, texts, m, m + j.size, dd[j])
        done[j] = True

    skippable = keep_skippable(
        first.size, first, a, b, lengths, cfg.keep, verifier.threshold, tokens
    )
    order = longest_first(lengths, a, b) if cfg.keep == "longest" else None
    skipped = lazy_rounds(ok, deferred, skippable, run, order)
    acc = np.flatnonzero(ok[ne:])
    _store.write_table(
        f"{workdir}/{_LAZY_FILE}",
        pa.table(
            {"a": da[acc], "b": db[acc], "score": score[acc], "rule": rule[acc]},
            schema=DECIDED_SCHEMA,
        ),
    )
    return {
        "deferred": int(da.size),
        "verified": int(done.sum()),
        "accepted": int(acc.size),
        "skipped": int(skipped.sum()),
        "reference_bytes": read,
    }


@_store.resumable("deferred")
def step_deferred(workdir: str, task: int, job: Job, lazy: bool) -> dict[str, Any]:
    """Partition ``task``'s deferred pairs: the ones step ``lazy`` accepted (``lazy``), else
    every one verified here; the accepted pairs emitted as step ``verify`` emits its own."""
    import pyarrow as pa

    from ..rules.verify import stage_verify_rules

    held = _deferred(workdir, task)
    if not held.num_rows:
        return {"verified": 0, "shuffle_bytes": 0}
    cfg = job.dedup_config()
    docs = _store.read_table(f"{workdir}/docs/p{task:05d}.arrow")
    a, b, d = (held[c].to_numpy() for c in ("a", "b", "d"))
    nbytes = 0
    if lazy:
        dec = _store.read_table(f"{workdir}/{_LAZY_FILE}")
        xa, xb = dec["a"].to_numpy(), dec["b"].to_numpy()
        # (a, b) as one int64 over the ranks of the positions (a position's file number sits in
        # its high bits: a * span + b of the positions themselves would overflow)
        at = np.unique(np.concatenate([a, b, xa, xb]))
        span = at.size
        code = np.searchsorted(at, a) * span + np.searchsorted(at, b)
        dcode = np.searchsorted(at, xa) * span + np.searchsorted(at, xb)  # ascending
        i, ok = find_sorted(dcode, code)
        score = np.where(ok, dec["score"].to_numpy()[i] if dcode.size else 0.0, 0.0)
        rule = np.where(ok, dec["rule"].to_numpy()[i] if dcode.size else 0, 0).astype(np.uint8)
    else:
        text_a, nbytes = _texts(workdir, job, a)
        at_b = np.searchsorted(docs["pos"].to_numpy(), b)
        texts = text_a + docs["text"].take(pa.array(at_b)).to_pylist()
        m = np.arange(a.size, dtype=np.int64)
        ok, score, rule = stage_verify_rules(cfg.make_verifier(), texts, m, m + a.size, d)
    sel = np.flatnonzero(ok)
    size = emit_verified(
        workdir, task, job, docs, held.take(sel), d[sel], np.asarray(score, np.float64)[sel],
        np.asarray(rule, np.uint8)[sel], wave=1,
    )  # fmt: skip
    return {"verified": int(sel.size), "shuffle_bytes": size, "reference_bytes": nbytes}
