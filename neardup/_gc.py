"""The cyclic garbage collector's settings of a neardup process: the console script
(:func:`neardup.cli.main.run`) and the service (:func:`neardup.service.run_server`), never a
library user's process (importing neardup changes nothing).

neardup's garbage is acyclic or dies young: arrays, and per-group lists, tuples and rows freed
by their reference counts. Yet CPython's default thresholds run a full collection whenever the
objects that survived two young collections pass a quarter of the long-lived ones, and a
store check of 10,000 documents keeps enough alive for long enough (its rows, candidates,
group state) to trigger several, each walking every tracked object of the process (the
imports alone: ~130,000) while holding the GIL. A check against a 0.8 M store spent 6-8 % of
its time there (``benchmarks/bench_check.py --collector default`` against ``settled``;
docs/dedup.md, "Incremental dedup"), and in the service each one was a latency spike for
every request in flight (``benchmarks/bench_service.py``)."""

from __future__ import annotations

import gc

__all__ = ["LONG_RUN_THRESHOLDS", "settle"]

#: ``gc.set_threshold`` of a neardup process: CPython's young-generation defaults, and a full
#: collection only every 1,000 second-generation collections (CPython's default: 10)
LONG_RUN_THRESHOLDS = (700, 10, 1000)


def settle(*, collect: bool = True) -> None:
    """Move every object allocated so far (modules, a server's stores and warm-up) out of the
    collector's generations, after a full collection unless ``collect`` is False (a command
    that has only imported has next to nothing to free, and a collection costs its start-up
    time), so that a full collection later walks only the objects created since; then make
    full collections rare (:data:`LONG_RUN_THRESHOLDS`). For a process's shell, once it has
    loaded what lives as long as it does; a library call never does this."""
    if collect:
        gc.collect()
    gc.freeze()
    gc.set_threshold(*LONG_RUN_THRESHOLDS)
