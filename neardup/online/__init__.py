"""The online store's front, a driver over :mod:`neardup.rules`: :class:`Deduplicator` (atomic
check-and-insert over a durable, time-windowed store; open one with :meth:`Deduplicator.open`)
and :class:`DocumentPreparer` (a batch validated and fingerprinted apart from the writer). Its
answers are :class:`neardup.rules.Decision` objects.

Modules: :mod:`.prepare` (validation and fingerprints, in the caller's thread), :mod:`.decide`
(candidates and verification of a write group; keep-first within it is
:class:`neardup.rules.keep.KeepFirst`), :mod:`.writer` (the queue and the writer thread: write
groups, housekeeping), :mod:`.commit` (group commit: the log's fsync behind the writer),
:mod:`.config` (fingerprinter and verifier settings), :mod:`.settings` (:class:`DedupSettings`,
validated once, the store's settings inside), :mod:`.deduplicator` (the public class: its verbs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# public name -> module that defines it (imported on first use)
_EXPORTS: dict[str, str] = {
    "DedupSettings": ".settings",
    "Deduplicator": ".deduplicator",
    "DocumentPreparer": ".prepare",
}

__all__ = ["DedupSettings", "Deduplicator", "DocumentPreparer"]

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, __all__)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .deduplicator import Deduplicator
    from .prepare import DocumentPreparer
    from .settings import DedupSettings
