"""Corpus readers/writers: every format round-trips; bad input names file and line; atomic output."""

from __future__ import annotations

import csv
import errno
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from io_state import read_state

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


def test_malformed_csv_quoting_is_refused_not_reinterpreted(tmp_path):
    # the lenient csv reader read an unclosed quote as one field running to the end of the
    # file (three rows became one, exit 0), and text after a closing quote as part of the field
    p = tmp_path / "bad.csv"
    p.write_text('id,text\n1,"hello world\n2,second row\n3,third row\n', encoding="utf-8")
    for on_error in ("fail", "skip"):  # a quoting fault leaves no later row trustworthy
        with pytest.raises(RecordError, match=rf"{p}:2: malformed CSV: a quoted field") as exc:
            read_corpus([str(p)], on_error=on_error)
        assert exc.value.line == 2
    p.write_text('id,text\n1,ok\n2,"ab"c\n3,z\n', encoding="utf-8")
    with pytest.raises(RecordError, match=rf"{p}:3: malformed CSV: ',' expected after"):
        read_corpus([str(p)])
    p.write_text('id\ttext\n1\t"ab"c\n', encoding="utf-8")
    with pytest.raises(RecordError, match=r"malformed CSV: '\\t' expected after"):
        read_corpus([str(p)], fmt="tsv")
    p.write_text('id,"te\n', encoding="utf-8")  # in the header
    with pytest.raises(RecordError, match=rf"{p}:1: malformed CSV"):
        read_corpus([str(p)])
    # what stays legal: quoted newlines, doubled quotes, a quote inside an unquoted field
    p.write_text('id,text\n1,"multi\nline ""q"""\n2,say "hi" now\n', encoding="utf-8")
    with read_corpus([str(p)]) as corpus:
        assert corpus.texts == ['multi\nline "q"', 'say "hi" now']


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


@pytest.mark.parametrize("block", [64, 1 << 24])
@pytest.mark.parametrize("reference", [False, True])
def test_repeated_ids_name_where_each_was_first_seen(tmp_path, monkeypatch, block, reference):
    """Skipping repeated ids: every message names the line that first had the id, across
    blocks accepted whole, lines taken one by one and a second input (a CSV)."""
    from neardup.io import jsonl as jsonl_mod

    monkeypatch.setattr(jsonl_mod, "BLOCK", block)
    if reference:
        monkeypatch.setenv("NEARDUP_REFERENCE", "io")
    rows = [f"u{i}" for i in range(12)] + ["u3", "v", "u0", "u11", "u3", "w"]
    a = tmp_path / "a.jsonl"
    a.write_text("".join(json.dumps({"id": i, "text": f"t {i}"}) + "\n" for i in rows))
    b = tmp_path / "b.csv"
    b.write_text("id,text\nv,again\nx,new\nu5,again\nx,twice\n")
    c = read_corpus([str(a), str(b)], on_error="skip")
    assert c.ids == [f"u{i}" for i in range(12)] + ["v", "w", "x"]
    assert c.skipped == 7
    expected = [(13, "u3", "a.jsonl:4"), (15, "u0", "a.jsonl:1"), (16, "u11", "a.jsonl:12"),
                (17, "u3", "a.jsonl:4"), (2, "v", "a.jsonl:14"), (4, "u5", "a.jsonl:6"),
                (5, "x", "b.csv:3")]  # fmt: skip
    assert len(c.errors) == len(expected)
    for err, (line, doc_id, first) in zip(c.errors, expected, strict=True):
        assert f":{line}:" in err and f"duplicate id {doc_id!r} (first seen at " in err, err
        assert err.split("first seen at ")[1].split(")")[0].endswith(first), err
    with pytest.raises(
        RecordError, match=r"a.jsonl:13: duplicate id 'u3' \(first seen at .*a.jsonl:4\)"
    ):
        read_corpus([str(a), str(b)])


