"""The live segments of a store's time partitions: writing one segment per partition, loading
the ones the manifest names (with their search index, saved beside each as ``.hidx``),
removing them, and checking that every segment fits the store's partition width.

Used by :mod:`.recovery` (open) and :mod:`.maintenance` (flush, compaction, retention, bulk
loads); the segment file format itself is :mod:`.segment`.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError, CorruptFileError, FormatError, StorageError
from ..index.bands import BandSection, MergedSection, section_from_rows, sections_for_rows
from ..index.scan import BruteIndex
from .boot import boot_id, file_stamp, same_boot_record
from .memindex import build_index, compress_pays, hamming_index_class
from .segment import Segment, open_segment, write_segment
from .sketches import SketchTable
from .state import LiveSegment, StoreState

__all__ = ["check_partitions", "discard", "load_segment", "new_segment", "write_segments"]

log = logging.getLogger("neardup.store")

BandKeys = tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]] | BandSection | None
#: what one segment's band-key section is written from: a compaction's merge besides
SegmentBands = BandKeys | MergedSection


def load_segment(st: StoreState, entry: dict[str, Any]) -> LiveSegment:
    """Open, verify and index the segment a manifest entry names."""
    assert st.dir is not None
    path = st.dir.root / entry["file"]
    if not path.exists():
        raise CorruptFileError(
            f"{path}: segment named by the manifest is missing; restore it, or remove its entry "
            "from MANIFEST.json to drop its rows"
        )
    checked = _checked_in_this_boot(st, entry, path)
    seg = open_segment(path, verify="segment" not in checked)
    if seg.checksum != int(entry["xxh64"]) or len(seg) != int(entry["count"]):
        seg.close()
        raise CorruptFileError(
            f"{path}: segment does not match its manifest entry (checksum or row count)"
        )
    mark = entry.get("expired_before")
    live = LiveSegment(
        entry,
        seg,
        segment_index(st, seg, entry, trusted="index" in checked),
        expired_before=-math.inf if mark is None else float(mark),
    )
    _record_checked(live)
    return live


def _checked_in_this_boot(st: StoreState, entry: dict[str, Any], path: Path) -> set[str]:
    """Which of a segment's files (``"segment"``, ``"index"``) passed their checks in this boot
    and have not changed since (the entry's ``checked`` record, :func:`_record_checked`): their
    checksums and row bounds need not be read again (:mod:`.boot`). Neither with
    ``verify_meta=True``, which checks everything on every open."""
    if st.settings.verify_meta:
        return set()
    rec = entry.get("checked")
    if rec is None or not same_boot_record(rec, boot_id()):
        return set()
    out: set[str] = set()
    if rec.get("segment") == file_stamp(path):
        out.add("segment")
        side = _side(path)
        if rec.get("index") is not None and rec["index"] == file_stamp(side):
            out.add("index")
    return out


def _record_checked(live: LiveSegment) -> None:
    """Record in a segment's manifest entry that its file and (when its index was loaded from
    it or saved to it) its ``.hidx`` passed their checks in this boot, as they are now
    (:func:`_checked_in_this_boot`); the manifest's next write keeps it."""
    path = live.segment.path
    boot = boot_id()
    stamp = file_stamp(path)
    if boot is None or stamp is None:
        live.entry.pop("checked", None)
        return
    side = None if isinstance(live.index, BruteIndex) else file_stamp(_side(path))
    live.entry["checked"] = {"boot_id": boot, "segment": stamp, "index": side}


def _side(path: Path) -> Path:
    """The segment's saved search index."""
    return path.with_name(path.name + ".hidx")


def segment_index(
    st: StoreState, seg: Segment, entry: dict[str, Any], *, trusted: bool = False
) -> Any:
    """The segment's search index: its saved ``.hidx`` when it fits the store's settings, else
    built (and saved); brute force when no index can be built. ``trusted``: the ``.hidx``
    passed its checks in this boot, unchanged since (its checksums are not read again)."""
    try:
        return _fast_segment_index(st, seg, entry, trusted)
    except Exception:  # a broken index must not take the store down: search exactly, slowly
        log.exception(
            "%s: building the segment's HammingIndex failed; using brute-force search", seg.path
        )
        return BruteIndex(seg.fingerprints, seg.rowids)


def _fast_segment_index(
    st: StoreState, seg: Segment, entry: dict[str, Any], trusted: bool = False
) -> Any:
    cls = hamming_index_class()
    if cls is None or len(seg) < 256:
        return BruteIndex(seg.fingerprints, seg.rowids)
    from .memindex import _FastIndex

    settings = st.settings
    compress = bool(settings.compress_tables)
    block = settings.table_block_bytes
    assert block is not None
    side = _side(seg.path)
    if side.exists() and int(entry.get("radius", -1)) >= st.radius:
        try:
            # mmap: a compressed index's blocks are decoded per probe, never whole
            idx = cls.load(side, mmap=True, verify=not trusted)
            if len(idx) != len(seg):
                log.warning(
                    "%s: index holds %d rows, segment %d; rebuilding", side, len(idx), len(seg)
                )
            elif idx.compressed != (
                compress
                and compress_pays(len(seg), bits=st.bits, max_distance=st.radius, block_bytes=block)
            ):
                log.info(
                    "%s: rebuilding the segment index %s (compress_tables=%s)",
                    side,
                    "compressed" if compress else "uncompressed",
                    compress,
                )
            else:
                return _FastIndex(idx)
        except FormatError as exc:
            log.warning(
                "%s: unusable index (%s); rebuilding it from the verified segment", side, exc
            )
    fast = build_index(
        seg.fingerprints,
        seg.rowids,
        bits=st.bits,
        max_distance=st.radius,
        compress=compress,
        block_bytes=block,
    )
    if isinstance(fast, BruteIndex):
        return fast
    try:
        fast.index.save(side)
        entry["radius"] = st.radius
    except Exception as exc:
        side.unlink(missing_ok=True)
        log.warning("%s: could not save segment index (%s)", side, exc)
    return fast


