"""The memtable's band keys built fast and logged: the radix + plain sort equals a stable
argsort, a section built column by column equals the sorted entries, band keys round-trip
through the log (``ADD_KEYS`` records), a replay reads them instead of recomputing MinHash, and
a log without them (an earlier build's) is refused in a store with the MinHash channel; a
segment merge's band sections merge as sorted runs (``merge_mapped``) exactly as materialising
and sorting them does."""

from __future__ import annotations

import contextlib
import itertools
import shutil
import struct
import zlib
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.errors import UnsupportedVersionError
from neardup.fingerprint.minhash import NO_KEYS
from neardup.index.band_section import _by_key as by_key
from neardup.index.bands import (
    BandIndex,
    BandSection,
    columns_are_groups,
    flatten,
    merge_mapped,
    section_from_rows,
    sort_entries,
)
from neardup.index.reference import (
    by_key_reference,
    columns_are_groups_reference,
    merge_mapped_reference,
)
from neardup.online.deduplicator import Deduplicator
from neardup.store.wal import (
    HEADER_SIZE,
    OP_ADD,
    OP_ADD_KEYS,
    AddRecord,
    WalWriter,
    decode_payload,
    encode_add,
    frame,
    frame_records,
    keys_from_log,
    log_keys,
    read_wal,
)

_SHIFT = np.uint64(32)


def _ent(rng: np.random.Generator, n: int, nb: int, *, dup: bool = True) -> np.ndarray:
    """Compact keys (n, nb) whose group is their column, some rows without keys, some rows
    sharing keys (buckets of several rows), few distinct low halves (ties)."""
    ent = rng.integers(0, 50, (n, nb), dtype=np.uint64) | (np.arange(nb, dtype=np.uint64) << _SHIFT)
    if dup:
        ent[rng.random(n) < 0.1] = NO_KEYS
    return ent


@settings(max_examples=150, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(0, 30),
    st.integers(0, 12),
    st.sampled_from(["none", "group", "no_keys_half", "strided"]),
)
def test_columns_are_groups_equals_its_twin(seed, n, nb, change) -> None:
    """The one-pass kernel answers as the NumPy expression does: keys whose group is their
    column (rows of NO_KEYS among them), one key moved to another group, an entry that is
    NO_KEYS in its high half only, and a non-contiguous view."""
    rng = np.random.default_rng(seed)
    ent = _ent(rng, n, nb)
    if change == "group" and ent.size:
        i, j = rng.integers(0, n), rng.integers(0, nb)
        ent[i, j] = (ent[i, j] & np.uint64(0xFFFFFFFF)) | (np.uint64(j + 1) << _SHIFT)
    elif change == "no_keys_half" and ent.size:
        ent[rng.integers(0, n), rng.integers(0, nb)] = np.uint64(0xFFFFFFFF) << _SHIFT
    elif change == "strided":
        ent = np.repeat(ent, 2, axis=0)[::2]
    assert columns_are_groups(ent) == columns_are_groups_reference(ent)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(4096, 12000))
def test_by_key_equals_stable_argsort(seed, groups, n) -> None:
    rng = np.random.default_rng(seed)
    k = rng.integers(0, 1000, n, dtype=np.uint64) | (
        rng.integers(0, groups, n).astype(np.uint64) << _SHIFT
    )
    r = rng.integers(0, 2**40, n, dtype=np.int64)
    got, want = by_key(k, r), by_key_reference(k, r)
    assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1), st.integers(0, 300), st.integers(1, 9), st.booleans(), st.booleans()
)
def test_section_from_rows_equals_sorted_entries(seed, n, nb, radix, shuffled) -> None:
    """Each column sorted by (key, row id): by the radix-sort kernel (rows ascending, from
    ``_RADIX_ROWS`` rows: patched to any size here) or by NumPy's sort (rows in any order)."""
    from neardup.index import band_section

    rng = np.random.default_rng(seed)
    ent = _ent(rng, n, nb)
    rids = np.sort(rng.choice(10_000, n, replace=False)).astype(np.int64) + 500
    if shuffled:  # (not ascending: the sort's path whatever the size)
        order = rng.permutation(n)
        ent, rids = ent[order], rids[order]
    assert columns_are_groups(ent)
    with mock.patch.object(band_section, "_RADIX_ROWS", 0 if radix else 10**9):
        sec = section_from_rows(ent, rids, 400)
    k, r = sec
    wk, wr = sort_entries(*flatten(ent, rids))
    assert k.tolist() == wk.tolist() and r.tolist() == wr.tolist()
    assert sec.offsets.tolist() == [int((ent[:, 0] != NO_KEYS).sum()) * j for j in range(nb + 1)]


