"""The band-key sections of the online ``lsh`` mode against their references: a segment's
band-key section round-trips (empty, packed, damaged) and earlier segment formats are refused;
``BandIndex`` and ``lookup`` equal brute force and ``lookup_reference``; the section searches
(forward gallop, interpolation, packed directories of every width, a long run of one key) equal
their NumPy twin; the memtable's section merge and rows out of order; a ``SectionGroup`` looks
up and searches (on the kernel threads, in lockstep) as its sections and the reference.
``band_hashes`` is shared with ``tests/index/test_band_packed.py``. The ``lsh`` mode through the
Deduplicator: ``test_online_lsh.py``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.errors import CorruptFileError, UnsupportedVersionError
from neardup.index.bands import BandIndex, BandSection, lookup, sort_entries
from neardup.index.reference import lookup_reference
from neardup.store.segment import open_segment, write_segment


def test_segment_band_section_roundtrip_and_empty(tmp_path) -> None:
    fps = np.arange(5, dtype=np.uint64)
    rids = np.array([3, 4, 7, 9, 10], np.int64)
    ts = np.zeros(5)
    empty = tmp_path / "empty.nds"
    write_segment(empty, fps, rids, ts, partition=0)
    s = open_segment(empty)
    assert s.band_keys is None and s.band_runs() == []
    s.close()
    # an empty section: its 16-byte head and one group offset; no sketches: an 8-byte head
    assert empty.stat().st_size == 64 + 5 * 24 + 16 + 8 + 8
    v3 = tmp_path / "v3.nds"
    # compact keys: group (band) in the top 32 bits
    keys = np.array([9, 5, 5, 1, (2 << 32) | 5, (1 << 32) | 7], np.uint64)
    rows = np.array([10, 7, 3, 4, 9, 3], np.int64)
    write_segment(v3, fps, rids, ts, partition=0, band_keys=(keys, rows))
    s = open_segment(v3)
    [sec] = s.band_runs()
    k, r = sec
    assert k.tolist() == [1, 5, 5, 9, (1 << 32) | 7, (2 << 32) | 5]
    assert r.tolist() == [4, 3, 7, 10, 3, 9]
    assert sec.offsets.tolist() == [0, 4, 5, 6]
    # packed: groups this small take no directory, 32-bit keys, 3-bit rows (5 rows), each
    # part padded to 8 bytes after a 16-byte section head and the group offsets
    assert (sec.dbits, sec.kbits, sec.rbits) == (0, 32, 3)
    assert v3.stat().st_size == 64 + 5 * 24 + 16 + 8 * 4 + 24 + 8 + 8
    got = lookup([sec], np.array([[5, 7], [(2 << 32) | 5, 9]], np.uint64), 10)
    assert [g.tolist() for g in got] == [[3, 7], [9, 10]]
    s.close()
    raw = bytearray(v3.read_bytes())
    raw[-9] ^= 1
    v3.write_bytes(bytes(raw))
    with pytest.raises(CorruptFileError):
        open_segment(v3)
    with pytest.raises(ValueError, match="not in the segment"):
        write_segment(tmp_path / "x.nds", fps, rids, ts, partition=0, band_keys=(keys, rows + 1))


def _write_v2(path, fps, rids, ts, full_keys, rows) -> None:
    """A version-2 segment as an earlier build wrote it (64-bit entry keys, u32 rows)."""
    import struct
    import zlib

    import xxhash

    pos = np.searchsorted(rids, rows)
    order = np.lexsort((pos, full_keys))
    k = np.ascontiguousarray(full_keys[order], "<u8")
    p = np.ascontiguousarray(pos[order], "<u4")
    body = (
        fps.astype("<u8").tobytes()
        + rids.astype("<i8").tobytes()
        + ts.astype("<f8").tobytes()
        + struct.pack("<Q", len(k))
        + k.tobytes()
        + p.tobytes()
        + bytes((-4 * len(p)) % 8)
    )
    head = struct.pack(
        "<8sIIQqddQI",
        b"NDUPSEG\x00",
        2,
        64,
        len(rids),
        0,
        0.0,
        0.0,
        xxhash.xxh64_intdigest(body),
        0,
    )
    path.write_bytes(head + struct.pack("<I", zlib.crc32(head)) + body)


def test_segments_of_earlier_formats_are_refused(tmp_path) -> None:
    """Segment files of earlier builds (a version-2 band-key section, or none at all) are
    refused with UnsupportedVersionError naming the file; nothing reads them."""
    import struct
    import zlib

    import xxhash

    fps = np.arange(4, dtype=np.uint64)
    rids = np.array([1, 2, 5, 8], np.int64)
    full = np.array([(0 << 48) | 77, (0 << 48) | 77, (3 << 48) | 12, (1 << 48) | 9], np.uint64)
    rows = np.array([2, 8, 5, 1], np.int64)
    _write_v2(tmp_path / "v2.nds", fps, rids, np.zeros(4), full, rows)
    with pytest.raises(UnsupportedVersionError, match=r"v2\.nds: segment version 2"):
        open_segment(tmp_path / "v2.nds")
    # the earlier version 1: the rows and no band-key section
    body = fps.astype("<u8").tobytes() + rids.astype("<i8").tobytes() + bytes(8 * 4)
    head = struct.pack(
        "<8sIIQqddQI", b"NDUPSEG\x00", 1, 64, 4, 0, 0.0, 0.0, xxhash.xxh64_intdigest(body), 0
    )
    (tmp_path / "old.nds").write_bytes(head + struct.pack("<I", zlib.crc32(head)) + body)
    with pytest.raises(UnsupportedVersionError, match=r"old\.nds: a segment without a band-key"):
        open_segment(tmp_path / "old.nds")
    # the build before the sketches: the band-key section ends the file
    write_segment(tmp_path / "now.nds", fps, rids, np.zeros(4), partition=0)
    raw = (tmp_path / "now.nds").read_bytes()[:-8]  # less the (empty) sketch section's head
    body = raw[64:]
    head = struct.pack(
        "<8sIIQqddQI", b"NDUPSEG\x00", 1, 64, 4, 0, 0.0, 0.0, xxhash.xxh64_intdigest(body), 0
    )
    (tmp_path / "pre.nds").write_bytes(head + struct.pack("<I", zlib.crc32(head)) + body)
    with pytest.raises(UnsupportedVersionError, match=r"pre\.nds: a segment without a sketch"):
        open_segment(tmp_path / "pre.nds")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 200)), max_size=120),
    st.lists(st.integers(0, 7), min_size=1, max_size=4),
    st.integers(1, 4),
)
def test_band_lookup_equals_brute_force(entries, queries, cap) -> None:
    # a row has one key per band; rows arrive in row-id order (as the writer allocates them)
    entries = sorted(dict.fromkeys(entries), key=lambda e: e[1])
    br = BandIndex(buffer=7)
    for key, rid in entries:
        br.insert_many(np.array([rid], np.int64), np.array([[key]], np.uint64))
    got = br.query_many(np.array(queries, np.uint64)[:, None], cap)
    for q, g in zip(queries, got, strict=True):
        members = sorted({r for k, r in entries if k == q})
        allm = sorted(r for k, r in entries if k == q)
        if len(allm) > 2 * cap:
            uniq = sorted(set(allm))
            want = sorted(set(uniq[:cap]) | set(uniq[-cap:]))
        else:
            want = members
        assert g.tolist() == want
    k, r = sort_entries(
        np.array([e[0] for e in entries], np.uint64), np.array([e[1] for e in entries], np.int64)
    )
    assert [x.tolist() for x in lookup([(k, r)], np.array(queries, np.uint64)[:, None], 10**6)] == [
        sorted({rr for kk, rr in entries if kk == q}) for q in queries
    ]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 9), st.integers(0, 60)), max_size=80),
        min_size=1,
        max_size=4,
    ),
    st.lists(st.lists(st.integers(0, 10), min_size=3, max_size=3), min_size=1, max_size=6),
    st.integers(1, 3),
)
def test_vectorised_lookup_equals_reference(runs, queries, cap) -> None:
    """The vectorised lookup (distinct keys once, buckets gathered by array arithmetic) gives
    what the per-entry reference gives, over several runs, bands and capped buckets, for a
    batch of queries and for each query alone."""
    from neardup.index.bands import BandSection

    def ck(x):  # compact keys in three groups (bands)
        x = np.asarray(x, np.uint64)
        return ((x % np.uint64(3)) << np.uint64(32)) | x

    arr = []
    for n, run in enumerate(runs):
        k, r = sort_entries(ck([e[0] for e in run]), np.array([e[1] for e in run], np.int64))
        if n % 2 and len(k):  # a section with row offsets, as the memtable seals them
            arr.append(BandSection.from_sorted(k, (r - 0).astype(np.uint32), base=0))
        else:
            arr.append((k, r))
    q = ck(queries)
    q[np.array(queries) == 10] = np.uint64(0xFFFFFFFFFFFFFFFF)  # rows without keys: nothing
    got = lookup(arr, q, cap)
    want = lookup_reference(arr, q, cap)
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    # one query alone (a single request's path: the union of its keys' rows)
    for i in range(len(q)):
        assert [g.tolist() for g in lookup(arr, q[i : i + 1], cap)] == [want[i].tolist()]
    # the memtable's runs: rows added in row-id order, some removed again
    br = BandIndex(buffer=5)
    entries = sorted({(int(ck([e[0]])[0]), e[1]) for run in runs for e in run}, key=lambda e: e[1])
    added = []
    for rid in sorted({e[1] for e in entries}):
        keys = [k for k, r in entries if r == rid]
        br.insert_many(np.array([rid], np.int64), np.array(keys, np.uint64)[None, :1])
        added.append((keys[0], rid))
    flat = br.entries()
    resorted = sort_entries(*flat)
    assert flat[0].tolist() == resorted[0].tolist() and flat[1].tolist() == resorted[1].tolist()
    assert sorted(zip(flat[0].tolist(), flat[1].tolist(), strict=True)) == sorted(added)
    assert [g.tolist() for g in br.query_many(q, cap)] == [
        w.tolist() for w in lookup_reference([flat], q, cap)
    ]
    gone = np.array(sorted({e[1] for e in entries})[::3], np.int64)
    br.remove_many(gone)
    assert not np.isin(br.entries()[1], gone).any()


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 30)), max_size=60),
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 31)), min_size=1, max_size=20),
    st.sampled_from([None, 0, 8, 16]),
)
def test_section_search_kernel_equals_numpy_twin(entries, queries, dbits) -> None:
    """The forward gallop (a batch's search) on an unpacked section's bytes (``dbits`` None)
    and on packed ones of each directory width, keys spread over the buckets."""
    from neardup.index.band_packed import pack_section
    from neardup.index.bands import BandSection
    from neardup.index.reference import section_search_reference
    from neardup.index.section_search import _section_search_kernel

    def spread(h: int) -> int:  # keys over the buckets, their low bits not in their order
        return (h * 0x9E37_79B9) & 0xFFFF_FFFF

    k = np.array([(g << 32) | spread(h) for g, h in entries], np.uint64)
    k, r = sort_entries(k, np.arange(len(k), dtype=np.int64))
    sec = BandSection.from_sorted(k, r.astype(np.uint32))
    uk = np.unique(np.array([(g << 32) | spread(h) for g, h in queries], np.uint64))
    if dbits is None:
        no_dirs = np.zeros(0, np.uint32)
        lo, hi = _section_search_kernel(sec.offsets, 0, no_dirs, sec.keys.view(np.uint8), 32, uk)
    else:
        p = pack_section(sec.offsets, sec.keys, sec.rows, max(len(k), 1), dbits=dbits)
        lo, hi = _section_search_kernel(p.offsets, p.dbits, p.dirs, p.kbytes, p.kbits, uk)
    lo2, hi2 = section_search_reference(sec.offsets, sec.keys, uk)
    assert lo.tolist() == lo2.tolist() and hi.tolist() == hi2.tolist()
    for x, a, b in zip(uk.tolist(), lo.tolist(), hi.tolist(), strict=True):
        assert list(range(a, b)) == [i for i, kk in enumerate(k.tolist()) if kk == x]


def band_hashes(rng: np.random.Generator, kind: str, m: int) -> np.ndarray:
    """``m`` 32-bit keys of one band group (uint64): uniform (the hash mix the searches are
    made for), clustered in a narrow range, or runs of equal keys ("repeated")."""
    if kind == "uniform":
        h = rng.integers(0, 2**32, m)
    elif kind == "clustered":
        h = rng.integers(2**31, 2**31 + 5 * m + 1, m)
    else:
        h = rng.choice(rng.integers(0, 2**32, 8), m)
    return h.astype(np.uint64)


def _group_keys(
    rng: np.random.Generator, kind: str, sizes: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (compact key, row) entries of band groups of ``sizes`` entries of
    :func:`band_hashes`."""
    parts = [
        (np.uint64(g) << np.uint64(32)) | band_hashes(rng, kind, m) for g, m in enumerate(sizes)
    ]
    k = np.concatenate(parts)
    return sort_entries(k, np.arange(len(k), dtype=np.int64))


def _section_and_queries(
    seed: int, kind: str, sizes: list[int], nq: int, *, neighbours: bool
) -> tuple[np.ndarray, BandSection, np.ndarray]:
    """(entries' keys, their section, sorted distinct query keys) of a section search property
    test: groups of :func:`band_hashes`, ``nq`` present keys, (``neighbours``) each one's key
    or the next, and ``nq`` random keys over the groups and one past them (misses)."""
    rng = np.random.default_rng(seed)
    k, r = _group_keys(rng, kind, sizes)
    sec = BandSection.from_sorted(k, r.astype(np.uint32))
    present = k[rng.integers(0, len(k), nq)] if len(k) else np.zeros(0, np.uint64)
    g = rng.integers(0, len(sizes) + 1, nq).astype(np.uint64)
    parts = [present]
    if neighbours:
        parts.append(present + rng.integers(0, 2, len(present)).astype(np.uint64))
    parts.append((g << np.uint64(32)) | rng.integers(0, 2**32, nq).astype(np.uint64))
    return k, sec, np.unique(np.concatenate(parts))


@settings(max_examples=100, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.lists(st.integers(0, 3000), min_size=1, max_size=4),
    st.sampled_from(["uniform", "clustered", "repeated"]),
    st.integers(1, 40),
    st.sampled_from([None, 0, 8, 16]),
)
def test_interpolating_section_search_equals_numpy_twin(seed, sizes, kind, nq, dbits) -> None:
    """The search for few keys in large groups (interpolation, then a binary search) finds the
    same entries as the NumPy twin whatever the keys: uniform (the hash mix it is made for),
    clustered in a narrow range, or runs of equal keys; queries hit present keys and miss. On
    the unpacked section (``dbits`` None) and packed ones of every directory width."""
    from neardup.index.band_packed import pack_section
    from neardup.index.reference import section_search_reference
    from neardup.index.section_search import _section_interp_kernel, packed_search

    k, sec, uk = _section_and_queries(seed, kind, sizes, nq, neighbours=False)
    if dbits is None:
        no_dirs = np.zeros(0, np.uint32)
        lo, hi = _section_interp_kernel(sec.offsets, 0, no_dirs, sec.keys.view(np.uint8), 32, uk)
    else:
        packed = pack_section(sec.offsets, sec.keys, sec.rows, max(len(k), 1), dbits=dbits)
        lo, hi = packed_search(packed, uk)
    lo2, hi2 = section_search_reference(sec.offsets, sec.keys, uk)
    assert lo.tolist() == lo2.tolist() and hi.tolist() == hi2.tolist()


@settings(max_examples=100, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.lists(st.integers(0, 3000), min_size=1, max_size=4),
    st.sampled_from(["uniform", "clustered", "repeated"]),
    st.integers(1, 600),
    st.sampled_from([None, 0, 8, 16]),
)
def test_batch_section_search_equals_numpy_twin(seed, sizes, kind, nq, dbits) -> None:
    """A batch's search (many sorted keys: the forward gallop in each key's bucket from the
    previous key's run) finds the same entries as the NumPy twin on large groups: uniform
    keys, clustered ones and long runs of equal keys, on the unpacked section and packed ones
    of every directory width; queries hit present keys, their neighbours, and miss."""
    from neardup.index.band_packed import pack_section
    from neardup.index.reference import section_search_reference
    from neardup.index.section_search import _section_search_kernel

    k, sec, uk = _section_and_queries(seed, kind, sizes, nq, neighbours=True)
    if dbits is None:
        no_dirs = np.zeros(0, np.uint32)
        lo, hi = _section_search_kernel(sec.offsets, 0, no_dirs, sec.keys.view(np.uint8), 32, uk)
    else:
        p = pack_section(sec.offsets, sec.keys, sec.rows, max(len(k), 1), dbits=dbits)
        lo, hi = _section_search_kernel(p.offsets, p.dbits, p.dirs, p.kbytes, p.kbits, uk)
    lo2, hi2 = section_search_reference(sec.offsets, sec.keys, uk)
    assert lo.tolist() == lo2.tolist() and hi.tolist() == hi2.tolist()


@pytest.mark.parametrize("dbits", [None, 0, 8])
def test_a_search_that_lands_in_a_long_run_of_one_key_finds_its_ends(dbits) -> None:
    """The interpolated guess of a search lands inside a run of one key far longer than the
    walk from it (boilerplate: many rows with one band key): searches for that key, for keys
    just below and above it, and for keys the run hides from the guess find the same entries
    as the NumPy twin."""
    from neardup.index.band_packed import pack_section
    from neardup.index.bands import BandSection
    from neardup.index.reference import section_search_reference
    from neardup.index.section_search import _section_interp_kernel

    rng = np.random.default_rng(5)
    run_key = 2**31
    h = np.concatenate(
        [
            rng.integers(0, run_key, 200),
            np.full(600, run_key),
            rng.integers(run_key + 1, 2**32, 200),
        ]
    ).astype(np.uint64)
    k, r = sort_entries(
        np.concatenate([h, (np.uint64(1) << np.uint64(32)) | h]), np.arange(2 * h.size)
    )
    sec = BandSection.from_sorted(k, r.astype(np.uint32))
    q = [run_key - 1, run_key, run_key + 1, 0, 2**32 - 1, int(h[7]), int(h[-3])]
    uk = np.unique(np.array([(g << 32) | x for g in (0, 1, 2) for x in q], np.uint64))
    if dbits is None:
        no_dirs = np.zeros(0, np.uint32)
        lo, hi = _section_interp_kernel(sec.offsets, 0, no_dirs, sec.keys.view(np.uint8), 32, uk)
    else:  # (the interpolating search itself: packed_search would gallop for so many keys)
        p = pack_section(sec.offsets, sec.keys, sec.rows, len(k), dbits=dbits)
        lo, hi = _section_interp_kernel(p.offsets, p.dbits, p.dirs, p.kbytes, p.kbits, uk)
    lo2, hi2 = section_search_reference(sec.offsets, sec.keys, uk)
    assert lo.tolist() == lo2.tolist() and hi.tolist() == hi2.tolist()
    assert (hi - lo).max() == 600


def test_band_runs_rows_out_of_order_rebase() -> None:
    """Rows below the memtable's first row id (re-added after a take-back) move its base; the
    entries stay sorted by (key, row) and lookups find every row."""
    br = BandIndex(buffer=4)
    for rid in (10, 11, 12, 13, 14, 15):
        br.insert_many(np.array([rid], np.int64), np.array([[7, rid % 2]], np.uint64))
    br.insert_many(np.array([5], np.int64), np.array([[7, 1]], np.uint64))
    br.insert_many(np.array([30], np.int64), np.array([[7, 0]], np.uint64))
    k, r = br.entries()
    assert list(zip(k.tolist(), r.tolist(), strict=True)) == sorted(
        zip(k.tolist(), r.tolist(), strict=True)
    )
    assert br.query_many(np.array([[7, 1]], np.uint64), 100)[0].tolist() == [
        5,
        10,
        11,
        12,
        13,
        14,
        15,
        30,
    ]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 20)), max_size=60),
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 20)), max_size=60),
)
def test_merge_sections_kernel_equals_numpy_twin(a, b) -> None:
    """The memtable's one-pass section merge equals materialising and sorting; rows of ``a``
    (older) come first among equal keys."""
    from neardup.index.bands import BandSection, merge_sections
    from neardup.index.reference import merge_sections_reference

    def section(entries, first_row):
        k = np.array([(g << 32) | h for g, h in entries], np.uint64)
        r = np.arange(first_row, first_row + len(k), dtype=np.int64)
        k, r = sort_entries(k, r)
        return BandSection.from_sorted(k, (r - 100).astype(np.uint32), base=100)

    sa, sb = section(a, 100), section(b, 100 + len(a))
    got, want = merge_sections(sa, sb), merge_sections_reference(sa, sb)
    gk, gr = got
    wk, wr = want
    assert gk.tolist() == wk.tolist() and gr.tolist() == wr.tolist()
    if len(got):
        assert got.offsets[-1] == len(got)
        assert (
            got.offsets.tolist()[: len(want.offsets)] == want.offsets.tolist()[: len(got.offsets)]
        )


