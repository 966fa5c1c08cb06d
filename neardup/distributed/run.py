"""The distributed dedup job: the steps in order, each a set of tasks given to an engine."""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError, InputError
from ..rules.lsh import band_caps
from ..rules.passes import valve_distance
from ..rules.summary import summary
from ..rules.verify import is_lazy
from . import _store
from .candidates import (
    simhash_distance,
    step_big,
    step_first,
    step_group,
    step_join,
    step_keys,
)
from .engines import Engine, LocalEngine
from .exact import step_exact
from .job import Job, plan_partitions
from .keep import step_final, step_round
from .lazy import step_deferred, step_lazy
from .read import exclude_digest, step_read, write_exclude
from .verify import step_attach, step_dense, step_verify
from .write import step_count, step_write

__all__ = ["DistributedResult", "run_dedup"]

Progress = Callable[[str, int, int], None]


@dataclass
class DistributedResult:
    """What :func:`run_dedup` did: the summary (the single-machine ``stats`` keys), per-step
    timings and counts, and where the outputs are (``workdir``)."""

    workdir: str
    stats: dict[str, Any]
    steps: dict[str, Any] = field(default_factory=dict)

    def read(self, what: str) -> Any:
        """``kept``, ``clusters`` or ``pairs_out`` as one pyarrow.Table, in input order."""
        import pyarrow as pa

        files = sorted(glob.glob(os.path.join(self.workdir, what, "p*.arrow")))
        return pa.concat_tables([_store.read_table(f) for f in files])


def _input_files(parts: Any) -> list[list[Any]]:
    """Each input file once: ``[path, size, mtime_ns]`` (size and time None where the path
    is not a local file, e.g. a URL): what a rerun in the same work directory must find."""
    out: list[list[Any]] = []
    seen: set[str] = set()
    for p in parts:
        if p.path in seen:
            continue
        seen.add(p.path)
        try:
            st = os.stat(p.path)
        except OSError:
            out.append([p.path, None, None])
        else:
            out.append([p.path, st.st_size, st.st_mtime_ns])
    return out


def _changed_inputs(recorded: Any, now: list[list[Any]]) -> str | None:
    """The first input whose size or modification time differs from ``recorded`` (None: the
    same); a job recorded without them counts as changed."""
    if not isinstance(recorded, list):
        return "the job's record of them is missing"
    old = {r[0]: r for r in recorded if isinstance(r, list) and len(r) == 3}
    for path, size, mtime in now:
        if old.get(path) != [path, size, mtime]:
            return path
    return None


def _check_config(cfg: Any) -> None:
    if cfg.candidates != "lsh":
        raise ConfigError("the distributed engines run the default candidates='lsh' only")
    if not cfg.exact:
        raise ConfigError("the distributed engines always find exact duplicates (exact=True)")


