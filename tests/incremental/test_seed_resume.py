"""A load in groups that stops part way finishes where it stopped (``neardup store load
--resume``, ``serve --seed`` on its next start; :mod:`neardup.incremental.journal`): the store
it leaves holds what an uninterrupted load stores, whether it stopped between groups, inside a
group (what that group had loaded is removed and the group decided again) or in the final
merge; a plain load into such a store is refused, as is a resumed one with other inputs or
options. Stopped in process here by a failing step, and by SIGKILL of a real
``neardup store load`` process."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from neardup.cli.main import main
from neardup.errors import ConfigError, CorruptFileError, InputError
from neardup.incremental import load_files
from neardup.incremental.journal import JOURNAL_NAME, LoadJournal
from neardup.online.settings import DedupSettings
from neardup.store import StoreSettings
from tests.incremental.test_seed import _records, _stored
from tests.incremental.test_seed_groups import _shards, _sizes


class Stop(Exception):
    """The test's stand-in for a kill."""


def _timed(copies: int = 1) -> list[dict[str, Any]]:
    """The sample's records (``copies`` times, the copies with ids of their own), each with a
    time a second after the one before."""
    now = time.time()
    rows = [
        dict(r, id=f"{r['id']}~{c}" if c else r["id"]) for c in range(copies) for r in _records()
    ]
    for k, r in enumerate(rows):
        r["ts"] = now - 7200 + k
    return rows


def _settings(mode: str) -> DedupSettings:
    return DedupSettings(candidates=mode, store=StoreSettings(retention=3 * 3600.0))


def _load(folder: Path, store: Path, mode: str, **kw: Any) -> dict[str, Any]:
    return load_files(
        folder, store, settings=_settings(mode), time_field="ts", chunk_docs=300, **kw
    )


def _rows_of(store: Path) -> dict[str, tuple[str, float]]:
    return {i: (r["text"], r["time"]) for i, r in _stored(store).items()}