def test_csv_wrong_field_count(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("id,text\n1,hello\n2,a,b\n", encoding="utf-8")
    with pytest.raises(RecordError, match=r"d.csv:3: row has 3 fields"):
        read_corpus([str(p)])


def test_format_detection_and_errors(tmp_path):
    assert detect_format("x.jsonl") == "jsonl" and detect_format("-") == "jsonl"
    assert detect_format("x.txt.gz") == "text" and detect_format("y.PQ") == "parquet"
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


# ---------------------------------------------------------------------------------------------
# fast JSONL reader vs the stdlib reference, raw passthrough writes, CSV writers

import io  # noqa: E402
import sys  # noqa: E402

from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from neardup.io import jsonl as jsonl_mod  # noqa: E402
from neardup.io.csvout import write_clusters_csv, write_pairs_csv  # noqa: E402
from neardup.io.reference import clusters_csv_reference, pairs_csv_reference  # noqa: E402

_TEXTS = st.text(
    alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Z", "Cc")), max_size=12
)
_IDS = st.one_of(
    st.none(),
    st.sampled_from(["a", "b", "", "x,y", 'q"t']),
    st.integers(-3, 3),
    st.just(2**70),
    st.booleans(),
    st.just(1.5),
)


@st.composite
def _jsonl_line(draw):
    kind = draw(st.sampled_from(["obj", "obj", "obj", "raw", "blank", "bad", "notobj", "escape"]))
    if kind == "obj":
        obj = {}
        if draw(st.booleans()):
            obj["id"] = draw(_IDS)
        if draw(st.integers(0, 9)):
            obj["text"] = (
                draw(st.one_of(_TEXTS, st.just(5), st.none()))
                if draw(st.integers(0, 5)) == 0
                else draw(_TEXTS)
            )
        if draw(st.booleans()):
            obj["extra"] = draw(st.lists(st.integers(), max_size=2))
        return json.dumps(obj, ensure_ascii=draw(st.booleans())).encode("utf-8")
    if kind == "escape":  # unicode escapes, surrogate pairs, lone surrogates, NaN
        return draw(
            st.sampled_from(
                [
                    b'{"text": "caf\\u00e9 \\ud83d\\ude00"}',
                    b'{"text": "lone \\ud800 surrogate"}',
                    b'{"text": "nan", "x": NaN}',
                    b'{"text": "t", "id": 123456789012345678901234567890}',
                    b'  {"text" : "spaced"}  ',
                    b'{"text": "dup", "text": "last wins"}',
                ]
            )
        )
    if kind == "blank":
        return draw(st.sampled_from([b"", b"   ", b"\t", "\u3000".encode()]))
    if kind == "bad":
        return draw(
            st.sampled_from(
                [b'{"text": broken', b"{", b'{"text": "a"} {"text": "b"}', b"\xff\xfe", b'"x", 1']
            )
        )
    if kind == "notobj":
        return draw(st.sampled_from([b"[1, 2]", b'"just a string"', b"42", b"null"]))
    return draw(st.binary(max_size=8)).replace(b"\n", b"")


@st.composite
def _jsonl_file(draw):
    lines = draw(st.lists(_jsonl_line(), max_size=12))
    eol = draw(st.sampled_from([b"\n", b"\r\n"]))
    data = eol.join(lines)
    if lines and draw(st.booleans()):
        data += eol  # else: last line without a newline
    if draw(st.integers(0, 4)) == 0:
        data = b"\xef\xbb\xbf" + data
    # a file whose first bytes are a compression format's magic is read as that format, by
    # design (docs/dedup.md, inputs): not a plain JSONL file for these tests (b"\x1f\x8b" then
    # lines made one fail as gzip)
    assume(not _looks_compressed(data))
    return data


def _looks_compressed(data: bytes) -> bool:
    return (
        data[:2] == b"\x1f\x8b"
        or data[:4] == b"\x28\xb5\x2f\xfd"
        or data[:6] == b"\xfd7zXZ\x00"
        or re.match(rb"BZh[1-9](1AY&SY|\x17rE8P)", data, re.DOTALL) is not None
    )


def _read_state(path, monkeypatch, *, reference, on_error, fmt=None):
    return read_state(path, monkeypatch, reference=reference, on_error=on_error, fmt=fmt)


@pytest.mark.parametrize("block", [7, 64, 1 << 24])
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=_jsonl_file())
def test_fast_jsonl_reader_equals_reference(tmp_path, monkeypatch, block, data):
    monkeypatch.setattr(jsonl_mod, "BLOCK", block)
    p = tmp_path / "h.jsonl"
    p.write_bytes(data)
    for fmt in (None, "lines"):
        for on_error in ("fail", "skip"):
            fast = _read_state(p, monkeypatch, reference=False, on_error=on_error, fmt=fmt)
            ref = _read_state(p, monkeypatch, reference=True, on_error=on_error, fmt=fmt)
            assert fast == ref


