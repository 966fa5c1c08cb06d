"""Readers and writers for corpora: JSONL, JSON arrays, CSV/TSV, Parquet, plain text, stdin.

A corpus is read once into ``ids`` and ``texts`` (plus what each format needs to write the
kept records back); :func:`write_kept` then writes the records whose mask is True, in the
format of the input, atomically.

Formats
-------
``jsonl``   one JSON object per line (``.jsonl``, ``.ndjson``; the default, and stdin's default).
            Read in 16 MiB blocks and parsed with orjson; kept lines are copied byte for byte
            (see :mod:`neardup.io.jsonl` for the exact rules: ``\r\n`` → ``\n``, BOM dropped).
``json``    one JSON array of objects (``.json``).
``csv``     comma-separated with a header row (``.csv``); ``tsv`` tab-separated (``.tsv``).
``parquet`` Apache Parquet (``.parquet``, ``.pq``); needs ``pip install 'neardup[parquet]'``.
``text``    each plain-text file is one document (``.txt``, ``.md``, or a directory of them,
            read recursively); the id is the path relative to the input. Output is a directory.
``lines``   one document per non-empty line of a plain-text file (must be asked for).

Where inputs come from
----------------------
A path, a directory (text files), ``-`` (stdin), a glob (``data/*.jsonl.gz``,
``s3://bucket/p/*.parquet``: the matches in sorted order) or any fsspec URL (``s3://``,
``gs://``, ``hf://datasets/OWNER/NAME/...``, ``https://``; the protocol's package must be
installed). A compression extension (``.gz``, ``.zst``, ``.bz2``, ``.xz``) is decompressed and
the format is told from the name before it (``a.jsonl.gz`` is ``jsonl``); stdin and names
without one are decompressed when their first bytes say so. Such inputs are read from a
temporary uncompressed copy (:mod:`neardup.io.remote`); a plain local file is read in place.

Fields
------
``text_field`` / ``id_field`` may be dotted paths into nested objects (``meta.text``) in
JSON/JSONL and into struct columns in Parquet; a key that is literally ``meta.text`` wins.

Every malformed record raises :class:`~neardup.errors.RecordError` naming the file and line
(or record number), unless ``on_error="skip"``, which counts it in ``Corpus.skipped`` and
keeps the first ``MAX_SKIPPED_DETAILS`` of them in ``Corpus.skipped_records``.
"""

from __future__ import annotations

import array
import bisect
import contextlib
import contextvars
import csv
import io
import json
import os
import shutil
import sys
import tempfile
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .._reference import use_reference
from ..errors import ConfigError, InputError, RecordError, require
from .atomic import atomic_dir, atomic_open
from .fields import MISSING, get_field, missing_field
from .jsonl import copy_records, is_utf8, read_lines
from .remote import (
    compress_file,
    compression_of,
    expand_inputs,
    is_url,
    local_copy,
    strip_compression,
)
from .texts import SpanTexts, UniqueIds

__all__ = [
    "FORMATS",
    "MAX_SKIPPED_DETAILS",
    "Corpus",
    "SkippedRecord",
    "Source",
    "arrow_column",
    "detect_format",
    "read_corpus",
    "write_kept",
]

FORMATS = ("jsonl", "json", "csv", "tsv", "parquet", "text", "lines")
Format = Literal["jsonl", "json", "csv", "tsv", "parquet", "text", "lines"]
OnError = Literal["fail", "skip"]

_EXT = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".txt": "text",
    ".md": "text",
}
_TEXT_EXT = (".txt", ".md", ".text")

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


def detect_format(path: str) -> str:
    """Format of an input path from its extension (a directory is ``text``; ``-`` is
    ``jsonl``); a compression extension is looked through (``a.jsonl.gz`` is ``jsonl``)."""
    if path == "-":
        return "jsonl"
    if not is_url(path) and Path(path).is_dir():
        return "text"
    p = Path(strip_compression(path))
    fmt = _EXT.get(p.suffix.lower())
    if fmt is None:
        shown = p.suffix or "(none)"
        raise ConfigError(
            f"cannot tell the format of {path!r} from its extension {shown!r}; "
            f"pass --input-format (one of {', '.join(FORMATS)})"
        )
    return fmt


