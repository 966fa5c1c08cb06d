"""Where a large window's candidates come from, and what a stored summary per row could spare:
the ``lsh`` decision's candidates counted per document, in process, on a copy of a store.

    .venv/bin/python benchmarks/bench_candidates.py \
        --store /tmp/bw/n10000000/server/namespaces/default \
        --texts-file /tmp/bw/n10000000/load-throughput.jsonl --skip 200000 \
        --out benchmarks/results/bench_candidates_10m.json

The server's CPU per document grows with the window (docs/service.md, *The window's growth
curve*). This benchmark says why, on a store ``bench_window.py --keep`` left (or any ``lsh``
store): it copies ``--store``, then checks ``--docs`` documents (the text fields of
``--texts-file`` after its first ``--skip`` lines, which a kept ``bench_window.py`` store has
not stored yet) in groups of ``--batch`` with ``check`` (nothing is added, so every group sees
the same window), and counts per document, by wrapping the decider's steps:

* the SimHash hits (within the radius; after the stored token-count and token-mask bounds,
  and how many the masks turned down; after the cached histogram bound), the distinct band
  candidates, those the stored sketches let through, and those of them the token masks
  turned down (both mask counts 0 on a store whose rows have no masks);
* the rows read from SQLite (with their texts) and the pairs verified and accepted, the pairs
  by the stored row's token count (short <= 60 tokens, mid <= 300, long);
* the process's CPU per document for the checks.

Then, for the pairs still verified, what a per-row summary stored with each row's sketch would
have turned down without reading the row: an upper bound of the multiset token overlap from the
query's tokens and the summary, decided by the verifier's own rule (``2c / (la + lb) >=
threshold``, or containment for texts of ``min_containment_tokens`` or more). Schemes: a 64-bit
mask of the row's token buckets (8 bytes a row), 64 buckets of 4-bit counts (32), 512 buckets
of 4-bit counts saturating at 15 (256: the stored summaries' code until 2026-12-06), 1,024
buckets of 4-bit codes (512: the summaries' code now, counts to 11 as they are and larger ones
by the upper end of 12-15, 16-23 or 24-47), and 512 and 1,024 buckets of 8-bit counts (the
verifier's own first step, before and after it went to 1,024 buckets). A bound never turns
down a pair the verifier accepts; the run fails if one does. Beside each scheme: the bytes a
document it would cost on the window's mix of lengths (stored token counts of a sample of
rows), whole, or kept only for long rows.

``--histogram-cache-rows 0`` turns the decider's cache of histograms off, and with it the
stored summaries (read into that cache): every SimHash hit the token-count and token-mask
bounds let by is then read and verified, so the schemes are compared on all of those pairs,
not only on the ones the store's own summaries let by.

Prints a table and writes JSON (``--out``) with the machine, the commit and every figure.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

#: token counts that split the stored rows into length classes
CLASSES = (("short", 60), ("mid", 300), ("long", 1 << 62))
#: the summary schemes simulated: name -> (buckets, bits a bucket, code: "mask" (a bucket's
#: bit), "saturating" (counts up to 2**bits - 2; the top value unbounded), "ranged" (the
#: summaries' 4-bit codes))
SCHEMES = {
    "mask 64 x 1 bit": (64, 1, "mask"),
    "64 x 4-bit counts": (64, 4, "saturating"),
    "512 x 4-bit counts": (512, 4, "saturating"),
    "1,024 x 4-bit ranged codes": (1024, 4, "ranged"),
    "512 x 8-bit counts": (512, 8, "saturating"),
    "1,024 x 8-bit counts": (1024, 8, "saturating"),
}
#: the ranged code's upper ends above the counts it keeps as they are (0-11): a count up to
#: each is stored as it, a larger one as unbounded
RANGED = (15, 23, 47)
_MIX = np.uint64(0x9E3779B97F4A7C15)


def length_class(tokens: int) -> str:
    """The class of a row of ``tokens`` tokens."""
    return next(name for name, top in CLASSES if tokens <= top)


def bucket_counts(hashes: np.ndarray, buckets: int) -> np.ndarray:
    """Counts of 32-bit token hashes in ``buckets`` buckets (a power of two) by the top bits of
    a multiplicative mix."""
    shift = np.uint64(64 - int(buckets).bit_length() + 1)
    b = ((hashes.astype(np.uint64) * _MIX) >> shift).astype(np.int64)
    return np.bincount(b, minlength=buckets)


def overlap_bound(qa: np.ndarray, rb: np.ndarray, buckets: int, bits: int, code: str) -> int:
    """An upper bound of the multiset overlap of token hashes ``qa`` (the query's, all known)
    and ``rb`` (the row's, known only through its summary): per bucket the smaller count, a
    row's count at its saturation taken as unbounded (the query's count), a mask's set bit as
    unbounded too, a ranged code's count as the upper end of its range."""
    hq = bucket_counts(qa, buckets)
    hr = bucket_counts(rb, buckets)
    big = np.iinfo(np.int64).max
    if code == "mask":
        hr = np.where(hr > 0, hq, 0)
    elif code == "ranged":
        hr = np.select(
            [hr <= 11, hr <= RANGED[0], hr <= RANGED[1], hr <= RANGED[2]], [hr, *RANGED], big
        )
    else:
        hr = np.where(hr >= (1 << bits) - 1, big, hr)
    return int(min(np.minimum(hq, hr).sum(), qa.size, rb.size))


def passes(c: int, la: int, lb: int, cfg: dict[str, Any]) -> bool:
    """The verifier's decision on an overlap (bound) ``c`` of texts of ``la`` and ``lb`` tokens
    (``neardup.verify.overlap``'s formulas)."""
    shorter = min(la, lb)
    if shorter == 0:
        return True  # not bounded: such a pair is never turned down by a summary
    ok = 2.0 * c / (la + lb) >= cfg["threshold"]
    return bool(
        ok
        or (
            cfg["containment"] <= 1.0
            and shorter >= cfg["min_containment_tokens"]
            and c / shorter >= cfg["containment"]
        )
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    from loadgen import file_texts

    from neardup.online import Deduplicator
    from neardup.online import decide as decide_mod
    from neardup.rules.lsh import sketch_tokens
    from neardup.store import engine as engine_mod
    from neardup.verify.tokens import token_hashes

    counts: collections.Counter[str] = collections.Counter()
    pairs: list[tuple[str, str, bool]] = []
    seen: dict[str, Any] = {}

    def wrap(owner: Any, name: str, after: Any) -> None:
        fn = getattr(owner, name)

        def wrapper(self: Any, *a: Any, **k: Any) -> Any:
            out = fn(self, *a, **k)
            after(self, a, k, out)
            return out

        setattr(owner, name, wrapper)

    def on_search(_s: Any, a: Any, _k: Any, out: Any) -> None:
        counts["simhash hits"] += int(out[1].size)

    def on_length(_s: Any, a: Any, _k: Any, out: Any) -> None:
        counts["after the token-count and token-mask bounds"] += int(out[1].size)

    def on_hist(_s: Any, a: Any, _k: Any, out: Any) -> None:
        counts["after the cached histogram bound"] += int(out[1].size)

    def on_sketch(_s: Any, a: Any, _k: Any, out: Any) -> None:
        counts["band candidates (distinct a group)"] += int(a[0].size)
        counts["band candidates the sketches and token masks let by"] += len(out)

    def on_fetch(_s: Any, a: Any, k: Any, out: Any) -> None:
        if k.get("with_text"):
            counts["rows read with their text"] += len(out)

    def on_verify(s: Any, a: Any, _k: Any, out: Any) -> None:
        texts, qa, cb = a[0], a[1], a[2]
        seen["verifier"] = s.verifier
        ok = out[0].tolist()
        counts["pairs verified"] += len(ok)
        counts["pairs accepted"] += sum(ok)
        for x, y, o in zip(qa, cb, ok, strict=True):
            pairs.append((texts[x], texts[y], bool(o)))

    wrap(engine_mod.Store, "search", on_search)
    wrap(decide_mod.Decider, "_length_bound", on_length)
    wrap(decide_mod.Decider, "_histogram_bound", on_hist)
    wrap(decide_mod.Decider, "_sketch_filter", on_sketch)
    wrap(engine_mod.Store, "fetch", on_fetch)
    wrap(decide_mod.Decider, "_verify_pairs", on_verify)

    texts = file_texts(args.texts_file, args.skip + args.docs)[args.skip :]
    work = Path(tempfile.mkdtemp(prefix="nd-cands-"))
    try:
        store = work / "store"
        t0 = time.perf_counter()
        shutil.copytree(args.store, store)
        copy_s = time.perf_counter() - t0
        opts = {}
        if args.histogram_cache_rows is not None:
            opts["histogram_cache_rows"] = args.histogram_cache_rows
        d = Deduplicator.open(store, candidates="lsh", **opts)
        if d.lsh_plan is None:
            raise SystemExit(f"--store {args.store}: not an lsh store")
        plan = f"{d.lsh_plan.bands} x {d.lsh_plan.rows}"
        rows_total = len(d)
        # the window's mix of lengths: the stored token counts of a sample of rows
        rng = np.random.default_rng(1)
        sample = np.unique(rng.integers(0, d.store.next_rowid, args.sample))
        present, sk = d.store.sketches(sample)
        toks = sketch_tokens(sk[present])
        mix = {
            name: float(np.mean([length_class(int(t)) == name for t in toks]))
            for name, _ in CLASSES
        }
        warm = [{"id": f"cands-warm-{j}", "text": texts[j]} for j in range(min(100, len(texts)))]
        d.submit("check", warm, inline=True)[0].result()
        counts.clear()
        pairs.clear()
        dec = d._decider
        before = (dec.mask_rejected, dec.mask_rejected_rows)
        c0, t0 = os.times(), time.perf_counter()
        for i in range(0, args.docs, args.batch):
            docs = [
                {"id": f"cands-{j}", "text": texts[j]}
                for j in range(i, min(args.docs, i + args.batch))
            ]
            d.submit("check", docs, inline=True)[0].result()
        c1, wall = os.times(), time.perf_counter() - t0
        # what the stored token masks turned down (0 on a store built before them)
        counts["SimHash hits the token masks turned down"] = dec.mask_rejected - before[0]
        counts["band candidates the sketches let by, the token masks turned down"] = (
            dec.mask_rejected_rows - before[1]
        )
        d.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    verifier = seen["verifier"]
    cfg = verifier.config()
    ha, oa = token_hashes(verifier, [p[0] for p in pairs])
    hb, ob = token_hashes(verifier, [p[1] for p in pairs])
    by_class: dict[str, dict[str, Any]] = {
        name: {"pairs": 0, "accepted": 0, "turned down": dict.fromkeys(SCHEMES, 0)}
        for name, _ in CLASSES
    }
    wrong = 0
    for i, (_, _, ok) in enumerate(pairs):
        qa, rb = ha[oa[i] : oa[i + 1]], hb[ob[i] : ob[i + 1]]
        cls = by_class[length_class(rb.size)]
        cls["pairs"] += 1
        cls["accepted"] += ok
        for name, (buckets, bits, code) in SCHEMES.items():
            if not passes(overlap_bound(qa, rb, buckets, bits, code), qa.size, rb.size, cfg):
                cls["turned down"][name] += 1
                wrong += ok
    if wrong:
        raise SystemExit(f"a summary bound turned down {wrong} pairs the verifier accepted: a bug")
    n = args.docs
    per_doc = {k: v / n for k, v in counts.items()}
    fails = sum(c["pairs"] - c["accepted"] for c in by_class.values())
    schemes = {}
    for name, (buckets, bits, _) in SCHEMES.items():
        size = buckets * bits // 8
        down = sum(c["turned down"][name] for c in by_class.values())
        schemes[name] = {
            "bytes a row": size,
            "bytes a document, every row": size,
            "bytes a document, long rows only": size * mix["long"],
            "turned down per document": down / n,
            "share of the failing pairs turned down": down / fails if fails else None,
        }
    return {
        "plan": plan,
        "rows in the window": rows_total,
        "copy_s": copy_s,
        "docs": n,
        "cpu_us_per_doc": (c1.user - c0.user + c1.system - c0.system) / n * 1e6,
        "wall_us_per_doc": wall / n * 1e6,
        "per_doc": per_doc,
        "stored length mix (sample)": {"rows": int(present.sum()), **mix},
        "pairs by the stored row's length": by_class,
        "summaries": schemes,
        "verifier": cfg,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--store", required=True, help="an lsh store's data directory (copied, then used)"
    )
    ap.add_argument("--texts-file", required=True, help="JSONL whose text fields are checked")
    ap.add_argument("--skip", type=int, default=0, help="lines of --texts-file skipped first")
    ap.add_argument("--docs", type=int, default=3000, help="documents checked (default 3000)")
    ap.add_argument("--batch", type=int, default=1000, help="documents a group (default 1000)")
    ap.add_argument("--sample", type=int, default=100_000, help="rows sampled for the length mix")
    ap.add_argument("--histogram-cache-rows", type=int, default=None, help="the decider's histogram cache (default: the store's; 0: off, and the stored summaries unused)")  # fmt: skip
    ap.add_argument("--out", help="JSON file to write")
    args = ap.parse_args()
    if not Path(args.store).is_dir():
        ap.error(f"--store {args.store}: not a directory")
    if not Path(args.texts_file).is_file():
        ap.error(f"--texts-file {args.texts_file}: not a file")
    if args.docs < 1 or args.batch < 1 or args.skip < 0:
        ap.error("--docs and --batch must be positive, --skip at least 0")
    res = run(args)
    print(
        f"{res['plan']} plan, {res['rows in the window']:,} rows, {res['docs']:,} documents checked"
    )
    print(f"{'per document':44s}{'':>10s}")
    print(f"  {'CPU µs (process)':42s}{res['cpu_us_per_doc']:10.1f}")
    for k, v in res["per_doc"].items():
        print(f"  {k:42s}{v:10.2f}")
    print(
        f"{'pairs by stored length':20s}{'pairs':>8s}{'accepted':>10s}"
        + "".join(f"{s:>28s}" for s in SCHEMES)
    )
    for name, c in res["pairs by the stored row's length"].items():
        print(
            f"  {name:18s}{c['pairs']:8d}{c['accepted']:10d}"
            + "".join(f"{c['turned down'][s]:28d}" for s in SCHEMES)
        )
    mix = res["stored length mix (sample)"]
    print(f"stored rows: short {mix['short']:.3f}, mid {mix['mid']:.3f}, long {mix['long']:.3f}")
    print(
        f"{'summary':30s}{'B a row':>8s}{'B/doc, long only':>18s}{'spared/doc':>12s}{'of failing':>12s}"
    )
    for name, s in res["summaries"].items():
        share = s["share of the failing pairs turned down"]
        print(
            f"  {name:28s}{s['bytes a row']:8d}{s['bytes a document, long rows only']:18.1f}"
            f"{s['turned down per document']:12.2f}{'-' if share is None else f'{share:.3f}':>12s}"
        )
    if args.out:
        from bench_dedup import machine, write_results
        from trees import commit_of

        write_results(
            Path(args.out),
            {
                "benchmark": "bench_candidates",
                "issue": 36,
                "machine": machine(load_average=True),
                "commit": commit_of(ROOT),
                "params": vars(args),
                **res,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