def test_queries_between_single_row_inserts_see_every_insert() -> None:
    """The service's pattern: one row inserted, then a query, again and again (the sorted
    buffer grows by merges): the answers equal an index that sorts everything at once."""
    rng = np.random.default_rng(5)
    ent = _ent(rng, 300, 5)
    ent[:, 1] = ent[0, 1]  # one shared bucket across every row
    grown, whole = BandIndex(buffer=10**9), BandIndex(buffer=10**9)
    for i in range(len(ent)):
        grown.insert_many(np.array([1000 + i]), ent[i : i + 1])
        q = ent[rng.choice(i + 1, 3)]
        whole = BandIndex(buffer=10**9)
        whole.insert_many(np.arange(1000, 1001 + i), ent[: i + 1])
        for a, b in zip(grown.query_many(q, 8), whole.query_many(q, 8), strict=True):
            assert a.tolist() == b.tolist()
    gk, gr = grown.entries()
    wk, wr = whole.entries()
    assert gk.tolist() == wk.tolist() and gr.tolist() == wr.tolist()


@pytest.mark.parametrize("split", [0, 3, 700])
def test_large_adds_equal_the_buffered_path(split) -> None:
    """An add of at least ``buffer`` entries becomes a section at once; the entries and the
    lookups equal those of adds that go through the append buffer."""
    rng = np.random.default_rng(split)
    ent = _ent(rng, 2000, 6)
    rids = np.arange(1000, 3000, dtype=np.int64)
    fast, slow = BandIndex(buffer=64), BandIndex(buffer=10**9)
    for br in (fast, slow):
        br.insert_many(rids[:split], ent[:split])
        br.insert_many(rids[split:], ent[split:])
    fk, fr = fast.entries()
    sk, sr = slow.entries()
    assert fk.tolist() == sk.tolist() and fr.tolist() == sr.tolist()
    q = ent[rng.choice(len(ent), 50)]
    for a, b in zip(fast.query_many(q, 4), slow.query_many(q, 4), strict=True):
        assert a.tolist() == b.tolist()


def test_logged_keys_round_trip_every_kind() -> None:
    rng = np.random.default_rng(3)
    ent = _ent(rng, 200, 42)
    blobs = log_keys(ent)
    assert {len(b) for b in blobs} == {1 + 4 * 42}
    assert np.array_equal(keys_from_log(blobs, 42)[0], ent)
    wide = ent.copy()  # groups that are not the columns (plans of more than 3 rows)
    has = wide[:, 0] != NO_KEYS
    wide[has, 5] ^= np.uint64(7) << _SHIFT
    assert not columns_are_groups(wide)
    wblobs = log_keys(wide)
    assert {len(b) for b in wblobs} == {1 + 8 * 42}
    assert np.array_equal(keys_from_log(wblobs, 42)[0], wide)
    mixed = blobs[:50] + wblobs[50:]
    want = np.concatenate([ent[:50], wide[50:]])
    assert np.array_equal(keys_from_log(mixed, 42)[0], want)
    with pytest.raises(ValueError, match="do not hold 41 bands"):
        keys_from_log(blobs, 41)
    with pytest.raises(ValueError, match="unknown kind"):
        keys_from_log([b"\x09" + blobs[0][1:]], 42)
    # with sketches after the keys: both kinds, beside rows logged without one
    sk = rng.integers(0, 256, (200, 7), dtype=np.uint8)
    both = log_keys(ent[:100], sk[:100]) + log_keys(wide[100:], sk[100:])
    got, present, gsk = keys_from_log(both + blobs[:3], 42, 7)
    assert np.array_equal(got, np.concatenate([ent[:100], wide[100:], ent[:3]]))
    assert present.tolist() == [True] * 200 + [False] * 3
    assert np.array_equal(gsk[:200], sk) and not gsk[200:].any()
    with pytest.raises(ValueError, match="do not hold 42 bands"):
        keys_from_log(both, 42)  # a sketch where none is expected


