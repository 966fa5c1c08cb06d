"""The store's settings: :class:`StoreSettings`, validated once, and the part of them kept with
the data (``config.json``'s ``store`` section, version 1).

The online layer embeds one in :class:`neardup.online.DedupSettings`, the service in
:class:`neardup.service.ServiceConfig` (through the former); ``neardup serve`` builds them from
its options. Every check is made here, when the object is built, and a refusal names the
option, the value and what to pass instead.

What the section holds decides which rows exist: the partition width (partition ``p`` holds
times in ``[p * width, (p + 1) * width)``; retention drops whole partitions) and the retention,
plus how segment indexes are built (``compress_tables``, ``table_block_bytes``). A store keeps
the values it was created with: :meth:`StoreSettings.resolve` takes the stored ones where the
caller gave none and refuses another explicit width or (unless allowed) retention.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, UnsupportedVersionError
from ..index.compressed import DEFAULT_BLOCK_BYTES, check_block_bytes
from .readers import DEFAULT_READ_THREADS, check_read_threads

__all__ = ["CONFIG_VERSION", "StoreSettings", "parse_duration"]

log = logging.getLogger("neardup.store")

#: version of the ``store`` section of ``config.json`` this build writes and reads
CONFIG_VERSION = 1


def parse_duration(value: str | float | int | None, *, name: str = "retention") -> float | None:
    """``"48h"``, ``"30m"``, ``"2d"``, ``"90s"`` or a number of seconds -> seconds (None stays None).

    >>> parse_duration("48h"), parse_duration(90), parse_duration(None)
    (172800.0, 90.0, None)
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigError(
            f"{name} must be a duration like '48h' or a number of seconds, got {value!r}"
        )
    if isinstance(value, (int, float)):
        secs = float(value)
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", str(value))
        if not m:
            raise ConfigError(
                f"{name} must be a duration like '48h', '30m', '7d' or seconds, got {value!r}"
            )
        secs = (
            float(m.group(1))
            * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]
        )
    if not math.isfinite(secs) or secs <= 0:
        raise ConfigError(f"{name} must be a positive duration, got {value!r}")
    return secs


def option_name(cls: Any, name: str) -> str:
    """How a refusal names a settings field: the field, and the ``neardup serve`` option that
    sets it (its ``flag`` metadata) when there is one."""
    flag = cls.__dataclass_fields__[name].metadata.get("flag")
    return f"{name} ({flag})" if flag else name


def is_int(value: object) -> bool:
    """An ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """An ``int`` or a finite ``float``, not a ``bool``."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _flag(flag: str) -> dict[str, str]:
    return {"flag": flag}


