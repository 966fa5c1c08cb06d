"""all_pairs: every pair of fingerprints within k bits in one set (the self-join behind dedup)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError, InputError
from ..hamming import as_fingerprints
from .hamming_index import HammingIndex

__all__ = ["all_pairs"]


def all_pairs(
    fingerprints: Any,
    max_distance: int = 3,
    *,
    ids: Any = None,
    threads: int | None = None,
    memory_budget: float | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """Every pair within ``max_distance`` bits among ``fingerprints`` (exact).

    Parameters
    ----------
    fingerprints : array-like
        ``uint64`` (n,) for 64-bit or (n, 2) for 128-bit.
    max_distance : int, default=3
    ids : array-like of int64, optional
        Report these instead of positions (must be unique).
    threads : int or None
        Threads for the batched probe (default: up to 4).

    Returns
    -------
    a, b : int64 arrays
        Each pair once with ``a < b``, sorted by (a, b); positions unless ``ids`` is given.
    distances : int32 array

    Examples
    --------
    >>> import numpy as np
    >>> a, b, d = all_pairs(np.array([0, 1, (1 << 40) - 1, 3], dtype=np.uint64), 2)
    >>> list(zip(a.tolist(), b.tolist(), d.tolist()))
    [(0, 1, 1), (0, 3, 2), (1, 3, 1)]
    """
    fps = as_fingerprints(fingerprints)
    if (
        isinstance(max_distance, bool)
        or not isinstance(max_distance, (int, np.integer))
        or max_distance < 0
    ):
        raise ConfigError(f"max_distance must be an int >= 0, got {max_distance!r}")
    bits = 64 if fps.ndim == 1 else 128
    n = len(fps)
    if ids is not None:
        ids_arr = np.asarray(ids)
        if ids_arr.ndim != 1 or len(ids_arr) != n:
            raise InputError(
                f"ids must be 1-D with one id per fingerprint, got shape {ids_arr.shape} for {n}"
            )
        if len(np.unique(ids_arr)) != n:
            raise InputError("ids must be unique")
    if n < 2:
        e = np.empty(0, np.int64)
        return e, e.copy(), np.empty(0, np.int32)
    idx = HammingIndex(
        bits=bits,
        max_distance=int(max_distance),
        expected_size=n,
        memory_budget=memory_budget,
        buffer_size=max(n, 1),
        threads=threads,
    )
    idx.add(fps)
    lims, b, d = idx.search(fps)
    a = np.repeat(np.arange(n, dtype=np.int64), np.diff(lims))
    keep = a < b
    a, b, d = a[keep], b[keep], d[keep]
    o = np.lexsort((b, a))
    a, b, d = a[o], b[o], d[o]
    if ids is not None:
        ids64 = np.asarray(ids).astype(np.int64)
        a, b = ids64[a], ids64[b]
        swap = a > b
        a[swap], b[swap] = b[swap], a[swap]
        o = np.lexsort((b, a))
        a, b, d = a[o], b[o], d[o]
    return a, b, d
