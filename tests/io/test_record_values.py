"""``neardup.io.record_values`` (a field of every record read, in corpus order, whatever the
format) and ``unix_seconds`` (a record's time), which ``neardup store load --time-field`` uses."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.errors import ConfigError
from neardup.io import read_corpus, record_values
from neardup.io.fields import MISSING, unix_seconds

ROWS = [
    {"id": "a", "text": "first text", "ts": 10, "meta": {"when": "2026-01-01T00:00:00Z"}},
    {"id": "b", "text": "second text", "ts": 20.5, "meta": {}},
    {"id": "c", "text": "third text", "meta": {"when": "x"}},
]


def _files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    p = tmp_path / "r.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    out["jsonl"] = p
    p = tmp_path / "r.json"
    p.write_text(json.dumps(ROWS), encoding="utf-8")
    out["json"] = p
    return out


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_values_of_every_record_in_order(tmp_path: Path, fmt: str) -> None:
    with read_corpus([_files(tmp_path)[fmt]]) as corpus:
        assert record_values(corpus, "ts")[:2] == [10, 20.5]
        assert record_values(corpus, "ts")[2] is MISSING
        assert record_values(corpus, "meta.when")[::2] == ["2026-01-01T00:00:00Z", "x"]
        assert corpus.location(2).endswith(":3")


def test_values_across_several_inputs_and_formats(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    files = _files(tmp_path)
    pq.write_table(pa.table({"id": ["p", "q"], "text": ["x y", "z w"], "ts": [1, 2]}), tmp_path / "r.parquet")  # fmt: skip
    csv = tmp_path / "r.csv"
    csv.write_text("id,text,ts\nc1,one,7\nc2,two,8\n", encoding="utf-8")
    inputs = [files["jsonl"], tmp_path / "r.parquet", csv]
    with read_corpus(inputs) as corpus:
        got = record_values(corpus, "ts")
    assert got[:2] + got[3:] == [10, 20.5, 1, 2, "7", "8"] and got[2] is MISSING


def test_an_empty_jsonl_file_among_others_gives_no_values(tmp_path: Path) -> None:
    files = _files(tmp_path)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with read_corpus([empty, files["jsonl"], empty]) as corpus:
        assert record_values(corpus, "ts")[:2] == [10, 20.5]
        assert len(record_values(corpus, "ts")) == 3


def test_plain_text_records_have_no_fields(tmp_path: Path) -> None:
    p = tmp_path / "r.txt"
    p.write_text("a line\nanother\n", encoding="utf-8")
    with read_corpus([p], fmt="lines") as corpus, pytest.raises(ConfigError, match="no field"):
        record_values(corpus, "ts")


@given(st.datetimes(timezones=st.timezones(), min_value=dt.datetime(1971, 1, 1), max_value=dt.datetime(2200, 1, 1)))  # fmt: skip
def test_iso_times_name_the_same_instant(when: dt.datetime) -> None:
    assert unix_seconds(when.isoformat()) == pytest.approx(when.timestamp(), abs=1e-6)


@given(st.floats(min_value=0, max_value=1e11, allow_nan=False))
def test_numbers_and_numeric_strings_are_seconds(t: float) -> None:
    assert unix_seconds(t) == t
    assert unix_seconds(repr(t)) == t


@pytest.mark.parametrize("bad", ["2026-11-29T12:00:00", "soon", "", None, True, [1], float("inf")])
def test_what_is_not_a_time_is_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        unix_seconds(bad)
