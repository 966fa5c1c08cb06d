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
        main(
            [
                "fingerprint",
                str(src),
                "--input-format",
                "lines",
                "--bits",
                "128",
                "--features",
                "words",
                "-o",
                str(out),
            ]
        )
        == 0
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


def test_idf_options_that_would_change_nothing_are_said(tmp_path, capsys):
    """--idf with --weights tf was read by nothing, and --weights tfidf without --idf gave an
    English corpus tf's fingerprints (the shipped table is Chinese), both without a word."""
    src = tmp_path / "c.jsonl"
    _write_jsonl(src, [{"text": "apple banana cherry"}, {"text": "delta echo"}])
    idf = tmp_path / "idf.txt"
    assert main(["idf", "build", str(src), "--output", str(idf)]) == 0
    capsys.readouterr()
    assert main(["fingerprint", str(src), "--idf", str(idf)]) == 2
    assert "--idf is read by --weights tfidf or keywords only, not tf" in capsys.readouterr().err
    assert main(["fingerprint", str(src), "--weights", "tfidf"]) == 0
    assert "without --idf uses the shipped Chinese IDF table" in capsys.readouterr().err
    assert main(["fingerprint", str(src), "--weights", "tfidf", "--idf", str(idf)]) == 0
    assert "warning" not in capsys.readouterr().err


# --- one reader with dedup (issue 20, item 6) ------------------------------------------------

DOCS = [
    {"id": "a", "text": "the council approved the new bridge budget on monday"},
    {"id": "b", "text": "the council approved the new bridge budget on monday!"},
    {"id": "c", "text": "中文文本的指纹与去重"},
    {"id": "d", "text": "a line, with commas\nand a newline inside"},
]


def _fp_rows(path):
    return [tuple(line.split(",")) for line in path.read_text(encoding="utf-8").splitlines()[1:]]


def _write_inputs(tmp_path):
    import csv
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq

    with (tmp_path / "d.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "text"])
        w.writerows([d["id"], d["text"]] for d in DOCS)
    pq.write_table(pa.Table.from_pylist(DOCS), tmp_path / "d.parquet")
    raw = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS).encode()
    (tmp_path / "d.jsonl.gz").write_bytes(gzip.compress(raw))
    return ["d.csv", "d.parquet", "d.jsonl.gz"]


def test_fingerprint_agrees_with_dedup(tmp_path, capsys):
    """CSV (a text with a comma and a newline), Parquet and .jsonl.gz: the ids of dedup's
    clusters CSV and the fingerprints dedup computes (DedupConfig's Fingerprinter)."""
    import csv

    from neardup import DedupConfig
    from neardup.io import read_corpus

    fp = DedupConfig().make_fingerprinter()
    for name in _write_inputs(tmp_path):
        src = tmp_path / name
        out = tmp_path / f"{name}.fp.csv"
        assert main(["fingerprint", str(src), "-o", str(out)]) == 0, name
        clusters = tmp_path / f"{name}.clusters.csv"
        kept = tmp_path / f"kept-{name}"
        assert (
            main(["dedup", str(src), "-o", str(kept), "--clusters-out", str(clusters), "-q"]) == 0
        )
        with clusters.open(encoding="utf-8", newline="") as fh:
            dedup_ids = [row["id"] for row in csv.DictReader(fh)]
        with read_corpus([str(src)]) as corpus:
            want = [f"{int(v):016x}" for v in fp.fingerprint_many(list(corpus.texts))]
        got = _fp_rows(out)
        assert [i for i, _ in got] == dedup_ids, name
        assert [h for _, h in got] == want, name
        assert got[0][1] == f"{fp.fingerprint(DOCS[0]['text']):016x}", name
    capsys.readouterr()