@dataclass(frozen=True)
class StoreSettings:
    """How a :class:`~neardup.store.Store` is opened.

    Parameters
    ----------
    retention : str or float or None, default=None
        Window, e.g. ``"48h"`` or seconds (stored as seconds); what leaves it is deleted.
        None: the one the store was created with (none for a new store: keep everything).
        Another value than the stored one is refused unless ``allow_retention_change``.
    allow_retention_change : bool, default=False
        Accept a ``retention`` other than the stored one, store it and apply it (what the old
        window had left behind is deleted first; logged as a warning).
    partition_seconds : float or None, default=None
        Width of a time partition. None: the stored one, else ``max(3600, retention / 8)``
        (1 day without retention): few, large partitions keep the segments a query searches
        few. Fixed when the store is created; another value is refused.
    memtable_size : int, default=1,000,000
        Rows kept in memory (and in the log) before they are written to segments.
    compress_tables : bool or None, default=None
        Segment indexes with block-compressed tables (``HammingIndex(compress=True)``: about
        half their memory and file size, exact, slower probes; docs/store.md). None: the
        stored setting (off for a new store).
    table_block_bytes : int or None, default=None
        Block size of compressed tables (a multiple of 8 in 16..65536). None: the stored one,
        else :data:`neardup.index.compressed.DEFAULT_BLOCK_BYTES`.
    repair : bool, default=False
        Open a store whose log is damaged in the middle by cutting it at the damage (rows
        SQLite holds are kept), and rebuild a damaged SQLite database from what it can read.
    verify_meta : bool or None, default=None
        Run SQLite's ``PRAGMA quick_check`` on open (a damaged database is refused, naming it,
        unless ``repair``). It reads every page of the metadata database: seconds at 10 M
        documents, but minutes once the database outgrows the page cache (a 50 M window's,
        23 GB, was read at ~32 MB/s). None: unless this same file passed one since the machine
        started (the manifest records the boot's id and the file's inode), so a restart after
        a crash of the process skips it and one after a reboot, or with a restored file, runs
        it (:func:`neardup.store.recovery.meta_check_due` says why that is safe). The
        segments' and their indexes' checksums are read once a boot the same way
        (:mod:`neardup.store.boot`). True: both on every open (after overwriting a file in
        place). False: never the ``quick_check``; a damaged page is
        met by the reads that reach it (rows keep their own checksums; ``neardup store
        verify`` checks the whole database offline).
    read_threads : int, default=4
        Connections to the metadata database that a read of many keys (a group's candidate
        rows, their summaries, its ids) is spread over, each on its own thread
        (:mod:`neardup.store.readers`): rows read from the disk once the database outgrows
        the page cache come in sooner. 1: one connection, one read after another. Not
        stored: each open may choose.
    resident_summaries : bool, default=False
        Hold every long row's summary in memory (:mod:`neardup.store.resident`: loaded on a
        thread after the open, then kept with the database), so that turning a long text's
        SimHash neighbours down on their summaries reads nothing from SQLite: ~630 bytes of
        memory per row of 512 tokens or more (~32 bytes a document of the seeds' mix). Worth
        it where the database has outgrown the page cache and checks dominate; off by
        default, since that memory comes out of the page cache (docs/store.md, *Long rows'
        summaries in memory*). Not stored: each open may choose.

    >>> StoreSettings(retention="48h").retention
    172800.0
    >>> StoreSettings(memtable_size=0)
    Traceback (most recent call last):
    ...
    neardup.errors.ConfigError: memtable_size must be a positive integer (rows kept in memory before a flush), got 0
    """

    retention: float | None = field(default=None, metadata=_flag("--retention"))
    allow_retention_change: bool = field(default=False, metadata=_flag("--allow-retention-change"))
    partition_seconds: float | None = None
    memtable_size: int = 1_000_000
    compress_tables: bool | None = field(
        default=None, metadata=_flag("--compress-tables/--no-compress-tables")
    )
    table_block_bytes: int | None = None
    repair: bool = field(default=False, metadata=_flag("--repair"))
    verify_meta: bool | None = field(default=None, metadata=_flag("--verify-meta/--no-verify-meta"))
    read_threads: int = field(default=DEFAULT_READ_THREADS, metadata=_flag("--read-threads"))
    resident_summaries: bool = field(
        default=False, metadata=_flag("--resident-summaries/--no-resident-summaries")
    )

    def __post_init__(self) -> None:
        name = option_name(StoreSettings, "retention")
        object.__setattr__(self, "retention", parse_duration(self.retention, name=name))
        for flag in ("allow_retention_change", "repair", "verify_meta", "resident_summaries"):
            value = getattr(self, flag)
            if not isinstance(value, bool) and not (flag == "verify_meta" and value is None):
                allowed = "True, False or None" if flag == "verify_meta" else "True or False"
                raise ConfigError(
                    f"{option_name(StoreSettings, flag)} must be {allowed}, got {value!r}"
                )
        width = self.partition_seconds
        if width is not None:
            if not is_number(width) or width <= 0:
                raise ConfigError(
                    f"partition_seconds must be a positive number of seconds (or None: the "
                    f"stored width, else max(3600, retention / 8)), got {width!r}"
                )
            object.__setattr__(self, "partition_seconds", float(width))
        if not is_int(self.memtable_size) or self.memtable_size < 1:
            raise ConfigError(
                "memtable_size must be a positive integer (rows kept in memory before a flush), "
                f"got {self.memtable_size!r}"
            )
        check_read_threads(self.read_threads, option_name(StoreSettings, "read_threads"))
        if self.compress_tables is not None and not isinstance(self.compress_tables, bool):
            raise ConfigError(
                f"{option_name(StoreSettings, 'compress_tables')} must be True, False or None "
                f"(the stored setting), got {self.compress_tables!r}"
            )
        if self.table_block_bytes is not None:
            try:
                blk = check_block_bytes(self.table_block_bytes)
            except ConfigError as exc:
                raise ConfigError(f"table_block_bytes: {exc}") from None
            object.__setattr__(self, "table_block_bytes", blk)

    # ------------------------------------------------------------------ config.json
    def to_config(self) -> dict[str, Any]:
        """The ``store`` section of ``config.json`` for these (resolved) settings."""
        return {
            "version": CONFIG_VERSION,
            "partition_seconds": self.partition_seconds,
            "partition_origin": 0.0,
            "retention": self.retention,
            "compress_tables": bool(self.compress_tables),
            "table_block_bytes": self.table_block_bytes or DEFAULT_BLOCK_BYTES,
        }

    @classmethod
    def from_config(cls, section: object, *, where: str) -> StoreSettings:
        """The settings a ``store`` section records; :class:`UnsupportedVersionError` (naming
        ``where``, the file) for a section this build does not read."""
        if not isinstance(section, Mapping):
            raise UnsupportedVersionError(
                f"{where}: no store settings (a config.json written before they were kept); "
                "this build reads store settings version "
                f"{CONFIG_VERSION}. Deduplicate into a new data directory"
            )
        version = section.get("version")
        if version != CONFIG_VERSION or section.get("partition_origin", 0.0) != 0.0:
            raise UnsupportedVersionError(
                f"{where}: store settings version {version!r}, this build reads version "
                f"{CONFIG_VERSION}. Deduplicate into a new data directory"
            )
        try:
            return cls(
                retention=section.get("retention"),
                partition_seconds=section["partition_seconds"],
                compress_tables=bool(section.get("compress_tables", False)),
                table_block_bytes=section.get("table_block_bytes") or DEFAULT_BLOCK_BYTES,
            )
        except (KeyError, ConfigError) as exc:
            raise UnsupportedVersionError(
                f"{where}: unreadable store settings ({exc}); deduplicate into a new data directory"
            ) from None

    def resolve(
        self, stored: Mapping[str, Any] | None, *, where: str, now: float
    ) -> tuple[StoreSettings, float | None]:
        """The settings a store opens with, and the edge of a changed retention's old window
        (``now - old retention``: rows older than it are deleted before the new retention
        applies; None when nothing is left to delete).

        ``stored``: the ``store`` section of ``config.json`` (None: a new store). The stored
        width and retention win where these settings give None; another explicit width is
        refused, another retention too unless ``allow_retention_change`` (then logged).
        """
        if stored is None:
            width = self.partition_seconds
            if width is None:
                width = max(3600.0, self.retention / 8) if self.retention else 86400.0
            return self._resolved(width, self.retention, False, DEFAULT_BLOCK_BYTES), None
        kept = StoreSettings.from_config(stored, where=where)
        assert kept.partition_seconds is not None
        if self.partition_seconds is not None and self.partition_seconds != kept.partition_seconds:
            raise ConfigError(
                f"{where}: the store was created with partition_seconds="
                f"{kept.partition_seconds:g}, not {self.partition_seconds:g}; a store's "
                "partition width cannot change. Omit partition_seconds to use the stored one"
            )
        pending = stored.get("expire_before")
        retention = kept.retention
        if self.retention is None:
            if retention is not None:
                log.info("%s: using the stored retention of %g s", where, retention)
        elif self.retention != retention:
            was = "none (keep everything)" if retention is None else f"{retention:,.0f} s"
            if not self.allow_retention_change:
                raise ConfigError(
                    f"{where}: the store was created with retention {was}; refusing to open it "
                    f"with retention {self.retention:,.0f} s, which decides which documents are "
                    "deleted. Omit retention to use the stored one, or change it explicitly: "
                    "allow_retention_change=True (--allow-retention-change of neardup serve "
                    "and neardup store load) or Deduplicator.set_retention()"
                )
            log.warning(
                "%s: retention changed from %s to %g s (allow_retention_change=True); "
                "documents older than the new window will be dropped",
                where,
                was,
                self.retention,
            )
            if retention is not None:  # what the old window left behind goes first
                edge = now - retention
                pending = edge if pending is None else max(float(pending), edge)
            retention = self.retention
        assert kept.table_block_bytes is not None
        resolved = self._resolved(
            kept.partition_seconds,
            retention,
            bool(kept.compress_tables),
            kept.table_block_bytes,
        )
        return resolved, None if pending is None else float(pending)

    def _resolved(
        self, width: float, retention: float | None, compress: bool, block: int
    ) -> StoreSettings:
        """These settings with the width and retention settled and the table settings taken
        from the store where none were given."""
        return dataclasses.replace(
            self,
            partition_seconds=width,
            retention=retention,
            compress_tables=compress if self.compress_tables is None else self.compress_tables,
            table_block_bytes=self.table_block_bytes or block,
        )
