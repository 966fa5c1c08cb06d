"""The MinHash sketches of stored rows (:func:`neardup.rules.lsh.sketches`: the low bits of each
signature value), kept beside their band keys so that the MinHash channel's agreement filter
turns most band candidates down without reading their texts.

A row's sketch lives where its band keys live: in the memtable's :class:`SketchTable` and the
log's ``ADD_KEYS`` record until a flush (a replay after a crash restores it from there), then
in its segment's sketch section (:mod:`.segment`), carried over by compaction. A row may have
none (rows restored from SQLite after damaged log records): it is then filtered as before, on
the signature made again from its text. So a missing sketch costs time, never a decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._arrays import read_only, span
from .._jit import kernel
from .._search import lower_bound, upper_bound
from .._typed import typed_list

__all__ = ["DIRECTORY_STEP", "SegmentSketches", "SketchTable", "Sketches"]

#: (present (n,) bool, sketches (n, width) uint8) of some rows, in the order asked for
Sketches = tuple[npt.NDArray[np.bool_], npt.NDArray[np.uint8]]

#: one of every this many of a segment's row ids is kept in its directory
#: (:class:`SegmentSketches`): a row whose position the row ids' range does not tell is found
#: by a binary search of the directory (a few kB to a few hundred, cache-resident) and then of
#: one block of this many row ids (a few cache lines)
DIRECTORY_STEP = 64


class SketchTable:
    """Sketches of ``width`` bytes by row id, for the rows of one memtable (row ids grow as rows
    are added: a slot per row id from the first one put; a row id below it is not kept).

    >>> t = SketchTable(2)
    >>> t.put(np.array([5, 6]), np.array([[1, 2], [3, 4]], np.uint8))
    >>> t.put(np.array([9]), np.array([[7, 7]], np.uint8))
    >>> present, sk = t.lookup(np.array([6, 7, 9, 4]))
    >>> present.tolist(), sk[present].tolist()
    ([True, False, True, False], [[3, 4], [7, 7]])
    """

    __slots__ = ("_first", "_present", "_sk", "width")

    def __init__(self, width: int) -> None:
        self.width = int(width)
        self._first = -1
        self._present = np.zeros(0, np.bool_)
        self._sk = np.zeros((0, self.width), np.uint8)

    def __len__(self) -> int:
        return int(self._present.sum())

    def put(self, rowids: npt.NDArray[np.int64], sk: npt.NDArray[np.uint8]) -> None:
        """Keep ``sk[k]`` as the sketch of ``rowids[k]``."""
        rowids = np.asarray(rowids, np.int64)
        if not len(rowids):
            return
        if sk.shape != (len(rowids), self.width):
            raise ValueError(f"{sk.shape} sketches for {len(rowids)} rows of {self.width} bytes")
        lo, hi = span(rowids)
        if self._first < 0:
            self._first = lo
        keep = rowids >= self._first
        at = rowids[keep] - self._first
        need = hi - self._first + 1 if hi >= self._first else 0
        if need > len(self._present):  # grown geometrically: amortised copies
            cap = max(need, 2 * len(self._present), 1024)
            present = np.zeros(cap, np.bool_)
            present[: len(self._present)] = self._present
            grown = np.zeros((cap, self.width), np.uint8)
            grown[: len(self._sk)] = self._sk
            self._present, self._sk = present, grown
        self._present[at] = True
        self._sk[at] = sk[keep]

    def lookup(self, rowids: npt.NDArray[np.int64]) -> Sketches:
        """(present, sketches) of ``rowids`` (a row without one: present False, zeros)."""
        rowids = np.asarray(rowids, np.int64)
        at = rowids - self._first
        inside = (self._first >= 0) & (at >= 0) & (at < len(self._present))
        present = np.zeros(len(rowids), np.bool_)
        out = np.zeros((len(rowids), self.width), np.uint8)
        sel = np.flatnonzero(inside)
        if len(sel):
            present[sel] = self._present[at[sel]]
            out[sel] = self._sk[at[sel]]
        return present, out

    def drop(self, rowids: npt.NDArray[np.int64]) -> None:
        """Forget the sketches of ``rowids`` (rows that left an in-memory store)."""
        at = np.asarray(rowids, np.int64) - self._first
        at = at[(at >= 0) & (at < len(self._present))]
        self._present[at] = False


class SegmentSketches:
    """The sketch sections of a store's segments, looked up by row id in one kernel call
    (:meth:`lookup`): a single request's few band candidates used to cost a NumPy range test
    and a search per segment of the window (docs/store.md, *Sketches*). Segments
    without a sketch section, or with one of another width, are left out; each segment's row
    ids are sorted, as every segment's are. Made again when the segments change
    (:meth:`neardup.store.Store.sketches`), taking the directories of the segments
    ``previous`` held (:data:`DIRECTORY_STEP`) instead of reading their row ids again."""

    __slots__ = (
        "_dirs",
        "_hi",
        "_lo",
        "_present",
        "_rowids",
        "_sk",
        "directories",
        "segments",
        "width",
    )
    #: each segment's directory: one row id in :data:`DIRECTORY_STEP`
    directories: list[npt.NDArray[np.int64]]

    def __init__(
        self, segments: Sequence[Any], width: int, previous: SegmentSketches | None = None
    ) -> None:
        self.width = int(width)
        self.segments = [
            s
            for s in segments
            if s.sketches is not None
            and s.sketch_present is not None
            and s.sketches.shape[1] == self.width
            and len(s.rowids)
        ]
        # (typed lists made by cached kernels: numba.typed.List's own methods compile in every
        # process, see neardup._typed.typed_list)
        segs = self.segments
        self._rowids = typed_list([read_only(s.rowids, np.int64) for s in segs], np.int64)
        self._present = typed_list([read_only(s.sketch_present, np.bool_) for s in segs], np.bool_)
        self._sk = typed_list([read_only(s.sketches, np.uint8).reshape(-1) for s in segs], np.uint8)
        self._lo = np.array([int(s.rowids[0]) for s in self.segments], np.int64)
        self._hi = np.array([int(s.rowids[-1]) for s in self.segments], np.int64)
        # a segment's directory reads a row id on every page of them: made once per segment
        old: dict[int, npt.NDArray[np.int64]] = {}
        if previous is not None:
            old = {id(s): d for s, d in zip(previous.segments, previous.directories, strict=True)}
        self.directories = [
            old[id(s)] if id(s) in old else read_only(s.rowids[::DIRECTORY_STEP], np.int64)
            for s in segs
        ]
        self._dirs = typed_list(self.directories, np.int64)

    def lookup(
        self,
        rowids: npt.NDArray[np.int64],
        out_present: npt.NDArray[np.bool_],
        out: npt.NDArray[np.uint8],
    ) -> None:
        """Fill ``out_present`` / ``out`` (rows of ``width`` bytes) for the ``rowids`` the
        segments hold and have a sketch of; the others are left as they are (a row id in two
        segments takes the later one's)."""
        if not self.segments or not len(rowids):
            return
        _lookup_kernel(
            self._lo,
            self._hi,
            self._rowids,
            self._dirs,
            self._present,
            self._sk,
            self.width,
            np.ascontiguousarray(rowids, np.int64),
            out_present,
            out,
        )


@kernel(nogil=True)
def _lookup_kernel(
    lo: npt.NDArray[np.int64],
    hi: npt.NDArray[np.int64],
    rowids: Any,
    dirs: Any,
    present: Any,
    sk: Any,
    width: int,
    want: npt.NDArray[np.int64],
    out_present: npt.NDArray[np.bool_],
    out: npt.NDArray[np.uint8],
) -> None:  # pragma: no cover (numba)
    """:meth:`SegmentSketches.lookup`: each wanted row in each segment whose row id range
    holds it: in a segment without gaps, at the position its row id gives; else by a binary
    search of the segment's directory, then at the position the row id gives in the block it
    names (rows arrive in row-id order: most blocks have no gap), else by a binary search of
    that block. (A gallop from a guess made on the whole segment's range, before the
    directory, cost ~20 cache misses a row where a segment's row ids have a large gap, late
    rows of an old partition or a merge's: every guess past it is wrong.)"""
    for i in range(want.size):
        r = want[i]
        for s in range(lo.size):
            a = lo[s]
            b = hi[s]
            if r < a or r > b:
                continue
            ids = rowids[s]
            n = ids.size
            if b - a + 1 == n:  # no gaps: the row id says where
                p = r - a
            else:
                d = dirs[s]
                k = upper_bound(d, 0, d.size, r) - 1  # the block that would hold r
                if k < 0:
                    continue
                x = k * DIRECTORY_STEP
                y = min(x + DIRECTORY_STEP, n)
                p = x + (r - d[k])  # where it is if the block has no gap before it
                if p >= y or ids[p] != r:
                    p = lower_bound(ids, x, y, r)
                    if p >= y or ids[p] != r:
                        continue
            if present[s][p]:
                out_present[i] = True
                row = sk[s][p * width : (p + 1) * width]  # (a list item fetched once)
                for k in range(width):
                    out[i, k] = row[k]
