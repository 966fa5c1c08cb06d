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
more than 1,024 characters) and ids already in the store are refused before anything is
written.

``benchmarks/bench_load.py`` measures the bulk paths; docs/store.md ("Bulk loads") has the
figures.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..errors import ConfigError, InputError

__all__ = ["load_files"]

Progress = Callable[[str, int, int], None]

#: documents per ``check_and_add`` call on the path that inserts (one write group each)
ADD_CHUNK = 1000


def _times(corpus: Any, time_field: str, on_error: str) -> tuple[np.ndarray, np.ndarray]:
    """Every document's time (NaN where the record was skipped) and which were skipped."""
    from ..io import record_values
    from ..io.fields import MISSING, unix_seconds

    values = record_values(corpus, time_field)
    times = np.full(len(values), np.nan)
    bad = np.zeros(len(values), np.bool_)
    for i, v in enumerate(values):
        try:
            if v is MISSING:
                raise ValueError("the record has no such field")
            times[i] = unix_seconds(v)
        except ValueError as exc:
            if on_error == "fail":
                raise InputError(
                    f"{corpus.location(i)}: {time_field}: {exc}", field=time_field
                ) from None
            bad[i] = True
    return times, bad


def _bad_ids(corpus: Any, on_error: str) -> np.ndarray:
    """The documents whose id the store refuses (its id rule is stricter than the readers':
    no control characters, at most 1,024 characters); refused here, before anything is
    loaded, rather than by the load of a later chunk."""
    from ..online.prepare import id_problem

    bad = np.zeros(len(corpus), np.bool_)
    for i, x in enumerate(corpus.ids):
        problem = id_problem(x)
        if problem is None:
            continue
        if on_error == "fail":
            raise InputError(
                f"{corpus.location(i)}: id {x!r:.60}: {problem}; the store refuses it "
                "(--generate-ids numbers the records instead); nothing was loaded",
                field="id",
            )
        bad[i] = True
    return bad


def _window(
    d: Any, times: np.ndarray, keep: np.ndarray, corpus: Any, drop_expired: bool
) -> np.ndarray:
    """Refuse times the store cannot hold; the documents older than its window (left out with
    ``drop_expired``, else refused)."""
    oldest, newest = d.time_window()
    late = keep & ((times > newest) | (times < 0))
    if late.any():
        i = int(np.flatnonzero(late)[0])
        raise InputError(
            f"{int(late.sum()):,} documents have a time the store cannot take (before 0 or "
            f"after {newest:.0f}, now plus the store's future allowance), e.g. "
            f"{corpus.location(i)} at {times[i]!r}; nothing was loaded"
        )
    expired = keep & (times < oldest)
    if expired.any() and not drop_expired:
        i = int(np.flatnonzero(expired)[0])
        raise InputError(
            f"{int(expired.sum()):,} documents are older than the store's retention window "
            f"(before {oldest:.0f}), e.g. {corpus.location(i)} at {times[i]!r}: they would "
            "leave it at once. Pass --drop-expired to leave them out; nothing was loaded"
        )
    return expired


