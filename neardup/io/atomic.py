"""Atomic output: write to a temporary sibling, fsync, then rename over the target.

A failed or interrupted run never leaves a half-written output, and never touches an input.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from ..errors import ConfigError, StorageError

__all__ = ["atomic_dir", "atomic_open", "check_not_input"]


def check_not_input(
    output: str | os.PathLike[str], inputs: Sequence[str | os.PathLike[str]], *, option: str
) -> None:
    """Raise :class:`ConfigError` when ``output`` is one of ``inputs`` (or inside an input dir)."""
    out = Path(output).resolve()
    for inp in inputs:
        if str(inp) == "-":
            continue
        src = Path(inp).resolve()
        if out == src or (src.is_dir() and src in out.parents):
            raise ConfigError(
                f"{option} {str(output)!r} would overwrite or write into the input {str(inp)!r}; "
                "choose another output path"
            )


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path``; on success fsync it and rename it to ``path``.

    On any exception the temporary file is removed and ``path`` is left as it was.
    """
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise StorageError(f"cannot create output {str(path)!r}: {exc.strerror or exc}") from exc
    ok = False
    try:
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        ok = True
    except OSError as exc:
        raise StorageError(f"cannot write output {str(path)!r}: {exc.strerror or exc}") from exc
    finally:
        if not ok:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Build a directory in a temporary sibling and rename it to ``path`` on success.

    An existing *empty* directory at ``path`` is replaced; a non-empty one is refused.
    """
    target = Path(path)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ConfigError(
            f"output directory {str(path)!r} exists and is not empty; remove it or choose another"
        )
    parent = target.parent if str(target.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent))
    ok = False
    try:
        yield tmp
        if target.exists():
            target.rmdir()
        os.replace(tmp, target)
        ok = True
    except OSError as exc:
        raise StorageError(
            f"cannot write output directory {str(path)!r}: {exc.strerror or exc}"
        ) from exc
    finally:
        if not ok:
            shutil.rmtree(tmp, ignore_errors=True)
