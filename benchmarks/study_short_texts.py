#!/usr/bin/env python3
"""Short texts at the threshold: how often ``neardup dedup`` finds a pair of 6-40-token texts
whose second text is the first with scattered one-token substitutions, by length, language and
similarity.

For each cell (tokens ``n``, language en / zh, similarity ``s``, source, edit placement) the
study makes ``--pairs`` pairs: a text of ``n`` tokens and a copy with ``e = floor((1 - s) n)``
tokens replaced (token similarity ``1 - e / n >= s``), and counts a pair *found* when
:func:`neardup.dedup` on the two texts would report it: a candidate (sharing a MinHash band key
with enough agreeing values, or within the SimHash pass's distance) that the verifier accepts.
The check is computed per pair with the library's own pieces (the default plan, signatures,
band keys, fingerprints and verifier), which is what ``dedup`` does for a corpus of two texts
(``tests/batch/test_short_text_promise.py`` checks that they agree).

- sources: ``generated`` (en: the benchmark's topic model, ``bench_dedup.TopicCorpus``; zh:
  characters drawn from a Zipf law over 3,000 CJK code points) and ``dev`` (windows of ``n``
  tokens of the dev set's documents, ``../shared/data/dev``; skipped when absent), each with
  replacements drawn from the same source's tokens;
- placements: ``scattered`` (no two edits adjacent, none at an end: every edit breaks two
  token bigrams, the case the plan is made for) and ``random`` (distinct random positions).

Run it once on this checkout (after) and once with ``--neardup OTHER_CHECKOUT`` (before), or
pass ``--compare BEFORE.json`` to print both::

    python benchmarks/study_short_texts.py --neardup /path/to/old/checkout \\
        --out benchmarks/results/study_short_texts_before.json
    python benchmarks/study_short_texts.py --compare benchmarks/results/study_short_texts_before.json

Prints the table (found probability per cell; the least over each row) and writes JSON
(``benchmarks/results/study_short_texts.json``) with the plan and the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

LENGTHS = (6, 8, 10, 12, 15, 20, 25, 30, 40)
SIMILARITIES = (0.8, 0.85, 0.9)


def _cjk_vocab() -> list[str]:
    return [chr(0x4E00 + i) for i in range(3000)]


def _zipf(rng: np.random.Generator, n: int, m: int, a: float = 1.0) -> np.ndarray:
    w = 1.0 / np.arange(1, m + 1) ** a
    return rng.choice(m, size=n, p=w / w.sum())


def token_sources(lang: str, source: str, data: Path, rng: np.random.Generator) -> list[list[str]]:
    """Token sequences (``Verifier.tokens``) to cut windows from."""
    from neardup.verify.rule import Verifier

    v = Verifier()
    if source == "dev":
        path = data / "docs.jsonl"
        if not path.exists():
            return []
        out = []
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                if r.get("lang", "en") == lang:
                    toks = v.tokens(r["text"])
                    if len(toks) >= 6:
                        out.append(toks)
        return out
    if lang == "en":
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from bench_dedup import generate

        return [v.tokens(t) for t in generate("long", 400, 3, 0.0)]
    vocab = _cjk_vocab()
    return [[vocab[i] for i in _zipf(rng, 600, len(vocab))] for _ in range(200)]


def _cjk(t: str) -> bool:
    return len(t) == 1 and ord(t) >= 0x2E80  # (a one-character token there is a CJK one)


def render(tokens: list[str]) -> str:
    """A text whose ``Verifier.tokens`` are ``tokens``: single CJK characters run together (as
    Chinese is written), every other pair of tokens separated by a space."""
    out: list[str] = []
    for t in tokens:
        if out and not (_cjk(out[-1]) and _cjk(t)):
            out.append(" ")
        out.append(t)
    return "".join(out)


def edit_positions(rng: np.random.Generator, n: int, e: int, placement: str) -> np.ndarray:
    if placement == "random" or e == 0:
        return rng.choice(n, size=e, replace=False)
    # scattered: e positions in 1..n-2, no two adjacent (a gap of at least one between them)
    free = (n - 2) - (2 * e - 1)  # the slack left after the edits and their gaps
    if free < 0:
        raise ValueError(f"{e} scattered edits do not fit in {n} tokens")
    cuts = np.sort(rng.choice(free + e, size=e, replace=False))
    return 1 + cuts + np.arange(e)  # stars and bars: strictly increasing, gaps >= 1


def make_pairs(
    seqs: list[list[str]], n: int, s: float, placement: str, count: int, rng: np.random.Generator
) -> list[tuple[str, str]]:
    pool = [t for q in seqs for t in q]
    long_enough = [q for q in seqs if len(q) >= n]
    e = int(np.floor((1.0 - s) * n + 1e-9))
    pairs = []
    for _ in range(count):
        q = long_enough[int(rng.integers(len(long_enough)))]
        at = int(rng.integers(0, len(q) - n + 1))
        a = list(q[at : at + n])
        b = list(a)
        for p in edit_positions(rng, n, e, placement).tolist():
            while b[p] == a[p]:
                b[p] = pool[int(rng.integers(len(pool)))]
        pairs.append((render(a), render(b)))
    return pairs


def found(pairs: list[tuple[str, str]]) -> np.ndarray:
    """Whether ``dedup`` reports each pair: (MinHash candidate or SimHash candidate) and
    verified, as :func:`neardup.dedup` decides for the two texts on defaults."""
    from neardup import DedupConfig, Fingerprinter, hamming_many
    from neardup.fingerprint.minhash import band_keys, minhash_signatures
    from neardup.rules.plan import LSH_SIMHASH_DISTANCE, LSH_SIMHASH_SHORT_DISTANCE

    cfg = DedupConfig()
    plan, verifier = cfg.lsh_plan(), cfg.make_verifier()
    texts = [t for p in pairs for t in p]
    sig, tok = minhash_signatures(verifier, texts, plan.hashes)
    a, b = sig[0::2], sig[1::2]
    band = np.zeros(len(pairs), bool)
    for k in range(plan.bands):
        band |= band_keys(a, k, plan.rows) == band_keys(b, k, plan.rows)
    usable = (tok[0::2] > 0) & (tok[1::2] > 0)
    lsh = band & usable & ((a == b).sum(axis=1) >= plan.min_agreement)
    fp = Fingerprinter().fingerprint_many(texts)
    d = hamming_many(fp[0::2], fp[1::2])
    lens = np.array([min(len(x), len(y)) for x, y in pairs])
    k = np.where(lens >= verifier.short_chars, LSH_SIMHASH_DISTANCE, LSH_SIMHASH_SHORT_DISTANCE)
    simhash = d <= k
    ok = np.array(
        [verifier.verify(x, y, int(dd))[0] for (x, y), dd in zip(pairs, d.tolist(), strict=True)]
    )
    return (lsh | simhash) & ok


def run(args: argparse.Namespace) -> dict[str, Any]:
    from neardup import DedupConfig

    rng = np.random.default_rng(args.seed)
    cells = []
    for lang in ("en", "zh"):
        for source in ("generated", "dev"):
            seqs = token_sources(lang, source, args.data, rng)
            if not seqs:
                print(f"(no {source} {lang} texts: skipped)")
                continue
            for placement in ("scattered", "random"):
                for s in SIMILARITIES:
                    for n in LENGTHS:
                        pairs = make_pairs(seqs, n, s, placement, args.pairs, rng)
                        f = found(pairs)
                        cells.append(
                            {"lang": lang, "source": source, "placement": placement,
                             "similarity": s, "tokens": n, "pairs": len(pairs),
                             "found": round(float(f.mean()), 4)}
                        )  # fmt: skip
    plan = DedupConfig().lsh_plan()
    import neardup

    return {
        "neardup": str(Path(neardup.__file__).resolve().parents[1]),
        "plan": plan.to_dict(),
        "verifier_threshold": DedupConfig().make_verifier().threshold,
        "cells": cells,
        "machine": {"cpus": os.cpu_count(), "load_average": list(os.getloadavg())},
    }


def table(res: dict[str, Any], before: dict[str, Any] | None) -> None:
    key = ("lang", "source", "placement", "similarity", "tokens")
    old = {tuple(c[k] for k in key): c["found"] for c in (before or {}).get("cells", [])}
    rows: dict[tuple[Any, ...], dict[int, str]] = {}
    least: dict[tuple[Any, ...], float] = {}
    for c in res["cells"]:
        row = (c["lang"], c["source"], c["placement"], c["similarity"])
        was = old.get(tuple(c[k] for k in key))
        cell = f"{c['found']:.3f}" if was is None else f"{was:.3f}>{c['found']:.3f}"
        rows.setdefault(row, {})[c["tokens"]] = cell
        least[row] = min(least.get(row, 1.0), c["found"])
    p = res["plan"]
    print(f"\nplan: {p['bands']} bands x {p['rows']} rows, J {p['jaccard']}, probability "
          f"{p['probability']}; found probability" + (" before>after" if before else ""))  # fmt: skip
    w = 13 if before else 7
    print(f"{'lang':<5}{'source':<10}{'edits':<10}{'sim':<6}"
          + "".join(f"{n:>{w}}" for n in LENGTHS) + f"{'least':>8}")  # fmt: skip
    for row, cells in rows.items():
        print(f"{row[0]:<5}{row[1]:<10}{row[2]:<10}{row[3]:<6}"
              + "".join(f"{cells.get(n, '-'):>{w}}" for n in LENGTHS)
              + f"{least[row]:>8.3f}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=2000, help="pairs per cell")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "dev")
    ap.add_argument("--neardup", type=Path, default=None, help="import neardup from this checkout")
    ap.add_argument("--compare", type=Path, default=None, help="a JSON of an earlier run")
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "study_short_texts.json"
    )
    args = ap.parse_args()
    sys.path.insert(0, str(args.neardup.resolve() if args.neardup else ROOT))
    res = run(args)
    before = json.loads(args.compare.read_text(encoding="utf-8")) if args.compare else None
    if before is not None:
        res["before"] = before
    table(res, before)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
