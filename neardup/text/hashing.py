"""Stable 64-bit feature hashes (pure Python reference definitions).

Every function here is deterministic across runs, processes (``PYTHONHASHSEED``), machines and
byte orders. The numba kernels in :mod:`neardup._simhash_numba` reimplement the same
definitions and are tested to agree bit for bit.

``hash`` names and their 64-bit definition with seed ``s`` (bytes ``data``):

``xxh64`` (default, ``s = DEFAULT_SEED = 0``)
    ``xxhash.xxh64_intdigest(data, s)``.
``fnv1a``
    FNV-1a 64 (offset basis ``0xcbf29ce484222325`` XOR ``s``, prime ``0x100000001b3``);
    with ``s = 0`` it is the standard FNV-1a 64.
``jenkins-oaat``, ``jenkins-lookup2``
    Bob Jenkins' 32-bit one-at-a-time hash (initial value = seed) and ``lookup2`` ``hash()``
    (``initval`` = seed). A 64-bit hash is two 32-bit ones:
    ``H(data, 2s mod 2**32) << 32 | H(data, 2s + 1 mod 2**32)``.
``md5``
    the first 8 bytes (big-endian) of ``md5(data)``; a non-zero seed is prefixed to the data as
    8 little-endian bytes.

For 128-bit fingerprints every feature has two words: ``hi = hash64(data, s)`` and
``lo = hash64(data, s + 1)`` (``md5``: the first and last 8 bytes of the digest). So the high
word of a 128-bit fingerprint equals the 64-bit fingerprint with the same settings.

A word shingle's hash is the hash of the little-endian concatenation of its member tokens'
words: ``hi = hash64(b''.join(h.to_bytes(8, 'little') for h in member_hi), s)`` and likewise
for ``lo`` (with ``s + 1``; ``md5``: last 8 bytes).
"""

from __future__ import annotations

import hashlib

import xxhash

from ..errors import ConfigError

__all__ = [
    "DEFAULT_SEED",
    "HASH_FUNCTIONS",
    "combine64",
    "feature_hash",
    "fnv1a64",
    "hash64",
    "jenkins_lookup2",
    "jenkins_oaat",
    "md5_64",
    "validate_hash",
    "xxh64",
]

#: the fixed, documented default seed for feature hashes
DEFAULT_SEED = 0
HASH_FUNCTIONS = ("xxh64", "jenkins-lookup2", "jenkins-oaat", "fnv1a", "md5")
#: numeric ids the numba kernels use (md5 has no kernel: it runs in Python)
HASH_IDS = {"xxh64": 0, "fnv1a": 1, "jenkins-oaat": 2, "jenkins-lookup2": 3, "md5": 4}

M64 = 0xFFFFFFFFFFFFFFFF
M32 = 0xFFFFFFFF


def validate_hash(name: str) -> str:
    if name not in HASH_FUNCTIONS:
        raise ConfigError(f"hash must be one of {HASH_FUNCTIONS}, got {name!r}")
    return name


def xxh64(data: bytes, seed: int = DEFAULT_SEED) -> int:
    """xxHash64 of ``data``.

    >>> hex(xxh64(b""))
    '0xef46db3751d8e999'
    """
    return xxhash.xxh64_intdigest(data, seed & M64)


def fnv1a64(data: bytes, seed: int = 0) -> int:
    """FNV-1a 64-bit; ``seed`` is XORed into the offset basis.

    >>> hex(fnv1a64(b"a"))
    '0xaf63dc4c8601ec8c'
    """
    h = 0xCBF29CE484222325 ^ (seed & M64)
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & M64
    return h


def jenkins_oaat(data: bytes, seed: int = 0) -> int:
    """Bob Jenkins' one-at-a-time hash (32-bit), initial value ``seed``.

    >>> hex(jenkins_oaat(b"a"))
    '0xca2e9442'
    """
    h = seed & M32
    for b in data:
        h = (h + b) & M32
        h = (h + (h << 10)) & M32
        h ^= h >> 6
    h = (h + (h << 3)) & M32
    h ^= h >> 11
    h = (h + (h << 15)) & M32
    return h


