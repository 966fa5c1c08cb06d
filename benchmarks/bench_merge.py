#!/usr/bin/env python3
"""A segment merge's band-key sections: merged as sorted runs (``neardup.index.band_merge.merge_mapped``,
what compaction does) against materialising every entry's (compact key, row) and sorting them
(``neardup.index.reference.merge_mapped_reference``, what compaction did before).

Segments of ``--rows`` rows each (``--segments`` of them, interleaved row ids), ``--bands``
entries per row with random 32-bit keys (a store's band keys are hashes), ``--deleted`` of the
rows deleted. Prints the wall and CPU time of each and writes
``benchmarks/results/bench_merge.json``. Both are single-threaded: a bigger machine changes the
absolute times, not the ratio; the merge runs on the store's compaction thread, beside checks.

With ``--tree`` (repeatable: source checkouts), ``merge_mapped`` alone is timed in a child
process per checkout, the checkouts alternated over ``--rounds`` rounds on the same inputs
(same ``--seed``), so that two versions of the merge see the same machine; each child checks
its section against the reference and the JSON (``--out``) keeps every run and the medians.

    python benchmarks/bench_merge.py
    python benchmarks/bench_merge.py --rows 150000 --segments 3 --bands 79
    python benchmarks/bench_merge.py --rows 20000 --segments 30 --tree BEFORE --tree . \\
        --out benchmarks/results/bench_merge_ab.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from trees import (  # noqa: E402
    TREE_HELP,
    alternate,
    checkouts,
    medians,
    run_child,
    write_runs,
)


def inputs(rows: int, segments: int, bands: int, deleted: float, seed: int) -> tuple[Any, Any]:
    """``segments`` sections of ``rows`` rows (positions), their maps to the merged rows."""
    from neardup.index.bands import BandSection, sort_entries

    rng = np.random.default_rng(seed)
    owner = rng.integers(0, segments, rows * segments)  # interleaved row ids
    alive = rng.random(rows * segments) >= deleted
    merged_pos = np.cumsum(alive) - 1
    sections, maps = [], []
    for s in range(segments):
        mine = np.flatnonzero(owner == s)
        n = len(mine)
        keys = rng.integers(0, 2**32, (n, bands), dtype=np.uint64)
        keys |= np.arange(bands, dtype=np.uint64) << np.uint64(32)
        pos = np.repeat(np.arange(n, dtype=np.int64), bands)
        k, p = sort_entries(keys.ravel(), pos)
        sections.append(BandSection.from_sorted(k, p.astype(np.uint32)))
        maps.append(np.where(alive[mine], merged_pos[mine], -1).astype(np.int64))
    return sections, maps


def timed(fn: Any) -> tuple[Any, float, float]:
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def _warm(merge_mapped: Any, a: argparse.Namespace) -> None:
    """Compile (or load) the kernels the timed merge runs, on small inputs of the same shape:
    two sections take one kernel, three or more the runs' merge."""
    small = inputs(50, min(a.segments, 3), a.bands, a.deleted, a.seed + 1)
    merge_mapped(*small)


def _same(got: Any, want: Any) -> bool:
    gk, gr = got
    wk, wr = want
    return bool(np.array_equal(gk, wk) and np.array_equal(gr, wr))


def _child(a: argparse.Namespace) -> dict[str, Any]:
    """``merge_mapped`` timed in this process (the checkout on ``PYTHONPATH``), then checked
    against the reference."""
    import neardup
    from neardup.index.bands import merge_mapped
    from neardup.index.reference import merge_mapped_reference

    sections, maps = inputs(a.rows, a.segments, a.bands, a.deleted, a.seed)
    _warm(merge_mapped, a)
    got, wall, cpu = timed(lambda: merge_mapped(sections, maps))
    return {
        "neardup": str(Path(neardup.__file__).parent),
        "entries": sum(len(s) for s in sections),
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "same_section": _same(got, merge_mapped_reference(sections, maps)),
    }


