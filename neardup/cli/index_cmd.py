"""``neardup index``: inspect the planner and index files.

* ``neardup index plan --bits 64 -k 3 -n 50000000 [--memory 4GB] [--all]`` prints the layout the
  planner picks (and with ``--all`` every candidate with its estimated cost and memory).
* ``neardup index info PATH`` opens a saved index (memory-mapped, checksums verified) and prints
  ``describe()``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import typer

from ..errors import ConfigError

__all__ = ["register"]

_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "t": 1e12, "tb": 1e12}  # fmt: skip


def _parse_bytes(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9.]+)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise ConfigError(f"--memory must look like 4GB, 512MiB or 1e9, got {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2).lower()]


def plan_cmd(
    bits: int = typer.Option(64, "--bits", help="Fingerprint width: 64 or 128."),
    k: int = typer.Option(3, "-k", "--max-distance", help="Largest Hamming distance searched."),
    n: float = typer.Option(10_000_000, "-n", "--size", help="Expected number of fingerprints."),
    memory: str | None = typer.Option(None, "--memory", help="Memory budget, e.g. 4GB."),
    show_all: bool = typer.Option(False, "--all", help="List every candidate layout."),
) -> None:
    """Print the table layout the planner chooses for (bits, k, N, memory)."""
    from ..index.plan import candidate_plans, plan_index

    if not (math.isfinite(n) and n >= 1 and n == int(n)):
        raise ConfigError(f"-n/--size must be a whole number of fingerprints >= 1, got {n:g}")
    budget = _parse_bytes(memory) if memory else None
    plan = plan_index(bits, k, int(n), memory_budget=budget)
    typer.echo(plan.describe())
    if show_all:
        typer.echo("\ncandidates (cheapest first):")
        for c in sorted(candidate_plans(bits, k, int(n)), key=lambda c: c.est_query_ns):
            typer.echo(
                f"  {c.name:<34} tables={c.n_tables:<4} probes={c.probes_per_query:<7}"
                f" ~{c.est_query_ns / 1000:9.2f} µs/query  ~{c.est_bytes_per_fp:6.0f} B/fp"
            )


def info_cmd(
    path: Path = typer.Argument(
        ..., help="An index file written by HammingIndex.save().", metavar="PATH"
    ),
) -> None:
    """Open a saved index (read-only, checksums verified) and describe it."""
    from ..index import HammingIndex

    typer.echo(HammingIndex.load(path, mmap=True).describe())


def register(app: typer.Typer) -> None:
    """Add the ``index`` command group to the main app."""
    group = typer.Typer(
        help="Inspect the Hamming index planner and index files.", no_args_is_help=True
    )
    group.command("plan")(plan_cmd)
    group.command("info")(info_cmd)
    app.add_typer(group, name="index")