def _old_writer(data: bytes, lines: list[int]) -> bytes:
    """What write_kept wrote before the passthrough: decode, strip \\r\\n, add \\n."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    raw = data.split(b"\n")
    return b"".join(
        (raw[i - 1].decode("utf-8", errors="replace").rstrip("\r\n") + "\n").encode("utf-8")
        for i in lines
    )


def _write_path(monkeypatch, path: str) -> None:
    """Force one of the passthrough writer's copy paths."""
    monkeypatch.setattr(jsonl_mod, "COPY_FILE_RANGE", path == "copy_range")
    monkeypatch.setattr(jsonl_mod, "DIRECT_IO", path == "direct")
    if path != "windows" and not hasattr(
        os, {"copy_range": "copy_file_range"}.get(path, "O_DIRECT")
    ):
        pytest.skip(f"{path} is not available here")
    monkeypatch.setattr(jsonl_mod, "DIRECT_MIN_BYTES", 0)


@pytest.mark.parametrize("path", ["windows", "copy_range", "direct"])
@pytest.mark.parametrize("block", [5, 1 << 24])
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=_jsonl_file(), seed=st.integers(0, 2**32 - 1))
def test_passthrough_write_equals_decoding_writer(tmp_path, monkeypatch, block, path, data, seed):
    monkeypatch.setattr(jsonl_mod, "BLOCK", block)
    _write_path(monkeypatch, path)
    p = tmp_path / "h.jsonl"
    p.write_bytes(data)
    for fmt in ("jsonl", "lines"):
        with read_corpus([str(p)], on_error="skip", fmt=fmt) as c:
            keep = np.random.default_rng(seed).random(len(c)) < 0.7
            out = tmp_path / f"o.{fmt}"
            assert write_kept(c, keep, str(out)) == int(keep.sum())
            lines = c.sources[0].lines[keep].tolist()
        assert out.read_bytes() == _old_writer(data, lines)


