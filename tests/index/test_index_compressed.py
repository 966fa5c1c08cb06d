"""Block-compressed tables: codec (numba == pure Python == input), checksums, and
HammingIndex(compress=True) identical to the uncompressed index and to brute force."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_index import assert_same, make_set, queries_for

from neardup.errors import ConfigError, CorruptFileError, UnsupportedVersionError
from neardup.index import HammingIndex
from neardup.index.compressed import (
    MAX_CODE_LEN,
    CompressedSegment,
    decode_table,
    decode_table_py,
    encode_table,
    huffman_lengths,
    verify_table,
)
from neardup.index.reference import search_reference
from neardup.index.tables import plan_arrays


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
    b = HammingIndex(compress=True, layout="brute", buffer_size=4)
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


# ---------------------------------------------------------------------------- index
LAYOUTS = [
    {},
    {"layout": "two-level"},
    {"blocks": 5, "prefix_blocks": 2},
    {"blocks": 2, "prefix_blocks": 1},
    {"blocks": 4, "prefix_blocks": 1, "heavy_bucket": 1},
]


@pytest.mark.parametrize("bits", [64, 128])
@pytest.mark.parametrize("kind", ["random", "clustered", "duplicates", "adversarial"])
@pytest.mark.parametrize("layout", range(len(LAYOUTS)))
def test_compressed_search_equals_uncompressed_and_brute_force(
    bits: int, kind: str, layout: int
) -> None:
    k = 3
    fps = make_set(kind, 1500, bits, seed=layout * 11 + bits)
    kw = dict(bits=bits, max_distance=k, expected_size=len(fps), buffer_size=256)
    kw.update(LAYOUTS[layout] or {"layout": "tables"})
    c = HammingIndex(compress=True, block_bytes=64, **kw)
    u = HammingIndex(**kw)
    for idx in (c, u):
        idx.add(fps[:1000])
        for s in range(1000, len(fps), 100):
            idx.add(fps[s : s + 100])
    assert any(isinstance(s, CompressedSegment) for s in c.snapshot().segments)
    q = queries_for(fps, layout, k)
    ids = np.arange(len(fps))
    for kk in range(k + 1):
        want = search_reference(fps, ids, q, kk)
        assert_same(c.search(q, kk), want)
        assert_same(u.search(q, kk), want)
    for qq in q[:20]:
        assert c.search_one(qq) == u.search_one(qq)
    np.testing.assert_array_equal(c.get(ids[::7]), fps[::7])


@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 400),
    k=st.integers(0, 6),
    bits=st.sampled_from([64, 128]),
    kind=st.sampled_from(["random", "clustered", "duplicates", "adversarial"]),
    block_bytes=st.sampled_from([16, 64, 256]),
)
def test_property_compressed_any_k(
    seed: int, n: int, k: int, bits: int, kind: str, block_bytes: int
) -> None:
    fps = (
        make_set(kind, n, bits, seed, k=max(k, 1))
        if n
        else np.zeros((0,) if bits == 64 else (0, 2), np.uint64)
    )
    idx = HammingIndex(
        bits=bits,
        max_distance=k,
        expected_size=max(n, 1) * 1000,
        layout="tables",
        buffer_size=16,
        compress=True,
        block_bytes=block_bytes,
    )
    idx.add(fps)
    q = queries_for(fps, seed, k, nq=20) if n else fps
    assert_same(idx.search(q), search_reference(fps, np.arange(n), q, k))


@given(
    seed=st.integers(0, 2**32 - 1),
    ops=st.lists(st.sampled_from(["add", "big", "remove", "flush", "optimize"]), max_size=10),
)
def test_compressed_interleaved_add_remove_merge(seed: int, ops: list[str]) -> None:
    rng = np.random.default_rng(seed)
    pool = make_set("duplicates", 3000, 64, seed)
    idx = HammingIndex(
        max_distance=3, expected_size=3000, buffer_size=32, merge_factor=2, compress=True
    )
    live: dict[int, int] = {}
    next_id = 1000
    for op in ops:
        if op in ("add", "big"):
            m = int(rng.integers(1, 20 if op == "add" else 300))
            ids = np.arange(next_id, next_id + m) * 3
            next_id += m
            f = pool[rng.integers(0, len(pool), m)]
            idx.add(f, ids)
            live.update(zip(ids.tolist(), f.tolist(), strict=True))
        elif op == "remove" and live:
            victims = rng.choice(list(live), min(len(live), 25), replace=False)
            assert idx.remove(victims) == len(victims)
            for v in victims.tolist():
                del live[v]
        elif op == "optimize":
            idx.optimize()
        else:
            idx.flush()
        assert len(idx) == len(live)
    ids = np.array(list(live), dtype=np.int64)
    fps = np.array(list(live.values()), dtype=np.uint64)
    q = queries_for(pool, seed, 3, nq=30)
    assert_same(idx.search(q), search_reference(fps, ids, q, 3))
    if len(ids):
        np.testing.assert_array_equal(idx.get(ids), fps)


def test_compressed_segment_is_smaller() -> None:
    fps = make_set("random", 50_000, 64, seed=9)
    c = HammingIndex(expected_size=len(fps), compress=True)
    u = HammingIndex(expected_size=len(fps))
    c.add(fps)
    u.add(fps)
    assert c.plan.tables == u.plan.tables
    assert c.nbytes < 0.6 * u.nbytes, (c.nbytes, u.nbytes)
    assert "compressed" in c.describe()


# ---------------------------------------------------------------------------- persistence
def _cindex(bits: int = 64) -> tuple[HammingIndex, np.ndarray]:
    rng = np.random.default_rng(5)
    shape = (3000,) if bits == 64 else (3000, 2)
    fps = rng.integers(0, 2**64, shape, dtype=np.uint64)
    idx = HammingIndex(
        bits=bits,
        max_distance=3,
        expected_size=3000,
        buffer_size=500,
        compress=True,
        layout="tables",
    )
    idx.add(fps[:2000])
    idx.add(fps[2000:2300], ids=np.arange(2300, 2000, -1) * 7)
    idx.add(fps[2300:2400])  # stays in the buffer
    idx.remove([5, 6, 2300 * 7])
    return idx, fps


@pytest.mark.parametrize("bits", [64, 128])
def test_compressed_save_load_identical(tmp_path, bits: int) -> None:
    idx, fps = _cindex(bits)
    q = fps[::7]
    want = idx.search(q)
    idx.save(tmp_path / "a.idx")
    assert struct.unpack_from("<I", (tmp_path / "a.idx").read_bytes(), 8)[0] == 3  # u32 ids
    a = HammingIndex.load(tmp_path / "a.idx")
    assert all(s.id_off is not None for s in a.snapshot().segments)
    assert a.compressed
    a.save(tmp_path / "b.idx")
    for mmap in (False, True):
        b = HammingIndex.load(tmp_path / "b.idx", mmap=mmap)
        assert b.compressed and all(isinstance(s, CompressedSegment) for s in b.snapshot().segments)
        for g, w in zip(b.search(q), want, strict=True):
            np.testing.assert_array_equal(g, w)
        assert len(b) == len(idx) and (5 in b) is False
    a.add(fps[:1] ^ np.uint64(1), ids=[10**9])
    a.optimize()
    assert 10**9 in a


@pytest.mark.parametrize(
    ("base", "step"),
    [(0, 1), (-(2**62), 3), (2**63 - 10**6, 1), (-5, 2**20)],  # span 3999 * 2**20 < 2**32
)
def test_ids_spanning_under_2_32_cost_4_bytes(base: int, step: int) -> None:
    rng = np.random.default_rng(3)
    fps = rng.integers(0, 2**64, 4000, dtype=np.uint64)
    ids = base + step * rng.permutation(4000).astype(np.int64)
    pa = plan_arrays(HammingIndex(expected_size=4000).plan)
    seg = CompressedSegment.build(fps.reshape(-1, 1), ids, pa)
    assert seg.id_off is not None and seg.id_off.dtype == np.uint32
    lut_bytes = seg.luts.nbytes + seg.pluts.nbytes
    assert seg.nbytes == seg.ct.nbytes + seg.dirs.nbytes + lut_bytes + 4 * 4000
    assert sorted(seg.ids.tolist()) == sorted(ids.tolist())
    rows = np.array([0, 17, 3999])
    np.testing.assert_array_equal(seg.ids_at(rows), seg.ids[rows])


def test_ids_spanning_2_32_or_more_stay_int64_and_save_as_version_2(tmp_path) -> None:
    rng = np.random.default_rng(4)
    fps = rng.integers(0, 2**64, 3000, dtype=np.uint64)
    ids = np.arange(3000, dtype=np.int64)
    ids[-1] = 2**32  # span 2**32: does not fit u32 offsets
    idx = HammingIndex(max_distance=3, expected_size=3000, compress=True, layout="tables")
    idx.add(fps, ids=ids)
    idx.optimize()
    seg = idx.snapshot().segments[0]
    assert seg.id_off is None and seg.ids.dtype == np.int64
    want = idx.search(fps[-700:] ^ np.uint64(3))
    assert 2**32 in want[1]
    idx.save(tmp_path / "w.idx")
    # the int64 id section is the v2 layout: files written by the previous build load the same
    assert struct.unpack_from("<I", (tmp_path / "w.idx").read_bytes(), 8)[0] == 2
    b = HammingIndex.load(tmp_path / "w.idx")
    for g, w in zip(b.search(fps[-700:] ^ np.uint64(3)), want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_uncompressed_files_stay_version_1(tmp_path) -> None:
    idx = HammingIndex(expected_size=1000)
    idx.add(np.arange(1, 600, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    idx.flush()
    idx.save(tmp_path / "u.idx")
    assert struct.unpack_from("<I", (tmp_path / "u.idx").read_bytes(), 8)[0] == 1
    assert len(HammingIndex.load(tmp_path / "u.idx")) == 599


def test_compressed_file_corruption_names_table_and_block(tmp_path) -> None:
    idx, _ = _cindex()
    p = tmp_path / "c.idx"
    idx.save(p)
    raw = p.read_bytes()
    hdr_len = struct.unpack_from("<Q", raw, 16)[0]
    import json

    header = json.loads(raw[32 : 32 + hdr_len])
    data_start = -(-(32 + hdr_len) // 64) * 64
    sec = next(s for s in header["sections"] if s["name"] == "s0.c.words")
    bad = tmp_path / "bad.idx"
    b = bytearray(raw)
    b[data_start + sec["offset"] + 600] ^= 0x10  # word 75: block 2 of table 0 (32 words/block)
    bad.write_bytes(bytes(b))
    with pytest.raises(
        CorruptFileError, match=r"bad\.idx: segment 0 table 0: checksum mismatch in block 2 "
    ):
        HammingIndex.load(bad)
    # without verification the mapped file opens; a search there meets the block or not,
    # but never crashes, and the explicit check names the block
    loaded = HammingIndex.load(bad, mmap=True, verify=False)
    with pytest.raises(CorruptFileError, match="block 2"):
        loaded.snapshot().segments[0].verify()
    bad.write_bytes(raw[: len(raw) - 100])
    with pytest.raises(CorruptFileError, match="truncated"):
        HammingIndex.load(bad)
    b = bytearray(raw)
    b[8:12] = struct.pack("<I", 4)
    bad.write_bytes(bytes(b))
    with pytest.raises(UnsupportedVersionError, match="version 4"):
        HammingIndex.load(bad)


def test_compressed_segment_build_matches_plan_arrays() -> None:
    fps = make_set("duplicates", 2000, 64, seed=4)
    idx = HammingIndex(expected_size=2000)
    pa = plan_arrays(idx.plan)
    seg = CompressedSegment.build(fps.reshape(-1, 1), np.arange(2000), pa, 64)
    np.testing.assert_array_equal(np.sort(seg.fps[:, 0]), np.sort(fps))
    rows = np.array([0, 5, 1999, 777])
    np.testing.assert_array_equal(seg.fps_at(rows), seg.fps[rows])


def test_planner_weighs_compressed_layouts() -> None:
    from neardup.index import plan_index

    n = 10_000_000
    u = plan_index(64, 3, n, memory_budget=32 * n)
    c = plan_index(64, 3, n, memory_budget=32 * n, compress=True)
    # compressed tables are smaller, so the same budget fits more tables (faster probes)
    assert c.n_tables > u.n_tables and c.est_bytes_per_fp <= 32
    assert c.est_query_ns < plan_index(64, 3, n, layout="tables", compress=True,
                                       memory_budget=20 * n).est_query_ns  # fmt: skip
    # without compression those tables would not fit
    assert plan_index(64, 3, n, blocks=4, prefix_blocks=1).est_bytes_per_fp > 32
    same = plan_index(64, 3, n, blocks=4, prefix_blocks=1, compress=True)
    plain = plan_index(64, 3, n, blocks=4, prefix_blocks=1)
    assert same.tables == plain.tables
    assert same.est_bytes_per_fp < 0.7 * plain.est_bytes_per_fp
    assert same.est_query_ns > plain.est_query_ns  # each probe also decodes
    idx = HammingIndex(expected_size=n, memory_budget=32 * n, compress=True)
    assert idx.plan.tables == c.tables


def test_compress_without_a_budget_does_not_spend_the_saving_on_more_bytes() -> None:
    from neardup.index import plan_index

    for n in (2_000_000, 10_000_000, 50_000_000):
        c = plan_index(64, 3, n, compress=True)
        # the default plan is compressed to at most the compressed default cap, and is
        # never larger than the uncompressed default plan (at 10 M it was 10 tables, 61 B/fp)
        assert c.est_bytes_per_fp <= 32 < plan_index(64, 3, n).est_bytes_per_fp
        if n <= 10_000_000:  # still the fast layout (at 50 M its 16-bit buckets hold ~760 keys)
            assert c.n_tables == 4


def test_index_set_searches_compressed_and_plain_indexes_exactly() -> None:
    from neardup.index.multi import IndexSet

    fps = make_set("clustered", 3000, 64, seed=8)
    a = HammingIndex(expected_size=3000, layout="tables", compress=True)
    b = HammingIndex(expected_size=3000, layout="tables")
    a.add(fps[:1500])
    b.add(fps[1500:], ids=np.arange(1500, 3000))
    a.flush()
    b.flush()
    s = IndexSet([a, b])
    assert s._rest == [] and s._n_csegs == 1 and s.segments == 1
    q = queries_for(fps, 8, 3, nq=40)
    assert_same(s.search(q, 3), search_reference(fps, np.arange(3000), q, 3))
    s2 = IndexSet([b], sealed=[a])
    assert not s2.sealed_ok  # the set does not cover a compressed sealed index


# ---------------------------------------------------------------------------- probe decoder
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
    from neardup.index.compressed import _decode_until, probe_lut

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
    idx = HammingIndex(max_distance=3, expected_size=5000, compress=True, layout="tables")
    idx.add(fps)
    idx.optimize()
    seg = idx.snapshot().segments[0]
    # a stream where no code is valid (what a corrupt block decodes as): the probe must stop
    seg.pluts[:] = 0xFFFF
    with pytest.raises(CorruptFileError, match="does not decode"):
        idx.search(fps[:200])


@pytest.mark.parametrize("bits", [64, 128])
def test_index_set_probes_compressed_segments_in_one_call(bits: int) -> None:
    """IndexSet gathers compressed segments of several indexes (removed rows, u32 and int64
    ids, mmapped or not) into one typed list: the same as searching each and brute force."""
    from neardup.index.multi import IndexSet

    rng = np.random.default_rng(11)
    shape = (6000,) if bits == 64 else (6000, 2)
    fps = rng.integers(0, 2**64, shape, dtype=np.uint64)
    fps[3000:3500] = fps[:500] ^ np.uint64(5)  # near duplicates across indexes
    parts = [(0, 2500, 0), (2500, 4000, 10**6), (4000, 6000, 0)]
    idxs, all_ids = [], []
    for lo, hi, off in parts:
        ids = np.arange(lo, hi, dtype=np.int64) + off
        if lo == 4000:
            ids[-1] = 2**40  # spans >= 2**32: int64 ids
        ix = HammingIndex(bits=bits, max_distance=3, expected_size=hi - lo, compress=True,
                          layout="tables")  # fmt: skip
        ix.add(fps[lo:hi], ids=ids)
        ix.optimize()
        idxs.append(ix)
        all_ids.append(ids)
    gone = [all_ids[0][3], all_ids[1][7], all_ids[2][-1]]
    for ix, g in zip(idxs, gone, strict=True):
        ix.remove([g])
    one = IndexSet(idxs)
    assert one._n_csegs == 3 and not one._rest
    ids = np.concatenate(all_ids)
    keep = ~np.isin(ids, gone)
    planted = fps[::37].copy()
    planted.reshape(len(planted), -1)[:, 0] ^= np.uint64(3)  # distance 2
    q = np.concatenate([planted, rng.integers(0, 2**64, (50, *shape[1:]), dtype=np.uint64)])
    want = search_reference(fps[keep], ids[keep], q, 3)
    assert len(want[1])
    for qs in (q, q[:3]):  # the GIL-holding variant for a few queries
        w = search_reference(fps[keep], ids[keep], qs, 3)
        assert_same(one.search(qs, 3), w)
    # one segment's typed-list search equals its 34-argument kernel (rows -> ids, dead dropped)
    seg = idxs[1].snapshot().segments[0]
    pa = idxs[1].snapshot().arrays
    q2 = q.reshape(len(q), -1)
    qi, r, d = seg.search_rows(q2, 3, pa)
    m = seg.alive[r] if seg.alive is not None else np.ones(len(r), bool)
    got = sorted(zip(*(a.tolist() for a in seg.search(q2, 3, pa)), strict=True))
    assert got == sorted(zip(qi[m].tolist(), seg.ids_at(r[m]).tolist(), d[m].tolist(),
                             strict=True))  # fmt: skip
