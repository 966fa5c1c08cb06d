"""The embedded store behind :class:`neardup.online.Deduplicator`.

The :class:`Store` facade (:mod:`.engine`) over what it holds (:mod:`.state`) and its seams:
:mod:`.recovery` (open, replay), :mod:`.applier` (the write path: log, memtable, pending
overlay, SQLite behind), :mod:`.maintenance` (flush, compaction, retention, bulk loads),
:mod:`.partitions` (the segment files of the time partitions). Its settings:
:class:`StoreSettings` (:mod:`.settings`). Files: :mod:`.wal` (write-ahead log), :mod:`.segment`
(immutable segment files), :mod:`.meta` (SQLite metadata), :mod:`.layout` (data-directory
layout, lock, manifest); :mod:`.memindex` (memtable and per-segment search), :mod:`.bands`
(MinHash band keys); :mod:`.writes` (:class:`WriteGroup`, :class:`AddedRows`: what one write
group adds and deletes; :class:`BulkDocs`: what a bulk load stores); :mod:`.tombstones` (a
cluster node's deleted ids with their versions, :class:`TombstoneLog`). See ``docs/store.md``.
"""

from __future__ import annotations

from .applier import Unsynced
from .engine import Store
from .meta import NO_CONTENT_HASH
from .settings import StoreSettings, parse_duration
from .tombstones import Tombstone, TombstoneLog
from .writes import AddedRows, BulkDocs, WriteGroup

__all__ = [
    "NO_CONTENT_HASH",
    "AddedRows",
    "BulkDocs",
    "Store",
    "StoreSettings",
    "Tombstone",
    "TombstoneLog",
    "Unsynced",
    "WriteGroup",
    "parse_duration",
]
