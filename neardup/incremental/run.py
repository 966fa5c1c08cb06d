"""Incremental dedup: a batch run that also drops what duplicates the documents earlier runs kept
(``neardup dedup NEW --save STORE``, ``--against STORE``; :func:`dedup_against` over files,
:func:`dedup_into` over documents and an open store; :mod:`.stored` for the steps with the
store).

The documents earlier runs kept live in an online store (a :class:`neardup.online.Deduplicator`
data directory: fingerprints, MinHash band keys and texts, a versioned write-ahead log and
segments, see docs/store.md). A run over the new documents then decides as one keep-first run
over the concatenation (the stored documents first, in the order they were saved, then the new
ones) would, without ever reading the stored documents back:

1. every new document is checked against the store (``Deduplicator.check``: the online rule,
   the batch's own candidate plan and verification, read only); one that duplicates a stored
   document is dropped;
2. the others are deduplicated among themselves by :func:`neardup.dedup` (keep-first, no
   chaining): a document dropped in step 1 never drops another, as in the concatenated run,
   where it is dropped for a kept stored document and so keeps nothing out;
3. with ``save``, the kept new documents are loaded into the store as they are
   (``Deduplicator.load``: straight into segments, not decided again), so the next run
   compares against them too.

A run never reads the stored documents back in bulk: a check is an index look-up per new
document, verified on the stored texts of its candidates, which grow with the store until its
band buckets reach their cap (docs/dedup.md, "Incremental dedup", has the measured cost). Stored
documents are never re-deduplicated, so the stored set must be what keep-first
kept (runs saved in order). Refused before anything is read: another keep policy than ``first``
(``longest`` and ``none`` need the whole corpus), a store that does not exist (``--against``).
Ids already in the store are refused before anything is written (the store keys documents by
id).

``pairs_out`` (``--pairs-out``) names which stored document each dropped new document
duplicates: the batch's pairs CSV of the run's own pairs, then one row per stored match of a
document the store dropped, ``id_a`` the stored document (it came first), ``id_b`` the new one,
stage ``stored`` and an empty rule (the store's decision; ``neardup explain`` on the two texts
tells why).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError, InputError, NotFoundError
from ..rules.config import DedupConfig, with_overrides
from ..verify.rule import DEFAULT_THRESHOLD
from . import stored
from .journal import open_saving
from .stored import (
    RunWork,
    check_store,
    load_kept,
    refuse_stored_ids,
    sign_all,
    store_pair_rows,
    store_summary,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..online.prepare import PreparedDocs

__all__ = ["Into", "dedup_against", "dedup_into", "store_config"]

Progress = Callable[[str, int, int], None]


def _check_store_path(root: Path, sources: Sequence[str], save: bool) -> None:
    """Refuse, before anything is read or made, a store path that is a file, a folder of other
    files (``--save`` would fill it with the store's, and a run reading that folder later would
    meet them), or an input, a folder holding one, or a folder inside an input folder."""
    flag = "--save" if save else "--against"
    if root.exists() and not root.is_dir():
        raise ConfigError(
            f"{flag} {root}: a file, not a store's folder; pass the folder an earlier --save "
            "made (or, with --save, a new or empty one)"
        )
    here = root.resolve()
    for src in sources:
        if src == "-" or "://" in src:
            continue
        s = Path(src).resolve()
        if here == s or here in s.parents or s in here.parents:
            raise ConfigError(
                f"{flag} {root}: {'it is' if here == s else 'it overlaps'} the input {src}; the "
                "store's files would be read as inputs by a later run; pass a folder outside "
                "the inputs"
            )
    if save and root.is_dir() and not (root / "config.json").exists():
        others = sorted(p.name for p in root.iterdir())
        if others:
            shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
            raise ConfigError(
                f"--save {root}: a folder that is not a neardup store ({len(others)} "
                f"entr{'y' if len(others) == 1 else 'ies'}: {shown}); pass a new or empty "
                "folder, or a store an earlier --save made"
            )


def _check_outside_store(root: Path, save: bool, outputs: Sequence[tuple[str, str | None]]) -> None:
    """Refuse an output inside the store's folder: the store's folder holds its own files
    (a later run's open meets the stranger, and ``-o STORE/`` would mirror the inputs there)."""
    here = root.resolve()
    for flag, path in outputs:
        if path is None or path == "-" or "://" in path:
            continue
        out = Path(path).resolve()
        if out == here or here in out.parents:
            raise ConfigError(
                f"{flag} {path}: inside the store {'--save' if save else '--against'} "
                f"{root}, whose folder holds only the store's files; write it outside the store"
            )


def _check_store_threshold(root: Path, verifier: Any, save: bool) -> None:
    """Refuse, before the store is opened, a run whose ``--threshold`` is not the one the store
    verifies at: a store keeps the rule it was made with, and the store's own refusal named
    Python arguments and printed both verifiers' settings whole."""
    from ..store import Store

    stored = Store.read_config(root)
    rule = (stored or {}).get("verifier")
    if verifier is None or not isinstance(rule, dict) or "threshold" not in rule:
        return
    mine = verifier.config().get("threshold")
    if mine != rule["threshold"]:
        flag = "--save" if save else "--against"
        raise ConfigError(
            f"{flag} {root}: the store verifies at threshold {rule['threshold']} (it keeps the "
            f"rule its first run was given), this run at {mine}: pass --threshold "
            f"{rule['threshold']}, or use another store"
        )


def dedup_against(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    store: str | os.PathLike[str],
    *,
    output: str | os.PathLike[str],
    save: bool,
    summary_json: str | os.PathLike[str] | None = None,
    pairs_out: str | os.PathLike[str] | None = None,
    clusters_out: str | os.PathLike[str] | None = None,
    report: str | os.PathLike[str] | None = None,
    review: str | os.PathLike[str] | None = None,
    input_format: str | None = None,
    output_format: str | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    encoding: str = "utf-8",
    on_error: Literal["fail", "skip"] = "fail",
    generate_ids: bool = False,
    config: DedupConfig | None = None,
    progress: Progress | None = None,
    engine: str = "local",
    scheduler: str | None = None,
    master: str | None = None,
    partitions: int | None = None,
    workdir: str | None = None,
    resume: bool = False,
    **overrides: Any,
) -> dict[str, Any]:
    """Deduplicate ``inputs`` against the store ``store`` and among themselves; write the kept
    documents to ``output`` (every option as :func:`neardup.dedup_files`); with ``save``, add
    them to the store (created when missing). A save notes itself in the store's journal
    (:class:`~neardup.incremental.journal.SaveJournal`) until its outputs are published:
    ``resume`` finishes a run that stopped while saving (what it had stored is removed, and
    the run made again from the start; the same inputs and reading options); without it, a
    store whose run stopped is refused. ``engine`` ``"dask"`` / ``"spark"`` (with
    ``scheduler``, ``master``, ``partitions``, ``workdir`` as ``neardup dedup --engine``): the
    new documents are deduplicated among themselves by the distributed job, the store is
    checked and saved to in this process (:mod:`neardup.incremental.engine`). ``pairs_out``:
    the matched pairs, the stored matches included (see the module). ``clusters_out``: the clusters CSV, a row per new
    document, a representative that is a stored document where the store dropped it (it came
    first). ``report`` / ``review``: the review report (HTML) and its data (``review.json``),
    the stored documents that dropped new ones shown as the kept documents of their clusters
    (:mod:`neardup.incremental.review`).

    Returns
    -------
    dict
        The run's summary: the batch summary of the documents not dropped for the store, with
        ``documents`` (all read), ``dropped_for_store``, ``kept``, ``dropped``, ``store``,
        ``store_documents_before`` / ``_after``, ``saved``, ``elapsed_s``, ``docs_per_s``.

    Raises
    ------
    ConfigError
        ``keep`` other than ``first``; ``--against`` a store that does not exist; ``resume``
        without ``save``; other reading options than the stopped run's.
    InputError
        Ids that are already stored (nothing written); a store whose run stopped while saving,
        without ``resume`` (or with other inputs); ``resume`` where nothing stopped into a
        store that holds documents.
    """
    from ..io import check_outputs, plan_inputs, plan_output, read_corpus, write_kept
    from ..io.atomic import atomic_open, staged_outputs

    t0 = time.perf_counter()
    cfg = with_overrides(config, overrides, caller="dedup_against()")
    if cfg.keep != "first":
        raise ConfigError(
            f"--save / --against decide keep-first (the stored documents came first); "
            f"--keep {cfg.keep} needs the whole corpus in one run"
        )
    if cfg.threshold is not None and cfg.threshold < DEFAULT_THRESHOLD:
        raise ConfigError(
            f"--threshold {cfg.threshold} with --save / --against: the store finds candidates "
            f"with the plan made for {DEFAULT_THRESHOLD} (it keeps the plan its band keys were "
            f"made with), which promises nothing below it; use a threshold of at least "
            f"{DEFAULT_THRESHOLD}"
        )
    root = Path(os.fspath(store))
    if resume and not save:
        raise ConfigError(
            "--resume finishes a --save run that stopped while saving; pass --save STORE "
            "(--against only reads the store)"
        )
    if not save and not (root / "config.json").exists():
        raise NotFoundError(
            f"no store at {root} (no config.json): --against compares with a store an earlier "
            "run made with --save"
        )
    paths = [os.fspath(inputs)] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    sources = [os.fspath(p) for p in paths]
    _check_store_path(root, sources, save)
    # every output path, by its option: none inside the store, then check_outputs' refusals
    named: list[tuple[str, str | None]] = [
        (flag, None if path is None else os.fspath(path))
        for flag, path in (
            ("--output", output), ("--summary-json", summary_json), ("--pairs-out", pairs_out),
            ("--clusters-out", clusters_out), ("--report", report), ("--report", review),
        )
    ]  # fmt: skip
    _check_outside_store(root, save, named)
    # (before the engines part: a store keeps its rule on every engine)
    verifier = cfg.make_verifier() if cfg.verify else None
    _check_store_threshold(root, verifier, save)
    if engine != "local":
        from .engine import against_on_engine

        if clusters_out is not None or report is not None or review is not None:
            raise ConfigError(
                f"--clusters-out and --report with --save / --against run on the local "
                f"engine; drop --engine {engine}, or drop them"
            )
        return against_on_engine(
            sources, root, save=save, engine=engine, config=cfg, output=os.fspath(output),
            output_format=output_format, summary_json=summary_json, pairs_out=pairs_out,
            input_format=input_format, text_field=text_field, id_field=id_field,
            encoding=encoding, on_error=on_error, generate_ids=generate_ids,
            scheduler=scheduler, master=master, partitions=partitions, workdir=workdir,
            progress=progress, resume=resume,
        )  # fmt: skip
    out = os.fspath(output)
    summary, pairs_path, clusters_path, report_path, review_path = (p for _, p in named[1:])
    if (report_path is None) != (review_path is None):
        raise ConfigError(
            "dedup_against(): pass report and review together (the page and its data)"
        )
    files = plan_inputs(sources, input_format)
    plan = plan_output(out, files, fmt=output_format)
    check_outputs(
        named,
        sources,
        folder=plan.path if plan.folder else None,
    )
    step = progress or (lambda stage, done, total: None)
    reading: dict[str, Any] = dict(
        text_field=text_field, id_field=id_field, encoding=encoding, on_error=on_error,
        generate_ids=generate_ids,
    )  # fmt: skip
    with open_saving(
        root,
        files,
        reading,
        input_format,
        verifier=verifier,
        fingerprinter=cfg.make_fingerprinter(),
        save=save,
        resume=resume,
    ) as (d, journal):
        with staged_outputs(), read_corpus(files, **reading) as corpus:
            if save:
                stored.refuse_unstorable_texts(corpus)
            ids, texts = list(corpus.ids), corpus.texts
            n = len(ids)
            journal.take_back(d, ids)  # a stopped save's rows, before any decision
            before = len(d)
            step("read", n, n)
            into = dedup_into(
                d, ids, texts, config=cfg, progress=progress, save=False, keep_prepared=save,
                pairs=pairs_path is not None or report_path is not None or clusters_path is not None,
            )  # fmt: skip
            keep, for_store, result = into.keep, into.for_store, into.result
            kept = int(keep.sum())
            step("write", 0, kept)
            write_kept(corpus, keep, out, plan=plan, encoding="utf-8")
            if pairs_path is not None:
                _write_pairs(pairs_path, result, into.stored_pairs)
            step("write", kept, kept)
            # 3. the kept documents join the store (durable before the outputs are published)
            if save:
                with journal.saving(d):
                    load_kept(
                        d, ids, texts, keep, progress=progress, prepared=into.prepared,
                        work=into.work,
                    )  # fmt: skip
                into.prepared = into.work = None
            stats = dict(result.stats)
            elapsed = time.perf_counter() - t0
            stats.update(
                **store_summary(d, root, n, for_store, kept, before=before, saved=save),
                skipped_records=corpus.skipped,
                elapsed_s=round(elapsed, 3),
                docs_per_s=round(n / elapsed, 1) if elapsed > 0 else None,
                inputs=sources,
                output=out,
                output_format=plan.fmt,
                output_folder=plan.folder,
            )
            journal.add_to(stats)
            if clusters_path is not None or report_path is not None:
                from .review import run_view, write_view_clusters

                view, view_texts = run_view(d, into, ids, texts, verifier, stats)
                if clusters_path is not None:
                    write_view_clusters(clusters_path, view, len(ids))
                if report_path is not None and review_path is not None:
                    from ..review.report import review_writer

                    review_writer(report_path, review_path)(view, view_texts, stats)
            if summary is not None:
                with atomic_open(summary, "w", encoding="utf-8") as fh:
                    json.dump(stats, fh, indent=2, ensure_ascii=False)
        journal.finished()  # stored and published: nothing to finish
    return stats


@dataclasses.dataclass
class Into:
    """What :func:`dedup_into` decided: ``keep`` (the documents kept), ``for_store`` (those
    dropped for a stored document), ``result`` (the batch run over the others, their positions
    in ``rest``), ``stored_pairs`` (``(stored id, new id, distance, score)`` of every stored
    match of a document the store dropped, when asked for), ``prepared`` (the store check's
    prepared batches, for :func:`load_kept`, when asked for and kept), ``work`` (the batch
    run's work on the kept documents, for :func:`load_kept`, when the store was empty)."""

    keep: npt.NDArray[np.bool_]
    for_store: npt.NDArray[np.bool_]
    rest: npt.NDArray[np.int64]
    result: Any
    stored_pairs: list[tuple[str, str, int, float | None]]
    prepared: list[tuple[int, PreparedDocs]] | None = None
    #: the batch run's work on the kept documents (an empty store's run), for load_kept
    work: RunWork | None = None


def dedup_into(
    d: Any,
    ids: Sequence[str],
    texts: Sequence[str],
    *,
    config: DedupConfig | None = None,
    save: bool = True,
    pairs: bool = False,
    progress: Progress | None = None,
    times: Sequence[float] | None = None,
    keep_prepared: bool = False,
) -> Into:
    """Decide new documents against an open store ``d`` (a :class:`neardup.online.Deduplicator`)
    and among themselves, as one keep-first run over the stored documents then these would
    (the module's steps 1 and 2); with ``save``, load the kept ones into ``d``
    (:func:`load_kept`; ``times``: the documents' times there, default now). A keep-first bulk
    seed is this over an empty store (whose check is skipped): in one call when the corpus fits
    in memory (one batch run, then the loads), else chunk by chunk, each chunk checked against
    what the earlier ones stored (``benchmarks/bench_load.py`` measures both).

    No document is hashed, fingerprinted or signed twice when the run's fingerprinter,
    verifier and plan are the store's: an empty store is not checked, and the kept documents
    are stored from the batch run's own work (:class:`~neardup.incremental.stored.RunWork`);
    into a store that holds documents, every document's work is made first, on all cores
    (:func:`~neardup.incremental.stored.sign_all`), and the check, the run and the load take
    it (``SIGN_FIRST``). Otherwise the store check's prepared batches (fingerprints,
    signatures, band keys) are what the load stores, and their content hashes and
    fingerprints are the batch run's when the fingerprinter is the store's (up to
    ``REUSE_MAX`` documents). ``keep_prepared``: the work or the batches kept in the result
    for a later :func:`load_kept`. ``config``: the batch rule the new documents are decided by
    among themselves; default: the store's own (:func:`store_config`: its fingerprinter,
    verifier, threshold and plan, so that a store made with another plan than the planner's
    decides them as its ``check_and_add`` would), or ``DedupConfig()`` where the batch rule
    cannot stand for the store's (a ``simhash`` store).

    Raises
    ------
    InputError
        Ids that are already stored or that the store refuses, times it cannot hold (nothing
        loaded).
    """
    from ..batch.run import dedup

    if config is None:
        config = store_config(d)
    n = len(ids)
    keeps = save or keep_prepared
    if keeps:
        _refuse_bad_input(d, ids, texts, times)
    refuse_stored_ids(d, ids)
    fits = _run_work_fits(d, config)
    # an empty store's run: the kept documents are stored from the batch run's work
    by_run = keeps and not len(d) and fits
    work: dict[str, Any] | None = {} if by_run else None
    # a store that holds documents, with the run's fingerprinter, verifier and plan: every
    # document is hashed, fingerprinted and signed once, in parallel, for the check, the run
    # and the load (a later group of a large load: docs/store.md, "Bulk loads")
    first = stored.SIGN_FIRST and bool(len(d)) and fits
    signed = sign_all(texts, config or DedupConfig()) if first else None
    # else the check's prepared batches are loaded as they are (each document prepared once),
    # up to REUSE_MAX documents (~1 KB each in memory until the load)
    reuse = keeps and not by_run and signed is None and n <= stored.REUSE_MAX
    prepared: list[tuple[int, PreparedDocs]] | None = [] if reuse else None
    for_store, stored_pairs = check_store(
        d, ids, texts, pairs=pairs, progress=progress, prepared=prepared, work=signed
    )
    rest = np.flatnonzero(~for_store)
    fingerprints: Any
    signatures: Any
    if signed is not None:  # (only the work of those the store did not drop stays)
        if rest.size < n:
            signed = signed.take(rest)
        fingerprints = (signed.chash, signed.fps, signed.empty)
        signatures = None if signed.sig is None else (signed.sig, signed.tokens)
    else:
        fingerprints = _fingerprints_of(d, prepared, n, rest, config)
        signatures = _signatures_of(d, prepared, n, rest, config)
    result = dedup(
        [texts[int(i)] for i in rest],
        ids=[ids[int(i)] for i in rest],
        config=config,
        progress=progress,
        signatures=signatures,
        fingerprints=fingerprints,
        work_out=work,
    )
    del fingerprints, signatures
    keep = np.zeros(n, np.bool_)
    keep[rest[result.keep]] = True
    kept_work = None
    if work is not None:  # (positions among ``rest``, which is every document here)
        kept_work = RunWork.of_kept(work, np.flatnonzero(result.keep))
        work.clear()  # the first copies' signatures go; the kept ones' stay
    elif signed is not None and keeps:  # (``signed`` is in ``rest``'s order, as is the run)
        kept_work = signed.take(np.flatnonzero(result.keep))
    signed = None
    if save:
        load_kept(
            d, ids, texts, keep, progress=progress, times=times, prepared=prepared or None,
            work=kept_work,
        )  # fmt: skip
    return Into(
        keep,
        for_store,
        rest,
        result,
        stored_pairs,
        prepared if keep_prepared and prepared else None,
        kept_work if keep_prepared else None,
    )


def store_config(d: Any) -> DedupConfig | None:
    """The batch configuration that decides as the store ``d`` does (its fingerprinter,
    verifier, threshold and MinHash plan, the planner's or one given when the store was made),
    or None where the batch rule cannot stand for it (no MinHash channel, no verifier, or a
    plan that configuration does not make). :func:`dedup_into`'s default, and the keep-first
    load's (:func:`neardup.incremental.load_files`)."""
    if getattr(d, "lsh_plan", None) is None or getattr(d, "verifier", None) is None:
        return None
    cfg = DedupConfig(
        fingerprinter=d.fingerprinter.config(),
        verifier=d.verifier.config(),
        threshold=d.verifier.threshold,
        lsh_bands=d.lsh_plan.bands,
        lsh_rows=d.lsh_plan.rows,
    )
    return cfg if cfg.lsh_plan() == d.lsh_plan else None


def _run_work_fits(d: Any, config: DedupConfig | None) -> bool:
    """Whether the batch run's fingerprints and signatures are what the store ``d`` makes: the
    same fingerprinter, and with its MinHash channel the same plan and verifier."""
    cfg = config or DedupConfig()
    if not _same_fingerprinter(d, cfg):
        return False
    plan = getattr(d, "lsh_plan", None)
    if plan is None:
        return True
    if cfg.candidates != "lsh" or plan != cfg.lsh_plan() or d.verifier is None:
        return False
    return bool(d.verifier.config() == cfg.make_verifier().config())


def _same_fingerprinter(d: Any, cfg: DedupConfig) -> bool:
    """Whether the run's fingerprinter makes the store ``d``'s fingerprints."""
    fp = cfg.make_fingerprinter()
    return bool(fp == d.fingerprinter and getattr(fp, "bits", 64) == d.bits)


def _refuse_bad_input(
    d: Any, ids: Sequence[str], texts: Sequence[str], times: Sequence[float] | None
) -> None:
    """Refuse, before anything is decided or loaded, an id the store's rule refuses, a text it
    cannot hold or a time outside its window: a load refusing one would come after earlier
    chunks were loaded."""
    from ..online.prepare import id_problem

    for i, x in enumerate(ids):
        problem = id_problem(x) if type(x) is str else "must be a string"
        if problem is not None:
            raise InputError(f"ids[{i}] {x!r:.60}: {problem}; nothing was loaded", field="id")
    for i, problem in stored.surrogate_texts(texts):
        raise InputError(f"texts[{i}]: {problem}; nothing was loaded", field="text")
    if times is None:
        return
    ts = np.asarray(times, np.float64)
    if ts.shape != (len(ids),) or not np.isfinite(ts).all():
        raise InputError(
            f"times must be {len(ids)} finite unix seconds, got shape {ts.shape}; nothing was "
            "loaded"
        )
    oldest, newest = d.time_window()
    bad = (ts < max(oldest, 0.0)) | (ts > newest)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"times[{i}] {ts[i]!r} is outside the store's window ({oldest:.0f} to {newest:.0f}); "
            "nothing was loaded"
        )


