"""Fixtures of the incremental tests: the bundled sample cut into three daily batches."""

from __future__ import annotations

from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "neardup" / "data" / "sample" / "sample.jsonl"


@pytest.fixture
def batches(tmp_path: Path) -> list[Path]:
    rows = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)
    cuts = [0, 400, 900, len(rows)]
    out = []
    for i in range(3):
        p = tmp_path / f"day{i}.jsonl"
        p.write_text("".join(rows[cuts[i] : cuts[i + 1]]), encoding="utf-8")
        out.append(p)
    return out
