"""Quality signal for fingerprint feature modes on the labelled dev pairs.

For each feature mode, fingerprint every doc of ``docs.jsonl`` and report, per slice
(all / en / zh x short (< 200 chars, shorter doc of the pair) / long), the Hamming-distance
distribution of labelled positives vs negatives (percentiles) and precision / recall of the
rule ``distance <= k`` for k = 3, 6, 10. ``ambiguous_pairs.csv`` is ignored.

Usage::

    .venv/bin/python benchmarks/quality_fingerprint.py [--data ../shared/data/dev] [--bits 64]

Prints a markdown table and writes ``benchmarks/results/quality_fingerprint.json``.

``--vs auto`` also prints, per mode and language, the recall each mode reaches at the precision
of the baseline mode at k = 6 and 10 (the largest recall over k = 0..24 with precision >= the
baseline's): weights compared at equal precision, not at equal k.
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
    # issue 37: TextRank weights beside tf and tf-idf ("idf": "dev" builds the table from the dev
    # documents themselves, as `neardup idf build --features auto` does: an in-corpus IDF)
    "auto-tfidf-dev": dict(features="auto", weights="tfidf", idf="dev"),
    "auto-textrank": dict(features="auto", weights="textrank"),
    "jieba-tfidf-dev": dict(features="jieba", weights="tfidf", idf="dev"),
    "jieba-textrank": dict(features="jieba", weights="textrank"),
}
KS = (3, 6, 10)
#: modes --vs compares with a baseline at equal precision
CURVE_KS = range(0, 25)


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


def dev_idf(texts: list[str], out: Path) -> str:
    """An IDF table of ``texts`` (``neardup idf build --features auto``: jieba words for
    Chinese, words otherwise) written to ``out``."""
    from neardup.text.tokenize import detect_lang, jieba_words, words
    from neardup.text.weights import build_idf

    table = build_idf(jieba_words(t) if detect_lang(t) == "zh" else words(t) for t in texts)
    table.save(out)
    return str(out)


def curve(dist: np.ndarray, y: np.ndarray) -> list[tuple[int, float, float]]:
    """(k, precision, recall) of ``distance <= k`` for k in CURVE_KS."""
    out = []
    for k in CURVE_KS:
        hit = dist <= k
        tp, fp = int((hit & y).sum()), int((hit & ~y).sum())
        out.append((k, tp / (tp + fp) if tp + fp else 1.0, tp / max(int(y.sum()), 1)))
    return out


def recall_at(c: list[tuple[int, float, float]], precision: float) -> tuple[float, int]:
    """The largest recall (and its k) whose precision is at least ``precision``."""
    best = max(((r, k) for k, p, r in c if p >= precision), default=(0.0, -1))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "dev")
    ap.add_argument("--bits", type=int, default=64)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--vs", default=None, help="baseline mode for the equal-precision table")
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
    curves: dict[str, dict[str, list[tuple[int, float, float]]]] = {}
    modes = args.modes.split(",")
    if args.vs and args.vs not in modes:
        modes.insert(0, args.vs)
    import tempfile

    tmp = tempfile.TemporaryDirectory()
    for mode in modes:
        opts = dict(MODES[mode])
        if opts.get("idf") == "dev":
            opts["idf"] = dev_idf(texts, Path(tmp.name) / "dev_idf.txt")
        fp = neardup.Fingerprinter(args.bits, **opts)
        t0 = time.perf_counter()
        c0 = time.process_time()
        fps = fp.fingerprint_many(texts)
        dt = time.perf_counter() - t0
        cpu = time.process_time() - c0
        dist = hamming_many(fps[a], fps[b])
        curves[mode] = {lg: curve(dist[slices[lg]], y[slices[lg]]) for lg in ("en", "zh", "all")}
        res = {"seconds": dt, "cpu_seconds": cpu, "docs_per_cpu_s": len(texts) / cpu, "slices": {}}
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
    if args.vs:
        base = curves[args.vs]
        print(f"\nrecall at {args.vs}'s precision at k = 6 and 10 (k reached in brackets)\n")
        print(
            "| mode | slice | P (base k=6) | R base | R mode | P (base k=10) | R base | R mode |"
            " docs/CPU-s |"
        )
        print("|---|---|---|---|---|---|---|---|---:|")
        results["equal_precision"] = {"baseline": args.vs, "modes": {}}
        for mode in modes:
            rows = {}
            for lg in ("en", "zh", "all"):
                cells = []
                row = {}
                for k in (6, 10):
                    _, p, r = base[lg][k]
                    rm, km = recall_at(curves[mode][lg], p)
                    cells.append(f"{p:.3f} | {r:.3f} | {rm:.3f} (k={km})")
                    row[f"k{k}"] = {"precision": p, "recall_base": r, "recall": rm, "k": km}
                rows[lg] = row
                rate = results["modes"][mode]["docs_per_cpu_s"]
                print(f"| {mode} | {lg} | " + " | ".join(cells) + f" | {rate:,.0f} |")
            results["equal_precision"]["modes"][mode] = rows
    tmp.cleanup()
    import os
    import platform

    results["machine"] = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load": [round(x, 2) for x in os.getloadavg()],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
