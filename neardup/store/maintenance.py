"""What a store does between write groups: flushes, compaction, retention and bulk loads.

Flush (:func:`flush`; in the background past ``memtable_size`` rows, :func:`maybe_flush`): the
memtable is frozen and a fresh log generation started (:func:`begin_flush`, on the writer
thread), one segment per time partition is written (temp, fsync, verify, rename) with its
HammingIndex saved beside it (:func:`build_flush`, any thread), then SQLite is checkpointed,
the manifest replaced atomically, and only then the old logs deleted (:func:`finish_flush`,
writer thread). A crash at any point leaves either the old or the new manifest, and files the
live manifest does not name are removed on the next open.

Compaction (:func:`compaction_candidates`, :func:`build_merged`, :func:`install_merged`):
segments of one partition are merged into one, size-tiered, without the deleted rows; ended
partitions are merged into blocks of a few (:func:`span_sizes`), so narrow partitions do not
multiply the segments a query searches.

Retention (:func:`expire`): segments whose partitions' whole time range is older than ``now -
retention`` are dropped: their rows deleted from SQLite in one transaction, then the manifest
replaced, then the files unlinked. Rows past the window in partitions that have not ended are
deleted from SQLite too (:func:`expire_rows`, every :data:`ROW_EXPIRY_STEP_S` of the cutoff's
advance): what is past the window is gone for good (a wider window later does not bring it
back) and the document count is what is served. A retention change first deletes what the old
window had left behind (at once by :func:`set_retention`; on open through ``config.json``'s
``expire_before`` mark, :func:`finish_retention_change`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import sqlite3
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from .._durable import fsync_dir
from .._threads import lower_thread_priority
from ..errors import InputError, StorageError
from ..index.bands import (
    STREAM_ENTRIES,
    BandIndex,
    BandSection,
    MergedSection,
    PackedSection,
    columns_are_groups,
    merge_mapped,
)
from .applier import lookup_ids
from .layout import read_json_file, write_json_file
from .meta import EMPTY_FLAG, NO_CONTENT_HASH
from .partitions import discard, new_segment, write_segments
from .sketches import SketchTable
from .state import Frozen, LiveSegment, StoreState
from .wal import DeleteRecord, WalWriter
from .writes import BulkDocs

__all__ = [
    "EXPIRY_BATCH_ROWS",
    "EXPIRY_MIN_ROWS",
    "EXPIRY_PASS_SECONDS",
    "ROW_EXPIRY_STEP_S",
    "build_merged",
    "bulk_add",
    "compaction_candidates",
    "expire",
    "finish_flush",
    "finish_retention_change",
    "flush",
    "install_merged",
    "maybe_flush",
    "set_retention",
    "sync_meta",
]

log = logging.getLogger("neardup.store")

#: rows past the retention window in partitions that have not ended are deleted from SQLite
#: once the cutoff has moved this many seconds since the last time (reads filter them by time
#: meanwhile); each pass reads the times of the segments that straddle the cutoff
ROW_EXPIRY_STEP_S = 10.0

#: the most rows one retention call deletes (about once a second, on the writer thread, ~5 µs a
#: row while SQLite's pages are in memory): a clock that jumps (a restart after hours down, a
#: paused process) or an hour that leaves at once leaves a backlog the next calls work off,
#: instead of stalling every request behind one large delete; the rows past the window stop
#: matching at once either way (``tests/store/test_retention.py``)
EXPIRY_BATCH_ROWS = 5_000
#: the wall time a retention call aims at: where SQLite's pages are read from disk (a window
#: larger than memory), a row's delete costs more and varies, and a call of
#: :data:`EXPIRY_BATCH_ROWS` stalled the writer several times longer, so each call deletes as
#: many rows as the last one's rate fits in this (``benchmarks/bench_drop.py``)
EXPIRY_PASS_SECONDS = 0.025
#: the fewest rows a call may delete however slow the last was: one call a second must still
#: outpace the rows entering the window (the seeds' 1 M an hour is ~280 a second)
EXPIRY_MIN_ROWS = 500
#: a call that deleted fewer rows than this is mostly its fixed cost (the transaction's
#: commit): too few to say what a row costs, so it leaves the budget as it was
_TIMED_ROWS = 64


def sync_meta(st: StoreState) -> None:
    """Wait until SQLite holds every acknowledged record (writer thread)."""
    if st.applier is not None:
        st.applier.drain()


# ---------------------------------------------------------------------- flush
def maybe_flush(st: StoreState, cutoff: float | None = None) -> None:
    """Install a finished background flush; start one when the memtable is full."""
    if st.wal is None:
        return
    finish_flush(st, wait=False)
    if flush_due(st):
        frozen = begin_flush(st)
        threading.Thread(
            target=_background_flush, args=(st, frozen, cutoff), name="neardup-flush", daemon=True
        ).start()


def flush_due(st: StoreState) -> bool:
    """The memtable is full and no flush is under way."""
    return st.frozen is None and len(st.memtable) >= st.settings.memtable_size


def _background_flush(st: StoreState, frozen: Frozen, cutoff: float | None) -> None:
    lower_thread_priority()
    build_flush(st, frozen, cutoff)


def flush(st: StoreState, cutoff: float | None = None) -> None:
    """Write the memtable to segments now (durable mode only; finishes a pending flush first)."""
    if st.wal is None or st.dir is None:
        return
    finish_flush(st, wait=True)
    frozen = begin_flush(st)
    build_flush(st, frozen, cutoff)
    finish_flush(st, wait=True)


def begin_flush(st: StoreState) -> Frozen:
    """Freeze the memtable and start a new log generation (writer thread; fast).

    The manifest then names both generations, so a crash before the segments are installed
    replays both.
    """
    assert st.wal is not None and st.dir is not None
    if st.frozen is not None:
        raise StorageError("a flush is already in progress")
    old = st.wal
    gen = old.generation + 1
    new_path = st.dir.wal_path(gen)
    manifest = st.manifest_with(
        segments=[s.entry for s in st.segments],
        wal_generation=gen,
        wal_generations=[*st.live_gens, gen],
        # the first row id each live log can hold (recovery restores rows from there)
        gen_start_rowid={
            **{
                k: v
                for k, v in (st.manifest.get("gen_start_rowid") or {}).items()
                if int(k) in st.live_gens
            },
            str(gen): st.next_rowid,
        },
    )
    try:
        new_path.unlink(missing_ok=True)
        st.db.set_applied(gen, 0)
        new = WalWriter(new_path, gen, create=True)
        st.dir.write_manifest(manifest)
    except (OSError, StorageError) as exc:
        new_path.unlink(missing_ok=True)
        raise StorageError(f"flush failed ({exc}); the log still holds every row") from exc
    old.close()
    st.manifest = manifest
    st.wal = new
    frozen = Frozen(
        st.memtable, st.memtable_deleted, list(st.live_gens), st.bandtable, st.sketchtable
    )
    st.bandtable = BandIndex()
    st.sketchtable = st.new_sketchtable()
    st.live_gens = [gen]
    st.memtable = st.new_memtable()
    st.memtable_deleted = set()
    st.frozen = frozen
    return frozen


def build_flush(st: StoreState, frozen: Frozen, cutoff: float | None) -> None:
    """Write a frozen memtable's segments (any thread; touches no shared state but files)."""
    try:
        fps, rids, ts = frozen.memtable.arrays()
        keep = np.ones(len(rids), bool)
        if frozen.deleted:
            keep &= ~np.isin(rids, np.fromiter(frozen.deleted, dtype=np.int64))
        expired = np.zeros(0, np.int64)
        if cutoff is not None:
            exp = keep & (ts < cutoff)
            if np.count_nonzero(exp) <= EXPIRY_BATCH_ROWS:
                # left out of the segments, deleted from SQLite by the install
                expired = rids[exp]
                keep &= ~exp
            # more than a retention call deletes (a clock jump over a full memtable): written
            # with the rest, past the window (no read returns them), and deleted by the
            # retention passes a budget at a time (finish_flush marks them behind), not in
            # one delete the writer would stall on
        bk = None
        if st.band_keys_of is not None and frozen.bands is not None:
            bk = frozen.bands.section()  # 8 bytes per entry, never materialised
        frozen.written = write_segments(st, fps[keep], rids[keep], ts[keep], bk, frozen.sketches)
        frozen.expired = expired
    except BaseException as exc:
        frozen.error = exc
    finally:
        frozen.done.set()


