"""What the decider keeps in memory about stored rows, by row id, so that a row seen before is
filtered without reading its text.

Two caches, one structure (:class:`RowCache`: fixed-size rows by row id in a ring of slots,
replaced in the ring's order but passing over the rows asked for since the hand last passed,
the CLOCK approximation of least-recently-used: the rows that keep coming back stay):

- :class:`SignatureCache`: the MinHash signatures of stored rows, for the MinHash channel's
  agreement filter. A stored row that shares a band key with a new document is a candidate only
  when their signatures agree on enough values (:class:`neardup.rules.plan.LshPlan.min_agreement`,
  the batch pipeline's filter). The store keeps band keys, not signatures, so a stored row's
  signature is made again from its stored text; the same rows come back as candidates again and
  again (a band bucket's oldest members above all: the bucket cap keeps them), and most fail the
  filter (``benchmarks/bench_incremental.py`` measures the effect on a growing store).
- :class:`HistogramCache`: the token histograms of stored rows that were verified (their tokens
  counted in the ``2**HIST_BITS`` hash buckets of
  :func:`neardup.verify.tokens.token_histograms`), for the histogram bound of verification's
  first step, applied to SimHash hits before their rows are read. Long texts drawn from a
  common vocabulary and repetitive short posts put hundreds to thousands of stored rows within
  the SimHash radius of some documents; those rows are the same from one such document to the
  next, nearly all of them fail the bound, and reading and tokenising them was most of the
  cost of the slowest requests (docs/service.md, *The 10 M tail, traced*).

A row id names one document for the life of a process: :meth:`neardup.store.Store.allocate`
never hands one out twice, and a group taken back keeps its row ids spent. A signature and a
histogram are pure functions of the stored text and the deduplicator's verifier and plan, which
do not change while it is open. So a cached entry is exactly what the text would give again. A
row that is deleted or expires can still come back from a search until its segment is
rewritten; whatever its cached entry decides, it matches nothing (its row is not found when
read), so the decisions are the same.

Bounded: ``capacity`` rows; 0 keeps nothing (every entry is made again from the text: the
reference the cached path is tested against).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..verify.tokens import HIST_BITS

__all__ = [
    "DEFAULT_CAPACITY",
    "DEFAULT_HISTOGRAM_ROWS",
    "HistogramCache",
    "RowCache",
    "SignatureCache",
]

#: rows kept by default: 262,144 signatures of 237 values are 124 MB
DEFAULT_CAPACITY = 1 << 18
#: histograms kept by default: 131,072 rows of 1,044 bytes are 137 MB
DEFAULT_HISTOGRAM_ROWS = 1 << 17


class RowCache:
    """Values of one NumPy ``dtype`` (a sub-array or structured dtype for several fields) of up
    to ``capacity`` rows by row id. A full cache makes room with the CLOCK policy: a hand goes
    round the slots, clears the mark of each row asked for (:meth:`slots`) since it last
    passed, and replaces the first unmarked one.

    >>> c = RowCache(np.dtype((np.uint16, (3,))), capacity=2)
    >>> c.put([7, 8], np.array([[1, 2, 3], [4, 5, 6]], np.uint16))
    >>> c.put([9], np.array([[7, 8, 9]], np.uint16))  # replaces the oldest (row 7)
    >>> sorted(c.slots([7, 8, 9]))  # (marks rows 8 and 9)
    [8, 9]
    >>> c.rows([c.slots([9])[9]]).tolist()
    [[7, 8, 9]]
    >>> c.put([10], np.array([[0, 0, 0]], np.uint16))  # both marked: the hand clears, takes 8
    >>> sorted(c.slots([8, 9, 10]))
    [9, 10]
    """

    __slots__ = ("_next", "_owner", "_ref", "_slab", "_slot", "capacity", "dtype")

    def __init__(self, dtype: np.dtype[Any], capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
            raise ValueError(f"capacity must be an integer >= 0, got {capacity!r}")
        self.dtype = np.dtype(dtype)
        self.capacity = capacity
        # allocated at its capacity by the first put (a cache never put to reserves nothing):
        # NumPy's zeros of that size are fresh pages the system maps as they are written, so a
        # cache costs the memory of the rows it holds, and filling it copies nothing (a slab
        # grown as it filled copied about twice its size, which showed in a short run's checks:
        # docs/store.md, *Stored summaries of long rows*)
        self._slab: npt.NDArray[Any] = np.zeros(0, self.dtype)
        self._owner: list[int] = []
        self._slot: dict[int, int] = {}
        self._ref = bytearray()  # per slot: asked for since the hand last passed
        self._next = 0

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, rowid: object) -> bool:
        return rowid in self._slot

    def slots(self, rowids: list[int]) -> dict[int, int]:
        """Row id -> slot of the rows of ``rowids`` that are cached (each marked as asked for)."""
        get = self._slot.get
        ref = self._ref
        out: dict[int, int] = {}
        for r in rowids:
            s = get(r)
            if s is not None:
                out[r] = s
                ref[s] = 1
        return out

    def rows(self, slots: list[int]) -> npt.NDArray[Any]:
        """The values in ``slots`` (as :meth:`slots` gave them; valid until the next
        :meth:`put`), a copy, one row each."""
        return self._slab[np.asarray(slots, np.int64)]

    def put(self, rowids: list[int], values: npt.NDArray[Any]) -> None:
        """Cache ``values[k]`` as the value of ``rowids[k]`` (rows already cached are skipped);
        when full, the CLOCK hand chooses the entries that make room."""
        if len(rowids) != len(values):
            raise ValueError(f"{len(rowids)} row ids for {len(values)} values")
        if self.capacity == 0:
            return
        slot = self._slot
        ref = self._ref
        cap = self.capacity
        for k, r in enumerate(rowids):
            if r in slot:
                continue
            s = self._next
            if s == len(self._owner):  # still filling
                if not len(self._slab):
                    self._slab = np.zeros(cap, self.dtype)
                self._owner.append(r)
                ref.append(0)
            else:
                while ref[s]:  # a second chance for rows asked for since the last pass
                    ref[s] = 0
                    s = (s + 1) % cap
                del slot[self._owner[s]]
                self._owner[s] = r
            self._next = (s + 1) % cap
            self._slab[s] = values[k]
            slot[r] = s


class SignatureCache(RowCache):
    """MinHash signatures (``uint16``, ``hashes`` values each) of up to ``capacity`` rows.

    >>> c = SignatureCache(hashes=3, capacity=2)
    >>> c.put([7, 8], np.array([[1, 2, 3], [4, 5, 6]], np.uint16))
    >>> c.signatures([c.slots([8])[8]]).tolist()
    [[4, 5, 6]]
    """

    __slots__ = ("hashes",)

    def __init__(self, hashes: int, capacity: int = DEFAULT_CAPACITY) -> None:
        super().__init__(np.dtype((np.uint16, (int(hashes),))), capacity)
        self.hashes = int(hashes)

    def signatures(self, slots: list[int]) -> npt.NDArray[np.uint16]:
        """The signatures in ``slots``, ``(len(slots), hashes)``."""
        return self.rows(slots)


#: one cached histogram: the bucket counts, the exact token count, and the row's content hash
#: (a hit with the query's content hash is an exact copy, which the bound must never drop)
HISTOGRAM_DTYPE = np.dtype(
    [("hist", np.uint8, (1 << HIST_BITS,)), ("count", "<i4"), ("chash", np.uint8, (16,))]
)


class HistogramCache(RowCache):
    """Token histograms (:func:`neardup.verify.tokens.token_histograms`), exact token counts and
    content hashes of up to ``capacity`` rows.

    >>> c = HistogramCache(capacity=4)
    >>> h = np.zeros((1, 1 << HIST_BITS), np.uint8); h[0, 3] = 2
    >>> c.put([5], h, np.array([2]), [b"0123456789abcdef"])
    >>> hist, counts, chash = c.histograms([c.slots([5])[5]])
    >>> int(hist[0, 3]), counts.tolist(), chash[0].tobytes()
    (2, [2], b'0123456789abcdef')
    """

    __slots__ = ()

    def __init__(self, capacity: int = DEFAULT_HISTOGRAM_ROWS) -> None:
        super().__init__(HISTOGRAM_DTYPE, capacity)

    def put(  # type: ignore[override]
        self,
        rowids: list[int],
        hist: npt.NDArray[np.uint8],
        counts: npt.NDArray[np.integer[Any]],
        chashes: list[bytes],
    ) -> None:
        """Cache row ``rowids[k]``'s histogram ``hist[k]``, token count ``counts[k]`` and
        16-byte content hash ``chashes[k]``."""
        if not (len(rowids) == len(hist) == len(counts) == len(chashes)):
            raise ValueError(
                f"{len(rowids)} row ids for {len(hist)} histograms, {len(counts)} counts and "
                f"{len(chashes)} content hashes"
            )
        if self.capacity == 0 or not rowids:
            return
        values = np.zeros(len(rowids), self.dtype)
        values["hist"] = hist
        values["count"] = counts
        values["chash"] = np.frombuffer(b"".join(chashes), np.uint8).reshape(-1, 16)
        super().put(rowids, values)

    def histograms(
        self, slots: list[int]
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
        """``(hist (k, 2**HIST_BITS) uint8, counts (k,) int64, content hashes (k, 16) uint8)`` of
        ``slots``."""
        v = self.rows(slots)
        return (
            np.ascontiguousarray(v["hist"]),
            v["count"].astype(np.int64),
            np.ascontiguousarray(v["chash"]),
        )
