"""Inputs and outputs planned before reading (``neardup.io.plan``), records written with every
field in every format (``neardup.io.writers``), the one id rule and the encoding guard."""

from __future__ import annotations

import csv
import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.errors import ConfigError, InputError, RecordError
from neardup.io import (
    InputFile,
    check_outputs,
    plan_inputs,
    plan_output,
    read_corpus,
    write_kept,
)

DOCS = [
    {"id": "a", "text": "alpha text", "lang": "en", "score": 1.5, "tags": ["x", "y"]},
    {"id": "b", "text": "beta text", "lang": "de", "score": None, "tags": []},
    {"id": "c", "text": "gamma text", "lang": "en", "score": 2.0, "tags": ["z"]},
]


def _jsonl(path: Path, docs=DOCS) -> Path:
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs))
    return path


# --- inputs


def test_folder_files_by_their_names_in_path_order(tmp_path):
    d = tmp_path / "in"
    (d / "a" / "b").mkdir(parents=True)
    (d / ".hidden").mkdir()
    for name in ("z.jsonl", "a-c.jsonl.gz", "a/b/x.ndjson", ".hidden/h.jsonl", "_SUCCESS", ".crc"):
        (d / name).write_bytes(b"")
    files = plan_inputs([str(d)])
    assert [f.rel for f in files] == ["a/b/x.ndjson", "a-c.jsonl.gz", "z.jsonl"]
    assert {f.fmt for f in files} == {"jsonl"} and not any(f.explicit for f in files)
    assert [f.fmt for f in plan_inputs([str(d)], "csv")] == ["csv"] * 3
    assert all(f.explicit for f in plan_inputs([str(d)], "csv"))


