"""What the inputs are and where the outputs go, decided before a record is read.

Inputs (:func:`plan_inputs`)
----------------------------
Every input argument becomes the files it names, each with the format it is read as:

* a file, an fsspec URL or ``-`` (stdin): itself; its format is ``--input-format``, else told
  from its name (:func:`detect_format`, through a compression extension: ``a.jsonl.gz`` is
  ``jsonl``; stdin is ``jsonl``);
* a glob: the files it matches, in sorted order, each as a named file;
* a folder: its files, recursively, in path order, leaving out names that start with ``.`` or
  ``_`` (hidden files, ``_SUCCESS`` markers: pyarrow's and Spark's convention); links to
  files and folders are followed (a link to a missing file, or a link loop, is refused). With
  ``--input-format`` every file is read as that format. Without it each file is read by its
  own name, and the folder must be of one kind: a folder whose files mix formats (``.jsonl``
  beside ``.csv``), or holds a file whose format cannot be told from its name, is refused
  (:class:`~neardup.errors.ConfigError`, naming the files and ``--input-format``). So a folder
  of JSONL shards is read as JSONL records, a folder of ``.txt`` files as one document per
  file, and nothing is read as something it is not.

Plain-text files (``.txt``, ``.md``, ``.text``) are one document per file (``text``) wherever
they come from; ``--input-format lines`` reads one document per line instead.

Outputs (:func:`plan_output`, :func:`check_outputs`)
---------------------------------------------------
The kept documents go to one file, or to a folder of per-input outputs:

* **one file** (the default): its format is ``--output-format``, else the one its name says
  (``kept.parquet`` is Parquet, ``kept.csv`` CSV, ``kept.jsonl.zst`` zstd-compressed JSONL),
  else the first input's. A name and an ``--output-format`` that disagree are refused. A
  ``.txt`` name holds plain text: ``lines`` (one document per line) from ``lines`` inputs, the
  document itself from a single ``text`` file; other inputs must say ``--output-format lines``
  (texts only, one per line) or name a folder.
* **a folder** when ``-o`` ends with ``/`` or is an existing folder (which must be empty), or
  when the output format is ``text`` (one file per document) and ``-o`` has no extension: one
  output per input file, at the input's path relative to its folder input (a named file: its
  name), in the input's own format unless ``--output-format`` says otherwise (then the name's
  format and compression extensions are replaced). ``text`` documents are written as files at
  their own relative paths; documents of other inputs written as ``text`` are numbered
  (``00000042.txt``, the position in the corpus). Two inputs with the same relative path, and
  stdin, are refused.

:func:`check_outputs` makes every refusal an output can get (a missing parent folder, a folder
given for a file, a non-empty output folder, an output that is an input or inside one, two
outputs on one path, two outputs on stdout, an output inside the output folder) before the
first record is read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import ConfigError, InputError, InputTypeError
from .atomic import _descriptor, check_not_input, check_output
from .remote import compression_of, expand_inputs, is_url, strip_compression

__all__ = [
    "FORMATS",
    "InputFile",
    "OutputPlan",
    "check_outputs",
    "detect_format",
    "format_of_name",
    "plan_inputs",
    "plan_output",
]

FORMATS = ("jsonl", "json", "csv", "tsv", "parquet", "text", "lines")

#: input format of a file name's extension (after any compression extension)
INPUT_EXT = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".txt": "text",
    ".md": "text",
    ".text": "text",
}
#: the extension a per-input output gets when --output-format changes its format
FORMAT_EXT = {
    "jsonl": ".jsonl",
    "json": ".json",
    "csv": ".csv",
    "tsv": ".tsv",
    "parquet": ".parquet",
    "text": ".txt",
    "lines": ".txt",
}
_PLAIN = "plain"  # a .txt / .md output name: lines or text, decided by the inputs
_FORMATS_SHOWN = ", ".join(FORMATS)
# most file names an error message lists
_SHOW = 4


def format_of_name(name: str) -> str | None:
    """The format a file name's extension says (``a.jsonl.gz`` -> ``jsonl``), or None."""
    return INPUT_EXT.get(PurePosixPath(strip_compression(name)).suffix.lower())


def detect_format(path: str) -> str:
    """Format of an input path from its extension (``-`` is ``jsonl``); a compression extension
    is looked through (``a.jsonl.gz`` is ``jsonl``). A name that says none is a
    :class:`ConfigError` naming ``--input-format``."""
    if path == "-":
        return "jsonl"
    fmt = format_of_name(path)
    if fmt is None:
        shown = PurePosixPath(strip_compression(path)).suffix or "(none)"
        raise ConfigError(
            f"cannot tell the format of {path!r} from its extension {shown!r}; "
            f"pass --input-format (one of {_FORMATS_SHOWN})"
        )
    return fmt


