"""Exact k-bit Hamming search over permuted sorted tables (Manku, Jain & Das Sarma, WWW 2007).

* :class:`HammingIndex` — incremental, persistent index: ``add`` / ``search`` / ``remove`` /
  ``save`` / ``load``; its layout is chosen by :func:`plan_index` from (bits, k, N, memory).
* :func:`all_pairs` — self-join: every pair within ``k`` in a set of fingerprints; the
  brute-force scan for large distances in :mod:`neardup.index.scan`.
* :func:`batch_query` — the paper's batch mode: every (stored, query) pair within ``k``, the
  stored set streamed through tables over the queries (:mod:`neardup.index.batch_join`).
* :class:`~neardup.index.bands.BandIndex` — MinHash-LSH band keys as an index, and the band
  self-join (:mod:`neardup.index.bands`, :mod:`neardup.index.band_groups`).
* :mod:`neardup.index.reference` — the NumPy brute force every fast path is tested against.
"""

from __future__ import annotations

from .allpairs import all_pairs
from .bands import BandIndex
from .batch_join import batch_query
from .hamming_index import HammingIndex
from .plan import Plan, TableSpec, plan_index

__all__ = [
    "BandIndex",
    "HammingIndex",
    "Plan",
    "TableSpec",
    "all_pairs",
    "batch_query",
    "plan_index",
]
