"""The checkouts a benchmark compares, one home for what the benchmarks that take ``--tree``
do with them: each checkout resolved and checked once, every one run in each round, in turn,
so that a busy neighbour on this shared machine affects them alike, and the runs summarised by
their medians.

    ap.add_argument("--tree", type=Path, action="append", help=TREE_HELP)
    trees = checkouts(args.tree)                       # SystemExit naming a bad one
    runs = alternate(trees, args.repeat, lambda t, r: run_once(t), say=print_row)
    med = medians(runs[str(trees[0])], ("wall_s", "cpu_s"))

A benchmark whose child process imports neardup from the checkout runs it with
:func:`run_child`, takes :func:`add_child_options` and writes its JSON with :func:`write_runs`
(``bench_request_parts.py``, ``bench_heavy_buckets.py``, ``bench_write_stall.py``).

Used by ``bench_compile.py``, ``bench_check.py``, ``bench_dense_cluster.py``,
``bench_request_parts.py``, ``bench_heavy_buckets.py``, ``bench_write_stall.py`` and
``bench_restart.py``; tested in
``tests/test_bench_trees.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]

__all__ = [
    "ROOT",
    "TREE_HELP",
    "add_child_options",
    "alternate",
    "checkouts",
    "commit_of",
    "medians",
    "run_child",
    "write_runs",
]

#: the ``--tree`` option's help, alike in every benchmark that takes it
TREE_HELP = "a neardup checkout to run (repeatable; default: this one)"

_Row = TypeVar("_Row")


def checkouts(paths: Sequence[str | Path] | None, default: Path = ROOT) -> list[Path]:
    """The checkouts ``--tree`` named (``default``: this one when none), resolved; a folder
    without a neardup package ends the run with a message naming it, before any work."""
    trees = [Path(p).resolve() for p in (paths or [default])]
    for t in trees:
        if not (t / "neardup" / "__init__.py").is_file():
            raise SystemExit(f"--tree {t}: no neardup package there (neardup/__init__.py)")
    return trees


def alternate(
    trees: Sequence[Path],
    rounds: int,
    run: Callable[[Path, int], _Row],
    *,
    warm: bool = False,
    say: Callable[[Path, int, _Row], None] | None = None,
) -> dict[str, list[_Row]]:
    """``run(tree, round)`` for every tree in each of ``rounds`` rounds, the trees in turn,
    each round starting one tree further (round ``r`` at tree ``r mod len(trees)``): on this
    shared box a run's place in a round moved all its stages by 5-10 % in one direction
    (``bench_request_parts.py``, 2026-12-07), so each tree takes each place in turn and,
    with rounds a multiple of the trees, every place equally often. ``warm``: one untimed
    run of each first (a first run after a change of the sources fills its kernel cache).
    ``say(tree, round, row)`` after each run (progress). Returns each tree's rows by
    ``str(tree)``, in round order."""
    if rounds < 1:
        raise SystemExit(f"rounds must be at least 1, got {rounds}")
    if warm:
        for t in trees:
            run(t, -1)
    runs: dict[str, list[_Row]] = {str(t): [] for t in trees}
    for r in range(rounds):
        k = r % len(trees)
        for t in [*trees[k:], *trees[:k]]:
            row = run(t, r)
            runs[str(t)].append(row)
            if say is not None:
                say(t, r, row)
    return runs


def medians(rows: Iterable[dict[str, Any]], keys: Iterable[str]) -> dict[str, float]:
    """The median of each of ``keys`` over ``rows``."""
    rows = list(rows)
    return {k: statistics.median(r[k] for r in rows) for k in keys}


def commit_of(tree: str | Path) -> str | None:
    """The checkout's commit (None outside git)."""
    out = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    )
    return out.stdout.strip() or None


def run_child(tree: str | Path, cmd: Sequence[str]) -> dict[str, Any]:
    """Run ``cmd`` with ``tree`` as its ``PYTHONPATH`` (the checkout it imports neardup from) and
    return the JSON object on the last line of its stdout. A child that fails has its stderr
    passed on and ends the run with its exit status."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run(list(cmd), env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        sys.stderr.write(out.stderr)
        raise SystemExit(out.returncode)
    got: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return got


def add_child_options(ap: argparse.ArgumentParser) -> None:
    """The options of a benchmark that runs each checkout in a child process (:func:`run_child`):
    ``--tree`` (repeatable), ``--rounds``, ``--out`` (the JSON :func:`write_runs` writes) and
    the hidden ``--child`` the parent passes its children."""
    ap.add_argument("--tree", action="append", help=TREE_HELP)
    ap.add_argument("--rounds", type=int, default=3, help="rounds, trees alternated (default 3)")
    ap.add_argument("--out", help="JSON file to write")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)


def write_runs(
    path: str | Path,
    benchmark: str,
    args: argparse.Namespace,
    trees: Sequence[str | Path],
    medians_by_tree: dict[str, Any],
    runs: dict[str, list[Any]],
) -> None:
    """Write such a benchmark's JSON: its name, the machine (with the load average), its
    options (``--child`` left out), each checkout's commit, the medians and every run."""
    from bench_dedup import machine, write_results

    write_results(
        Path(path),
        {
            "benchmark": benchmark,
            "machine": machine(load_average=True),
            "params": {k: v for k, v in vars(args).items() if k != "child"},
            "commits": {str(t): commit_of(t) for t in trees},
            "medians": medians_by_tree,
            "runs": runs,
        },
    )