def test_links_in_a_folder_are_followed_and_broken_ones_refused(tmp_path):
    """A linked folder of shards was left out (os.walk does not follow folder links) where a
    glob over the same tree read it, and a link to a missing file was skipped: both silent."""
    shards = tmp_path / "shards"
    shards.mkdir()
    _jsonl(shards / "part-2.jsonl")
    d = tmp_path / "in"
    (d / "real").mkdir(parents=True)
    _jsonl(d / "real" / "a.jsonl")
    (d / "linked").symlink_to(shards, target_is_directory=True)
    files = plan_inputs([str(d)])
    assert [f.rel for f in files] == ["linked/part-2.jsonl", "real/a.jsonl"]
    assert len(plan_inputs([str(d / "**" / "*.jsonl")])) == 2  # the glob agrees
    (d / "dangling.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    with pytest.raises(InputError, match=r"dangling\.jsonl.* is a link to a missing file"):
        plan_inputs([str(d)])
    (d / "dangling.jsonl").unlink()
    (d / "real" / "loop").symlink_to(d, target_is_directory=True)
    with pytest.raises(InputError, match="leads to a folder already read"):
        plan_inputs([str(d)])


def test_folder_refusals(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    with pytest.raises(InputError, match="has no files"):
        plan_inputs([str(d)])
    (d / "a.jsonl").write_bytes(b"")
    (d / "b.parquet").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"mixes formats \(jsonl: a.jsonl; parquet: b.parquet\)"):
        plan_inputs([str(d)])
    (d / "c.html").write_bytes(b"")
    with pytest.raises(
        ConfigError, match=r"cannot tell the format of 1 file.*c.html.*--input-format"
    ):
        plan_inputs([str(d)])
    assert len(plan_inputs([str(d)], "text")) == 3
    (d / "b.parquet").unlink()
    (d / "c.html").unlink()
    (d / "t.txt").write_text("x")
    with pytest.raises(ConfigError, match="mixes formats"):  # a .txt README among shards
        plan_inputs([str(d)])


def test_named_files_globs_and_stdin(tmp_path):
    for name in ("x.jsonl", "y.jsonl", "z.csv.gz"):
        (tmp_path / name).write_bytes(b"")
    files = plan_inputs([str(tmp_path / "*.jsonl"), str(tmp_path / "z.csv.gz"), "-"])
    assert [(f.rel, f.fmt) for f in files] == [
        ("x.jsonl", "jsonl"), ("y.jsonl", "jsonl"), ("z.csv.gz", "csv"), ("-", "jsonl")
    ]  # fmt: skip
    with pytest.raises(ConfigError, match="unknown format"):
        plan_inputs(["-"], "xml")
    with pytest.raises(ConfigError, match="--input-format"):
        plan_inputs([str(tmp_path / "notes.dat")])


def test_one_path_alone_is_one_input_not_its_characters(tmp_path):
    # a str is a sequence of characters: read_corpus("/data/x.jsonl") once planned "/", "d",
    # "a", ... as inputs, and "/" named the whole file system as a folder
    path = _jsonl(tmp_path / "x.jsonl")
    for one in (str(path), path):
        assert [f.path for f in plan_inputs(one)] == [str(path)]
        assert list(read_corpus(one).ids) == ["a", "b", "c"]
    assert list(read_corpus(str(tmp_path)).ids) == ["a", "b", "c"]  # a folder alone too


# --- outputs


def _files(*specs: str) -> list[InputFile]:
    out = []
    for spec in specs:
        fmt, _, rel = spec.partition(":")
        out.append(InputFile(f"/data/{rel}", fmt, rel))
    return out


@pytest.mark.parametrize(
    "output,fmt,inputs,want",
    [
        ("k.parquet", None, ["jsonl:a.jsonl"], ("parquet", None)),
        ("k.jsonl.zst", None, ["csv:a.csv"], ("jsonl", "zstd")),
        ("k.CSV", None, ["jsonl:a.jsonl"], ("csv", None)),
        ("k.out", None, ["tsv:a.tsv"], ("tsv", None)),
        ("k", "json", ["jsonl:a.jsonl"], ("json", None)),
        ("k.jsonl.gz", "jsonl", ["jsonl:a.jsonl"], ("jsonl", "gzip")),
        ("k.txt", None, ["lines:a.txt"], ("lines", None)),
        ("k.txt", None, ["text:a.txt"], ("text", None)),
        ("k.txt", "lines", ["jsonl:a.jsonl"], ("lines", None)),
        ("-", None, ["jsonl:a.jsonl"], ("jsonl", None)),
        ("-", "csv", ["parquet:a.parquet"], ("csv", None)),
    ],
)
def test_file_outputs(output, fmt, inputs, want):
    plan = plan_output(output, _files(*inputs), fmt=fmt)
    assert not plan.folder and (plan.fmt, plan.compression) == want


@pytest.mark.parametrize(
    "output,fmt,inputs,match",
    [
        ("k.parquet", "csv", ["jsonl:a.jsonl"], "names parquet but --output-format is csv"),
        ("k.txt", "csv", ["jsonl:a.jsonl"], "plain-text file but --output-format is csv"),
        ("k.txt", None, ["jsonl:a.jsonl"], "--output-format lines"),
        ("k.txt", None, ["text:a.txt", "text:b.txt"], "cannot go into one .txt file"),
        ("k.parquet.gz", None, ["jsonl:a.jsonl"], "cannot be compressed"),
        ("-", "parquet", ["jsonl:a.jsonl"], "cannot go to stdout"),
        ("-", None, ["text:a.txt"], "cannot go to stdout"),
        ("out/", None, ["jsonl:-"], "stdin has no file name"),
        ("out/", None, ["jsonl:x/a.jsonl", "jsonl:x/a.jsonl"], "would both be written"),
        ("k", "xml", ["jsonl:a.jsonl"], "unknown output format"),
    ],
)
def test_output_refusals(output, fmt, inputs, match):
    files = _files(*inputs)
    if inputs[0] == "jsonl:-":
        files = [InputFile("-", "jsonl", "-")]
    with pytest.raises(ConfigError, match=match):
        plan_output(output, files, fmt=fmt)


def test_folder_outputs(tmp_path):
    files = _files("jsonl:p/a.jsonl.gz", "csv:q.csv", "text:t/n.txt.gz", "jsonl:b.jsonl")
    plan = plan_output(str(tmp_path / "out") + "/", files)
    assert plan.folder and plan.fmt is None
    assert plan.targets == (
        ("p/a.jsonl.gz", "jsonl", "gzip"), ("q.csv", "csv", None), ("t/n.txt", "text", None),
        ("b.jsonl", "jsonl", None),
    )  # fmt: skip
    (tmp_path / "existing").mkdir()
    plan = plan_output(str(tmp_path / "existing"), files, fmt="parquet")
    assert plan.folder and [t[:2] for t in plan.targets] == [
        ("p/a.parquet", "parquet"), ("q.parquet", "parquet"), ("t/n.parquet", "parquet"),
        ("b.parquet", "parquet"),
    ]  # fmt: skip
    # text documents with no extension on the output: a folder, as it always was
    assert plan_output("out", _files("text:a.txt")).folder
    assert not plan_output("out.txt", _files("text:a.txt")).folder


def test_check_outputs_refuses_before_reading(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.jsonl").write_text("")
    (tmp_path / "adir").mkdir()
    os.symlink("k.jsonl", tmp_path / "link.jsonl")
    inputs = ["in.jsonl"]
    cases = [
        ([("--output", "k.jsonl"), ("--pairs-out", "link.jsonl")], None, "both go to"),
        ([("--output", "-"), ("--pairs-out", "/dev/fd/1")], None, "all go to stdout"),
        ([("--output", "k.jsonl"), ("--pairs-out", "adir")], None, "is a directory"),
        ([("--output", "in.jsonl")], None, "would overwrite"),
        ([("--output", "k.jsonl"), ("--summary-json", "no/s.json")], None, "does not exist"),
        ([("--output", "adir/"), ("--pairs-out", "adir/p.csv")], "adir/", "inside the output"),
    ]
    for outputs, folder, match in cases:
        with pytest.raises(ConfigError, match=match):
            check_outputs(outputs, inputs, folder=folder)
    (tmp_path / "adir" / "x").write_text("")
    with pytest.raises(ConfigError, match="not empty"):
        check_outputs([("--output", "adir")], inputs, folder="adir")
    check_outputs([("--output", "-"), ("--pairs-out", "/dev/stderr"), ("--x", None)], inputs)


# --- writers: every field in every format


@pytest.mark.parametrize("ext", [".jsonl", ".json", ".csv", ".tsv", ".parquet", ".jsonl.gz"])
def test_every_field_is_kept_in_every_format(tmp_path, ext):
    if ext == ".parquet":
        pytest.importorskip("pyarrow")
    src = _jsonl(tmp_path / "in.jsonl")
    out = tmp_path / f"out{ext}"
    keep = np.array([True, False, True])
    with read_corpus([str(src)]) as c:
        assert write_kept(c, keep, str(out)) == 2
    with read_corpus([str(out)]) as back:
        assert back.ids == ["a", "c"] and list(back.texts) == ["alpha text", "gamma text"]
    want = [DOCS[0], DOCS[2]]
    if ext in (".csv", ".tsv"):
        rows = list(
            csv.DictReader(out.open(encoding="utf-8"), delimiter="\t" if ext == ".tsv" else ",")
        )
        assert rows == [
            {"id": "a", "text": "alpha text", "lang": "en", "score": "1.5", "tags": '["x", "y"]'},
            {"id": "c", "text": "gamma text", "lang": "en", "score": "2.0", "tags": '["z"]'},
        ]
    elif ext == ".parquet":
        import pyarrow.parquet as pq

        assert pq.read_table(out).to_pylist() == want
    elif ext == ".json":
        assert json.loads(out.read_text()) == want
    else:
        raw = gzip.decompress(out.read_bytes()) if ext.endswith(".gz") else out.read_bytes()
        assert raw == "".join(json.dumps(d) + "\n" for d in want).encode()  # bytes as read


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=8),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(
        st.fixed_dictionaries(
            {"text": st.text(min_size=1, max_size=20)}, optional={"f": _SCALARS, "g": _SCALARS}
        ),
        min_size=1,
        max_size=6,
    ),
    fmt=st.sampled_from(["jsonl", "json", "csv"]),
    data=st.data(),
)
def test_records_round_trip_through_other_formats(tmp_path_factory, rows, fmt, data):
    """JSONL records written as another format and read back: the same kept texts and ids,
    and (JSON formats) the same records."""
    tmp = tmp_path_factory.mktemp("rt")
    docs = [{"id": f"d{i}", **r} for i, r in enumerate(rows)]
    src = _jsonl(tmp / "in.jsonl", docs)
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=len(docs), max_size=len(docs))))
    out = tmp / f"out.{fmt}"
    with read_corpus([str(src)]) as c:
        write_kept(c, keep, str(out))
    want = [d for d, k in zip(docs, keep, strict=True) if k]
    with read_corpus([str(out)]) as back:
        assert back.ids == [d["id"] for d in want]
        assert list(back.texts) == [d["text"] for d in want]
    if fmt == "json":
        assert json.loads(out.read_text(encoding="utf-8")) == want
    elif fmt == "jsonl":
        # JSONL ends records with \n only: str.splitlines would also split on U+0085/U+2028
        lines = out.read_text(encoding="utf-8").split("\n")
        assert lines[-1] == ""
        assert [json.loads(x) for x in lines[:-1]] == want


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
@pytest.mark.parametrize("via", ["jsonl", "same"])
def test_carriage_returns_in_values_survive_csv(tmp_path, fmt, via):
    """A lone \\r inside a value is quoted on output (Python 3.11's csv writer with a \\n
    terminator leaves it bare, and a reader ends the row there: CI's Hypothesis run found
    the text "\\r" read back as ""), from JSONL and from rows copied as they were read."""
    texts = ["\r", "\r0", "a\r\nb", "x\ny", "p,q\tr", '"\r"']
    docs = [{"id": f"d{i}\r", "text": t} for i, t in enumerate(texts)]
    src = _jsonl(tmp_path / "in.jsonl", docs)
    if via == "same":  # CSV → CSV: the rows are written back as they were read
        first = tmp_path / f"first.{fmt}"
        with read_corpus([str(src)]) as c:
            write_kept(c, np.ones(len(docs), bool), str(first))
        src = first
    out = tmp_path / f"out.{fmt}"
    with read_corpus([str(src)]) as c:
        write_kept(c, np.ones(len(docs), bool), str(out))
    with read_corpus([str(out)]) as back:
        assert back.ids == [d["id"] for d in docs]
        assert list(back.texts) == texts


