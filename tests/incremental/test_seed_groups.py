"""A file load in groups (``neardup store load --chunk-docs``, :mod:`neardup.incremental.survey`;
issue 36): inputs holding more than a group are checked file by file first and then loaded a
group at a time (whole files, and a file holding more than a group in slices). The kept set is the one a single group (and ``check_and_add``
one by one) keeps; whatever the load would refuse in any file (an id repeated across files, a
time outside the window) is refused before anything is written; a file that changes between the
two reads is refused, and what was loaded before it is said."""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.cli.main import main
from neardup.errors import InputError
from neardup.incremental import load_files
from tests.incremental.test_seed import _one_by_one, _records, _stored, _write


def _shards(folder: Path, rows: list[dict], sizes: list[int]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out, lo = [], 0
    for k, n in enumerate(sizes):
        out.append(_write(folder / f"part-{k:03d}.jsonl", rows[lo : lo + n]))
        lo += n
    assert lo == len(rows)
    return out


def _sizes(n: int, parts: int) -> list[int]:
    step = -(-n // parts)
    return [min(step, n - lo) for lo in range(0, n, step)]


def _timed_records() -> tuple[list[dict], float]:
    """The sample's records, each with a time (``ts``) a second after the one before."""
    rows = _records()
    now = time.time()
    for k, r in enumerate(rows):
        r["ts"] = now - 3600 + k
    return rows, now


def _load(
    tmp_path: Path, capsys, source: Path, mode: str, flags: list[str], chunk: int,
    rows: list[dict], now: float,
) -> tuple[dict, set[str]]:  # fmt: skip
    """``neardup store load`` of ``source`` (``_timed_records``) with ``--chunk-docs chunk``:
    its summary and the ids it stored, each stored with its record's time."""
    data = tmp_path / f"data-{chunk}"
    args = ["store", "load", str(data), str(source), "--candidates", mode, "--time-field", "ts"]
    assert main([*args, *flags, "--chunk-docs", str(chunk), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    stored = _stored(data / "namespaces" / "default")
    assert stats["documents"] == len(rows) and stats["loaded"] == len(stored)
    for k, r in enumerate(rows):
        if r["id"] in stored:
            assert stored[r["id"]]["time"] == pytest.approx(now - 3600 + k)
    return stats, set(stored)


def _keeps_what_one_group_keeps(
    rows: list[dict], grouped: set[str], one: set[str], mode: str, flags: list[str]
) -> None:
    assert grouped == one
    if flags:  # --as-is
        assert len(grouped) == len(rows)
    else:
        assert grouped == _one_by_one(rows, candidates=mode)


def _counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A list that gets ``"corpus"`` at every ``read_corpus`` call from now on, ``"pieces"``
    at every JSONL file read a piece at a time (``FilePieces``: the first pass's way to read
    one; one piece when it fits), and ``"records"`` at every ``read_records`` call (a slice's
    own lines)."""
    import neardup.io as nio
    import neardup.io.formats as nif
    import neardup.io.pieces as nip

    reads: list[str] = []

    def counting(name: str, real):  # type: ignore[no-untyped-def]
        def call(*a, **k):  # type: ignore[no-untyped-def]
            reads.append(name)
            return real(*a, **k)

        return call

    monkeypatch.setattr(nio, "read_corpus", counting("corpus", nio.read_corpus))
    monkeypatch.setattr(nif, "read_records", counting("records", nif.read_records))
    monkeypatch.setattr(nip, "FilePieces", counting("pieces", nip.FilePieces))
    return reads


@pytest.mark.parametrize(("mode", "flags"), [("lsh", []), ("simhash", []), ("lsh", ["--as-is"])])
def test_a_folder_loaded_in_groups_keeps_what_one_group_keeps(
    tmp_path: Path, capsys, mode: str, flags: list[str]
) -> None:
    rows, now = _timed_records()
    folder = tmp_path / "in"
    _shards(folder, rows, _sizes(len(rows), 7))
    kept: dict[int, set[str]] = {}
    for chunk in (300, 10**6):
        stats, kept[chunk] = _load(tmp_path, capsys, folder, mode, flags, chunk, rows, now)
        assert stats["groups"] == (7 if chunk == 300 else 1)  # files of ~215: one a group
    _keeps_what_one_group_keeps(rows, kept[300], kept[10**6], mode, flags)


def test_an_id_repeated_across_files_is_refused_before_anything_is_written(
    tmp_path: Path, capsys
) -> None:
    rows = _records(600)
    rows[550]["id"] = rows[20]["id"]  # the third file repeats an id of the first
    folder = tmp_path / "in"
    parts = _shards(folder, rows, [200, 200, 200])
    data = tmp_path / "data"
    args = ["store", "load", str(data), str(folder), "--chunk-docs", "250"]
    assert main(args) == 3
    err = capsys.readouterr().err
    assert f"duplicate id {rows[20]['id']!r}" in err
    assert f"first seen at {parts[0]}:21" in err and f"{parts[2]}:151" in err
    assert _stored(data / "namespaces" / "default") == {}
    # skipped, the later copy is left out: as one file read whole leaves it out
    assert main([*args, "--on-error", "skip", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["skipped_records"] == 1 and stats["groups"] == 3
    grouped = _stored(data / "namespaces" / "default")
    whole = tmp_path / "whole"
    one = _write(tmp_path / "all.jsonl", rows)
    assert main(["store", "load", str(whole), str(one), "--on-error", "skip", "-q"]) == 0
    assert set(grouped) == set(_stored(whole / "namespaces" / "default"))
    if rows[20]["id"] in grouped:
        assert grouped[rows[20]["id"]]["text"] == rows[20]["text"]


def test_a_time_outside_the_window_in_the_last_file_refuses_the_whole_load(
    tmp_path: Path, capsys
) -> None:
    rows = _records(600)
    now = time.time()
    for r in rows:
        r["ts"] = now - 60
    for r in rows[590:]:
        r["ts"] = now - 7200
    folder = tmp_path / "in"
    parts = _shards(folder, rows, [200, 200, 200])
    data = tmp_path / "data"
    args = ["store", "load", str(data), str(folder), "--chunk-docs", "200", "--time-field", "ts"]
    args += ["--retention", "1h"]
    assert main(args) == 3
    err = capsys.readouterr().err
    assert "10 documents are older than the store's retention window" in err
    assert f"{parts[2]}:191" in err
    assert _stored(data / "namespaces" / "default") == {}
    assert main([*args, "--drop-expired", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["expired"] == 10 and stats["groups"] == 3
    assert stats["loaded"] + stats["dropped"] == 590


def _refused_after_a_change(source: Path, store: Path, change: Callable[[], None]) -> str:
    """``load_files`` of ``source`` into ``store`` in groups of 200, with ``change`` made once
    every file is checked (between the two reads): the message of the ``InputError`` it must
    raise."""

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "check" and done == total:
            change()

    with pytest.raises(InputError) as exc:
        load_files(source, store, chunk_docs=200, progress=progress)
    return str(exc.value)


def test_a_file_changed_between_the_two_reads_is_refused_and_what_loaded_is_said(
    tmp_path: Path,
) -> None:
    """The files are read again for the load: one whose ids are not those checked is refused,
    and the message says which groups the store already holds."""
    rows = _records(600)
    folder = tmp_path / "in"
    parts = _shards(folder, rows, [200, 200, 200])
    changed = [dict(r, id=f"new-{k}") for k, r in enumerate(rows[400:])]
    store = tmp_path / "s"
    msg = _refused_after_a_change(folder, store, lambda: _write(parts[2], changed))  # the last
    assert f"{parts[2]} changed after it was checked" in msg
    assert "2 of 3 groups were loaded before it" in msg
    assert f"Remove {store / 'LOAD-JOURNAL.json'} and load the files from {parts[2]} on" in msg
    assert set(_stored(store)) == _one_by_one(rows[:400])


def test_a_sliced_file_changed_between_the_reads_is_refused_at_its_slice(tmp_path: Path) -> None:
    """Each slice of a JSONL file checks its records' ids against the first read's: a change
    inside the file's third slice leaves the first two slices loaded, and says where to take
    up again."""
    rows = _records(550)
    one = _write(tmp_path / "all.jsonl", rows)
    changed = [dict(r, id=f"new-{k}") if k == 450 else r for k, r in enumerate(rows)]
    store = tmp_path / "s"  # slices 0:200, 200:400, 400:550; record 451 gets another id
    msg = _refused_after_a_change(one, store, lambda: _write(one, changed))
    assert f"{one} changed after it was checked: its records 401 to 550" in msg
    assert "2 of 3 groups were loaded before it" in msg
    assert f"Remove {store / 'LOAD-JOURNAL.json'} and load the records from {one}:401 on" in msg
    assert set(_stored(store)) == _one_by_one(rows[:400])


@pytest.mark.parametrize("how", ["emptied", "removed"])
def test_a_sliced_file_emptied_or_removed_after_the_check_is_refused(
    tmp_path: Path, how: str
) -> None:
    rows = _records(450)
    one = _write(tmp_path / "all.jsonl", rows)
    store = tmp_path / "s"
    msg = _refused_after_a_change(
        one, store, lambda: one.write_text("") if how == "emptied" else one.unlink()
    )
    said = "it is gone" if how == "removed" else "its records 1 to 200 now hold 0 records"
    assert f"{one} changed after it was checked: {said}" in msg
    assert "0 of 3 groups were loaded before it" in msg
    assert _stored(store) == {}
    assert not (store / "LOAD-JOURNAL.json").exists()  # nothing stored: nothing to resume


def test_an_id_repeated_after_a_sliced_file_names_its_first_line(tmp_path: Path, capsys) -> None:
    """Where the first copy of a repeated id is in a file cut into slices, its line is found
    from the first read's lines (the file's records are not held)."""
    rows = _records(600)
    rows[550]["id"] = rows[300]["id"]
    folder = tmp_path / "in"
    parts = _shards(folder, rows, [500, 100])
    data = tmp_path / "data"
    assert main(["store", "load", str(data), str(folder), "--chunk-docs", "200"]) == 3
    err = capsys.readouterr().err
    assert f"duplicate id {rows[300]['id']!r}" in err
    assert f"first seen at {parts[0]}:301" in err and f"{parts[1]}:51" in err
    assert _stored(data / "namespaces" / "default") == {}


def test_one_group_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An input that fits one group is held from the first pass, not read again."""
    rows = _records(300)
    folder = tmp_path / "in"
    _shards(folder, rows, [100, 100, 100])
    reads = _counted_reads(monkeypatch)
    stats = load_files(folder, tmp_path / "s")
    assert reads == ["pieces"] * 3 and stats["groups"] == 1
    reads.clear()
    stats = load_files(folder, tmp_path / "s2", chunk_docs=150)
    assert reads == ["pieces"] * 3 + ["corpus"] * 3 and stats["groups"] == 3


def test_stdin_is_one_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    rows = _records(300)
    raw = "".join(json.dumps(r) + "\n" for r in rows).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw)))
    data = tmp_path / "data"
    assert main(["store", "load", str(data), "-", "--chunk-docs", "50", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["groups"] == 1 and stats["documents"] == 300
    assert set(_stored(data / "namespaces" / "default")) == _one_by_one(rows)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.booleans(), max_size=60), max_size=12), st.integers(1, 25))
