#!/usr/bin/env python3
"""SimHash floods: how often two unrelated long texts fall within the SimHash pass's distance,
in the dev set's real text and in ``bench_window.py``'s generated window, by length.

A long text (``short_chars`` characters or more) is searched at the pass's distance (3 bits on
defaults) in batch and online alike. Every stored text within it is a candidate that the
length bound, the histogram bound or the verifier must turn down, so the chance rate a pair
times the window's long rows is what a long query costs. At 10 M the longest generated texts
draw hundreds of such hits a query (docs/service.md, *The 50 M tail, traced*); this study
asks whether that is the generator's doing or what real text does.

For each group of texts (the dev set's documents of a length band, and ``--per-band`` of the
generated window's, seed 1): every pair's SimHash distance (the store's fingerprints,
``Deduplicator.prepare`` of an ``lsh`` store), the pairs within the distance, and of those the
ones no label names (dev: ``pairs.csv``, any label) whose verifier similarity is below the
threshold: *chance pairs*. Their rate is per pair of the group.

    python benchmarks/study_simhash_floods.py [--data ../shared/data/dev] [--per-band 3000]

Prints a table and writes ``benchmarks/results/study_simhash_floods.json``. The dev rows are
skipped (and said so) where the dev set is absent.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

BANDS = ((200, 1000), (1000, 3000), (3000, None))


def close_pairs(fps: np.ndarray, distance: int) -> list[tuple[int, int, int]]:
    """Every pair (i < j) of ``fps`` (uint64) within ``distance`` bits, by brute force."""
    out: list[tuple[int, int, int]] = []
    for i in range(len(fps) - 1):
        d = np.bitwise_count(fps[i] ^ fps[i + 1 :])
        for j in np.flatnonzero(d <= distance).tolist():
            out.append((i, i + 1 + j, int(d[j])))
    return out


def study(
    d: Any, verifier: Any, ids: list[str], texts: list[str], labelled: set[frozenset[str]],
    distance: int, threshold: float,
) -> dict[str, Any]:  # fmt: skip
    """The figures of one group of texts."""
    p = d.prepare([{"id": i, "text": t} for i, t in zip(ids, texts, strict=True)])
    fps = np.asarray(p.fps, dtype=np.uint64)
    close = close_pairs(fps, distance)
    unlabelled = [(i, j) for i, j, _ in close if frozenset((ids[i], ids[j])) not in labelled]
    chance = sum(verifier.similarity(texts[i], texts[j]) < threshold for i, j in unlabelled)
    n = len(texts)
    pairs = n * (n - 1) // 2
    lens = np.fromiter(map(len, texts), np.int64, n)
    return {
        "texts": n,
        "chars_p50": float(np.median(lens)) if n else None,
        "pairs": pairs,
        "within_distance": len(close),
        "unlabelled_within": len(unlabelled),
        "chance_pairs": int(chance),
        "chance_rate": chance / pairs if pairs else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=Path(os.environ.get("NEARDUP_DEV_DATA", ROOT.parent / "shared" / "data" / "dev")))  # fmt: skip
    p.add_argument("--per-band", type=int, default=3000, help="generated texts a length band")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "study_simhash_floods.json")  # fmt: skip
    a = p.parse_args(argv)
    import window_corpus as wc
    from bench_dedup import machine, write_results

    from neardup.online import Deduplicator
    from neardup.rules.plan import simhash_pass_distance
    from neardup.verify import Verifier

    distance = simhash_pass_distance(None)
    verifier = Verifier()
    threshold = verifier.threshold
    groups: list[tuple[str, str, list[str], list[str], set[frozenset[str]]]] = []
    docs = a.data / "docs.jsonl"
    if docs.exists():
        dev = [
            json.loads(x) for x in docs.read_text(encoding="utf-8").split("\n") if x
        ]  # (not splitlines: texts hold U+2028)
        with open(a.data / "pairs.csv", newline="", encoding="utf-8") as fh:
            labelled = {frozenset((r["id_a"], r["id_b"])) for r in csv.DictReader(fh)}
        for lo, hi in BANDS:
            sel = [x for x in dev if len(x["text"]) >= lo and (hi is None or len(x["text"]) < hi)]
            band = f"{lo}-{hi or ''}"
            groups.append(("dev", band, [x["id"] for x in sel], [x["text"] for x in sel], labelled))  # fmt: skip
    else:
        print(f"{a.data}: no dev set (docs.jsonl); its rows are skipped")
    generated = wc.texts_by_length(wc.WindowSpec(n=10_000_000), BANDS, a.per_band, 2_000_000)
    for b, ts in zip(BANDS, generated, strict=True):
        groups.append(("generated", f"{b[0]}-{b[1] or ''}", [f"g{i}" for i in range(len(ts))], ts, set()))  # fmt: skip

    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, Deduplicator.open(Path(tmp) / "store", candidates="lsh") as d:  # fmt: skip
        for source, band, ids, texts, lab in groups:
            r = study(d, verifier, ids, texts, lab, distance, threshold)
            rows.append({"source": source, "chars": band, **r})
    print(f"pairs within {distance} bits of SimHash; chance: no label names them and the verifier's similarity is below {threshold}")  # fmt: skip
    head = f"{'source':10} {'chars':>10} {'texts':>6} {'chars p50':>9} {'within':>7} {'unlabelled':>10} {'chance':>7} {'chance a pair':>14}"  # fmt: skip
    print(head)
    for r in rows:
        rate = "-" if r["chance_rate"] is None else f"{r['chance_rate']:.2e}"
        print(f"{r['source']:10} {r['chars']:>10} {r['texts']:>6,} {r['chars_p50'] or 0:>9,.0f} {r['within_distance']:>7,} {r['unlabelled_within']:>10,} {r['chance_pairs']:>7,} {rate:>14}")  # fmt: skip
    write_results(a.out, {
        "benchmark": "study_simhash_floods", "machine": machine(), "distance": distance,
        "threshold": threshold, "seconds": round(time.perf_counter() - t0, 1), "rows": rows,
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
