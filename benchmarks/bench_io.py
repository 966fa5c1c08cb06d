#!/usr/bin/env python3
"""Corpus I/O for ``neardup dedup``: JSONL read, kept-record write, pairs/clusters CSV writers.

Generates (or takes, ``--input``) a JSONL corpus of ``--n`` documents per kind — ``long``
(~3.5 KB English-like text) and ``short`` (~100 characters) — and measures, each phase in its
own child process so that peak RSS is the phase's own:

* **new**: ``neardup.io.read_corpus`` (16 MiB blocks + orjson), then ``write_kept`` of a random
  ~90 % of the records (raw byte spans), then, for scale, ``Fingerprinter().fingerprint_many``
  over the same texts (``--workers``); peak RSS of read + write, and the size of the texts;
* **baseline**: the same read with the standard-library reader (``NEARDUP_REFERENCE=io``:
  line by line, ``bytes.decode`` + ``json.loads``, the reader before this change) and the same
  write done the way it was before (every line decoded, kept lines looked up in a set and
  re-encoded);
* **csv**: ``--pairs-out`` / ``--clusters-out`` for ``--rows`` rows (default: n), the
  vectorised writers vs ``csv.writer`` over ``pair_rows()``-style tuples (the old path).
* **formats** (short only, with ``--formats``): CSV and Parquet read + write of the same corpus.

    python benchmarks/bench_io.py --n 1000000                   # both kinds, 1 M each
    python benchmarks/bench_io.py --n 100000 --kinds short --formats

Prints a table and writes ``benchmarks/results/bench_io.json``. Timings are wall-clock on
whatever else the machine is doing; the load average is recorded with the results.
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

SENTENCES = 50_000
WORDS_PER_SENTENCE = (8, 22)
SENTENCES_PER_LONG = 38  # ~3.5 KB
ODD_ASCII = ['say "hi"', "tab\there", "back\\slash", "a/b", '"quoted"']  # JSON escapes
ODD_WIDE = ["café", "naïve", "中文", "文档", "“quoted”", "ü", "😀"]  # non-ASCII


def _sentences(seed: int) -> list[str]:
    """A pool of made-up sentences (pronounceable words; 2 % carry a JSON escape, 0.2 % a
    non-ASCII word: ~7 % of long documents are not pure ASCII)."""
    rng = np.random.default_rng(seed)
    cons, vow = "bcdfghjklmnprstvwyz", "aeiou"
    vocab = []
    for _ in range(30_000):
        k = int(rng.integers(2, 9))
        vocab.append(
            "".join(
                (cons if i % 2 == 0 else vow)[int(rng.integers(0, 19 if i % 2 == 0 else 5))]
                for i in range(k)
            )
        )
    out = []
    for _ in range(SENTENCES):
        k = int(rng.integers(*WORDS_PER_SENTENCE))
        words = [vocab[int(i)] for i in rng.zipf(1.3, k) % len(vocab)]
        u = rng.random()
        if u < 0.02:  # 2 % of sentences carry an escape, 0.2 % a non-ASCII word
            odd = ODD_WIDE if u < 0.002 else ODD_ASCII
            words[int(rng.integers(0, k))] = odd[int(rng.integers(0, len(odd)))]
        out.append(" ".join(words).capitalize() + ".")
    return out


def generate(path: Path, kind: str, n: int, seed: int) -> None:
    """Write ``n`` JSONL records ``{"id", "text", "source"}`` of ``kind`` to ``path``."""
    import orjson

    pool = _sentences(seed)
    rng = np.random.default_rng(seed + 1)
    with path.open("wb", buffering=1 << 22) as fh:
        for lo in range(0, n, 10_000):
            m = min(10_000, n - lo)
            if kind == "long":
                pick = rng.integers(0, len(pool), (m, SENTENCES_PER_LONG))
                texts = [" ".join([pool[j] for j in row]) for row in pick.tolist()]
            else:
                pick = rng.integers(0, len(pool), m).tolist()
                texts = [pool[j][:100] for j in pick]
            fh.write(
                b"".join(
                    orjson.dumps({"id": f"d{lo + i}", "text": t, "source": "gen"}) + b"\n"
                    for i, t in enumerate(texts)
                )
            )


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _text_mb(texts: list[str]) -> float:
    return sum(map(sys.getsizeof, texts)) / 1e6


def _keep_mask(n: int) -> np.ndarray:
    return np.random.default_rng(7).random(n) < 0.9


def _old_write_jsonl(corpus, keep: np.ndarray, output: str) -> int:
    """``write_kept`` for jsonl → jsonl as it was before the passthrough (commit a97413d)."""
    from neardup.io import atomic_open

    n = 0
    with atomic_open(output, "w", encoding="utf-8", newline="\n") as fh:
        for src in corpus.sources:
            pos = np.flatnonzero(keep[src.first : src.first + src.count])
            wanted = {int(src.lines[p]) for p in pos.tolist()}
            with open(src.temp or src.path, "rb") as inp:
                for lineno, raw in enumerate(inp, 1):
                    if lineno in wanted:
                        fh.write(raw.decode(src.encoding, errors="replace").rstrip("\r\n") + "\n")
                        n += 1
    return n


def child_read_write(path: str, baseline: bool, workers: int, fingerprint: bool) -> dict:
    from neardup.io import read_corpus, write_kept

    out = {"input_mb": round(os.path.getsize(path) / 1e6, 1)}
    t0, c0 = time.perf_counter(), time.process_time()
    corpus = read_corpus([path])
    out["read_s"] = round(time.perf_counter() - t0, 3)
    out["read_cpu_s"] = round(time.process_time() - c0, 3)
    n = len(corpus)
    out["n"] = n
    out["read_docs_per_s"] = round(n / out["read_s"], 1)
    out["read_mb_per_s"] = round(out["input_mb"] / out["read_s"], 1)
    out["rss_after_read_mb"] = round(_peak_rss_mb(), 1)
    out["texts_mb"] = round(_text_mb(corpus.texts), 1)
    keep = _keep_mask(n)
    dest = str(Path(path).with_suffix(".out.jsonl"))
    t0, c0 = time.perf_counter(), time.process_time()
    written = (_old_write_jsonl if baseline else write_kept)(corpus, keep, dest)
    out["write_s"] = round(time.perf_counter() - t0, 3)
    out["write_cpu_s"] = round(time.process_time() - c0, 3)
    out["written"] = written
    out["output_mb"] = round(os.path.getsize(dest) / 1e6, 1)
    out["write_mb_per_s"] = round(out["output_mb"] / out["write_s"], 1)
    out["peak_rss_read_write_mb"] = round(_peak_rss_mb(), 1)
    os.unlink(dest)
    if fingerprint:
        from neardup import Fingerprinter

        fp = Fingerprinter()
        fp.fingerprint_many(["warm up"], workers=workers)
        t0, c0 = time.perf_counter(), time.process_time()
        fp.fingerprint_many(corpus.texts, workers=workers)
        out["fingerprint_s"] = round(time.perf_counter() - t0, 3)
        out["fingerprint_cpu_s"] = round(time.process_time() - c0, 3)
        out["fingerprint_docs_per_s"] = round(n / out["fingerprint_s"], 1)
        out["fingerprint_workers"] = workers
    corpus.close()
    return out


def child_csv(rows: int) -> dict:
    import csv
    import io

    from neardup.io.csvout import write_clusters_csv, write_pairs_csv
    from neardup.rules.config import STAGE_NAMES
    from neardup.verify.rule import RULE_EXACT, RULE_NAMES, RULE_SIMILARITY

    rng = np.random.default_rng(5)
    n = rows
    ids = [f"d{i}" for i in range(n)]
    a = np.sort(rng.integers(0, n, rows))
    b = np.minimum(a + rng.integers(1, 1000, rows), n - 1)
    dist = rng.integers(0, 19, rows).astype(np.int32)
    score = rng.random(rows)
    stage = (rng.random(rows) < 0.3).astype(np.uint8)
    rule = np.where(stage == 0, RULE_EXACT, RULE_SIMILARITY).astype(np.uint8)
    root = np.arange(n)
    dup = rng.random(n) < 0.2
    root[dup] = (np.flatnonzero(dup) * rng.random(int(dup.sum()))).astype(np.int64)
    root = root[root]
    cluster = np.unique(root, return_inverse=True)[1].astype(np.int64)
    keep = root == np.arange(n)
    out: dict = {"rows": rows}

    def timed(fn) -> tuple[float, bytes]:
        buf = io.BytesIO()
        t0 = time.perf_counter()
        fn(buf)
        return round(time.perf_counter() - t0, 3), buf.getvalue()

    def old_pairs(buf: io.BytesIO) -> None:
        fh = io.TextIOWrapper(buf, encoding="utf-8", newline="")
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["id_a", "id_b", "distance", "score", "stage", "rule"])
        w.writerows(
            [
                (ids[x], ids[y], int(d), round(float(s), 4), STAGE_NAMES[st], RULE_NAMES[ru])
                for x, y, d, s, st, ru in zip(
                    a.tolist(),
                    b.tolist(),
                    dist.tolist(),
                    score.tolist(),
                    stage.tolist(),
                    rule.tolist(),
                    strict=True,
                )
            ]
        )
        fh.flush()
        fh.detach()

    def old_clusters(buf: io.BytesIO) -> None:
        fh = io.TextIOWrapper(buf, encoding="utf-8", newline="")
        sizes = np.bincount(root, minlength=n)
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["id", "cluster", "cluster_size", "representative", "kept"])
        for i, doc_id in enumerate(ids):
            r = int(root[i])
            w.writerow([doc_id, int(cluster[i]), int(sizes[r]), ids[r], int(keep[i])])
        fh.flush()
        fh.detach()

    out["pairs_new_s"], new_p = timed(
        lambda f: write_pairs_csv(
            f, ids, a, b, dist, score, stage, STAGE_NAMES, rule=rule, rule_names=RULE_NAMES
        )
    )
    out["pairs_old_s"], old_p = timed(old_pairs)
    out["clusters_new_s"], new_c = timed(lambda f: write_clusters_csv(f, ids, cluster, root, keep))
    out["clusters_old_s"], old_c = timed(old_clusters)
    out["pairs_identical"] = new_p == old_p
    out["clusters_identical"] = new_c == old_c
    out["peak_rss_mb"] = round(_peak_rss_mb(), 1)
    return out


def child_formats(path: str) -> dict:
    """CSV and Parquet: convert the JSONL once (not timed), then time read + write each."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from neardup.io import read_corpus, write_kept

    table = pa.Table.from_pylist(
        [json.loads(x) for x in Path(path).read_text(encoding="utf-8").splitlines()]
    )
    out: dict = {}
    for fmt in ("csv", "parquet"):
        src = str(Path(path).with_suffix(f".{fmt}"))
        if fmt == "csv":
            pacsv.write_csv(table, src)
        else:
            pq.write_table(table, src)
        t0 = time.perf_counter()
        with read_corpus([src]) as c:
            read_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            dest = src + f".out.{fmt}"
            write_kept(c, _keep_mask(len(c)), dest)
            write_s = time.perf_counter() - t0
        out[fmt] = {
            "n": len(c),
            "read_s": round(read_s, 3),
            "read_docs_per_s": round(len(c) / read_s, 1),
            "write_s": round(write_s, 3),
        }
        os.unlink(dest)
        os.unlink(src)
    out["peak_rss_mb"] = round(_peak_rss_mb(), 1)
    return out