def _signatures_of(
    d: Any,
    prepared: list[tuple[int, PreparedDocs]] | None,
    n: int,
    rest: npt.NDArray[np.int64],
    config: DedupConfig | None,
) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.int64]] | None:
    """The signatures and token counts of documents ``rest`` from the prepared batches (of all
    ``n`` documents), for the batch run, when they are what the run would make: its ``lsh``
    mode, and the store's channel with the run's plan and verifier settings; else None (the
    run makes its own)."""
    cfg = config or DedupConfig()
    plan = getattr(d, "lsh_plan", None)
    if not prepared or cfg.candidates != "lsh" or plan is None or plan != cfg.lsh_plan():
        return None
    if d.verifier is None or d.verifier.config() != cfg.make_verifier().config():
        return None
    batches = [b for _, b in prepared]
    if sum(map(len, batches)) != n or any(b.sig is None or b.tokens is None for b in batches):
        return None
    # (only these two columns: the whole batches, band keys and texts included, are
    # concatenated once, by the load)
    sig = np.concatenate([b.sig for b in batches])
    tokens = np.concatenate([b.tokens for b in batches])
    return sig[rest], tokens[rest]


def _fingerprints_of(
    d: Any,
    prepared: list[tuple[int, PreparedDocs]] | None,
    n: int,
    rest: npt.NDArray[np.int64],
    config: DedupConfig | None,
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64], npt.NDArray[np.bool_]] | None:
    """The content hashes, fingerprints and empty flags of documents ``rest`` from the prepared
    batches (of all ``n`` documents), for the batch run, when its fingerprinter is the
    store's; else None (the run makes its own)."""
    if not prepared or not _same_fingerprinter(d, config or DedupConfig()):
        return None
    batches = [b for _, b in prepared]
    if sum(map(len, batches)) != n:
        return None
    # the store's 16 bytes a document (high word, low word, each little-endian) as the run's
    # (n, 2) uint64 hashes
    raw = b"".join(h for b in batches for h in b.chash)
    hashes = np.frombuffer(raw, dtype="<u8").reshape(n, 2).astype(np.uint64)
    fps = np.concatenate([b.fps for b in batches])
    empty = np.concatenate([b.empty for b in batches])
    return hashes[rest], fps[rest], empty[rest]


def _write_pairs(path: str, result: Any, matches: list[tuple[str, str, int, float | None]]) -> None:
    """The run's own pairs as the batch writes them, then the stored matches (stage
    ``stored``, no rule)."""
    from ..batch.files import write_pairs

    write_pairs(path, result, store_pair_rows(matches))
