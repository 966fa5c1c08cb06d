"""Opening a store's directory: what it holds back into memory, whatever the last run left.

:func:`open_directory`: lock; settle the settings against ``config.json`` (the stored width
and retention win, :meth:`StoreSettings.resolve <neardup.store.StoreSettings.resolve>`);
read the manifest; remove files it does not name (an interrupted flush's); open and verify
every segment it names (a damaged one raises :class:`CorruptFileError`) and check them against
the partition width; open SQLite (``PRAGMA quick_check`` unless this database file passed one
since the machine started, :func:`meta_check_due`; rebuilt with ``repair``); replay
every live log into SQLite (the records after the position SQLite recorded) and into the
memtable (a torn tail is truncated and counted in ``stats()["wal_truncated_bytes"]``); rows
whose log records are damaged but which SQLite had applied are restored from SQLite and the
damaged log is retired by a flush. A failed open closes what it opened and removes the files
it created (:func:`abandon_open`).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import re
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._durable import fsync_dir
from ..errors import CorruptFileError, NeardupError, UnsupportedVersionError
from .applier import MetaApplier, add_bands
from .boot import boot_id, file_stamp
from .layout import DataDir, read_json_file, write_json_file
from .meta import MetaDB, sqlite_error
from .partitions import check_partitions, load_segment
from .salvage import replace_database, salvage
from .settings import StoreSettings
from .state import StoreState
from .wal import (
    AddRecord,
    DeleteRecord,
    WalWriter,
    keys_from_log,
    read_wal,
    storage_error,
)
from .writes import rows_of

__all__ = [
    "META_CHECKED",
    "CheckConfig",
    "abandon_open",
    "meta_check_due",
    "open_directory",
    "read_config",
]

log = logging.getLogger("neardup.store")

#: called with the stored config body (None: a new store) once the directory is locked;
#: returns the body to persist (its ``store`` section is the store's own) or raises to refuse
CheckConfig = Callable[[dict[str, Any] | None], dict[str, Any]]

#: a metadata database at least this large is named before its ``quick_check`` and the check
#: timed after it: the check reads all of it, minutes for a 50 M window's (docs/service.md,
#: the ``--verify-meta`` option), and a server says nothing else meanwhile
QUICK_CHECK_SAY_BYTES = 1 << 30
#: the manifest's record of the last passing ``quick_check``: this boot's id and the
#: database file's device and inode (:func:`meta_check_due`)
META_CHECKED = "meta_checked"

_SEG_RE = re.compile(r"^seg-(-?\d+)-(\d+)\.nds(\.hidx)?(\.tmp)?$")
_WAL_RE = re.compile(r"^wal-(\d+)\.log$")
#: files an open may create; a failed open removes those that were not there before it
_CREATED = re.compile(
    r"^(config\.json|MANIFEST\.json|meta\.sqlite3(-wal|-shm)?|wal-\d+\.log|.*\.tmp)$"
)
#: rows of a replayed log whose band keys go into the memtable at once (bounded temporaries)
_REPLAY_CHUNK = 1 << 18


def read_config(path: Any) -> dict[str, Any] | None:
    """The config body stored in data directory ``path`` (None: no directory, or one without
    a config yet), read before the store is opened (it decides how to open it)."""
    if path is None:
        return None
    cfg = DataDir(path).config_path
    return read_json_file(cfg) if cfg.exists() else None


def open_directory(st: StoreState, check_config: CheckConfig | None) -> None:
    """Lock ``st.dir`` and recover it into ``st`` (the module docs), then start the SQLite
    applier. Raises a :class:`NeardupError` naming the file; nothing is left behind."""
    from .maintenance import finish_retention_change, flush

    d = st.dir
    assert d is not None
    root = d.root
    before = {f.name for f in root.iterdir()} if root.is_dir() else None
    try:
        d.lock()
    except OSError as exc:
        if not before:  # leave no new directory behind
            with contextlib.suppress(OSError):
                (root / "LOCK").unlink()
                root.rmdir()
        raise storage_error(exc, root, "open the data directory") from exc
    try:
        _open(st, check_config)
        st.applier = MetaApplier(st.db, st.pending)
        if st.expire_pending is not None:
            finish_retention_change(st)
        if st.flush_on_open:
            # the damaged log is retired only once its rows are in segments: a crash before
            # that finds the same log and restores the same rows again
            flush(st)
            log.warning(
                "%s: damaged log retired: its rows (%d restored from SQLite) are in segments",
                root,
                st.restored_rows,
            )
    except BaseException as exc:
        abandon_open(st, before)
        if isinstance(exc, NeardupError) or not isinstance(exc, Exception):
            raise
        err = (
            storage_error(exc, root, "open the store in")
            if isinstance(exc, OSError)
            else sqlite_error(exc, root / "meta.sqlite3", "open the store in")
        )
        if err is exc:
            raise
        raise err from exc


def abandon_open(st: StoreState, before: set[str] | None) -> None:
    """Undo a failed open: close what it opened and remove the files it created (on a full
    disk a retried start must not find less space each time)."""
    if st.applier is not None:
        with contextlib.suppress(Exception):
            st.applier.close()
        st.applier = None
    if st.wal is not None:
        with contextlib.suppress(Exception):
            st.wal.close()
        st.wal = None
    for s in st.segments:
        with contextlib.suppress(Exception):
            s.segment.close()
    st.segments = []
    if st.meta is not None:
        with contextlib.suppress(Exception):
            st.meta.close()
    assert st.dir is not None
    root = st.dir.root
    with contextlib.suppress(OSError):
        for f in root.iterdir():
            if (before is None or f.name not in before) and _CREATED.match(f.name):
                log.info("%s: removing what the failed open created", f)
                f.unlink(missing_ok=True)
    st.dir.unlock()
    if not before:  # the directory was new (or empty): leave nothing behind
        with contextlib.suppress(OSError):
            (root / "LOCK").unlink()
            root.rmdir()


def _settle_config(st: StoreState, check_config: CheckConfig | None) -> dict[str, Any] | None:
    """Resolve the settings against the stored ones; returns the config body to write (the
    caller's part from ``check_config``, the ``store`` section from the resolved settings), or
    None when it is the stored one."""
    d = st.dir
    assert d is not None
    where = str(d.config_path)
    stored = read_json_file(d.config_path) if d.config_path.exists() else None
    section = None if stored is None else stored.get("store")
    if stored is not None and not isinstance(section, Mapping):
        StoreSettings.from_config(section, where=where)  # raises: a config without one
    resolved, pending = st.settings.resolve(section, where=where, now=st.clock())
    st.settings = resolved
    body = dict(check_config(stored)) if check_config is not None else dict(stored or {})
    body["store"] = resolved.to_config()
    if pending is not None:
        body["store"]["expire_before"] = pending
        st.expire_pending = pending
    return None if body == stored else body


def _open(st: StoreState, check_config: CheckConfig | None) -> None:
    d = st.dir
    assert d is not None
    repair = st.settings.repair
    body = _settle_config(st, check_config)
    manifest = d.read_manifest()
    if manifest is None:
        manifest = {
            "segments": [],
            "wal_generation": 1,
            "wal_generations": [1],
            "gen_start_rowid": {"1": 0},
            "next_rowid": 0,
            "next_seq": 0,
        }
    st.manifest = manifest
    # what the open records in it (checks passed in this boot) is written once, below
    loaded = copy.deepcopy(manifest)
    st.next_rowid = int(manifest["next_rowid"])
    st.next_seq = int(manifest["next_seq"])
    gen = int(manifest["wal_generation"])
    gens = [int(g) for g in manifest["wal_generations"]]
    live = {e["file"] for e in manifest["segments"]}
    for f in d.root.iterdir():
        m = _SEG_RE.match(f.name)
        if m and (m.group(4) or f.name.removesuffix(".hidx") not in live):
            log.warning(
                "%s: removing file not named by the manifest (left by an interrupted flush)", f
            )
            f.unlink()
        w = _WAL_RE.match(f.name)
        if w and int(w.group(1)) not in gens:
            log.info("%s: removing retired log generation", f)
            f.unlink()
    for entry in manifest["segments"]:
        st.segments.append(load_segment(st, entry))
        st.next_rowid = max(st.next_rowid, int(entry["max_rowid"]) + 1)
    # the width decides which partition each stored row is in, so which rows retention drops
    check_partitions(st)
    if body is not None:
        write_json_file(d.config_path, body)
    st.meta = _open_meta(st, d, repair)
    if st.manifest != loaded and d.manifest_path.exists():
        # (a new store's is written once its log is made)
        try:
            d.write_manifest(st.manifest)
        except OSError as exc:  # only means that the next open checks again
            log.warning("%s: could not record the checks this open passed (%s)", d.root, exc)
    st.live_gens = []
    restore = False
    replayed: list[npt.NDArray[np.int64]] = []
    for g in gens:  # older generations: frozen memtables whose flush did not finish
        wal_path = d.wal_path(g)
        if not wal_path.exists():
            if g != gen:
                raise CorruptFileError(f"{wal_path}: log named by the manifest is missing")
            continue
        applied = st.db.applied_offset(g)
        # records SQLite applied are skimmed (no strings decoded): the memtable needs only
        # their numbers and band keys
        replay = read_wal(wal_path, repair=repair, applied=applied, skim_until=applied)
        if replay.generation != g:
            raise CorruptFileError(
                f"{wal_path}: header says generation {replay.generation}, manifest says {g}"
            )
        st.wal_truncated_bytes += replay.truncated_bytes
        st.replayed_records += len(replay.records)
        restore = restore or replay.damaged_at is not None
        todo = [r for r, e in zip(replay.records, replay.ends, strict=True) if e > applied]
        st.db.apply(todo, [(g, max(applied, replay.valid_bytes))])
        replayed.append(_replay_memtable(st, replay.records, wal_path))
        if g != gen:
            st.live_gens.append(g)
    if restore:
        starts = manifest.get("gen_start_rowid") or {}
        lo = min((int(starts.get(str(g), 0)) for g in gens), default=0)
        _restore_from_meta(st, lo, replayed)
        st.flush_on_open = True
    wal_path = d.wal_path(gen)
    if wal_path.exists():
        st.wal = WalWriter(wal_path, gen, create=False)
    else:
        st.db.set_applied(gen, 0)
        st.wal = WalWriter(wal_path, gen, create=True)
        if not d.manifest_path.exists():
            d.write_manifest(st.manifest)
    st.live_gens.append(gen)
    orphans = st.db.delete_from(st.next_rowid)
    if orphans:  # rows of a bulk load whose segments never reached the manifest
        log.warning(
            "%s: removed %d metadata rows the log and segments do not hold", d.root, orphans
        )
    st.documents = st.db.count()


def _db_bytes(path: Path) -> int:
    """The bytes of the SQLite database at ``path`` with its WAL (0 where there is none)."""
    size = 0
    for f in (path, path.with_name(path.name + "-wal")):
        with contextlib.suppress(OSError):
            size += f.stat().st_size
    return size


def _quick_check(meta: MetaDB, path: Path) -> list[str]:
    """``meta.quick_check()``, said and timed in the log when the database (with its WAL) holds
    :data:`QUICK_CHECK_SAY_BYTES` or more."""
    size = _db_bytes(path)
    if size < QUICK_CHECK_SAY_BYTES:
        return meta.quick_check()
    log.info(
        "%s: SQLite's quick_check reads all %.1f GB of it before the store opens (minutes once "
        "it outgrows memory); verify_meta=False (neardup serve --no-verify-meta) skips it, and "
        "neardup store verify checks it offline",
        path,
        size / 1e9,
    )
    t0 = time.perf_counter()
    problems = meta.quick_check()
    log.info("%s: quick_check done in %.1f s", path, time.perf_counter() - t0)
    return problems


def _checked_record(path: Path) -> dict[str, Any] | None:
    """What the manifest records once ``path`` passes a ``quick_check``: this boot and the
    file (device, inode); None where the boot cannot be told."""
    boot = boot_id()
    stamp = file_stamp(path)
    if boot is None or stamp is None:
        return None
    return {"boot_id": boot, "dev": stamp[0], "ino": stamp[1]}


def meta_check_due(settings: StoreSettings, manifest: Mapping[str, Any], path: Path) -> bool:
    """Whether an open runs SQLite's ``quick_check`` on the metadata database at ``path``:
    always with ``verify_meta=True``, never with False; with None (the default), unless the
    manifest records that this same file passed one since the machine last started.

    Why a restart in the same boot may skip it: :mod:`.boot`. A reboot changes the boot id and
    a restored or rebuilt file its inode, so both are checked again. The database changes
    with every write, so its size and time cannot be part of the record: a file overwritten in
    place in the same boot (``cp`` over it) is not checked again; open it with
    ``verify_meta=True`` after that."""
    if settings.verify_meta is not None:
        return settings.verify_meta
    now = _checked_record(path)
    return now is None or manifest.get(META_CHECKED) != now


def _record_check(st: StoreState, path: Path) -> None:
    """Record in the manifest (in memory: :func:`_open` writes it) that ``path`` passed a
    ``quick_check`` in this boot."""
    now = _checked_record(path)
    if now is not None:
        st.manifest[META_CHECKED] = now


def _open_meta(st: StoreState, d: DataDir, repair: bool) -> MetaDB:
    """Open SQLite and (:func:`meta_check_due`) run ``PRAGMA quick_check``. A damaged database
    is refused, naming it; with ``repair`` it is rebuilt from every row it can still read (the
    damaged file is kept beside it) and every live log is re-applied on top. A passing check
    is recorded in the manifest with this boot's id."""
    path = d.meta_path
    meta: MetaDB | None = None
    due = meta_check_due(st.settings, st.manifest, path)
    if not due and st.settings.verify_meta is None and _db_bytes(path) >= QUICK_CHECK_SAY_BYTES:
        log.info(
            "%s: quick_check skipped: this file passed one since the machine started (a "
            "restart after a process's crash leaves SQLite's pages whole); verify_meta=True "
            "(neardup serve --verify-meta) runs it anyway",
            path,
        )
    try:
        meta = MetaDB(path, st.settings.read_threads, st.settings.resident_summaries)
        problems = _quick_check(meta, path) if due else []
    except sqlite3.DatabaseError as exc:
        if meta is not None:
            meta.close()
        problems = [str(exc)]
        if not repair:
            raise sqlite_error(exc, path, "open") from exc
    if not problems:
        assert meta is not None
        if due:
            _record_check(st, path)
        return meta
    if not repair:
        assert meta is not None
        meta.close()
        raise CorruptFileError(
            f"{path}: SQLite integrity check failed ({'; '.join(problems[:3])}); nothing was "
            "changed. Open with repair=True (neardup serve --repair) to rebuild it from every "
            "row it can still read plus the log, or restore it from a backup"
        )
    if meta is not None:
        with contextlib.suppress(Exception):
            meta.close()
    rebuilt = path.with_name(path.name + ".rebuild")
    held = (
        np.unique(np.concatenate([s.segment.rowids for s in st.segments])) if st.segments else None
    )
    kept, bad = salvage(path, rebuilt, max_rowid=st.next_rowid, held=held)
    aside = replace_database(path, rebuilt)
    fsync_dir(d.root)
    log.error(
        "%s: repair: SQLite database damaged (%s); rebuilt with %d readable rows "
        "(%d unreadable row-id ranges); the damaged file is kept as %s",
        path,
        "; ".join(problems[:3]),
        kept,
        bad,
        aside.name,
    )
    return MetaDB(path, st.settings.read_threads, st.settings.resident_summaries)


def _restore_from_meta(st: StoreState, lo: int, replayed: list[npt.NDArray[np.int64]]) -> None:
    """Put back rows whose log records are damaged but which SQLite had already applied
    (acknowledged writes): every SQLite row from row id ``lo`` (the first row of the oldest
    live log) that no segment and no readable log record holds goes to the memtable; rows
    deleted there are marked deleted. The caller then flushes, which retires the log."""
    held = [r for r in replayed if len(r)]
    for s in st.segments:
        rids = s.segment.rowids
        if len(rids) and int(rids[-1]) >= lo:
            held.append(np.asarray(rids[rids >= lo]))
    skip = np.unique(np.concatenate(held)) if held else np.zeros(0, np.int64)
    rows = st.db.rows_from(lo, skip)
    adds = [
        AddRecord(
            r.rowid,
            r.time,
            int.from_bytes(r.fp[:8], "little"),
            int.from_bytes(r.fp[8:], "little"),
            r.chash,
            r.flags,
            r.id,
            r.text,
            r.metadata,
        )
        for r in rows
    ]
    if adds:
        added = rows_of(adds, st.bits)
        st.memtable.add(added.fingerprints, added.rowids, added.times)
        add_bands(st, adds, added.rowids)  # from the texts SQLite holds
        st.next_rowid = max(st.next_rowid, adds[-1].rowid + 1)
    st.memtable_deleted.update(st.db.deleted_between(lo, st.next_rowid).tolist())
    st.restored_rows = len(adds)
    log.error(
        "%s: %d acknowledged rows whose log records are damaged were restored from SQLite",
        st.dir.root if st.dir else None,
        len(adds),
    )


def _replay_memtable(
    st: StoreState, records: Sequence[AddRecord | DeleteRecord], wal_path: Any
) -> npt.NDArray[np.int64]:
    """Replayed records into the memtable (deletes marked); returns the added row ids."""
    adds = [r for r in records if isinstance(r, AddRecord)]
    for r in records:
        if isinstance(r, DeleteRecord):
            st.memtable_deleted.add(r.rowid)
        st.next_rowid = max(st.next_rowid, r.rowid + 1)
    if not adds:
        return np.zeros(0, np.int64)
    added = rows_of(adds, st.bits)
    st.memtable.add(added.fingerprints, added.rowids, added.times)
    # in chunks: each becomes one band section at once (BandIndex.insert_many), merged in one numba
    # pass; bounded temporaries for a full memtable
    for c in range(0, len(adds), _REPLAY_CHUNK):
        part = adds[c : c + _REPLAY_CHUNK]
        rids = added.rowids[c : c + _REPLAY_CHUNK]
        ent, present, sk = _logged_bands(st, part, wal_path)
        add_bands(st, part, rids, ent)
        if st.sketchtable is not None and present.any():
            st.sketchtable.put(rids[present], sk[present])
    return added.rowids


def _logged_bands(
    st: StoreState, adds: Sequence[AddRecord], wal_path: Any
) -> tuple[npt.NDArray[np.uint64] | None, npt.NDArray[np.bool_], npt.NDArray[np.uint8]]:
    """(the band keys of replayed rows, read from their ``ADD_KEYS`` records, None without the
    MinHash channel; whether each row's sketch was logged; the sketches). A store with the
    channel logs every add with its keys: an ``ADD`` without them is refused
    (:class:`UnsupportedVersionError`, naming the log)."""
    none = np.zeros(len(adds), np.bool_), np.zeros((len(adds), st.sketch_width), np.uint8)
    if st.band_keys_of is None or not adds:
        return None, *none
    if any(r.keys is None for r in adds):
        raise UnsupportedVersionError(
            f"{wal_path}: log records without MinHash band keys in a store with the MinHash "
            "channel (a log written by an earlier build); this build reads log version 1 with "
            "the keys. Deduplicate into a new data directory"
        )
    bands = st.band_keys_of([]).shape[1]
    try:
        return keys_from_log([r.keys for r in adds], bands, st.sketch_width)  # type: ignore[misc]
    except ValueError as exc:  # a store's plan is fixed: a mismatch means other keys
        log.warning("logged band keys not used (%s): computed from the texts", exc)
        return st.band_keys_of(_replayed_texts(st, adds)), *none


def _replayed_texts(st: StoreState, adds: Sequence[AddRecord]) -> list[str | None]:
    """The texts of replayed records; skimmed ones (``read_wal``'s ``skim_until``: id ``""``,
    text not decoded) are read from SQLite, which holds them."""
    skimmed = [r.rowid for r in adds if r.id == ""]
    rows = st.db.fetch(skimmed, with_text=True) if skimmed else {}
    return [
        (rows[r.rowid].text if r.rowid in rows else None) if r.id == "" else r.text for r in adds
    ]
