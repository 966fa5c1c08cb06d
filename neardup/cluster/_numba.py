"""numba kernels for :mod:`neardup.cluster.ring`'s batch lookups (xxh64 of 8 bytes + bucketed search).

The pure definitions live in :mod:`neardup.cluster.ring` (``_xxh64_u64``, ``searchsorted`` over the
points); tests/cluster/test_ring.py checks these kernels against them.
"""

from __future__ import annotations

import numpy as np

from .._jit import kernel

_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)


@kernel(nogil=True, inline="always")
def _xxh64_8(v: np.uint64, seed_base: np.uint64) -> np.uint64:
    k1 = v * _P2
    k1 = (k1 << np.uint64(31)) | (k1 >> np.uint64(33))
    k1 = k1 * _P1
    h = seed_base ^ k1
    h = ((h << np.uint64(27)) | (h >> np.uint64(37))) * _P1 + _P4
    h ^= h >> np.uint64(33)
    h *= _P2
    h ^= h >> np.uint64(29)
    h *= _P3
    h ^= h >> np.uint64(32)
    return h


@kernel(nogil=True)
def lookup_many(keys, hashed, shift, fast, bucket_lo, points, owner_ext, want_pos):
    """Owner index (``want_pos`` False) or owning point position, wrapped (True), per key.

    ``keys`` are uint64 keys (hashed here with xxh64 of their 8 little-endian bytes, seed 0)
    or, with ``hashed``, ring positions already.
    """
    n = keys.shape[0]
    n_pts = points.shape[0]
    out = np.empty(n, dtype=np.int64)
    seed_base = np.uint64(0x27D4EB2F165667C5 + 8)
    sh = np.uint64(shift)
    for j in range(n):
        h = keys[j] if hashed else _xxh64_8(keys[j], seed_base)
        b = np.int64(h >> sh)
        if not want_pos:
            f = fast[b]
            if f >= 0:
                out[j] = f
                continue
        lo = bucket_lo[b]
        hi = bucket_lo[b + 1]
        while lo < hi and points[lo] < h:
            lo += 1
        if want_pos:
            out[j] = lo if lo < n_pts else 0
        else:
            out[j] = owner_ext[lo]
    return out
