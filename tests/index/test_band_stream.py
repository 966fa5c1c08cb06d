"""A merged section written group by group (``MergedSection``) is the same bytes as the merge
built whole and packed (``pack_section(merge_mapped(...))``): its offsets, directory, layout,
key and row fields, for plain and packed inputs with rows deleted, at every directory width;
a segment written from it is the same file; a store's compaction that streams its output
leaves the same segment file and answers as before."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.index.band_packed import pack_section
from neardup.index.band_stream import MergedSection
from neardup.index.bands import BandSection, merge_mapped, sort_entries
from neardup.store.segment import open_segment, write_segment


def _inputs(
    rng: np.random.Generator,
    n_segments: int,
    rows: int,
    groups: int,
    key_range: int,
    *,
    packed: bool,
    p_deleted: float = 0.2,
) -> tuple[list, list, int]:
    """Segments' band sections (each row a key in every group, some rows with none), maps
    onto a merged segment of interleaved row ids, rows deleted; returns (sections, maps,
    rows of the merge)."""
    ids = [np.unique(rng.integers(0, 4 * rows * n_segments, rows)) for _ in range(n_segments)]
    alive = [rng.random(len(i)) >= p_deleted for i in ids]
    merged = np.unique(np.concatenate([i[a] for i, a in zip(ids, alive, strict=True)] or [[]]))
    sections, maps = [], []
    for rid, a in zip(ids, alive, strict=True):
        n = len(rid)
        g = np.repeat(np.arange(groups, dtype=np.uint64), n)
        pos = np.tile(np.arange(n, dtype=np.int64), groups)
        low = rng.integers(0, key_range, n * groups, dtype=np.uint64)
        has = rng.random(n * groups) >= 0.1
        k, p = sort_entries((g[has] << np.uint64(32)) | low[has], pos[has])
        sec = BandSection.from_sorted(k, p.astype(np.uint32))
        if packed:
            sec = pack_section(sec.offsets, sec.keys, sec.rows, n)
        sections.append(sec)
        maps.append(np.where(a, np.searchsorted(merged, rid), -1).astype(np.int64))
    return sections, maps, len(merged)


def _same_as_whole(sections, maps, n_rows, spill_dir=None) -> MergedSection:
    ms = MergedSection(sections, maps, n_rows, spill_dir=spill_dir)
    whole = merge_mapped(sections, maps)
    pk = pack_section(whole.offsets, whole.keys, whole.rows, n_rows)
    assert (ms.groups, ms.dbits, ms.kbits, ms.rbits, len(ms)) == (
        pk.groups, pk.dbits, pk.kbits, pk.rbits, len(pk),
    )  # fmt: skip
    assert ms.offsets.tolist() == pk.offsets.tolist()
    assert ms.dirs.tolist() == pk.dirs.tolist()
    kb = b"".join(c.tobytes() for c in ms.key_bytes())
    rb = b"".join(c.tobytes() for c in ms.row_bytes())
    assert kb == pk.kbytes.tobytes() and len(kb) == ms.key_nbytes
    assert rb == pk.rbytes.tobytes() and len(rb) == ms.row_nbytes
    return ms


@settings(max_examples=80, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(0, 6),
    st.integers(1, 60),
    st.integers(1, 5),
    st.sampled_from([3, 1000, 2**32]),
    st.booleans(),
    st.sampled_from([0.0, 0.3, 1.0]),
    st.booleans(),
)
def test_merged_section_is_the_packed_merge(
    seed, n_segments, rows, groups, key_range, packed, p_deleted, spill
) -> None:
    """Any number of inputs (none, one, two: the whole merge's one-pass path; more: its
    tournament), plain or packed, keys with many ties or none, no row deleted, some, or all
    (an empty section); row fields of every width, so a group's fields end mid-byte and the
    remainder is carried; the rows packed in the keys pass and read back from a spill file, or
    merged again."""
    rng = np.random.default_rng(seed)
    sections, maps, n_rows = _inputs(
        rng, n_segments, rows, groups, key_range, packed=packed, p_deleted=p_deleted
    )
    _same_as_whole(sections, maps, max(n_rows, 1), tempfile.gettempdir() if spill else None)


@pytest.mark.parametrize(("rows", "groups", "dbits"), [(900, 3, 8), (110_000, 3, 16)])
def test_merged_section_directories(rows, groups, dbits, tmp_path) -> None:
    """Groups large enough for an 8-bit and a 16-bit directory: the directory is counted
    from the kept keys' top bits before any key is merged."""
    rng = np.random.default_rng(rows)
    sections, maps, n_rows = _inputs(rng, 3, rows, groups, 2**32, packed=True, p_deleted=0.05)
    ms = _same_as_whole(sections, maps, n_rows)
    assert ms.dbits == dbits
    assert _same_as_whole(sections, maps, n_rows, tmp_path).dbits == dbits
    assert list(tmp_path.iterdir()) == []  # the spill file had no name, and is gone