def write_segments(
    st: StoreState,
    fps: npt.NDArray[np.uint64],
    rids: npt.NDArray[np.int64],
    ts: npt.NDArray[np.float64],
    bands: BandKeys = None,
    sketches: SketchTable | None = None,
    *,
    row_bands: npt.NDArray[np.uint64] | None = None,
    row_sketches: npt.NDArray[np.uint8] | None = None,
) -> list[LiveSegment]:
    """One segment per partition; ``bands`` (compact keys and row ids, or a memtable
    :class:`BandSection`; rows not in ``rids`` are left out) becomes each segment's band-key
    section (None: an empty one); ``sketches``, the rows' MinHash sketches (None: no sketch
    section).

    A bulk load gives its rows' own keys and sketches instead, aligned with ``rids``:
    ``row_bands`` (n, bands) compact keys whose group is their column
    (:func:`~neardup.index.band_section.columns_are_groups`), each partition's section sorted from its
    rows alone (:func:`~neardup.index.band_section.section_from_rows`, rows as positions), and
    ``row_sketches`` (n, width): no memtable-like table of every row is built and then cut per
    partition. The segments are the same bytes either way
    (tests/store/test_store_bands.py)."""
    assert st.dir is not None
    parts = st.partition_of(ts)
    # the rows by partition, then by row id: one sort, however many partitions they span
    order = np.lexsort((rids, parts))
    cuts = (np.flatnonzero(np.diff(parts[order])) + 1).tolist()
    each = [order[a:b] for a, b in zip([0, *cuts], [*cuts, len(order)], strict=True)]
    each = each if len(order) else []
    rows = [rids[o] for o in each]
    sections: list[Any] = [None] * len(each)
    if isinstance(bands, BandSection):  # the band keys cut for every segment in one pass
        sections = list(sections_for_rows(bands, rows))
    written: list[LiveSegment] = []
    try:
        for o, r, bk in zip(each, rows, sections, strict=True):
            if row_bands is not None:
                bk = section_from_rows(row_bands[o], np.arange(len(o), dtype=np.int64), 0)
                if not len(bk):  # rows with no keys: the empty section a memtable cut gives
                    bk = BandSection.empty()
            elif bands is not None and not isinstance(bands, BandSection):
                inside = np.isin(bands[1], r)
                bk = (bands[0][inside], bands[1][inside])
            sk: Any = None
            if row_sketches is not None:
                sk = (np.ones(len(o), np.bool_), row_sketches[o])
            elif sketches is not None:
                sk = sketches.lookup(r)
            written.append(new_segment(st, int(parts[o[0]]), fps[o], r, ts[o], bk, sk))
    except BaseException as exc:
        for s in written:
            s.segment.close()
            for suffix in ("", ".hidx"):
                Path(str(s.segment.path) + suffix).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise StorageError(
                f"cannot write segment in {st.dir.root}: {exc}; the log still holds every row"
            ) from exc
        raise
    return written


def new_segment(
    st: StoreState,
    partition: int,
    f: npt.NDArray[np.uint64],
    r: npt.NDArray[np.int64],
    t: npt.NDArray[np.float64],
    band_keys: SegmentBands = None,
    sketches: tuple[npt.NDArray[np.bool_], npt.NDArray[np.uint8]] | None = None,
    last_partition: int | None = None,
) -> LiveSegment:
    """Write one segment (rows sorted by row id) and open it with its index: the rows of
    ``partition`` (to ``last_partition`` for a merge of ended partitions; the file's header
    and name carry the first)."""
    assert st.dir is not None
    with st.seq_lock:
        seq = st.next_seq
        st.next_seq += 1
    path = st.dir.segment_path(partition, seq)
    checksum = write_segment(
        path, f, r, t, partition=partition, band_keys=band_keys, sketches=sketches
    )
    entry = {
        "file": path.name,
        "partition": partition,
        "count": len(r),
        "xxh64": checksum,
        "min_rowid": int(r[0]) if len(r) else -1,
        "max_rowid": int(r[-1]) if len(r) else -1,
        "radius": -1,
    }
    if last_partition is not None and last_partition != partition:
        entry["last_partition"] = last_partition
    seg = open_segment(path, verify=False)  # write_segment has just read it back and checked it
    live = LiveSegment(entry, seg, segment_index(st, seg, entry))
    _record_checked(live)
    return live


def discard(s: LiveSegment) -> None:
    """Close a segment and remove its files."""
    path = s.segment.path
    s.segment.close()
    path.unlink(missing_ok=True)
    Path(str(path) + ".hidx").unlink(missing_ok=True)


def check_partitions(st: StoreState) -> None:
    """Refuse (:class:`ConfigError`) a store whose segments do not fit its partition width
    (every segment's times inside its partitions): refusing deletes nothing, a wrong width
    would make retention drop rows of the wrong time."""
    width = st.settings.partition_seconds
    assert width is not None
    for s in st.segments:
        seg = s.segment
        first, last = s.partition, s.last_partition
        if last < first or (
            len(seg)
            and not (
                first <= math.floor(seg.min_time / width) <= last
                and first <= math.floor(seg.max_time / width) <= last
            )
        ):
            held = f"partition {first}" if first == last else f"partitions {first} to {last}"
            raise ConfigError(
                f"{seg.path}: {held} holds times {seg.min_time} to "
                f"{seg.max_time}, which are not in that range at a width of {width:g} s; "
                "the store was written with another partition width. Nothing was changed: "
                "restore the config.json the store was created with"
            )
