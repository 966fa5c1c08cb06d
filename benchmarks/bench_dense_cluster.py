#!/usr/bin/env python3
"""``neardup dedup`` over a corpus with one large cluster of templated documents.

Templated pages (the same header, menu or footer around a short body) share most of their
shingles, so every MinHash band puts them in one bucket and the candidate stage meets a dense
cluster: pairs by the million, which the bucket valve thins (docs/dedup.md, *The bucket valve*).
No other benchmark has such a cluster: the generated corpora of ``bench_dedup.py`` have
near-duplicate pairs and small groups only.

The corpus (generated, fixed by ``--seed``): ``--n`` documents of made-up words; a share
``--templated`` of them is one template of ``--template-words`` words followed by a body of
8-200 words of their own; a share ``--dup-rate`` of the rest are copies of an earlier document
with 0-3 words replaced. Each ``--tree`` (a neardup checkout, repeatable; default this one)
runs ``neardup dedup`` on it in a fresh process, ``--repeat`` times, alternating trees, after
one run that fills the kernel cache; the table shows the median run's wall and CPU time (user
+ system of the process and its children), the stages' times from the summary (candidates,
their band pairs, verification, clusters), and whether every tree wrote the same kept records
and pairs.

    python benchmarks/bench_dense_cluster.py --n 100000
    python benchmarks/bench_dense_cluster.py --n 100000 --tree . --tree ../before --repeat 3

Prints the table and writes ``benchmarks/results/bench_dense_cluster.json`` (with the machine).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_dedup import machine, write_results  # noqa: E402
from trees import TREE_HELP, alternate, checkouts, medians  # noqa: E402


def generate(path: Path, n: int, templated: float, template_words: int, dup_rate: float,
             seed: int) -> dict[str, int]:  # fmt: skip
    """Write the corpus as JSONL; returns its counts."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(20000)]
    template = " ".join(rng.choice(words) for _ in range(template_words))
    firsts: list[str] = []
    counts = {"documents": n, "templated": 0, "copies": 0}
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            if rng.random() < templated:
                body = " ".join(rng.choice(words) for _ in range(rng.choice((8, 16, 30, 60, 200))))
                text = template + " " + body
                counts["templated"] += 1
            elif firsts and rng.random() < dup_rate:
                toks = rng.choice(firsts).split(" ")
                for _ in range(rng.randint(0, 3)):
                    toks[rng.randrange(len(toks))] = rng.choice(words)
                text = " ".join(toks)
                counts["copies"] += 1
            else:
                text = " ".join(rng.choice(words) for _ in range(rng.choice((12, 20, 40, 80, 300))))
                if len(firsts) < 20000:
                    firsts.append(text)
            fh.write(json.dumps({"id": str(i), "text": text}) + "\n")
    return counts


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def run_once(tree: Path, corpus: Path, cache: Path, work: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree), "NEARDUP_CACHE_DIR": str(cache)}
    out = work / "out"
    out.mkdir(parents=True, exist_ok=True)
    kept, pairs, summary = out / "kept.jsonl", out / "pairs.csv", out / "summary.json"
    for p in (kept, pairs, summary):
        p.unlink(missing_ok=True)
    before = os.times()
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "neardup", "dedup", str(corpus), "--output", str(kept),
         "--pairs-out", str(pairs), "--summary-json", str(summary), "--quiet"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    after = os.times()
    if proc.returncode != 0:
        raise SystemExit(f"neardup dedup failed in {tree}:\n{proc.stderr[-3000:]}")
    s = json.loads(summary.read_text(encoding="utf-8"))
    lsh = s.get("lsh", {})
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(
            (after.children_user - before.children_user)
            + (after.children_system - before.children_system),
            3,
        ),
        "candidates_s": s.get("timings_s", {}).get("candidates"),
        "verify_s": s.get("timings_s", {}).get("verify"),
        "cluster_s": s.get("timings_s", {}).get("cluster"),
        "band_pairs_s": lsh.get("pairs_s"),
        "raw_band_pairs": lsh.get("raw_pairs"),
        "candidate_pairs": s.get("candidates"),
        "valve_bands": lsh.get("valve_bands"),
        "kernel_compile_s": s.get("kernel_compile_s"),
        "kept": s.get("kept"),
        "outputs": _digest(kept) + "/" + _digest(pairs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--templated", type=float, default=0.09, help="share of templated documents")
    ap.add_argument("--template-words", type=int, default=60)
    ap.add_argument("--dup-rate", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--tree", type=Path, action="append", help=TREE_HELP)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks/results/bench_dense_cluster.json"
    )
    args = ap.parse_args()
    trees = checkouts(args.tree)
    with tempfile.TemporaryDirectory(prefix="bench_dense_") as tmp:
        work = Path(tmp)
        corpus = work / "corpus.jsonl"
        counts = generate(corpus, args.n, args.templated, args.template_words, args.dup_rate,
                          args.seed)  # fmt: skip
        print(f"corpus: {counts} ({corpus.stat().st_size / 1e6:.1f} MB)")
        cache = {t: work / f"cache-{i}" for i, t in enumerate(trees)}  # one kernel cache each

        def say(t: Path, r: int, row: dict[str, Any]) -> None:
            print(f"  run {r + 1}/{args.repeat} {t.name}: wall {row['wall_s']} s, "
                  f"CPU {row['cpu_s']} s, band pairs {row['band_pairs_s']} s")  # fmt: skip

        runs = alternate(
            trees, args.repeat, lambda t, r: run_once(t, corpus, cache[t], work), warm=True, say=say
        )
    table = []
    cols = ("wall_s", "cpu_s", "candidates_s", "band_pairs_s", "verify_s", "cluster_s")
    print(
        f"{'tree':<24} {'wall s':>8} {'CPU s':>8} {'cand s':>8} {'bands s':>8} {'verify s':>9} "
        f"{'clust s':>8} {'raw band pairs':>15} {'kept':>8}  outputs"
    )
    for t in trees:
        rows = runs[str(t)]
        med = medians(rows, cols)
        last = rows[-1]
        table.append(
            {"tree": str(t), **med, **{k: last[k] for k in last if k not in cols}, "runs": rows}
        )
        print(
            f"{t.name:<24} {med['wall_s']:>8.2f} {med['cpu_s']:>8.2f} "
            f"{med['candidates_s']:>8.2f} {med['band_pairs_s']:>8.2f} {med['verify_s']:>9.2f} "
            f"{med['cluster_s']:>8.2f} {last['raw_band_pairs']:>15,} {last['kept']:>8,}  "
            f"{last['outputs']}"
        )
    same = len({row["outputs"] for t in trees for row in runs[str(t)]}) == 1
    print("same kept records and pairs in every run:", same)
    write_results(
        args.out,
        {
            "benchmark": "bench_dense_cluster",
            "command": "python " + " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            "machine": machine(load_average=True),
            "corpus": {
                **counts,
                "templated_share": args.templated,
                "template_words": args.template_words,
                "seed": args.seed,
            },
            "repeat": args.repeat,
            "same_outputs": same,
            "table": table,
        },
    )


if __name__ == "__main__":
    main()
