"""Hamming distances between fingerprints, scalar and vectorized.

Fingerprints are ``uint64`` arrays of shape ``(n,)`` for 64 bits and ``(n, 2)`` for 128 bits
(column 0 holds the high 64 bits, column 1 the low 64 bits, matching
:meth:`neardup.Fingerprinter.fingerprint_many`). Python ints of any width work in :func:`hamming`.

All vectorized helpers use ``numpy.bitwise_count`` (NumPy >= 2; ``benchmarks/bench_index.py``
measures the searches built on it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError, InputError, InputTypeError

__all__ = [
    "as_fingerprints",
    "fingerprint_bits",
    "hamming",
    "hamming_cdist",
    "hamming_many",
    "hamming_to_many",
    "int_to_words",
    "words_to_int",
]

FingerprintArray = npt.NDArray[np.uint64]


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two fingerprints given as non-negative Python ints.

    >>> hamming(0b1011, 0b0001)
    2
    """
    for v in (a, b):
        if isinstance(v, bool) or not isinstance(v, int | np.integer):
            hint = (
                " (a hex string, as get() and the service give: int(s, 16))"
                if isinstance(v, str)
                else ""
            )
            raise InputTypeError(
                f"hamming() takes integer fingerprints, got {type(a).__name__} and "
                f"{type(b).__name__}{hint}"
            )
    x = int(a) ^ int(b)
    if int(a) < 0 or int(b) < 0:
        raise InputError(
            "hamming() takes non-negative fingerprints; mask signed values with & ((1 << bits) - 1)"
        )
    return x.bit_count()


def as_fingerprints(
    values: Any, *, name: str = "fingerprints", bits: int | None = None
) -> FingerprintArray:
    """Validate and return fingerprints as a C-contiguous ``uint64`` array of shape (n,) or (n, 2).

    Accepts uint64 arrays, non-negative integer arrays, or sequences of Python ints
    (ints wider than 64 bits become shape (n, 2)). Raises :class:`InputError` naming ``name``.
    """
    if isinstance(values, np.ndarray):
        arr = values
        if arr.dtype != np.uint64:
            if arr.dtype.kind == "i":
                if arr.size and int(arr.min()) < 0:
                    raise InputError(
                        f"{name} must be non-negative; got a negative value in a {arr.dtype} array "
                        "(view signed storage as uint64 with arr.view(np.uint64))"
                    )
                arr = arr.astype(np.uint64)
            elif arr.dtype.kind == "u":
                arr = arr.astype(np.uint64)
            else:
                raise InputError(
                    f"{name} must be an unsigned 64-bit integer array, got dtype {arr.dtype}; "
                    "convert with np.asarray(x, dtype=np.uint64)"
                )
    else:
        seq = list(values) if not isinstance(values, (int, np.integer)) else [values]
        if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in seq):
            bad = next(
                i
                for i, v in enumerate(seq)
                if isinstance(v, bool) or not isinstance(v, (int, np.integer))
            )
            raise InputTypeError(
                f"{name}[{bad}] is {type(seq[bad]).__name__}, expected an int fingerprint"
            )
        wide = bits == 128 or any(int(v) >> 64 for v in seq)
        if any(int(v) < 0 for v in seq):
            raise InputError(f"{name} must be non-negative integers")
        if wide:
            arr = np.array([int_to_words(int(v), 128) for v in seq], dtype=np.uint64).reshape(-1, 2)
        else:
            arr = np.array([int(v) for v in seq], dtype=np.uint64)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if not (arr.ndim == 1 or (arr.ndim == 2 and arr.shape[1] == 2)):
        raise InputError(
            f"{name} must have shape (n,) for 64-bit or (n, 2) for 128-bit fingerprints, got {arr.shape}"
        )
    if bits is not None and fingerprint_bits(arr) != bits:
        raise InputError(
            f"{name} are {fingerprint_bits(arr)}-bit (shape {arr.shape}) but {bits}-bit were expected"
        )
    return np.ascontiguousarray(arr)


