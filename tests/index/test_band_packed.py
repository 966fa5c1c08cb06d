"""Packed band-key sections (a segment's layout): every key and row comes back, searches and
lookups through them equal the unpacked section's and the NumPy twins, segment merges read
them, the layout takes the fewest bytes, and a damaged or earlier-build section is refused."""

from __future__ import annotations

import struct
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.errors import CorruptFileError, UnsupportedVersionError
from neardup.index.band_packed import PackedSection, pack_section, packed_layout, row_bits
from neardup.index.bands import BandSection, SectionGroup, lookup, merge_mapped
from neardup.index.reference import lookup_reference, merge_mapped_reference
from neardup.store.segment import HEADER_SIZE, open_segment, write_segment
from tests.online.test_online_lsh_sections import band_hashes

_SHIFT = np.uint64(32)


def _section(rng: np.random.Generator, sizes: list[int], kind: str, n_rows: int) -> BandSection:
    """A sorted section of groups of ``sizes`` entries over rows below ``n_rows``, keys of
    :func:`band_hashes`: uniform, clustered in a narrow range (one bucket), or a few values
    repeated (buckets of many rows)."""
    parts, rows = [], []
    for g, m in enumerate(sizes):
        parts.append((np.uint64(g) << _SHIFT) | band_hashes(rng, kind, m))
        rows.append(
            rng.integers(0, n_rows, m)
            if n_rows > 10**6
            else rng.choice(n_rows, m, replace=m > n_rows)
        )
    k = np.concatenate(parts) if parts else np.zeros(0, np.uint64)
    r = np.concatenate(rows).astype(np.int64) if rows else np.zeros(0, np.int64)
    o = np.lexsort((r, k))
    return BandSection.from_sorted(k[o], r[o].astype(np.uint32))


_sizes = st.lists(st.integers(0, 600), min_size=1, max_size=5)
_kinds = st.sampled_from(["uniform", "clustered", "repeated"])


@settings(max_examples=80, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    _sizes,
    _kinds,
    st.sampled_from([0, 8, 16]),
    st.sampled_from([1, 2, 3, 1000, 2**20, 2**26 + 1, 2**29 - 3, 2**32 - 1]),
)
def test_every_key_and_row_comes_back(seed, sizes, kind, dbits, n_rows) -> None:
    """Packed with each directory width and row fields of 1 to 32 bits (straddling words
    past 25), a section unpacks to its keys and rows, as compact keys and row ids too, and its
    largest row is known."""
    rng = np.random.default_rng(seed)
    sec = _section(rng, sizes, kind, n_rows)
    ids = np.arange(1000, dtype=np.int64) * 3 + 7 if n_rows <= 1000 else None
    pk = pack_section(sec.offsets, sec.keys, sec.rows, n_rows, ids, dbits=dbits)
    assert pk.check() is None and len(pk) == len(sec)
    assert pk.rbits == row_bits(n_rows) == max(1, (n_rows - 1).bit_length())
    assert pk.kbits == 32 - dbits
    keys, rows = pk.unpacked()
    assert keys.tolist() == sec.keys.tolist() and rows.tolist() == sec.rows.tolist()
    k, r = pk
    want = sec.rows.astype(np.int64) if ids is None else ids[sec.rows]
    assert k.tolist() == sec.compact().tolist() and r.tolist() == want.tolist()
    assert pk.max_row() == (int(sec.rows.max()) if len(sec) else -1)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.lists(st.lists(st.integers(0, 400), min_size=1, max_size=4), min_size=1, max_size=4),
    _kinds,
    st.integers(1, 30),
    st.sampled_from([None, 1, 3]),
)
def test_lookups_through_packed_sections_equal_the_twin(seed, segments, kind, nq, cap) -> None:
    """A group of packed sections (mixed widths) answers a batch and a single query as the
    one-entry-at-a-time twin over the unpacked sections does, the valve included."""
    rng = np.random.default_rng(seed)
    packed, plain, base = [], [], 0
    for i, sizes in enumerate(segments):
        sec = _section(rng, sizes, kind, 500)
        ids = base + np.arange(500, dtype=np.int64)
        base += 500
        pk = pack_section(sec.offsets, sec.keys, sec.rows, 500, ids, dbits=(0, 8, 16)[i % 3])
        packed.append(pk)
        sec.rowids = ids
        plain.append(sec)
    nb = max(len(s) for s in segments)
    every = np.concatenate([p.compact() for p in packed] + [np.zeros(0, np.uint64)])
    q = rng.integers(0, 2**32, (nq, nb)).astype(np.uint64) | (
        np.arange(nb, dtype=np.uint64) << _SHIFT
    )
    if every.size:  # queries that meet stored keys
        hit = rng.random((nq, nb)) < 0.7
        picks = every[rng.integers(0, every.size, (nq, nb))]
        q[hit] = picks[hit]
    want = lookup_reference(plain, q, cap if cap is not None else 10**9)
    got = lookup([SectionGroup(packed)], q, cap)
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    with mock.patch("neardup.index.section_search._PARALLEL_KEYS", 4):  # over the threads
        got = lookup([SectionGroup(packed)], q, cap)
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    one = lookup(packed, q[:1], cap)  # sections one by one, a single request
    assert one[0].tolist() == want[0].tolist()


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.lists(_sizes, min_size=1, max_size=4), _kinds)
def test_merges_read_packed_sections(seed, segments, kind) -> None:
    """Segments' packed sections merge (rows renamed, deleted ones left out) exactly as their
    materialised entries sorted."""
    rng = np.random.default_rng(seed)
    packed, plain, maps, at = [], [], [], 0
    for i, sizes in enumerate(segments):
        sec = _section(rng, sizes, kind, 300)
        keep = rng.random(300) < 0.8
        m = np.full(300, -1, np.int64)
        m[keep] = at + np.arange(int(keep.sum()))
        at += int(keep.sum())
        packed.append(pack_section(sec.offsets, sec.keys, sec.rows, 300, dbits=(16, 0, 8)[i % 3]))
        plain.append(sec)
        maps.append(m)
    got = merge_mapped(packed, maps)
    want = merge_mapped_reference(plain, maps)
    assert got.offsets.tolist()[: len(want.offsets)] == want.offsets.tolist()[: len(got.offsets)]
    assert got.keys.tolist() == want.keys.tolist() and got.rows.tolist() == want.rows.tolist()


