"""Scoring: retrieval precision/recall/F1 by slice, the distance sweep, and ``neardup eval``."""

from __future__ import annotations

import json

import pytest

from neardup.batch.evaluate import detect_lang, load_labels, prf, score_reported, sweep
from neardup.cli.main import main
from neardup.errors import InputError, RecordError


def test_prf():
    assert prf(8, 2, 2) == {"precision": 0.8, "recall": 0.8, "f1": 0.8, "tp": 8, "fp": 2, "fn": 2}
    assert prf(0, 0, 0)["f1"] == 1.0


def test_score_reported_slices_and_unlabeled():
    labels = {("a", "b"): 1, ("c", "d"): 1, ("e", "f"): 0, ("g", "h"): 1}
    langs = {"a": "en", "b": "en", "c": "zh", "d": "zh", "e": "en", "f": "en", "g": "en", "h": "en"}
    lengths = dict.fromkeys(langs, 50) | {"g": 500, "h": 600}
    r = score_reported(
        [("b", "a"), ("c", "d"), ("e", "f"), ("x", "y"), ("a", "b")], labels, langs, lengths
    )
    assert r["reported"] == 4 and r["unlabeled"] == 1
    assert r["overall"]["tp"] == 2 and r["overall"]["fp"] == 1 and r["overall"]["fn"] == 1
    assert r["zh"]["recall"] == 1.0 and r["en"]["precision"] == 0.5
    assert r["long"]["recall"] == 0.0 and r["short"]["recall"] == 1.0


def test_sweep_monotone_recall():
    labels = {("a", "b"): 1, ("c", "d"): 0, ("e", "f"): 1}
    dist = {("a", "b"): 2, ("c", "d"): 5, ("e", "f"): 9}
    langs = dict.fromkeys("abcdef", "en")
    lengths = dict.fromkeys("abcdef", 10)
    rows = sweep(labels, dist, None, langs, lengths, range(0, 11))
    recalls = [r["simhash"]["overall"]["recall"] for r in rows]
    assert recalls == sorted(recalls) and recalls[-1] == 1.0
    assert rows[5]["simhash"]["overall"]["fp"] == 1
    verified = {("a", "b"): True, ("c", "d"): False, ("e", "f"): True}
    rows = sweep(labels, dist, verified, langs, lengths, [10])
    assert rows[0]["verified"]["overall"]["precision"] == 1.0
    with pytest.raises(InputError, match="no labelled pair"):
        sweep(labels, {}, None, langs, lengths, [1])


def test_load_labels(tmp_path):
    p = tmp_path / "l.csv"
    p.write_text("id_a,id_b,label\nb,a,1\nc,d,0\ne,f,-1\n", encoding="utf-8")
    assert load_labels(p) == {("a", "b"): 1, ("c", "d"): 0}
    p.write_text("x,y\n1,2\n", encoding="utf-8")
    with pytest.raises(RecordError, match="id_a,id_b,label"):
        load_labels(p)
    p.write_text("id_a,id_b,label\na,b,yes\n", encoding="utf-8")
    with pytest.raises(RecordError, match=":2: label must be 0 or 1"):
        load_labels(p)
    # a pair labelled both ways is refused at the later row (the last label won, silently);
    # the same label twice is one label
    p.write_text("id_a,id_b,label\na,b,1\nc,d,0\nb,a,0\n", encoding="utf-8")
    with pytest.raises(RecordError, match=":4: the pair 'b', 'a' is labelled 0 here and 1"):
        load_labels(p)
    p.write_text("id_a,id_b,label\na,b,1\nb,a,1\n", encoding="utf-8")
    assert load_labels(p) == {("a", "b"): 1}
    # an unclosed quote was read as one id running to the end of the file, silently
    p.write_text('id_a,id_b,label\n"a,b,1\nc,d,1\n', encoding="utf-8")
    with pytest.raises(RecordError, match="malformed CSV: unexpected end of data"):
        load_labels(p)


def test_detect_lang():
    assert detect_lang("今天天气很好") == "zh" and detect_lang("hello world") == "en"