@dataclass
class Source:
    """One input and what is needed to write its kept records back."""

    path: str
    fmt: str
    first: int = 0  # position of its first document in the corpus
    count: int = 0
    lines: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    # 1-based line (record number for json/parquet) of each document
    starts: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    ends: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    # jsonl/lines: byte span [start, end) of each document's line (terminator excluded)
    rows: list[Any] = field(default_factory=list)  # json objects / csv rows / text-file paths
    header: list[str] | None = None
    table: Any = None  # parquet: pyarrow.Table of the kept-able rows
    temp: str | None = None  # stdin / a compressed or remote input, uncompressed in this file
    # (removed by Corpus.close)
    encoding: str = "utf-8"


#: ``Corpus.skipped_records`` keeps the details of this many skipped records (``skipped``
#: counts them all)
MAX_SKIPPED_DETAILS = 1000


@dataclass(frozen=True)
class SkippedRecord:
    """A record ``on_error="skip"`` left out: where it is and why."""

    path: str  # the input as given (``<stdin>`` for stdin)
    line: int | None  # 1-based line (record / row number for JSON arrays and Parquet)
    reason: str

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.reason}"


@dataclass
class Corpus:
    """Documents read from one or more inputs, in input order."""

    ids: list[str] = field(default_factory=UniqueIds)  # unique as read (see UniqueIds)
    texts: list[str] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    skipped: int = 0
    errors: list[str] = field(default_factory=list)  # messages of skipped records (first 100)
    # where and why, for the first MAX_SKIPPED_DETAILS skipped records
    skipped_records: list[SkippedRecord] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.texts)

    def close(self) -> None:
        for s in self.sources:
            if s.temp:
                with contextlib.suppress(OSError):
                    os.unlink(s.temp)
                s.temp = None

    def __enter__(self) -> Corpus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Reader:
    def __init__(
        self,
        corpus: Corpus,
        *,
        text_field: str,
        id_field: str | None,
        encoding: str,
        on_error: OnError,
        on_texts: Callable[[list[str]], object] | None = None,
    ) -> None:
        self.c = corpus
        self.on_texts = on_texts  # called with corpus.texts as they grow (see read_corpus)
        self.text_field = text_field
        self.id_field = id_field
        self.encoding = encoding
        self.on_error = on_error
        # ids accepted so far (exactly the ids of ``corpus.ids``): a set, about 3x cheaper to
        # grow than an id -> position dict; positions are looked up only for an error message
        self.seen: set[str] = set()
        self.repeated_ids = False  # an id was refused as a repeat (see jsonl._accept_block)
        self._first: dict[str, int] = {}  # id -> position, over corpus.ids[:_first_upto]
        self._first_upto = 0
        self.line_of = array.array("q")  # line of every accepted document
        self._marks: list[int] = []  # first position read from each path in _paths
        self._paths: list[str] = []

    def mark_path(self, path: str) -> None:
        """Documents accepted from now on come from ``path`` (for duplicate-id messages)."""
        self._marks.append(len(self.c.texts))
        self._paths.append(path)

    def first_position(self, doc_id: str) -> int:
        """Position of the accepted document whose id is ``doc_id`` (which must be in
        ``seen``): an index over ``corpus.ids``, built on the first duplicate id and extended
        with the ids accepted since, so a run with many repeated ids stays linear."""
        ids = self.c.ids
        upto, n = self._first_upto, len(ids)
        if upto < n:
            self._first.update(zip(ids[upto:], range(upto, n), strict=True))
            self._first_upto = n
        return self._first[doc_id]

    def where(self, pos: int) -> str:
        k = bisect.bisect_right(self._marks, pos) - 1
        return f"{self._paths[k]}:{self.line_of[pos]}"

    def fail(self, msg: str, path: str, line: int | None) -> None:
        err = RecordError(msg, path=path, line=line)
        if self.on_error == "fail":
            raise err
        self.c.skipped += 1
        if len(self.c.errors) < 100:
            self.c.errors.append(str(err))
        if len(self.c.skipped_records) < MAX_SKIPPED_DETAILS:
            self.c.skipped_records.append(SkippedRecord(path, line, msg))

    def add(self, obj: Any, path: str, line: int, default_id: str | None = None) -> bool:
        """Validate a record; append its id and text. Returns False when it was skipped.

        ``default_id`` (used when the record has no id) defaults to ``path:line``.
        """
        if not isinstance(obj, dict):
            self.fail(f"expected a JSON object, got {type(obj).__name__}", path, line)
            return False
        text = get_field(obj, self.text_field)
        if text is MISSING:
            self.fail(
                missing_field(obj, self.text_field, "text") + "; pass --text-field NAME",
                path,
                line,
            )
            return False
        if not isinstance(text, str):
            self.fail(
                f"field {self.text_field!r} must be a string, got {type(text).__name__}", path, line
            )
            return False
        id_field = self.id_field
        if (
            id_field is None
            and "id" in obj
            and isinstance(obj["id"], (str, int))
            and obj["id"] != ""
        ):
            doc_id = str(obj["id"])  # auto: use an "id" field when the record has one
        elif id_field is not None:
            value = get_field(obj, id_field)
            if value is MISSING or value is None or value == "":
                self.fail(
                    f"record has no id field {id_field!r}; drop --id-field to generate ids",
                    path,
                    line,
                )
                return False
            doc_id = str(value)
        else:
            doc_id = default_id if default_id is not None else f"{path}:{line}"
        if doc_id in self.seen:
            first = self.where(self.first_position(doc_id))
            self.fail(
                f"duplicate id {doc_id!r} (first seen at {first}); ids must be "
                "unique — fix the input or drop --id-field to generate ids",
                path,
                line,
            )
            return False
        self.seen.add(doc_id)
        self.c.ids.append(doc_id)
        self.c.texts.append(text)
        self.line_of.append(line)
        return True

    def decode(self, raw: bytes, path: str, line: int) -> str | None:
        try:
            return raw.decode(self.encoding)
        except UnicodeDecodeError as exc:
            self.fail(
                f"not valid {self.encoding} (byte {exc.start}: {raw[exc.start : exc.start + 1]!r}); "
                "pass --encoding (e.g. latin-1, gb18030)",
                path,
                line,
            )
            return None


