#!/usr/bin/env python3
"""A store compaction's memory and time: the segments of a store's largest time partition
merged into one (``Store.build_merged``, what the background compaction and a load's final
merge do; the output discarded), with the merged band-key section built whole in memory
(``merge_mapped``, then packed: ``whole``) or written group by group as the segment is written
(``neardup.index.band_stream.MergedSection``, what a store does past ``STREAM_ENTRIES``
entries): each group merged once, its packed rows spilled beside the segments until the keys
are written (``streamed``, the store's way), or merged twice with no spill file
(``remerged``). Each run in its own process, the modes alternated over ``--rounds``; a thread samples
``/proc/self/status`` every 0.1 s, so the peak is the merge's (anonymous memory apart from the
mapped segment pages, which the kernel can drop). Prints a table and writes
``benchmarks/results/bench_compact.json``.

The store is a ``neardup store load`` of the first ``--files`` shards of
``benchmarks/bench_window.py``'s generated window (``--keep``), made once under ``--work``,
or ``--store`` (a namespace folder, copied under ``--work`` and merged there):

    python benchmarks/bench_compact.py --corpus DIR/n10000000/corpus --files 20
    python benchmarks/bench_compact.py --store DATA/namespaces/default --rounds 3

The merge runs on one thread (the store's compaction thread): a bigger machine changes the
times, not the memory.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_dedup import machine, write_results  # noqa: E402
from bench_service import code_version  # noqa: E402

_MODES = ("whole", "streamed", "remerged")

#: run in the child: one merge of the largest partition's segments, memory sampled
_CHILD = """
import json, resource, sys, time
job = json.loads(sys.argv[1])
import numpy as np
import neardup.store.maintenance as maintenance
from neardup.index.bands import BandSection, MergedSection, merge_mapped
from neardup.online import Deduplicator
from bench_dedup import RssSampler, proc_memory
# the kernels compiled (or loaded) before the clock starts: a small merge each way
sec = BandSection.from_sorted(np.arange(5, dtype=np.uint64), np.arange(5, dtype=np.uint32))
ident = np.arange(5, dtype=np.int64)
merge_mapped([sec, sec, sec], [ident, ident, ident])
ms = MergedSection([sec, sec, sec], [ident, ident, ident], 5)
list(ms.key_bytes()), list(ms.row_bytes())
maintenance.STREAM_ENTRIES = 2**62 if job["mode"] == "whole" else 0
if job["mode"] == "remerged":  # no spill file: each group merged again for its rows
    class Remerged(MergedSection):
        def __init__(self, *a, spill_dir=None, **k):
            super().__init__(*a, **k)
    maintenance.MergedSection = Remerged
KEYS = ("VmRSS", "RssAnon", "RssFile")
def mib(kb):
    return {k: v / 1024 for k, v in kb.items()}
with Deduplicator.open(job["store"]) as d:
    st = d.store
    parts = {}
    for s in st.segments:
        parts.setdefault(s.partition, []).append(s)
    segs = max(parts.values(), key=lambda ss: sum(len(s.segment) for s in ss))
    rows = sum(len(s.segment) for s in segs)
    entries = sum(len(s.segment.band_keys or ()) for s in segs)
    base = mib(proc_memory(KEYS))
    sampler = RssSampler(KEYS, interval=0.1)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    with sampler:
        merged = st.build_merged(list(segs))
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
    peak = mib(sampler.peak)
    size = merged.segment.path.stat().st_size if merged is not None else 0
    checksum = merged.segment.checksum if merged is not None else None
    if merged is not None:
        st.discard_merged(merged)
print(json.dumps({"segments": len(segs), "rows": rows, "entries": entries, "wall_s": wall,
                  "cpu_s": (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime),
                  "base_mib": base, "peak_mib": peak, "segment_bytes": size,
                  "checksum": checksum}))