def _batch_config(d: Any) -> Any:
    """The batch configuration that decides as the store ``d`` does (its fingerprinter,
    verifier and threshold), or None when the batch rule cannot stand for it (no MinHash
    channel, or a store made with another plan than that configuration's)."""
    from ..rules.config import DedupConfig

    if d.lsh_plan is None or d.verifier is None:
        return None
    cfg = DedupConfig(
        fingerprinter=d.fingerprinter.config(),
        verifier=d.verifier.config(),
        threshold=d.verifier.threshold,
        lsh_bands=d.lsh_plan.bands,  # the store's plan, the planner's or one given on creation
        lsh_rows=d.lsh_plan.rows,
    )
    return cfg if cfg.lsh_plan() == d.lsh_plan else None


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
) -> dict[str, Any]:
    """Read ``inputs`` and put them into the store at ``store`` (created when missing, with
    ``settings``: a :class:`~neardup.online.settings.DedupSettings`), keep-first or as they
    are (see the module). Inputs as :func:`neardup.io.read_corpus` reads them. ``if_empty``:
    only seed a store that holds no documents (``neardup serve --seed`` on every start); a store
    that holds some is left as it is (``path`` is then ``None``, nothing is read).

    Returns
    -------
    dict
        ``documents`` (read), ``skipped_records``, ``expired`` (left out by ``drop_expired``),
        ``loaded``, ``dropped`` (near duplicates, keep-first), ``path`` (``"dedup_into"``,
        ``"check_and_add"`` or ``"load"``: how they went in; None: not seeded, ``if_empty``),
        ``store``, ``store_documents_before`` / ``_after``, ``compact_s`` (the segments the loads
        wrote merged at the end, one per time partition), ``elapsed_s``, ``docs_per_s``.

    Raises
    ------
    ConfigError
        ``time_field`` with plain-text or lines inputs.
    InputError
        A bad time or id (with ``on_error="fail"``), a time outside the store's window (see
        the module), ids already stored; nothing is loaded.
    """
    from ..io import plan_inputs
    from ..online import Deduplicator

    t0 = time.perf_counter()
    report = progress or (lambda stage, done, total: None)
    paths = [os.fspath(inputs)] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    files = plan_inputs([os.fspath(p) for p in paths], input_format)
    if time_field is not None:
        for f in files:
            if f.fmt in ("text", "lines"):
                raise ConfigError(
                    f"--time-field {time_field}: {f.path} is read as {f.fmt}, whose records "
                    "have no fields; use JSONL, JSON, CSV or Parquet input, or drop "
                    "--time-field (every document is stamped with the load's time)"
                )
    with Deduplicator.open(Path(os.fspath(store)), settings) as d:
        before = len(d)
        if if_empty and before:
            return _summary(d, store, before, t0, path=None)
        counts = _read_and_load(
            d, files, dedup=dedup, time_field=time_field, drop_expired=drop_expired,
            progress=progress, reading=dict(text_field=text_field, id_field=id_field,
            encoding=encoding, on_error=on_error, generate_ids=generate_ids),
        )  # fmt: skip
        # the loads left one segment per chunk and time partition: merged now, so a server
        # opening the store searches few segments and no background merge competes with it;
        # after the corpus is released (the merge of a large load needs the memory)
        gc.collect()
        report("compact", 0, 1)
        tc = time.perf_counter()
        d.compact()
        report("compact", 1, 1)
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
) -> dict[str, Any]:
    """Read the corpus, check it, load it; the counts for the summary (the corpus and what
    was made from it are released on return)."""
    from ..io import read_corpus
    from .run import dedup_into
    from .stored import load_kept, refuse_stored_ids

    report = progress or (lambda stage, done, total: None)
    on_error = reading["on_error"]
    with read_corpus(files, **reading) as corpus:
        n = len(corpus)
        report("read", n, n)
        use = np.ones(n, np.bool_)
        times: np.ndarray | None = None
        expired = np.zeros(n, np.bool_)
        use &= ~_bad_ids(corpus, on_error)
        if time_field is not None:
            times, bad = _times(corpus, time_field, on_error)
            use &= ~bad
            expired = _window(d, times, use, corpus, drop_expired)
            use &= ~expired
        where = np.flatnonzero(use)
        ids = [corpus.ids[int(i)] for i in where]
        texts = [corpus.texts[int(i)] for i in where]
        skipped = corpus.skipped + int(n - use.sum() - expired.sum())
    del corpus
    when = None if times is None else times[where].tolist()
    cfg = _batch_config(d) if dedup else None
    if cfg is None:  # (dedup_into refuses them itself)
        refuse_stored_ids(d, ids)
    if not dedup:
        how = "load"
        every = np.ones(len(ids), np.bool_)
        loaded = load_kept(d, ids, texts, every, progress=progress, times=when)
    elif cfg is not None:
        how = "dedup_into"
        loaded = int(
            dedup_into(d, ids, texts, config=cfg, progress=progress, times=when).keep.sum()
        )
    else:
        how = "check_and_add"
        loaded = _insert(d, ids, texts, when, report)
    return {
        "path": how, "documents": n, "skipped_records": skipped, "expired": int(expired.sum()),
        "loaded": loaded, "dropped": len(ids) - loaded,
    }  # fmt: skip


def _summary(
    d: Any, store: Any, before: int, t0: float, *, path: str | None = None, documents: int = 0,
    **counts: float,
) -> dict[str, Any]:  # fmt: skip
    elapsed = time.perf_counter() - t0
    out: dict[str, Any] = {"documents": documents, "skipped_records": 0, "expired": 0}
    out.update(loaded=0, dropped=0)
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