def test_round_trip_identical_bytes_multi_file_and_stdin(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    words = ["alpha", "βeta", "中文", 'q"uote', "tab\\t", "\\u00e9"]
    files = []
    for k in range(3):
        p = tmp_path / f"in{k}.jsonl"
        p.write_text(
            "".join(
                json.dumps({"id": f"{k}-{i}", "text": " ".join(rng.choice(words, 5))}) + "\n"
                for i in range(200)
            ),
            encoding="utf-8",
        )
        files.append(p)
    monkeypatch.setattr(jsonl_mod, "BLOCK", 1000)  # many blocks and windows
    with read_corpus([str(f) for f in files]) as c:
        write_kept(c, np.ones(len(c), bool), str(tmp_path / "all.jsonl"))
    assert (tmp_path / "all.jsonl").read_bytes() == b"".join(f.read_bytes() for f in files)
    data = files[0].read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    with read_corpus(["-"]) as c:
        assert c.sources[0].temp is not None
        write_kept(c, np.ones(len(c), bool), str(tmp_path / "stdin.jsonl"))
    assert (tmp_path / "stdin.jsonl").read_bytes() == data


@pytest.mark.parametrize("via", ["write", "writev", "copy_file_range", "direct"])
def test_failure_mid_write_leaves_no_output_and_input_untouched(tmp_path, monkeypatch, via):
    from neardup.io import jsonl, writers

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": f"doc {i}"}) + "\n" for i in range(100)))
    before = src.read_bytes()
    real = writers.copy_records

    def failing(source, positions, write, **kw):
        def write_then_fail(b):
            write(b)
            raise OSError(28, "No space left on device")

        kw.pop("out_fd", None)  # through the write callable
        return real(source, positions, write_then_fail, **kw)

    def writev_then_fail(fd, parts):
        os.writev(fd, parts[:1])
        raise OSError(28, "No space left on device")

    calls = []

    def copy_range_then_fail(src_fd, dst_fd, count, offset_src=None, offset_dst=None):
        calls.append(count)
        if len(calls) > 1:
            raise OSError(28, "No space left on device")
        return real_copy_range(src_fd, dst_fd, min(count, 7), offset_src)

    if via == "write":
        monkeypatch.setattr(writers, "copy_records", failing)
    elif via == "writev":  # the descriptor path (os.writev)
        monkeypatch.setattr(jsonl, "COPY_FILE_RANGE", False)
        monkeypatch.setattr(jsonl, "_writev_all", writev_then_fail)
    elif via == "direct":
        _write_path(monkeypatch, "direct")
        monkeypatch.setattr(jsonl, "DIRECT_BLOCK", 4096)
        src.write_text("".join(json.dumps({"text": f"doc {i}" * 30}) + "\n" for i in range(300)))
        before = src.read_bytes()
        real_write = os.write

        def write_then_fail(fd, buf):
            if calls:
                raise OSError(28, "No space left on device")
            calls.append(1)
            return real_write(fd, buf)

        monkeypatch.setattr(os, "write", write_then_fail)
    else:
        if not jsonl.COPY_FILE_RANGE:
            pytest.skip("os.copy_file_range is not available here")
        real_copy_range = os.copy_file_range
        monkeypatch.setattr(os, "copy_file_range", copy_range_then_fail)
    with read_corpus([str(src)]) as c, pytest.raises(Exception, match="No space left"):
        write_kept(c, np.ones(len(c), bool), str(tmp_path / "out.jsonl"))
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl"]
    assert src.read_bytes() == before


def _big_jsonl(path, n=300, seed=0):
    """Records of 10 B to ~10 KB (some longer than a direct-I/O block), "\\r\\n" and blank
    lines here and there."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        text = "x" * int(rng.choice([3, 50, 700, 5000, 9000]))
        lines.append(json.dumps({"id": str(i), "text": text}).encode())
        if rng.random() < 0.05:
            lines.append(b"")
    data = b"".join(line + (b"\r\n" if k % 7 == 3 else b"\n") for k, line in enumerate(lines))
    path.write_bytes(data)
    return data


def _expected(data: bytes, keep) -> bytes:
    rows = [line.rstrip(b"\r") for line in data.split(b"\n") if line.rstrip(b"\r")]
    return b"".join(r + b"\n" for r, k in zip(rows, keep, strict=True) if k)


@pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="no O_DIRECT on this platform")
@pytest.mark.parametrize("refuse", [None, "first", "after_partial"])
def test_direct_writer_blocks_and_fallbacks(tmp_path, monkeypatch, refuse):
    import fcntl

    src = tmp_path / "in.jsonl"
    data = _big_jsonl(src)
    _write_path(monkeypatch, "direct")
    monkeypatch.setattr(jsonl_mod, "DIRECT_BLOCK", 4096)  # many blocks; records span them
    real_write = os.write
    seen = {"direct": 0, "buffered": 0}
    state = {"refused": False}

    def spy(fd, buf):
        is_direct = bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT)
        if is_direct and refuse and not state["refused"]:
            if refuse == "first" or seen["direct"] >= 3:
                state["refused"] = True
                raise OSError(errno.EINVAL, "Invalid argument")
            if seen["direct"] == 2:  # a short direct write, then a refusal
                seen["direct"] += 1
                return real_write(fd, memoryview(buf)[:512])
        seen["direct" if is_direct else "buffered"] += 1
        return real_write(fd, buf)

    monkeypatch.setattr(os, "write", spy)
    for seed in range(3):
        keep = np.random.default_rng(seed).random(300) < 0.8
        keep[:5] = True
        out = tmp_path / f"o{seed}.jsonl"
        state["refused"] = False
        with read_corpus([str(src)]) as c:
            assert write_kept(c, keep, str(out)) == int(keep.sum())
        assert out.read_bytes() == _expected(data, keep)
    if refuse is None:
        assert seen["direct"] > 100  # it did write around the page cache
    assert seen["buffered"] >= 3  # the last, partial block (and what was refused)


@pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="no O_DIRECT on this platform")
@pytest.mark.parametrize("first", [4095, 4096, 4097, 8192])
def test_direct_writer_records_ending_on_block_boundaries(tmp_path, monkeypatch, first):
    _write_path(monkeypatch, "direct")
    monkeypatch.setattr(jsonl_mod, "DIRECT_BLOCK", 4096)
    pad = len(json.dumps({"text": ""}))
    lines = [json.dumps({"text": "y" * (n - pad)}).encode() for n in (first, 4095, 1, 4096, 7)]
    assert len(lines[0]) == first
    data = b"\n".join(lines) + b"\n"
    (tmp_path / "in.jsonl").write_bytes(data)
    for keep in ([True] * 5, [True, False, True, True, True], [True, True, False, True, True]):
        with read_corpus([str(tmp_path / "in.jsonl")]) as c:
            write_kept(c, np.array(keep), str(tmp_path / "o.jsonl"))
        assert (tmp_path / "o.jsonl").read_bytes() == _expected(data, keep)


@pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="no O_DIRECT on this platform")
def test_direct_writer_leaves_flags_and_unaligned_offsets_alone(tmp_path, monkeypatch):
    import fcntl

    src = tmp_path / "in.jsonl"
    data = _big_jsonl(src, n=40)
    _write_path(monkeypatch, "direct")
    monkeypatch.setattr(jsonl_mod, "DIRECT_BLOCK", 4096)
    with read_corpus([str(src)]) as c:
        s = c.sources[0]
        runs = (s.starts[:1], s.ends[-1:])
        with open(tmp_path / "o", "wb") as fh:
            fh.write(b"ab")  # not page-aligned: not for O_DIRECT
            fh.flush()
            flags = fcntl.fcntl(fh.fileno(), fcntl.F_GETFL)
            fd = os.open(src, os.O_RDONLY)
            try:
                assert jsonl_mod._copy_runs_direct(fd, fh.fileno(), *runs, "in") == 0
                fh.seek(0)
                fh.truncate()
                assert jsonl_mod._copy_runs_direct(fd, fh.fileno(), *runs, "in") == 1
            finally:
                os.close(fd)
            assert fcntl.fcntl(fh.fileno(), fcntl.F_GETFL) == flags
    assert (tmp_path / "o").read_bytes() == data[: s.ends[-1]] + b"\n"  # one range, whole


@pytest.mark.skipif(not jsonl_mod.COPY_FILE_RANGE, reason="os.copy_file_range is not available")
@pytest.mark.parametrize("code", [errno.EXDEV, errno.ENOSYS, errno.EINVAL])
def test_copy_file_range_refused_falls_back_to_windows(tmp_path, monkeypatch, code):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": f"doc {i}"}) + "\n" for i in range(50)))
    calls = []

    def refuse(*args):
        calls.append(args)
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "copy_file_range", refuse)
    keep = np.arange(50) % 3 != 1
    with read_corpus([str(src)]) as c:
        assert write_kept(c, keep, str(tmp_path / "out.jsonl")) == int(keep.sum())
    assert len(calls) == 1  # asked once, then the windows copied everything
    lines = src.read_bytes().splitlines(keepends=True)
    assert (tmp_path / "out.jsonl").read_bytes() == b"".join(
        line for line, k in zip(lines, keep, strict=True) if k
    )


@pytest.mark.parametrize("path", ["copy_range", "direct"])
def test_input_truncated_before_the_copy_is_an_input_error(tmp_path, monkeypatch, path):
    _write_path(monkeypatch, path)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": f"doc {i}"}) + "\n" for i in range(50)))
    with read_corpus([str(src)]) as c:
        os.truncate(src, 100)  # changed after it was read
        with pytest.raises(InputError, match="changed after it was read"):
            write_kept(c, np.ones(50, bool), str(tmp_path / "out.jsonl"))
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl"]


def test_bom_crlf_and_missing_final_newline(tmp_path):
    p = tmp_path / "w.jsonl"
    p.write_bytes(b'\xef\xbb\xbf{"text": "one"}\r\n\r\n{"text": "two"}')
    with read_corpus([str(p)]) as c:
        assert c.texts == ["one", "two"] and c.sources[0].lines.tolist() == [1, 3]
        write_kept(c, np.ones(2, bool), str(tmp_path / "o.jsonl"))
    assert (tmp_path / "o.jsonl").read_bytes() == b'{"text": "one"}\n{"text": "two"}\n'


_ID_TEXT = st.text(
    alphabet=st.sampled_from([*list('ab,"\r\n \t中é'), "\x00", "\u2028"]), min_size=1
)


@settings(max_examples=60, deadline=None)
@given(
    ids=st.lists(_ID_TEXT, min_size=1, max_size=20, unique=True),
    data=st.data(),
)
def test_csv_writers_equal_csv_module(ids, data):
    n = len(ids)
    m = data.draw(st.integers(0, 30))
    idx = st.integers(0, n - 1)
    a = np.array(data.draw(st.lists(idx, min_size=m, max_size=m)), np.int64)
    b = np.array(data.draw(st.lists(idx, min_size=m, max_size=m)), np.int64)
    dist = np.array(data.draw(st.lists(st.integers(0, 64), min_size=m, max_size=m)), np.int32)
    ties = [0.03125, 0.00005, 0.99995, 0.5, 1.0, 0.0, 0.12345, 0.67865, float("nan"), 1.5]
    score = np.array(
        data.draw(
            st.lists(st.one_of(st.floats(0, 1), st.sampled_from(ties)), min_size=m, max_size=m)
        ),
        np.float64,
    )
    stage = np.array(data.draw(st.lists(st.integers(0, 1), min_size=m, max_size=m)), np.uint8)
    rule = np.array(data.draw(st.lists(st.integers(0, 2), min_size=m, max_size=m)), np.uint8)
    rule_names = ("exact", "similarity", 'odd,"name"')  # a name csv must quote
    buf = io.BytesIO()
    write_pairs_csv(
        buf, ids, a, b, dist, score, stage, ("exact", "near"), rule=rule, rule_names=rule_names,
        chunk=7,
    )  # fmt: skip
    ref = pairs_csv_reference(ids, a, b, dist, score, stage, ("exact", "near"), rule, rule_names)
    assert buf.getvalue() == ref.encode("utf-8")
    # and it reads back: every id as written (a bare \r would end a row early)
    back = list(csv.reader(io.StringIO(ref, newline="")))
    assert [r[:2] for r in back[1:]] == [[ids[x], ids[y]] for x, y in zip(a, b, strict=True)]
    root = np.array([data.draw(st.integers(0, i)) for i in range(n)], np.int64)
    root = root[root]  # roots point at roots
    cluster = np.unique(root, return_inverse=True)[1].astype(np.int64)
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    buf = io.BytesIO()
    write_clusters_csv(buf, ids, cluster, root, keep, chunk=3)
    assert buf.getvalue() == clusters_csv_reference(ids, cluster, root, keep).encode("utf-8")


@pytest.mark.parametrize(
    "content,id_field",
    [
        ("id,text\n1,a\n,b\n3,c\n", None),
        ("id,text\n1,a\n,b\n", "id"),
        ("id,text,id\n1,a,2\n3,b,\n", None),
        ("key,text\nk,a\nk,b\n", "key"),
        ("id,body\n1,a\n", None),
        ("text\nx\n\ny\n", None),
        ("id,text\n1,a\n1,b\n", None),
    ],
)
def test_csv_fast_rows_equal_reference(tmp_path, monkeypatch, content, id_field):
    p = tmp_path / "d.csv"
    p.write_text(content, encoding="utf-8")

    def state(reference):
        with monkeypatch.context() as m:
            if reference:
                m.setenv("NEARDUP_REFERENCE", "io")
            try:
                c = read_corpus([str(p)], id_field=id_field, on_error="skip")
            except Exception as exc:
                return type(exc).__name__, str(exc)
            return c.ids, c.texts, c.skipped, c.errors, c.sources[0].rows

    assert state(False) == state(True)


_JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=6),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
_MUTATION_BYTES = [
    *b'"\\{}[],:0-.eE+ \t\r\x0b\x0cunNI/',
    0x00,
    0x1F,
    0x7F,
    0x80,
    0xBF,
    0xC0,
    0xC3,
    0xE2,
    0xED,
    0xF0,
    0xF4,
    0xFF,
]
_SNIPPETS = [
    b'"\\ud800"',
    b'"\\udc00\\ud800"',
    b'"\\ud83d\\ude00"',
    b'"\\u00e9\\n\\t\\/\\b\\f\\r\\"\\\\"',
    b'"\\x41"',
    b'"\xed\xa0\x80"',
    b'"\xc0\x80"',
    b'"\xf4\x90\x80\x80"',
    b'"\xe2\x82"',
    b'"\xf0\x9f\x98\x80"',
    b"NaN",
    b"-Infinity",
    b"-0",
    b"01",
    b"1.",
    b".5",
    b"1e5",
    b"1E+2",
    b"-",
    b"tru",
    b"nul",
    b"[" * 70 + b"]" * 70,
    b'"te\\u0078t"',
]


@st.composite
def _mutated_line(draw):
    if draw(st.booleans()):  # an odd value in an otherwise simple record
        key = draw(st.sampled_from([b"id", b"x", b"text"]))
        odd = draw(
            st.one_of(
                st.sampled_from([*_SNIPPETS, b"123456789012345678901234567890", b'""']),
                st.from_regex(rb"\A-?[0-2]{0,2}(\.[0-9]?)?([eE][+-]?[0-9]?)?\Z"),
                st.from_regex(rb'\A"([a-z]|\\[u"\\/bfnrtx]|\\u[0-9a-fA-F]{0,4}){0,4}"\Z'),
            )
        )
        text = json.dumps(draw(st.text(max_size=4))).encode()
        return b'{"text": ' + text + b', "' + key + b'": ' + odd + b"}"
    obj = draw(st.dictionaries(st.sampled_from(["text", "id", "x", "tëxt"]), _JSON_VALUES))
    if draw(st.booleans()):
        obj["text"] = draw(st.text(max_size=8))
    line = bytearray(json.dumps(obj, ensure_ascii=draw(st.booleans())).encode("utf-8"))
    for _ in range(draw(st.integers(0, 2))):
        op = draw(st.sampled_from(["replace", "insert", "delete", "snippet"]))
        at = draw(st.integers(0, len(line)))
        hot = line.find(b'"text": "') + 9  # half the mutations land in the text value
        if hot >= 9 and draw(st.booleans()):
            at = min(len(line), hot + draw(st.integers(0, 4)))
        if op == "snippet":
            line[at:at] = draw(st.sampled_from(_SNIPPETS))
        elif op == "delete" and at < len(line):
            del line[at]
        elif op == "replace" and at < len(line):
            line[at] = draw(st.sampled_from(_MUTATION_BYTES))
        else:
            line.insert(at, draw(st.sampled_from(_MUTATION_BYTES)))
    return bytes(line).replace(b"\n", b" ")


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(_mutated_line(), min_size=1, max_size=4), id_field=st.sampled_from([None, "id"])
)
def test_fast_reader_equals_reference_on_mutated_json(tmp_path, monkeypatch, lines, id_field):
    """Valid JSON lines with 0-2 byte mutations / odd values: the orjson fast path and every
    line it hands to the standard library give exactly the reference's records and errors."""
    p = tmp_path / "m.jsonl"
    p.write_bytes(b"\n".join(lines) + b"\n")

    def state(reference):
        with monkeypatch.context() as m:
            if reference:
                m.setenv("NEARDUP_REFERENCE", "io")
            else:
                m.delenv("NEARDUP_REFERENCE", raising=False)
            out = []
            for on_error in ("fail", "skip"):
                try:
                    c = read_corpus([str(p)], on_error=on_error, id_field=id_field)
                except Exception as exc:
                    out.append((type(exc).__name__, str(exc)))
                    continue
                s = c.sources[0]
                out.append((c.ids, c.texts, c.skipped, c.errors, s.lines.tolist(),
                            s.starts.tolist(), s.ends.tolist()))  # fmt: skip
            return out

    assert state(False) == state(True)


@pytest.mark.parametrize("id_field", [None, "id", "key", "missing"])
def test_parquet_fast_rows_equal_reference(tmp_path, monkeypatch, id_field):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [
        {"id": "a", "key": 1, "text": "x"},
        {"id": "", "key": None, "text": "y"},
        {"id": "c", "key": 1, "text": None},
        {"id": "a", "key": 3, "text": "z"},
        {"id": "e", "key": 2**40, "text": "w"},
    ]
    p = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist(rows), p)

    def state(reference):
        with monkeypatch.context() as m:
            if reference:
                m.setenv("NEARDUP_REFERENCE", "io")
            try:
                c = read_corpus([str(p)], id_field=id_field, on_error="skip")
            except Exception as exc:
                return type(exc).__name__, str(exc)
            return c.ids, c.texts, c.skipped, c.errors, c.sources[0].table.to_pylist()

    assert state(False) == state(True)


