"""A merged band-key section written out group by group (:class:`MergedSection`): what
:func:`~neardup.index.band_merge.merge_mapped` and then
:func:`~neardup.index.band_packed.pack_section` give, byte for byte, without holding either.

A compaction's output section is the largest thing it makes: ~79 entries a row, 8 bytes each
merged and ~5 more packed, about a kilobyte a row of the partition it rewrites, held whole
until the segment is written. A seed of 10 M documents without times (one partition) peaked
at 12.9 GB of anonymous memory in its final merge (docs/store.md, *Bulk loads*). A segment
file puts every group's offsets and directory before the packed keys, and all the keys before
all the rows, and the file is written in order (its checksum is an xxh64 of the body in
order, and :func:`neardup._durable.write_synced` syncs it as it goes). So the section is made
in three passes over the inputs:

1. **count**: each group's kept entries (those whose row the map keeps) and a histogram of
   their keys' top 16 bits: the offsets, the entries, the layout
   (:func:`~neardup.index.band_packed.packed_layout`) and the directories;
2. **keys** (:meth:`MergedSection.key_bytes`): each group merged (the same tournament as
   ``merge_mapped``) and its keys packed;
3. **rows** (:meth:`MergedSection.row_bytes`): each group's rows packed, a remainder of fewer
   than 8 fields carried to the next group (8 fields of any width end on a byte). With a
   ``spill_dir``, the keys pass packs them too, into an unnamed scratch file there, and this
   pass reads them back; without one, each group is merged again.

The inputs are read twice (three times without a spill file) and merged once (twice), to hold
one group at a time (about 24 bytes an input row) instead of the section. The spill file holds
the packed rows (2-4 bytes an entry) and goes when it is read or the section is dropped. Store
compactions take it past :data:`STREAM_ENTRIES` entries, spilling into the store's segment
folder (``neardup.store.maintenance``); tests compare its bytes with
``pack_section(merge_mapped(...))``'s, both ways; ``benchmarks/bench_compact.py`` times them.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from typing import IO

import numpy as np
import numpy.typing as npt

from .._jit import kernel
from .band_merge import _checked_maps, _group_buffer, _group_of, _groups, _merge_group
from .band_packed import PackedSection, _put_fields, packed_bytes, packed_layout
from .band_section import BandSection

__all__ = ["STREAM_ENTRIES", "MergedSection"]

#: entries of a merged section past which a compaction writes it group by group
#: (:class:`MergedSection`) instead of building it in memory: 2**25 entries are ~420 k rows
#: of the default plan, ~440 MB merged and packed. Below it, the one merge of the in-memory
#: path costs less than three passes, and the memory is small.
STREAM_ENTRIES = 1 << 25

_TOP = 1 << 16  # the histogram's buckets: a key's top 16 bits (the widest directory)
_SPILL_READ = 1 << 23  # bytes of the spill file read back at a time


@kernel(nogil=True)
def _count_kept(
    keys: npt.NDArray[np.uint32],
    rows: npt.NDArray[np.uint32],
    row_map: npt.NDArray[np.int64],
    hist: npt.NDArray[np.int64],
) -> int:  # pragma: no cover (numba)
    """The entries whose mapped row is kept (not negative), each counted in ``hist`` by its
    key's top 16 bits; returns how many."""
    n = 0
    for i in range(keys.size):
        if row_map[rows[i]] >= 0:
            hist[keys[i] >> np.uint32(16)] += 1
            n += 1
    return n