def finish_flush(st: StoreState, *, wait: bool) -> bool:
    """Install a built flush (writer thread): checkpoint SQLite, replace the manifest, retire
    the old logs. Returns True if one was installed. A failed build is retried."""
    frozen = st.frozen
    if frozen is None or not (frozen.done.is_set() or wait):
        return False
    if not wait and time.monotonic() - frozen.failed_at < 1.0:
        return False  # it just failed (a full disk?): retry about once a second
    frozen.done.wait()
    assert st.dir is not None
    if frozen.error is not None:
        err, frozen.error = frozen.error, None
        frozen.done.clear()
        log.error("background flush failed (%s); retrying", err)
        build_flush(st, frozen, None)  # sets done again, also when it fails
        if frozen.error is not None:
            # keep the error (and done set): the next call retries the build; clearing
            # done here left every later flush waiting forever for a build nobody ran
            err = frozen.error
            frozen.failed_at = time.monotonic()
            if isinstance(err, StorageError):
                raise err
            raise StorageError(f"flush failed ({err}); the log still holds every row") from err
    written = frozen.written or []
    expired = frozen.expired if frozen.expired is not None else np.zeros(0, np.int64)
    manifest = st.manifest_with(
        segments=[s.entry for s in st.segments] + [s.entry for s in written],
        wal_generations=list(st.live_gens),
        gen_start_rowid={
            k: v
            for k, v in (st.manifest.get("gen_start_rowid") or {}).items()
            if int(k) in st.live_gens
        },
    )
    try:
        sync_meta(st)  # the retired logs' records must be in SQLite before the checkpoint
        # (a retention pass during the build may have deleted some of them already, and
        # counted them: only what this delete finds counts here)
        gone = st.db.delete_rowids(expired.tolist()) if len(expired) else 0
        st.db.checkpoint()
        _record_expiry_marks(st)
        st.dir.write_manifest(manifest)
    except (OSError, StorageError) as exc:
        for s in written:
            discard(s)
        frozen.written = None
        frozen.done.clear()
        threading.Thread(target=build_flush, args=(st, frozen, None), daemon=True).start()
        raise StorageError(f"flush failed ({exc}); the log still holds every row") from exc
    st.manifest = manifest
    st.segments.extend(written)
    st.frozen = None
    for g in frozen.gens:
        st.dir.wal_path(g).unlink(missing_ok=True)
    fsync_dir(st.dir.root)
    try:
        st.db.forget_generations(st.live_gens)
    except Exception:  # bookkeeping only
        log.warning("could not drop applied positions of retired logs", exc_info=True)
    st.count(-gone)
    window = st.settings.retention
    if window is not None and any(s.segment.min_time < st.clock() - window for s in written):
        st.rows_expiry_behind = True  # rows past the window the build kept: the next passes
    st.flushes += 1
    return True


