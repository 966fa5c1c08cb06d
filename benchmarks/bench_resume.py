#!/usr/bin/env python3
"""A load in groups killed part way and finished with ``--resume``, against the same load run
through once (``neardup store load``; docs/store.md, *Bulk loads*, "In groups").

    python benchmarks/bench_resume.py --corpus DIR --chunk-docs 200000 --after-groups 3

``--corpus``: a folder of the window benchmark's zstd JSONL chunks (``bench_window.py --keep``
leaves one; ``window_corpus.generate`` makes one), its records' ``time`` in the window of a
``--retention`` store. Three ``neardup store load`` processes, each timed:

1. the whole load into a fresh data directory (``A``);
2. the same load into another (``B``), SIGKILLed once its journal says ``--after-groups``
   groups are done and the store's metadata holds more rows than those groups kept (a later
   group is storing its kept documents: the worst place to stop), ``--kill-delay`` seconds
   after that;
3. the same command with ``--resume`` into ``B``.

Reported: each run's wall time, what the journal said at the kill, the resumed run's summary
(its first pass, the documents it did not decide again, what it removed), and whether ``A``
and ``B`` hold the same ids (their SQLite ``docs`` tables compared; the texts and times are
compared by ``tests/incremental/test_seed_resume.py``). Prints a table and writes
``benchmarks/results/bench_resume.json`` (``--out``) with the machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
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
from bench_load_files import stored_ids  # noqa: E402
from bench_service import code_version  # noqa: E402

from neardup.errors import CorruptFileError  # noqa: E402
from neardup.incremental.journal import JOURNAL_NAME, LoadJournal  # noqa: E402


def _namespace(data: Path) -> Path:
    return data / "namespaces" / "default"


def _rows(data: Path) -> int | None:
    """The store's row count as its metadata says now (None while it cannot be read)."""
    try:
        db = sqlite3.connect(
            f"file:{_namespace(data) / 'meta.sqlite3'}?mode=ro", uri=True, timeout=0.1
        )
        try:
            return int(db.execute("SELECT n FROM doc_count WHERE k = 0").fetchone()[0])
        finally:
            db.close()
    except (sqlite3.Error, TypeError):
        return None


def _journal(data: Path) -> LoadJournal | None:
    try:
        return LoadJournal.read(_namespace(data))
    except CorruptFileError:  # being replaced: read again
        return None


def _load(cmd: list[str]) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    out = subprocess.run([*cmd, "--json"], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if out.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr[-2000:]}")
    return wall, json.loads(out.stdout)


def _killed(cmd: list[str], data: Path, after: int, delay: float) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    proc = subprocess.Popen([*cmd, "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        if proc.poll() is not None:
            sys.exit("the load ended before it was killed: use a smaller --after-groups")
        j = _journal(data) if (_namespace(data) / JOURNAL_NAME).exists() else None
        if j is not None and j.groups_done >= after:
            rows = _rows(data)
            if rows is not None and rows > j.loaded:
                break
        time.sleep(0.005)
    time.sleep(delay)
    rows = _rows(data) or rows
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return time.perf_counter() - t0, {
        "journal_groups_done": j.groups_done, "journal_kept": j.loaded, "rows_at_kill": rows,
        "delay_s": delay,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, required=True, help="folder of *.jsonl.zst chunks")
    ap.add_argument("--chunk-docs", type=int, default=200_000)
    ap.add_argument("--after-groups", type=int, default=3, help="groups done before the kill")
    ap.add_argument(
        "--kill-delay",
        type=float,
        default=0.0,
        help="seconds from when the store holds more rows than the journal's groups kept to "
        "the kill (later: more of that group in its segments)",
    )
    ap.add_argument("--retention", default="72h")
    ap.add_argument("--work", type=Path, help="where the data directories go (default: TMPDIR)")
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_resume.json"
    )
    args = ap.parse_args(argv)
    files = sorted(args.corpus.glob("*.jsonl.zst"))
    if not files:
        ap.error(f"no *.jsonl.zst chunks in {args.corpus}")
    neardup = [sys.executable, "-m", "neardup", "store", "load"]
    opts = [str(args.corpus / "*.jsonl.zst"), "--time-field", "time", "--retention",
            args.retention, "--chunk-docs", str(args.chunk_docs)]  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="bench-resume-", dir=args.work))
    try:
        a, b = work / "A", work / "B"
        whole_s, whole = _load([*neardup, str(a), *opts])
        print(
            f"the whole load: {whole_s:.1f} s, {whole['loaded']:,} kept in {whole['groups']} groups"
        )
        killed_s, at = _killed([*neardup, str(b), *opts], b, args.after_groups, args.kill_delay)
        print(f"killed after {killed_s:.1f} s: {at}")
        resumed_s, resumed = _load([*neardup, str(b), *opts, "--resume"])
        same = stored_ids(_namespace(a)) == stored_ids(_namespace(b))
        print(
            f"resumed: {resumed_s:.1f} s (first pass {resumed['check_s']:.1f} s), "
            f"{resumed['loaded']:,} kept in {resumed['groups']} groups; {resumed['resumed']}; "
            f"the same ids as the whole load: {same}"
        )
        write_results(args.out, {
            "benchmark": "resume",
            "command": "python benchmarks/bench_resume.py "
            + " ".join(argv if argv is not None else sys.argv[1:]),
            "code": code_version(),
            "corpus": str(args.corpus),
            "chunk_docs": args.chunk_docs,
            "whole": {"wall_s": round(whole_s, 2), "summary": whole},
            "killed": {"wall_s": round(killed_s, 2), **at},
            "resumed": {"wall_s": round(resumed_s, 2), "summary": resumed},
            "same_ids": same,
            "machine": machine(load_average=True),
        })  # fmt: skip
        return 0 if same else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