def test_jsonl_records_are_split_on_newline_only(tmp_path):
    """JSONL records are lines ended by \\n; U+0085, U+2028 and U+2029 inside a value (JSON
    allows them raw) neither end a record on input nor on output (JSONL is copied byte for
    byte)."""
    docs = [{"id": "a", "text": "x\x85y", "g": "\u2028"}, {"id": "b", "text": "p\u2029q"}]
    src = _jsonl(tmp_path / "in.jsonl", docs)
    out = tmp_path / "out.jsonl"
    with read_corpus([str(src)]) as c:
        assert list(c.texts) == ["x\x85y", "p\u2029q"]
        write_kept(c, np.array([True, True]), str(out))
    assert out.read_bytes() == src.read_bytes()
    with read_corpus([str(out)]) as back:
        assert back.ids == ["a", "b"]


def test_text_documents_to_a_folder_and_a_file(tmp_path):
    d = tmp_path / "docs"
    (d / "sub").mkdir(parents=True)
    (d / "x.txt").write_bytes(b"one\r\n")
    (d / "sub" / "y.txt.gz").write_bytes(gzip.compress(b"two"))
    with read_corpus([str(d)]) as c:
        assert c.ids == ["sub/y.txt", "x.txt"]
        write_kept(c, np.array([True, True]), str(tmp_path / "out"))
        write_kept(c, np.array([True, True]), str(tmp_path / "k.jsonl"))
    assert (tmp_path / "out" / "x.txt").read_bytes() == b"one\r\n"  # the file's own bytes
    assert (tmp_path / "out" / "sub" / "y.txt").read_bytes() == b"two"
    assert [json.loads(x) for x in (tmp_path / "k.jsonl").read_text().splitlines()] == [
        {"id": "sub/y.txt", "text": "two"}, {"id": "x.txt", "text": "one\r\n"}
    ]  # fmt: skip


