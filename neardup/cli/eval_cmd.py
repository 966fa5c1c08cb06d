"""``neardup eval``: a thin shell over :func:`neardup.evaluate.run_eval`.

The documents are read by :func:`neardup.io.read_corpus`, as ``neardup dedup`` reads them
(``--input-format``, compressed files, globs, fsspec URLs, dotted ``--text-field``). Errors
are raised as NeardupError subclasses; ``cli.main`` maps them.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from .._threads import default_workers

__all__ = ["eval_command", "register"]


def eval_command(
    docs: Annotated[
        str,
        typer.Option(
            help="Documents with ids: a file, glob or URL in any input format.",
            show_default=False,
        ),
    ],
    pairs: Annotated[
        str, typer.Option(help="Labelled pairs CSV: id_a,id_b,label.", show_default=False)
    ],
    input_format: Annotated[
        str | None,
        typer.Option(
            help="Format of --docs (every file of a folder): jsonl, json, csv, tsv, parquet, "
            "text (a file is one document) or lines (a line is one document); default: each "
            "file's extension.",
            show_default=False,
        ),
    ] = None,
    text_field: Annotated[
        str, typer.Option(help="Field/column holding the text (dotted: meta.text).")
    ] = "text",
    id_field: Annotated[str, typer.Option(help="Field holding the id used in the labels.")] = "id",
    encoding: Annotated[
        str,
        typer.Option(
            help="Input text encoding; another than utf-8 refuses lines that are valid UTF-8."
        ),
    ] = "utf-8",
    min_k: Annotated[int, typer.Option(help="Smallest SimHash distance of the sweep.")] = 0,
    max_k: Annotated[int, typer.Option(help="Largest SimHash distance of the sweep.")] = 20,
    retrieval: Annotated[
        bool,
        typer.Option(help="Also dedup every document on defaults and score the reported pairs."),
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    plot: Annotated[
        str | None, typer.Option(help="Write a precision/recall vs distance PNG here.")
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Worker threads (default: every CPU this process may use, "
            f"{default_workers()} here); the scores do not depend on it.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Precision, recall and F1 against labelled pairs, overall / by language / by length."""
    from ..batch.evaluate import run_eval
    from ..errors import ConfigError

    if not 0 <= min_k <= max_k <= 64:
        raise ConfigError(f"need 0 <= --min-k <= --max-k <= 64, got {min_k} and {max_k}")
    if plot:  # before any work, and never over an input (it replaced --pairs with a PNG)
        from ..io import check_not_input, check_output

        check_output(plot, option="--plot")
        check_not_input(plot, [docs, pairs], option="--plot")
    report = run_eval(
        docs,
        pairs,
        fmt=input_format,
        text_field=text_field,
        id_field=id_field,
        encoding=encoding,
        thresholds=range(min_k, max_k + 1),
        retrieval=retrieval,
        workers=default_workers() if workers is None else workers,
    )
    if plot:
        from ..batch.evaluate import plot_sweep

        plot_sweep(report["sweep"], plot)
    if as_json:
        print(json.dumps(report, indent=2))
        return
    left = report["labels_without_docs"]
    if left:
        print(
            f"neardup: warning: {left:,} labelled pair(s) name an id that is not in --docs and "
            "are left out (check --id-field, or that --pairs labels these documents)",
            file=sys.stderr,
        )
    print(f"labelled pairs: {report['labelled']} ({report['positives']} positive)")
    print("\npairwise sweep (overall):  k | simhash P / R / F1 | simhash+verify P / R / F1")
    for row in report["sweep"]:
        s, v = row["simhash"]["overall"], row["verified"]["overall"]
        print(
            f"  {row['k']:>2} | {s['precision']:.3f} / {s['recall']:.3f} / {s['f1']:.3f}"
            f" | {v['precision']:.3f} / {v['recall']:.3f} / {v['f1']:.3f}"
        )
    if "retrieval" in report:
        r = report["retrieval"]
        print(
            f"\nretrieval on defaults: {r['reported']} reported pairs, {r['unlabeled']} unlabeled"
        )
        for name in ("overall", "en", "zh", "short", "long"):
            if name in r:
                m = r[name]
                print(f"  {name:<8} P={m['precision']:.4f} R={m['recall']:.4f} F1={m['f1']:.4f}")
    if plot:
        print(f"\nplot written to {plot}")


def register(app: typer.Typer) -> None:
    """Add ``neardup eval`` to the app."""
    app.command("eval")(eval_command)
