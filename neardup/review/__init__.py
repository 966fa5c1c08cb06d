"""Review a run: why two texts are near duplicates (:func:`explain`, ``neardup explain``) and a
report a person reads (:mod:`.report`, ``neardup report``), both read-side, over the batch
pipeline's own rules (they decide nothing themselves)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# public name -> module that defines it (imported on first use). ``explain`` the function is
# ``neardup.explain``; inside this package the name is its module.
_EXPORTS: dict[str, str] = {
    "Alignment": ".explain",
    "DiffRun": ".explain",
    "Explanation": ".explain",
    "align": ".explain",
    "config_from_summary": ".explain",
    "explain_with_store": ".explain",
    "build_review": ".report",
    "render_report": ".report",
    "write_report": ".report",
}

__all__ = [
    "Alignment",
    "DiffRun",
    "Explanation",
    "align",
    "build_review",
    "config_from_summary",
    "explain_with_store",
    "render_report",
    "write_report",
]

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, __all__)

if TYPE_CHECKING:  # pragma: no cover
    from .explain import (
        Alignment,
        DiffRun,
        Explanation,
        align,
        config_from_summary,
        explain_with_store,
    )
    from .report import build_review, render_report, write_report
