"""Building blocks of the batch dedup pipeline (see :mod:`neardup.dedup` for the stages)."""

from __future__ import annotations

from .candidates import all_pairs_bruteforce, all_pairs_reference, bounded_pairs, candidate_pairs

__all__ = ["all_pairs_bruteforce", "all_pairs_reference", "bounded_pairs", "candidate_pairs"]
