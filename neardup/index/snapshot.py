"""What a :class:`~neardup.index.HammingIndex` is made of, as one value: :class:`IndexSnapshot`.

:meth:`HammingIndex.snapshot() <neardup.index.HammingIndex.snapshot>` hands one out (to
:mod:`neardup.index.format`, which writes it, and to :class:`~neardup.index.multi.IndexSet`,
which probes its segments), and :meth:`HammingIndex.from_snapshot
<neardup.index.HammingIndex.from_snapshot>` builds an index from one (what
:func:`neardup.index.format.read_index` returns). Those modules thus read no private attribute
of the index, and :mod:`neardup.index.format` does not import :mod:`neardup.index.hamming_index`.

A snapshot shares its arrays with the index (nothing is copied but the buffer's removal mask):
it is a consistent view taken under the index's lock, to be used right away, not kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from .compressed import DEFAULT_BLOCK_BYTES, DEFAULT_CODEC, CompressedSegment
from .plan import Plan
from .tables import PlanArrays, TableSegment

__all__ = ["IndexSettings", "IndexSnapshot", "SealedSegment"]

#: a sealed (immutable but for its removal mask) segment of an index, oldest first
SealedSegment: TypeAlias = TableSegment | CompressedSegment


@dataclass(frozen=True)
class IndexSettings:
    """The settings a saved index keeps besides its plan: the ``"state"`` object of the file
    header (key names are part of the on-disk format, see :mod:`neardup.index.format`)."""

    next_id: int = 0  # the running id counter: every id ever added is below it
    buffer_size: int = 4096
    merge_factor: int = 4
    compress: bool = False
    codec: str = DEFAULT_CODEC
    block_bytes: int = DEFAULT_BLOCK_BYTES

    def to_dict(self) -> dict[str, Any]:
        """The header's ``"state"`` object (``compress`` / ``codec`` / ``block_bytes`` only
        when compressed)."""
        return {
            "next_id": self.next_id,
            "buffer_size": self.buffer_size,
            "merge_factor": self.merge_factor,
            **(
                {"compress": True, "codec": self.codec, "block_bytes": self.block_bytes}
                if self.compress
                else {}
            ),
        }

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> IndexSettings:
        """Inverse of :meth:`to_dict`; absent keys take their defaults."""
        return cls(
            next_id=int(state.get("next_id", 0)),
            buffer_size=int(state.get("buffer_size", 4096)),
            merge_factor=int(state.get("merge_factor", 4)),
            compress=bool(state.get("compress", False)),
            codec=str(state.get("codec", DEFAULT_CODEC)),
            block_bytes=int(state.get("block_bytes", DEFAULT_BLOCK_BYTES)),
        )


@dataclass(frozen=True)
class IndexSnapshot:
    """A consistent view of an index: plan, settings, sealed segments and append buffer.

    Attributes
    ----------
    plan, arrays
        The table layout and its compiled arrays (:func:`neardup.index.tables.plan_arrays`).
    settings
        What a saved index keeps besides the plan (:class:`IndexSettings`).
    segments
        The sealed segments, oldest first (:class:`~neardup.index.tables.TableSegment` or
        :class:`~neardup.index.compressed.CompressedSegment`); shared with the index.
    buffer_fps, buffer_ids, buffer_alive
        The append buffer's rows, ``uint64`` (m, words), ``int64`` (m,), ``bool`` (m,): rows
        whose ``buffer_alive`` is False were removed.
    read_only
        Why the index is read-only (e.g. memory-mapped from a file), or None.
    """

    plan: Plan
    arrays: PlanArrays
    settings: IndexSettings
    segments: tuple[SealedSegment, ...]
    buffer_fps: npt.NDArray[np.uint64]
    buffer_ids: npt.NDArray[np.int64]
    buffer_alive: npt.NDArray[np.bool_]
    read_only: str | None = None

    def live_buffer(self) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
        """(fingerprints, ids) of the buffer's rows not removed."""
        alive = self.buffer_alive
        return self.buffer_fps[alive], self.buffer_ids[alive]
