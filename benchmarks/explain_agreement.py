"""``neardup.explain`` against ``neardup.dedup`` on every labelled pair of the dev set.

``dedup`` runs once over the dev documents (defaults, or ``--threshold`` / ``--keep``) and
reports, for each labelled pair, what the run decided: a reported pair with its rule
(``exact``, ``similarity``, ``containment``, ...), a candidate the verifier rejected
(``below`` / ``bound``: from ``dedup(..., candidates_out=...)``, every candidate pair of first
copies with its rule), or not a candidate. ``explain`` then decides each pair alone, and the
two are compared: the decision and the rule must be equal, and for a reported pair the keep
policy too (when the run dropped one text for the other, ``explain`` drops the same one; when
``explain`` says the length guard keeps both, the run dropped neither for the other).

Usage::

    .venv/bin/python benchmarks/explain_agreement.py [--data ../shared/data/dev] [--keep first]

Prints the agreement table and writes ``benchmarks/results/explain_agreement.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_status(texts: list[str], ids: list[str], pairs: list[tuple[int, int]], **opts: Any):
    """What one dedup run decided for each pair (positions a < b): (status, rule), plus the
    run's roots."""
    from neardup import dedup
    from neardup.batch.exact import stage_exact
    from neardup.verify.rule import RULE_NAMES

    cand: list[Any] = []
    r = dedup(texts, ids=ids, candidates_out=cand, **opts)
    n = len(texts)
    reported = {
        (int(a), int(b)): RULE_NAMES[int(ru)]
        for a, b, ru in zip(
            r.pairs.a.tolist(), r.pairs.b.tolist(), r.pairs.rule.tolist(), strict=True
        )
    }
    c = cand[0]
    seen = {
        (int(a), int(b)): RULE_NAMES[int(ru)]
        for a, b, ru in zip(c.a.tolist(), c.b.tolist(), c.rule.tolist(), strict=True)
    }
    first = stage_exact(texts)
    out = []
    for a, b in pairs:
        if (a, b) in reported:
            out.append(("duplicate", reported[(a, b)]))
            continue
        fa, fb = sorted((int(first[a]), int(first[b])))
        if (fa, fb) in seen:
            out.append(("not a duplicate", seen[(fa, fb)]))
        else:
            out.append(("not a candidate", "none"))
    assert n == r.root.size
    return out, r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "dev")
    ap.add_argument("--threshold", type=float, default=None)
    ap.add_argument("--keep", default="first", choices=["first", "longest", "none"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "explain_agreement.json"
    )
    args = ap.parse_args()
    from neardup import DedupConfig
    from neardup.review.explain import explain

    with open(args.data / "docs.jsonl", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    ids = [d["id"] for d in docs]
    texts = [d["text"] for d in docs]
    pos = {x: i for i, x in enumerate(ids)}
    labelled = []
    with open(args.data / "pairs.csv", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row["id_a"] in pos and row["id_b"] in pos:
                a, b = sorted((pos[row["id_a"]], pos[row["id_b"]]))
                labelled.append((a, b, int(row["label"])))
    opts: dict[str, Any] = {"keep": args.keep, "workers": args.workers}
    if args.threshold is not None:
        opts["threshold"] = args.threshold
    t0 = time.perf_counter()
    status, result = run_status(texts, ids, [(a, b) for a, b, _ in labelled], **opts)
    t_dedup = time.perf_counter() - t0
    config = DedupConfig(**{**opts, "workers": 1})
    table: Counter[tuple[str, str, str]] = Counter()
    keep_checked = keep_bad = 0
    bad: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    for (a, b, _label), (st, rule) in zip(labelled, status, strict=True):
        e = explain(texts[a], texts[b], config=config, ids=(ids[a], ids[b]))
        same = (e.decision, e.rule) == (st, rule)
        table[(st, rule, "agree" if same else "disagree")] += 1
        if not same and len(bad) < 20:
            bad.append(
                {"a": ids[a], "b": ids[b], "dedup": [st, rule], "explain": [e.decision, e.rule]}
            )
        if st == "duplicate" and args.keep != "none":
            keep_checked += 1
            root = result.root
            dropped_b, dropped_a = root[b] == a, root[a] == b
            if (
                (dropped_b and e.keep["dropped"] != ["B"])
                or (dropped_a and e.keep["dropped"] != ["A"])
                or (e.keep.get("length_guard") and (dropped_a or dropped_b))
            ):
                keep_bad += 1
    t_explain = time.perf_counter() - t0
    cpu_explain = time.process_time() - cpu0
    rows = sorted({(s, r) for s, r, _ in table})
    print(
        f"{len(labelled):,} labelled pairs; dedup over {len(texts):,} documents "
        f"({t_dedup:.2f} s), explain per pair {1000 * t_explain / len(labelled):.2f} ms "
        f"({1000 * cpu_explain / len(labelled):.2f} ms CPU)\n"
    )
    print("| dedup's decision | rule | pairs | explain agrees | disagrees |")
    print("|---|---|---:|---:|---:|")
    total_agree = 0
    out_rows = []
    for s, r in rows:
        ag, dis = table[(s, r, "agree")], table[(s, r, "disagree")]
        total_agree += ag
        out_rows.append({"decision": s, "rule": r, "pairs": ag + dis, "agree": ag, "disagree": dis})
        print(f"| {s} | {r} | {ag + dis:,} | {ag:,} | {dis:,} |")
    print(f"| **all** | | {len(labelled):,} | {total_agree:,} | {len(labelled) - total_agree:,} |")
    print(f"\nkeep policy checked on {keep_checked:,} reported pairs: {keep_bad} disagree")
    if bad:
        print("first disagreements:", json.dumps(bad[:5], indent=1))
    load = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "data": str(args.data),
                "options": opts,
                "pairs": len(labelled),
                "agree": total_agree,
                "rows": out_rows,
                "keep_checked": keep_checked,
                "keep_disagree": keep_bad,
                "disagreements": bad,
                "dedup_s": round(t_dedup, 3),
                "explain_ms_per_pair": round(1000 * t_explain / len(labelled), 3),
                "explain_cpu_ms_per_pair": round(1000 * cpu_explain / len(labelled), 3),
                "machine": {
                    "cores": os.cpu_count(),
                    "platform": platform.platform(),
                    "python": platform.python_version(),
                    "load": [round(x, 2) for x in load],
                },
            },
            indent=1,
        )
    )
    print(f"wrote {args.out}")
    if total_agree != len(labelled) or keep_bad:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
