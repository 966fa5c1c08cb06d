"""The first pass of a file load (:func:`neardup.incremental.load_files`): every input read once,
file by file (a JSONL file a piece at a time: :class:`neardup.io.pieces.FilePieces`), for its
ids and times, and everything the load would refuse refused before anything is written: ids the
store's rule refuses, ids repeated across files or between the pieces of one (the reader refuses
those inside a piece), ids the store holds, times that cannot be parsed, times outside the
store's window. What it leaves is each file's mask of the documents to decide, their times and a
digest of their ids; the load then reads the files again, a group at a time
(:meth:`Survey.groups`: whole files, and a file holding more than a group in slices), so that
memory holds a group, not the corpus (the whole input is held from this pass instead when it
fits one group and no file of it came in several pieces: nothing is read twice). A JSONL file
holding more than a group, or read in several pieces, keeps, from this pass, where each record's
line starts, its number and its id's hash (its uncompressed copy too, if it was compressed):
each slice then parses only its own lines (:func:`neardup.io.formats.read_records`), and nothing
of the file is held between slices but those arrays.

Ids repeated across files (or pieces) are found by their 128-bit hashes (xxh3), sorted once
after the pass: 24 bytes a document, where a set of the ids themselves would hold every id
(~100 bytes each). A repeat found by hash is confirmed on the ids themselves before a load
fails on it; with ``on_error="skip"`` the later copy is left out, as the reader leaves one out
inside a file (one between pieces of a file is counted as that reader counts it: skipped, not a
document).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import xxhash

from ..errors import InputError, RecordError

if TYPE_CHECKING:  # pragma: no cover
    from .stored import Reclaim

__all__ = ["FileCheck", "Part", "Survey", "id_digest", "id_hashes", "survey"]

Progress = Callable[[str, int, int], None]


def id_hashes(ids: Sequence[str]) -> npt.NDArray[np.uint64]:
    """The 128-bit xxh3 hashes of ``ids`` (UTF-8, lone surrogates kept), as ``(n, 2)``
    little-endian words."""
    digest = xxhash.xxh3_128_digest
    raw = b"".join([digest(x.encode("utf-8", "surrogatepass")) for x in ids])
    return np.frombuffer(raw, dtype="<u8").reshape(-1, 2).astype(np.uint64)


def id_digest(hashes: npt.NDArray[np.uint64]) -> tuple[int, int, int]:
    """An order-dependent digest of a file's id hashes (count, and two sums of the words
    weighted by position), compared when the file is read again."""
    n = len(hashes)
    if not n:
        return (0, 0, 0)
    with np.errstate(over="ignore"):
        w = np.arange(1, n + 1, dtype=np.uint64)
        return (n, int((hashes[:, 0] * w).sum(dtype=np.uint64)), int(hashes[:, 1].sum(dtype=np.uint64)))  # fmt: skip


@dataclass
class FileCheck:
    """One input file as the first pass left it."""

    file: Any  # neardup.io.InputFile
    documents: int  # records the reader took (those it skipped are in ``reader_skipped``)
    reader_skipped: int
    use: npt.NDArray[np.bool_]  # per document: decided and loaded
    expired: npt.NDArray[np.bool_]  # per document: left out by ``drop_expired``
    times: npt.NDArray[np.float64] | None  # per document (NaN where not used)
    digest: tuple[int, int, int]  # of its ids (id_digest), to tell a changed file
    # its Corpus: kept from the first pass while the whole input fits one group, or read
    # again by the load and kept from a sliced file's first slice to its last (a file whose
    # records cannot be read again by line: not JSONL, not UTF-8)
    held: Any = None
    # a JSONL file holding more than a group: its Source from the first pass (detached from
    # the corpus: where each record's line starts and its number, its uncompressed copy), and
    # its ids' 128-bit hashes, so that a slice reads its own records and tells a changed file
    source: Any = None
    hashes: npt.NDArray[np.uint64] | None = None
    # read in this many pieces by the first pass (neardup.io.pieces): an id may repeat
    # between them, found with the repeats across files; ``repeats`` of its records are such
    # later copies, left out (a record the whole file's reader skips, not a document)
    pieces: int = 1
    repeats: int = 0
    # its first ``done`` records were decided by a load that stopped after them (a resumed
    # load: neardup.incremental.journal): not decided again, their ids not checked again
    done: int = 0

    def record(self, pos: int, reading: dict[str, Any]) -> tuple[str, str, int | None]:
        """Document ``pos``'s id, ``path:line`` and line (record number for JSON arrays and
        Parquet; None where there is none), the file read again unless held (a JSONL file to be
        cut into slices: that record's line alone): for a message only."""
        from ..io import read_corpus
        from ..io.formats import read_records

        if self.held is None and self.source is not None:
            at = int(self.source.lines[pos])
            one = read_records(self.source, pos, pos + 1, **reading)
            return one.ids[0], f"{self.source.path}:{at}", at
        corpus = self.held if self.held is not None else read_corpus([self.file], **reading)
        try:
            lines = corpus.sources[0].lines
            line = int(lines[pos]) if pos < len(lines) else None
            return corpus.ids[pos], str(corpus.location(pos)), line
        finally:
            if corpus is not self.held:
                corpus.close()

    def location(self, pos: int, reading: dict[str, Any]) -> str:
        """``path:line`` of document ``pos`` (see :meth:`record`)."""
        if self.held is None and self.source is not None:
            return f"{self.source.path}:{int(self.source.lines[pos])}"
        return self.record(pos, reading)[1]

    def release_held(self) -> None:
        """Close the corpus held, if any (its temporary copy is removed)."""
        if self.held is not None:
            self.held.close()
            self.held = None

    def release(self) -> None:
        """Done with the file: close the corpus held, and remove the uncompressed copy its
        slices were read from."""
        self.release_held()
        if self.source is not None:
            self.source.close()
            self.source = None
            self.hashes = None


@dataclass(frozen=True, eq=False)  # told apart by identity: a FileCheck holds arrays
class Part:
    """Records ``lo:hi`` of a checked file: what a group loads of it (the whole file, or a slice
    of one that holds more than a group)."""

    check: FileCheck
    lo: int
    hi: int

    @property
    def last(self) -> bool:
        """The file's last slice (or the whole file): its corpus is released after it."""
        return self.hi == self.check.documents


@dataclass
class Survey:
    """Every input file's :class:`FileCheck`, in input order."""

    files: list[FileCheck]
    repeated_ids: int  # later copies of ids repeated across files, left out (skip)

    @property
    def documents(self) -> int:
        """Records read as documents (as the whole file's reader counts them)."""
        return sum(f.documents - f.repeats for f in self.files)

    @property
    def used(self) -> int:
        return sum(int(f.use.sum()) for f in self.files)

    @property
    def expired(self) -> int:
        return sum(int(f.expired.sum()) for f in self.files)

    @property
    def skipped(self) -> int:
        """Records left out: by the reader, and by the checks (not counting ``expired``, nor
        the records a stopped load decided: ``resumed``)."""
        return sum(
            f.reader_skipped + f.documents - int(f.use.sum()) - int(f.expired.sum()) - f.done
            for f in self.files
        )

    @property
    def resumed(self) -> int:
        """Records a stopped load had decided (a resumed load's ``done``)."""
        return sum(f.done for f in self.files)

    def groups(self, chunk_docs: int) -> list[list[Part]]:
        """The documents to decide in input order, in consecutive groups of at most
        ``chunk_docs``: whole files while they fit, and a file holding more cut into slices of
        ``chunk_docs`` (each its own group; its last slice is joined by the files after it
        that fit). Every file's records are covered once, the ones left out included."""
        out: list[list[Part]] = []
        size = 0
        for f in self.files:
            n = int(f.use.sum())
            if n <= chunk_docs:
                if out and size + n <= chunk_docs:
                    out[-1].append(Part(f, 0, f.documents))
                    size += n
                else:
                    out.append([Part(f, 0, f.documents)])
                    size = n
                continue
            # cut before every chunk_docs-th document to decide: the records left out between
            # slices go with the slice before them
            cuts = np.flatnonzero(f.use)[chunk_docs::chunk_docs].tolist()
            for lo, hi in zip([0, *cuts], [*cuts, f.documents], strict=True):
                out.append([Part(f, int(lo), int(hi))])
            size = n - chunk_docs * len(cuts)
        return out

    def release(self) -> None:
        """Close the corpora held (their temporary copies are removed)."""
        for f in self.files:
            f.release()


def survey(
    d: Any,
    files: Sequence[Any],
    reading: dict[str, Any],
    *,
    time_field: str | None,
    drop_expired: bool,
    chunk_docs: int,
    progress: Progress | None = None,
    done: Sequence[int] | None = None,
    reclaim: Reclaim | None = None,
) -> Survey:
    """Read every file of ``files`` once (``reading``: :func:`neardup.io.read_corpus`'s
    options) and check what a load into the store ``d`` would refuse (the module); the corpora
    are held while the documents read so far fit ``chunk_docs``. ``done``: per file, how many
    of its first records a stopped load decided (a resumed load): left out, neither checked
    nor decided again. ``reclaim``: a resumed load's (:class:`~.stored.Reclaim`): the ids of
    the documents to load that its stopped load had stored are noted in it, not refused.

    Raises
    ------
    InputError
        What the load would refuse (with ``on_error="fail"``, or a time outside the window
        without ``drop_expired``); nothing is written.
    """
    from ..io import read_corpus
    from ..io.formats import rereadable
    from ..io.pieces import pieces_apply

    report = progress or (lambda stage, done, total: None)
    bytes_read = _BytesRead(files, report)
    on_error = reading["on_error"]
    checks: list[FileCheck] = []
    hashes: list[npt.NDArray[np.uint64]] = []
    late: list[npt.NDArray[np.bool_]] = []
    read = 0
    held = True
    try:
        for k, file in enumerate(files):
            corpus = None
            skip = 0 if done is None else int(done[k])
            if pieces_apply(file, reading["encoding"]):
                check, corpus, out = _in_pieces(
                    d, file, reading, time_field, partial(bytes_read.piece, k), skip, reclaim
                )
                if corpus is None:  # read in pieces: its slices read their own lines
                    assert check is not None and check.hashes is not None
                    checks.append(check)
                    hashes.append(check.hashes)
                    late.append(out)
                    read += check.documents
                    held = False
            else:
                corpus = read_corpus([file], **reading)
            if corpus is not None:
                kept = False
                try:
                    n = len(corpus)
                    use, times, out, expired, h = _checked(
                        d, corpus, time_field, on_error, skip, reclaim
                    )
                    read += n
                    held = held and read <= chunk_docs
                    check = FileCheck(
                        file=file, documents=n, reader_skipped=corpus.skipped, use=use,
                        expired=expired, times=times, digest=id_digest(h),
                        held=corpus if held else None, done=min(skip, n),
                    )  # fmt: skip
                    src = corpus.sources[0] if len(corpus.sources) == 1 else None
                    if n > chunk_docs and src is not None and rereadable(src):
                        # to be cut into slices: each reads its own lines again (the copy kept)
                        corpus.sources.remove(src)
                        src.ends = np.zeros(0, np.int64)  # not needed to find a line again
                        check.source, check.hashes = src, h
                    checks.append(check)
                    kept = held
                    hashes.append(h)
                    late.append(out)
                finally:
                    if not kept:
                        corpus.close()
            if not held:  # the input is more than one group: read again, a group at a time
                for c in checks:
                    c.release_held()
            bytes_read.file(k)
        bytes_read.finish()
        result = Survey(checks, _repeats(checks, hashes, reading))
        _refuse_window(d, result, late, drop_expired, reading)
    except BaseException:
        for c in checks:
            c.release()
        raise
    return result


def _checked(
    d: Any,
    corpus: Any,
    time_field: str | None,
    on_error: str,
    skip: int = 0,
    reclaim: Reclaim | None = None,
) -> tuple[
    npt.NDArray[np.bool_], npt.NDArray[np.float64] | None, npt.NDArray[np.bool_],
    npt.NDArray[np.bool_], npt.NDArray[np.uint64],
]:  # fmt: skip
    """What the first pass keeps of a corpus (a file, or a piece of one): which documents to
    decide (their ids not refused), their times, those whose time the store cannot take and
    those older than its window, and the ids' hashes; ids the store holds are refused. The
    first ``skip`` documents (decided by a stopped load) are left out of all but the hashes;
    ``reclaim``: the stored ids a stopped load stored, noted instead of refused."""
    from .stored import refuse_stored_ids

    n = len(corpus)
    use = ~_refused(corpus, on_error)
    use[: max(0, skip)] = False
    times: npt.NDArray[np.float64] | None = None
    out = np.zeros(n, np.bool_)
    expired = np.zeros(n, np.bool_)
    if time_field is not None:
        times, bad = _times(corpus, time_field, on_error)
        use &= ~bad
        oldest, newest = d.time_window()
        out = use & ((times > newest) | (times < 0))
        expired = use & ~out & (times < oldest)
    h = id_hashes(corpus.ids)
    refuse_stored_ids(d, [corpus.ids[int(i)] for i in np.flatnonzero(use)], reclaim)
    return use, times, out, expired, h


def _in_pieces(
    d: Any,
    file: Any,
    reading: dict[str, Any],
    time_field: str | None,
    piece_read: Callable[[int, int], None] | None = None,
    skip: int = 0,
    reclaim: Reclaim | None = None,
) -> tuple[FileCheck | None, Any, npt.NDArray[np.bool_]]:
    """A JSONL file read a piece at a time (:class:`neardup.io.pieces.FilePieces`, a piece's
    corpus closed before the next is read): its check, which keeps where each record's line
    starts, its number and its id's hash (its uncompressed copy too) for the slices, and its
    times outside what the store can take. A file of one piece is the corpus itself instead,
    for the caller to check as a file read whole: ``(None, corpus, _)``. ``piece_read(done,
    size)`` is told, after each piece, the bytes of the (uncompressed) file read so far.
    ``skip``: the file's first records a stopped load decided (left out, see :func:`_checked`);
    ``reclaim`` as :func:`_checked`'s."""
    from ..io import pieces

    on_error = reading["on_error"]
    fp = pieces.FilePieces(file, piece_bytes=pieces.PIECE_BYTES, **reading)
    parts: list[tuple[Any, ...]] = []
    first = 0  # the piece's first record, in the file's numbering
    try:
        for piece in fp:
            if not piece.sources[0].lent:  # the whole file: the caller's, as if read whole
                return None, piece, np.zeros(0, np.bool_)
            try:
                here = _checked(d, piece, time_field, on_error, skip - first, reclaim)
                parts.append((piece.skipped, *here))
                first += len(piece)
            finally:
                piece.close()
            if piece_read is not None:
                piece_read(fp.done, fp.size)
    except BaseException:
        fp.close()
        raise
    skipped, use, times, out, expired, h = zip(*parts, strict=True)
    src = fp.source
    hashes = np.concatenate(h)
    check = FileCheck(
        file=file, documents=src.count, reader_skipped=sum(skipped), use=np.concatenate(use),
        expired=np.concatenate(expired),
        times=None if time_field is None else np.concatenate(times),
        digest=id_digest(hashes), source=src, hashes=hashes, pieces=fp.pieces,
        done=min(max(0, skip), src.count),
    )  # fmt: skip
    return check, None, np.concatenate(out)


class _BytesRead:
    """The first pass's progress in bytes (``progress("check", done, total)``, shown in MB):
    a file's stored size counts once the file is checked, and a piece's share of it once the
    piece is (one large file does not sit at 0 % for minutes). A file whose size is not known
    beforehand (stdin, a URL) counts nothing until a piece of it is read, then its
    uncompressed size (the total grows by it). ``done == total`` is reported once: when every
    file is checked."""

    def __init__(self, files: Sequence[Any], report: Progress) -> None:
        from ..io.remote import input_size

        self.report = report
        self.sizes = [input_size(f.path) for f in files]
        self.total = sum(s or 0 for s in self.sizes)
        self.checked = 0  # bytes of the files checked so far

    def piece(self, k: int, done: int, size: int) -> None:
        """``done`` of the ``size`` uncompressed bytes of file ``k`` read."""
        known = self.sizes[k]
        if known is None:  # known now: its uncompressed copy's size
            self.sizes[k] = known = size
            self.total += size
        self._at(self.checked + known * done // max(size, 1))

    def file(self, k: int) -> None:
        """File ``k`` checked."""
        self.checked += self.sizes[k] or 0
        self._at(self.checked)

    def finish(self) -> None:
        """Every file checked."""
        total = max(self.total, 1)
        self.report("check", total, total)

    def _at(self, done: int) -> None:
        if self.total > 0:
            self.report("check", min(done, self.total - 1), self.total)


def _repeats(
    checks: list[FileCheck], hashes: list[npt.NDArray[np.uint64]], reading: dict[str, Any]
) -> int:
    """Leave out (or, with ``on_error="fail"``, refuse) the later copies of ids repeated across
    files; how many were left out."""
    if len(checks) < 2 and not any(c.pieces > 1 for c in checks):
        return 0
    every = np.concatenate(hashes) if hashes else np.zeros((0, 2), np.uint64)
    order = np.lexsort((every[:, 1], every[:, 0]))  # stable: equal ids in input order
    s = every[order]
    same = (s[1:, 0] == s[:-1, 0]) & (s[1:, 1] == s[:-1, 1])
    if not same.any():
        return 0
    starts = np.cumsum([0] + [c.documents for c in checks])
    later = order[1:][same]  # global positions of the later copies
    first = order[:-1][same]
    # the first copy of each run of equal hashes (a run of three repeats twice)
    run_first = first.copy()
    for k in range(1, len(later)):
        if first[k] == later[k - 1]:
            run_first[k] = run_first[k - 1]
    left_out = 0
    for pos, orig, prev in sorted(zip(later.tolist(), run_first.tolist(), first.tolist(), strict=True)):  # fmt: skip
        fi = int(np.searchsorted(starts, pos, side="right")) - 1
        fo = int(np.searchsorted(starts, orig, side="right")) - 1
        # the copy just before it is in the same file (one read in pieces): the whole file's
        # reader would have skipped this one
        inside = int(np.searchsorted(starts, prev, side="right")) - 1 == fi
        a, b = checks[fo], checks[fi]
        if reading["on_error"] == "fail":
            id_a, where_a, _ = a.record(orig - starts[fo], reading)
            id_b, _, line_b = b.record(pos - starts[fi], reading)
            if id_a != id_b:  # a hash collision (~2^-128): not a repeat
                continue
            raise RecordError(
                f"duplicate id {id_b!r} (first seen at {where_a}); ids must be unique: fix the "
                "input, or pass --generate-ids to number the records instead (path:line); "
                "nothing was loaded",
                path=b.file.path,
                line=line_b,
            )
        k = pos - starts[fi]
        if inside:  # inside a file read in pieces: skipped, as its reader would
            b.repeats += 1
        elif b.use[k] or b.expired[k]:
            left_out += 1
        b.use[k] = False
        b.expired[k] = False
    return left_out


def _refuse_window(
    d: Any,
    result: Survey,
    late: list[npt.NDArray[np.bool_]],
    drop_expired: bool,
    reading: dict[str, Any],
) -> None:
    """Refuse times the store cannot hold, and (without ``drop_expired``) times older than its
    window, counted over every file; the expired are otherwise left out (``expired``)."""
    oldest, newest = d.time_window()
    bad = [(c, np.flatnonzero(m & c.use)) for c, m in zip(result.files, late, strict=True)]
    n = sum(len(w) for _, w in bad)
    if n:
        c, w = next((c, w) for c, w in bad if len(w))
        assert c.times is not None
        raise InputError(
            f"{n:,} documents have a time the store cannot take (before 0 or after "
            f"{newest:.0f}, now plus the store's future allowance), e.g. "
            f"{c.location(int(w[0]), reading)} at {float(c.times[int(w[0])])!r}; nothing was loaded"
        )
    n = result.expired
    if n and not drop_expired:
        c = next(c for c in result.files if c.expired.any())
        i = int(np.flatnonzero(c.expired)[0])
        assert c.times is not None
        raise InputError(
            f"{n:,} documents are older than the store's retention window (before "
            f"{_stamp(oldest)}), e.g. {c.location(i, reading)} at {_stamp(float(c.times[i]))}: "
            "they would leave it at once. Pass --drop-expired to leave them out; nothing was "
            "loaded"
        )
    for c in result.files:
        c.use &= ~c.expired


def _stamp(t: float) -> str:
    """Unix seconds as they were given and in UTC, for a person: ``1000 (1970-01-01 00:16:40
    UTC)``."""
    import datetime as dt

    try:
        utc = dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return repr(t)
    return f"{t:.3f}".rstrip("0").rstrip(".") + f" ({utc})"


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


def _refused(corpus: Any, on_error: str) -> np.ndarray:
    """The documents the store refuses though the readers take them: an id against its rule
    (no control characters, at most 1,024 characters), a text holding a lone surrogate (a JSON
    ``"\\ud800"`` escape: no UTF-8 form to store); refused here, before anything is loaded,
    rather than by the load of a later group (or, with ``on_error="skip"``, left out)."""
    from ..online.prepare import id_problem
    from .stored import surrogate_texts

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
    for i, problem in surrogate_texts(corpus.texts):
        if on_error == "fail":
            raise InputError(
                f"{corpus.location(i)}: the text {problem}; nothing was loaded (--on-error "
                "skip leaves such records out)",
                field="text",
            )
        bad[i] = True
    return bad
