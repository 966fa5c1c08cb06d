"""What the online front-ends answer (the online store, the cluster, the HTTP client): a
:class:`Decision` per document, naming the stored documents it duplicates as :class:`Match` es
(the outcome of :class:`~neardup.rules.keep.KeepFirst`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Decision", "Match"]


@dataclass(frozen=True)
class Match:
    """A stored document that the checked document duplicates."""

    id: str
    distance: int
    score: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "distance": self.distance, "score": self.score}


_object_new = object.__new__


@dataclass(frozen=True)
class Decision:
    """Outcome for one document: whether it duplicates a stored one, and whether it was added."""

    id: str
    duplicate: bool
    added: bool
    matches: tuple[Match, ...]
    #: the SimHash fingerprint as an int (64 or 128 bits); :attr:`fingerprint_hex` is the
    #: lowercase hex string the HTTP API and :meth:`to_dict` return
    fingerprint: int

    @property
    def fingerprint_hex(self) -> str:
        """The fingerprint as the HTTP API writes it: lowercase hex, no ``0x``, no padding."""
        return format(self.fingerprint, "x")

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape the HTTP service answers (``fingerprint`` as :attr:`fingerprint_hex`)."""
        return {
            "id": self.id,
            "duplicate": self.duplicate,
            "added": self.added,
            "matches": [m.to_dict() for m in self.matches],
            "fingerprint": format(self.fingerprint, "x"),
        }

    @staticmethod
    def fast(
        id: str, duplicate: bool, added: bool, matches: tuple[Match, ...], fingerprint: int
    ) -> Decision:
        """``Decision(...)`` without the frozen dataclass's per-field ``object.__setattr__`` (the
        online writer makes one per document); the result is an ordinary, equal
        :class:`Decision`."""
        d = _object_new(Decision)
        d.__dict__.update(
            id=id, duplicate=duplicate, added=added, matches=matches, fingerprint=fingerprint
        )
        return d