def test_add_keys_record_round_trip() -> None:
    r = AddRecord(5, 1.5, 9, 0, bytes(16), 0, "a", "some text", None, b"\x01abcd")
    p = encode_add(r)
    assert p[0] == OP_ADD_KEYS and decode_payload(p) == r
    plain = r._replace(keys=None)
    assert encode_add(plain)[0] == OP_ADD and decode_payload(encode_add(plain)) == plain
    # the group encoder takes the keys beside the records, byte-identical to each payload
    assert frame_records([plain, plain], [b"\x01abcd", b"\x01abcd"]) == frame(p) * 2
    with pytest.raises(ValueError, match="band-key entries"):
        frame_records([plain], [])
    with pytest.raises(ValueError, match="malformed"):
        decode_payload(p[:-1])


def _keyless_log(path, generation: int, recs, version: int = 1) -> None:
    """A log of plain ``ADD`` records (no band keys), as an earlier build wrote it."""
    body = struct.pack("<8sIIQI", b"NDUPWAL\x00", version, 0, generation, 0)
    path.write_bytes(
        body
        + struct.pack("<I", zlib.crc32(body))
        + frame_records([r._replace(keys=None) if isinstance(r, AddRecord) else r for r in recs])
    )


def test_logs_of_other_versions_are_refused(tmp_path) -> None:
    """This build writes and reads log version 1; another version is refused, naming the file
    (an earlier build's version 2 included: nothing was released with it)."""
    w = WalWriter(tmp_path / "wal-1.log", 1, create=True)
    w.close()
    with open(tmp_path / "wal-1.log", "rb") as fh:
        assert struct.unpack_from("<I", fh.read(HEADER_SIZE), 8)[0] == 1
    _keyless_log(tmp_path / "wal-2.log", 2, [], version=2)
    with pytest.raises(UnsupportedVersionError, match=r"wal-2\.log: write-ahead log version 2"):
        read_wal(tmp_path / "wal-2.log")
    with pytest.raises(UnsupportedVersionError, match=r"wal-2\.log"):
        WalWriter(tmp_path / "wal-2.log", 2, create=False)


def _texts(n: int) -> list[str]:
    rng = np.random.default_rng(11)
    base = [" ".join(f"w{x}" for x in rng.integers(0, 400, rng.integers(3, 40))) for _ in range(n)]
    base[7] = ""  # no tokens: no band keys
    base[8] = base[3] + " plus"  # shares band keys with row 3
    return base


def _unclosed_copy(d: Deduplicator, src, dst) -> None:
    """The data directory as a process killed now would leave it (log fsynced, SQLite applied)."""
    assert d.store._state.applier is not None
    d.store._state.applier.drain()
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("LOCK"))


