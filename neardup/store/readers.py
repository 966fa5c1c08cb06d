"""Reads of many rows on several connections at once: :class:`ParallelReads`, a part of
:class:`~neardup.store.meta.MetaDB`.

Why: SQLite reads a row with blocking ``pread`` calls on the thread that asked. Once the
metadata database outgrows the page cache (a 50 M window's 23 GB beside 12 GB of segments on
a 24 GB machine) every row a decision reads (a candidate's text, a long row's summary, an id)
is a disk read, and a group's reads ran one after another on the writer thread, which waited
for each. A disk answers several reads at once sooner than the same reads one by one. So a
read of many keys is cut into contiguous ranges of the sorted keys, and each range is read by
its own connection on its own thread (the sqlite3 module releases the interpreter lock while
SQLite steps a statement), the asking thread reading the first range on the database's own
read connection.

Only reads that wait for the disk are spread. From the page cache the same reads are CPU
work, and spread over threads they cost more of it, and more wall time, than one thread
reading them (the threads take turns at the interpreter lock for every row). So each kind of
read (rows with or without their text, summaries, ids) is read serially and timed until one
of many keys spends more than :data:`SLOW_WAIT_US` per key off the CPU; from then on that
kind is read in parallel, one read in :data:`PROBE_EVERY` serially to measure again, so that
it goes back to one thread once the pages are cached. ``benchmarks/bench_cold_reads.py``
measures both regimes on a kept store.

Time off the CPU is not all disk: in a busy server a read also waits for the interpreter lock
(the event loop's and the other threads' turns), for the read connection's lock and in
SQLite's busy handler. Counted as the disk's, those waits sent a window's reads parallel on a
machine with room for all of it in the page cache (a 5 M window under batches of
check-and-inserts: 102 of 180 reads of many keys, the rows' measured wait 9.7 ms a key, far
more than a read from the disk takes). So where the system says how many blocks a thread read from storage
(:func:`thread_blocks`: ``getrusage(RUSAGE_THREAD).ru_inblock``, Linux with task I/O
accounting), a serial read's time off the CPU counts as the disk's in the share of its keys
whose pages it read from storage (:data:`PAGE_BLOCKS` blocks a key: all of it; none: none of
it, whatever its time off the CPU).

The answers are those of the serial read. That one already ran a statement per
:data:`CHUNK_KEYS` keys, each seeing the last commit at its start (SQLite WAL mode), so a read
of many rows was never one snapshot; here too each statement sees the last commit at its
start. A row is written once and never changed (only deleted), so every row a range returns is
the row the serial read would have returned, or one it could have missed as deleted in
between, as before.

Each reader has its own connection, lock and text codec (a ``zstd`` decompressor is not
thread-safe), made on first use; ``threads`` counts the asking thread's connection too, so
``threads=1`` reads serially and makes nothing.
"""

from __future__ import annotations

import os
import resource
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from ..errors import ConfigError, IndexStateError
from .textcodec import TextCodec

__all__ = [
    "CHUNK_KEYS",
    "DEFAULT_READ_THREADS",
    "KINDS",
    "PAGE_BLOCKS",
    "PARALLEL_MIN_KEYS",
    "PROBE_EVERY",
    "SLOW_WAIT_US",
    "ParallelReads",
    "check_read_threads",
    "ranges",
    "read_connection",
    "select_in",
    "thread_blocks",
]

#: readers a store's metadata database reads many keys with once they come from the disk,
#: the asking thread's included (``StoreSettings.read_threads``; ``bench_cold_reads.py``
#: compares counts)
DEFAULT_READ_THREADS = 4
#: keys a read needs before it is split (fewer: one thread; a single request's few rows are
#: not worth a thread hand-off), and the fewest keys a range gets
PARALLEL_MIN_KEYS = 64
#: the most readers a store may ask for
MAX_READ_THREADS = 64
#: a serial read of many keys whose thread spent this long off the CPU per key (waiting for the
#: disk: a read from the page cache spends its time on the CPU) makes the next reads of its
#: kind parallel; at or below it they stay serial, where spreading them cost more CPU and wall
#: time than it saved (the threads take turns at the interpreter lock for every row)
SLOW_WAIT_US = 20.0
#: while a kind's reads are parallel, one in this many is read serially to measure it again
PROBE_EVERY = 32
#: SQLite page cache of an extra reader (KiB): the interior pages of the B-trees it descends;
#: the rows' pages come from the page cache either way
_READER_CACHE_KIB = 16384

#: 512-byte blocks of one SQLite page (4 KiB, the default page size): a serial read that read
#: this many blocks from storage per key found none of its rows in the page cache, one that
#: read fewer found that share of them there (:meth:`ParallelReads.read_keys` counts only the
#: rest of its time off the CPU as the disk's)
PAGE_BLOCKS = 8
#: the kinds of reads measured apart (:meth:`ParallelReads.read_keys`): rows with their text,
#: rows without it, long rows' summaries, ids
KINDS = ("rows", "rows_without_text", "summaries", "ids")
#: keys a statement names (``IN (?, ...)``), under SQLite's host-parameter limit
CHUNK_KEYS = 900

