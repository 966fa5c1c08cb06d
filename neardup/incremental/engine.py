"""Incremental dedup on a distributed engine (``neardup dedup NEW --save STORE --engine
dask|spark``): the steps of :mod:`neardup.incremental.run`, each where its data lives.

The store is one machine's directory (a locked online store), so this process, the driver,
checks the new documents against it and saves the kept ones to it; the engine deduplicates the
new documents among themselves:

1. the driver reads the inputs (as the job reads them) and checks each document against the
   store (:func:`~neardup.incremental.stored.check_store`, read only);
2. the distributed job (:func:`neardup.distributed.run_dedup`) runs over the inputs with the
   documents the store dropped left out (``exclude``: as if they were not there, so a document
   dropped for the store never drops another, as in the concatenated keep-first run);
3. with ``save``, the job's kept documents are loaded into the store
   (:func:`~neardup.incremental.stored.load_kept`'s ``Deduplicator.load``) before the outputs are
   published.

The kept ids equal the local engine's (tested), so they equal one keep-first run over the
stored documents then the new ones. ``--pairs-out`` gets the job's pairs, then one row per
stored match (stage ``stored``), as the local engine writes it; ``--clusters-out`` and
``--report`` stay with the local engine.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import require

__all__ = ["against_on_engine"]

Progress = Callable[[str, int, int], None]


def against_on_engine(
    sources: list[str],
    root: Path,
    *,
    save: bool,
    engine: str,
    config: Any,
    output: str,
    output_format: str | None,
    summary_json: Any,
    pairs_out: Any,
    input_format: str | None,
    text_field: str,
    id_field: str | None,
    encoding: str,
    on_error: str,
    generate_ids: bool,
    scheduler: str | None,
    master: str | None,
    partitions: int | None,
    workdir: str | None,
    progress: Progress | None,
    resume: bool = False,
) -> dict[str, Any]:
    """:func:`~neardup.incremental.run.dedup_against` with ``engine`` (the module's steps);
    returns the same summary keys."""
    import os

    from ..distributed.cli import run_distributed_cli
    from ..distributed.job import POS_SHIFT
    from ..io import check_outputs, plan_inputs, plan_output, read_corpus
    from .journal import open_saving
    from .stored import (
        check_store,
        load_kept,
        refuse_stored_ids,
        refuse_unstorable_texts,
        store_pair_rows,
        store_summary,
    )

    require("pyarrow", engine, f"--engine {engine}")
    summary = None if summary_json is None else os.fspath(summary_json)
    pairs_path = None if pairs_out is None else os.fspath(pairs_out)
    # every refusal before the store is opened or a record read (the job makes them again)
    files = plan_inputs(sources, input_format)
    plan_output(output, files, fmt=output_format)
    check_outputs(
        [("--output", output), ("--pairs-out", pairs_path), ("--summary-json", summary)],
        sources,
    )
    step = progress or (lambda stage, done, total: None)
    read: dict[str, Any] = dict(
        text_field=text_field, id_field=id_field, encoding=encoding, on_error=on_error,
        generate_ids=generate_ids,
    )  # fmt: skip
    with open_saving(
        root,
        files,
        read,
        input_format,
        verifier=config.make_verifier() if config.verify else None,
        fingerprinter=config.make_fingerprinter(),
        save=save,
        resume=resume,
    ) as (d, journal):
        # 1. the store's check, here (the job's positions: file << POS_SHIFT | row)
        t0 = time.perf_counter()
        with read_corpus(files, **read) as corpus:
            if save:
                refuse_unstorable_texts(corpus)
            ids = [str(x) for x in corpus.ids]
            n = len(ids)
            step("read", n, n)
            journal.take_back(d, ids)  # a stopped save's rows, before any decision
            before = len(d)
            refuse_stored_ids(d, ids)
            for_store, stored = check_store(
                d, ids, corpus.texts, pairs=pairs_path is not None, progress=progress
            )
            firsts = np.array([s.first for s in corpus.sources], np.int64)
        rows = np.flatnonzero(for_store)
        file_of = np.searchsorted(firsts, rows, side="right") - 1
        exclude = (file_of << np.int64(POS_SHIFT)) + (rows - firsts[file_of])
        del ids
        check_s = time.perf_counter() - t0

        def save_kept(res: Any, stats: dict[str, Any]) -> None:
            # 3. the kept documents join the store, durable before the outputs are published
            kept = int(res.stats["kept"])
            if save:
                table = res.read("kept")
                ids, texts = table.column("id").to_pylist(), table.column("text").to_pylist()
                del table
                with journal.saving(d):
                    load_kept(d, ids, texts, np.ones(len(ids), np.bool_), progress=progress)
            stats.update(
                **store_summary(d, root, n, for_store, kept, before=before, saved=save),
                store_check_s=round(check_s, 3),
            )
            journal.add_to(stats)

        stats = run_distributed_cli(
            engine=engine, inputs=sources, config=config, output=output,
            pairs_out=pairs_path, clusters_out=None, summary_json=summary,
            input_format=input_format, output_format=output_format, scheduler=scheduler,
            master=master, partitions=partitions, workdir=workdir, quiet=True, progress=progress,
            exclude=exclude,
            more_pairs=store_pair_rows(stored),
            before_publish=save_kept, text_field=text_field, id_field=id_field,
            encoding=encoding, on_error=on_error, generate_ids=generate_ids,
        )  # fmt: skip
        journal.finished()  # stored and published: nothing to finish
    return stats