def _stop_at(monkeypatch: pytest.MonkeyPatch, where: str, mode: str) -> None:
    """Make the next load (groups of 300: one file each) stop ``where``: before its third
    group is decided, in its third group after some of that group's kept documents reached
    the store (an ``lsh`` store loads them in chunks, here of 40; a ``simhash`` store inserts
    them with ``check_and_add``, here 100 a call), or in the final merge."""
    import neardup.incremental.run as run
    import neardup.incremental.seed as seed
    import neardup.incremental.stored as stored
    from neardup.online import Deduplicator

    def stopping(real: Any, after: int) -> Any:
        calls = {"n": 0}

        def call(*a: Any, **k: Any) -> Any:
            calls["n"] += 1
            if calls["n"] > after:
                raise Stop(where)
            return real(*a, **k)

        return call

    if where == "in the final merge":
        monkeypatch.setattr(Deduplicator, "compact", stopping(Deduplicator.compact, 0))
    elif mode == "lsh" and where == "between groups":
        monkeypatch.setattr(run, "dedup_into", stopping(run.dedup_into, 2))
    elif mode == "lsh":  # the third group's second load of 40
        monkeypatch.setattr(stored, "LOAD_CHUNK", 40)
        first_two = sum(-(-n // 40) for n in _KEPT[mode][:2])
        load = stopping(Deduplicator.load_prepared, first_two + 1)
        monkeypatch.setattr(Deduplicator, "load_prepared", load)
    else:  # simhash: a group is one call of check_and_add, or three of 100
        inside = where == "inside a group"
        if inside:
            monkeypatch.setattr(seed, "ADD_CHUNK", 100)
        add = stopping(Deduplicator.check_and_add, 7 if inside else 2)
        monkeypatch.setattr(Deduplicator, "check_and_add", add)


def _stopped(
    monkeypatch: pytest.MonkeyPatch, folder: Path, store: Path, where: str, mode: str, **kw: Any
) -> None:
    """A load of ``folder`` into ``store`` stopped ``where`` (:func:`_stop_at`)."""
    with monkeypatch.context() as m:
        _stop_at(m, where, mode)
        with pytest.raises(Stop):
            _load(folder, store, mode, **kw)


#: per mode, how many documents each group of 300 keeps (the uninterrupted load's)
_KEPT: dict[str, list[int]] = {}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The folder of shards (five of 300), and per mode what an uninterrupted load stores."""
    base = tmp_path_factory.mktemp("whole")
    rows = _timed()
    folder = base / "in"
    _shards(folder, rows, _sizes(len(rows), 5))
    out: dict[str, Any] = {"folder": folder, "rows": rows}
    for mode in ("lsh", "simhash"):
        store = base / f"store-{mode}"
        stats = _load(folder, store, mode)
        assert stats["groups"] == 5 and not (store / JOURNAL_NAME).exists()
        out[mode] = _rows_of(store)
        ids = [r["id"] for r in rows]
        _KEPT[mode] = [sum(i in out[mode] for i in ids[g * 300 : (g + 1) * 300]) for g in range(5)]
    return out


@pytest.mark.parametrize("mode", ["lsh", "simhash"])
@pytest.mark.parametrize("where", ["between groups", "inside a group", "in the final merge"])
def test_a_stopped_load_resumed_stores_what_an_uninterrupted_one_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uninterrupted: dict[str, Any],
    mode: str, where: str,
) -> None:  # fmt: skip
    folder = uninterrupted["folder"]
    store = tmp_path / "s"
    _stopped(monkeypatch, folder, store, where, mode)
    journal = LoadJournal.read(store)
    assert journal is not None
    if where == "in the final merge":
        assert journal.file == 5 and journal.groups_done == 5  # every document decided
    else:
        assert (journal.file, journal.record, journal.groups_done) == (2, 0, 2)
    stopped = _rows_of(store)
    assert journal.loaded == sum(_KEPT[mode][: journal.groups_done])
    if where == "inside a group":  # the third group had stored some of its kept documents
        assert len(stopped) > journal.loaded
    # a plain load is refused, saying how to finish; nothing changes
    with pytest.raises(InputError, match="--resume"):
        _load(folder, store, mode)
    assert _rows_of(store) == stopped
    stats = _load(folder, store, mode, resume=True)
    assert _rows_of(store) == uninterrupted[mode]
    assert not (store / JOURNAL_NAME).exists()
    resumed = stats["resumed"]
    assert resumed["groups"] == journal.groups_done and resumed["loaded"] == journal.loaded
    assert resumed["removed"] == len(stopped) - journal.loaded
    assert resumed["documents"] == (1500 if where == "in the final merge" else 600)
    assert stats["loaded"] + journal.loaded == len(uninterrupted[mode])
    assert stats["skipped_records"] == 0
    # done: a resume without a stopped load, into a store that holds documents, is refused
    with pytest.raises(InputError, match="no load into"):
        _load(folder, store, mode, resume=True)


def test_a_resume_keeps_what_another_writer_added_after_the_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uninterrupted: dict[str, Any]
) -> None:
    """A server opened on the store between the stop and the resume (it warns, and serves)
    acknowledges inserts whose row ids come after the stopped group's: the resume removes the
    stopped group's own rows only, so those inserts stay stored."""
    from neardup.online import Deduplicator

    folder = uninterrupted["folder"]
    store = tmp_path / "s"
    _stopped(monkeypatch, folder, store, "inside a group", "lsh")
    journal = LoadJournal.read(store)
    assert journal is not None
    stopped = _rows_of(store)
    own = len(stopped) - journal.loaded  # what the stopped group stored
    assert own > 0
    foreign = [
        {"id": f"server-{k}", "text": f"zq{k} vexillology quokka {k} " * 12, "time": time.time()}
        for k in range(3)
    ]
    with Deduplicator.open(store, _settings("lsh")) as d:
        assert all(not x.duplicate for x in d.check_and_add(foreign))
    stats = _load(folder, store, "lsh", resume=True)
    after = _rows_of(store)
    assert stats["resumed"]["removed"] == own
    assert {k: after[k] for k in after if not k.startswith("server-")} == uninterrupted["lsh"]
    assert sorted(k for k in after if k.startswith("server-")) == [x["id"] for x in foreign]


def test_a_dedup_save_into_a_store_whose_load_stopped_is_refused_naming_the_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uninterrupted: dict[str, Any]
) -> None:
    """The journal names the command that stopped: ``neardup dedup --save`` (with or without
    ``--resume``) into a store whose ``neardup store load`` stopped is refused, naming
    ``neardup store load --resume``, and changes nothing."""
    from neardup.incremental import dedup_against

    folder = uninterrupted["folder"]
    store = tmp_path / "s"
    _stopped(monkeypatch, folder, store, "between groups", "lsh")
    stopped = _rows_of(store)
    new = tmp_path / "new.jsonl"
    new.write_text(
        "".join(
            json.dumps({"id": f"n{k}", "text": f"fresh words {k} " * 9}) + "\n" for k in range(20)
        ),
        encoding="utf-8",
    )
    for resume in (False, True):
        with pytest.raises(InputError, match="finish it first with neardup store load --resume"):
            dedup_against(new, store, output=tmp_path / "o.jsonl", save=True, resume=resume)
    assert _rows_of(store) == stopped and not (tmp_path / "o.jsonl").exists()


def test_a_resume_is_refused_with_other_inputs_or_options_or_a_damaged_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uninterrupted: dict[str, Any]
) -> None:
    folder = tmp_path / "in"
    _shards(folder, uninterrupted["rows"], _sizes(1500, 5))
    store = tmp_path / "s"
    _stopped(monkeypatch, folder, store, "between groups", "lsh")
    with pytest.raises(ConfigError, match="drop_expired False then, True now"):
        _load(folder, store, "lsh", resume=True, drop_expired=True)
    shard = sorted(folder.iterdir())[3]
    shard.write_text(shard.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=f"changed: {shard}"):
        _load(folder, store, "lsh", resume=True)
    (store / JOURNAL_NAME).write_text('{"body": {}, "crc32": 1}', encoding="utf-8")
    with pytest.raises(CorruptFileError, match=JOURNAL_NAME):
        _load(folder, store, "lsh", resume=True)


