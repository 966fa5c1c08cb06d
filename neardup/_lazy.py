"""Lazily resolved package exports (PEP 562), so importing a package stays cheap.

A package lists ``public name -> defining module`` and binds the two functions returned here to
its module-level ``__getattr__`` and ``__dir__``; a name is imported on first use and then cached
in the package's namespace. Type checkers read the package's ``if TYPE_CHECKING:`` imports."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    namespace: dict[str, Any], exports: Mapping[str, str], public: list[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for a package whose public names live in submodules."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return list(public)

    return __getattr__, __dir__
