"""What an open checks once a boot (:mod:`neardup.store.boot`): SQLite's ``quick_check`` of
the metadata database (:func:`neardup.store.recovery.meta_check_due`) and the segments' and
their indexes' checksums, by default once per boot of the machine for a given file, so that a
restart after a process's crash does not read a large store again; always after a reboot, on
a replaced or rewritten file, or with ``verify_meta=True``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from doubles import SimpleFingerprinter, as_after_a_reboot

from neardup.errors import ConfigError, CorruptFileError
from neardup.online.deduplicator import Deduplicator
from neardup.store import StoreSettings, boot, recovery
from neardup.store.layout import read_json_file
from neardup.store.meta import MetaDB

pytestmark = pytest.mark.skipif(
    boot.boot_id() is None, reason="this system has no boot id (/proc/sys/kernel/random)"
)


def _open(path: Path, **kw: object) -> Deduplicator:
    return Deduplicator.open(path, verify=False, fingerprinter=SimpleFingerprinter(), **kw)  # type: ignore[arg-type]


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The databases each ``quick_check`` ran on, in order."""
    ran: list[Path] = []
    real = MetaDB.quick_check

    def counted(self: MetaDB) -> list[str]:
        ran.append(Path(self.path))
        return real(self)

    monkeypatch.setattr(MetaDB, "quick_check", counted)
    return ran


def _record(store: Path) -> dict[str, object]:
    return read_json_file(store / "MANIFEST.json")[recovery.META_CHECKED]  # type: ignore[no-any-return]


def _docs(n: int, prefix: str = "d") -> list[dict[str, str]]:
    return [
        {"id": f"{prefix}{i}", "text": f"alpha {prefix} {i} beta gamma {i * 7}"} for i in range(n)
    ]


def test_a_default_open_checks_once_a_boot_and_the_record_survives_flushes(
    tmp_path: Path, checks: list[Path]
) -> None:
    with _open(tmp_path) as d:  # a new store: checked (empty) and recorded
        d.add(_docs(50))
        d.flush()
        d.add(_docs(20, "e"))
    assert len(checks) == 1
    rec = _record(tmp_path)  # the flush's manifest kept it
    info = os.stat(tmp_path / "meta.sqlite3")
    assert rec == {"boot_id": boot.boot_id(), "dev": info.st_dev, "ino": info.st_ino}
    with _open(tmp_path) as d:  # the same boot, the same file: not again
        assert len(d) == 70
        d.compact()
    assert len(checks) == 1
    with _open(tmp_path, verify_meta=True) as d:  # asked for: every open
        pass
    with _open(tmp_path, verify_meta=False) as d:
        assert len(d) == 70
    assert len(checks) == 2


def test_a_reboot_or_a_replaced_file_is_checked_again(tmp_path: Path, checks: list[Path]) -> None:
    with _open(tmp_path) as d:
        d.add(_docs(30))
    as_after_a_reboot(tmp_path)
    with _open(tmp_path):
        pass
    assert len(checks) == 2 and _record(tmp_path)["boot_id"] == boot.boot_id()
    # a file restored from a copy: another inode
    db = tmp_path / "meta.sqlite3"
    shutil.copyfile(db, tmp_path / "restored")
    os.replace(tmp_path / "restored", db)
    with _open(tmp_path) as d:
        assert len(d) == 30
    assert len(checks) == 3 and _record(tmp_path)["ino"] == os.stat(db).st_ino