def _open_binary(path: str, src: Source) -> str:
    """A local, uncompressed file holding the input: the file itself when it is one, else a
    temporary copy (stdin, compressed, remote: :func:`neardup.io.remote.local_copy`) that
    ``Corpus.close`` removes."""
    real, temp = local_copy(path, stdin=sys.stdin.buffer if path == "-" else None)
    src.temp = temp
    if temp is not None:  # also removed when a corpus that was never closed goes away
        weakref.finalize(src, _remove_quietly, temp)
    return real


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _read_jsonl(r: _Reader, src: Source, lines_mode: bool) -> None:
    real = _open_binary(src.path, src)
    shown = "<stdin>" if src.path == "-" else src.path
    read_lines(r, src, real, shown, lines_mode)


def _read_json(r: _Reader, src: Source) -> None:
    real = _open_binary(src.path, src)
    shown = "<stdin>" if src.path == "-" else src.path
    raw = Path(real).read_bytes()
    s = r.decode(raw, shown, None)  # type: ignore[arg-type]
    if s is None:
        return
    try:
        data = json.loads(s)
    except json.JSONDecodeError as exc:
        r.fail(f"malformed JSON ({exc.msg} at column {exc.colno})", shown, exc.lineno)
        return
    if not isinstance(data, list):
        raise RecordError(
            f"expected a JSON array of objects, got {type(data).__name__}; use .jsonl for one "
            "object per line",
            path=shown,
        )
    for i, obj in enumerate(data, 1):
        if r.add(obj, shown, i):
            src.rows.append(obj)


def _read_csv(r: _Reader, src: Source, delimiter: str) -> None:
    real = _open_binary(src.path, src)
    shown = "<stdin>" if src.path == "-" else src.path
    try:
        with open(real, encoding=r.encoding, newline="") as fh:
            reader = csv.reader(fh, delimiter=delimiter)
            header = next(reader, None)
            if header is None:
                return
            src.header = header
            _csv_rows(r, src, reader, header, shown)
    except UnicodeDecodeError as exc:
        raise RecordError(
            f"not valid {r.encoding}; pass --encoding (e.g. latin-1, gb18030) ({exc.reason})",
            path=shown,
        ) from exc
    except csv.Error as exc:
        raise RecordError(f"malformed CSV: {exc}", path=shown) from exc


