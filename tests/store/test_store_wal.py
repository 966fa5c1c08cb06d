"""Write-ahead log: round trip, torn tails at every offset, damage in the middle."""

from __future__ import annotations

import errno
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.errors import CorruptFileError, StorageError, UnsupportedVersionError
from neardup.store.wal import (
    HEADER_SIZE,
    AddRecord,
    DeleteRecord,
    WalWriter,
    decode_payload,
    encode_add,
    encode_delete,
    frame,
    frame_records,
    read_wal,
)

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
adds = st.builds(
    AddRecord,
    rowid=st.integers(0, 2**63 - 1),
    time=st.floats(allow_nan=False, allow_infinity=False),
    fp_hi=st.integers(0, 2**64 - 1),
    fp_lo=st.integers(0, 2**64 - 1),
    chash=st.binary(min_size=16, max_size=16),
    flags=st.integers(0, 255),
    id=_text.filter(bool),
    text=st.none() | _text,
    metadata=st.none() | _text,
    keys=st.none(),
    summary=st.none(),
)
deletes = st.builds(DeleteRecord, rowid=st.integers(0, 2**63 - 1), id=_text.filter(bool))
records = st.lists(adds | deletes, min_size=1, max_size=6)


def _encode(r):
    return encode_add(r) if isinstance(r, AddRecord) else encode_delete(r)


def _write(path, recs, generation=1):
    w = WalWriter(path, generation, create=True)
    for r in recs:
        w.commit([_encode(r)])
    w.close()


@given(recs=records)
def test_payload_round_trip(recs):
    for r in recs:
        assert decode_payload(_encode(r)) == r


@given(r=adds, summary=st.binary(max_size=300))
def test_a_summary_is_not_logged(r, summary):
    # applied with its row, never logged: derived data, made again or not at all
    assert decode_payload(encode_add(r._replace(summary=summary))) == r


def test_round_trip_file(tmp_path):
    recs = [
        AddRecord(1, 2.5, 3, 0, bytes(range(16)), 1, "a", "text ü 中文", '{"k": 1}'),
        DeleteRecord(1, "a"),
        AddRecord(2, 3.5, 2**64 - 1, 7, bytes(16), 0, "b", None, None),
    ]
    p = tmp_path / "w.log"
    _write(p, recs, generation=7)
    r = read_wal(p)
    assert r.records == recs and r.generation == 7 and r.truncated_bytes == 0


@given(recs=records, data=st.data())
def test_torn_tail_at_every_offset_is_truncated(tmp_path_factory, recs, data):
    p = tmp_path_factory.mktemp("wal") / "w.log"
    _write(p, recs)
    full = p.read_bytes()
    last = len(_encode(recs[-1])) + 8
    cut = data.draw(st.integers(len(full) - last, len(full) - 1), label="cut")
    p.write_bytes(full[:cut])
    r = read_wal(p)
    assert r.records == recs[:-1]
    assert p.stat().st_size == len(full) - last  # truncated on disk
    assert read_wal(p).truncated_bytes == 0


def test_torn_tail_every_byte_of_last_record(tmp_path):
    recs = [AddRecord(i, 1.0, i, 0, bytes(16), 0, f"id{i}", "x" * i, None) for i in range(3)]
    p = tmp_path / "w.log"
    _write(p, recs)
    full = p.read_bytes()
    start = len(full) - (len(encode_add(recs[-1])) + 8)
    for cut in range(start, len(full)):
        p.write_bytes(full[:cut])
        assert read_wal(p).records == recs[:-1], cut
    # garbage (not zeros) after the last good record is a torn tail too
    p.write_bytes(full[:start] + b"\xff\x00\x00\x00junk")
    assert read_wal(p).records == recs[:-1]


def test_bit_flip_in_last_record_is_torn_tail(tmp_path):
    recs = [AddRecord(i, 1.0, i, 0, bytes(16), 0, f"id{i}", "hello", None) for i in range(4)]
    p = tmp_path / "w.log"
    _write(p, recs)
    b = bytearray(p.read_bytes())
    b[-3] ^= 0x10
    p.write_bytes(bytes(b))
    assert read_wal(p).records == recs[:-1]


