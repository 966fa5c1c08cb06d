#!/usr/bin/env python3
"""Each stage of ``neardup dedup`` against what this machine can do with the same file.

The input is one of the corpora of ``bench_dedup.py --peers`` (``peers_dedup.build_corpus``:
``mix``, the dev set in ``--n`` generated documents, or ``short``, ``--n`` generated posts),
built once into ``--workdir`` and shared with that benchmark; or any JSONL file (``--input``).

The machine's limits, on that file:

* ``cat FILE > /dev/null``: cold (the file's pages dropped from the page cache first with
  ``posix_fadvise(DONTNEED)``; on a VM the host may still cache them) and warm;
* parsing every line with ``orjson.loads`` (one process, one thread, the file in memory);
* xxh64 of the file's bytes (one call over the whole buffer) and of every line (one call a line).

neardup's stages: ``dedup_files`` (what ``neardup dedup`` runs) on defaults, in a child
process, the numba cache warm (one untimed run first), with the times its progress callback
marks (reading ends, writing starts) and the summary's ``timings_s``: read and parse (the exact
hashes and fingerprints run beside the reader), what is left of the exact stage and of the
fingerprints after reading ends, MinHash signatures, candidate pairs, verification, keep, write
(the kept documents, pairs and clusters CSVs, summary); and the reader alone (``read_corpus``,
nothing else). Each row: seconds, MB/s of the input, µs per document, and its multiple of the
machine's floor for that kind of work (read: ``cat`` warm; parse: orjson; hash: xxh64).

    nice -n 5 python benchmarks/bench_stages.py --corpus mix --n 1000000
    python benchmarks/bench_stages.py --input docs.jsonl --workers 1

Prints the table and writes ``benchmarks/results/bench_stages.json`` (with the machine).
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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))


def drop_cache(path: Path) -> None:
    """Ask the kernel to drop ``path``'s pages from the page cache (only this file's)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _timed(fn: Any, *a: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn(*a)
    return time.perf_counter() - t0, out


def machine_floors(path: Path) -> dict[str, Any]:
    """What reading, parsing and hashing ``path`` costs on this machine (seconds)."""
    import orjson
    import xxhash

    def cat() -> None:
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)

    out: dict[str, Any] = {}
    drop_cache(path)
    out["cat_cold_s"], _ = _timed(cat)
    cat()
    out["cat_warm_s"] = min(_timed(cat)[0] for _ in range(3))
    data = path.read_bytes()
    lines = data.splitlines()

    def parse() -> int:
        n = 0
        for line in lines:
            n += len(orjson.loads(line)["text"])
        return n

    out["orjson_parse_s"], _ = _timed(parse)
    out["xxh64_bytes_s"] = min(_timed(lambda: xxhash.xxh64(data).intdigest())[0] for _ in range(3))
    h = xxhash.xxh64_intdigest
    out["xxh64_lines_s"], _ = _timed(lambda: [h(x) for x in lines])
    return {k: round(v, 4) for k, v in out.items()}


def child(path: Path, workers: int | None) -> dict[str, Any]:
    """neardup's stages on ``path`` (run in a child process; prints JSON)."""
    from neardup.batch.files import dedup_files
    from neardup.io import read_corpus
    from neardup.rules.config import DedupConfig

    cfg = DedupConfig() if workers is None else DedupConfig(workers=workers)
    with tempfile.TemporaryDirectory(prefix="neardup-stages-") as tmp:
        outs = {
            "output": f"{tmp}/kept.jsonl",
            "pairs_out": f"{tmp}/pairs.csv",
            "clusters_out": f"{tmp}/clusters.csv",
            "summary_json": f"{tmp}/summary.json",
        }
        dedup_files([str(path)], config=cfg, **outs)  # untimed: the numba cache warm
        for p in outs.values():
            os.unlink(p)
        os.sync()
        marks: dict[str, float] = {}

        def progress(stage: str, done: int, total: int) -> None:
            now = time.perf_counter()
            marks.setdefault(f"{stage}_first", now)
            marks[f"{stage}_last"] = now

        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        result = dedup_files([str(path)], config=cfg, progress=progress, **outs)
        t_end = time.perf_counter()
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        t0r = time.perf_counter()
        with read_corpus([str(path)]) as corpus:
            n_read = len(corpus.texts)
        reader_s = time.perf_counter() - t0r
    s = result.stats
    return {
        "documents": s["documents"],
        "workers": s["config"]["workers"],
        "elapsed_s": round(t_end - t0, 4),
        "cpu_s": round(ru1.ru_utime - ru0.ru_utime + ru1.ru_stime - ru0.ru_stime, 3),
        "read_s": round(marks["read_last"] - t0, 4),
        "write_s": round(t_end - marks["write_first"], 4) if "write_first" in marks else None,
        "timings_s": s["timings_s"],
        "lsh": {k: v for k, v in (s.get("lsh") or {}).items() if k.endswith("_s")},
        "reader_alone_s": round(reader_s, 4),
        "reader_docs": n_read,
        "kernel_compile_s": s.get("kernel_compile_s"),
    }


