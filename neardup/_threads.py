"""Thread settings shared by the wings: how many workers a corpus run uses by default
(:func:`default_workers`), how many threads the numba ``parallel=True`` kernels use
(:func:`numba_threads`), and a lower CPU priority for background threads
(:func:`lower_thread_priority`)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator


def default_workers() -> int:
    """The default worker count of a corpus run (``DedupConfig.workers``, ``--workers``):
    every CPU this process may run on (its affinity mask, which ``taskset`` and cgroup cpusets
    narrow; a CPU *quota*, e.g. ``docker --cpus``, is not seen), else ``os.cpu_count()``, at
    least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux (macOS, Windows): no affinity call
        return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def numba_threads(workers: int) -> Iterator[None]:
    """Run the numba parallel kernels called inside on ``workers`` threads (clamped to
    1..``NUMBA_NUM_THREADS``); the previous thread count is restored on the way out."""
    import numba  # (here: the CLI reads default_workers() without paying numba's import)

    prev = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(workers), numba.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]
    try:
        yield
    finally:
        numba.set_num_threads(prev)


def lower_thread_priority(niceness: int = 10) -> None:
    """Lower the calling thread's CPU priority (Linux: nice per thread id), for background
    flushes and merges, so the writer and the request threads get the CPU first."""
    with contextlib.suppress(AttributeError, OSError):  # not Linux / not permitted: as is
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)