def test_the_layout_takes_the_fewest_bytes() -> None:
    """No directory for small groups, 8 bits from about a thousand entries a group, 16 from
    about 262 k; rows in the bits the segment needs. A million-row segment's 79 bands: 4.76
    bytes an entry against the unpacked 8 (2 of key, 2.5 of row, 0.26 of directory)."""
    assert packed_layout(79 * 500, 79, 500) == (0, 32, 9)
    assert packed_layout(79 * 20_000, 79, 20_000) == (8, 24, 15)
    assert packed_layout(79 * 1_000_000, 79, 1_000_000) == (16, 16, 20)
    assert packed_layout(79 * 1_000_000, 79, 2**24 + 1)[2] == 25
    rng = np.random.default_rng(0)
    sec = _section(rng, [200_000] * 3, "uniform", 1_000_000)  # 3 bands of a 1 M-row segment
    pk = pack_section(sec.offsets, sec.keys, sec.rows, 1_000_000, dbits=16)
    assert pk.nbytes - pk.offsets.nbytes == 3 * (2**16 + 1) * 4 + len(sec) * (16 + 20) // 8


def _segment_with_a_directory(path) -> tuple[int, int]:
    """A segment whose section takes an 8-bit directory; (its section's offset, groups)."""
    rng = np.random.default_rng(3)
    n, groups = 3000, 2
    sec = _section(rng, [n] * groups, "uniform", n)
    k, r = sec
    rids = np.arange(n, dtype=np.int64)
    write_segment(
        path, np.arange(n, dtype=np.uint64), rids, np.zeros(n), partition=0, band_keys=(k, r)
    )
    seg = open_segment(path)
    assert seg.band_keys is not None and seg.band_keys.dbits == 8
    got = lookup([SectionGroup([seg.band_keys])], k[:5, None], None)
    assert [g.tolist() for g in got] == [[int(x)] for x in r[:5]]
    seg.close()
    return HEADER_SIZE + n * 24, groups


def test_a_damaged_directory_is_refused_even_unverified(tmp_path) -> None:
    """A directory that does not bound its group is refused when the segment is opened without
    the body checksum, so no kernel reads past the section."""
    p = tmp_path / "s.nds"
    at, groups = _segment_with_a_directory(p)
    raw = bytearray(p.read_bytes())
    d0 = at + 16 + 8 * (groups + 1)
    raw[d0 + 4 * 100 : d0 + 4 * 101] = struct.pack("<I", 10**6)
    p.write_bytes(bytes(raw))
    with pytest.raises(CorruptFileError, match="directory"):
        open_segment(p, verify=False)
    with pytest.raises(CorruptFileError):
        open_segment(p)


def test_an_unpacked_section_of_an_earlier_build_is_refused(tmp_path) -> None:
    """A section without key widths (an earlier build's unpacked layout) is refused as a
    version this build does not read, naming the file."""
    p = tmp_path / "s.nds"
    at, _ = _segment_with_a_directory(p)
    raw = bytearray(p.read_bytes())
    raw[at + 4 : at + 8] = bytes(4)  # (the earlier build's reserved u32)
    p.write_bytes(bytes(raw))
    with pytest.raises(UnsupportedVersionError, match=r"s\.nds.*unpacked"):
        open_segment(p)


def test_a_packed_section_is_a_packed_section() -> None:
    """An empty section packs to no entries and no directory."""
    e = BandSection.empty()
    pk = pack_section(e.offsets, e.keys, e.rows, 0)
    assert isinstance(pk, PackedSection) and len(pk) == 0 and pk.check() is None
    assert pk.dirs.size == 0 and pk.max_row() == -1


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 32), st.lists(st.integers(0, 2**32 - 1), max_size=70), st.booleans())
def test_fields_are_packed_as_the_layout_says(bits, values, masked) -> None:
    """The packer's bytes against the layout written out with Python's integers: each field
    one after another from bit 0 of byte 0, least significant bit first, and no byte written
    past the last field's. Fields fit by their mask (a key's low bits) or by their values (a
    segment's rows, all below ``2**bits``)."""
    from neardup.index.band_packed import _put_fields, packed_bytes

    low = (1 << bits) - 1
    if not masked:
        values = [v & low for v in values]
    arr = np.array(values, np.uint32)
    out = np.full(packed_bytes(len(values), bits) + 8, 0xAB, np.uint8)
    _put_fields(arr, bits, np.uint32(low if masked else 0xFFFFFFFF), out)
    word = 0
    for i, v in enumerate(values):
        word |= (v & low) << (i * bits)
    n = packed_bytes(len(values), bits)
    assert out[:n].tobytes() == word.to_bytes(n, "little")
    assert out[n:].tolist() == [0xAB] * 8
