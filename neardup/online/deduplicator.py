"""Online near-duplicate detection: a durable, time-windowed index with atomic check-and-insert.

:class:`Deduplicator` (open one with :meth:`Deduplicator.open`) owns one *writer thread* and a
queue (:mod:`.writer`). Callers validate and fingerprint their documents in their own thread
(:class:`~neardup.online.prepare.DocumentPreparer`), submit an operation and wait on a future.
The writer takes everything queued (waiting up to ``commit_interval_ms`` for more to join: group
commit), decides every document **in arrival order** — against the index *and* against the
documents added earlier in the same group (:mod:`.decide`) — appends them to the store's log,
applies them to the metadata and the memtable, and hands the group to the syncer
(:mod:`.commit`), which fsyncs once and only then resolves the futures. So of two
near-duplicates that arrive together (same batch or concurrent calls) exactly one is added and
the other reports it as its match, and every acknowledged ``add`` / ``check_and_add`` is on
disk.

Reads (``check``) are sequenced by the same writer, so a check sees every write acknowledged
before it was submitted. ``get``, ``len`` and ``in`` read the metadata directly.

The matching rules: :mod:`.decide`. Storage layout and recovery: :mod:`neardup.store` (see
``docs/store.md``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from ..errors import (
    ConfigError,
    InputError,
    InputTypeError,
    NotFoundError,
)
from ..fingerprint.distance import as_fingerprints
from ..rules.decision import Decision, Match
from ..rules.keep import Found
from ..store import Store, parse_duration
from .config import jsonable, load_fingerprinter, load_verifier
from .decide import Decider, Op
from .prepare import MAX_FUTURE_SECONDS, DocumentPreparer, PreparedDocs, lsh_keys
from .writer import Writer

__all__ = ["Decision", "Deduplicator", "DocumentPreparer", "Match"]

log = logging.getLogger("neardup.store")


def _check_kind(kind: str) -> None:
    """The document verbs :meth:`Deduplicator.submit` takes."""
    if kind not in ("check", "add", "check_and_add"):
        raise InputError(f"kind must be 'check', 'add' or 'check_and_add', got {kind!r}")


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
    compress_tables : bool or None, default=None
        Segment indexes with block-compressed tables (about half their memory and file size,
        exact, slower probes; docs/store.md). Stored in config.json; None: the stored setting
        (off for a new store).

    Open one with :meth:`open` (``Deduplicator(path, ...)`` is the same call, kept for
    existing callers).

    Examples
    --------
    >>> from neardup.online import Deduplicator
    >>> with Deduplicator.open(verify=False) as d:
    ...     a = d.check_and_add({"id": "a", "text": "the quick brown fox jumps over the lazy dog"})
    ...     b = d.check_and_add({"id": "b", "text": "the quick brown fox jumps over the lazy dog!"})
    >>> (a.added, b.duplicate, b.matches[0].id)
    (True, True, 'a')
    """

    @classmethod
    def open(cls, path: str | Path | None = None, **options: Any) -> Deduplicator:
        """Open the data directory ``path`` (created if missing; None: in memory), recovering
        what the last run left (the log replayed, orphaned files removed), and start the
        writer. ``options`` are the class parameters (``max_distance``, ``retention``, ...).
        The way to get a :class:`Deduplicator`; close it with :meth:`close` or a ``with``
        block.
        """
        return cls(path, **options)

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
        compress_tables: bool | None = None,
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

        stored = Store.read_config(self.path)
        self.fingerprinter = load_fingerprinter(
            fingerprinter, stored.get("fingerprinter") if stored else None
        )
        self.verifier = load_verifier(verify, stored.get("verifier") if stored else None)
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
            from ..rules import DedupConfig, LshPlan

            # the batch default (one rule); a store keeps the plan its band keys were made with
            kept_plan = (stored or {}).get("lsh")
            if kept_plan:  # refused when its keys were made with another signature scheme
                self.lsh_plan = LshPlan.from_dict(kept_plan, where=f"{self.path}/config.json")
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
            compress_tables=compress_tables,
            clock=clock,
        )
        self._decider = Decider(
            self.store,
            verifier=self.verifier,
            lsh_plan=self.lsh_plan,
            bits=self.bits,
            radius=self.radius,
            max_distance=self.max_distance,
            max_matches=self.max_matches,
            store_text=self.store_text,
        )
        # the stored settings win (see _check_config); a legacy store's width is inferred
        self.partition_seconds = self.store.partition_seconds
        self._preparer.retention = self.retention
        self.max_segments_per_partition = max_segments_per_partition
        if self.retention is not None:
            self.store.expire(self.clock() - self.retention)
        self._warm_up()
        self._writer = Writer(
            self.store,
            self._decider,
            clock=clock,
            retention=self.retention,
            commit_interval=self.commit_interval,
            max_segments_per_partition=max_segments_per_partition,
            save_retention=self._save_retention,
        )

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
        fp_cfg = jsonable(self.fingerprinter.config())
        v_cfg = (
            jsonable(self.verifier.config())
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
    def _prepare(self, docs: Sequence[Mapping[str, Any]]) -> PreparedDocs:
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
            failure handling; see :meth:`neardup.online.commit.Syncer.try_inline`). The future
            resolves only once the log's fsync covers the documents. For small requests on an
            event loop; a large batch would hold the caller.

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
        self, kind: str, docs: PreparedDocs, *, inline: bool = False
    ) -> Future[list[Decision]]:
        """Queue a batch that a :class:`DocumentPreparer` built with this deduplicator's
        fingerprinter has already validated and fingerprinted (in another thread or process);
        the future resolves as :meth:`submit`'s does (``inline`` as there)."""
        _check_kind(kind)
        op = Op(kind, docs)
        if not docs.ids:
            op.future.set_result([])
            return op.future
        return self._writer.enqueue(op, inline=inline)

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
        self._writer.run(Op("delete", arg=id))

    def delete_many(self, ids: Sequence[str]) -> list[bool]:
        """Delete several documents in one log group commit (durable on return); per id,
        whether it was stored (an unknown id is not an error here)."""
        for i, x in enumerate(ids):
            if not isinstance(x, str):
                raise InputTypeError(f"ids[{i}] must be a str, got {type(x).__name__}")
        futures = [self._writer.enqueue(Op("delete", arg=x)) for x in ids]
        out = []
        for f in futures:
            try:
                f.result()
            except NotFoundError:
                out.append(False)
            else:
                out.append(True)
        return out

    def group_matches(self, docs: Sequence[Mapping[str, Any]]) -> dict[int, list[Found]]:
        """The verified matches of each document of ``docs`` with the ones before it, as if
        all were kept (:meth:`Decider.group_matches <neardup.online.decide.Decider.group_matches>`):
        the within-batch half of the decision, which :func:`neardup.rules.keep.keep_first`
        completes with the matches against stored documents (the cluster's batches). Reads
        nothing stored; runs in the calling thread."""
        items, _ = self._as_list(docs)
        return self._decider.group_matches(self._prepare(items))

    def flush(self) -> None:
        """Write the memtable to segments now (durable stores; a no-op in memory)."""
        self._writer.run(Op("flush"))

    def set_retention(self, retention: str | float | None) -> None:
        """Change the retention window (``None``: keep everything), store it with the data and
        apply it: a shorter window drops, at once, the partitions now outside it. Logged as a
        warning; the explicit form of ``Deduplicator(..., allow_retention_change=True)``."""
        secs = parse_duration(retention)
        self._writer.run(Op("retention", arg=secs))

    def _save_retention(self, secs: float | None) -> None:
        """(writer) Store a new retention with the data and take it for this deduplicator's
        reads and input checks (the writer applies it next)."""
        self.store.save_retention(secs)
        log.warning(
            "%s: retention changed from %s to %s by set_retention()",
            self.path,
            "none" if self.retention is None else f"{self.retention:g} s",
            "none" if secs is None else f"{secs:g} s",
        )
        self.retention = secs
        self._preparer.retention = secs

    def compact(self) -> int:
        """Merge, now, every time partition that holds more than ``max_segments_per_partition``
        segments (into one segment each; deleted rows dropped). Blocks until done, e.g. after
        a large :meth:`bulk_load`, so that later searches visit few segments and no background
        merge competes with the load. Returns the number of merges installed.
        """
        return self._writer.compact()

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
        return int(self._writer.run(Op("bulk", arg=(list(ids), fps, ts))))

    def stats(self) -> dict[str, Any]:
        """Counters for monitoring: documents, partitions, segments, wal_bytes, checks, ..."""
        s = self.store.stats()
        s.update(self._writer.stats())
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
        if self._writer.close():
            self.store.close()

    def __enter__(self) -> Deduplicator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            if not self._writer.closed:
                self.close()
        except Exception:
            pass

    def _warm_up(self) -> None:
        """Load the compiled kernels the first groups would otherwise wait for (all_pairs, the
        store's index build and search kernels, the fingerprints of short and long texts), so
        that no request after a restart waits for numba's cache. Tested: after it, groups of
        1, 16, 100 and 2,000 documents and a long text load no new kernel
        (tests/online/test_online.py)."""
        try:
            rng = np.random.default_rng(0)
            n = 2048  # a group this large joins itself with all_pairs' table self-join
            fps = rng.integers(0, 2**64, (n,) if self.bits == 64 else (n, 2), dtype=np.uint64)
            decider = self._decider
            decider.intra_pairs(fps)
            decider.intra_pairs(fps[:300])
            decider.intra_pairs(fps[:2])
            self.store.warm_up()
            # the request path's own kernels: fingerprints (the GIL-holding entry point for
            # small texts, the other one for long texts and batches), content hashes; loading
            # one from numba's cache on the first request stalls everything queued behind it
            self._prepare([{"id": "warm-up", "text": "warm up the fingerprint kernels"}])
            self._prepare([{"id": "warm-up", "text": "warm up a long text " * 1000}])
            if self.lsh_plan is not None:  # the MinHash channel's signature and agreement kernels
                from ..rules.lsh import lsh_pairs

                sig, usable, _ = lsh_keys(self.verifier, self.lsh_plan, ["warm up minhash"] * 2)
                lsh_pairs(sig, usable, self.lsh_plan)
                decider.verify(
                    "warm up the verifier", [(0, 0, "w", "warm up the verifier kernels")]
                )
                from ..index.bands import BandSection, lookup, merge_sections

                section = BandSection.from_sorted(
                    np.arange(4, dtype=np.uint64), np.arange(4, dtype=np.uint32)
                )
                lookup([section], np.arange(2, dtype=np.uint64)[:, None], 2)  # its search kernel
                merge_sections(section, section)  # the memtable's section merges
        except Exception:  # warm-up is an optimisation only
            log.debug("warm-up failed", exc_info=True)
