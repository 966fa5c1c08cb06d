"""``neardup dedup --engine dask|spark``: the distributed job behind the same command line.

The inputs are read, and the outputs planned, checked and written, by the same
:mod:`neardup.io` calls as the local engine's (:func:`~neardup.io.plan_inputs`,
:func:`~neardup.io.plan_output`, :func:`~neardup.io.check_outputs` before the engine starts;
``--input-format``, ``--encoding``, ``--on-error``, ``--generate-ids`` and ``--output-format``
mean what they mean there). ``--output`` gets the kept records as the local engine writes them
(:func:`~neardup.io.write_kept`, the one writer: every field of every record, in any format, a
folder output mirroring the inputs): the driver reads the input files once more, with the same
read options, and copies the records the job kept (JSONL byte for byte). ``--pairs-out`` and
``--clusters-out`` get the same CSVs as the single-machine run; the summary is the same.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["run_distributed_cli"]


def _write_kept(res: Any, files: list[Any], plan: Any, **read: Any) -> int:
    """The kept records of ``files`` (read as the job read them: ``read`` are
    :func:`~neardup.io.read_corpus`'s options) to ``plan`` by :func:`~neardup.io.write_kept`:
    the job's kept positions (``file << POS_SHIFT | row``, rows among the records read) mark
    them in the corpus."""
    import glob
    import os

    from ..errors import InputError
    from ..io import read_corpus, write_kept
    from . import _store
    from .job import POS_SHIFT

    with read_corpus(files, **read) as corpus:
        keep = np.zeros(len(corpus), bool)
        firsts = np.array([s.first for s in corpus.sources], np.int64)
        for f in sorted(glob.glob(os.path.join(res.workdir, "kept", "p*.arrow"))):
            pos = _store.read_table(f).column("pos").to_numpy()
            at = firsts[pos >> POS_SHIFT] + (pos & ((1 << POS_SHIFT) - 1))
            keep[at] = True
        if int(keep.sum()) != res.stats["kept"]:  # the inputs changed under the job
            raise InputError(
                f"the inputs read again hold other records than the job read ({int(keep.sum())} "
                f"kept of {len(corpus)}, the job kept {res.stats['kept']}); run it again"
            )
        return write_kept(corpus, keep, plan.path, plan=plan, encoding="utf-8")


def _write_pairs(res: Any, path: str, more: Sequence[Sequence[object]] = ()) -> None:
    """The job's pairs CSV, then the rows ``more`` (the same columns), as the local engine's
    :func:`neardup.batch.files.write_pairs` writes them."""
    import io

    from ..io.csvout import csv_writer, write_pairs_csv
    from ..io.remote import open_output
    from ..rules.config import STAGE_NAMES
    from ..verify.rule import RULE_NAMES

    p = res.read("pairs_out")
    m = p.num_rows
    ids = p["id_a"].to_pylist() + p["id_b"].to_pylist()
    ar = np.arange(m, dtype=np.int64)
    with open_output(path, buffering=1 << 20) as fh:
        write_pairs_csv(
            fh, ids, ar, ar + m, p["distance"].to_numpy(), p["score"].to_numpy(),
            p["stage"].to_numpy(), STAGE_NAMES, rule=p["rule"].to_numpy(), rule_names=RULE_NAMES,
        )  # fmt: skip
        if more:
            text = io.TextIOWrapper(fh, encoding="utf-8", newline="", write_through=True)
            csv_writer(text).writerows(more)
            text.detach()


def _write_clusters(res: Any, path: str) -> None:
    from ..io.csvout import write_clusters_csv
    from ..io.remote import open_output
    from ..rules.keep import cluster_ids

    c = res.read("clusters")
    pos, root = c["pos"].to_numpy(), c["root"].to_numpy()
    root_i = np.searchsorted(pos, root)  # positions -> rows (input order)
    with open_output(path, buffering=1 << 20) as fh:
        write_clusters_csv(
            fh, c["id"].to_pylist(), cluster_ids(root_i), root_i, c["kept"].to_numpy()
        )


def run_distributed_cli(
    *,
    engine: str,
    inputs: list[str],
    config: Any,
    output: str,
    pairs_out: str | None,
    clusters_out: str | None,
    summary_json: str | None,
    input_format: str | None,
    text_field: str,
    id_field: str | None,
    scheduler: str | None,
    output_format: str | None = None,
    encoding: str = "utf-8",
    on_error: str = "fail",
    generate_ids: bool = False,
    master: str | None,
    partitions: int | None,
    workdir: str | None,
    quiet: bool,
    exclude: np.ndarray | None = None,
    more_pairs: Sequence[Sequence[object]] = (),
    before_publish: Callable[[Any, dict[str, Any]], None] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Run the job on ``engine``, write the outputs, return the summary's stats.

    For an incremental run (:func:`neardup.incremental.dedup_against` with an engine):
    ``exclude``, the positions of the records the job leaves out (:func:`run_dedup`);
    ``more_pairs``, rows appended to ``pairs_out``; ``before_publish(result, stats)``, called
    once the outputs are written and before they are published (the kept documents saved to
    the store: durable before the outputs appear), may add to ``stats``; ``progress(step,
    tasks done, tasks)`` instead of the lines printed unless ``quiet``."""
    from ..errors import ConfigError
    from ..io import (
        atomic_open,
        check_outputs,
        plan_inputs,
        plan_output,
        staged_outputs,
    )
    from . import make_engine, run_dedup

    t0 = time.perf_counter()
    # every refusal the local engine makes before reading, made before the engine starts
    files = plan_inputs(inputs, input_format)
    if any(f.path == "-" for f in files):
        raise ConfigError(f"--engine {engine} reads files, not stdin; pass a path")
    plan = plan_output(output, files, fmt=output_format)
    check_outputs(
        [("--output", output), ("--pairs-out", pairs_out), ("--clusters-out", clusters_out),
         ("--summary-json", summary_json)],
        inputs,
    )  # fmt: skip

    def print_tasks(stage: str, done: int, total: int) -> None:
        if not quiet:
            print(f"  {stage:<8} {done}/{total} tasks", file=sys.stderr, flush=True)

    temp = None
    if workdir is None:
        temp = tempfile.TemporaryDirectory(prefix="neardup-dist-")
        workdir = temp.name
    try:
        with make_engine(engine, scheduler=scheduler, master=master, workers=config.workers) as eng:
            t1 = time.perf_counter()
            res = run_dedup(
                inputs, workdir, engine=eng, config=config, partitions=partitions,
                fmt=input_format, text_field=text_field, id_field=id_field, encoding=encoding,
                on_error=on_error, generate_ids=generate_ids,
                progress=progress or print_tasks, exclude=exclude,
            )  # fmt: skip
            start_s = t1 - t0
        stats = dict(res.stats)
        stats["engine_start_s"] = round(start_s, 3)
        stats["inputs"] = list(inputs)
        formats: dict[str, int] = {}
        for f in files:
            formats[f.fmt] = formats.get(f.fmt, 0) + 1
        stats["formats"] = formats
        stats["output"] = output
        stats["output_format"] = plan.fmt
        stats["output_folder"] = plan.folder
        with staged_outputs():  # all published together, or none (as the local engine's)
            _write_kept(
                res, files, plan, text_field=text_field, id_field=id_field, encoding=encoding,
                on_error=on_error, generate_ids=generate_ids,
            )  # fmt: skip
            if pairs_out:
                _write_pairs(res, pairs_out, more_pairs)
            if clusters_out:
                _write_clusters(res, clusters_out)
            if before_publish is not None:
                before_publish(res, stats)
            stats["elapsed_s"] = round(time.perf_counter() - t0, 3)
            if summary_json:
                with atomic_open(summary_json, "w", encoding="utf-8") as fh:
                    json.dump(stats, fh, indent=2, ensure_ascii=False)
                    fh.write("\n")
        return stats
    finally:
        if temp is not None:
            temp.cleanup()
