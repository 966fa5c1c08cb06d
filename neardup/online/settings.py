"""The online deduplicator's settings: :class:`DedupSettings`, validated once, with the store's
:class:`~neardup.store.StoreSettings` inside.

:meth:`Deduplicator.open <neardup.online.Deduplicator.open>` takes one (or builds it from
keyword options, :meth:`DedupSettings.with_options`); the service's
:class:`~neardup.service.ServiceConfig` holds one for every namespace, and ``neardup serve``
builds it from its options. Each layer adds only its own fields: the store's are in
:attr:`DedupSettings.store`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..store import StoreSettings
from ..store.settings import is_int, is_number, option_name
from .prepare import MAX_FUTURE_SECONDS
from .rowcache import DEFAULT_CAPACITY, DEFAULT_HISTOGRAM_ROWS

__all__ = ["DedupSettings"]

#: the largest fingerprint width (a candidate radius past the store's own width is refused on
#: open, where the fingerprinter is known)
_MAX_BITS = 128


def _flag(flag: str) -> dict[str, str]:
    return {"flag": flag}


@dataclass(frozen=True)
class DedupSettings:
    """How a :class:`~neardup.online.Deduplicator` decides, and how its store is opened.

    Parameters
    ----------
    max_distance : int, default=3
        SimHash distance within which a document is a duplicate (distance rule; in ``lsh``
        mode the SimHash distance searched beside the band keys).
    candidate_radius : int or None, default=None
        Largest SimHash distance searched for candidates (``simhash`` mode). Default
        ``max_distance``: the verifier then only confirms or rejects candidates within it,
        which keeps searches cheap over tens of millions of fingerprints. Raise it (up to the
        verifier's ``max_candidate_distance``, each query searched only as far as the verifier
        needs for its length) to recover more near-duplicate *short* texts, at a steep cost per
        query as the radius grows (docs/store.md).
    candidates : {"lsh", "simhash"} or None, default=None
        ``"lsh"``: the SimHash hits within ``max_distance`` plus the stored documents that
        share a MinHash band key and agree on enough MinHash values (the batch pipeline's
        channel and plan), all verified on the stored text; needs ``verify`` and
        ``store_text``. ``"simhash"``: SimHash only. None: the mode the store was created with,
        else ``"lsh"`` when verifying stored texts (and no ``candidate_radius``), else
        ``"simhash"``. Stored with the data; another explicit mode is refused.
    verify : bool or Verifier, default=True
        Verify candidates on their texts with :class:`neardup.verify.Verifier` (True: the
        stored one, and none for a store made without one; a new store: the default), or with
        the verifier given (which also turns verification on for a store made without one);
        False: the distance rule alone.
    fingerprinter : Fingerprinter or dict or None, default=None
        None: the one stored with the data, else ``Fingerprinter()``; a config dict or a
        fingerprinter. Another one than the store was created with is refused.
    store_text : bool, default=True
        Keep texts (needed to verify later documents against them; returned by ``get``).
    commit_interval_ms : float, default=0
        How long the writer waits for more operations to join a group before committing. 0
        still groups: what queues while one group is decided and fsynced forms the next.
    max_matches : int, default=10
        Matches reported per document (closest first).
    max_segments_per_partition : int, default=2
        A partition with more segments is merged into one in the background.
    signature_cache_rows : int, default=262144
        With the MinHash channel: stored rows whose signatures are kept in memory for its
        agreement filter (~0.5 KB each; :mod:`neardup.online.rowcache`); 0 makes every one
        again from its stored text. Decisions do not depend on it.
    histogram_cache_rows : int, default=131072
        With the MinHash channel: verified stored rows whose token histograms are kept in
        memory (1,044 bytes each; :mod:`neardup.online.rowcache`), so that SimHash hits that
        fail verification's histogram bound are turned down without reading their rows; 0
        keeps none. Decisions do not depend on it.
    lsh_bands, lsh_rows : int or None, default=None
        Expert, for a new store in ``lsh`` mode, given together: the MinHash plan's bands and
        rows a band (:func:`neardup.rules.plan.plan_lsh`; None: the planner's, the batch
        default). Each stored document keeps one band key per band, so fewer bands make a
        smaller window, at the candidate probability the plan states for pairs at the
        threshold (a plan below 0.99 is logged as a warning on open; docs/store.md, *Fewer
        bands*). Stored with the data; another plan than the stored one is refused.
    max_future_seconds : float, default=86400
        Documents whose ``time`` is more than this ahead of now are refused (as are times
        before 0 or older than the retention window).
    store : StoreSettings, default=StoreSettings()
        How the store is opened: retention, partition width, memtable size, table
        compression, repair (:class:`neardup.store.StoreSettings`).

    >>> DedupSettings().with_options(max_distance=4, retention="48h").store.retention
    172800.0
    >>> DedupSettings(max_distance=40)
    Traceback (most recent call last):
    ...
    neardup.errors.ConfigError: max_distance (--max-distance) must be an integer in [0, 32], got 40
    """

    max_distance: int = field(default=3, metadata=_flag("--max-distance"))
    candidate_radius: int | None = field(default=None, metadata=_flag("--candidate-radius"))
    candidates: str | None = field(default=None, metadata=_flag("--candidates"))
    verify: Any = field(default=True, metadata=_flag("--verify/--no-verify"))
    fingerprinter: Any = None
    store_text: bool = field(default=True, metadata=_flag("--store-text/--no-store-text"))
    commit_interval_ms: float = field(default=0.0, metadata=_flag("--commit-interval-ms"))
    max_matches: int = 10
    max_segments_per_partition: int = 2
    signature_cache_rows: int = field(
        default=DEFAULT_CAPACITY, metadata=_flag("--signature-cache-rows")
    )
    histogram_cache_rows: int = field(
        default=DEFAULT_HISTOGRAM_ROWS, metadata=_flag("--histogram-cache-rows")
    )
    lsh_bands: int | None = field(default=None, metadata=_flag("--lsh-bands"))
    lsh_rows: int | None = field(default=None, metadata=_flag("--lsh-rows"))
    max_future_seconds: float = MAX_FUTURE_SECONDS
    store: StoreSettings = field(default_factory=StoreSettings)

    def __post_init__(self) -> None:
        def name(f: str) -> str:
            return option_name(DedupSettings, f)

        d = self.max_distance
        if not is_int(d) or not 0 <= d <= 32:
            raise ConfigError(f"{name('max_distance')} must be an integer in [0, 32], got {d!r}")
        r = self.candidate_radius
        if r is not None and (not is_int(r) or not d <= r <= _MAX_BITS):
            raise ConfigError(
                f"{name('candidate_radius')} must be an integer in [max_distance ({d}), "
                f"{_MAX_BITS}] or None (max_distance), got {r!r}"
            )
        if self.candidates not in (None, "lsh", "simhash"):
            raise ConfigError(
                f"{name('candidates')} must be 'lsh', 'simhash' or None (the stored mode), got "
                f"{self.candidates!r}"
            )
        v = self.verify
        if v is None:
            object.__setattr__(self, "verify", False)
        elif not isinstance(v, bool) and not (
            hasattr(v, "verify") and hasattr(v, "candidate_distance")
        ):
            raise ConfigError(
                f"{name('verify')} must be True, False or a Verifier, got {type(v).__name__}"
            )
        fp = self.fingerprinter
        if not (
            fp is None
            or isinstance(fp, Mapping)
            or (
                (hasattr(fp, "fingerprint_batch") or hasattr(fp, "fingerprint_many"))
                and hasattr(fp, "config")
            )
        ):
            raise ConfigError(
                "fingerprinter must be None (the stored one), a Fingerprinter or its config dict, "
                f"got {type(fp).__name__}"
            )
        if not isinstance(self.store_text, bool):
            raise ConfigError(
                f"{name('store_text')} must be True or False, got {self.store_text!r}"
            )
        c = self.commit_interval_ms
        if not is_number(c) or not 0 <= c <= 1000:
            raise ConfigError(
                f"{name('commit_interval_ms')} must be a number of milliseconds in [0, 1000], "
                f"got {c!r}"
            )
        for f in ("max_matches", "max_segments_per_partition"):
            value = getattr(self, f)
            if not is_int(value) or value < 1:
                raise ConfigError(f"{f} must be a positive integer, got {value!r}")
        for f in ("signature_cache_rows", "histogram_cache_rows"):
            k = getattr(self, f)
            if not is_int(k) or k < 0:
                raise ConfigError(f"{name(f)} must be an integer >= 0, got {k!r}")
        for f in ("lsh_bands", "lsh_rows"):
            k = getattr(self, f)
            if k is not None and (not is_int(k) or not 1 <= k <= 512):
                raise ConfigError(f"{name(f)} must be an integer in [1, 512] or None, got {k!r}")
        if (self.lsh_bands is None) != (self.lsh_rows is None):
            raise ConfigError(
                f"{name('lsh_bands')} and {name('lsh_rows')} are given together (the plan's "
                "bands, each of that many rows), e.g. 30 and 3; neither: the planner's plan"
            )
        m = self.max_future_seconds
        if not is_number(m) or not 0 <= m < 1e12:
            raise ConfigError(f"max_future_seconds must be a number in [0, 1e12), got {m!r}")
        if not isinstance(self.store, StoreSettings):
            raise ConfigError(
                f"store must be a neardup.store.StoreSettings, got {type(self.store).__name__}"
            )

    def with_options(self, **options: Any) -> DedupSettings:
        """A copy with these options changed, each a field of this class or of
        :class:`~neardup.store.StoreSettings` (``retention=``, ``memtable_size=``, ...); an
        unknown name is refused, listing the options."""
        own = {f.name for f in dataclasses.fields(DedupSettings)} - {"store"}
        store_fields = {f.name for f in dataclasses.fields(StoreSettings)}
        unknown = sorted(set(options) - own - store_fields)
        if unknown:
            raise ConfigError(
                f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; the "
                f"options are {', '.join(sorted(own | store_fields))}"
            )
        mine = {k: v for k, v in options.items() if k in own}
        theirs = {k: v for k, v in options.items() if k in store_fields}
        store = dataclasses.replace(self.store, **theirs) if theirs else self.store
        return dataclasses.replace(self, store=store, **mine)