def test_replay_reads_the_logged_band_keys_and_keyless_logs_are_refused(
    tmp_path, monkeypatch
) -> None:
    texts = _texts(300)
    src = tmp_path / "s"
    d = Deduplicator.open(src, memtable_size=10**6)
    d.add([{"id": str(i), "text": t} for i, t in enumerate(texts[:200])])
    d.add({"id": "x", "text": texts[200]})
    want = d.store._state.bandtable.entries()
    (wal,) = src.glob("wal-*.log")
    first = read_wal(wal, truncate=False).records[0]
    assert isinstance(first, AddRecord) and first.keys is not None
    _unclosed_copy(d, src, tmp_path / "a")
    d.close()

    computed: list[int] = []
    real = Deduplicator._band_keys_of

    def spy(self, texts):
        computed.append(len(texts))
        return real(self, texts)

    monkeypatch.setattr(Deduplicator, "_band_keys_of", spy)
    with Deduplicator.open(tmp_path / "a") as a:
        got = a.store._state.bandtable.entries()
        assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
        assert sum(computed) == 0  # read from the log, not recomputed
        assert a.check({"id": "q", "text": texts[3]}).duplicate

    # the same log without its band keys (as an earlier build wrote it): refused, naming it
    shutil.rmtree(tmp_path / "a")
    monkeypatch.setattr(Deduplicator, "_band_keys_of", real)
    d = Deduplicator.open(src, memtable_size=10**6)
    d.add([{"id": f"n{i}", "text": t} for i, t in enumerate(texts[:200])])
    _unclosed_copy(d, src, tmp_path / "b")
    d.close()
    (wal,) = (tmp_path / "b").glob("wal-*.log")
    rep = read_wal(wal, truncate=False)
    _keyless_log(wal, rep.generation, rep.records)
    with pytest.raises(UnsupportedVersionError, match=f"{wal.name}: log records without MinHash"):
        Deduplicator.open(tmp_path / "b", memtable_size=10**6)
    assert wal.exists()  # nothing was changed


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 400), st.floats(0.0, 1.0))
def test_flush_section_writes_the_same_segment_as_materialised_entries(
    tmp_path_factory, seed, n, share
) -> None:
    """A flush writes its segments from the memtable's merged section (``BandIndex.section`` +
    ``section_for_rows``: 32-bit arrays only); the files are byte-identical to those written from
    the materialised (compact key, row id) entries, for any subset of the rows (a partition,
    deleted and expired rows left out)."""
    from neardup.index.bands import section_for_rows
    from neardup.store.segment import open_segment, write_segment

    rng = np.random.default_rng(seed)
    ent = _ent(rng, n, 5)
    rids = np.arange(7, 7 + n, dtype=np.int64)
    br = BandIndex(buffer=64)
    for a in range(0, n, 37):  # several runs and a buffer
        br.insert_many(rids[a : a + 37], ent[a : a + 37])
    sec = br.section()
    k, r = br.entries()
    sk, sr = sec
    assert sk.tolist() == k.tolist() and sr.tolist() == r.tolist()
    seg_rows = np.sort(rng.choice(rids, max(1, int(n * share)), replace=False))
    inside = np.isin(r, seg_rows)
    d = tmp_path_factory.mktemp("seg")
    fps = rng.integers(0, 2**63, len(seg_rows), dtype=np.uint64)
    ts = np.zeros(len(seg_rows))
    a = write_segment(d / "a.nds", fps, seg_rows, ts, partition=0, band_keys=(k[inside], r[inside]))
    b = write_segment(
        d / "b.nds", fps, seg_rows, ts, partition=0, band_keys=section_for_rows(sec, seg_rows)
    )
    assert a == b and (d / "a.nds").read_bytes() == (d / "b.nds").read_bytes()
    open_segment(d / "b.nds").close()


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1), st.integers(0, 300), st.integers(1, 7), st.floats(0.0, 1.0),
    st.integers(1, 5),
)  # fmt: skip
def test_sections_for_rows_is_section_for_rows_group_by_group(seed, n, parts, share, bands) -> None:
    """The one-pass split of a memtable section among segments (a flush or a bulk load that
    spans several partitions) gives, for each, exactly what :func:`section_for_rows` gives it
    alone: the same offsets, keys and positions; rows in no group (deleted, expired) left out,
    groups with no entries empty."""
    from neardup.index import band_section as section_module
    from neardup.index.band_section import section_for_rows, sections_for_rows

    rng = np.random.default_rng(seed)
    ent = _ent(rng, n, bands)
    rids = np.arange(7, 7 + n, dtype=np.int64)
    br = BandIndex(buffer=64)
    for a in range(0, n, 37):
        br.insert_many(rids[a : a + 37], ent[a : a + 37])
    sec = br.section()
    used = rids[rng.random(n) < share]
    label = rng.integers(0, parts, len(used))
    groups = [used[label == k] for k in range(parts)]  # disjoint, each sorted; some empty
    got = sections_for_rows(sec, groups)
    with mock.patch.object(section_module, "_MAX_COUNTS", 0):  # the band-by-band count
        got_by_band = sections_for_rows(sec, groups)
    assert len(got) == len(got_by_band) == parts
    for g, one, other in zip(groups, got, got_by_band, strict=True):
        assert np.asarray(one.offsets).tolist() == np.asarray(other.offsets).tolist()
        assert one.keys.tolist() == other.keys.tolist() and one.rows.tolist() == other.rows.tolist()
        want = section_for_rows(sec, g)
        assert (
            np.asarray(one.offsets, np.int64).tolist()
            == np.asarray(want.offsets, np.int64).tolist()
        )
        assert one.keys.tolist() == want.keys.tolist()
        assert one.rows.tolist() == want.rows.tolist()
        assert one.rowids is None and want.rowids is None