def test_eval_cli_json_and_plot(tmp_path, capsys):
    docs = tmp_path / "docs.jsonl"
    rows = [
        {"id": "1", "text": "the council announced a new budget for the river bridge today"},
        {"id": "2", "text": "the council announced a large budget for the river bridge today"},
        {"id": "3", "text": "mountain weather and airport railways were quiet in summer"},
    ]
    docs.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("id_a,id_b,label\n1,2,1\n1,3,0\n", encoding="utf-8")
    assert main(["eval", "--docs", str(docs), "--pairs", str(pairs), "--json", "--max-k", "5"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["labelled"] == 2 and len(report["sweep"]) == 6
    assert report["retrieval"]["overall"]["f1"] == 1.0
    # the default (every CPU the process may use) and one worker: the same report
    base = ["eval", "--docs", str(docs), "--pairs", str(pairs), "--json", "--max-k", "5"]
    assert main([*base, "--workers", "1"]) == 0
    one = json.loads(capsys.readouterr().out)
    for r in (one, report):
        r["retrieval"].pop("elapsed_s")  # (a wall-clock time)
    assert one == report
    assert main(["eval", "--docs", str(docs), "--pairs", str(pairs), "--max-k", "3"]) == 0
    assert "retrieval on defaults" in capsys.readouterr().out
    assert report["labels_without_docs"] == 0
    # a label naming an id the documents lack is left out, and said (it was silent)
    pairs.write_text("id_a,id_b,label\n1,2,1\n1,3,0\n1,NOPE,0\n", encoding="utf-8")
    assert main([*base, "--no-retrieval"]) == 0
    got = capsys.readouterr()
    assert json.loads(got.out)["labels_without_docs"] == 1 and json.loads(got.out)["labelled"] == 2
    assert main(["eval", "--docs", str(docs), "--pairs", str(pairs), "--max-k", "3", "--no-retrieval"]) == 0  # fmt: skip
    assert "1 labelled pair(s) name an id that is not in --docs" in capsys.readouterr().err
    pairs.write_text("id_a,id_b,label\n1,2,1\n1,3,0\n", encoding="utf-8")
    pytest.importorskip("matplotlib")
    png = tmp_path / "curve.png"
    assert (
        main(
            [
                "eval",
                "--docs",
                str(docs),
                "--pairs",
                str(pairs),
                "--plot",
                str(png),
                "--no-retrieval",
            ]
        )
        == 0
    )
    assert png.read_bytes()[:4] == b"\x89PNG"
    # never over an input, refused before any work (it replaced the labels with a PNG)
    labels = pairs.read_bytes()
    for target in (pairs, docs):
        rc = main(["eval", "--docs", str(docs), "--pairs", str(pairs), "--plot", str(target)])
        assert rc == 2 and "--plot" in capsys.readouterr().err
    assert pairs.read_bytes() == labels


def test_eval_cli_input_format_csv(tmp_path, capsys):
    """`eval --input-format csv` reads a CSV whose name does not say so; labels may be gzipped;
    a dotted --text-field reads nested JSONL (the same reader as dedup)."""
    import csv
    import gzip

    rows = [
        ("1", "the council announced a new budget for the river bridge today"),
        ("2", "the council announced a large budget for the river bridge today"),
        ("3", "mountain weather and airport railways were quiet in summer"),
    ]
    docs = tmp_path / "docs.dat"
    with docs.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "text"])
        w.writerows(rows)
    pairs = tmp_path / "pairs.csv.gz"
    pairs.write_bytes(gzip.compress(b"id_a,id_b,label\n1,2,1\n1,3,0\n"))
    args = ["eval", "--docs", str(docs), "--pairs", str(pairs), "--json", "--max-k", "5"]
    assert main(args) == 2  # .dat: the format cannot be told
    assert "--input-format" in capsys.readouterr().err
    assert main([*args, "--input-format", "csv"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["docs"] == 3 and report["labelled"] == 2
    assert report["retrieval"]["overall"]["f1"] == 1.0
    nested = tmp_path / "docs.jsonl"
    nested.write_text(
        "".join(json.dumps({"id": i, "meta": {"body": t}}) + "\n" for i, t in rows),
        encoding="utf-8",
    )
    assert (
        main(
            [
                "eval",
                "--docs",
                str(nested),
                "--pairs",
                str(pairs),
                "--json",
                "--max-k",
                "5",
                "--text-field",
                "meta.body",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["retrieval"]["overall"]["f1"] == 1.0
