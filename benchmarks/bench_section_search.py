#!/usr/bin/env python3
"""A single request's band look-ups against a store's segments: the searches one after another
against the searches in lockstep.

A single ``check`` looks up one key per band (79) in every segment's band-key section (a 1 M
hourly window merged into blocks keeps ~11). Each search is a few dependent cache misses; done
one after another, the misses add up. :class:`neardup.index.SectionGroup` runs the searches
in lockstep (``_group_interp_kernel``: every search's probe of a round is loaded before any is
used), so the misses of different searches overlap. This builds ``--segments`` sections of
``--rows`` rows with uniform 32-bit keys in 79 groups (the store's layout, in memory), then
times ``--queries`` single requests (79 keys each, half of them present) both ways, checks
both against the NumPy reference, and prints ns per (section, key) search and CPU µs per
request.

    python benchmarks/bench_section_search.py
    python benchmarks/bench_section_search.py --segments 57 --rows 18000

Writes ``benchmarks/results/bench_section_search.json`` with the machine. (A machine with more
memory channels and a larger last-level cache changes the absolute times; the gain comes from
the misses overlapping, which any out-of-order core does.)
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

from neardup.index.bands import BandSection, SectionGroup  # noqa: E402
from neardup.index.reference import section_search_reference  # noqa: E402
from neardup.index.section_search import _section_interp_kernel  # noqa: E402

BANDS = 79


def cpu() -> float:
    t = os.times()
    return t.user + t.system


def machine() -> dict[str, Any]:
    from bench_dedup import machine as base

    return base(load_average=True)


def build(rows: int, segments: int, rng: np.random.Generator) -> list[BandSection]:
    out = []
    for s in range(segments):
        ks, rs = [], []
        for g in range(BANDS):  # a group at a time: sorted by (key, row) as a segment's
            h = rng.integers(0, 2**32, rows).astype(np.uint64)
            r = rng.permutation(rows).astype(np.int64)
            o = np.lexsort((r, h))
            ks.append((np.uint64(g) << np.uint64(32)) | h[o])
            rs.append(r[o])
        k, r = np.concatenate(ks), np.concatenate(rs)
        rowids = np.arange(rows, dtype=np.int64) + s * rows
        out.append(BandSection.from_sorted(k, r.astype(np.uint32), rowids=rowids))
    return out


def requests(sections: list[BandSection], n: int, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for i in range(n):
        uk = (np.arange(BANDS, dtype=np.uint64) << np.uint64(32)) | rng.integers(
            0, 2**32, BANDS
        ).astype(np.uint64)
        if i % 2:  # present in one section: a third of its band keys as stored
            sec = sections[int(rng.integers(len(sections)))]
            for b in range(0, BANDS, 3):
                lo, hi = int(sec.offsets[b]), int(sec.offsets[b + 1])
                h = int(sec.keys[int(rng.integers(lo, hi))])
                uk[b] = np.uint64((b << 32) | h)
        out.append(np.unique(uk))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segments", type=int, default=11)
    ap.add_argument("--rows", type=int, default=90_000, help="rows a segment")
    ap.add_argument("--queries", type=int, default=3000, help="single requests timed")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_section_search.json"
    )
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    t = time.perf_counter()
    sections = build(a.rows, a.segments, rng)
    group = SectionGroup(sections)
    qs = requests(sections, a.queries, rng)
    print(f"built {a.segments} sections of {a.rows:,} rows x {BANDS} bands in {time.perf_counter() - t:.1f} s")  # fmt: skip

    def one_by_one(uk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        res = [_section_interp_kernel(s.offsets, s.keys, uk) for s in sections]
        return np.stack([r[0] for r in res]), np.stack([r[1] for r in res])

    for uk in qs[:50]:  # both equal the reference
        want = [section_search_reference(s.offsets, s.keys, uk) for s in sections]
        wl, wh = np.stack([w[0] for w in want]), np.stack([w[1] for w in want])
        for fn in (one_by_one, group.search):
            lo, hi = fn(uk)
            assert np.array_equal(lo, wl) and np.array_equal(hi, wh), fn
    rows = []
    for name, fn in (("one after another", one_by_one), ("lockstep (SectionGroup)", group.search)):
        for uk in qs[:200]:
            fn(uk)
        for r in range(a.rounds):
            c0, t0 = cpu(), time.perf_counter()
            for uk in qs:
                fn(uk)
            wall, cpu_s = time.perf_counter() - t0, cpu() - c0
            searches = a.queries * a.segments * BANDS
            rows.append(
                {
                    "way": name,
                    "round": r,
                    "ns_per_search": 1e9 * wall / searches,
                    "cpu_us_per_request": 1e6 * cpu_s / a.queries,
                }
            )
    print(f"{'way':28} {'ns / search (best)':>20} {'CPU us / request (best)':>25}")
    best: dict[str, dict[str, float]] = {}
    for name in ("one after another", "lockstep (SectionGroup)"):
        mine = [r for r in rows if r["way"] == name]
        best[name] = {
            "ns_per_search": min(r["ns_per_search"] for r in mine),
            "cpu_us_per_request": min(r["cpu_us_per_request"] for r in mine),
        }
        print(f"{name:28} {best[name]['ns_per_search']:20.1f} {best[name]['cpu_us_per_request']:25.1f}")  # fmt: skip
    out = {
        "benchmark": "bench_section_search",
        "machine": machine(),
        "params": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
        "bands": BANDS,
        "rows": rows,
        "best": best,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