def test_a_bulk_load_over_many_partitions_writes_one_segment_each_and_finds_them(tmp_path) -> None:
    """A bulk load whose documents span several hourly partitions writes a segment per
    partition, each with the band keys of its own rows only: every document is found by its own
    text afterwards (and after a reopen)."""
    from neardup.online import Deduplicator

    rng = np.random.default_rng(5)
    now = 1_700_000_000.0
    vocab = [f"w{i}" for i in range(4000)]
    docs = [
        {
            "id": f"d{i}",
            "text": " ".join(rng.choice(vocab, 30).tolist()),
            "time": now - 3600.0 * (i % 6) - 10.0,
        }
        for i in range(300)
    ]
    with Deduplicator.open(
        tmp_path / "s", candidates="lsh", retention=24 * 3600, partition_seconds=3600,
        clock=lambda: now,
    ) as d:  # fmt: skip
        assert d.load(docs) == 300
        parts = {s.partition for s in d.store._state.segments}
        assert len(parts) == 6
        found = d.check([{"id": f"q{i}", "text": x["text"]} for i, x in enumerate(docs)])
        assert all(
            any(m.id == x["id"] for m in r.matches) for r, x in zip(found, docs, strict=True)
        )
    with Deduplicator.open(tmp_path / "s", clock=lambda: now) as d:
        found = d.check([{"id": f"q{i}", "text": x["text"]} for i, x in enumerate(docs)])
        assert all(
            any(m.id == x["id"] for m in r.matches) for r, x in zip(found, docs, strict=True)
        )


def test_a_bulk_load_writes_the_same_segments_from_its_rows_as_through_a_memtable_section(
    tmp_path,
) -> None:
    """A bulk load sorts each partition's band keys from its own rows (``row_bands``); the
    other way (kept for plans whose groups are not columns) builds a memtable section of every
    row and cuts it per partition. Both write the same segment files, byte for byte."""
    from neardup.online import Deduplicator
    from neardup.store import maintenance

    rng = np.random.default_rng(9)
    now = 1_700_000_000.0
    vocab = [f"w{i}" for i in range(3000)]
    docs = [
        {"id": f"d{i}", "text": " ".join(rng.choice(vocab, int(rng.integers(0, 40))).tolist()),
         "time": now - 3600.0 * float(rng.integers(0, 7)) - 10.0}
        for i in range(500)
    ]  # fmt: skip
    # a partition of documents with no tokens: no band keys at all (its section is empty)
    docs += [{"id": f"e{i}", "text": "... !!", "time": now - 3600.0 * 9 - 10.0} for i in range(5)]
    files = {}
    for way in ("rows", "memtable"):
        with contextlib.ExitStack() as stack:
            if way == "memtable":
                stack.enter_context(
                    mock.patch.object(maintenance, "columns_are_groups", lambda ent: False)
                )
            with Deduplicator.open(
                tmp_path / way, candidates="lsh", retention=24 * 3600, partition_seconds=3600,
                clock=lambda: now,
            ) as d:  # fmt: skip
                assert d.load(docs) == 505
                paths = sorted(s.segment.path for s in d.store._state.segments)
                files[way] = {p.name: p.read_bytes() for p in paths}
    assert len(files["rows"]) >= 7
    assert files["rows"] == files["memtable"]