K = TypeVar("K")
R = TypeVar("R")


def select_in(
    db: sqlite3.Connection,
    head: str,
    keys: Sequence[Any],
    column: str = "rid",
    codec: Callable[[], TextCodec | None] | None = None,
) -> Iterator[Any]:
    """The rows of ``SELECT head WHERE column IN keys``, a statement per :data:`CHUNK_KEYS`
    keys; with ``codec``, each as ``(row, codec)``, the codec asked for before each statement
    (a row committed after the database set its codec is then readable with it:
    :meth:`neardup.store.meta.MetaDB._codec_for`)."""
    for s in range(0, len(keys), CHUNK_KEYS):
        chunk = keys[s : s + CHUNK_KEYS]
        c = None if codec is None else codec()
        cur = db.execute(f"SELECT {head} WHERE {column} IN ({','.join('?' * len(chunk))})", chunk)
        if codec is None:
            yield from cur
        else:
            for raw in cur:
                yield raw, c


def read_connection(path: Path, cache_kib: int | None = None) -> sqlite3.Connection:
    """A query-only connection to the database at ``path`` that any thread may use (one at a
    time), waiting up to 30 s for a lock; ``cache_kib``: its SQLite page cache (its default
    without). The database's own read connection, each extra reader and the summaries' load
    (:mod:`neardup.store.resident`) are made here."""
    db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    if cache_kib is not None:
        db.execute(f"PRAGMA cache_size=-{int(cache_kib)}")
    db.execute("PRAGMA query_only=ON")
    db.execute("PRAGMA busy_timeout=30000")
    return db


def thread_blocks() -> Callable[[], int] | None:
    """A function giving the calling thread's block input operations so far (what it read
    from storage, not from the page cache: ``getrusage(RUSAGE_THREAD).ru_inblock``), or None
    where the system does not count them (no ``RUSAGE_THREAD``, or no task I/O accounting:
    ``/proc/self/io`` missing, where every count would read 0)."""
    who = getattr(resource, "RUSAGE_THREAD", None)
    if who is None or not os.path.exists("/proc/self/io"):
        return None
    try:
        resource.getrusage(who)
    except (OSError, ValueError):
        return None
    return lambda: resource.getrusage(who).ru_inblock


_SYSTEM = object()  # (ParallelReads' default ``blocks``: thread_blocks())


