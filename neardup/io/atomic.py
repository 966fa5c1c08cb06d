"""Outputs: atomic for regular files, written in place for devices and pipes, staged per run.

What :func:`atomic_open` does with the path it is given:

* a regular file, or a path that does not exist yet: the output goes to a temporary sibling
  (``.NAME.XXXXXXXX.tmp``), is flushed and fsynced, then renamed over the path and the folder
  fsynced. A failed or interrupted write leaves the old file (or nothing), never half a file.
  A new file gets ``0o666 & ~umask`` (what ``open()`` gives); an overwritten file keeps its
  mode, and its owner and group where the process may set them.
* a symlink (also a dangling one): the same at the link's resolved target; the link stays.
* a character device (``/dev/null``, a terminal, ``/dev/full``), a FIFO or a socket: opened and
  written in place, never replaced (there is nothing to make atomic: a reader may already be
  consuming the bytes). A failed write (``ENOSPC`` from ``/dev/full``, ``EPIPE``) is a
  :class:`StorageError`. Opening a FIFO waits for its reader, as a shell redirection does.
* ``-``, ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``, ``/proc/self/fd/N``: written in place
  to (a duplicate of) that descriptor, whatever it is (a pipe, a terminal, a file the shell
  opened with ``>`` or ``>>``); it is not truncated, reopened or replaced.
* a directory, a block device, or a path whose folder does not exist: refused with a
  :class:`ConfigError` before anything is written (``create_parents=True`` makes the missing
  folders instead, with ``0o777 & ~umask``).

:func:`check_output` refuses up front (before a long run) what those would refuse at the end.

:func:`atomic_dir` builds a folder the same way (a temporary sibling, every file in it fsynced,
renamed onto the path, which may be missing or an empty folder, or a symlink to one).

:func:`new_folder` removes a folder a failed block created (a store made before a bad input
was read).

:func:`staged_outputs` makes the outputs of one run all-or-nothing: inside it every
:func:`atomic_open` / :func:`atomic_dir` of the same thread (the same :mod:`contextvars`
context) writes and fsyncs its temporary file or folder but does not rename it; when the block
ends without an exception they are all renamed into place (then their folders fsynced); when it
raises, every staged temporary is removed and no target is touched. Outputs written in place
(devices, FIFOs, descriptors) cannot wait: they are written when their ``with`` block runs.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import secrets
import shlex
import shutil
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

from .._durable import fsync_dir
from ..errors import ConfigError, StorageError

_T = TypeVar("_T")

__all__ = [
    "NewFolder",
    "atomic_dir",
    "atomic_open",
    "check_not_input",
    "check_output",
    "new_folder",
    "staged_outputs",
]

# Longest base name kept in a temporary file's name (names are limited to 255 bytes).
_TEMP_NAME_MAX = 200
_STD_PATHS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
_FD_PATH = re.compile(r"/(?:dev/fd|proc/self/fd|proc/(\d+)/fd)/(\d+)")


def check_not_input(
    output: str | os.PathLike[str], inputs: Sequence[str | os.PathLike[str]], *, option: str
) -> None:
    """Raise :class:`ConfigError` when ``output`` is one of ``inputs`` (or inside an input dir).

    A glob input (``data/*.jsonl``) counts as every path it matches, including an output that
    does not exist yet: the next run with the same glob would read it back as an input.
    """
    out = Path(output).resolve()
    for inp in inputs:
        if str(inp) == "-" or "://" in str(inp):
            continue
        src = Path(inp).resolve()
        if _glob_matches(str(inp), out) or out == src or (src.is_dir() and src in out.parents):
            raise ConfigError(
                f"{option} {str(output)!r} would overwrite or write into the input {str(inp)!r}; "
                "choose another output path"
            )


def _glob_matches(pattern: str, out: Path) -> bool:
    """Whether the resolved path ``out`` is one that the glob ``pattern`` matches (now or once
    it exists): against the pattern made absolute, and with its folder part resolved."""
    if not any(c in pattern for c in "*?["):
        return False
    head, tail = os.path.split(pattern)
    candidates = {os.path.abspath(pattern)}
    if not any(c in head for c in "*?["):
        candidates.add(str(Path(head or ".").resolve() / tail))
    return any(fnmatch.fnmatchcase(str(out), c) for c in candidates)


# --------------------------------------------------------------------------------------------
# staging


@dataclass
class _Staged:
    tmp: Path
    target: Path
    shown: str
    is_dir: bool


@dataclass
class _Stage:
    items: list[_Staged] = field(default_factory=list)

    def claim(self, target: Path, shown: str) -> None:
        """Refuse a second output of the same run to the same path (the first would be lost)."""
        key = os.path.realpath(target)
        for item in self.items:
            if os.path.realpath(item.target) == key:
                raise ConfigError(
                    f"two outputs of this run go to {item.shown!r}"
                    + (f" (as {shown!r})" if shown != item.shown else "")
                    + "; give each output its own path"
                )

    def discard(self) -> None:
        for item in self.items:
            _remove(item.tmp, item.is_dir)
        self.items.clear()

    def publish(self) -> None:
        folders: dict[str, None] = {}
        for i, item in enumerate(self.items):
            try:
                os.replace(item.tmp, item.target)
            except OSError as exc:
                done = [x.shown for x in self.items[:i]]
                for rest in self.items[i:]:
                    _remove(rest.tmp, rest.is_dir)
                self.items.clear()
                raise StorageError(
                    f"cannot write output {item.shown!r}: {exc.strerror or exc}"
                    + (f" (already written: {', '.join(map(repr, done))})" if done else "")
                ) from exc
            folders[str(item.target.parent)] = None
        self.items.clear()
        for folder in folders:
            _fsync_dir(Path(folder))


_STAGE: ContextVar[_Stage | None] = ContextVar("neardup_staged_outputs", default=None)


@contextlib.contextmanager
def staged_outputs() -> Iterator[None]:
    """Make every :func:`atomic_open` / :func:`atomic_dir` inside the block all-or-nothing.

    The outputs are written and fsynced under temporary names as their ``with`` blocks end, and
    renamed into place together when this block ends without an exception; an exception removes
    them all and leaves every target as it was. Devices, FIFOs and descriptors (``-``,
    ``/dev/stdout``) are written in place at once: they cannot be staged. A nested block joins
    the outer one (the outermost block publishes). Two outputs to one path are refused
    (:class:`ConfigError`).
    """
    if _STAGE.get() is not None:
        yield
        return
    stage = _Stage()
    token = _STAGE.set(stage)
    try:
        yield
    except BaseException:
        _STAGE.reset(token)
        stage.discard()
        raise
    _STAGE.reset(token)
    stage.publish()


# --------------------------------------------------------------------------------------------
# helpers


def _remove(path: Path, is_dir: bool) -> None:
    if is_dir:
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _fsync_dir(folder: Path) -> None:
    """fsync a folder so a rename in it survives a crash (:func:`neardup._durable.fsync_dir`'s
    rule), a failure as the :class:`StorageError` that names the folder."""
    try:
        fsync_dir(folder)
    except OSError as exc:
        raise StorageError(f"cannot sync folder {str(folder)!r}: {exc.strerror or exc}") from exc


def _descriptor(path: str) -> int | None:
    """The descriptor that ``-``, ``/dev/stdout``, ``/dev/fd/N`` ... name, else None."""
    if path == "-":
        return 1
    p = os.path.abspath(path)
    if p in _STD_PATHS:
        return _STD_PATHS[p]
    m = _FD_PATH.fullmatch(p)
    if m and (m.group(1) is None or int(m.group(1)) == os.getpid()):
        return int(m.group(2))
    return None


def _check_mode(mode: str) -> None:
    if not mode.startswith("w") or "+" in mode:
        raise ValueError(f"atomic_open writes new contents: mode must be 'w' or 'wb', got {mode!r}")


def _stat(path: str) -> os.stat_result | None:
    """``os.stat`` (following links) or None when nothing is there yet."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError as exc:
        raise ConfigError(
            f"output {path!r}: a folder on its path is a file; choose another path"
        ) from exc
    except OSError as exc:
        raise StorageError(f"cannot use output {path!r}: {exc.strerror or exc}") from exc


def _real_target(path: str) -> Path:
    """Where a regular file for ``path`` goes: the link's resolved target for a symlink."""
    return Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)


def _check_parent(parent: Path, create: bool) -> None:
    if parent.is_dir():
        return
    shown = str(parent)
    if create:
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(
                f"cannot create output directory {shown!r}: {exc.strerror or exc}"
            ) from exc
        return
    if parent.exists() or parent.is_symlink():
        raise ConfigError(f"output directory {shown!r} is not a directory; choose another path")
    raise ConfigError(
        f"output directory {shown!r} does not exist; create it first "
        f"(mkdir -p {shlex.quote(shown)}) or choose another path"
    )


def _check_file_target(shown: str, old: os.stat_result | None) -> bool:
    """Refuse what a file output cannot be; True when it is written in place (not a file)."""
    if old is None or stat.S_ISREG(old.st_mode):
        return False
    if stat.S_ISDIR(old.st_mode):
        raise ConfigError(f"output {shown!r} is a directory; pass a file path")
    if stat.S_ISBLK(old.st_mode):
        raise ConfigError(
            f"output {shown!r} is a block device; neardup does not write outputs to block "
            "devices: choose a file path"
        )
    return True


def _check_dir_target(shown: str, old: os.stat_result | None) -> None:
    """Refuse what a folder output cannot replace: anything but a missing path or an empty
    folder (or a symlink to one)."""
    if old is None:
        return
    if not stat.S_ISDIR(old.st_mode):
        raise ConfigError(
            f"output directory {shown!r} exists and is not a directory; remove it or choose another"
        )
    if any(_real_target(shown).iterdir()):
        raise ConfigError(
            f"output directory {shown!r} exists and is not empty; remove it or choose another"
        )


def check_output(
    path: str | os.PathLike[str], *, option: str | None = None, directory: bool = False
) -> None:
    """Refuse up front an output that :func:`atomic_open` (or, with ``directory``,
    :func:`atomic_dir`) would refuse only when the run's work is done: a missing folder, a
    directory or block device given for a file, a non-empty folder for a folder output.
    ``option`` (``--pairs-out``) starts the message. Devices, FIFOs and ``-`` pass."""
    shown = os.fspath(path)
    if _descriptor(shown) is not None:
        return
    try:
        old = _stat(shown)
        if directory:
            _check_dir_target(shown, old)
        elif _check_file_target(shown, old):
            return
        _check_parent(_real_target(shown).parent, create=False)
    except ConfigError as exc:
        if option is None:
            raise
        raise ConfigError(f"{option}: {exc}") from None


def _temp_name(target: Path) -> str:
    return f".{target.name[:_TEMP_NAME_MAX]}.{secrets.token_hex(4)}.tmp"


def _keep_owner_and_mode(fd: int, old: os.stat_result) -> None:
    """Give a replacement file the mode (and, where allowed, the owner) of the file it replaces."""
    if (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(fd, old.st_uid, old.st_gid)
        except OSError:
            with contextlib.suppress(OSError):
                os.fchown(fd, -1, old.st_gid)
    os.fchmod(fd, stat.S_IMODE(old.st_mode))  # after chown, which may clear set-id bits


# --------------------------------------------------------------------------------------------
# in-place writers


@contextlib.contextmanager
def _write_descriptor(n: int, path: str, mode: str, kwargs: dict[str, Any]) -> Iterator[IO[Any]]:
    """Write to a duplicate of descriptor ``n`` (what ``-`` and ``/dev/stdout`` name)."""
    stream = {1: sys.stdout, 2: sys.stderr}.get(n)
    if stream is not None:
        try:
            same = stream.fileno() == n
        except (AttributeError, OSError, ValueError):  # replaced (tests, embedding): use it
            same = False
        if not same:
            target = getattr(stream, "buffer", None) if "b" in mode else stream
            if target is None:
                raise StorageError(f"output {path!r}: this stdout takes text only")
            try:
                stream.flush()
                yield target
                target.flush()
            except OSError as exc:
                raise StorageError(f"cannot write output {path!r}: {exc.strerror or exc}") from exc
            return
        stream.flush()  # what was printed before goes first
    try:
        fd = os.dup(n)
    except OSError as exc:
        raise StorageError(f"cannot write output {path!r}: {exc.strerror or exc}") from exc
    with _write_fd(fd, path, mode, kwargs) as fh:
        yield fh


@contextlib.contextmanager
def _write_fd(fd: int, path: str, mode: str, kwargs: dict[str, Any]) -> Iterator[IO[Any]]:
    """Write through the open descriptor ``fd`` (owned from here on: closed on every path);
    OS errors become :class:`StorageError` naming ``path``."""
    try:
        fh = os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise
    try:
        with fh:
            yield fh
            fh.flush()
    except OSError as exc:
        raise StorageError(f"cannot write output {path!r}: {exc.strerror or exc}") from exc


@contextlib.contextmanager
def _write_in_place(path: str, mode: str, kwargs: dict[str, Any]) -> Iterator[IO[Any]]:
    """Open a character device, FIFO or socket and write to it (no temp file, no rename)."""
    try:
        # no O_CREAT, no O_TRUNC: if the node went away we must not make a regular file
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise StorageError(f"cannot open output {path!r}: {exc.strerror or exc}") from exc
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            raise StorageError(f"output {path!r} changed while it was opened; run again")
    except BaseException:
        os.close(fd)
        raise
    with _write_fd(fd, path, mode, kwargs) as fh:
        yield fh


# --------------------------------------------------------------------------------------------
# public


def _claim_target(shown: str, create_parents: bool) -> tuple[Path, _Stage | None]:
    """The real path an output at ``shown`` replaces (its parent folder checked, or made with
    ``create_parents``), claimed in the current :func:`staged_outputs` block if there is one;
    and that block's stage (None outside one)."""
    target = _real_target(shown)
    _check_parent(target.parent, create_parents)
    stage = _STAGE.get()
    if stage is not None:
        stage.claim(target, shown)
    return target, stage


def _new_sibling(target: Path, create: Callable[[Path], _T]) -> tuple[Path, _T]:
    """``create(tmp)`` at a fresh temporary name beside ``target`` (a name taken meanwhile,
    ``FileExistsError``, is drawn again): ``(tmp, what create returned)``."""
    while True:
        tmp = target.parent / _temp_name(target)
        try:
            return tmp, create(tmp)
        except FileExistsError:
            continue


def _publish(item: _Staged, stage: _Stage | None) -> None:
    """Put a finished temporary file or folder in place: inside :func:`staged_outputs`, queue
    it for the end of that block; else rename it over its target (onto a missing path or an
    empty folder: one rename) and fsync the folder."""
    if stage is not None:
        stage.items.append(item)
    else:
        os.replace(item.tmp, item.target)
        _fsync_dir(item.target.parent)


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike[str],
    mode: str = "w",
    *,
    create_parents: bool = False,
    **open_kwargs: Any,
) -> Iterator[IO[Any]]:
    """Open an output for writing: atomically for files, in place for devices and pipes.

    ``mode`` is ``"w"`` or ``"wb"``; ``open_kwargs`` go to :func:`open` (``encoding``,
    ``newline``, ``buffering``). A regular file (or a new path, or a symlink's target) is
    written to a temporary sibling, fsynced and renamed over the path when the block ends
    without an exception (inside :func:`staged_outputs`: when that block ends); on an exception
    the temporary file is removed and the path is left as it was. See the module docstring for
    devices, FIFOs, ``-`` / ``/dev/stdout``, permissions and ``create_parents``.

    Raises :class:`ConfigError` for a missing folder, a directory or a block device, and
    :class:`StorageError` when the output cannot be created or written (including
    :class:`OSError` raised inside the block).
    """
    _check_mode(mode)
    shown = os.fspath(path)
    n = _descriptor(shown)
    if n is not None:
        with _write_descriptor(n, shown, mode, open_kwargs) as fh:
            yield fh
        return
    old = _stat(shown)
    if _check_file_target(shown, old):
        with _write_in_place(shown, mode, open_kwargs) as fh:
            yield fh
        return
    target, stage = _claim_target(shown, create_parents)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    try:
        # 0o666: the kernel applies the umask, as for any new file
        tmp, fd = _new_sibling(target, lambda p: os.open(p, flags, 0o666))
    except OSError as exc:
        raise StorageError(f"cannot create output {shown!r}: {exc.strerror or exc}") from exc
    ok = False
    try:
        try:
            if old is not None:
                _keep_owner_and_mode(fd, old)
            fh = os.fdopen(fd, mode, **open_kwargs)
        except BaseException:
            os.close(fd)
            raise
        with fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        _publish(_Staged(tmp, target, shown, is_dir=False), stage)
        ok = True
    except OSError as exc:
        raise StorageError(f"cannot write output {shown!r}: {exc.strerror or exc}") from exc
    finally:
        if not ok:
            _remove(tmp, is_dir=False)


def _fsync_tree(root: Path) -> None:
    """fsync every file and folder under ``root`` (before it is renamed into place)."""
    for folder, _dirs, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(folder))


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str], *, create_parents: bool = False) -> Iterator[Path]:
    """Build a directory in a temporary sibling and rename it to ``path`` on success.

    ``path`` may be missing or an *empty* directory (or a symlink to one: the link stays and
    the folder is built at its target); a non-empty directory or anything else is refused.
    The new folder gets ``0o777 & ~umask`` (an empty folder it replaces: that folder's mode).
    Everything in it is fsynced before the rename; inside :func:`staged_outputs` the rename
    waits for the end of that block. A missing parent folder is refused unless
    ``create_parents``.
    """
    shown = os.fspath(path)
    old = _stat(shown)
    _check_dir_target(shown, old)
    target, stage = _claim_target(shown, create_parents)
    try:
        tmp, _ = _new_sibling(target, lambda p: os.mkdir(p, 0o777))  # the kernel applies the umask
        if old is not None:
            os.chmod(tmp, stat.S_IMODE(old.st_mode))
    except OSError as exc:
        raise StorageError(
            f"cannot create output directory {shown!r}: {exc.strerror or exc}"
        ) from exc
    ok = False
    try:
        yield tmp
        _fsync_tree(tmp)
        _publish(_Staged(tmp, target, shown, is_dir=True), stage)
        ok = True
    except OSError as exc:
        raise StorageError(
            f"cannot write output directory {shown!r}: {exc.strerror or exc}"
        ) from exc
    finally:
        if not ok:
            _remove(tmp, is_dir=True)


@dataclass
class NewFolder:
    """What :func:`new_folder` made: ``made`` (the top-most folder it found missing, or the
    empty folder it found), ``emptied`` (True: ``made`` existed empty and only its contents
    are removed); ``keep``: set True where what the block wrote must stay after a failure."""

    made: Path | None
    emptied: bool = False
    keep: bool = False


@contextlib.contextmanager
def new_folder(path: str | os.PathLike[str]) -> Iterator[NewFolder]:
    """Undo a folder a failed block created: a block that raises (an error, an interrupt)
    after creating the missing ``path`` (and any missing folders above it) leaves none of
    them, and an empty folder it filled is empty again, unless the block set ``keep``. A
    ``path`` that already held something is never touched.

    For a store a run makes before it has read its inputs: a bad record must not leave an
    empty store behind, which the next run would open (with the failed run's settings) rather
    than make anew.
    """
    p = Path(os.fspath(path))
    top: Path | None = None
    emptied = False
    if p.is_dir() and not p.is_symlink():
        emptied = not any(p.iterdir())
        top = p if emptied else None
    elif not os.path.lexists(p):
        top = p
        while not os.path.lexists(top.parent) and top.parent != top:
            top = top.parent
    state = NewFolder(top, emptied)
    try:
        yield state
    except BaseException:
        if state.made is not None and not state.keep:
            if state.emptied:
                for child in list(state.made.iterdir()):
                    _remove(child, is_dir=child.is_dir() and not child.is_symlink())
            else:
                shutil.rmtree(state.made, ignore_errors=True)
        raise
