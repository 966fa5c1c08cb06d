"""Document metadata in SQLite (WAL mode): string id <-> int64 row id, time, fingerprint, text.

The write-ahead log is the durability source, so SQLite runs with ``synchronous=NORMAL`` and is
re-derived from the log on open: replaying ``ADD`` as ``INSERT OR REPLACE`` and ``DELETE`` as
``DELETE`` is idempotent. Each :meth:`MetaDB.apply` can record, *in the same transaction*, the
log position it applied up to (table ``wal_applied``), so a restart re-applies only the records
after it (a transaction lost by a power cut loses its position too, and is simply re-applied).
Before a log generation is retired (after a flush to segments) the database is checkpointed
with a full fsync. Between those, SQLite's WAL is copied into the database by a passive
checkpoint on a thread of its own (:mod:`neardup.store.checkpointer`), never inside a write's
commit.

Two connections on a file database: one for writes (the store's background applier, bulk
loads, retention) and one for reads, so reads are never queued behind a large write
transaction (SQLite WAL mode: readers see the last committed state).

String ids live only here (50 M ids never sit in Python dicts); the index holds row ids.

Every row carries a checksum (column ``csum``, :func:`row_checksum`): the high 32 bits are an
xxh32 of the text's UTF-8 bytes, the low 32 bits an xxh32 of the rest of the row (row id, time,
fingerprint, content hash, flags, id and metadata bytes). Reads that return a text (verification
candidates, ``get``, exports) read the columns as stored bytes and check both halves; reads
without the text check the low half. A mismatch, or bytes that are not UTF-8, raise
:class:`~neardup.errors.CorruptRecordError` naming the file, the row and the id: a damaged row
is never answered changed (``neardup store verify`` / ``repair`` find and salvage them,
:mod:`neardup.store.integrity`). The database's ``PRAGMA user_version`` is the schema version
(:data:`SCHEMA_VERSION`); a database of another version is refused
(:class:`~neardup.errors.UnsupportedVersionError`).

Texts are stored compressed once the database has trained its dictionary on the first texts it
stored (:mod:`neardup.store.textcodec`; table ``text_dict``): such a row's ``text`` column is a
blob, its ``flags`` carry :data:`~neardup.store.textcodec.TEXT_ZSTD_FLAG` (never shown in
:class:`Row`), and its checksum covers the stored bytes; the text is decompressed where it is
read, and a row that needs a missing or damaged dictionary is a damaged row.

The number of rows in ``docs`` is kept in ``doc_count``, changed in the same transaction as
every write to ``docs`` (all of them are methods of :class:`MetaDB`), so :meth:`MetaDB.count`
is one row read instead of ``SELECT count(*)``, a scan of the whole table that, with the file
out of the page cache (after a reboot), delays a large store's start. Adds are applied as
``INSERT OR IGNORE``, whose change count is exactly the rows inserted; the rare batch that
conflicts with existing rows (a log re-applied after a repair) is then re-applied row by row
with ``INSERT OR REPLACE``, each row counting the rows it replaces, so the table ends as a plain
``INSERT OR REPLACE`` of the batch would leave it. A database written before this table existed
is counted once, on open.

Added rows are written with multi-row ``INSERT`` statements (power-of-two row counts, so a few
statements are prepared once and cached) rather than ``executemany``: the sqlite3 module
releases and re-takes the interpreter lock around every statement step, i.e. once per row with
``executemany``. With another thread busy in Python (the service's event loop, the writer) each
re-take waits for that thread (the SQLite share of a write: benchmarks/bench_store.py).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import sqlite3
import struct
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt
import xxhash
import zstandard as zstd

from .._threads import made_ahead, max_threads
from ..errors import CorruptFileError, CorruptRecordError, StorageError, UnsupportedVersionError
from . import textcodec
from .checkpointer import Checkpointer
from .readers import ParallelReads, read_connection, select_in
from .resident import ResidentSummaries
from .textcodec import TEXT_ZSTD_FLAG, TextCodec, dict_checksum, load_codec
from .wal import AddRecord, DeleteRecord

__all__ = [
    "EMPTY_FLAG",
    "NO_CONTENT_HASH",
    "SCHEMA_VERSION",
    "MetaDB",
    "Row",
    "load_codec",
    "row_checksum",
    "row_problem",
    "sqlite_error",
]

#: the metadata database's schema version (``PRAGMA user_version``); nothing has been released,
#: so the first versioned schema (rows with checksums) is version 1
SCHEMA_VERSION = 1

log = logging.getLogger("neardup.store")

#: SQLite primary result codes (``exc.sqlite_errorcode & 0xFF``) that mean the disk, not the data
_STORAGE_CODES = {
    3: "permission denied",  # SQLITE_PERM
    8: "the database is read-only",  # SQLITE_READONLY
    10: "a disk I/O error",  # SQLITE_IOERR
    13: "the disk is full",  # SQLITE_FULL
    14: "the file cannot be opened",  # SQLITE_CANTOPEN
}
#: ... and those that mean a damaged file
_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB


def _disk_full(path: object) -> bool:
    """Whether the file system holding ``path`` has (almost) no space left."""
    p = Path(str(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        st = os.statvfs(p)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 1 << 20


def sqlite_error(exc: BaseException, path: object, what: str) -> BaseException:
    """The neardup error for a failed SQLite call: :class:`StorageError` (HTTP 503) when the disk
    is full, read-only or failing, :class:`CorruptFileError` when the file is damaged, else
    ``exc`` itself. The message names the file and the cause in one line."""
    if not isinstance(exc, sqlite3.Error):
        return exc
    code = getattr(exc, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    text = str(exc)
    if primary in _STORAGE_CODES or "disk is full" in text or "disk I/O" in text:
        reason = _STORAGE_CODES.get(primary or 0, text)
        if primary != 13 and _disk_full(path):
            # a full disk often shows up as an I/O error (SQLite cannot grow its -shm / -wal)
            reason = "the disk is full"
        return StorageError(
            f"cannot {what} {path}: {reason} ({text}); nothing from this write was acknowledged. "
            "Free space or fix permissions, then retry"
        )
    if primary in _CORRUPT_CODES or "malformed" in text or "not a database" in text:
        return CorruptFileError(
            f"{path}: the metadata database is damaged ({text}); open with repair=True "
            "(neardup serve --repair) to rebuild it from what is intact and the log"
        )
    return exc


_SCHEMA = """
CREATE TABLE IF NOT EXISTS docs (
    rid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    time REAL NOT NULL,
    fp BLOB NOT NULL,
    chash BLOB NOT NULL,
    flags INTEGER NOT NULL,
    metadata TEXT,
    text TEXT,
    csum INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS deleted (
    rid INTEGER PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS wal_applied (
    gen INTEGER PRIMARY KEY,
    offset INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS doc_count (
    k INTEGER PRIMARY KEY CHECK (k = 0),
    n INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS text_dict (
    k INTEGER PRIMARY KEY CHECK (k = 0),
    dict BLOB NOT NULL,
    csum INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS summaries (
    rid INTEGER PRIMARY KEY,
    s BLOB NOT NULL
);
"""
DOC_COLUMNS = 9
#: the columns of a row as stored bytes (what the checksum covers) and its checksum
_RAW_COLUMNS = (
    "rid, CAST(id AS BLOB), time, fp, chash, flags, CAST(metadata AS BLOB), CAST(text AS BLOB), "
    "csum"
)
#: the same without the text (its bytes are not read; the row's half of the checksum is checked)
_RAW_NO_TEXT = "rid, CAST(id AS BLOB), time, fp, chash, flags, CAST(metadata AS BLOB), NULL, csum"
_MAX_INSERT_ROWS = 256  # rows per multi-row INSERT at most (a power of two)


#: ``Row.flags`` bit: the text had no features (fingerprint 0); such a row matches by content
#: hash only
EMPTY_FLAG = 1
#: ``Row.chash`` of a row loaded without a text (``bulk_load``): no content hash
NO_CONTENT_HASH = bytes(16)


class Row(NamedTuple):
    rowid: int
    id: str
    time: float
    fp: bytes  # 16 bytes: hi u64 LE, lo u64 LE
    chash: bytes
    flags: int
    metadata: str | None
    text: str | None

    @property
    def empty(self) -> bool:
        """The stored text had no features (see :data:`EMPTY_FLAG`)."""
        return bool(self.flags & EMPTY_FLAG)


_HEAD = struct.Struct("<qdq?")
_MASK32 = (1 << 32) - 1


def _utf8(value: str | None) -> bytes | None:
    if value is None:
        return None
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: SQLite cannot store them either
        return value.encode("utf-8", "surrogatepass")


def _checksum_bytes(
    rid: int,
    id_b: bytes,
    time_: float,
    fp: bytes,
    chash: bytes,
    flags: int,
    meta_b: bytes | None,
    text_b: bytes | None,
) -> int:
    # the text's presence is in the high half only (a read without the text checks the low)
    head = _HEAD.pack(int(rid), float(time_), int(flags), meta_b is None)
    low = xxhash.xxh32_intdigest(b"".join((head, fp, chash, id_b, b"\xff", meta_b or b"")))
    high = 0 if text_b is None else xxhash.xxh32_intdigest(text_b)
    v = (high << 32) | low
    return v - (1 << 64) if v >= 1 << 63 else v  # SQLite integers are signed 64-bit


def row_checksum(
    rid: int,
    id: str,
    time: float,
    fp: bytes,
    chash: bytes,
    flags: int,
    metadata: str | None,
    text: str | None,
) -> int:
    """The checksum stored with a row (column ``csum``; module docstring): xxh32 of the text's
    UTF-8 bytes in the high 32 bits, xxh32 of the row's other columns in the low 32 bits, as
    a signed 64-bit integer."""
    return _checksum_bytes(
        rid, _utf8(id) or b"", time, bytes(fp), bytes(chash), flags, _utf8(metadata), _utf8(text)
    )


def _stored_row(row: tuple[Any, ...], codec: TextCodec | None) -> tuple[Any, ...]:
    """An 8-column row ``(rid, id, time, fp, chash, flags, metadata, text)`` as stored: its text
    compressed with ``codec`` where that is shorter (flag :data:`TEXT_ZSTD_FLAG`), its checksum
    appended (over the stored bytes). A 9-column row is stored as it is."""
    if len(row) == DOC_COLUMNS:
        return row
    text = row[7]
    if text is None or codec is None:
        return (*row, row_checksum(*row))
    return _with_text(row, codec.encode(_utf8(text) or b""))


def _with_text(row: tuple[Any, ...], packed: bytes | None) -> tuple[Any, ...]:
    """An 8-column row as stored, its text's compressed bytes ``packed`` (None: kept plain)."""
    if packed is None:
        return (*row, row_checksum(*row))
    rid, id, time_, fp, chash, flags, metadata, _ = row
    flags |= TEXT_ZSTD_FLAG
    csum = _checksum_bytes(
        rid, _utf8(id) or b"", time_, bytes(fp), bytes(chash), flags, _utf8(metadata), packed
    )
    return (rid, id, time_, fp, chash, flags, metadata, packed, csum)


def _stored_rows(
    rows: Iterable[tuple[Any, ...]], codec: TextCodec | None, threads: int
) -> Iterator[tuple[Any, ...]]:
    """:func:`_stored_row` of each row, in order; with a codec and ``threads`` > 1 the texts
    of each block of :data:`_ENCODE_BLOCK` rows are compressed together on zstd's threads
    (:meth:`TextCodec.encode_many`: the same bytes), off the GIL that this thread's Python
    needs for the rest of each row."""
    if codec is None or threads < 2:
        for row in rows:
            yield _stored_row(row, codec)
        return
    it = iter(rows)
    while block := list(itertools.islice(it, _ENCODE_BLOCK)):
        todo = [k for k, r in enumerate(block) if len(r) != DOC_COLUMNS and r[7] is not None]
        packed = codec.encode_many([_utf8(block[k][7]) or b"" for k in todo], threads)
        done = dict(zip(todo, packed, strict=True))
        for k, row in enumerate(block):
            yield _with_text(row, done[k]) if k in done else _stored_row(row, None)


#: rows whose texts a bulk insert compresses in one batch (:func:`_stored_rows`): zstd's
#: threads start once a batch (``benchmarks/bench_seed.py --whole``)
_ENCODE_BLOCK = 4096


def _add_row(r: AddRecord) -> tuple[Any, ...]:
    """A log record's row, 8 columns (:func:`_stored_row` stores it)."""
    fp = r.fp_hi.to_bytes(8, "little") + r.fp_lo.to_bytes(8, "little")
    return (r.rowid, r.id, r.time, fp, r.chash, r.flags, r.metadata, r.text)


def row_problem(
    raw: Sequence[Any],
    *,
    with_text: bool = True,
    codec: TextCodec | None = None,
    codec_problem: str | None = None,
) -> str | None:
    """What is wrong with a row read as stored bytes (:data:`_RAW_COLUMNS`), or None when it
    matches its checksum and its strings are UTF-8. ``with_text=False``: the text was not read
    (its half of the checksum is not checked). ``codec``: the database's text codec
    (:func:`load_codec`; ``codec_problem`` what is wrong with its dictionary), which a
    compressed text is decompressed with."""
    rid, id_b, time_, fp, chash, flags, meta_b, text_b, csum = raw
    if (
        not all(isinstance(x, bytes | None) for x in (id_b, meta_b, text_b))
        or not isinstance(fp, bytes)
        or not isinstance(chash, bytes)
        or not isinstance(csum, int)
        or not isinstance(flags, int)
        or not isinstance(time_, float | int)
    ):
        return "its columns do not have their types"
    want = int(csum) & ((1 << 64) - 1)
    got = _checksum_bytes(rid, id_b or b"", time_, fp, chash, flags, meta_b, text_b)
    got &= (1 << 64) - 1
    if (want ^ got) & _MASK32:
        return "its id, metadata or fingerprint fails its checksum"
    if with_text and (want ^ got) >> 32:
        return "its text fails its checksum"
    if with_text and text_b is not None and flags & TEXT_ZSTD_FLAG:
        if codec is None:
            why = codec_problem or "the store has no text dictionary"
            return f"its text is compressed and {why}"
        try:
            text_b = codec.decode(text_b)
        except zstd.ZstdError as exc:
            return f"its compressed text cannot be decompressed ({exc})"
    for name, b in (("id", id_b), ("metadata", meta_b), ("text", text_b)):
        if b is not None:
            try:
                b.decode("utf-8")
            except UnicodeDecodeError:
                return f"its {name} is not valid UTF-8"
    return None


#: what a read says of a compressed text where the database has no usable dictionary
_NO_DICT = "the store's text dictionary is missing or damaged (neardup store verify)"

_pack_head = _HEAD.pack
_xxh32 = xxhash.xxh32_intdigest
_U64 = (1 << 64) - 1


def _decode_row(
    raw: Sequence[Any], path: object, *, with_text: bool, codec: TextCodec | None = None
) -> Row:
    """A :class:`Row` from a row read as stored bytes, checked against its checksum;
    :class:`CorruptRecordError` naming the file, row id and id when it does not match.

    The checksum of :func:`_checksum_bytes`, inlined (this runs for every row a read returns:
    every verification candidate); :func:`row_problem` says what is wrong when it fails.
    ``codec``: the database's text codec (a compressed text is decompressed with it)."""
    rid, id_b, time_, fp, chash, flags, meta_b, text_b, csum = raw
    try:
        c = csum & _U64
        low = _xxh32(
            b"".join(
                (
                    _pack_head(rid, time_, flags, meta_b is None),
                    fp,
                    chash,
                    id_b,
                    b"\xff",
                    meta_b or b"",
                )
            )
        )
        if c & _MASK32 == low and (
            not with_text or c >> 32 == (0 if text_b is None else _xxh32(text_b))
        ):
            if flags & TEXT_ZSTD_FLAG:
                flags &= ~TEXT_ZSTD_FLAG
                if with_text:
                    text_b = codec.decode(text_b)  # type: ignore[union-attr]
            return Row(
                rid,
                id_b.decode("utf-8"),
                time_,
                fp,
                chash,
                flags,
                None if meta_b is None else meta_b.decode("utf-8"),
                None if text_b is None else text_b.decode("utf-8"),
            )
    except (TypeError, AttributeError, UnicodeDecodeError, struct.error, zstd.ZstdError):
        pass
    problem = (
        row_problem(raw, with_text=with_text, codec=codec, codec_problem=_NO_DICT)
        or "it cannot be read"
    )
    doc_id = (id_b if isinstance(id_b, bytes) else b"").decode("utf-8", "replace")
    raise CorruptRecordError(
        f"{path}: the stored document {doc_id!r} (row {rid}) is damaged: {problem}; it is "
        "not served. Run `neardup store verify` on the data directory to list damaged rows "
        "and `neardup store repair` (server stopped) to restore or quarantine them",
        doc_id=doc_id,
        rowid=int(rid),
    )


_F = TypeVar("_F", bound=Callable[..., Any])


def _storage_errors(fn: _F) -> _F:
    """Raise SQLite's disk errors from a :class:`MetaDB` write as :class:`StorageError` (and
    damage as :class:`CorruptFileError`), never as a raw ``sqlite3`` error (HTTP 500)."""

    @functools.wraps(fn)
    def wrapper(self: MetaDB, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except sqlite3.Error as exc:
            mapped = sqlite_error(exc, self.path, "write to")
            if mapped is exc:
                raise
            raise mapped from exc

    return wrapper  # type: ignore[return-value]


class MetaDB:
    """Thread-safe wrapper around one SQLite connection (``path=None``: in memory).

    ``read_threads``: connections a read of many keys (a group's rows, summaries, ids) is
    spread over on a file database (:mod:`neardup.store.readers`; 1: one after another);
    ``resident_summaries``: a file database's summaries held in memory once loaded
    (:mod:`neardup.store.resident`)."""

    def __init__(
        self, path: Path | None, read_threads: int = 1, resident_summaries: bool = False
    ) -> None:
        self.path = path
        self._checkpointer: Checkpointer | None = None
        self._lock = threading.RLock()
        self._db = sqlite3.connect(
            ":memory:" if path is None else str(path), check_same_thread=False, isolation_level=None
        )
        if path is not None:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            # a full checkpoint waits for a concurrent read instead of giving up
            self._db.execute("PRAGMA busy_timeout=30000")
            # checkpoints run on their own thread, never inside a write's commit
            # (:mod:`neardup.store.checkpointer`)
            self._db.execute("PRAGMA wal_autocheckpoint=0")
        self._db.execute("PRAGMA cache_size=-65536")
        self._check_version()
        self._db.executescript(_SCHEMA)
        self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        # reads: a second connection on a file database (never waits for the writer's
        # transaction); the same one in memory
        self._rlock: threading.RLock = self._lock
        self._rdb = self._db
        if path is not None:
            self._rlock = threading.RLock()
            self._rdb = read_connection(path, 65536)
        self._par = ParallelReads(path, read_threads, lambda: self._rcodec) if path else None
        # the largest power-of-two row count whose parameters fit SQLite's limit
        fit = min(
            _MAX_INSERT_ROWS,
            self._db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // DOC_COLUMNS,
        )
        self._max_rows = 1 << max(0, fit.bit_length() - 1)
        self._insert_sql: dict[tuple[str, int], str] = {}
        # the texts' codec (:mod:`neardup.store.textcodec`): one instance for writes (under
        # the write lock), one for reads (under the read lock); trained once, on the first
        # TRAIN_MIN_TEXTS texts, unless the database holds a dictionary (or a damaged one)
        self._codec: TextCodec | None
        self._rcodec: TextCodec | None
        self._codec_problem: str | None
        self._use_stored_dict()
        self._train = self._codec is None and self._codec_problem is None
        self._samples: list[bytes] = []
        self._sample_bytes = 0
        self._pending: TextCodec | None = None
        with self._lock:  # a new (or rebuilt) database: count its rows once
            if self._db.execute("SELECT n FROM doc_count").fetchone() is None:
                self._db.execute("INSERT INTO doc_count SELECT 0, count(*) FROM docs")
        # what the transaction in progress did to the summaries, for the copy in memory
        self._noted: list[tuple[str, Any]] = []
        self._resident = ResidentSummaries(path) if path and resident_summaries else None
        # last: nothing above may fail with its threads started
        if path is not None:
            self._checkpointer = Checkpointer(path)
            if self._resident is not None:
                self._resident.start()

    def _check_version(self) -> None:
        """Refuse a database of another schema version (a new, empty one is version 1)."""
        (tables,) = self._db.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'docs'"
        ).fetchone()
        if not tables:
            return
        (version,) = self._db.execute("PRAGMA user_version").fetchone()
        if version != SCHEMA_VERSION:
            self._db.close()
            raise UnsupportedVersionError(
                f"{self.path}: metadata schema version {version} (rows without checksums, "
                f"written by an older build); this build reads version {SCHEMA_VERSION}. "
                "Nothing has been released with the old schema: re-create the store (a new "
                "--data directory) and re-insert its documents"
            )

    def _wrote(self) -> None:
        """A write committed: the background checkpointer may copy it into the database."""
        if self._checkpointer is not None:
            self._checkpointer.committed()

    def close(self) -> None:
        if self._resident is not None:
            self._resident.close()
        if self._checkpointer is not None:
            self._checkpointer.close()
        if self._par is not None:
            self._par.close()
        with self._lock, self._rlock:
            if self._rdb is not self._db:
                self._rdb.close()
            self._db.close()

    @_storage_errors
    def apply(
        self,
        records: Iterable[AddRecord | DeleteRecord],
        positions: Iterable[tuple[int, int]] = (),
    ) -> None:
        """Apply log records in order, in one transaction (idempotent).

        ``positions``: (log generation, end offset of its last applied record) pairs, recorded
        in the same transaction (see :meth:`applied_offset`).
        """
        with self._transaction() as cur:
            delta = 0
            adds: list[tuple[Any, ...]] = []
            records = list(records)
            codec = self._codec
            if self._train:
                codec = self._codec_for(cur, (r.text for r in records if isinstance(r, AddRecord)))
            summaries: list[tuple[int, bytes]] = []
            for r in records:
                if isinstance(r, AddRecord):
                    adds.append(_stored_row(_add_row(r), codec))
                    if r.summary is not None:
                        summaries.append((r.rowid, r.summary))
                    continue
                if adds:
                    delta += self._replace_rows(cur, adds)
                    adds = []
                    self._put_summaries(cur, summaries)
                    summaries = []
                cur.execute("DELETE FROM docs WHERE rid = ?", (r.rowid,))
                delta -= cur.rowcount
                cur.execute("DELETE FROM summaries WHERE rid = ?", (r.rowid,))
                self._noted.append(("drop", [r.rowid]))
                # remembered until compaction drops the row from its segment
                cur.execute("INSERT OR IGNORE INTO deleted VALUES (?)", (r.rowid,))
            if adds:
                delta += self._replace_rows(cur, adds)
                self._put_summaries(cur, summaries)
            cur.executemany(
                "INSERT OR REPLACE INTO wal_applied VALUES (?, ?)",
                [(int(g), int(o)) for g, o in positions],
            )
            self._add_count(cur, delta)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        """A write transaction on the write connection, under its lock: committed when the
        block ends, rolled back when it raises."""
        with self._lock:
            cur = self._db.cursor()
            cur.execute("BEGIN")
            self._noted = []
            try:
                yield cur
                cur.execute("COMMIT")
                self._wrote()
                if self._pending is not None:  # its dictionary is stored: later writes use it
                    self._codec, self._pending, self._train = self._pending, None, False
            except BaseException as exc:
                self._pending = None
                self._noted = []
                # SQLite rolls a transaction back by itself on some errors (a full disk): a
                # second ROLLBACK would raise "no transaction is active" and hide the cause
                if self._db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        cur.execute("ROLLBACK")
                mapped = sqlite_error(exc, self.path, "write to")
                if mapped is not exc:  # a full disk: StorageError (HTTP 503), not a raw error
                    raise mapped from exc
                raise
            # committed: the copy in memory follows (outside the try: it is not the write); the
            # list goes either way (a bulk load's summaries are not kept until the next write)
            noted, self._noted = self._noted, []
            if self._resident is not None and noted:
                self._resident.apply(noted)

    def _use_stored_dict(self) -> None:
        """Take the codecs (writes', reads') of the dictionary the database holds, if any."""
        self._codec, self._codec_problem = load_codec(self._db)
        self._rcodec = None if self._codec is None else TextCodec(self._codec.data)

    def _codec_for(self, cur: sqlite3.Cursor, texts: Iterable[str | None]) -> TextCodec | None:
        """The codec that rows written in this transaction use: the database's; or, once the
        texts sampled (these among them) reach :data:`~neardup.store.textcodec.TRAIN_MIN_TEXTS`,
        a new one whose dictionary is written in this transaction (and used by the database
        once it commits)."""
        if not self._train:
            return self._codec
        for t in texts:
            if self._sample_bytes >= textcodec.TRAIN_MAX_BYTES:
                break
            if t:
                b = _utf8(t) or b""
                self._samples.append(b)
                self._sample_bytes += len(b)
        if len(self._samples) < textcodec.TRAIN_MIN_TEXTS:
            return None
        samples, self._samples, self._sample_bytes = self._samples, [], 0
        data = textcodec.train(samples)
        if data is None:  # zstd could not: the texts stay plain
            self._train = False
            return None
        cur.execute(
            "INSERT OR REPLACE INTO text_dict VALUES (0, ?, ?)", (data, dict_checksum(data))
        )
        # readers get theirs before the commit: no committed row is ever unreadable to them
        self._rcodec = TextCodec(data)
        self._pending = TextCodec(data)
        return self._pending

    def _add_count(self, cur: sqlite3.Cursor, delta: int) -> None:
        if delta:
            cur.execute("UPDATE doc_count SET n = n + ? WHERE k = 0", (delta,))

    def _replace_rows(self, cur: sqlite3.Cursor, rows: list[tuple[Any, ...]]) -> int:
        """``INSERT OR REPLACE`` ``rows`` in order; returns the change in the row count.

        Fast path: ``INSERT OR IGNORE``, whose change count is the rows inserted. When some row
        met an existing row id or id (a log re-applied after a repair), every row is applied
        again with ``INSERT OR REPLACE``, one at a time, counting the rows each one replaces:
        the rows the first pass inserted replace themselves, so the table ends as a plain
        ``INSERT OR REPLACE`` of ``rows`` in order leaves it.
        """
        before = self._db.total_changes
        self._insert_rows(cur, "INSERT OR IGNORE", rows)
        inserted = self._db.total_changes - before
        if inserted == len(rows):
            return inserted
        delta = inserted
        for row in rows:
            (met,) = cur.execute(
                "SELECT count(*) FROM docs WHERE rid = ? OR id = ?", (row[0], row[1])
            ).fetchone()
            self._insert_rows(cur, "INSERT OR REPLACE", (row,))
            delta += 1 - met
        return delta

    def _insert_counted(
        self, cur: sqlite3.Cursor, verb: str, rows: Iterable[tuple[Any, ...]]
    ) -> None:
        """:meth:`_insert_rows`, the row count changed by the rows it inserted."""
        before = self._db.total_changes
        self._insert_rows(cur, verb, rows)
        self._add_count(cur, self._db.total_changes - before)

    def copy_stored_rows(self, verb: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """``{verb} INTO docs`` rows as another database of this schema stores them (their
        stored columns: a compressed text stays compressed, checksums as they are), in one
        transaction, counted: what a salvage (:mod:`neardup.store.salvage`) copies."""
        if verb not in ("INSERT OR REPLACE", "INSERT OR IGNORE"):
            raise ValueError(
                f"copy_stored_rows: verb must be INSERT OR REPLACE / IGNORE, got {verb!r}"
            )
        with self._transaction() as cur:
            self._insert_counted(cur, verb, rows)

    def _insert_rows(self, cur: sqlite3.Cursor, verb: str, rows: Iterable[tuple[Any, ...]]) -> None:
        """``{verb} INTO docs`` every row of ``rows`` (any iterable), in order, as statements
        of ``self._max_rows`` rows and, for the last chunk, of decreasing powers of two (see
        the module docstring): the same rows as ``executemany`` one by one (with ``INSERT OR
        REPLACE``, a later row replaces an earlier one with the same row id or id)."""
        it = iter(rows)
        while chunk := list(itertools.islice(it, self._max_rows)):
            pos, n = 0, len(chunk)
            while pos < n:
                k = 1 << ((n - pos).bit_length() - 1)
                sql = self._insert_sql.get((verb, k))
                if sql is None:
                    row = "(" + ",".join("?" * DOC_COLUMNS) + ")"
                    sql = self._insert_sql[verb, k] = f"{verb} INTO docs VALUES " + ",".join(
                        [row] * k
                    )
                cur.execute(sql, list(itertools.chain.from_iterable(chunk[pos : pos + k])))
                pos += k

    def applied_offset(self, generation: int) -> int:
        """End offset in log ``generation`` up to which records are applied (0: none)."""
        with self._lock:
            row = self._db.execute(
                "SELECT offset FROM wal_applied WHERE gen = ?", (int(generation),)
            ).fetchone()
        return 0 if row is None else int(row[0])

    @_storage_errors
    def set_applied(self, generation: int, offset: int) -> None:
        """Record (or lower, after a log repair) the applied position of one generation."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO wal_applied VALUES (?, ?)", (int(generation), int(offset))
            )
        self._wrote()

    @_storage_errors
    def forget_generations(self, keep: Iterable[int]) -> None:
        """Drop the applied positions of retired log generations."""
        keep_l = [int(g) for g in keep]
        with self._lock:
            self._db.execute(
                f"DELETE FROM wal_applied WHERE gen NOT IN ({','.join('?' * len(keep_l))})",
                keep_l,
            )
        self._wrote()

    @_storage_errors
    def insert_rows(self, rows: Iterable[tuple[Any, ...]], *, bulk: bool = False) -> None:
        """Insert ``(rid, id, time, fp, chash, flags, metadata, text)`` tuples (their checksum
        is added; a 9-column row keeps the one it carries), one transaction.

        A duplicate row id or id raises :class:`sqlite3.IntegrityError` and inserts nothing.
        ``bulk=True`` (seeding): no syncs and a 1 GiB page cache during the transaction (the id
        index of tens of millions of rows then stays in memory), then a full checkpoint with
        syncs, so the rows are durable on return either way.
        """
        with self._lock:
            cur = self._db.cursor()
            if bulk and self.path is not None:
                cur.execute("PRAGMA synchronous=OFF")
                cur.execute("PRAGMA cache_size=-1048576")
            try:
                with self._transaction() as tx:
                    it = iter(rows)
                    codec = self._codec
                    if self._train:  # the first rows are sampled (a generator stays one)
                        head = list(itertools.islice(it, 2 * textcodec.TRAIN_MIN_TEXTS))
                        codec = self._codec_for(tx, (r[7] for r in head if len(r) == 8))
                        it = itertools.chain(head, it)
                    # a bulk load's texts compressed on every CPU (its rows are the critical
                    # path); a commit's few on this thread
                    stored = _stored_rows(it, codec, max_threads() if bulk else 1)
                    # a bulk insert's made a block ahead while SQLite inserts the block before;
                    # closed with the insert, so that a failed one leaves no helper behind
                    with (
                        contextlib.closing(made_ahead(stored, _ENCODE_BLOCK))
                        if bulk
                        else contextlib.nullcontext(stored)
                    ) as rows:
                        self._insert_counted(tx, "INSERT", rows)  # (after the dictionary's row)
            finally:
                if bulk and self.path is not None:
                    cur.execute("PRAGMA synchronous=NORMAL")
                    cur.execute("PRAGMA cache_size=-65536")
            if bulk:
                self.checkpoint()

    @_storage_errors
    def delete_rowids(self, rowids: Sequence[int]) -> int:
        """Delete rows (and their summaries) by row id in one transaction; returns how many
        rows existed."""
        rowids = [int(r) for r in rowids]
        with self._transaction() as cur:
            before = self._db.total_changes
            cur.executemany("DELETE FROM docs WHERE rid = ?", ((r,) for r in rowids))
            gone = self._db.total_changes - before
            cur.executemany("DELETE FROM summaries WHERE rid = ?", ((r,) for r in rowids))
            self._noted.append(("drop", rowids))
            self._add_count(cur, -gone)
        return gone

    @_storage_errors
    def delete_from(self, rowid: int) -> int:
        """Delete every row (and summary) with row id >= ``rowid``; returns how many rows."""
        with self._transaction() as cur:
            cur.execute("DELETE FROM docs WHERE rid >= ?", (int(rowid),))
            gone = int(cur.rowcount)
            cur.execute("DELETE FROM summaries WHERE rid >= ?", (int(rowid),))
            self._noted.append(("drop_from", int(rowid)))
            self._add_count(cur, -gone)
        return gone

    def _put_summaries(self, cur: sqlite3.Cursor, pairs: Sequence[tuple[int, bytes]]) -> None:
        if pairs:
            cur.executemany("INSERT OR REPLACE INTO summaries VALUES (?, ?)", pairs)
            self._noted.append(("put", pairs))

    @_storage_errors
    def put_summaries(self, pairs: Sequence[tuple[int, bytes]]) -> None:
        """Store ``(row id, summary)`` pairs in one transaction (a row's replaces the one it
        had). Summaries are opaque bytes here: what a caller derives from a row and may lose
        (:mod:`neardup.online.summaries`); a deleted row's goes with it."""
        if pairs:
            with self._transaction() as cur:
                self._put_summaries(cur, pairs)

    def summaries(self, rowids: Iterable[int]) -> dict[int, bytes]:
        """The stored summaries of ``rowids`` (rows without one are left out): those held in
        memory, the rest (all without ``resident_summaries``, none once loaded) from SQLite."""

        def read(db: sqlite3.Connection, _: Any, keys: Sequence[int]) -> dict[int, bytes]:
            return {int(r): bytes(b) for r, b in select_in(db, "rid, s FROM summaries", keys)}

        keys = {int(r): None for r in rowids}
        if self._resident is None:
            return self._read_keys("summaries", keys, read)
        found, rest = self._resident.lookup(keys)
        if rest:
            found.update(self._read_keys("summaries", dict.fromkeys(rest), read))
        return found

    def deleted_between(self, lo: int, hi: int) -> npt.NDArray[np.int64]:
        """Row ids deleted (by a ``DELETE`` record) in ``[lo, hi]`` (sorted int64)."""
        with self._rlock:
            cur = self._rdb.execute("SELECT rid FROM deleted WHERE rid BETWEEN ? AND ?", (lo, hi))
            return np.fromiter((r[0] for r in cur), dtype=np.int64)

    @_storage_errors
    def forget_deleted(self, rowids: Sequence[int]) -> None:
        """Drop row ids from the ``deleted`` table (their rows left the segments)."""
        with self._lock:
            self._db.executemany("DELETE FROM deleted WHERE rid = ?", ((int(r),) for r in rowids))
        self._wrote()

    def lookup_ids(self, ids: Sequence[str]) -> dict[str, int]:
        """id -> row id for those ids that exist."""

        def read(db: sqlite3.Connection, _: Any, keys: Sequence[str]) -> dict[str, int]:
            return dict(select_in(db, "id, rid FROM docs", keys, "id"))

        return self._read_keys("ids", dict.fromkeys(ids), read)

    def fetch(self, rowids: Iterable[int], *, with_text: bool) -> dict[int, Row]:
        """Rows by row id (missing = deleted or expired), each checked against its checksum
        (:class:`CorruptRecordError` for a damaged one; ``with_text=False`` reads no text and
        checks the rest of the row)."""
        head = f"{_RAW_COLUMNS if with_text else _RAW_NO_TEXT} FROM docs"
        path = self.path

        def read(
            db: sqlite3.Connection, codec: Callable[[], TextCodec | None], keys: Sequence[int]
        ) -> dict[int, Row]:
            return {
                raw[0]: _decode_row(raw, path, with_text=with_text, codec=c)
                for raw, c in select_in(db, head, keys, codec=codec)
            }

        kind = "rows" if with_text else "rows_without_text"
        return self._read_keys(kind, {int(r): None for r in rowids}, read)

    @property
    def parallel_reads(self) -> ParallelReads | None:
        """The extra readers of a file database (None in memory): their counts and state."""
        return self._par

    def read_stats(self) -> dict[str, float]:
        """:meth:`ParallelReads.stats` and :meth:`ResidentSummaries.stats` (nothing in memory)."""
        out = {} if self._par is None else self._par.stats()
        return out if self._resident is None else {**out, **self._resident.stats()}

    def _read_keys(self, kind: str, keys: dict[Any, None], read: Callable[..., dict]) -> dict:
        """``read(connection, codec, keys)`` of the distinct ``keys`` (a dict's), merged: on
        the read connection, or over several at once when they are many and come from the
        disk (:mod:`.readers`; ``kind`` names the read there)."""

        def first(part: Sequence[Any]) -> dict:
            with self._rlock:
                return read(self._rdb, lambda: self._rcodec, part)

        par = self._par
        return first(list(keys)) if par is None else par.read_keys(kind, keys, first, read)

    def ids_from(self, rowid: int) -> list[tuple[int, str]]:
        """``(row id, id)`` of the rows with row ids ``rowid`` and above, in row id order (what
        a load wrote after a point it noted: :mod:`neardup.incremental.journal`)."""
        with self._rlock:
            rows = self._rdb.execute(
                "SELECT rid, id FROM docs WHERE rid >= ? ORDER BY rid", (int(rowid),)
            ).fetchall()
        return [(int(r), str(i)) for r, i in rows]

    def ids_after(self, after: str, limit: int) -> list[str]:
        """Up to ``limit`` ids greater than ``after``, in id order (an export's page)."""
        with self._rlock:
            rows = self._rdb.execute(
                "SELECT id FROM docs WHERE id > ? ORDER BY id LIMIT ?", (after, limit)
            ).fetchall()
        return [r[0] for r in rows]

    def get(self, id: str) -> Row | None:
        """The row of ``id`` (checked against its checksum), or None."""
        with self._rlock:  # held while decoding: the read codec is one instance
            raw = self._rdb.execute(
                f"SELECT {_RAW_COLUMNS} FROM docs WHERE id = ?", (id,)
            ).fetchone()
            if raw is None:
                return None
            return _decode_row(raw, self.path, with_text=True, codec=self._rcodec)

    def count(self) -> int:
        """Rows in ``docs`` (kept in ``doc_count``; one row read, not a scan)."""
        with self._rlock:
            return int(self._rdb.execute("SELECT n FROM doc_count WHERE k = 0").fetchone()[0])

    def checkpoint(self) -> None:
        """Make everything committed so far durable (full fsync of the database)."""
        if self.path is None:
            return
        # a passive checkpoint in flight would make this one answer "busy" at once
        waits = self._checkpointer.lock if self._checkpointer is not None else None
        with self._lock, waits or contextlib.nullcontext():
            try:
                busy, _, _ = self._db.execute("PRAGMA wal_checkpoint(FULL)").fetchone()
            except sqlite3.Error as exc:
                mapped = sqlite_error(exc, self.path, "checkpoint")
                if mapped is not exc:
                    raise mapped from exc
                raise
        if busy:
            raise StorageError(f"{self.path}: SQLite checkpoint could not complete (busy)")

    # ------------------------------------------------------------------ integrity and recovery
    def quick_check(self) -> list[str]:
        """``PRAGMA quick_check``: [] when the database is intact, else SQLite's findings (a
        scan of every page, without the cross-checks of ``integrity_check``)."""
        with self._lock:
            found = [str(r[0]) for r in self._db.execute("PRAGMA quick_check(20)").fetchall()]
        return [] if found == ["ok"] else found

    def rows_from(self, lo: int, skip: npt.NDArray[np.int64]) -> list[Row]:
        """Every row with row id >= ``lo`` whose row id is not in ``skip`` (sorted int64)."""
        out: list[Row] = []
        with self._rlock:
            rows = self._rdb.execute(
                f"SELECT {_RAW_COLUMNS} FROM docs WHERE rid >= ? ORDER BY rid", (lo,)
            )
            codec = self._rcodec
            for raw in rows:
                try:
                    out.append(_decode_row(raw, self.path, with_text=True, codec=codec))
                except CorruptRecordError as exc:  # restored as far as it can be, and said
                    log.error("%s", exc)
        if len(skip) and out:
            rids = np.fromiter((r.rowid for r in out), dtype=np.int64, count=len(out))
            keep = ~np.isin(rids, skip)
            out = [r for r, k in zip(out, keep.tolist(), strict=True) if k]
        return out
