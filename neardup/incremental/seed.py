"""Seeding a store from files (``neardup store load``, ``neardup serve --seed``):
:func:`load_files` reads a corpus and puts it into an online store (a
:class:`neardup.online.Deduplicator` data directory, e.g. a namespace of a ``neardup serve``
data directory) in bulk, at the store's own rule.

Two ways, both deciding nothing themselves:

- ``dedup=True`` (the default): keep-first in input order, against what the store already holds
  and among the new documents: the kept set is the one inserting them one by one with
  ``check_and_add`` would keep. With the MinHash channel (an ``lsh`` store) and the batch plan
  the store was made with, this is :func:`~neardup.incremental.dedup_into` (the store checked,
  the batch rule over the rest, the kept documents loaded straight into segments); otherwise
  (a ``simhash`` store, a store made with another plan) it *is* ``check_and_add``, in batches.
- ``dedup=False``: every document loaded as it is (``Deduplicator.load``), for a corpus that is
  already deduplicated (the output of ``neardup dedup``).

Times: ``time_field`` names the field holding each record's time (unix seconds, or ISO 8601 with
a UTC offset); without it every document is stamped with the load's time. Times are checked
against the store's window before anything is decided: a time in the future beyond the store's
allowance is refused, as is one older than the retention window unless ``drop_expired`` (then
such documents are left out and counted). Ids the store's rule refuses (control characters,
more than 1,024 characters), ids repeated across files and ids already in the store are
refused before anything is written.

A group is held in memory, not the corpus: an input of more than ``chunk_docs`` documents is
read twice, first file by file to check it (:mod:`.survey`; a JSONL file a piece at a time),
then a group at a time to decide
and load: whole files while they fit, a larger file in slices of ``chunk_docs`` (so a window of
tens of millions of documents seeds from a folder of shards, or from one file, on one
machine).

``benchmarks/bench_load.py`` measures the bulk paths; docs/store.md ("Bulk loads") has the
figures.
"""

from __future__ import annotations

import ctypes
import gc
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..errors import ConfigError, InputError, RecordError
from .journal import STORE_LOAD, LoadJournal, input_identity, stopped_run
from .stored import open_store
from .survey import Part, id_digest, id_hashes, survey

__all__ = ["load_files"]

Progress = Callable[[str, int, int], None]

#: documents per ``check_and_add`` call on the path that inserts (one write group each)
ADD_CHUNK = 1000

#: documents decided at once by default (``chunk_docs``): the files are loaded in groups of
#: about this many, so that a load holds a group's work, not the corpus's (what a group
#: takes, and the store's merges beside it: docs/store.md, *Bulk loads*); the
#: store is checked from the second group on, so bigger groups load faster
CHUNK_DOCS = 1_000_000


