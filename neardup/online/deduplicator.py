"""Online near-duplicate detection: a durable, time-windowed index with atomic check-and-insert.

:class:`Deduplicator` owns one *writer thread* and a queue. Callers validate and fingerprint
their documents in their own thread, submit an operation and wait on a future. The writer takes
everything queued (waiting up to ``commit_interval_ms`` for more to join: group commit),
decides every document **in arrival order** — against the index *and* against the documents
added earlier in the same group — appends the log records, fsyncs once, applies them to the
metadata and the memtable, and only then resolves the futures. So of two near-duplicates that
arrive together (same batch or concurrent calls) exactly one is added and the other reports it
as its match, and every acknowledged ``add`` / ``check_and_add`` is on disk.

Reads (``check``) are sequenced by the same writer, so a check sees every write acknowledged
before it was submitted. ``get``, ``len`` and ``in`` read the metadata directly.

Matching rules, per candidate within the search radius:

* same content hash (:func:`neardup.content_hash`) -> duplicate, distance as found, score 1.0;
* an *empty* text (no features, fingerprint 0) only matches by content hash;
* with a verifier: candidates within ``verifier.candidate_distance(len(text))`` are checked
  with ``verifier.verify(text, stored_text, distance)`` when the stored text is available
  (``store_text=True`` or same group); otherwise (text not stored) the distance rule applies;
* distance rule: duplicate when ``distance <= max_distance``; score None.

Storage layout and recovery: :mod:`neardup.store` (see ``docs/store.md``).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from ..errors import (
    ConfigError,
    IndexStateError,
    InputError,
    InputTypeError,
    NotFoundError,
    StorageError,
)
from ..fingerprint.distance import as_fingerprints, hamming_cdist
from ..store.engine import Store, Unsynced, fp_words, lower_thread_priority, parse_duration
from ..store.wal import HEADER_SIZE, AddRecord, DeleteRecord

__all__ = ["Decision", "Deduplicator", "Match"]

log = logging.getLogger("neardup.store")

_EMPTY_FLAG = 1
_NO_HASH = bytes(16)
#: most documents one write group decides (a single batch larger than this is still one group)
MAX_GROUP_DOCS = 2048
#: no background merge starts within this many seconds of a bulk_load (a seed of many chunks
#: would otherwise rewrite each partition once per chunk)
_BULK_QUIET_S = 10.0
#: groups up to this many documents find their within-group pairs by brute force (an index
#: build costs more than the n^2/2 distances there)
_BRUTE_PAIRS = 256
#: default of ``max_future_seconds``: a document's time may be at most this far past now
MAX_FUTURE_SECONDS = 86400.0
#: deepest nesting of arrays / objects accepted in ``metadata`` (the document itself is level 1)
MAX_METADATA_DEPTH = 64


@dataclass(frozen=True)
class Match:
    """A stored document that the checked document duplicates."""

    id: str
    distance: int
    score: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "distance": self.distance, "score": self.score}


_object_new = object.__new__


def _new_decision(
    id: str, duplicate: bool, added: bool, matches: tuple[Match, ...], fingerprint: int
) -> Decision:
    """``Decision(...)`` without the frozen dataclass's per-field ``object.__setattr__`` (the
    writer makes one per document); the result is an ordinary, equal :class:`Decision`."""
    d = _object_new(Decision)
    d.__dict__.update(
        id=id, duplicate=duplicate, added=added, matches=matches, fingerprint=fingerprint
    )
    return d


@dataclass(frozen=True)
class Decision:
    """Outcome for one document: whether it duplicates a stored one, and whether it was added."""

    id: str
    duplicate: bool
    added: bool
    matches: tuple[Match, ...]
    #: the SimHash fingerprint as an int (64 or 128 bits); :attr:`fingerprint_hex` is the
    #: lowercase hex string the HTTP API and :meth:`to_dict` return
    fingerprint: int

    @property
    def fingerprint_hex(self) -> str:
        """The fingerprint as the HTTP API writes it: lowercase hex, no ``0x``, no padding."""
        return format(self.fingerprint, "x")

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape the HTTP service answers (``fingerprint`` as :attr:`fingerprint_hex`)."""
        return {
            "id": self.id,
            "duplicate": self.duplicate,
            "added": self.added,
            "matches": [m.to_dict() for m in self.matches],
            "fingerprint": format(self.fingerprint, "x"),
        }


# --------------------------------------------------------------------------------------------
@dataclass
class _Docs:
    """A validated, fingerprinted batch."""

    ids: list[str]
    texts: list[str]
    times: npt.NDArray[np.float64]
    metadata: list[str | None]  # JSON text
    fps: npt.NDArray[np.uint64]
    empty: npt.NDArray[np.bool_]
    chash: list[bytes]
    #: MinHash channel: signatures (n, hashes) uint16, whether each has tokens, band entry keys
    #: (n, bands) uint64; None without the channel
    sig: npt.NDArray[np.uint16] | None = None
    usable: npt.NDArray[np.bool_] | None = None
    bands: npt.NDArray[np.uint64] | None = None


@dataclass
class _Op:
    kind: str  # check | add | check_and_add | delete | flush | bulk | install | recover |
    # retention | stop
    docs: _Docs | None = None
    arg: Any = None
    future: Future[Any] = field(default_factory=Future)

    @property
    def n(self) -> int:
        return len(self.docs.ids) if self.docs is not None else 1


def _load_fingerprinter(spec: Any, stored: dict[str, Any] | None) -> Any:
    try:
        from ..fingerprint.simhash import Fingerprinter
    except ImportError:
        Fingerprinter = None
    if spec is None:
        cfg = stored
        if Fingerprinter is None or (
            cfg is not None and str(cfg.get("kind", "")).startswith("neardup.store.fallback")
        ):
            from ..store.fallback import SimpleFingerprinter

            log.warning(
                "neardup.fingerprint.simhash is not available; using the fallback SimpleFingerprinter"
            )
            return SimpleFingerprinter()
        return Fingerprinter.from_config(cfg) if cfg is not None else Fingerprinter()
    if isinstance(spec, Mapping):
        if Fingerprinter is None:
            raise ConfigError(
                "fingerprinter given as a config dict, but neardup.fingerprint is not available"
            )
        return Fingerprinter.from_config(dict(spec))
    if not (hasattr(spec, "fingerprint_batch") or hasattr(spec, "fingerprint_many")) or not hasattr(
        spec, "config"
    ):
        raise ConfigError(
            f"fingerprinter must be None, a Fingerprinter or its config dict, got {type(spec).__name__}"
        )
    return spec


def _load_verifier(spec: Any, stored: dict[str, Any] | None) -> Any:
    if spec is False or spec is None:
        return None
    if spec is True:
        try:
            from ..verify.rule import Verifier
        except ImportError:
            log.warning("neardup.verify.rule is not available; deciding by the distance rule only")
            return None
        return Verifier.from_config(stored) if stored is not None else Verifier()
    if not (hasattr(spec, "verify") and hasattr(spec, "candidate_distance")):
        raise ConfigError(f"verify must be True, False or a Verifier, got {type(spec).__name__}")
    return spec


def _jsonable(d: Any) -> Any:
    return json.loads(json.dumps(d, sort_keys=True, default=str))


@dataclass
class _Inflight:
    """A decided group on its way to the log's fsync (pipelined group commit)."""

    group: list[_Op]
    results: list[Any]
    unsynced: Unsynced | None  # None: nothing written (reads only, or every op failed)
    counts: tuple[int, int, int, int]  # documents, checks, adds, duplicates


def _check_kind(kind: str) -> None:
    """The document verbs :meth:`Deduplicator.submit` takes."""
    if kind not in ("check", "add", "check_and_add"):
        raise InputError(f"kind must be 'check', 'add' or 'check_and_add', got {kind!r}")


#: an fdatasync slower than this is counted in ``stats()["wal_slow_syncs"]``
SLOW_SYNC_S = 0.002


