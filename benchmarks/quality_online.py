"""Online quality and speed: the dev set streamed through a Deduplicator, in both candidate modes.

Every document is added (``add``, batches of ``--batch``), then each is checked under a new id
(``check``, one request per document, or ``--check-batch`` at a time); a document's reported
pairs are its matches other than its own stored copy, scored against the labelled pairs like
``benchmarks/quality_dedup.py`` (en / zh / short / long slices). Also measured: adds/s and
checks/s (in-process, durable store in a temporary directory), and the band keys' cost: entries
per document, the memtable's bytes, and the band-key sections' bytes on disk after a flush,
scaled to one million documents.

    .venv/bin/python benchmarks/quality_online.py            # writes results/quality_online.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from neardup.batch.evaluate import load_labels, score_reported  # noqa: E402
from neardup.online.deduplicator import Deduplicator  # noqa: E402


def _machine() -> dict:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average": list(os.getloadavg()),
        "note": "shared 2-core VM, other engineers' jobs running",
    }


def run(mode: str, ids, texts, args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        d = Deduplicator.open(tmp, candidates=mode, max_matches=50, memtable_size=10_000_000)
        t0 = time.perf_counter()
        for s in range(0, len(ids), args.batch):
            d.add(
                [
                    {"id": i, "text": t}
                    for i, t in zip(ids[s : s + args.batch], texts[s : s + args.batch], strict=True)
                ]
            )
        add_s = time.perf_counter() - t0
        pairs: set[tuple[str, str]] = set()
        n_check = min(len(ids), args.checks) if args.checks else len(ids)
        t0 = time.perf_counter()
        for s in range(0, n_check, args.check_batch):
            got = d.check(
                [
                    {"id": "q" + i, "text": t}
                    for i, t in zip(
                        ids[s : s + args.check_batch], texts[s : s + args.check_batch], strict=True
                    )
                ]
            )
            for i, dec in zip(ids[s : s + args.check_batch], got, strict=True):
                for m in dec.matches:
                    if m.id != i:
                        pairs.add((min(i, m.id), max(i, m.id)))
        check_s = time.perf_counter() - t0
        out = {
            "adds_per_s": round(len(ids) / add_s, 1),
            "checks_per_s": round(n_check / check_s, 1),
            "checked": n_check,
            "check_batch": args.check_batch,
        }
        store = d.store._state  # the store's own arrays: the band table, the segments
        if mode == "lsh":
            entries = len(store.bandtable)
            out["band_entries_per_doc"] = round(entries / len(ids), 2)
            out["band_memtable_mib_per_million_docs"] = round(
                store.bandtable.nbytes / len(ids) * 1e6 / 2**20, 1
            )
        d.flush()
        seg_bytes = sum(s.segment.path.stat().st_size for s in store.segments)
        out["segment_mib_per_million_docs"] = round(seg_bytes / len(ids) * 1e6 / 2**20, 1)
        if mode == "lsh":
            # the section's bytes in the file: head, group offsets, 8 bytes per entry (v3)
            sec = sum(
                0 if s.segment.band_keys is None else 16 + s.segment.band_keys.nbytes
                for s in store.segments
            )
            out["band_section_mib_per_million_docs"] = round(sec / len(ids) * 1e6 / 2**20, 1)
        d.close()
    return out, pairs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "dev")
    ap.add_argument("--modes", default="lsh,simhash")
    ap.add_argument("--batch", type=int, default=1000, help="documents per add request")
    ap.add_argument("--check-batch", type=int, default=1, help="documents per check request")
    ap.add_argument("--checks", type=int, default=0, help="check only the first N (0: all)")
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "quality_online.json"
    )
    args = ap.parse_args()
    ids, texts, langs = [], [], {}
    with (args.data / "docs.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            ids.append(r["id"])
            texts.append(r["text"])
            langs[r["id"]] = r["lang"]
    labels = load_labels(args.data / "pairs.csv")
    lengths = {i: len(t) for i, t in zip(ids, texts, strict=True)}
    results = {}
    for mode in args.modes.split(","):
        speed, pairs = run(mode, ids, texts, args)
        score = score_reported(sorted(pairs), labels, langs, lengths) if not args.checks else {}
        results[mode] = {**speed, **score}
        print(mode, json.dumps({k: v for k, v in results[mode].items() if not isinstance(v, dict)}))
        for s in ("overall", "en", "zh", "short", "long"):
            if s in score:
                print(
                    f"  {s:<8} P={score[s]['precision']:.4f} R={score[s]['recall']:.4f} F1={score[s]['f1']:.4f}"
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"machine": _machine(), "docs": len(ids), "results": results}, indent=2) + "\n"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