def load_files(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    store: str | os.PathLike[str],
    *,
    settings: Any = None,
    dedup: bool = True,
    time_field: str | None = None,
    drop_expired: bool = False,
    input_format: str | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    encoding: str = "utf-8",
    on_error: Literal["fail", "skip"] = "fail",
    generate_ids: bool = False,
    progress: Progress | None = None,
    if_empty: bool = False,
    chunk_docs: int = CHUNK_DOCS,
    resume: bool = False,
) -> dict[str, Any]:
    """Read ``inputs`` and put them into the store at ``store`` (created when missing, with
    ``settings``: a :class:`~neardup.online.settings.DedupSettings`), keep-first or as they
    are (see the module). Inputs as :func:`neardup.io.read_corpus` reads them. ``if_empty``:
    only seed a store that holds no documents (``neardup serve --seed`` on every start); a store
    that holds some is left as it is (``path`` is then ``None``, nothing is read), unless a
    seed into it stopped part way: that one is finished (as ``resume``).

    ``resume``: finish a load into this store that stopped part way (killed, out of memory),
    from where it stopped, with the same inputs and options (:mod:`.journal`: the load notes
    where each group starts in ``LOAD-JOURNAL.json`` beside the store and removes it when done;
    what the stopped group had loaded is removed first; the documents before it are read again
    but not decided again). Without a stopped load, a store that holds no documents is loaded
    from the start; one that holds some is refused. A load into a store whose load stopped is
    refused without ``resume``.

    The inputs are read twice when they hold more than ``chunk_docs`` documents: once, file by
    file, to refuse what the load would refuse before anything is written (the module), then
    a group of up to ``chunk_docs`` documents at a time, each group decided against what the
    earlier ones stored (keep-first: the kept set of one group wherever no MinHash bucket
    outgrows the store's cap; docs/store.md, *Bulk loads*). A group is whole files while they
    fit; a file holding more is cut into slices of ``chunk_docs``: a JSONL file's slices each
    parse their own lines (the first pass keeps where each record's line starts, its number
    and its id's hash, and a compressed file's uncompressed copy, until the last slice);
    another format's file is read once for all its slices and held meanwhile. Stdin is one
    group (it cannot be read twice).

    Returns
    -------
    dict
        ``documents`` (read), ``skipped_records``, ``expired`` (left out by ``drop_expired``),
        ``loaded``, ``dropped`` (near duplicates, keep-first), ``path`` (``"dedup_into"``,
        ``"check_and_add"`` or ``"load"``: how they went in; None: not seeded, ``if_empty``),
        ``groups`` (loaded one after another), ``check_s`` (the first pass: every
        file read and checked), ``store``, ``store_documents_before``
        / ``_after``, ``compact_s`` (the segments the loads
        wrote merged at the end, one per time partition), ``elapsed_s``, ``docs_per_s``.

    Raises
    ------
    ConfigError
        ``time_field`` with plain-text or lines inputs.
    InputError
        A bad time or id, an id repeated across files (with ``on_error="fail"``), a time
        outside the store's window (see the module), ids already stored: nothing is loaded. A
        file that changed between the two reads: the groups before it stay loaded (said).
    """
    from ..io import plan_inputs

    t0 = time.perf_counter()
    report = progress or (lambda stage, done, total: None)
    paths = [os.fspath(inputs)] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    files = plan_inputs([os.fspath(p) for p in paths], input_format)
    if chunk_docs < 1:
        raise ConfigError(f"chunk_docs must be at least 1, got {chunk_docs}")
    if any(f.path == "-" for f in files):
        chunk_docs = max(chunk_docs, 2**62)  # stdin cannot be read twice: one group
    if time_field is not None:
        for f in files:
            if f.fmt in ("text", "lines"):
                raise ConfigError(
                    f"--time-field {time_field}: {f.path} is read as {f.fmt}, whose records "
                    "have no fields; use JSONL, JSON, CSV or Parquet input, or drop "
                    "--time-field (every document is stamped with the load's time)"
                )
    reading = dict(
        text_field=text_field, id_field=id_field, encoding=encoding, on_error=on_error,
        generate_ids=generate_ids,
    )  # fmt: skip
    options = dict(reading, dedup=dedup, time_field=time_field, drop_expired=drop_expired,
                   input_format=input_format)  # fmt: skip
    root = Path(os.fspath(store))
    # (a store this call makes is removed again when the load fails before it holds a
    # document: a bad record, a time outside the window)
    with open_store(root, settings) as d:
        before = len(d)
        stopped = LoadJournal.read(root)
        if if_empty and before and stopped is None:
            return _summary(d, store, before, t0, path=None)
        identity = input_identity(files, report)
        resuming = stopped_run(
            root, STORE_LOAD, resume=resume or if_empty, identity=identity, options=options,
            holds=0 if all(f.path == "-" for f in files) else before,
        )  # fmt: skip
        counts = _read_and_load(
            d, files, dedup=dedup, time_field=time_field, drop_expired=drop_expired,
            progress=progress, reading=reading, chunk_docs=chunk_docs,
            journal=None if any(f.path == "-" for f in files) else (identity, options),
            stopped=resuming,
        )  # fmt: skip
        # the loads left one segment per chunk and time partition: merged now, so a server
        # opening the store searches few segments and no background merge competes with it;
        # after the corpus is released (the merge of a large load needs the memory)
        gc.collect()
        report("compact", 0, 1)
        tc = time.perf_counter()
        d.compact()
        report("compact", 1, 1)
        LoadJournal.remove(root)  # finished: nothing to resume
        return _summary(
            d, store, before, t0, **counts, compact_s=round(time.perf_counter() - tc, 3)
        )