class _Syncer:
    """Pipelined group commit: fsyncs the log behind the writer and only then answers.

    The writer decides a group, writes its records to the log (no fsync), applies them in
    memory and hands the group here; while this thread waits for ``fdatasync`` the writer
    already decides the next group (which sees the previous one's rows, as it must). One
    fsync covers every group written before it started (natural group commit). Nothing is
    acknowledged before the fsync that covers it: a crash loses only unanswered writes.

    A failed fsync fails that batch and every group decided after it (they may build on it);
    the writer then takes them back (:meth:`Deduplicator._recover_failed_sync`: memtable,
    pending overlay, the log cut back to its last durable offset) before deciding anything
    else, so nothing refused stays visible.
    """

    def __init__(self, owner: Deduplicator) -> None:
        self._owner = owner
        self._cv = threading.Condition()
        self._queue: list[_Inflight] = []
        self._busy = False
        self._stop = False
        self._waiters = 0  # threads in drain()
        self.failed: StorageError | None = None
        self.failed_items: list[_Inflight] = []
        # fdatasync timings (monitoring: the disk's share of a write's latency)
        self.syncs = 0
        self.sync_seconds = 0.0
        self.slow_syncs = 0  # above SLOW_SYNC_S
        self.max_sync_seconds = 0.0
        self._thread = threading.Thread(target=self._run, name="neardup-syncer", daemon=True)
        self._thread.start()

    def submit(self, item: _Inflight) -> None:
        with self._cv:
            err = self.failed
            if err is None:
                self._queue.append(item)
                self._cv.notify()
                return
            self.failed_items.append(item)  # decided on top of a failed sync: refused too
        # normally a recovery is queued already; after one that could not cut the log back,
        # this makes sure the writer refuses the group instead of leaving its caller waiting
        self._owner._request_recovery()

    def try_inline(self, item: _Inflight) -> bool:
        """Sync and answer ``item`` in the calling thread when this syncer is idle (nothing
        queued, no fsync in flight, no failure pending); return False, doing nothing, otherwise
        (then :meth:`submit` it). While the caller syncs, it *is* the syncer: the thread waits,
        so there is still one fsync at a time, in order, with the same failure handling.

        For a caller that decided ``item`` inline (the service's event loop): it waits for the
        disk itself instead of handing the group to this thread, whose wake-up after the
        fsync needs the interpreter lock, which that caller holds most of the time (measured
        at 1,000 requests/s: fdatasync 0.36 ms at p50 in the kernel, 1.26 ms on average as
        seen by this thread).
        """
        with self._cv:
            if self.failed is not None or self._queue or self._busy or self._stop:
                return False
            self._busy = True
        self._process([item])
        return True

    def drain(self) -> None:
        """Wait until every submitted group is answered (or refused)."""
        with self._cv:
            self._waiters += 1
            try:
                while self._queue or self._busy:
                    self._cv.wait()
            finally:
                self._waiters -= 1

    def close(self) -> None:
        self.drain()
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._stop and (not self._queue or self._busy):
                    self._cv.wait()
                if not self._queue:
                    return
                items, self._queue = self._queue, []
                self._busy = True
            self._process(items)
            del items  # not kept alive (and walked by every full GC) while waiting

    def _process(self, items: list[_Inflight]) -> None:
        """fsync (when ``items`` wrote anything), then answer them in order, or refuse them and
        every later group; the caller has set ``_busy``, this clears it."""
        store = self._owner.store
        err: StorageError | None = None
        # groups that wrote nothing need no fsync: every earlier write was synced by an
        # earlier batch (batches are answered in order, and a failure stops everything)
        if any(it.unsynced is not None for it in items):
            t0 = time.perf_counter()
            try:
                assert store.wal is not None
                store.wal.sync()
            except StorageError as exc:
                err = exc
            except Exception as exc:  # pragma: no cover - treated like a failed sync
                err = StorageError(f"cannot sync the write-ahead log: {exc}")
            took = time.perf_counter() - t0
            self.syncs += 1
            self.sync_seconds += took
            self.slow_syncs += took > SLOW_SYNC_S
            self.max_sync_seconds = max(self.max_sync_seconds, took)
        if err is None:
            for it in items:
                if it.unsynced is not None:
                    store.acknowledge(it.unsynced)
                self._owner._resolve_group(it)
            with self._cv:
                self._busy = False
                if self._queue or self._waiters:  # the thread (after an inline sync), drain()
                    self._cv.notify_all()
            return
        log.error("write-ahead log sync failed; refusing the groups not yet synced: %s", err)
        with self._cv:
            self.failed = err
            more, self._queue = self._queue, []
            self.failed_items.extend(items + more)
            self._busy = False
            self._cv.notify_all()
        # the writer takes them back first, then refuses them: a caller that sees the
        # error sees a store without them
        self._owner._request_recovery()