@dataclass(frozen=True)
class InputFile:
    """One file to read: ``path`` (a local path, URL or ``-``), the format it is read as, and
    ``rel``, its path relative to the folder input it came from (a named file: its name): where
    its output goes in a folder output, and a ``text`` document's id."""

    path: str
    fmt: str
    rel: str
    #: the format came from --input-format (else from the name, or stdin's default)
    explicit: bool = False


def _shown(names: Sequence[str]) -> str:
    head = ", ".join(names[:_SHOW])
    return head + (f" (+{len(names) - _SHOW} more)" if len(names) > _SHOW else "")


def _skipped(name: str) -> bool:
    return name.startswith((".", "_"))


def _folder_files(folder: str, fmt: str | None) -> list[InputFile]:
    """The files of a local folder input (see the module docstring)."""
    found: list[tuple[tuple[str, ...], str]] = []
    seen = {os.path.realpath(folder)}
    # links to folders are followed as links to files are (a folder of shards linked in was
    # left out, silently, where a glob over the same tree read it)
    for root, dirs, names in os.walk(folder, followlinks=True):
        dirs[:] = [d for d in dirs if not _skipped(d)]
        for d in dirs:
            real = os.path.realpath(os.path.join(root, d))
            if real in seen:
                raise InputError(
                    f"folder {folder!r}: {os.path.join(root, d)!r} leads to a folder already "
                    "read (a link loop, or one folder linked twice); remove the link or name "
                    "the files to read"
                )
            seen.add(real)
        for name in names:
            if _skipped(name):
                continue
            full = os.path.join(root, name)
            if os.path.islink(full) and not os.path.exists(full):
                raise InputError(
                    f"folder {folder!r}: {full!r} is a link to a missing file "
                    f"({os.readlink(full)!r}); remove it or restore its target"
                )
            if not os.path.isfile(full):
                continue
            found.append((Path(full).relative_to(folder).parts, full))
    if not found:
        raise InputError(
            f"folder {folder!r} has no files to read (names starting with . or _ are left out)"
        )
    found.sort()
    files = [(PurePosixPath(*parts).as_posix(), full) for parts, full in found]
    if fmt is not None:
        return [InputFile(full, fmt, rel, explicit=True) for rel, full in files]
    kinds = {rel: format_of_name(rel) for rel, _ in files}
    unknown = [rel for rel, kind in kinds.items() if kind is None]
    if unknown:
        raise ConfigError(
            f"cannot tell the format of {len(unknown)} file(s) in folder {folder!r} from their "
            f"names: {_shown(unknown)}; pass --input-format (one of {_FORMATS_SHOWN}) to read "
            "every file of the folder as that format"
        )
    by_kind: dict[str, list[str]] = {}
    for rel, kind in kinds.items():
        by_kind.setdefault(kind or "", []).append(rel)
    if len(by_kind) > 1:
        mix = "; ".join(f"{kind}: {_shown(names)}" for kind, names in by_kind.items())
        raise ConfigError(
            f"folder {folder!r} mixes formats ({mix}); pass --input-format to read every file "
            "as one format, or name the files of one format (a glob such as "
            f"{folder.rstrip('/')}/*.jsonl)"
        )
    return [InputFile(full, kinds[rel] or "", rel) for rel, full in files]


