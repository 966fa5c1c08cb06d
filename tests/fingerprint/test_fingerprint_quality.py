"""Quality guard on the shared dev set: the default fingerprints keep the documented P/R."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

import neardup
from neardup.fingerprint.distance import hamming_many


@pytest.mark.shared
def test_default_auto_precision_recall_on_dev(dev_data):
    ids, texts = {}, []
    with open(dev_data / "docs.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            ids[d["id"]] = len(texts)
            texts.append(d["text"])
    a, b, y = [], [], []
    with open(dev_data / "pairs.csv", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            a.append(ids[row["id_a"]])
            b.append(ids[row["id_b"]])
            y.append(row["label"] == "1")
    a, b, y = np.array(a), np.array(b), np.array(y)
    fps = neardup.Fingerprinter().fingerprint_many(texts, workers=2)
    dist = hamming_many(fps[a], fps[b])
    hit = dist <= 6
    precision = (hit & y).sum() / hit.sum()
    recall = (hit & y).sum() / y.sum()
    # docs/fingerprints.md: P@6 0.991, R@6 0.569 (all slices)
    assert precision >= 0.98, precision
    assert recall >= 0.54, recall