def _csv_rows(r: _Reader, src: Source, reader: Any, header: list[str], shown: str) -> None:
    """Accept CSV rows; the common row (text present, usable id) skips building a dict."""
    width = len(header)
    last = {name: i for i, name in enumerate(header)}  # dict(zip(header, row)) keeps the last
    # NEARDUP_REFERENCE=io: every row through the general dict path (the reference)
    ti = None if use_reference("io") else last.get(r.text_field)
    idkey = "id" if r.id_field is None else r.id_field
    ii = last.get(idkey)
    seen, ids, texts, line_of, rows = r.seen, r.c.ids, r.c.texts, r.line_of, src.rows
    for row in reader:
        line = reader.line_num
        if not row:
            continue
        if len(row) != width:
            r.fail(f"row has {len(row)} fields, the header has {width}", shown, line)
            continue
        if ti is not None:
            doc_id = row[ii] if ii is not None else None
            if doc_id == "":
                doc_id = None if r.id_field is not None else f"{shown}:{line}"
            elif doc_id is None and r.id_field is None:
                doc_id = f"{shown}:{line}"
            if doc_id is not None and doc_id not in seen:
                seen.add(doc_id)
                ids.append(doc_id)
                texts.append(row[ti])
                line_of.append(line)
                rows.append(row)
                continue
        if r.add(dict(zip(header, row, strict=True)), shown, line):
            rows.append(row)


def _read_parquet(r: _Reader, src: Source) -> None:
    pq: Any = require("pyarrow.parquet", "parquet", "reading Parquet")
    pa: Any = require("pyarrow", "parquet", "reading Parquet")
    real = _open_binary(src.path, src)  # stdin (--input-format parquet): spooled first
    try:
        table = pq.read_table(real)
    except pa.ArrowException as exc:
        raise RecordError(f"cannot read Parquet: {exc}", path=src.path) from exc
    text_col = arrow_column(table, r.text_field)
    if text_col is None:
        names = _parquet_names(table)
        raise RecordError(
            f"no text column {r.text_field!r} (columns: {', '.join(names[:10])}); pass --text-field",
            path=src.path,
        )
    texts = text_col.to_pylist()
    id_col = None if r.id_field is None else arrow_column(table, r.id_field)
    ids = None if id_col is None else id_col.to_pylist()
    keep = _parquet_rows(r, src.path, texts, ids)
    src.table = table.take(pa.array(keep, type=pa.int64())) if len(keep) != len(texts) else table


def arrow_column(table: Any, name: str) -> Any:
    """Column ``name`` of a pyarrow table, or the field of a struct column for a dotted name
    (``meta.text``; a column literally named so wins); None when there is none."""
    if name in table.column_names:
        return table.column(name)
    if "." not in name:
        return None
    flat = table
    while True:  # one level of structs at a time: "a.b.c" needs two
        if not any(_is_struct(c.type) for c in flat.columns):
            return None
        flat = flat.flatten()
        if name in flat.column_names:
            return flat.column(name)


def _is_struct(t: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_struct(t))


def _parquet_names(table: Any) -> list[str]:
    """Column names, struct fields spelled out (``meta.text``)."""
    flat = table
    while any(_is_struct(c.type) for c in flat.columns):
        flat = flat.flatten()
    return list(flat.column_names)


def _parquet_rows(r: _Reader, path: str, texts: list[Any], ids: list[Any] | None) -> list[int]:
    """Accept Parquet rows; the common row (string text, usable id) skips building a dict."""
    keep: list[int] = []
    idf = r.id_field
    # NEARDUP_REFERENCE=io, or a text column named "id": every row through r.add
    fast = not use_reference("io") and r.text_field != "id"
    seen, out_ids, out_texts, line_of = r.seen, r.c.ids, r.c.texts, r.line_of
    for i, text in enumerate(texts):
        if fast and type(text) is str:
            doc_id: str | None = None
            if idf is None:
                doc_id = f"{path}:{i + 1}"
            elif ids is not None:
                v = ids[i]
                if type(v) is str and v:
                    doc_id = v
                elif type(v) is int:
                    doc_id = str(v)
            if doc_id is not None and doc_id not in seen:
                seen.add(doc_id)
                out_ids.append(doc_id)
                out_texts.append(text)
                line_of.append(i + 1)
                keep.append(i)
                continue
        obj = {r.text_field: text}
        if idf is not None and ids is not None:
            obj[idf] = ids[i]
        if r.add(obj, path, i + 1):
            keep.append(i)
    return keep


