"""The online store's front: :class:`Deduplicator` (atomic check-and-insert over a durable,
time-windowed store), :class:`Decision`, :class:`Match`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# public name -> module that defines it (imported on first use)
_EXPORTS: dict[str, str] = {
    "Decision": ".deduplicator",
    "Deduplicator": ".deduplicator",
    "Match": ".deduplicator",
}

__all__ = [
    "Decision",
    "Deduplicator",
    "Match",
]

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, __all__)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .deduplicator import Decision, Deduplicator, Match