def check_read_threads(value: object, name: str = "read_threads") -> int:
    """``value`` as a reader count, or :class:`ConfigError` saying what is allowed."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_READ_THREADS:
        raise ConfigError(
            f"{name} must be an integer in 1..{MAX_READ_THREADS} (connections that read a "
            f"group's rows at once; 1: one after another), got {value!r}"
        )
    return value


def ranges(keys: Sequence[K], threads: int) -> list[Sequence[K]]:
    """``keys`` (sorted) cut into at most ``threads`` contiguous ranges of near-equal size, each
    of at least :data:`PARALLEL_MIN_KEYS` keys (one range when there are fewer than twice
    that)."""
    k = max(1, min(threads, len(keys) // PARALLEL_MIN_KEYS))
    n = len(keys)
    return [keys[i * n // k : (i + 1) * n // k] for i in range(k)]


class _Reader:
    """One extra read connection, its lock and its text codec."""

    def __init__(self, path: Path) -> None:
        self.lock = threading.Lock()
        self.db = read_connection(path, _READER_CACHE_KIB)
        self._src: TextCodec | None = None
        self._codec: TextCodec | None = None

    def codec(self, src: TextCodec | None) -> TextCodec | None:
        """This reader's codec of the dictionary ``src`` holds (the database's read codec at
        the time of the read)."""
        if src is not self._src:
            self._codec = None if src is None else TextCodec(src.data)
            self._src = src
        return self._codec


class ParallelReads:
    """Extra read connections to the database at ``path`` and the threads that use them.

    ``codec()`` gives the database's read codec as it is now (None: no dictionary yet); each
    reader decodes with its own copy of it, asked again before each statement (as the serial
    read asks for the database's). ``clocks`` (wall, this thread's CPU) time a serial read and
    ``blocks`` counts what this thread read from storage (default :func:`thread_blocks`;
    None: not counted, every wait off the CPU is taken for the disk's)."""

    def __init__(
        self,
        path: Path,
        threads: int,
        codec: Callable[[], TextCodec | None] = lambda: None,
        clocks: tuple[Callable[[], float], Callable[[], float]] = (
            time.perf_counter,
            time.thread_time,
        ),
        blocks: Any = _SYSTEM,
    ) -> None:
        self.path = path
        self.threads = check_read_threads(threads)
        self._codec = codec
        self._clocks = clocks  # (wall, this thread's CPU)
        self._blocks: Callable[[], int] | None = thread_blocks() if blocks is _SYSTEM else blocks
        #: each kind's recent off-CPU time per key of its serial reads (µs)
        self.waits: dict[str, float] = {}
        self._runs: dict[str, int] = {}
        #: reads of many keys made serially (measured) and in parallel
        self.serial = 0
        self.parallel = 0
        self._lock = threading.Lock()
        self._readers: list[_Reader] = []
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False

    def read_keys(
        self,
        kind: str,
        keys: Iterable[K],
        first: Callable[[Sequence[K]], dict[Any, Any]],
        rest: Callable[
            [sqlite3.Connection, Callable[[], TextCodec | None], Sequence[K]], dict[Any, Any]
        ],
    ) -> dict[Any, Any]:
        """The merged results of reading the distinct ``keys``: ``first(keys)`` on the asking
        thread, or :meth:`read` of their sorted ranges when they are many and the last serial
        reads of this ``kind`` waited for the disk (:data:`SLOW_WAIT_US` off the CPU a key,
        with blocks read from storage where those are counted; one in :data:`PROBE_EVERY`
        stays serial to measure again)."""
        uniq = list(keys)
        if self.threads < 2 or len(uniq) < 2 * PARALLEL_MIN_KEYS:
            return first(uniq)
        run = self._runs.get(kind, 0)  # parallel reads of this kind since its last serial one
        if self.waits.get(kind, 0.0) > SLOW_WAIT_US and run < PROBE_EVERY - 1:
            self._runs[kind] = run + 1
            self.parallel += 1
            out: dict[Any, Any] = {}
            for got in self.read(ranges(sorted(uniq), self.threads), first, rest):  # type: ignore[type-var]
                out.update(got)
            return out
        self._runs[kind] = 0
        self.serial += 1
        wall, cpu = self._clocks
        blocks = self._blocks
        b0 = 0 if blocks is None else blocks()
        w0, c0 = wall(), cpu()
        out = first(uniq)
        waited = (wall() - w0) - (cpu() - c0)
        if blocks is not None:  # the share of the keys whose page came from storage (a
            # page is PAGE_BLOCKS blocks): the rest of the time off the CPU went to the
            # interpreter lock or a lock, not to the disk
            waited *= min(1.0, (blocks() - b0) / (PAGE_BLOCKS * len(uniq)))
        per = max(0.0, waited) / len(uniq) * 1e6
        last = self.waits.get(kind)
        self.waits[kind] = per if last is None else (last + per) / 2
        return out

    def stats(self) -> dict[str, float]:
        """Counters and state for monitoring: ``meta_serial_reads`` and
        ``meta_parallel_reads`` (reads of many keys made each way) and, per kind,
        ``meta_read_wait_us_<kind>`` (its serial reads' recent off-CPU time per key: above
        :data:`SLOW_WAIT_US` they come from the disk)."""
        out: dict[str, float] = {
            "meta_serial_reads": self.serial,
            "meta_parallel_reads": self.parallel,
        }
        for kind in KINDS:
            out[f"meta_read_wait_us_{kind}"] = round(self.waits.get(kind, 0.0), 1)
        return out

    def _ready(self, n: int) -> tuple[ThreadPoolExecutor, list[_Reader]]:
        with self._lock:
            if self._closed:
                raise IndexStateError(f"{self.path}: the metadata database is closed")
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    self.threads - 1, thread_name_prefix="neardup-meta-read"
                )
            while len(self._readers) < n:
                self._readers.append(_Reader(self.path))
            return self._pool, self._readers

    def read(
        self,
        parts: list[Sequence[K]],
        first: Callable[[Sequence[K]], R],
        rest: Callable[[sqlite3.Connection, Callable[[], TextCodec | None], Sequence[K]], R],
    ) -> list[R]:
        """The results of reading each of ``parts`` (contiguous ranges of sorted keys), in order:
        ``first(range)`` reads the first range on the asking thread (the database's own read
        connection, under its lock), ``rest(connection, codec, range)`` each other range on an
        extra reader (``codec()``: that reader's codec). The other ranges are waited for
        before an error is raised."""
        if len(parts) == 1:
            return [first(parts[0])]
        pool, readers = self._ready(len(parts) - 1)

        def one(reader: _Reader, part: Sequence[K]) -> R:
            with reader.lock:
                return rest(reader.db, lambda: reader.codec(self._codec()), part)

        futures: list[Future[R]] = [
            pool.submit(one, r, p) for r, p in zip(readers, parts[1:], strict=False)
        ]
        error: BaseException | None = None
        out: list[Any] = [None] * len(parts)
        try:
            out[0] = first(parts[0])
        except BaseException as exc:
            error = exc
        for i, f in enumerate(futures, 1):
            try:
                out[i] = f.result()
            except BaseException as exc:
                error = error or exc
        if error is not None:
            raise error
        return out

    def close(self) -> None:
        """Wait for the reads in flight, then close the extra connections."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
            readers, self._readers = self._readers, []
        if pool is not None:
            pool.shutdown(wait=True)
        for r in readers:
            with r.lock:
                r.db.close()
