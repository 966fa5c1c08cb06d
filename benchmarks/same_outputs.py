"""Fingerprints of what neardup decides, to prove a refactoring changed no behaviour.

Runs ``neardup dedup`` (the installed console script of this interpreter's environment) over
fixed corpora and streams the dev set through the online store, then records the SHA-256 of
every output (kept documents, pairs.csv, clusters.csv) and of the online decisions::

    python benchmarks/same_outputs.py --out before.json            # on the old commit
    python benchmarks/same_outputs.py --out after.json --compare before.json

Corpora (generated once into ``--data-dir``, deterministic): the dev set
(``../shared/data/dev/docs.jsonl``, skipped where absent), 300,000 generated short posts and
40,000 generated long documents (``bench_dedup.generate``, 10 % planted copies).
``--distributed N`` also runs ``--engine dask`` over N generated short posts (and the same
corpus on the local engine) and compares the kept ids; ``--quick`` shrinks the generated
corpora tenfold. The summary's timings and the machine differ from run to run: only the
outputs are compared. Exit code 1 when ``--compare`` finds a difference.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEV = Path(os.environ.get("NEARDUP_DEV_DATA", HERE.parents[1] / "shared" / "data" / "dev"))


def sha(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def corpus(data: Path, kind: str, n: int, seed: int) -> Path:
    path = data / f"{kind}-{n}-{seed}.jsonl"
    if not path.exists():
        sys.path.insert(0, str(HERE))
        from bench_dedup import write_corpus

        tmp = path.with_suffix(".tmp")
        write_corpus(tmp, kind, n, seed, 0.1)
        tmp.rename(path)
    return path


def neardup_cmd() -> list[str]:
    return [sys.executable, "-m", "neardup"]


def dedup(name: str, src: Path, work: Path, extra: list[str] | None = None) -> dict[str, Any]:
    out = work / name
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        *neardup_cmd(), "dedup", str(src), "-o", str(out / "kept.jsonl"),
        "--pairs-out", str(out / "pairs.csv"), "--clusters-out", str(out / "clusters.csv"),
        "--summary-json", str(out / "summary.json"), "-q", *(extra or []),
    ]  # fmt: skip
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    summary = json.loads((out / "summary.json").read_text())
    return {
        "kept_sha256": sha(out / "kept.jsonl"),
        "pairs_sha256": sha(out / "pairs.csv"),
        "clusters_sha256": sha(out / "clusters.csv"),
        "kept": summary["kept"],
        "pairs": summary.get("pairs"),
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def kept_ids(path: Path) -> list[str]:
    import orjson

    with path.open("rb") as fh:
        return sorted(str(orjson.loads(line)["id"]) for line in fh if line.strip())


def online(src: Path, work: Path, batch: int = 100) -> dict[str, Any]:
    """Stream ``src`` through a new online store in batches: every decision, hashed."""
    import orjson

    from neardup import Deduplicator

    docs = [orjson.loads(line) for line in src.open("rb") if line.strip()]
    h = hashlib.sha256()
    added = 0
    with Deduplicator.open(work / "store") as d:
        for i in range(0, len(docs), batch):
            group = [{"id": str(x["id"]), "text": x["text"]} for x in docs[i : i + batch]]
            for dec in d.check_and_add(group):
                added += int(dec.added)
                matches = ",".join(m.id for m in dec.matches)
                h.update(f"{dec.id}\t{int(dec.duplicate)}\t{int(dec.added)}\t{matches}\n".encode())
    return {"decisions_sha256": h.hexdigest(), "added": added, "documents": len(docs)}


def distributed(src: Path, work: Path) -> dict[str, Any]:
    local = dedup("dist-local", src, work)
    out = work / "dist-dask"
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        *neardup_cmd(), "dedup", str(src), "-o", str(out / "kept.jsonl"), "--engine", "dask",
        "--partitions", "8", "--workdir", str(out / "work"), "-q",
    ]  # fmt: skip
    subprocess.run(cmd, check=True)
    same = kept_ids(work / "dist-local" / "kept.jsonl") == kept_ids(out / "kept.jsonl")
    ids = hashlib.sha256("\n".join(kept_ids(out / "kept.jsonl")).encode()).hexdigest()
    return {"local": local, "dask_kept_ids_sha256": ids, "dask_equals_local": same}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--compare", type=Path)
    ap.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "nd-same")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--distributed", type=int, default=0, metavar="N")
    ap.add_argument("--skip", default="", help="comma list of: dev, short, long, online")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    scale = 10 if args.quick else 1
    args.data_dir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="nd-same-") as tmp:
        work = Path(tmp)
        dev = DEV / "docs.jsonl"
        if dev.exists() and "dev" not in skip:
            result["dev"] = dedup("dev", dev, work)
        if dev.exists() and "online" not in skip:
            result["online_dev"] = online(dev, work)
        if "short" not in skip:
            result["short"] = dedup(
                "short", corpus(args.data_dir, "short", 300_000 // scale, 1), work
            )
        if "long" not in skip:
            result["long"] = dedup("long", corpus(args.data_dir, "long", 40_000 // scale, 2), work)
        if args.distributed:
            src = corpus(args.data_dir, "short", args.distributed, 3)
            result["distributed"] = distributed(src, work)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    if args.compare:
        before = json.loads(args.compare.read_text())
        diffs = []

        def walk(a: Any, b: Any, where: str) -> None:
            if isinstance(a, dict) and isinstance(b, dict):
                for k in sorted(set(a) & set(b)):
                    if k != "wall_s":
                        walk(a[k], b[k], f"{where}.{k}")
            elif a != b:
                diffs.append(f"{where}: {a!r} -> {b!r}")

        walk(before, result, "")
        print("same outputs" if not diffs else "DIFFERENT:\n  " + "\n  ".join(diffs))
        sys.exit(1 if diffs else 0)


if __name__ == "__main__":
    main()
