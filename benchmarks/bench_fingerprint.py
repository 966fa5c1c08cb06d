"""Fingerprint throughput: neardup vs gaoya 0.2.2, python-simhash 0.1.0, simhash 2.1.2.

Cases (texts generated deterministically here, no network):

- ``en-long``: ~3.5 KB English-like documents;
- ``en-long-typo``: the same documents with typographic punctuation and a few accented words
  (curly quotes, em dashes, "café"): real English web text is rarely pure ASCII, and non-ASCII
  text takes a different preparation path;
- ``en-short``: ~100-character English-like texts;
- ``zh-long``: ~3.5 KB (about 1,200 characters) Chinese-like documents; neardup in ``auto``
  (char bigrams) and ``jieba`` (segmented) modes.

Each implementation is measured in this process on the same texts, single core (``workers=1``,
a plain loop for the peers) and with 2 workers (gaoya ``par_bulk_doc2signatures`` with
RAYON_NUM_THREADS=2, python-simhash ``simhash_parallel`` with 2 threads); best of ``--repeat``.
Peers: gaoya hashes words (lowercase); python-simhash gets ``text.split()`` (the split is part of
its cost); simhash 2.1.2 uses its default char 4-grams and is measured on a subset (it is slow).

Usage::

    .venv/bin/python benchmarks/bench_fingerprint.py [--install-peers] [--quick]

Prints a table and writes ``benchmarks/results/fingerprint.json`` (with ratios vs gaoya).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import platform
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("RAYON_NUM_THREADS", "2")  # gaoya's parallel pool, before it is imported

import numpy as np

import neardup

ROOT = Path(__file__).resolve().parents[1]
PEERS = {
    "gaoya": "gaoya==0.2.2",
    "python-simhash": "python-simhash==0.1.0",
    "simhash": "simhash==2.1.2",
}


# ------------------------------------------------------------------ texts
def _vocab(rng: random.Random, n: int) -> list[str]:
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    weights = [
        12,
        9,
        8,
        7.5,
        7,
        6.7,
        6.3,
        6,
        5.9,
        4.3,
        4,
        2.8,
        2.8,
        2.4,
        2.4,
        2.2,
        2,
        2,
        1.9,
        1.5,
        1,
        0.8,
        0.2,
        0.2,
        0.1,
        0.1,
    ]
    out = set()
    while len(out) < n:
        out.add(
            "".join(
                rng.choices(
                    letters, weights, k=rng.choice([1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 7, 8, 9, 10])
                )
            )
        )
    return sorted(out)


def english(rng: random.Random, vocab: list[str], zipf: np.ndarray, size: int) -> str:
    out: list[str] = []
    n = 0
    sentence = 0
    while n < size:
        w = (
            vocab[int(rng.random() * 1e9) % len(vocab)]
            if rng.random() < 0.2
            else vocab[int(zipf[rng.randrange(len(zipf))])]
        )
        if sentence == 0:
            w = w.capitalize()
        sentence += 1
        if sentence > rng.randint(8, 20):
            w += rng.choice([".", ".", ",", ";", "?", "!"])
            sentence = 0 if w[-1] != "," else 1
        out.append(w)
        n += len(w) + 1
    return " ".join(out)[:size]


def chinese(rng: random.Random, words: list[str], zipf: np.ndarray, n_chars: int) -> str:
    out: list[str] = []
    n = 0
    while n < n_chars:
        w = words[int(zipf[rng.randrange(len(zipf))])]
        out.append(w)
        n += len(w)
        if rng.random() < 0.08:
            out.append(rng.choice("，，，。、；！？"))
            n += 1
    return "".join(out)


def make_texts(quick: bool) -> dict[str, list[str]]:
    rng = random.Random(20240601)
    vocab = _vocab(rng, 20000)
    zipf = np.minimum(np.random.default_rng(7).zipf(1.2, 200_000) - 1, len(vocab) - 1)
    common = "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从"
    zrng = random.Random(11)
    zwords = sorted(
        {"".join(zrng.choices(common, k=zrng.choice([1, 2, 2, 2, 3, 4]))) for _ in range(30000)}
    )
    zz = np.minimum(np.random.default_rng(8).zipf(1.3, 200_000) - 1, len(zwords) - 1)
    n_long, n_short = (1000, 5000) if quick else (4000, 40000)
    texts = {
        "en-long": [english(rng, vocab, zipf, rng.randint(3000, 4000)) for _ in range(n_long)],
        "en-short": [english(rng, vocab, zipf, rng.randint(80, 120)) for _ in range(n_short)],
        "en-long-typo": [],  # filled below from en-long
        "zh-long": [chinese(rng, zwords, zz, rng.randint(1000, 1400)) for _ in range(n_long)],
    }
    texts["en-long-typo"] = [typographic(t) for t in texts["en-long"]]
    return texts


def typographic(text: str) -> str:
    """``text`` as a word processor or CMS would publish it: curly apostrophes and quotes,
    em dashes, an accented loanword (a few non-ASCII characters per document)."""
    words = text.split(" ")
    for i in range(3, len(words), 37):
        words[i] = "\u201c" + words[i] + "\u201d"
    for i in range(11, len(words), 53):
        words[i] = words[i] + "\u2019s"
    for i in range(23, len(words), 71):
        words[i] = "\u2014"
    for i in range(31, len(words), 97):
        words[i] = "caf\u00e9"
    return " ".join(words)


# ------------------------------------------------------------------ peers
def peer_dir(base: Path, name: str) -> Path:
    return base / name


def install_peers(base: Path) -> None:
    for name, spec in PEERS.items():
        d = peer_dir(base, name)
        if not d.exists():
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--no-deps",
                    "--target",
                    str(d),
                    spec,
                ],
                check=True,
            )


def load_isolated(path: Path, module: str) -> Any:
    """Import ``module`` from ``path`` only, then drop it from sys.modules (two peers share the
    top-level name ``simhash``)."""
    for k in [k for k in sys.modules if k == module or k.startswith(module + ".")]:
        del sys.modules[k]
    sys.path.insert(0, str(path))
    try:
        mod = importlib.import_module(module)
        if not str(getattr(mod, "__file__", "")).startswith(str(path)):
            raise ImportError(f"{module} did not load from {path}")
    finally:
        sys.path.remove(str(path))
    for k in [k for k in sys.modules if k == module or k.startswith(module + ".")]:
        del sys.modules[k]
    return mod


def load_peers(base: Path) -> tuple[dict[str, Any], dict[str, str]]:
    mods: dict[str, Any] = {}
    missing: dict[str, str] = {}
    for name, module in (("gaoya", "gaoya"), ("python-simhash", "simhash"), ("simhash", "simhash")):
        d = peer_dir(base, name)
        try:
            if not d.exists():
                raise ImportError(f"{d} missing; run with --install-peers")
            mods[name] = load_isolated(d, module)
        except Exception as exc:  # report, keep going
            missing[name] = f"{type(exc).__name__}: {exc}"
    return mods, missing


# ------------------------------------------------------------------ measuring
def best_time(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Best wall-clock seconds and the process CPU seconds of that same repetition (CPU time
    is robust to other load on a shared machine; for threaded runs it sums all threads)."""
    best = (float("inf"), float("inf"))
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        run = (time.perf_counter() - t, time.process_time() - c)
        best = min(best, run)
    return best