# --- ids


def test_generate_ids_in_every_format(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    docs = [{"id": None, "text": "a"}, {"id": 1.5, "text": "b"}]
    _jsonl(tmp_path / "d.jsonl", docs)
    (tmp_path / "d.json").write_text(json.dumps(docs))
    (tmp_path / "d.csv").write_text("id,text\n,a\n,b\n")
    pq.write_table(pa.Table.from_pylist(docs), tmp_path / "d.parquet")
    for name in ("d.jsonl", "d.json", "d.csv", "d.parquet"):
        p = str(tmp_path / name)
        with pytest.raises(RecordError, match="--generate-ids"):
            read_corpus([p])
        line = 2 if name == "d.csv" else 1
        with read_corpus([p], generate_ids=True) as c:
            assert c.ids == [f"{p}:{line}", f"{p}:{line + 1}"], name
    with pytest.raises(ConfigError, match="pass one"):
        read_corpus([str(tmp_path / "d.jsonl")], generate_ids=True, id_field="id")


def test_parquet_id_columns_of_any_type(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    p = tmp_path / "t.parquet"
    pq.write_table(pa.table({"id": pa.array([3, 4], pa.int64()), "text": ["x", "y"]}), p)
    assert read_corpus([str(p)]).ids == ["3", "4"]
    pq.write_table(pa.table({"id": pa.array([3, None], pa.int64()), "text": ["x", "y"]}), p)
    with pytest.raises(RecordError, match=r"t.parquet:2: the record's 'id' field .* is null"):
        read_corpus([str(p)])
    pq.write_table(pa.table({"key": [0.5, 1.0], "text": ["x", "y"]}), p)
    with pytest.raises(RecordError, match=r"t.parquet:1: the id field 'key' is a float \(0.5\)"):
        read_corpus([str(p)], id_field="key")


# --- encodings


@pytest.mark.parametrize("name", ["m.jsonl", "m.csv", "m.json", "m.txt"])
def test_a_non_utf8_encoding_refuses_utf8_lines(tmp_path, name):
    latin, utf8 = "café noir".encode("latin-1"), "café au lait".encode()
    body = {
        "m.jsonl": b'{"text": "' + latin + b'"}\n{"text": "' + utf8 + b'"}\n',
        "m.csv": b"text\n" + latin + b"\n" + utf8 + b"\n",
        "m.json": b'[{"text": "' + latin + b'"},\n{"text": "' + utf8 + b'"}]',
        "m.txt": latin + b"\n" + utf8 + b"\n",
    }[name]
    p = tmp_path / name
    p.write_bytes(body)
    line = 3 if name == "m.csv" else 2  # (the CSV's header is line 1)
    with pytest.raises(RecordError, match=rf"{name}:{line}: this line is valid UTF-8"):
        read_corpus([str(p)], encoding="latin-1")
    p.write_bytes(body.replace(utf8, b"cafe au lait"))
    with read_corpus([str(p)], encoding="latin-1") as c:
        assert "café noir" in "".join(c.texts)


def test_inputs_that_are_not_paths_are_refused() -> None:
    """``b"in.jsonl"`` was iterated as ints, a list holding a number reached ``os.fspath``."""
    from neardup.errors import InputTypeError
    from neardup.io.plan import plan_inputs

    for bad in (b"in.jsonl", 3, ["a.jsonl", 3], [b"a.jsonl"]):
        with pytest.raises(InputTypeError, match=r"paths? \(str or Path\)"):
            plan_inputs(bad)  # type: ignore[arg-type]