def test_fingerprint_stdout_writes_no_dash_file(tmp_path, capsys, monkeypatch):
    src = tmp_path / "docs.jsonl"
    _write_jsonl(src, DOCS[:2])
    monkeypatch.chdir(tmp_path)
    assert main(["fingerprint", str(src), "-o", "-"]) == 0
    captured = capsys.readouterr()
    fp = neardup.Fingerprinter()
    assert captured.out.splitlines() == [
        "id,fingerprint",
        f"a,{fp.fingerprint(DOCS[0]['text']):016x}",
        f"b,{fp.fingerprint(DOCS[1]['text']):016x}",
    ]
    assert "documents" in captured.err  # the summary goes to stderr
    assert not (tmp_path / "-").exists()


def test_fingerprint_has_no_format_alias(tmp_path, capsys):
    """``--input-format`` is the one name (the old ``--format`` is gone: a usage error)."""
    src = tmp_path / "docs.txt"
    src.write_text("first line\nsecond line\n", encoding="utf-8")
    new = tmp_path / "new.csv"
    assert main(["fingerprint", str(src), "--format", "txt", "-o", str(new)]) == 2
    assert "--format" in capsys.readouterr().err and not new.exists()
    assert main(["fingerprint", str(src), "--input-format", "lines", "-o", str(new)]) == 0
    assert len(_fp_rows(new)) == 2


def test_fingerprint_help_names_input_format(capsys):
    assert main(["fingerprint", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--input-format" in out and "--format " not in out


def test_idf_build_reads_like_dedup(tmp_path):
    import gzip

    src = tmp_path / "c.jsonl.gz"
    raw = "".join(json.dumps({"meta": {"body": f"apple w{i}"}}) + "\n" for i in range(4))
    src.write_bytes(gzip.compress(raw.encode()))
    out = tmp_path / "idf.txt"
    assert main(["idf", "build", str(src), "--text-field", "meta.body", "-o", str(out)]) == 0
    assert "apple" in IdfTable.load(out).idf


def test_fingerprint_gzip_input_equals_plain(tmp_path, capsys):
    """A ``.jsonl.gz`` input (and gzip bytes under a plain ``.jsonl`` name) is decompressed by
    the neardup.io readers, not read as text: the same ids and fingerprints as the plain file."""
    import gzip

    raw = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS).encode()
    (tmp_path / "plain.jsonl").write_bytes(raw)
    (tmp_path / "packed.jsonl.gz").write_bytes(gzip.compress(raw))
    (tmp_path / "sniffed.jsonl").write_bytes(gzip.compress(raw))
    rows = {}
    for name in ("plain.jsonl", "packed.jsonl.gz", "sniffed.jsonl"):
        out = tmp_path / f"{name}.fp.csv"
        assert main(["fingerprint", str(tmp_path / name), "-o", str(out)]) == 0, name
        rows[name] = _fp_rows(out)
    assert len(rows["plain.jsonl"]) == len(DOCS)
    assert rows["packed.jsonl.gz"] == rows["plain.jsonl"]
    assert rows["sniffed.jsonl"] == rows["plain.jsonl"]
    capsys.readouterr()


def test_fingerprint_workers_default_and_counts_agree(tmp_path, capsys):
    """No --workers (every CPU the process may use), 1 and 3 threads: the same fingerprints."""
    src = tmp_path / "docs.jsonl"
    _write_jsonl(
        src, [{"id": str(i), "text": f"line {i} of the river bridge budget"} for i in range(300)]
    )
    got = []
    for extra in ([], ["--workers", "1"], ["--workers", "3"]):
        out = tmp_path / f"fp{len(got)}.csv"
        assert main(["fingerprint", str(src), "--output", str(out), *extra]) == 0
        got.append(out.read_bytes())
    assert got[0] == got[1] == got[2] and got[0].count(b"\n") == 301


def test_fingerprint_to_dev_stdout_keeps_the_table_off_stdout(tmp_path):
    import subprocess
    import sys

    src = tmp_path / "c.jsonl"
    _write_jsonl(src, [{"id": "a", "text": "apple banana cherry"}, {"id": "b", "text": "delta"}])
    run = subprocess.run(
        [sys.executable, "-m", "neardup", "fingerprint", str(src), "-o", "/dev/stdout"],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    assert run.stdout.splitlines()[0] == "id,fingerprint" and len(run.stdout.splitlines()) == 3
    assert "documents" in run.stderr  # the summary table
