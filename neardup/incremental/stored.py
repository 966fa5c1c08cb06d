"""What an incremental run does with its store, on any engine (:mod:`neardup.incremental.run`,
:mod:`neardup.incremental.engine`): step 1, the new documents checked against the store of
those kept before, read only, and ids the store already holds refused before anything is
written; step 3, the kept documents loaded (:func:`load_kept`); and the summary's store keys
(:func:`store_summary`)."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from ..online.prepare import PreparedDocs

__all__ = [
    "CHUNK",
    "DELETE_CHUNK",
    "LOAD_CHUNK",
    "SIGN_FIRST",
    "Reclaim",
    "RunWork",
    "check_store",
    "load_kept",
    "open_store",
    "refuse_stored_ids",
    "refuse_unstorable_texts",
    "sign_all",
    "store_pair_rows",
    "store_summary",
    "surrogate_texts",
]

Progress = Callable[[str, int, int], None]

#: documents per store check (one write group): the more query keys a check has, the closer
#: together they fall in a large store's sorted band sections, so its searches walk them forward
#: instead of missing the cache on each; past ~25 k the arrays of a group (keys, candidates)
#: outgrow the caches in turn (``benchmarks/bench_check.py --chunk``; docs/dedup.md,
#: "Incremental dedup")
CHUNK = 25_000
#: kept documents per load (one segment per time partition each): few segments a run
LOAD_CHUNK = 100_000
#: the most documents whose prepared batches (signatures, band keys: ~1 KB a document) a
#: check keeps for the load (:func:`dedup_into` with ``save``); a larger run prepares its kept
#: documents again when it loads them (an empty store's run keeps the batch run's work
#: instead, at any size: :class:`RunWork`)
REUSE_MAX = 200_000
#: whether :func:`neardup.incremental.dedup_into` into a store that holds documents, with the
#: run's fingerprinter, verifier and plan, makes every document's work first (:func:`sign_all`,
#: ~570 bytes a document held until the load) for the check, the run and the load; off: the
#: check prepares its chunks (kept for the load up to ``REUSE_MAX``), the run and the load
#: their documents again (``benchmarks/bench_seed_chunk.py`` compares them)
SIGN_FIRST = True
#: ids per ``delete_many`` when a resumed run removes what its stopped run stored
DELETE_CHUNK = 10_000


@dataclasses.dataclass
class Reclaim:
    """What a stopped run stored, which its resumed run removes before deciding those
    documents again (:mod:`neardup.incremental.journal`). ``ids``: the ids of the store's rows
    from the row id the stopped run noted on; rows another writer added since are among them
    (a server opened on the store in between) and are not the run's to remove. ``found``: the
    ids of the resumed run's own documents among them, noted by :func:`refuse_stored_ids` as
    the input is checked (instead of refused): those :meth:`remove` deletes."""

    ids: set[str]
    found: list[str] = dataclasses.field(default_factory=list)

    @classmethod
    def since(cls, d: Any, rowid: int) -> Reclaim:
        """The rows of the open store ``d`` from ``rowid`` on (pending log records included)."""
        return cls(set(d.store.ids_from(rowid)))

    def remove(self, d: Any) -> int:
        """Delete the rows found (durably, as ``delete_many``); returns how many. (An id the
        input repeats, which the first pass leaves out or refuses after noting it, once.)"""
        found = list(dict.fromkeys(self.found))
        for lo in range(0, len(found), DELETE_CHUNK):
            d.delete_many(found[lo : lo + DELETE_CHUNK])
        return len(found)


@dataclasses.dataclass
class RunWork:
    """A batch run's work on the kept documents, in their order (``neardup.batch.dedup``'s
    ``work_out``): their fingerprints, empty flags, content hashes (None where the run made
    none: no exact stage), and with the MinHash channel their signatures, token counts and
    coarse token buckets. :func:`load_kept` stores the kept documents from it
    (``Deduplicator.prepare_signed``) instead of hashing, fingerprinting and signing them
    again."""

    fps: npt.NDArray[np.uint64]
    empty: npt.NDArray[np.bool_]
    sig: npt.NDArray[np.uint16] | None
    tokens: npt.NDArray[np.int64] | None
    buckets: npt.NDArray[np.uint8] | None = None
    chash: npt.NDArray[np.uint64] | None = None

    @classmethod
    def of_kept(cls, work: dict[str, Any], kept: npt.NDArray[np.int64]) -> RunWork:
        """The work (``work_out`` of a run over documents of which ``kept`` are positions)
        of the ``kept`` documents; each is a first copy (``work["rows"]``)."""
        rows = work["rows"]
        at = np.searchsorted(rows, kept)
        if kept.size and (at.max() >= rows.size or (rows[at] != kept).any()):
            raise ValueError("a kept document is not a first copy of the run")
        sig, tokens, buckets = work.get("sig"), work.get("tokens"), work.get("buckets")
        chash = work.get("chash")
        return cls(
            work["fps"][at],
            work["empty"][at],
            None if sig is None else sig[at],
            None if tokens is None else tokens[at],
            None if buckets is None else buckets[at],
            None if chash is None else chash[at],
        )

    def take(self, at: npt.NDArray[np.int64] | slice) -> RunWork:
        """The work of the documents at positions ``at``."""

        def cut(a: Any) -> Any:
            return None if a is None else a[at]

        return RunWork(
            self.fps[at], self.empty[at], cut(self.sig), cut(self.tokens), cut(self.buckets),
            cut(self.chash),
        )  # fmt: skip


def sign_all(texts: Sequence[str], cfg: Any) -> RunWork:
    """The batch run's work (:class:`RunWork`) on every one of ``texts``, as
    :func:`neardup.batch.dedup` with ``cfg`` (a :class:`~neardup.rules.config.DedupConfig`)
    makes it for its first copies: content hashes and fingerprints in one pass, and in the
    ``lsh`` mode signatures, token counts and coarse token buckets, each on ``cfg.workers``
    threads; an exact copy gets its first copy's (they depend only on the text). A store
    check, the batch run and the load then share it: each text tokenised once
    (:func:`neardup.incremental.dedup_into` into a store that holds documents)."""
    from ..batch.exact import ExactFingerprintPass

    p = ExactFingerprintPass(cfg.make_fingerprinter(), cfg.workers)
    try:
        first, fps_u, empty_u = p.finish(texts, {})
        hashes = np.asarray(p.hashes, np.uint64)
    finally:
        p.close()
    unique = np.flatnonzero(first == np.arange(len(texts)))
    of = np.searchsorted(unique, first)  # each text's first copy among ``unique``
    sig = tokens = buckets = None
    if cfg.candidates == "lsh":
        from ..fingerprint.minhash import minhash_signatures
        from ..text.token_kernels import MASK_BITS

        buckets = np.zeros((unique.size, 1 << MASK_BITS), np.uint8)
        sig, tokens = minhash_signatures(
            cfg.make_verifier(), [texts[i] for i in unique.tolist()], cfg.lsh_plan().hashes,
            workers=cfg.workers, buckets=buckets,
        )  # fmt: skip
        if unique.size < len(texts):
            sig, tokens, buckets = sig[of], tokens[of], buckets[of]
    if unique.size == len(texts):
        return RunWork(fps_u, empty_u, sig, tokens, buckets, hashes)
    return RunWork(fps_u[of], empty_u[of], sig, tokens, buckets, hashes)


def check_store(
    d: Any,
    ids: Sequence[str],
    texts: Sequence[str],
    *,
    pairs: bool = False,
    progress: Progress | None = None,
    prepared: list[tuple[int, PreparedDocs]] | None = None,
    work: RunWork | None = None,
) -> tuple[npt.NDArray[np.bool_], list[tuple[str, str, int, float | None]]]:
    """Step 1: which new documents duplicate a stored one (``Deduplicator.check``, read only,
    ``CHUNK`` at a time), and with ``pairs`` every stored match of those, as ``(stored id, new
    id, distance, score)``. ``prepared``: a list that gets each chunk's prepared batch with
    its first position (``(lo, PreparedDocs)``), for :func:`load_kept` and the batch run's
    signatures (an empty store is not checked, its documents only prepared for ``prepared``;
    without it, nothing is done). ``work``: the batch run's work on every document
    (:func:`sign_all`, made with the store's fingerprinter, verifier and plan), which the
    chunks are keyed from (``Deduplicator.prepare_signed``) instead of being prepared."""
    report = progress or (lambda stage, done, total: None)
    n = len(ids)
    for_store = np.zeros(n, np.bool_)
    stored_pairs: list[tuple[str, str, int, float | None]] = []
    report("store", 0, n)
    inflight: collections.deque[tuple[int, int, Any]] = collections.deque()

    def collect() -> None:
        lo, hi, fut = inflight.popleft()
        for i, dec in zip(range(lo, hi), fut.result(), strict=True):
            for_store[i] = dec.duplicate
            if dec.duplicate and pairs:
                stored_pairs.extend((m.id, dec.id, m.distance, m.score) for m in dec.matches)
        report("store", hi, n)

    # an empty store (a window's seed) matches nothing: the check is skipped, not just cheap.
    # Checks change nothing, so the next chunk is prepared (this thread) while the writer
    # decides the last one (bench_load.py, bench_incremental.py)
    check = len(d) > 0
    for lo in range(0, n if check or prepared is not None else 0, CHUNK):
        hi = min(n, lo + CHUNK)
        docs = [{"id": ids[i], "text": texts[i]} for i in range(lo, hi)]
        if work is None:
            batch = d.prepare(docs)
        else:
            w = work.take(slice(lo, hi))
            batch = d.prepare_signed(docs, w.fps, w.empty, w.sig, w.tokens, w.buckets, w.chash)
        if prepared is not None:
            prepared.append((lo, batch))
        if not check:
            continue
        inflight.append((lo, hi, d.submit_prepared("check", batch)))
        if len(inflight) > 1:
            collect()
    while inflight:
        collect()
    return for_store, stored_pairs


@contextlib.contextmanager
def open_store(root: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
    """``Deduplicator.open(root, *args, **kwargs)`` for a run that may make the store: one this
    call made (the folders made for it, or an empty folder's contents) is removed again when
    the block fails before the store holds a document (a bad record, a time outside the
    window), else the retry would open it with the failed run's settings; where a document
    landed it stays (``--resume`` finishes it). :func:`neardup.io.atomic.new_folder`."""
    from ..io.atomic import new_folder
    from ..online import Deduplicator

    with new_folder(root) as made, Deduplicator.open(root, *args, **kwargs) as d:
        try:
            yield d
        except BaseException:
            try:
                made.keep = len(d) > 0
            except Exception:  # (it cannot say: kept)
                made.keep = True
            raise


def surrogate_texts(texts: Sequence[str]) -> Iterator[tuple[int, str]]:
    """``(position, why)`` of each text the store cannot hold because of a lone surrogate (a
    JSON ``"\\ud800"`` escape, which the readers take as it is): only the non-ASCII texts are
    looked at (of a :class:`~neardup.io.texts.SpanTexts`, only those held as ``str``)."""
    from ..online.prepare import surrogate_problem

    ascii_mask = getattr(texts, "ascii_mask", None)
    if ascii_mask is not None:
        ascii = ascii_mask()
    else:
        ascii = np.fromiter((t.isascii() for t in texts), np.bool_, len(texts))
    for i in np.flatnonzero(~ascii).tolist():
        problem = surrogate_problem(texts[i])
        if problem is not None:
            yield i, problem


def refuse_unstorable_texts(corpus: Any) -> None:
    """``--save`` stores the texts: refuse, before any work and on every engine, a text the
    store cannot hold (:func:`surrogate_texts`), named by its file and line (the store's own
    refusal, at the load after the run, says ``documents[k].text``)."""
    for i, problem in surrogate_texts(corpus.texts):
        raise InputError(
            f"{corpus.location(i)}: the text {problem}; --save stores the texts, so nothing "
            "was saved",
            field="text",
        )


def refuse_stored_ids(d: Any, ids: Sequence[str], reclaim: Reclaim | None = None) -> None:
    """Refuse, before anything is decided or written, ids the store ``d`` already holds (it
    keys documents by id): found in one look-up, whatever their texts, not only those a check
    matched to themselves; a load refusing one would come after earlier chunks were loaded.
    ``reclaim``: a resumed run's: the stored ids its stopped run stored are noted in it, to be
    removed, instead of refused."""
    if not len(d):
        return
    found = d.store.lookup_ids(ids)
    taken = [x for x in ids if x in found]
    if reclaim is not None and taken:
        reclaim.found.extend(x for x in taken if x in reclaim.ids)
        taken = [x for x in taken if x not in reclaim.ids]
    if taken:
        raise InputError(
            f"{len(taken):,} ids are already in the store {d.path} (e.g. "
            f"{', '.join(repr(x) for x in taken[:3])}); give the documents new ids "
            "(--id-field, --generate-ids); nothing was written"
        )


def load_kept(
    d: Any,
    ids: Sequence[str],
    texts: Sequence[str],
    keep: npt.NDArray[np.bool_],
    *,
    progress: Progress | None = None,
    times: Sequence[float] | None = None,
    prepared: list[tuple[int, PreparedDocs]] | None = None,
    work: RunWork | None = None,
) -> int:
    """Load the kept documents into ``d`` as they are (``Deduplicator.load``: straight into
    segments, not decided again), ``LOAD_CHUNK`` at a time; returns how many. ``prepared``:
    :func:`check_store`'s batches of every document, loaded as they were prepared
    (``Deduplicator.load_prepared``) instead of being prepared again; ``work``: the batch run's
    work on the kept documents (:class:`RunWork`), which they are stored with instead of being
    hashed, fingerprinted and signed again."""
    report = progress or (lambda stage, done, total: None)
    where = np.flatnonzero(keep)
    kept = len(where)
    report("save", 0, kept)
    starts = np.array([lo for lo, _ in prepared or []], np.int64)
    if prepared and starts[-1] + len(prepared[-1][1]) != len(keep):
        raise ValueError("the prepared batches must cover every document")
    if work is not None and len(work.fps) != kept:
        raise ValueError(f"the run's work covers {len(work.fps)} documents, {kept} are kept")
    # each chunk is prepared on this thread while the one before it loads on a helper thread
    # (its sketches and summaries, its rows into SQLite, its segments), one load in flight, so
    # the chunks load in order: a load's database rows are its critical path, and preparing
    # waited for them (``benchmarks/bench_seed.py --whole``)
    pool = ThreadPoolExecutor(1, thread_name_prefix="neardup-load")
    inflight: Future[Any] | None = None
    try:
        for lo in range(0, kept, LOAD_CHUNK):
            job = _load_job(d, ids, texts, where[lo : lo + LOAD_CHUNK], lo, times, prepared,
                            starts, work)  # fmt: skip
            if inflight is not None:
                inflight.result()
                report("save", lo, kept)
            inflight = pool.submit(job)
        if inflight is not None:
            inflight.result()
    finally:  # (a failed preparation waits for the load in flight)
        pool.shutdown(wait=True)
    report("save", kept, kept)
    return kept


def _load_job(
    d: Any,
    ids: Sequence[str],
    texts: Sequence[str],
    at: npt.NDArray[np.int64],
    lo: int,
    times: Sequence[float] | None,
    prepared: list[tuple[int, PreparedDocs]] | None,
    starts: npt.NDArray[np.int64],
    work: RunWork | None,
) -> Callable[[], Any]:
    """The load of the kept documents at positions ``at`` (the ``lo``-th kept one first) as a
    call, their batch prepared here (:func:`load_kept`)."""
    from ..online.prepare import PreparedDocs

    part = at.tolist()
    when = None if times is None else np.asarray([times[i] for i in part], np.float64)
    if work is not None:
        cut = slice(lo, lo + len(part))
        batch = d.prepare_signed(
            [{"id": ids[i], "text": texts[i]} for i in part],
            work.fps[cut],
            work.empty[cut],
            None if work.sig is None else work.sig[cut],
            None if work.tokens is None else work.tokens[cut],
            None if work.buckets is None else work.buckets[cut],
            None if work.chash is None else work.chash[cut],
        )
        return lambda: d.load_prepared(batch, times=when)
    if prepared:
        chunk = np.searchsorted(starts, at, side="right") - 1  # the batch of each
        cuts = np.flatnonzero(np.diff(chunk)) + 1
        pieces = [
            prepared[int(chunk[a])][1].take(at[a:b] - starts[chunk[a]])
            for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(at)], strict=True)
        ]
        if when is None:  # stamped now, as load stamps them (not when they were prepared)
            when = np.full(len(part), d.clock(), np.float64)
        joined = PreparedDocs.concat(pieces)
        return lambda: d.load_prepared(joined, times=when)
    if times is None:
        docs = [{"id": ids[i], "text": texts[i]} for i in part]
    else:
        docs = [{"id": ids[i], "text": texts[i], "time": times[i]} for i in part]
    return lambda: d.load(docs)


def store_summary(
    d: Any,
    root: Any,
    n: int,
    for_store: npt.NDArray[np.bool_],
    kept: int,
    *,
    before: int,
    saved: bool,
) -> dict[str, Any]:
    """The store's keys of an incremental run's summary (``documents`` read, ``kept``,
    ``dropped``, ``dropped_for_store``, the store's size before and after, ``saved``): the
    same on every engine."""
    return {
        "documents": n,
        "dropped_for_store": int(for_store.sum()),
        "kept": kept,
        "dropped": n - kept,
        "store": str(root),
        "store_documents_before": before,
        "store_documents_after": len(d),
        "saved": saved,
    }


def store_pair_rows(
    stored: Sequence[tuple[str, str, int, float | None]],
) -> list[tuple[object, ...]]:
    """The pairs CSV's rows of the stored matches :func:`check_store` found (``id_a`` the
    stored document, it came first; stage ``stored``; no rule: the store decided), after the
    run's own pairs on every engine."""
    return [
        (a, b, d, "" if sc is None else round(float(sc), 4), "stored", "") for a, b, d, sc in stored
    ]