class MergedSection:
    """The section :func:`~neardup.index.band_merge.merge_mapped` makes of ``sections`` and
    ``maps``, in the packed layout :func:`~neardup.index.band_packed.pack_section` gives it
    for a segment of ``n_rows`` rows, produced a group at a time (see the module).

    ``offsets``, ``dirs``, ``dbits``, ``kbits``, ``rbits`` and ``len()`` are known after the
    counting pass (the constructor); :meth:`key_bytes` and :meth:`row_bytes` yield the packed
    key and row fields in order. The inputs must stay readable (mapped) until both have been
    consumed. ``spill_dir``: a folder where the keys pass leaves the packed rows for the rows
    pass (an unnamed file, on the store's disk rather than a ``/tmp`` that may be memory), so
    that each group is merged once; None merges each group again for its rows.

    Raises
    ------
    ValueError
        A map that does not increase over its kept rows, shorter than its section's rows, or
        naming a row at or past ``n_rows``.
    """

    def __init__(
        self,
        sections: Sequence[BandSection | PackedSection],
        maps: Sequence[npt.NDArray[np.int64]],
        n_rows: int,
        *,
        spill_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self._maps = _checked_maps(sections, maps)
        self._spill_dir = None if spill_dir is None else os.fspath(spill_dir)
        self._spill: IO[bytes] | None = None  # the packed rows, once the keys pass made them
        self._sections = list(sections)
        for m in self._maps:
            if len(m) and int(m.max()) >= n_rows:
                raise ValueError(f"a map naming row {int(m.max())} of {n_rows}")
        self.n_rows = int(n_rows)
        ng = _groups(self._sections) if self._sections else 0
        counts = np.zeros(ng, np.int64)
        hist = np.zeros((ng, _TOP), np.int64)
        for g in range(ng):
            for sec, m in zip(self._sections, self._maps, strict=True):
                keys, rows = _group_of(sec, g)
                if len(keys):
                    counts[g] += _count_kept(keys, rows, m, hist[g])
        m_total = int(counts.sum())
        groups = ng if m_total else 0
        self.dbits, self.kbits, self.rbits = packed_layout(m_total, groups, self.n_rows)
        self.entries = m_total
        self._counts = counts[:groups]
        self.offsets = np.zeros(groups + 1, np.uint64)
        self.offsets[1:] = np.cumsum(self._counts)
        nd = (1 << self.dbits) + 1
        self.dirs = np.zeros(groups * nd if self.dbits else 0, np.uint32)
        if self.dbits:
            for g in range(groups):
                h = hist[g] if self.dbits == 16 else hist[g].reshape(256, 256).sum(axis=1)
                self.dirs[g * nd + 1 : (g + 1) * nd] = np.cumsum(h)

    def __len__(self) -> int:
        return self.entries

    @property
    def groups(self) -> int:
        return len(self.offsets) - 1

    @property
    def key_nbytes(self) -> int:
        return packed_bytes(self.entries, self.kbits)

    @property
    def row_nbytes(self) -> int:
        return packed_bytes(self.entries, self.rbits)

    def _merged(self) -> Iterator[tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]]:
        """Each group's merged keys and rows, in order (one group held at a time)."""
        if not self.groups:  # nothing kept
            return
        buf = _group_buffer(self._sections, self.groups)  # every group's inputs: none is empty
        for g in range(self.groups):
            n = int(self._counts[g])
            keys = np.empty(n, np.uint32)
            rows = np.empty(n, np.uint32)
            got = _merge_group(self._sections, self._maps, g, buf, keys, rows, 0)
            if got != n:  # the inputs changed between the passes
                raise RuntimeError(f"band group {g} merged {got} entries, {n} were counted")
            yield keys, rows

    def key_bytes(self) -> Iterator[npt.NDArray[np.uint8]]:
        """The packed key fields, a group at a time (``key_nbytes`` in all): key fields are
        whole bytes (16, 24 or 32 bits), so each group's start on a byte. With a spill folder
        the rows are packed meanwhile, for :meth:`row_bytes` to read back."""
        self.close()
        mask = np.uint32(0xFFFFFFFF >> self.dbits)
        spill = None
        if self._spill_dir is not None:
            # kept open past this pass, for row_bytes: closed there, by close() or on failure
            spill = tempfile.TemporaryFile(dir=self._spill_dir, prefix=".spill-")  # noqa: SIM115
        try:
            carry = np.zeros(0, np.uint32)
            for keys, rows in self._merged():
                out = np.empty(packed_bytes(len(keys), self.kbits), np.uint8)
                _put_fields(keys, self.kbits, mask, out)
                yield out
                if spill is not None:
                    packed, carry = self._pack_rows(rows, carry)
                    spill.write(packed.data)
            if spill is not None:
                if len(carry):
                    spill.write(self._pack_rest(carry).data)
                spill.flush()
                spill.seek(0)
        except BaseException:  # a failed write, or the keys abandoned: the spill goes
            if spill is not None:
                spill.close()
            raise
        self._spill = spill

    def row_bytes(self) -> Iterator[npt.NDArray[np.uint8]]:
        """The packed row fields (``row_nbytes`` in all): read back from the spill file the
        keys pass wrote, else each group merged again."""
        spill, self._spill = self._spill, None
        if spill is not None:
            with spill:
                while chunk := spill.read(_SPILL_READ):
                    yield np.frombuffer(chunk, np.uint8)
            return
        carry = np.zeros(0, np.uint32)
        for _keys, rows in self._merged():
            packed, carry = self._pack_rows(rows, carry)
            yield packed
        if len(carry):
            yield self._pack_rest(carry)

    def close(self) -> None:
        """Drop a spill file not read back (it has no name: closing it frees its space)."""
        if self._spill is not None:
            self._spill.close()
            self._spill = None

    def _pack_rows(
        self, rows: npt.NDArray[np.uint32], carry: npt.NDArray[np.uint32]
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint32]]:
        """A group's rows after the ``carry`` of the groups before: their whole eights of
        fields packed, and the rest to carry on."""
        if len(carry):
            rows = np.concatenate([carry, rows])
        whole = len(rows) - len(rows) % 8
        out = np.empty(packed_bytes(whole, self.rbits), np.uint8)
        _put_fields(rows[:whole], self.rbits, np.uint32(0xFFFFFFFF), out)
        return out, rows[whole:].copy()

    def _pack_rest(self, carry: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint8]:
        """The last group's remainder of fewer than 8 fields, packed."""
        out = np.empty(packed_bytes(len(carry), self.rbits), np.uint8)
        _put_fields(carry, self.rbits, np.uint32(0xFFFFFFFF), out)
        return out