def test_groups_cover_the_files_in_order_within_the_bound(
    uses: list[list[bool]], chunk: int
) -> None:
    """Whole files while they fit (greedily), a file holding more than a group in slices of
    exactly ``chunk`` documents to decide (its last slice: the rest); every record once, in
    input order."""
    from neardup.incremental.survey import FileCheck, Survey

    files = [
        FileCheck(file=k, documents=len(u), reader_skipped=0, use=np.array(u, np.bool_),
                  expired=np.zeros(len(u), np.bool_), times=None, digest=(len(u), 0, 0))
        for k, u in enumerate(uses)
    ]  # fmt: skip
    groups = Survey(files, 0).groups(chunk)
    parts = [p for g in groups for p in g]
    assert all(groups)
    # every file's records, once, in order: its parts are contiguous from 0 to its end
    assert [p.check.file for p in parts] == sorted(p.check.file for p in parts)
    for f in files:
        mine = [(p.lo, p.hi) for p in parts if p.check is f]
        assert mine[0][0] == 0 and mine[-1][1] == f.documents
        for a, b in itertools.pairwise(mine):
            assert a[0] < a[1] == b[0]
        assert [p.last for p in parts if p.check is f] == [False] * (len(mine) - 1) + [True]

    def used(p) -> int:  # type: ignore[no-untyped-def]
        return int(p.check.use[p.lo : p.hi].sum())

    for g in groups:
        assert sum(used(p) for p in g) <= chunk
    for f in files:
        mine = [p for p in parts if p.check is f]
        n = int(f.use.sum())
        if n <= chunk:
            assert len(mine) == 1  # a file that fits is never cut
        else:
            assert [used(p) for p in mine[:-1]] == [chunk] * (len(mine) - 1)
            assert all(len(g) == 1 for g in groups if g[0] in mine[:-1])
    for a, b in itertools.pairwise(groups):  # greedy: the next whole file did not fit
        if b[0].lo == 0 and b[0].last:
            assert sum(used(p) for p in a) + used(b[0]) > chunk


