"""Writing the kept records: :func:`write_kept` (a corpus read by :func:`~neardup.io.read_corpus`)
by an :class:`~neardup.io.plan.OutputPlan`: the one writer of every front-end (the local engine
and the distributed ones, which read their inputs again to write), so every format is written the
same way.

A record keeps every field it was read with, in every output format: JSONL lines are copied
byte for byte into JSONL (:func:`~neardup.io.jsonl.copy_records`) and parsed again for other
formats; JSON objects, CSV rows and Parquet rows are written as they were; ``text`` and
``lines`` documents, which have no fields, become ``{"id", "text"}``. In CSV a nested value
(object, list) is written as JSON, a null as an empty cell. Every output goes through
:func:`~neardup.io.atomic.atomic_open` (a folder output through
:func:`~neardup.io.atomic.atomic_dir`): all or nothing.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import decimal
import io
import json
import mmap
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, Any

import numpy as np
import numpy.typing as npt
import orjson

from ..errors import ConfigError, InputError, StorageError, require
from .atomic import atomic_dir, atomic_open
from .csvout import csv_dict_writer, csv_writer
from .fields import get_field
from .formats import _SURROGATE, Corpus, Source
from .jsonl import copy_records, is_utf8
from .plan import OutputPlan, plan_output
from .remote import _compressor

__all__ = ["record_values", "write_kept", "write_records"]

Opener = Callable[..., Any]  # atomic_open's signature: (path, mode, **open_kwargs) -> ctx

#: Parquet rows built per record batch (cross-format Parquet output)
PARQUET_BATCH = 1 << 16


@contextlib.contextmanager
def _plain_open(path: str, mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """A new file inside a folder being built (:func:`atomic_dir` fsyncs and publishes it)."""
    try:
        fh = open(path, mode.replace("w", "x"), **kwargs)  # noqa: SIM115
    except OSError as exc:
        raise StorageError(f"cannot create output {path!r}: {exc.strerror or exc}") from exc
    with fh:
        yield fh


@contextlib.contextmanager
def _scratch_open(path: str, mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """The temporary uncompressed copy of a compressed output (not staged, not published)."""
    with open(path, mode, **kwargs) as fh:
        yield fh


def _kept_positions(src: Source, keep: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    return np.flatnonzero(keep[src.first : src.first + src.count])


def write_kept(
    corpus: Corpus,
    keep: npt.NDArray[np.bool_],
    output: str,
    *,
    fmt: str | None = None,
    encoding: str = "utf-8",
    plan: OutputPlan | None = None,
) -> int:
    """Write the records whose ``keep`` entry is True to ``output``.

    ``plan`` (from :func:`~neardup.io.plan.plan_output`, made before the corpus was read) says
    how; without one it is made here from ``output``, ``fmt`` and the corpus's inputs: the
    format from ``fmt``, else the output's name, else the first input's; ``-`` is stdout; a
    ``.gz`` / ``.zst`` / ``.bz2`` / ``.xz`` name is compressed; a name ending in ``/`` (or an
    existing folder) gets one output per input file. Returns the number of records written.
    """
    keep = np.asarray(keep, dtype=bool)
    if keep.shape != (len(corpus),):
        raise InputError(f"keep mask has shape {keep.shape}, expected ({len(corpus)},)")
    if not corpus.sources:
        raise InputError("the corpus has no sources to write from")
    if plan is None:
        plan = plan_output(output, corpus.input_files(), fmt=fmt)
    if plan.folder:
        return _write_folder(corpus, keep, plan, encoding)
    assert plan.fmt is not None
    return _write_file(
        corpus, corpus.sources, keep, plan.path, plan.fmt, plan.compression, encoding, atomic_open
    )


def _write_folder(
    corpus: Corpus, keep: npt.NDArray[np.bool_], plan: OutputPlan, encoding: str
) -> int:
    """One output per input file in a new folder, published whole (:func:`atomic_dir`)."""
    if len(plan.targets) != len(corpus.sources):
        raise ConfigError("the output plan was made for other inputs than the corpus has")
    n = 0
    with atomic_dir(plan.path) as tmp:
        for src, (name, fmt, compression) in zip(corpus.sources, plan.targets, strict=True):
            dest = tmp / name
            if fmt == "text":  # only kept documents become files (and folders)
                n += _write_documents(corpus, src, keep, str(dest), encoding)
            else:  # every input gets its output, empty or not
                dest.parent.mkdir(parents=True, exist_ok=True)
                n += _write_file(
                    corpus, [src], keep, str(dest), fmt, compression, encoding, _plain_open
                )
    return n


def _write_documents(
    corpus: Corpus, src: Source, keep: npt.NDArray[np.bool_], dest: str, encoding: str
) -> int:
    """A ``text`` input's kept document as a file at ``dest``; another input's kept documents
    as files named by their line (record) number in a folder at ``dest``."""
    kept = _kept_positions(src, keep).tolist()
    if kept:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
    if src.fmt == "text":
        for pos in kept:
            _copy_document(corpus, src, pos, dest, encoding, _plain_open)
        return len(kept)
    if kept:
        os.makedirs(dest, exist_ok=True)
    for pos in kept:
        g = src.first + pos
        with _plain_open(os.path.join(dest, f"{int(src.lines[pos]):08d}.txt"), "wb") as fh:
            fh.write(corpus.texts[g].encode(encoding))
    return len(kept)


def _copy_document(
    corpus: Corpus, src: Source, pos: int, dest: str, encoding: str, opener: Opener
) -> None:
    """A text document into ``dest``: its file's bytes when they are still there, else its
    text (a compressed or remote input, read from a copy that is gone)."""
    real = src.rows[pos][0]
    with opener(dest, "wb") as fh:
        if real is not None:
            with open(real, "rb") as doc:
                shutil.copyfileobj(doc, fh, 1 << 20)
        else:
            fh.write(corpus.texts[src.first + pos].encode(encoding))


def _write_file(
    corpus: Corpus,
    sources: Sequence[Source],
    keep: npt.NDArray[np.bool_],
    output: str,
    fmt: str,
    compression: str | None,
    encoding: str,
    opener: Opener,
) -> int:
    """The kept records of ``sources`` as one ``fmt`` file (or stdout, ``-``)."""
    if compression is not None:
        fd, plain = tempfile.mkstemp(prefix="neardup-output-", suffix=".tmp")
        os.close(fd)
        try:
            n = _write_file(corpus, sources, keep, plain, fmt, None, encoding, _scratch_open)
            with (
                open(plain, "rb") as raw,
                opener(output, "wb") as out,
                _compressor(compression, out) as z,
            ):
                shutil.copyfileobj(raw, z, 1 << 20)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(plain)
        return n
    if fmt in ("jsonl", "lines") and all(s.fmt == fmt for s in sources):
        return _write_raw_lines(sources, keep, output, encoding, opener)
    if fmt == "text":  # one text document (plan_output allows no more in one file)
        n = 0
        for src in sources:
            for pos in _kept_positions(src, keep).tolist():
                _copy_document(corpus, src, pos, output, encoding, opener)
                n += 1
        if n == 0:
            with opener(output, "wb"):
                pass
        return n
    if fmt == "parquet":
        return _write_parquet(corpus, sources, keep, output, opener)
    if output == "-":
        buf = io.StringIO()
        n = _write_stream(corpus, sources, keep, fmt, buf)
        text = buf.getvalue()
        if fmt in ("csv", "tsv", "lines") and not text.isascii():
            try:  # (the stream above is a str: a lone surrogate is found here)
                text.encode(getattr(sys.stdout, "encoding", None) or "utf-8")
            except UnicodeEncodeError as exc:
                raise _unwritable(fmt, {}, exc) from exc
        sys.stdout.write(text)
        sys.stdout.flush()
        return n
    newline = "" if fmt in ("csv", "tsv") else "\n"
    with opener(output, "w", encoding=encoding, newline=newline) as fh:
        return _write_stream(corpus, sources, keep, fmt, fh)


def _raw_lines_to_stdout(
    sources: Sequence[Source], keep: npt.NDArray[np.bool_], encoding: str
) -> int:
    sys.stdout.flush()
    stream = getattr(sys.stdout, "buffer", None)
    if stream is None:  # a text-only stdout (embedding): decode what would be written
        n = 0
        for src in sources:
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
        for src in sources
    )
    stream.flush()
    return n


def _write_raw_lines(
    sources: Sequence[Source],
    keep: npt.NDArray[np.bool_],
    output: str,
    encoding: str,
    opener: Opener,
) -> int:
    """jsonl → jsonl, lines → lines: copy each kept record's input bytes (see ``jsonl``)."""
    if output == "-":
        try:
            return _raw_lines_to_stdout(sources, keep, encoding)
        except OSError as exc:  # a full disk or a closed pipe behind stdout: exit 7, said
            raise StorageError(f"cannot write output '-': {exc.strerror or exc}") from exc
    with opener(output, "wb", buffering=1 << 20) as fh:
        n = 0
        for src in sources:
            fh.flush()  # copy_records may write to the descriptor directly
            n += copy_records(
                src,
                _kept_positions(src, keep),
                fh.write,
                out_encoding=encoding,
                out_fd=fh.fileno(),
            )
        return n


