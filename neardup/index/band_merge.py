"""Merging band-key sections (:class:`~neardup.index.band_section.BandSection`, and a
segment's :class:`~neardup.index.band_packed.PackedSection`): two memtable sections in one pass
(:func:`merge_sections`, the memtable's binary-counter merges), and any number of segments'
with their rows renamed and deleted rows left out (:func:`merge_mapped`, compaction's), group
by group as sorted runs; neither materialises and sorts the compact keys of every entry
(``benchmarks/bench_merge.py``). Each is equal to its NumPy twin in
:mod:`neardup.index.reference` (tests/store/test_store_bands.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from .._jit import kernel
from .band_packed import PackedSection, unpack_group
from .band_section import BandSection, _by_key

__all__ = ["merge_mapped", "merge_sections"]


def merge_sections(a: BandSection, b: BandSection) -> BandSection:
    """One section of the entries of ``a`` (older rows) and ``b``, both memtable sections on
    the same base: a merge in one pass, allocating only the result (8 bytes per entry), where
    materialising and sorting the compact keys took ~40 (peak memory of the memtable's
    binary-counter merges and of a flush)."""
    if a.rowids is not None or b.rowids is not None or a.base != b.base:
        ka, ra = a
        kb, rb = b
        k, r = _by_key(np.concatenate([ka, kb]), np.concatenate([ra, rb]))
        return BandSection.from_sorted(k, (r - a.base).astype(np.uint32), base=a.base)
    # rows as they are (empty maps): by (key, row), so ``a``'s older rows come first among
    # equal keys
    none = np.zeros(0, np.int64)
    offs, keys, rows = _merge_mapped_kernel(
        a.offsets, a.keys, a.rows, none, b.offsets, b.keys, b.rows, none
    )
    return BandSection(offs, keys, rows, None, a.base)


@kernel(nogil=True)
def _merge_mapped_kernel(
    offs_a: npt.NDArray[np.uint64],
    keys_a: npt.NDArray[np.uint32],
    rows_a: npt.NDArray[np.uint32],
    map_a: npt.NDArray[np.int64],
    offs_b: npt.NDArray[np.uint64],
    keys_b: npt.NDArray[np.uint32],
    rows_b: npt.NDArray[np.uint32],
    map_b: npt.NDArray[np.int64],
) -> tuple[
    npt.NDArray[np.uint64], npt.NDArray[np.uint32], npt.NDArray[np.uint32]
]:  # pragma: no cover (numba)
    """Merge two sections group by group into one whose rows are ``map_x[row]`` (an empty
    map: the rows as they are), by (key, mapped row); an entry whose mapped row is negative
    is left out. Each input must be sorted by (key, mapped row) in a group, which a map that
    increases with the row keeps. :func:`neardup.index.reference.merge_mapped_reference` is the
    NumPy twin."""
    ga = offs_a.size - 1
    gb = offs_b.size - 1
    ng = max(ga, gb)
    n = keys_a.size + keys_b.size
    offs = np.zeros(ng + 1, np.uint64)
    keys = np.empty(n, np.uint32)
    rows = np.empty(n, np.uint32)
    ida = map_a.size == 0
    idb = map_b.size == 0
    o = 0
    for g in range(ng):
        offs[g] = o
        i = np.int64(offs_a[g]) if g < ga else np.int64(0)
        ie = np.int64(offs_a[g + 1]) if g < ga else np.int64(0)
        j = np.int64(offs_b[g]) if g < gb else np.int64(0)
        je = np.int64(offs_b[g + 1]) if g < gb else np.int64(0)
        ra = np.int64(-1)
        rb = np.int64(-1)
        while True:
            while i < ie:  # the next kept entry of a
                ra = np.int64(rows_a[i]) if ida else map_a[rows_a[i]]
                if ra >= 0:
                    break
                i += 1
            while j < je:
                rb = np.int64(rows_b[j]) if idb else map_b[rows_b[j]]
                if rb >= 0:
                    break
                j += 1
            if i >= ie and j >= je:
                break
            if j >= je or (
                i < ie and (keys_a[i] < keys_b[j] or (keys_a[i] == keys_b[j] and ra < rb))
            ):
                keys[o] = keys_a[i]
                rows[o] = np.uint32(ra)
                i += 1
            else:
                keys[o] = keys_b[j]
                rows[o] = np.uint32(rb)
                j += 1
            o += 1
    offs[ng] = o
    return offs, keys[:o], rows[:o]


def merge_mapped(
    sections: Sequence[BandSection | PackedSection], maps: Sequence[npt.NDArray[np.int64]]
) -> BandSection:
    """One section of the entries of ``sections`` with their rows renamed: ``maps[k][row]`` is
    the new row of section ``k``'s ``row`` (its position in the merged segment), negative for a
    row left out (deleted). Every map must increase over the rows it keeps (a merged segment
    keeps its inputs' rows in row-id order), so each input stays sorted: two sections merge as
    sorted runs in one pass, allocating the output only, and three or more (or packed ones, a
    segment's: :class:`PackedSection`, unpacked a group at a time) group by group, each input's
    entries of the group a run of (key, row) words, the runs merged (:func:`_merge_groups`);
    neither materialises, searches and sorts the compact keys of every entry
    (``benchmarks/bench_merge.py`` measures them).

    Raises
    ------
    ValueError
        A map that does not increase over its kept rows, or shorter than its section's rows.
    """
    mapped = _checked_maps(sections, maps)
    if not sections:
        return BandSection.empty()
    plain = [sec for sec in sections if isinstance(sec, BandSection)]
    if len(sections) > 2 or len(plain) < len(sections):
        return _merge_groups(sections, mapped)
    none = np.zeros(0, np.int64)
    empty = BandSection.empty()
    nothing = (empty.offsets, empty.keys, empty.rows, none)
    # one or two runs: merged in one pass by the kernel
    level = [(sec.offsets, sec.keys, sec.rows, m) for sec, m in zip(plain, mapped, strict=True)]
    offs, keys, rows = _merge_mapped_kernel(*level[0], *(level[1] if len(level) > 1 else nothing))
    return BandSection(offs, keys, rows, None, 0)


def _checked_maps(
    sections: Sequence[BandSection | PackedSection], maps: Sequence[npt.NDArray[np.int64]]
) -> list[npt.NDArray[np.int64]]:
    """The maps as contiguous int64 arrays, each checked against its section
    (:func:`merge_mapped`'s ``ValueError``)."""
    if len(sections) != len(maps):
        raise ValueError(f"{len(sections)} sections for {len(maps)} maps")
    mapped: list[npt.NDArray[np.int64]] = []
    for sec, m in zip(sections, maps, strict=True):
        m = np.ascontiguousarray(m, np.int64)
        kept = m[m >= 0]
        if len(kept) > 1 and not bool(np.all(kept[1:] > kept[:-1])):
            raise ValueError("a row map must increase over the rows it keeps")
        top = sec.max_row() if isinstance(sec, PackedSection) else int(sec.rows.max(initial=0))
        if len(sec) and (not len(m) or top >= len(m)):
            raise ValueError(f"a map of {len(m)} rows for a section naming row {top}")
        mapped.append(m)
    return mapped


def _merge_groups(
    sections: Sequence[BandSection | PackedSection], maps: Sequence[npt.NDArray[np.int64]]
) -> BandSection:
    """:func:`merge_mapped` of three or more sections: each group's kept entries of every
    section as one ``key << 32 | mapped row`` word each, one sorted run per section (a
    section's group is sorted by (key, row) and its map increases), merged by
    :func:`_merge_runs`: every entry is copied twice and plays log2(k) matches of a
    tournament, where sorting the group's words cost a vectorised sort of them, comparing
    every run's head k comparisons an entry, and merging the runs pairwise as a balanced tree
    copied each about log2(k) times, into a fresh array each round (``benchmarks/bench_merge.py``
    run from each tree measured them; docs/store.md, *Compaction*). Rows are unique, so (key,
    row) orders the words as the runs' merge would."""
    ng = _groups(sections)
    total = sum(len(sec) for sec in sections)
    keys = np.empty(total, np.uint32)
    rows = np.empty(total, np.uint32)
    offs = np.zeros(ng + 1, np.uint64)
    buf = _group_buffer(sections, ng)
    at = 0
    for g in range(ng):
        at = _merge_group(sections, maps, g, buf, keys, rows, at)
        offs[g + 1] = at
    return BandSection(offs, keys[:at], rows[:at], None, 0)


def _groups(sections: Sequence[BandSection | PackedSection]) -> int:
    return max(len(sec.offsets) - 1 for sec in sections)


def _group_buffer(
    sections: Sequence[BandSection | PackedSection], ng: int
) -> npt.NDArray[np.uint64]:
    """Room for the words of the largest group over the sections (one group at a time)."""
    sizes = np.zeros(ng, np.int64)  # each group's entries over the sections
    for sec in sections:
        o = sec.offsets.astype(np.int64)
        sizes[: o.size - 1] += o[1:] - o[:-1]
    return np.empty(int(sizes.max()) if ng else 0, np.uint64)


def _group_of(
    sec: BandSection | PackedSection, g: int
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
    """Group ``g`` of a section: its keys and rows (a view of a plain section's, a packed
    section's unpacked); empty where the section has fewer groups."""
    if g + 1 >= len(sec.offsets):
        return np.zeros(0, np.uint32), np.zeros(0, np.uint32)
    if isinstance(sec, PackedSection):
        return unpack_group(sec, g)
    lo, hi = int(sec.offsets[g]), int(sec.offsets[g + 1])
    return sec.keys[lo:hi], sec.rows[lo:hi]


def _merge_group(
    sections: Sequence[BandSection | PackedSection],
    maps: Sequence[npt.NDArray[np.int64]],
    g: int,
    buf: npt.NDArray[np.uint64],
    keys: npt.NDArray[np.uint32],
    rows: npt.NDArray[np.uint32],
    at: int,
) -> int:
    """Group ``g``'s kept entries of every section merged into ``keys[at:]`` and ``rows[at:]``
    (rows renamed by the maps); returns the position after them."""
    bounds = np.zeros(len(sections) + 1, np.int64)  # where each non-empty run starts, then n
    n = 0
    runs = 0
    for sec, m in zip(sections, maps, strict=True):
        gk, gr = _group_of(sec, g)
        if not len(gk):  # past the section's groups, or an empty group
            continue
        got = _group_words(gk, gr, m, 0, len(gk), buf, n)
        if got > n:
            bounds[runs] = n
            runs += 1
            n = got
    bounds[runs] = n
    _merge_runs(buf, bounds[: runs + 1], keys, rows, at)
    return at + n


@kernel(nogil=True)
def _merge_runs(
    words: npt.NDArray[np.uint64],
    bounds: npt.NDArray[np.int64],
    keys: npt.NDArray[np.uint32],
    rows: npt.NDArray[np.uint32],
    at: int,
) -> None:  # pragma: no cover (numba)
    """The sorted runs ``words[bounds[j]:bounds[j + 1]]`` merged into ``keys[at:]`` (each
    word's high half) and ``rows[at:]`` (its low half) by a tournament (loser) tree over the
    runs' heads (Knuth, TAOCP 5.4.1): each output word replays the matches from its run's leaf
    to the root, log2 of the runs' comparisons, each a select rather than a branch (the heads
    are hashes: a branch the CPU cannot predict). A used-up run's head is the largest word,
    which no entry's word equals (its low half, a row of the merged section, is below
    2**32 - 1)."""
    k = bounds.size - 1
    size = 1
    while size < k:
        size <<= 1
    done = np.uint64(0xFFFFFFFFFFFFFFFF)
    pos = np.zeros(size, np.int64)
    end = np.zeros(size, np.int64)
    head = np.full(size, done, np.uint64)
    for j in range(k):
        pos[j] = bounds[j]
        end[j] = bounds[j + 1]
        if pos[j] < end[j]:
            head[j] = words[pos[j]]
    # the tree bottom up: each inner node keeps the loser of its two subtrees' winners
    win = np.empty(2 * size, np.int64)
    loser = np.zeros(size, np.int64)
    for j in range(size):
        win[size + j] = j
    for node in range(size - 1, 0, -1):
        a = win[2 * node]
        b = win[2 * node + 1]
        if head[b] < head[a]:
            a, b = b, a
        win[node] = a
        loser[node] = b
    w = win[1] if size > 1 else 0
    wv = head[w]
    total = bounds[k] - bounds[0]
    for o in range(at, at + total):
        keys[o] = np.uint32(wv >> np.uint64(32))
        rows[o] = np.uint32(wv & np.uint64(0xFFFFFFFF))
        p = pos[w] + 1
        pos[w] = p
        wv = words[p] if p < end[w] else done
        head[w] = wv
        node = (size + w) >> 1
        while node > 0:  # the new head plays the losers on its way up (selects, no branch)
            other = loser[node]
            ov = head[other]
            swap = ov < wv
            loser[node] = w if swap else other
            w = other if swap else w
            wv = ov if swap else wv
            node >>= 1


@kernel(nogil=True)
def _group_words(
    keys: npt.NDArray[np.uint32],
    rows: npt.NDArray[np.uint32],
    row_map: npt.NDArray[np.int64],
    lo: int,
    hi: int,
    out: npt.NDArray[np.uint64],
    at: int,
) -> int:  # pragma: no cover (numba)
    """Entries ``lo..hi`` of a section as ``key << 32 | row_map[row]`` words from ``out[at]``
    on, those whose mapped row is negative left out; returns the next free position."""
    for i in range(lo, hi):
        r = row_map[rows[i]]
        if r >= 0:
            out[at] = (np.uint64(keys[i]) << np.uint64(32)) | np.uint64(r)
            at += 1
    return at