_BUFFER_EDGES = [
    b"",
    b"\xef\xbb",
    b"\xef\xbb\xbf",
    b"\xef\xbb\xbf\n",
    b'\xef\xbb\xbf{"text": "bom, no newline"}',
    b"\n\n\n",
    b'{"text": "a"}\r\n{"text": "b"}\r\r\n{"text": "c"}',
    b'{"text": "' + b"long " * 300 + b'"}\r\n{"text": "x", "id": 7}\n{"text": "y"}',
    b'{"text": "caf\xc3\xa9"}\n{"text": "\xff"}\n{"text": broken\n{"text": "' + b"z" * 100 + b'"}',
    b'{"id": "d", "text": "1"}\n{"id": "d", "text": "2"}\n\n   \n{"text": "last"}\n',
]


@pytest.mark.parametrize("block", [1, 2, 3, 5, 16, 1 << 24])
@pytest.mark.parametrize("data", _BUFFER_EDGES)
def test_jsonl_buffer_reader_edges_equal_reference(tmp_path, monkeypatch, block, data):
    """The reused-buffer JSONL reader: lines across refills and growths, a BOM cut by the
    buffer, \\r\\n and \\r\\r\\n, a last line without a newline, bad lines, duplicate ids."""
    monkeypatch.setattr(jsonl_mod, "BLOCK", block)
    p = tmp_path / "e.jsonl"
    p.write_bytes(data)
    for on_error in ("fail", "skip"):
        fast = _read_state(p, monkeypatch, reference=False, on_error=on_error)
        ref = _read_state(p, monkeypatch, reference=True, on_error=on_error)
        assert fast == ref


def test_on_texts_sees_the_texts_grow(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonl_mod, "BLOCK", 64)
    p = tmp_path / "a.jsonl"
    p.write_text("".join(json.dumps({"text": f"text number {i}"}) + "\n" for i in range(20)))
    q = tmp_path / "b.csv"
    q.write_text("text\nfrom csv\n", encoding="utf-8")
    seen: list[int] = []
    lists = set()

    def hook(texts):
        seen.append(len(texts))
        lists.add(id(texts))

    c = read_corpus([str(p), str(q)], on_texts=hook)
    assert len(seen) > 3 and seen == sorted(seen) and seen[-1] == len(c) == 21
    assert lists == {id(c.texts)}  # always the corpus's own list, only appended to
