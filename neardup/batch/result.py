"""What :func:`~neardup.batch.run.dedup` gives: :class:`DedupResult` (keep mask, clusters,
roots, matched pairs, stats)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import InputError
from ..rules.config import STAGE_NAMES, PairTable

__all__ = ["DedupResult"]


@dataclass(repr=False)
class DedupResult:
    """What :func:`dedup` found.

    Attributes
    ----------
    ids : list of str
        Document ids in input order (``"0", "1", ...`` when none were passed).
    keep : numpy.ndarray of bool, shape (n,)
        True for documents kept by the policy.
    cluster : numpy.ndarray of int64, shape (n,)
        Dense cluster number (0, 1, ... in order of first member): the documents that share a
        ``root``; singletons have their own.
    root : numpy.ndarray of int64, shape (n,)
        With ``keep="first"`` / ``"longest"``: the position of the kept document each document
        is a verified (near or exact) duplicate of; its own position when kept. Every dropped
        document is paired with its root directly (no chaining through intermediates). With
        ``keep="none"``: the first member of its connected component.
    pairs : PairTable
        Every matched pair (exact copies are paired with the first copy).
    stats : dict
        documents, exact_duplicates, near_duplicates, clusters (of two or more), kept, dropped,
        candidates, verified, elapsed_s, docs_per_s, timings per stage, ``lsh`` (the MinHash
        channel's plan and counts), ``promise`` (what the candidates promise at the threshold:
        :func:`~neardup.rules.plan.plan_promise`) and ``warnings`` (what the run must tell
        its user: :func:`~neardup.rules.plan.plan_warnings`; none on defaults).
    components : numpy.ndarray of int64 or None
        With ``DedupConfig(components=True)``: the first member of each document's connected
        component of the matched pairs (the transitive closure; a report, not used to drop).
    labelled : bool
        Whether ids were passed (else :meth:`pair_rows` gives positions as ints).

    Examples
    --------
    >>> from neardup import dedup
    >>> r = dedup(["a b c d e f", "a b c d e f", "x y"])
    >>> r
    DedupResult(documents=3, kept=2, dropped=1, exact_duplicates=1, near_duplicates=0, clusters=1, pairs=1)
    >>> r.kept_indices().tolist(), r.kept_texts(["a b c d e f", "a b c d e f", "x y"])
    ([0, 2], ['a b c d e f', 'x y'])
    """

    ids: list[str]
    keep: npt.NDArray[np.bool_]
    cluster: npt.NDArray[np.int64]
    root: npt.NDArray[np.int64]
    pairs: PairTable
    stats: dict[str, Any] = field(default_factory=dict)
    components: npt.NDArray[np.int64] | None = None
    labelled: bool = True

    def __repr__(self) -> str:
        """A one-line summary (the arrays are in the attributes)."""
        s = self.stats
        keys = ("exact_duplicates", "near_duplicates", "clusters")
        parts = [
            f"documents={len(self.ids)}",
            f"kept={int(self.keep.sum())}",
            f"dropped={int(self.keep.size - self.keep.sum())}",
            *(f"{k}={s[k]}" for k in keys if k in s),
            f"pairs={len(self.pairs)}",
        ]
        return f"DedupResult({', '.join(parts)})"

    def kept_indices(self) -> npt.NDArray[np.int64]:
        """Positions of the kept documents, ascending (int64)."""
        return np.flatnonzero(self.keep).astype(np.int64)

    def kept_texts(self, texts: Sequence[str]) -> list[str]:
        """The kept documents of ``texts`` (the sequence passed to :func:`dedup`), in order.

        Raises
        ------
        InputError
            ``texts`` does not have one entry per document.
        """
        if len(texts) != self.keep.size:
            raise InputError(
                f"kept_texts() got {len(texts)} texts for a result over {self.keep.size} "
                "documents; pass the same texts given to dedup()"
            )
        return [texts[i] for i in self.kept_indices().tolist()]

    def pair_rows(self) -> list[tuple[str | int, str | int, int, float, str]]:
        """Pairs as ``(id_a, id_b, distance, score, stage)`` rows; ``id_a``/``id_b`` are the ids
        passed to :func:`dedup`, or int positions when none were passed."""
        p = self.pairs
        a, b = p.a.tolist(), p.b.tolist()
        if self.labelled:
            a = [self.ids[x] for x in a]
            b = [self.ids[x] for x in b]
        return [
            (x, y, int(d), round(float(sc), 4), STAGE_NAMES[st])
            for x, y, d, sc, st in zip(
                a, b, p.distance.tolist(), p.score.tolist(), p.stage.tolist(), strict=True
            )
        ]
