"""Binary searches every wing's kernels share (numba kernels, callable from other kernels):
the index's table probes and block codecs, and the store's sketch look-up by row id."""

from __future__ import annotations

from ._jit import kernel

__all__ = ["lower_bound", "upper_bound"]


@kernel(nogil=True)
def lower_bound(a, lo, hi, v):
    """First index in [lo, hi) of the sorted ``a`` whose value is >= ``v`` (``hi``: none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel(nogil=True)
def upper_bound(a, lo, hi, v):
    """First index in [lo, hi) of the sorted ``a`` whose value is > ``v`` (``hi``: none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= v:
            lo = mid + 1
        else:
            hi = mid
    return lo
