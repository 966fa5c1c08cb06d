"""The decision's settings, shared by every batch front-end (:func:`neardup.dedup`, the
distributed engines, ``neardup explain``; the online store takes its plan): :class:`DedupConfig`
(validated on construction), and :class:`PairTable` (matched pairs as arrays), with the stage
codes a pair carries (``STAGE_EXACT``, ``STAGE_NEAR``; names in ``STAGE_NAMES``, as the pairs
CSV writes them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from .._threads import default_workers
from ..errors import ConfigError
from ..verify.rule import DEFAULT_THRESHOLD, Verifier

if TYPE_CHECKING:
    from .plan import LshPlan

__all__ = [
    "STAGE_EXACT",
    "STAGE_NAMES",
    "STAGE_NEAR",
    "DedupConfig",
    "Keep",
    "PairTable",
    "Progress",
    "with_overrides",
]

Keep = Literal["first", "longest", "none"]
Progress = Callable[[str, int, int], None]
STAGE_EXACT, STAGE_NEAR = 0, 1
STAGE_NAMES = ("exact", "near")


@dataclass(frozen=True)
class DedupConfig:
    """Parameters of :func:`dedup` (all keyword, validated on construction).

    Parameters
    ----------
    max_distance : int or None, default=None
        SimHash candidate distance for every text. ``None`` uses the verifier's
        length-dependent distances (``Verifier.candidate_distance``: larger for short texts).
    keep : {"first", "longest", "none"}, default="first"
        Which member of each cluster to keep: the first in input order, the longest (ties: the
        first), or none (drop every member of a cluster of two or more).
    verify : bool, default=True
        Decide candidates with the :class:`~neardup.verify.Verifier`. ``False`` accepts every pair
        within the candidate distance (pure SimHash; fast, much less precise for short texts).
    verifier : dict or None, default=None
        :meth:`Verifier.config` overrides; ``None`` uses the documented defaults.
    fingerprinter : dict or None, default=None
        :meth:`Fingerprinter.config` for the fingerprints; ``None`` uses ``Fingerprinter()``.
    exact : bool, default=True
        Find exact duplicates (same normalised content hash) first.
    workers : int, default=every CPU this process may use
        Worker threads of every stage; results do not depend on it. The default is
        :func:`neardup._threads.default_workers` (the process's CPU affinity, else
        ``os.cpu_count()``), read when the config is made; pass ``workers=1`` when calling
        :func:`dedup` from a pool of your own processes.
    expand_pairs : int, default=10_000
        Only the first copy of an exact-duplicate group is compared with other texts. A near
        pair found between two groups is reported for every member of both groups (and every
        pair inside an exact group is reported) when that is at most this many pairs;
        otherwise only the pairs with the groups' first members are reported. Clusters are the
        same either way.
    max_candidates_per_doc : int or None, default=64
        Safety valve for the wide (brute-force) candidate scans: at most this many candidate
        pairs per document of a pass. When a corpus's fingerprints are so concentrated that
        more pairs fall within the candidate distance, that pass's distance is lowered until
        they fit, and ``stats["candidate_passes"]`` records it. ``None`` disables the bound.
    candidate_work_per_doc_ns : int or None, default=32_000
        Work budget of each candidate pass with the default (length-dependent) distances:
        ``candidate_work_per_doc_ns * docs`` *modelled* single-core nanoseconds
        (:func:`neardup.rules.passes.plan_pass`: the brute-force scan costs
        ``docs^2 / 2`` pair checks, the permuted tables the index planner's cost model plus the
        sampled pair count). When the scan does not fit (above ~23,700 documents per pass), the
        pass searches the largest distance whose table search fits, and
        ``stats["candidate_passes"]`` records requested vs used distance and the reason.
        Deterministic (a model, never a timer). ``None`` searches the full distances whatever
        they cost (O(docs^2) above distance 6). An explicit ``max_distance`` is always searched
        as asked (only ``max_candidates_per_doc`` applies). ``candidates="simhash"`` only: the
        ``lsh`` mode's SimHash pass keeps its distance at any size (only the per-document pair
        bound ``max_candidates_per_doc`` applies there, on concentrated fingerprints).
    threshold : float, default=0.8
        What counts as a near duplicate: texts at least this similar (token similarity, 0-1:
        the verifier's ``ratio``; or the shorter contained in the longer, ``containment``).
        It is the verifier's threshold (unless ``verifier`` sets one) and the MinHash channel
        is planned for it: pairs at this similarity are found with probability >= 0.99
        (texts of 6 tokens or more, scattered one-token edits; ``stats["promise"]``), and a
        run whose plan cannot promise that says so (``stats["warnings"]``). ``None`` is the
        default (:data:`neardup.verify.rule.DEFAULT_THRESHOLD`).
    candidates : {"lsh", "simhash"}, default="lsh"
        ``"lsh"``: MinHash banding over token bigrams (:mod:`neardup.rules.lsh`; recall
        of a pair depends on its similarity, not on the corpus size) plus a SimHash pass at a
        small distance (``max_distance``, default ``LSH_SIMHASH_DISTANCE``). ``"simhash"``:
        SimHash only, at the verifier's length-dependent distances under the work budget (the
        previous default: exact on small corpora, recall falls as the budget narrows; no
        promise).
    lsh_bands, lsh_rows : int or None, default=None
        Expert overrides of the MinHash plan (:func:`~neardup.rules.plan.plan_lsh`).
    lsh_bucket_cap : int, default=32
        The bucket valve's floor: a band bucket of up to ``lsh_bucket_cap + 1`` members is
        always paired in full.
    lsh_band_pairs_per_doc : int or None, default=16
        The band budget: a band's buckets are paired in full while their pairs number at most
        this many per document; a band over it (pathological inputs: a template repeated with
        small changes) pairs each member of its largest buckets with the bucket's first
        ``cap`` members and its ``cap`` predecessors instead (``cap >= lsh_bucket_cap``, the
        largest that fits). ``stats["lsh"]`` counts ``valve_bands``, ``pairs_skipped`` and the
        estimated candidates given up (``valve_lost_pairs_est``, ``valve_recall_loss_est``).
        None: every bucket paired in full whatever it costs.
    components : bool, default=False
        Also report the connected components of the matched pairs
        (:attr:`DedupResult.components`; the transitive closure, which the keep policy does not
        use).
    """

    max_distance: int | None = None
    keep: Keep = "first"
    verify: bool = True
    verifier: dict[str, Any] | None = None
    fingerprinter: dict[str, Any] | None = None
    exact: bool = True
    workers: int = field(default_factory=default_workers)
    expand_pairs: int = 10_000
    max_candidates_per_doc: int | None = 64
    candidate_work_per_doc_ns: int | None = 32_000
    threshold: float | None = DEFAULT_THRESHOLD
    candidates: Literal["lsh", "simhash"] = "lsh"
    lsh_bands: int | None = None
    lsh_rows: int | None = None
    lsh_bucket_cap: int = 32
    lsh_band_pairs_per_doc: int | None = 16
    components: bool = False

    def __post_init__(self) -> None:
        if self.max_distance is not None and (
            isinstance(self.max_distance, bool)
            or not isinstance(self.max_distance, int)
            or not 0 <= self.max_distance <= 64
        ):
            raise ConfigError(
                f"max_distance must be an int in [0, 64] or None (length-dependent default), "
                f"got {self.max_distance!r}"
            )
        if self.keep not in ("first", "longest", "none"):
            raise ConfigError(f"keep must be 'first', 'longest' or 'none', got {self.keep!r}")
        if (
            isinstance(self.expand_pairs, bool)
            or not isinstance(self.expand_pairs, int)
            or self.expand_pairs < 0
        ):
            raise ConfigError(f"expand_pairs must be an int >= 0, got {self.expand_pairs!r}")
        if self.max_candidates_per_doc is not None and (
            isinstance(self.max_candidates_per_doc, bool)
            or not isinstance(self.max_candidates_per_doc, int)
            or self.max_candidates_per_doc < 1
        ):
            raise ConfigError(
                f"max_candidates_per_doc must be an int >= 1 or None, got {self.max_candidates_per_doc!r}"
            )
        if self.candidate_work_per_doc_ns is not None and (
            isinstance(self.candidate_work_per_doc_ns, bool)
            or not isinstance(self.candidate_work_per_doc_ns, int)
            or self.candidate_work_per_doc_ns < 1
        ):
            raise ConfigError(
                "candidate_work_per_doc_ns must be an int >= 1 (modelled ns per document) or "
                f"None (no work budget), got {self.candidate_work_per_doc_ns!r}"
            )
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ConfigError(f"workers must be an int >= 1, got {self.workers!r}")
        if self.candidates not in ("lsh", "simhash"):
            raise ConfigError(f"candidates must be 'lsh' or 'simhash', got {self.candidates!r}")
        if self.threshold is None:  # the default, spelled out: the same config either way
            object.__setattr__(self, "threshold", DEFAULT_THRESHOLD)
        self.lsh_plan()  # validates threshold and the lsh_* overrides
        self.make_verifier()  # validates the verifier overrides

    def make_verifier(self) -> Verifier:
        overrides = dict(self.verifier or {})
        overrides.setdefault("threshold", self.threshold)
        return Verifier.from_config(overrides)

    def lsh_plan(self) -> LshPlan:
        """The MinHash channel's plan (:func:`~neardup.rules.plan.plan_lsh`)."""
        from .plan import plan_lsh

        return plan_lsh(
            DEFAULT_THRESHOLD if self.threshold is None else self.threshold,
            bands=self.lsh_bands,
            rows=self.lsh_rows,
            bucket_cap=self.lsh_bucket_cap,
            band_pairs_per_doc=self.lsh_band_pairs_per_doc,
        )

    def make_fingerprinter(self) -> Any:
        from ..fingerprint.simhash import Fingerprinter

        if self.fingerprinter is None:
            return Fingerprinter()
        return Fingerprinter.from_config(self.fingerprinter)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def with_overrides(
    config: DedupConfig | None, overrides: dict[str, Any], *, caller: str = "dedup()"
) -> DedupConfig:
    """``config`` (default ``DedupConfig()``) with the fields in ``overrides`` replaced, as
    :func:`~neardup.batch.run.dedup` takes them (keyword options next to ``config=``).

    Raises
    ------
    ConfigError
        An override is not a :class:`DedupConfig` field (``caller`` names the function), or a
        value is invalid.
    """
    if config is not None and not isinstance(config, DedupConfig):
        raise ConfigError(
            f"{caller} takes config=DedupConfig(...), got {type(config).__name__}"
            + (
                "; pass DedupConfig(**d), or the options as keywords"
                if isinstance(config, dict)
                else ""
            )
        )
    cfg = config if config is not None else DedupConfig()
    if overrides:
        unknown = set(overrides) - set(cfg.to_dict())
        if unknown:
            raise ConfigError(f"unknown {caller} options {sorted(unknown)}; see DedupConfig")
        cfg = DedupConfig(**{**cfg.to_dict(), **overrides})
    return cfg