def test_a_bad_position_section_is_refused(tmp_path) -> None:
    from neardup.index.bands import BandSection
    from neardup.store.segment import write_segment

    fps = np.arange(3, dtype=np.uint64)
    rids = np.arange(3, dtype=np.int64)
    ts = np.zeros(3)
    off = np.array([0, 2], np.uint64)
    for keys, rows, msg in (
        ([1, 2], [0, 3], "not in the segment"),
        ([2, 1], [0, 1], "not sorted"),
        ([1, 1], [1, 0], "not sorted"),
    ):
        sec = BandSection(off, np.array(keys, np.uint32), np.array(rows, np.uint32))
        with pytest.raises(ValueError, match=msg):
            write_segment(tmp_path / "x.nds", fps, rids, ts, partition=0, band_keys=sec)
    with pytest.raises(ValueError, match="bound"):
        bad = BandSection(
            np.array([0, 3], np.uint64), np.zeros(2, np.uint32), np.zeros(2, np.uint32)
        )
        write_segment(tmp_path / "x.nds", fps, rids, ts, partition=0, band_keys=bad)


def test_skimmed_records_keep_every_number_and_their_keys(tmp_path) -> None:
    """``read_wal(skim_until=...)`` (a replay: what SQLite applied) skips the strings of the
    ``ADD`` records it skims and nothing else; later records and deletes are decoded in full; a
    skimmed record with a bad length is damage as before."""
    from neardup.store.wal import DeleteRecord, encode_delete

    a1 = AddRecord(1, 1.0, 5, 0, bytes(16), 0, "a", "text one", '{"m": 1}', b"\x01" + bytes(8))
    a2 = AddRecord(2, 2.0, 6, 7, b"c" * 16, 1, "b", None, None, b"\x00" + bytes(8))
    a3 = AddRecord(3, 3.0, 8, 0, bytes(16), 0, "c", "plain add", None)
    a4 = AddRecord(4, 4.0, 9, 0, bytes(16), 0, "d", "after", None, b"\x01" + bytes(8))
    recs: list[AddRecord | DeleteRecord] = [a1, DeleteRecord(1, "a"), a2, a3, a4]
    w = WalWriter(tmp_path / "w.log", 1, create=True)
    ends = [
        w.commit([encode_add(r) if isinstance(r, AddRecord) else encode_delete(r)]) for r in recs
    ]
    w.close()
    full = read_wal(tmp_path / "w.log", truncate=False).records
    assert full == recs
    got = read_wal(tmp_path / "w.log", truncate=False, skim_until=ends[3]).records
    assert got[0] == a1._replace(id="", text=None, metadata=None)
    assert got[2] == a2._replace(id="")
    assert got[1] == recs[1]  # a delete
    assert got[3] == a3._replace(id="", text=None)  # a plain ADD
    assert got[4] == a4  # ends after skim_until
    from neardup.store.wal import _skim_add

    p = encode_add(a1)
    bad = p[:51] + (10**6).to_bytes(4, "little") + p[55:]  # the id's length runs past the end
    with pytest.raises(ValueError):
        _skim_add(bad, 0, len(bad))