def measure_peers(
    mods: dict[str, Any], case: str, docs: list[str], repeat: int, record: Callable[..., None]
) -> None:
    g = mods.get("gaoya")
    if g is not None:
        idx = g.simhash.s.SimHash64StringIntIndex(6, 5, "word", True, (1, 1))
        record(
            case,
            "gaoya 0.2.2",
            1,
            docs,
            best_time(lambda: [idx.doc2signature(d) for d in docs], repeat),
        )
        record(
            case,
            "gaoya 0.2.2",
            2,
            docs,
            best_time(lambda: idx.par_bulk_doc2signatures(docs), repeat),
        )
    ps = mods.get("python-simhash")
    if ps is not None:
        record(
            case,
            "python-simhash 0.1.0",
            1,
            docs,
            best_time(lambda: [ps.simhash(d.split()) for d in docs], repeat),
        )
        with contextlib.suppress(ValueError):  # rayon's pool can be sized once per process
            ps.set_num_threads(2)
        record(
            case,
            "python-simhash 0.1.0",
            2,
            docs,
            best_time(lambda: ps.simhash_parallel([d.split() for d in docs]), repeat),
        )
    sh = mods.get("simhash")
    if sh is not None:
        sub = docs[: max(50, len(docs) // 40)]
        record(
            case, "simhash 2.1.2", 1, sub, best_time(lambda: [sh.Simhash(d).value for d in sub], 1)
        )


def main() -> None:
    ap = argparse.ArgumentParser(description="neardup fingerprint throughput vs peers")
    ap.add_argument(
        "--peers-dir",
        type=Path,
        default=Path(os.environ.get("NEARDUP_PEERS_DIR", "/tmp/neardup-bench-peers")),
    )
    ap.add_argument(
        "--install-peers", action="store_true", help="pip install the pinned peers into --peers-dir"
    )
    ap.add_argument("--quick", action="store_true", help="fewer texts (smoke run)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "fingerprint.json"
    )
    args = ap.parse_args()
    if args.install_peers:
        install_peers(args.peers_dir)
    mods, missing = load_peers(args.peers_dir)
    texts = make_texts(args.quick)
    rows: list[dict[str, Any]] = []

    def record(
        case: str, impl: str, workers: int, docs: list[str], times: tuple[float, float]
    ) -> None:
        seconds, cpu = times
        nbytes = sum(len(t.encode()) for t in docs)
        nchars = sum(len(t) for t in docs)
        rows.append(
            dict(
                case=case,
                impl=impl,
                workers=workers,
                docs=len(docs),
                seconds=seconds,
                docs_per_s=len(docs) / seconds,
                mb_per_s=nbytes / seconds / 1e6,
                mchars_per_s=nchars / seconds / 1e6,
                cpu_seconds=cpu,
                docs_per_cpu_s=len(docs) / cpu if cpu > 0 else None,
                mchars_per_cpu_s=nchars / cpu / 1e6 if cpu > 0 else None,
            )
        )
        r = rows[-1]
        print(
            f"{case:9s} {impl:26s} w={workers} {r['docs_per_s']:>11,.0f} docs/s {r['mb_per_s']:>8.1f} MB/s {r['mchars_per_s']:>7.2f} Mchar/s",
            flush=True,
        )

    ours = {
        "neardup (auto)": neardup.Fingerprinter(),
        "neardup (shingles2)": neardup.Fingerprinter(features="shingles", ngram=2),
        "neardup (jieba)": neardup.Fingerprinter(features="jieba"),
    }
    for fp in ours.values():  # compile / warm up (numba cache, rjieba dictionary)
        fp.fingerprint_many(["warm up text 中文 分词", "x"], workers=1)
        fp.fingerprint_many(["warm up text 中文 分词"] * 8, workers=2)
    plan = {
        "en-long": ["neardup (auto)", "neardup (shingles2)"],
        "en-short": ["neardup (auto)"],
        "en-long-typo": ["neardup (auto)"],
        "zh-long": ["neardup (auto)", "neardup (jieba)"],
    }
    for case, docs in texts.items():
        for name in plan[case]:
            for w in (1, 2):
                fp = ours[name]
                record(
                    case,
                    name,
                    w,
                    docs,
                    best_time(
                        lambda fp=fp, w=w, docs=docs: fp.fingerprint_many(docs, workers=w),
                        args.repeat,
                    ),
                )
        measure_peers(mods, case, docs, args.repeat, record)
    # ratios vs gaoya (same case, same workers), by wall-clock and by CPU time
    g = {(r["case"], r["workers"]): r for r in rows if r["impl"].startswith("gaoya")}
    for r in rows:
        base = g.get((r["case"], r["workers"]))
        r["ratio_vs_gaoya"] = r["docs_per_s"] / base["docs_per_s"] if base else None
        ok = base and r["docs_per_cpu_s"] and base["docs_per_cpu_s"]
        r["cpu_ratio_vs_gaoya"] = r["docs_per_cpu_s"] / base["docs_per_cpu_s"] if ok else None
    print(
        "\n| case | implementation | workers | docs/s | MB/s | M chars/s | x gaoya "
        "| docs/CPU-s | M chars/CPU-s | x gaoya (CPU) |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        ratio = f"{r['ratio_vs_gaoya']:.2f}" if r["ratio_vs_gaoya"] else "-"
        cratio = f"{r['cpu_ratio_vs_gaoya']:.2f}" if r["cpu_ratio_vs_gaoya"] else "-"
        print(
            f"| {r['case']} | {r['impl']} | {r['workers']} | {r['docs_per_s']:,.0f} "
            f"| {r['mb_per_s']:.1f} | {r['mchars_per_s']:.2f} | {ratio} "
            f"| {r['docs_per_cpu_s'] or 0:,.0f} | {r['mchars_per_cpu_s'] or 0:.2f} | {cratio} |"
        )
    meta = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "load_avg": os.getloadavg(),
        "numpy": np.__version__,
        "neardup": neardup.__version__,
        "peers_missing": missing,
        "quick": args.quick,
        "repeat": args.repeat,
    }
    if missing:
        print(f"\npeers not measured: {missing}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "results": rows}, indent=1))
    print(f"\nwrote {args.out}  (load average {meta['load_avg']})")


if __name__ == "__main__":
    main()