def test_bit_flip_in_middle_is_refused_then_repairable(tmp_path):
    recs = [AddRecord(i, 1.0, i, 0, bytes(16), 0, f"id{i}", "hello world", None) for i in range(5)]
    p = tmp_path / "w.log"
    _write(p, recs)
    b = bytearray(p.read_bytes())
    rec_len = len(encode_add(recs[0])) + 8
    off = HEADER_SIZE + rec_len + 12  # inside record 1
    b[off] ^= 0x01
    p.write_bytes(bytes(b))
    with pytest.raises(CorruptFileError, match=r"w\.log.*offset \d+.*repair=True"):
        read_wal(p)
    assert p.stat().st_size == len(b)  # refused: nothing was cut
    r = read_wal(p, repair=True)
    assert r.records == recs[:1]


def test_bad_header(tmp_path):
    p = tmp_path / "w.log"
    _write(p, [])
    b = bytearray(p.read_bytes())
    b[0] ^= 1
    p.write_bytes(bytes(b))
    with pytest.raises(CorruptFileError, match="not a neardup write-ahead log"):
        read_wal(p)
    p.write_bytes(b"")
    with pytest.raises(CorruptFileError, match="truncated"):
        read_wal(p)


def test_future_version(tmp_path):
    import struct
    import zlib

    p = tmp_path / "w.log"
    body = struct.pack("<8sIIQI", b"NDUPWAL\x00", 99, 0, 1, 0)
    p.write_bytes(body + struct.pack("<I", zlib.crc32(body)))
    with pytest.raises(UnsupportedVersionError, match="version 99"):
        read_wal(p)


def test_failed_append_rolls_back(tmp_path, monkeypatch):
    import neardup.store.wal as wal

    p = tmp_path / "w.log"
    w = WalWriter(p, 1, create=True)
    w.commit([encode_delete(DeleteRecord(1, "a"))])
    size = w.size

    def half_write(fd, data):  # write part of the group, then fail
        real(fd, bytes(data[:5]))
        raise OSError(errno.ENOSPC, "No space left on device")

    real = wal.os.write
    monkeypatch.setattr(wal.os, "write", half_write)
    with pytest.raises(StorageError, match="disk is full"):
        w.commit([encode_delete(DeleteRecord(2, "b"))])
    monkeypatch.undo()
    assert p.stat().st_size == size == w.size
    w.commit([encode_delete(DeleteRecord(3, "c"))])
    w.close()
    assert [r.rowid for r in read_wal(p).records] == [1, 3]


@given(recs=records)
def test_frame_records_equals_frame_of_each_payload(recs):
    """The writer's inlined group encoder is byte-identical to framing each payload."""
    want = b"".join(
        frame(encode_add(r) if isinstance(r, AddRecord) else encode_delete(r)) for r in recs
    )
    assert frame_records(recs) == want


# -- preallocation: the file is extended ahead of its records and cut back on close ---------


def _unclosed(path, recs):
    """A log whose writer died without closing it: its records, then preallocated zeros."""
    w = WalWriter(path, 1, create=True)
    for r in recs:
        w.commit([_encode(r)])
    end = w.size
    os.close(w._fd)  # no close(): the padding stays, as after a crash
    w._fd = -1
    return end


def test_log_is_preallocated_and_cut_back_on_close(tmp_path):
    from neardup.store.wal import PREALLOCATE

    p = tmp_path / "w.log"
    w = WalWriter(p, 1, create=True)
    w.commit([encode_delete(DeleteRecord(1, "a"))])
    assert p.stat().st_size >= w.size + PREALLOCATE  # no new file size for the next fsyncs
    assert p.read_bytes()[w.size :].count(0) == p.stat().st_size - w.size
    w.close()
    assert p.stat().st_size == w.size


def test_zero_padding_after_the_last_record_is_a_clean_end(tmp_path, caplog):
    p = tmp_path / "w.log"
    recs = [DeleteRecord(i, f"id{i}") for i in range(5)]
    end = _unclosed(p, recs)
    assert p.stat().st_size > end
    with caplog.at_level("WARNING", logger="neardup.store"):
        rep = read_wal(p)
    assert rep.records == recs and rep.valid_bytes == end
    assert rep.truncated_bytes == 0 and not caplog.records  # padding is not a torn tail
    assert p.stat().st_size == end  # cut back, so a writer can append at the end


