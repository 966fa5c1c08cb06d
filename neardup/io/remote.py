"""Inputs that are not plain local files: compressed files, fsspec URLs, globs.

Every input path goes through :func:`expand_inputs` (globs) and then :func:`local_copy`, which
returns a local, uncompressed file the readers can memory-map:

* a plain local file is returned as it is (the fast path: JSONL stays memory-mapped, kept
  records are copied from it byte for byte);
* a compressed input, found by its extension (``.gz``, ``.zst``/``.zstd``, ``.bz2``, ``.xz``)
  or, for a name without one (stdin included), by its first bytes, and any URL
  (``s3://``, ``gs://``, ``hf://``, ``https://``, ``memory://``: every fsspec protocol) is
  decompressed into a temporary file (``neardup-input-*`` in ``TMPDIR``), removed by
  :meth:`~neardup.io.Corpus.close`. Reading it whole first keeps every reader unchanged: the
  records, ids, error lines and the byte-faithful JSONL output are those of the uncompressed
  file.

A URL needs its fsspec filesystem package (``s3fs`` for ``s3://``, ``gcsfs`` for ``gs://``,
``huggingface_hub`` for ``hf://``, ``aiohttp`` for ``http(s)://``); without it the error names
the package to install.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import io
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

from ..errors import ConfigError, InputError, MissingDependencyError

__all__ = [
    "COMPRESSION_EXT",
    "compress_file",
    "compression_of",
    "expand_inputs",
    "has_glob",
    "input_size",
    "is_url",
    "local_copy",
    "open_input",
    "open_output",
    "sniff_compression",
    "strip_compression",
]

#: file extension -> fsspec compression name
COMPRESSION_EXT = {
    ".gz": "gzip",
    ".zst": "zstd",
    ".zstd": "zstd",
    ".bz2": "bz2",
    ".xz": "xz",
}
# leading bytes of each compressed format (bz2: "BZh", the block size, then the block magic,
# so a text that happens to start with "BZh" is not taken for one)
_MAGIC: tuple[tuple[re.Pattern[bytes], str], ...] = (
    (re.compile(rb"\x1f\x8b"), "gzip"),
    (re.compile(rb"\x28\xb5\x2f\xfd"), "zstd"),
    (re.compile(rb"BZh[1-9](1AY&SY|\x17rE8P)", re.DOTALL), "bz2"),
    (re.compile(rb"\xfd7zXZ\x00"), "xz"),
)
_EXT_OF = {"gzip": ".gz", "zstd": ".zst", "bz2": ".bz2", "xz": ".xz"}
# protocol -> the package that provides its fsspec filesystem
_PACKAGES = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "hf": "huggingface_hub",
    "http": "aiohttp",
    "https": "aiohttp",
    "az": "adlfs",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "adl": "adlfs",
    "oci": "ocifs",
    "oss": "ossfs",
    "sftp": "paramiko",
    "ssh": "paramiko",
    "smb": "smbprotocol",
    "webhdfs": "requests",
    "dropbox": "dropboxdrivefs",
    "box": "boxfs",
}
_URL = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]+)://")
_GLOB = re.compile(r"[*?\[]")


def is_url(path: str) -> bool:
    """True for ``protocol://...`` other than ``file://``."""
    m = _URL.match(path)
    return m is not None and m.group(1).lower() != "file"


def _local(path: str) -> str:
    """``file:///x`` -> ``/x``; other paths as they are."""
    return path[len("file://") :] if path.lower().startswith("file://") else path


def input_size(path: str) -> int | None:
    """The bytes of a local input file as stored (compressed, if it is), for progress by
    bytes; None for stdin, a URL (not asked for: a request per file) or a path that is not a
    file."""
    if path == "-" or is_url(path):
        return None
    try:
        return os.path.getsize(_local(path))
    except OSError:
        return None


def has_glob(path: str) -> bool:
    """True when ``path`` has glob characters (``*``, ``?``, ``[``)."""
    return _GLOB.search(path) is not None


def _name(path: str) -> str:
    """The last component of a path or URL, without a URL's query or fragment."""
    if is_url(path):
        path = path.split("?", 1)[0].split("#", 1)[0]
    return path.rstrip("/").rsplit("/", 1)[-1]


def compression_of(path: str) -> str | None:
    """The compression a path's extension names (``gzip``, ``zstd``, ``bz2``, ``xz``), or None."""
    return COMPRESSION_EXT.get(Path(_name(path)).suffix.lower())


def strip_compression(path: str) -> str:
    """``path`` without its query, fragment and compression extension (``a.jsonl.gz`` ->
    ``a.jsonl``): the name its format is told from."""
    if is_url(path):
        path = path.split("?", 1)[0].split("#", 1)[0]
    suffix = Path(_name(path)).suffix
    if suffix.lower() in COMPRESSION_EXT:
        return path[: -len(suffix)]
    return path


