"""Readers for corpora: JSONL, JSON arrays, CSV/TSV, Parquet, plain text, stdin.

A corpus is read once into ``ids`` and ``texts`` (plus what each format needs to write the
kept records back); :func:`neardup.io.write_kept` (:mod:`neardup.io.writers`) then writes the
records whose mask is True, atomically.

Formats
-------
``jsonl``   one JSON object per line (``.jsonl``, ``.ndjson``; the default, and stdin's default).
            Read in 16 MiB blocks and parsed with orjson; kept lines are copied byte for byte
            (see :mod:`neardup.io.jsonl` for the exact rules: ``\r\n`` → ``\n``, BOM dropped).
``json``    one JSON array of objects (``.json``).
``csv``     comma-separated with a header row (``.csv``); ``tsv`` tab-separated (``.tsv``).
``parquet`` Apache Parquet (``.parquet``, ``.pq``); needs ``pip install 'neardup[parquet]'``.
``text``    each plain-text file (``.txt``, ``.md``, ``.text``) is one document; its id is its
            path relative to its folder input (a named file: its name).
``lines``   one document per non-empty line of a plain-text file (must be asked for).

Which files an input names and the format each is read as (folders: every file by its own
name, one kind per folder) is :func:`neardup.io.plan.plan_inputs`' decision.

Ids
---
``id_field`` names the field holding each record's id (every record must have one); without
it a record's ``id`` field is used when it has one, else ``path:line`` is generated (a text
document: its relative path). ``generate_ids=True`` ignores the records' ids and numbers every
record ``path:line`` (a text document ``path:1``, unique where relative paths repeat across
folders). An id must be a
non-empty string or an integer (a typed id column in Parquet included); any other value (null,
a float, a boolean, an empty string, an object) is a :class:`~neardup.errors.RecordError`
naming the file, the line and the options, never replaced silently. Ids must be unique.

Encodings
---------
``encoding`` other than UTF-8 decodes every record with it; a record that is valid UTF-8 with
non-ASCII characters is refused (a file that mixes encodings would turn its UTF-8 records into
mojibake): convert the file, or read it as UTF-8 and skip what is not.

Fields
------
``text_field`` / ``id_field`` may be dotted paths into nested objects (``meta.text``) in
JSON/JSONL and into struct columns in Parquet; a key that is literally ``meta.text`` wins.

Every malformed record raises :class:`~neardup.errors.RecordError` naming the file and line
(or record number), unless ``on_error="skip"``, which counts it in ``Corpus.skipped`` and
keeps the first ``MAX_SKIPPED_DETAILS`` of them in ``Corpus.skipped_records``. A record that
does not parse as the format it is read as, where the format came from the name or stdin's
default, says so and names ``--input-format``.
"""

from __future__ import annotations

import array
import bisect
import codecs
import contextlib
import csv
import json
import mmap
import os
import re
import sys
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .._reference import use_reference
from ..errors import ConfigError, RecordError, require
from .fields import MISSING, get_field, missing_field
from .jsonl import _jsonl_lines, is_utf8, read_lines
from .plan import FORMATS, InputFile, detect_format, plan_inputs
from .remote import local_copy, strip_compression
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
]

Format = Literal["jsonl", "json", "csv", "tsv", "parquet", "text", "lines"]
OnError = Literal["fail", "skip"]

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))