_LONG_DIGITS = re.compile(rb"\d{19}")


def _jsonl_records(src: Source, kept: npt.NDArray[np.int64]) -> Iterator[dict[str, Any]]:
    """The kept JSONL records of ``src``, parsed again from their byte spans (every field),
    sliced from a read-only map of the file: a ``pread`` a record cost a load's time field
    about twice the parse itself."""
    utf8 = is_utf8(src.encoding)
    with open(src.temp or src.path, "rb") as fh:
        if not os.fstat(fh.fileno()).st_size:  # (an empty file cannot be mapped: no records)
            return
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            for s, e in zip(src.starts[kept].tolist(), src.ends[kept].tolist(), strict=True):
                raw = mm[s:e]
                # orjson reads an integer beyond 64 bits as a float (1.2345678901234568e+22):
                # a line with a run of 19 digits goes to the standard library, which keeps
                # every integer exact (as the service's body parser does)
                if _LONG_DIGITS.search(raw) is None:
                    try:
                        yield orjson.loads(raw if utf8 else raw.decode(src.encoding))
                        continue
                    except orjson.JSONDecodeError:  # NaN, Infinity: as they were read
                        pass
                yield json.loads(raw.decode(src.encoding))


def _records(
    corpus: Corpus, sources: Sequence[Source], keep: npt.NDArray[np.bool_]
) -> Iterator[dict[str, Any]]:
    """Kept records as dicts, every field kept (for cross-format output)."""
    for src in sources:
        kept = _kept_positions(src, keep)
        if not kept.size:
            continue
        if src.fmt == "json":
            yield from (src.rows[pos] for pos in kept.tolist())
        elif src.fmt in ("csv", "tsv") and src.header is not None:
            header = src.header
            if len(set(header)) < len(header):  # a dict keeps one field a name
                twice = next(h for h in header if header.count(h) > 1)
                raise InputError(
                    f"{src.path}: the header names the column {twice!r} twice; a record in "
                    "another format than CSV holds one field of a name: rename one, or write "
                    "CSV (which keeps both columns)"
                )
            yield from (dict(zip(header, src.rows[pos], strict=True)) for pos in kept.tolist())
        elif src.fmt == "parquet":
            import pyarrow as pa

            for lo in range(0, kept.size, PARQUET_BATCH):
                part = pa.array(kept[lo : lo + PARQUET_BATCH], type=pa.int64())
                yield from src.table.take(part).to_pylist()
        elif src.fmt == "jsonl":
            yield from _jsonl_records(src, kept)
        else:  # text, lines: a document has an id and a text only
            for pos in kept.tolist():
                g = src.first + pos
                yield {"id": corpus.ids[g], "text": corpus.texts[g]}


