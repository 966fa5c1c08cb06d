"""Inputs and outputs at their edges (an exploratory pass's findings, each pinned): a
byte-order mark in every format, fields that only some records have, integers beyond 64 bits,
lone surrogates, repeated header names, Arrow's view types, values JSON has no type for,
UTF-16 line formats, a quoted CSV field over several lines, and stdout sent into an input."""

from __future__ import annotations

import codecs
import datetime
import decimal
import json
import subprocess
import sys
from pathlib import Path

import pytest

from neardup.cli.main import main

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

BOM = codecs.BOM_UTF8


def _dedup(*args: str) -> int:
    return main(["dedup", "-q", *args])


def test_a_byte_order_mark_is_skipped_in_every_format(tmp_path: Path) -> None:
    (tmp_path / "b.csv").write_bytes(BOM + b"id,text\nu1,first doc text here\nu2,second one\n")
    (tmp_path / "b.json").write_bytes(BOM + b'[{"id": "a", "text": "x y z"}]')
    (tmp_path / "b.txt").write_bytes(BOM + b"some document text\n")
    for name, want in (
        (
            "b.csv",
            [{"id": "u1", "text": "first doc text here"}, {"id": "u2", "text": "second one"}],
        ),
        ("b.json", [{"id": "a", "text": "x y z"}]),
        ("b.txt", [{"id": "b.txt", "text": "some document text\n"}]),
    ):
        out = tmp_path / f"{name}.jsonl"
        assert _dedup(str(tmp_path / name), "-o", str(out)) == 0
        assert [json.loads(x) for x in out.read_text().splitlines()] == want
    from neardup.batch.evaluate import load_labels

    (tmp_path / "l.csv").write_bytes(BOM + b"id_a,id_b,label\na,b,1\n")
    assert load_labels(tmp_path / "l.csv") == {("a", "b"): 1}


def test_parquet_output_keeps_every_field_of_every_record(tmp_path: Path) -> None:
    """The first kept record's fields alone were written (a later record's ``lang`` lost)."""
    rows = [
        {"id": "a", "text": "first doc text here"},
        {"id": "b", "text": "second doc text here", "lang": "en"},
        {"id": "c", "text": "third doc text here", "n": 1},
        {"id": "d", "text": "fourth doc text here", "n": 2.5},
    ]
    src = tmp_path / "f.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _dedup(str(src), "-o", str(tmp_path / "f.parquet")) == 0
    table = pq.read_table(tmp_path / "f.parquet")
    assert table.column_names == ["id", "text", "lang", "n"]
    got = table.to_pylist()
    assert [g["lang"] for g in got] == [None, "en", None, None]
    assert [g["n"] for g in got] == [None, None, 1.0, 2.5]


def test_parquet_inputs_of_kindred_types_and_view_types(tmp_path: Path) -> None:
    pq.write_table(
        pa.table({"id": ["1"], "text": pa.array(["first doc text here"], pa.large_string())}),
        tmp_path / "s1.parquet",
    )
    pq.write_table(
        pa.table({"id": ["3"], "text": ["third doc text here"]}), tmp_path / "s2.parquet"
    )
    out = tmp_path / "s12.parquet"
    assert _dedup(str(tmp_path / "s1.parquet"), str(tmp_path / "s2.parquet"), "-o", str(out)) == 0
    assert pq.read_table(out).column("id").to_pylist() == ["1", "3"]
    views = pa.array(["first doc text here", "first doc text here", "third"], pa.string_view())
    pq.write_table(pa.table({"id": ["a", "b", "c"], "text": views}), tmp_path / "sv.parquet")
    assert _dedup(str(tmp_path / "sv.parquet"), "-o", str(tmp_path / "sv.jsonl")) == 0
    kept = [json.loads(x)["id"] for x in (tmp_path / "sv.jsonl").read_text().splitlines()]
    assert kept == ["a", "c"]


def test_integers_beyond_64_bits_stay_exact_in_other_formats(tmp_path: Path, capsys) -> None:
    big = 12345678901234567890123
    (tmp_path / "bi.jsonl").write_text(
        json.dumps({"id": "a", "text": "first doc text here", "n": big}) + "\n"
    )
    (tmp_path / "one.csv").write_text("id,text\nc1,csv doc text here\n")
    ins = [str(tmp_path / "bi.jsonl"), str(tmp_path / "one.csv")]
    assert _dedup(*ins, "-o", str(tmp_path / "o.csv")) == 0
    assert f"a,first doc text here,{big}" in (tmp_path / "o.csv").read_text()
    assert _dedup(*ins, "-o", str(tmp_path / "o.jsonl")) == 0
    assert json.loads((tmp_path / "o.jsonl").read_text().splitlines()[0])["n"] == big
    assert _dedup(*ins, "-o", str(tmp_path / "o.parquet")) == 3
    assert "integer beyond 64 bits" in capsys.readouterr().err
    assert not (tmp_path / "o.parquet").exists()


