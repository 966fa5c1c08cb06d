"""The deduplicator's fingerprinter and verifier from what the caller passed and what the data
directory stored (``config.json``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError

__all__ = ["jsonable", "load_fingerprinter", "load_verifier"]


def load_fingerprinter(spec: Any, stored: dict[str, Any] | None) -> Any:
    """``spec`` None: the stored fingerprinter config, else ``Fingerprinter()``; a config dict;
    or a fingerprinter object (anything with ``fingerprint_batch`` or ``fingerprint_many`` and
    ``config``)."""
    from ..fingerprint.simhash import Fingerprinter

    if spec is None:
        return Fingerprinter.from_config(stored) if stored is not None else Fingerprinter()
    if isinstance(spec, Mapping):
        return Fingerprinter.from_config(dict(spec))
    if not (hasattr(spec, "fingerprint_batch") or hasattr(spec, "fingerprint_many")) or not hasattr(
        spec, "config"
    ):
        raise ConfigError(
            f"fingerprinter must be None, a Fingerprinter or its config dict, got {type(spec).__name__}"
        )
    return spec


def load_verifier(spec: Any, config: dict[str, Any] | None) -> Any:
    """The verifier for ``spec`` and a store's stored ``config`` (None: a new store). ``spec``
    True: the stored verifier, else (a new store) ``Verifier()``; a store made without one
    stays without (its decisions would change silently: pass a verifier to verify from now
    on); False or None: no verifier; or a verifier object (``verify`` and
    ``candidate_distance``)."""
    if spec is False or spec is None:
        return None
    if spec is True:
        from ..verify.rule import Verifier

        if config is None:
            return Verifier()
        stored = config.get("verifier")
        return Verifier.from_config(stored) if stored is not None else None
    if not (hasattr(spec, "verify") and hasattr(spec, "candidate_distance")):
        raise ConfigError(f"verify must be True, False or a Verifier, got {type(spec).__name__}")
    return spec


def jsonable(d: Any) -> Any:
    """``d`` as it reads back from JSON (sorted keys; other types as ``str``)."""
    return json.loads(json.dumps(d, sort_keys=True, default=str))