def record_values(corpus: Corpus, name: str) -> list[Any]:
    """The value of field ``name`` (dotted names as :func:`~neardup.io.fields.get_field`
    reads them) of every document of ``corpus``, in corpus order; :data:`~neardup.io.fields.MISSING`
    where a record lacks it. The records are read again (JSONL lines parsed from their byte
    spans), so this costs about one more parse of the inputs.

    Raises
    ------
    ConfigError
        An input of a format whose records have no fields (``text``, ``lines``).
    """
    for src in corpus.sources:
        if src.fmt in ("text", "lines") and src.count:
            raise ConfigError(
                f"{src.path} is read as {src.fmt}: its records have no field {name!r}; use "
                "JSONL, JSON, CSV or Parquet input"
            )
    every = np.ones(len(corpus), np.bool_)
    return [get_field(rec, name) for rec in _records(corpus, corpus.sources, every)]


def _cell(value: Any) -> Any:
    """A CSV cell: strings and numbers as they are, null empty, a value JSON has no type for
    as :func:`_plain`'s string, anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, _PLAIN_TYPES):
        return _plain(value)
    return json.dumps(value, ensure_ascii=False, default=_plain)


_PLAIN_TYPES = (bytes, bytearray, datetime.date, datetime.time, datetime.timedelta, decimal.Decimal)


def _plain(value: Any) -> str:
    """A Parquet value JSON has no type for, as a string: binary as base64, dates and times in
    ISO 8601, a timedelta as seconds, a decimal exactly; anything else as ``str``."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return f"{value.total_seconds():g}"
    return str(value)


