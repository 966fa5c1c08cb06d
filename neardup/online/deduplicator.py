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

import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from .._threads import default_workers
from ..errors import (
    ConfigError,
    IndexStateError,
    InputError,
    InputTypeError,
    NotFoundError,
    UnsupportedVersionError,
)
from ..fingerprint.distance import as_fingerprints
from ..rules.decision import Decision, Match
from ..rules.keep import Found
from ..rules.lsh import sketch_bytes, sketches, token_masks
from ..store import BulkDocs, Store, parse_duration
from ..store.settings import option_name
from .config import jsonable, load_fingerprinter, load_verifier
from .decide import Decider
from .prepare import DocumentPreparer, Op, PreparedDocs, lsh_keys
from .settings import DedupSettings
from .summaries import make_summaries
from .writer import Writer

__all__ = ["Decision", "DedupSettings", "Deduplicator", "DocumentPreparer", "Match"]

log = logging.getLogger("neardup.store")

#: documents from which a load makes its MinHash signatures on every core
_LOAD_PARALLEL = 5000
#: texts the warm-up sends down the non-ASCII paths (Chinese; Latin with accents and a dash)
_WARM_NON_ASCII = ("预热中文的指纹和签名", "Café crème — préchauffage des noyaux")
#: set to 1 in a compile helper: the warm-up runs its steps last first
#: (:mod:`neardup.online.warm`)
WARM_LAST_FIRST_ENV = "NEARDUP_WARM_LAST_FIRST"

#: the version of the config body a deduplicator keeps in ``config.json`` (its ``format``)
CONFIG_FORMAT = 1


def _check_stored(stored: dict[str, Any], where: str) -> None:
    """Refuse a stored config body this build does not read (:class:`UnsupportedVersionError`
    naming the file): another format, or one without the candidate mode or, in ``lsh`` mode,
    the MinHash plan its band keys were made with."""
    missing = [k for k in ("candidates", "fingerprinter") if k not in stored]
    if stored.get("candidates") == "lsh" and "lsh" not in stored:
        missing.append("lsh")
    if stored.get("format") != CONFIG_FORMAT or missing:
        what = f"format {stored.get('format')!r}" + (
            f" without {', '.join(missing)}" if missing else ""
        )
        raise UnsupportedVersionError(
            f"{where}: a config of {what}; this build reads format {CONFIG_FORMAT} (written "
            "since the candidate mode and its MinHash plan are kept with the data). "
            "Deduplicate into a new data directory"
        )


def _check_plan(plan: Any, settings: DedupSettings, where: str) -> None:
    """Refuse ``lsh_bands`` / ``lsh_rows`` other than those of the stored ``plan`` (its band
    keys were made with it: keys of another plan never match them)."""
    for f, kept in (("lsh_bands", plan.bands), ("lsh_rows", plan.rows)):
        asked = getattr(settings, f)
        if asked is not None and asked != kept:
            raise ConfigError(
                f"{where}: the store's MinHash plan has {plan.bands} bands of {plan.rows} rows, "
                f"and its band keys were made with it; {option_name(DedupSettings, f)} {asked} "
                "cannot be used with them. Omit it (the stored plan is used), or use a new "
                "data directory"
            )


def _check_kind(kind: str) -> None:
    """The document verbs :meth:`Deduplicator.submit` takes."""
    if kind not in ("check", "add", "check_and_add"):
        raise InputError(f"kind must be 'check', 'add' or 'check_and_add', got {kind!r}")


