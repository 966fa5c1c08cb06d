"""HammingIndex persistence: double round-trip, corruption, truncation, foreign files, versions."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from doubles import SMAPS, mapped_kib

from neardup.errors import CorruptFileError, FormatError, NotFoundError, UnsupportedVersionError
from neardup.index import HammingIndex
from neardup.index.format import FORMAT_VERSION


def _index(bits: int = 64) -> tuple[HammingIndex, np.ndarray]:
    rng = np.random.default_rng(5)
    shape = (3000,) if bits == 64 else (3000, 2)
    fps = rng.integers(0, 2**64, shape, dtype=np.uint64)
    idx = HammingIndex(bits=bits, max_distance=3, expected_size=3000, buffer_size=500)
    idx.add(fps[:2000])
    idx.add(fps[2000:2300], ids=np.arange(2300, 2000, -1) * 7)
    idx.add(fps[2300:2400])  # stays in the buffer
    idx.remove([5, 6, 2300 * 7])
    return idx, fps


@pytest.mark.parametrize("bits", [64, 128])
def test_save_load_save_load_identical(tmp_path, bits: int) -> None:
    idx, fps = _index(bits)
    q = fps[::7]
    want = idx.search(q)
    idx.save(tmp_path / "a.idx")
    a = HammingIndex.load(tmp_path / "a.idx")
    a.save(tmp_path / "b.idx")
    for mmap in (False, True):
        b = HammingIndex.load(tmp_path / "b.idx", mmap=mmap)
        got = b.search(q)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
        assert len(b) == len(idx) and b.plan == idx.plan and (5 in b) is False
    # a loaded (non-mmap) index keeps working: add, remove, merge
    a.add(fps[:1] ^ np.uint64(1), ids=[10**9])
    assert 10**9 in a and a.remove([10**9]) == 1
    a.optimize()
    for g, w in zip(a.search(q), want, strict=True):
        np.testing.assert_array_equal(g, w)
    assert not list(tmp_path.glob(".*tmp*"))  # no temp files left behind


def test_corruption_is_detected(tmp_path) -> None:
    idx, _ = _index()
    p = tmp_path / "x.idx"
    idx.save(p)
    raw = p.read_bytes()
    hdr_len = struct.unpack_from("<Q", raw, 16)[0]
    data_start = -(-(32 + hdr_len) // 64) * 64
    bad = tmp_path / "bad.idx"
    for pos, exc in [
        (0, FormatError),  # magic
        (40, CorruptFileError),  # header bytes
        (data_start + 8, CorruptFileError),  # first section
        ((data_start + len(raw)) // 2, CorruptFileError),  # somewhere in the tables
        (len(raw) - 3, CorruptFileError),  # trailer length
    ]:
        b = bytearray(raw)
        b[pos] ^= 0x41
        bad.write_bytes(bytes(b))
        with pytest.raises(exc, match=r"bad\.idx"):
            HammingIndex.load(bad)
    bad.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(CorruptFileError, match="truncated"):
        HammingIndex.load(bad)
    bad.write_bytes(raw[:10])
    with pytest.raises(CorruptFileError, match="truncated"):
        HammingIndex.load(bad)
    b = bytearray(raw)
    b[8:12] = struct.pack("<I", FORMAT_VERSION + 1)
    bad.write_bytes(bytes(b))
    with pytest.raises(UnsupportedVersionError, match=f"version {FORMAT_VERSION + 1}"):
        HammingIndex.load(bad)
    bad.write_bytes(b"PAR1 this is a parquet file, not an index" * 3)
    with pytest.raises(FormatError, match="not a neardup index file"):
        HammingIndex.load(bad)
    with pytest.raises(NotFoundError, match="does not exist"):
        HammingIndex.load(tmp_path / "missing.idx")
    # the good file still loads
    assert len(HammingIndex.load(p)) == len(idx)


@pytest.mark.parametrize("compress", [False, True])
def test_snapshot_from_snapshot_round_trip(compress: bool) -> None:
    rng = np.random.default_rng(9)
    fps = rng.integers(0, 2**64, 4000, dtype=np.uint64)
    idx = HammingIndex(
        bits=64, max_distance=3, expected_size=100_000, buffer_size=1000, compress=compress
    )
    idx.add(fps[:3000])  # a sealed segment
    idx.add(fps[3000:3500])  # 500 rows in the append buffer
    idx.remove([3, 3400])
    snap = idx.snapshot()
    assert snap.plan == idx.plan and snap.settings.compress is compress
    assert sum(s.n for s in snap.segments) == 3000 and len(snap.buffer_ids) == 500
    assert len(snap.live_buffer()[1]) == 499
    twin = HammingIndex.from_snapshot(snap)
    q = fps[::5]
    for g, w in zip(twin.search(q), idx.search(q), strict=True):
        np.testing.assert_array_equal(g, w)
    assert len(twin) == len(idx) and 3400 not in twin and twin.compressed is compress
    assert twin.add(fps[3500:3501]).tolist() == [3500]  # the running id counter travels


def test_save_index_load_index_wrappers(tmp_path) -> None:
    from neardup.index.format import load_index, read_index, save_index

    idx, fps = _index()
    save_index(idx, tmp_path / "w.idx")
    back = load_index(HammingIndex, tmp_path / "w.idx", mmap=False, verify=True)
    for g, w in zip(back.search(fps[::9]), idx.search(fps[::9]), strict=True):
        np.testing.assert_array_equal(g, w)
    snap = read_index(tmp_path / "w.idx", mmap=True, verify=True)
    assert snap.read_only is not None and snap.plan == idx.plan


@pytest.mark.skipif(not SMAPS.exists(), reason="reads /proc/self/smaps (Linux)")
def test_mapped_read_leaves_no_page_mapped(tmp_path) -> None:
    """``read_index(mmap=True)`` checks every section through the map and unmaps those pages
    again: what stays resident is what the searches then touch."""
    from neardup.index.format import read_index, save_index

    rng = np.random.default_rng(3)
    fps = rng.integers(0, 2**64, 200_000, dtype=np.uint64)
    idx = HammingIndex(bits=64, max_distance=3, expected_size=len(fps), buffer_size=1000)
    idx.add(fps)
    idx.flush()
    path = tmp_path / "big.idx"
    save_index(idx, path)
    size_kib = path.stat().st_size // 1024
    snap = read_index(path, mmap=True, verify=True)
    assert mapped_kib(path) < size_kib // 20
    twin = HammingIndex.from_snapshot(snap)
    for got, want in zip(twin.search(fps[:50]), idx.search(fps[:50]), strict=True):
        np.testing.assert_array_equal(got, want)
    assert 0 < mapped_kib(path) < size_kib


def test_format_does_not_import_the_index_class() -> None:
    """format.py reads and writes snapshots: it imports no hamming_index, even for typing."""
    import ast
    from pathlib import Path

    import neardup.index.format as fmt

    tree = ast.parse(Path(fmt.__file__).read_text())
    names = {
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert not any("hamming_index" in n for n in names), names


def test_save_writes_in_synced_chunks(tmp_path, monkeypatch) -> None:
    """A saved index (a store segment's ``.hidx``) is synced as it is written, chunk by chunk,
    so its pages are never queued whole at the disk ahead of a log sync (neardup._durable)."""
    import neardup._durable as durable

    syncs: list[int] = []
    real = durable.datasync
    monkeypatch.setattr(durable, "SYNC_BYTES", 4096)
    monkeypatch.setattr(durable, "datasync", lambda fd: (syncs.append(fd), real(fd)))
    idx, fps = _index()
    idx.save(tmp_path / "a.idx")
    size = (tmp_path / "a.idx").stat().st_size
    assert size > 4 * 4096 and len(syncs) == size // 4096
    got = HammingIndex.load(tmp_path / "a.idx").search(fps[::7])
    for g, w in zip(got, idx.search(fps[::7]), strict=True):
        np.testing.assert_array_equal(g, w)
