"""``neardup report RUN -o report.html``: a thin shell over
:func:`neardup.review.report.write_report` (the review data ``neardup dedup --report`` wrote,
rendered as one self-contained HTML page). Errors are NeardupError subclasses; ``cli.main``
maps them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def report_command(
    run: Annotated[
        str,
        typer.Argument(
            help="A run folder holding review.json (neardup dedup --report writes it), or the "
            "file itself.",
            metavar="RUN_DIR",
        ),
    ],
    output: Annotated[
        str | None,
        typer.Option(
            "--output", "-o", help="Where to write the HTML (default RUN_DIR/report.html)."
        ),
    ] = None,
) -> None:
    """Render a run's review report: summary, cluster sizes, pairs by similarity, duplicates by
    language and length, and a sample of clusters with aligned diffs."""
    import sys

    from ..io import check_not_input, check_output
    from ..review.report import write_report
    from .dedup_cmd import _is_stdout

    folder = Path(run) if Path(run).is_dir() else Path(run).parent
    out = output or str(folder / "report.html")
    check_output(out, option="--output")
    # never over the review data it reads (review.json is the only copy of the dropped texts)
    check_not_input(
        out, [Path(run) / "review.json" if Path(run).is_dir() else run], option="--output"
    )
    size = write_report(run, out)
    # the page on stdout stays the page alone
    print(f"wrote {out} ({size:,} bytes)", file=sys.stderr if _is_stdout(out) else sys.stdout)


def register(app: typer.Typer) -> None:
    """Add ``neardup report`` to the app."""
    app.command("report")(report_command)
