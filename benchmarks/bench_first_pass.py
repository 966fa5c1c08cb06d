#!/usr/bin/env python3
"""The first pass of ``neardup store load`` (:func:`neardup.incremental.survey.survey`: every
record read once and checked, nothing written) over ONE large JSONL file, read a piece at a time
(``neardup.io.pieces``) or whole (``--piece-bytes 0``: one piece the size of the file, as the
pass read every file before pieces): each setting in its own process, with its wall and CPU
time, peak anonymous memory and peak mapped file pages. Prints a table and writes
``benchmarks/results/bench_first_pass.json``.

The file is ``bench_window.py``'s generated window (its ``--data`` folder kept with ``--keep``):
the first ``--files`` shards, uncompressed into one plain file under ``--work``, ``--copies``
times over (copy k's ids prefixed ``k-``, so that the ids stay unique):

    python benchmarks/bench_first_pass.py --corpus DIR/n10000000/corpus --files 100 --piece-bytes 268435456,0
    python benchmarks/bench_first_pass.py --corpus DIR/n10000000/corpus --files 100 --copies 5 --piece-bytes 268435456

The second is 50 M records in one ~30 GB file; read whole it would not fit a 24 GiB machine (the
first command's whole read gives the bytes a document), so only the pieces run there.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_dedup import machine, write_results  # noqa: E402
from bench_load_files import run_child  # noqa: E402
from bench_service import code_version  # noqa: E402

#: run in the child: the survey over an empty in-memory store, with a thread sampling
#: ``/proc/self/status`` every 0.2 s
_CHILD = """
import json, resource, sys, threading, time
t = time.perf_counter()
import neardup.io.pieces as pieces
from neardup.incremental.survey import survey
from neardup.io import plan_inputs
from neardup.online import Deduplicator
from bench_dedup import proc_memory
job = json.loads(sys.argv[1])
pieces.PIECE_BYTES = job["piece_bytes"] or (1 << 62)
peaks, stop = {}, []
def sample():
    while not stop:
        for k, v in proc_memory().items():
            peaks[k] = max(peaks.get(k, 0), v / 1024)
        time.sleep(0.2)
threading.Thread(target=sample, daemon=True).start()
reading = dict(text_field="text", id_field=None, encoding="utf-8", on_error="fail",
               generate_ids=False)
with Deduplicator.open(None) as d:
    t0 = time.perf_counter()
    s = survey(d, plan_inputs([job["file"]]), reading, time_field=None, drop_expired=False,
               chunk_docs=1_000_000)
    pass_s = time.perf_counter() - t0
    n, used, n_pieces = s.documents, s.used, s.files[0].pieces
    s.release()
stop.append(1)
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"documents": n, "used": used, "pieces": n_pieces, "pass_s": pass_s,
                  "wall_s": time.perf_counter() - t, "cpu_s": ru.ru_utime + ru.ru_stime,
                  "peak_rss_mib": ru.ru_maxrss / 1024, "peaks_mib": peaks}))
"""


def one_file(shards: list[str], copies: int, work: Path) -> tuple[str, int]:
    """The shards uncompressed into one plain JSONL file, ``copies`` times (copy k's ids
    prefixed ``k-``); its path and size. Made once and kept under ``work``."""
    import zstandard

    out = work / f"first-pass-{len(shards)}x{copies}.jsonl"
    if out.exists():
        return str(out), out.stat().st_size
    tmp = out.with_suffix(".part")
    with open(tmp, "wb") as dst:
        for k in range(copies):
            old, new = b'{"id":"', f'{{"id":"{k}-'.encode()
            for s in shards:
                with open(s, "rb") as src:
                    reader = zstandard.ZstdDecompressor().stream_reader(
                        src, read_across_frames=True
                    )
                    rest = b""
                    while chunk := reader.read(1 << 24):
                        chunk = rest + chunk
                        cut = chunk.rfind(b"\n") + 1
                        rest = chunk[cut:]
                        body = chunk[:cut]
                        dst.write(body.replace(old, new) if k else body)
                    dst.write(rest.replace(old, new) if k else rest)
    tmp.rename(out)
    return str(out), out.stat().st_size


def run_one(path: str, piece_bytes: int) -> dict[str, Any]:
    u = run_child(_CHILD, {"file": path, "piece_bytes": piece_bytes}, "the first pass")
    n = u["documents"]
    peaks = u["peaks_mib"]
    return {
        "piece_bytes": piece_bytes or None,
        "pieces": u["pieces"],
        "documents": n,
        "used": u["used"],
        "pass_s": round(u["pass_s"], 1),
        "wall_s": round(u["wall_s"], 1),
        "cpu_s": round(u["cpu_s"], 1),
        "cpu_us_per_doc": round(1e6 * u["cpu_s"] / max(n, 1), 2),
        "peak_rss_mib": round(u["peak_rss_mib"]),
        "peak_anon_mib": round(peaks.get("RssAnon", 0)),
        "peak_file_mib": round(peaks.get("RssFile", 0)),
        "peak_anon_bytes_per_doc": round(peaks.get("RssAnon", 0) * (1 << 20) / max(n, 1), 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, required=True, help="bench_window.py's corpus folder")
    ap.add_argument("--files", type=int, default=20, help="the first N shards of it")
    ap.add_argument("--copies", type=int, default=1, help="the shards this many times over")
    ap.add_argument("--piece-bytes", default="268435456,0", help="settings, comma-separated (0: the file whole, one piece)")  # fmt: skip
    ap.add_argument("--work", type=Path, default=None, help="where the file is made (kept)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_first_pass.json")  # fmt: skip
    a = ap.parse_args(argv)
    shards = sorted(glob.glob(str(a.corpus / "*.jsonl.zst")))[: a.files]
    if not shards:
        raise SystemExit(f"no *.jsonl.zst shards in {a.corpus}: run bench_window.py --keep first")
    if a.copies < 1:
        raise SystemExit(f"--copies must be at least 1, got {a.copies}")
    settings = [int(x) for x in a.piece_bytes.split(",")]
    work = a.work or Path(tempfile.mkdtemp(prefix="nd-first-pass-"))
    work.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    path, size = one_file(shards, a.copies, work)
    print(f"{path}: {size / 1e9:.2f} GB ({time.perf_counter() - t:.0f} s to make)", flush=True)
    head = f"{'piece bytes':>12} {'pieces':>6} {'documents':>11} {'pass s':>7} {'CPU s':>7} {'CPU µs':>7} {'anon MiB':>9} {'B/doc':>6} {'mapped MiB':>10} {'RSS MiB':>8}"  # fmt: skip
    print(head, flush=True)
    rows = []
    for pb in settings:
        r = run_one(path, pb)
        rows.append(r)
        print(f"{pb or 'whole':>12} {r['pieces']:>6} {r['documents']:>11,} {r['pass_s']:>7} {r['cpu_s']:>7} {r['cpu_us_per_doc']:>7} {r['peak_anon_mib']:>9,} {r['peak_anon_bytes_per_doc']:>6} {r['peak_file_mib']:>10,} {r['peak_rss_mib']:>8,}", flush=True)  # fmt: skip
    doc = {
        "benchmark": "first_pass",
        "command": "python benchmarks/bench_first_pass.py " + " ".join(argv or sys.argv[1:]),
        "code": code_version(),
        "machine": {**machine(), "load": list(os.getloadavg())},
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "file_bytes": size,
        "shards": len(shards),
        "copies": a.copies,
        "rows": rows,
    }
    write_results(a.out, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
