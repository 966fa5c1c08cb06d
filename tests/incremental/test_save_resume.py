"""``neardup dedup NEW --save STORE`` that stops while saving its kept documents is finished with
``--resume`` (:class:`neardup.incremental.journal.SaveJournal`): what it had stored is removed
and the run made again, so the store and the output equal an uninterrupted run's. Until then a
plain rerun, a load into the store and a resume with other inputs or reading options are
refused, an ``--against`` run warns, and rows another writer added after the stop stay.
Stopped in process by a failing save, and by SIGKILL of a real ``neardup dedup`` process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from neardup.cli.main import main
from neardup.errors import ConfigError, InputError
from neardup.incremental import dedup_against, load_files
from neardup.incremental.journal import DEDUP_SAVE, JOURNAL_NAME, LoadJournal
from tests.incremental.test_seed import _records, _stored, _write


class Stop(Exception):
    """The test's stand-in for a kill."""


def _save(new: Path, store: Path, out: Path, **kw: Any) -> dict[str, Any]:
    return dedup_against(new, store, output=out, save=True, **kw)


def _texts(store: Path) -> dict[str, str]:
    return {i: r["text"] for i, r in _stored(store).items()}


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two inputs (the sample's first 600 records, then the rest) and what saving one after
    the other stores and writes."""
    base = tmp_path_factory.mktemp("whole")
    rows = _records()
    first = _write(base / "first.jsonl", rows[:600])
    later = _write(base / "later.jsonl", rows[600:])
    store = base / "store"
    _save(first, store, base / "first.out.jsonl")
    stats = _save(later, store, base / "later.out.jsonl")
    assert stats["saved"] and not (store / JOURNAL_NAME).exists()
    return {
        "first": first,
        "later": later,
        "texts": _texts(store),
        "output": (base / "later.out.jsonl").read_text(encoding="utf-8"),
        "kept": stats["kept"],
    }


def _stop_saving(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the next save stop after its first load of 40 kept documents."""
    import neardup.incremental.stored as stored
    from neardup.online import Deduplicator

    real = Deduplicator.load_prepared
    calls = {"n": 0}

    def load_prepared(self: Any, *a: Any, **k: Any) -> Any:
        calls["n"] += 1
        if calls["n"] > 1:
            raise Stop("saving")
        return real(self, *a, **k)

    monkeypatch.setattr(stored, "LOAD_CHUNK", 40)
    monkeypatch.setattr(Deduplicator, "load_prepared", load_prepared)


def test_a_save_that_stopped_is_refused_until_resumed_and_then_equals_an_uninterrupted_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whole: dict[str, Any]
) -> None:
    from neardup.online import Deduplicator

    store, out = tmp_path / "store", tmp_path / "later.out.jsonl"
    _save(whole["first"], store, tmp_path / "first.out.jsonl")
    before = _texts(store)
    with monkeypatch.context() as m:
        _stop_saving(m)
        with pytest.raises(Stop):
            _save(whole["later"], store, out)
    journal = LoadJournal.read(store)
    assert journal is not None and journal.command == DEDUP_SAVE
    stopped = _texts(store)
    assert len(stopped) == len(before) + 40  # the first load of 40 reached the store
    assert not out.exists()  # the outputs are published after the save only
    # refused until finished, saying how; nothing changes
    with pytest.raises(InputError, match="--resume") as refused:
        _save(whole["later"], store, out)
    assert "a rerun of the same inputs then refuses the ids it stored" in str(refused.value)
    with pytest.raises(InputError, match=f"finish it first with {DEDUP_SAVE} --resume"):
        load_files(whole["later"], store)
    with pytest.raises(ConfigError, match="on_error 'fail' then, 'skip' now"):
        _save(whole["later"], store, out, resume=True, on_error="skip")
    with pytest.raises(InputError, match="not in it"):
        _save([whole["later"], whole["first"]], store, out, resume=True)
    assert _texts(store) == stopped
    # an --against run compares with the store as it is, and says so
    fresh = _write(tmp_path / "fresh.jsonl", [dict(r, id=f"new-{k}") for k, r in
                                              enumerate(_records(50))])  # fmt: skip
    against = dedup_against(fresh, store, output=tmp_path / "a.jsonl", save=False)
    assert any("stopped while saving" in w for w in against["warnings"]), against["warnings"]
    # a server's insert after the stop is not the run's to remove
    foreign = {"id": "server-1", "text": "zq vexillology quokka marmalade " * 12}
    with Deduplicator.open(store) as d:
        assert not d.check_and_add(foreign).duplicate
    stats = _save(whole["later"], store, out, resume=True)
    assert stats["resumed"] == {"removed": 40}
    after = _texts(store)
    assert after.pop("server-1") == foreign["text"]
    assert after == whole["texts"]
    assert out.read_text(encoding="utf-8") == whole["output"]
    assert stats["kept"] == whole["kept"]
    assert not (store / JOURNAL_NAME).exists()
    # done: a resume with nothing stopped, into a store that holds documents, is refused
    with pytest.raises(InputError, match=f"no {DEDUP_SAVE} into"):
        _save(whole["later"], store, tmp_path / "again.jsonl", resume=True)