def _read_and_load(
    d: Any,
    files: Any,
    *,
    dedup: bool,
    time_field: str | None,
    drop_expired: bool,
    progress: Progress | None,
    reading: dict[str, Any],
    chunk_docs: int,
    journal: tuple[list[dict[str, Any]], dict[str, Any]] | None = None,
    stopped: LoadJournal | None = None,
) -> dict[str, Any]:
    """Check the corpus (the first pass: :mod:`.survey`), then load it a group at a
    time; the counts for the summary (what was read is released on return). ``journal``: the
    inputs' identity and the options, noted before each group (:mod:`.journal`); ``stopped``:
    the stopped load this one finishes (what its last group loaded removed first)."""
    from .run import dedup_into, store_config
    from .stored import Reclaim, load_kept

    report = progress or (lambda stage, done, total: None)
    t0 = time.perf_counter()
    done_before: list[int] | None = None
    rolled_back = 0
    reclaim = None
    if stopped is not None:
        # the stopped group's kept documents that reached the store: found as the first pass
        # checks the ids, and removed after it, so that the group is decided again against the
        # store as it was before it (rows another writer added since stay)
        reclaim = Reclaim.since(d, stopped.rowid)
        done_before = [
            2**62 if k < stopped.file else stopped.record if k == stopped.file else 0
            for k in range(len(files))
        ]
    s = survey(
        d, files, reading, time_field=time_field, drop_expired=drop_expired,
        chunk_docs=chunk_docs, progress=progress, done=done_before, reclaim=reclaim,
    )  # fmt: skip
    if reclaim is not None:
        try:
            rolled_back = reclaim.remove(d)
        except BaseException:
            s.release()
            raise
    check_s = round(time.perf_counter() - t0, 3)
    index = {id(c): k for k, c in enumerate(s.files)}
    prior = (0, 0) if stopped is None else (stopped.groups_done, stopped.loaded)

    def note(file: int, record: int, groups_done: int, kept: int) -> None:
        if journal is not None:
            LoadJournal(
                command=STORE_LOAD, inputs=journal[0], options=journal[1], file=file, record=record,
                rowid=d.store.next_rowid, groups_done=prior[0] + groups_done,
                loaded=prior[1] + kept,
            ).write(d.path)  # fmt: skip

    start = d.store.next_rowid

    def stored_nothing() -> bool:
        """This load has stored nothing yet (and finishes none): its journal can go."""
        return stopped is None and d.store.next_rowid == start

    try:
        report("read", s.documents, s.documents)
        cfg = store_config(d) if dedup else None
        how = "load" if not dedup else "dedup_into" if cfg is not None else "check_and_add"
        groups = s.groups(chunk_docs)
        total, done, loaded, expired_since = s.used, 0, 0, 0
        for k, group in enumerate(groups):
            note(*_frontier(group, index), k, loaded)  # where this group starts
            # a time that was in the window at the check may have left it since (a load of
            # hours): such documents are left out as expired, as retention would drop them
            oldest = d.time_window()[0] if time_field is not None else None
            resume = _resume_at(group[0], reading)
            try:
                ids, texts, when, gone = _group_docs(group, reading, oldest)
            except InputError as exc:
                advice = (
                    f"Load {resume} once they are whole again"
                    if stored_nothing()  # (its journal goes: see below)
                    else f"Remove {LoadJournal.path_in(d.path)} and load {resume} once they "
                    "are whole again"
                )
                raise InputError(
                    f"{exc}; {k} of {len(groups)} groups were loaded before it "
                    f"({loaded:,} documents kept): the store holds them. {advice}"
                ) from None
            if len(groups) > 1:
                report("group", k, len(groups))
                report("load", done, total)
            if not ids:  # every document of the group left out
                pass
            elif how == "load":
                every = np.ones(len(ids), np.bool_)
                loaded += load_kept(d, ids, texts, every, progress=progress, times=when)
            elif how == "dedup_into":
                into = dedup_into(d, ids, texts, config=cfg, progress=progress, times=when)
                loaded += int(into.keep.sum())
            else:
                loaded += _insert(d, ids, texts, when, report)
            done += len(ids) + gone
            expired_since += gone
            del ids, texts, when
            if len(groups) > 1:
                report("group", k + 1, len(groups))
                report("load", done, total)
                _give_back_memory()
        note(len(files), 0, len(groups), loaded)  # every document decided (the merge next)
        out = {
            "path": how, "documents": s.documents, "skipped_records": s.skipped,
            "expired": s.expired + expired_since, "loaded": loaded,
            "dropped": total - expired_since - loaded,
            "groups": len(groups), "check_s": check_s,
        }  # fmt: skip
        if stopped is not None:
            out["resumed"] = {
                "documents": s.resumed, "groups": stopped.groups_done,
                "loaded": stopped.loaded, "removed": rolled_back,
            }  # fmt: skip
        return out
    except BaseException:
        # a load that stopped before any of its documents reached the store (its first group
        # refused, or interrupted before its first load) leaves nothing to finish: the next
        # load starts afresh, as it would have before the journal
        if stored_nothing():
            LoadJournal.remove(d.path)
        raise
    finally:
        s.release()  # a sliced file's corpus too, where a load stopped inside it


