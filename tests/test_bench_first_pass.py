"""``benchmarks/bench_first_pass.py`` on two tiny shards: the one file it makes holds every
copy's records with unique ids, and each setting's first pass counts them all (in several
pieces, or whole)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from doubles import benchmark_module

zstandard = pytest.importorskip("zstandard")


def test_the_first_pass_benchmark_reads_every_copy(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for s in range(2):
        rows = [{"id": f"w{s}{k:04d}", "time": 1.0, "text": f"words {k} " * 5} for k in range(300)]
        raw = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows).encode()
        (corpus / f"window-{s:05d}.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(raw))
    out = tmp_path / "r.json"
    with benchmark_module("bench_first_pass") as b:
        args = ["--corpus", str(corpus), "--files", "2", "--copies", "3", "--work", str(tmp_path)]
        assert b.main([*args, "--piece-bytes", "4000,0", "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    made = tmp_path / "first-pass-2x3.jsonl"
    ids = [json.loads(x)["id"] for x in made.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 1800 and ids[600] == "1-w00000"
    pieces, whole = got["rows"]
    assert pieces["documents"] == whole["documents"] == pieces["used"] == 1800
    assert pieces["pieces"] > 10 and whole["pieces"] == 1
