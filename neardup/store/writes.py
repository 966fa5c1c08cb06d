"""What one write group changes, in order: :class:`WriteGroup` (its records) and
:class:`AddedRows` (its added rows as arrays), handed to
:meth:`Store.append_group <neardup.store.Store.append_group>`; and what a bulk load stores
beside each fingerprint (:class:`BulkDocs`, for :meth:`Store.bulk_add
<neardup.store.Store.bulk_add>`).

The caller (the online writer) decides which documents are added and which deleted; this
module turns those intents into the log's records (:mod:`.wal`), so nothing outside the store
knows the log's record types or the rows' flag bits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from .meta import EMPTY_FLAG, Row
from .wal import AddRecord, DeleteRecord

__all__ = ["AddedRows", "BulkDocs", "WriteGroup", "row_of", "rows_of"]


class AddedRows(NamedTuple):
    """The rows a write group adds, as arrays in add order: what the memtable and the band
    table take."""

    fingerprints: npt.NDArray[np.uint64]  # (n,) or (n, 2)
    rowids: npt.NDArray[np.int64]
    times: npt.NDArray[np.float64]
    #: band entry keys (n, bands) with the MinHash channel, else None
    bands: npt.NDArray[np.uint64] | None = None
    #: MinHash sketches (n, width) with the channel (:mod:`.sketches`), else None
    sketches: npt.NDArray[np.uint8] | None = None


class WriteGroup:
    """The adds and deletes of one write group, in the order they were decided, plus the added
    rows as arrays (:meth:`set_added`) for the in-memory index.

    Row ids come from :meth:`Store.allocate <neardup.store.Store.allocate>` (the caller
    allocates them as it decides, so a later document of the group can name an earlier one).
    """

    __slots__ = ("added", "records")

    def __init__(self) -> None:
        self.records: list[AddRecord | DeleteRecord] = []
        #: the added rows as arrays, in add order (None: gathered from the records)
        self.added: AddedRows | None = None

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
        summary: bytes | None = None,
    ) -> None:
        """Add document ``id`` as row ``rowid`` (``fp_lo`` 0 for 64-bit fingerprints;
        ``empty``: the text had no features; ``metadata`` as JSON text; ``summary``: stored
        beside the row, not logged, :meth:`MetaDB.put_summaries
        <neardup.store.meta.MetaDB.put_summaries>`)."""
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
                None,
                summary,
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
        sketches: npt.NDArray[np.uint8] | None = None,
    ) -> None:
        """The added rows' fingerprints, row ids and times (and band entry keys and sketches
        with the MinHash channel), in the order of :meth:`add`."""
        self.added = AddedRows(fps, rowids, times, bands, sketches)


def rows_of(adds: Sequence[AddRecord], bits: int) -> AddedRows:
    """The :class:`AddedRows` of logged ``ADD`` records (their band keys not included)."""
    n = len(adds)
    if bits == 64:
        fps = np.fromiter((r.fp_hi for r in adds), dtype=np.uint64, count=n)
    else:
        fps = np.array([(r.fp_hi, r.fp_lo) for r in adds], dtype=np.uint64).reshape(-1, 2)
    rids = np.fromiter((r.rowid for r in adds), dtype=np.int64, count=n)
    ts = np.fromiter((r.time for r in adds), dtype=np.float64, count=n)
    return AddedRows(fps, rids, ts)


def row_of(r: AddRecord, with_text: bool) -> Row:
    """The metadata row of a logged ``ADD`` (what SQLite holds once it is applied)."""
    fp = r.fp_hi.to_bytes(8, "little") + r.fp_lo.to_bytes(8, "little")
    return Row(
        r.rowid, r.id, r.time, fp, r.chash, r.flags, r.metadata, r.text if with_text else None
    )


@dataclasses.dataclass(frozen=True)
class BulkDocs:
    """What a bulk load stores beside each fingerprint, as an add stores it: ``texts`` (None:
    not stored), content hashes, whether each text had no features, metadata (JSON text) and
    the MinHash band keys ((n, bands) compact keys; None without the channel) and sketches
    ((n, width); None: none kept)."""

    texts: list[str] | None
    chash: list[bytes]
    empty: npt.NDArray[np.bool_]
    metadata: list[str | None]
    bands: npt.NDArray[np.uint64] | None = None
    sketches: npt.NDArray[np.uint8] | None = None
    #: each document's stored summary or None (:meth:`MetaDB.put_summaries
    #: <neardup.store.meta.MetaDB.put_summaries>`); None: none
    summaries: list[bytes | None] | None = None
