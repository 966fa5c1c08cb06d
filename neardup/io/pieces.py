"""A JSONL file read a piece at a time, for a pass that needs each record once but not the
whole file at once (the first pass of a store load, :mod:`neardup.incremental.survey`).

:class:`FilePieces` cuts one UTF-8 JSONL file (a local file, or the uncompressed copy of a
compressed or remote one, made once) into pieces of about ``piece_bytes`` bytes, each ending
just after a newline, and reads each into a :class:`~neardup.io.formats.Corpus` of its own:
the records, ids, texts, errors and line numbers :func:`~neardup.io.read_corpus` gives those
lines, their spans offsets into the whole file. A piece's corpus holds that piece only, so a
pass over a file of tens of millions of records holds one piece's ids and texts at a time.

What a piece does not judge is an id repeated in *another* piece of the file (each piece's
reader starts afresh, and a set of every id is what reading in pieces avoids holding): the
caller finds those (the survey holds every record's 128-bit id hash, and leaves out or refuses
the later copy as the whole-file reader would).

A file that fits one piece is read exactly as :func:`~neardup.io.read_corpus` reads it, and its
one corpus owns the file's uncompressed copy. A file of several pieces leaves, after its last
piece, :attr:`FilePieces.source`: every record's line start and line number in the file (what
:func:`~neardup.io.formats.read_records` needs to read any of them again), and the copy, which
its :meth:`~neardup.io.formats.Source.close` removes.
"""

from __future__ import annotations

import array
import contextlib
import mmap
import os
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import ConfigError
from .formats import Corpus, Source, _Reader, _remove_quietly, jsonl_why, read_by_line
from .jsonl import _BOM, _jsonl_lines, _read_jsonl_mapped, mapped_applies
from .plan import InputFile
from .remote import local_copy
from .texts import SpanTexts

__all__ = ["PIECE_BYTES", "FilePieces", "pieces_apply"]

#: bytes of a piece by default: what a piece's corpus holds is a few times its records' ids
#: and non-ASCII texts (docs/store.md, "One file in slices")
PIECE_BYTES = 256 << 20


def pieces_apply(file: InputFile, encoding: str) -> bool:
    """Whether :class:`FilePieces` reads ``file``: its records can be read by their lines
    (:func:`~neardup.io.formats.read_by_line`)."""
    return read_by_line(file.fmt, file.path, encoding)