def test_unreadable_logged_keys_are_computed_from_the_texts_in_sqlite(
    tmp_path, monkeypatch
) -> None:
    """Skimmed records carry no text; if their logged keys cannot be used, the replay reads
    the texts from SQLite (which applied them) and computes the keys: nothing is lost."""
    import neardup.store.recovery as recovery

    texts = _texts(120)
    d = Deduplicator.open(tmp_path / "s", memtable_size=10**6)
    d.add([{"id": str(i), "text": t} for i, t in enumerate(texts)])
    want = d.store._state.bandtable.entries()
    _unclosed_copy(d, tmp_path / "s", tmp_path / "a")
    d.close()

    def unreadable(blobs, bands, sketch_width=0):
        raise ValueError("test: unreadable")

    monkeypatch.setattr(recovery, "keys_from_log", unreadable)
    with Deduplicator.open(tmp_path / "a") as a:
        got = a.store._state.bandtable.entries()
        assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(
                st.tuples(st.integers(0, 3), st.integers(0, 12), st.integers(0, 7)), max_size=40
            ),
            st.sets(st.integers(0, 60), min_size=8, max_size=8),
            st.lists(st.booleans(), min_size=8, max_size=8),
        ),
        max_size=20,
    )
)
def test_merge_mapped_equals_materialising_and_sorting(segments) -> None:
    """A merge's band sections: segments of interleaved row ids (a merge may combine segments
    whose ranges overlap), rows deleted, equal keys across segments ordered by merged row; up
    to twenty inputs, so the runs' tournament has up to five levels, runs that are empty or
    used up early, and leaves no run fills."""
    ids = [np.array(sorted(rowids), np.int64) for _, rowids, _ in segments]
    alive = [np.array(keep, bool) for _, _, keep in segments]
    merged = np.unique(np.concatenate([i[a] for i, a in zip(ids, alive, strict=True)] or [[]]))
    sections, maps = [], []
    for (entries, _, _), rid, a in zip(segments, ids, alive, strict=True):
        k = np.array([(g << 32) | h for g, h, _ in entries], np.uint64)
        pos = np.array([p for _, _, p in entries], np.int64)
        k, pos = sort_entries(k, pos)
        sections.append(BandSection.from_sorted(k, pos.astype(np.uint32)))
        maps.append(np.where(a, np.searchsorted(merged, rid), -1).astype(np.int64))
    want = merge_mapped_reference(sections, maps)
    wk, wr = want
    got = merge_mapped(sections, maps)
    gk, gr = got
    assert gk.tolist() == wk.tolist() and gr.tolist() == wr.tolist()
    assert int(got.offsets[-1]) == len(got)
    assert got.offsets.tolist()[: len(want.offsets)] == want.offsets.tolist()[: len(got.offsets)]


@pytest.mark.parametrize("runs", [0, 1, 2, 3, 64, 65, 300])
def test_merge_runs_equals_sorting_the_words(runs) -> None:
    """The runs' tournament (``_merge_runs``) against a sort of every word: runs of any length
    (empty ones too) and counts on both sides of a power of two; keys as large as a key may be,
    so no word is mistaken for a used-up run's head."""
    from neardup.index import band_merge

    rng = np.random.default_rng(runs)
    lengths = rng.integers(0, 50, runs)
    lengths[::7] = 0
    total = int(lengths.sum())
    keys = rng.integers(2**32 - 4, 2**32, total, dtype=np.uint64)  # many equal keys
    rows = rng.permutation(total).astype(np.uint64)  # distinct rows, as a merge's are
    words = (keys << np.uint64(32)) | rows
    bounds = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    for a, b in itertools.pairwise(bounds.tolist()):
        words[a:b].sort()
    out_k = np.zeros(total + 3, np.uint32)
    out_r = np.zeros(total + 3, np.uint32)
    band_merge._merge_runs(words, bounds, out_k, out_r, 3)
    want = np.sort(words)
    assert out_k[3:].tolist() == (want >> np.uint64(32)).tolist()
    assert out_r[3:].tolist() == (want & np.uint64(0xFFFFFFFF)).tolist()
    assert out_k[:3].tolist() == [0, 0, 0]


def test_merge_mapped_refuses_a_map_that_reorders_rows() -> None:
    sec = BandSection.from_sorted(np.array([1, 2], np.uint64), np.array([0, 1], np.uint32))
    with pytest.raises(ValueError, match="increase"):
        merge_mapped([sec], [np.array([1, 0], np.int64)])
    with pytest.raises(ValueError, match="a map of 1 rows"):
        merge_mapped([sec], [np.array([0], np.int64)])
