#!/usr/bin/env python3
"""MinHash signature cost and statistics: neardup's scheme against the alternatives.

Two tables, both in this process, CPU time (``time.process_time``, one thread), best of
``--repeat``:

1. **Sketch** (the signature of a set of 64-bit shingle hashes, no tokenising), per set size
   ``n``, for ``--hashes`` values: plain MinHash (``hashes`` multiply-shift permutations, the
   previous scheme: ``O(n * hashes)``), one-permutation hashing with optimal densification
   (Shrivastava, ICML 2017), SuperMinHash (Ertl 2017), sequential rounds (one bin per shingle
   per round until every bin is filled), and neardup's (one-permutation hashing whose empty
   bins take their own permutation: :mod:`neardup.fingerprint.minhash`). Then each scheme's
   statistics on generated pairs at the plan's Jaccard (``--trials`` pairs per size): the rate
   at which a value agrees (must be ``J``), the variance of the agreement count against the
   binomial's (the agreement filter assumes at most it) and the band candidate rate against
   the S-curve ``1 - (1 - J**r)**b`` of the default plan.
2. **Texts** (``minhash_signatures``: tokenising, shingling and the sketch, as dedup runs it)
   per document on generated short posts, the dev set (``../shared/data/dev``; skipped when
   absent) and generated ~3.5 KB documents: the previous kernel (plain MinHash over the same
   token loop, a copy kept here) with the previous plan's 126 values, neardup's kernel with
   126 and with the default plan's values, and the token loop alone (1 plain value).
3. **Band pairs** (with ``--band-pairs N``): ``lsh_pairs`` over ``N`` generated short posts at
   the default plan and at 42 bands x 3 rows (the plan made for randomly placed edits), same
   code, one thread: what the promise costs.

    python benchmarks/bench_minhash.py [--quick] [--band-pairs 1000000] \
        [--out benchmarks/results/bench_minhash.json]

Prints both tables and writes the JSON (with the machine and its load average).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from neardup._threads import kernel_threads  # noqa: E402
from neardup.fingerprint.minhash import (  # noqa: E402
    _permutations,
    minhash_signatures,
    sketch_shingles,
)
from neardup.rules.lsh import lsh_pairs  # noqa: E402
from neardup.rules.plan import candidate_probability, plan_lsh  # noqa: E402
from neardup.text.token_kernels import hash_tokens, run_token_kernel, token_chunks  # noqa: E402
from neardup.verify.rule import Verifier  # noqa: E402

_G = np.uint64(0x9E3779B97F4A7C15)
_TOP = np.uint64(0xFFFFFFFFFFFFFFFF)


@numba.njit(inline="always")
def _mix(x: Any) -> Any:  # pragma: no cover - numba
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


# --------------------------------------------------------------------------- the alternatives
@numba.njit
def _plain(sh, off, pa, pb, out):  # pragma: no cover - numba
    k = pa.shape[0]
    mins = np.empty(k, np.uint64)
    for d in range(off.shape[0] - 1):
        if off[d + 1] == off[d]:
            continue
        mins[:] = _TOP
        for i in range(off[d], off[d + 1]):
            x = sh[i]
            for p in range(k):
                v = (pa[p] * x + pb[p]) >> np.uint64(32)
                if v < mins[p]:
                    mins[p] = v
        for p in range(k):
            out[d, p] = np.uint16(mins[p] & np.uint64(0xFFFF))


@numba.njit
def _oph_densified(sh, off, out):  # pragma: no cover - numba
    # one-permutation hashing; an empty bin copies the first non-empty bin of its own probe
    # sequence (Shrivastava 2017, "optimal densification")
    k = out.shape[1]
    kk = np.uint64(k)
    mins = np.empty(k, np.uint64)
    for d in range(off.shape[0] - 1):
        if off[d + 1] == off[d]:
            continue
        mins[:] = _TOP
        for i in range(off[d], off[d + 1]):
            z = _mix(sh[i])
            b = ((z >> np.uint64(32)) * kk) >> np.uint64(32)
            mins[b] = min(mins[b], z & np.uint64(0xFFFFFFFF))
        for p in range(k):
            j = p
            t = np.uint64(1)
            while mins[j] == _TOP:
                z = _mix(np.uint64(p) * _G + t)
                j = np.int64(((z >> np.uint64(32)) * kk) >> np.uint64(32))
                t += np.uint64(1)
            out[d, p] = np.uint16(mins[j] & np.uint64(0xFFFF))


@numba.njit
def _superminhash(sh, off, out):  # pragma: no cover - numba
    # Ertl 2017, Algorithm 2, with integer values j * 2**32 + r
    m = out.shape[1]
    h = np.empty(m, np.uint64)
    perm = np.zeros(m, np.int64)
    q = np.empty(m, np.int64)
    b = np.zeros(m, np.int64)
    for d in range(off.shape[0] - 1):
        if off[d + 1] == off[d]:
            continue
        h[:] = _TOP
        q[:] = -1
        b[:] = 0
        b[m - 1] = m
        a = m - 1
        for i in range(off[d], off[d + 1]):
            s = sh[i]
            j = 0
            while j <= a:
                s += _G
                z = _mix(s)
                kk = j + np.int64(((z >> np.uint64(32)) * np.uint64(m - j)) >> np.uint64(32))
                if q[j] != i:
                    q[j] = i
                    perm[j] = j
                if q[kk] != i:
                    q[kk] = i
                    perm[kk] = kk
                t = perm[j]
                perm[j] = perm[kk]
                perm[kk] = t
                pj = perm[j]
                v = (np.uint64(j) << np.uint64(32)) | (z & np.uint64(0xFFFFFFFF))
                if v < h[pj]:
                    j2 = min(np.int64(h[pj] >> np.uint64(32)), m - 1)
                    h[pj] = v
                    if j < j2:
                        b[j2] -= 1
                        b[j] += 1
                        while b[a] == 0:
                            a -= 1
                j += 1
        for t in range(m):
            out[d, t] = np.uint16(h[t] & np.uint64(0xFFFF))


@numba.njit
def _rounds(sh, off, out):  # pragma: no cover - numba
    # each shingle falls into one bin per round (a fresh hash each round); a bin keeps the
    # least value of the first round anything fell into it; rounds stop once all are filled
    k = out.shape[1]
    kk = np.uint64(k)
    vals = np.empty(k, np.uint64)
    rnd = np.empty(k, np.int64)
    for d in range(off.shape[0] - 1):
        if off[d + 1] == off[d]:
            continue
        vals[:] = _TOP
        rnd[:] = -1
        filled = 0
        r = 0
        while filled < k:
            salt = np.uint64(r) * _G
            for i in range(off[d], off[d + 1]):
                z = _mix(sh[i] ^ salt)
                b = ((z >> np.uint64(32)) * kk) >> np.uint64(32)
                if rnd[b] == r:
                    vals[b] = min(vals[b], z)
                elif rnd[b] < 0:
                    rnd[b] = r
                    vals[b] = z
                    filled += 1
            r += 1
        for t in range(k):
            out[d, t] = np.uint16(vals[t] & np.uint64(0xFFFF))


def _run(scheme: str, sh: np.ndarray, off: np.ndarray, k: int) -> np.ndarray:
    if scheme == "neardup":
        return sketch_shingles(sh, off, k)
    out = np.full((off.size - 1, k), 0xFFFF, np.uint16)
    if scheme == "plain MinHash":
        pa, pb = _permutations(k)
        _plain(sh, off, pa, pb, out)
    elif scheme == "OPH + densification":
        _oph_densified(sh, off, out)
    elif scheme == "SuperMinHash":
        _superminhash(sh, off, out)
    elif scheme == "rounds":
        _rounds(sh, off, out)
    return out


SCHEMES = ("plain MinHash", "OPH + densification", "SuperMinHash", "rounds", "neardup")


def _best(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # compile / warm
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def sketch_table(k: int, sizes: list[int], repeat: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(1)
    rows = []
    for n in sizes:
        sets = max(200, 300_000 // n)
        sh = rng.integers(0, 1 << 63, sets * n, dtype=np.uint64)
        off = np.arange(sets + 1, dtype=np.int64) * n
        row: dict[str, Any] = {"shingles": n, "hashes": k}
        for s in SCHEMES:
            t = _best(lambda s=s, sh=sh, off=off: _run(s, sh, off, k), repeat)
            row[s] = round(t / sets * 1e6, 3)
        rows.append(row)
    return rows


def _pairs(rng: np.random.Generator, size: int, jaccard: float, trials: int):
    k = round(2 * jaccard * size / (1 + jaccard))
    union = 2 * size - k
    e = rng.integers(0, 1 << 63, (trials, union), dtype=np.uint64)
    a, b = e[:, :size], np.concatenate([e[:, :k], e[:, size:]], axis=1)
    sets = np.stack([a, b], axis=1).reshape(2 * trials, size)
    return sets.ravel(), np.arange(2 * trials + 1, dtype=np.int64) * size, k / union


def stats_table(sizes: list[int], trials: int) -> list[dict[str, Any]]:
    plan = plan_lsh()
    b, r, h = plan.bands, plan.rows, plan.hashes
    rows = []
    for n in sizes:
        rng = np.random.default_rng(7 + n)
        sh, off, j = _pairs(rng, n, plan.jaccard, trials)
        curve = float(candidate_probability(j, b, r))
        for s in SCHEMES:
            sig = _run(s, sh, off, h)
            eq = sig[0::2] == sig[1::2]
            agree = eq.sum(axis=1)
            band = eq[:, : b * r].reshape(trials, b, r).all(axis=2).any(axis=1).mean()
            rows.append(
                {
                    "shingles": n,
                    "scheme": s,
                    "jaccard": round(j, 4),
                    "value_rate": round(float(eq.mean()), 4),
                    "variance_vs_binomial": round(float(agree.var(ddof=1) / (h * j * (1 - j))), 3),
                    "band_rate": round(float(band), 4),
                    "curve": round(curve, 4),
                    "sd": round(float(np.sqrt(curve * (1 - curve) / trials)), 4),
                }
            )
    return rows


# --------------------------------------------------------------------------- texts
@numba.njit(nogil=True)
def _plain_text_kernel(
    lo, hi, buf, starts, ends, mode, word, space, mark, pa, pb, out, counts, flags
):  # pragma: no cover - numba
    # the previous production kernel: plain MinHash of the token bigrams (documents lo..hi-1)
    h = pa.shape[0]
    for d in range(lo, hi):
        s, e = starts[d], ends[d]
        tmp = np.empty((e - s + 1) // 2 + 1, np.uint64)
        n, hit = hash_tokens(buf, s, e, mode[d] == 2, mode[d] == 0, word, space, mark, tmp)
        counts[d] = n
        flags[d] = hit
        if hit or n == 0:
            for p in range(h):
                out[d, p] = 0xFFFF
            continue
        mins = np.full(h, _TOP)
        m = n - 1 if n > 1 else 1
        for i in range(m):
            x = tmp[i] * np.uint64(0x9E3779B97F4A7C15) + (tmp[i + 1] if n > 1 else np.uint64(0))
            x = _mix(x)
            for p in range(h):
                v = (pa[p] * x + pb[p]) >> np.uint64(32)
                if v < mins[p]:
                    mins[p] = v
        for p in range(h):
            out[d, p] = np.uint16(mins[p] & np.uint64(0xFFFF))


def plain_signatures(v: Verifier, texts: list[str], hashes: int) -> np.ndarray:
    pa, pb = _permutations(hashes)
    sig = np.empty((len(texts), hashes), np.uint16)
    counts = np.zeros(len(texts), np.int64)
    special: dict[int, tuple[bytes, int]] = {}
    with kernel_threads(1):
        for i, j, chunk in token_chunks(v, texts, special):
            run_token_kernel(
                _plain_text_kernel, texts, special, i, j, chunk, (pa, pb), (sig, counts)
            )
            special.clear()
    return sig


def text_table(corpora: dict[str, list[str]], repeat: int) -> list[dict[str, Any]]:
    v = Verifier()
    h = plan_lsh().hashes
    rows = []
    for name, texts in corpora.items():
        tok = float(np.mean([len(v.tokens(t)) for t in texts[:2000]]))
        row: dict[str, Any] = {"corpus": name, "docs": len(texts), "mean_tokens": round(tok, 1)}
        cases: list[tuple[str, Callable[[], Any]]] = [
            ("token loop only (1 value)", lambda t=texts: plain_signatures(v, t, 1)),
            ("before: plain MinHash, 126", lambda t=texts: plain_signatures(v, t, 126)),
            ("after: neardup, 126", lambda t=texts: minhash_signatures(v, t, 126)),
            (f"after: neardup, {h} (default plan)", lambda t=texts: minhash_signatures(v, t, h)),
        ]
        for label, fn in cases:
            row[label] = round(_best(fn, repeat) / len(texts) * 1e6, 2)
        rows.append(row)
    return rows


def band_pairs_table(n: int) -> list[dict[str, Any]]:
    from bench_dedup import generate

    v = Verifier()
    texts = generate("short", n, 0, 0.1)
    rows = []
    for plan in (plan_lsh(), plan_lsh(bands=42, rows=3)):
        sig, tok = minhash_signatures(v, texts[:2000], plan.hashes)
        lsh_pairs(sig, tok > 0, plan)  # compile
        c0 = time.process_time()
        sig, tok = minhash_signatures(v, texts, plan.hashes)
        c1 = time.process_time()
        info: dict[str, Any] = {}
        lsh_pairs(sig, tok > 0, plan, info)
        c2 = time.process_time()
        rows.append(
            {"docs": n, "bands": plan.bands, "rows": plan.rows,
             "signatures_cpu_s": round(c1 - c0, 2), "band_pairs_cpu_s": round(c2 - c1, 2),
             "band_pairs_compared": info["raw_pairs"], "candidates": info["pairs"]}
        )  # fmt: skip
        del sig
    return rows


def machine() -> dict[str, Any]:
    from bench_dedup import machine as base

    return base(load_average=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller corpora, fewer sizes")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--trials", type=int, default=6000, help="pairs per size (statistics)")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "dev")
    ap.add_argument("--band-pairs", type=int, default=0, help="also time lsh_pairs on N posts")
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_minhash.json"
    )
    args = ap.parse_args()
    with kernel_threads(1):  # every measurement on one thread (neardup's kernels too)
        _measure(args)


def _measure(args: argparse.Namespace) -> None:
    from bench_dedup import generate

    sizes = [5, 20, 100, 600, 3000] if args.quick else [5, 10, 20, 40, 100, 300, 1000, 3000]
    h = plan_lsh().hashes
    sketch = sketch_table(126, sizes, args.repeat) + sketch_table(h, sizes, args.repeat)
    print(f"\nsketch: CPU us per set of n shingle hashes (one thread, best of {args.repeat})")
    print(f"{'n':>6} {'hashes':>6}" + "".join(f"{s:>22}" for s in SCHEMES))
    for r in sketch:
        print(f"{r['shingles']:>6} {r['hashes']:>6}" + "".join(f"{r[s]:>22.3f}" for s in SCHEMES))
    stats = stats_table([5, 9, 39, 126, 600], args.trials)
    print(
        f"\nstatistics at the plan's Jaccard, {args.trials} pairs per size (default plan {h} values)"
    )
    print(
        f"{'n':>6} {'scheme':>22} {'J':>7} {'value rate':>11} {'var/binom':>10} {'band':>8} {'curve':>8} {'sd':>7}"
    )
    for r in stats:
        print(f"{r['shingles']:>6} {r['scheme']:>22} {r['jaccard']:>7.4f} {r['value_rate']:>11.4f} "
              f"{r['variance_vs_binomial']:>10.3f} {r['band_rate']:>8.4f} {r['curve']:>8.4f} {r['sd']:>7.4f}")  # fmt: skip
    n_short, n_long = (20_000, 2_000) if args.quick else (100_000, 10_000)
    corpora = {
        "generated short posts": generate("short", n_short, 0, 0.1),
        "generated long (~3.5 KB)": generate("long", n_long, 1, 0.1),
    }
    dev = args.data / "docs.jsonl"
    if dev.exists():
        with dev.open(encoding="utf-8") as fh:
            corpora["dev set"] = [json.loads(line)["text"] for line in fh]
    texts = text_table(corpora, args.repeat)
    print(f"\ntexts: CPU us per document, minhash_signatures (one thread, best of {args.repeat})")
    for r in texts:
        print("  " + ", ".join(f"{k}: {v}" for k, v in r.items()))
    pairs = band_pairs_table(args.band_pairs) if args.band_pairs else []
    for r in pairs:
        print("band pairs: " + ", ".join(f"{k}: {v}" for k, v in r.items()))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"machine": machine(), "sketch_us": sketch, "statistics": stats, "texts_us": texts}
    if pairs:
        doc["band_pairs"] = pairs
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
