"""Deduplicator with the real Fingerprinter, Verifier and HammingIndex (and verification rules)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from doubles import SimpleFingerprinter

from neardup.errors import ConfigError, StorageError
from neardup.online.deduplicator import Deduplicator


class StubVerifier:
    """Contract-shaped verifier: accepts when the texts share their first 5 characters."""

    max_candidate_distance = 64

    def candidate_distance(self, text_len: int) -> int:
        return 64 if text_len < 50 else 3

    def verify(self, a: str, b: str, distance: int) -> tuple[bool, float]:
        ok = a[:5] == b[:5]
        return ok, 0.9 if ok else 0.1

    def verify_many(self, a, b, d):
        out = [self.verify(x, y, z) for x, y, z in zip(a, b, d, strict=True)]
        return np.array([o[0] for o in out], bool), np.array([o[1] for o in out], float)

    def config(self) -> dict:
        return {"kind": "stub"}


def test_default_search_radius_is_max_distance():
    # Cheap searches over tens of millions of fingerprints by default; the wider short-text
    # radius is opt-in (candidate_radius), see docs/store.md.
    with Deduplicator.open(max_distance=4) as d:
        assert d.radius == 4
    with Deduplicator.open(max_distance=4, candidate_radius=12) as d:
        assert d.radius == 12


def test_default_components_end_to_end(tmp_path):
    base = (
        "Breaking: the city council approved the new budget for public transport on Monday evening."
    )
    # a one-word edit of a short text is ~10 bits away: search as far as the verifier asks
    with Deduplicator.open(tmp_path, candidate_radius=18) as d:
        assert d.check_and_add({"id": "a", "text": base}).added
        near = d.check_and_add({"id": "b", "text": base.replace("Monday", "Tuesday")})
        assert near.duplicate and near.matches[0].id == "a"
        assert near.matches[0].score is not None and 0 < near.matches[0].score <= 1
        assert d.check_and_add(
            {"id": "c", "text": "完全不同的一段中文文本，讲的是天气和旅游。"}
        ).added
        other = d.check(
            {"id": "z", "text": "A recipe for tomato soup with basil and garlic, serves four."}
        )
        assert not other.duplicate
    with Deduplicator.open(tmp_path) as d:  # stored fingerprinter / verifier configs are reused
        assert len(d) == 2 and d.check({"id": "q", "text": base}).duplicate


def test_dev_corpus_pairs(dev_data):
    docs = {}
    with open(dev_data / "docs.jsonl", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            docs[r["id"]] = r["text"]
    import csv

    with open(dev_data / "pairs.csv", encoding="utf-8") as f:
        pairs = [
            r for r in csv.DictReader(f) if r["label"] in ("1", "dup", "duplicate", "True", "true")
        ]
    pairs = pairs[:150]
    if not pairs:
        pytest.skip("no positive pairs found in pairs.csv")
    found = 0
    with Deduplicator.open(candidate_radius=18) as d:  # the verifier's own candidate distances
        for p in pairs:
            d.add({"id": "A" + p["id_a"], "text": docs[p["id_a"]]})
            dec = d.check({"id": "B" + p["id_b"], "text": docs[p["id_b"]]})
            found += any(m.id == "A" + p["id_a"] for m in dec.matches)
            d.delete("A" + p["id_a"])
    assert found / len(pairs) > 0.5  # recall of the default pipeline on labelled pairs (sanity)


def test_verifier_rules_on_short_texts():
    with Deduplicator.open(
        verify=StubVerifier(),
        fingerprinter=SimpleFingerprinter(),
        max_distance=0,
        candidate_radius=64,
    ) as d:
        assert d.radius == 64
        d.add({"id": "a", "text": "hello world one two"})
        # short text, far fingerprint but verified -> duplicate with the verifier's score
        dec = d.check({"id": "b", "text": "hello there three four"})
        assert dec.duplicate and dec.matches[0].score == 0.9
        # rejected by the verifier
        assert not d.check({"id": "c", "text": "yo world one two"}).duplicate


def test_unstored_text_falls_back_to_distance_rule():
    with Deduplicator.open(
        verify=StubVerifier(), fingerprinter=SimpleFingerprinter(), store_text=False, max_distance=0
    ) as d:
        d.add({"id": "a", "text": "hello world one two"})
        # identical content: exact match by content hash
        assert d.check({"id": "x", "text": "hello  world one two"}).matches[0].score == 1.0
        # no stored text: only distance <= max_distance (0) counts
        assert not d.check({"id": "b", "text": "hello there three four"}).duplicate


def test_empty_texts_match_only_by_content():
    with Deduplicator.open(verify=False, fingerprinter=SimpleFingerprinter(), max_distance=32) as d:
        d.add({"id": "e1", "text": ""})
        assert d.check({"id": "e2", "text": "   "}).duplicate  # same normalized content
        assert not d.check({"id": "e3", "text": "!!!"}).duplicate
        d.add({"id": "t", "text": "some real words here"})
        assert [m.id for m in d.check({"id": "q", "text": ""}).matches] == ["e1"]


def test_128_bit_fingerprints(tmp_path):
    from neardup.fingerprint.simhash import Fingerprinter

    fp = Fingerprinter(bits=128)
    t = "Scientists have discovered a new species of frog in the rainforests of Peru this year."
    with Deduplicator.open(tmp_path, fingerprinter=fp, verify=False, memtable_size=3) as d:
        d.add(
            [
                {"id": f"n{i}", "text": f"unrelated note number {i} about gardening"}
                for i in range(3)
            ]
        )
        d.add({"id": "a", "text": t})
        dec = d.check({"id": "b", "text": t + " "})
        assert dec.duplicate and dec.fingerprint >= 0 and len(dec.to_dict()["fingerprint"]) <= 32
    with Deduplicator.open(tmp_path, verify=False) as d:
        assert d.bits == 128 and d.check({"id": "b", "text": t}).matches[0].id == "a"
    with pytest.raises(ConfigError, match="fingerprinter config"):
        Deduplicator.open(tmp_path, fingerprinter=Fingerprinter(bits=64))


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_directory(tmp_path):
    with Deduplicator.open(tmp_path, verify=False) as d:
        d.add({"id": "a", "text": "hello world"})
    os.chmod(tmp_path, 0o500)
    for f in tmp_path.iterdir():
        os.chmod(f, 0o400)
    try:
        with pytest.raises((StorageError, OSError)), Deduplicator.open(tmp_path, verify=False) as d:
            d.add({"id": "b", "text": "other text"})
    finally:
        os.chmod(tmp_path, 0o700)
        for f in tmp_path.iterdir():
            os.chmod(f, 0o600)


def test_mixed_search_limits_agree_with_single_checks():
    rng = np.random.default_rng(5)

    def text(i: int) -> str:
        n = 3 if i % 2 else 30  # short (< 50 chars) and long texts
        return " ".join(f"w{x}" for x in rng.integers(0, 40, n))

    with Deduplicator.open(
        verify=StubVerifier(), fingerprinter=SimpleFingerprinter(), candidate_radius=24
    ) as d:
        d.add([{"id": f"s{i}", "text": text(i)} for i in range(300)])
        queries = [{"id": f"q{i}", "text": text(i)} for i in range(60)]
        batch = d.check(queries)
        singles = [d.check(q) for q in queries]
        assert batch == singles
        assert any(x.duplicate for x in batch) and not all(x.duplicate for x in batch)
        with pytest.raises(ConfigError, match="candidate_radius"):
            Deduplicator.open(candidate_radius=1, max_distance=3)