def _trees(a: argparse.Namespace) -> int:
    trees = checkouts(a.tree)
    cmd = [sys.executable, __file__, "--child", "--rows", str(a.rows)]
    cmd += ["--segments", str(a.segments), "--bands", str(a.bands)]
    cmd += ["--deleted", str(a.deleted), "--seed", str(a.seed)]

    def say(t: Path, r: int, got: dict[str, Any]) -> None:
        print(f"round {r + 1} {t}: {got['wall_s']:.2f} s wall, {got['cpu_s']:.2f} s CPU", file=sys.stderr)  # fmt: skip

    runs = alternate(trees, a.rounds, lambda t, r: run_child(t, cmd), say=say)
    med = {t: medians(rs, ("wall_s", "cpu_s")) for t, rs in runs.items()}
    same = all(x["same_section"] for rs in runs.values() for x in rs)
    print(f"{a.segments} segments x {a.rows:,} rows x {a.bands} bands, medians of {a.rounds}")
    print(f"{'checkout':40} {'wall s':>8} {'cpu s':>8}")
    for t in trees:
        print(f"{str(t)[-40:]:40} {med[str(t)]['wall_s']:8.2f} {med[str(t)]['cpu_s']:8.2f}")
    print(f"every section equal to the reference's: {same}")
    if a.out:
        write_runs(a.out, "merge", a, [str(t) for t in trees], med, runs)
    return 0 if same else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=150_000, help="rows per segment")
    ap.add_argument("--segments", type=int, default=3)
    ap.add_argument("--bands", type=int, default=79, help="band keys per row")
    ap.add_argument("--deleted", type=float, default=0.02, help="fraction of rows deleted")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tree", action="append", help=TREE_HELP + "; each in a child process")
    ap.add_argument("--rounds", type=int, default=2, help="with --tree: rounds (default 2)")
    ap.add_argument(
        "--out", help="JSON to write (default without --tree: benchmarks/results/bench_merge.json)"
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(_child(a)))
        return 0
    if a.tree:
        return _trees(a)

    sys.path.insert(0, str(ROOT))  # this checkout's neardup, in this process
    from bench_dedup import machine

    from neardup.index.bands import merge_mapped
    from neardup.index.reference import merge_mapped_reference

    out = Path(a.out) if a.out else ROOT / "benchmarks" / "results" / "bench_merge.json"
    sections, maps = inputs(a.rows, a.segments, a.bands, a.deleted, a.seed)
    entries = sum(len(s) for s in sections)
    _warm(merge_mapped, a)
    got, w_fast, c_fast = timed(lambda: merge_mapped(sections, maps))
    want, w_ref, c_ref = timed(lambda: merge_mapped_reference(sections, maps))
    same = _same(got, want)
    print(f"{a.segments} segments x {a.rows:,} rows x {a.bands} bands = {entries:,} entries")
    print(f"{'merge':34} {'wall s':>8} {'cpu s':>8}")
    print(f"{'sorted runs (merge_mapped)':34} {w_fast:8.2f} {c_fast:8.2f}")
    print(f"{'materialise + sort (reference)':34} {w_ref:8.2f} {c_ref:8.2f}")
    print(f"ratio {w_ref / w_fast:.1f}x wall, {c_ref / c_fast:.1f}x CPU; same section: {same}")
    doc = {
        "benchmark": "merge",
        "command": "python benchmarks/bench_merge.py " + " ".join(argv or sys.argv[1:]),
        "machine": {**machine(), "load": list(os.getloadavg())},
        "rows": a.rows,
        "segments": a.segments,
        "bands": a.bands,
        "deleted": a.deleted,
        "entries": entries,
        "merge_mapped": {"wall_s": round(w_fast, 3), "cpu_s": round(c_fast, 3)},
        "materialise_and_sort": {"wall_s": round(w_ref, 3), "cpu_s": round(c_ref, 3)},
        "same_section": same,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
