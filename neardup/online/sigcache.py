"""The MinHash signatures of stored rows, by row id, for the MinHash channel's agreement filter.

A stored row that shares a band key with a new document is a candidate only when their
signatures agree on enough values (:class:`neardup.rules.plan.LshPlan.min_agreement`, the
batch pipeline's filter). The store keeps band keys, not signatures, so a stored row's signature
is made again from its stored text; the same rows come back as candidates again and again (a
band bucket's oldest members above all: the bucket cap keeps them), and most fail the filter.
This cache keeps the signatures made, so that a row seen before is filtered without reading its
text (``benchmarks/bench_incremental.py`` measures the effect on a growing store).

A row id names one document for the life of a process: :meth:`neardup.store.Store.allocate`
never hands one out twice, and a group taken back keeps its row ids spent. A signature is a pure
function of the stored text and the deduplicator's verifier and plan, which do not change while
it is open. So a cached signature is exactly the one the text would give again, and a row that
is deleted or expires is simply never asked for (the store does not return it).

Bounded: ``capacity`` rows, the oldest entry replaced first (a ring of slots); 0 keeps nothing
(every signature is made again: the reference the cached path is tested against).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["DEFAULT_CAPACITY", "SignatureCache"]

#: rows kept by default: 262,144 signatures of 237 values are 124 MB
DEFAULT_CAPACITY = 1 << 18


class SignatureCache:
    """Signatures (``uint16``, ``hashes`` values each) of up to ``capacity`` rows by row id.

    >>> c = SignatureCache(hashes=3, capacity=2)
    >>> c.put([7, 8], np.array([[1, 2, 3], [4, 5, 6]], np.uint16))
    >>> c.put([9], np.array([[7, 8, 9]], np.uint16))  # replaces the oldest (row 7)
    >>> sorted(c.slots([7, 8, 9]))
    [8, 9]
    >>> c.signatures([c.slots([9])[9]]).tolist()
    [[7, 8, 9]]
    """

    __slots__ = ("_next", "_owner", "_slab", "_slot", "capacity", "hashes")

    def __init__(self, hashes: int, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be at least 0, got {capacity}")
        self.hashes = int(hashes)
        self.capacity = int(capacity)
        self._slab = np.zeros((0, self.hashes), np.uint16)  # grown up to capacity as filled
        self._owner: list[int] = []
        self._slot: dict[int, int] = {}
        self._next = 0

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, rowid: object) -> bool:
        return rowid in self._slot

    def slots(self, rowids: list[int]) -> dict[int, int]:
        """Row id -> slot of the rows of ``rowids`` that are cached."""
        get = self._slot.get
        out: dict[int, int] = {}
        for r in rowids:
            s = get(r)
            if s is not None:
                out[r] = s
        return out

    def signatures(self, slots: list[int]) -> npt.NDArray[np.uint16]:
        """The signatures in ``slots`` (as :meth:`slots` gave them; valid until the next
        :meth:`put`), one row each."""
        return self._slab[np.asarray(slots, np.int64)]

    def put(self, rowids: list[int], sigs: npt.NDArray[np.uint16]) -> None:
        """Cache ``sigs[k]`` as the signature of ``rowids[k]`` (rows already cached are
        skipped); the oldest entries make room."""
        if len(rowids) != len(sigs):
            raise ValueError(f"{len(rowids)} row ids for {len(sigs)} signatures")
        if self.capacity == 0:
            return
        slot = self._slot
        for k, r in enumerate(rowids):
            if r in slot:
                continue
            s = self._next
            self._next = (s + 1) % self.capacity
            if s == len(self._owner):  # still filling: grow the slab geometrically
                if s == len(self._slab):
                    grown = np.zeros((min(self.capacity, max(1024, 2 * s)), self.hashes), np.uint16)
                    grown[:s] = self._slab[:s]
                    self._slab = grown
                self._owner.append(r)
            else:
                del slot[self._owner[s]]
                self._owner[s] = r
            self._slab[s] = sigs[k]
            slot[r] = s
