"""The tombstone log of a cluster node (neardup.store.tombstones): newest version wins, paging
by sequence number, cursors, expiry, and the file's versioned format (torn tail, damage)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.errors import CorruptFileError, UnsupportedVersionError
from neardup.store.tombstones import HEADER_SIZE, TombstoneLog


def test_newest_version_wins_and_survives_reopening(tmp_path):
    path = tmp_path / "t.log"
    t = TombstoneLog(path)
    assert [x.id for x in t.record([("a", 5), ("b", 6)])] == ["a", "b"]
    assert t.record([("a", 4)]) == []  # older: nothing recorded
    assert t.record([("a", 5)]) == []  # the same: nothing either
    (a,) = t.record([("a", 9)])
    assert (a.version, a.seq) == (9, 3)
    t.set_cursor("n2", 77, 12)
    inc = t.incarnation
    t.close()
    t = TombstoneLog(path)
    assert t.get("a").version == 9 and t.get("b").version == 6 and t.get("c") is None
    assert t.cursor("n2") == (77, 12) and t.cursor("n9") == (0, 0)
    assert t.incarnation == inc and t.next_seq == 4 and t.max_version == 9
    assert t.versions(["a", "c", "b"]) == {"a": 9, "b": 6}
    t.close()


def test_paging_by_sequence_number(tmp_path):
    t = TombstoneLog(tmp_path / "t.log", sync=False)
    t.record([(f"d{i}", i + 1) for i in range(10)])
    t.record([("d3", 100)])  # moves d3 to the end of the sequence
    seen, after = [], 0
    while True:
        page, nxt = t.since(after, 3)
        seen += [x.id for x in page]
        if nxt is None:
            break
        after = nxt
    assert seen == [f"d{i}" for i in range(10) if i != 3] + ["d3"]
    assert t.since(t.next_seq, 5) == ([], None)
    t.close()


def test_expire_keeps_sequence_numbers_and_cursors(tmp_path):
    clock = [1000.0]
    path = tmp_path / "t.log"
    t = TombstoneLog(path, clock=lambda: clock[0])
    t.record([("old", 1)])
    clock[0] = 5000.0
    t.record([("new", 2)])
    t.set_cursor("p", 1, 2)
    assert t.expire(2000.0) == 1
    assert t.get("old") is None and t.get("new").seq == 2
    t.record([("later", 3)])
    t.close()
    t = TombstoneLog(path)
    assert [x.id for x in t.since(0, 10)[0]] == ["new", "later"]
    assert t.get("later").seq == 3 and t.cursor("p") == (1, 2)
    assert t.expire(10_000.0) == 2
    t.close()
    t = TombstoneLog(path)  # everything expired: the next sequence number does not restart
    assert len(t) == 0 and t.next_seq == 4
    t.close()


def test_torn_tail_is_cut_and_damage_is_refused(tmp_path):
    path = tmp_path / "t.log"
    t = TombstoneLog(path)
    t.record([("a", 1), ("b", 2)])
    t.close()
    good = path.read_bytes()
    path.write_bytes(good + b"\x20\x00\x00\x00half a rec")  # a crash mid-append
    t = TombstoneLog(path)
    assert len(t) == 2
    t.record([("c", 3)])
    t.close()
    t = TombstoneLog(path)
    assert t.get("c").version == 3
    t.close()
    # a flipped byte inside the first record, with valid records after it
    data = bytearray(path.read_bytes())
    data[HEADER_SIZE + 12] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=r"t\.log.*offset"):
        TombstoneLog(path)
    # the header
    data = bytearray(good)
    data[0] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="bad magic"):
        TombstoneLog(path)
    data = bytearray(good)
    struct.pack_into("<I", data, 8, 2)  # version 2, crc fixed up
    import zlib

    struct.pack_into("<I", data, 36, zlib.crc32(bytes(data[:36])))
    path.write_bytes(bytes(data))
    with pytest.raises(UnsupportedVersionError, match="version 2"):
        TombstoneLog(path)


def test_in_memory_log(tmp_path):
    t = TombstoneLog(None)
    t.record([("a", 1)])
    assert t.get("a").version == 1 and t.expire(1e18) == 1
    t.close()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(0, 20)), max_size=40))
def test_log_equals_a_dict_of_newest_versions(tmp_path_factory, ops):
    path = tmp_path_factory.mktemp("tomb") / "t.log"
    model: dict[str, int] = {}
    t = TombstoneLog(path, sync=False)
    for k in range(0, len(ops), 3):
        chunk = ops[k : k + 3]
        t.record(chunk)
        for i, v in chunk:
            if v > model.get(i, -1):
                model[i] = v
    t.close()
    t = TombstoneLog(path, sync=False)
    assert {x.id: x.version for x in t.since(0, 100)[0]} == model
    seqs = [x.seq for x in t.since(0, 100)[0]]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    t.close()
