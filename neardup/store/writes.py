"""What one write group changes, in order: :class:`WriteGroup`, handed to
:meth:`Store.append_group <neardup.store.engine.Store.append_group>`.

The caller (the online writer) decides which documents are added and which deleted; this
module turns those intents into the log's records (:mod:`.wal`), so nothing outside the store
knows the log's record types or the rows' flag bits.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .meta import EMPTY_FLAG
from .wal import AddRecord, DeleteRecord

__all__ = ["WriteGroup"]


class WriteGroup:
    """The adds and deletes of one write group, in the order they were decided, plus the added
    rows as arrays (:meth:`set_added`) for the in-memory index.

    Row ids come from :meth:`Store.allocate <neardup.store.engine.Store.allocate>` (the caller
    allocates them as it decides, so a later document of the group can name an earlier one).
    """

    __slots__ = ("added", "records")

    def __init__(self) -> None:
        self.records: list[AddRecord | DeleteRecord] = []
        #: (fingerprints, row ids, times[, band entry keys]) of the added rows, in add order
        self.added: tuple[Any, ...] | None = None

    def __len__(self) -> int:
        return len(self.records)

    def add(
        self,
        rowid: int,
        time: float,
        fp_hi: int,
        fp_lo: int,
        content_hash: bytes,
        empty: bool,
        id: str,
        text: str | None,
        metadata: str | None,
    ) -> None:
        """Add document ``id`` as row ``rowid`` (``fp_lo`` 0 for 64-bit fingerprints;
        ``empty``: the text had no features; ``metadata`` as JSON text)."""
        self.records.append(
            AddRecord(
                rowid,
                time,
                fp_hi,
                fp_lo,
                content_hash,
                EMPTY_FLAG if empty else 0,
                id,
                text,
                metadata,
            )
        )

    def delete(self, rowid: int, id: str) -> None:
        """Delete document ``id``, stored as row ``rowid``."""
        self.records.append(DeleteRecord(rowid, id))

    def set_added(
        self,
        fps: npt.NDArray[np.uint64],
        rowids: npt.NDArray[np.int64],
        times: npt.NDArray[np.float64],
        bands: npt.NDArray[np.uint64] | None = None,
    ) -> None:
        """The added rows' fingerprints, row ids and times (and band entry keys with the MinHash
        channel), in the order of :meth:`add`."""
        self.added = (fps, rowids, times) if bands is None else (fps, rowids, times, bands)
