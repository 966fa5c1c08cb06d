"""``neardup dedup``: a thin shell over :func:`neardup.batch.dedup_files` (argument parsing,
the progress bar, the printed summary and warnings; ``--engine dask|spark`` runs
:mod:`neardup.distributed` instead). Errors are raised as NeardupError subclasses;
``cli.main`` maps them."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from .._threads import default_workers

SAMPLE_OUT = "neardup-out"


def _sample_path() -> Path:
    return Path(__file__).resolve().parents[1] / "data" / "sample" / "sample.jsonl"


def _summary_text(s: dict[str, Any]) -> str:
    lines = [
        f"documents         {s['documents']:>12,}",
        f"exact duplicates  {s['exact_duplicates']:>12,}",
        f"near duplicates   {s['near_duplicates']:>12,}",
        f"clusters (2+ docs){s['clusters']:>12,}",
        f"kept              {s['kept']:>12,}",
        f"dropped           {s['dropped']:>12,}",
    ]
    if s.get("skipped_records"):
        lines.append(f"skipped records   {s['skipped_records']:>12,}")
    lines.append(f"elapsed           {s['elapsed_s']:>11.2f}s")
    if s.get("kernel_compile_s"):  # a cold kernel cache: compiled once, cached for next runs
        lines.append(f"  kernel compile  {s['kernel_compile_s']:>11.2f}s (first run only)")
    # the rate leaves a first run's kernel compile out (it is not the speed of later runs)
    work_s = (s.get("elapsed_s") or 0.0) - (s.get("kernel_compile_s") or 0.0)
    if work_s > 0:
        rate = s["documents"] / work_s
        lines.append(
            f"docs/s            {rate:>12,.0f}"
            if rate >= 10
            else f"docs/s            {rate:>12.3g}"
        )
    return "\n".join(lines)


def _valve_warnings(passes: dict[str, Any]) -> list[str]:
    """Say loudly when a candidate pass searched less than it was asked to: recall was traded
    for time, either by the work budget (planned distance) or by the per-document pair bound."""
    out = []
    for name, p in sorted(passes.items()):
        used, asked = p.get("distance_used"), p.get("distance")
        if used is None or asked is None or used >= asked:
            continue
        planned = p.get("distance_planned", asked)
        what = "no near pairs searched" if used < 0 else f"distance lowered to {used}"
        docs = p.get("docs", 0)
        if planned is not None and planned < asked:
            reason = p.get("reason")
            out.append(
                f"the {name} candidate pass ({docs:,} docs) was asked for distance "
                f"{asked} but the candidate work budget allows {planned}: {what}"
                + (f" ({reason})" if reason else "")
                + "; near duplicates farther apart may be missed (raise --candidate-work-ns, "
                "or --no-candidate-budget to search the full distance at O(docs^2) cost)"
            )
        else:
            out.append(
                f"the {name} candidate pass ({docs:,} docs) hit the per-document "
                f"candidate bound at distance {asked}: {what}; the fingerprints are "
                "concentrated, so near duplicates may be missed (raise "
                "DedupConfig.max_candidates_per_doc, or set it to None)"
            )
    return out


def dedup_command(
    inputs: Annotated[
        list[str] | None,
        typer.Argument(
            help="Input files, folders, globs, URLs, or - for stdin. A folder's files are read "
            "by their own extensions (one format per folder, else refused).",
            show_default=False,
            metavar="INPUT",
        ),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            help="Where the kept documents go: a file, in the format its extension says (.jsonl "
            ".json .csv .tsv .parquet .txt, + .gz .zst .bz2 .xz; else the input's); - for "
            "stdout; or a folder (a path ending in /, or an existing empty folder): one output "
            "per input file, mirroring the input tree.",
        ),
    ] = None,
    sample: Annotated[
        bool,
        typer.Option(
            "--sample", help=f"Dedup the bundled sample corpus; outputs go to ./{SAMPLE_OUT}/."
        ),
    ] = False,
    input_format: Annotated[
        str | None,
        typer.Option(
            help="Read every input file (a folder's too) as: jsonl, json, csv, tsv, parquet, "
            "text (a file is one document: the default for .txt/.md) or lines (a line is one "
            "document). Default: each file's extension; stdin: jsonl."
        ),
    ] = None,
    output_format: Annotated[
        str | None,
        typer.Option(
            help="Output format (default: the --output extension's, else the input's); an "
            "extension that says another is refused."
        ),
    ] = None,
    text_field: Annotated[str, typer.Option(help="Field/column holding the text.")] = "text",
    id_field: Annotated[
        str | None,
        typer.Option(
            help="Field/column holding a unique id (default: an 'id' field if present, else "
            "path:line); ids must be non-empty strings or integers."
        ),
    ] = None,
    generate_ids: Annotated[
        bool,
        typer.Option(
            "--generate-ids", help="Ignore the inputs' id field: number the records path:line."
        ),
    ] = False,
    threshold: Annotated[
        float | None,
        typer.Option(
            help="Texts at least this similar (token similarity, 0-1) are near duplicates: "
            "accepted by the verifier, and found with probability >= 0.99 (texts of 6+ tokens "
            "with scattered one-token edits; a warning says when a plan cannot) (default: 0.8)."
        ),
    ] = None,
    candidates: Annotated[
        Literal["lsh", "simhash"],
        typer.Option(
            help="lsh: MinHash bands (recall independent of corpus size) + a small SimHash "
            "pass; simhash: SimHash distances only, under the work budget."
        ),
    ] = "lsh",
    max_distance: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=64,
            help="SimHash candidate distance for all texts (default: 3 with --candidates lsh, "
            "length-dependent with simhash).",
        ),
    ] = None,
    candidate_work_ns: Annotated[
        int,
        typer.Option(
            min=1,
            help="--candidates simhash: candidate-search work budget per document (modelled ns; "
            "deterministic). Above ~24k docs per pass the default distances shrink to what "
            "fits.",
        ),
    ] = 32_000,
    candidate_budget: Annotated[
        bool,
        typer.Option(
            "--candidate-budget/--no-candidate-budget",
            help="Bound candidate-search work (--no-candidate-budget: full distances, O(docs^2)).",
        ),
    ] = True,
    lsh_band_pairs_per_doc: Annotated[
        int,
        typer.Option(
            min=0,
            help="Expert: the MinHash bucket valve's budget, pairs per document per band; a "
            "band over it thins its largest buckets and the summary estimates the recall given "
            "up (0: no valve, every bucket paired in full).",
        ),
    ] = 16,
    keep: Annotated[
        Literal["first", "longest", "none"],
        typer.Option(help="Which member of a cluster to keep (none: drop every member)."),
    ] = "first",
    verify: Annotated[bool, typer.Option(help="Verify candidates with token similarity.")] = True,
    pairs_out: Annotated[
        str | None, typer.Option(help="CSV of matched pairs: id_a,id_b,distance,score,stage,rule.")
    ] = None,
    clusters_out: Annotated[
        str | None,
        typer.Option(
            help="CSV, one row per document: id,cluster,cluster_size,representative,kept (a "
            "document without duplicates is its own cluster, of size 1)."
        ),
    ] = None,
    summary_json: Annotated[
        str | None, typer.Option(help="Write the summary as JSON here.")
    ] = None,
    report: Annotated[
        str | None,
        typer.Option(
            metavar="[PATH]",
            help="Write the review report (one HTML file) here and its data, review.json, beside "
            "it; without PATH: report.html in the run's folder (--summary-json's, else "
            "--output's). See neardup report.",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Worker threads (default: every CPU this process may use, "
            f"{default_workers()} here); the outputs do not depend on it.",
            show_default=False,
        ),
    ] = None,
    on_error: Annotated[
        Literal["fail", "skip"],
        typer.Option(
            help="On a malformed record (or an unusable id): fail, or skip it (and say which on "
            "stderr)."
        ),
    ] = "fail",
    encoding: Annotated[
        str,
        typer.Option(
            help="Input text encoding; another than utf-8 refuses lines that are valid UTF-8 "
            "(a file of mixed encodings)."
        ),
    ] = "utf-8",
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress bar and no summary.")
    ] = False,
    engine: Annotated[
        Literal["local", "dask", "spark"],
        typer.Option(
            "--engine",
            help="local (this process), dask or spark (pip install 'neardup[dask]' or "
            "'neardup[spark]'; the same outputs).",
        ),
    ] = "local",
    scheduler: Annotated[
        str | None,
        typer.Option("--scheduler", help="Dask scheduler tcp://HOST:PORT (--engine dask)."),
    ] = None,
    master: Annotated[
        str | None, typer.Option("--master", help="Spark master URL (--engine spark).")
    ] = None,
    partitions: Annotated[
        int | None, typer.Option("--partitions", min=1, help="Read partitions (dask, spark).")
    ] = None,
    workdir: Annotated[
        str | None,
        typer.Option("--workdir", help="Work directory (dask, spark); a rerun resumes it."),
    ] = None,
    save: Annotated[
        str | None,
        typer.Option(
            "--save",
            metavar="STORE",
            help="Also drop what duplicates the documents saved in STORE by earlier runs, then "
            "save this run's kept documents there (created when missing): incremental dedup.",
        ),
    ] = None,
    against: Annotated[
        str | None,
        typer.Option(
            "--against",
            metavar="STORE",
            help="Also drop what duplicates the documents saved in STORE (read only).",
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="With --save: finish a run that stopped while saving into STORE (killed, out "
            "of memory): what it stored is removed and the run made again; the same inputs "
            "and reading options.",
        ),
    ] = False,
) -> None:
    """Deduplicate a corpus: exact + near duplicates (verified), clusters, pairs, summary."""
    from ..batch.files import dedup_files
    from ..errors import ConfigError
    from ..review.report import review_writer
    from ..rules.config import DedupConfig
    from .progress import StageProgress

    if sample:
        if inputs:
            raise ConfigError("--sample dedups the bundled corpus; do not pass INPUT files with it")
        inputs = [str(_sample_path())]
        out_dir = Path(SAMPLE_OUT)
        output = output or str(out_dir / "sample.dedup.jsonl")
        pairs_out = pairs_out or str(out_dir / "pairs.csv")
        clusters_out = clusters_out or str(out_dir / "clusters.csv")
        summary_json = summary_json or str(out_dir / "summary.json")
        if report == "":
            report = str(out_dir / "report.html")
        # the one output folder neardup makes itself (others must exist: a mistyped folder is
        # refused, not silently created)
        out_dir.mkdir(exist_ok=True)
    if report:  # before the inputs: a --report written before them takes the first as its PATH
        _check_report_path(report)
    if not inputs:
        raise ConfigError("no input given; pass files, a directory or - (stdin), or use --sample")
    if output is None:
        raise ConfigError("--output is required (a path, or - for stdout)")
    _check_options(engine, scheduler, master, partitions, workdir, verify, threshold)
    if generate_ids and id_field is not None:
        raise ConfigError(
            "--generate-ids ignores the records' ids, --id-field names where they are: pass one"
        )
    review_out = None
    report_paths: list[tuple[str, str]] = []
    if report is not None:  # "" (--report without PATH): report.html in the run's folder
        report, review_out = _report_paths(report, summary_json, output, engine)
        report_paths = [("--report", report), ("--report", review_out)]
    config = DedupConfig(
        threshold=threshold,
        candidates=candidates,
        max_distance=max_distance,
        candidate_work_per_doc_ns=candidate_work_ns if candidate_budget else None,
        keep=keep,
        verify=verify,
        workers=default_workers() if workers is None else workers,
        lsh_band_pairs_per_doc=lsh_band_pairs_per_doc or None,
    )
    summary_stream = (
        sys.stderr
        if any(
            p is not None and _is_stdout(p) for p in (output, pairs_out, clusters_out, summary_json)
        )
        else sys.stdout
    )
    if resume and save is None:
        raise ConfigError(
            "--resume finishes a --save run that stopped while saving; pass --save STORE"
        )
    if save is not None or against is not None:  # incremental: against a store of kept docs
        _check_incremental(save, against, sample)
        _run_incremental(
            inputs, str(save or against), save is not None, output=output,
            summary_json=summary_json, pairs_out=pairs_out, clusters_out=clusters_out,
            report=report, review=review_out,
            input_format=input_format,
            output_format=output_format,
            text_field=text_field, id_field=id_field, encoding=encoding, on_error=on_error,
            generate_ids=generate_ids, config=config, quiet=quiet, stream=summary_stream,
            resume=resume,
            **(
                {}
                if engine == "local"
                else dict(engine=engine, scheduler=scheduler, master=master,
                          partitions=partitions, workdir=workdir)
            ),
        )  # fmt: skip
        return
    if engine != "local":  # the distributed job (neardup.distributed), same summary
        from ..errors import require

        # the steps store Arrow files: without pyarrow the job cannot start (an install hint,
        # exit code 9, not a traceback from an import deep inside neardup.distributed)
        require("pyarrow", engine, f"--engine {engine}")
        from ..distributed.cli import run_distributed_cli

        stats = run_distributed_cli(
            engine=engine, inputs=list(inputs), config=config, output=output,
            pairs_out=pairs_out, clusters_out=clusters_out, summary_json=summary_json,
            input_format=input_format, output_format=output_format, text_field=text_field,
            id_field=id_field, generate_ids=generate_ids, encoding=encoding, on_error=on_error,
            scheduler=scheduler, master=master, partitions=partitions, workdir=workdir,
            # task lines are progress: none on a redirected stderr, as the local engine's bar
            quiet=quiet or not sys.stderr.isatty(),
        )  # fmt: skip
        if not quiet:
            print(_summary_text(stats), file=summary_stream)
        for message in _run_warnings(stats, stats.get("skipped_list", [])):
            warn(message)
        return
    progress = StageProgress.for_stderr(quiet)
    from .. import _jit  # (imports numba, which the run needs anyway)

    # a cold kernel cache costs a one-time compile: say so when it starts (whatever -q says),
    # and compile the last stages' kernels in a helper process meanwhile (neardup.batch.warm)
    _jit.announce_compiles(_first_compile)
    with progress:
        result = dedup_files(
            inputs,
            output=output,
            pairs_out=pairs_out,
            clusters_out=clusters_out,
            summary_json=summary_json,
            input_format=input_format,
            output_format=output_format,
            text_field=text_field,
            id_field=id_field,
            encoding=encoding,
            on_error=on_error,
            generate_ids=generate_ids,
            config=config,
            progress=_bar_callback(progress),
            extra_outputs=None if report is None else review_writer(report, str(review_out)),
            extra_output_paths=report_paths,
        )
    stats = result.stats
    if not quiet:
        print(_summary_text(stats), file=summary_stream)
        if sample:
            print(
                _sample_outputs(output, pairs_out, clusters_out, summary_json), file=summary_stream
            )
        if report is not None:
            print(f"review report: {report} (data: {review_out})", file=summary_stream)
    # after the summary, so they are the last thing on a terminal; never hidden by -q
    for message in _run_warnings(stats, stats.get("skipped_list", [])):
        warn(message)


#: the names a review report may have (it is one HTML page)
_REPORT_SUFFIXES = (".html", ".htm")


def _check_report_path(report: str) -> None:
    """Refuse a ``--report PATH`` that is not an HTML file's name: ``--report`` takes an
    optional value, so written before the inputs it takes the first input as its PATH, and the
    report would overwrite that file with HTML (a user's data file, seen)."""
    from ..errors import ConfigError

    if Path(report).suffix.lower() not in _REPORT_SUFFIXES:
        what = "an existing file" if Path(report).is_file() else "a path"
        hint = (
            f"; if {report} is an input, put --report after the inputs or write --report=PATH.html"
            if Path(report).exists()
            else ""
        )
        raise ConfigError(
            f"--report {report}: {what} not named .html; the review report is one HTML page, "
            f"so name it PATH.html{hint}"
        )


def _report_paths(
    report: str, summary_json: str | None, output: str, engine: str
) -> tuple[str, str]:
    """``--report``'s HTML path (``""``: ``report.html`` in the run's folder) and the review
    data's (``review.json`` beside it)."""
    from ..errors import ConfigError
    from ..review.report import REVIEW_NAME

    if engine != "local":
        raise ConfigError("--report is made by the local engine; drop --engine or --report")
    if not report:
        folder = next(
            (Path(p).parent for p in (summary_json, output) if p and not _is_stdout(p)), None
        )
        if folder is None:
            raise ConfigError(
                "--report without PATH writes report.html beside --summary-json or --output; "
                "both go to stdout here, so pass --report PATH"
            )
        report = str(folder / "report.html")
    review = Path(report).parent / REVIEW_NAME
    if Path(report).resolve() == review.resolve():
        raise ConfigError(f"--report: {report} is where the review data goes; name it .html")
    return report, str(review)


def _check_incremental(save: str | None, against: str | None, sample: bool) -> None:
    """Refuse what an incremental run cannot do, before anything is read."""
    from ..errors import ConfigError

    if save is not None and against is not None and save != against:
        raise ConfigError(
            "--save STORE compares with STORE and adds to it; --against STORE only compares: "
            "pass one of them"
        )
    flag = "--save" if save is not None else "--against"
    if sample:
        raise ConfigError(f"--sample writes its own outputs; run {flag} on your files")


def _run_incremental(inputs: list[str], store: str, save: bool, *, quiet: bool, stream: Any, **kw: Any) -> None:  # fmt: skip
    """``--save`` / ``--against``: :func:`neardup.incremental.dedup_against`, with progress and
    the summary."""
    from .. import _jit
    from ..incremental import dedup_against
    from .progress import StageProgress

    progress = StageProgress.for_stderr(quiet)
    _jit.announce_compiles(_first_compile)
    with progress:
        stats = dedup_against(inputs, store, save=save, progress=_bar_callback(progress), **kw)
    if not quiet:
        print(_summary_text(stats), file=stream)
        print(
            f"store             {stats['store']} ({stats['dropped_for_store']:,} dropped for "
            f"its documents; {stats['store_documents_before']:,} -> "
            f"{stats['store_documents_after']:,} stored)",
            file=stream,
        )
        if "resumed" in stats:
            print(
                f"resumed           a run that stopped while saving: the "
                f"{stats['resumed']['removed']:,} documents it had stored removed, and the run "
                "made again",
                file=stream,
            )
        if kw.get("report") is not None:
            print(f"review report: {kw['report']} (data: {kw['review']})", file=stream)
    for message in _run_warnings(stats, []):
        warn(message)


#: the options that only the distributed engines take, and which engine
_ENGINE_OPTIONS = {
    "--scheduler": ("dask",),
    "--master": ("spark",),
    "--partitions": ("dask", "spark"),
    "--workdir": ("dask", "spark"),
}


def _check_options(
    engine: str,
    scheduler: str | None,
    master: str | None,
    partitions: int | None,
    workdir: str | None,
    verify: bool,
    threshold: float | None,
) -> None:
    """Refuse options that would be ignored: an engine's option given to another engine, and
    an explicit --threshold (what verification accepts) with --no-verify."""
    from ..errors import ConfigError

    given = {"--scheduler": scheduler, "--master": master, "--partitions": partitions}
    given["--workdir"] = workdir
    for option, value in given.items():
        engines = _ENGINE_OPTIONS[option]
        if value is not None and engine not in engines:
            raise ConfigError(
                f"{option} is an option of --engine {' and '.join(engines)}, not of --engine "
                f"{engine}: drop it, or pass --engine {engines[0]}"
            )
    if threshold is not None and not verify:
        raise ConfigError(
            "--threshold sets how similar verified texts must be, and --no-verify turns "
            "verification off: pass one of them"
        )


def _first_compile(notice: str) -> None:
    """A run's first kernel compile (a cold cache): the notice, and the helper process that
    compiles the last stages' kernels meanwhile."""
    from ..batch.warm import start_warming

    print(notice, file=sys.stderr, flush=True)
    start_warming()


def _bar_callback(bar: Any) -> Callable[[str, int, int], None]:
    """:func:`~neardup.batch.files.dedup_files`' ``progress(stage, done, total)`` on the
    :class:`~neardup.cli.progress.StageProgress` rows: ``read`` counts texts (total unknown
    until read; then the corpus size scales the other stages' start/end reports), ``write``
    starts and ends, the dedup stages go to the bar as they are."""

    def report(stage: str, done: int, total: int) -> None:
        if stage == "read":
            if total == 0:  # still reading
                bar.advance("read", done)
            else:
                bar.end("read", done)
                bar.documents = done
        elif stage == "write":
            if stage in begun:
                bar.end("write", done)
            else:
                bar.begin("write", total)
                begun.add(stage)
        else:
            bar(stage, done, total)

    begun: set[str] = set()
    return report


def _is_stdout(path: str) -> bool:
    """Whether ``path`` is where stdout goes (``-``, ``/dev/stdout``, ``/dev/fd/1``, a link to
    one, or the file stdout was redirected to): the summary must not be mixed into the data."""
    if path == "-":
        return True
    try:
        out, st = os.fstat(sys.stdout.fileno()), os.stat(path)
    except (OSError, ValueError, AttributeError):  # (no real stdout: e.g. captured in tests)
        return False
    return (out.st_dev, out.st_ino) == (st.st_dev, st.st_ino)


def warn(message: str) -> None:
    """Print a warning on stderr (whatever -q says: -q hides progress and the summary only)."""
    print(f"neardup: warning: {message}", file=sys.stderr, flush=True)


def _run_warnings(stats: dict[str, Any], skipped: list[dict[str, Any]]) -> list[str]:
    """Everything the user must hear about a finished run: narrowed candidate passes, skipped
    records."""
    out = [*stats.get("warnings", []), *_valve_warnings(stats.get("candidate_passes") or {})]
    lsh = stats.get("lsh") or {}
    # a valve that is estimated to have given up no candidate is the plan working (the summary
    # JSON's "lsh" says what it did): no warning about the run's own defaults
    if (lsh.get("valve_bands") or lsh.get("pairs_skipped")) and lsh.get(
        "valve_lost_pairs_est"
    ) != 0:
        cap = lsh.get("bucket_cap_used") or lsh.get("bucket_cap")
        lost = lsh.get("valve_lost_pairs_est")
        loss = lsh.get("valve_recall_loss_est") or 0.0
        out.append(
            f"the MinHash bucket valve acted in {lsh.get('valve_bands', 0)} of "
            f"{lsh.get('bands', '?')} bands (more pairs than the band budget): "
            f"{lsh['capped_buckets']:,} buckets were thinned to {cap} documents and "
            f"{lsh['pairs_skipped']:,} of their pairs not compared (each member was compared "
            "with the bucket's first and preceding documents instead); "
            + (
                f"estimated candidates given up: {lost:,} ({100 * loss:.3g} % of the candidates)"
                if lost is not None
                else "near duplicates among them may be missed"
            )
            + "; --lsh-band-pairs-per-doc raises the budget"
        )
    n = stats.get("skipped_records") or 0
    documents = stats.get("documents")
    if documents == 0:  # the outputs are written (empty): an empty shard is not an error
        out.append(
            f"every record was skipped ({n:,}): nothing was deduplicated and the outputs hold "
            "no documents"
            if n
            else "the input holds no documents: nothing was deduplicated and the outputs are empty"
        )
    formats = stats.get("formats") or {}
    if documents == 1 and formats == {"text": 1}:
        out.append(
            "the input was read as one document (a .txt/.md file is one document); pass "
            "--input-format lines to read one document per line"
        )
    if n:
        msg = f"skipped {n:,} record{'s' if n != 1 else ''}"
        if skipped:
            first = skipped[0]
            where = [str(first[k]) for k in ("path", "line") if first[k] is not None]
            msg += f" (first: {':'.join([*where, ' ' + first['reason']]).lstrip()})"
        if "skipped_list" in stats:
            from ..batch.files import SKIPPED_LISTED

            msg += f"; --summary-json lists the first {min(n, SKIPPED_LISTED):,}"
        out.append(msg)
    return out


def _sample_outputs(*paths: str | None) -> str:
    """The ``--sample`` run's closing line: where its outputs went (kept docs, pairs, clusters,
    summary), shortened when they all went to ``./neardup-out/``."""
    if all(p is not None and Path(p).parent == Path(SAMPLE_OUT) for p in paths):
        return f"outputs in ./{SAMPLE_OUT}/ (kept docs, pairs.csv, clusters.csv, summary.json)"
    names = ("kept docs", "pairs", "clusters", "summary")
    return "outputs: " + ", ".join(
        f"{name} {p}" for name, p in zip(names, paths, strict=True) if p is not None
    )


def register(app: typer.Typer) -> None:
    """Add ``neardup dedup`` to the app (``neardup eval``: :mod:`neardup.cli.eval_cmd`)."""
    app.command("dedup")(dedup_command)