@dataclass
class PairTable:
    """Matched pairs: positions ``a < b`` (int64), ``distance`` (int32, SimHash; 0 for exact),
    ``score`` (float64 similarity in [0, 1]), ``stage`` (uint8: 0 exact, 1 near), ``rule``
    (uint8: what accepted the pair, as the code that decided it recorded it; codes and names in
    :mod:`neardup.verify.rule`, ``RULE_*`` / ``RULE_NAMES``)."""

    a: npt.NDArray[np.int64]
    b: npt.NDArray[np.int64]
    distance: npt.NDArray[np.int32]
    score: npt.NDArray[np.float64]
    stage: npt.NDArray[np.uint8]
    rule: npt.NDArray[np.uint8]

    def __len__(self) -> int:
        return int(self.a.size)

    @classmethod
    def empty(cls) -> PairTable:
        return cls(
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            np.zeros(0, np.int32),
            np.zeros(0, np.float64),
            np.zeros(0, np.uint8),
            np.zeros(0, np.uint8),
        )

    @classmethod
    def concat(cls, tables: Sequence[PairTable]) -> PairTable:
        t = cls(*(np.concatenate([getattr(x, f) for x in tables]) for f in _PAIR_FIELDS))
        order = np.lexsort((t.b, t.a))
        return cls(*(getattr(t, f)[order] for f in _PAIR_FIELDS))


_PAIR_FIELDS = ("a", "b", "distance", "score", "stage", "rule")
