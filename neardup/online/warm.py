"""A server's first start on two processes.

On a cold kernel cache ``neardup serve`` compiles, before it answers, every kernel its
requests need (:meth:`Deduplicator._warm_up <neardup.online.Deduplicator>`): about a minute
on a 2-core machine, on one core. When that compile starts the server starts this helper
(:func:`start_serve_helper`): a process that opens a throwaway store with the server's
settings and runs the same warm-up steps last first, into the same kernel cache, while the
server runs them first first; a kernel the helper has cached loads in the server instead of
compiling. The server stops the helper once its stores are open (what it cached stays) and
removes the helper's throwaway store; a helper that ends on its own removes it itself.
``NEARDUP_NO_WARM=1`` turns it off (:func:`neardup._jit.start_helper`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
from typing import Any

from .. import _jit
from .deduplicator import WARM_LAST_FIRST_ENV, Deduplicator
from .settings import DedupSettings

__all__ = ["SCRATCH_PREFIX", "settings_options", "start_serve_helper", "warm_like"]

_SIMPLE = (bool, int, float, str, type(None))


def settings_options(settings: DedupSettings) -> dict[str, Any]:
    """The options of ``settings`` (its fields and its store's) that are plain values: what
    the helper opens its store with (``DedupSettings().with_options(**options)``); the kernels
    a warm-up compiles depend on these (fingerprint width, candidate mode, tables), not on the
    objects left out (a fingerprinter or verifier given as an object: the defaults)."""
    out: dict[str, Any] = {}
    for obj in (settings.store, settings):
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if isinstance(value, _SIMPLE):
                out[f.name] = value
    return out


#: the prefix of the helper's scratch folder in the temporary directory
SCRATCH_PREFIX = "neardup-warm-"


def start_serve_helper(settings: DedupSettings) -> _jit.Helper | None:
    """Start the helper for a server whose stores open with ``settings`` (None where
    :func:`neardup._jit.start_helper` starts none); :func:`neardup._jit.stop_helper` stops it
    and removes its scratch folder."""
    return _jit.start_helper(
        "neardup.online.warm", json.dumps(settings_options(settings)), scratch=SCRATCH_PREFIX
    )


def warm_like(options: dict[str, Any], scratch: str) -> None:
    """The helper's work: a throwaway store in the folder ``scratch`` opened with ``options``,
    its warm-up last first; ``scratch`` is removed after."""
    settings = DedupSettings().with_options(**options)
    os.environ[WARM_LAST_FIRST_ENV] = "1"
    try:
        Deduplicator.open(os.path.join(scratch, "store"), settings).close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":  # pragma: no cover - the helper process
    warm_like(json.loads(sys.argv[1]), sys.argv[2])
