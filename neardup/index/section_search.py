"""Searching band-key sections (:class:`neardup.index.band_section.BandSection`, and the segments'
packed :class:`neardup.index.band_packed.PackedSection`): the first and end entry of each query
key in a section, by a forward gallop (many keys) or interpolation (few keys in a large
section), in a packed section from the key's bucket (one directory read) instead of the whole
group, and :class:`SectionGroup`, the sections of many segments searched and gathered in one
kernel call each. One set of kernels reads both layouts: an unpacked section is read as its
bytes (32-bit fields, no directory).

A store holds one section per segment, and an hourly-partitioned window has dozens of
segments: looked up one at a time, each section costs a kernel call and a few NumPy calls per
query. A :class:`SectionGroup` keeps the segments' arrays in numba typed lists (made once per
set of segments, by cached kernels) so that one call searches them all, and one more gathers the row ids of
every bucket under the cap. That saves the fixed costs (about a tenth of a single request on
57 hourly segments). The searches themselves are a few dependent cache misses each; a single
request's (a key a band) run in lockstep (:func:`_interp_lockstep`), so that the misses of
different searches overlap instead of adding up
(``benchmarks/bench_section_search.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .._arrays import read_only, same_objects
from .._jit import kernel, prefetch
from .._threads import run_ranges
from .._typed import typed_list
from .band_packed import PackedSection, key_at, prefetch_key, row_at

__all__ = ["GroupHits", "SectionGroup", "packed_search", "section_search"]

#: entries of a section per query key above which a section is searched in lockstep by
#: interpolation (a few probes a key, their misses overlapping) instead of by the forward
#: gallop (a doubling step a power of two of the gap): a single request's keys always, a
#: batch's against a large window's segments (``bench_section_search.py --sparse-gaps``
#: times both ways; they cross near 350 entries a key on a 2-core box)
_SPARSE_GAP = 384
#: a search window of at most this many entries (a packed segment's bucket: a few hundred) is
#: finished by one interpolated guess and a short walk from it instead of more probe rounds
#: and a gallop: the guess is off by ~0.4 sqrt(m) entries on uniform keys, a few neighbouring
#: fields on one or two cache lines, so a search is one dependent miss after its directory
#: read instead of three or four (``bench_section_search.py``, run on the trees before and
#: after: benchmarks/results/bench_section_search_walk*.json)
_WALK_MAX = 1024
#: entries a walk from the guess takes before it gallops instead (a long run of one key, from
#: boilerplate, costs a search the gallop's log steps, not the run's length)
_WALK_STEPS = 24
#: query keys from which a group's sections are searched on the kernel threads (a batch's:
#: a single request's 79 keys stay on the calling thread)
_PARALLEL_KEYS = 4096


@kernel(nogil=True, inline="always")
def _share(vlo: float, vhi: float, fl: float) -> float:  # pragma: no cover (numba)
    """Where ``fl`` lies in the values ``[vlo, vhi)`` of a window, as a share of it (0 to 1):
    the first entry ``>= fl`` of ``m`` uniform keys is near ``m`` times it."""
    return min(max((fl - vlo) / (vhi - vlo), 0.0), 1.0)


@kernel(nogil=True)
def _probes(a: Any, b: Any, vlo: float, vhi: float, fl: float) -> Any:  # pragma: no cover
    """The two probes of an interpolation round over ``[a, b)``, whose values lie in
    ``[vlo, vhi)``: the ends of the window the first entry ``>= fl`` almost always lies in (a
    group's keys are 32 bits of a hash mix, uniform: near ``a + m p``, within ``3 sqrt(m p (1 -
    p))``), each -1 where it is not inside ``(a, b)``."""
    m = b - a
    p = _share(vlo, vhi, fl)
    guess = a + p * m
    spread = 3.0 * np.sqrt(m * p * (1.0 - p)) + 2.0
    x1 = np.int64(guess - spread)
    x2 = np.int64(guess + spread)
    return (x1 if a < x1 < b else np.int64(-1)), (x2 if a < x2 < b else np.int64(-1))


@kernel(nogil=True)
def _narrow(
    a: Any, b: Any, vlo: float, vhi: float, x: Any, k: Any, low: Any
) -> Any:  # pragma: no cover
    """``[a, b)`` and its value bounds after probing entry ``x`` (key ``k``): the first entry
    ``>= low`` stays inside whatever the keys are."""
    if k < low:
        return x + 1, b, float(k), vhi
    return a, x, vlo, float(k)


@kernel(nogil=True)
def _first_past(
    kb: Any, kbits: Any, a: Any, end: Any, low: Any, equal: bool
) -> Any:  # pragma: no cover (numba: int64 positions, a uint32 key)
    """The first entry in ``[a, end)`` whose key (a ``kbits``-bit field, :mod:`.band_packed`; 32 for an
    unpacked section's bytes) is ``>= low`` (``> low`` with ``equal``), or ``end``; every key
    before ``a`` must be below it. A gallop from ``a`` (local steps first: the next key of a
    batch is near), then a binary search in the last step."""
    step = np.int64(1)
    while a + step <= end:
        k = key_at(kb, kbits, a + step - 1)
        if not (k < low or (equal and k == low)):
            break
        a += step
        step <<= 1
    b = min(a + step, end)
    while a < b:
        m = (a + b) >> 1
        k = key_at(kb, kbits, m)
        if k < low or (equal and k == low):
            a = m + 1
        else:
            b = m
    return a


@kernel(nogil=True, inline="always")
def _walk(
    kb: Any, kbits: Any, a: Any, b: Any, x: Any, kx: Any, low: Any
) -> Any:  # pragma: no cover
    """The first entry in ``[a, b)`` whose key is ``>= low`` (``b`` if none; every key before
    ``a`` is below it, every key from ``b`` is not), walking from ``x`` in ``[a, b)``, whose
    key is ``kx``: up to :data:`_WALK_STEPS` neighbours, then :func:`_first_past` on the side
    left to search."""
    if kx < low:
        x += 1
        for _ in range(_WALK_STEPS):
            if x >= b or key_at(kb, kbits, x) >= low:
                return x
            x += 1
        return _first_past(kb, kbits, x, b, low, False)
    for _ in range(_WALK_STEPS):
        if x <= a or key_at(kb, kbits, x - 1) < low:
            return x
        x -= 1
    return _first_past(kb, kbits, a, x, low, False)


@kernel(nogil=True)
def _interp_lockstep(
    offsets: npt.NDArray[np.uint64],
    dbits: int,
    dirs: npt.NDArray[np.uint32],
    kb: npt.NDArray[np.uint8],
    kbits: int,
    uk: npt.NDArray[np.uint64],
    lo: npt.NDArray[np.int64],
    hi: npt.NDArray[np.int64],
    isc: npt.NDArray[np.int64],
    fsc: npt.NDArray[np.float64],
) -> None:  # pragma: no cover (numba)
    """(first, end) entry of each sorted distinct compact key ``uk`` in a section into ``lo`` /
    ``hi``: a packed one (:mod:`.band_packed`; an unpacked one is its bytes with ``kbits`` 32 and
    no directory). A key's search starts at its bucket (one directory read; the whole group
    without a directory). A bucket's stored key bits are a hash mix's, uniform: the first
    entry >= ``low`` among ``m`` is near ``m * p`` (``p`` its share of the value range), within
    ``3 * sqrt(m p (1 - p))`` almost always. While the window holds more than
    :data:`_WALK_MAX` entries (an unpacked section's group, up to three rounds), a round probes
    the two ends of that window, each probe narrowing ``[a, b)`` (the answer stays inside
    whatever the keys are); then one interpolated guess inside it and a walk to the first entry
    ``>= low`` (:func:`_walk`), and :func:`_first_past` finds the end of the key's run.

    The searches run in lockstep: each round probes every key's search once before any uses
    its answer. One search's probes depend on each other, but the searches do not, so a
    round's loads are in flight together instead of one cache miss after another (a single
    request's 79 keys: ``benchmarks/bench_section_search.py``). Each level's loads are asked for
    (:data:`~neardup._jit.prefetch`) in one pass over the searches and read in the next, so
    they overlap however many instructions a search's step takes. ``isc`` (8, n) and ``fsc``
    (2, n) are scratch (a caller searching many sections passes the same). Equal to the NumPy
    twin :func:`neardup.index.reference.section_search_reference` (tested)."""
    n = uk.size
    a_ = isc[0]
    b_ = isc[1]
    end_ = isc[2]
    x1 = isc[3]
    x2 = isc[4]
    k1 = isc[5]
    k2 = isc[6]
    low = isc[7]
    vlo = fsc[0]
    vhi = fsc[1]
    ng = offsets.size - 1
    nd = (1 << dbits) + 1
    shift = np.uint64(32 - dbits)
    mask = (np.uint64(1) << shift) - np.uint64(1)
    span = float(np.uint64(1) << shift)
    if dbits > 0:  # every key's directory entry asked for before any is read
        for q in range(n):
            g = np.int64(uk[q] >> np.uint64(32))
            if g < ng:
                prefetch(dirs, g * nd + np.int64((uk[q] & np.uint64(0xFFFFFFFF)) >> shift))
    for q in range(n):  # the loads: every key's bucket
        g = np.int64(uk[q] >> np.uint64(32))
        vlo[q] = 0.0
        vhi[q] = span
        if g >= ng:
            a_[q] = b_[q] = end_[q] = -1
            lo[q] = hi[q] = 0
            continue
        h = uk[q] & np.uint64(0xFFFFFFFF)
        low[q] = np.int64(h & mask)
        a = np.int64(offsets[g])
        if dbits > 0:
            at = g * nd + np.int64(h >> shift)
            b_[q] = end_[q] = a + np.int64(dirs[at + 1])
            a_[q] = a + np.int64(dirs[at])
        else:
            a_[q] = a
            b_[q] = end_[q] = np.int64(offsets[g + 1])
    for _ in range(3):
        for q in range(n):  # the loads: every search's two probes
            a = a_[q]
            b = b_[q]
            x1[q] = -1
            x2[q] = -1
            if a < 0 or b - a <= _WALK_MAX:
                continue
            x1[q], x2[q] = _probes(a, b, vlo[q], vhi[q], float(low[q]))
            prefetch_key(kb, kbits, x1[q])
            prefetch_key(kb, kbits, x2[q])
        for q in range(n):
            if x1[q] >= 0:
                k1[q] = key_at(kb, kbits, x1[q])
            if x2[q] >= 0:
                k2[q] = key_at(kb, kbits, x2[q])
        for q in range(n):  # the answers
            a, b, lo_v, hi_v = a_[q], b_[q], vlo[q], vhi[q]
            x = x1[q]
            if x >= 0:
                a, b, lo_v, hi_v = _narrow(a, b, lo_v, hi_v, x, k1[q], low[q])
            x = x2[q]
            if x >= 0 and b != x1[q] and a < x < b:  # (past the first probe: past this one)
                a, b, lo_v, hi_v = _narrow(a, b, lo_v, hi_v, x, k2[q], low[q])
            a_[q], b_[q], vlo[q], vhi[q] = a, b, lo_v, hi_v
    for q in range(n):  # the loads: every search's guess inside its window
        a = a_[q]
        b = b_[q]
        if a < 0 or a >= b:
            continue
        x = min(a + np.int64(_share(vlo[q], vhi[q], float(low[q])) * (b - a)), b - 1)
        x1[q] = x
        prefetch_key(kb, kbits, x)
    for q in range(n):
        a = a_[q]
        if a < 0 or a >= b_[q]:
            continue
        k1[q] = key_at(kb, kbits, x1[q])
    for q in range(n):  # the walks, on the guesses' cache lines
        a = a_[q]
        if a < 0:
            continue
        w = np.uint32(low[q])
        if a < b_[q]:
            a = _walk(kb, kbits, a, b_[q], x1[q], np.uint32(k1[q]), w)
        lo[q] = a
        hi[q] = _first_past(kb, kbits, a, end_[q], w, True)


@kernel(nogil=True)
def _section_interp_kernel(
    offsets: npt.NDArray[np.uint64],
    dbits: int,
    dirs: npt.NDArray[np.uint32],
    kb: npt.NDArray[np.uint8],
    kbits: int,
    uk: npt.NDArray[np.uint64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:  # pragma: no cover (numba)
    """:func:`_interp_lockstep` of one section, with its own answer and scratch."""
    lo = np.zeros(uk.size, np.int64)
    hi = np.zeros(uk.size, np.int64)
    isc = np.empty((8, uk.size), np.int64)
    fsc = np.empty((2, uk.size), np.float64)
    _interp_lockstep(offsets, dbits, dirs, kb, kbits, uk, lo, hi, isc, fsc)
    return lo, hi


@kernel(nogil=True)
def _gallop(
    offsets: npt.NDArray[np.uint64],
    dbits: int,
    dirs: npt.NDArray[np.uint32],
    kb: npt.NDArray[np.uint8],
    kbits: int,
    uk: npt.NDArray[np.uint64],
    key: npt.NDArray[np.int64],
    lo: npt.NDArray[np.int64],
    hi: npt.NDArray[np.int64],
    at: int,
    dense: bool,
) -> int:  # pragma: no cover (numba)
    """The entries ``[first, end)`` of each sorted compact key ``uk`` in a section (packed, or
    an unpacked one's bytes: ``kbits`` 32, no directory), found by a galloping search inside the
    key's bucket from where the previous key of the bucket ended (the keys are sorted, so a
    large batch walks each group forward with local steps instead of starting every binary
    search at the top; a directory puts each key's walk at its bucket).

    ``dense``: each key's at its own place (``lo[q]``, ``hi[q]``; 0, 0 for a group the section
    lacks). Otherwise only the non-empty buckets, one after another from ``at`` (``key[at]``
    the key's index); returns where the next would go. (One call a section: the loop passes
    the arrays to nothing, so it runs without reference counting.)"""
    ng = offsets.size - 1
    nd = (1 << dbits) + 1
    shift = np.uint64(32 - dbits)
    mask = (np.uint64(1) << shift) - np.uint64(1)
    prev = np.int64(-1)  # the previous key's bucket (group * nd + bucket)
    start = np.int64(0)
    for q in range(uk.size):
        g = np.int64(uk[q] >> np.uint64(32))
        if g >= ng:
            if dense:
                lo[q] = hi[q] = 0
            continue
        h = uk[q] & np.uint64(0xFFFFFFFF)
        low = np.uint32(h & mask)
        base = np.int64(offsets[g])
        if dbits > 0:
            cell = g * nd + np.int64(h >> shift)
            end = base + np.int64(dirs[cell + 1])
            first = base + np.int64(dirs[cell])
        else:
            cell = g
            end = np.int64(offsets[g + 1])
            first = base
        if cell != prev:
            start = first
            prev = cell
        a = _first_past(kb, kbits, start, end, low, False)
        start = _first_past(kb, kbits, a, end, low, True)
        if dense:
            lo[q] = a
            hi[q] = start
        elif start > a:
            key[at] = q
            lo[at] = a
            hi[at] = start
            at += 1
    return at


@kernel(nogil=True)
def _section_search_kernel(
    offsets: npt.NDArray[np.uint64],
    dbits: int,
    dirs: npt.NDArray[np.uint32],
    kb: npt.NDArray[np.uint8],
    kbits: int,
    uk: npt.NDArray[np.uint64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:  # pragma: no cover (numba)
    """(first, end) entry of each sorted compact key ``uk`` in a section by the forward gallop
    (:func:`_gallop`; :func:`neardup.index.reference.section_search_reference` is the
    NumPy twin)."""
    lo = np.empty(uk.size, np.int64)
    hi = np.empty(uk.size, np.int64)
    _gallop(offsets, dbits, dirs, kb, kbits, uk, lo, lo, hi, 0, True)  # (dense: no key indexes)
    return lo, hi


def section_search(
    offsets: npt.NDArray[np.uint64], keys: npt.NDArray[np.uint32], uk: npt.NDArray[np.uint64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(first, end) entry of each sorted distinct compact key ``uk`` in a section. Few keys in a
    large section (a single request: one key a band against a segment) search each group from
    its start: interpolation finds them in a few probes, where a gallop from the group's start
    misses the cache at every step. Many keys (a batch) walk each group forward from the last
    one instead (``bench_store_scale.py`` measures both)."""
    kb = read_only(keys, np.uint32).view(np.uint8)  # (32-bit keys, no directory)
    search = _section_interp_kernel if uk.size * _SPARSE_GAP < len(keys) else _section_search_kernel
    return search(read_only(offsets, np.uint64), 0, _NO_DIRS, kb, 32, uk)


def packed_search(
    sec: Any, uk: npt.NDArray[np.uint64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(first, end) entry of each sorted distinct compact key ``uk`` in a
    :class:`~neardup.index.band_packed.PackedSection`, from each key's bucket: few keys by
    :func:`_interp_lockstep`, many by the forward gallop."""
    search = _section_interp_kernel if uk.size * _SPARSE_GAP < len(sec) else _section_search_kernel
    return search(
        read_only(sec.offsets, np.uint64),
        sec.dbits,
        read_only(sec.dirs, np.uint32),
        read_only(sec.kbytes, np.uint8),
        sec.kbits,
        uk,
    )


_NO_DIRS = np.zeros(0, np.uint32)
_NO_DIRS.flags.writeable = False
_NO_IDS = np.zeros(0, np.int64)
_NO_IDS.flags.writeable = False
# the room of a search on one thread: its buckets from position 0 (the kernel reads
# ``room[first]`` only; writable, as the batch path's room, so the kernel has one signature)
_ROOM_AT_0 = np.zeros(1, np.int64)


class SectionGroup:
    """Band sections (a store's segments, packed,
    :class:`~neardup.index.band_packed.PackedSection`, or a memtable's
    :class:`~neardup.index.band_section.BandSection`) searched as one run of
    :func:`neardup.index.bands.lookup`: one kernel call finds every query key in every section
    (:meth:`search`), one more gathers the row ids of the buckets under the cap
    (:meth:`gather`); equal to passing the sections one by one (tested). An unpacked section
    is searched as its bytes: 32-bit keys without a directory, 32-bit rows. A section's rows
    name row ids through its ``rowids`` map, or, without one, as ``base + row`` (a memtable's;
    ``base`` 0 when the section has none)."""

    def __init__(self, sections: Sequence[Any]) -> None:
        self.sections = [s for s in sections if len(s)]
        layout = [_layout(s) for s in self.sections]
        # (typed lists made by cached kernels: numba.typed.List's own methods compile in every
        # process, see neardup._typed.typed_list)
        self._offsets = typed_list(
            [read_only(s.offsets, np.uint64) for s in self.sections], np.uint64
        )
        self._dirs = typed_list([x[1] for x in layout], np.uint32)
        self._kbytes = typed_list([x[2] for x in layout], np.uint8)
        self._rbytes = typed_list([x[4] for x in layout], np.uint8)
        # (an empty map: the rows are offsets from the section's base)
        self._rowids = typed_list(
            [_NO_IDS if s.rowids is None else read_only(s.rowids, np.int64) for s in self.sections],
            np.int64,
        )
        self._bases = np.array(
            [int(getattr(s, "base", 0)) if s.rowids is None else 0 for s in self.sections],
            np.int64,
        )
        self._widths = np.array([(x[0], x[3], x[5]) for x in layout], np.int64).reshape(-1, 3)
        self._entries = np.array([len(s) for s in self.sections], np.int64)

    def __len__(self) -> int:
        return len(self.sections)

    def search(self, uk: npt.NDArray[np.uint64]) -> GroupHits:
        """The buckets of the sorted distinct keys ``uk`` in every section, the empty ones
        left out (:class:`GroupHits`). A batch's keys meet few buckets in each section: the
        answer grows with those, not with sections times keys (an answer of that shape was
        hundreds of MB of fresh pages a call for a 10 k-document check against a window of
        dozens of segments)."""
        nu = uk.size
        ns = len(self.sections)
        if not ns or not nu:  # (an empty typed list has no type to compile for)
            return GroupHits.empty()
        start, count = np.zeros((2, ns), np.int64)
        sparse = nu * _SPARSE_GAP < self._entries
        if nu < _PARALLEL_KEYS:  # a single request's keys: every section on this thread, so
            # the buckets lie one after another from 0, at most one per key and section (a
            # request's few arrays, made with as few NumPy calls as it takes: each costs
            # about as much as a section's search)
            key, lo, hi = np.empty((3, ns * nu), np.int64)
            _group_search_kernel(
                0, ns, self._offsets, self._dirs, self._kbytes, self._widths, uk, sparse,
                _ROOM_AT_0, start, count, key, lo, hi,
            )  # fmt: skip
            n = int(count.sum())
            if n == 0:
                return GroupHits.empty()
            return GroupHits(np.repeat(np.arange(ns), count), key[:n], lo[:n], hi[:n])
        # A section has at most one bucket per query key and per entry. A range of sections
        # (one thread's) writes its buckets one after another from its first section's room,
        # so of this room only what the buckets take is ever touched
        room = np.zeros(ns + 1, np.int64)
        np.cumsum(np.minimum(self._entries, nu), out=room[1:])
        key, lo, hi = np.empty((3, int(room[-1])), np.int64)
        args = (
            self._offsets, self._dirs, self._kbytes, self._widths, uk, sparse, room, start,
            count, key, lo, hi,
        )  # fmt: skip
        run_ranges(_group_search_kernel, ns, *args)  # a batch's: the sections over the threads
        got = np.flatnonzero(count)
        if got.size == 0:
            return GroupHits.empty()
        at = _ranges(start[got], count[got])
        return GroupHits(np.repeat(got, count[got]), key[at], lo[at], hi[at])

    def gather(
        self, hits: GroupHits, skip: npt.NDArray[np.bool_]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(key index, row id) of every entry of the buckets ``hits`` whose key ``skip`` does
        not name, section by section."""
        if not self.sections or not len(hits):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return _group_gather_kernel(
            self._rbytes,
            self._widths,
            self._rowids,
            self._bases,
            hits.section,
            hits.key,
            hits.lo,
            hits.hi,
            skip,
        )

    def row_ids(self, s: int, at: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Row ids of the entries at positions ``at`` of section ``s``."""
        return self.sections[s].row_ids(at)


def group_of(
    cached: tuple[list[Any], SectionGroup] | None, sections: Sequence[Any]
) -> tuple[list[Any], SectionGroup]:
    """``(sections, them as one SectionGroup)``: ``cached`` while it holds the same section
    objects in the same order (:func:`~neardup._arrays.same_objects`), else made again. A
    group's typed lists cost more to make than a search, and its sections change only when a
    memtable seals its buffer or the segments change."""
    if cached is not None and same_objects(cached[0], sections):
        return cached
    return list(sections), SectionGroup(sections)


def _ranges(starts: npt.NDArray[np.int64], counts: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Concatenated ``arange(starts[k], starts[k] + counts[k])`` (counts > 0)."""
    ends = np.cumsum(counts)
    return np.repeat(starts - ends + counts, counts) + np.arange(int(ends[-1]), dtype=np.int64)


@dataclass(frozen=True)
class GroupHits:
    """The non-empty buckets a :meth:`SectionGroup.search` found, section by section (keys in
    order within one): bucket ``i`` is the entries ``[lo[i], hi[i])`` of section
    ``section[i]`` holding query key ``key[i]`` (an index into the sorted query keys)."""

    section: npt.NDArray[np.int64]
    key: npt.NDArray[np.int64]
    lo: npt.NDArray[np.int64]
    hi: npt.NDArray[np.int64]

    @staticmethod
    def empty() -> GroupHits:
        z = np.zeros(0, np.int64)
        return GroupHits(z, z, z, z)

    def __len__(self) -> int:
        return len(self.key)

    def totals(self, nu: int) -> npt.NDArray[np.int64]:
        """Entries of each of the ``nu`` query keys over every section."""
        # (a weighted bincount is exact below 2**53 entries, and cheaper than np.add.at)
        return np.bincount(self.key, self.hi - self.lo, nu).astype(np.int64)


@kernel(nogil=True)
def _group_search_kernel(
    first: int,
    last: int,
    offsets: Any,
    dirs: Any,
    kbytes: Any,
    widths: npt.NDArray[np.int64],
    uk: npt.NDArray[np.uint64],
    sparse: npt.NDArray[np.bool_],
    room: npt.NDArray[np.int64],
    start: npt.NDArray[np.int64],
    count: npt.NDArray[np.int64],
    key: npt.NDArray[np.int64],
    lo: npt.NDArray[np.int64],
    hi: npt.NDArray[np.int64],
) -> None:  # pragma: no cover (numba)
    """Sections ``[first, last)`` of a group searched, each key from its bucket, their
    non-empty buckets written one after another from ``room[first]`` (section ``s``'s:
    ``count[s]`` from ``start[s]``): the ``sparse`` sections by :func:`_interp_lockstep` (few
    keys in a large section: its searches in lockstep), the others by the forward gallop
    (:func:`_gallop`). ``widths[s]``: the section's directory bits, key bits and row bits."""
    nu = uk.size
    at = room[first]
    scratch = False
    for s in range(first, last):
        scratch = scratch or sparse[s]
    n_sc = nu if scratch else 0  # (a batch against small sections needs none)
    a_ = np.empty(n_sc, np.int64)
    b_ = np.empty(n_sc, np.int64)
    isc = np.empty((8, n_sc), np.int64)
    fsc = np.empty((2, n_sc), np.float64)
    for s in range(first, last):
        start[s] = at
        db, kbits = widths[s, 0], widths[s, 1]
        if sparse[s]:
            _interp_lockstep(offsets[s], db, dirs[s], kbytes[s], kbits, uk, a_, b_, isc, fsc)
            for q in range(nu):
                if b_[q] > a_[q]:
                    key[at] = q
                    lo[at] = a_[q]
                    hi[at] = b_[q]
                    at += 1
        else:
            at = _gallop(offsets[s], db, dirs[s], kbytes[s], kbits, uk, key, lo, hi, at, False)
        count[s] = at - start[s]


@kernel(nogil=True)
def _group_gather_kernel(
    rbytes: Any,
    widths: npt.NDArray[np.int64],
    rowids: Any,
    bases: npt.NDArray[np.int64],
    section: npt.NDArray[np.int64],
    key: npt.NDArray[np.int64],
    lo: npt.NDArray[np.int64],
    hi: npt.NDArray[np.int64],
    skip: npt.NDArray[np.bool_],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:  # pragma: no cover (numba)
    """(key index, row id) of every entry of the buckets, those of keys ``skip`` names left
    out: a row through its section's ``rowids`` map, or ``bases[s] + row`` without one."""
    total = 0
    for i in range(key.size):
        if not skip[key[i]]:
            total += hi[i] - lo[i]
    u_out = np.empty(total, np.int64)
    r_out = np.empty(total, np.int64)
    at = 0
    cur = -1
    rb = rbytes[0]
    rbits = widths[0, 2]
    ids = rowids[0]
    base = bases[0]
    for i in range(key.size):
        k = key[i]
        if skip[k]:
            continue
        if section[i] != cur:  # (the buckets come section by section)
            cur = section[i]
            rb = rbytes[cur]
            rbits = widths[cur, 2]
            ids = rowids[cur]
            base = bases[cur]
        mapped = ids.size > 0
        for e in range(lo[i], hi[i]):
            u_out[at] = k
            r = row_at(rb, rbits, e)
            r_out[at] = ids[r] if mapped else base + r
            at += 1
    return u_out, r_out


def _layout(sec: Any) -> tuple[int, Any, Any, int, Any, int]:
    """(directory bits, directory, key bytes, key bits, row bytes, row bits) of a section,
    packed or not (an unpacked one as its bytes: 32-bit fields), read-only."""
    if isinstance(sec, PackedSection):
        return (
            sec.dbits, read_only(sec.dirs, np.uint32), read_only(sec.kbytes, np.uint8), sec.kbits,
            read_only(sec.rbytes, np.uint8), sec.rbits,
        )  # fmt: skip
    kb = read_only(sec.keys, np.uint32).view(np.uint8)
    return 0, _NO_DIRS, kb, 32, read_only(sec.rows, np.uint32).view(np.uint8), 32
