#!/usr/bin/env python3
"""A first run's kernel compile: ``neardup dedup --sample`` on an empty kernel cache.

Each run is a fresh process with its own empty ``NEARDUP_CACHE_DIR`` (what a fresh install
sees), in a temporary folder; the figures are the summary's ``kernel_compile_s`` (the time the
run itself spent compiling), the run's wall time and the CPU time of the run and its children
(the helper process that compiles the last stages' kernels beside it). Each tree is run with the
helper (the default) and without it (``NEARDUP_NO_WARM=1``: every kernel compiled by the run,
one after another), ``--repeat`` times, alternating trees so that a busy neighbour affects all
of them alike; the table shows the median.

``--tree PATH`` (repeatable) measures other checkouts of neardup in the same run (e.g. a
``git worktree`` of the commit before a change); the default is this checkout. With
``--kernels`` the slowest compiles of one run without the helper are listed, by kernel (with
``--serve``, of one first start).

``--serve`` measures a server's first start instead: ``neardup serve`` on a new ``--data``
folder and an empty kernel cache, timed from the spawn to the first answer of ``/healthz``
(the store's open and its warm-up, which compiles what requests need before it answers), with
its compile helper (``neardup.online.warm``) and without; ``compile`` is the time the server's
log says it compiled (absent in a tree that does not log it), CPU the server's and its
helper's.

    python benchmarks/bench_compile.py
    python benchmarks/bench_compile.py --tree . --tree ../before --repeat 3
    python benchmarks/bench_compile.py --serve --tree . --tree ../before --repeat 2

Prints the table and writes ``benchmarks/results/bench_compile.json`` (with the machine).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))

from trees import TREE_HELP, alternate, checkouts, medians  # noqa: E402

# a listener that prints the outermost compiles at exit (--kernels): neardup's kernels, and
# numba's own functions compiled outside them (a typed list's methods, called from Python)
_LISTEN = """
import atexit, json, sys, time
from numba.core import event as ev
rows = []
class L(ev.Listener):
    stack = []
    def on_start(self, e):
        d = e.data.get("dispatcher")
        f = getattr(d, "py_func", None)
        name = f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', '?')}"
        L.stack.append((time.perf_counter(), name))
    def on_end(self, e):
        t0, name = L.stack.pop()
        if not L.stack:
            rows.append((name, time.perf_counter() - t0))
