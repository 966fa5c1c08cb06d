"""Incremental dedup: a batch run against the documents earlier runs kept (``neardup dedup NEW
--save STORE`` / ``--against STORE``): :func:`dedup_against` (files), :func:`dedup_into` (documents
and an open store; a window's bulk seed), :func:`load_kept`, and :func:`load_files` (a store
seeded from files: ``neardup store load``, ``neardup serve --seed``). It composes two drivers, the batch
(the new documents among themselves) and the online store (the documents kept before), and
decides nothing itself: both apply :mod:`neardup.rules`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "Into": ".run",
    "dedup_against": ".run",
    "dedup_into": ".run",
    "load_files": ".seed",
    "load_kept": ".stored",
}

__all__ = ["Into", "dedup_against", "dedup_into", "load_files", "load_kept"]

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, __all__)

if TYPE_CHECKING:  # pragma: no cover
    from .run import Into, dedup_against, dedup_into
    from .seed import load_files
    from .stored import load_kept
