#!/usr/bin/env python3
"""Checks against a kept store whose metadata database is read from the disk, with the rows a
group reads spread over 1 or more connections (``StoreSettings.read_threads``).

At 50 M documents a window's SQLite database (23 GB) no longer fits this machine's page
cache beside its segments, so the rows a decision reads (candidates' texts, long rows'
summaries, the ids) come from the disk. This benchmark makes that regime on a smaller kept
store (``bench_window.py --keep`` leaves one): before each run it drops the database's pages
from the page cache (``posix_fadvise(DONTNEED)``, no root needed; the segments stay cached, as
they do at 50 M), opens the store with each ``--read-threads`` value in turn (a fresh
``Deduplicator``: no row caches carried over), and times ``Deduplicator.check`` of the same
new texts (another seed's stream than the window's, positions after ``--skip``) in groups of
``--batch`` (``--random-ids``: their ids spread over SQLite's id index, as UUIDs are, so that
each new id's look-up reads a page of its own); each round takes new texts, and the settings' order alternates between
rounds. An untimed run first loads the segments' pages and the kernels. ``--warm`` keeps the page cache instead (the cost of
the readers when every page is cached). Checks add nothing, and the store's clock is the newest
time among its last 100,000 rows (rows arrive in time order), so nothing expires: every run
sees the same store. Each setting's decisions
must be the same (the run stops otherwise).

    python benchmarks/bench_cold_reads.py DIR/n10000000/server/namespaces/default \\
        --read-threads 1,4 --rounds 3 --docs 20000

``--resident-summaries on,off`` compares long rows' summaries held in memory
(:mod:`neardup.store.resident`, timed once their load has ended) with reading them from SQLite
(the store's default), each crossed with the ``--read-threads`` values.

Figures per setting (medians over rounds): wall and CPU (every thread, user and system) per
document, the writer thread's CPU, the readers' CPU; with summaries held, the seconds from the
open to their load's end. Prints the table and writes
``benchmarks/results/bench_cold_reads.json`` (with the machine).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))


def drop_cache(store: Path) -> None:
    """Drop the metadata database's pages (and its WAL's) from the page cache."""
    from bench_stages import drop_cache as drop_file

    for name in ("meta.sqlite3", "meta.sqlite3-wal"):
        if (store / name).exists():
            drop_file(store / name)


#: rows (by row id, from the last) whose newest time is the store's clock (:func:`newest_time`)
TAIL_ROWS = 100_000


def newest_time(store: Path) -> float:
    db = sqlite3.connect(f"file:{store / 'meta.sqlite3'}?mode=ro", uri=True)
    try:
        # among the last rows by row id (rows arrive in time order): a scan of the whole table
        # reads a 50 M window's 23 GB database, and its pages would push the segments' out of
        # the page cache before the runs; a newer row elsewhere is only seen as not expired
        (t,) = db.execute(
            "SELECT max(time) FROM docs WHERE rid >= (SELECT max(rid) FROM docs) - ?",
            (TAIL_ROWS,),
        ).fetchone()
    finally:
        db.close()
    if t is None:
        raise SystemExit(f"{store}: the store holds no documents")
    return float(t)


def thread_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of each of this process's threads, by name."""
    tck = os.sysconf("SC_CLK_TCK")
    names = {str(t.native_id): t.name for t in threading.enumerate()}
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        name = names.get(tid, f"tid{tid}")
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tck
    return out


def _group(name: str) -> str:
    if name.startswith("neardup-meta-read"):
        return "readers"
    if name.startswith("neardup-writer"):
        return "writer"
    return "other"


def query_ids(n: int, start: int, random_ids: bool) -> list[str]:
    """The checked documents' ids: ``q<position>`` (next to each other in SQLite's id index),
    or with ``random_ids`` ``w<10 digits of a hash of the position>x``: among the window's own
    ids (``w`` and 10 digits), so that each new id's look-up reads a leaf page of its own, as
    random ids (UUIDs) do in a store of such ids."""
    if not random_ids:
        return [f"q{i}" for i in range(start, start + n)]
    import hashlib

    def spread(i: int) -> str:
        h = int.from_bytes(hashlib.blake2b(b"%d" % i, digest_size=8).digest(), "little")
        return f"w{h % 10**10:010d}x"

    return [spread(i) for i in range(start, start + n)]


def run_once(
    store: Path,
    texts: list[str],
    batch: int,
    read_threads: int,
    now: float,
    cold: bool,
    ids: list[str] | None = None,
    resident: bool = False,
) -> dict[str, Any]:
    from neardup.online import Deduplicator

    t_open = time.perf_counter()
    d = Deduplicator.open(
        str(store),
        verify_meta=False,
        read_threads=read_threads,
        resident_summaries=resident,
        clock=lambda: now,
    )
    try:
        load_s = None
        if resident:  # timed once every summary is held (the load runs after the open)
            while not d.stats().get("resident_summaries_loaded", 0):
                time.sleep(0.05)
            load_s = time.perf_counter() - t_open
        d.check([{"id": "warm-up", "text": texts[0]}])  # kernels loaded, threads started
        if cold:
            drop_cache(store)
        before = thread_cpu()
        c0, t0 = time.process_time(), time.perf_counter()
        dup: list[bool] = []
        ids = ids or query_ids(len(texts), 0, False)
        for lo in range(0, len(texts), batch):
            docs = [{"id": ids[i], "text": t} for i, t in enumerate(texts[lo : lo + batch], lo)]
            dup += [r.duplicate for r in d.check(docs)]
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        after = thread_cpu()
    finally:
        d.close()
    per: dict[str, float] = {}
    for name, v in after.items():
        g = _group(name)
        per[g] = per.get(g, 0.0) + v - before.get(name, 0.0)
    n = len(texts)
    return {
        "read_threads": read_threads,
        "resident_summaries": resident,
        "open_to_summaries_loaded_s": load_s,
        "wall_us_doc": wall / n * 1e6,
        "cpu_us_doc": cpu / n * 1e6,
        "writer_cpu_us_doc": per.get("writer", 0.0) / n * 1e6,
        "readers_cpu_us_doc": per.get("readers", 0.0) / n * 1e6,
        "duplicates": sum(dup),
        "_decisions": dup,
    }