def test_lone_surrogates_are_kept_as_escapes_or_refused(tmp_path: Path, capsys) -> None:
    src = tmp_path / "s.jsonl"
    src.write_text('{"id":"a","text":"lone \\ud800 here"}\n{"id":"b","text":"other doc text"}\n')
    assert _dedup(str(src), "-o", str(tmp_path / "o.json")) == 0
    assert json.loads((tmp_path / "o.json").read_text())[0]["text"] == "lone \ud800 here"
    assert "\\ud800" in (tmp_path / "o.json").read_text()
    for out in ("o.csv", "o.parquet"):
        assert _dedup(str(src), "-o", str(tmp_path / out)) == 3
        assert "lone surrogate" in capsys.readouterr().err
        assert not (tmp_path / out).exists()
    ids = tmp_path / "i.jsonl"
    ids.write_text('{"id":"a\\udc00","text":"x y z"}\n{"id":"b","text":"p q r"}\n')
    assert _dedup(str(ids), "-o", str(tmp_path / "i.out.jsonl")) == 3
    assert "i.jsonl:1: the record's 'id' field (used as its id) holds a lone surrogate" in (
        capsys.readouterr().err
    )
    c = tmp_path / "c.csv"
    assert _dedup(str(ids), "-o", str(tmp_path / "i.out.jsonl"), "--clusters-out", str(c), "--on-error", "skip") == 0  # fmt: skip
    assert c.read_text().splitlines()[1:] == ["b,0,1,b,1"]


def test_a_header_naming_a_column_twice(tmp_path: Path, capsys) -> None:
    (tmp_path / "d.csv").write_text("id,text,id\na,first doc text here,z\n")
    assert _dedup(str(tmp_path / "d.csv"), "-o", str(tmp_path / "d.jsonl")) == 3
    assert "d.csv:1: the header names the column 'id' twice (columns 1 and 3)" in (
        capsys.readouterr().err
    )
    (tmp_path / "n.csv").write_text("id,text,note,note\na,first doc text here,x,y\n")
    assert _dedup(str(tmp_path / "n.csv"), "-o", str(tmp_path / "n.out.csv")) == 0
    assert (tmp_path / "n.out.csv").read_text() == "id,text,note,note\na,first doc text here,x,y\n"
    assert _dedup(str(tmp_path / "n.csv"), "-o", str(tmp_path / "n.jsonl")) == 3
    assert "names the column 'note' twice" in capsys.readouterr().err


def test_values_json_has_no_type_for(tmp_path: Path) -> None:
    ts = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    table = pa.table(
        {
            "id": ["a"],
            "text": ["first doc text here"],
            "blob": pa.array([b"\x00\x01"], pa.binary()),
            "ts": pa.array([ts]),
            "dec": pa.array([decimal.Decimal("1.50")]),
        }
    )
    pq.write_table(table, tmp_path / "b.parquet")
    assert _dedup(str(tmp_path / "b.parquet"), "-o", str(tmp_path / "b.jsonl")) == 0
    rec = json.loads((tmp_path / "b.jsonl").read_text())
    assert rec["blob"] == "AAE=" and rec["ts"] == "2024-01-02T03:04:05+00:00"
    assert rec["dec"] == "1.50"
    assert _dedup(str(tmp_path / "b.parquet"), "-o", str(tmp_path / "b.csv")) == 0
    assert (tmp_path / "b.csv").read_text().splitlines()[1] == (
        "a,first doc text here,AAE=,2024-01-02T03:04:05+00:00,1.50"
    )


def test_line_formats_in_utf16_are_refused_first(tmp_path: Path, capsys) -> None:
    src = tmp_path / "u.jsonl"
    src.write_bytes('{"id":"a","text":"hello world"}\n'.encode("utf-16"))
    assert _dedup(str(src), "--encoding", "utf-16", "-o", str(tmp_path / "o.jsonl")) == 2
    assert "convert it first (iconv -f UTF-16 -t UTF-8)" in capsys.readouterr().err


def test_rows_are_named_by_the_line_they_start_on(tmp_path: Path) -> None:
    (tmp_path / "m.csv").write_text('text\nfirst\n"multi\nline"\nthird\n')
    clusters = tmp_path / "c.csv"
    assert _dedup(str(tmp_path / "m.csv"), "-o", str(tmp_path / "o.jsonl"), "--clusters-out", str(clusters)) == 0  # fmt: skip
    got = [r.split(",")[0] for r in clusters.read_text().splitlines()[1:]]
    assert got == [f"{tmp_path / 'm.csv'}:{n}" for n in (2, 3, 5)]


def test_lines_output_puts_every_line_break_on_one_line(tmp_path: Path) -> None:
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps({"id": "a", "text": "one\r\ntwo\rthree\nfour"}) + "\n")
    out = tmp_path / "o.txt"
    assert _dedup(str(src), "-o", str(out), "--output-format", "lines") == 0
    assert out.read_bytes() == b"one two three four\n"


def test_stdout_sent_into_an_input_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "g.jsonl"
    src.write_text('{"id":"a","text":"first doc text here"}\n')
    with open(src, "ab") as into:
        proc = subprocess.run(
            [sys.executable, "-m", "neardup", "dedup", "-q", str(src), "-o", "-"],
            stdout=into,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            check=False,
        )
    assert proc.returncode == 2 and "is the input file" in proc.stderr
    assert src.read_text() == '{"id":"a","text":"first doc text here"}\n'
