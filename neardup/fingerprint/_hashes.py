"""numba kernels of the feature hashes SimHash sums (:mod:`neardup.text.hashing`'s definitions:
xxh64 seed 0 by default, fnv1a, jenkins one-at-a-time and lookup2), on byte ranges of a buffer.

:func:`xxh64` and :func:`hash64` are inlined into the hot loops of :mod:`._numba`; the others
are ordinary calls. Tested bit for bit against the pure definitions
(``tests/fingerprint/test_fingerprint.py``).
"""

from __future__ import annotations

import numpy as np
from numba import types as nt

from .._jit import kernel

U64 = np.uint64
P1 = U64(11400714785074694791)
P2 = U64(14029467366897019727)
P3 = U64(1609587929392839161)
P4 = U64(9650029242287828579)
P5 = U64(2870177450012600261)
M32 = U64(0xFFFFFFFF)
FNV_OFF = U64(0xCBF29CE484222325)
FNV_PRIME = U64(0x100000001B3)


# The feature hashes are called on the (read-only) input bytes and on writable scratch
# buffers; typed lazily, each would compile twice (one copy per array type). One read-only
# signature serves both (a writable array converts to it), compiled when this module loads.
_RO_BYTES = nt.Array(nt.uint8, 1, "C", readonly=True)
_SIG_HASH_ID = nt.uint64(_RO_BYTES, nt.int64, nt.int64, nt.int64, nt.uint64)
_SIG_HASH = nt.uint64(_RO_BYTES, nt.int64, nt.int64, nt.uint64)


@kernel(inline="always")  # (an ordinary call would compile once per literal r)
def _rotl(x, r):
    return (x << U64(r)) | (x >> U64(64 - r))


@kernel
def _r64(b, i):
    return (
        U64(b[i])
        | (U64(b[i + 1]) << U64(8))
        | (U64(b[i + 2]) << U64(16))
        | (U64(b[i + 3]) << U64(24))
        | (U64(b[i + 4]) << U64(32))
        | (U64(b[i + 5]) << U64(40))
        | (U64(b[i + 6]) << U64(48))
        | (U64(b[i + 7]) << U64(56))
    )


@kernel
def _r32(b, i):
    return (
        U64(b[i])
        | (U64(b[i + 1]) << U64(8))
        | (U64(b[i + 2]) << U64(16))
        | (U64(b[i + 3]) << U64(24))
    )


@kernel
def _xround(acc, x):
    acc = acc + x * P2
    acc = _rotl(acc, 31)
    return acc * P1


@kernel
def _xmerge(acc, v):
    acc = acc ^ _xround(U64(0), v)
    return acc * P1 + P4


@kernel
def xlanes(seed):
    """xxHash64's four lanes for ``seed`` (inputs of 32 bytes or more)."""
    return seed + P1 + P2, seed + P2, seed, seed - P1


@kernel
def xconverge(v1, v2, v3, v4):
    """xxHash64's merge of its four lanes (inputs of 32 bytes or more)."""
    h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
    h = _xmerge(h, v1)
    h = _xmerge(h, v2)
    h = _xmerge(h, v3)
    return _xmerge(h, v4)


@kernel
def xavalanche(h):
    """xxHash64's final avalanche."""
    h = h ^ (h >> U64(33))
    h = h * P2
    h = h ^ (h >> U64(29))
    h = h * P3
    return h ^ (h >> U64(32))


@kernel(_SIG_HASH, forceinline=True)
def xxh64(b, s, e, seed):
    """xxHash64 of b[s:e] (uint8 array) with seed (uint64)."""
    n = e - s
    i = s
    if n >= 32:
        v1, v2, v3, v4 = xlanes(seed)
        while i + 32 <= e:
            v1 = _xround(v1, _r64(b, i))
            v2 = _xround(v2, _r64(b, i + 8))
            v3 = _xround(v3, _r64(b, i + 16))
            v4 = _xround(v4, _r64(b, i + 24))
            i += 32
        h = xconverge(v1, v2, v3, v4)
    else:
        h = seed + P5
    h = h + U64(n)
    while i + 8 <= e:
        h = h ^ _xround(U64(0), _r64(b, i))
        h = _rotl(h, 27) * P1 + P4
        i += 8
    if i + 4 <= e:
        h = h ^ (_r32(b, i) * P1)
        h = _rotl(h, 23) * P2 + P3
        i += 4
    while i < e:
        h = h ^ (U64(b[i]) * P5)
        h = _rotl(h, 11) * P1
        i += 1
    return xavalanche(h)


