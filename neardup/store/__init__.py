"""The embedded store behind :class:`neardup.online.Deduplicator`.

Modules: :mod:`.wal` (write-ahead log), :mod:`.segment` (immutable segment files),
:mod:`.memindex` (memtable and per-segment search), :mod:`.meta` (SQLite metadata),
:mod:`.layout` (data-directory layout, lock, manifest), :mod:`.tombstones` (a cluster
node's deleted ids with their versions, :class:`TombstoneLog`), :mod:`.writes` (:class:`WriteGroup`, what
one write group adds and deletes), :mod:`.engine` (the :class:`Store`: recovery, flush,
retention, and the writer's intents: ``append_group``, ``sync_log``, ``take_back``,
``bulk_add``). See ``docs/store.md``.
"""

from __future__ import annotations

from .engine import Store, Unsynced, parse_duration
from .meta import NO_CONTENT_HASH
from .tombstones import Tombstone, TombstoneLog
from .writes import WriteGroup

__all__ = [
    "NO_CONTENT_HASH",
    "Store",
    "Tombstone",
    "TombstoneLog",
    "Unsynced",
    "WriteGroup",
    "parse_duration",
]