def test_with_a_spill_file_each_group_is_merged_once(tmp_path, monkeypatch) -> None:
    """The keys pass packs the rows into the spill file: the rows pass merges nothing; without
    one, every group is merged again. A spill not read back is dropped by ``close``."""
    from neardup.index import band_stream

    rng = np.random.default_rng(11)
    sections, maps, n_rows = _inputs(rng, 3, 2000, 4, 2**32, packed=True, p_deleted=0.2)
    merges: list[int] = []
    real = band_stream._merge_group

    def counting(*a):  # type: ignore[no-untyped-def]
        merges.append(a[2])
        return real(*a)

    monkeypatch.setattr(band_stream, "_merge_group", counting)
    for spill, passes in ((tmp_path, 1), (None, 2)):
        merges.clear()
        ms = _same_as_whole(sections, maps, n_rows, spill)
        assert sorted(merges) == sorted(list(range(ms.groups)) * passes)
    ms = MergedSection(sections, maps, n_rows, spill_dir=tmp_path)
    list(ms.key_bytes())
    assert ms._spill is not None and not ms._spill.closed
    held = ms._spill
    ms.close()
    assert held.closed and ms._spill is None
    merges.clear()  # a second keys pass makes a new spill: the rows still come out whole
    _same_as_whole(sections, maps, n_rows, tmp_path)


def test_merged_section_refuses_bad_maps() -> None:
    sec = BandSection.from_sorted(np.array([1, 2], np.uint64), np.array([0, 1], np.uint32))
    with pytest.raises(ValueError, match="increase"):
        MergedSection([sec], [np.array([1, 0], np.int64)], 2)
    with pytest.raises(ValueError, match="naming row 5 of 2"):
        MergedSection([sec], [np.array([0, 5], np.int64)], 2)


def test_a_segment_from_a_merged_section_is_the_same_file(tmp_path) -> None:
    """``write_segment`` of the streamed merge writes the bytes it writes of the merge built
    whole (the checksum made as the body is written, the header last)."""
    rng = np.random.default_rng(7)
    sections, maps, n_rows = _inputs(rng, 4, 3000, 4, 2**32, packed=True)
    fps = rng.integers(0, 2**63, n_rows, dtype=np.uint64)
    rids = np.arange(n_rows, dtype=np.int64) * 3
    ts = np.sort(rng.random(n_rows)) * 100
    sk = (rng.random(n_rows) < 0.9, rng.integers(0, 255, (n_rows, 8), dtype=np.uint8))
    a, b = tmp_path / "whole.seg", tmp_path / "streamed.seg"
    ca = write_segment(
        a, fps, rids, ts, partition=3, band_keys=merge_mapped(sections, maps), sketches=sk
    )
    cb = write_segment(
        b, fps, rids, ts, partition=3, band_keys=MergedSection(sections, maps, n_rows), sketches=sk
    )
    assert ca == cb
    assert a.read_bytes() == b.read_bytes()
    seg = open_segment(b)
    assert seg.band_keys is not None and len(seg.band_keys) == len(merge_mapped(sections, maps))
    seg.close()
    wider = MergedSection(sections, maps, n_rows + 5)  # planned for another segment's rows
    with pytest.raises(ValueError, match=f"for {n_rows + 5} rows, not {n_rows}"):
        write_segment(tmp_path / "c.seg", fps, rids, ts, partition=3, band_keys=wider)
    assert not (tmp_path / "c.seg").exists() and not (tmp_path / "c.seg.tmp").exists()


@pytest.mark.parametrize("spill", [False, True])
def test_inputs_that_change_while_the_segment_is_written_leave_no_file(tmp_path, spill) -> None:
    """The merge passes check each group against the count: a row deleted from a map after
    the counting pass fails the write midway (``RuntimeError``), and the temporary file (and
    the spill file) goes."""
    rng = np.random.default_rng(3)
    sections, maps, n_rows = _inputs(rng, 3, 500, 3, 2**32, packed=True, p_deleted=0.0)
    ms = MergedSection(sections, maps, n_rows, spill_dir=tmp_path if spill else None)
    ms._maps[1][ms._maps[1] >= 0] = -1  # the counted rows are gone
    fps = np.zeros(n_rows, np.uint64)
    rids = np.arange(n_rows, dtype=np.int64)
    ts = np.zeros(n_rows)
    with pytest.raises(RuntimeError, match="were counted"):
        write_segment(tmp_path / "d.seg", fps, rids, ts, partition=0, band_keys=ms)
    assert list(tmp_path.iterdir()) == []
