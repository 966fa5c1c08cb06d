"""Incremental dedup (``neardup dedup NEW --save STORE`` / ``--against STORE``, issue 37 item 3):
runs saved in order keep exactly what one keep-first run over the concatenation keeps; a read-only
comparison adds nothing; ids already stored and options an incremental run cannot honour are
refused before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neardup.cli.main import main

SAMPLE = Path(__file__).resolve().parents[2] / "neardup" / "data" / "sample" / "sample.jsonl"


def _ids(path: Path) -> list[str]:
    return [json.loads(x)["id"] for x in path.read_text(encoding="utf-8").splitlines()]


def test_saved_runs_keep_what_one_run_over_the_concatenation_keeps(tmp_path, batches):
    assert main(["dedup", str(SAMPLE), "-o", str(tmp_path / "all.jsonl"), "-q"]) == 0
    store = tmp_path / "store"
    kept: list[str] = []
    for i, b in enumerate(batches):
        out = tmp_path / f"kept{i}.jsonl"
        summary = tmp_path / f"summary{i}.json"
        assert main(["dedup", str(b), "-o", str(out), "--save", str(store), "--summary-json", str(summary), "-q"]) == 0  # fmt: skip
        s = json.loads(summary.read_text())
        assert s["store_documents_after"] == s["store_documents_before"] + s["kept"]
        assert s["kept"] == len(_ids(out)) and s["documents"] == len(_ids(b))
        kept += _ids(out)
    assert kept == _ids(tmp_path / "all.jsonl")
    assert s["dropped_for_store"] > 0  # the later days did meet earlier days' documents


def test_checks_in_many_chunks_keep_what_one_run_keeps(tmp_path, batches, monkeypatch):
    """The store is checked a chunk at a time, the next chunk prepared while the last one is
    decided: with chunks of 37 documents the kept documents are still those of one run."""
    import neardup.incremental.stored as stored

    monkeypatch.setattr(stored, "CHUNK", 37)
    assert main(["dedup", str(SAMPLE), "-o", str(tmp_path / "all.jsonl"), "-q"]) == 0
    kept: list[str] = []
    for i, b in enumerate(batches):
        out = tmp_path / f"kept{i}.jsonl"
        assert main(["dedup", str(b), "-o", str(out), "--save", str(tmp_path / "store"), "-q"]) == 0  # fmt: skip
        kept += _ids(out)
    assert kept == _ids(tmp_path / "all.jsonl")


def test_against_compares_without_saving(tmp_path, batches):
    store = tmp_path / "store"
    assert main(["dedup", str(batches[0]), "-o", str(tmp_path / "k0.jsonl"), "--save", str(store), "-q"]) == 0  # fmt: skip
    s1, s2 = tmp_path / "s1.json", tmp_path / "s2.json"
    args = ["dedup", str(batches[1]), "-q", "--against", str(store)]
    assert main([*args, "-o", str(tmp_path / "a.jsonl"), "--summary-json", str(s1)]) == 0
    assert main([*args, "-o", str(tmp_path / "b.jsonl"), "--summary-json", str(s2)]) == 0
    first, again = json.loads(s1.read_text()), json.loads(s2.read_text())
    assert first["store_documents_after"] == first["store_documents_before"] == again["store_documents_after"]  # fmt: skip
    assert _ids(tmp_path / "a.jsonl") == _ids(tmp_path / "b.jsonl")  # nothing was added
    assert first["dropped_for_store"] > 0 and first["kept"] < first["documents"]


def test_pairs_out_names_the_stored_document_each_dropped_one_duplicates(tmp_path, batches):
    """--pairs-out of an incremental run: the run's own pairs as a batch run writes them, then
    one row per stored match of each document the store dropped (id_a stored, id_b new, stage
    ``stored``); every dropped document is the id_b of some row."""
    import csv

    store = tmp_path / "store"
    k0, k1 = tmp_path / "k0.jsonl", tmp_path / "k1.jsonl"
    pairs, summary = tmp_path / "p.csv", tmp_path / "s.json"
    assert main(["dedup", str(batches[0]), "-o", str(k0), "--save", str(store), "-q"]) == 0
    assert main(["dedup", str(batches[1]), "-o", str(k1), "--save", str(store), "-q", "--pairs-out", str(pairs), "--summary-json", str(summary)]) == 0  # fmt: skip
    with pairs.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["id_a", "id_b", "distance", "score", "stage", "rule"]
    stored = [r for r in rows if r["stage"] == "stored"]
    own = [r for r in rows if r["stage"] != "stored"]
    assert rows == own + stored  # the run's own pairs first
    kept0, new, kept1 = set(_ids(k0)), _ids(batches[1]), set(_ids(k1))
    s = json.loads(summary.read_text())
    assert {r["id_b"] for r in stored} <= set(new) - kept1
    assert len({r["id_b"] for r in stored}) == s["dropped_for_store"] > 0
    assert {r["id_a"] for r in stored} <= kept0
    assert all(r["rule"] == "" and (r["score"] == "" or float(r["score"]) >= 0.8) for r in stored)
    assert {r["id_a"] for r in own} | {r["id_b"] for r in own} <= set(new)
    assert set(new) - kept1 <= {r["id_b"] for r in rows}  # every dropped one is named


def test_ids_already_stored_are_refused_and_nothing_is_written(tmp_path, batches, capsys):
    store = tmp_path / "store"
    assert main(["dedup", str(batches[0]), "-o", str(tmp_path / "k0.jsonl"), "--save", str(store), "-q"]) == 0  # fmt: skip
    s = tmp_path / "s.json"
    assert main(["dedup", str(batches[1]), "-o", str(tmp_path / "k1.jsonl"), "--against", str(store), "-q", "--summary-json", str(s)]) == 0  # fmt: skip
    before = json.loads(s.read_text())["store_documents_after"]
    capsys.readouterr()
    out = tmp_path / "again.jsonl"
    assert main(["dedup", str(batches[0]), "-o", str(out), "--save", str(store), "-q"]) == 3
    err = capsys.readouterr().err
    assert "already in the store" in err and "nothing was written" in err
    assert not out.exists()
    assert main(["dedup", str(batches[1]), "-o", str(tmp_path / "k2.jsonl"), "--against", str(store), "-q", "--summary-json", str(s)]) == 0  # fmt: skip
    assert json.loads(s.read_text())["store_documents_after"] == before


def test_a_stored_id_with_another_text_is_refused_before_any_chunk_loads(tmp_path, batches, capsys, monkeypatch):  # fmt: skip
    """An id the store holds, reused for a different text, is refused before anything is
    loaded, also when the kept documents would load in several chunks (a later chunk's refusal
    would leave the earlier ones stored)."""
    import neardup.incremental.stored as stored

    store = tmp_path / "store"
    assert main(["dedup", str(batches[0]), "-o", str(tmp_path / "k0.jsonl"), "--save", str(store), "-q"]) == 0  # fmt: skip
    s = tmp_path / "s.json"
    assert main(["dedup", str(batches[1]), "-o", str(tmp_path / "k1.jsonl"), "--against", str(store), "-q", "--summary-json", str(s)]) == 0  # fmt: skip
    before = json.loads(s.read_text())["store_documents_after"]
    rows = [json.loads(x) for x in batches[1].read_text(encoding="utf-8").splitlines()]
    rows[-1]["id"] = _ids(tmp_path / "k0.jsonl")[0]  # a stored id, another text, last in line
    reused = tmp_path / "reused.jsonl"
    reused.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    monkeypatch.setattr(stored, "LOAD_CHUNK", 50)
    capsys.readouterr()
    assert main(["dedup", str(reused), "-o", str(tmp_path / "k2.jsonl"), "--save", str(store), "-q"]) == 3  # fmt: skip
    assert "1 ids are already in the store" in capsys.readouterr().err
    assert main(["dedup", str(batches[1]), "-o", str(tmp_path / "k3.jsonl"), "--against", str(store), "-q", "--summary-json", str(s)]) == 0  # fmt: skip
    assert json.loads(s.read_text())["store_documents_after"] == before


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--keep", "longest"], "--keep longest needs the whole corpus"),
        (["--engine", "dask", "--clusters-out", "c.csv"], "run on the local engine"),
        (["--against", "other"], "pass one of them"),
        (["--threshold", "0.7"], "use a threshold of at least 0.8"),
    ],
)
def test_what_an_incremental_run_cannot_do_is_refused_first(tmp_path, batches, capsys, extra, needle):  # fmt: skip
    out = tmp_path / "k.jsonl"
    rc = main(["dedup", str(batches[0]), "-o", str(out), "--save", str(tmp_path / "store"), *extra])  # fmt: skip
    assert rc in (2, 3)
    assert needle in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "store").exists()


def test_a_store_path_that_cannot_be_a_store_is_refused_first(tmp_path, batches, capsys):
    """--save on a file, on a folder of other files, on an input or a folder overlapping one
    is refused (exit 2) before anything is read or made: a file got "free space or fix
    permissions" (exit 7), and the others were filled with the store's files, which a later
    run reading the input folder then met."""
    src = tmp_path / "in"
    src.mkdir()
    doc = src / "a.jsonl"
    doc.write_bytes(batches[0].read_bytes())
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("mine\n")
    cases = [
        ([str(doc)], afile, "a file, not a store's folder"),
        ([str(doc)], junk, "a folder that is not a neardup store (1 entry: notes.txt)"),
        ([str(src)], src, "it is the input"),
        ([str(src)], src / "store", "it overlaps the input"),
        ([str(doc)], src, "it overlaps the input"),
    ]
    for inputs, store, needle in cases:
        before = sorted(p.name for p in tmp_path.rglob("*"))
        out = tmp_path / "k.jsonl"
        assert main(["dedup", *inputs, "-o", str(out), "--save", str(store), "-q"]) == 2
        assert needle in capsys.readouterr().err, (store, needle)
        assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing made
    # an output inside the store's folder (it was written there, beside the store's files)
    for flag, out in (("-o", "s/out.jsonl"), ("--pairs-out", "s/sub/p.csv")):
        args = ["-o", str(tmp_path / "k.jsonl")] if flag != "-o" else []
        rc = main(["dedup", str(doc), *args, flag, str(tmp_path / out), "--save", str(tmp_path / "s"), "-q"])  # fmt: skip
        assert rc == 2 and "inside the store --save" in capsys.readouterr().err
        assert not (tmp_path / "s").exists()
    assert main(["dedup", str(doc), "-o", str(tmp_path / "k.jsonl"), "--against", str(afile)]) != 0  # fmt: skip
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["dedup", str(doc), "-o", str(tmp_path / "k.jsonl"), "--save", str(empty), "-q"]) == 0  # fmt: skip
    assert (empty / "config.json").is_file()


def test_a_failed_save_leaves_no_store_it_made(tmp_path, batches, capsys):
    """A run that fails on a bad record after --save made the store left that empty store
    behind (it is opened before the inputs are read); it is removed again, as is what it
    put into an empty folder. A store that held documents stays as it was."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "body": "no text field"}\n')
    args = ["-o", str(tmp_path / "k.jsonl"), "-q"]
    new = tmp_path / "a" / "b" / "store"
    assert main(["dedup", str(bad), *args, "--save", str(new)]) == 3
    assert "no text field 'text'" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "k.jsonl").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["dedup", str(bad), *args, "--save", str(empty)]) == 3
    assert empty.is_dir() and list(empty.iterdir()) == []
    kept = tmp_path / "kept"
    assert main(["dedup", str(batches[0]), *args, "--save", str(kept)]) == 0
    files = sorted(p.name for p in kept.iterdir())
    assert main(["dedup", str(bad), *args, "--save", str(kept)]) == 3
    assert sorted(p.name for p in kept.iterdir()) == files


