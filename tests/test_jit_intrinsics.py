"""The kernel primitives of ``neardup._jit``: ``prefetch`` and ``prefetch2d`` ask for a line and
change nothing."""

from __future__ import annotations

import platform

import numba
import numpy as np
import pytest

from neardup._jit import prefetch, prefetch2d


@numba.njit
def _prefetched_sum(a, idx, ahead):  # type: ignore[no-untyped-def]
    """Sum of ``a[idx]``, each element prefetched first; ``ahead`` (may lie far outside ``a``)
    prefetched too."""
    for i in idx:
        prefetch(a, i)
    for i in ahead:
        prefetch(a, i)
    s = 0
    for i in idx:
        s += a[i]
    return s


def test_prefetch_reads_nothing_and_never_faults() -> None:
    rng = np.random.default_rng(5)
    a = np.arange(1 << 20, dtype=np.int64) * 3
    idx = rng.integers(0, a.size, 5000)
    # past either end, far outside the mapping: a prefetch is a hint and never faults
    ahead = np.array([-1, -(1 << 30), a.size, a.size + (1 << 20), 1 << 40], np.int64)
    assert _prefetched_sum(a, idx, ahead) == int(a[idx].sum())
    u8 = np.arange(256, dtype=np.uint8)  # any element type
    assert _prefetched_sum(u8, np.array([3, 255]), ahead) == 258


@numba.njit
def _prefetched_sum2d(a, rows, cols):  # type: ignore[no-untyped-def]
    for i in range(rows.size):
        prefetch2d(a, rows[i], cols[i])
    s = 0
    for i in range(rows.size):
        s += a[rows[i], cols[i]]
    return s


def test_prefetch2d_reads_nothing_and_takes_strided_arrays() -> None:
    rng = np.random.default_rng(6)
    a = np.arange(64 * 1024, dtype=np.uint64).reshape(64, 1024)
    rows, cols = rng.integers(0, 64, 500), rng.integers(0, 1024, 500)
    assert _prefetched_sum2d(a, rows, cols) == int(a[rows, cols].sum())
    t = a.T  # (strided: the element's address from the strides)
    assert _prefetched_sum2d(t, cols, rows) == int(t[cols, rows].sum())


def test_prefetch_is_a_typing_error_for_what_it_cannot_take() -> None:
    @numba.njit
    def on_2d(a):  # type: ignore[no-untyped-def]
        prefetch(a, 0)

    with pytest.raises(numba.core.errors.TypingError):
        on_2d(np.zeros((2, 2)))


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 instruction names")
def test_prefetch_compiles_to_a_prefetch_instruction() -> None:
    a = np.arange(16, dtype=np.int64)
    _prefetched_sum(a, np.array([1]), np.array([2]))
    asm = _prefetched_sum.inspect_asm(_prefetched_sum.signatures[0])
    assert "prefetcht0" in asm
