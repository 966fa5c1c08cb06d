#!/usr/bin/env python3
"""Dedup quality on the labelled dev set, scored the way a user runs it, vs datasketch.

Index every document of ``docs.jsonl``, run :func:`neardup.dedup` on **defaults**, take every
pair it *reports* (exact + verified near pairs; pairs implied only by cluster transitivity are
not counted) and score: recall over the label-1 pairs of ``pairs.csv``; precision over the
reported pairs that carry a label (``ambiguous_pairs.csv`` is ignored); reported pairs without a
label are counted. Overall and by en / zh / short (shorter text < 200 chars) / long.

In the same run: datasketch MinHashLSH (3-gram word shingles — character 3-grams for Chinese —,
threshold 0.5, num_perm 128), all its query results scored the same way, with wall time.

    python benchmarks/quality_dedup.py [--data ../shared/data/dev] [--no-datasketch]

Prints a table and writes ``benchmarks/results/quality_dedup.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from neardup.dedup import DedupConfig, dedup  # noqa: E402
from neardup.evaluate import load_labels, score_reported  # noqa: E402

SLICES = ("overall", "en", "zh", "short", "long")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"\w+", re.UNICODE)


def load_docs(path: Path) -> tuple[list[str], list[str], dict[str, str]]:
    ids, texts, langs = [], [], {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            ids.append(r["id"])
            texts.append(r["text"])
            langs[r["id"]] = r.get("lang", "en")
    return ids, texts, langs


def run_neardup(
    ids: list[str], texts: list[str], **overrides: object
) -> tuple[list[tuple[str, str]], float, dict]:
    t0 = time.perf_counter()
    result = dedup(texts, ids=ids, config=DedupConfig(**overrides))  # type: ignore[arg-type]
    elapsed = time.perf_counter() - t0
    pairs = [
        (ids[a], ids[b])
        for a, b in zip(result.pairs.a.tolist(), result.pairs.b.tolist(), strict=True)
    ]
    return pairs, elapsed, result.stats


def _shingles(text: str, lang: str) -> set[bytes]:
    t = text.lower()
    toks = [c for c in t if not c.isspace()] if lang == "zh" else _WORD.findall(t)
    if len(toks) < 3:
        return {" ".join(toks).encode()} if toks else set()
    return {" ".join(toks[i : i + 3]).encode() for i in range(len(toks) - 2)}


def run_datasketch(
    ids: list[str], texts: list[str], langs: dict[str, str]
) -> tuple[list[tuple[str, str]], float]:
    from datasketch import MinHash, MinHashLSH

    t0 = time.perf_counter()
    lsh = MinHashLSH(threshold=0.5, num_perm=128)
    sigs = []
    for doc_id, text in zip(ids, texts, strict=True):
        m = MinHash(num_perm=128)
        m.update_batch(list(_shingles(text, langs[doc_id])))
        lsh.insert(doc_id, m)
        sigs.append(m)
    pairs = set()
    for doc_id, m in zip(ids, sigs, strict=True):
        for other in lsh.query(m):
            if other != doc_id:
                pairs.add((min(doc_id, other), max(doc_id, other)))
    return sorted(pairs), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "dev")
    ap.add_argument("--no-datasketch", action="store_true")
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "quality_dedup.json"
    )
    args = ap.parse_args()
    if not (args.data / "docs.jsonl").exists():
        sys.exit(f"dev data not found at {args.data}")
    ids, texts, langs = load_docs(args.data / "docs.jsonl")
    labels = load_labels(args.data / "pairs.csv")
    lengths = {i: len(t) for i, t in zip(ids, texts, strict=True)}
    results: dict[str, dict] = {}
    pairs, el, stats = run_neardup(ids, texts)
    results["neardup (defaults)"] = {
        **score_reported(pairs, labels, langs, lengths),
        "wall_s": round(el, 2),
    }
    results["neardup (defaults)"]["timings_s"] = stats["timings_s"]
    results["neardup (defaults)"]["candidates"] = stats["candidates"]
    if not args.no_datasketch:
        try:
            pairs, el = run_datasketch(ids, texts, langs)
            results["datasketch MinHashLSH t=0.5"] = {
                **score_reported(pairs, labels, langs, lengths),
                "wall_s": round(el, 2),
            }
        except ImportError:
            print("datasketch not installed (pip install -r benchmarks/requirements-dedup.txt)")
    print(f"{'system':<30} {'slice':<8} {'P':>7} {'R':>7} {'F1':>7}")
    for name, r in results.items():
        for s in SLICES:
            if s in r:
                print(
                    f"{name:<30} {s:<8} {r[s]['precision']:>7.4f} {r[s]['recall']:>7.4f} {r[s]['f1']:>7.4f}"
                )
        print(f"{name:<30} reported={r['reported']} unlabeled={r['unlabeled']} wall={r['wall_s']}s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"docs": len(ids), "results": results}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
