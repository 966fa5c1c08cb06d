#!/usr/bin/env python3
"""``np.unique`` (numpy's own path) against :func:`neardup._arrays.unique_sorted` (sort + compare),
and ``np.unique(..., return_inverse=True)`` against :func:`neardup._arrays.unique_inverse` (one
sort of each value with its position in the low bits).

numpy 2.3+ answers ``np.unique(a)`` without ``return_*`` options with a hash table; on the int64
positions and uint64 prefixes the dedup pipeline deduplicates (1-4 M values) that path was
tens of times slower than sorting on this 2-core box; with ``return_inverse`` it sorts with a
stable argsort, up to 3x slower than a sort that carries the positions in the values' low bits
(the band keys a store's check looks up: 79 per document, in runs its argsort exploits; about
even on unordered values); ``np.lexsort`` against :func:`neardup._arrays.sorted_pairs` on a check's (query, row)
candidate pairs. This prints both, per shape, and writes
``benchmarks/results/bench_unique.json``. (A bigger machine changes the absolute times, not
which is faster: both are single-threaded.)

    python benchmarks/bench_unique.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from neardup._arrays import sorted_pairs, unique_inverse, unique_sorted  # noqa: E402


def best_of(fn, reps: int = 3) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    from bench_dedup import machine  # the machine every benchmark's JSON records

    rng = np.random.default_rng(0)
    cases = {
        "sorted positions, 1 M int64": np.arange(1_000_000, dtype=np.int64),
        "pair endpoints, 4 M int64 of 1 M": rng.integers(0, 1_000_000, 4_000_000),
        "24-bit prefixes, 1 M uint64": rng.integers(0, 2**63, 1_000_000).astype(np.uint64)
        >> np.uint64(40),
    }
    rows = []
    print(f"numpy {np.__version__}")
    print(f"{'case':36} {'np.unique s':>12} {'unique_sorted s':>16} {'ratio':>7}")
    for name, a in cases.items():
        assert np.array_equal(np.unique(a), unique_sorted(a))
        t_np = best_of(lambda a=a: np.unique(a))
        t_us = best_of(lambda a=a: unique_sorted(a))
        rows.append({"case": name, "np_unique_s": t_np, "unique_sorted_s": t_us})
        print(f"{name:36} {t_np:12.3f} {t_us:16.3f} {t_np / t_us:7.1f}")
    # the band keys of a check: 79 per document, 48-bit compact keys (band << 32 | key)
    inv_rows = []
    print(f"{'return_inverse case':36} {'np.unique s':>12} {'unique_inverse s':>16} {'ratio':>7}")
    for docs in (1_000, 10_000, 100_000):
        keys = (np.arange(79, dtype=np.uint64) << np.uint64(32)) | rng.integers(
            0, 2**32, (docs, 79), dtype=np.uint64
        )
        a = keys.reshape(-1)
        u0, i0 = np.unique(a, return_inverse=True)
        u1, i1 = unique_inverse(a)
        assert np.array_equal(u0, u1) and np.array_equal(i0.reshape(-1), i1)
        t_np = best_of(lambda a=a: np.unique(a, return_inverse=True))
        t_ui = best_of(lambda a=a: unique_inverse(a))
        name = f"band keys of {docs:,} documents"
        inv_rows.append({"case": name, "np_unique_inverse_s": t_np, "unique_inverse_s": t_ui})
        print(f"{name:36} {t_np:12.4f} {t_ui:16.4f} {t_np / t_ui:7.1f}")
    a = rng.integers(0, 2**48, 790_000).astype(np.uint64)
    t_np = best_of(lambda: np.unique(a, return_inverse=True))
    t_ui = best_of(lambda: unique_inverse(a))
    name = "790 k unordered 48-bit values"
    inv_rows.append({"case": name, "np_unique_inverse_s": t_np, "unique_inverse_s": t_ui})
    print(f"{name:36} {t_np:12.4f} {t_ui:16.4f} {t_np / t_ui:7.1f}")
    # a check's candidate pairs: (query, row id), 40 a document, rows of a 1 M store
    pair_rows = []
    print(f"{'pairs case':36} {'np.lexsort s':>12} {'sorted_pairs s':>16} {'ratio':>7}")
    for docs in (1_000, 10_000, 100_000):
        qi = np.repeat(np.arange(docs, dtype=np.int64), 40)
        rr = rng.integers(0, 1_000_000, qi.size)
        order = np.lexsort((rr, qi))
        got = sorted_pairs(qi, rr)
        assert np.array_equal(got[0], qi[order]) and np.array_equal(got[1], rr[order])
        t_np = best_of(lambda qi=qi, rr=rr: np.lexsort((rr, qi)))
        t_sp = best_of(lambda qi=qi, rr=rr: sorted_pairs(qi, rr))
        name = f"candidate pairs of {docs:,} documents"
        pair_rows.append({"case": name, "np_lexsort_s": t_np, "sorted_pairs_s": t_sp})
        print(f"{name:36} {t_np:12.4f} {t_sp:16.4f} {t_np / t_sp:7.1f}")
    out = ROOT / "benchmarks" / "results" / "bench_unique.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "numpy": np.__version__,
        "machine": machine(load_average=True),
        "rows": rows,
        "inverse_rows": inv_rows,
        "pair_rows": pair_rows,
    }
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
