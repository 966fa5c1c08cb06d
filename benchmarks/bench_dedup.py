#!/usr/bin/env python3
"""End-to-end dedup throughput vs fingerprint-only throughput, with peak memory.

Two generated corpora (no third-party text), each with planted near-duplicates:

* ``long``:  ~3.5 KB English-like documents (Zipfian vocabulary of 20,000 made-up words);
* ``short``: ~100-character posts from the same vocabulary.

A fraction ``--dup-rate`` of documents are copies of an earlier one with a few words changed
(half of them exact copies). For each corpus a child process

1. writes it as JSONL,
2. times ``Fingerprinter().fingerprint_many`` over the texts (fingerprint-only docs/s),
3. times the whole ``neardup dedup`` path (read JSONL, dedup on defaults, write the kept
   documents and the pairs CSV) — end-to-end docs/s,

and reports peak RSS. The target is end-to-end >= 0.5x fingerprint-only throughput.

    python benchmarks/bench_dedup.py                  # --n 200000 (fits the shared 2-core box)
    python benchmarks/bench_dedup.py --n 1000000      # the full-size run
    python benchmarks/bench_dedup.py --kinds short --n 50000 --workers 2

Prints a table and writes ``benchmarks/results/bench_dedup.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def make_vocab(rng: np.random.Generator, size: int = 20000) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lens = rng.integers(2, 10, size)
    return ["".join(rng.choice(letters, n)) for n in lens]


def generate(kind: str, n: int, seed: int, dup_rate: float) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = np.array(make_vocab(rng))
    p = 1.0 / np.arange(1, vocab.size + 1) ** 1.1
    p /= p.sum()
    words_per_doc = 600 if kind == "long" else 17
    texts: list[str] = []
    block = 10000
    while len(texts) < n:
        m = min(block, n - len(texts))
        idx = rng.choice(vocab.size, size=(m, words_per_doc), p=p)
        for row in idx:
            if texts and rng.random() < dup_rate:
                src = texts[int(rng.integers(0, len(texts)))]
                if rng.random() < 0.5:
                    texts.append(src)
                    continue
                w = src.split(" ")
                for _ in range(max(1, len(w) // 30)):
                    w[int(rng.integers(0, len(w)))] = str(vocab[int(rng.integers(0, vocab.size))])
                texts.append(" ".join(w))
            else:
                texts.append(" ".join(vocab[row].tolist()))
    return texts[:n]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child(kind: str, n: int, seed: int, dup_rate: float, workers: int) -> dict:
    from neardup import Fingerprinter
    from neardup.cli.main import main as cli_main

    Fingerprinter().fingerprint_many(["warm up the kernels"], workers=workers)
    t0 = time.perf_counter()
    texts = generate(kind, n, seed, dup_rate)
    gen_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="neardup-bench-") as tmp:
        src = Path(tmp) / "docs.jsonl"
        with src.open("w", encoding="utf-8") as fh:
            for i, t in enumerate(texts):
                fh.write(json.dumps({"id": f"d{i}", "text": t}) + "\n")
        mb = src.stat().st_size / 1e6
        t0 = time.perf_counter()
        Fingerprinter().fingerprint_many(texts, workers=workers)
        fp_s = time.perf_counter() - t0
        del texts
        summary = Path(tmp) / "summary.json"
        t0 = time.perf_counter()
        rc = cli_main(
            [
                "dedup", str(src), "--output", str(Path(tmp) / "out.jsonl"),
                "--pairs-out", str(Path(tmp) / "pairs.csv"), "--summary-json", str(summary),
                "--workers", str(workers), "--quiet",
            ]
        )  # fmt: skip
        e2e_s = time.perf_counter() - t0
        if rc != 0:
            raise SystemExit(f"neardup dedup failed with exit code {rc}")
        stats = json.loads(summary.read_text(encoding="utf-8"))
    return {
        "kind": kind,
        "n": n,
        "input_mb": round(mb, 1),
        "workers": workers,
        "generate_s": round(gen_s, 2),
        "fingerprint_s": round(fp_s, 2),
        "fingerprint_docs_per_s": round(n / fp_s, 1),
        "end_to_end_s": round(e2e_s, 2),
        "end_to_end_docs_per_s": round(n / e2e_s, 1),
        "ratio_e2e_to_fingerprint": round(fp_s / e2e_s, 3),
        "timings_s": stats.get("timings_s"),
        "candidates": stats.get("candidates"),
        "exact_duplicates": stats.get("exact_duplicates"),
        "near_duplicates": stats.get("near_duplicates"),
        "clusters": stats.get("clusters"),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200000)
    ap.add_argument("--kinds", default="short,long")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dup-rate", type=float, default=0.1)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_dedup.json"
    )
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.n, args.seed, args.dup_rate, args.workers)))
        return
    rows = []
    for kind in args.kinds.split(","):
        cmd = [
            sys.executable,
            __file__,
            "--child",
            kind,
            "--n",
            str(args.n),
            "--seed",
            str(args.seed),
        ]
        cmd += ["--dup-rate", str(args.dup_rate), "--workers", str(args.workers)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            raise SystemExit(f"{kind} benchmark failed")
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    hdr = f"{'kind':<6} {'n':>9} {'MB':>7} {'fp docs/s':>11} {'e2e docs/s':>11} {'e2e/fp':>7} {'cands':>10} {'peak MB':>8}"
    print(hdr)
    for r in rows:
        print(
            f"{r['kind']:<6} {r['n']:>9} {r['input_mb']:>7} {r['fingerprint_docs_per_s']:>11,.0f} "
            f"{r['end_to_end_docs_per_s']:>11,.0f} {r['ratio_e2e_to_fingerprint']:>7.2f} "
            f"{r['candidates']:>10} {r['peak_rss_mb']:>8.0f}"
        )
        print(f"       stage timings: {r['timings_s']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"args": vars(args) | {"out": str(args.out)}, "results": rows}, indent=2) + "\n"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