"""

_LOAD = """
import json, sys
from neardup.incremental import load_files
job = json.loads(sys.argv[1])
print(json.dumps(load_files(job["files"], job["store"])))
"""


def _env() -> dict[str, str]:
    path = [str(ROOT), str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def _child(code: str, job: dict[str, Any]) -> dict[str, Any]:
    p = subprocess.run(
        # -P: the working directory (perhaps another checkout) kept off the path, before ROOT
        [sys.executable, "-P", "-c", code, json.dumps(job)],
        capture_output=True,
        text=True,
        env=_env(),
    )
    if p.returncode != 0:
        raise SystemExit(f"the child failed ({p.returncode}):\n{p.stderr[-4000:]}")
    out: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, help="bench_window.py's corpus folder (a store is loaded from it)")  # fmt: skip
    ap.add_argument("--files", type=int, default=20, help="with --corpus: the first N shards")
    ap.add_argument("--store", type=Path, help="an existing store's namespace folder instead")
    ap.add_argument(
        "--modes", default=",".join(_MODES), help="whole,streamed,remerged (default all)"
    )
    ap.add_argument("--rounds", type=int, default=2, help="runs of each mode, alternated")
    ap.add_argument("--work", type=Path, default=None, help="where the loaded or copied store goes")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_compact.json")  # fmt: skip
    a = ap.parse_args(argv)
    modes = [m for m in a.modes.split(",") if m]
    bad = [m for m in modes if m not in _MODES]
    if bad or not modes:
        ap.error(f"--modes takes {', '.join(_MODES)}; got {a.modes!r}")
    if (a.corpus is None) == (a.store is None):
        ap.error("give --corpus (a store is loaded from it) or --store, not both")
    work = Path(tempfile.mkdtemp(prefix="nd-compact-", dir=a.work))
    try:
        if a.store is not None:
            if not (a.store / "MANIFEST.json").exists():
                ap.error(f"--store {a.store}: no MANIFEST.json there (a store's namespace folder)")
            store = work / "store"  # a copy: opening a store writes its lock and SQLite header
            print(f"copying {a.store} to {store} ...", flush=True)
            shutil.copytree(a.store, store)
            os.sync()
            loaded = None
        else:
            files = sorted(glob.glob(str(a.corpus / "*.jsonl*")))[: a.files]
            if not files:
                ap.error(f"--corpus {a.corpus}: no *.jsonl* shards")
            store = work / "data" / "namespaces" / "default"
            print(f"loading {len(files)} shards into {store} ...", flush=True)
            loaded = _child(_LOAD, {"files": files, "store": str(store)})
        runs = []
        for r in range(a.rounds):
            for mode in modes if r % 2 == 0 else modes[::-1]:
                got = _child(_CHILD, {"store": str(store), "mode": mode})
                got.update(mode=mode, round=r + 1)
                runs.append(got)
                print(
                    f"round {r + 1} {mode:>8}: {got['rows']:,} rows {got['entries']:,} entries, "
                    f"{got['wall_s']:.1f} s, anonymous {got['base_mib']['RssAnon']:,.0f} → "
                    f"{got['peak_mib']['RssAnon']:,.0f} MiB",
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = []
    for mode in modes:
        mine = [x for x in runs if x["mode"] == mode]
        rows.append(
            {
                "mode": mode,
                "rounds": len(mine),
                "segments": mine[0]["segments"],
                "rows": mine[0]["rows"],
                "entries": mine[0]["entries"],
                "wall_s": round(statistics.median(x["wall_s"] for x in mine), 2),
                "cpu_s": round(statistics.median(x["cpu_s"] for x in mine), 2),
                "anon_growth_mib": round(
                    statistics.median(
                        x["peak_mib"]["RssAnon"] - x["base_mib"]["RssAnon"] for x in mine
                    )
                ),
                "peak_anon_mib": round(max(x["peak_mib"]["RssAnon"] for x in mine)),
                "peak_rss_mib": round(max(x["peak_mib"]["VmRSS"] for x in mine)),
                "anon_bytes_per_row": round(
                    statistics.median(
                        (x["peak_mib"]["RssAnon"] - x["base_mib"]["RssAnon"])
                        * 2**20
                        / max(x["rows"], 1)
                        for x in mine
                    )
                ),
                "segment_bytes": mine[0]["segment_bytes"],
            }
        )
    same = len({x["checksum"] for x in runs}) == 1
    args = argv if argv is not None else sys.argv[1:]
    command = " ".join(["python", f"benchmarks/{Path(__file__).name}", *args])
    print()
    print("| mode | rows | entries | wall s | CPU s | anonymous growth, MiB | bytes a row | peak RSS, MiB |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for x in rows:
        print(
            f"| {x['mode']} | {x['rows']:,} | {x['entries']:,} | {x['wall_s']} | {x['cpu_s']} | "
            f"{x['anon_growth_mib']:,} | {x['anon_bytes_per_row']:,} | {x['peak_rss_mib']:,} |"
        )
    print(f"\nthe same segment bytes (checksum) in every run: {same}")
    write_results(
        a.out,
        {
            "benchmark": "compact",
            "command": command,
            "code": code_version(),
            "machine": machine(),
            "store": str(a.store) if a.store is not None else f"{a.files} shards of {a.corpus}",
            "loaded": loaded,
            "rows": rows,
            "runs": runs,
            "same_segment_bytes": same,
        },
    )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
