"""The embedded store behind :class:`neardup.online.Deduplicator`.

Modules: :mod:`.wal` (write-ahead log), :mod:`.segment` (immutable segment files),
:mod:`.memindex` (memtable and per-segment search), :mod:`.meta` (SQLite metadata),
:mod:`.layout` (data-directory layout, lock, manifest), :mod:`.engine` (the :class:`Store`:
recovery, flush, retention). See ``docs/store.md``.
"""

from __future__ import annotations

from .engine import Store, parse_duration

__all__ = ["Store", "parse_duration"]