def plan_inputs(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str] | InputFile],
    fmt: str | None = None,
) -> list[InputFile]:
    """The files ``inputs`` name, in order, each with the format it is read as (see the module
    docstring). ``fmt`` (``--input-format``) applies to every file, folders' included.
    Already planned :class:`InputFile` entries are kept as they are. One path may be given
    alone (a ``str`` is a sequence of characters, which would otherwise be read as names)."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    if isinstance(inputs, bytes | bytearray) or not isinstance(inputs, Iterable):
        raise InputTypeError(
            f"inputs must be a path (str or Path) or a list of them, got {type(inputs).__name__}"
        )
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; use one of {_FORMATS_SHOWN}")
    if not inputs:
        raise ConfigError("no input given; pass one or more files, a directory, or - for stdin")
    out: list[InputFile] = []
    names: list[str] = []
    for item in inputs:
        if isinstance(item, InputFile):
            out.extend(_named(names, fmt))
            names = []
            out.append(item)
        elif isinstance(item, str | os.PathLike) and not isinstance(item, bytes):
            names.append(os.fspath(item))
        else:
            raise InputTypeError(
                f"inputs must be paths (str or Path), got a {type(item).__name__}: {item!r:.60}"
            )
    out.extend(_named(names, fmt))
    return out


def _check_stream_not_input(
    n: int, shown: str, inputs: Sequence[str | os.PathLike[str]], option: str
) -> None:
    """Refuse an output to a descriptor (``-o -``) that is one of the inputs' files: the shell
    redirected stdout into an input (``>> in.jsonl``, ``1<> in.jsonl``), which the run would
    write over or append to while it reads it."""
    try:
        st = os.fstat(n)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        return
    for inp in inputs:
        name = os.fspath(inp)
        if name == "-" or is_url(name):
            continue
        try:
            si = os.stat(name)
        except OSError:
            continue
        if (si.st_dev, si.st_ino) == (st.st_dev, st.st_ino):
            raise ConfigError(
                f"{option} {shown!r} is the input file {name!r} (the shell sent this "
                "command's output into it): choose another output"
            )


def _named(names: list[str], fmt: str | None) -> list[InputFile]:
    out: list[InputFile] = []
    if not names:
        return out
    for path in expand_inputs(names):
        if path == "-":
            out.append(InputFile("-", fmt or "jsonl", "-", explicit=fmt is not None))
            continue
        local = path[len("file://") :] if path.lower().startswith("file://") else path
        if not is_url(path) and os.path.isdir(local):
            out.extend(_folder_files(local, fmt))
            continue
        rel = path.split("?", 1)[0].split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        out.append(InputFile(path, fmt or detect_format(path), rel, explicit=fmt is not None))
    return out


# --------------------------------------------------------------------------------------------
# outputs


@dataclass(frozen=True)
class OutputPlan:
    """Where and how the kept documents are written (see the module docstring).

    ``fmt``: the output format (in a folder, None: each input's own); ``folder``: one output
    per input file under ``path``; ``compression``: a file output's (``gzip``, ...) or None;
    ``targets``: in a folder, each input's output name (relative), format and compression."""

    path: str
    fmt: str | None
    folder: bool = False
    compression: str | None = None
    targets: tuple[tuple[str, str, str | None], ...] = ()


def _is_stdout(path: str) -> bool:
    return _descriptor(path) is not None


def _target(f: InputFile, fmt: str | None) -> tuple[str, str, str | None]:
    """``(name, format, compression)`` of an input's output in a folder output."""
    if f.fmt == "text" and fmt in (None, "text"):
        return strip_compression(f.rel), "text", None  # (documents: files of their own)
    if fmt is None or fmt == f.fmt:
        return f.rel, f.fmt, compression_of(f.rel)
    stem = PurePosixPath(strip_compression(f.rel))
    if stem.suffix.lower() in INPUT_EXT:
        stem = stem.with_suffix("")
    if fmt == "text":  # documents of another format as files: numbered, under its name
        return stem.as_posix(), "text", None
    return stem.as_posix() + FORMAT_EXT[fmt], fmt, None


def plan_output(
    output: str | os.PathLike[str],
    inputs: Sequence[InputFile],
    *,
    fmt: str | None = None,
    option: str = "--output",
) -> OutputPlan:
    """How the kept documents of ``inputs`` are written to ``output`` (see the module
    docstring); ``fmt`` is ``--output-format``. Refuses (``ConfigError``) what cannot be
    written: a name and a format that disagree, Parquet or a folder on stdout, a compressed
    Parquet or text output, several text documents into one ``.txt`` file, stdin or clashing
    names in a folder output."""
    path = os.fspath(output)
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"unknown output format {fmt!r}; use one of {_FORMATS_SHOWN}")
    if not inputs:
        raise ConfigError("no input to write the kept documents of")
    std = _is_stdout(path)
    name_fmt = None
    if not std:
        name = PurePosixPath(strip_compression(path.rstrip("/")))
        suffix = name.suffix.lower()
        name_fmt = _PLAIN if INPUT_EXT.get(suffix) == "text" else INPUT_EXT.get(suffix)
    names_folder = not std and (path.endswith(("/", os.sep)) or os.path.isdir(path))
    if names_folder:
        return _folder_plan(path, inputs, fmt, option)
    kinds = {f.fmt for f in inputs}
    if fmt is not None and name_fmt is not None:
        if name_fmt == _PLAIN and fmt not in ("lines", "text"):
            raise ConfigError(
                f"{option} {path!r} names a plain-text file but --output-format is {fmt}; make "
                "them agree (a .txt output is --output-format lines or text)"
            )
        if name_fmt != _PLAIN and name_fmt != fmt:
            raise ConfigError(
                f"{option} {path!r} names {name_fmt} but --output-format is {fmt}; make them "
                f"agree (or drop --output-format: the name decides)"
            )
    out_fmt = fmt
    if out_fmt is None and name_fmt == _PLAIN:
        if kinds == {"lines"}:
            out_fmt = "lines"
        elif kinds == {"text"}:
            out_fmt = "text"
        else:
            raise ConfigError(
                f"{option} {path!r}: a .txt output holds plain text, but the input is "
                f"{'/'.join(sorted(kinds))}; pass --output-format lines (the texts only, one "
                "per line) or choose a name such as kept.jsonl"
            )
    if out_fmt is None:
        out_fmt = name_fmt or inputs[0].fmt
    compression = None if std else compression_of(path)
    if out_fmt == "text":
        if std:
            raise ConfigError(
                "text output (one file per document) cannot go to stdout; pass --output-format "
                "lines or jsonl, or a folder"
            )
        if name_fmt is None:  # no extension: a folder of documents (one file each)
            return _folder_plan(path, inputs, fmt, option)
        if len(inputs) != 1 or inputs[0].fmt != "text":
            raise ConfigError(
                f"{option} {path!r}: {len(inputs)} input files of text documents cannot go into "
                f"one .txt file; end {option} with / for a folder of kept files, or write one "
                "file with --output-format lines (one document per line) or -o kept.jsonl"
            )
    if out_fmt in ("parquet", "text") and compression is not None:
        raise ConfigError(
            f"{out_fmt} output cannot be compressed as {compression} ({path!r}); drop the "
            f"{Path(path).suffix} extension"
        )
    if std and out_fmt == "parquet":
        raise ConfigError("parquet output cannot go to stdout; pass --output PATH")
    return OutputPlan(path, out_fmt, folder=False, compression=compression)


