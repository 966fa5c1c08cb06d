"""Dedup from files to files: :func:`dedup_files` reads a corpus, runs :func:`~neardup.batch.run.dedup`
and writes the kept documents, the pairs and clusters CSVs and a JSON summary.

It is what ``neardup dedup`` runs (the CLI adds argument parsing, a progress bar, the printed
summary and its warnings): exact hashes and fingerprints start on the texts read so far while
reading goes on (:class:`~neardup.batch.exact.ExactFingerprintPass`; the kernels release the
GIL, and the results do not depend on it), and every output is published together at the end,
or none (:func:`~neardup.io.atomic.staged_outputs`: a failing pairs CSV leaves no kept file
behind).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from ..rules.config import STAGE_NAMES, DedupConfig, Progress, with_overrides
from .result import DedupResult

__all__ = [
    "SKIPPED_LISTED",
    "dedup_files",
    "skipped_records",
    "write_clusters",
    "write_pairs",
]

#: most skipped records listed in the summary (``skipped_list``; the count is always exact)
SKIPPED_LISTED = 1000


def dedup_files(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    output: str | os.PathLike[str],
    pairs_out: str | os.PathLike[str] | None = None,
    clusters_out: str | os.PathLike[str] | None = None,
    summary_json: str | os.PathLike[str] | None = None,
    input_format: str | None = None,
    output_format: str | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    encoding: str = "utf-8",
    on_error: Literal["fail", "skip"] = "fail",
    generate_ids: bool = False,
    config: DedupConfig | None = None,
    progress: Progress | None = None,
    extra_outputs: Callable[[DedupResult, Sequence[str], dict[str, Any]], None] | None = None,
    extra_output_paths: Sequence[tuple[str, str]] = (),
    **overrides: Any,
) -> DedupResult:
    """Deduplicate the documents of ``inputs`` and write the kept ones to ``output``.

    Parameters
    ----------
    inputs : path or sequence of paths
        Files, folders, globs, fsspec URLs or ``-`` (stdin), read in order by
        :func:`neardup.io.read_corpus` (each file's format told from its name unless
        ``input_format``; a folder of one kind; compressed inputs decompressed:
        :func:`neardup.io.plan_inputs`).
    output : path
        Where the kept documents go (:func:`neardup.io.plan_output`): one file, in
        ``output_format``, else the format its name says (``kept.parquet``), else the input's;
        ``-`` is stdout; a ``.gz`` / ``.zst`` / ``.bz2`` / ``.xz`` name is compressed; a path
        ending in ``/`` (or an existing, empty folder) gets one output per input file,
        mirroring the inputs' relative paths.
    pairs_out : path, optional
        CSV of the matched pairs: ``id_a,id_b,distance,score,stage,rule``.
    clusters_out : path, optional
        CSV, one row per document: ``id,cluster,cluster_size,representative,kept``.
    summary_json : path, optional
        The run's summary (the returned result's ``stats``) as JSON.
    input_format, output_format, text_field, id_field, encoding, on_error, generate_ids
        As for :func:`neardup.io.read_corpus` (``fmt``, ...) and :func:`neardup.io.write_kept`.
    config : DedupConfig, optional
        As for :func:`neardup.dedup`; keyword ``overrides`` (e.g. ``keep="longest"``) replace
        its fields.
    progress : callable, optional
        ``progress(stage, done, total)``: the stages of :func:`neardup.dedup`, and ``"read"``
        (``(texts read so far, 0)`` while reading, the total not known yet; ``(n, n)`` when
        read) and ``"write"`` (``(0, kept)`` as the outputs start, ``(kept, kept)`` when they
        are written).
    extra_outputs : callable, optional
        ``extra_outputs(result, texts, summary)``, called once the summary is complete, with
        the corpus's texts still readable and inside the run's staged outputs: what it writes
        with :func:`neardup.io.atomic_open` is published with the other outputs, or not at all
        (``neardup dedup --report`` writes the review report here).
    extra_output_paths : sequence of (option, path)
        The paths ``extra_outputs`` writes, checked with the others before a record is read.

    Returns
    -------
    DedupResult
        Over every document read; its ``stats`` are the run's summary (what ``summary_json``
        holds): those of :func:`neardup.dedup`, plus ``skipped_records`` (and, when some were,
        ``skipped_list``: the first ``SKIPPED_LISTED`` as ``{path, line, reason}``),
        ``kernel_compile_s``, ``inputs``, ``formats`` (input files per format read),
        ``output``, ``output_format`` and ``output_folder``, with ``elapsed_s`` over the whole
        call (reading and writing included) and ``docs_per_s`` over that time less
        ``kernel_compile_s`` (a first run's one-time compile is not the run's speed).

    Raises
    ------
    ConfigError
        Invalid parameters, inputs whose format cannot be told, or an output that would
        overwrite an input or cannot be written (:func:`neardup.io.check_outputs`): refused
        before anything is read.
    NeardupError
        As :func:`neardup.io.read_corpus` and :func:`neardup.dedup` raise them; no output is
        left behind.
    """
    from .. import _jit
    from ..io import (
        atomic_open,
        check_outputs,
        plan_inputs,
        plan_output,
        read_corpus,
        write_kept,
    )
    from ..io.atomic import staged_outputs
    from .exact import ExactFingerprintPass
    from .run import dedup

    t0 = time.perf_counter()
    compiled_before = _jit.compile_seconds()
    cfg = with_overrides(config, overrides, caller="dedup_files()")
    paths = [os.fspath(inputs)] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    sources = [os.fspath(p) for p in paths]
    out = os.fspath(output)
    extra = {"pairs_out": pairs_out, "clusters_out": clusters_out, "summary_json": summary_json}
    named = {k: None if v is None else os.fspath(v) for k, v in extra.items()}
    # every decision about the inputs and outputs, and every refusal, before a record is read
    files = plan_inputs(sources, input_format)
    plan = plan_output(out, files, fmt=output_format)
    check_outputs(
        [
            ("--output", out),
            *((f"--{k.replace('_', '-')}", v) for k, v in named.items()),
            *extra_output_paths,
        ],
        sources,
        folder=plan.path if plan.folder else None,
    )
    report = progress or (lambda stage, done, total: None)
    early = ExactFingerprintPass(cfg.make_fingerprinter(), cfg.workers) if cfg.exact else None

    def on_texts(texts: Any) -> None:
        if early is not None:
            early.feed(texts)
        report("read", len(texts), 0)

    try:
        with staged_outputs():
            report("read", 0, 0)
            with read_corpus(
                files,
                text_field=text_field,
                id_field=id_field,
                encoding=encoding,
                on_error=on_error,
                on_texts=on_texts,
                generate_ids=generate_ids,
            ) as corpus:
                n = len(corpus.texts)
                report("read", n, n)
                result = dedup(
                    corpus.texts, ids=corpus.ids, config=cfg, progress=progress, exact_pass=early
                )
                kept = int(result.keep.sum())
                report("write", 0, kept)
                write_kept(corpus, result.keep, out, plan=plan, encoding="utf-8")
                skipped = corpus.skipped
                skipped_list = skipped_records(corpus)
                if named["pairs_out"]:
                    write_pairs(named["pairs_out"], result)
                if named["clusters_out"]:
                    write_clusters(named["clusters_out"], result)
                stats = dict(result.stats)
                stats["skipped_records"] = skipped
                if skipped:
                    stats["skipped_list"] = skipped_list
                stats["elapsed_s"] = round(time.perf_counter() - t0, 3)
                # this call's share of elapsed_s (the process may have compiled before it)
                stats["kernel_compile_s"] = round(_jit.compile_seconds() - compiled_before, 3)
                # the rate of the work: a first run's one-time kernel compile left out
                work_s = stats["elapsed_s"] - stats["kernel_compile_s"]
                stats["docs_per_s"] = round(stats["documents"] / work_s, 1) if work_s > 0 else None
                stats["inputs"] = sources
                formats: dict[str, int] = {}
                for f in files:
                    formats[f.fmt] = formats.get(f.fmt, 0) + 1
                stats["formats"] = formats
                stats["output"] = out
                stats["output_format"] = plan.fmt
                stats["output_folder"] = plan.folder
                if named["summary_json"]:
                    with atomic_open(named["summary_json"], "w", encoding="utf-8") as fh:
                        json.dump(stats, fh, indent=2, ensure_ascii=False)
                        fh.write("\n")
                if extra_outputs is not None:
                    extra_outputs(result, corpus.texts, stats)
            report("write", kept, kept)
    finally:
        if early is not None:
            early.close()
    result.stats = stats
    return result


def write_pairs(path: str, result: DedupResult, more: Iterable[Sequence[object]] = ()) -> None:
    """``result``'s matched pairs as CSV at ``path``: ``id_a,id_b,distance,score,stage,rule``,
    one row per pair (a ``csv.writer`` over ``result.pair_rows()`` with ids, and each pair's
    rule name); then the rows ``more`` (the same columns), in the same file."""
    import io

    from ..io.csvout import csv_writer, write_pairs_csv
    from ..io.remote import open_output
    from ..verify.rule import RULE_NAMES

    p = result.pairs
    with open_output(path, buffering=1 << 20) as fh:
        write_pairs_csv(
            fh, result.ids, p.a, p.b, p.distance, p.score, p.stage, STAGE_NAMES,
            rule=p.rule, rule_names=RULE_NAMES,
        )  # fmt: skip
        text = io.TextIOWrapper(fh, encoding="utf-8", newline="", write_through=True)
        csv_writer(text).writerows(more)
        text.detach()


def write_clusters(path: str, result: DedupResult) -> None:
    """``result``'s clusters as CSV at ``path``: ``id,cluster,cluster_size,representative,kept``,
    one row per document."""
    from ..io.csvout import write_clusters_csv
    from ..io.remote import open_output

    with open_output(path, buffering=1 << 20) as fh:
        write_clusters_csv(fh, result.ids, result.cluster, result.root, result.keep)


def skipped_records(corpus: Any) -> list[dict[str, Any]]:
    """The first ``SKIPPED_LISTED`` records a read skipped (``on_error="skip"``), as
    ``{path, line, reason}`` (path and line None for readers that keep only the messages)."""
    records = getattr(corpus, "skipped_records", None)
    if records is None:  # readers that keep only the messages
        messages = getattr(corpus, "errors", [])[:SKIPPED_LISTED]
        return [{"path": None, "line": None, "reason": m} for m in messages]
    return [
        {"path": str(r.path), "line": r.line, "reason": r.reason} for r in records[:SKIPPED_LISTED]
    ]
