"""The paper's block code (codec="blocks"): codec (numba == pure Python == input), Huffman
code limits, per-block checksums, and the probe decoder."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup.errors import ConfigError, CorruptFileError
from neardup.index import HammingIndex
from neardup.index.codec_blocks import (
    MAX_CODE_LEN,
    decode_table,
    decode_table_py,
    encode_table,
    huffman_lengths,
    verify_table,
)


def _keys(draw_vals: list[int], dup_every: int, shift: int) -> np.ndarray:
    a = np.array([v >> shift for v in draw_vals], dtype=np.uint64)
    if dup_every and len(a):
        a[::dup_every] = a[0]
    return np.sort(a)


# ---------------------------------------------------------------------------- codec
@given(
    vals=st.lists(st.integers(0, 2**64 - 1), max_size=300),
    extremes=st.lists(st.sampled_from([0, 1, 2**63 - 1, 2**63, 2**64 - 1]), max_size=6),
    dup_every=st.integers(0, 5),
    shift=st.sampled_from([0, 0, 20, 50, 63]),  # skewed: keys crowded near 0
    block_bytes=st.sampled_from([16, 24, 64, 256, 1024]),
)
def test_codec_roundtrip_numba_equals_python(
    vals: list[int], extremes: list[int], dup_every: int, shift: int, block_bytes: int
) -> None:
    keys = np.sort(np.concatenate([_keys(vals, dup_every, shift), np.array(extremes, np.uint64)]))
    t = encode_table(keys, block_bytes)
    got = decode_table(t)
    np.testing.assert_array_equal(got, keys)
    assert decode_table_py(t) == keys.tolist()
    assert len(t.bkeys) == (1 if len(keys) else 0) or len(t.bkeys) >= 1
    if len(keys):
        np.testing.assert_array_equal(t.bkeys, keys[t.bstart.astype(np.int64)])
    verify_table(t)  # the stored CRCs are those of the blocks


def test_block_crc_is_zlib_crc32_of_key_start_payload() -> None:
    keys = np.sort(np.random.default_rng(3).integers(0, 2**64, 5000, dtype=np.uint64))
    t = encode_table(keys, 128)
    bw = 16
    for b in (0, 1, len(t.bkeys) - 1):
        raw = (
            int(t.bkeys[b]).to_bytes(8, "little")
            + int(t.bstart[b]).to_bytes(4, "little")
            + t.words[b * bw : (b + 1) * bw].astype("<u8").tobytes()
        )
        assert zlib.crc32(raw) == int(t.crc[b])


@given(counts=st.lists(st.integers(0, 2**40), min_size=65, max_size=65))
def test_huffman_lengths_are_a_prefix_code_within_the_limit(counts: list[int]) -> None:
    lens = huffman_lengths(counts)
    used = [c > 0 for c in counts]
    assert [ln > 0 for ln in lens.tolist()] == used
    assert int(lens.max(initial=0)) <= MAX_CODE_LEN
    if sum(used) >= 2:
        assert sum(2.0 ** -int(ln) for ln in lens if ln) <= 1.0


def test_huffman_length_limit_on_a_fibonacci_histogram() -> None:
    fib = [1, 1]
    while len(fib) < 65:
        fib.append(fib[-1] + fib[-2])
    lens = huffman_lengths(fib)
    assert int(lens.max()) == MAX_CODE_LEN  # unlimited Huffman would go 64 deep
    keys = np.sort(np.random.default_rng(0).integers(0, 2**64, 2000, dtype=np.uint64))
    np.testing.assert_array_equal(decode_table(encode_table(keys, 64)), keys)


def test_random_keys_compress_near_the_bound() -> None:
    n = 200_000
    keys = np.sort(np.random.default_rng(1).integers(0, 2**64, n, dtype=np.uint64))
    t = encode_table(keys, 512)
    bits = (t.words.nbytes + t.bkeys.nbytes + t.bstart.nbytes + t.crc.nbytes) * 8 / n
    bound = 64 - np.log2(n) + np.log2(np.e)
    assert bits < 1.10 * bound, (bits, bound)


def test_bad_block_bytes_and_unsorted_keys_refused() -> None:
    with pytest.raises(ConfigError, match="multiple of 8"):
        encode_table(np.zeros(3, np.uint64), 100)
    with pytest.raises(ValueError, match="sorted"):
        encode_table(np.array([3, 1], np.uint64))
    with pytest.raises(ConfigError, match="block_bytes"):
        HammingIndex(compress=True, block_bytes=12)
    with pytest.raises(ConfigError, match="compress must be True or False"):
        HammingIndex(compress=1)  # type: ignore[arg-type]
    # a brute-force plan has no tables: it stays uncompressed, and exact
    b = HammingIndex(compress=True, codec="blocks", layout="brute", buffer_size=4)
    b.add(np.arange(10, dtype=np.uint64))
    assert b.search_one(1, 1) == [(1, 0), (0, 1), (3, 1), (5, 1), (9, 1)]


def test_a_flipped_bit_names_the_table_and_block() -> None:
    keys = np.sort(np.random.default_rng(2).integers(0, 2**64, 20_000, dtype=np.uint64))
    t = encode_table(keys, 256)
    rng = np.random.default_rng(0)
    nb = len(t.bkeys)
    for _ in range(20):
        w = int(rng.integers(0, nb * 32))
        words = t.words.copy()
        words[w] ^= np.uint64(1) << np.uint64(int(rng.integers(0, 64)))
        bad = type(t)(t.n, t.block_bytes, t.lens, t.bkeys, t.bstart, t.crc, words)
        with pytest.raises(
            CorruptFileError, match=rf"table 3: checksum mismatch in block {w // 32} "
        ):
            verify_table(bad, "table 3")


@given(
    vals=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=200),
    dup_every=st.integers(0, 4),
    shift=st.sampled_from([0, 30, 60]),
    block_bytes=st.sampled_from([16, 64, 256]),
    cut=st.integers(0, 2**64 - 1),
)
def test_probe_decoder_stops_after_the_first_key_past_last(
    vals: list[int], dup_every: int, shift: int, block_bytes: int, cut: int
) -> None:
    from neardup.index.codec_blocks import _decode_until, probe_lut

    keys = _keys(vals, dup_every, shift)
    t = encode_table(keys, block_bytes)
    plut = probe_lut(t.lens)
    bw = block_bytes // 8
    buf = np.empty(block_bytes * 8 + 2, dtype=np.uint64)
    last = np.uint64(cut >> shift)
    for b in range(len(t.bkeys)):
        s = int(t.bstart[b])
        e = int(t.bstart[b + 1]) if b + 1 < len(t.bkeys) else t.n
        r = _decode_until(
            t.words, np.int64(b * bw), np.int64(bw), t.bkeys[b], e - s, plut, buf, last
        )
        want = keys[s:e]
        past = np.flatnonzero(want > last)
        assert r == (int(past[0]) + 1 if len(past) else e - s)
        np.testing.assert_array_equal(buf[:r], want[:r])


def test_search_refuses_a_block_that_does_not_decode() -> None:
    rng = np.random.default_rng(8)
    fps = rng.integers(0, 2**64, 5000, dtype=np.uint64)
    idx = HammingIndex(
        max_distance=3, expected_size=5000, compress=True, codec="blocks", layout="tables"
    )
    idx.add(fps)
    idx.optimize()
    seg = idx.snapshot().segments[0]
    # a stream where no code is valid (what a corrupt block decodes as): the probe must stop
    seg.tables.pluts[:] = 0xFFFF
    with pytest.raises(CorruptFileError, match="does not decode"):
        idx.search(fps[:200])