#: ``--generate-ids``' hint, in every message about an unusable or repeated id
_IDS_HINT = "or pass --generate-ids to number the records instead (path:line)"


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
    rows: list[Any] = field(default_factory=list)
    # json objects / csv rows / text: (the file, or None when it was a temporary copy, rel id)
    header: list[str] | None = None
    table: Any = None  # parquet: pyarrow.Table of the kept-able rows
    temp: str | None = None  # stdin / a compressed or remote input, uncompressed in this file
    # (removed by Corpus.close)
    encoding: str = "utf-8"
    rel: str = ""  # its path relative to its folder input, or its name (InputFile.rel)
    explicit: bool = False  # its format came from --input-format
    # ``temp`` belongs to another Source (a piece of a file, :mod:`neardup.io.pieces`, reads
    # the file's one copy): closing this one leaves it
    lent: bool = False

    def close(self) -> None:
        """Remove its temporary uncompressed copy, if any (unless lent)."""
        if self.temp and not self.lent:
            _remove_quietly(self.temp)
        self.temp = None


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

    def location(self, pos: int) -> str:
        """Where document ``pos`` was read: ``path:line`` (record number for JSON arrays and
        Parquet), for messages about one record."""
        for src in self.sources:
            if src.first <= pos < src.first + src.count:
                k = pos - src.first
                return f"{src.path}:{int(src.lines[k])}" if k < len(src.lines) else src.path
        raise IndexError(f"no document {pos} in a corpus of {len(self)}")

    def input_files(self) -> list[InputFile]:
        """The files read, as :func:`~neardup.io.plan.plan_inputs` planned them."""
        return [InputFile(s.path, s.fmt, s.rel or s.path, s.explicit) for s in self.sources]

    def close(self) -> None:
        for s in self.sources:
            s.close()

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
        generate_ids: bool = False,
        unique: bool = True,
    ) -> None:
        self.c = corpus
        #: ignore the records' ids: every id is generated (path:line; a text's relative path)
        self.generate_ids = generate_ids
        self.on_texts = on_texts  # called with corpus.texts as they grow (see read_corpus)
        self.text_field = text_field
        self.id_field = id_field
        self.encoding = encoding
        # a non-UTF-8 encoding: records that are valid UTF-8 (non-ASCII) are refused, not
        # turned into mojibake (UTF-16/32 and utf-8-sig are left alone)
        self.guard_utf8 = not codecs.lookup(encoding).name.startswith("utf")
        self.on_error = on_error
        #: why the current input is read as JSONL when it was not asked for (for hints)
        self.jsonl_why: str | None = None
        # ids accepted so far (exactly the ids of ``corpus.ids``): a set, about 3x cheaper to
        # grow than an id -> position dict; positions are looked up only for an error message
        # (``unique=False``: records read again, whose ids were judged by the first read; the
        # caller compares them: none is refused as a repeat)
        self.seen: set[str] = set() if unique else _Unseen()
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
            hint = ""
            if self.jsonl_why is not None:
                hint = (
                    f"; it is read as {self.jsonl_why}: pass --input-format json if it is one "
                    "JSON array"
                    if isinstance(obj, list)
                    else f"; it is read as {self.jsonl_why}: pass --input-format if it is "
                    "another format"
                )
            self.fail(f"expected a JSON object, got {type(obj).__name__}{hint}", path, line)
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
        doc_id = self.id_of(obj, path, line, default_id)
        if doc_id is None:
            return False
        if doc_id in self.seen:
            first = self.where(self.first_position(doc_id))
            fix = (
                "fix the input, name another field with --id-field, "
                if self.id_field is not None
                else "fix the input, "
            )
            self.fail(
                f"duplicate id {doc_id!r} (first seen at {first}); ids must be unique: "
                + fix
                + _IDS_HINT,
                path,
                line,
            )
            return False
        self.seen.add(doc_id)
        self.c.ids.append(doc_id)
        self.c.texts.append(text)
        self.line_of.append(line)
        return True

    def id_of(
        self, obj: dict[str, Any], path: str, line: int, default_id: str | None
    ) -> str | None:
        """The id of a record (the one rule; the fast paths take only what it accepts as it
        would): ``--generate-ids``, else the id field (``--id-field``, else ``id`` when the
        record has one), else ``default_id`` / ``path:line``. None when refused (said)."""
        if self.generate_ids:  # path:line for every format: a text file's relative path
            return f"{path}:{line}"  # repeats across folders (the way out it was offered)
        generated = default_id if default_id is not None else f"{path}:{line}"
        key = self.id_field if self.id_field is not None else "id"
        value = get_field(obj, key)
        if value is MISSING:
            if self.id_field is None:
                return generated
            self.fail(
                f"record has no id field {key!r}; name the field that holds the ids with "
                f"--id-field, {_IDS_HINT}",
                path,
                line,
            )
            return None
        if type(value) is str and value:
            if value.isascii() or _SURROGATE.search(value) is None:
                return value
            # (only the standard library's reading of a "\ud800" escape makes one: the fast
            # paths' ids never hold one)
            self.fail(
                f"the record's {key!r} field (used as its id) holds a lone surrogate (a JSON "
                f'"\\ud800" escape), which no CSV output (--clusters-out, --pairs-out) can '
                f"hold; fix the input, {_IDS_HINT}",
                path,
                line,
            )
            return None
        if type(value) is int:
            return str(value)
        self.fail(_bad_id(key, value, self.id_field is not None), path, line)
        return None

    def decode(self, raw: bytes, path: str, line: int | None) -> str | None:
        """``raw`` decoded with the input's encoding, or None when refused (said): bytes that
        are not valid in it, or, with a non-UTF-8 encoding, a line that is valid UTF-8 with
        non-ASCII characters (see ``guard_utf8``)."""
        try:
            text = raw.decode(self.encoding)
        except UnicodeDecodeError as exc:
            at = raw[exc.start : exc.start + 1]
            if b"\x00" in raw[:4096] or raw.startswith(b"PAR1"):
                hint = (
                    "it holds NUL bytes: a binary file (Parquet? compressed?) read as "
                    + (self.jsonl_why or "text")
                    + "; pass --input-format"
                    + (
                        ""
                        if codecs.lookup(self.encoding).name.startswith("utf-16")
                        else " (or --encoding utf-16 for UTF-16 text)"
                    )
                )
            else:
                hint = "pass --encoding (e.g. latin-1, gb18030)"
            self.fail(f"not valid {self.encoding} (byte {exc.start}: {at!r}); {hint}", path, line)
            return None
        if self.guard_utf8 and not raw.isascii():
            k = _utf8_line(raw)
            if k is not None:
                self.fail(_mixed_encoding(self.encoding, raw, k), path, (line or 1) + k - 1)
                return None
        return text


