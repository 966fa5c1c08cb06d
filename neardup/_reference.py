"""The one switch that makes neardup run its pure reference implementations.

Every fast path (numba kernels, memory-mapped scanners, table probes) has a reference twin the
tests compare it against. ``NEARDUP_REFERENCE`` makes a process use the twins instead, to rule
a fast path in or out when a result looks wrong::

    NEARDUP_REFERENCE=1 neardup dedup corpus.jsonl        # every part
    NEARDUP_REFERENCE=index,io neardup dedup corpus.jsonl # some parts

Parts: ``fingerprint`` (SimHash in pure Python, :mod:`neardup.fingerprint.reference`), ``index``
(every Hamming search by NumPy brute force, :mod:`neardup.index.reference`), ``io`` (readers
through the general decoding path), ``store`` (the online memtable searched by brute force),
``text`` (the token kernels' pre-tokenised text joined in Python,
:func:`neardup.text.wordsplit.joined_words_reference`). The variable is read here and nowhere
else (``fingerprint``, ``index`` and ``text`` at import, ``io`` and ``store`` when a reader or
a memtable starts).
"""

from __future__ import annotations

import os

PARTS = ("fingerprint", "index", "io", "store", "text")


def _set(value: str | None) -> bool:
    return value is not None and value.strip() not in ("", "0")


def parse(value: str | None) -> frozenset[str]:
    """The parts a ``NEARDUP_REFERENCE`` value names: ``1``/``all`` is every part, else a
    comma-separated list; an unknown part is an error (a typo would silently test nothing)."""
    if not _set(value):
        return frozenset()
    assert value is not None
    v = value.strip().lower()
    if v in ("1", "all", "true", "yes"):
        return frozenset(PARTS)
    parts = frozenset(p.strip() for p in v.split(",") if p.strip())
    unknown = sorted(parts - set(PARTS))
    if unknown:
        raise ValueError(
            f"NEARDUP_REFERENCE names unknown part(s) {', '.join(unknown)}; "
            f"use 1 (every part) or a comma list of {', '.join(PARTS)}"
        )
    return parts


def use_reference(part: str) -> bool:
    """Whether ``part`` (one of :data:`PARTS`) runs its reference implementation, from the
    environment as it is now."""
    if part not in PARTS:
        raise ValueError(f"unknown reference part {part!r}; one of {', '.join(PARTS)}")
    return part in parse(os.environ.get("NEARDUP_REFERENCE"))
