#!/usr/bin/env python3
"""``neardup store load`` of a folder of shards, or of the same documents in one file, in groups
(``--chunk-docs``: whole files, a larger file in slices): each
setting in its own process, with its wall and CPU time, peak RSS, groups and the first pass'
time (every file read and checked); and how many kept ids differ from the first setting's
(keep-first in groups keeps the one-group set where no LSH bucket outgrows the store's cap).
Prints a table and writes ``benchmarks/results/bench_load_files.json``.

The shards are ``benchmarks/bench_window.py``'s generated window (the seeds' mix: short posts,
news and articles, 40 % Chinese, planted near duplicates; its ``--data`` folder kept with
``--keep``), the first ``--files`` of them:

    python benchmarks/bench_load_files.py --corpus DIR/n10000000/corpus --files 20 --chunk-docs 0,500000
    python benchmarks/bench_load_files.py --corpus DIR/n10000000/corpus --files 100 --chunk-docs 1000000

``0`` is one group (the whole input held from the first pass, read once). ``--inputs
folder,file`` runs each setting on the shards and on one file holding them all (their zstd
frames concatenated under ``--work``: a file cut into slices). The stores go under
``--work`` (default a temporary folder) and are removed after their ids are compared.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_dedup import machine, write_results  # noqa: E402
from bench_service import code_version  # noqa: E402

#: run in the child: ``load_files`` as ``neardup store load`` calls it, with a thread sampling
#: ``/proc/self/status`` every 0.2 s, so that the peak is attributed to a group and a stage
#: (anonymous memory apart from the mapped files' pages, which the kernel can drop)
_CHILD = """
import json, resource, sys, threading, time
t = time.perf_counter()
from neardup.incremental import load_files
from bench_dedup import proc_memory
job = json.loads(sys.argv[1])
stage, group, peaks, stop = ["check"], [0], {}, []
def sample():
    while not stop:
        p = peaks.setdefault(stage[0], {})
        for k, v in proc_memory().items():
            p[k] = max(p.get(k, 0), v / 1024)
        time.sleep(0.2)
threading.Thread(target=sample, daemon=True).start()
def progress(s, done, total):
    if s == "group":
        group[0] = min(done + 1, total)
    stage[0] = s if s in ("check", "read", "compact") else f"group {max(group[0], 1)}: {s}"
kw = {}
if job["options"].get("time_field"):
    kw["time_field"] = job["options"]["time_field"]
if job["options"].get("retention"):
    from neardup.online.settings import DedupSettings
    from neardup.store import StoreSettings, parse_duration
    kw["settings"] = DedupSettings(store=StoreSettings(retention=parse_duration(job["options"]["retention"])))
stats = load_files(job["files"], job["store"], chunk_docs=job["chunk_docs"], progress=progress, **kw)
stage[0] = "compact"
stop.append(1)
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"stats": stats, "wall_s": time.perf_counter() - t,
                  "cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_mib": ru.ru_maxrss / 1024,
                  "stage_peaks_mib": peaks}))
"""


def stored_ids(store: Path) -> set[str]:
    """The ids a store's metadata holds (read only)."""
    db = sqlite3.connect(f"file:{store / 'meta.sqlite3'}?mode=ro", uri=True)
    try:
        return {r[0] for r in db.execute("SELECT id FROM docs")}
    finally:
        db.close()


def _digest(ids: set[str]) -> str:
    h = hashlib.blake2b(digest_size=16)
    for x in sorted(ids):
        h.update(x.encode("utf-8", "surrogatepass") + b"\n")
    return h.hexdigest()


def one_file(shards: list[str], work: Path) -> str:
    """The shards as one file: their zstd frames concatenated (read across frames)."""
    out = work / "all.jsonl.zst"
    with open(out, "wb") as dst:
        for s in shards:
            with open(s, "rb") as src:
                shutil.copyfileobj(src, dst, 1 << 22)
    return str(out)


