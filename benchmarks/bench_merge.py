#!/usr/bin/env python3
"""A segment merge's band-key sections: merged as sorted runs (``neardup.index.band_merge.merge_mapped``,
what compaction does) against materialising every entry's (compact key, row) and sorting them
(``neardup.index.reference.merge_mapped_reference``, what compaction did before).

Segments of ``--rows`` rows each (``--segments`` of them, interleaved row ids), ``--bands``
entries per row with random 32-bit keys (a store's band keys are hashes), ``--deleted`` of the
rows deleted. Prints the wall and CPU time of each and writes
``benchmarks/results/bench_merge.json``. Both are single-threaded: a bigger machine changes the
absolute times, not the ratio; the merge runs on the store's compaction thread, beside checks.

    python benchmarks/bench_merge.py
    python benchmarks/bench_merge.py --rows 150000 --segments 3 --bands 79
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
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_dedup import machine  # noqa: E402

from neardup.index.bands import BandSection, merge_mapped, sort_entries  # noqa: E402
from neardup.index.reference import merge_mapped_reference  # noqa: E402


def inputs(rows: int, segments: int, bands: int, deleted: float, seed: int) -> tuple[Any, Any]:
    """``segments`` sections of ``rows`` rows (positions), their maps to the merged rows."""
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=150_000, help="rows per segment")
    ap.add_argument("--segments", type=int, default=3)
    ap.add_argument("--bands", type=int, default=79, help="band keys per row")
    ap.add_argument("--deleted", type=float, default=0.02, help="fraction of rows deleted")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_merge.json"
    )
    a = ap.parse_args(argv)

    sections, maps = inputs(a.rows, a.segments, a.bands, a.deleted, a.seed)
    entries = sum(len(s) for s in sections)
    merge_mapped(sections[:1], maps[:1])  # compile (or load) the kernel outside the timing
    got, w_fast, c_fast = timed(lambda: merge_mapped(sections, maps))
    want, w_ref, c_ref = timed(lambda: merge_mapped_reference(sections, maps))
    gk, gr = got
    wk, wr = want
    same = bool(np.array_equal(gk, wk) and np.array_equal(gr, wr))
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
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {a.out}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