def sniff_compression(path: str) -> str | None:
    """The compression a local file's first bytes show, or None (also for an unreadable file:
    its reader reports that)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(10)
    except OSError:
        return None
    for magic, name in _MAGIC:
        if magic.match(head):
            return name
    return None


def _filesystem(path: str) -> tuple[Any, str]:
    """``(filesystem, path within it)`` for a URL; a missing package names what to install."""
    import fsspec

    protocol = path.split("://", 1)[0].lower()
    try:
        return fsspec.core.url_to_fs(path)
    except ImportError as exc:
        package = _PACKAGES.get(protocol)
        hint = (
            f"pip install {package}"
            if package
            else f"install the fsspec filesystem package for {protocol}://"
        )
        raise MissingDependencyError(
            f"reading {protocol}:// needs {package or 'its filesystem package'}: {hint} ({exc})"
        ) from exc
    except ValueError as exc:
        raise ConfigError(
            f"unknown protocol {protocol}:// in {path!r} ({exc}); use a local path or an "
            "fsspec URL such as s3://, gs://, hf:// or https://"
        ) from exc


def expand_inputs(inputs: list[str] | tuple[str, ...]) -> list[str]:
    """Inputs with every glob replaced by the files it matches (not directories, not hidden
    files), sorted; other inputs (``-``, files, directories, URLs) unchanged. A local path
    that exists is taken literally even when its name has glob characters; a glob that
    matches no file is an :class:`InputError`."""
    out: list[str] = []
    for path in inputs:
        if path == "-" or not has_glob(path):
            out.append(path)
            continue
        if is_url(path):
            fs, inner = _filesystem(path)
            try:
                found = fs.glob(inner, detail=True)  # with each match's type: one listing
            except OSError as exc:
                raise InputError(f"cannot list {path!r}: {exc}") from exc
            matches = [
                fs.unstrip_protocol(p)
                for p, info in sorted(found.items())
                if not _hidden(p) and info.get("type") != "directory"
            ]
        else:
            local = _local(path)
            if os.path.exists(local):
                out.append(path)
                continue
            matches = sorted(
                p for p in glob.glob(local, recursive=True) if not _hidden(p) and os.path.isfile(p)
            )
        if not matches:
            raise InputError(f"no input matches {path!r}")
        out.extend(matches)
    return out


def _hidden(path: str) -> bool:
    return _name(path).startswith(".")


def _raw(path: str) -> IO[bytes]:
    """The stored bytes of ``path`` (local file or URL), not decompressed."""
    if not is_url(path):
        try:
            return open(_local(path), "rb")
        except FileNotFoundError:
            raise InputError(f"input {path!r} does not exist") from None
        except IsADirectoryError:
            raise ConfigError(f"input {path!r} is a directory; pass the files in it") from None
        except OSError as exc:
            raise InputError(f"cannot open {path!r}: {exc.strerror or exc}") from exc
    fs, inner = _filesystem(path)
    try:
        return fs.open(inner, "rb")
    except FileNotFoundError:
        raise InputError(f"input {path!r} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(
            f"input {path!r} is a directory; pass a glob such as {path.rstrip('/')}/*.jsonl"
        ) from None
    except OSError as exc:
        raise InputError(f"cannot open {path!r}: {exc}") from exc


def _decompressor(kind: str, raw: IO[bytes]) -> IO[bytes]:
    """A reader of ``raw`` decompressed as ``kind``. Every format reads all its concatenated
    streams / members / frames (``zstd -T0``, ``pigz`` and ``cat a.gz b.gz`` write several),
    which fsspec's zstd reader does not."""
    if kind == "gzip":
        import gzip

        return cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb"))
    if kind == "bz2":
        import bz2

        return bz2.BZ2File(raw, mode="rb")
    if kind == "xz":
        import lzma

        return lzma.LZMAFile(raw, mode="rb")
    if kind == "zstd":
        return io.BufferedReader(_ZstdFrames(raw), 1 << 20)
    raise ConfigError(f"unknown compression {kind!r}")


class _ZstdFrames(io.RawIOBase):
    """Every zstd frame of ``raw``, decompressed, one after another; a stream that ends inside
    a frame raises :class:`EOFError` as gzip, bz2 and lzma do (zstandard's ``stream_reader``
    ends there silently: a truncated ``.zst`` read as a shorter file, exit 0)."""

    def __init__(self, raw: IO[bytes]) -> None:
        import zstandard

        self._raw = raw
        self._new = zstandard.ZstdDecompressor().decompressobj
        self._obj = self._new()
        self._in_frame = False  # bytes of the current frame were fed, its end not seen
        self._out = b""
        self._pos = 0  # of self._out handed out

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        while self._pos == len(self._out):
            chunk = self._raw.read(1 << 20)
            if not chunk:
                if self._in_frame:
                    raise EOFError(
                        "compressed file ended before the end-of-frame marker was reached"
                    )
                return 0
            self._feed(chunk)
        n = min(len(buf), len(self._out) - self._pos)
        buf[:n] = memoryview(self._out)[self._pos : self._pos + n]
        self._pos += n
        return n

    def _feed(self, data: bytes) -> None:
        parts = []
        while data:
            self._in_frame = True
            parts.append(self._obj.decompress(data))
            if not self._obj.eof:
                break
            data = self._obj.unused_data  # the next frame's first bytes, if any
            self._obj = self._new()
            self._in_frame = False
        self._out = b"".join(parts)
        self._pos = 0


