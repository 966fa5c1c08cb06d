"""Pure references of the text wing's fast paths, for tests (not in any ``__all__`` of the
package): TextRank weights in plain Python. ``NEARDUP_REFERENCE=fingerprint`` also makes
:class:`~neardup.fingerprint.Fingerprinter` weigh its ``textrank`` features with it.
"""

from __future__ import annotations

from .weights import (
    TEXTRANK_DAMPING,
    TEXTRANK_ITERATIONS,
    TEXTRANK_LEVELS,
    TEXTRANK_SCALE,
    TEXTRANK_WINDOW,
)

__all__: list[str] = []


def textrank_weights_reference(keys: list[tuple[int, ...]] | list[int]) -> dict[object, int]:
    """The definition of :func:`~neardup.text.weights.textrank_weights` in pure Python:
    ``{feature: weight}`` for ``keys`` (ints, or tuples for 128-bit features) in text order."""
    if not keys:
        return {}
    nodes = sorted(set(keys))  # type: ignore[type-var]
    at = {x: i for i, x in enumerate(nodes)}
    seq = [at[x] for x in keys]
    edges: dict[tuple[int, int], int] = {}
    for i in range(len(seq)):
        for j in range(i + 1, min(len(seq), i + TEXTRANK_WINDOW + 1)):
            u, v = seq[i], seq[j]
            if u != v:
                edges[(u, v)] = edges.get((u, v), 0) + 1
                edges[(v, u)] = edges.get((v, u), 0) + 1
    deg = [0] * len(nodes)
    for (u, _), c in edges.items():
        deg[u] += c
    base = (100 - TEXTRANK_DAMPING) * TEXTRANK_SCALE // 100
    s = [TEXTRANK_SCALE] * len(nodes)
    for _ in range(TEXTRANK_ITERATIONS):
        acc = [0] * len(nodes)
        for (u, v), c in edges.items():
            acc[v] += c * s[u] // deg[u]
        s = [base + TEXTRANK_DAMPING * a // 100 for a in acc]
    top = max(s)
    return {x: 1 + (TEXTRANK_LEVELS - 1) * s[i] // top for i, x in enumerate(nodes)}
