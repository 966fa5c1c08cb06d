"""`neardup fingerprint` and `neardup idf build`."""

from __future__ import annotations

import json

import neardup
from neardup.cli.main import main
from neardup.text.weights import IdfTable


def _write_jsonl(path, docs):
    path.write_text(
        "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8"
    )


def test_fingerprint_jsonl_output(tmp_path, capsys):
    src = tmp_path / "docs.jsonl"
    _write_jsonl(
        src,
        [
            {"id": "a", "text": "Hello world"},
            {"id": "b", "text": "中文文本"},
            {"id": "c", "text": " "},
        ],
    )
    out = tmp_path / "fp.csv"
    assert main(["fingerprint", str(src), "--output", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0] == "id,fingerprint"
    fp = neardup.Fingerprinter()
    assert lines[1] == f"a,{fp.fingerprint('Hello world'):016x}"
    assert lines[3] == "c,0000000000000000"
    assert "documents" in capsys.readouterr().out


def test_fingerprint_txt_128(tmp_path):
    src = tmp_path / "docs.txt"
    src.write_text("first line\nsecond, line\n", encoding="utf-8")
    out = tmp_path / "fp.csv"
    assert (
        main(["fingerprint", str(src), "--bits", "128", "--features", "words", "-o", str(out)]) == 0
    )
    rows = out.read_text().splitlines()[1:]
    assert rows[0].startswith(f"{src}:1,") and len(rows[0].split(",")[1]) == 32
    assert int(rows[1].split(",")[1], 16) == neardup.Fingerprinter(
        128, features="words"
    ).fingerprint("second, line")


def test_fingerprint_bad_record_exit_code(tmp_path, capsys):
    src = tmp_path / "bad.jsonl"
    src.write_text('{"id": "x", "text": "ok"}\n{"id": "y", "text": 5}\n', encoding="utf-8")
    assert main(["fingerprint", str(src)]) == 3
    assert f"{src}:2" in capsys.readouterr().err


def test_fingerprint_bad_option_exit_code(tmp_path):
    src = tmp_path / "a.txt"
    src.write_text("x\n")
    assert main(["fingerprint", str(src), "--bits", "32"]) == 2
    assert main(["fingerprint", str(tmp_path / "missing.txt")]) == 3


def test_idf_build_round_trip(tmp_path):
    src = tmp_path / "c.jsonl"
    docs = [{"text": f"apple w{i}"} for i in range(8)] + [
        {"text": "banana"},
        {"text": "我们在北京"},
    ]
    _write_jsonl(src, docs)
    out = tmp_path / "idf.txt"
    assert main(["idf", "build", str(src), "--output", str(out)]) == 0
    t = IdfTable.load(out)
    assert t.idf["apple"] < t.idf["banana"] and "北京" in t.idf
    fp = neardup.Fingerprinter(features="words", weights="tfidf", idf=str(out))
    assert fp.fingerprint("apple banana") != neardup.Fingerprinter(features="words").fingerprint(
        "apple banana"
    )