def test_a_threshold_other_than_the_stores_is_refused_in_the_clis_words(tmp_path, batches, capsys):  # fmt: skip
    store = tmp_path / "store"
    args = ["-o", str(tmp_path / "k.jsonl"), "-q"]
    assert main(["dedup", str(batches[0]), *args, "--save", str(store), "--threshold", "0.9"]) == 0
    for flag in ("--save", "--against"):
        assert main(["dedup", str(batches[1]), *args, flag, str(store)]) == 2
        err = capsys.readouterr().err
        assert "the store verifies at threshold 0.9" in err and "pass --threshold 0.9" in err
        assert "verify=True" not in err and "Deduplicator" not in err
    # on a distributed engine too, before the engine starts
    assert main(["dedup", str(batches[1]), *args, "--save", str(store), "--engine", "dask"]) == 2
    assert "the store verifies at threshold 0.9" in capsys.readouterr().err
    assert main(["dedup", str(batches[1]), *args, "--save", str(store), "--threshold", "0.9"]) == 0


def test_saved_runs_at_another_threshold_keep_what_one_run_keeps(tmp_path):
    """A store made at --threshold 0.9 planned its MinHash channel for 0.8 (the default): it
    found a page-chrome pair that the batch run at 0.9 never compared, so saving in two runs
    kept another set than one run over both files."""
    body = (
        "summer50 castle56 garden46 silver4 garden63 letter33 summer99 candle53 signal49 "
        "castle44 engine74 summer74 morning43 river35 pocket85 window89 forest69 castle72 "
        "silver91 letter81 castle34 candle15"
    )
    page = (
        "home news sport weather login register subscribe search menu contact about "
        f"{body} share facebook twitter email print copyright reserved privacy terms cookies "
        "careers"
    )
    day1, day2, both = tmp_path / "d1.jsonl", tmp_path / "d2.jsonl", tmp_path / "both.jsonl"
    day1.write_text(json.dumps({"id": "page", "text": page}) + "\n")
    day2.write_text(json.dumps({"id": "article", "text": body}) + "\n")
    both.write_text(day1.read_text() + day2.read_text())
    t = ["--threshold", "0.9", "-q"]
    assert main(["dedup", str(both), "-o", str(tmp_path / "all.jsonl"), *t]) == 0
    store = tmp_path / "store"
    for i, day in enumerate((day1, day2)):
        assert main(["dedup", str(day), "-o", str(tmp_path / f"k{i}.jsonl"), *t, "--save", str(store)]) == 0  # fmt: skip
    saved = _ids(tmp_path / "k0.jsonl") + _ids(tmp_path / "k1.jsonl")
    assert saved == _ids(tmp_path / "all.jsonl")
    plan = json.loads((store / "config.json").read_text())["body"]["lsh"]
    assert (plan["bands"], plan["rows"]) == (26, 4)  # the 0.9 plan, as the batch run's


