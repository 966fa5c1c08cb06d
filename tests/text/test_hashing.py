"""Feature hashes: known vectors, independent implementations, numba == reference."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from neardup.errors import ConfigError
from neardup.fingerprint import _numba as nb
from neardup.text.hashing import (
    HASH_FUNCTIONS,
    HASH_IDS,
    combine64,
    feature_hash,
    fnv1a64,
    hash64,
    jenkins_lookup2,
    jenkins_oaat,
    md5_64,
    validate_hash,
    xxh64,
)

M32 = 0xFFFFFFFF


def test_fnv1a_published_vectors():
    # FNV-1a 64 test vectors (Fowler/Noll/Vo reference test suite)
    assert fnv1a64(b"") == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a64(b"foobar") == 0x85944171F73967E8


def test_oaat_published_vectors():
    # Wikipedia "Jenkins hash function" examples
    assert jenkins_oaat(b"a") == 0xCA2E9442
    assert jenkins_oaat(b"The quick brown fox jumps over the lazy dog") == 0x519E91F5


def _lookup2_independent(k: bytes, initval: int) -> int:
    """A literal transcription of lookup2.c hash() with its switch fall-through."""

    def mix(a, b, c):
        ops = (
            (13, "r"),
            (8, "l"),
            (13, "r"),
            (12, "r"),
            (16, "l"),
            (5, "r"),
            (3, "r"),
            (10, "l"),
            (15, "r"),
        )
        regs = [a, b, c]
        for i, (sh, d) in enumerate(ops):
            x, y, z = i % 3, (i + 1) % 3, (i + 2) % 3
            regs[x] = (regs[x] - regs[y] - regs[z]) & M32
            regs[x] ^= (regs[z] >> sh) if d == "r" else ((regs[z] << sh) & M32)
        return regs

    a = b = 0x9E3779B9
    c = initval
    length = len(k)
    n = length
    p = 0
    while n >= 12:
        a = (a + k[p] + (k[p + 1] << 8) + (k[p + 2] << 16) + (k[p + 3] << 24)) & M32
        b = (b + k[p + 4] + (k[p + 5] << 8) + (k[p + 6] << 16) + (k[p + 7] << 24)) & M32
        c = (c + k[p + 8] + (k[p + 9] << 8) + (k[p + 10] << 16) + (k[p + 11] << 24)) & M32
        a, b, c = mix(a, b, c)
        p += 12
        n -= 12
    c = (c + length) & M32
    table = {
        11: ("c", 24),
        10: ("c", 16),
        9: ("c", 8),
        8: ("b", 24),
        7: ("b", 16),
        6: ("b", 8),
        5: ("b", 0),
        4: ("a", 24),
        3: ("a", 16),
        2: ("a", 8),
        1: ("a", 0),
    }
    regs = {"a": a, "b": b, "c": c}
    for case in range(n, 0, -1):  # fall through from case n down to case 1
        r, sh = table[case]
        regs[r] = (regs[r] + (k[p + case - 1] << sh)) & M32
    a, b, c = mix(regs["a"], regs["b"], regs["c"])
    return c


@given(st.binary(max_size=40), st.integers(0, M32))
def test_lookup2_matches_independent_transcription(data, seed):
    assert jenkins_lookup2(data, seed) == _lookup2_independent(data, seed)


@given(st.binary(max_size=80), st.integers(0, 2**64 - 1))
def test_xxh64_is_the_xxhash_package(data, seed):
    assert xxh64(data, seed) == xxhash.xxh64_intdigest(data, seed)


def test_md5_reduction_documented():
    d = hashlib.md5(b"abc").digest()
    assert md5_64(b"abc") == int.from_bytes(d[:8], "big")
    assert feature_hash(b"abc", "md5", 0, 128) == (
        int.from_bytes(d[:8], "big"),
        int.from_bytes(d[8:], "big"),
    )
    assert md5_64(b"abc", seed=5) == int.from_bytes(
        hashlib.md5((5).to_bytes(8, "little") + b"abc").digest()[:8], "big"
    )


def test_32bit_functions_compose_to_64():
    assert hash64(b"xy", "jenkins-oaat", 3) == (jenkins_oaat(b"xy", 6) << 32) | jenkins_oaat(
        b"xy", 7
    )
    assert hash64(b"xy", "jenkins-lookup2", 0) == (
        jenkins_lookup2(b"xy", 0) << 32
    ) | jenkins_lookup2(b"xy", 1)


def test_128_bit_words_use_seed_and_seed_plus_one():
    for name in ("xxh64", "fnv1a", "jenkins-oaat", "jenkins-lookup2"):
        assert feature_hash(b"tok", name, 9, 128) == (
            hash64(b"tok", name, 9),
            hash64(b"tok", name, 10),
        )


def test_shingle_combine_definition():
    hs = [xxh64(b"a"), xxh64(b"b")]
    data = b"".join(h.to_bytes(8, "little") for h in hs)
    assert combine64(hs) == xxhash.xxh64_intdigest(data, 0)
    assert combine64(hs, "xxh64", 4, 1) == xxhash.xxh64_intdigest(data, 5)


def test_unknown_hash_is_a_config_error():
    with pytest.raises(ConfigError, match="hash must be one of"):
        validate_hash("crc32")
    assert set(HASH_FUNCTIONS) == set(HASH_IDS)


@given(
    st.binary(max_size=100),
    st.integers(0, 2**63 - 1),
    st.sampled_from(["xxh64", "fnv1a", "jenkins-oaat", "jenkins-lookup2"]),
)
def test_numba_hash_equals_reference(data, seed, name):
    arr = np.frombuffer(data, np.uint8)  # read-only, as in the kernels (reuses their compile)
    got = int(nb.hash64_cold(arr, 0, len(data), HASH_IDS[name], np.uint64(seed)))
    assert got == hash64(data, name, seed)


@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=9), st.integers(0, 2**40))
def test_numba_word_xxh64_equals_byte_xxh64(words, seed):
    n = len(words)
    ring = np.array(words, np.uint64)
    tmp = np.zeros(8 * n + 8, np.uint8)
    got = int(nb._combine(ring, 0, n, n, tmp, 0, np.uint64(seed)))
    assert got == combine64(words, "xxh64", seed)