def _frontier(group: list[Part], index: dict[int, int]) -> tuple[int, int]:
    """Where ``group`` starts: the input file (its index, from ``index``: ``id(check)`` ->
    index) and record before which every record is decided, skipping the records a stopped
    load decided (a resumed load's first group may start with whole files of them)."""
    for part in group:
        start = max(part.lo, part.check.done)
        if start < part.hi:
            return index[id(part.check)], start
    last = group[-1]
    return index[id(last.check)], last.hi


def _give_back_memory() -> None:
    """Between groups: what a group freed handed back to the system. glibc keeps the freed
    arenas of a group's many small objects (its texts, ids, lists) and the next group's peak
    comes on top of them; ``malloc_trim`` returns them (docs/store.md, *Bulk loads*, has what
    that saves). A no-op where the C library is not glibc."""
    gc.collect()
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc
        return
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim(0)


def _corpus(part: Part, reading: dict[str, Any]) -> tuple[Any, int]:
    """A corpus holding ``part``'s records, and the record of its file at the corpus's
    position 0: the corpus held (from the first pass, or from the file's earlier slice); else,
    for a JSONL file the first pass kept the lines of, the part's own records read again
    (their lines parsed, nothing held after); else the file read again and held until its last
    slice is taken. Refused where the ids are not the ones checked."""
    from ..io import read_corpus
    from ..io.formats import read_records

    c = part.check
    if c.held is None and c.source is not None:
        assert c.hashes is not None
        if not os.path.isfile(c.source.temp or c.source.path):
            raise InputError(f"{c.file.path} changed after it was checked: it is gone")
        try:
            corpus = read_records(c.source, part.lo, part.hi, **reading)
        except RecordError as exc:
            raise InputError(f"{c.file.path} changed after it was checked: {exc}") from None
        n = part.hi - part.lo
        if len(corpus) != n or not np.array_equal(
            id_hashes(corpus.ids), c.hashes[part.lo : part.hi]
        ):
            raise InputError(
                f"{c.file.path} changed after it was checked: its records {part.lo + 1:,} to "
                f"{part.hi:,} now hold {len(corpus):,} records with other ids than the "
                f"{n:,} checked"
            )
        return corpus, part.lo
    if c.held is None:
        corpus = read_corpus([c.file], **reading)
        if len(corpus) != c.documents or id_digest(id_hashes(corpus.ids)) != c.digest:
            corpus.close()
            raise InputError(
                f"{c.file.path} changed after it was checked: it now holds "
                f"{len(corpus):,} records with other ids than the {c.documents:,} checked"
            )
        c.held = corpus
    return c.held, 0