def _read_text_files(r: _Reader, src: Source) -> None:
    if src.path == "-":
        raise ConfigError("--input-format text reads files; for stdin use --input-format lines")
    root = Path(src.path)
    if is_url(src.path) or not root.is_dir():
        # one file: read in place, or from a temporary copy (compressed, remote)
        real = Path(_open_binary(src.path, src))
        rel = strip_compression(src.path).rstrip("/").rsplit("/", 1)[-1]
        files: list[tuple[Path, str, str]] = [(real, rel, src.path)]
    else:
        files = [
            (p, p.relative_to(root).as_posix(), str(p))
            for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.startswith(".")
        ]
    for p, rel, shown in files:
        r.mark_path(shown)
        text = r.decode(p.read_bytes(), shown, None)  # type: ignore[arg-type]
        if text is None:
            continue
        obj = {r.text_field: text}
        if r.id_field is not None:
            obj[r.id_field] = rel
        if r.add(obj, shown, 1, rel):
            src.rows.append((p, rel))


def _is_jsonl(path: str, fmt: str | None) -> bool:
    try:
        return (fmt or detect_format(path)) == "jsonl"
    except ConfigError:  # reported when that input's turn comes
        return False


def read_corpus(
    inputs: Sequence[str],
    *,
    fmt: str | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    encoding: str = "utf-8",
    on_error: OnError = "fail",
    on_texts: Callable[[list[str]], object] | None = None,
) -> Corpus:
    """Read documents from files, directories, globs, fsspec URLs or ``-`` (stdin), in order.

    Parameters
    ----------
    inputs : sequence of str
        Paths, globs (``data/*.jsonl.gz``) and URLs (``s3://b/p/*.parquet``; see the module
        docstring); ``-`` is stdin (read as ``fmt``, default jsonl). Compressed inputs
        (``.gz``, ``.zst``, ``.bz2``, ``.xz``) are decompressed.
    fmt : str, optional
        Force a format (see module docstring); by default it is detected per input.
    text_field : str, default="text"
        Field / column holding the text; a dotted name (``meta.text``) reads a nested object's
        field (a Parquet struct column's).
    id_field : str, optional
        Field holding a unique document id (every record must have it; dotted names too).
        Without it, a record's ``id`` field is used when present, else an id is generated as
        ``path:line`` (``<stdin>:line`` for stdin; the relative path for text files).
    encoding : str, default="utf-8"
    on_error : {"fail", "skip"}, default="fail"
        Raise on the first malformed record, or skip it and count it in ``Corpus.skipped``
        (the first ``MAX_SKIPPED_DETAILS`` with where and why in ``Corpus.skipped_records``).
    on_texts : callable, optional
        Called with ``Corpus.texts`` (the list being filled) whenever texts were appended: after
        every JSONL block and after every input. Texts are only ever appended, so a consumer
        can start on ``texts[:len(texts)]`` while reading goes on (``neardup dedup`` hashes and
        fingerprints them meanwhile: :class:`neardup.dedup.ExactFingerprintPass`).

    Returns
    -------
    Corpus
    """
    if on_error not in ("fail", "skip"):
        raise ConfigError(f"on_error must be 'fail' or 'skip', got {on_error!r}")
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    try:
        "".encode(encoding)
    except LookupError as exc:
        raise ConfigError(f"unknown encoding {encoding!r}; try utf-8, latin-1 or gb18030") from exc
    if not inputs:
        raise ConfigError("no input given; pass one or more files, a directory, or - for stdin")
    inputs = expand_inputs(list(inputs))
    corpus = Corpus()
    if is_utf8(encoding) and not use_reference("io") and any(_is_jsonl(p, fmt) for p in inputs):
        corpus.texts = SpanTexts()  # type: ignore[assignment]  # JSONL texts stay spans
    reader = _Reader(
        corpus,
        text_field=text_field,
        id_field=id_field,
        encoding=encoding,
        on_error=on_error,
        on_texts=on_texts,
    )
    try:
        for path in inputs:
            f = fmt or detect_format(path)
            src = Source(path=path, fmt=f, first=len(corpus.texts), encoding=encoding)
            corpus.sources.append(src)
            reader.mark_path("<stdin>" if path == "-" else path)
            if f in ("jsonl", "lines"):
                _read_jsonl(reader, src, lines_mode=(f == "lines"))
            elif f == "json":
                _read_json(reader, src)
            elif f in ("csv", "tsv"):
                _read_csv(reader, src, "," if f == "csv" else "\t")
            elif f == "parquet":
                _read_parquet(reader, src)
            else:
                _read_text_files(reader, src)
            src.count = len(corpus.texts) - src.first
            src.lines = np.frombuffer(reader.line_of, np.int64)[src.first :].copy()
            if on_texts is not None:
                on_texts(corpus.texts)
    except BaseException:
        corpus.close()
        raise
    return corpus