class FilePieces:
    """One JSONL file's pieces (the module). Iterate once for the pieces' corpora, in file
    order; close it (or use it as a context manager) to remove the uncompressed copy if the
    iteration stopped early or :attr:`source` is not wanted.

    Parameters
    ----------
    file : InputFile
        The file, as :func:`~neardup.io.plan.plan_inputs` planned it (:func:`pieces_apply`).
    piece_bytes : int
        About how many bytes of the (uncompressed) file a piece holds; a line longer than
        that is a piece of its own.
    text_field, id_field, encoding, on_error, generate_ids
        :func:`~neardup.io.read_corpus`'s options.
    """

    def __init__(
        self,
        file: InputFile,
        *,
        piece_bytes: int = PIECE_BYTES,
        text_field: str = "text",
        id_field: str | None = None,
        encoding: str = "utf-8",
        on_error: Any = "fail",
        generate_ids: bool = False,
    ) -> None:
        if not pieces_apply(file, encoding):
            raise ConfigError(
                f"{file.path}: only a JSONL file read as UTF-8 (not stdin) is read in pieces"
            )
        if piece_bytes < 1:
            raise ConfigError(f"piece_bytes must be at least 1, got {piece_bytes}")
        self.file = file
        self.piece_bytes = piece_bytes
        self._options: dict[str, Any] = dict(
            text_field=text_field, id_field=id_field, encoding=encoding, on_error=on_error,
            generate_ids=generate_ids,
        )  # fmt: skip
        #: the whole file: its records' line starts and numbers once every piece is read, and
        #: its uncompressed copy, if any, until :meth:`close` (or until a one-piece file's
        #: corpus takes it)
        self.source = Source(
            path=file.path, fmt="jsonl", encoding=encoding, rel=file.rel, explicit=file.explicit
        )
        self._real, temp = local_copy(file.path)
        self.source.temp = temp
        # removed when nothing holds the source any more (never closed): the finalizer moves
        # to a one-piece file's corpus with the copy
        self._gone = weakref.finalize(self.source, _remove_quietly, temp) if temp else None
        self.size = os.path.getsize(self._real)
        self.pieces = 0  # read so far
        #: bytes of the (uncompressed) file read so far: the end of the last piece yielded
        self.done = 0

    def __iter__(self) -> Iterator[Corpus]:
        size = self.size
        lo, lineno = 0, 1
        starts: list[np.ndarray] = []
        lines: list[np.ndarray] = []
        while True:
            hi = self._cut(lo)
            corpus, lineno = self._piece(lo, hi, lineno, whole=lo == 0 and hi == size)
            self.pieces += 1
            self.done = hi
            src = corpus.sources[0]
            starts.append(src.starts)
            lines.append(src.lines)
            yield corpus
            del corpus, src  # not held while the next piece is read
            if hi >= size:
                break
            lo = hi
        if self.pieces > 1:
            s = self.source
            s.starts = np.concatenate(starts)
            s.lines = np.concatenate(lines)
            s.count = len(s.starts)

    def _cut(self, lo: int) -> int:
        """Where the piece from ``lo`` ends: just after the first newline at or past
        ``lo + piece_bytes - 1``, or at the end of the file."""
        if lo + self.piece_bytes >= self.size:
            return self.size
        with open(self._real, "rb") as fh:
            fh.seek(lo + self.piece_bytes - 1)
            at = fh.tell()
            while True:
                chunk = fh.read(1 << 16)
                if not chunk:
                    return self.size
                nl = chunk.find(b"\n")
                if nl >= 0:
                    return at + nl + 1
                at += len(chunk)

    def _piece(self, lo: int, hi: int, lineno: int, *, whole: bool) -> tuple[Corpus, int]:
        """Bytes ``lo:hi`` read as :func:`~neardup.io.read_corpus` reads a JSONL file, and the
        next line number. ``whole``: the piece is the file, and its corpus takes the copy."""
        opts = self._options
        corpus = Corpus()
        corpus.texts = SpanTexts()  # type: ignore[assignment]  # JSONL texts stay spans
        reader = _Reader(corpus, **opts)
        path = self.file.path
        reader.mark_path(path)
        reader.jsonl_why = jsonl_why(self.file)
        src = Source(
            path=path, fmt="jsonl", encoding=opts["encoding"], rel=self.file.rel,
            explicit=self.file.explicit, temp=self.source.temp, lent=not whole,
        )  # fmt: skip
        temp = self.source.temp
        if whole and temp is not None:  # the corpus owns the copy now
            self.source.temp = None
            if self._gone is not None:
                self._gone.detach()
            weakref.finalize(src, _remove_quietly, temp)
        corpus.sources.append(src)
        try:
            if mapped_applies(reader):
                nxt = _read_jsonl_mapped(reader, src, self._real, path, lo, hi, lineno)
                assert nxt is not None
            else:  # non-ASCII field names: the per-line path over the piece
                nxt = self._lines(reader, src, lo, hi, lineno)
        except BaseException:
            corpus.close()
            raise
        src.count = len(corpus.texts)
        src.lines = np.frombuffer(reader.line_of, np.int64).copy()
        return corpus, nxt

    def _lines(self, reader: _Reader, src: Source, lo: int, hi: int, lineno: int) -> int:
        """The lines of ``lo:hi`` by the readers' per-line path (orjson, then the reference for
        the unusual); the next line number."""
        starts: array.array[int] = array.array("q")
        ends: array.array[int] = array.array("q")
        if hi > lo:
            with open(self._real, "rb") as fh:
                mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            mv = memoryview(mm)
            try:
                at = 3 if lo == 0 and mm[:3] == _BOM else lo
                lineno = _jsonl_lines(reader, mm, mv, at, hi, 0, src.path, lineno, starts, ends)
            finally:
                with contextlib.suppress(BufferError):  # a traceback may hold a slice
                    mv.release()
                    mm.close()
        src.starts = np.frombuffer(starts, np.int64).copy() if starts else np.zeros(0, np.int64)
        src.ends = np.frombuffer(ends, np.int64).copy() if ends else np.zeros(0, np.int64)
        return lineno

    def close(self) -> None:
        """Remove the uncompressed copy, unless a one-piece file's corpus took it."""
        self.source.close()

    def __enter__(self) -> FilePieces:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