def test_against_a_missing_store_is_refused(tmp_path, batches, capsys):
    rc = main(["dedup", str(batches[0]), "-o", str(tmp_path / "k.jsonl"), "--against", str(tmp_path / "nope")])  # fmt: skip
    assert rc == 4
    assert "no store at" in capsys.readouterr().err


def test_an_incremental_report_shows_the_stored_documents_that_dropped_new_ones(tmp_path, batches):
    """``--report`` on a run against a store: the stored documents that dropped new ones are
    the kept documents of their clusters (their texts read from the store), each dropped new
    document aligned against the stored one it matched, with the rule that accepts the pair;
    the run's own clusters are there too, and every dropped document is counted once."""
    import csv

    store = tmp_path / "store"
    k0 = tmp_path / "k0.jsonl"
    assert main(["dedup", str(batches[0]), "-o", str(k0), "--save", str(store), "-q"]) == 0
    stored_text = {json.loads(x)["id"]: json.loads(x)["text"] for x in k0.read_text().splitlines()}
    report, pairs, summary = tmp_path / "report.html", tmp_path / "pairs.csv", tmp_path / "s.json"
    args = ["dedup", str(batches[1]), "-o", str(tmp_path / "k1.jsonl"), "--against", str(store)]
    assert main([*args, "--report", str(report), "--pairs-out", str(pairs), "--summary-json", str(summary), "-q"]) == 0  # fmt: skip
    data = json.loads((tmp_path / "review.json").read_text())
    s = json.loads(summary.read_text())
    with pairs.open() as fh:
        stored_pairs = {
            (r["id_a"], r["id_b"]) for r in csv.DictReader(fh) if r["stage"] == "stored"
        }
    new_ids = set(_ids(batches[1]))
    assert s["dropped_for_store"] > 0 and stored_pairs
    by_store = [c for c in data["clusters"] if c["kept"]["id"] in stored_text]
    own = [c for c in data["clusters"] if c["kept"]["id"] in new_ids]
    assert by_store and own and len(by_store) + len(own) == len(data["clusters"])
    for c in by_store:
        assert c["kept"]["text"] == stored_text[c["kept"]["id"]][:2000]
        for m in c["members"]:
            assert m["id"] in new_ids and (c["kept"]["id"], m["id"]) in stored_pairs
            assert m["rule"] in ("similarity", "containment", "exact") and m["diff"] is not None
    rows = data["by_language_length"]["rows"]
    assert sum(r["dropped_exact"] + r["dropped_near"] for r in rows) == s["dropped"]
    # the run's own documents (the stored ones shown in clusters are not the run's)
    assert sum(r["documents"] for r in rows) == s["documents"]
    page = report.read_text(encoding="utf-8")
    assert by_store[0]["kept"]["id"] in page and "<script" not in page