def fingerprint_bits(arr: FingerprintArray) -> int:
    """64 for shape (n,), 128 for shape (n, 2)."""
    return 64 if arr.ndim == 1 else 64 * arr.shape[1]


def int_to_words(value: int, bits: int) -> tuple[int, ...]:
    """Split a Python int into big-endian 64-bit words (high word first)."""
    if bits % 64:
        raise ConfigError(f"bits must be a multiple of 64, got {bits}")
    n = bits // 64
    return tuple((value >> (64 * (n - 1 - i))) & 0xFFFFFFFFFFFFFFFF for i in range(n))


def words_to_int(words: Any) -> int:
    """Inverse of :func:`int_to_words`: join 64-bit words (high word first) into one int."""
    out = 0
    for w in np.atleast_1d(np.asarray(words, dtype=np.uint64)).tolist():
        out = (out << 64) | int(w)
    return out


def _popcount_rows(x: FingerprintArray, wide: bool) -> npt.NDArray[np.int32]:
    """Popcount per fingerprint; ``wide`` means the last axis holds the 64-bit words of one."""
    c = np.bitwise_count(x)
    if wide:
        return c.sum(axis=-1, dtype=np.int32)
    return c.astype(np.int32, copy=False)


def hamming_many(a: Any, b: Any) -> npt.NDArray[np.int32]:
    """Element-wise distances between two equal-length fingerprint arrays -> int32 shape (n,)."""
    a = as_fingerprints(a, name="a")
    b = as_fingerprints(b, name="b")
    if a.shape != b.shape:
        raise InputError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
    return _popcount_rows(a ^ b, a.ndim == 2)


def hamming_to_many(query: Any, fingerprints: Any) -> npt.NDArray[np.int32]:
    """Distances from one fingerprint (int, or a (2,) row for 128-bit) to each of ``fingerprints``."""
    fps = as_fingerprints(fingerprints)
    bits = fingerprint_bits(fps)
    if isinstance(query, int | np.integer) and not isinstance(query, bool):
        value = int(query)
        if value < 0 or value.bit_length() > bits:
            raise InputError(
                f"query must be a non-negative {bits}-bit fingerprint like the fingerprints, got "
                f"{value:#x}"
            )
        q = np.array(int_to_words(value, bits), dtype=np.uint64)
        q = q[0] if fps.ndim == 1 else q
    else:
        arr = np.asarray(query) if isinstance(query, np.ndarray | list | tuple) else None
        if fps.ndim == 1 or arr is None or arr.shape != (2,) or arr.dtype.kind not in "ui":
            raise InputTypeError(
                f"query must be one {bits}-bit fingerprint: an int"
                + (" or a row of two uint64 words" if fps.ndim == 2 else "")
                + f", got {type(query).__name__}"
                + (f" of shape {arr.shape}" if arr is not None else "")
            )
        q = as_fingerprints(arr.reshape(1, 2), name="query").reshape(2)
    return _popcount_rows(fps ^ q, fps.ndim == 2)


def hamming_cdist(queries: Any, fingerprints: Any, *, block: int = 4096) -> npt.NDArray[np.int32]:
    """All-pairs distance matrix, shape (len(queries), len(fingerprints)), int32.

    Brute force in blocks of ``block`` queries; the reference every index is tested against.
    """
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ConfigError(f"block must be an int >= 1 (queries per block), got {block!r}")
    q = as_fingerprints(queries, name="queries")
    f = as_fingerprints(fingerprints)
    if q.ndim != f.ndim:
        raise InputError(
            f"queries are {fingerprint_bits(q)}-bit but fingerprints are {fingerprint_bits(f)}-bit"
        )
    out = np.empty((len(q), len(f)), dtype=np.int32)
    for s in range(0, len(q), block):
        qs = q[s : s + block]
        x = qs[:, None] ^ f[None, :]
        out[s : s + block] = _popcount_rows(x, q.ndim == 2)
    return out