@contextlib.contextmanager
def open_input(path: str) -> Iterator[IO[bytes]]:
    """A binary stream of ``path`` (local file or URL), decompressed by its extension."""
    with _raw(path) as raw:
        kind = compression_of(path)
        if kind is None:
            yield raw
            return
        with _decompressor(kind, raw) as fh:
            yield fh


def local_copy(path: str, *, stdin: IO[bytes] | None = None) -> tuple[str, str | None]:
    """``(local file to read, temporary file to remove or None)`` for an input.

    A plain local file (no compression extension, no compressed first bytes) is returned as
    it is, with no copy. ``stdin``: read this stream instead of ``path`` (``-``); it is
    spooled, then decompressed when its first bytes say it is compressed. Everything else is
    decompressed / downloaded into a temporary file.
    """
    if stdin is not None:
        tmp = _spool(stdin, "<stdin>", None)
        kind = sniff_compression(tmp)
        if kind is None:
            return tmp, tmp
        try:
            with open(tmp, "rb") as raw:
                return _decompress_file(raw, "<stdin>", kind)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    kind = compression_of(path)
    if not is_url(path) and kind is None:
        local = _local(path)
        if not os.path.exists(local):
            raise InputError(f"input {path!r} does not exist")
        kind = sniff_compression(local) if os.path.isfile(local) else None
        if kind is None:
            return local, None
        # compressed under a name that does not say so: read it as what it is
        with open(local, "rb") as raw:
            return _decompress_file(raw, path, kind)
    with _raw(path) as raw:
        tmp = _spool(raw, path, None) if kind is None else _decompress_file(raw, path, kind)[0]
    return tmp, tmp


def _decompress_file(raw: IO[bytes], shown: str, kind: str) -> tuple[str, str]:
    fh = _decompressor(kind, raw)
    try:
        tmp = _spool(fh, shown, kind)
    finally:
        with contextlib.suppress(Exception):
            fh.close()
    return tmp, tmp


def _spool(fh: IO[bytes], shown: str, compression: str | None) -> str:
    """Copy a stream into a new temporary file; errors name the input (and its compression)."""
    fd, tmp = tempfile.mkstemp(prefix="neardup-input-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(fh, out, 1 << 20)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            raise InputError(
                f"no space left to decompress {shown!r} into {tempfile.gettempdir()}; set "
                "TMPDIR to a directory with room for the uncompressed input"
            ) from exc
        if compression is not None and isinstance(exc, Exception):  # zstd, lzma, EOF, ...
            ext = _EXT_OF.get(compression, compression)
            raise InputError(
                f"{shown}: cannot decompress it as {compression} ({exc}); the file is "
                f"truncated or not {ext} data (its name or first bytes say {compression})"
            ) from exc
        if isinstance(exc, OSError):
            raise InputError(f"cannot read {shown!r}: {exc}") from exc
        raise
    return tmp


def _compressor(kind: str, raw: IO[bytes]) -> IO[bytes]:
    """A writer compressing into ``raw`` (left open when the writer is closed)."""
    if kind == "gzip":
        import gzip

        # mtime 0: the same kept records give the same bytes
        return cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="wb", mtime=0))
    if kind == "bz2":
        import bz2

        return bz2.BZ2File(raw, mode="wb")
    if kind == "xz":
        import lzma

        return lzma.LZMAFile(raw, mode="wb")
    if kind == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=3).stream_writer(raw, closefd=False)
    raise ConfigError(f"unknown compression {kind!r}")


@contextlib.contextmanager
def open_output(path: str, **kwargs: Any) -> Iterator[IO[bytes]]:
    """A binary output at ``path`` through :func:`~neardup.io.atomic.atomic_open` (``kwargs``
    its own), compressed as its name says (``.gz``, ``.zst``, ``.bz2``, ``.xz``) as ``-o``
    is: a ``--pairs-out pairs.csv.gz`` was written as plain CSV under that name."""
    from .atomic import atomic_open

    kind = compression_of(path) if path != "-" else None
    with atomic_open(path, "wb", **kwargs) as out:
        if kind is None:
            yield out
            return
        with _compressor(kind, out) as z:
            yield z


def compress_file(plain: str, output: str, kind: str) -> None:
    """Write ``plain`` compressed as ``kind`` to ``output`` (through
    :func:`~neardup.io.atomic.atomic_open`: atomic, or staged with the run's other outputs)."""
    from .atomic import atomic_open

    with (
        open(plain, "rb") as src,
        atomic_open(output, "wb") as out,
        _compressor(kind, out) as z,
    ):
        shutil.copyfileobj(src, z, 1 << 20)