class _Unseen(set[str]):
    """A set that holds nothing: no id is ever "seen" (``_Reader(unique=False)``)."""

    def add(self, element: str) -> None:
        pass

    def update(self, *others: Any) -> None:
        pass


def _bad_id(key: str, value: Any, named: bool) -> str:
    """The message for an id value that is not a non-empty string or an integer."""
    what = {
        type(None): "null",
        bool: "a boolean",
        float: "a float",
        str: "an empty string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)
    shown = json.dumps(value, default=str)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    if value is not None and value != "":
        what += f" ({shown})"
    where = f"the id field {key!r}" if named else f"the record's {key!r} field (used as its id)"
    return (
        f"{where} is {what}; ids must be non-empty strings or integers: fix the input, name "
        "another field with --id-field, " + _IDS_HINT
    )


def _utf8_line(raw: bytes) -> int | None:
    """The first line (1-based) of ``raw`` that is valid UTF-8 with non-ASCII characters."""
    for k, part in enumerate(raw.split(b"\n"), 1):
        if part.isascii():
            continue
        try:
            part.decode("utf-8")
        except UnicodeDecodeError:
            continue
        return k
    return None


def _mixed_encoding(encoding: str, raw: bytes, k: int) -> str:
    part = raw.split(b"\n")[k - 1]
    i = next(j for j, b in enumerate(part) if b >= 0x80)
    seen = part[max(0, i - 8) : i + 12]
    return (
        f"this line is valid UTF-8 ({seen.decode('utf-8', 'replace')!r}), but --encoding "
        f"{encoding} would read it as {seen.decode(encoding, 'replace')!r}: the file mixes "
        f"encodings; convert it to one (e.g. iconv -f {encoding} -t utf-8 on its other "
        "lines), or read it as UTF-8 (drop --encoding) with --on-error skip to leave out "
        "what is not UTF-8"
    )


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


#: a lone surrogate (what a JSON "\\ud800" escape reads as): no UTF-8 form (the writers' rule too)
_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_bom(r: _Reader, raw: bytes) -> bytes:
    """``raw`` without a UTF-8 byte-order mark at its start when the input is UTF-8 (an editor's
    or Excel's export; the JSONL and lines readers skip it too)."""
    return raw[3:] if raw.startswith(codecs.BOM_UTF8) and is_utf8(r.encoding) else raw


def _read_json(r: _Reader, src: Source) -> None:
    real = _open_binary(src.path, src)
    shown = "<stdin>" if src.path == "-" else src.path
    raw = _without_bom(r, Path(real).read_bytes())
    s = r.decode(raw, shown, None)
    if s is None:
        return
    # the name (or stdin's default) said JSON: the likely mistake is JSON Lines
    hint = "" if src.explicit else "; pass --input-format jsonl if it holds one object per line"
    try:
        data = json.loads(s)
    except json.JSONDecodeError as exc:
        msg = exc.msg.removesuffix(" at")  # ("Invalid control character at")
        r.fail(f"malformed JSON ({msg} at column {exc.colno}){hint}", shown, exc.lineno)
        return
    if not isinstance(data, list):
        raise RecordError(
            f"expected a JSON array of objects, got {type(data).__name__}; pass --input-format "
            "jsonl if it holds one object per line",
            path=shown,
        )
    for i, obj in enumerate(data, 1):
        if r.add(obj, shown, i):
            src.rows.append(obj)


def _read_csv(r: _Reader, src: Source, delimiter: str) -> None:
    real = _open_binary(src.path, src)
    shown = "<stdin>" if src.path == "-" else src.path
    if r.guard_utf8:  # the whole file first: the csv module decodes as it parses
        raw = Path(real).read_bytes()
        k = _utf8_line(raw) if not raw.isascii() else None
        if k is not None:
            raise RecordError(_mixed_encoding(r.encoding, raw, k), path=shown, line=k)
    # a byte-order mark before the header (Excel's "CSV UTF-8") is not part of the first name
    encoding = "utf-8-sig" if is_utf8(r.encoding) else r.encoding
    try:
        with open(real, encoding=encoding, newline="") as fh:
            # strict: the lenient reader takes an unclosed quote for a field running to the end
            # of the file, and text after a closing quote as part of the field, silently
            reader = csv.reader(fh, delimiter=delimiter, strict=True)
            try:
                header = next(reader, None)
            except csv.Error as exc:
                raise _malformed_csv(exc, shown, 1, reader.line_num) from exc
            if header is None:
                return
            _check_header(r, src, header, shown)
            src.header = header
            _csv_rows(r, src, reader, header, shown)
    except UnicodeDecodeError as exc:
        raise RecordError(
            f"not valid {r.encoding}; pass --encoding (e.g. latin-1, gb18030) ({exc.reason})",
            path=shown,
        ) from exc


def _malformed_csv(exc: Exception, path: str, start: int, at: int) -> RecordError:
    """The error for a CSV the strict reader refused: ``start`` is the first line of the row
    it was reading, ``at`` the line it stopped on. The whole file is refused (even with
    ``--on-error skip``): after a quoting fault no later row's fields can be trusted."""
    msg = str(exc).replace("\t", r"\t")  # the tab separator named, not a blank
    if "unexpected end of data" in msg:
        return RecordError(
            "malformed CSV: a quoted field in the row starting here is never closed, so the "
            "rest of the file would be read as that field; close its quote, and double each "
            'quote inside a quoted field ("")',
            path=path,
            line=start,
        )
    if "expected after" in msg:
        return RecordError(
            f"malformed CSV: {msg} (text after a field's closing quote); quote the whole "
            'field and double each quote inside it ("")',
            path=path,
            line=at,
        )
    return RecordError(f"malformed CSV: {msg}", path=path, line=at)


def _check_header(r: _Reader, src: Source, header: list[str], shown: str) -> None:
    """A header without the text column: every row would fail, so the file is refused at its
    first line, with the likelier mistake named (another separator, JSON, --text-field). A
    header naming the text or id column twice is refused too: which one is read cannot be
    told (a record as a dict keeps the last)."""
    if r.text_field in header:
        for name in (r.text_field, r.id_field if r.id_field is not None else "id"):
            where = [i + 1 for i, h in enumerate(header) if h == name]
            if len(where) > 1:
                raise RecordError(
                    f"the header names the column {name!r} twice (columns {where[0]} and "
                    f"{where[1]}): which one is meant cannot be told; rename one",
                    path=shown,
                    line=1,
                )
        return
    kind = "comma" if src.fmt == "csv" else "tab"
    first = (header[0] if header else "").lstrip()
    if src.fmt == "csv" and any("\t" in h for h in header):
        why = "it looks tab-separated: pass --input-format tsv"
    elif src.fmt == "tsv" and len(header) == 1 and "," in header[0]:
        why = "it looks comma-separated: pass --input-format csv"
    elif first.startswith(("{", "[")):
        why = "it looks like JSON: pass --input-format jsonl (or json for an array)"
    else:
        why = "pass --text-field NAME" + ("" if src.explicit else ", or --input-format")
    cells = [repr(h if len(h) <= 24 else h[:21] + "...") for h in header[:6]]
    shown_header = ", ".join(cells) + (", ..." if len(header) > 6 else "")
    raise RecordError(
        f"no column {r.text_field!r} in the {kind}-separated header ({shown_header}); {why}",
        path=shown,
        line=1,
    )


def _csv_rows(r: _Reader, src: Source, reader: Any, header: list[str], shown: str) -> None:
    """Accept CSV rows; the common row (text present, usable id) skips building a dict (it
    takes only what :meth:`_Reader.id_of` would accept, exactly as it would)."""
    width = len(header)
    last = {name: i for i, name in enumerate(header)}  # dict(zip(header, row)) keeps the last
    # NEARDUP_REFERENCE=io: every row through the general dict path (the reference)
    ti = None if use_reference("io") else last.get(r.text_field)
    idkey = "id" if r.id_field is None else r.id_field
    ii = None if r.generate_ids else last.get(idkey)
    generated = r.generate_ids or r.id_field is None  # rows without an id column: path:line
    seen, ids, texts, line_of, rows = r.seen, r.c.ids, r.c.texts, r.line_of, src.rows
    end = reader.line_num  # the last line of the last row read (the header's)
    try:
        for row in reader:
            # a row is named by the line it starts on (a quoted field may span lines)
            line, end = end + 1, reader.line_num
            if not row:
                continue
            if len(row) != width:
                r.fail(f"row has {len(row)} fields, the header has {width}", shown, line)
                continue
            if ti is not None:
                # an empty id (None here) is refused by id_of, as a missing id column is when
                # --id-field names it
                doc_id = (
                    (row[ii] or None)
                    if ii is not None
                    else (f"{shown}:{line}" if generated else None)
                )
                if doc_id is not None and doc_id not in seen:
                    seen.add(doc_id)
                    ids.append(doc_id)
                    texts.append(row[ti])
                    line_of.append(line)
                    rows.append(row)
                    continue
            if r.add(dict(zip(header, row, strict=True)), shown, line):
                rows.append(row)
    except csv.Error as exc:  # the row being read starts after the last one read
        raise _malformed_csv(exc, shown, end + 1, reader.line_num) from exc


def _read_parquet(r: _Reader, src: Source) -> None:
    pq: Any = require("pyarrow.parquet", "parquet", "reading Parquet")
    pa: Any = require("pyarrow", "parquet", "reading Parquet")
    real = _open_binary(src.path, src)  # stdin (--input-format parquet): spooled first
    try:
        table = pq.read_table(real)
    except pa.ArrowException as exc:
        hint = "" if src.explicit else "; pass --input-format if it is not Parquet"
        raise RecordError(f"cannot read Parquet: {exc}{hint}", path=src.path) from exc
    table = _without_views(pa, table)
    text_col = arrow_column(table, r.text_field)
    if text_col is None:
        names = _parquet_names(table)
        raise RecordError(
            f"no text column {r.text_field!r} (columns: {', '.join(names[:10])}); pass --text-field",
            path=src.path,
        )
    texts = text_col.to_pylist()
    # the id column: --id-field's, else an "id" column when there is one (any type: the
    # values decide, as for JSON), none with --generate-ids
    id_name = r.id_field if r.id_field is not None else "id"
    id_col = None if r.generate_ids else arrow_column(table, id_name)
    ids = None if id_col is None else id_col.to_pylist()
    keep = _parquet_rows(r, src.path, texts, id_name, ids)
    src.table = table.take(pa.array(keep, type=pa.int64())) if len(keep) != len(texts) else table


def _without_views(pa: Any, table: Any) -> Any:
    """``table`` with its ``string_view`` / ``binary_view`` columns as ``large_string`` /
    ``large_binary`` (the same values): Arrow's ``take``, which picks the kept rows, has no
    kernel for the view types."""
    views = {
        i: pa.large_string() if pa.types.is_string_view(f.type) else pa.large_binary()
        for i, f in enumerate(table.schema)
        if pa.types.is_string_view(f.type) or pa.types.is_binary_view(f.type)
    }
    if not views:
        return table
    schema = pa.schema(
        [f.with_type(views[i]) if i in views else f for i, f in enumerate(table.schema)],
        metadata=table.schema.metadata,
    )
    return table.cast(schema)


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


def _parquet_rows(
    r: _Reader, path: str, texts: list[Any], id_name: str, ids: list[Any] | None
) -> list[int]:
    """Accept Parquet rows; the common row (string text, usable id) skips building a dict (it
    takes only what :meth:`_Reader.id_of` would accept, exactly as it would)."""
    keep: list[int] = []
    # NEARDUP_REFERENCE=io, or a text column named like the id: every row through r.add
    fast = not use_reference("io") and r.text_field != id_name
    generated = r.generate_ids or r.id_field is None  # no id column: path:line
    seen, out_ids, out_texts, line_of = r.seen, r.c.ids, r.c.texts, r.line_of
    for i, text in enumerate(texts):
        if fast and type(text) is str:
            doc_id: str | None = None
            if ids is None:
                doc_id = f"{path}:{i + 1}" if generated else None
            else:
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
        if ids is not None:
            obj[id_name] = ids[i]
        if r.add(obj, path, i + 1):
            keep.append(i)
    return keep


def _read_text_file(r: _Reader, src: Source) -> None:
    """One plain-text file, one document; its id is its relative path (``src.rel``, without a
    compression extension)."""
    if src.path == "-":
        raise ConfigError("--input-format text reads files; for stdin use --input-format lines")
    real = _open_binary(src.path, src)  # in place, or a temporary copy (compressed, remote)
    rel = strip_compression(src.rel or src.path.rstrip("/").rsplit("/", 1)[-1])
    data = Path(real).read_bytes()
    kept_file: str | None = real
    if src.temp is not None:  # not kept for the run: the text is written from the corpus
        _remove_quietly(src.temp)
        src.temp = kept_file = None
    text = r.decode(_without_bom(r, data), src.path, None)
    if text is None:
        return
    obj = {r.text_field: text}
    if r.id_field is not None:
        obj[r.id_field] = rel
    if r.add(obj, src.path, 1, rel):
        src.rows.append((kept_file, rel))


def jsonl_why(file: InputFile) -> str | None:
    """Why ``file`` is read as JSONL when it was not asked for (for hints), else None."""
    if file.fmt != "jsonl" or file.explicit:
        return None
    return (
        "JSON Lines (stdin's default format)"
        if file.path == "-"
        else "JSON Lines (its name says so)"
    )


def read_corpus(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str] | InputFile],
    *,
    fmt: str | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    encoding: str = "utf-8",
    on_error: OnError = "fail",
    on_texts: Callable[[list[str]], object] | None = None,
    generate_ids: bool = False,
) -> Corpus:
    """Read documents from files, folders, globs, fsspec URLs or ``-`` (stdin), in order.

    Parameters
    ----------
    inputs : str, or a sequence of str (or :class:`~neardup.io.plan.InputFile`)
        One path, or several: paths, folders, globs (``data/*.jsonl.gz``) and URLs
        (``s3://b/p/*.parquet``); ``-`` is stdin (read as ``fmt``, default jsonl). Compressed
        inputs (``.gz``, ``.zst``, ``.bz2``, ``.xz``) are decompressed. Which files they name
        and the format of each: :func:`~neardup.io.plan.plan_inputs` (a folder: each file by
        its own name, one kind per folder, else refused).
    fmt : str, optional
        Read every file (folders' included) as this format; by default each file's name says.
    text_field : str, default="text"
        Field / column holding the text; a dotted name (``meta.text``) reads a nested object's
        field (a Parquet struct column's).
    id_field : str, optional
        Field holding a unique document id (every record must have it; dotted names too).
        Without it, a record's ``id`` field (column) is used when present, else an id is
        generated as ``path:line`` (``<stdin>:line`` for stdin; the relative path for text
        files). An id must be a non-empty string or an integer; anything else is refused.
    encoding : str, default="utf-8"
        The inputs' encoding. Another than UTF-8 refuses records that are valid UTF-8 with
        non-ASCII characters (a file of mixed encodings; see the module docstring).
    on_error : {"fail", "skip"}, default="fail"
        Raise on the first malformed record, or skip it and count it in ``Corpus.skipped``
        (the first ``MAX_SKIPPED_DETAILS`` with where and why in ``Corpus.skipped_records``).
    on_texts : callable, optional
        Called with ``Corpus.texts`` (the list being filled) whenever texts were appended: after
        every JSONL block and after every input (text files: every 256 documents and the last).
        Texts are only ever appended, so a consumer
        can start on ``texts[:len(texts)]`` while reading goes on (``neardup dedup`` hashes and
        fingerprints them meanwhile: :class:`neardup.dedup.ExactFingerprintPass`).
    generate_ids : bool, default=False
        Ignore the records' ids: every id is generated (``path:line``; a text file's
        ``path:1``). Not with ``id_field``.

    Returns
    -------
    Corpus
    """
    if on_error not in ("fail", "skip"):
        raise ConfigError(f"on_error must be 'fail' or 'skip', got {on_error!r}")
    if generate_ids and id_field is not None:
        raise ConfigError(
            "--generate-ids ignores the records' ids, --id-field names where they are: pass one"
        )
    try:
        "".encode(encoding)
    except LookupError as exc:
        raise ConfigError(f"unknown encoding {encoding!r}; try utf-8, latin-1 or gb18030") from exc
    files = plan_inputs(inputs, fmt)
    wide = codecs.lookup(encoding).name.startswith(("utf-16", "utf-32"))
    split = next((f for f in files if f.fmt in ("jsonl", "lines")), None)
    if wide and split is not None:
        raise ConfigError(
            f"--encoding {encoding} reads CSV, TSV, JSON and text inputs; {split.path} is read "
            f"as {split.fmt}, whose lines are cut at newline bytes, which {encoding} does not "
            f"keep whole: convert it first (iconv -f {encoding.upper()} -t UTF-8)"
        )
    corpus = Corpus()
    if is_utf8(encoding) and not use_reference("io") and any(f.fmt == "jsonl" for f in files):
        corpus.texts = SpanTexts()  # type: ignore[assignment]  # JSONL texts stay spans
    reader = _Reader(
        corpus,
        text_field=text_field,
        id_field=id_field,
        encoding=encoding,
        on_error=on_error,
        on_texts=on_texts,
        generate_ids=generate_ids,
    )
    fed = 0  # texts handed to on_texts so far
    try:
        for k, file in enumerate(files):
            f = file.fmt
            src = Source(
                path=file.path,
                fmt=f,
                first=len(corpus.texts),
                encoding=encoding,
                rel=file.rel,
                explicit=file.explicit,
            )
            corpus.sources.append(src)
            reader.mark_path("<stdin>" if file.path == "-" else file.path)
            reader.jsonl_why = jsonl_why(file)
            if f in ("jsonl", "lines"):
                _read_jsonl(reader, src, lines_mode=(f == "lines"))
            elif f == "json":
                _read_json(reader, src)
            elif f in ("csv", "tsv"):
                _read_csv(reader, src, "," if f == "csv" else "\t")
            elif f == "parquet":
                _read_parquet(reader, src)
            else:
                _read_text_file(reader, src)
            src.count = len(corpus.texts) - src.first
            src.lines = np.frombuffer(reader.line_of, np.int64)[src.first :].copy()
            # (a folder of text files is one document per file: handed on in batches)
            if on_texts is not None and (
                f != "text" or k + 1 == len(files) or len(corpus.texts) - fed >= 256
            ):
                on_texts(corpus.texts)
                fed = len(corpus.texts)
    except BaseException:
        corpus.close()
        raise
    return corpus