def _write_stream(
    corpus: Corpus,
    sources: Sequence[Source],
    keep: npt.NDArray[np.bool_],
    out_fmt: str,
    fh: Any,
) -> int:
    if (
        out_fmt in ("csv", "tsv")
        and all(s.fmt == out_fmt for s in sources)
        and len({tuple(s.header or ()) for s in sources}) == 1
    ):  # the same header everywhere: rows as they were read
        n = 0
        w = csv_writer(fh, "," if out_fmt == "csv" else "\t")
        w.writerow(sources[0].header or [])
        for src in sources:
            kept = _kept_positions(src, keep).tolist()
            w.writerows(src.rows[pos] for pos in kept)
            n += len(kept)
        return n
    records = _records(corpus, sources, keep)
    if out_fmt in ("csv", "tsv"):
        rows = list(records)
        header: dict[str, None] = {}
        for rec in rows:
            header.update(dict.fromkeys(rec))
        return write_records(rows, out_fmt, fh, fields=list(header))
    return write_records(records, out_fmt, fh)


def write_records(
    records: Iterable[dict[str, Any]], fmt: str, fh: Any, *, fields: list[str] | None = None
) -> int:
    """Write ``records`` to the text stream ``fh`` as ``fmt`` (jsonl, json, csv, tsv, lines);
    ``fields`` is the CSV header (missing fields are empty cells). Returns the count.

    A lone surrogate (what a JSON ``"\\ud800"`` escape reads as) is written as that escape in
    JSON and JSONL, and refused in CSV, TSV and lines, which cannot hold it."""
    n = 0
    rec: dict[str, Any] = {}
    try:
        if fmt in ("csv", "tsv"):
            dw = csv_dict_writer(fh, fields or ["id", "text"], "," if fmt == "csv" else "\t")
            dw.writeheader()
            for rec in records:
                dw.writerow({k: _cell(v) for k, v in rec.items()})
                n += 1
            return n
        if fmt == "json":
            fh.write("[")
            for rec in records:
                fh.write(("," if n else "") + "\n" + _json_text(rec))
                n += 1
            fh.write("\n]\n")
            return n
        if fmt == "lines":
            for rec in records:
                fh.write(_one_line(str(rec.get("text", ""))) + "\n")
                n += 1
            return n
        if fmt != "jsonl":
            raise ConfigError(f"cannot write {fmt} records to a text stream")
        for rec in records:
            fh.write(_json_text(rec) + "\n")
            n += 1
        return n
    except UnicodeEncodeError as exc:
        raise _unwritable(fmt, rec, exc) from exc


def _one_line(text: str) -> str:
    """``text`` on one line: every line break (``\\r\\n``, ``\\r``, ``\\n``) a space, so that a
    reader splitting lines universally (Python's) reads one document a line too."""
    return text.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")


def _json_text(rec: dict[str, Any]) -> str:
    """``rec`` as one line of JSON: non-ASCII characters as they are, a lone surrogate (which
    has no UTF-8 form) as its ``\\u`` escape, as the input had it."""
    text = json.dumps(rec, ensure_ascii=False, default=_plain)
    if not text.isascii() and _SURROGATE.search(text) is not None:
        text = json.dumps(rec, default=_plain)
    return text


def _unwritable(fmt: str, rec: dict[str, Any], exc: UnicodeEncodeError) -> InputError:
    which = f"the record with id {rec['id']!r:.60}" if "id" in rec else "a kept record"
    if _SURROGATE.search(exc.object[exc.start : exc.end]) is not None:
        return InputError(
            f'cannot write {fmt}: {which} holds a lone surrogate (a JSON "\\ud800" escape '
            f"in the input), which {fmt} has no form for; write JSONL or JSON (they keep the "
            "escape), or fix the input"
        )
    return InputError(f"cannot write {fmt}: {which} cannot be encoded ({exc.reason})")