def test_inputs_are_named_by_their_bytes_not_their_modification_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uninterrupted: dict[str, Any]
) -> None:
    """A shard written again byte for byte (a restored backup, a new download: a new
    modification time) is the same input, and the resume finishes the load; a shard whose
    bytes changed while its size and modification time did not is refused."""
    folder = tmp_path / "in"
    _shards(folder, uninterrupted["rows"], _sizes(1500, 5))
    store = tmp_path / "s"
    _stopped(monkeypatch, folder, store, "between groups", "lsh")
    first, other = sorted(folder.iterdir())[:2]
    body = first.read_bytes()
    first.unlink()
    first.write_bytes(body)
    os.utime(first, ns=(10**18, 10**18))
    st = other.stat()
    text = other.read_bytes()
    at = text.index(b'"text": "') + len(b'"text": "')
    swapped = text[:at] + (b"Z" if text[at : at + 1] != b"Z" else b"Y") + text[at + 1 :]
    other.write_bytes(swapped)
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(InputError, match=re.escape(f"(changed: {other})")):  # that one alone
        _load(folder, store, "lsh", resume=True)
    other.write_bytes(text)
    stats = _load(folder, store, "lsh", resume=True)
    assert stats["resumed"] and _rows_of(store) == uninterrupted["lsh"]


def test_an_input_identity_is_its_size_and_digest(tmp_path: Path) -> None:
    from neardup.incremental.journal import input_identity
    from neardup.io import plan_inputs

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(b'{"id": "1", "text": "x"}\n')
    b.write_bytes(b"")
    seen: list[tuple[str, int, int]] = []
    got = input_identity(plan_inputs([str(a), str(b)], None), lambda *p: seen.append(p))
    assert [e["size"] for e in got] == [a.stat().st_size, 0]
    assert got[0]["xxh3_128"] != got[1]["xxh3_128"] and "mtime_ns" not in got[0]
    assert seen[-1] == ("identify", a.stat().st_size, a.stat().st_size)
    os.utime(a, ns=(1, 1))
    assert input_identity(plan_inputs([str(a), str(b)], None)) == got