def test_incremental_clusters_name_the_stored_document_a_dropped_one_duplicates(tmp_path, batches):
    """``--clusters-out`` on a run against a store: a row per new document, in input order;
    a document the store dropped has the stored document it first matched as its cluster's
    representative (it came first), and the cluster sizes count it."""
    import csv

    store = tmp_path / "store"
    k0 = tmp_path / "k0.jsonl"
    assert main(["dedup", str(batches[0]), "-o", str(k0), "--save", str(store), "-q"]) == 0
    clusters, pairs, summary = tmp_path / "c.csv", tmp_path / "p.csv", tmp_path / "s.json"
    args = ["dedup", str(batches[1]), "-o", str(tmp_path / "k1.jsonl"), "--against", str(store)]
    assert main([*args, "--clusters-out", str(clusters), "--pairs-out", str(pairs), "--summary-json", str(summary), "-q"]) == 0  # fmt: skip
    with clusters.open() as fh:
        rows = list(csv.DictReader(fh))
    with pairs.open() as fh:
        stored = {(r["id_a"], r["id_b"]) for r in csv.DictReader(fh) if r["stage"] == "stored"}
    assert [r["id"] for r in rows] == _ids(batches[1])
    kept = set(_ids(tmp_path / "k1.jsonl"))
    assert {r["id"] for r in rows if r["kept"] == "1"} == kept
    stored_ids = set(_ids(k0))
    by_store = [r for r in rows if r["representative"] in stored_ids]
    assert len(by_store) == json.loads(summary.read_text())["dropped_for_store"] > 0
    for r in by_store:
        assert (r["representative"], r["id"]) in stored and r["kept"] == "0"
        assert int(r["cluster_size"]) >= 2
    sizes: dict[str, int] = {}
    for r in rows:  # every new member of a cluster is counted in its size
        sizes[r["cluster"]] = sizes.get(r["cluster"], 0) + 1
    assert all(int(r["cluster_size"]) >= sizes[r["cluster"]] for r in rows)
