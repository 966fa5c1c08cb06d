"""The online store's front: :class:`Deduplicator` (atomic check-and-insert over a durable,
time-windowed store; open one with :meth:`Deduplicator.open`), :class:`Decision`,
:class:`Match`, and :class:`DocumentPreparer` (a batch validated and fingerprinted apart from
the writer).

Modules: :mod:`.types` (the answers), :mod:`.prepare` (validation and fingerprints, in the
caller's thread), :mod:`.decide` (the decision rule), :mod:`.writer` (the queue and the writer thread:
write groups, housekeeping), :mod:`.commit` (group commit: the log's fsync behind the writer),
:mod:`.config` (fingerprinter and verifier settings), :mod:`.deduplicator` (the public class:
settings, its verbs), :mod:`.group` (keep-first within a group: :func:`keep_first`, shared with
the cluster).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# public name -> module that defines it (imported on first use)
_EXPORTS: dict[str, str] = {
    "Decision": ".types",
    "Deduplicator": ".deduplicator",
    "DocumentPreparer": ".prepare",
    "Found": ".group",
    "KeepFirst": ".group",
    "Match": ".types",
    "keep_first": ".group",
}

__all__ = [
    "Decision",
    "Deduplicator",
    "DocumentPreparer",
    "Found",
    "KeepFirst",
    "Match",
    "keep_first",
]

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, __all__)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .deduplicator import Deduplicator
    from .group import Found, KeepFirst, keep_first
    from .prepare import DocumentPreparer
    from .types import Decision, Match