def _resume_at(part: Part, reading: dict[str, Any]) -> str:
    """Where a load that stopped before ``part`` takes up again, for a message."""
    if part.lo == 0:
        return f"the files from {part.check.file.path} on"
    where = part.check.location(part.lo, reading)  # its lines or its corpus are held
    return f"the records from {where} on (the rest of that file, then the files after it)"


def _group_docs(
    group: list[Part], reading: dict[str, Any], oldest: float | None
) -> tuple[list[str], list[str], list[float] | None, int]:
    """The ids, texts and times of a group's documents to decide (each part's records, from
    :func:`_corpus`; a file's corpus released after its last part: the group holds copies),
    and how many were left out for a time now older than ``oldest``."""
    ids: list[str] = []
    texts: list[str] = []
    when: list[float] | None = None if group[0].check.times is None else []
    gone = 0
    for part in group:
        c = part.check
        if not c.use[part.lo : part.hi].any():  # nothing of it to decide: not read again
            if part.last:
                c.release()
            continue
        corpus, at = _corpus(part, reading)
        try:
            where = np.flatnonzero(c.use[part.lo : part.hi]) + part.lo
            if oldest is not None and c.times is not None:
                now_in = c.times[where] >= oldest
                gone += len(where) - int(now_in.sum())
                where = where[now_in]
            ids += [corpus.ids[int(i) - at] for i in where]
            texts += [corpus.texts[int(i) - at] for i in where]
            if when is not None and c.times is not None:
                when += c.times[where].tolist()
        finally:
            if corpus is not c.held:  # a slice's own records: the group holds copies
                corpus.close()
            if part.last:
                c.release()
    return ids, texts, when, gone


def _summary(
    d: Any, store: Any, before: int, t0: float, *, path: str | None = None, documents: int = 0,
    **counts: float,
) -> dict[str, Any]:  # fmt: skip
    elapsed = time.perf_counter() - t0
    out: dict[str, Any] = {"documents": documents, "skipped_records": 0, "expired": 0}
    out.update(loaded=0, dropped=0, groups=0)
    out.update(counts)
    out.update(
        path=path,
        store=os.fspath(store),
        store_documents_before=before,
        store_documents_after=len(d),
        elapsed_s=round(elapsed, 3),
        docs_per_s=round(documents / elapsed, 1) if documents and elapsed > 0 else None,
    )
    return out


def _insert(
    d: Any, ids: list[str], texts: list[str], times: list[float] | None, report: Progress
) -> int:
    """Keep-first by inserting: ``check_and_add``, ``ADD_CHUNK`` documents a call."""
    n = len(ids)
    kept = 0
    report("store", 0, n)
    for lo in range(0, n, ADD_CHUNK):
        hi = min(n, lo + ADD_CHUNK)
        docs: list[dict[str, Any]] = [{"id": ids[i], "text": texts[i]} for i in range(lo, hi)]
        if times is not None:
            for doc, t in zip(docs, times[lo:hi], strict=True):
                doc["time"] = t
        kept += sum(not dec.duplicate for dec in d.check_and_add(docs))
        report("store", hi, n)
    return kept