def _run_child(args: list[str]) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000, help="documents per kind")
    ap.add_argument("--kinds", nargs="+", default=["long", "short"], choices=["long", "short"])
    ap.add_argument("--input", help="use this JSONL file instead of generating (one kind)")
    ap.add_argument("--rows", type=int, default=None, help="rows for the CSV writers (n)")
    ap.add_argument("--workers", type=int, default=2, help="fingerprinting workers (scale)")
    ap.add_argument("--formats", action="store_true", help="also CSV/Parquet (short kind)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the stdlib baseline")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_io.json"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.child:
        if a.child == "new":
            res = child_read_write(a.path, False, a.workers, True)
        elif a.child == "baseline":
            os.environ["NEARDUP_REFERENCE"] = "io"
            res = child_read_write(a.path, True, a.workers, False)
        elif a.child == "csv":
            res = child_csv(a.rows)
        else:
            res = child_formats(a.path)
        print(json.dumps(res))
        return

    results: dict = {
        "n": a.n,
        "loadavg_start": os.getloadavg(),
        "cpus": os.cpu_count(),
        "kinds": {},
    }
    with tempfile.TemporaryDirectory(prefix="neardup-bench-io-") as tmp:
        for kind in a.kinds:
            if a.input:
                path = a.input
            else:
                path = str(Path(tmp) / f"{kind}.jsonl")
                t0 = time.perf_counter()
                generate(Path(path), kind, a.n, a.seed)
                print(f"[{kind}] generated {a.n:,} docs in {time.perf_counter() - t0:.1f}s",
                      file=sys.stderr)  # fmt: skip
            r: dict = {"loadavg": os.getloadavg()}
            # baseline, then new (the second reader may find more of the file in the page cache;
            # compare the CPU seconds, which exclude waiting for the disk)
            if not a.no_baseline:
                r["baseline"] = _run_child(["--child", "baseline", "--path", path])
                print(f"[{kind}] baseline: {r['baseline']}", file=sys.stderr)
            r["new"] = _run_child(["--child", "new", "--path", path, "--workers", str(a.workers)])
            print(f"[{kind}] new: {r['new']}", file=sys.stderr)
            if a.formats and kind == "short":
                r["formats"] = _run_child(["--child", "formats", "--path", path])
                print(f"[{kind}] formats: {r['formats']}", file=sys.stderr)
            results["kinds"][kind] = r
            if not a.input:
                os.unlink(path)
        rows = a.rows or a.n
        results["csv"] = _run_child(["--child", "csv", "--rows", str(rows)])
    results["loadavg_end"] = os.getloadavg()
    _print_table(results)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {a.out}")


