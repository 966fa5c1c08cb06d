#!/usr/bin/env python3
"""Dedup quality on the labelled dev set, scored the way a user runs it, vs datasketch.

Index every document of ``docs.jsonl``, run :func:`neardup.dedup` on **defaults**, take every
pair it *reports* (exact + verified near pairs; pairs implied only by cluster transitivity are
not counted) and score: recall over the label-1 pairs of ``pairs.csv``; precision over the
reported pairs that carry a label (``ambiguous_pairs.csv`` is ignored); reported pairs without a
label are counted. Overall and by en / zh / short (shorter text < 200 chars) / long.

In the same run: datasketch MinHashLSH (3-gram word shingles — character 3-grams for Chinese —,
or with ``--datasketch-shingles char3`` character 3-grams for every text; threshold 0.5,
num_perm 128), all its query results scored the same way, with wall time.

    python benchmarks/quality_dedup.py [--data ../shared/data/dev] [--no-datasketch]

Quality at scale: ``--mix N`` mixes the dev documents, at random positions (seeded), into ``N``
generated documents (``bench_dedup.generate``: the topic mixture calibrated against the dev set,
``--long-share`` of them ~3.5 KB documents, the rest ~100-character posts, 10 % planted
duplicates) and scores the same dev pairs, for each of ``--modes`` (``lsh``: the default
candidates; ``simhash``: the SimHash-only candidates under the work budget), plus the planted
pairs' recall. datasketch runs only with ``--mix 0`` unless ``--datasketch-mixed``.

    python benchmarks/quality_dedup.py --mix 100000 --modes lsh,simhash --no-datasketch

Prints a table and writes ``benchmarks/results/quality_dedup.json`` (``quality_dedup_mix<N>.json``
with ``--mix``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from neardup.batch.evaluate import load_labels, score_reported  # noqa: E402
from neardup.batch.run import dedup  # noqa: E402
from neardup.rules.config import DedupConfig  # noqa: E402

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
    """Run dedup; reported pairs as ids (``stats["cpu_s"]``: the process's CPU time during it,
    all threads)."""
    t0, c0 = time.perf_counter(), time.process_time()
    result = dedup(texts, ids=ids, config=DedupConfig(**overrides))  # type: ignore[arg-type]
    elapsed = time.perf_counter() - t0
    result.stats["cpu_s"] = round(time.process_time() - c0, 2)
    pairs = [
        (ids[a], ids[b])
        for a, b in zip(result.pairs.a.tolist(), result.pairs.b.tolist(), strict=True)
    ]
    return pairs, elapsed, result.stats


def _shingles(text: str, lang: str, kind: str = "word3") -> set[bytes]:
    t = text.lower()
    if kind == "char3":  # character 3-grams of the whitespace-collapsed text, any language
        c = " ".join(t.split())
        if len(c) < 3:
            return {c.encode()} if c else set()
        return {c[i : i + 3].encode() for i in range(len(c) - 2)}
    toks = [c for c in t if not c.isspace()] if lang == "zh" else _WORD.findall(t)
    if len(toks) < 3:
        return {" ".join(toks).encode()} if toks else set()
    return {" ".join(toks[i : i + 3]).encode() for i in range(len(toks) - 2)}


def run_datasketch(
    ids: list[str], texts: list[str], langs: dict[str, str], shingles: str = "word3"
) -> tuple[list[tuple[str, str]], float]:
    from datasketch import MinHash, MinHashLSH

    t0 = time.perf_counter()
    lsh = MinHashLSH(threshold=0.5, num_perm=128)
    sigs = []
    for doc_id, text in zip(ids, texts, strict=True):
        m = MinHash(num_perm=128)
        m.update_batch(list(_shingles(text, langs.get(doc_id, "en"), shingles)))
        lsh.insert(doc_id, m)
        sigs.append(m)
    pairs = set()
    for doc_id, m in zip(ids, sigs, strict=True):
        for other in lsh.query(m):
            if other != doc_id:
                pairs.add((min(doc_id, other), max(doc_id, other)))
    return sorted(pairs), time.perf_counter() - t0


def mix_corpus(
    ids: list[str], texts: list[str], n: int, long_share: float, seed: int
) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """The dev documents at random positions among ``n`` generated ones: (ids, texts, planted
    generated near-duplicate pairs as ids)."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_dedup import generate

    gen_ids: list[str] = []
    gen_texts: list[str] = []
    planted: list[tuple[str, str]] = []
    n_long = round(n * long_share)
    for kind, m in (("short", n - n_long), ("long", n_long)):
        if m <= 0:
            continue
        got: list[tuple[int, int]] = []
        t = generate(kind, m, seed + (kind == "long"), 0.1, got)
        base = len(gen_ids)
        gen_ids.extend(f"g{kind[0]}{i}" for i in range(m))
        gen_texts.extend(t)
        planted.extend((gen_ids[base + a], gen_ids[base + b]) for a, b in got)
    rng = np.random.default_rng(seed)
    total = len(gen_ids) + len(ids)
    is_dev = np.zeros(total, bool)
    is_dev[rng.choice(total, len(ids), replace=False)] = True
    out_ids: list[str] = []
    out_texts: list[str] = []
    gi = di = 0
    for d in is_dev.tolist():
        if d:
            out_ids.append(ids[di])
            out_texts.append(texts[di])
            di += 1
        else:
            out_ids.append(gen_ids[gi])
            out_texts.append(gen_texts[gi])
            gi += 1
    return out_ids, out_texts, planted


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "dev")
    ap.add_argument("--no-datasketch", action="store_true")
    ap.add_argument(
        "--mix", type=int, default=0, help="generated documents to mix the dev set into"
    )
    ap.add_argument("--long-share", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--modes", default="lsh", help="comma list of candidates modes: lsh,simhash")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--datasketch-mixed", action="store_true")
    ap.add_argument(
        "--datasketch-shingles",
        choices=["word3", "char3"],
        default="word3",
        help="datasketch's shingles: word 3-grams (zh: char 3-grams) or char 3-grams for all",
    )
    ap.add_argument(
        "--lsh-bands",
        type=int,
        default=None,
        help="expert: MinHash bands of the lsh run (default: the planner's; fewer bands mean "
        "fewer band keys a stored document, at the recall the plan states)",
    )
    ap.add_argument(
        "--lsh-rows", type=int, default=None, help="expert: rows a band (with --lsh-bands)"
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.out is None:
        name = f"quality_dedup_mix{args.mix}.json" if args.mix else "quality_dedup.json"
        args.out = ROOT / "benchmarks" / "results" / name
    if not (args.data / "docs.jsonl").exists():
        sys.exit(f"dev data not found at {args.data}")
    ids, texts, langs = load_docs(args.data / "docs.jsonl")
    labels = load_labels(args.data / "pairs.csv")
    lengths = {i: len(t) for i, t in zip(ids, texts, strict=True)}
    planted: list[tuple[str, str]] = []
    if args.mix:
        t0 = time.perf_counter()
        ids, texts, planted = mix_corpus(ids, texts, args.mix, args.long_share, args.seed)
        print(
            f"mixed {len(ids):,} documents ({args.mix:,} generated) in {time.perf_counter() - t0:.1f}s"
        )
    results: dict[str, dict] = {}
    for mode in args.modes.split(","):
        name = "neardup (defaults)" if mode == "lsh" else f"neardup (candidates={mode})"
        plan_over: dict[str, object] = {}
        if mode == "lsh" and (args.lsh_bands or args.lsh_rows):
            plan_over = {"lsh_bands": args.lsh_bands, "lsh_rows": args.lsh_rows}
            name = f"neardup (lsh bands={args.lsh_bands} rows={args.lsh_rows})"
        pairs, el, stats = run_neardup(
            ids, texts, candidates=mode, workers=args.workers, **plan_over
        )
        results[name] = {**score_reported(pairs, labels, langs, lengths), "wall_s": round(el, 2)}
        results[name]["timings_s"] = stats["timings_s"]
        results[name]["cpu_s"] = stats["cpu_s"]
        results[name]["candidates"] = stats["candidates"]
        results[name]["candidate_passes"] = stats["candidate_passes"]
        if "lsh" in stats:
            results[name]["lsh"] = stats["lsh"]
        if "promise" in stats:
            results[name]["promise"] = stats["promise"]
        if planted:
            got = set(pairs)
            results[name]["planted_recall"] = round(
                sum((a, b) in got or (b, a) in got for a, b in planted) / len(planted), 4
            )
        del pairs
    if not args.no_datasketch and (not args.mix or args.datasketch_mixed):
        try:
            pairs, el = run_datasketch(ids, texts, langs, args.datasketch_shingles)
            results[f"datasketch MinHashLSH t=0.5 {args.datasketch_shingles}"] = {
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
        print(
            f"{name:<30} reported={r['reported']} unlabeled={r['unlabeled']} wall={r['wall_s']}s"
            + (f" cpu={r['cpu_s']}s" if "cpu_s" in r else "")
            + (f" planted_recall={r['planted_recall']}" if "planted_recall" in r else "")
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "docs": len(ids),
        "mix": args.mix,
        "long_share": args.long_share,
        "seed": args.seed,
        "command": "python benchmarks/quality_dedup.py " + " ".join(sys.argv[1:]),
        "machine": {"cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]},
    }
    args.out.write_text(json.dumps({**meta, "results": results}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
