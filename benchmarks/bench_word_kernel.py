#!/usr/bin/env python3
"""The token kernels' pre-tokenised text: the word kernel (``neardup/text/word_kernel.py``,
``joined_words``) against the regular expressions it replaced (``split_words``, joined in
Python: what ``NEARDUP_REFERENCE=text`` runs), in process, on the same texts.

Rows, each per non-ASCII text (the only texts pre-tokenised; the kernels read ASCII text as it
is):

* ``normalise``: NFKC, case folding, social markers blanked (the same in both columns);
* ``joined, one call a chunk``: ``Verifier.joined_tokens`` on 1,024 texts at a time, as the
  token kernels' chunk loop asks for them (normalising included);
* ``minhash_signatures``: a whole signature pass over the same texts (the online store's
  preparation and the batch's candidate stage), one thread.

Sets: the seeds' mix (``window_corpus.py``: its Chinese posts and articles) and the dev corpus
(``$NEARDUP_DEV_DATA`` or ``../shared/data/dev``: real Chinese news and posts; skipped with a
note where it is absent).

    python benchmarks/bench_word_kernel.py [--n 20000] [--rounds 3]

Prints a table (µs of thread CPU a text, best of ``--rounds``) and writes
``benchmarks/results/bench_word_kernel.json`` with the machine. The kernel's class table is made
before timing (~0.2 s once per process: ``word_kernel.char_classes``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_dedup import machine, write_results  # noqa: E402

from neardup.fingerprint.minhash import minhash_signatures  # noqa: E402
from neardup.text import word_kernel, wordsplit  # noqa: E402
from neardup.verify import Verifier, rule  # noqa: E402

#: signature values a text: the seeds' window's plan (``bench_window.py``: 30 bands x 3 rows);
#: the default plan's 237 cost more in the sketch, the same in the tokenising measured here
HASHES = 90
DEV = Path(os.environ.get("NEARDUP_DEV_DATA", ROOT.parent / "shared" / "data" / "dev"))


def window_mix(n: int) -> list[str]:
    """The non-ASCII texts among the first positions of the seeds' stream, ``n`` of them."""
    import window_corpus as wc

    spec = wc.WindowSpec(n=10 * n)
    out: list[str] = []
    lo = 0
    while len(out) < n:
        out += [t for t in wc.stream_texts(spec, lo, 4 * n) if not t.isascii()]
        lo += 4 * n
    return out[:n]


def dev_texts(n: int) -> list[str] | None:
    """The first ``n`` non-ASCII texts of the dev corpus, or None where it is absent."""
    path = DEV / "docs.jsonl"
    if not path.is_file():
        return None
    out: list[str] = []
    with open(path, "rb") as fh:
        for line in fh:
            t = json.loads(line).get("text")
            if isinstance(t, str) and not t.isascii():
                out.append(t)
                if len(out) == n:
                    break
    return out


def best(fn: Callable[[], Any], rounds: int) -> float:
    """The best of ``rounds`` thread-CPU times of ``fn()``, in seconds."""
    times = []
    for _ in range(rounds):
        c0 = time.thread_time()
        fn()
        times.append(time.thread_time() - c0)
    return min(times)


def measure(texts: list[str], rounds: int) -> dict[str, Any]:
    v = Verifier()
    n = len(texts)
    chunk = 1024  # the texts a pre-tokenising call gets at most: a chunk of a driver's loop
    kernel = word_kernel.joined_words
    rows: dict[str, dict[str, float]] = {}
    equal = True
    try:
        for name, joined in (("regex", wordsplit.joined_words_reference), ("kernel", kernel)):
            word_kernel.joined_words = joined
            got = [b for i in range(0, n, chunk) for b in v.joined_tokens(texts[i : i + chunk])]
            equal &= got == [" ".join(v.tokens(t)).encode() for t in texts]
            rows.setdefault("normalise", {})[name] = best(
                lambda: [rule._normalised(t, True) for t in texts], rounds
            )
            rows.setdefault("joined, one call a chunk", {})[name] = best(
                lambda: [v.joined_tokens(texts[i : i + chunk]) for i in range(0, n, chunk)], rounds
            )
            rows.setdefault("minhash_signatures", {})[name] = best(
                lambda: minhash_signatures(v, texts, HASHES), rounds
            )
    finally:
        word_kernel.joined_words = kernel
    out: dict[str, Any] = {
        "texts": n,
        "mean_chars": sum(map(len, texts)) / max(n, 1),
        "same bytes": equal,
    }
    for row, cols in rows.items():
        out[row] = {
            "regex_us": cols["regex"] * 1e6 / n,
            "kernel_us": cols["kernel"] * 1e6 / n,
            "speedup": cols["regex"] / max(cols["kernel"], 1e-12),
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000, help="non-ASCII texts a set (default 20000)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, the best kept (default 3)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/bench_word_kernel.json")
    args = ap.parse_args()
    word_kernel.char_classes()
    word_kernel.joined_words(["预热 warm-up"])  # the kernel compiled or loaded before timing
    sets: dict[str, list[str] | None] = {
        "seeds' mix": window_mix(args.n),
        "dev corpus": dev_texts(args.n),
    }
    results: dict[str, Any] = {}
    for name, texts in sets.items():
        if texts is None:
            print(f"{name}: skipped ({DEV} is absent)")
            continue
        results[name] = measure(texts, args.rounds)
    print(f"{'µs of CPU a non-ASCII text':<42}{'regex':>10}{'kernel':>10}{'speed-up':>10}")
    for name, r in results.items():
        print(
            f"{name} ({r['texts']} texts, {r['mean_chars']:.0f} characters on average; "
            f"same bytes: {r['same bytes']})"
        )
        for row in ("normalise", "joined, one call a chunk", "minhash_signatures"):
            c = r[row]
            print(f"  {row:<40}{c['regex_us']:>10.2f}{c['kernel_us']:>10.2f}{c['speedup']:>9.1f}x")
    write_results(
        args.out,
        {
            "benchmark": "bench_word_kernel",
            "args": {"n": args.n, "rounds": args.rounds},
            "machine": machine(load_average=True),
            "sets": results,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
