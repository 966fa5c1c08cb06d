"""Where a window's single-request tail comes from: single documents checked and inserted in
process, at a fixed rate, against an existing store, each request's service time and its
latency from its scheduled time, the slowest requests with what they cost, and what the
threads were doing while a request ran long.

    nice -n 5 .venv/bin/python benchmarks/trace_stalls.py STORE --n 10000 --rate 500 \\
        --out benchmarks/results/trace_stalls_10000000.json

``STORE`` is a data directory (for example one that ``benchmarks/bench_window.py --keep`` left:
``<data>/n<N>/server/namespaces/default``); the run adds its documents to it (use a copy to
keep it as it was). The documents are the window generator's (``benchmarks/window_corpus.py``,
``--seed`` other than the window's), decided one at a time on this thread, as the service's
event loop decides a lone request (``Deduplicator.submit(..., inline=True)``), without HTTP.
``--kind check`` checks them without adding them: the store is left as it was, so that two
versions of the code (or settings: ``--histogram-cache-rows 0``, ``--resident-summaries
off``) can be compared on the same store and documents. ``--warm N`` first checks ``N`` other documents (seed ``--seed + 1000``)
in batches of 1,000, untimed, as a service that has been serving for a while (its in-memory
caches filled).

A watchdog thread looks every 3 ms: when a request has run longer than ``--over`` ms it
records every thread's innermost frames once for that request. For the ``--top`` slowest
requests it reports their band candidates, SimHash hits, rows fetched and text length.

Prints a table and writes JSON (``--out``) with the machine, every parameter and figure.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import window_corpus as wc  # noqa: E402

from neardup.online import Deduplicator  # noqa: E402


def _pct(a: np.ndarray) -> dict[str, float]:
    return {
        "p50_ms": float(np.percentile(a, 50)),
        "p90_ms": float(np.percentile(a, 90)),
        "p99_ms": float(np.percentile(a, 99)),
        "max_ms": float(a.max()),
        "mean_ms": float(a.mean()),
    }


class _Costs:
    """What each request's decision looked at (wrapped store and decider calls)."""

    def __init__(self, d: Deduplicator) -> None:
        self.now: dict[str, int] = {}
        store = d._writer.store
        self._wrap(store, "search_bands", lambda r: ("band_candidates", sum(len(x) for x in r)))
        self._wrap(store, "search", lambda r: ("simhash_hits", len(r[1])))
        self._wrap(store, "fetch", lambda r: ("rows_fetched", len(r)), add=True)

    def _wrap(self, obj: Any, name: str, what: Any, add: bool = False) -> None:
        real = getattr(obj, name)
        now = self.now

        def wrapper(*a: Any, **k: Any) -> Any:
            out = real(*a, **k)
            key, value = what(out)
            now[key] = now.get(key, 0) + value if add else value
            return out

        setattr(obj, name, wrapper)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("store", type=Path)
    p.add_argument("--n", type=int, default=10_000, help="single documents")
    p.add_argument("--rate", type=float, default=500.0, help="documents a second")
    p.add_argument("--over", type=float, default=20.0, help="ms after which threads are sampled")
    p.add_argument("--seed", type=int, default=12, help="generator seed of the documents")
    p.add_argument("--top", type=int, default=15, help="slowest requests described")
    p.add_argument("--warm", type=int, default=0, help="documents checked first, untimed")
    p.add_argument(
        "--histogram-cache-rows",
        type=int,
        default=None,
        help="DedupSettings.histogram_cache_rows (default: its default; 0: no cached histograms)",
    )
    p.add_argument(
        "--kind",
        choices=("check_and_add", "check"),
        default="check_and_add",
        help="check: leave the store as it was (A/B runs on one store)",
    )
    p.add_argument(
        "--no-verify-meta",
        dest="verify_meta",
        action="store_false",
        help="open the store without SQLite's quick_check (neardup serve --no-verify-meta): "
        "at 50 M it reads a 23 GB database for minutes",
    )
    p.add_argument(
        "--resident-summaries",
        choices=("on", "off"),
        default="off",
        help="long rows' summaries held in memory (timed after their load ends) or read from "
        "SQLite (the store's default)",
    )
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args(argv)
    if not (a.store / "MANIFEST.json").exists():
        p.error(f"{a.store} is not a store's data directory (no MANIFEST.json)")
    t0 = time.perf_counter()
    opts: dict[str, Any] = {
        "verify_meta": a.verify_meta,
        "resident_summaries": a.resident_summaries == "on",
    }
    if a.histogram_cache_rows is not None:
        opts["histogram_cache_rows"] = a.histogram_cache_rows
    d = Deduplicator.open(a.store, **opts)
    open_s = time.perf_counter() - t0
    while not d.stats().get("resident_summaries_loaded", 1):  # held: all of them, first
        time.sleep(0.05)
    loaded_s = time.perf_counter() - t0
    docs_before = len(d)
    if a.warm:
        warm = wc.stream_texts(wc.WindowSpec(n=max(a.warm, 1000), seed=a.seed + 1000), 0, a.warm)
        for lo in range(0, a.warm, 1000):
            d.check(
                [{"id": f"warm-{i}", "text": t} for i, t in enumerate(warm[lo : lo + 1000], lo)]
            )
        del warm
    texts = wc.stream_texts(wc.WindowSpec(n=max(a.n, 1000), seed=a.seed), 0, a.n)
    costs = _Costs(d)
    cur: dict[str, Any] = {"start": None, "i": -1, "seen": -1}
    samples: list[dict[str, Any]] = []
    stop = threading.Event()

    def watch() -> None:
        me = threading.get_ident()
        while not stop.wait(0.003):
            s, i = cur["start"], cur["i"]
            if s is None or cur["seen"] == i or (time.perf_counter() - s) * 1e3 <= a.over:
                continue
            cur["seen"] = i
            names = {t.ident: t.name for t in threading.enumerate()}
            threads = {
                str(names.get(tid, tid)): [
                    f"{os.path.basename(f.filename)}:{f.lineno} {f.name}"
                    for f in traceback.extract_stack(fr)[-6:]
                ]
                for tid, fr in sys._current_frames().items()
                if tid != me
            }
            samples.append(
                {"request": i, "after_ms": (time.perf_counter() - s) * 1e3, "threads": threads}
            )

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    service = np.zeros(a.n)
    late = np.zeros(a.n)
    per: list[dict[str, int]] = []
    base = time.perf_counter()
    cpu0 = time.process_time()
    for i, text in enumerate(texts):
        due = base + i / a.rate
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        costs.now.clear()
        start = cur["start"] = time.perf_counter()
        cur["i"] = i
        d.submit(a.kind, {"id": f"trace-{a.seed}-{i}", "text": text}, inline=True)[0].result()
        end = time.perf_counter()
        cur["start"] = None
        service[i] = (end - start) * 1e3
        late[i] = (end - due) * 1e3
        per.append({**costs.now, "chars": len(text)})
    cpu = time.process_time() - cpu0
    stop.set()
    watcher.join()
    # SimHash hits the length bound turned down (None: a neardup without it)
    length_rejected = getattr(d._writer.decider, "length_rejected", None)
    # ... and the cached token histograms of rows verified before (None: a neardup without it)
    histogram_rejected = getattr(d._writer.decider, "histogram_rejected", None)
    d.close()
    slow = np.argsort(-service)[: a.top]
    heavy = service > 10
    where = collections.Counter((s["threads"].get("MainThread") or ["?"])[-1] for s in samples)
    res: dict[str, Any] = {
        "command": " ".join(sys.argv),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "params": {k: str(v) if isinstance(v, Path) else v for k, v in vars(a).items()},
        "store_documents_before": docs_before,
        "warm_documents": a.warm,
        "open_s": open_s,
        "open_to_summaries_loaded_s": loaded_s if a.resident_summaries == "on" else None,
        "cpu_ms_per_request": 1e3 * cpu / a.n,
        "service": _pct(service),
        "from_schedule": _pct(late),
        "simhash_hits_turned_down_by_length": length_rejected,
        "simhash_hits_turned_down_by_histograms": histogram_rejected,
        "over_10_ms": {
            "requests": int(heavy.sum()),
            "share_of_service_time": float(service[heavy].sum() / service.sum()),
        },
        "slowest": [{"request": int(i), "service_ms": float(service[i]), **per[i]} for i in slow],
        "main_thread_at_samples": dict(where.most_common()),
        "samples": samples[:50],
    }
    print(f"store: {a.store} ({docs_before:,} documents, opened in {open_s:.1f} s)")
    if a.resident_summaries == "on":
        print(f"long rows' summaries held in memory, loaded {loaded_s:.1f} s after the open began")
    print(
        f"{a.n:,} single {a.kind}s at {a.rate:,.0f}/s, in process; CPU {res['cpu_ms_per_request']:.3f} ms a request"
    )
    print(f"{'':<16} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8}  ms")
    for name in ("service", "from_schedule"):
        r = res[name]
        print(
            f"{name:<16} {r['p50_ms']:>8.2f} {r['p90_ms']:>8.2f} {r['p99_ms']:>8.2f} {r['max_ms']:>8.2f}"
        )
    if length_rejected is not None:
        print(f"SimHash hits turned down by the length bound: {length_rejected:,}")
    if histogram_rejected is not None:
        print(f"SimHash hits turned down by cached histograms: {histogram_rejected:,}")
    o = res["over_10_ms"]
    print(
        f"requests over 10 ms of service: {o['requests']} ({100 * o['share_of_service_time']:.1f} % of the service time)"
    )
    print(
        f"{'service ms':>10} {'chars':>7} {'band cands':>10} {'simhash hits':>12} {'rows fetched':>12}"
    )
    for r in res["slowest"]:
        print(
            f"{r['service_ms']:>10.1f} {r['chars']:>7} {r.get('band_candidates', 0):>10} {r.get('simhash_hits', 0):>12} {r.get('rows_fetched', 0):>12}"
        )
    print(f"main thread where a request ran past {a.over:.0f} ms ({len(samples)} samples):")
    for k, v in where.most_common(8):
        print(f"  {v:>4}  {k}")
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(res, indent=2) + "\n")
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
