"""The MinHash plan options ``neardup serve`` and ``neardup store load`` share: a new store's
bands and rows (expert; each stored document keeps one band key per band)."""

from __future__ import annotations

from typing import Any

import typer

__all__ = ["LSH_BANDS", "LSH_ROWS"]

LSH_BANDS: Any = typer.Option(
    None,
    "--lsh-bands",
    min=1,
    max=512,
    help="Expert, a new lsh store, with --lsh-rows: MinHash bands (default: the planner's, as "
    "neardup dedup). "
    "Fewer bands, fewer band keys a document: a smaller window, at the candidate probability "
    "the plan states (logged when below 0.99). An existing store keeps its plan.",
)
LSH_ROWS: Any = typer.Option(
    None,
    "--lsh-rows",
    min=1,
    max=512,
    help="Expert, a new lsh store, with --lsh-bands: MinHash rows a band (default: the planner's).",
)