# ---------------------------------------------------------------------- compaction
def span_sizes(st: StoreState) -> list[int]:
    """The block sizes, in partitions, that ended partitions are merged into: ``[1, ..., S]``,
    each dividing the next, ``S`` the most partitions in ``retention / 8`` (1 without
    retention).

    A query searches every segment, and each search costs a few cache misses whatever the
    segment's size, so narrow partitions (hourly, for an hour-by-hour drop) multiply a
    request's cost (``benchmarks/bench_window.py``). Blocks of ended partitions keep the
    segment count near ``8 + log S`` at any width. What a block costs: its oldest rows stop
    matching and leave SQLite when they leave the window, as in any partition that has not
    ended (:func:`expire_rows`); its file goes when its last partition ends, so up to
    ``retention / 8`` of rows past the window stay on disk, as with the default width.
    """
    width, retention = st.settings.partition_seconds, st.settings.retention
    assert width is not None
    top = 1 if retention is None else max(1, int(retention / 8 // width))
    sizes = [top]
    while sizes[-1] > 1:  # divide by the smallest prime factor: each size divides the next
        n = sizes[-1]
        f = next((d for d in range(2, math.isqrt(n) + 1) if n % d == 0), n)
        sizes.append(n // f)
    return sizes[::-1]


def span_block(partition: int, newest: int, sizes: list[int]) -> tuple[int, int]:
    """(size, index) of the largest block of ``sizes`` that holds ``partition`` and ends
    before the ``newest`` partition (no more rows are due there); size 1 (the partition
    itself) when none has.

    >>> span_block(5, 6, [1, 2, 4])  # partitions 4-5 have ended, 4-7 have not
    (2, 2)
    >>> span_block(5, 5, [1, 2, 4])
    (1, 5)
    """
    best = (1, partition)
    for size in sizes:
        block = partition // size
        if (block + 1) * size - 1 < newest:
            best = (size, block)
    return best


def compaction_candidates(st: StoreState, max_segments: int) -> list[list[LiveSegment]]:
    """Groups of segments worth merging (writer thread): the segments of one partition, or of
    one block of ended partitions (:func:`span_sizes`)."""
    if not st.segments:
        return []
    sizes = span_sizes(st)
    newest = max(s.last_partition for s in st.segments)
    by_block: dict[tuple[int, int], list[LiveSegment]] = {}
    for s in st.segments:
        # a segment spans at most a block (blocks nest), so its first partition names it
        by_block.setdefault(span_block(s.partition, newest, sizes), []).append(s)
    out: list[list[LiveSegment]] = []
    for (size, _), segs in by_block.items():
        most = max_segments if size == 1 else 1
        if len(segs) <= most:
            continue
        # size-tiered: small segments (e.g. memtable flushes, late rows of an ended block)
        # are merged among themselves until together they reach a quarter of the largest, so
        # a large segment is not rewritten for every small one; more than most + 2 merges all
        big = max(segs, key=lambda s: len(s.segment))
        small = [s for s in segs if s is not big]
        n_small = sum(len(s.segment) for s in small)
        if len(segs) > most + 2 or 4 * n_small >= len(big.segment):
            out.append(segs)
        elif len(small) >= 2:
            out.append(small)
    return out


def build_merged(st: StoreState, segs: list[LiveSegment]) -> LiveSegment | None:
    """Merge segments into a new file, dropping deleted rows (any thread; files are immutable)."""
    # the inputs are read from end to end: with the kernel's read-ahead, then as they were
    for s in segs:
        s.segment.read_ahead(True)
    try:
        return _build_merged(st, segs)
    finally:
        if st.read_ahead is False:
            for s in segs:
                s.segment.read_ahead(False)


def _build_merged(st: StoreState, segs: list[LiveSegment]) -> LiveSegment | None:
    fps = np.concatenate([s.segment.fingerprints for s in segs])
    rids = np.concatenate([s.segment.rowids for s in segs])
    ts = np.concatenate([s.segment.times for s in segs])
    # deleted rows: the (small) table of applied deletes plus deletes still pending; no
    # scan of the live rows, so the writer's lookups never wait for a merge
    lo, hi = int(rids.min()), int(rids.max())
    gone = st.db.deleted_between(lo, hi)
    with st.pending.lock:
        pend = [
            rid
            for rid, r in st.pending.by_rid.items()
            if type(r) is DeleteRecord and lo <= rid <= hi
        ]
    if pend:
        gone = np.concatenate([gone, np.asarray(pend, dtype=np.int64)])
    keep = ~np.isin(rids, gone) if len(gone) else np.ones(len(rids), bool)
    order = np.argsort(rids[keep], kind="stable")
    if not keep.any():
        return None
    out_rids = rids[keep][order]
    bk: BandSection | MergedSection | None = None
    if st.band_keys_of is not None:
        # the inputs' sections merged as sorted runs, each row renamed to its position in the
        # output (-1: deleted); a segment's rows are in row-id order, as the output's are
        sections: list[BandSection | PackedSection] = []
        maps = []
        at = 0
        for s in segs:
            n = len(s.segment)
            where = np.searchsorted(out_rids, s.segment.rowids)
            maps.append(np.where(keep[at : at + n], where, -1).astype(np.int64))
            sections += s.segment.band_runs() or [BandSection.empty()]
            at += n
        # a large output is made group by group as the segment is written, not held whole
        # (neardup.index.band_stream): about a kilobyte a row of the partition otherwise. Its
        # packed rows wait in a spill file beside the segments while the keys are written, so
        # that each group is merged once (benchmarks/bench_compact.py)
        if sum(len(sec) for sec in sections) > STREAM_ENTRIES:
            spill = st.dir.root if st.dir is not None else None
            bk = MergedSection(sections, maps, len(out_rids), spill_dir=spill)
        else:
            bk = merge_mapped(sections, maps)
    sk = None
    if st.sketch_width:  # the inputs' sketches follow their rows (none where an input has none)
        w = st.sketch_width
        present = np.concatenate(
            [
                s.segment.sketch_present
                if s.segment.sketches is not None and s.segment.sketches.shape[1] == w
                else np.zeros(len(s.segment), np.bool_)
                for s in segs
            ]
        )
        rows = np.flatnonzero(keep)[order]
        out_sk = np.zeros((len(rows), w), np.uint8)
        at = 0
        for s in segs:  # gathered segment by segment: no copy of every input's sketches
            n = len(s.segment)
            mine = (rows >= at) & (rows < at + n)
            if s.segment.sketches is not None and s.segment.sketches.shape[1] == w:
                out_sk[mine] = s.segment.sketches[rows[mine] - at]
            at += n
        sk = (present[rows], out_sk)
    try:
        out = new_segment(
            st,
            min(s.partition for s in segs),
            fps[keep][order],
            out_rids,
            ts[keep][order],
            bk,
            sk,
            last_partition=max(s.last_partition for s in segs),
        )
    except OSError as exc:
        raise StorageError(f"compaction could not write a segment: {exc}") from exc
    finally:
        if isinstance(bk, MergedSection):
            bk.close()  # a spill file not read back (a failed write) goes now, not at collection
    out.dropped = rids[~keep]
    return out


def install_merged(st: StoreState, segs: list[LiveSegment], merged: LiveSegment | None) -> bool:
    """Swap merged segments in (writer thread); False (and the output removed) if the inputs
    are no longer all live (e.g. dropped by retention meanwhile)."""
    assert st.dir is not None
    if not all(s in st.segments for s in segs):
        if merged is not None:
            discard(merged)
        return False
    if merged is not None:  # retention deleted at least what every input had deleted
        merged.expired_before = min(s.expired_before for s in segs)
        marks = [s.entry.get("expired_before") for s in segs]
        if all(m is not None for m in marks):
            merged.entry["expired_before"] = min(float(m) for m in marks if m is not None)
    alive = [s for s in st.segments if s not in segs] + ([merged] if merged is not None else [])
    manifest = st.manifest_with(segments=[s.entry for s in alive])
    try:
        st.dir.write_manifest(manifest)
    except OSError as exc:
        if merged is not None:
            discard(merged)
        raise StorageError(f"compaction could not update the manifest: {exc}") from exc
    st.manifest = manifest
    st.segments = alive
    dropped = (
        merged.dropped
        if merged is not None and merged.dropped is not None
        else np.concatenate([s.segment.rowids for s in segs])  # all rows were deleted
    )
    for s in segs:
        discard(s)
    st.compactions += 1
    if len(dropped):
        try:  # bookkeeping only: those rows are gone from every segment now
            st.db.forget_deleted(dropped.tolist())
        except Exception:
            log.warning("could not prune the deleted-rows table", exc_info=True)
    return True


# ---------------------------------------------------------------------- retention
def expire(st: StoreState, cutoff: float) -> int:
    """Delete what is older than ``cutoff``: rows past the window (:func:`expire_rows`, at most
    :data:`EXPIRY_BATCH_ROWS` a call), then the segments whose partitions have all ended once
    few of their rows are left in SQLite. Returns the rows deleted."""
    ps = st.settings.partition_seconds
    assert ps is not None
    dropped = 0
    if st.wal is None and len(st.memtable):
        dropped += _expire_memory(st, cutoff)
        st.count(-dropped)
    last = st.rows_expired_at
    budget = min(st.expiry_budget or EXPIRY_BATCH_ROWS, EXPIRY_BATCH_ROWS)
    room = budget  # what this call may still delete
    if st.rows_expiry_behind or last is None or cutoff - last >= ROW_EXPIRY_STEP_S:
        began = time.perf_counter()
        passed = expire_rows(st, cutoff, budget=budget)
        st.expiry_budget = _next_budget(budget, passed, time.perf_counter() - began)
        dropped += passed
        room -= passed
    # both the partition's end and the newest row must be older than the cutoff: a width
    # that did not match the data could otherwise drop recent rows
    ended = [
        s
        for s in st.segments
        if (s.last_partition + 1) * ps <= cutoff and s.segment.max_time < cutoff
    ]
    dead: list[LiveSegment] = []
    left: list[npt.NDArray[np.int64]] = []
    for s in ended:
        # rows older than a segment's expired_before were deleted already, as the cutoff
        # passed them (expire_rows): the drop deletes only what is left (a delete by row id
        # costs the same whether the row is there or not). A segment with more left than this
        # call may delete waits for the next passes (its rows no longer match meanwhile)
        rest = s.rows_in_time(s.expired_before, math.inf, limit=room + 1)[0]
        if len(rest) > room:
            continue
        room -= len(rest)
        dead.append(s)
        left.append(np.asarray(rest, np.int64))
    if dead:
        assert st.dir is not None
        sync_meta(st)
        gone = st.db.delete_rowids(np.concatenate(left).tolist())
        alive = [s for s in st.segments if s not in dead]
        manifest = st.manifest_with(segments=[s.entry for s in alive])
        try:
            st.dir.write_manifest(manifest)
        except OSError as exc:
            raise StorageError(f"cannot update manifest for retention: {exc}") from exc
        st.manifest = manifest
        st.segments = alive
        for s in dead:
            discard(s)
        st.dropped_partitions += len({p for s in dead for p in s.partitions})
        st.count(-gone)
        dropped += gone
        log.info("retention: dropped %d segments (%d rows) older than %s", len(dead), gone, cutoff)
    return dropped


def save_expiry_marks(st: StoreState) -> bool:
    """Make how far retention got in each segment durable (writer thread, at close when no
    flush records it): checkpoint SQLite, then write the marks into the manifest. Without it
    the next open walks again every row the passes since the last flush had deleted, a pass
    a second, each deleting nothing. True when the manifest was written."""
    if st.dir is None or not any(
        s.expired_before > float(s.entry.get("expired_before", -math.inf)) for s in st.segments
    ):
        return False
    sync_meta(st)
    st.db.checkpoint()
    _record_expiry_marks(st)
    manifest = st.manifest_with(segments=[s.entry for s in st.segments])
    try:
        st.dir.write_manifest(manifest)
    except OSError as exc:
        raise StorageError(f"cannot record how far retention got: {exc}") from exc
    st.manifest = manifest
    return True


def _record_expiry_marks(st: StoreState) -> None:
    """Copy each segment's ``expired_before`` into its manifest entry, for the manifest written
    next (after a checkpoint: retention's deletions are durable, so the marks may say so)."""
    for s in st.segments:
        if s.expired_before > -math.inf:
            s.entry["expired_before"] = s.expired_before


def _next_budget(budget: int, rows: int, seconds: float) -> int | None:
    """The rows the next retention call may delete, from this call's (``budget`` allowed,
    ``rows`` deleted in ``seconds``): as many as its rate fits in :data:`EXPIRY_PASS_SECONDS`,
    at most twice this budget (a burst of fast calls grows it step by step), at least
    :data:`EXPIRY_MIN_ROWS`, at most :data:`EXPIRY_BATCH_ROWS`. A call that deleted too few
    rows to time keeps the budget (None: the cap)."""
    if rows < _TIMED_ROWS or seconds <= 0:
        return budget if budget < EXPIRY_BATCH_ROWS else None
    fit = int(EXPIRY_PASS_SECONDS * rows / seconds)
    return max(EXPIRY_MIN_ROWS, min(fit, 2 * budget, EXPIRY_BATCH_ROWS))


def expire_rows(
    st: StoreState, cutoff: float, *, full: bool = False, budget: int | None = None
) -> int:
    """Delete from SQLite every row older than ``cutoff`` that a partition not yet dropped
    still holds (segments, the memtable, a flush under way): past the window, gone for good.
    Writer thread. ``full``: scan every segment from its start (a retention change); else
    each from where the last pass got to. ``budget``: delete only the oldest ``budget`` rows
    (and those as old as the last of them) and leave the rest to the next pass
    (``st.rows_expiry_behind``). Returns the rows deleted.

    Segment rows stay in their immutable files (searches find their row ids, which no longer
    fetch) until the partition is dropped; memtable rows are left out of its flush.
    """
    # the segments this pass reads, each from where the last pass got to
    spans = [
        (seg, -math.inf if full else seg.expired_before)
        for seg in st.segments
        if seg.segment.min_time < cutoff and (full or seg.expired_before < cutoff)
    ]
    # set once, at the end of the pass: other threads read it (stats, /metrics, a caller
    # waiting for a backlog), and a pass that cleared it first would read as done meanwhile
    behind = False
    memory = _memory_rows(st, cutoff)
    if budget is not None:
        # the oldest ``budget`` rows are among each part's oldest ``budget`` (one more says
        # that a part holds more): their times say where this pass stops, so it reads
        # O(budget) rows a segment, not the rest of an hour that is leaving
        firsts = [seg.rows_in_time(lo, cutoff, limit=budget + 1)[1] for seg, lo in spans]
        firsts += [t for _, t in memory]
        when = np.concatenate(firsts) if firsts else np.zeros(0, np.float64)
        if len(when) > budget:
            # every row as old as the last of them too (so rows of one time, e.g. a bulk
            # load's, cannot stop the passes); reads filter the rest by time meanwhile
            upto = float(np.nextafter(np.partition(when, budget - 1)[budget - 1], np.inf))
            if upto < cutoff:
                cutoff = upto
                behind = True
    parts = [seg.rows_in_time(lo, cutoff) for seg, lo in spans]
    if behind:
        memory = [(r[t < cutoff], t[t < cutoff]) for r, t in memory]
    mem = memory[0][0]
    doomed = np.concatenate([r for r, _ in parts] + [r for r, _ in memory])
    doomed = np.unique(doomed)
    gone = 0
    if len(doomed):
        sync_meta(st)  # every acknowledged row is in SQLite: its delete counts
        gone = st.db.delete_rowids(doomed.tolist())
        st.memtable_deleted.update(mem.tolist())
        st.count(-gone)
        if gone:
            log.info("retention: deleted %d rows older than %s", gone, cutoff)
    for seg, _ in spans:
        seg.expired_before = max(seg.expired_before, cutoff)
    st.rows_expired_at = cutoff
    st.rows_expiry_behind = behind
    return gone


def _memory_rows(
    st: StoreState, cutoff: float
) -> list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]:
    """Row ids and times of the memtable's rows older than ``cutoff`` (those a pass has not
    deleted yet), then a frozen memtable's (a flush under way; its build already left out
    rows older than its own cutoff)."""
    mem, mem_t = st.memtable.rows_and_times_before(cutoff)
    if len(mem) and st.memtable_deleted:
        fresh = ~np.isin(mem, np.fromiter(st.memtable_deleted, dtype=np.int64))
        mem, mem_t = mem[fresh], mem_t[fresh]
    out = [(mem, mem_t)]
    if st.frozen is not None:
        out.append(st.frozen.memtable.rows_and_times_before(cutoff))
    return out


def finish_retention_change(st: StoreState) -> None:
    """(open) Delete the rows a changed retention's old window had left behind, then drop
    the ``expire_before`` mark from the config."""
    assert st.dir is not None and st.expire_pending is not None
    expire_rows(st, st.expire_pending, full=True)
    cfg_path = st.dir.config_path
    body = read_json_file(cfg_path)
    body.get("store", {}).pop("expire_before", None)
    try:
        write_json_file(cfg_path, body)
    except OSError as exc:
        raise StorageError(f"cannot update {cfg_path}: {exc}") from exc
    st.expire_pending = None
    st.rows_expired_at = None


def set_retention(st: StoreState, seconds: float | None) -> None:
    """Store a new retention window (``None``: keep everything) in the config body's
    ``store`` section (in memory, nothing to store) and take it. What the old window left
    behind is deleted first. :class:`StorageError` when it cannot be written."""
    old = st.settings.retention
    if old is not None and seconds != old:
        # what the old window left behind goes before a new one applies (a wider window
        # must not bring it back): deleted now, before the new retention is stored
        expire_rows(st, st.clock() - old, full=True)
    st.settings = dataclasses.replace(st.settings, retention=seconds)
    st.rows_expired_at = None
    if st.dir is None:
        return
    cfg_path = st.dir.config_path
    try:
        body = read_json_file(cfg_path)
        body["store"] = {**body.get("store", {}), "retention": seconds}
        write_json_file(cfg_path, body)
    except OSError as exc:
        raise StorageError(f"cannot store the new retention in {cfg_path}: {exc}") from exc


def _expire_memory(st: StoreState, cutoff: float) -> int:
    """In-memory mode: rebuild the memtable without rows of partitions that ended."""
    width = st.settings.partition_seconds
    assert width is not None
    fps, rids, ts = st.memtable.arrays()
    ends = (st.partition_of(ts) + 1) * width
    dead = ends <= cutoff
    if not dead.any():
        return 0
    n = st.db.delete_rowids(rids[dead].tolist())
    st.memtable.clear()
    st.memtable.add(fps[~dead], rids[~dead], ts[~dead])
    st.bandtable.remove_many(rids[dead])
    if st.sketchtable is not None:  # rebuilt over the live rows (its slots span their row ids)
        live = rids[~dead]
        present, sk = st.sketchtable.lookup(live)
        st.sketchtable = st.new_sketchtable()
        assert st.sketchtable is not None
        st.sketchtable.put(live[present], sk[present])
    return n


# ---------------------------------------------------------------------- bulk loads
def bulk_add(
    st: StoreState,
    ids: list[str],
    fps: npt.NDArray[np.uint64],
    times: npt.NDArray[np.float64],
    docs: BulkDocs | None = None,
) -> int:
    """Seed new documents straight into segments (durable) or the memtable (in memory), row
    ids allocated here, without the log and without deciding anything; :class:`InputError`
    when an id exists already (nothing is loaded). ``docs``: what an add stores beside the
    fingerprint (texts, content hashes, metadata, band keys); None: fingerprints only.
    Metadata first (one transaction), then the segments and the manifest. Rows whose
    segments never reached the manifest (a crash in between) have row ids beyond every logged
    or stored row and are removed on the next open."""
    start = st.next_rowid
    st.next_rowid += len(ids)
    rids = np.arange(start, start + len(ids), dtype=np.int64)
    fp_bytes = _fp_words(fps).astype("<u8").tobytes()
    ts = times.tolist()
    # insert in id order: the UNIQUE(id) B-tree then grows at its right edge
    order = sorted(range(len(ids)), key=ids.__getitem__)
    if docs is None:
        rows: Iterable[tuple[Any, ...]] = (
            (start + i, ids[i], ts[i], fp_bytes[16 * i : 16 * i + 16], NO_CONTENT_HASH, 0, None, None)
            for i in order
        )  # fmt: skip
    else:
        d = docs
        flags = np.where(d.empty, EMPTY_FLAG, 0).tolist()
        rows = (
            (start + i, ids[i], ts[i], fp_bytes[16 * i : 16 * i + 16], d.chash[i], flags[i], d.metadata[i], None if d.texts is None else d.texts[i])
            for i in order
        )  # fmt: skip
    bands = None
    if docs is not None and st.band_keys_of is not None:  # the rows the MinHash channel finds
        if docs.bands is not None:
            bands = docs.bands
        elif docs.texts is not None:
            bands = st.band_keys_of(docs.texts)
    try:
        sketches = docs.sketches if docs is not None and st.sketch_width else None
        _bulk_load(st, rows, fps, rids, times, bands, sketches)
    except sqlite3.IntegrityError:
        existing = lookup_ids(st, ids)
        first = next(iter(existing), None)
        raise InputError(
            f"{len(existing)} ids already exist (e.g. {first!r}); a bulk load (load, bulk_load, "
            "neardup store load --as-is) only adds new ids"
        ) from None
    if docs is not None and docs.summaries is not None:
        pairs = [(start + i, b) for i, b in enumerate(docs.summaries) if b is not None]
        try:
            st.db.put_summaries(pairs)
        except StorageError as exc:  # derived data: the rows are loaded and read without it
            log.warning(
                "bulk load: the rows are stored, their %d summaries not (%s)", len(pairs), exc
            )
    return len(ids)


def _bulk_load(
    st: StoreState,
    rows: Iterable[tuple[Any, ...]],
    fps: npt.NDArray[np.uint64],
    rids: npt.NDArray[np.int64],
    ts: npt.NDArray[np.float64],
    bands: npt.NDArray[np.uint64] | None,
    sketches: npt.NDArray[np.uint8] | None = None,
) -> None:
    sync_meta(st)  # pending ids must be in SQLite so its UNIQUE(id) sees them
    if st.wal is None or st.dir is None:
        st.db.insert_rows(rows)
        st.memtable.add(fps, rids, ts)
        if bands is not None:
            st.bandtable.insert_many(rids, bands)
        if sketches is not None and st.sketchtable is not None:
            st.sketchtable.put(rids, sketches)
    else:
        # the metadata rows on a helper thread while this one builds and writes the segments
        # (SQLite's inserts and NumPy's sorts and the file writes release the GIL); the
        # manifest last, once both are done, so a crash leaves rows and files that the next
        # open removes (no manifest names them)
        pool = ThreadPoolExecutor(1, thread_name_prefix="neardup-bulk-meta")
        meta = pool.submit(st.db.insert_rows, rows, bulk=True)
        written: list[LiveSegment] = []
        try:
            try:
                sk_rows = sketches if sketches is not None and st.sketch_width else None
                if sk_rows is not None and sk_rows.shape != (len(rids), st.sketch_width):
                    raise ValueError(
                        f"{sk_rows.shape} sketches for {len(rids)} rows of {st.sketch_width} bytes"
                    )
                if bands is not None and (bands.ndim != 2 or len(bands) != len(rids)):
                    raise ValueError(f"band keys of shape {bands.shape} for {len(rids)} rows")
                if bands is None or columns_are_groups(bands):
                    # each partition's section sorted from its own rows' keys
                    written = write_segments(
                        st, fps, rids, ts, row_bands=bands, row_sketches=sk_rows
                    )
                else:  # (a plan of more rows a band) as a memtable's keys, cut per partition
                    table = BandIndex()
                    table.insert_many(rids, bands)
                    table_sk = None
                    if sk_rows is not None:
                        table_sk = SketchTable(st.sketch_width)
                        table_sk.put(rids, sk_rows)
                    written = write_segments(st, fps, rids, ts, table.section(), table_sk)
            finally:
                meta_error = meta.exception()  # waits for the rows either way
                pool.shutdown()
            if meta_error is not None:
                raise meta_error
        except BaseException as exc:
            for w in written:
                discard(w)
            if meta.exception() is None:  # the rows went in: take them out again
                st.db.delete_rowids(rids.tolist())
            if isinstance(exc, OSError):
                raise StorageError(f"bulk load failed: {exc}") from exc
            raise
        manifest = st.manifest_with(
            segments=[s.entry for s in st.segments] + [s.entry for s in written]
        )
        try:
            st.dir.write_manifest(manifest)
        except OSError as exc:
            for w in written:
                discard(w)
            st.db.delete_rowids(rids.tolist())
            raise StorageError(f"bulk load failed: {exc}") from exc
        st.manifest = manifest
        st.segments.extend(written)
    st.count(len(rids))


def _fp_words(fps: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """(n, 2) hi/lo words for 64-bit (hi = fp, lo = 0) or 128-bit fingerprints."""
    if fps.ndim == 2:
        return fps
    out = np.zeros((len(fps), 2), dtype=np.uint64)
    out[:, 0] = fps
    return out