def test_without_a_boot_id_every_default_open_checks(
    tmp_path: Path, checks: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(boot, "BOOT_ID_PATH", tmp_path / "no-such-file")
    with _open(tmp_path / "s") as d:
        d.add(_docs(5))
    with _open(tmp_path / "s"):
        pass
    assert len(checks) == 2
    assert recovery.META_CHECKED not in read_json_file(tmp_path / "s" / "MANIFEST.json")


def test_damage_in_the_same_boot_is_found_by_verify_meta(tmp_path: Path) -> None:
    """What the default leaves out: a database damaged from outside while the store was closed,
    with no reboot between, opens (its damaged rows fail their own checks when read);
    ``verify_meta=True`` refuses it, naming it."""
    with _open(tmp_path) as d:
        d.add(
            [
                {"id": f"b{i}", "text": " ".join(f"w{i * 131 + j}" for j in range(120))}
                for i in range(1500)
            ]
        )
    db = tmp_path / "meta.sqlite3"
    pages = db.stat().st_size // 4096
    with open(db, "r+b") as f:
        f.seek((pages // 2) * 4096 + 100)
        f.write(os.urandom(2000))
    with _open(tmp_path):
        pass
    with pytest.raises(CorruptFileError, match=r"meta\.sqlite3"):
        _open(tmp_path, verify_meta=True)


def test_verify_meta_takes_true_false_or_none() -> None:
    assert StoreSettings().verify_meta is None
    with pytest.raises(ConfigError, match="True, False or None"):
        StoreSettings(verify_meta="yes")  # type: ignore[arg-type]


def test_a_restart_after_sigkill_skips_the_checks_and_keeps_every_acknowledged_row(
    tmp_path: Path, checks: list[Path], segment_checks: list[tuple[str, bool]]
) -> None:
    """A real process adds rows (acknowledged; its small memtable flushed into segments as it
    goes) and is killed mid-write; the next default open, in the same boot, finds every
    acknowledged row without a ``quick_check`` and without reading the segments' checksums
    (the records the killed process's opens and flushes left match)."""
    store = tmp_path / "s"
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parents[1])!r})
        from doubles import SimpleFingerprinter
        from neardup.online.deduplicator import Deduplicator
        d = Deduplicator.open({str(store)!r}, verify=False, fingerprinter=SimpleFingerprinter(),
                              memtable_size=300)
        i = 0
        while True:
            d.add({{"id": f"k{{i}}", "text": f"alpha {{i}} beta {{i * 3}} gamma"}})
            print(i, flush=True)
            i += 1
        """
    )
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    acked = -1
    for line in p.stdout:
        acked = int(line)
        if acked >= 1200:
            break
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    assert list(store.glob("seg-*.nds"))  # flushed as it went
    with _open(store) as d:
        assert all(d.get(f"k{i}") for i in range(acked + 1))
    assert checks == []
    assert segment_checks and not any(v for _, v in segment_checks), segment_checks


@pytest.fixture
def segment_checks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """(file name, verified) of every segment and ``.hidx`` an open reads, in order."""
    from neardup.index import HammingIndex
    from neardup.store import partitions

    seen: list[tuple[str, bool]] = []
    real_open = partitions.open_segment
    real_load = HammingIndex.load.__func__  # type: ignore[attr-defined]

    def open_segment(path: Path, *, verify: bool = True) -> object:
        seen.append((Path(path).name, verify))
        return real_open(path, verify=verify)

    def load(cls: type, path: Path, mmap: bool = False, *, verify: bool = True) -> object:
        seen.append((Path(path).name, verify))
        return real_load(cls, path, mmap, verify=verify)

    monkeypatch.setattr(partitions, "open_segment", open_segment)
    monkeypatch.setattr(HammingIndex, "load", classmethod(load))
    return seen


def _segment_store(path: Path) -> None:
    with _open(path) as d:
        d.add(_docs(600))
        d.flush()
        d.add(_docs(400, "e"))
        d.flush()


def test_segments_are_checked_once_a_boot(
    tmp_path: Path, segment_checks: list[tuple[str, bool]]
) -> None:
    _segment_store(tmp_path)
    segment_checks.clear()  # the flushes' own: written, read back and checked
    entries = read_json_file(tmp_path / "MANIFEST.json")["segments"]
    assert len(entries) == 2
    assert all(e["checked"]["boot_id"] == boot.boot_id() for e in entries)
    assert all(e["checked"]["index"] is not None for e in entries)
    with _open(tmp_path) as d:  # the same boot, the same files: trusted
        assert len(d) == 1000 and d.check({"id": "q", "text": _docs(600)[5]["text"]}).duplicate
    names = sorted({n for n, _ in segment_checks})
    assert len(names) == 4 and not any(v for _, v in segment_checks), segment_checks
    for settings, verified in (({"verify_meta": True}, True), ({}, False)):
        segment_checks.clear()
        with _open(tmp_path, **settings):
            pass
        assert {v for _, v in segment_checks} == {verified}
    as_after_a_reboot(tmp_path)
    segment_checks.clear()
    with _open(tmp_path):
        pass
    assert len(segment_checks) == 4 and all(v for _, v in segment_checks)


def test_a_segment_rewritten_in_place_is_checked_and_refused(tmp_path: Path) -> None:
    """A segment changed while the store was closed, in the same boot: its time changed, so
    its record no longer stands and the body's checksum finds the damage."""
    _segment_store(tmp_path)
    seg = sorted(tmp_path.glob("seg-*.nds"))[0]
    with open(seg, "r+b") as f:
        f.seek(200)
        b = f.read(1)
        f.seek(200)
        f.write(bytes([b[0] ^ 0xFF]))
    with pytest.raises(CorruptFileError, match=seg.name):
        _open(tmp_path)