def run_dedup(
    inputs: list[str],
    workdir: str,
    *,
    engine: Engine | None = None,
    config: Any = None,
    partitions: int | None = None,
    buckets: int | None = None,
    fmt: str | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    encoding: str = "utf-8",
    on_error: str = "fail",
    generate_ids: bool = False,
    progress: Progress | None = None,
    exclude: np.ndarray | None = None,
) -> DistributedResult:
    """Deduplicate ``inputs`` with the same decisions as :func:`neardup.dedup` on the same
    documents in the same order, as steps run by ``engine`` (default: in this process).

    ``workdir`` holds every step's outputs; a rerun with the same inputs and config resumes
    (finished tasks are skipped); a different job in the same directory is refused.
    ``partitions`` (default: one per input file) sets the read parallelism, ``buckets``
    (default: the number of partitions) the shuffles'. ``exclude``: positions
    (``file << POS_SHIFT | row``, rows among the records read) of records to leave out, as if
    they were not there (an incremental run's documents dropped for its store).
    """
    from ..rules.config import DedupConfig

    cfg = config if config is not None else DedupConfig()
    _check_config(cfg)
    eng = engine or LocalEngine()
    parts = plan_partitions(inputs, partitions, fmt)
    job = Job(
        workdir=os.path.abspath(workdir),
        partitions=parts,
        config=cfg.to_dict(),
        buckets=buckets or len(parts),
        text_field=text_field,
        id_field=id_field,
        encoding=encoding,
        on_error=on_error,
        generate_ids=generate_ids,
        input_format=fmt,
    )
    os.makedirs(job.workdir, exist_ok=True)
    if exclude is not None:
        exclude = np.unique(np.asarray(exclude, np.int64))
        job = dataclasses.replace(job, exclude=exclude_digest(exclude))
    meta = os.path.join(job.workdir, "job.json")
    files = _input_files(parts)
    if os.path.exists(meta):
        with open(meta) as fh:
            recorded = json.load(fh)
        if recorded.get("job") != job.fingerprint():
            raise InputError(
                f"{workdir} holds another job (other inputs, partitions or settings); "
                "pass an empty --workdir or delete it"
            )
        changed = _changed_inputs(recorded.get("files"), files)
        if changed:
            # its finished tasks decided the old bytes: reusing them applied the old run's
            # positions to the new records (kept the wrong ones, lost appended ones), exit 0
            raise InputError(
                f"{workdir} holds this job's work on other bytes of its inputs ({changed} "
                "changed since: size or modification time); pass an empty --workdir or "
                "delete it"
            )
    else:
        if exclude is not None:
            write_exclude(job.workdir, exclude)
        with open(meta + ".tmp", "w") as fh:
            json.dump(
                {"job": job.fingerprint(), "inputs": inputs, "engine": eng.name, "files": files},
                fh,
            )
        os.replace(meta + ".tmp", meta)
    report = progress or (lambda s, d, t: None)
    steps: dict[str, Any] = {}
    t_start = time.perf_counter()

    def run(name: str, fn: Any, tasks: int, j: Job, *extra: Any) -> list[dict[str, Any]]:
        report(name, 0, tasks)
        t0 = time.perf_counter()
        res = eng.map(fn, [(j.workdir, i, j, *extra) for i in range(tasks)])
        steps[name] = {
            "tasks": tasks,
            "elapsed_s": round(time.perf_counter() - t0, 4),
            "shuffle_bytes": sum(r.get("shuffle_bytes", 0) for r in res),
        }
        if any("written_bytes" in r for r in res):  # a task's own files (not a shuffle)
            steps[name]["written_bytes"] = sum(r.get("written_bytes", 0) for r in res)
        if any("reference_bytes" in r for r in res):
            steps[name]["reference_bytes"] = sum(r.get("reference_bytes", 0) for r in res)
        report(name, tasks, tasks)
        return res

    P, R = len(parts), job.buckets
    # the read step learns where partitions start; later steps route rows by position
    res = run("read", step_read, P, job)
    job = dataclasses.replace(job, starts=tuple(r["first"] for r in res))
    n = sum(r["rows"] for r in res)
    ex = run("exact", step_exact, R, job)
    ks = run("keys", step_keys, P, job)
    # each key bucket sorted into groups once (big and join read the groups, not the bucket);
    # the bucket valve, per band as on one machine: the bands' bucket sizes (counted by the
    # group step) summed, each band's cap set; members of thinned buckets learn their first
    # thinned band (see candidates.py)
    plan = cfg.lsh_plan()
    sz = run("group", step_group, R, job)
    caps, budget = band_caps([r["hist"] for r in sz], sum(r["lsh_docs"] for r in ks), plan)
    if any(c is not None for c in caps):
        run("big", step_big, R, job, caps)
        run("first", step_first, P, job)
    jn = run("join", step_join, R, job, caps)
    valve: dict[int, list[int]] = {}
    for r in jn:
        for band, capped, in_big, made_big in r["valve"]:
            v = valve.setdefault(band, [0, 0, 0])
            v[0] += capped
            v[1] += in_big
            v[2] += made_big
    lsh_docs = sum(r["lsh_docs"] for r in ks)
    used = [c for c in caps if c is not None]
    # the SimHash passes' pair valve, as on one machine (planned_pairs): over all the pass's
    # pairs, the largest distance whose pairs fit max_candidates_per_doc per document
    per = cfg.max_candidates_per_doc
    k = simhash_distance(job)
    at_long = np.sum([r["simhash_at"] for r in jn], axis=0) if jn else np.zeros(k + 1, int)
    at_short = np.sum([r["simhash_short_at"] for r in jn], axis=0) if jn else np.zeros(1, int)
    long_docs, sim_docs = (sum(r[x] for r in ks) for x in ("sim_long_docs", "sim_docs"))
    sim_used = (
        valve_distance(at_long, None if per is None else per * long_docs),
        valve_distance(at_short, None if per is None else per * sim_docs),
    )
    valved = sim_used[0] < k or sim_used[1] < 0
    run("attach", step_attach, P, job, sim_used if valved else None)
    if cfg.verify:
        run("dense", step_dense, P, job)
    vf = run("verify", step_verify, P, job, valved)
    # the pairs only a concentrated corpus made: verified lazily when they are many, as on one
    # machine (see lazy.py), else all of them
    deferred = sum(r.get("deferred", 0) for r in vf)
    units = n - sum(r["later_copies"] for r in ex)
    lazy = cfg.verify and is_lazy(deferred, units)
    lz = run("lazy", step_lazy, 1, job)[0] if lazy else {}
    df = run("deferred", step_deferred, P, job, lazy)
    # the keep decision (or the components) in rounds, one task per partition each, until no
    # unit is undecided (no label changed): see keep.py and rounds.py
    t0 = time.perf_counter()
    rounds: list[dict[str, Any]] = []
    while True:
        rr = run("keep_round", step_round, P, job, len(rounds))
        rounds.append({k: sum(r[k] for r in rr) for k in rr[0]} if rr else {})
        rounds[-1]["max_local_passes"] = max((r["local_passes"] for r in rr), default=0)
        pending = "messages" if cfg.keep == "none" else "undecided"
        if not rr or rounds[-1][pending] == 0:
            break
        if cfg.keep != "none" and rounds[-1]["decided"] == 0:
            raise RuntimeError("keep rounds made no progress (a bug: please report it)")
    steps["keep"] = {
        "tasks": P * len(rounds),
        "rounds": len(rounds),
        "elapsed_s": round(time.perf_counter() - t0, 4),
        "shuffle_bytes": sum(r.get("shuffle_bytes", 0) for r in rounds),
        "per_round": rounds,
    }
    del steps["keep_round"]
    run("final", step_final, P, job, len(rounds))
    wr = run("write", step_write, P, job)
    cn = run("count", step_count, P, job)
    kept = sum(r["kept"] for r in wr)
    stats = summary(
        documents=n,
        exact_duplicates=sum(r["later_copies"] for r in ex),
        kept=kept,
        clusters=sum(r["clusters"] for r in cn),
        keep=cfg.keep,
        candidates=sum(r["candidates"] for r in vf),
        verified=sum(r["verified"] for r in vf) + sum(r["verified"] for r in df),
        pairs=sum(r["pairs"] for r in wr),
        plan=plan,
        elapsed_s=time.perf_counter() - t_start,
        timings={k: v["elapsed_s"] for k, v in steps.items()},
        lsh={
            "band_pairs_budget": budget,
            "valve_bands": len(used),
            "bucket_cap_used": min(used) if used else None,
            "band_caps": caps,  # per band (None: every bucket paired in full)
            "capped_buckets": sum(v[0] for v in valve.values()),
            # an upper bound, as on one machine: per band, pairs of thinned buckets not made
            "pairs_skipped": min(
                sum(max(0, v[1] - v[2]) for v in valve.values()),
                lsh_docs * (lsh_docs - 1) // 2,
            ),
            **(
                {
                    "deferred_pairs": deferred,
                    "deferred_lazy": lazy,
                    "deferred_skipped": lz.get("skipped", 0),
                }
                if cfg.verify
                else {}
            ),
        },
        candidate_passes={
            "simhash": {"distance_planned": k, "distance_used": sim_used[0]},
            "simhash_short": {"distance_planned": 0, "distance_used": sim_used[1]},
        },
        # records --on-error skip left out (each file's, counted by its first partition)
        skipped_records=sum(r.get("skipped", 0) for r in res),
        engine=eng.name,
        partitions=P,
        buckets=R,
        shuffle_bytes=sum(v.get("shuffle_bytes", 0) for v in steps.values()),
    )
    skipped_list = [x for r in res for x in r.get("skipped_list", ())][:1000]
    if skipped_list:
        stats["skipped_list"] = skipped_list
    return DistributedResult(job.workdir, stats, steps)