@kernel(_SIG_HASH)
def fnv1a64(b, s, e, seed):
    h = FNV_OFF ^ seed
    for i in range(s, e):
        h = (h ^ U64(b[i])) * FNV_PRIME
    return h


@kernel(_SIG_HASH)
def oaat32(b, s, e, seed):
    h = seed & M32
    for i in range(s, e):
        h = (h + U64(b[i])) & M32
        h = (h + (h << U64(10))) & M32
        h = h ^ (h >> U64(6))
    h = (h + (h << U64(3))) & M32
    h = h ^ (h >> U64(11))
    h = (h + (h << U64(15))) & M32
    return h


@kernel
def _mix(a, b, c):
    a = (a - b - c) & M32
    a = a ^ (c >> U64(13))
    b = (b - c - a) & M32
    b = b ^ ((a << U64(8)) & M32)
    c = (c - a - b) & M32
    c = c ^ (b >> U64(13))
    a = (a - b - c) & M32
    a = a ^ (c >> U64(12))
    b = (b - c - a) & M32
    b = b ^ ((a << U64(16)) & M32)
    c = (c - a - b) & M32
    c = c ^ (b >> U64(5))
    a = (a - b - c) & M32
    a = a ^ (c >> U64(3))
    b = (b - c - a) & M32
    b = b ^ ((a << U64(10)) & M32)
    c = (c - a - b) & M32
    c = c ^ (b >> U64(15))
    return a, b, c


@kernel
def _rle(b, i, k):
    """Little-endian value of k (0..4) bytes at b[i:]."""
    v = U64(0)
    for j in range(k):
        v = v | (U64(b[i + j]) << U64(8 * j))
    return v


@kernel(_SIG_HASH)
def lookup2_32(b, s, e, seed):
    a = U64(0x9E3779B9)
    bb = U64(0x9E3779B9)
    c = seed & M32
    n = e - s
    i = s
    while e - i >= 12:
        a = (a + _r32(b, i)) & M32
        bb = (bb + _r32(b, i + 4)) & M32
        c = (c + _r32(b, i + 8)) & M32
        a, bb, c = _mix(a, bb, c)
        i += 12
    c = (c + U64(n)) & M32
    r = e - i
    if r > 8:
        c = (c + (_rle(b, i + 8, r - 8) << U64(8))) & M32
    if r > 4:
        bb = (bb + _rle(b, i + 4, min(r, 8) - 4)) & M32
    if r > 0:
        a = (a + _rle(b, i, min(r, 4))) & M32
    a, bb, c = _mix(a, bb, c)
    return c


@kernel(_SIG_HASH_ID)
def _hash64_other(b, s, e, hash_id, seed):
    if hash_id == 1:
        return fnv1a64(b, s, e, seed)
    s2 = (seed * U64(2)) & M32
    s3 = (s2 + U64(1)) & M32
    if hash_id == 2:
        return (oaat32(b, s, e, s2) << U64(32)) | oaat32(b, s, e, s3)
    return (lookup2_32(b, s, e, s2) << U64(32)) | lookup2_32(b, s, e, s3)


@kernel(_SIG_HASH_ID, forceinline=True)
def hash64(b, s, e, hash_id, seed):
    """The 64-bit feature hash of :mod:`neardup.hashing` (hash ids: xxh64 0, fnv1a 1,
    jenkins-oaat 2, jenkins-lookup2 3)."""
    if hash_id == 0:
        return xxh64(b, s, e, seed)
    return _hash64_other(b, s, e, hash_id, seed)


@kernel(_SIG_HASH_ID)
def hash64_cold(b, s, e, hash_id, seed):
    """:func:`hash64` as an ordinary call (cold paths: fewer inlined copies, faster compile)."""
    return hash64(b, s, e, hash_id, seed)
