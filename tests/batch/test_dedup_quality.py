"""Quality on the shared dev set, scored like a user runs it (skips without ../shared)."""

from __future__ import annotations

import json

import pytest

from neardup.batch.evaluate import load_labels, score_reported
from neardup.batch.run import dedup


@pytest.mark.shared
@pytest.mark.slow
def test_dev_set_f1_targets_on_defaults(dev_data):
    ids, texts, langs = [], [], {}
    with (dev_data / "docs.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            ids.append(r["id"])
            texts.append(r["text"])
            langs[r["id"]] = r["lang"]
    labels = load_labels(dev_data / "pairs.csv")
    result = dedup(texts, ids=ids)
    # the MinHash channel carries recall; the work budget (a safety valve) never acts here
    passes = result.stats["candidate_passes"]
    assert set(passes) == {"simhash", "simhash_short"}
    for name, p in passes.items():
        assert p["distance_used"] == p["distance"], (name, p)
    lsh = result.stats["lsh"]
    assert lsh["probability"] >= 0.99 and lsh["pairs_skipped"] == 0
    reported = [
        (ids[a], ids[b])
        for a, b in zip(result.pairs.a.tolist(), result.pairs.b.tolist(), strict=True)
    ]
    lengths = {i: len(t) for i, t in zip(ids, texts, strict=True)}
    score = score_reported(reported, labels, langs, lengths)
    assert score["overall"]["f1"] >= 0.98, score["overall"]
    for name in ("en", "zh", "short", "long"):
        assert score[name]["f1"] >= 0.97, (name, score[name])
    # reported pairs without a label stay a minority of what is reported
    assert score["unlabeled"] < 0.5 * score["reported"]