def _folder_plan(
    path: str, inputs: Sequence[InputFile], fmt: str | None, option: str
) -> OutputPlan:
    if any(f.path == "-" for f in inputs):
        raise ConfigError(
            f"{option} {path!r} is a folder (one output per input file), but stdin has no file "
            f"name; pass a file path to {option}"
        )
    targets = tuple(_target(f, fmt) for f in inputs)
    seen: dict[str, str] = {}
    for f, (name, out_fmt, _comp) in zip(inputs, targets, strict=True):
        if out_fmt == "text" and f.fmt != "text":
            name = f"{name}/"  # a folder of numbered documents
        key = name.lower() if os.path.normcase("A") == "a" else name
        if key in seen:
            raise ConfigError(
                f"{option} {path!r}: the inputs {seen[key]!r} and {f.path!r} would both be "
                f"written to {name!r} in it; rename one, or pass one folder instead of the files"
            )
        seen[key] = f.path
    return OutputPlan(path.rstrip("/") or "/", fmt, folder=True, targets=targets)


def check_outputs(
    outputs: Iterable[tuple[str, str | os.PathLike[str] | None]],
    inputs: Sequence[str | os.PathLike[str]],
    *,
    folder: str | None = None,
) -> None:
    """Refuse now, before the first record is read, every output that would be refused (or
    lost) only when the run writes it. ``outputs``: ``(option, path)`` pairs (None: not asked
    for); ``inputs``: the input arguments as given (folders and globs included); ``folder``:
    the one output that is a folder of per-input outputs, if any.

    Refused (:class:`ConfigError`, exit code 2): an output that is an input or inside an input
    folder; a missing parent folder; a folder or block device given for a file; an output folder
    that exists and is not empty; two outputs on one path (links resolved); two outputs on
    stdout (``-``, ``/dev/stdout``, ``/dev/fd/1``); an output inside the output folder."""
    given = [(opt, os.fspath(p)) for opt, p in outputs if p is not None]
    stdout: list[str] = []
    places: dict[str, str] = {}
    folder_real = None
    if folder is not None:
        folder_real = os.path.realpath(folder)
    for option, path in given:
        if _is_stdout(path):
            n = _descriptor(path)
            if n == 1:
                stdout.append(option)
            if n is not None:
                _check_stream_not_input(n, path, inputs, option)
            continue
        check_not_input(path, inputs, option=option)
        is_folder = folder is not None and path.rstrip("/") == folder.rstrip("/")
        check_output(path.rstrip("/") if is_folder else path, option=option, directory=is_folder)
        real = os.path.realpath(path)
        if real in places:
            raise ConfigError(
                f"{places[real]} and {option} both go to {path!r}; give each output its own path"
            )
        places[real] = option
        if folder_real is not None and not is_folder and Path(folder_real) in Path(real).parents:
            raise ConfigError(
                f"{option} {path!r} is inside the output folder {folder!r}; put it elsewhere"
            )
    if len(stdout) > 1:
        raise ConfigError(
            f"{', '.join(stdout[:-1])} and {stdout[-1]} all go to stdout, where only one "
            "output can go: give the others a file path"
        )
