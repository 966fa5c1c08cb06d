"""What preparing non-ASCII text costs the SimHash pass: ``prepare_utf8`` one text at a time
against ``prepare_utf8_many`` (the texts mapped as one array of code points) at several batch
sizes, ``Fingerprinter.fingerprint_batch`` per checkout on the Chinese and the English texts of
the window benchmark's mix, and ``neardup dedup --workers 1`` of the Chinese ones (a JSONL file
of them) per checkout.

    .venv/bin/python benchmarks/bench_prepare.py --n 100000 --tree . --tree /tmp/nd-before \\
        --out benchmarks/results/bench_prepare.json

The texts are the first ``--n`` documents of ``window_corpus.py``'s stream (seed 1: short
posts most of them, two in five Chinese), generated into a temporary folder. The preparation
table runs in this process (the checkout this file is in); the fingerprint table runs each
``--tree`` (a source checkout, imported through ``PYTHONPATH``) in its own child process, the
trees alternated over ``--rounds`` rounds, on one thread (``workers=1``), and reports medians
of wall and CPU time per document, then the ``neardup dedup`` run's wall and CPU seconds, its
summary's stage timings and what it kept (the same on every checkout). Nothing here is timed
in the test suite.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from trees import (  # noqa: E402
    add_child_options,
    alternate,
    checkouts,
    medians,
    run_child,
    write_runs,
)

#: batch sizes of the preparation table (1: a single request's text)
BATCHES = (1, 4, 8, 64, 8192)


def _texts(n: int) -> tuple[list[str], list[str]]:
    """(Chinese, English) texts: the first ``n`` documents of the window stream."""
    from window_corpus import WindowSpec, generate, read_chunk

    with tempfile.TemporaryDirectory(prefix="nd-prepare-") as tmp:
        spec = WindowSpec(n, seed=1, t0=1_700_000_000.0)  # (t0 0 writes no valid times)
        got = generate(spec, Path(tmp), chunk=max(n, 1), workers=1)
        texts = [json.loads(line)["text"] for c in got["chunks"] for line in read_chunk(c["path"])]
    return [t for t in texts if not t.isascii()], [t for t in texts if t.isascii()]


def _timed(fn: Any, repeat: int) -> tuple[float, float]:
    """Best (wall, CPU) seconds of ``repeat`` calls."""
    best = (float("inf"), float("inf"))
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        best = min(best, (time.perf_counter() - t0, time.process_time() - c0))
    return best


def _prepare_table(zh: list[str], repeat: int) -> list[dict[str, Any]]:
    from neardup.text.tokenize import prepare_utf8, prepare_utf8_many

    prepare_utf8_many(zh)  # every character's entry made once, as a long run does
    rows = []
    for b in BATCHES:
        groups = [zh[i : i + b] for i in range(0, len(zh) - b + 1, b)]
        docs = sum(map(len, groups))
        one = _timed(lambda g=groups: [prepare_utf8(t) for x in g for t in x], repeat)
        many = _timed(lambda g=groups: [prepare_utf8_many(x) for x in g], repeat)
        rows.append(
            {
                "batch": b,
                "docs": docs,
                "one_by_one_us": one[1] / docs * 1e6,
                "many_us": many[1] / docs * 1e6,
            }
        )
    return rows


def _dedup_chinese(zh: list[str]) -> dict[str, Any]:
    """``neardup dedup --workers 1`` of the Chinese texts (a JSONL file of them), in this
    process: its wall and CPU seconds and the summary's stage timings."""
    from neardup.cli.main import main as cli

    with tempfile.TemporaryDirectory(prefix="nd-prepare-dedup-") as tmp:
        src, summary = Path(tmp) / "zh.jsonl", Path(tmp) / "summary.json"
        with open(src, "w", encoding="utf-8") as fh:
            for k, t in enumerate(zh):
                fh.write(json.dumps({"id": f"z{k}", "text": t}, ensure_ascii=False) + "\n")
        argv = ["dedup", str(src), "-o", str(Path(tmp) / "kept.jsonl"), "--workers", "1", "-q"]
        argv += ["--summary-json", str(summary)]
        t0, c0 = time.perf_counter(), time.process_time()
        if cli(argv) != 0:
            raise SystemExit("neardup dedup failed")
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        got = json.loads(summary.read_text(encoding="utf-8"))
    out = {"dedup_wall_s": wall, "dedup_cpu_s": cpu, "dedup_kept": got["kept"]}
    out.update({f"dedup_{k}_s": v for k, v in got["timings_s"].items() if k in _STAGES})
    return out