class Deduplicator:
    """Durable, time-windowed near-duplicate index with atomic check-and-insert.

    Open one with :meth:`open` (a data directory, or None: in memory) and its
    :class:`~neardup.online.settings.DedupSettings` (or their fields as keyword options);
    close it with :meth:`close` or a ``with`` block. The settings stored with the data win
    where the given ones say None (the fingerprinter, the verifier, the candidate mode, the
    retention and partition width); another explicit value is refused with
    :class:`ConfigError` (a retention change only with ``allow_retention_change=True`` or
    :meth:`set_retention`).

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
    def open(
        cls,
        path: str | Path | None = None,
        settings: DedupSettings | None = None,
        *,
        clock: Callable[[], float] = time.time,
        **options: Any,
    ) -> Deduplicator:
        """Open the data directory ``path`` (created if missing; None: in memory, nothing
        durable), recovering what the last run left (the log replayed, orphaned files removed),
        and start the writer.

        Parameters
        ----------
        path : str or Path or None
        settings : DedupSettings or None
            None: the defaults (:class:`~neardup.online.settings.DedupSettings`).
        clock : callable, default=time.time
            Source of "now" in unix seconds (inject one in tests).
        **options
            Fields of :class:`DedupSettings` or of :class:`~neardup.store.StoreSettings` to
            change (``max_distance=4``, ``retention="48h"``, ...).
        """
        base = DedupSettings() if settings is None else settings
        if not isinstance(base, DedupSettings):
            raise ConfigError(f"settings must be a DedupSettings, got {type(base).__name__}")
        if options:
            base = base.with_options(**options)
        if path is not None:
            if not isinstance(path, str | os.PathLike) or isinstance(path, bytes):
                raise InputTypeError(
                    f"path must be a str or Path (a folder), or None, got {type(path).__name__}"
                )
            if Path(path).exists() and not Path(path).is_dir():
                raise ConfigError(
                    f"{path} is a file, not a data directory: pass a folder (made if missing)"
                )
        return cls(path=None if path is None else Path(path), settings=base, clock=clock)

    def __init__(
        self, *, path: Path | None, settings: DedupSettings, clock: Callable[[], float]
    ) -> None:
        """Use :meth:`open`."""
        self.clock = clock
        self.path = path
        self.commit_interval = float(settings.commit_interval_ms) / 1000.0
        stored = Store.read_config(path)
        if stored is not None:
            _check_stored(stored, f"{path}/config.json")
        self.fingerprinter = load_fingerprinter(
            settings.fingerprinter, stored.get("fingerprinter") if stored else None
        )
        self.verifier = load_verifier(settings.verify, stored)
        self.store_text = settings.store_text
        self.bits = int(getattr(self.fingerprinter, "bits", 64))
        radius = settings.candidate_radius
        if radius is not None and radius > self.bits:
            raise ConfigError(
                f"candidate_radius (--candidate-radius) must be at most the fingerprints' "
                f"{self.bits} bits, got {radius}"
            )
        self.max_distance = settings.max_distance
        self.radius = self.max_distance if radius is None else radius
        self.candidates = self._candidate_mode(settings.candidates, stored, radius)
        self.lsh_plan: Any = None
        if self.candidates == "lsh":
            from ..rules import DedupConfig, LshPlan
            from ..rules.plan import plan_warnings

            # the batch default (one rule); a store keeps the plan its band keys were made with
            if stored is not None:  # refused when its keys were made with another scheme
                self.lsh_plan = LshPlan.from_dict(stored["lsh"], where=f"{path}/config.json")
                _check_plan(self.lsh_plan, settings, f"{path}/config.json")
            else:
                # planned for the verifier's threshold, as a batch run at that --threshold
                # plans (a store at 0.9 with the 0.8 plan found pairs the batch run did not
                # compare: a --save run then kept another set than one run over all of it)
                threshold = self.verifier.threshold if self.verifier is not None else None
                self.lsh_plan = DedupConfig(
                    threshold=threshold, lsh_bands=settings.lsh_bands, lsh_rows=settings.lsh_rows
                ).lsh_plan()
            for warning in plan_warnings(self.lsh_plan):
                log.warning("%s: %s", "in memory" if path is None else path, warning)
        elif settings.lsh_bands or settings.lsh_rows:
            raise ConfigError(
                f"{path or 'in memory'}: {option_name(DedupSettings, 'lsh_bands')} and "
                f"{option_name(DedupSettings, 'lsh_rows')} set the MinHash plan of "
                f"candidates='lsh', and this store uses "
                f"candidates={self.candidates!r}. Drop them, or use a new directory with "
                "candidates='lsh'"
            )
        self._preparer = DocumentPreparer(
            self.fingerprinter,
            self.bits,
            clock,
            max_future_seconds=float(settings.max_future_seconds),
            lsh=None if self.lsh_plan is None else (self.verifier, self.lsh_plan),
        )
        self.store = Store(
            path,
            settings.store,
            bits=self.bits,
            radius=self.radius,
            band_keys_of=self._band_keys_of if self.lsh_plan is not None else None,
            check_config=self._check_config,
            clock=clock,
            sketch_width=0 if self.lsh_plan is None else sketch_bytes(self.lsh_plan.hashes),
        )
        #: the settings in force (the store's as stored)
        self.settings = dataclasses.replace(settings, store=self.store.settings)
        self._decider = Decider(
            self.store,
            verifier=self.verifier,
            lsh_plan=self.lsh_plan,
            bits=self.bits,
            radius=self.radius,
            max_distance=self.max_distance,
            max_matches=settings.max_matches,
            store_text=self.store_text,
            signature_cache_rows=settings.signature_cache_rows,
            histogram_cache_rows=settings.histogram_cache_rows,
            short_chars=self._short_chars(radius),
        )
        self._preparer.retention = self.retention
        if self.retention is not None:
            self.store.expire(self.clock() - self.retention)
        self._warm_up()
        self._writer = Writer(
            self.store,
            self._decider,
            clock=clock,
            retention=self.retention,
            commit_interval=self.commit_interval,
            max_segments_per_partition=settings.max_segments_per_partition,
            save_retention=self._save_retention,
        )

    def _short_chars(self, radius: int | None) -> int | None:
        """The verifier's ``short_chars`` where the SimHash pass splits short texts as the
        batch's does on defaults (``neardup.rules.plan.splits_short_texts``): an ``lsh`` store
        verifying stored texts at the default distance (``max_distance`` 3, the batch's
        ``LSH_SIMHASH_DISTANCE``) and no ``candidate_radius``; None (every text at the
        radius) otherwise."""
        from ..rules.plan import LSH_SIMHASH_DISTANCE

        if (
            self.candidates != "lsh"
            or self.verifier is None
            or radius is not None
            or self.max_distance != LSH_SIMHASH_DISTANCE
        ):
            return None
        return int(self.verifier.short_chars)

    @property
    def retention(self) -> float | None:
        """The retention window in seconds (None: keep everything), as stored with the data."""
        return self.store.settings.retention

    @property
    def partition_seconds(self) -> float:
        """The store's partition width in seconds (fixed when it was created)."""
        width = self.store.settings.partition_seconds
        assert width is not None
        return width

    # ------------------------------------------------------------------ config
    def _candidate_mode(
        self, candidates: str | None, stored: dict[str, Any] | None, radius: int | None
    ) -> str:
        """The candidate mode: explicit, stored, or the default (see :class:`DedupSettings`)."""
        kept = None if stored is None else stored["candidates"]
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
        """Band entry keys of stored texts (rows restored from SQLite get theirs from here)."""
        return lsh_keys(self.verifier, self.lsh_plan, texts)[2]

    def _check_config(self, stored: dict[str, Any] | None) -> dict[str, Any]:
        """The config body this deduplicator keeps with the data (the store adds its own
        ``store`` section); refuses a store made with another fingerprinter or verifier."""
        fp_cfg = jsonable(self.fingerprinter.config())
        v_cfg = (
            jsonable(self.verifier.config())
            if self.verifier is not None and hasattr(self.verifier, "config")
            else None
        )
        if stored is not None:
            _check_stored(stored, f"{self.path}/config.json")
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
            "format": CONFIG_FORMAT,
            "candidates": self.candidates,
            **({"lsh": self.lsh_plan.to_dict()} if self.lsh_plan is not None else {}),
            "bits": self.bits,
            "fingerprinter": fp_cfg,
            "verifier": v_cfg if v_cfg is not None else (stored or {}).get("verifier"),
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
        row = self._live_row(id)
        if row is None:
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
        if isinstance(ids, str | bytes) or not isinstance(ids, Iterable):
            raise InputTypeError(
                f"ids must be a list of str, got {type(ids).__name__}"
                + ("; wrap one id in a list" if isinstance(ids, str) else "")
            )
        ids = list(ids)  # once: a generator is read by the check and the deletes alike
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
        self._check_open()
        items, _ = self._as_list(docs)
        return self._decider.group_matches(self._prepare(items))

    def flush(self) -> None:
        """Write the memtable to segments now (durable stores; a no-op in memory)."""
        self._writer.run(Op("flush"))

    def set_retention(self, retention: str | float | None) -> None:
        """Change the retention window (``None``: keep everything), store it with the data and
        apply it: a shorter window drops, at once, the partitions now outside it. Logged as a
        warning; the explicit form of ``allow_retention_change=True``."""
        secs = parse_duration(retention)
        self._writer.run(Op("retention", arg=secs))

    def _save_retention(self, secs: float | None) -> None:
        """(writer) Store a new retention with the data and take it for this deduplicator's
        reads and input checks (the writer applies it next)."""
        old = self.retention
        self.store.set_retention(secs)
        log.warning(
            "%s: retention changed from %s to %s by set_retention()",
            self.path,
            "none" if old is None else f"{old:g} s",
            "none" if secs is None else f"{secs:g} s",
        )
        self.settings = dataclasses.replace(self.settings, store=self.store.settings)
        self._preparer.retention = secs

    def compact(self) -> int:
        """Merge, now, every time partition that holds more than ``max_segments_per_partition``
        segments (into one segment each; deleted rows dropped). Blocks until done, e.g. after
        a large :meth:`bulk_load`, so that later searches visit few segments and no background
        merge competes with the load. Returns the number of merges installed.
        """
        self._check_open()
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
            else self._checked_times(times, len(ids))
        )
        if not ids:
            return 0
        return int(self._writer.run(Op("bulk", arg=(list(ids), fps, ts))))

    def load(self, docs: Sequence[Mapping[str, Any]]) -> int:
        """Store documents as they are, deciding nothing: seeding a window or a corpus store
        with documents already deduplicated (the kept output of ``neardup dedup``, an
        incremental run's kept documents, a keep-first seed:
        :func:`neardup.incremental.dedup_into`). Validated, fingerprinted and
        keyed as :meth:`add` does, so later checks meet them as if they had been added one by
        one; written straight into segments and the metadata in one step (not through the
        log), durable on return. Not checked against the store nor among themselves: a
        duplicate given here is stored.

        Returns
        -------
        int
            Number of documents loaded.

        Raises
        ------
        InputError
            An id repeated in ``docs`` or already stored (nothing is loaded), or a document
            :meth:`add` would refuse.
        """
        items, _ = self._as_list(docs)
        if not items:
            return 0
        # refuses an id repeated in the batch; a large batch's signatures on every core
        p = self._preparer.prepare(items, default_workers() if len(items) >= _LOAD_PARALLEL else 1)
        return self.load_prepared(p)

    def prepare(self, docs: Sequence[Mapping[str, Any]]) -> PreparedDocs:
        """Validate and fingerprint ``docs`` in the calling thread, as :meth:`submit` does, for
        :meth:`submit_prepared` and then :meth:`load_prepared`: a batch checked against the
        store and then loaded is prepared once (:func:`neardup.incremental.dedup_into`).

        Raises
        ------
        InputError
            A document :meth:`add` would refuse, or an id repeated in ``docs``.
        """
        items, _ = self._as_list(docs)
        return self._prepare(items)

    def prepare_signed(
        self,
        docs: Sequence[Mapping[str, Any]],
        fps: npt.NDArray[np.uint64],
        empty: npt.NDArray[np.bool_],
        sig: npt.NDArray[np.uint16] | None = None,
        tokens: npt.NDArray[np.int64] | None = None,
        buckets: npt.NDArray[np.uint8] | None = None,
        chash: npt.NDArray[np.uint64] | None = None,
    ) -> PreparedDocs:
        """:meth:`prepare` for documents a batch run has already fingerprinted and signed
        (:func:`neardup.batch.dedup`'s ``work_out``), made with this store's fingerprinter,
        verifier and plan (the caller's to check: :func:`neardup.incremental.dedup_into`
        does): validated and keyed, not fingerprinted or signed again. ``buckets``: their
        coarse token counts from the same pass, (n, 64); without them the rows' token masks
        are unknown (they are read where the masks would have spared it). ``chash``: their
        content hashes from the same run ((n, 2) uint64, as
        :func:`~neardup.fingerprint.content_hash_many` makes them); without them the texts are
        hashed here.

        Raises
        ------
        InputError
            A document :meth:`add` would refuse, or an id repeated in ``docs``.
        """
        items, _ = self._as_list(docs)
        return self._preparer.prepare_signed(items, fps, empty, sig, tokens, buckets, chash)

    def load_prepared(
        self, p: PreparedDocs, *, times: npt.NDArray[np.float64] | None = None
    ) -> int:
        """:meth:`load` of a batch :meth:`prepare` made (or :meth:`PreparedDocs.take` of one),
        with ``times`` (unix seconds, one per document, checked against the store's window
        as :meth:`load` checks a document's ``time``) instead of the batch's own. Returns how
        many were loaded."""
        if not len(p):
            return 0
        if times is not None:
            p = dataclasses.replace(p, times=self._checked_times(times, len(p)))
        sk = (
            None
            if p.sig is None
            else sketches(
                p.sig,
                p.tokens if p.tokens is not None else np.zeros(len(p), np.int64),
                None if p.buckets is None else token_masks(p.buckets),
            )
        )
        summ = None
        if (
            sk is not None
            and p.tokens is not None
            and self.store_text
            and self.verifier is not None
        ):
            summ = make_summaries(self.verifier, p.texts, sk, p.chash, p.tokens, p.hists)
        extra = BulkDocs(
            texts=p.texts if self.store_text else None,
            chash=p.chash,
            empty=p.empty,
            metadata=p.metadata,
            bands=p.bands,  # made by the preparer with the channel, None without it
            sketches=sk,
            summaries=summ,
        )
        n = self._writer.run(Op("bulk", arg=(p.ids, p.fps, p.times, extra)))
        return int(n)

    def _checked_times(self, times: Any, n: int) -> npt.NDArray[np.float64]:
        """``times`` as ``n`` float64 unix seconds, refused (:class:`InputError`) unless each is
        finite and inside the store's window (the oldest and the newest checked)."""
        ts = np.asarray(times, dtype=np.float64)
        if ts.shape != (n,) or not np.isfinite(ts).all():
            raise InputError(f"times must be {n} finite unix seconds, got shape {ts.shape}")
        if n:
            now = self.clock()
            for i in (int(np.argmin(ts)), int(np.argmax(ts))):
                self._preparer.check_time(f"times[{i}]", float(ts[i]), now)
        return ts

    def time_window(self) -> tuple[float, float]:
        """``(oldest, newest)``: the times (unix seconds, inclusive) a document may carry now;
        others are refused (older ones would leave the retention window at once)."""
        return self._preparer.time_window(self.clock())

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
        """Documents stored. With a retention, this counts the rows past the window that the
        next drop removes (a drop takes a whole partition, up to ``retention / 8`` late), which
        :meth:`get`, ``in`` and the checks no longer see."""
        self._check_open()
        return len(self.store)

    def __contains__(self, id: object) -> bool:
        """Whether :meth:`get` would find ``id`` (a row past the retention window is not)."""
        return isinstance(id, str) and self._live_row(id) is not None

    def _check_open(self) -> None:
        if self._writer.closed:
            raise IndexStateError("this Deduplicator is closed; open a new one")

    def _live_row(self, id: str) -> Any:
        """The stored row of ``id`` unless it is past the retention window, else None."""
        self._check_open()
        row = self.store.get_row(id)
        if row is None or (self.retention is not None and row.time < self.clock() - self.retention):
            return None
        return row

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
        (tests/online/test_online.py). Its steps run in order, or last first in a compile
        helper (``NEARDUP_WARM_LAST_FIRST``: :mod:`neardup.online.warm`)."""
        steps = self._warm_steps()
        if os.environ.get(WARM_LAST_FIRST_ENV) == "1":
            steps.reverse()
        try:
            for step in steps:
                step()
        except Exception:  # warm-up is an optimisation only
            log.debug("warm-up failed", exc_info=True)

    def _warm_steps(self) -> list[Callable[[], None]]:
        """:meth:`_warm_up`'s steps, in the order a server's first requests reach them."""
        steps = [self._warm_index, self._warm_prepare]
        if self.lsh_plan is not None:
            steps += [self._warm_lsh, self._warm_verify, self._warm_bands]
        return steps

    def _warm_index(self) -> None:
        rng = np.random.default_rng(0)
        n = 2048  # a group this large joins itself with all_pairs' table self-join
        fps = rng.integers(0, 2**64, (n,) if self.bits == 64 else (n, 2), dtype=np.uint64)
        decider = self._decider
        decider.intra_pairs(fps)
        decider.intra_pairs(fps[:300])
        decider.intra_pairs(fps[:2])
        self.store.warm_up()

    def _warm_prepare(self) -> None:
        # the request path's own kernels: fingerprints (the GIL-holding entry point for
        # small texts, the other one for long texts and batches), content hashes; loading
        # one from numba's cache on the first request stalls everything queued behind it
        self._prepare([{"id": "warm-up", "text": "warm up the fingerprint kernels"}])
        self._prepare([{"id": "warm-up", "text": "warm up a long text " * 1000}])
        # non-ASCII texts' own path (fingerprints and, in lsh mode, signatures): the
        # code-point class table (made once a process) and the word kernel, which a
        # server's first Chinese request otherwise waited for
        for text in _WARM_NON_ASCII:
            self._prepare([{"id": "warm-up", "text": text}])

    def _warm_lsh(self) -> None:
        """The MinHash channel's signature and agreement kernels."""
        from ..fingerprint.minhash import warm_band_entries
        from ..rules.lsh import agreeing, lsh_pairs, sketch_agreeing

        assert self.lsh_plan is not None
        sig, usable, _, ntok, buckets = lsh_keys(
            self.verifier, self.lsh_plan, ["warm up minhash"] * 2
        )
        lsh_pairs(sig, usable, self.lsh_plan)
        one = np.zeros(1, np.int64)
        agreeing(sig, one, sig, one, self.lsh_plan)
        sk = sketches(sig, ntok, token_masks(buckets))
        sketch_agreeing(sk, one, sk, one, self.lsh_plan)
        self._decider._mask_bound(buckets, ntok, one, sk, ntok, one)
        warm_band_entries(self.lsh_plan)

    def _warm_verify(self) -> None:
        decider = self._decider
        decider.verify("warm up the verifier", [(0, 0, "w", "warm up the verifier kernels")])
        decider.verify(_WARM_NON_ASCII[0], [(0, 0, "w", _WARM_NON_ASCII[1])])

    def _warm_bands(self) -> None:
        """The band sections' search, packing and merge kernels."""
        from ..index.band_packed import pack_section
        from ..index.bands import (
            BandSection,
            MergedSection,
            SectionGroup,
            Unsorted,
            lookup,
            merge_mapped,
            merge_sections,
        )

        section = BandSection.from_sorted(
            np.arange(4, dtype=np.uint64), np.arange(4, dtype=np.uint32)
        )
        lookup([section], np.arange(2, dtype=np.uint64)[:, None], 2)  # its search kernels:
        big = BandSection.from_sorted(  # the interpolating one for few keys
            np.arange(5000, dtype=np.uint64), np.arange(5000, dtype=np.uint32)
        )
        lookup([big], np.arange(2, dtype=np.uint64)[:, None], 2)
        buffer = Unsorted(np.arange(4, dtype=np.uint64), np.arange(4, dtype=np.int64))
        lookup([buffer], np.arange(2, dtype=np.uint64)[:, None], 2)  # a memtable's buffer
        packed = pack_section(  # as a segment's: packed, searched as a group
            big.offsets, big.keys, big.rows, 5000, np.arange(5000, dtype=np.int64)
        )
        lookup([SectionGroup([packed])], np.arange(2, dtype=np.uint64)[:, None], 2)
        packed.check()  # a flushed segment's checks when it is opened
        packed.max_row()
        merge_sections(section, section)  # the memtable's section merges
        rows = np.arange(5000, dtype=np.int64)  # compaction's merge of segments
        merge_mapped([packed, packed], [2 * rows, 2 * rows + 1])
        streamed = MergedSection([packed, packed], [2 * rows, 2 * rows + 1], 10_000)
        list(streamed.key_bytes())  # a large compaction's, written group by group
        list(streamed.row_bytes())
