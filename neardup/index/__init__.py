"""Exact k-bit Hamming search over permuted sorted tables (Manku, Jain & Das Sarma, WWW 2007).

* :class:`HammingIndex` — incremental, persistent index: ``add`` / ``search`` / ``remove`` /
  ``save`` / ``load``; its layout is chosen by :func:`plan_index` from (bits, k, N, memory).
* :func:`all_pairs` — self-join: every pair within ``k`` in a set of fingerprints.
* :mod:`neardup.index.reference` — the NumPy brute force every fast path is tested against.
"""

from __future__ import annotations

from .allpairs import all_pairs
from .hamming_index import HammingIndex
from .plan import Plan, TableSpec, plan_index

__all__ = ["HammingIndex", "Plan", "TableSpec", "all_pairs", "plan_index"]
