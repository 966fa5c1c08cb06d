#!/usr/bin/env python3
"""How long ``neardup serve`` takes to answer again after a SIGKILL, on an existing store.

Issue 36's restart figure, on its own (``bench_window.py`` measures it once inside a whole
window run). For each ``--tree`` (a neardup checkout; default this one), alternating, every
round: start ``neardup serve --data DATA`` on the server's own defaults, add ``--adds``
documents with ``check-and-insert`` (acknowledged: they are in the log only, not yet in a
segment), SIGKILL the server, start it again and time the seconds from the spawn to the first
answered ``POST /v1/check`` (the store's open, the log's replay, the warm-up, the server's
start) and read its resident set then; then check that every added document is found. The
server is killed again at the end of the round (a graceful stop would flush and change the
store the next round opens). The store keeps the documents added (under ids of this run).

    python benchmarks/bench_restart.py DATA
    python benchmarks/bench_restart.py DATA --tree ../before --tree . --rounds 3
    sudo python benchmarks/bench_restart.py DATA --cold   # the page cache emptied first

``--cold`` empties the page cache before each restart (root only), so the open reads what it
reads from the disk, as a restart does once the store outgrows the memory (the 50 M window).
The boot is the same: this is a process's restart, not a reboot's (docs/store.md, *Checked
once a boot*).

``DATA`` is a server's ``--data`` directory (``namespaces/default`` inside), e.g. the
``server/`` directory ``bench_window.py --keep`` leaves. Prints a table (medians) and writes
``benchmarks/results/bench_restart.json`` (with the machine).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _server(data: Path, tree: Path) -> Any:
    from neardup.service.testing import ServerProcess

    path = os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH", "")) if p)
    # (given a PYTHONPATH, the server runs that tree's neardup whatever the working directory)
    return ServerProcess(data, args=["--max-batch", "10000"], env={"PYTHONPATH": path})


def _texts(tag: str, n: int) -> list[dict[str, str]]:
    # distinct made-up posts: none of them a near duplicate of another or of the window
    def text(i: int) -> str:
        words = (f"w{(i * 7919 + j * 104729) % 999983}{tag[:4]}" for j in range(24))
        return f"restart probe {tag} {i} " + " ".join(words)

    return [{"id": f"restart-{tag}-{i}", "text": text(i)} for i in range(n)]


#: what ``--cold`` writes to empty the page cache (root only)
DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def _drop_caches() -> None:
    """Write the dirty pages out and empty the page cache (the store's files are then read from
    the disk, as at 50 M where they outgrow the memory)."""
    os.sync()
    DROP_CACHES.write_text("1\n")


def _count(url: str, route: str, docs: list[dict[str, str]], flag: str) -> int:
    """``POST /v1/<route>`` of ``docs`` in batches of 1,000; how many results have ``flag``."""
    import httpx

    n = 0
    for a in range(0, len(docs), 1000):
        res = httpx.post(f"{url}/v1/{route}", json={"documents": docs[a : a + 1000]}, timeout=600)
        res.raise_for_status()
        n += sum(1 for x in res.json()["results"] if x.get(flag))
    return n


def _round(data: Path, tree: Path, adds: int, cold: bool = False) -> dict[str, Any]:
    import httpx
    from bench_service import first_answer

    srv = _server(data, tree)
    r: dict[str, Any] = {"tree": str(tree)}
    r["start_s"] = srv.start(timeout=3600) + first_answer(srv.url, 3600)
    stats = httpx.get(f"{srv.url}/v1/ns/default", timeout=60).json()
    r["documents"] = int(stats["documents"])
    tag = uuid.uuid4().hex[:8]
    docs = _texts(tag, adds)
    r["added"] = _count(srv.url, "check-and-insert", docs, "added")
    srv.kill()
    if cold:
        _drop_caches()
    t0 = time.perf_counter()
    srv.start(timeout=3600, wait=False)
    r["restart_s"] = first_answer(srv.url, 3600)
    r["restart_total_s"] = time.perf_counter() - t0
    # what the open left resident: a check of every file used to map all of it
    r["rss_after_restart_mib"] = round(srv.rss_bytes() / 2**20, 1)
    r["found_after"] = _count(srv.url, "check", docs, "duplicate")
    srv.kill()
    return r


def main(argv: list[str] | None = None) -> int:
    from bench_dedup import write_run
    from trees import TREE_HELP, alternate, checkouts, commit_of, medians

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, help="a server's --data directory (namespaces/ inside)")
    ap.add_argument("--tree", type=Path, action="append", help=TREE_HELP)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--adds", type=int, default=2000, help="documents added before each kill (default 2000)")  # fmt: skip
    ap.add_argument("--cold", action="store_true", help="empty the page cache before each restart (root: /proc/sys/vm/drop_caches), so the open reads the store from the disk")  # fmt: skip
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_restart.json")  # fmt: skip
    args = ap.parse_args(argv)
    if args.cold and not os.access(DROP_CACHES, os.W_OK):
        ap.error(f"--cold needs to write {DROP_CACHES} (run as root), or leave --cold out")
    if not (args.data / "namespaces").is_dir():
        ap.error(f"no server data directory at {args.data} (no namespaces/ inside)")
    if args.rounds < 1 or args.adds < 1:
        ap.error("--rounds and --adds must be at least 1")
    trees = checkouts(args.tree)

    def say(tree: Path, k: int, r: dict[str, Any]) -> None:
        print(f"  round {k + 1}, {tree}: start {r['start_s']:.1f} s, restart {r['restart_s']:.1f} s, found {r['found_after']}/{r['added']}", file=sys.stderr)  # fmt: skip
        if r["found_after"] != r["added"]:
            raise SystemExit(f"{tree}: {r['added'] - r['found_after']} acknowledged documents not found after the restart")  # fmt: skip

    runs = alternate(
        trees, args.rounds, lambda t, _r: _round(args.data, t, args.adds, args.cold), say=say
    )
    print(f"{'tree':<40} {'start s':>8} {'restart after SIGKILL s':>24} {'RSS after MiB':>14} {'found after':>12}")  # fmt: skip
    rows = []
    for t, rs in runs.items():
        keys = ("start_s", "restart_s", "rss_after_restart_mib")
        med = {k: round(v, 2) for k, v in medians(rs, keys).items()}
        rows.append({"tree": t, "commit": commit_of(t), "median": med, "runs": rs})
        found = f"{sum(r['found_after'] for r in rs)}/{sum(r['added'] for r in rs)}"
        print(f"{t[-40:]:<40} {med['start_s']:>8.1f} {med['restart_s']:>24.1f} {med['rss_after_restart_mib']:>14.0f} {found:>12}")  # fmt: skip
    fields = {
        "data": str(args.data),
        "rounds": args.rounds,
        "adds": args.adds,
        "cold": args.cold,
        "rows": rows,
    }
    write_run(args.out, "restart", __file__, argv, fields)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