def _mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    a = (a - b - c) & M32
    a ^= c >> 13
    b = (b - c - a) & M32
    b ^= (a << 8) & M32
    c = (c - a - b) & M32
    c ^= b >> 13
    a = (a - b - c) & M32
    a ^= c >> 12
    b = (b - c - a) & M32
    b ^= (a << 16) & M32
    c = (c - a - b) & M32
    c ^= b >> 5
    a = (a - b - c) & M32
    a ^= c >> 3
    b = (b - c - a) & M32
    b ^= (a << 10) & M32
    c = (c - a - b) & M32
    c ^= b >> 15
    return a, b, c


def jenkins_lookup2(data: bytes, seed: int = 0) -> int:
    """Bob Jenkins' 1996 ``lookup2.c`` ``hash(k, length, initval)`` (32-bit)."""
    a = b = 0x9E3779B9
    c = seed & M32
    n = len(data)
    i = 0
    while n - i >= 12:
        k = data[i : i + 12]
        a = (a + int.from_bytes(k[0:4], "little")) & M32
        b = (b + int.from_bytes(k[4:8], "little")) & M32
        c = (c + int.from_bytes(k[8:12], "little")) & M32
        a, b, c = _mix(a, b, c)
        i += 12
    c = (c + n) & M32
    k = data[i:]
    r = len(k)
    # tail: bytes 8..10 go to c shifted by one byte (the low byte of c holds the length)
    if r > 8:
        c = (c + (int.from_bytes(k[8:r], "little") << 8)) & M32
    if r > 4:
        b = (b + int.from_bytes(k[4 : min(r, 8)], "little")) & M32
    if r > 0:
        a = (a + int.from_bytes(k[0 : min(r, 4)], "little")) & M32
    a, b, c = _mix(a, b, c)
    return c


def md5_64(data: bytes, seed: int = 0, word: int = 0) -> int:
    """Word ``word`` (0 = first 8 bytes, 1 = last 8 bytes, big-endian) of ``md5(data)``."""
    if seed:
        data = (seed & M64).to_bytes(8, "little") + data
    d = hashlib.md5(data, usedforsecurity=False).digest()
    return int.from_bytes(d[8 * word : 8 * word + 8], "big")


def hash64(data: bytes, name: str = "xxh64", seed: int = DEFAULT_SEED) -> int:
    """The 64-bit feature hash ``name`` of ``data`` with ``seed`` (module docstring)."""
    if name == "xxh64":
        return xxh64(data, seed)
    if name == "fnv1a":
        return fnv1a64(data, seed)
    if name == "jenkins-oaat":
        s = (2 * seed) & M32
        return (jenkins_oaat(data, s) << 32) | jenkins_oaat(data, (s + 1) & M32)
    if name == "jenkins-lookup2":
        s = (2 * seed) & M32
        return (jenkins_lookup2(data, s) << 32) | jenkins_lookup2(data, (s + 1) & M32)
    if name == "md5":
        return md5_64(data, seed, 0)
    raise ConfigError(f"hash must be one of {HASH_FUNCTIONS}, got {name!r}")


def feature_hash(
    data: bytes | str, name: str = "xxh64", seed: int = DEFAULT_SEED, bits: int = 64
) -> tuple[int, int]:
    """``(hi, lo)`` words of a feature's hash; ``lo`` is 0 when ``bits == 64``."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    hi = hash64(data, name, seed)
    if bits == 64:
        return hi, 0
    if name == "md5":
        return hi, md5_64(data, seed, 1)
    return hi, hash64(data, name, seed + 1)


def combine64(
    members: list[int], name: str = "xxh64", seed: int = DEFAULT_SEED, word: int = 0
) -> int:
    """Shingle hash word from member token hash words (little-endian concatenation)."""
    data = b"".join((h & M64).to_bytes(8, "little") for h in members)
    if name == "md5":
        return md5_64(data, seed, word)
    return hash64(data, name, seed + word)
