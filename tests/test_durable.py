"""neardup._durable: large files written in synced chunks (the segments' and their indexes'),
and the one rule for syncing a folder."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import neardup
import neardup._durable as durable
from neardup._durable import write_synced
from neardup.errors import StorageError


@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(st.binary(max_size=300), max_size=8),
    chunk=st.integers(1, 200),
)
def test_the_file_holds_the_parts_in_order(tmp_path_factory, parts, chunk):
    path = tmp_path_factory.mktemp("w") / "f"
    with open(path, "wb") as f:
        assert write_synced(f, parts, chunk=chunk) == sum(map(len, parts))
    assert path.read_bytes() == b"".join(parts)


def test_it_syncs_once_a_chunk_and_fsyncs_at_the_end(tmp_path, monkeypatch):
    syncs: list[int] = []
    fsyncs: list[int] = []
    monkeypatch.setattr(durable, "datasync", lambda fd: syncs.append(fd))
    monkeypatch.setattr(durable.os, "fsync", lambda fd: fsyncs.append(fd))
    a = np.arange(1000, dtype="<u8")  # 8,000 bytes: a numpy buffer, as the segments' are
    with open(tmp_path / "f", "wb") as f:
        write_synced(f, [b"x" * 100, a.data, b"y" * 900], chunk=1000)
    # 9,000 bytes: a sync after each full 1,000, then the fsync that covers the rest
    assert len(syncs) == 9 and len(fsyncs) == 1
    data = (tmp_path / "f").read_bytes()
    assert data == b"x" * 100 + a.tobytes() + b"y" * 900


def test_a_segment_is_written_in_synced_chunks(tmp_path, monkeypatch):
    """The store's segments go through it (a merge's file is not queued whole at the disk)."""
    from neardup.store.segment import open_segment, write_segment

    syncs: list[int] = []
    real = durable.datasync
    monkeypatch.setattr(durable, "SYNC_BYTES", 4096)
    monkeypatch.setattr(durable, "datasync", lambda fd: (syncs.append(fd), real(fd)))
    n = 5000
    rng = np.random.default_rng(1)
    fps = rng.integers(0, 2**63, n, dtype=np.uint64)
    path = tmp_path / "seg-0-1.nds"
    write_segment(path, fps, np.arange(n, dtype=np.int64), np.zeros(n), partition=0)
    assert len(syncs) >= path.stat().st_size // 4096 - 1
    seg = open_segment(path)
    assert np.array_equal(np.asarray(seg.fingerprints), fps)
    seg.close()


def test_a_chunk_must_hold_a_byte(tmp_path):
    with open(tmp_path / "f", "wb") as f, pytest.raises(ValueError, match="chunk"):
        write_synced(f, [b"a"], chunk=0)


# ---------------------------------------------------------------- fsync_dir: one rule for folders


def _fails(code: int):
    def fail(*_a, **_k):
        raise OSError(code, os.strerror(code))

    return fail


def test_fsync_dir_syncs_the_folder(tmp_path, monkeypatch):
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(durable.os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    durable.fsync_dir(tmp_path)
    assert len(synced) == 1


@pytest.mark.parametrize("code", [errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP])
def test_a_filesystem_that_cannot_sync_a_folder_is_not_an_error(tmp_path, monkeypatch, code):
    monkeypatch.setattr(durable.os, "fsync", _fails(code))
    durable.fsync_dir(tmp_path)


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC])
def test_a_failed_folder_sync_raises(tmp_path, monkeypatch, code):
    monkeypatch.setattr(durable.os, "fsync", _fails(code))
    with pytest.raises(OSError) as err:
        durable.fsync_dir(tmp_path)
    assert err.value.errno == code


def test_a_folder_that_cannot_be_opened_for_reading_is_skipped(tmp_path, monkeypatch):
    real = os.open
    monkeypatch.setattr(durable.os, "open", _fails(errno.EACCES))
    durable.fsync_dir(tmp_path)  # write-only folder: the rename is done, nothing to sync
    monkeypatch.setattr(durable.os, "open", real)
    with pytest.raises(FileNotFoundError):
        durable.fsync_dir(tmp_path / "missing")  # a caller's mistake is not skipped


def test_no_other_module_opens_a_folder_to_sync_it():
    """One home: the folder-sync rule lives in neardup._durable only (four copies had four
    different error rules)."""
    root = Path(neardup.__file__).parent
    found = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if p.name != "_durable.py" and re.search(r"O_DIRECTORY|def \w*fsync_dir\b", p.read_text())
    ]
    assert found == ["io/atomic.py"]  # its wrapper maps the error to a StorageError only


@pytest.mark.parametrize("where", ["index", "distributed", "cluster"])
def test_writers_sync_the_folder_after_their_rename(tmp_path, monkeypatch, where):
    """The writers that renamed a file into place without syncing its folder (the distributed
    steps' tables and markers, the cluster's config), or ignored the sync's failure (a saved
    index) now sync it, and a failed sync is an error."""
    calls: list[str] = []
    if where == "index":
        import neardup.index.format as mod
        from neardup.index import HammingIndex

        def write() -> None:
            idx = HammingIndex(bits=64, max_distance=3, expected_size=100, buffer_size=10)
            idx.add(np.arange(50, dtype=np.uint64) * 0x9E3779B97F4A7C15)
            idx.save(tmp_path / "a.idx")
    elif where == "distributed":
        import pyarrow as pa

        import neardup.distributed._store as mod

        def write() -> None:
            mod.write_table(str(tmp_path / "step" / "t.arrow"), pa.table({"a": [1, 2]}))
            mod.mark_done(str(tmp_path), "step", 3)
    else:
        import neardup.cluster.config as mod

        def write() -> None:
            mod.atomic_write(tmp_path / "cluster.toml", "x = 1\n")

    monkeypatch.setattr(mod, "fsync_dir", lambda p: calls.append(str(p)))
    write()
    assert calls and all(Path(c).is_dir() for c in calls)
    monkeypatch.setattr(mod, "fsync_dir", _fails(errno.EIO))
    with pytest.raises((OSError, StorageError)):
        write()
