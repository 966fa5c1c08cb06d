"""How many threads the numba ``parallel=True`` kernels of the pipeline use."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numba


@contextlib.contextmanager
def numba_threads(workers: int) -> Iterator[None]:
    """Run the numba parallel kernels called inside on ``workers`` threads (clamped to
    1..``NUMBA_NUM_THREADS``); the previous thread count is restored on the way out."""
    prev = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(workers), numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        numba.set_num_threads(prev)