def _print_table(res: dict) -> None:
    print(f"\nload average at start {res['loadavg_start']}, end {res['loadavg_end']}")
    hdr = (
        f"{'kind':<6} {'path':<9} {'n':>9} {'MB':>7} {'read s':>8} {'cpu s':>7} {'docs/s':>10} "
        f"{'MB/s':>7} {'write s':>8} {'cpu s':>7} {'MB/s':>7} {'peak RSS MB':>12} {'texts MB':>9}"
    )
    print(hdr)
    for kind, r in res["kinds"].items():
        for name in ("new", "baseline"):
            if name not in r:
                continue
            x = r[name]
            print(
                f"{kind:<6} {name:<9} {x['n']:>9,} {x['input_mb']:>7.0f} {x['read_s']:>8.2f} "
                f"{x['read_cpu_s']:>7.2f} {x['read_docs_per_s']:>10,.0f} {x['read_mb_per_s']:>7.0f} "
                f"{x['write_s']:>8.2f} {x['write_cpu_s']:>7.2f} {x['write_mb_per_s']:>7.0f} "
                f"{x['peak_rss_read_write_mb']:>12,.0f} {x['texts_mb']:>9,.0f}"
            )
        x = r["new"]
        if "fingerprint_s" in x:
            io_s = x["read_s"] + x["write_s"]
            print(
                f"{kind:<6} fingerprint-only ({x['fingerprint_workers']} workers) "
                f"{x['fingerprint_s']:.2f}s (cpu {x['fingerprint_cpu_s']:.2f}s) = "
                f"{x['fingerprint_docs_per_s']:,.0f} docs/s; "
                f"read+write = {io_s / x['fingerprint_s']:.2f}x fingerprinting time"
            )
        if "formats" in r:
            for fmt in ("csv", "parquet"):
                f = r["formats"][fmt]
                print(
                    f"{kind:<6} {fmt:<9} {f['n']:>9,} read {f['read_s']:.2f}s "
                    f"({f['read_docs_per_s']:,.0f} docs/s) write {f['write_s']:.2f}s"
                )
    c = res["csv"]
    print(
        f"\npairs.csv    {c['rows']:,} rows: new {c['pairs_new_s']:.2f}s, csv.writer "
        f"{c['pairs_old_s']:.2f}s, identical={c['pairs_identical']}"
    )
    print(
        f"clusters.csv {c['rows']:,} rows: new {c['clusters_new_s']:.2f}s, csv.writer "
        f"{c['clusters_old_s']:.2f}s, identical={c['clusters_identical']}"
    )


if __name__ == "__main__":
    main()