def rows(floors: dict[str, Any], nd: dict[str, Any], mb: float) -> list[dict[str, Any]]:
    """The table: one row per stage, with its floor."""
    t = nd["timings_s"]
    sig = nd["lsh"].get("signatures_s")
    cand = t.get("candidates")
    out = [
        ("machine: cat, cold", floors["cat_cold_s"], None),
        ("machine: cat, warm", floors["cat_warm_s"], None),
        ("machine: orjson parse (1 thread)", floors["orjson_parse_s"], None),
        ("machine: xxh64 of the bytes", floors["xxh64_bytes_s"], None),
        ("machine: xxh64 of every line", floors["xxh64_lines_s"], None),
        ("neardup: reader alone (read_corpus)", nd["reader_alone_s"], floors["orjson_parse_s"]),
        ("neardup: read + parse (exact, fingerprints beside)", nd["read_s"], floors["orjson_parse_s"]),
        ("neardup: exact hashes (rest after reading)", t.get("exact"), floors["xxh64_lines_s"]),
        ("neardup: fingerprints (rest after reading)", t.get("fingerprint"), floors["orjson_parse_s"]),
        ("neardup: MinHash signatures", sig, floors["orjson_parse_s"]),
        ("neardup: candidate pairs (bands, SimHash)", None if cand is None or sig is None else cand - sig, floors["orjson_parse_s"]),
        ("neardup: verify", t.get("verify"), floors["orjson_parse_s"]),
        ("neardup: keep (clusters)", t.get("cluster"), floors["orjson_parse_s"]),
        ("neardup: write (kept, pairs, clusters, summary)", nd["write_s"], floors["cat_warm_s"]),
        ("neardup: total (wall)", nd["elapsed_s"], floors["orjson_parse_s"]),
        ("neardup: total (CPU, all threads)", nd["cpu_s"], floors["orjson_parse_s"]),
    ]  # fmt: skip
    floor_name = {
        floors["orjson_parse_s"]: "orjson parse",
        floors["xxh64_lines_s"]: "xxh64 lines",
        floors["cat_warm_s"]: "cat warm",
    }
    res = []
    for name, s, floor in out:
        res.append(
            {
                "stage": name,
                "floor": None if floor is None else floor_name[floor],
                "s": None if s is None else round(s, 3),
                "mb_per_s": None if not s else round(mb / s, 1),
                "us_per_doc": None if s is None else round(1e6 * s / nd["documents"], 2),
                "x_floor": None if not (s and floor) else round(s / floor, 2),
            }
        )
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="mix", help="mix or short (bench_dedup.py --peers')")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--edit-pairs", type=int, default=50)
    ap.add_argument("--shards", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "dev")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/neardup-peers"))
    ap.add_argument("--input", type=Path, default=None, help="any JSONL file instead")
    ap.add_argument("--workers", type=int, default=None, help="default: neardup's (every CPU)")
    ap.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=BENCH / "results" / "bench_stages.json")
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.workers)))
        return
    from peers_dedup import build_corpus, machine

    path = args.input
    if path is None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        path = build_corpus(args.corpus, args) / "docs.jsonl"
    mb = path.stat().st_size / 1e6
    load0 = os.getloadavg()
    floors = machine_floors(path)
    cmd = [sys.executable, __file__, "--child", str(path)]
    cmd += [] if args.workers is None else ["--workers", str(args.workers)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        raise SystemExit("the neardup run failed")
    nd = json.loads(proc.stdout.strip().splitlines()[-1])
    table = rows(floors, nd, mb)
    print(f"{path} ({mb:.1f} MB, {nd['documents']:,} documents; neardup workers {nd['workers']})")
    print(f"{'stage':<52} {'s':>8} {'MB/s':>9} {'µs/doc':>8} {'x floor':>8}  floor")
    for r in table:
        s = "-" if r["s"] is None else f"{r['s']:.3f}"
        mbs = "-" if r["mb_per_s"] is None else f"{r['mb_per_s']:,.1f}"
        us = "-" if r["us_per_doc"] is None else f"{r['us_per_doc']:.2f}"
        xf = "-" if r["x_floor"] is None else f"{r['x_floor']:.2f}"
        print(f"{r['stage']:<52} {s:>8} {mbs:>9} {us:>8} {xf:>8}  {r['floor'] or ''}")
    doc = {
        "command": "python benchmarks/bench_stages.py " + " ".join(sys.argv[1:]),
        "input": str(path),
        "input_mb": round(mb, 1),
        "machine": machine() | {"load_before": [round(x, 2) for x in load0]},
        "floors_s": floors,
        "neardup": nd,
        "table": table,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