#: the stages of ``neardup dedup``'s summary the table shows
_STAGES = ("exact", "fingerprint", "candidates", "verify")


def _child(args: argparse.Namespace) -> dict[str, Any]:
    """The fingerprint pass of this process's checkout over the texts, and ``neardup dedup``
    of the Chinese ones."""
    import neardup
    from neardup import Fingerprinter

    zh, en = _texts(args.n)
    fp = Fingerprinter()  # (fingerprint_batch: one worker unless told)
    fp.fingerprint_batch(zh[:2000] + en[:2000])  # kernels loaded
    out: dict[str, Any] = {"neardup": str(Path(neardup.__file__).parent)}
    for name, texts in (("zh", zh), ("en", en)):
        wall, cpu = _timed(lambda t=texts: fp.fingerprint_batch(t), args.repeat)
        out[f"{name}_wall_us"] = wall / len(texts) * 1e6
        out[f"{name}_cpu_us"] = cpu / len(texts) * 1e6
        out[f"{name}_mchars_per_s"] = sum(map(len, texts)) / wall / 1e6
    return {**out, **_dedup_chinese(zh)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="documents (default 100,000)")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many (default 3)")
    add_child_options(ap)
    args = ap.parse_args()
    if args.n < 1000:
        ap.error("--n must be at least 1000")
    if args.child:
        print(json.dumps(_child(args)))
        return 0
    trees = [str(t) for t in checkouts(args.tree)]
    zh, en = _texts(args.n)
    print(f"{len(zh):,} Chinese texts (mean {sum(map(len, zh)) / len(zh):.0f} characters), "
          f"{len(en):,} English", file=sys.stderr)  # fmt: skip
    table = _prepare_table(zh, args.repeat)
    print(f"{'Chinese texts, CPU µs a text':32s}{'batch':>8s}{'one by one':>12s}{'many':>10s}")
    for r in table:
        print(f"{'':32s}{r['batch']:8d}{r['one_by_one_us']:12.2f}{r['many_us']:10.2f}")
    child = [sys.executable, __file__, "--child", "--n", str(args.n), "--repeat", str(args.repeat)]
    runs = alternate(
        [Path(t) for t in trees], args.rounds, lambda t, r: run_child(t, child), warm=True,
        say=lambda t, r, got: print(f"round {r + 1} {t}: zh {got['zh_cpu_us']:.2f} µs",
                                    file=sys.stderr),
    )  # fmt: skip
    keys = [f"{k}_{m}" for k in ("zh", "en") for m in ("wall_us", "cpu_us", "mchars_per_s")]
    keys += ["dedup_wall_s", "dedup_cpu_s", *(f"dedup_{k}_s" for k in _STAGES), "dedup_kept"]
    med = {t: medians(rs, keys) for t, rs in runs.items()}
    print(f"\n{'fingerprint_batch; neardup dedup of the zh':40s}" + "".join(
        f"{Path(t).name[-16:]:>18s}" for t in trees))  # fmt: skip
    for k in keys:
        print(f"{k:40s}" + "".join(f"{med[t][k]:18.2f}" for t in trees))
    if args.out:
        write_runs(args.out, "prepare", args, trees, {"prepare": table, "fingerprint": med}, runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
