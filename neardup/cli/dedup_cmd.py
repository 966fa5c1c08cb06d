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

SAMPLE_OUT = "neardup-out"


def _sample_path() -> Path:
    return Path(__file__).resolve().parents[1] / "data" / "sample" / "sample.jsonl"


def _summary_text(s: dict[str, Any]) -> str:
    lines = [
        f"documents         {s['documents']:>12,}",
        f"exact duplicates  {s['exact_duplicates']:>12,}",
        f"near duplicates   {s['near_duplicates']:>12,}",
        f"clusters          {s['clusters']:>12,}",
        f"kept              {s['kept']:>12,}",
        f"dropped           {s['dropped']:>12,}",
    ]
    if s.get("skipped_records"):
        lines.append(f"skipped records   {s['skipped_records']:>12,}")
    lines.append(f"elapsed           {s['elapsed_s']:>11.2f}s")
    if s.get("kernel_compile_s"):  # a cold kernel cache: compiled once, cached for next runs
        lines.append(f"  kernel compile  {s['kernel_compile_s']:>11.2f}s (first run only)")
    if s.get("elapsed_s"):  # (also below 1 docs/s: a tiny input's first run, numba compiling)
        rate = s["documents"] / s["elapsed_s"]
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
            help="Input files, directories of text files, or - for stdin.",
            show_default=False,
            metavar="INPUT",
        ),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            help="Where to write the kept documents (input's format; - for stdout).",
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
            help="jsonl, json, csv, tsv, parquet, text (file = doc) or lines (line = doc)."
        ),
    ] = None,
    output_format: Annotated[
        str | None, typer.Option(help="Output format (default: the input's).")
    ] = None,
    text_field: Annotated[str, typer.Option(help="Field/column holding the text.")] = "text",
    id_field: Annotated[
        str | None,
        typer.Option(
            help="Field/column holding a unique id (default: an 'id' field if present, else path:line)."
        ),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            help="Texts at least this similar (token similarity, 0-1) are near duplicates: "
            "accepted by the verifier, and found with probability >= 0.99 (texts of 6+ tokens "
            "with scattered one-token edits; a warning says when a plan cannot) (default: 0.8). "
            "See docs/dedup.md."
        ),
    ] = None,
    candidates: Annotated[
        Literal["lsh", "simhash"],
        typer.Option(
            help="lsh: MinHash bands (recall independent of corpus size) + a small SimHash "
            "pass; simhash: SimHash distances under the work budget (the old default)."
        ),
    ] = "lsh",
    max_distance: Annotated[
        int | None,
        typer.Option(
            help="SimHash candidate distance for all texts (default: 3 with --candidates lsh, "
            "length-dependent with simhash)."
        ),
    ] = None,
    candidate_work_ns: Annotated[
        int,
        typer.Option(
            help="--candidates simhash: candidate-search work budget per document (modelled ns; "
            "deterministic). Above ~24k docs per pass the default distances shrink to what "
            "fits; see docs/dedup.md.",
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
            "up (0: no valve, every bucket paired in full). See docs/dedup.md.",
        ),
    ] = 16,
    keep: Annotated[
        Literal["first", "longest", "none"],
        typer.Option(help="Which member of a cluster to keep (none: drop every member)."),
    ] = "first",
    verify: Annotated[bool, typer.Option(help="Verify candidates with token similarity.")] = True,
    pairs_out: Annotated[
        str | None, typer.Option(help="CSV of matched pairs: id_a,id_b,distance,score,stage.")
    ] = None,
    clusters_out: Annotated[
        str | None, typer.Option(help="CSV: id,cluster,cluster_size,representative,kept.")
    ] = None,
    summary_json: Annotated[
        str | None, typer.Option(help="Write the summary as JSON here.")
    ] = None,
    workers: Annotated[int, typer.Option(help="Worker count (output does not depend on it).")] = 1,
    on_error: Annotated[
        Literal["fail", "skip"],
        typer.Option(help="On a malformed record: fail, or skip it (and say which on stderr)."),
    ] = "fail",
    encoding: Annotated[str, typer.Option(help="Input text encoding.")] = "utf-8",
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress bar and no summary.")
    ] = False,
    engine: Annotated[
        str,
        typer.Option("--engine", help="local (this process), dask or spark (docs/distributed.md)."),
    ] = "local",
    scheduler: Annotated[
        str | None, typer.Option("--scheduler", help="Dask scheduler tcp://HOST:PORT.")
    ] = None,
    master: Annotated[str | None, typer.Option("--master", help="Spark master URL.")] = None,
    partitions: Annotated[
        int | None, typer.Option("--partitions", min=1, help="Read partitions (dask, spark).")
    ] = None,
    workdir: Annotated[
        str | None,
        typer.Option("--workdir", help="Work directory (dask, spark); a rerun resumes it."),
    ] = None,
) -> None:
    """Deduplicate a corpus: exact + near duplicates (verified), clusters, pairs, summary."""
    from ..batch.config import DedupConfig
    from ..batch.files import dedup_files
    from ..errors import ConfigError
    from ..io import check_not_input, check_output
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
        # the one output folder neardup makes itself (others must exist: a mistyped folder is
        # refused, not silently created)
        out_dir.mkdir(exist_ok=True)
    if not inputs:
        raise ConfigError("no input given; pass files, a directory or - (stdin), or use --sample")
    if output is None:
        raise ConfigError("--output is required (a path, or - for stdout)")
    outputs = [("--output", output), ("--pairs-out", pairs_out), ("--clusters-out", clusters_out)]
    outputs.append(("--summary-json", summary_json))
    for option, path in outputs:
        if path is not None and path != "-":
            check_not_input(path, inputs, option=option)
            # refused now, not after the run; a text --output is a folder, and write_kept
            # decides what an existing folder may be
            if option != "--output" or not os.path.isdir(path):
                check_output(path, option=option)
    config = DedupConfig(
        threshold=threshold,
        candidates=candidates,
        max_distance=max_distance,
        candidate_work_per_doc_ns=candidate_work_ns if candidate_budget else None,
        keep=keep,
        verify=verify,
        workers=workers,
        lsh_band_pairs_per_doc=lsh_band_pairs_per_doc or None,
    )
    if engine != "local":  # the distributed job (neardup.distributed), same summary
        from ..distributed.cli import run_distributed_cli

        stats = run_distributed_cli(
            engine=engine, inputs=list(inputs), config=config, output=output,
            pairs_out=pairs_out, clusters_out=clusters_out, summary_json=summary_json,
            input_format=input_format, text_field=text_field, id_field=id_field,
            scheduler=scheduler, master=master, partitions=partitions, workdir=workdir,
            quiet=quiet,
        )  # fmt: skip
        if not quiet:
            print(_summary_text(stats), file=sys.stderr if _is_stdout(output) else sys.stdout)
        for message in _run_warnings(stats, []):
            warn(message)
        return
    progress = StageProgress.for_stderr(quiet)
    from .. import _jit  # (imports numba, which the run needs anyway)

    # a cold kernel cache costs a one-time compile: say so when it starts (whatever -q says)
    _jit.announce_compiles(lambda notice: print(notice, file=sys.stderr, flush=True))
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
            config=config,
            progress=_bar_callback(progress),
        )
    stats = result.stats
    if not quiet:
        stream = sys.stderr if _is_stdout(output) else sys.stdout
        print(_summary_text(stats), file=stream)
        if sample:
            print(_sample_outputs(output, pairs_out, clusters_out, summary_json), file=stream)
    # after the summary, so they are the last thing on a terminal; never hidden by -q
    for message in _run_warnings(stats, stats.get("skipped_list", [])):
        warn(message)


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
    if lsh.get("valve_bands") or lsh.get("pairs_skipped"):
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
    if n:
        msg = f"skipped {n:,} malformed record{'s' if n != 1 else ''}"
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