@given(recs=records, extra=adds | deletes, data=st.data())
def test_torn_record_in_the_padding_is_truncated(tmp_path_factory, recs, extra, data):
    p = tmp_path_factory.mktemp("wal") / "w.log"
    end = _unclosed(p, recs)
    tail = frame(_encode(extra))
    cut = data.draw(st.integers(1, len(tail) - 1))
    with open(p, "r+b") as f:  # the writer died while this group was reaching the disk
        f.seek(end)
        f.write(tail[:cut])
    rep = read_wal(p)
    if not tail[cut:].strip(b"\x00"):
        # the bytes that did not arrive were zeros, which the padding supplies: the record is
        # complete and intact (CRC), so replay keeps it; an unacknowledged write may survive
        assert rep.records == [*recs, extra] and rep.truncated_bytes == 0
        return
    assert rep.records == recs and rep.valid_bytes == end
    assert 0 < rep.truncated_bytes <= cut
    assert p.stat().st_size == end


def test_damage_in_the_middle_is_found_across_zero_runs(tmp_path):
    """A damaged record whose follower starts with zero bytes (a length of 2**24 is
    ``00 00 00 01``), then padding: still damage in the middle, not a torn tail."""
    p = tmp_path / "w.log"
    big = DeleteRecord(2, "x" * (2**24 - 13))  # payload of exactly 2**24 bytes
    assert len(encode_delete(big)) == 2**24
    end = _unclosed(p, [DeleteRecord(1, "a" * 40), big])
    data = bytearray(p.read_bytes())
    data[HEADER_SIZE + 20] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="valid records follow"):
        read_wal(p)
    rep = read_wal(p, repair=True)
    assert rep.records == [] and rep.valid_bytes == HEADER_SIZE
    assert end > HEADER_SIZE


@pytest.mark.parametrize("err", [errno.EOPNOTSUPP, errno.ENOSPC])
def test_appends_work_when_preallocation_fails(tmp_path, monkeypatch, err):
    import neardup.store.wal as wal

    def refuse(fd, offset, length):
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(wal.os, "posix_fallocate", refuse)
    p = tmp_path / "w.log"
    w = WalWriter(p, 1, create=True)
    for i in range(3):
        w.commit([encode_delete(DeleteRecord(i, "a"))])
    assert p.stat().st_size == w.size
    w.close()
    assert [r.rowid for r in read_wal(p).records] == [0, 1, 2]


def test_a_write_group_taken_back_leaves_the_store_and_its_log_as_they_were(tmp_path):
    """The one write protocol (:class:`neardup.store.WriteGroup`, ``append_group``,
    ``sync_log``, ``take_back``): an unsynced group taken back is gone from memory and from the
    log."""
    import numpy as np

    from neardup.store import Store, StoreSettings, WriteGroup

    def group(st: Store, id_: str, fp: int, empty: bool) -> WriteGroup:
        g = WriteGroup()
        rid = st.allocate(1)
        g.add(rid, 10.0, fp, 0, bytes([fp]) * 16, empty, id_, "text", None)
        g.set_added(np.array([fp], np.uint64), np.array([rid], np.int64), np.array([10.0]))
        return g

    st = Store(tmp_path, StoreSettings(partition_seconds=3600.0), bits=64, radius=3)
    try:
        assert st.durable and not st.log_has_rows
        first = st.append_group(group(st, "a", 5, False))
        assert first is not None
        st.sync_log([first])  # durable (and on its way to SQLite) on return
        size = st.stats()["wal_bytes"]
        unsynced = st.append_group(group(st, "b", 6, True))
        assert unsynced is not None and "b" in st.lookup_ids(["b"]) and len(st) == 2
        st.take_back([unsynced])  # as after a failed sync
        assert st.lookup_ids(["a", "b"]).keys() == {"a"} and len(st) == 1
        assert st.stats()["wal_bytes"] == size and st.log_has_rows
        row = st.get_row("a")
        assert row is not None and not row.empty
    finally:
        st.close()