def test_a_save_that_stopped_before_storing_anything_leaves_no_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whole: dict[str, Any]
) -> None:
    """A save that raised before any of its documents was stored leaves the store as it was:
    nothing to finish, so no journal, and a plain rerun saves."""
    import neardup.incremental.stored as stored
    from neardup.online import Deduplicator

    store = tmp_path / "store"
    _save(whole["first"], store, tmp_path / "first.out.jsonl")

    def fails(self: Any, *a: Any, **k: Any) -> Any:
        raise Stop("disk full")

    with monkeypatch.context() as m:
        m.setattr(stored, "LOAD_CHUNK", 40)
        m.setattr(Deduplicator, "load_prepared", fails)
        with pytest.raises(Stop):
            _save(whole["later"], store, tmp_path / "later.out.jsonl")
    assert not (store / JOURNAL_NAME).exists()
    _save(whole["later"], store, tmp_path / "later.out.jsonl")
    assert _texts(store) == whole["texts"]


def test_resume_without_save_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], whole: dict[str, Any]
) -> None:
    out = tmp_path / "o.jsonl"
    code = main(["dedup", str(whole["later"]), "-o", str(out), "--resume"])
    err = capsys.readouterr().err
    assert code != 0 and "pass --save STORE" in err and not out.exists()
    with pytest.raises(ConfigError, match="--against only reads"):
        dedup_against(whole["later"], tmp_path, output=out, save=False, resume=True)


def _files(store: Path) -> dict[str, int]:
    """The store's files and their sizes, its journal left out."""
    return {p.name: p.stat().st_size for p in store.iterdir() if p.name != JOURNAL_NAME}


@pytest.mark.parametrize("when", ["as its save begins", "once its save wrote to the store"])
def test_a_dedup_save_process_killed_while_saving_and_resumed_equals_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], whole: dict[str, Any], when: str
) -> None:
    """A real ``neardup dedup NEW --save STORE`` process SIGKILLed as soon as its journal says
    the save began (before its first row is stored), or as soon as a file of the store changed
    after that (a segment or the database part way written); then ``--resume`` in this
    process: the store and the output equal the uninterrupted run's. (The rows of a load are
    committed a few milliseconds before such a small run publishes its outputs and removes its
    journal, too short a window to kill in reliably: a save stopped after its rows were
    committed is the in-process test's.)"""
    store, out = tmp_path / "store", tmp_path / "later.out.jsonl"
    _save(whole["first"], store, tmp_path / "first.out.jsonl")
    cmd = [sys.executable, "-m", "neardup", "dedup", str(whole["later"]), "-o", str(out)]
    cmd += ["--save", str(store), "-q"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    try:
        began: dict[str, int] | None = None
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the run ended ({proc.returncode}) before it was killed {when}")
            if time.monotonic() > deadline:
                pytest.fail(f"the run was not {when} in time")
            if began is None and (store / JOURNAL_NAME).exists():
                began = _files(store)
            if began is not None and (when == "as its save begins" or _files(store) != began):
                break
            time.sleep(0.0005)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists() and (store / JOURNAL_NAME).exists()
    summary = tmp_path / "summary.json"
    code = main(
        ["dedup", str(whole["later"]), "-o", str(out), "--save", str(store), "--resume", "-q",
         "--summary-json", str(summary)]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert "resumed" in json.loads(summary.read_text(encoding="utf-8"))
    assert _texts(store) == whole["texts"]
    assert out.read_text(encoding="utf-8") == whole["output"]
    assert not (store / JOURNAL_NAME).exists()
