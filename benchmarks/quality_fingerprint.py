"""Quality signal for fingerprint feature modes on the labelled dev pairs.

For each feature mode, fingerprint every doc of ``docs.jsonl`` and report, per slice
(all / en / zh x short (< 200 chars, shorter doc of the pair) / long), the Hamming-distance
distribution of labelled positives vs negatives (percentiles) and precision / recall of the
rule ``distance <= k`` for k = 3, 6, 10. ``ambiguous_pairs.csv`` is ignored.

Usage::

    .venv/bin/python benchmarks/quality_fingerprint.py [--data ../shared/data/dev] [--bits 64]

Prints a markdown table and writes ``benchmarks/results/quality_fingerprint.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import numpy as np

import neardup
from neardup.fingerprint.distance import hamming_many

ROOT = Path(__file__).resolve().parents[1]
MODES: dict[str, dict] = {
    "words": dict(features="words"),
    "shingles2": dict(features="shingles", ngram=2),
    "shingles3": dict(features="shingles", ngram=3),
    "chars2": dict(features="chars", ngram=2),
    "chars3": dict(features="chars", ngram=3),
    "chars4": dict(features="chars", ngram=4),
    "jieba": dict(features="jieba", ngram=1),
    "jieba2": dict(features="jieba", ngram=2),
    "words+stop": dict(features="words", stopwords=True),
    "jieba-tfidf": dict(features="jieba", weights="tfidf"),
    "auto": dict(features="auto"),
}
KS = (3, 6, 10)


def load(
    data: Path,
) -> tuple[dict[str, int], list[str], list[str], np.ndarray, np.ndarray, np.ndarray]:
    ids: dict[str, int] = {}
    texts: list[str] = []
    langs: list[str] = []
    with open(data / "docs.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            ids[d["id"]] = len(texts)
            texts.append(d["text"])
            langs.append(d["lang"])
    a, b, y = [], [], []
    with open(data / "pairs.csv", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row["id_a"] in ids and row["id_b"] in ids:
                a.append(ids[row["id_a"]])
                b.append(ids[row["id_b"]])
                y.append(int(row["label"]))
    return ids, texts, langs, np.array(a), np.array(b), np.array(y, bool)


def slice_stats(dist: np.ndarray, y: np.ndarray) -> dict:
    out: dict = {"n_pos": int(y.sum()), "n_neg": int((~y).sum())}
    for name, m in (("pos", y), ("neg", ~y)):
        if m.any():
            out[f"{name}_pct"] = {
                str(q): float(np.percentile(dist[m], q)) for q in (10, 25, 50, 75, 90)
            }
    for k in KS:
        hit = dist <= k
        tp = int((hit & y).sum())
        fp = int((hit & ~y).sum())
        out[f"p@{k}"] = tp / (tp + fp) if tp + fp else float("nan")
        out[f"r@{k}"] = tp / int(y.sum()) if y.any() else float("nan")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "dev")
    ap.add_argument("--bits", type=int, default=64)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "quality_fingerprint.json"
    )
    args = ap.parse_args()
    _, texts, langs, a, b, y = load(args.data)
    lens = np.array([len(t) for t in texts])
    lang = np.array(langs)
    short = np.minimum(lens[a], lens[b]) < 200
    slices = {
        "all": np.ones(len(a), bool),
        "en": lang[a] == "en",
        "zh": lang[a] == "zh",
        "en-short": (lang[a] == "en") & short,
        "en-long": (lang[a] == "en") & ~short,
        "zh-short": (lang[a] == "zh") & short,
        "zh-long": (lang[a] == "zh") & ~short,
    }
    results: dict = {"data": str(args.data), "bits": args.bits, "n_pairs": len(a), "modes": {}}
    print(f"{len(texts)} docs, {len(a)} labelled pairs ({int(y.sum())} positive)\n")
    print("| mode | slice | pos p50/p90 | neg p10/p50 | P@3 | R@3 | P@6 | R@6 | P@10 | R@10 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mode in args.modes.split(","):
        fp = neardup.Fingerprinter(args.bits, **MODES[mode])
        t0 = time.perf_counter()
        fps = fp.fingerprint_many(texts)
        dt = time.perf_counter() - t0
        dist = hamming_many(fps[a], fps[b])
        res = {"seconds": dt, "slices": {}}
        for sname, m in slices.items():
            st = slice_stats(dist[m], y[m])
            res["slices"][sname] = st
            pp = st.get("pos_pct", {})
            nn = st.get("neg_pct", {})
            print(
                f"| {mode} | {sname} | {pp.get('50', float('nan')):.0f}/{pp.get('90', float('nan')):.0f} "
                f"| {nn.get('10', float('nan')):.0f}/{nn.get('50', float('nan')):.0f} | "
                + " | ".join(f"{st[f'p@{k}']:.3f} | {st[f'r@{k}']:.3f}" for k in KS)
                + " |"
            )
        results["modes"][mode] = res
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