def _nesting_depth(value: Any, limit: int) -> int:
    """Nesting depth of dicts / lists in ``value`` (1 for a flat dict), without recursion;
    stops counting past ``limit``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if d > deepest:
            deepest = d
            if deepest > limit:
                return deepest
        if isinstance(v, Mapping):
            stack.extend((x, d + 1) for x in v.values() if isinstance(x, (Mapping, list, tuple)))
        elif isinstance(v, (list, tuple)):
            stack.extend((x, d + 1) for x in v if isinstance(x, (Mapping, list, tuple)))
    return deepest


def lsh_keys(
    verifier: Any, plan: Any, texts: Sequence[str | None]
) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.bool_], npt.NDArray[np.uint64]]:
    """(signatures (n, hashes), usable (n,), band entry keys (n, bands)) of ``texts`` as the
    batch pipeline computes them (``None`` texts: not usable)."""
    from ..batch.minhash import minhash_signatures
    from ..store.bands import band_entries

    n = len(texts)
    if n == 0:
        return (
            np.zeros((0, plan.hashes), np.uint16),
            np.zeros(0, bool),
            np.zeros((0, plan.bands), np.uint64),
        )
    given = [t if t is not None else "" for t in texts]
    sig, tokens = minhash_signatures(verifier, given, plan.hashes)
    usable = tokens > 0
    return sig, usable, band_entries(sig, usable, plan)


class DocumentPreparer:
    """Validate, fingerprint and content-hash a batch of documents: the part of
    :meth:`Deduplicator.submit` that runs in the caller's thread, apart from the writer (so a
    batch can be prepared in one thread or process and decided by
    :meth:`Deduplicator.submit_prepared` in another).

    Parameters
    ----------
    fingerprinter
        The deduplicator's fingerprinter.
    bits : int
        Fingerprint width (64 or 128).
    clock : callable
        Unix seconds; the time of documents that carry none.
    retention : float or None
        Seconds; a document whose time is older than ``now - retention`` is refused (it would
        be expired at once, so nothing acknowledged could be found).
    max_future_seconds : float
        A document whose time is more than this past now is refused.
    lsh : (Verifier, LshPlan) or None
        The MinHash channel: each document's signature and band keys are computed here too
        (:func:`neardup.pipeline.minhash.minhash_signatures`, the batch pipeline's tokens,
        shingles and seeds; :func:`neardup.store.bands.band_entries`).
    """

    def __init__(
        self,
        fingerprinter: Any,
        bits: int,
        clock: Callable[[], float],
        *,
        retention: float | None = None,
        max_future_seconds: float = MAX_FUTURE_SECONDS,
        lsh: tuple[Any, Any] | None = None,
    ) -> None:
        self.lsh = lsh
        self.fingerprinter = fingerprinter
        self.bits = int(bits)
        self.clock = clock
        self.retention = retention
        self.max_future_seconds = float(max_future_seconds)
        self._hash_many, self._digest_one = self._content_hashers()

    @staticmethod
    def _content_hashers() -> tuple[
        Callable[[list[str]], npt.NDArray[np.uint64]], Callable[[str], bytes] | None
    ]:
        """(content hashes of many texts, the big-endian digest of one text or None): those of
        :mod:`neardup.fingerprint`, or the fallback's while it cannot be imported."""
        try:
            from ..fingerprint.simhash import content_digest, content_hash_many
        except ImportError:
            from ..store.fallback import content_hash_many as fallback

            return fallback, None
        return (lambda texts: np.asarray(content_hash_many(texts), dtype=np.uint64)), content_digest

    def prepare(self, docs: Sequence[Mapping[str, Any]]) -> _Docs:
        """Validate ``docs`` (:class:`InputError` naming the field) and fingerprint them."""
        now = self.clock()
        ids: list[str] = []
        texts: list[str] = []
        times: list[float] = []
        metas: list[str | None] = []
        seen: dict[str, int] = {}
        for i, doc in enumerate(docs):
            # fast path: a plain dict with a valid id and text, no time and no metadata
            if type(doc) is dict:
                id_ = doc.get("id")
                text = doc.get("text")
                if (
                    type(id_) is str
                    and type(text) is str
                    and 0 < len(id_) <= 1024
                    and doc.get("time") is None
                    and doc.get("metadata") is None
                    and id_ not in seen
                ):
                    seen[id_] = i
                    ids.append(id_)
                    texts.append(text)
                    times.append(now)
                    metas.append(None)
                    continue
            id_, text, t, meta_s = self._check_doc(i, doc, now, seen)
            if t != now:
                self.check_time(f"documents[{i}].time", t, now)
            seen[id_] = i
            ids.append(id_)
            texts.append(text)
            times.append(t)
            metas.append(meta_s)
        fps, empty = self._fingerprint(texts)
        # 16 bytes per document: high word then low word, each little-endian
        if len(texts) == 1 and self._digest_one is not None:  # the service's usual request
            d = self._digest_one(texts[0])  # big-endian
            chash = [d[7::-1] + d[:7:-1]]
        else:
            ch = self._hash_many(texts) if texts else np.zeros((0, 2), np.uint64)
            raw = np.ascontiguousarray(ch, dtype="<u8").tobytes()
            chash = [raw[k : k + 16] for k in range(0, len(raw), 16)]
        out = _Docs(ids, texts, np.array(times, dtype=np.float64), metas, fps, empty, chash)
        if self.lsh is not None:
            out.sig, out.usable, out.bands = lsh_keys(*self.lsh, texts)
        return out

    def check_time(self, where: str, t: float, now: float) -> None:
        """Refuse a time the store could not keep: before 0, older than the retention window
        (it would be dropped at once) or more than ``max_future_seconds`` ahead of now."""
        oldest = 0.0 if self.retention is None else max(0.0, now - self.retention)
        newest = now + self.max_future_seconds
        if oldest <= t <= newest:
            return
        if t < 0:
            raise InputError(f"{where} must be unix seconds >= 0, got {t!r}")
        if t < oldest:
            raise InputError(
                f"{where} is {t!r}, older than the retention window of {self.retention:g} s "
                f"(now - retention = {oldest:.0f}): it would be dropped at once. Send documents "
                "from inside the window, or omit time (now)"
            )
        raise InputError(
            f"{where} is {t!r}, more than {self.max_future_seconds:g} s in the future (now = "
            f"{now:.0f}); times must be unix seconds up to now + max_future_seconds"
        )

    @staticmethod
    def _check_doc(
        i: int, doc: Any, now: float, seen: dict[str, int]
    ) -> tuple[str, str, float, str | None]:
        """Validate one document (every rule, with the message naming the field)."""
        where = f"documents[{i}]"
        if not isinstance(doc, Mapping):
            raise InputTypeError(
                f"{where} must be a mapping like {{'id': str, 'text': str}}, got {type(doc).__name__}"
            )
        if "id" not in doc:
            raise InputError(f"{where}.id is missing; every document needs a string id")
        id_ = doc["id"]
        if not isinstance(id_, str):
            raise InputTypeError(f"{where}.id must be a str, got {type(id_).__name__}")
        if not id_ or len(id_) > 1024:
            raise InputError(f"{where}.id must be 1 to 1024 characters, got {len(id_)}")
        if "text" not in doc:
            raise InputError(f"{where}.text is missing; every document needs a text")
        text = doc["text"]
        if not isinstance(text, str):
            raise InputTypeError(f"{where}.text must be a str, got {type(text).__name__}")
        t = doc.get("time")
        if t is None:
            t = now
        elif isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(float(t)):
            raise InputTypeError(
                f"{where}.time must be unix seconds (a finite number) or null, got {t!r}"
            )
        meta = doc.get("metadata")
        if meta is not None:
            if not isinstance(meta, Mapping):
                raise InputTypeError(
                    f"{where}.metadata must be an object (dict) or null, got {type(meta).__name__}"
                )
            depth = _nesting_depth(meta, MAX_METADATA_DEPTH)
            if depth > MAX_METADATA_DEPTH:
                raise InputError(
                    f"{where}.metadata is nested more than {MAX_METADATA_DEPTH} levels deep; "
                    "flatten it"
                )
            try:
                meta_s: str | None = json.dumps(meta, ensure_ascii=False, allow_nan=False)
            except (TypeError, ValueError, RecursionError) as exc:
                raise InputError(f"{where}.metadata must be JSON-serialisable: {exc}") from exc
        else:
            meta_s = None
        if id_ in seen:
            raise InputError(
                f"{where}.id {id_!r} repeats documents[{seen[id_]}].id; ids in one batch must be unique"
            )
        return id_, text, float(t), meta_s

    def _fingerprint(
        self, texts: list[str]
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
        fpr = self.fingerprinter
        if not texts:
            shape = (0,) if self.bits == 64 else (0, 2)
            return np.zeros(shape, np.uint64), np.zeros(0, bool)
        if hasattr(fpr, "fingerprint_batch"):
            b = fpr.fingerprint_batch(texts)
            fps, empty = b.fingerprints, np.asarray(b.empty, dtype=bool)
        else:
            fps = fpr.fingerprint_many(texts)
            empty = np.array([not t.strip() for t in texts], dtype=bool)
        return as_fingerprints(fps, bits=self.bits), empty


class Deduplicator:
    """Durable, time-windowed near-duplicate index with atomic check-and-insert.

    Parameters
    ----------
    path : str or path-like or None, default=None
        Data directory; None keeps everything in memory (nothing durable).
    max_distance : int, default=3
        SimHash distance within which a document is a duplicate (distance rule).
    retention : str or float or None, default=None
        Window, e.g. ``"48h"`` or seconds; older documents stop matching and whole partitions
        older than the window are dropped. None: the one the data directory was created with
        (nothing is dropped for a new store or one created without). The retention is stored
        with the data: a different value than the stored one raises :class:`ConfigError` unless
        ``allow_retention_change=True`` (or use :meth:`set_retention`).
    allow_retention_change : bool, default=False
        Accept a ``retention`` other than the stored one, store it and apply it (logged as a
        warning: a shorter window drops the partitions now outside it).
    max_future_seconds : float, default=86400
        Documents whose ``time`` is more than this ahead of now are refused (as are times
        before 0 or older than the retention window): every accepted time is one the store
        keeps until its retention expires.
    verify : bool or Verifier, default=True
        Verify candidates on their texts with :class:`neardup.verify.Verifier` (True: the
        default or the one stored in the data directory).
    fingerprinter : Fingerprinter or dict or None, default=None
        None: the one stored in the data directory, else ``Fingerprinter()``. A different one
        than the directory was created with raises :class:`ConfigError`.
    store_text : bool, default=True
        Keep texts (needed to verify later documents against them, and returned by ``get``).
    commit_interval_ms : float, default=0.0
        How long the writer waits for more operations to join a group before committing. The
        default 0 still groups: whatever queues up while one group is being decided and
        fsynced forms the next group, and a lone request pays no wait.
    max_segments_per_partition : int, default=2
        A partition with more segments is merged into one in the background.
    candidate_radius : int or None, default=None
        Largest SimHash distance searched for candidates. Default ``max_distance``: the
        verifier then only confirms or rejects candidates within ``max_distance`` (precision),
        which keeps searches cheap over tens of millions of fingerprints. Raise it (up to
        ``verifier.max_candidate_distance``, where each query is searched only as far as the
        verifier needs for its length) to recover more near-duplicate *short* texts, at a
        steep cost per query as the radius grows (see docs/store.md).
    max_matches : int, default=10
        Matches reported per document (closest first).
    memtable_size : int, default=1_000_000
        Rows kept in memory before they are written to a segment.
    partition_seconds : float or None, default=None
        Partition width; default ``max(3600, retention / 8)`` (1 day without retention): fewer,
        larger partitions keep the number of segments a query searches small. Fixed when the
        store is created (stored in its config.json); None uses the stored one, another value
        raises :class:`ConfigError`.
    clock : callable, default=time.time
        Source of "now" in unix seconds (inject one in tests).
    repair : bool, default=False
        Open a store whose log is damaged in the middle by cutting it at the damage (rows SQLite
        still holds are kept), or whose SQLite database is damaged by rebuilding it from every
        row it can still read plus the log.
    verify_meta : bool, default=True
        Run SQLite's ``PRAGMA quick_check`` on open (a scan of the whole database file; a
        damaged one is refused, naming it, unless ``repair``).
    candidates : {"lsh", "simhash"} or None, default=None
        ``"lsh"``: the candidates are the SimHash hits within ``max_distance`` plus the stored
        documents that share a MinHash band key with the document and agree on enough of its
        MinHash values (the batch pipeline's channel and plan: ``neardup dedup``'s defaults), all
        verified on the stored text; recall does not depend on the window's size. Needs
        ``verify`` and ``store_text``. ``"simhash"``: SimHash only (the classic mode;
        ``candidate_radius`` applies). None: the mode the data directory was created with (a
        directory from before this option: ``"simhash"``), else ``"lsh"`` when verifying stored
        texts, else ``"simhash"``. Stored in config.json; another explicit mode than the stored
        one raises :class:`ConfigError`.

    Examples
    --------
    >>> from neardup.online import Deduplicator
    >>> with Deduplicator(verify=False) as d:
    ...     a = d.check_and_add({"id": "a", "text": "the quick brown fox jumps over the lazy dog"})
    ...     b = d.check_and_add({"id": "b", "text": "the quick brown fox jumps over the lazy dog!"})
    >>> (a.added, b.duplicate, b.matches[0].id)
    (True, True, 'a')
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        max_distance: int = 3,
        retention: str | float | None = None,
        verify: Any = True,
        fingerprinter: Any = None,
        store_text: bool = True,
        commit_interval_ms: float = 0.0,
        max_matches: int = 10,
        candidate_radius: int | None = None,
        memtable_size: int = 1_000_000,
        max_segments_per_partition: int = 2,
        partition_seconds: float | None = None,
        clock: Callable[[], float] = time.time,
        repair: bool = False,
        allow_retention_change: bool = False,
        max_future_seconds: float = MAX_FUTURE_SECONDS,
        verify_meta: bool = True,
        candidates: str | None = None,
    ) -> None:
        if (
            isinstance(max_distance, bool)
            or not isinstance(max_distance, int)
            or not 0 <= max_distance <= 32
        ):
            raise ConfigError(f"max_distance must be an int in [0, 32], got {max_distance!r}")
        if (
            isinstance(commit_interval_ms, bool)
            or not isinstance(commit_interval_ms, (int, float))
            or not 0 <= commit_interval_ms <= 1000
        ):
            raise ConfigError(
                f"commit_interval_ms must be a number in [0, 1000], got {commit_interval_ms!r}"
            )
        if not isinstance(max_matches, int) or max_matches < 1:
            raise ConfigError(f"max_matches must be a positive int, got {max_matches!r}")
        if not isinstance(memtable_size, int) or memtable_size < 1:
            raise ConfigError(f"memtable_size must be a positive int, got {memtable_size!r}")
        if (
            isinstance(max_future_seconds, bool)
            or not isinstance(max_future_seconds, (int, float))
            or not 0 <= max_future_seconds < 1e12
        ):
            raise ConfigError(
                f"max_future_seconds must be a number in [0, 1e12), got {max_future_seconds!r}"
            )
        self.max_distance = max_distance
        self.retention = parse_duration(retention)
        self._retention_given = retention is not None
        self._partition_given = partition_seconds is not None
        self._allow_retention_change = bool(allow_retention_change)
        if partition_seconds is None:
            partition_seconds = max(3600.0, self.retention / 8) if self.retention else 86400.0
        elif not isinstance(partition_seconds, (int, float)) or partition_seconds <= 0:
            raise ConfigError(
                f"partition_seconds must be a positive number, got {partition_seconds!r}"
            )
        self.partition_seconds = float(partition_seconds)
        self.store_text = bool(store_text)
        self.commit_interval = float(commit_interval_ms) / 1000.0
        self.max_matches = max_matches
        self.clock = clock
        self.path = None if path is None else Path(path)

        stored: dict[str, Any] | None = None
        cfg_file = None if self.path is None else self.path / "config.json"
        if cfg_file is not None and cfg_file.exists():
            from ..store.layout import read_json_file

            stored = read_json_file(cfg_file)
        self.fingerprinter = _load_fingerprinter(
            fingerprinter, stored.get("fingerprinter") if stored else None
        )
        self.verifier = _load_verifier(verify, stored.get("verifier") if stored else None)
        self.bits = int(getattr(self.fingerprinter, "bits", 64))
        if candidate_radius is not None and (
            isinstance(candidate_radius, bool)
            or not isinstance(candidate_radius, int)
            or not max_distance <= candidate_radius <= self.bits
        ):
            raise ConfigError(
                f"candidate_radius must be an int in [max_distance ({max_distance}), "
                f"{self.bits}], got {candidate_radius!r}"
            )
        self.radius = max_distance if candidate_radius is None else candidate_radius
        self.candidates = self._candidate_mode(candidates, stored, candidate_radius)
        self.lsh_plan: Any = None
        if self.candidates == "lsh":
            from ..batch.minhash import LshPlan
            from ..batch.run import DedupConfig

            # the batch default (one rule); a store keeps the plan its band keys were made with
            kept_plan = (stored or {}).get("lsh")
            if kept_plan:
                fields = {k: v for k, v in kept_plan.items() if k != "hashes"}
                self.lsh_plan = LshPlan(**fields)
            else:
                self.lsh_plan = DedupConfig().lsh_plan()
        self._preparer = DocumentPreparer(
            self.fingerprinter,
            self.bits,
            clock,
            max_future_seconds=float(max_future_seconds),
            lsh=None if self.lsh_plan is None else (self.verifier, self.lsh_plan),
        )

        self.store = Store(
            self.path,
            bits=self.bits,
            radius=self.radius,
            partition_seconds=self.partition_seconds,
            memtable_size=memtable_size,
            check_config=self._check_config,
            repair=repair,
            verify_meta=verify_meta,
            band_keys_of=self._band_keys_of if self.lsh_plan is not None else None,
        )
        # the stored settings win (see _check_config); a legacy store's width is inferred
        self.partition_seconds = self.store.partition_seconds
        self._preparer.retention = self.retention
        self._cv = threading.Condition()
        self._queue: list[_Op] = []
        self._closed = False
        self._counters = {
            "checks": 0,
            "adds": 0,
            "duplicates": 0,
            "groups": 0,
            "group_docs": 0,
            "storage_errors": 0,
            "inline_groups": 0,  # groups decided in the caller's thread (submit(inline=True))
        }
        self._last_expire = 0.0
        self._stopping = False
        self._writer_busy = False  # the writer thread is deciding a group or housekeeping
        self._inline_busy = False  # a caller is deciding its documents (submit(inline=True))
        self._duties_due = False  # an inline group filled the memtable: the writer flushes
        self._writer_waits = False  # the writer thread waits for an inline turn to end
        self._compactor: threading.Thread | None = None
        self._compacting = False  # compact() is merging in the caller's thread
        self._last_bulk = -math.inf  # monotonic time of the last bulk_load
        self._compact_seen = -1
        self.max_segments_per_partition = max_segments_per_partition
        if self.retention is not None:
            self.store.expire(self.clock() - self.retention)
        self._warm_up()
        # durable stores answer a group once the log's fsync covers it, on this thread
        self._syncer: _Syncer | None = _Syncer(self) if self.store.wal is not None else None
        self._writer = threading.Thread(target=self._run, name="neardup-writer", daemon=True)
        self._writer.start()

    # ------------------------------------------------------------------ config
    def _candidate_mode(
        self, candidates: str | None, stored: dict[str, Any] | None, radius: int | None
    ) -> str:
        """The candidate mode: explicit, stored, or the default (see the class docs)."""
        if candidates not in (None, "lsh", "simhash"):
            raise ConfigError(f"candidates must be 'lsh' or 'simhash', got {candidates!r}")
        kept = None if stored is None else stored.get("candidates", "simhash")
        if kept is not None and candidates is not None and candidates != kept:
            raise ConfigError(
                f"{self.path}: the data directory was created with candidates={kept!r}; its "
                f"rows {'have no' if kept == 'simhash' else 'have'} MinHash band keys, so it "
                f"cannot be opened with candidates={candidates!r}. Omit candidates to use the "
                "stored mode, or use a new directory"
            )
        texts = self.verifier is not None and self.store_text
        mode = candidates or kept or ("lsh" if texts and radius is None else "simhash")
        if mode == "lsh" and not texts:
            raise ConfigError(
                "candidates='lsh' verifies candidates on their stored text: it needs verify=True "
                "and store_text=True (or use candidates='simhash')"
            )
        return mode

    def _band_keys_of(self, texts: Sequence[str | None]) -> npt.NDArray[np.uint64]:
        """Band entry keys of stored texts (recovery rebuilds the memtable's from the log)."""
        return lsh_keys(self.verifier, self.lsh_plan, texts)[2]

    def _check_store_settings(self, stored: dict[str, Any] | None) -> None:
        """Take the partition width and retention stored with the data (they decide which rows
        exist); refuse other explicit values, except a retention change that was allowed."""
        cfg = (stored or {}).get("store")
        if not cfg:
            return
        width = float(cfg["partition_seconds"])
        if self._partition_given and self.partition_seconds != width:
            raise ConfigError(
                f"{self.path}: the store was created with partition_seconds={width:g}, not "
                f"{self.partition_seconds:g}; a store's partition width cannot change. Omit "
                "partition_seconds to use the stored one"
            )
        self.partition_seconds = width
        kept = cfg.get("retention")
        kept = None if kept is None else float(kept)
        if not self._retention_given:
            if kept is not None:
                log.info("%s: using the stored retention of %g s", self.path, kept)
            self.retention = kept
            return
        if self.retention == kept:
            return
        was = "none (keep everything)" if kept is None else f"{kept:g} s"
        if not self._allow_retention_change:
            raise ConfigError(
                f"{self.path}: the store was created with retention {was}; refusing to open it "
                f"with retention {self.retention:g} s, which decides which documents are "
                "deleted. Omit retention to use the stored one, or change it explicitly: "
                "Deduplicator(..., allow_retention_change=True) or set_retention() "
                "(neardup serve --allow-retention-change)"
            )
        log.warning(
            "%s: retention changed from %s to %g s (allow_retention_change=True); documents "
            "older than the new window will be dropped",
            self.path,
            was,
            self.retention,
        )

    def _check_config(self, stored: dict[str, Any] | None) -> dict[str, Any]:
        self._check_store_settings(stored)
        fp_cfg = _jsonable(self.fingerprinter.config())
        v_cfg = (
            _jsonable(self.verifier.config())
            if self.verifier is not None and hasattr(self.verifier, "config")
            else None
        )
        if stored is not None:
            if stored.get("fingerprinter") != fp_cfg:
                raise ConfigError(
                    f"{self.path}: the data directory was created with fingerprinter config "
                    f"{stored.get('fingerprinter')}, but this Deduplicator uses {fp_cfg}; fingerprints "
                    "would not be comparable. Pass fingerprinter=None to use the stored one, or use a new directory"
                )
            if v_cfg is not None and stored.get("verifier") not in (None, v_cfg):
                raise ConfigError(
                    f"{self.path}: the data directory was created with verifier config {stored.get('verifier')}, "
                    f"but this Deduplicator uses {v_cfg}; pass verify=True to use the stored one, or use a new directory"
                )
        return {
            "format": 1,
            "candidates": self.candidates,
            **({"lsh": self.lsh_plan.to_dict()} if self.lsh_plan is not None else {}),
            "bits": self.bits,
            "fingerprinter": fp_cfg,
            "verifier": v_cfg if v_cfg is not None else (stored or {}).get("verifier"),
            # what decides which rows exist: partition p holds times in
            # [origin + p * width, origin + (p + 1) * width); retention drops whole partitions
            "store": {
                "version": 1,
                "partition_seconds": self.partition_seconds,
                "partition_origin": 0.0,
                "retention": self.retention,
            },
        }

    # ------------------------------------------------------------------ input
    def _prepare(self, docs: Sequence[Mapping[str, Any]]) -> _Docs:
        return self._preparer.prepare(docs)

    @staticmethod
    def _as_list(docs: Any) -> tuple[list[Mapping[str, Any]], bool]:
        if isinstance(docs, Mapping):
            return [docs], True
        if isinstance(docs, (str, bytes)) or not isinstance(docs, Sequence):
            raise InputTypeError(
                f"expected a document (mapping) or a list of documents, got {type(docs).__name__}"
            )
        return list(docs), False

    # ------------------------------------------------------------------ public API
    def _submit(self, op: _Op) -> Any:
        with self._cv:
            if self._closed:
                raise IndexStateError("this Deduplicator is closed; open a new one")
            self._queue.append(op)
            self._cv.notify()
        return op.future.result()

    def _docs_op(self, kind: str, docs: Any) -> Any:
        fut, single = self.submit(kind, docs)
        out = fut.result()
        return out[0] if single else out

    def submit(
        self, kind: str, docs: Any, *, inline: bool = False
    ) -> tuple[Future[list[Decision]], bool]:
        """Validate and fingerprint ``docs`` in the calling thread and queue them for the writer
        without waiting: the non-blocking form of :meth:`check` / :meth:`add` /
        :meth:`check_and_add` (``kind`` names one of them), for event loops
        (``await asyncio.wrap_future(future)``).

        Parameters
        ----------
        inline : bool, default=False
            When the writer is idle (nothing queued, no group being decided), decide the
            documents in the calling thread instead of handing them to the writer thread: the
            same decisions in the same order (callers take turns with the writer thread), minus
            a thread wake-up and the interpreter lock passing between two threads. When the
            syncer is idle too, the caller also runs the fsync (one at a time, in order, same
            failure handling; see ``_Syncer.try_inline``). The future resolves only once the
            log's fsync covers the documents. For small requests on an event loop; a large
            batch would hold the caller.

        Returns
        -------
        (Future, bool)
            A future resolved with the list of :class:`Decision` once the group is decided (and,
            for writes, fsynced), and whether ``docs`` was a single document.
        """
        _check_kind(kind)
        items, single = self._as_list(docs)
        return self.submit_prepared(kind, self._prepare(items), inline=inline), single

    def submit_prepared(
        self, kind: str, docs: _Docs, *, inline: bool = False
    ) -> Future[list[Decision]]:
        """Queue a batch that a :class:`DocumentPreparer` built with this deduplicator's
        fingerprinter has already validated and fingerprinted (in another thread or process);
        the future resolves as :meth:`submit`'s does (``inline`` as there)."""
        _check_kind(kind)
        op = _Op(kind, docs)
        if not docs.ids:
            op.future.set_result([])
            return op.future
        with self._cv:
            if self._closed:
                raise IndexStateError("this Deduplicator is closed; open a new one")
            if not (
                inline
                and not self._queue
                and not self._writer_busy
                and not self._inline_busy
                and not self._stopping
                and self.commit_interval == 0
            ):
                self._queue.append(op)
                self._cv.notify()
                return op.future
            # the writer is idle: decide here; the writer thread waits for this turn to end
            self._inline_busy = True
        try:
            self._dispatch([op], inline=True)
        except Exception as exc:  # as in the writer thread: fail what was in flight
            log.exception("writer: unexpected error")
            if not op.future.done():
                op.future.set_exception(exc)
        finally:
            flush_due = self.store.flush_due
            with self._cv:
                self._inline_busy = False
                self._counters["inline_groups"] += 1
                self._duties_due = self._duties_due or flush_due
                if self._queue or self._duties_due or self._writer_waits:
                    # queued meanwhile, the memtable is full, or the writer woke up for its
                    # housekeeping (a finished flush, retention) and waits for this turn
                    self._cv.notify()
        return op.future

    @overload
    def check(self, docs: Mapping[str, Any]) -> Decision: ...
    @overload
    def check(self, docs: Sequence[Mapping[str, Any]]) -> list[Decision]: ...
    def check(self, docs: Any) -> Any:
        """Would these documents be duplicates? Read-only; one document or a list."""
        return self._docs_op("check", docs)

    @overload
    def add(self, docs: Mapping[str, Any]) -> Decision: ...
    @overload
    def add(self, docs: Sequence[Mapping[str, Any]]) -> list[Decision]: ...
    def add(self, docs: Any) -> Any:
        """Insert unconditionally (the duplicate flag is still reported); durable on return."""
        return self._docs_op("add", docs)

    @overload
    def check_and_add(self, docs: Mapping[str, Any]) -> Decision: ...
    @overload
    def check_and_add(self, docs: Sequence[Mapping[str, Any]]) -> list[Decision]: ...
    def check_and_add(self, docs: Any) -> Any:
        """Atomically insert each document unless it duplicates a stored (or earlier) one."""
        return self._docs_op("check_and_add", docs)

    def get(self, id: str) -> dict[str, Any]:
        """The stored document: ``{"id", "time", "fingerprint" (hex), "metadata", "text"?}``."""
        if not isinstance(id, str):
            raise InputTypeError(f"id must be a str, got {type(id).__name__}")
        row = self.store.get_row(id)
        if row is None or (self.retention is not None and row.time < self.clock() - self.retention):
            raise NotFoundError(f"document {id!r} not found")
        hi = int.from_bytes(row.fp[:8], "little")
        lo = int.from_bytes(row.fp[8:], "little")
        fp = hi if self.bits == 64 else (hi << 64) | lo
        out: dict[str, Any] = {
            "id": row.id,
            "time": row.time,
            "fingerprint": format(fp, "x"),
            "metadata": json.loads(row.metadata) if row.metadata else None,
        }
        if row.text is not None:
            out["text"] = row.text
        return out

    def delete(self, id: str) -> None:
        """Delete a document (durable on return); :class:`NotFoundError` if unknown."""
        if not isinstance(id, str):
            raise InputTypeError(f"id must be a str, got {type(id).__name__}")
        self._submit(_Op("delete", arg=id))

    def flush(self) -> None:
        """Write the memtable to segments now (durable stores; a no-op in memory)."""
        self._submit(_Op("flush"))

    def set_retention(self, retention: str | float | None) -> None:
        """Change the retention window (``None``: keep everything), store it with the data and
        apply it: a shorter window drops, at once, the partitions now outside it. Logged as a
        warning; the explicit form of ``Deduplicator(..., allow_retention_change=True)``."""
        secs = parse_duration(retention)
        self._submit(_Op("retention", arg=secs))

    def _apply_retention(self, secs: float | None) -> None:
        """(writer) Store and apply a new retention."""
        if self.path is not None:
            from ..store.layout import read_json_file, write_json_file

            cfg_path = self.path / "config.json"
            try:
                body = read_json_file(cfg_path)
                body.setdefault("store", {})["retention"] = secs
                body["store"].setdefault("partition_seconds", self.partition_seconds)
                write_json_file(cfg_path, body)
            except OSError as exc:
                raise StorageError(f"cannot store the new retention in {cfg_path}: {exc}") from exc
        log.warning(
            "%s: retention changed from %s to %s by set_retention()",
            self.path,
            "none" if self.retention is None else f"{self.retention:g} s",
            "none" if secs is None else f"{secs:g} s",
        )
        self.retention = secs
        self._preparer.retention = secs
        self._last_expire = 0.0

    def compact(self) -> int:
        """Merge, now, every time partition that holds more than ``max_segments_per_partition``
        segments (into one segment each; deleted rows dropped). Blocks until done, e.g. after
        a large :meth:`bulk_load`, so that later searches visit few segments and no background
        merge competes with the load. Returns the number of merges installed.
        """
        st = self.store
        if st.dir is None:
            return 0
        self._compacting = True
        merges = 0
        try:
            compactor = self._compactor
            if compactor is not None:
                compactor.join()
            while True:
                st.sync_meta()  # deletes must be in SQLite for the merge to drop their rows
                groups = st.compaction_candidates(self.max_segments_per_partition)
                if not groups:
                    return merges
                for segs in groups:
                    merged = st.build_merged(segs)
                    if self._submit(_Op("install", arg=(segs, merged))):
                        merges += 1
        finally:
            self._compacting = False

    def bulk_load(self, ids: list[str], fingerprints: Any, times: Any = None) -> int:
        """Seed the store with precomputed fingerprints (no texts); durable on return.

        Parameters
        ----------
        ids : list of str
            New, unique document ids.
        fingerprints : ndarray of uint64, shape (n,) or (n, 2)
        times : ndarray of float64, shape (n,), optional
            Unix seconds; default now.

        Returns
        -------
        int
            Number of documents loaded.
        """
        if not isinstance(ids, Sequence) or isinstance(ids, str):
            raise InputTypeError(f"ids must be a list of str, got {type(ids).__name__}")
        fps = as_fingerprints(fingerprints, bits=self.bits)
        if len(fps) != len(ids):
            raise InputError(
                f"ids ({len(ids)}) and fingerprints ({len(fps)}) must have the same length"
            )
        for i, x in enumerate(ids):
            if not isinstance(x, str) or not x:
                raise InputTypeError(f"ids[{i}] must be a non-empty str, got {x!r}")
        if len(set(ids)) != len(ids):
            raise InputError("ids passed to bulk_load must be unique")
        ts = (
            np.full(len(ids), self.clock(), dtype=np.float64)
            if times is None
            else np.asarray(times, dtype=np.float64)
        )
        if ts.shape != (len(ids),) or not np.isfinite(ts).all():
            raise InputError(f"times must be {len(ids)} finite unix seconds, got shape {ts.shape}")
        if len(ts):
            now = self.clock()
            for i in (int(np.argmin(ts)), int(np.argmax(ts))):
                self._preparer.check_time(f"times[{i}]", float(ts[i]), now)
        if not ids:
            return 0
        return int(self._submit(_Op("bulk", arg=(list(ids), fps, ts))))

    def stats(self) -> dict[str, Any]:
        """Counters for monitoring: documents, partitions, segments, wal_bytes, checks, ..."""
        s = self.store.stats()
        with self._cv:
            s.update(self._counters)
            s["queue_depth"] = len(self._queue)
        syncer = self._syncer
        if syncer is not None:
            s["wal_syncs"] = syncer.syncs
            s["wal_sync_seconds"] = syncer.sync_seconds
            s["wal_slow_syncs"] = syncer.slow_syncs
            s["wal_max_sync_seconds"] = syncer.max_sync_seconds
        compactor = self._compactor
        s["compacting"] = self._compacting or (compactor is not None and compactor.is_alive())
        s["bits"] = self.bits
        s["max_distance"] = self.max_distance
        s["search_radius"] = self.radius
        s["retention_seconds"] = self.retention
        s["durable"] = self.path is not None
        return s

    def __len__(self) -> int:
        return max(0, int(self.store.documents))

    def __contains__(self, id: object) -> bool:
        return isinstance(id, str) and self.store.get_row(id) is not None

    def close(self) -> None:
        """Drain queued operations, flush the memtable to segments, release the directory."""
        with self._cv:
            if self._closed or self._stopping:
                return
            self._stopping = True
        compactor = self._compactor
        if compactor is not None:
            compactor.join()
        with self._cv:
            self._closed = True
            stop = _Op("stop")
            self._queue.append(stop)
            self._cv.notify()
        self._writer.join()
        self.store.close()

    def __enter__(self) -> Deduplicator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            if not self._closed:
                self.close()
        except Exception:
            pass

    # ------------------------------------------------------------------ writer
    def _take(self) -> list[_Op]:
        """The next group (or [] for a round of housekeeping only), once no caller is deciding
        inline; from then until :meth:`_run` clears ``_writer_busy`` nobody decides inline."""
        with self._cv:
            while self._inline_busy or not self._queue:
                if self._inline_busy:
                    self._writer_waits = True  # the caller notifies when its turn ends
                    self._cv.wait()
                    self._writer_waits = False
                    continue
                if self._duties_due:
                    self._duties_due = False
                    self._writer_busy = True
                    return []
                timeout = 1.0 if self.retention is not None else None
                if self.store.frozen is not None:  # come back to install the finished flush
                    timeout = 0.05
                if not self._cv.wait(timeout) and not self._inline_busy:
                    self._writer_busy = True
                    return []
            self._writer_busy = True
            first = self._queue[0]
            if first.kind not in ("check", "add", "check_and_add", "delete"):
                return [self._queue.pop(0)]
            if self.commit_interval > 0:
                deadline = time.monotonic() + self.commit_interval
                while sum(o.n for o in self._queue) < MAX_GROUP_DOCS:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cv.wait(left)
            group: list[_Op] = []
            n = 0
            while self._queue:
                op = self._queue[0]
                if op.kind not in ("check", "add", "check_and_add", "delete"):
                    break
                if group and n + op.n > MAX_GROUP_DOCS:
                    break
                group.append(self._queue.pop(0))
                n += op.n
            return group

    def _run(self) -> None:
        while True:
            group = self._take()
            try:
                self._run_group(group)
            finally:
                with self._cv:
                    self._writer_busy = False
            if group and group[0].kind == "stop":
                return
            del group  # the last group's documents and decisions are not kept alive meanwhile

    def _run_group(self, group: list[_Op]) -> None:
        """Decide ``group`` (from :meth:`_take`), then the writer's housekeeping."""
        try:
            if group and group[0].kind == "stop":
                self._shutdown(group[0])
                return
            if group:
                self._dispatch(group)
        except Exception as exc:  # never let the writer die; fail what was in flight
            log.exception("writer: unexpected error")
            for op in group:
                if not op.future.done():
                    op.future.set_exception(exc)
        try:
            self._housekeeping()
        except StorageError as exc:
            # e.g. a flush on a full disk: the writes are in the log, the flush is retried;
            # the group's own results (some still waiting for their fsync) are not affected
            log.error("writer housekeeping failed (%s); retrying later", exc)
        except Exception:
            log.exception("writer housekeeping failed; retrying later")

    def _housekeeping(self) -> None:
        """Retention (about once a second), background flushes and merges (writer thread)."""
        if self.retention is not None:
            now = self.clock()
            if now - self._last_expire >= 1.0:
                self._last_expire = now
                self._sync_barrier()
                self.store.expire(now - self.retention)
        st = self.store
        if st.flush_due:
            self._sync_barrier()  # a flush starts a new log: this one fully synced
        st.maybe_flush(self._cutoff())
        self._maybe_compact()

    def _cutoff(self) -> float | None:
        return None if self.retention is None else self.clock() - self.retention

    def _maybe_compact(self) -> None:
        """Start a background merge when a partition has too many segments."""
        st = self.store
        changes = st.flushes + st.compactions + st.dropped_partitions + len(st.segments)
        if st.dir is None or self._stopping or self._compacting or changes == self._compact_seen:
            return
        if time.monotonic() - self._last_bulk < _BULK_QUIET_S:
            return  # a series of bulk_load calls: merge once it is over (or call compact())
        if self._compactor is not None and self._compactor.is_alive():
            return
        self._compact_seen = changes
        groups = st.compaction_candidates(self.max_segments_per_partition)
        if groups:
            compactor = threading.Thread(
                target=self._compact, args=(groups,), name="neardup-compactor", daemon=True
            )
            # started before it is published: compact() / close() join it from other threads
            compactor.start()
            self._compactor = compactor

    def _compact(self, groups: list[Any]) -> None:
        lower_thread_priority()
        for segs in groups:
            try:
                merged = self.store.build_merged(segs)
            except Exception:
                log.exception("compaction failed; the segments stay as they are")
                continue
            try:
                self._submit(_Op("install", arg=(segs, merged)))
            except Exception:
                log.exception("installing a compacted segment failed")
                if merged is not None:
                    self.store._discard(merged)

    def _shutdown(self, stop: _Op) -> None:
        try:
            self._sync_barrier()
            if self._syncer is not None:
                self._syncer.close()
            self.store.finish_flush(wait=True)
            if self.store.wal is not None and self.store.wal.size > HEADER_SIZE:
                self.store.flush(
                    cutoff=None if self.retention is None else self.clock() - self.retention
                )
        except Exception:
            log.exception("flush on close failed; the log still holds every row")
        stop.future.set_result(None)

    def _dispatch(self, group: list[_Op], inline: bool = False) -> None:
        op = group[0]
        if op.kind in ("flush", "bulk", "install", "retention"):
            self._sync_barrier()
        if op.kind == "flush":
            self._guard(
                op,
                lambda: self.store.flush(
                    cutoff=None if self.retention is None else self.clock() - self.retention
                ),
            )
        elif op.kind == "bulk":
            self._guard(op, lambda: self._bulk(*op.arg))
            self._last_bulk = time.monotonic()
        elif op.kind == "install":
            self._guard(op, lambda: self.store.install_merged(*op.arg))
        elif op.kind == "retention":
            self._guard(op, lambda: self._apply_retention(op.arg))
        elif op.kind == "recover":
            self._guard(op, self._recover_failed_sync)
        else:
            self._apply_group(group, inline)

    @staticmethod
    def _guard(op: _Op, fn: Callable[[], Any]) -> None:
        try:
            op.future.set_result(fn())
        except Exception as exc:
            op.future.set_exception(exc)

    def _bulk(
        self, ids: list[str], fps: npt.NDArray[np.uint64], ts: npt.NDArray[np.float64]
    ) -> int:
        import sqlite3

        start = self.store.allocate(len(ids))
        rids = np.arange(start, start + len(ids), dtype=np.int64)
        fp_bytes = fp_words(fps).astype("<u8").tobytes()
        times = ts.tolist()
        # insert in id order: the UNIQUE(id) B-tree then grows at its right edge
        order = sorted(range(len(ids)), key=ids.__getitem__)
        rows = (
            (start + i, ids[i], times[i], fp_bytes[16 * i : 16 * i + 16], _NO_HASH, 0, None, None)
            for i in order
        )
        try:
            self.store.bulk_load(rows, fps, rids, ts)
        except sqlite3.IntegrityError:
            existing = self.store.lookup_ids(ids)
            first = next(iter(existing), None)
            raise InputError(
                f"bulk_load: {len(existing)} ids already exist (e.g. {first!r}); bulk_load only "
                "adds new ids"
            ) from None
        return len(ids)

    def _apply_group(self, group: list[_Op], inline: bool = False) -> None:
        """Decide ``group``, log it and hand it to the syncer (``inline``: the caller decided
        it in its own thread, and syncs it there too when the syncer is idle)."""
        syncer = self._syncer
        if syncer is not None and syncer.failed is not None:
            self._recover_failed_sync()
        try:
            results, records, arrays = self._decide(group)
        except Exception as exc:
            for op in group:
                op.future.set_exception(exc)
            return
        try:
            unsynced = self.store.commit(
                records,
                arrays[:3],
                durable=syncer is None,
                bands=arrays[3] if len(arrays) > 3 else None,
            )
        except StorageError as exc:
            self._counters["storage_errors"] += 1
            reads = [op for op in group if op.kind == "check"]
            for op in group:
                if op.kind != "check":
                    op.future.set_exception(exc)
            if reads:  # answer reads as if the failed writes never happened
                self._apply_group(reads, inline)
            return
        n_docs = adds = dups = checks = 0
        for op, res in zip(group, results, strict=True):
            if op.docs is None or isinstance(res, BaseException):
                continue
            n_docs += len(res)
            dups += sum(d.duplicate for d in res)
            if op.kind == "check":
                checks += len(res)
            else:
                adds += sum(d.added for d in res)
        item = _Inflight(group, results, unsynced, (n_docs, checks, adds, dups))
        if syncer is None:
            self._resolve_group(item)
        elif not (inline and syncer.try_inline(item)):
            syncer.submit(item)

    def _resolve_group(self, item: _Inflight) -> None:
        """Answer a group whose records are durable (writer or syncer thread)."""
        for op, res in zip(item.group, item.results, strict=True):
            if isinstance(res, BaseException):
                op.future.set_exception(res)
            else:
                op.future.set_result(res)
        _n, checks, adds, dups = item.counts
        with self._cv:
            c = self._counters
            c["groups"] += 1
            c["group_docs"] += sum(o.n for o in item.group)
            c["checks"] += checks
            c["adds"] += adds
            c["duplicates"] += dups

    def _fail_group(self, item: _Inflight, exc: StorageError) -> None:
        """Refuse a group whose log sync failed (or that came after one)."""
        with self._cv:
            self._counters["storage_errors"] += 1
        for op in item.group:
            if not op.future.done():
                op.future.set_exception(exc)

    def _sync_barrier(self) -> None:
        """Writer thread: wait until every decided group is durable and answered, taking back
        the ones a failed sync refused (before flushes, retention, bulk loads, installs)."""
        if self._syncer is not None:
            self._syncer.drain()
            if self._syncer.failed is not None:
                self._recover_failed_sync()

    def _request_recovery(self) -> None:
        """Syncer thread: have the writer run :meth:`_recover_failed_sync` next."""
        with self._cv:
            self._queue.insert(0, _Op("recover"))
            self._cv.notify()

    def _recover_failed_sync(self) -> None:
        """Writer thread: undo the groups a failed fsync refused (newest first), cut the log
        back to its last durable offset, refuse them, then accept writes again."""
        syncer = self._syncer
        if syncer is None or syncer.failed is None:
            return
        syncer.drain()
        with syncer._cv:
            items, syncer.failed_items = syncer.failed_items, []
            err = syncer.failed
        written = [it.unsynced for it in items if it.unsynced is not None]
        for u in reversed(written):
            self.store.undo(u)
        ok = True
        if written and self.store.wal is not None:
            try:
                self.store.wal.rollback(min(u.start for u in written))
            except StorageError:
                log.exception("cannot cut the log back after a failed sync; refusing writes")
                ok = False
        for it in items:
            self._fail_group(it, err)
        if ok:
            with syncer._cv:
                syncer.failed = None

    def _decide(
        self, group: list[_Op]
    ) -> tuple[
        list[Any],
        list[AddRecord | DeleteRecord],
        tuple[Any, ...],
    ]:
        """Decide a group in arrival order; returns (results per op, log records, the added
        rows as (fingerprints, row ids, times[, band entry keys]) arrays). Row ids are
        allocated here."""
        doc_ops = [op for op in group if op.docs is not None]
        if self.lsh_plan is not None:
            for op in doc_ops:  # prepared elsewhere without the channel: its keys made here
                dd = op.docs
                if dd is not None and dd.bands is None:
                    dd.sig, dd.usable, dd.bands = lsh_keys(self.verifier, self.lsh_plan, dd.texts)
        # everything a group needs from the index and metadata, fetched in bulk
        if doc_ops:
            fps = (
                doc_ops[0].docs.fps  # type: ignore[union-attr]
                if len(doc_ops) == 1
                else np.concatenate([op.docs.fps for op in doc_ops])  # type: ignore[union-attr]
            )
            ids = [i for op in doc_ops for i in op.docs.ids]  # type: ignore[union-attr]
        else:
            fps = np.zeros((0,) if self.bits == 64 else (0, 2), np.uint64)
            ids = []
        flat_texts = [t for op in doc_ops for t in op.docs.texts]  # type: ignore[union-attr]
        if self.lsh_plan is not None:  # SimHash hits within the radius, plus the band keys
            lims, hit_rids, hit_d = self.store.search(fps, self.radius)
        elif self.verifier is None or self.radius == self.max_distance:  # one limit for all
            lims, hit_rids, hit_d = self.store.search(fps, self.max_distance)
        else:
            limits = np.array([self._limit(t) for t in flat_texts], dtype=np.int64)
            lims, hit_rids, hit_d = self._search_by_limit(fps, limits)
        del_ids = [op.arg for op in group if op.kind == "delete"]
        existing = self.store.lookup_ids(ids + del_ids)
        need_text = self.verifier is not None
        lsh_rids = None
        if self.lsh_plan is not None and doc_ops:
            bands = np.concatenate([op.docs.bands for op in doc_ops])  # type: ignore[union-attr]
            lsh_rids = self.store.search_bands(bands, self.lsh_plan.bucket_cap)
        want = set(hit_rids.tolist())
        want.update(existing.values())
        if lsh_rids is not None:
            for r in lsh_rids:
                want.update(r.tolist())
        rows = self.store.fetch(want, with_text=need_text) if want else {}
        earlier = self._intra_pairs(fps)  # i -> [(j, distance)] for j < i within the radius
        if lsh_rids is not None:
            sig = np.concatenate([op.docs.sig for op in doc_ops])  # type: ignore[union-attr]
            usable = np.concatenate([op.docs.usable for op in doc_ops])  # type: ignore[union-attr]
            lims, hit_rids, hit_d = self._lsh_union(fps, sig, lims, hit_rids, hit_d, lsh_rids, rows)
            self._lsh_intra(fps, sig, usable, earlier)
        cutoff = None if self.retention is None else self.clock() - self.retention

        results: list[Any] = []
        records: list[AddRecord | DeleteRecord] = []
        # group state: id -> (rowid, global position or None for stored rows)
        id_state: dict[str, tuple[int, int | None] | None] = {}
        deleted_rowids: set[int] = set()
        added_mask = bytearray(len(fps))  # documents added earlier in this group
        # documents that need the full rules: index hits or near pairs inside the group
        has_hits = (lims[1:] > lims[:-1]).tolist()
        slow = list(has_hits)
        for i in earlier:
            slow[i] = True
        flat_chash = [h for op in doc_ops for h in op.docs.chash]  # type: ignore[union-attr]
        flat_empty = (
            np.concatenate([op.docs.empty for op in doc_ops]) if doc_ops else np.zeros(0, bool)
        )  # type: ignore[union-attr]
        store_text = self.store_text
        next_rid = self.store.next_rowid
        add_pos: list[int] = []  # global positions of added documents, in row id order

        def current(id_: str) -> tuple[int, int | None] | None:
            if id_ in id_state:
                return id_state[id_]
            rid = existing.get(id_)
            return None if rid is None else (rid, None)

        def add_doc(i: int, k: int, id_: str) -> None:
            """Append the add record of document ``k`` of the current op (global position
            ``i``) with the next row id, and note it in the group state."""
            nonlocal next_rid
            w0, w1 = words[i]
            records.append(
                AddRecord(
                    next_rid,
                    d_times[k],
                    w0,
                    w1,
                    d_chash[k],
                    _EMPTY_FLAG if d_empty[k] else 0,
                    id_,
                    d_texts[k] if store_text else None,
                    d_meta[k],
                )
            )
            id_state[id_] = (next_rid, i)
            added_mask[i] = 1
            add_pos.append(i)
            next_rid += 1

        # Python ints once per group (indexing NumPy scalars per document is slow)
        if self.bits == 64:
            fp_ints: list[int] = fps.tolist()
            words = [(x, 0) for x in fp_ints]
        else:
            words = [(int(a), int(b)) for a, b in fps.tolist()]
            fp_ints = [(a << 64) | b for a, b in words]
        new_decision = _new_decision
        g = 0
        for op in group:
            if op.kind == "delete":
                cur = current(op.arg)
                if cur is None:
                    results.append(NotFoundError(f"document {op.arg!r} not found"))
                    continue
                records.append(DeleteRecord(cur[0], op.arg))
                deleted_rowids.add(cur[0])
                id_state[op.arg] = None
                if cur[1] is not None:
                    added_mask[cur[1]] = 0
                results.append(None)
                continue
            docs = op.docs
            assert docs is not None
            out: list[Decision] = []
            d_times = docs.times.tolist()
            d_empty = docs.empty.tolist()
            d_ids, d_texts, d_meta, d_chash = docs.ids, docs.texts, docs.metadata, docs.chash
            adding = op.kind != "check"  # add, or check_and_add when no duplicate
            force = op.kind == "add"
            for k in range(len(d_ids)):
                i = g + k
                id_ = d_ids[k]
                if not slow[i] and id_ not in existing and id_ not in id_state:
                    # no candidate anywhere and a new id: not a duplicate
                    if adding:
                        add_doc(i, k, id_)
                    out.append(new_decision(id_, False, adding, (), fp_ints[i]))
                    continue
                if not (
                    has_hits[i] or (i in earlier and any(added_mask[j] for j, _ in earlier[i]))
                ):
                    matches: list[Match] = []
                    drops = False
                else:
                    matches, drops = self._matches(
                        i,
                        flat_texts,
                        flat_chash,
                        flat_empty,
                        hit_rids[lims[i] : lims[i + 1]],
                        hit_d[lims[i] : lims[i + 1]],
                        rows,
                        deleted_rowids,
                        added_mask,
                        earlier.get(i, ()),
                        ids,
                        cutoff,
                    )
                cur = current(id_)
                if cur is not None:  # idempotent re-send: report the existing document
                    if not any(m.id == id_ for m in matches):
                        d = (
                            (fp_ints[i] ^ fp_ints[cur[1]]).bit_count()
                            if cur[1] is not None
                            else self._distance_to_row(fps[i], rows.get(cur[0]))
                        )
                        same = cur[1] is not None and flat_chash[cur[1]] == flat_chash[i]
                        same = same or (cur[0] in rows and rows[cur[0]].chash == flat_chash[i])
                        matches = [Match(id_, d, 1.0 if same else None), *matches][
                            : self.max_matches
                        ]
                    out.append(new_decision(id_, True, False, tuple(matches), fp_ints[i]))
                    continue
                dup = drops
                add = force or (adding and not dup)
                if add:
                    add_doc(i, k, id_)
                out.append(new_decision(id_, dup, add, tuple(matches), fp_ints[i]))
            results.append(out)
            g += len(d_ids)
        n_add = len(add_pos)
        start = self.store.allocate(n_add)
        rids = np.arange(start, start + n_add, dtype=np.int64)
        if n_add:
            pos = np.asarray(add_pos, dtype=np.int64)
            times = (
                doc_ops[0].docs.times  # type: ignore[union-attr]
                if len(doc_ops) == 1
                else np.concatenate([op.docs.times for op in doc_ops])  # type: ignore[union-attr]
            )
            arrays: tuple[Any, ...] = (fps[pos], rids, times[pos])
            if self.lsh_plan is not None:  # band keys made by the preparer, not in the writer
                bands = np.concatenate([op.docs.bands for op in doc_ops])  # type: ignore[union-attr]
                arrays += (bands[pos],)
        else:
            arrays = (fps[:0], rids, np.zeros(0, np.float64))
        return results, records, arrays

    def _lsh_union(
        self,
        fps: npt.NDArray[np.uint64],
        sig: npt.NDArray[np.uint16],
        lims: npt.NDArray[np.int64],
        hit_rids: npt.NDArray[np.int64],
        hit_d: npt.NDArray[np.int32],
        lsh_rids: list[npt.NDArray[np.int64]],
        rows: dict[int, Any],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        """The candidates of each query: its SimHash hits plus the stored rows sharing a band
        key with it whose signatures agree on >= ``plan.min_agreement`` MinHash values (the
        batch pipeline's filter; stored signatures are recomputed from the stored texts)."""
        plan = self.lsh_plan
        need = sorted(
            {int(r) for a in lsh_rids for r in a.tolist() if r in rows and rows[r].text is not None}
        )
        if not need:
            return lims, hit_rids, hit_d
        stored_sig = lsh_keys(self.verifier, plan, [rows[r].text for r in need])[0]
        where = {r: k for k, r in enumerate(need)}
        out_r: list[int] = []
        out_d: list[int] = []
        counts = np.zeros(len(fps), np.int64)
        for i, cand in enumerate(lsh_rids):
            before = len(out_r)
            have = hit_rids[lims[i] : lims[i + 1]].tolist()
            out_r += have
            out_d += hit_d[lims[i] : lims[i + 1]].tolist()
            seen = set(have)
            extra = [r for r in cand.tolist() if r in where and r not in seen]
            if extra:
                agree = (stored_sig[[where[r] for r in extra]] == sig[i]).sum(axis=1)
                for r, a in zip(extra, agree.tolist(), strict=True):
                    if a >= plan.min_agreement:
                        out_r.append(r)
                        out_d.append(self._distance_to_row(fps[i], rows[r]))
            counts[i] = len(out_r) - before
        new_lims = np.zeros(len(fps) + 1, np.int64)
        np.cumsum(counts, out=new_lims[1:])
        return new_lims, np.asarray(out_r, np.int64), np.asarray(out_d, np.int32)

    def _lsh_intra(
        self,
        fps: npt.NDArray[np.uint64],
        sig: npt.NDArray[np.uint16],
        usable: npt.NDArray[np.bool_],
        earlier: dict[int, list[tuple[int, int]]],
    ) -> None:
        """Add the group's MinHash pairs (the batch pipeline's :func:`lsh_pairs`) to ``earlier``
        (later position -> [(earlier position, SimHash distance)])."""
        if len(fps) < 2:
            return
        from ..batch.minhash import lsh_pairs

        a, b = lsh_pairs(sig, usable, self.lsh_plan)
        for x, y in zip(a.tolist(), b.tolist(), strict=True):
            lst = earlier.setdefault(y, [])
            if all(j != x for j, _ in lst):
                lst.append((x, (self._fp_int(fps[x]) ^ self._fp_int(fps[y])).bit_count()))

    def _verify(
        self, text: str, chunk: list[tuple[int, int, str, str]]
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
        """Decide (text, candidate text) pairs: with the MinHash channel by the batch
        pipeline's own verification (:func:`neardup.dedup.stage_verify`: numba bounds, then the
        exact LCS), so online and batch apply one rule; else ``Verifier.verify_many``."""
        if self.lsh_plan is None:
            return self.verifier.verify_many(
                [text] * len(chunk), [c[3] for c in chunk], [c[0] for c in chunk]
            )
        from ..batch.run import stage_verify

        m = len(chunk)
        return stage_verify(
            self.verifier,
            [text, *(c[3] for c in chunk)],
            np.zeros(m, np.int64),
            np.arange(1, m + 1, dtype=np.int64),
            np.array([c[0] for c in chunk], np.int32),
        )

    def _warm_up(self) -> None:
        """Load the compiled kernels the first groups would otherwise wait for (all_pairs, the
        index's build and search, each in its GIL-holding variant for a few queries and its
        GIL-releasing one for more, the fingerprints of short and long texts), so that no
        request after a restart waits tens of milliseconds for numba's cache. Tested: after it,
        groups of 1, 16, 100 and 2,000 documents and a long text load no new kernel."""
        try:
            from ..store.engine import PARALLEL_QUERIES
            from ..store.memindex import build_index

            rng = np.random.default_rng(0)
            n = 2048  # a group this large joins itself with all_pairs' table self-join
            fps = rng.integers(0, 2**64, (n,) if self.bits == 64 else (n, 2), dtype=np.uint64)
            self._intra_pairs(fps)
            self._intra_pairs(fps[:300])
            self._intra_pairs(fps[:2])
            idx = build_index(
                fps[:300], np.arange(300, dtype=np.int64), bits=self.bits, max_distance=self.radius
            )
            idx.search(fps[:2], self.radius)
            idx.search(fps[:16], self.radius)
            # the store's searches: one IndexSet call over the segments and the memtable for a
            # few queries and for more, and the segments on the search pool for large groups
            for m in (2, 16, PARALLEL_QUERIES):
                self.store.search(fps[:m], self.radius)
            # a memtable like the store's, past its first buffer flush: its plan's build and
            # search kernels (the 1,025th add after a restart took ~20 ms without this)
            from ..store.memindex import MemTable

            mt = MemTable(
                bits=self.bits, max_distance=self.radius, expected_size=self.store.memtable_size
            )
            n = mt.buffer_size + 8
            many = rng.integers(0, 2**64, (n,) if self.bits == 64 else (n, 2), dtype=np.uint64)
            mt.add(many, np.arange(n, dtype=np.int64), np.zeros(n))
            mt.search(many[:2], self.radius)
            mt.search(many[:16], self.radius)
            # the request path's own kernels: fingerprints (the GIL-holding entry point for
            # small texts, the other one for long texts and batches), content hashes; loading
            # one from numba's cache on the first request stalls everything queued behind it
            # for tens of milliseconds
            self._prepare([{"id": "warm-up", "text": "warm up the fingerprint kernels"}])
            self._prepare([{"id": "warm-up", "text": "warm up a long text " * 1000}])
            if self.lsh_plan is not None:  # the MinHash channel's signature and agreement kernels
                from ..batch.minhash import lsh_pairs

                sig, usable, _ = lsh_keys(self.verifier, self.lsh_plan, ["warm up minhash"] * 2)
                lsh_pairs(sig, usable, self.lsh_plan)
                self._verify("warm up the verifier", [(0, 0, "w", "warm up the verifier kernels")])
        except Exception:  # warm-up is an optimisation only
            log.debug("warm-up failed", exc_info=True)

    def _limit(self, text: str) -> int:
        """Search distance for one query text (the verifier's, capped by the radius)."""
        if self.lsh_plan is not None:  # MinHash candidates are verified at any distance
            return self.bits
        if self.verifier is None or self.radius == self.max_distance:
            return self.max_distance
        return max(
            self.max_distance, min(int(self.verifier.candidate_distance(len(text))), self.radius)
        )

    def _search_by_limit(
        self, fps: npt.NDArray[np.uint64], limits: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        """Search each query only as far as it needs (long texts need less than short ones)."""
        uniq = sorted(set(limits.tolist()))
        if len(uniq) <= 1:
            return self.store.search(fps, int(uniq[0]) if uniq else self.max_distance)
        n = len(fps)
        parts = []
        counts = np.zeros(n, dtype=np.int64)
        for lim in uniq:
            sel = np.flatnonzero(limits == lim)
            r = self.store.search(fps[sel], int(lim))
            counts[sel] = np.diff(r[0])
            parts.append((sel, r))
        lims = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=lims[1:])
        ids = np.empty(int(lims[-1]), dtype=np.int64)
        ds = np.empty(int(lims[-1]), dtype=np.int32)
        for sel, (lo, i, d) in parts:
            c = np.diff(lo)
            dest = np.repeat(lims[sel], c) + (np.arange(len(i)) - np.repeat(lo[:-1], c))
            ids[dest] = i
            ds[dest] = d
        return lims, ids, ds

    def _intra_pairs(self, fps: npt.NDArray[np.uint64]) -> dict[int, list[tuple[int, int]]]:
        """Pairs of documents in one group within the search radius, keyed by the later one."""
        out: dict[int, list[tuple[int, int]]] = {}
        if len(fps) < 2:
            return out
        try:
            if len(fps) <= _BRUTE_PAIRS:  # small groups: one distance matrix, no index build
                raise ImportError
            from ..index import all_pairs

            # one thread: a thread pool per group costs more than it saves on small groups
            a, b, d = all_pairs(fps, max_distance=self.radius, threads=1)
        except ImportError:
            dist = hamming_cdist(fps, fps)
            b, a = np.nonzero(np.tril(dist <= self.radius, k=-1))
            d = dist[b, a]
        for x, y, z in zip(a.tolist(), b.tolist(), d.tolist(), strict=True):
            out.setdefault(y, []).append((x, z))
        return out

    def _fp_int(self, fp: Any) -> int:
        if self.bits == 64:
            return int(fp)
        return (int(fp[0]) << 64) | int(fp[1])

    def _distance_to_row(self, fp: Any, row: Any) -> int:
        if row is None:
            return 0
        hi = int.from_bytes(row.fp[:8], "little")
        lo = int.from_bytes(row.fp[8:], "little")
        stored = hi if self.bits == 64 else (hi << 64) | lo
        return (self._fp_int(fp) ^ stored).bit_count()

    def _matches(
        self,
        i: int,
        texts: list[str],
        chash: list[bytes],
        empty: npt.NDArray[np.bool_],
        hit_rids: npt.NDArray[np.int64],
        hit_d: npt.NDArray[np.int32],
        rows: dict[int, Any],
        deleted: set[int],
        added_mask: npt.NDArray[np.bool_],
        earlier: Sequence[tuple[int, int]],
        ids: list[str],
        cutoff: float | None,
    ) -> tuple[list[Match], bool]:
        """(the matches, closest first; whether any of them makes the document a duplicate)."""
        text = texts[i]
        limit = self._limit(text)
        q_empty = bool(empty[i])
        q_hash = chash[i]
        # (exact first, distance, order, id, hash, empty, text): exact duplicates need no
        # verification; the rest are verified closest first until max_matches are accepted
        cands: list[tuple[int, int, int, str, bytes, bool, str | None]] = []
        for rid, d in zip(hit_rids.tolist(), hit_d.tolist(), strict=True):
            if rid in deleted:
                continue
            row = rows.get(rid)
            if row is None or (cutoff is not None and row.time < cutoff):
                continue
            ex = 0 if row.chash == q_hash else 1
            cands.append((ex, d, rid, row.id, row.chash, bool(row.flags & _EMPTY_FLAG), row.text))
        for j, d in earlier:
            if added_mask[j]:
                ex = 0 if chash[j] == q_hash else 1
                cands.append((ex, d, (1 << 62) + j, ids[j], chash[j], bool(empty[j]), texts[j]))
        cands.sort(key=lambda c: (c[0], c[1], c[2]))
        # (distance, order, id, score, whether this match may drop the document)
        found: list[tuple[int, int, str, float | None, bool]] = []
        pending: list[tuple[int, int, str, str]] = []  # to verify: (distance, order, id, text)
        for ex, d, order, cid, _h, c_empty, c_text in cands:
            if ex == 0 and q_hash != _NO_HASH:
                found.append((d, order, cid, 1.0, True))
            elif q_empty or c_empty or d > limit:
                continue
            elif self.verifier is not None and c_text is not None:
                pending.append((d, order, cid, c_text))
            elif d <= self.max_distance:
                found.append((d, order, cid, None, True))
        found.sort(key=lambda x: (x[0], x[1]))
        # verify closest first, in chunks, until max_matches are accepted (texts tokenized once
        # per chunk by verify_many)
        pending.sort(key=lambda x: (x[0], x[1]))
        pos = 0
        while pending[pos:] and len(found) < self.max_matches:
            chunk = pending[pos : pos + max(4, self.max_matches - len(found))]
            pos += len(chunk)
            ok, scores = self._verify(text, chunk)
            for c, a, sc in zip(chunk, ok.tolist(), scores.tolist(), strict=True):
                if a:
                    found.append((c[0], c[1], c[2], float(sc), self._may_drop(text, c[3])))
        found.sort(key=lambda x: (x[0], x[1]))
        matches = [Match(cid, d, s) for d, _, cid, s, _ in found[: self.max_matches]]
        return matches, any(f[4] for f in found)

    def _may_drop(self, text: str, kept: str) -> bool:
        """Whether a verified match with ``kept`` makes ``text`` a duplicate. With the MinHash
        channel, the batch keep rule (:func:`neardup.dedup.stage_representatives`): a text more
        than ``(2 - threshold) / threshold`` times longer than the kept one contains it (no
        pair reaches the threshold by similarity at that ratio) and is kept; the match is still
        reported."""
        if self.lsh_plan is None:
            return True
        t = self.verifier.threshold
        return len(text) <= (2.0 - t) / t * len(kept)
