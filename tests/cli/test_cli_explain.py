"""``neardup explain`` end to end: texts, a corpus, a run's settings, an online store; JSON and
text output; clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from neardup.cli.main import main

BASE = (
    "the council announced a new budget for the river bridge and the public library this "
    "winter after a long debate in the town hall"
)


def _run(args: list[str], capsys: Any) -> tuple[int, str, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_two_texts_text_and_json(capsys: Any) -> None:
    code, out, _ = _run(["explain", BASE, BASE.replace("river", "lake")], capsys)
    assert code == 0
    assert "decision: duplicate (similarity)" in out and "river  ->  lake" in out
    code, out, _ = _run(["explain", BASE, BASE.replace("river", "lake"), "--json"], capsys)
    d = json.loads(out)
    assert code == 0 and d["decision"] == "duplicate" and d["rule"] == "similarity"
    assert d["keep"]["dropped"] == ["B"] and d["minhash"]["found"]
    code, out, _ = _run(["explain", BASE, "something else entirely", "--json"], capsys)
    assert json.loads(out)["decision"] == "not a candidate"
    code, out, _ = _run(["explain", BASE, BASE + " today", "--keep", "none", "--json"], capsys)
    assert json.loads(out)["keep"]["dropped"] == ["A", "B"]


def test_ids_of_a_corpus_with_a_runs_settings(tmp_path: Path, capsys: Any) -> None:
    src = tmp_path / "c.jsonl"
    rows = [
        {"id": "x", "text": BASE},
        {"id": "y", "text": "unrelated"},
        {"id": "z", "text": BASE.replace("winter", "summer")},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "out").mkdir()
    args = ["dedup", str(src), "-o", str(tmp_path / "out" / "k.jsonl"), "-q"]
    assert main([*args, "--summary-json", str(tmp_path / "out" / "summary.json")]) == 0
    assert main([*args, "--threshold", "0.99", "--summary-json", str(tmp_path / "s99.json")]) == 0
    capsys.readouterr()
    code, out, _ = _run(["explain", "--corpus", str(src), "z", "x", "--json"], capsys)
    d = json.loads(out)
    assert code == 0 and d["ids"] == ["x", "z"] and d["decision"] == "duplicate"
    run = ["explain", "--corpus", str(src), "z", "x", "--json", "--run"]
    d = json.loads(_run([*run, str(tmp_path / "out")], capsys)[1])
    assert d["config"]["threshold"] == 0.8 and d["decision"] == "duplicate"  # the default, named
    d = json.loads(_run([*run, str(tmp_path / "s99.json")], capsys)[1])
    # the run's own settings: its threshold, its MinHash plan
    assert d["thresholds"]["threshold"] == 0.99 and d["minhash"]["threshold"] == 0.99
    # similarity 0.958 < 0.99: the plan made for 0.99 does not find the pair, as the run did not
    assert d["rule"] == "none" and d["decision"] == "not a candidate"
    assert json.loads((tmp_path / "s99.json").read_text())["kept"] == 3
    code, _, err = _run(["explain", "--corpus", str(src), "x", "nope"], capsys)
    assert code == 4 and "'nope' is not in the corpus" in err
    code, _, err = _run(["explain", "a", "b", "--run", str(tmp_path / "none")], capsys)
    assert code != 0 and "--run" in err


def test_ids_of_an_online_store(tmp_path: Path, capsys: Any) -> None:
    from neardup.online import Deduplicator

    data = tmp_path / "data"
    with Deduplicator.open(str(data), verify=True) as d:
        d.add({"id": "first", "text": BASE, "time": 1000.0})
        d.add({"id": "second", "text": BASE.replace("river", "lake"), "time": 2000.0})
        # back-filled: stored last with the oldest time; the store keeps "first" over it
        d.add({"id": "late", "text": BASE.replace("river", "pond"), "time": 500.0})
    code, out, err = _run(["explain", "--store", str(data), "second", "first", "--json"], capsys)
    assert code == 0, err
    e = json.loads(out)
    assert e["ids"] == ["first", "second"] and e["decision"] == "duplicate"
    # A is the one stored first, not the one with the earlier time
    code, out, err = _run(["explain", "--store", str(data), "late", "first", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["ids"] == ["first", "late"]
    code, out, err = _run(["explain", "--store", str(data), "first", "missing"], capsys)
    assert code == 4 and "missing" in err
    code, _, err = _run(["explain", "--store", str(data), "--namespace", "x", "a", "b"], capsys)
    assert code == 4 and "namespaces" in err
    code, _, err = _run(["explain", "--store", str(tmp_path / "empty"), "a", "b"], capsys)
    assert code == 4 and "no store" in err
    code, _, err = _run(["explain", "--corpus", "x.jsonl", "--store", str(data), "a", "b"], capsys)
    assert code == 2 and "not both" in err


@pytest.mark.parametrize("argv", [["explain"], ["explain", "only-one"]])
def test_usage_errors(argv: list[str], capsys: Any) -> None:
    code, _, err = _run(argv, capsys)
    assert code == 2 and "Usage:" in err