def _gz(path: Path) -> Path:
    out = path.with_name(path.name + ".gz")
    out.write_bytes(gzip.compress(path.read_bytes()))
    path.unlink()
    return out


def _csv(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


@pytest.mark.parametrize(
    ("mode", "flags", "kind", "pieces"),
    [
        ("lsh", [], "jsonl", False), ("simhash", [], "jsonl", False),
        ("lsh", ["--as-is"], "jsonl", False), ("lsh", [], "jsonl.gz", False),
        ("lsh", [], "csv", False), ("lsh", [], "jsonl", True), ("simhash", [], "jsonl.gz", True),
    ],
)  # fmt: skip
def test_one_file_is_loaded_in_slices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, mode: str, flags: list[str],
    kind: str, pieces: bool,
) -> None:  # fmt: skip
    """A file holding more than a group is cut into slices of ``--chunk-docs``: the kept set is
    the one a single group keeps. A JSONL file is read once (checked: whole, or a piece at a
    time where it is larger than a piece), then each slice parses its own lines; a compressed
    one is uncompressed once, and the copy is gone after the load. Another format's file is
    read twice in all (checked, then loaded), not once a slice."""
    import neardup.io.formats as nif
    import neardup.io.pieces as nip

    rows, now = _timed_records()
    if kind == "csv":
        one = _csv(tmp_path / "all.csv", rows)
    else:
        one = _write(tmp_path / "all.jsonl", rows)
        if pieces:  # about six pieces
            monkeypatch.setattr(nip, "PIECE_BYTES", one.stat().st_size // 6)
        one = _gz(one) if kind == "jsonl.gz" else one
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # where an uncompressed copy goes
    reads = _counted_reads(monkeypatch)
    made = nip.FilePieces
    read_in: list[Any] = []  # every FilePieces made: how many pieces each read

    def reading(*a, **k):  # type: ignore[no-untyped-def]
        read_in.append(made(*a, **k))
        return read_in[-1]

    monkeypatch.setattr(nip, "FilePieces", reading)
    copies: list[int] = []  # uncompressed copies there while each slice is read
    counted = nif.read_records

    def seeing(*a, **k):  # type: ignore[no-untyped-def]
        copies.append(sum(p.name.startswith("neardup-input-") for p in temp.iterdir()))
        return counted(*a, **k)

    monkeypatch.setattr(nif, "read_records", seeing)
    kept: dict[int, set[str]] = {}
    slices = -(-len(rows) // 400)
    for chunk in (400, 10**6):
        reads.clear()
        stats, kept[chunk] = _load(tmp_path, capsys, one, mode, flags, chunk, rows, now)
        assert stats["groups"] == (slices if chunk == 400 else 1)
        if kind == "csv":
            assert reads == ["corpus"] * (1 if chunk == 10**6 else 2)
        elif chunk == 10**6 and not pieces:  # one group: held from the first read
            assert reads == ["pieces"]
        else:  # (a file of many pieces is read again even as one group: it is not held)
            assert reads == ["pieces"] + ["records"] * (slices if chunk == 400 else 1)
        assert not [p for p in temp.iterdir() if p.name.startswith("neardup-input-")]
    if kind != "csv":
        counts = [fp.pieces for fp in read_in]  # one FilePieces a load
        assert len(counts) == 2 and (min(counts) >= 5 if pieces else counts == [1, 1])
    assert copies == [1 if kind == "jsonl.gz" else 0] * reads_of_records(kind, pieces, slices)
    _keeps_what_one_group_keeps(rows, kept[400], kept[10**6], mode, flags)


def reads_of_records(kind: str, pieces: bool, slices: int) -> int:
    """``read_records`` calls of the two loads of :func:`test_one_file_is_loaded_in_slices`."""
    return 0 if kind == "csv" else slices + (1 if pieces else 0)


def test_a_change_after_a_sliced_file_says_where_to_take_up_again(tmp_path: Path) -> None:
    """A file after a sliced one changes between the reads: the store holds the slices loaded
    before, and the message names the record to take up again from, not the sliced file's
    start (whose first records are stored)."""
    rows = _records(550)
    folder = tmp_path / "in"
    parts = _shards(folder, rows, [500, 50])
    changed = [dict(r, id=f"new-{k}") for k, r in enumerate(rows[500:])]
    store = tmp_path / "s"  # groups: 0:200, 200:400, 400:500 with the 50
    msg = _refused_after_a_change(folder, store, lambda: _write(parts[1], changed))
    assert f"{parts[1]} changed after it was checked" in msg
    assert "2 of 3 groups were loaded before it" in msg
    assert (
        f"Remove {store / 'LOAD-JOURNAL.json'} and load the records from {parts[0]}:401 on" in msg
    )
    assert set(_stored(store)) == _one_by_one(rows[:400])


def test_id_hashes_tell_ids_apart_and_the_digest_follows_order() -> None:
    from neardup.incremental.survey import id_digest, id_hashes

    ids = ["a", "b", "\udc80lone", "ü" * 3, "1"]
    h = id_hashes(ids)
    assert h.shape == (5, 2) and len({tuple(x) for x in h.tolist()}) == 5
    assert np.array_equal(id_hashes(ids), h)
    assert id_digest(h) != id_digest(h[::-1]) and id_digest(h) == id_digest(id_hashes(list(ids)))
    assert id_digest(h[:0]) == (0, 0, 0)


@pytest.mark.parametrize(("lo", "hi"), [(500, 510), (400, 600)])  # the last group: some, all
def test_times_that_leave_the_window_during_the_load_are_left_out_as_expired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lo: int, hi: int
) -> None:
    """A load of hours: a time in the window when the files were checked may have left it when
    its group loads. Those documents are left out and counted as expired (retention would drop
    them at once), not refused after the earlier groups loaded. The window's clock is moved
    ten minutes on once every file is checked."""
    from neardup.online import Deduplicator

    rows = _records(600)
    now = time.time()
    for k, r in enumerate(rows):
        r["ts"] = now - 1800 + k
    for r in rows[lo:hi]:  # in the last file, at the window's old edge
        r["ts"] = now - 3600 + 300
    folder = tmp_path / "in"
    _shards(folder, rows, [200, 200, 200])
    real = Deduplicator.time_window
    shift = [0.0]

    def moved(self: Deduplicator) -> tuple[float, float]:
        oldest, newest = real(self)
        return oldest + shift[0], newest + shift[0]

    monkeypatch.setattr(Deduplicator, "time_window", moved)

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "check" and done == total:
            shift[0] = 600.0

    from neardup.online.settings import DedupSettings
    from neardup.store import StoreSettings

    store = tmp_path / "s"
    stats = load_files(
        folder, store, chunk_docs=200, time_field="ts", progress=progress,
        settings=DedupSettings(store=StoreSettings(retention=3600.0)),
    )  # fmt: skip
    assert stats["groups"] == 3 and stats["expired"] == hi - lo
    assert stats["loaded"] + stats["dropped"] + stats["expired"] == 600
    stored = _stored(store)
    assert not {r["id"] for r in rows[lo:hi]} & set(stored)
    assert set(stored) == _one_by_one(rows[:lo] + rows[hi:])


def _pieces_of(monkeypatch: pytest.MonkeyPatch, path: Path, n: int) -> None:
    """Read ``path`` in about ``n`` pieces by the first pass from now on."""
    import neardup.io.pieces as nip

    monkeypatch.setattr(nip, "PIECE_BYTES", path.stat().st_size // n)


def test_an_id_repeated_between_pieces_of_one_file_is_found_as_the_whole_read_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A file read in pieces by the first pass: an id repeated in a later piece is refused
    before anything is written, naming both lines, and skipped it is left out; the kept set is
    the one of the file read whole."""
    rows = _records(600)
    rows[550]["id"] = rows[20]["id"]
    one = _write(tmp_path / "all.jsonl", rows)
    data = tmp_path / "data"
    args = ["store", "load", str(data), str(one), "--chunk-docs", "250"]
    whole = tmp_path / "whole"
    assert main(["store", "load", str(whole), str(one), "--on-error", "skip", "-q"]) == 0
    assert main(["store", "load", str(whole / "f"), str(one), "--chunk-docs", "250"]) == 3
    said = capsys.readouterr().err  # read whole: the reader's own refusal
    _pieces_of(monkeypatch, one, 6)
    assert main(args) == 3
    err = capsys.readouterr().err
    assert f"duplicate id {rows[20]['id']!r} (first seen at {one}:21)" in err
    assert f"{one}:551" in err and f"{one}:551" in said
    assert _stored(data / "namespaces" / "default") == {}
    assert main([*args, "--on-error", "skip", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["skipped_records"] == 1 and stats["groups"] == 3
    assert stats["documents"] == 599  # as the whole file's reader counts: one skipped
    grouped = _stored(data / "namespaces" / "default")
    assert set(grouped) == set(_stored(whole / "namespaces" / "default"))


def test_a_time_in_a_later_piece_is_refused_at_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    rows = _records(600)
    now = time.time()
    for r in rows:
        r["ts"] = now - 60
    for r in rows[590:]:
        r["ts"] = now - 7200
    one = _write(tmp_path / "all.jsonl", rows)
    _pieces_of(monkeypatch, one, 5)
    data = tmp_path / "data"
    args = ["store", "load", str(data), str(one), "--chunk-docs", "200", "--time-field", "ts"]
    assert main([*args, "--retention", "1h"]) == 3
    err = capsys.readouterr().err
    assert "10 documents are older than the store's retention window" in err
    assert f"{one}:591" in err
    assert _stored(data / "namespaces" / "default") == {}