def run_child(code: str, job: dict[str, Any], what: str) -> dict[str, Any]:
    """Run ``code`` in a fresh Python process with ``job`` (as JSON) for its argument, the
    project and ``benchmarks/`` on its path; the JSON object its last line printed. Exits
    saying ``what`` failed, with its stderr's tail, where it failed."""
    path = [str(ROOT), str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    p = subprocess.run(  # -P: the working directory (perhaps another checkout) off the path
        [sys.executable, "-P", "-c", code, json.dumps(job)], capture_output=True, text=True, env=env
    )
    if p.returncode != 0:
        raise SystemExit(f"{what} failed ({p.returncode}):\n{p.stderr[-4000:]}")
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


def run_one(
    files: list[str], chunk: int, work: Path, options: dict[str, Any]
) -> tuple[dict[str, Any], set[str]]:
    data = work / f"data-{chunk}"
    shutil.rmtree(data, ignore_errors=True)
    job = {"files": files, "store": str(data / "namespaces" / "default"),
           "chunk_docs": chunk or 2**62, "options": options}  # fmt: skip
    usage = run_child(_CHILD, job, "load_files")
    stats = usage["stats"]
    ids = stored_ids(data / "namespaces" / "default")
    n_kept, digest = len(ids), _digest(ids)
    disk = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
    shutil.rmtree(data, ignore_errors=True)
    n = stats["documents"]
    return {
        "chunk_docs": chunk or None,
        "groups": stats.get("groups"),
        "documents": n,
        "kept": stats["loaded"],
        "stored": n_kept,
        "kept_ids_digest": digest,
        "wall_s": round(usage["wall_s"], 1),
        "cpu_s": round(usage["cpu_s"], 1),
        "docs_per_s": round(n / usage["wall_s"]),
        "cpu_us_per_doc": round(1e6 * usage["cpu_s"] / n, 1),
        "peak_rss_mib": round(usage["peak_rss_mib"]),
        "check_s": stats.get("check_s"),
        "compact_s": stats.get("compact_s"),
        "disk_bytes_per_doc": round(disk / max(n_kept, 1)),
        "stage_peaks_mib": {
            k: {m: round(v) for m, v in p.items()} for k, p in usage["stage_peaks_mib"].items()
        },
    }, ids


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, required=True, help="bench_window.py's corpus folder")
    ap.add_argument("--files", type=int, default=20, help="the first N shards of it")
    ap.add_argument("--chunk-docs", default="0,500000", help="settings, comma-separated (0: one group)")  # fmt: skip
    ap.add_argument("--inputs", default="folder", help="folder (the shards), file (one file holding them), or both: folder,file")  # fmt: skip
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--time-field", default=None, help="read each record's time from this field (with --retention)")  # fmt: skip
    ap.add_argument("--retention", default=None, help="the new store's window, e.g. 7d")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_load_files.json")  # fmt: skip
    a = ap.parse_args(argv)
    layouts = a.inputs.split(",")
    if not layouts or set(layouts) - {"folder", "file"}:
        raise SystemExit(f"--inputs: folder, file or folder,file, not {a.inputs!r}")
    shards = sorted(glob.glob(str(a.corpus / "*.jsonl.zst")))[: a.files]
    if not shards:
        raise SystemExit(f"no *.jsonl.zst shards in {a.corpus}: run bench_window.py --keep first")
    work = a.work or Path(tempfile.mkdtemp(prefix="nd-load-files-"))
    work.mkdir(parents=True, exist_ok=True)
    options = {"time_field": a.time_field, "retention": a.retention}
    print(f"warming up (kernel compile) on {shards[0]} ...", flush=True)
    run_one(shards[:1], 0, work, options)  # not measured: the kernels compiled and cached
    rows: list[dict[str, Any]] = []
    first: set[str] | None = None
    inputs = {"folder": shards}
    if "file" in layouts:
        inputs["file"] = [one_file(shards, work)]
    head = f"{'input':>6} {'chunk docs':>12} {'groups':>6} {'documents':>11} {'kept':>11} {'wall s':>8} {'CPU s':>8} {'docs/s':>8} {'CPU µs':>7} {'peak RSS MiB':>12} {'ids differing':>13}"  # fmt: skip
    print(head, flush=True)
    for chunk, layout in [(int(x), y) for x in a.chunk_docs.split(",") for y in layouts]:
        r, ids = run_one(inputs[layout], chunk, work, options)
        r["input"] = layout
        first = ids if first is None else first
        # keep-first in groups keeps the one-group set where no LSH bucket outgrows the store's
        # cap (docs/store.md, *Bulk loads*): the ids kept by one setting and not by the
        # first, or the other way round
        r["ids_differing_from_first"] = len(ids ^ first)
        rows.append(r)
        top = max(r["stage_peaks_mib"].items(), key=lambda kv: kv[1].get("VmRSS", 0))
        print(f"  peak at {top[0]}: {top[1]}", flush=True)
        print(f"{layout:>6} {chunk or 'one group':>12} {r['groups']:>6} {r['documents']:>11,} {r['kept']:>11,} {r['wall_s']:>8} {r['cpu_s']:>8} {r['docs_per_s']:>8,} {r['cpu_us_per_doc']:>7} {r['peak_rss_mib']:>12,} {r['ids_differing_from_first']:>13,}", flush=True)  # fmt: skip
    same = len({r["kept_ids_digest"] for r in rows}) == 1
    print(f"the same kept ids in every setting: {same}")
    doc = {
        "benchmark": "load_files",
        "command": "python benchmarks/bench_load_files.py " + " ".join(argv or sys.argv[1:]),
        "code": code_version(),
        "machine": {**machine(), "load": list(os.getloadavg())},
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "shards": len(shards),
        "rows": rows,
        "same_kept_ids": same,
    }
    write_results(a.out, doc)
    if "file" in inputs:
        os.remove(inputs["file"][0])
    if a.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
