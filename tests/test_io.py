"""Corpus readers/writers: every format round-trips; bad input names file and line; atomic output."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest

from neardup.errors import ConfigError, InputError, RecordError
from neardup.io import atomic_open, check_not_input, detect_format, read_corpus, write_kept

DOCS = [
    {"id": "a", "text": "first document", "extra": 1},
    {"id": "b", "text": "第二个文档", "extra": 2},
    {"id": "c", "text": 'third, with "quotes"\nand a newline', "extra": 3},
]
KEEP = np.array([True, False, True])


def _write(path: Path, fmt: str) -> Path:
    if fmt == "jsonl":
        path.write_text(
            "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS), encoding="utf-8"
        )
    elif fmt == "json":
        path.write_text(json.dumps(DOCS, ensure_ascii=False), encoding="utf-8")
    elif fmt in ("csv", "tsv"):
        with path.open("w", encoding="utf-8", newline="") as fh:
            w = csv.DictWriter(
                fh, fieldnames=["id", "text", "extra"], delimiter="," if fmt == "csv" else "\t"
            )
            w.writeheader()
            w.writerows(DOCS)
    elif fmt == "parquet":
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(DOCS), path)
    return path


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "tsv", "parquet"])
def test_round_trip(tmp_path, fmt):
    src = _write(tmp_path / f"in.{fmt}", fmt)
    with read_corpus([str(src)], id_field="id") as corpus:
        assert corpus.ids == ["a", "b", "c"]
        assert corpus.texts == [d["text"] for d in DOCS]
        out = tmp_path / f"out.{fmt}"
        assert write_kept(corpus, KEEP, str(out)) == 2
    with read_corpus([str(out)], id_field="id") as back:
        assert back.ids == ["a", "c"]
        assert back.texts == [DOCS[0]["text"], DOCS[2]["text"]]
    if fmt == "jsonl":  # kept lines are copied byte for byte
        lines = src.read_text(encoding="utf-8").splitlines()
        assert out.read_text(encoding="utf-8").splitlines() == [lines[0], lines[2]]


def test_text_directory_and_lines(tmp_path):
    d = tmp_path / "docs"
    (d / "sub").mkdir(parents=True)
    (d / "x.txt").write_text("one", encoding="utf-8")
    (d / "sub" / "y.txt").write_text("two", encoding="utf-8")
    with read_corpus([str(d)]) as corpus:
        assert corpus.ids == ["sub/y.txt", "x.txt"]
        write_kept(corpus, np.array([False, True]), str(tmp_path / "out"))
    assert sorted(os.listdir(tmp_path / "out")) == ["x.txt"]
    lines = tmp_path / "l.txt"
    lines.write_text("alpha\n\nbeta\n", encoding="utf-8")
    with read_corpus([str(lines)], fmt="lines") as corpus:
        assert corpus.texts == ["alpha", "beta"]
        assert corpus.ids == [f"{lines}:1", f"{lines}:3"]
        write_kept(corpus, np.array([False, True]), str(tmp_path / "o.txt"))
    assert (tmp_path / "o.txt").read_text(encoding="utf-8") == "beta\n"


def test_generated_ids_and_multiple_inputs(tmp_path):
    p1 = tmp_path / "a.jsonl"
    p1.write_text('{"text": "x"}\n{"text": "y"}\n', encoding="utf-8")
    p2 = tmp_path / "b.jsonl"
    p2.write_text('{"text": "z", "id": "own"}\n', encoding="utf-8")
    with read_corpus([str(p1), str(p2)]) as corpus:
        assert corpus.ids == [f"{p1}:1", f"{p1}:2", "own"]
        write_kept(corpus, np.array([True, False, True]), str(tmp_path / "out.jsonl"))
    assert (tmp_path / "out.jsonl").read_text(
        encoding="utf-8"
    ) == '{"text": "x"}\n{"text": "z", "id": "own"}\n'


def test_malformed_json_names_file_and_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"text": "ok"}\n{"text": broken\n{"text": "ok2"}\n', encoding="utf-8")
    with pytest.raises(RecordError, match=rf"{p}:2: malformed JSON") as exc:
        read_corpus([str(p)])
    assert exc.value.line == 2 and exc.value.path == str(p)
    with read_corpus([str(p)], on_error="skip") as corpus:
        assert corpus.texts == ["ok", "ok2"] and corpus.skipped == 1
        assert "bad.jsonl:2" in corpus.errors[0]


def test_missing_text_field_names_field_and_record(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text('{"text": "ok"}\n{"body": "x", "id": 7}\n', encoding="utf-8")
    with pytest.raises(
        RecordError, match=r"d.jsonl:2: record has no text field 'text' \(its fields: body, id\)"
    ):
        read_corpus([str(p)])
    with pytest.raises(RecordError, match="must be a string"):
        p.write_text('{"text": 5}\n', encoding="utf-8")
        read_corpus([str(p)])


def test_non_utf8(tmp_path):
    p = tmp_path / "latin.jsonl"
    p.write_bytes('{"text": "café"}\n'.encode("latin-1"))
    with pytest.raises(RecordError, match=r"latin.jsonl:1: not valid utf-8.*--encoding"):
        read_corpus([str(p)])
    with read_corpus([str(p)], encoding="latin-1") as corpus:
        assert corpus.texts == ["café"]
    with pytest.raises(ConfigError, match="unknown encoding"):
        read_corpus([str(p)], encoding="nope-8")


def test_duplicate_and_missing_ids(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text('{"id": "x", "text": "a"}\n{"id": "x", "text": "b"}\n', encoding="utf-8")
    with pytest.raises(RecordError, match="duplicate id 'x'"):
        read_corpus([str(p)])
    p.write_text('{"text": "a"}\n', encoding="utf-8")
    with pytest.raises(RecordError, match="no id field 'key'"):
        read_corpus([str(p)], id_field="key")


def test_csv_wrong_field_count(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("id,text\n1,hello\n2,a,b\n", encoding="utf-8")
    with pytest.raises(RecordError, match=r"d.csv:3: row has 3 fields"):
        read_corpus([str(p)])


def test_format_detection_and_errors(tmp_path):
    assert detect_format("x.jsonl") == "jsonl" and detect_format("-") == "jsonl"
    assert detect_format(str(tmp_path)) == "text"
    with pytest.raises(ConfigError, match="--input-format"):
        detect_format("x.unknown")
    with pytest.raises(InputError, match="does not exist"):
        read_corpus([str(tmp_path / "missing.jsonl")])
    with pytest.raises(ConfigError, match="no input"):
        read_corpus([])


def test_atomic_open_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(RuntimeError), atomic_open(target, "w") as fh:
        fh.write("half")
        raise RuntimeError("boom")
    assert target.read_text(encoding="utf-8") == "old"
    assert os.listdir(tmp_path) == ["out.txt"]
    with atomic_open(target, "w") as fh:
        fh.write("new")
    assert target.read_text(encoding="utf-8") == "new"


def test_output_may_not_be_an_input(tmp_path):
    p = tmp_path / "in.jsonl"
    p.write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match="would overwrite"):
        check_not_input(str(p), [str(p)], option="--output")
    with pytest.raises(ConfigError, match="would overwrite or write into"):
        check_not_input(str(tmp_path / "x"), [str(tmp_path)], option="--output")
    check_not_input(str(tmp_path / "other.jsonl"), [str(p), "-"], option="--output")
