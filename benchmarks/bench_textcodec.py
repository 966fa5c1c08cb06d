#!/usr/bin/env python3
"""Stored texts' compression (``neardup/store/textcodec.py``) at each zstd level: the CPU a text
costs to encode and to decode, and the bytes stored against the bytes given.

For each set of texts, a dictionary is trained as a store trains one (``textcodec.train`` on
the first texts, up to ``TRAIN_MIN_TEXTS`` texts or ``TRAIN_MAX_BYTES``), on the first half of
the set, and the other half is encoded with it at each of ``--levels`` (a text is kept plain
where compressing does not make it shorter, as the store does). The store's level is
``textcodec.LEVEL``; the other levels are what changing it would do. Sets:

* the dev corpus (``$NEARDUP_DEV_DATA`` or ``../shared/data/dev``; ``docs.jsonl``): real news,
  posts and pages, English and Chinese; skipped with a note where it is absent;
* ``--texts FILE`` (JSONL with a ``text`` field, repeatable): e.g. the load a window run leaves
  beside its store (``bench_window.py --keep``: ``DIR/n1000000/load-throughput.jsonl``), the
  seeds' mix of generated posts and articles.

    python benchmarks/bench_textcodec.py
    python benchmarks/bench_textcodec.py --texts DIR/n1000000/load-throughput.jsonl --levels 1,3,6

Prints a table (µs a text, best of ``--rounds``; stored / given bytes) and writes
``benchmarks/results/bench_textcodec.json`` with the machine. Single-threaded, as the store's
applier is; a faster core changes the µs, not the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_dedup import machine, write_results  # noqa: E402

from neardup.store import textcodec  # noqa: E402

DEV = Path(os.environ.get("NEARDUP_DEV_DATA", ROOT.parent / "shared" / "data" / "dev"))


def read_texts(path: Path, limit: int) -> list[bytes]:
    """The UTF-8 bytes of the ``text`` fields of the first ``limit`` lines of JSONL ``path``."""
    out: list[bytes] = []
    with open(path, "rb") as fh:
        for line in fh:
            if len(out) >= limit:
                break
            if line.strip():
                t = json.loads(line).get("text")
                if isinstance(t, str) and t:
                    out.append(t.encode("utf-8"))
    return out


def training_sample(texts: list[bytes]) -> list[bytes]:
    """What a store trains its dictionary on: its first texts, up to the module's limits."""
    out: list[bytes] = []
    size = 0
    for t in texts:
        if len(out) >= textcodec.TRAIN_MIN_TEXTS or size >= textcodec.TRAIN_MAX_BYTES:
            break
        out.append(t)
        size += len(t)
    return out


def measure(texts: list[bytes], levels: list[int], rounds: int) -> dict[str, Any]:
    """Train on the first half of ``texts``, encode and decode the second at each level."""
    half = len(texts) // 2
    sample, test = training_sample(texts[:half]), texts[half:]
    data = textcodec.train(sample)
    if data is None:
        return {"texts": len(test), "note": "zstd could not train a dictionary on these texts"}
    given = sum(map(len, test))
    out: dict[str, Any] = {
        "trained_on": len(sample),
        "texts": len(test),
        "bytes_a_text": given / len(test),
        "dict_bytes": len(data),
        "levels": {},
    }
    for level in levels:
        codec = textcodec.TextCodec(data, level=level)  # the store's codec at this level
        enc = dec = float("inf")
        stored: list[bytes | None] = []
        for _ in range(rounds):
            t0 = time.process_time()
            stored = [codec.encode(x) for x in test]
            enc = min(enc, time.process_time() - t0)
            t0 = time.process_time()
            for z in stored:
                if z is not None:
                    codec.decode(z)
            dec = min(dec, time.process_time() - t0)
        kept = sum(len(z) if z is not None else len(x) for x, z in zip(test, stored, strict=True))
        out["levels"][str(level)] = {
            "encode_us": 1e6 * enc / len(test),
            "decode_us": 1e6 * dec / len(test),
            "stored_over_given": kept / given,
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", action="append", default=[], help="JSONL with a text field (repeatable)")  # fmt: skip
    ap.add_argument("--limit", type=int, default=40_000, help="texts read from each set (40,000)")
    ap.add_argument("--levels", default="1,3,6", help="zstd levels, comma-separated (1,3,6)")
    ap.add_argument("--rounds", type=int, default=3, help="best of this many passes (3)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_textcodec.json")  # fmt: skip
    a = ap.parse_args()
    try:
        levels = [int(x) for x in a.levels.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--levels {a.levels!r}: give integers, e.g. 1,3,6")
    if not levels or a.limit < 4 or a.rounds < 1:
        ap.error("--levels needs a level, --limit at least 4, --rounds at least 1")
    for t in a.texts:
        if not Path(t).is_file():
            ap.error(f"--texts {t}: no such file")
    sets: dict[str, Path] = {}
    dev = DEV / "docs.jsonl"
    if dev.is_file():
        sets["dev corpus"] = dev
    else:
        print(f"(no dev corpus at {dev}: skipped; set NEARDUP_DEV_DATA)", file=sys.stderr)
    for t in a.texts:
        sets[Path(t).name] = Path(t)
    if not sets:
        ap.error("no texts: the dev corpus is absent and no --texts was given")
    res: dict[str, Any] = {}
    for name, path in sets.items():
        res[name] = measure(read_texts(path, a.limit), levels, a.rounds)
    print(
        f"{'texts':28s} {'level':>5s} {'encode µs':>10s} {'decode µs':>10s} {'stored/given':>13s}"
    )
    for name, r in res.items():
        if "levels" not in r:
            print(f"{name:28s} {r['note']}")
            continue
        for lv, x in r["levels"].items():
            mark = " (the store's)" if int(lv) == textcodec.LEVEL else ""
            print(f"{name[:28]:28s} {lv:>5s} {x['encode_us']:10.2f} {x['decode_us']:10.2f} {x['stored_over_given']:13.3f}{mark}")  # fmt: skip
        print(f"{'':28s} ({r['texts']:,} texts of {r['bytes_a_text']:.0f} bytes; dictionary of {r['dict_bytes']:,} bytes from {r['trained_on']:,})")  # fmt: skip
    write_results(
        a.out,
        {
            "benchmark": "textcodec",
            "machine": machine(load_average=True),
            "params": {"texts": a.texts, "limit": a.limit, "levels": levels, "rounds": a.rounds},
            "store_level": textcodec.LEVEL,
            "sets": res,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
