"""The decision every front-end shares: the batch (:mod:`neardup.batch`), the online store
(:mod:`neardup.online`), the distributed engines (:mod:`neardup.distributed`) and the cluster
(:mod:`neardup.cluster`) are drivers over these rules and never import each other.

* :mod:`.config`: the settings (:class:`DedupConfig`) and matched pairs (:class:`PairTable`);
* :mod:`.plan`: the candidate plan (:class:`LshPlan`, :func:`plan_lsh`, what it promises), the
  SimHash pass distances; :mod:`.passes`: the SimHash pass's work budget (:func:`plan_pass`);
* :mod:`.lsh`: the MinHash channel's pairs and the bucket valve's policy (:func:`lsh_pairs`,
  :func:`band_caps`); :mod:`.candidates`: the candidate stage (:func:`stage_candidates_for`);
* :mod:`.verify`: the verification rule as applied to candidate pairs (:func:`stage_verify`,
  lazy rounds);
* :mod:`.groups`: exact-duplicate groups and the pairs they report;
* :mod:`.keep`: the keep rule (no chaining, the length guard :func:`may_drop`):
  :func:`greedy_representatives`, :class:`KeepFirst`, :func:`keep_first`;
* :mod:`.decision`: the online answers (:class:`Decision`, :class:`Match`);
* :mod:`.summary`: a run's summary (:func:`summary`);
* :mod:`.reference`: pure references of the fast paths, for tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# public name -> module that defines it (imported on first use)
_EXPORTS: dict[str, str] = {
    "Decision": ".decision",
    "DedupConfig": ".config",
    "Found": ".keep",
    "KeepFirst": ".keep",
    "LshPlan": ".plan",
    "Match": ".decision",
    "PairTable": ".config",
    "keep_first": ".keep",
    "lsh_pairs": ".lsh",
    "may_drop": ".keep",
    "plan_lsh": ".plan",
    "stage_candidates_for": ".candidates",
    "stage_verify": ".verify",
    "summary": ".summary",
}

__all__ = [
    "Decision",
    "DedupConfig",
    "Found",
    "KeepFirst",
    "LshPlan",
    "Match",
    "PairTable",
    "keep_first",
    "lsh_pairs",
    "may_drop",
    "plan_lsh",
    "stage_candidates_for",
    "stage_verify",
    "summary",
]

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, __all__)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .candidates import stage_candidates_for
    from .config import DedupConfig, PairTable
    from .decision import Decision, Match
    from .keep import Found, KeepFirst, keep_first, may_drop
    from .lsh import lsh_pairs
    from .plan import LshPlan, plan_lsh
    from .summary import summary
    from .verify import stage_verify
