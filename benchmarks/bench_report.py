"""The review report's size and cost: ``neardup dedup --report`` on the bundled sample and on a
large generated corpus, and the page's render time in headless Chromium.

For each corpus: the run (``dedup_files`` with the report as an extra output, as ``neardup dedup
--report`` runs it), the time spent building the review data (``build_review``: languages,
cluster sizes, the sampled clusters' alignments) and rendering the HTML, the sizes of
``report.html`` and ``review.json``, and Chromium's time to load and lay out the page
(``--dump-dom`` and ``--screenshot`` of a 1200 px wide page, the least of 5 runs, minus the
same command on an empty page: the browser's start-up).

    python benchmarks/bench_report.py                       # the sample only
    python benchmarks/bench_report.py --mix 1000000         # + the dev set mixed into 1 M generated docs
    python benchmarks/bench_report.py --worst               # + a corpus that fills every cap

``--worst``: 60 long (~3.5 KB) documents with 14 edited copies each (60 clusters of 15): every
sampled cluster shows its full 10 dropped documents with long alignments, the report's largest
size whatever the corpus size. ``--mix N`` mixes the dev documents (``../shared/data/dev``, if present) into ``N`` generated
ones as ``benchmarks/quality_dedup.py --mix`` does (20 % ~3.5 KB documents, 80 % ~100-character
posts, 10 % planted duplicates). Prints a table and writes ``benchmarks/results/bench_report.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "neardup" / "data" / "sample" / "sample.jsonl"


def chromium_ms(page: Path, *extra: str, repeat: int = 5) -> float:
    """Least wall ms of ``repeat`` runs of headless Chromium loading ``page`` (``extra``:
    --dump-dom or --screenshot=...); the least, as other load on the machine only adds."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise SystemExit("chromium not found (apt-get install -y chromium)")
    times = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as profile:
            args = [
                exe, "--headless", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                "--window-size=1200,1800", *extra, page.as_uri(),
            ]  # fmt: skip
            t0 = time.perf_counter()
            subprocess.run(args, capture_output=True, check=True, timeout=600)
            times.append(1000 * (time.perf_counter() - t0))
    return min(times)


def run_case(name: str, src: Path, out: Path) -> dict[str, Any]:
    from neardup.batch.files import dedup_files
    from neardup.io import atomic_open
    from neardup.review.report import build_review, render_report, save_review

    timing: dict[str, float] = {}

    def extra(result: Any, texts: Any, stats: dict[str, Any]) -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        data = build_review(result, texts, stats)
        timing["build_s"] = time.perf_counter() - t0
        timing["build_cpu_s"] = time.process_time() - c0
        save_review(data, out / "review.json")
        t0, c0 = time.perf_counter(), time.process_time()
        page = render_report(data).encode("utf-8")
        timing["render_s"] = time.perf_counter() - t0
        timing["render_cpu_s"] = time.process_time() - c0
        with atomic_open(str(out / "report.html"), "wb") as fh:
            fh.write(page)

    t0 = time.perf_counter()
    r = dedup_files(
        [str(src)], output=str(out / "kept.jsonl"), summary_json=str(out / "summary.json"),
        extra_outputs=extra, workers=2,
    )  # fmt: skip
    total = time.perf_counter() - t0
    empty = out / "empty.html"
    empty.write_text("<!doctype html><title>x</title>")
    base_dom = chromium_ms(empty, "--dump-dom")
    base_shot = chromium_ms(empty, f"--screenshot={out / 'e.png'}")
    dom = chromium_ms(out / "report.html", "--dump-dom")
    shot = chromium_ms(out / "report.html", f"--screenshot={out / 'r.png'}")
    row = {
        "case": name,
        "documents": r.stats["documents"],
        "clusters": r.stats["clusters"],
        "run_s": round(total, 2),
        "review_build_s": round(timing["build_s"], 3),
        "review_build_cpu_s": round(timing["build_cpu_s"], 3),
        "html_render_s": round(timing["render_s"], 3),
        "report_bytes": (out / "report.html").stat().st_size,
        "review_json_bytes": (out / "review.json").stat().st_size,
        "chromium_dom_ms": round(dom),
        "chromium_dom_ms_over_empty": round(dom - base_dom),
        "chromium_screenshot_ms": round(shot),
        "chromium_screenshot_ms_over_empty": round(shot - base_shot),
    }
    print(
        f"| {name} | {row['documents']:,} | {row['clusters']:,} | {row['run_s']:.1f} s | "
        f"{row['review_build_s']:.2f} s ({row['review_build_cpu_s']:.2f} CPU) | "
        f"{row['html_render_s']:.3f} s | {row['report_bytes'] / 1024:,.0f} KiB | "
        f"{row['review_json_bytes'] / 1024:,.0f} KiB | {row['chromium_dom_ms_over_empty']:,} ms "
        f"({row['chromium_dom_ms']:,}) | {row['chromium_screenshot_ms_over_empty']:,} ms "
        f"({row['chromium_screenshot_ms']:,}) |",
        flush=True,
    )
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mix", type=int, default=0, help="generated documents (0: the sample only)")
    ap.add_argument("--worst", action="store_true", help="also a corpus that fills every cap")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "dev")
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_report.json"
    )
    args = ap.parse_args()
    rows = []
    print(
        "| corpus | documents | clusters | run (with report) | review data | HTML | "
        "report.html | review.json | Chromium DOM over empty (total) | screenshot over empty "
        "(total) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sample"
        out.mkdir()
        rows.append(run_case("sample", SAMPLE, out))
        if args.worst:
            import numpy as np

            sys.path.insert(0, str(ROOT / "benchmarks"))
            from bench_dedup import TopicCorpus, _edit, generate

            rng = np.random.default_rng(3)
            bases = generate("long", 60, 3, 0.0)
            lexicon = TopicCorpus().lexicon
            src = Path(tmp) / "worst.jsonl"
            with src.open("w", encoding="utf-8") as fh:
                for i, base in enumerate(bases):
                    for j in range(15):
                        text = base if j == 0 else _edit(rng, base, lexicon)
                        fh.write(json.dumps({"id": f"w{i}-{j}", "text": text}) + "\n")
            out = Path(tmp) / "worst"
            out.mkdir()
            rows.append(run_case("60 clusters of 15 long documents", src, out))
        if args.mix:
            import orjson

            sys.path.insert(0, str(ROOT / "benchmarks"))
            from quality_dedup import mix_corpus

            ids: list[str] = []
            texts: list[str] = []
            if (args.data / "docs.jsonl").exists():
                with open(args.data / "docs.jsonl", encoding="utf-8") as f:
                    for line in f:
                        d = json.loads(line)
                        ids.append(d["id"])
                        texts.append(d["text"])
            all_ids, all_texts, _ = mix_corpus(ids, texts, args.mix, 0.2, 0)
            src = Path(tmp) / "mix.jsonl"
            with src.open("wb") as fh:
                for i, t in zip(all_ids, all_texts, strict=True):
                    fh.write(orjson.dumps({"id": i, "text": t}) + b"\n")
            del all_ids, all_texts
            out = Path(tmp) / "mix"
            out.mkdir()
            rows.append(run_case(f"dev + {args.mix:,} generated", src, out))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "rows": rows,
                "machine": {
                    "cpus": os.cpu_count(),
                    "platform": platform.platform(),
                    "python": platform.python_version(),
                    "load": [round(x, 2) for x in os.getloadavg()],
                },
            },
            indent=1,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