def _kept_positions(src: Source, keep: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    return np.flatnonzero(keep[src.first : src.first + src.count])


def write_kept(
    corpus: Corpus,
    keep: npt.NDArray[np.bool_],
    output: str,
    *,
    fmt: str | None = None,
    encoding: str = "utf-8",
) -> int:
    """Write the records whose ``keep`` entry is True to ``output`` through
    :func:`~neardup.io.atomic.atomic_open` (atomic for a regular file, in place for a device or
    FIFO, staged inside :func:`~neardup.io.atomic.staged_outputs`).

    The output format is ``fmt`` or that of the first input. ``-`` writes to stdout (not for
    parquet/text). An output named ``*.gz`` / ``.zst`` / ``.bz2`` / ``.xz`` is compressed
    (the rest uncompressed, whatever the input was). Returns the number of records written.
    """
    keep = np.asarray(keep, dtype=bool)
    if keep.shape != (len(corpus),):
        raise InputError(f"keep mask has shape {keep.shape}, expected ({len(corpus)},)")
    if not corpus.sources:
        raise InputError("the corpus has no sources to write from")
    out_fmt = fmt or corpus.sources[0].fmt
    if out_fmt not in FORMATS:
        raise ConfigError(f"unknown output format {out_fmt!r}; use one of {', '.join(FORMATS)}")
    if output == "-" and out_fmt in ("parquet", "text"):
        raise ConfigError(f"{out_fmt} output cannot go to stdout; pass --output PATH")
    kind = None if output == "-" else compression_of(output)
    if kind is not None:
        return _write_compressed(corpus, keep, output, out_fmt, encoding, kind)
    if out_fmt in ("jsonl", "lines") and all(s.fmt == out_fmt for s in corpus.sources):
        return _write_raw_lines(corpus, keep, output, encoding)
    if output == "-":
        buf = io.StringIO()
        n = _write_stream(corpus, keep, out_fmt, buf)
        sys.stdout.write(buf.getvalue())
        sys.stdout.flush()
        return n
    if out_fmt == "parquet":
        return _write_parquet(corpus, keep, output)
    if out_fmt == "text":
        return _write_text_dir(corpus, keep, output, encoding)
    newline = "" if out_fmt in ("csv", "tsv") else "\n"
    with atomic_open(output, "w", encoding=encoding, newline=newline) as fh:
        return _write_stream(corpus, keep, out_fmt, fh)


def _write_compressed(
    corpus: Corpus,
    keep: npt.NDArray[np.bool_],
    output: str,
    out_fmt: str,
    encoding: str,
    kind: str,
) -> int:
    """The uncompressed output written to a temporary file as usual (raw byte copies
    included), then compressed into ``output``."""
    if out_fmt in ("parquet", "text"):
        raise ConfigError(
            f"{out_fmt} output cannot be compressed as {kind} ({output!r}); drop the extension"
        )
    fd, plain = tempfile.mkstemp(prefix="neardup-output-", suffix=".tmp")
    os.close(fd)
    try:
        # a fresh context: the temporary file is written now, not staged with the run's
        # outputs (staged_outputs); the compressed output is
        n = contextvars.Context().run(
            write_kept, corpus, keep, plain, fmt=out_fmt, encoding=encoding
        )
        compress_file(plain, output, kind)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(plain)
    return n


def _write_raw_lines(
    corpus: Corpus, keep: npt.NDArray[np.bool_], output: str, encoding: str
) -> int:
    """jsonl → jsonl, lines → lines: copy each kept record's input bytes (see ``jsonl``)."""
    if output == "-":
        sys.stdout.flush()
        stream = getattr(sys.stdout, "buffer", None)
        if stream is None:  # a text-only stdout (embedding): decode what would be written
            n = 0
            for src in corpus.sources:
                n += copy_records(
                    src,
                    _kept_positions(src, keep),
                    lambda b: sys.stdout.write(bytes(b).decode(encoding)),
                    out_encoding=encoding,
                )
            sys.stdout.flush()
            return n
        n = sum(
            copy_records(src, _kept_positions(src, keep), stream.write, out_encoding=encoding)
            for src in corpus.sources
        )
        stream.flush()
        return n
    with atomic_open(output, "wb", buffering=1 << 20) as fh:
        n = 0
        for src in corpus.sources:
            fh.flush()  # copy_records may write to the descriptor directly
            n += copy_records(
                src,
                _kept_positions(src, keep),
                fh.write,
                out_encoding=encoding,
                out_fd=fh.fileno(),
            )
        return n


def _records(corpus: Corpus, keep: npt.NDArray[np.bool_]) -> Iterator[dict[str, Any]]:
    """Kept records as dicts (for cross-format output)."""
    for src in corpus.sources:
        for pos in _kept_positions(src, keep).tolist():
            g = src.first + pos
            if src.fmt == "json":
                yield src.rows[pos]
            elif src.fmt in ("csv", "tsv") and src.header is not None:
                yield dict(zip(src.header, src.rows[pos], strict=True))
            else:
                yield {"id": corpus.ids[g], "text": corpus.texts[g]}


def _write_stream(corpus: Corpus, keep: npt.NDArray[np.bool_], out_fmt: str, fh: Any) -> int:
    n = 0
    same = all(s.fmt == out_fmt for s in corpus.sources)
    if (
        out_fmt in ("csv", "tsv")
        and same
        and len({tuple(s.header or ()) for s in corpus.sources}) == 1
    ):
        w = csv.writer(fh, delimiter="," if out_fmt == "csv" else "\t", lineterminator="\n")
        w.writerow(corpus.sources[0].header or [])
        for src in corpus.sources:
            kept = _kept_positions(src, keep).tolist()
            w.writerows(src.rows[pos] for pos in kept)
            n += len(kept)
        return n
    records = _records(corpus, keep)
    if out_fmt == "json":
        fh.write("[")
        for rec in records:
            fh.write(("," if n else "") + "\n" + json.dumps(rec, ensure_ascii=False))
            n += 1
        fh.write("\n]\n")
        return n
    if out_fmt in ("csv", "tsv"):
        rows = list(records)
        header: list[str] = []
        for rec in rows:
            header.extend(k for k in rec if k not in header)
        dw = csv.DictWriter(
            fh, fieldnames=header, delimiter="," if out_fmt == "csv" else "\t", lineterminator="\n"
        )
        dw.writeheader()
        dw.writerows(rows)
        return len(rows)
    for rec in records:  # jsonl / lines from other formats
        if out_fmt == "lines":
            fh.write(str(rec.get("text", "")).replace("\n", " ") + "\n")
        else:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        n += 1
    return n


def _write_parquet(corpus: Corpus, keep: npt.NDArray[np.bool_], output: str) -> int:
    pa: Any = require("pyarrow", "parquet", "writing Parquet")
    pq: Any = require("pyarrow.parquet", "parquet", "writing Parquet")
    if all(s.fmt == "parquet" for s in corpus.sources):
        tables = [
            s.table.take(pa.array(_kept_positions(s, keep), type=pa.int64()))
            for s in corpus.sources
        ]
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    else:
        table = pa.Table.from_pylist(list(_records(corpus, keep)))
    with atomic_open(output, "wb") as fh:
        pq.write_table(table, fh)
    return int(table.num_rows)


def _write_text_dir(corpus: Corpus, keep: npt.NDArray[np.bool_], output: str, encoding: str) -> int:
    n = 0
    with atomic_dir(output) as tmp:
        for src in corpus.sources:
            for pos in _kept_positions(src, keep).tolist():
                g = src.first + pos
                rel = src.rows[pos][1] if src.fmt == "text" else f"{g:08d}.txt"
                dest = tmp / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                if src.fmt == "text":
                    shutil.copyfile(src.rows[pos][0], dest)
                else:
                    dest.write_text(corpus.texts[g], encoding=encoding)
                n += 1
    return n
