#!/usr/bin/env python3
"""A single request's band look-ups against a store's segments: the searches one after another,
in lockstep section by section, and in lockstep in one call for all sections, in the packed
layout segments take and the unpacked one before it; and a batch's, on one kernel thread and on
every one.

A single ``check`` looks up one key per band (79) in every segment's band-key section (a 1 M
hourly window keeps ~48 of ~21 k rows, a 10 M one ~48 of ~208 k), and in the memtable's. Each
search is a few dependent cache misses; done one after another (the way before, kept here as
``sequential_kernel``), the misses add up. neardup runs a section's searches in lockstep
(``_interp_lockstep``: every search's probe of a round is loaded before any is used), so the
misses of different searches overlap: a section on its own (``section_search``, the
memtable's) and every section of a :class:`neardup.index.SectionGroup` in one kernel call (a
store's segments). Segments hold their sections packed
(:mod:`neardup.index.band_packed`: a directory on the keys' top bits, 16-32 key bits and the row
bytes an entry, against 4 + 4 unpacked); a search starts at its key's bucket.

This builds ``--segments`` sections of ``--rows`` rows with uniform 32-bit keys in 79 groups
(the store's layout, in memory), then times ``--queries`` single requests (79 keys each, half
of them present) each way, checks each against the NumPy reference, and prints ns per
(section, key) search, CPU µs per request and bytes per entry. Then ``--batches`` batches of
``--batch-docs`` documents (a check-and-insert batch's keys) searched in the group and their
buckets' rows gathered, both layouts, on one thread and on every kernel thread (a range of
sections each), µs of wall and CPU a document:

    python benchmarks/bench_section_search.py --segments 48 --rows 21000
    python benchmarks/bench_section_search.py --segments 48 --rows 208000 --queries 1000
    python benchmarks/bench_section_search.py --segments 8 --rows 1000000 --queries 1000

``--sparse-gaps 100000,1`` times the batches again with the gallop in every section, then the
lockstep in every section (the threshold between them, ``_SPARSE_GAP``, is entries a key).

Writes ``benchmarks/results/bench_section_search.json`` (``--out``) with the machine. (A machine
with more memory channels and a larger last-level cache changes the absolute times; the gain
comes from the misses overlapping, which any out-of-order core does.)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from neardup._jit import kernel  # noqa: E402
from neardup.index import section_search  # noqa: E402
from neardup.index.band_packed import pack_section  # noqa: E402
from neardup.index.bands import BandSection, SectionGroup  # noqa: E402
from neardup.index.reference import section_search_reference  # noqa: E402
from neardup.index.section_search import (  # noqa: E402
    _first_past,
    _narrow,
    _probes,
    _section_interp_kernel,
)

BANDS = 79


def cpu() -> float:
    # the process's CPU clock, every thread, to the nanosecond (os.times counts whole clock
    # ticks: 10 µs steps of a 1,000-request figure)
    return time.process_time()


def machine() -> dict[str, Any]:
    from bench_dedup import machine as base

    return base(load_average=True)


@kernel(nogil=True)
def sequential_kernel(offsets: Any, keys: Any, kb: Any, uk: Any) -> Any:  # pragma: no cover (numba)
    """The interpolating search one key after another (neardup's before the lockstep): the
    same probes as ``_interp_lockstep``, each search to its end before the next starts."""
    n = uk.size
    lo = np.zeros(n, np.int64)
    hi = np.zeros(n, np.int64)
    ng = offsets.size - 1
    for q in range(n):
        g = np.int64(uk[q] >> np.uint64(32))
        if g >= ng:
            continue
        low = np.uint32(uk[q] & np.uint64(0xFFFFFFFF))
        a = np.int64(offsets[g])
        b = end = np.int64(offsets[g + 1])
        vlo, vhi = 0.0, 4294967296.0
        for _ in range(3):
            if b - a <= 32:
                break
            x1, x2 = _probes(a, b, vlo, vhi, float(low))
            if x1 >= 0:
                a, b, vlo, vhi = _narrow(a, b, vlo, vhi, x1, keys[x1], low)
                if b == x1:
                    continue
            if x2 >= 0 and a < x2 < b:
                a, b, vlo, vhi = _narrow(a, b, vlo, vhi, x2, keys[x2], low)
        lo[q] = a = _first_past(kb, 32, a, b, low, False)
        hi[q] = _first_past(kb, 32, a, end, low, True)
    return lo, hi


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


def buckets(lo: np.ndarray, hi: np.ndarray) -> list[tuple[int, int, int, int]]:
    """The non-empty buckets of (sections, keys) answers as (section, key, first, end)."""
    s, q = np.nonzero(hi > lo)
    return list(zip(s.tolist(), q.tolist(), lo[s, q].tolist(), hi[s, q].tolist(), strict=True))


def hits(h: Any) -> list[tuple[int, int, int, int]]:
    """A :class:`SectionGroup`'s answer (its non-empty buckets) as :func:`buckets` gives it."""
    cols = (h.section, h.key, h.lo, h.hi)
    return list(zip(*(c.tolist() for c in cols), strict=True))


def batches(
    groups: dict[str, SectionGroup], sections: list[BandSection], a: argparse.Namespace, rng: Any
) -> list[dict[str, Any]]:
    """Batches of ``--batch-docs`` documents (79 keys each, distinct keys sorted) searched in
    each layout's group and their buckets' rows gathered, on one kernel thread and on every
    one (a batch's sections spread over them): wall and CPU µs a document, best of the rounds;
    checked against the reference."""
    from neardup._threads import kernel_threads, max_threads

    def batch() -> np.ndarray:
        g = np.repeat(np.arange(BANDS, dtype=np.uint64), a.batch_docs)
        h = rng.integers(0, 2**32, BANDS * a.batch_docs).astype(np.uint64)
        return np.unique((g << np.uint64(32)) | h)

    qs = [batch() for _ in range(a.batches)]
    ref = [section_search_reference(s.offsets, s.keys, qs[0]) for s in sections]
    want = buckets(np.stack([w[0] for w in ref]), np.stack([w[1] for w in ref]))
    out = []
    print(f"\nbatches of {a.batch_docs:,} documents ({len(qs[0]) // BANDS} keys a band, {len(sections[0]) // BANDS:,} entries a band a section): {'layout':>10} {'threads':>8} {'wall us / doc (best)':>22} {'CPU us / doc (best)':>21}")  # fmt: skip
    # --sparse-gaps: the same batches with each threshold of entries a key above which a
    # section is searched in lockstep instead of by the gallop (1: lockstep everywhere; a
    # large value: the gallop everywhere), the packed layout only
    gaps = [int(g) for g in a.sparse_gaps.split(",")] if a.sparse_gaps else [None]
    runs = [(layout, group, None) for layout, group in groups.items()] if gaps == [None] else [
        ("packed", groups["packed"], g) for g in gaps
    ]  # fmt: skip
    default_gap = section_search._SPARSE_GAP
    for layout, group, gap in runs:
        section_search._SPARSE_GAP = default_gap if gap is None else gap
        for threads in sorted({1, max_threads()}):
            with kernel_threads(threads):
                assert hits(group.search(qs[0])) == want
                walls, cpus = [], []
                for _ in range(a.rounds):
                    c0, t0 = cpu(), time.perf_counter()
                    for uk in qs:
                        group.gather(group.search(uk), np.zeros(uk.size, np.bool_))
                    walls.append((time.perf_counter() - t0) / (a.batches * a.batch_docs) * 1e6)
                    cpus.append((cpu() - c0) / (a.batches * a.batch_docs) * 1e6)
            row = {"layout": layout, "threads": threads, "wall_us_per_doc": min(walls), "cpu_us_per_doc": min(cpus)}  # fmt: skip
            if gap is not None:
                row["sparse_gap"] = gap
            out.append(row)
            label = layout if gap is None else f"{layout}, gap {gap}"
            print(f"{'':>30} {label:>20} {threads:>8} {row['wall_us_per_doc']:22.1f} {row['cpu_us_per_doc']:21.1f}")  # fmt: skip
    section_search._SPARSE_GAP = default_gap
    return out


def main() -> None:
    from bench_dedup import write_results

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segments", type=int, default=11)
    ap.add_argument("--rows", type=int, default=90_000, help="rows a segment")
    ap.add_argument("--queries", type=int, default=3000, help="single requests timed")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch-docs", type=int, default=1000, help="documents a batch (0: none)")
    ap.add_argument(
        "--batches", type=int, default=8, help="batches timed per round (0: no batch section)"
    )
    ap.add_argument(
        "--sparse-gaps",
        help="comma-separated entries a key from which a batch searches a section in lockstep "
        "(e.g. 100000,1: the gallop everywhere, then lockstep everywhere); default: neardup's",
    )
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_section_search.json"
    )
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    t = time.perf_counter()
    sections = build(a.rows, a.segments, rng)
    group = SectionGroup(sections)  # unpacked: searched as 4-byte keys without a directory
    packed = [pack_section(s.offsets, s.keys, s.rows, a.rows, s.rowids) for s in sections]
    pgroup = SectionGroup(packed)
    entries = sum(len(s) for s in sections)
    per_entry = {
        "unpacked": sum(s.nbytes for s in sections) / entries,
        "packed": sum(p.nbytes for p in packed) / entries,
    }
    qs = requests(sections, a.queries, rng)
    print(f"built {a.segments} sections of {a.rows:,} rows x {BANDS} bands in {time.perf_counter() - t:.1f} s")  # fmt: skip
    print(f"bytes an entry: unpacked {per_entry['unpacked']:.2f}, packed {per_entry['packed']:.2f} (a {packed[0].dbits}-bit directory, {packed[0].kbits}-bit keys, {packed[0].rbits}-bit rows)")  # fmt: skip
    no_dirs = np.zeros(0, np.uint32)

    def sequential(uk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        res = [sequential_kernel(s.offsets, s.keys, s.keys.view(np.uint8), uk) for s in sections]
        return np.stack([r[0] for r in res]), np.stack([r[1] for r in res])

    def one_by_one(uk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        res = [
            _section_interp_kernel(s.offsets, 0, no_dirs, s.keys.view(np.uint8), 32, uk)
            for s in sections
        ]
        return np.stack([r[0] for r in res]), np.stack([r[1] for r in res])

    ways = (
        ("one after another", sequential),
        ("lockstep, a call a section", one_by_one),
        ("lockstep, one call, unpacked", group.search),
        ("lockstep, one call, packed", pgroup.search),
    )

    for uk in qs[:50]:  # each equals the reference
        want = [section_search_reference(s.offsets, s.keys, uk) for s in sections]
        wl, wh = np.stack([w[0] for w in want]), np.stack([w[1] for w in want])
        for _, fn in ways:
            got = fn(uk)
            mine = buckets(*got) if isinstance(got, tuple) else hits(got)
            assert mine == buckets(wl, wh), fn
    rows = []
    for name, fn in ways:
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
    print(f"{'way':36} {'ns / search (best)':>20} {'CPU us / request (best)':>25}")
    best: dict[str, dict[str, float]] = {}
    for name, _ in ways:
        mine = [r for r in rows if r["way"] == name]
        best[name] = {
            "ns_per_search": min(r["ns_per_search"] for r in mine),
            "cpu_us_per_request": min(r["cpu_us_per_request"] for r in mine),
        }
        print(f"{name:36} {best[name]['ns_per_search']:20.1f} {best[name]['cpu_us_per_request']:25.1f}")  # fmt: skip
    layouts = {"unpacked": group, "packed": pgroup}
    batch_rows = batches(layouts, sections, a, rng) if a.batch_docs and a.batches else []
    out = {
        "benchmark": "bench_section_search",
        "machine": machine(),
        "params": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
        "bands": BANDS,
        "bytes_per_entry": per_entry,
        "rows": rows,
        "best": best,
        "batches": batch_rows,
    }
    write_results(a.out, out)


if __name__ == "__main__":
    main()
