"""neardup._durable: large files written in synced chunks (the segments' and their indexes')."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import neardup._durable as durable
from neardup._durable import write_synced


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