def _write_parquet(
    corpus: Corpus,
    sources: Sequence[Source],
    keep: npt.NDArray[np.bool_],
    output: str,
    opener: Opener,
) -> int:
    pa: Any = require("pyarrow", "parquet", "writing Parquet")
    pq: Any = require("pyarrow.parquet", "parquet", "writing Parquet")
    if all(s.fmt == "parquet" for s in sources):
        tables = [
            s.table.take(pa.array(_kept_positions(s, keep), type=pa.int64())) for s in sources
        ]
        try:
            table = (
                # "permissive": string and large_string, int32 and int64, a dictionary and
                # its values are one column; what cannot be one is refused below
                pa.concat_tables(tables, promote_options="permissive")
                if len(tables) > 1
                else tables[0]
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise InputError(
                f"cannot write {output!r}: the Parquet inputs' columns do not fit one table "
                f"({exc}); write one output per input (-o DIR/) or JSONL"
            ) from exc
        with opener(output, "wb") as fh:
            pq.write_table(table, fh)
        return int(table.num_rows)
    # two passes over the kept records: the first finds every field and a type for each
    # (records need not have the same fields: the first one's alone dropped the others
    # silently), the second writes them with that schema, a missing field as null
    schemas = [
        _table_of(pa, batch, output).schema
        for batch in _batched(_records(corpus, sources, keep), PARQUET_BATCH)
    ]
    schema = _unified(pa, schemas, output)
    return _write_parquet_batches(
        (
            _table_of(pa, batch, output, schema)
            for batch in _batched(_records(corpus, sources, keep), PARQUET_BATCH)
        ),
        output,
        opener,
    )


def _batched(records: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for rec in records:
        batch.append(rec)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _table_of(pa: Any, rows: list[dict[str, Any]], output: str, schema: Any = None) -> Any:
    """``rows`` as an Arrow table: every field any of them has (in order of first appearance,
    a missing one null), or ``schema``'s."""
    try:
        if schema is not None:
            return pa.Table.from_pylist(rows, schema=schema)
        fields = dict.fromkeys(k for r in rows for k in r)
        return pa.Table.from_pydict({k: [r.get(k) for r in rows] for k in fields})
    except UnicodeEncodeError as exc:
        raise _unwritable("Parquet", {}, exc) from exc
    except OverflowError as exc:  # an integer beyond 64 bits: Parquet has no such column
        raise InputError(
            f"cannot write {output!r} as Parquet: a kept record holds an integer beyond 64 bits "
            f"({exc}), which no Parquet integer column holds; write JSONL or CSV instead"
        ) from exc
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InputError(
            f"cannot write {output!r} as Parquet: the kept records' fields do not have one type "
            f"each ({exc}); write JSONL or CSV instead"
        ) from exc


def _unified(pa: Any, schemas: list[Any], output: str) -> Any:
    """One schema for every batch's (None: no batch): each field once, its types widened where
    Arrow can (a null column and an int one, int and float), else refused naming the field."""
    if not schemas:
        return None
    try:
        return pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InputError(
            f"cannot write {output!r} as Parquet: the kept records' fields do not have one type "
            f"each ({exc}); write JSONL or CSV instead"
        ) from exc


def _write_parquet_batches(tables: Iterable[Any], output: str, opener: Opener) -> int:
    """Arrow tables into one Parquet file, the schema the first one's (later ones cast to it;
    none: an empty file with ``id`` and ``text`` columns)."""
    pa: Any = require("pyarrow", "parquet", "writing Parquet")
    pq: Any = require("pyarrow.parquet", "parquet", "writing Parquet")
    n = 0
    with opener(output, "wb") as fh:
        writer = None
        try:
            for t in tables:
                if writer is None:
                    writer = pq.ParquetWriter(fh, t.schema)
                elif t.schema != writer.schema:
                    try:
                        t = t.cast(writer.schema)
                    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as exc:
                        raise InputError(
                            f"cannot write {output!r} as Parquet: the kept records' fields do "
                            f"not have one type each ({exc}); write JSONL or CSV instead"
                        ) from exc
                writer.write_table(t)
                n += t.num_rows
            if writer is None:
                schema = pa.schema([("id", pa.string()), ("text", pa.string())])
                writer = pq.ParquetWriter(fh, schema)
        finally:
            if writer is not None:
                writer.close()
    return n
