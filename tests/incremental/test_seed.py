"""Seeding a store from files (``neardup store load``, ``neardup serve --seed``; issue 36): the
keep-first load keeps exactly what ``check_and_add`` one document at a time keeps, in both
candidate modes and against what the store already holds; records' times are kept; times the
window cannot hold, ids already stored and options that cannot apply are refused before anything
is loaded."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neardup.cli.main import main
from neardup.online import Deduplicator
from neardup.store import Store

SAMPLE = Path(__file__).resolve().parents[2] / "neardup" / "data" / "sample" / "sample.jsonl"


def _records(n: int | None = None) -> list[dict]:
    rows = [json.loads(x) for x in SAMPLE.read_text(encoding="utf-8").splitlines()]
    return rows[:n]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _stored(store: Path) -> dict[str, dict]:
    """Every stored document (read back through the store: ids listed from its metadata)."""
    if not (store / "meta.sqlite3").exists():
        return {}
    db = sqlite3.connect(f"file:{store / 'meta.sqlite3'}?mode=ro", uri=True)
    try:
        ids = [r[0] for r in db.execute("SELECT id FROM docs")]
    finally:
        db.close()
    with Deduplicator.open(store) as d:
        return {i: d.get(i) for i in ids}


def _one_by_one(rows: list[dict], **options: object) -> set[str]:
    """The definition: every document checked-and-inserted on its own, in input order."""
    with Deduplicator.open(None, **options) as d:
        return {r["id"] for r in rows if not d.check_and_add({"id": r["id"], "text": r["text"]}).duplicate}  # fmt: skip


@pytest.mark.parametrize(
    ("mode", "plan"), [("lsh", {}), ("simhash", {}), ("lsh", {"lsh_bands": 9, "lsh_rows": 2})]
)
def test_keep_first_load_keeps_what_check_and_add_keeps(
    tmp_path: Path, mode: str, plan: dict[str, int], capsys
) -> None:
    """Also for a store made with another MinHash plan than the planner's (--lsh-bands):
    the bulk path decides with the store's plan, not the default one."""
    rows = _records()
    now = int(time.time())
    for k, r in enumerate(rows):  # times as ISO strings and as numbers
        t = now - 3600 + k
        r["ts"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)) if k % 2 else t
    src = _write(tmp_path / "seed.jsonl", rows)
    data = tmp_path / "data"
    args = ["store", "load", str(data), str(src), "--time-field", "ts", "--candidates", mode]
    for k, v in plan.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    assert main([*args, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["path"] == ("dedup_into" if mode == "lsh" else "check_and_add")
    stored = _stored(data / "namespaces" / "default")
    assert set(stored) == _one_by_one(rows, candidates=mode, **plan)
    assert stats["loaded"] == len(stored) and stats["dropped"] == len(rows) - len(stored) > 0
    for k, r in enumerate(rows):
        if r["id"] in stored:
            assert stored[r["id"]]["time"] == now - 3600 + k


def test_each_document_is_prepared_once_and_loads_as_it_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``dedup_into`` against a store that holds documents, with the store's fingerprinter,
    verifier and plan, hashes, fingerprints and signs every document once (``sign_all``): the
    store check's chunks are keyed from that (checks of 37 here), the batch run takes it and
    the kept ones load from it (loads of 50). With another plan it falls back to the check's
    prepared batches (``SIGN_FIRST`` off, ``REUSE_MAX``; their documents spanning several
    batches per load), and past ``REUSE_MAX`` to preparing and signing again. All three store
    the same rows, times included, and the kept set of checking-and-inserting them one by one.
    (The first part meets an empty store: it is stored from the batch run's own work.)"""
    from neardup.batch import run as batch_run
    from neardup.incremental import dedup_into, stored

    monkeypatch.setattr(stored, "CHUNK", 37)
    monkeypatch.setattr(stored, "LOAD_CHUNK", 50)
    from neardup.online.prepare import PreparedDocs

    takes: list[int] = []
    take = PreparedDocs.take
    monkeypatch.setattr(PreparedDocs, "take", lambda p, idx: takes.append(len(idx)) or take(p, idx))
    signed: list[int] = []  # the documents of each batch keyed from a run's work
    prepare_signed = Deduplicator.prepare_signed
    monkeypatch.setattr(
        Deduplicator,
        "prepare_signed",
        lambda d, docs, *a: signed.append(len(docs)) or prepare_signed(d, docs, *a),
    )
    given: list[bool] = []  # whether each batch run was handed its signatures
    cands = batch_run.stage_candidates_for

    def candidates(*args: object) -> object:
        given.append(len(args) > 12 and args[12] is not None)
        return cands(*args)

    monkeypatch.setattr(batch_run, "stage_candidates_for", candidates)
    hashed: list[bool] = []  # whether each batch run was handed its hashes and fingerprints
    run_dedup = batch_run.dedup

    def dedup(*args: Any, **kwargs: Any) -> Any:
        hashed.append(kwargs.get("fingerprints") is not None)
        return run_dedup(*args, **kwargs)

    monkeypatch.setattr(batch_run, "dedup", dedup)
    rows = _records()
    now = time.time()
    first, second = rows[:300], rows[300:]
    out = {}
    for mode in ("signed", "reuse", "again"):
        monkeypatch.setattr(stored, "REUSE_MAX", 0 if mode == "again" else 10**6)
        monkeypatch.setattr(stored, "SIGN_FIRST", mode == "signed")
        path = tmp_path / mode
        with Deduplicator.open(path) as d:
            for part, base in ((first, 0), (second, 300)):
                for seen in (takes, signed, given, hashed):
                    seen.clear()
                into = dedup_into(
                    d,
                    [r["id"] for r in part],
                    [r["text"] for r in part],
                    times=[now - 3600 + base + k for k in range(len(part))],
                )
                assert into.prepared is None and into.work is None  # (loaded, not kept)
                kept = int(into.keep.sum())
                if base == 0:  # an empty store: loaded from the batch run's work
                    assert given == [False] and hashed == [False] and not takes
                    assert sum(signed) == kept
                elif mode == "signed":  # checked and loaded from every document's work
                    assert given == [True] and hashed == [True] and not takes
                    assert sum(signed) == len(part) + kept
                    assert signed[:2] == [37, 37]  # (the checks come first)
                elif mode == "reuse":  # loaded from the check's batches, several per load
                    assert given == [True] and hashed == [True] and not signed
                    assert len(takes) > 2 and 0 < sum(takes) <= len(part)
                else:
                    assert given == [False] and hashed == [False] and not takes and not signed
        out[mode] = _stored(path)
    assert out["signed"] == out["reuse"] == out["again"]
    assert set(out["signed"]) == _one_by_one(rows)
    assert {v["time"] for v in out["signed"].values()} <= {now - 3600 + k for k in range(len(rows))}


def test_dedup_into_decides_by_the_stores_own_plan_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``dedup_into`` without a config decides the new documents among themselves by the
    store's rule: a store made with another MinHash plan than the planner's keeps what its
    ``check_and_add`` one document at a time keeps (before, the planner's plan decided them,
    and every document was prepared for the check and signed again for the run), and each
    document of a group against a store that holds documents is signed once, for the check,
    the run and the load."""
    from neardup.incremental import dedup_into
    from neardup.online.prepare import DocumentPreparer

    plan = {"lsh_bands": 9, "lsh_rows": 2}
    prepared: list[int] = []  # documents prepared from their texts (not from a run's work)
    prepare = DocumentPreparer.prepare
    monkeypatch.setattr(
        DocumentPreparer, "prepare", lambda p, docs: prepared.append(len(docs)) or prepare(p, docs)
    )
    # short posts with two scattered one-token edits (similarity 0.8): the planner's 79 x 3
    # plan makes nearly every such pair a candidate, a 9 x 2 store about two in three
    rng = np.random.default_rng(5)
    vocab = ["".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), 6)) for _ in range(5000)]
    edited: list[dict] = []
    for k in range(150):
        a = list(rng.choice(vocab, 10))
        b = list(a)
        b[2], b[6] = rng.choice(vocab, 2)
        edited += [{"id": f"a{k}", "text": " ".join(a)}, {"id": f"b{k}", "text": " ".join(b)}]
    rows = edited + _records()
    path = tmp_path / "store"
    with Deduplicator.open(path, **plan) as d:
        for part in (rows[:300], rows[300:]):  # an empty store, then one that holds documents
            prepared.clear()
            dedup_into(d, [r["id"] for r in part], [r["text"] for r in part])
            assert not prepared
    kept = set(_stored(path))
    assert kept == _one_by_one(rows, **plan)
    assert 170 < len(kept & {r["id"] for r in edited}) < 250  # (the planner's plan: ~151)


@pytest.mark.parametrize("store_mode", ["lsh", "simhash"])
@pytest.mark.parametrize("run_mode", ["lsh", "simhash"])
def test_each_document_prepared_once_stores_what_preparing_again_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store_mode: str, run_mode: str
) -> None:
    """Whatever the store's and the run's candidate modes (a ``simhash`` store has no MinHash
    channel to key; a ``simhash`` run makes no signatures), ``dedup_into`` into a store that
    holds documents keeps and stores the same as with ``SIGN_FIRST`` off and the kept
    documents prepared again, exact copies of stored and of new texts included."""
    from neardup.incremental import dedup_into, stored
    from neardup.rules.config import DedupConfig

    monkeypatch.setattr(stored, "CHUNK", 41)
    rows = _records()
    first, second = rows[:300], rows[300:]
    second = [*second, dict(first[3], id="copy-of-stored"), dict(second[5], id="copy-of-new")]
    cfg = DedupConfig(candidates=run_mode)
    now = time.time()
    out = {}
    for sign_first in (True, False):
        monkeypatch.setattr(stored, "SIGN_FIRST", sign_first)
        monkeypatch.setattr(stored, "REUSE_MAX", 10**6 if sign_first else 0)
        path = tmp_path / f"first-{sign_first}"
        with Deduplicator.open(path, candidates=store_mode) as d:
            for part, base in ((first, 0), (second, 300)):
                into = dedup_into(
                    d, [r["id"] for r in part], [r["text"] for r in part], config=cfg,
                    times=[now - 3600 + base + k for k in range(len(part))],
                )  # fmt: skip
            assert not into.keep[-2:].any()  # (the copies)
        out[sign_first] = _stored(path)
    assert out[True] == out[False]


def _image(store: Path) -> tuple[list[tuple], list[list]]:
    """Everything a store holds, row by row: its metadata rows (texts read back through the
    store) and its segments' fingerprints, row ids, times, band keys and sketches."""
    db = sqlite3.connect(f"file:{store / 'meta.sqlite3'}?mode=ro", uri=True)
    try:
        rows = list(
            db.execute("SELECT rid, id, time, fp, chash, flags, metadata FROM docs ORDER BY rid")
        )
    finally:
        db.close()
    with Deduplicator.open(store) as d:
        texts = [d.get(r[1]).get("text") for r in rows]
        segs = []
        for s in d.store._state.segments:
            seg = s.segment
            keys, rids = seg.band_runs()[0] if seg.band_runs() else ([], [])
            segs.append([
                seg.fingerprints.tolist(), seg.rowids.tolist(), seg.times.tolist(),
                list(keys), list(rids),
                None if seg.sketches is None else seg.sketches.tobytes(),
                None if seg.sketch_present is None else seg.sketch_present.tolist(),
            ])  # fmt: skip
    return [(*r, t) for r, t in zip(rows, texts, strict=True)], segs


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("mode", ["lsh", "simhash"])
def test_an_empty_stores_run_is_stored_from_the_runs_own_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, chunked: bool
) -> None:
    """A run into an empty store stores its kept documents from the batch run's content
    hashes, fingerprints and signatures (``RunWork``), in loads of 70 here: byte for byte the
    store that hashing, preparing and signing them again makes (the run's work refused), over
    texts that take every branch of the fingerprint and signature paths (English, Chinese,
    mixed, exact and case-or-space-only copies, empty and whitespace-only texts, a text
    without tokens); ``chunked``: the exact pass hashes the ASCII texts in its chunks (a big
    corpus's path), else all at once."""
    from neardup.batch import exact
    from neardup.incremental import dedup_into, run, stored
    from neardup.incremental.stored import RunWork
    from neardup.rules.config import DedupConfig

    if chunked:
        monkeypatch.setattr(exact, "EXACT_NUMBA_MIN_CHARS", 0)
        monkeypatch.setattr(exact, "EXACT_CHUNK_BYTES", 1500)
    monkeypatch.setattr(stored, "LOAD_CHUNK", 70)
    monkeypatch.setattr(stored, "REUSE_MAX", 0)
    rows = _records(220)
    extra = [
        "",
        "   ",
        "\t\n",
        "!!!",
        "Ｆｕｌｌ ｗｉｄｔｈ ＡＢＣ",
        "天地玄黄 宇宙洪荒 日月盈昃",
        "mixed 中文 and English text here",
    ]
    texts = [r["text"] for r in rows] + extra + [rows[3]["text"].upper(), "  " + rows[5]["text"] + "  ", rows[7]["text"]]  # fmt: skip
    ids = [f"d{i}" for i in range(len(texts))]
    now = time.time()
    when = [now - 3600 + k for k in range(len(texts))]
    cfg = DedupConfig(candidates=mode)
    made: list[int] = []
    of_kept = RunWork.of_kept.__func__

    def counted(cls: type, work: dict, kept: object) -> RunWork:
        w = of_kept(cls, work, kept)
        assert w.chash is not None and w.chash.shape == (len(w.fps), 2)
        made.append(len(w.fps))
        return w

    monkeypatch.setattr(RunWork, "of_kept", classmethod(counted))
    images = {}
    for by_run in (True, False):
        made.clear()
        if not by_run:
            monkeypatch.setattr(run, "_run_work_fits", lambda d, config: False)
        path = tmp_path / f"by-run-{by_run}"
        with Deduplicator.open(path, candidates=mode) as d:
            into = dedup_into(d, ids, texts, config=cfg, times=when)
            assert into.work is None
            assert made == ([int(into.keep.sum())] if by_run else [])
        images[by_run] = _image(path)
    assert images[True] == images[False]
    assert 0 < len(images[True][0]) < len(texts)


def test_a_failed_load_stops_the_loads_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept documents load a chunk at a time on a helper thread while the next chunk is
    prepared, one load in flight: a load that fails raises from ``load_kept``, after the
    chunks before it loaded and before any after it started (loads of 40 here)."""
    from neardup.incremental import stored
    from neardup.incremental.stored import load_kept

    monkeypatch.setattr(stored, "LOAD_CHUNK", 40)
    rows = _records(150)
    ids, texts = [r["id"] for r in rows], [r["text"] for r in rows]
    with Deduplicator.open(tmp_path / "s") as d:
        loaded: list[int] = []  # the loads started, in order
        real = d.load

        def load(docs: list[dict]) -> int:
            loaded.append(len(docs))
            if len(loaded) > 1:
                raise OSError("disk full")
            return real(docs)

        monkeypatch.setattr(d, "load", load)
        with pytest.raises(OSError, match="disk full"):
            load_kept(d, ids, texts, np.ones(len(ids), np.bool_))
        assert loaded == [40, 40]
        assert len(d) == 40
        assert [d.get(i)["id"] for i in ids[:40]] == ids[:40]
        assert not d.store.lookup_ids(ids[40:])


def test_a_bad_id_or_time_is_refused_before_the_run(tmp_path: Path) -> None:
    """An id the store refuses, or a time it cannot hold, at the end of a run into an empty
    store, is refused before anything is decided or loaded (the loads go in chunks)."""
    from neardup.errors import InputError
    from neardup.incremental import dedup_into

    rows = _records(50)
    ids, texts = [r["id"] for r in rows], [r["text"] for r in rows]
    with Deduplicator.open(tmp_path / "s") as d:
        with pytest.raises(InputError, match=r"ids\[49\].*control character.*nothing was loaded"):
            dedup_into(d, [*ids[:49], "bad\nid"], texts)
        with pytest.raises(InputError, match=r"times\[49\].*window.*nothing was loaded"):
            dedup_into(d, ids, texts, times=[time.time()] * 49 + [time.time() + 10 * 86400])
        assert len(d) == 0


def test_a_second_load_is_decided_against_what_the_store_holds(tmp_path: Path) -> None:
    rows = _records()
    a = _write(tmp_path / "a.jsonl", rows[:700])
    b = _write(tmp_path / "b.jsonl", rows[700:])
    data = tmp_path / "data"
    assert main(["store", "load", str(data), str(a), "-q"]) == 0
    assert main(["store", "load", str(data), str(b), "-q"]) == 0
    assert set(_stored(data / "namespaces" / "default")) == _one_by_one(rows)


def test_as_is_loads_every_document_and_leaves_one_segment(tmp_path: Path, capsys, monkeypatch) -> None:  # fmt: skip
    """Every document loaded; the segments the chunked loads wrote are merged before the
    command returns (a server opening the store does not merge them under its requests)."""
    import neardup.incremental.stored as stored

    monkeypatch.setattr(stored, "LOAD_CHUNK", 50)  # six loads, six segments before the merge
    src = _write(tmp_path / "s.jsonl", _records(300))
    data = tmp_path / "data"
    assert main(["store", "load", str(data), str(src), "--as-is", "--namespace", "news", "--json"]) == 0  # fmt: skip
    stats = json.loads(capsys.readouterr().out)
    assert stats["path"] == "load" and stats["loaded"] == 300 and stats["dropped"] == 0
    assert len(_stored(data / "namespaces" / "news")) == 300
    manifest = json.loads((data / "namespaces" / "news" / "MANIFEST.json").read_text())
    assert len(manifest["body"]["segments"]) == 1
    assert manifest["body"]["segments"][0]["count"] == 300


def test_an_empty_input_is_said(tmp_path: Path, capsys) -> None:
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "bad.jsonl").write_text('{"id": "a"}\n')
    data = tmp_path / "data"
    assert main(["store", "load", str(data), str(tmp_path / "empty.jsonl"), "-q"]) == 0
    assert "the inputs hold no documents: nothing was loaded" in capsys.readouterr().err
    args = ["store", "load", str(data), str(tmp_path / "bad.jsonl"), "-q", "--on-error", "skip"]
    assert main(args) == 0
    assert "every record was skipped (1): nothing was loaded" in capsys.readouterr().err


def test_times_from_csv_cells(tmp_path: Path) -> None:
    now = int(time.time())
    src = tmp_path / "s.csv"
    src.write_text(f"id,text,ts\na,one two three four five six,{now - 10}\nb,seven eight nine ten,{now - 5}\n")  # fmt: skip
    data = tmp_path / "data"
    assert main(["store", "load", str(data), str(src), "--time-field", "ts", "-q"]) == 0
    stored = _stored(data / "namespaces" / "default")
    assert stored["a"]["time"] == now - 10 and stored["b"]["time"] == now - 5


def test_expired_documents_are_refused_or_left_out(tmp_path: Path, capsys) -> None:
    now = time.time()
    rows = _records(20)
    for k, r in enumerate(rows):
        r["ts"] = now - (7200 if k < 5 else 60)
    src = _write(tmp_path / "s.jsonl", rows)
    data = tmp_path / "data"
    args = ["store", "load", str(data), str(src), "--time-field", "ts", "--retention", "1h"]
    assert main(args) == 3
    err = capsys.readouterr().err
    assert "5 documents are older than the store's retention window" in err
    assert f"{src}:1" in err and "--drop-expired" in err
    # a plain number, and the time in UTC (it was np.float64(...))
    assert f"{src}:1 at {now - 7200:.3f}".rstrip("0").rstrip(".") + " (" in err
    assert "np.float64" not in err and " UTC)" in err
    # the refused load left no store: one with the refused retention was opened by the retry,
    # which another --retention could not change (the option named was neardup serve's)
    assert not data.exists()
    assert main([*args[:-1], "3h", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["expired"] == 0 and stats["loaded"] + stats["dropped"] == 20
    more = _write(tmp_path / "more.jsonl", [{**r, "id": f"m{k}"} for k, r in enumerate(rows)])
    wider = ["store", "load", str(data), str(more), "--time-field", "ts", "--retention", "4h"]
    assert main([*wider, "-q"]) == 2
    assert "--allow-retention-change of neardup serve and neardup store load" in (
        capsys.readouterr().err
    )
    assert main([*wider, "-q", "--allow-retention-change"]) == 0
    assert Store.read_config(data / "namespaces" / "default")["store"]["retention"] == 4 * 3600
    shutil.rmtree(data)
    assert main([*args, "--drop-expired", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["expired"] == 5 and stats["loaded"] + stats["dropped"] == 15
    assert not {r["id"] for r in rows[:5]} & set(_stored(data / "namespaces" / "default"))


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("2026-11-29T12:00:00", "has no UTC offset"),
        ("yesterday", "neither unix seconds nor an ISO 8601 time"),
        (None, "expected unix seconds or an ISO 8601 string"),
        (4e12, "cannot take"),
    ],
)
def test_bad_times_are_refused_where_they_are(tmp_path: Path, capsys, value, needle) -> None:
    rows = _records(10)
    rows[3]["ts"] = value
    for r in rows[:3] + rows[4:]:
        r["ts"] = time.time()
    src = _write(tmp_path / "s.jsonl", rows)
    data = tmp_path / "data"
    assert main(["store", "load", str(data), str(src), "--time-field", "ts"]) == 3
    err = capsys.readouterr().err
    assert needle in err and f"{src}:4" in err
    assert _stored(data / "namespaces" / "default") == {}


def test_ids_the_store_refuses_are_refused_before_any_chunk_loads(tmp_path: Path, capsys) -> None:
    """An id the readers take but the store's rule does not (a tab in it) is refused up front,
    naming where it is; with --on-error skip it is left out."""
    rows = _records(30)
    rows[25]["id"] = "tab\there"
    src = _write(tmp_path / "s.jsonl", rows)
    data = tmp_path / "data"
    assert main(["store", "load", str(data), str(src), "--as-is"]) == 3
    err = capsys.readouterr().err
    assert f"{src}:26" in err and "control character" in err
    assert _stored(data / "namespaces" / "default") == {}
    assert main(["store", "load", str(data), str(src), "--as-is", "--on-error", "skip", "--json"]) == 0  # fmt: skip
    stats = json.loads(capsys.readouterr().out)
    assert stats["loaded"] == 29 and stats["skipped_records"] == 1


def test_texts_with_a_lone_surrogate_are_refused_before_anything_loads(
    tmp_path: Path, capsys
) -> None:
    """A JSON ``"\\ud800"`` escape reads as a lone surrogate, which has no UTF-8 form: a store
    that took it could never be opened again. `store load`, `dedup --save` and `dedup_into`
    refuse it up front naming where it is; `store load --on-error skip` leaves it out."""
    from neardup.errors import InputError
    from neardup.incremental import dedup_into

    rows = _records(30)
    rows[7]["text"] = "a text with \ud800 in it"
    src = _write(tmp_path / "s.jsonl", rows)
    assert "\\ud800" in src.read_text()
    data = tmp_path / "data"
    assert main(["store", "load", str(data), str(src)]) == 3
    err = capsys.readouterr().err
    assert f"{src}:8: the text holds a lone surrogate (U+D800" in err
    assert not data.exists()
    assert main(["dedup", str(src), "-o", str(tmp_path / "o.jsonl"), "--save", str(tmp_path / "st")]) == 3  # fmt: skip
    assert f"{src}:8: the text holds a lone surrogate" in capsys.readouterr().err
    assert not (tmp_path / "st").exists() and not (tmp_path / "o.jsonl").exists()
    # a distributed engine's --save too, before the engine starts
    args = ["dedup", str(src), "-o", str(tmp_path / "o.jsonl"), "--save", str(tmp_path / "st")]
    assert main([*args, "--engine", "dask"]) == 3
    assert f"{src}:8: the text holds a lone surrogate" in capsys.readouterr().err
    assert not (tmp_path / "st").exists() and not (tmp_path / "o.jsonl").exists()
    assert main(["store", "load", str(data), str(src), "--on-error", "skip", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["skipped_records"] == 1 and stats["loaded"] == 29
    with Deduplicator.open(data / "namespaces" / "default") as d:  # it opens again
        assert len(d) == 29 and rows[7]["id"] not in d
    with Deduplicator.open(tmp_path / "lib") as d:
        texts = [r["text"] for r in rows]
        with pytest.raises(InputError, match=r"texts\[7\].*lone surrogate.*nothing was loaded"):
            dedup_into(d, [r["id"] for r in rows], texts)
        assert len(d) == 0


def test_bad_times_are_skipped_with_on_error_skip(tmp_path: Path, capsys) -> None:
    rows = _records(10)
    for r in rows:
        r["ts"] = time.time()
    del rows[2]["ts"]
    src = _write(tmp_path / "s.jsonl", rows)
    data = tmp_path / "data"
    assert main(["store", "load", str(data), str(src), "--time-field", "ts", "--on-error", "skip", "--json", "--as-is"]) == 0  # fmt: skip
    stats = json.loads(capsys.readouterr().out)
    assert stats["skipped_records"] == 1 and stats["loaded"] == 9
    assert rows[2]["id"] not in _stored(data / "namespaces" / "default")


def test_ids_already_stored_are_refused_and_nothing_is_loaded(tmp_path: Path, capsys) -> None:
    rows = _records(200)
    data = tmp_path / "data"
    assert main(["store", "load", str(data), str(_write(tmp_path / "a.jsonl", rows[:100])), "-q", "--as-is"]) == 0  # fmt: skip
    again = _write(tmp_path / "b.jsonl", rows[50:])
    for flags in ([], ["--as-is"]):
        assert main(["store", "load", str(data), str(again), *flags]) == 3
        assert "50 ids are already in the store" in capsys.readouterr().err
        assert len(_stored(data / "namespaces" / "default")) == 100


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--time-field", "ts", "--input-format", "lines"], "whose records have no fields"),
        (["--namespace", "Bad/Name"], "is not a valid name"),
        (["--on-error", "maybe"], "'maybe' is not one of 'fail', 'skip'"),
    ],
)
def test_what_cannot_apply_is_refused_first(tmp_path: Path, capsys, extra, needle) -> None:
    src = _write(tmp_path / "s.jsonl", _records(10))
    data = tmp_path / "data"
    assert main(["store", "load", str(data), str(src), *extra]) == 2
    assert needle in capsys.readouterr().err
    assert not (data / "namespaces" / "default").exists()


def test_serve_seed_loads_once_then_serves(tmp_path: Path) -> None:
    """A real server: ``--seed`` fills the default namespace keep-first before the port is bound
    (a dropped seed document is answered a duplicate of its kept original); the same command
    again finds the namespace full and does not seed it again."""
    httpx = pytest.importorskip("httpx")
    from neardup.service.testing import free_port, wait_healthy

    rows = _records()
    src = _write(tmp_path / "seed.jsonl", rows)
    kept = _one_by_one(rows)
    dropped = next(r for r in rows if r["id"] not in kept)
    for attempt in range(2):
        port = free_port()
        cmd = [
            sys.executable, "-m", "neardup", "serve", "--data", str(tmp_path / "data"), "--port",
            str(port), "--no-auth", "--log-level", "warning", "--seed", str(src),
        ]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_healthy(url, 180, proc=proc)
            r = httpx.post(url + "/v1/check", json={"id": "probe", "text": dropped["text"]}, timeout=30)  # fmt: skip
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["duplicate"] and {m["id"] for m in body["matches"]} <= kept
            stats = httpx.get(url + "/v1/ns/default", timeout=30).json()
            assert stats["documents"] == len(kept)
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=60)
        if attempt == 0:
            assert f"{len(kept):,} of {len(rows):,} documents loaded" in err, err[-2000:]
        else:
            assert "not seeded again" in err, err[-2000:]


def test_a_load_says_it_compiles_kernels_on_a_cold_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``neardup store load`` hooks the first compile as ``neardup dedup`` does: the load's
    notice on stderr (whatever -q says) and the batch's compile helper started."""
    from neardup import _jit
    from neardup.batch import warm

    hooks: list[Any] = []
    monkeypatch.setattr(_jit, "announce_compiles", lambda cb, kind="run": hooks.append((cb, kind)))
    started: list[int] = []
    monkeypatch.setattr(warm, "start_warming", lambda: started.append(1))
    src = _write(tmp_path / "a.jsonl", _records()[:20])
    assert main(["store", "load", str(tmp_path / "data"), str(src), "-q"]) == 0
    callback, kind = hooks[0]
    assert kind == "load" and callback is not None
    callback(_jit.compile_notice(kind))  # what a cold cache's first compile calls
    assert started == [1]
    assert "compiling kernels on first use" in capsys.readouterr().err


def test_a_servers_seed_says_it_compiles_and_hands_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``neardup serve --seed`` hooks the seed's first compile as ``neardup store load`` does,
    and lets go after it, so that the server's own warm-up says so again (and starts its
    helper) when it compiles."""
    from neardup import _jit
    from neardup.cli import serve_cmd
    from neardup.service.config import ServiceConfig

    hooks: list[Any] = []
    monkeypatch.setattr(_jit, "announce_compiles", lambda cb, kind="run": hooks.append((cb, kind)))
    src = _write(tmp_path / "a.jsonl", _records()[:20])
    serve_cmd._seed(ServiceConfig(data_dir=tmp_path / "data", token="t" * 32), [str(src)], None)
    assert [k for _, k in hooks] == ["load", "run"] and hooks[-1][0] is None


def test_each_announcement_is_said_at_its_next_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    import numba

    from neardup import _jit

    said: list[str] = []
    monkeypatch.setattr(_jit._stats, "announce", None)
    for kind in ("load", "serve"):

        def add(x):  # type: ignore[no-untyped-def]
            return x + 1

        add.__module__ = "neardup.test_fake"  # counted like a neardup kernel
        _jit.announce_compiles(said.append, kind)
        assert numba.njit(add)(1) == 2 and numba.njit(add)(2.5) == 3.5  # two compiles each
    assert said == [_jit.compile_notice("load"), _jit.compile_notice("serve")]
    assert _jit._stats.announce is None


def test_a_served_data_folder_is_refused_whole(tmp_path: Path, capsys) -> None:
    """The docs say `store load` and `store repair` need the server stopped (exit 5); the
    namespaces' own locks covered only those the server had opened, so a load into a new
    namespace of a served folder went ahead. The server holds the folder's serving lock; the
    store commands that write take it shared, so each refuses the other."""
    pytest.importorskip("fastapi")
    from neardup.errors import IndexStateError
    from neardup.service import create_app
    from neardup.service.config import ServiceConfig
    from neardup.service.namespaces import NamespaceRegistry, not_served
    from neardup.service.testing import serve_in_thread

    data = tmp_path / "data"
    src = _write(tmp_path / "s.jsonl", _records(5))
    with serve_in_thread(create_app(ServiceConfig(data_dir=data, token="t"))):
        assert main(["store", "load", str(data), str(src), "--namespace", "new", "-q"]) == 5
        assert "served by a running neardup serve" in capsys.readouterr().err
        assert not (data / "namespaces" / "new").exists()
        assert main(["store", "repair", str(data)]) == 5
    assert main(["store", "load", str(data), str(src), "--namespace", "new", "-q"]) == 0
    with not_served(data), pytest.raises(IndexStateError, match="store command"):
        NamespaceRegistry(ServiceConfig(data_dir=data, token="t")).open()
