#!/usr/bin/env python3
"""``dedup`` on bad input at full size (issue 23): each case in its own child process, with its
wall time, peak memory and the counts that show the work stayed bounded.

Cases (``--cases``, comma-separated; sizes scale with ``--scale``):

* ``copies``: one ~50-character text repeated 1,000,000 times;
* ``boilerplate``: 20,000 texts = the same ~2.2 KB of random words + 20 words of their own
  (every text a near duplicate of every other: C(n, 2) true pairs);
* ``empty``: 1,000,000 texts cycling through "", " ", "\\n\\t ", "\\u3000" and one real word;
* ``huge``: one ~100 MB text (random words) and a copy of it with its last 1,000 characters
  cut (one candidate pair; the verifier's LCS cell cap applies).

    python benchmarks/bad_input_dedup.py --workers 2
    python benchmarks/bad_input_dedup.py --cases boilerplate --scale 0.25

Prints a table and writes ``benchmarks/results/bad_input_dedup.json`` (with a ``machine``
key). The tests in ``tests/batch/test_dedup_bad_input.py`` run the same cases at CI sizes and
assert the bounds on the counts.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CASES = ("copies", "boilerplate", "empty", "huge")


def _words(rng, k: int) -> list[str]:
    import numpy as np

    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return ["".join(rng.choice(letters, int(rng.integers(3, 9)))) for _ in range(k)]


def make(case: str, scale: float) -> list[str]:
    import numpy as np

    rng = np.random.default_rng(0)
    if case == "copies":
        return ["the same text is repeated here again and again"] * int(1_000_000 * scale)
    if case == "boilerplate":
        boiler = " ".join(_words(rng, 330))
        return [boiler + " " + " ".join(_words(rng, 20)) for _ in range(int(20_000 * scale))]
    if case == "empty":
        base = ["", " ", "\n\t ", "\u3000", "word"]
        n = int(1_000_000 * scale)
        return (base * (n // len(base) + 1))[:n]
    if case == "huge":
        vocab = np.array(_words(rng, 50_000))
        words = int(14_000_000 * scale)  # ~7.1 characters per word with its space
        big = " ".join(vocab[rng.integers(0, vocab.size, words)].tolist())
        return [big, big[: len(big) - 1000]]
    raise ValueError(case)


def child(case: str, scale: float, workers: int) -> dict:
    import resource

    from neardup.batch.run import dedup

    texts = make(case, scale)
    chars = sum(map(len, texts))
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    dedup(texts[:50], workers=workers)  # kernels compiled (or loaded) outside the timing
    t0 = time.perf_counter()
    r = dedup(texts, workers=workers)
    wall = time.perf_counter() - t0
    s, lsh = r.stats, r.stats.get("lsh", {})
    return {
        "case": case,
        "documents": len(texts),
        "characters": chars,
        "wall_s": round(wall, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_after_input_mb": round(rss0, 1),
        "kept": s["kept"],
        "exact_duplicates": s["exact_duplicates"],
        "near_duplicates": s["near_duplicates"],
        "candidates": s["candidates"],
        "deferred_pairs": lsh.get("deferred_pairs", 0),
        "deferred_skipped": lsh.get("deferred_skipped", 0),
        "pairs_verified": s["candidates"] - lsh.get("deferred_skipped", 0),
        "capped_buckets": lsh.get("capped_buckets", 0),
        "pairs": s["pairs"],
        "timings_s": s["timings_s"],
    }


def machine() -> dict:
    mem = 0
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            mem = int(fh.readline().split()[1]) // (1 << 20)
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "memory_gib": mem,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every case's size")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/bad_input_dedup.json")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.scale, args.workers)))
        return
    rows = []
    for case in args.cases.split(","):
        cmd = [sys.executable, __file__, "--child", case, "--scale", str(args.scale)]
        cmd += ["--workers", str(args.workers)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            rows.append({"case": case, "error": out.stderr[-2000:], "rc": out.returncode})
            print(f"{case}: failed (rc {out.returncode})\n{out.stderr[-2000:]}", file=sys.stderr)
            continue
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    head = "| case | docs | MB | wall s | peak RSS MB | kept | candidates | verified | skipped |"
    print(head)
    print("|" + "---|" * 9)
    for r in rows:
        if "error" in r:
            print(f"| {r['case']} | failed rc {r['rc']} |")
            continue
        print(
            f"| {r['case']} | {r['documents']:,} | {r['characters'] / 1e6:.1f} | {r['wall_s']} "
            f"| {r['peak_rss_mb']:,.0f} | {r['kept']:,} | {r['candidates']:,} "
            f"| {r['pairs_verified']:,} | {r['deferred_skipped']:,} |"
        )
    result = {
        "machine": machine(),
        "command": "python benchmarks/bad_input_dedup.py " + " ".join(sys.argv[1:]),
        "scale": args.scale,
        "workers": args.workers,
        "results": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
