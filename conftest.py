"""Doctest collection over the package (``python -m pytest --doctest-modules neardup``, a step
of .ci/run): a module that needs an optional extra which is not installed (fastapi for
neardup.service.app, say) is reported as skipped instead of failing collection. Any other import
error (one of neardup's own modules, a required dependency) still fails.

The test suite's shared fixtures are in tests/conftest.py; this file only acts when
``--doctest-modules`` is given.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

# Top-level import names of the optional extras ([project.optional-dependencies] in pyproject).
OPTIONAL_IMPORTS = frozenset(
    {
        "pyarrow",
        "fastapi",
        "starlette",
        "uvicorn",
        "httpx",
        "uvloop",
        "httptools",
        "prometheus_client",
        "datasets",
        "dask",
        "distributed",
        "pyspark",
        "matplotlib",
    }
)


class _NeedsExtra(pytest.File):
    """Stands in for a module's doctests when the module cannot be imported without an extra."""

    reason = ""

    def collect(self) -> Iterator[pytest.Item]:
        pytest.skip(self.reason)


def _module_name(path: Path) -> str | None:
    """The dotted name of a package module (``neardup/io/texts.py`` -> ``neardup.io.texts``)."""
    parts = [path.stem] if path.name != "__init__.py" else []
    folder = path.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts) or None


def _missing_extra(path: Path) -> str | None:
    """The optional extra a module fails to import for, or None (it imports, or fails otherwise)."""
    name = _module_name(path)
    if name is None:
        return None
    try:
        importlib.import_module(name)
    except ImportError as exc:
        # neardup.errors.require() re-raises as MissingDependencyError from the original error
        cause: BaseException | None = exc
        while cause is not None:
            if isinstance(cause, ModuleNotFoundError):
                top = (cause.name or "").split(".")[0]
                if top in OPTIONAL_IMPORTS:
                    return top
            cause = cause.__cause__
    except Exception:  # the doctest collector imports it again and reports the error
        return None
    return None


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> Iterator[list]:
    collectors = yield
    if not collectors or not parent.config.getoption("doctestmodules"):
        return collectors
    if file_path.suffix != ".py":
        return collectors
    extra = _missing_extra(file_path)
    if extra is None:
        return collectors
    stand_in = _NeedsExtra.from_parent(parent, path=file_path)
    stand_in.reason = f"doctests of {file_path.name} need the optional {extra!r}, not installed"
    return [stand_in]
