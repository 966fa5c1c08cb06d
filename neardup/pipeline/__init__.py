"""Building blocks of the batch dedup pipeline (see :mod:`neardup.dedup` for the stages)."""

from __future__ import annotations

from .candidates import (
    PassPlan,
    all_pairs_bruteforce,
    all_pairs_reference,
    bounded_pairs,
    candidate_pairs,
    plan_pass,
    planned_pairs,
)
from .tokens import encode_texts

__all__ = [
    "PassPlan",
    "all_pairs_bruteforce",
    "all_pairs_reference",
    "bounded_pairs",
    "candidate_pairs",
    "encode_texts",
    "plan_pass",
    "planned_pairs",
]