ev.register("numba:compile", L())
atexit.register(lambda: sys.stderr.write("KERNELS " + json.dumps(rows) + "\\n"))
from neardup.cli.main import main
main(sys.argv[1:])
"""


def run_once(tree: Path, helper: bool, kernels: bool = False) -> dict[str, Any]:
    """One ``neardup dedup --sample`` in a fresh process on an empty kernel cache."""
    with tempfile.TemporaryDirectory(prefix="neardup-compile-") as tmp:
        env = {**os.environ, "NEARDUP_CACHE_DIR": str(Path(tmp) / "cache")}
        env.pop("NUMBA_CACHE_DIR", None)
        env["PYTHONPATH"] = str(tree)
        if not helper:
            env["NEARDUP_NO_WARM"] = "1"
        else:
            env.pop("NEARDUP_NO_WARM", None)
        out = Path(tmp) / "out"
        out.mkdir()
        args = ["dedup", "--sample", "-o", str(out / "kept.jsonl"), "--summary-json",
                str(out / "summary.json")]  # fmt: skip
        cmd = [sys.executable, "-c", _LISTEN, *args] if kernels else [
            sys.executable, "-m", "neardup", *args
        ]  # fmt: skip
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise SystemExit(f"neardup dedup --sample failed in {tree}:\n{proc.stderr[-3000:]}")
        summary = json.loads((out / "summary.json").read_text())
        row: dict[str, Any] = {
            "kernel_compile_s": float(summary["kernel_compile_s"]),
            "wall_s": wall,
            "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        }
        if kernels:
            line = next(x for x in proc.stderr.splitlines() if x.startswith("KERNELS "))
            row["kernels"] = sorted(json.loads(line[8:]), key=lambda r: -r[1])
        return row


def serve_once(tree: Path, helper: bool, kernels: bool = False) -> dict[str, Any]:
    """One first start of ``neardup serve`` on an empty kernel cache and a new data folder:
    seconds to the first answer of ``/healthz`` (``kernels``: and the server's compiles, by
    kernel, printed when it stops)."""
    import re
    import socket
    import urllib.request

    with tempfile.TemporaryDirectory(prefix="neardup-compile-") as tmp:
        env = {**os.environ, "NEARDUP_CACHE_DIR": str(Path(tmp) / "cache")}
        env.pop("NUMBA_CACHE_DIR", None)
        env["PYTHONPATH"] = str(tree)
        if not helper:
            env["NEARDUP_NO_WARM"] = "1"
        else:
            env.pop("NEARDUP_NO_WARM", None)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        log = Path(tmp) / "serve.log"
        args = ["serve", "--data", str(Path(tmp) / "data"), "--port", str(port), "--no-auth"]
        cmd = [sys.executable, *(["-c", _LISTEN] if kernels else ["-m", "neardup"]), *args]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        with open(log, "wb") as err:
            proc = subprocess.Popen(cmd, env=env, cwd=tmp, stdout=err, stderr=err)
            try:
                while True:
                    if proc.poll() is not None:
                        raise SystemExit(f"neardup serve failed in {tree}:\n{log.read_text()}")
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                            break
                    except OSError:
                        time.sleep(0.1)
                wall = time.perf_counter() - t0
            finally:
                proc.terminate()
                proc.wait(timeout=60)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        text = log.read_text()
        said = re.search(r"compiled kernels in ([0-9.]+) s", text)
        row: dict[str, Any] = {
            "healthz_s": wall,
            "compile_s": float(said.group(1)) if said else None,
            "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        }
        if kernels:
            line = next(x for x in text.splitlines() if x.startswith("KERNELS "))
            row["kernels"] = sorted(json.loads(line[8:]), key=lambda r: -r[1])
        return row


def rounds(
    args: argparse.Namespace,
    trees: list[Path],
    once: Callable[[Path, bool], dict[str, Any]],
    line: Callable[[dict[str, Any]], str],
) -> dict[str, list[dict[str, dict[str, Any]]]]:
    """``args.repeat`` rounds of ``once(tree, helper)`` with the compile helper and without it,
    the trees alternated, each run said on stderr (``line(row)``); by tree, each round's
    ``{mode: row}``."""

    def both(t: Path, r: int) -> dict[str, dict[str, Any]]:
        return {mode: once(t, mode == "helper") for mode in ("helper", "no helper")}

    def say(t: Path, r: int, got: dict[str, dict[str, Any]]) -> None:
        for mode, row in got.items():
            print(f"  run {r + 1}/{args.repeat} {t.name} {mode}: {line(row)}", file=sys.stderr)

    return alternate(trees, args.repeat, both, say=say)


def write_result(args: argparse.Namespace, benchmark: str, table: list[Any], **extra: Any) -> None:
    """The run's JSON at ``--out``, with the command line and the machine."""
    result = {
        "benchmark": benchmark,
        "command": "python benchmarks/bench_compile.py " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "repeat": args.repeat,
        "table": table,
        **extra,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


def machine() -> dict[str, Any]:
    from bench_dedup import machine as base

    return base(load_average=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, action="append", help=TREE_HELP)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kernels", action="store_true", help="list the slowest kernel compiles")
    ap.add_argument("--serve", action="store_true", help="a server's first start instead")
    ap.add_argument("--out", type=Path, default=None, help="default: benchmarks/results/bench_compile.json (--serve: bench_compile_serve.json)")  # fmt: skip
    args = ap.parse_args()
    trees = checkouts(args.tree)
    if args.out is None:
        name = "bench_compile_serve.json" if args.serve else "bench_compile.json"
        args.out = BENCH / "results" / name
    if args.serve:
        serve_main(args, trees)
        return

    done = rounds(
        args,
        trees,
        run_once,
        lambda row: (
            f"compile {row['kernel_compile_s']:.2f} s, wall {row['wall_s']:.2f} s, "
            f"cpu {row['cpu_s']:.2f} s"
        ),
    )
    runs = {
        t: {m: [got[m] for got in rs] for m in ("helper", "no helper")} for t, rs in done.items()
    }
    table = []
    print(f"{'tree':<28} {'mode':<10} {'compile s':>10} {'wall s':>8} {'CPU s':>8}")
    for t in trees:
        for mode in ("helper", "no helper"):
            rows = runs[str(t)][mode]
            med = medians(rows, ("kernel_compile_s", "wall_s", "cpu_s"))
            table.append({"tree": str(t), "mode": mode, **med, "runs": rows})
            print(
                f"{t.name:<28} {mode:<10} {med['kernel_compile_s']:>10.2f} "
                f"{med['wall_s']:>8.2f} {med['cpu_s']:>8.2f}"
            )
    kernels = None
    if args.kernels:
        kernels = run_once(trees[0], helper=False, kernels=True)["kernels"]
        show_kernels(kernels, f"slowest compiles, {trees[0].name}, no helper")
    write_result(args, "bench_compile", table, kernels=kernels)


def serve_main(args: argparse.Namespace, trees: list[Path]) -> None:
    """``--serve``: the table of first starts, and its JSON."""

    done = rounds(
        args,
        trees,
        serve_once,
        lambda row: (
            f"/healthz after {row['healthz_s']:.1f} s, compile {row['compile_s']} s, "
            f"cpu {row['cpu_s']:.1f} s"
        ),
    )
    table = []
    print(f"{'tree':<28} {'mode':<10} {'/healthz s':>10} {'compile s':>10} {'CPU s':>8}")
    for t in trees:
        for mode in ("helper", "no helper"):
            rows = [got[mode] for got in done[str(t)]]
            med: dict[str, Any] = medians(rows, ("healthz_s", "cpu_s"))
            said = [r for r in rows if r["compile_s"] is not None]  # (a tree that logs it)
            med["compile_s"] = medians(said, ("compile_s",))["compile_s"] if said else None
            table.append({"tree": str(t), "mode": mode, **med, "runs": rows})
            compiled = "-" if med["compile_s"] is None else f"{med['compile_s']:.1f}"
            print(
                f"{t.name:<28} {mode:<10} {med['healthz_s']:>10.1f} {compiled:>10} "
                f"{med['cpu_s']:>8.1f}"
            )
    kernels = None
    if args.kernels:
        kernels = serve_once(trees[0], helper=False, kernels=True)["kernels"]
        show_kernels(kernels, f"slowest compiles of a first start, {trees[0].name}, no helper")
    write_result(args, "bench_compile --serve", table, kernels=kernels)


def show_kernels(kernels: list[Any], title: str) -> None:
    """The 15 slowest compiles of ``kernels`` ((name, seconds), slowest first) and their sum."""
    print(f"\n{title} (all: {sum(s for _, s in kernels):.1f} s):")
    for name, s in kernels[:15]:
        print(f"  {s:6.2f} s  {name}")


if __name__ == "__main__":
    main()