@settings(max_examples=80, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.lists(st.integers(0, 400), min_size=1, max_size=6),
    st.integers(1, 30),
    st.sampled_from([None, 1, 3, 32]),
    st.booleans(),
)
def test_a_section_group_looks_up_as_its_sections(seed, sizes, nq, cap, few_values) -> None:
    """Sections searched and gathered as one SectionGroup (a store's segments) give what the
    same sections passed one by one give, and what the reference gives, beside a memtable run:
    with buckets over the cap (few distinct values), keys found in several sections and keys
    found nowhere; few keys in large sections take the interpolating search."""
    from neardup.index.bands import BandSection, SectionGroup

    rng = np.random.default_rng(seed)
    hi_val = 6 if few_values else 2**32
    sections, row = [], 0
    for m in sizes:
        k = (rng.integers(0, 4, m).astype(np.uint64) << np.uint64(32)) | rng.integers(
            0, hi_val, m
        ).astype(np.uint64)
        rowids = np.arange(row, row + m, dtype=np.int64) * 3 + 1  # as a segment's: sorted
        row += m
        k, pos = sort_entries(k, np.arange(m, dtype=np.int64))
        sections.append(BandSection.from_sorted(k, pos.astype(np.uint32), rowids=rowids))
    mem = BandIndex()
    mem.insert_many(np.arange(10**6, 10**6 + 5), rng.integers(0, 6, (5, 4)).astype(np.uint64))
    present = [s.compact()[rng.integers(0, len(s), 2)] for s in sections if len(s)]
    queries = np.concatenate(
        [*present, (rng.integers(0, 4, nq).astype(np.uint64) << np.uint64(32)) | 5]
    )
    queries = queries[: (len(queries) // 4) * 4].reshape(-1, 4) if len(queries) >= 4 else None
    if queries is None:
        return
    runs = [*mem.runs(), *sections]
    want = lookup(runs, queries, cap)
    got = lookup([*mem.runs(), SectionGroup(sections)], queries, cap)
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    if cap is not None:
        ref = lookup_reference(runs, queries, cap)
        assert [g.tolist() for g in got] == [r.tolist() for r in ref]


def _hits(hits) -> list[tuple[int, int, int, int]]:
    """A group's buckets as (section, key index, first, end) tuples, in their order."""
    cols = (hits.section, hits.key, hits.lo, hits.hi)
    return list(zip(*(c.tolist() for c in cols), strict=True))


def _hits_as_reference(group, uk) -> list[tuple[int, int, int, int]]:
    """The non-empty buckets of ``uk`` in each of ``group``'s sections by the NumPy reference,
    section by section and keys in order: what ``SectionGroup.search`` answers."""
    from neardup.index.reference import section_search_reference

    out = []
    for s, sec in enumerate(group.sections):
        lo, hi = section_search_reference(sec.offsets, sec.keys, uk)
        out += [(s, q, int(lo[q]), int(hi[q])) for q in np.flatnonzero(hi > lo).tolist()]
    return out


@pytest.mark.parametrize("threads", [1, 2])
def test_a_batch_searches_a_group_on_the_kernel_threads_as_the_reference(threads) -> None:
    """A batch's keys (past ``_PARALLEL_KEYS``) search a group's sections on the kernel threads,
    a range of sections each: the same entries as the NumPy reference, section by section, on
    one thread or two."""
    from unittest import mock

    from neardup._threads import kernel_threads
    from neardup.index.bands import BandSection, SectionGroup

    rng = np.random.default_rng(threads)
    sections = []
    for m in (300, 1, 900, 40, 2500, 700, 5):
        k, r = _group_keys(rng, "uniform", [m, m // 2 + 1, 3])
        sections.append(BandSection.from_sorted(k, r.astype(np.uint32), rowids=np.arange(len(k))))
    keys = np.concatenate([s.compact() for s in sections])
    g = rng.integers(0, 4, 400).astype(np.uint64)
    uk = np.unique(
        np.concatenate(
            [
                keys[rng.integers(0, len(keys), 400)],
                (g << np.uint64(32)) | rng.integers(0, 2**32, 400).astype(np.uint64),
            ]
        )
    )
    group = SectionGroup(sections)
    with (
        mock.patch("neardup.index.section_search._PARALLEL_KEYS", 16),
        kernel_threads(threads),
    ):
        hits = group.search(uk)
    assert _hits_as_reference(group, uk) == _hits(hits)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.lists(st.integers(0, 6000), min_size=1, max_size=5),
    st.lists(st.booleans(), min_size=1, max_size=5),
    st.sampled_from(["uniform", "clustered", "repeated"]),
    st.integers(1, 6),
)
def test_a_section_group_searches_few_keys_in_lockstep_as_the_reference(
    seed, sizes, dense, kind, nq
) -> None:
    """Few keys in large sections (a single request against a store's segments): the group's
    lockstep interpolation, beside sections searched by the forward gallop, finds the same
    entries as the NumPy reference, section by section, whatever the keys."""
    from neardup.index.bands import BandSection, SectionGroup

    rng = np.random.default_rng(seed)
    sections = []
    for j, m in enumerate(sizes):
        k, r = _group_keys(rng, kind, np.bincount(rng.integers(0, 3, m), minlength=3).tolist())
        if dense[j % len(dense)]:  # a small section: searched by the gallop
            k, r = k[:40], r[:40]
        rowids = np.arange(len(k), dtype=np.int64)
        sections.append(BandSection.from_sorted(k, r.astype(np.uint32), rowids=rowids))
    keys = np.concatenate([s.compact() for s in sections])
    present = keys[rng.integers(0, len(keys), nq)] if len(keys) else np.zeros(0, np.uint64)
    g = rng.integers(0, 4, nq).astype(np.uint64)
    uk = np.unique(
        np.concatenate(
            [present, (g << np.uint64(32)) | rng.integers(0, 2**32, nq).astype(np.uint64)]
        )
    )
    group = SectionGroup(sections)
    from unittest import mock

    # sections of 64 entries a key or more take the lockstep interpolation (a store's
    # threshold is higher; these sections are small enough to search by reference)
    with mock.patch("neardup.index.section_search._SPARSE_GAP", 64):
        hits = group.search(uk)
    assert _hits_as_reference(group, uk) == _hits(hits)