def test_a_resume_into_an_empty_store_loads_from_the_start(
    tmp_path: Path, uninterrupted: dict[str, Any]
) -> None:
    store = tmp_path / "s"
    stats = _load(uninterrupted["folder"], store, "lsh", resume=True)
    assert "resumed" not in stats and _rows_of(store) == uninterrupted["lsh"]


def _killed(cmd: list[str], journal: Path, groups: int, pause: bool) -> None:
    """Run ``cmd`` (a ``neardup store load``) in its own process and SIGKILL it about 0.1 s
    after its journal says ``groups`` groups are done (inside a later group, wherever it then
    is); ``pause``: SIGSTOP it first, for 0.2 s, as a machine that stalls before it dies."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"the load ended before it was killed: {proc.stderr.read()}")
            try:
                done = LoadJournal.read(journal.parent)
            except CorruptFileError:  # (being replaced: read again)
                done = None
            if done is not None and done.groups_done >= groups:
                break
            time.sleep(0.01)
        else:
            pytest.fail(f"the load did not pass {groups} groups in time")
        time.sleep(0.1)
        if pause:
            proc.send_signal(signal.SIGSTOP)
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
        assert proc.stderr is not None
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL


def test_a_store_load_process_killed_twice_and_resumed_stores_what_one_run_stores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``neardup store load`` (20 groups) in its own process, SIGKILLed inside its third group
    or so; resumed with ``--resume`` in another process, stopped (SIGSTOP) and SIGKILLed after
    its journal passed eight groups; then resumed to the end: the store holds what the same
    command run through once stores (the ids, texts and times), and a plain load in between
    is refused, naming ``--resume``."""
    rows = _timed(copies=4)
    folder = tmp_path / "in"
    _shards(folder, rows, _sizes(len(rows), 20))
    args = [str(folder), "--time-field", "ts", "--retention", "3h", "--chunk-docs", "300"]
    whole = tmp_path / "whole"
    assert main(["store", "load", str(whole), *args, "-q"]) == 0
    capsys.readouterr()
    data = tmp_path / "data"
    ns = data / "namespaces" / "default"
    cmd = [sys.executable, "-m", "neardup", "store", "load", str(data), *args, "-q"]
    _killed(cmd, ns / JOURNAL_NAME, 2, pause=False)
    assert main(["store", "load", str(data), *args, "-q"]) == 3  # refused: says --resume
    assert "--resume" in capsys.readouterr().err
    _killed([*cmd, "--resume"], ns / JOURNAL_NAME, 8, pause=True)
    stopped = LoadJournal.read(ns)
    assert stopped is not None and stopped.groups_done >= 8
    assert main(["store", "load", str(data), *args, "--resume", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["resumed"]["groups"] == stopped.groups_done
    assert not (ns / JOURNAL_NAME).exists()
    assert _rows_of(ns) == _rows_of(whole / "namespaces" / "default")


def test_serve_seed_finishes_a_seed_that_stopped_and_a_server_warns_of_one(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    uninterrupted: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``neardup serve --seed`` seeds only an empty namespace (``if_empty``), but one whose seed
    stopped part way is finished on the next start; a server opening a namespace whose load
    stopped (no ``--seed``) logs a warning that says how to finish it."""
    import logging

    from neardup.service.config import ServiceConfig
    from neardup.service.namespaces import NamespaceRegistry

    folder = uninterrupted["folder"]
    data = tmp_path / "data"
    store = data / "namespaces" / "default"
    _stopped(monkeypatch, folder, store, "inside a group", "lsh", if_empty=True)
    reg = NamespaceRegistry(ServiceConfig(data_dir=str(data), dedup=_settings("lsh")))
    with caplog.at_level(logging.WARNING, logger="neardup.service"):
        reg.open()
    reg.close()
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "a load stopped after 2 groups" in x and "neardup store load" in x and "--resume" in x
        for x in said
    ), said
    stats = _load(folder, store, "lsh", if_empty=True)  # the next start's seed
    assert stats["resumed"]["groups"] == 2 and _rows_of(store) == uninterrupted["lsh"]
    assert _load(folder, store, "lsh", if_empty=True)["path"] is None  # full: left as it is
