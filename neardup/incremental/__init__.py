"""Incremental dedup: a batch run against the documents earlier runs kept (``neardup dedup NEW
--save STORE`` / ``--against STORE``): :func:`dedup_against`. It composes two drivers, the batch
(the new documents among themselves) and the online store (the documents kept before), and
decides nothing itself: both apply :mod:`neardup.rules`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS: dict[str, str] = {"dedup_against": ".run"}

__all__ = ["dedup_against"]

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, __all__)

if TYPE_CHECKING:  # pragma: no cover
    from .run import dedup_against
