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

import numpy as np
import numpy.typing as npt

__all__ = ["SketchTable", "Sketches"]

#: (present (n,) bool, sketches (n, width) uint8) of some rows, in the order asked for
Sketches = tuple[npt.NDArray[np.bool_], npt.NDArray[np.uint8]]


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
        if self._first < 0:
            self._first = int(rowids.min())
        keep = rowids >= self._first
        at = rowids[keep] - self._first
        need = int(at.max()) + 1 if len(at) else 0
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


def segment_sketches(
    seg_rowids: npt.NDArray[np.int64],
    present: npt.NDArray[np.bool_] | None,
    sk: npt.NDArray[np.uint8] | None,
    rowids: npt.NDArray[np.int64],
    out_present: npt.NDArray[np.bool_],
    out: npt.NDArray[np.uint8],
) -> None:
    """Fill ``out_present`` / ``out`` for the ``rowids`` that one segment holds (its row ids
    sorted, as every segment's are) and has a sketch of."""
    if present is None or sk is None or not len(seg_rowids):
        return
    lo, hi = int(seg_rowids[0]), int(seg_rowids[-1])
    sel = np.flatnonzero((rowids >= lo) & (rowids <= hi))
    if not len(sel):
        return
    want = rowids[sel]
    # a segment's row ids are mostly consecutive (rows arrive in row-id order): the position
    # where a row id would be without gaps is checked first, a binary search only where it
    # is not there (a searchsorted of every row misses the cache at each step)
    n = len(seg_rowids)
    pos = (want - lo) * (n - 1) // max(hi - lo, 1)
    miss = np.flatnonzero(seg_rowids[pos] != want)
    if len(miss):
        pos[miss] = np.minimum(np.searchsorted(seg_rowids, want[miss]), n - 1)
    hit = (seg_rowids[pos] == want) & present[pos]
    sel, pos = sel[hit], pos[hit]
    out_present[sel] = True
    out[sel] = sk[pos]