def _label(read_threads: int, resident: bool) -> str:
    return f"read_threads {read_threads}, summaries {'held' if resident else 'from SQLite'}"


def main(argv: list[str] | None = None) -> int:
    from bench_dedup import write_run

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path, help="a kept store's namespace directory")
    ap.add_argument("--read-threads", default="1,4", help="settings compared (default 1,4)")
    ap.add_argument(
        "--resident-summaries",
        default="off",
        help="long rows' summaries held in memory (on) or read from SQLite (off), or both "
        "compared (on,off); each crossed with --read-threads (default off, the store's default)",
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--docs", type=int, default=20_000, help="texts checked per run")
    ap.add_argument("--batch", type=int, default=1_000, help="texts per check (default 1000)")
    ap.add_argument("--seed", type=int, default=2, help="the texts' stream seed (default 2)")
    ap.add_argument("--skip", type=int, default=0, help="stream positions skipped first")
    ap.add_argument("--warm", action="store_true", help="keep the page cache (no drop)")
    ap.add_argument(
        "--random-ids",
        action="store_true",
        help="ids spread over SQLite's id index (hashes) instead of next to each other",
    )
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_cold_reads.json"
    )
    args = ap.parse_args(argv)
    if not (args.store / "meta.sqlite3").exists():
        ap.error(f"no store at {args.store} (no meta.sqlite3): pass a namespace directory")
    try:
        settings = [int(x) for x in args.read_threads.split(",")]
    except ValueError:
        ap.error(f"--read-threads takes integers separated by commas, got {args.read_threads!r}")
    from neardup.errors import ConfigError
    from neardup.store.readers import check_read_threads

    try:
        for k in settings:
            check_read_threads(k, "--read-threads")
    except ConfigError as exc:
        ap.error(str(exc))
    words = args.resident_summaries.split(",")
    if not words or any(w not in ("on", "off") for w in words) or len(set(words)) < len(words):
        ap.error(f"--resident-summaries takes on, off or both, got {args.resident_summaries!r}")
    combos = [(k, w == "on") for k in settings for w in words]
    if args.rounds < 1 or args.docs < 1 or args.batch < 1:
        ap.error("--rounds, --docs and --batch must be positive")
    import window_corpus as wc

    now = newest_time(args.store)
    spec = wc.WindowSpec(n=10_000_000, seed=args.seed, t0=now)
    # untimed: the segments' pages and the kernels loaded, other texts than the rounds'
    end = args.skip + args.rounds * args.docs
    warm_up = wc.stream_texts(spec, end, min(2_000, args.docs))
    run_once(args.store, warm_up, args.batch, settings[0], now, False, resident=combos[0][1])
    runs: list[dict[str, Any]] = []
    for rnd in range(args.rounds):
        texts = wc.stream_texts(spec, args.skip + rnd * args.docs, args.docs)
        ids = query_ids(args.docs, args.skip + rnd * args.docs, args.random_ids)
        first: list[bool] | None = None
        # the settings' order alternates, so that neither always runs first
        for k, rs in combos if rnd % 2 == 0 else combos[::-1]:
            r = run_once(args.store, texts, args.batch, k, now, not args.warm, ids, rs)
            got = r.pop("_decisions")
            if first is None:
                first = got
            elif got != first:
                raise SystemExit(
                    f"round {rnd}: {_label(k, rs)} decided otherwise than {_label(*combos[0])}"
                )
            r["round"] = rnd
            runs.append(r)
            print(
                f"round {rnd} {_label(k, rs)}: wall {r['wall_us_doc']:.0f} us/doc, CPU "
                f"{r['cpu_us_doc']:.0f} (writer {r['writer_cpu_us_doc']:.0f}, readers "
                f"{r['readers_cpu_us_doc']:.0f}), {r['duplicates']} duplicates",
                flush=True,
            )
    keys = ("wall_us_doc", "cpu_us_doc", "writer_cpu_us_doc", "readers_cpu_us_doc")
    table = []
    print(f"\n{'setting':>28} {'wall us/doc':>12} {'CPU us/doc':>11} {'writer':>8} {'readers':>8}")
    for k, on in combos:
        rs = [r for r in runs if r["read_threads"] == k and r["resident_summaries"] == on]
        med = {key: round(statistics.median(r[key] for r in rs), 1) for key in keys}
        table.append({"read_threads": k, "resident_summaries": on, **med})
        print(
            f"{_label(k, on):>28} {med['wall_us_doc']:>12.1f} {med['cpu_us_doc']:>11.1f} "
            f"{med['writer_cpu_us_doc']:>8.1f} {med['readers_cpu_us_doc']:>8.1f}"
        )
    fields = {
        "store": str(args.store),
        "page_cache": "warm" if args.warm else "database dropped before each run",
        "ids": "random" if args.random_ids else "sequential",
        "docs": args.docs,
        "batch": args.batch,
        "medians": table,
        "runs": runs,
    }
    write_run(args.out, "cold_reads", __file__, argv, fields)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