def read_by_line(fmt: str, path: str, encoding: str) -> bool:
    """Whether records of a file can be read by their lines alone (a range of the file parsed
    on its own: :func:`read_records`, :mod:`neardup.io.pieces`): JSONL read as UTF-8, not
    stdin, not the ``NEARDUP_REFERENCE=io`` reader."""
    return fmt == "jsonl" and path != "-" and is_utf8(encoding) and not use_reference("io")


def rereadable(src: Source) -> bool:
    """Whether :func:`read_records` can read records of ``src`` (a :class:`Source` of a
    corpus :func:`read_corpus` made) again: :func:`read_by_line`, every record's line known,
    the file, or its uncompressed copy, still there."""
    return (
        read_by_line(src.fmt, src.path, src.encoding)
        and len(src.starts) == len(src.lines) == src.count
        and os.path.isfile(src.temp or src.path)
    )


def read_records(
    src: Source,
    lo: int,
    hi: int,
    *,
    text_field: str = "text",
    id_field: str | None = None,
    encoding: str = "utf-8",
    on_error: OnError = "fail",
    generate_ids: bool = False,
) -> Corpus:
    """Records ``lo:hi`` of a JSONL input :func:`read_corpus` read before, read again from
    their own lines: a corpus of ``hi - lo`` documents (texts as ``str``) with the ids and line
    numbers that read gave them, when the file is unchanged (the caller compares the ids).

    ``src`` is the input's :class:`Source` in that corpus (:func:`rereadable`), which knows
    where each record's line starts and its number; its temporary uncompressed copy, if any,
    must still be there (detach the source from its corpus before closing it, and
    :meth:`Source.close` it after the last read). The options are :func:`read_corpus`'s, as it
    was called. Only those lines are parsed, each run of records on consecutive lines as one
    range; lines the first read left out (skipped records, blank lines) are not read again.
    Ids are not judged unique again (the records of a file read in pieces,
    :mod:`neardup.io.pieces`, may repeat one whose later copy the caller leaves out).
    """
    if not rereadable(src):
        raise ConfigError(
            f"{src.path}: only a JSONL file read as UTF-8, whose lines are known and whose "
            "file is still there, can have its records read again"
        )
    if not 0 <= lo <= hi <= src.count:
        raise ConfigError(f"records {lo}:{hi} of {src.path}, which holds {src.count}")
    corpus = Corpus(ids=[])  # not judged unique again: the caller compares them
    reader = _Reader(
        corpus,
        text_field=text_field,
        id_field=id_field,
        encoding=encoding,
        on_error=on_error,
        generate_ids=generate_ids,
        unique=False,
    )
    reader.mark_path(src.path)
    out = Source(path=src.path, fmt=src.fmt, encoding=src.encoding, rel=src.rel)
    corpus.sources.append(out)
    starts: array.array[int] = array.array("q")
    ends: array.array[int] = array.array("q")
    if hi > lo:
        lines = src.lines[lo:hi]
        at = src.starts[lo:hi]
        # runs of records on consecutive lines, each parsed as one range of the file
        cuts = (np.flatnonzero(np.diff(lines) != 1) + 1).tolist()
        with open(src.temp or src.path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:  # emptied since: no record to read
                return corpus
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        mv = memoryview(mm)
        try:
            for a, b in zip([0, *cuts], [*cuts, hi - lo], strict=True):
                nl = mm.find(b"\n", int(at[b - 1]))  # a JSON line has no raw newline inside
                stop = len(mm) if nl < 0 else nl + 1
                _jsonl_lines(
                    reader, mm, mv, int(at[a]), stop, 0, src.path, int(lines[a]), starts, ends
                )
        finally:
            # after an error a traceback may still hold a slice of the map: then it goes later
            with contextlib.suppress(BufferError):
                mv.release()
                mm.close()
    out.count = len(corpus.texts)
    out.lines = np.frombuffer(reader.line_of, np.int64).copy()
    out.starts = np.frombuffer(starts, np.int64).copy() if starts else np.zeros(0, np.int64)
    out.ends = np.frombuffer(ends, np.int64).copy() if ends else np.zeros(0, np.int64)
    return corpus
