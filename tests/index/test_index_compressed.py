"""Compressed segments in both codecs: HammingIndex(compress=True, codec=...) identical to the
uncompressed index and to brute force, packed ids, persistence, corruption, the planner and
IndexSet's one-call path. (The codecs themselves: test_index_codec_ef.py and
test_index_codec_blocks.py.)"""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_index import assert_same, make_set, queries_for

from neardup.errors import CorruptFileError, UnsupportedVersionError
from neardup.index import HammingIndex
from neardup.index.compressed import CODECS, CompressedSegment
from neardup.index.reference import search_reference
from neardup.index.tables import plan_arrays

LAYOUTS = [
    {},
    {"layout": "two-level"},
    {"blocks": 5, "prefix_blocks": 2},
    {"blocks": 2, "prefix_blocks": 1},
    {"blocks": 4, "prefix_blocks": 1, "heavy_bucket": 1},
]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("bits", [64, 128])
@pytest.mark.parametrize("kind", ["random", "clustered", "duplicates", "adversarial"])
@pytest.mark.parametrize("layout", range(len(LAYOUTS)))
def test_compressed_search_equals_uncompressed_and_brute_force(
    codec: str, bits: int, kind: str, layout: int
) -> None:
    k = 3
    fps = make_set(kind, 1500, bits, seed=layout * 11 + bits)
    kw = dict(bits=bits, max_distance=k, expected_size=len(fps), buffer_size=256)
    kw.update(LAYOUTS[layout] or {"layout": "tables"})
    c = HammingIndex(compress=True, codec=codec, block_bytes=64, **kw)
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


# fewer examples than the profile's: one at k = 6 over 128 bits (many tables, many segments
# with buffer_size=16) costs up to ~1.5 s, and the suite once spent 77 s here; the grid test
# above covers every codec, width, kind and layout exhaustively at k = 3
@settings(max_examples=25)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 400),
    k=st.integers(0, 6),
    bits=st.sampled_from([64, 128]),
    kind=st.sampled_from(["random", "clustered", "duplicates", "adversarial"]),
    codec=st.sampled_from(CODECS),
    block_bytes=st.sampled_from([16, 64, 256]),
)
def test_property_compressed_any_k(
    seed: int, n: int, k: int, bits: int, kind: str, codec: str, block_bytes: int
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
        codec=codec,
        block_bytes=block_bytes,
    )
    idx.add(fps)
    q = queries_for(fps, seed, k, nq=20) if n else fps
    for kk in range(k + 1):
        assert_same(idx.search(q, kk), search_reference(fps, np.arange(n), q, kk))


@given(
    seed=st.integers(0, 2**32 - 1),
    ops=st.lists(st.sampled_from(["add", "big", "remove", "flush", "optimize"]), max_size=10),
    codec=st.sampled_from(CODECS),
)
def test_compressed_interleaved_add_remove_merge(seed: int, ops: list[str], codec: str) -> None:
    rng = np.random.default_rng(seed)
    pool = make_set("duplicates", 3000, 64, seed)
    idx = HammingIndex(
        max_distance=3,
        expected_size=3000,
        buffer_size=32,
        merge_factor=2,
        compress=True,
        codec=codec,
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


@pytest.mark.parametrize("codec", CODECS)
def test_compressed_segment_is_smaller(codec: str) -> None:
    fps = make_set("random", 50_000, 64, seed=9)
    c = HammingIndex(expected_size=len(fps), compress=True, codec=codec)
    u = HammingIndex(expected_size=len(fps))
    c.add(fps)
    u.add(fps)
    assert c.plan.tables == u.plan.tables
    assert c.nbytes < 0.6 * u.nbytes, (c.nbytes, u.nbytes)
    assert "compressed" in c.describe() and c.codec == codec


def test_ids_are_packed_in_the_bits_their_span_needs() -> None:
    rng = np.random.default_rng(3)
    fps = rng.integers(0, 2**64, 4000, dtype=np.uint64)
    pa = plan_arrays(HammingIndex(expected_size=4000).plan)
    for base, step in [(0, 1), (-(2**62), 3), (2**63 - 10**6, 1), (-5, 2**20), (-(2**63), 2**51)]:
        ids = base + step * rng.permutation(4000).astype(np.int64)
        seg = CompressedSegment.build(fps.reshape(-1, 1), ids, pa)
        assert seg.packed.bits == (3999 * step).bit_length()
        assert seg.nbytes == seg.tables.nbytes + seg.packed.words.nbytes
        assert sorted(seg.ids.tolist()) == sorted(ids.tolist())
        rows = np.array([0, 17, 3999])
        np.testing.assert_array_equal(seg.ids_at(rows), seg.ids[rows])


# ---------------------------------------------------------------------------- persistence
def _cindex(codec: str, bits: int = 64) -> tuple[HammingIndex, np.ndarray]:
    rng = np.random.default_rng(5)
    shape = (3000,) if bits == 64 else (3000, 2)
    fps = rng.integers(0, 2**64, shape, dtype=np.uint64)
    idx = HammingIndex(
        bits=bits,
        max_distance=3,
        expected_size=3000,
        buffer_size=500,
        compress=True,
        codec=codec,
        layout="tables",
    )
    idx.add(fps[:2000])
    idx.add(fps[2000:2300], ids=np.arange(2300, 2000, -1) * 7)
    idx.add(fps[2300:2400])  # stays in the buffer
    idx.add(fps[2400:2900], ids=np.arange(500) + 2**40)  # ids spanning 2**40: 41 bits
    idx.remove([5, 6, 2300 * 7])
    return idx, fps


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("bits", [64, 128])
def test_compressed_save_load_identical(tmp_path, codec: str, bits: int) -> None:
    idx, fps = _cindex(codec, bits)
    q = fps[::7]
    want = idx.search(q)
    assert (want[1] >= 2**40).any()
    idx.save(tmp_path / "a.idx")
    assert struct.unpack_from("<I", (tmp_path / "a.idx").read_bytes(), 8)[0] == 1
    a = HammingIndex.load(tmp_path / "a.idx")
    assert a.compressed and a.codec == codec
    a.save(tmp_path / "b.idx")
    for mmap in (False, True):
        b = HammingIndex.load(tmp_path / "b.idx", mmap=mmap)
        segs = b.snapshot().segments
        assert b.compressed and all(isinstance(s, CompressedSegment) for s in segs)
        assert {s.codec for s in segs} == {codec}
        for g, w in zip(b.search(q), want, strict=True):
            np.testing.assert_array_equal(g, w)
        assert len(b) == len(idx) and (5 in b) is False
    a.add(fps[:1] ^ np.uint64(1), ids=[10**9])
    a.optimize()
    assert 10**9 in a


def test_uncompressed_and_compressed_files_are_version_1(tmp_path) -> None:
    for kw in ({}, {"compress": True}):
        idx = HammingIndex(expected_size=1000, layout="tables", **kw)
        idx.add(np.arange(1, 600, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
        idx.flush()
        idx.save(tmp_path / "u.idx")
        raw = (tmp_path / "u.idx").read_bytes()
        assert struct.unpack_from("<I", raw, 8)[0] == 1
        assert len(HammingIndex.load(tmp_path / "u.idx")) == 599
        for v in (2, 3):  # layouts of earlier unreleased builds: refused, by version
            b = bytearray(raw)
            b[8:12] = struct.pack("<I", v)
            (tmp_path / "v.idx").write_bytes(bytes(b))
            with pytest.raises(UnsupportedVersionError, match=f"version {v}"):
                HammingIndex.load(tmp_path / "v.idx")


def _flip_in_section(raw: bytes, name: str, at: int) -> bytes:
    hdr_len = struct.unpack_from("<Q", raw, 16)[0]
    header = json.loads(raw[32 : 32 + hdr_len])
    data_start = -(-(32 + hdr_len) // 64) * 64
    sec = next(s for s in header["sections"] if s["name"] == name)
    b = bytearray(raw)
    b[data_start + sec["offset"] + at] ^= 0x10
    return bytes(b)


@pytest.mark.parametrize(
    ("codec", "section", "at", "names"),
    [
        ("blocks", "s0.c.words", 600, r"segment 0 table 0: checksum mismatch in block 2 "),
        ("ef", "s0.ef.lo", 600, r"segment 0 table 0: checksum mismatch in its Elias-Fano"),
        ("ef", "s0.ef.hi", 4 * 8 * 3 + 700, r"segment 0 table 3: checksum mismatch"),
    ],
)
def test_compressed_file_corruption_names_the_table(
    tmp_path, codec: str, section: str, at: int, names: str
) -> None:
    idx, _ = _cindex(codec)
    p = tmp_path / "c.idx"
    idx.save(p)
    raw = p.read_bytes()
    seg = idx.snapshot().segments[0]
    if codec == "ef":  # hi/lo rows are tables: aim the byte at the table named
        arr = getattr(seg.tables, section.split(".")[-1])
        t = int(names.split("table ")[1][0])
        at = t * arr.shape[1] * 8 + (at % (arr.shape[1] * 8))
    bad = tmp_path / "bad.idx"
    bad.write_bytes(_flip_in_section(raw, section, at))
    with pytest.raises(CorruptFileError, match=r"bad\.idx: " + names):
        HammingIndex.load(bad)
    # without verification the mapped file opens; a search there may answer wrongly but never
    # crashes, and the explicit check names the table
    loaded = HammingIndex.load(bad, mmap=True, verify=False)
    loaded.search(np.arange(50, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    with pytest.raises(CorruptFileError, match=names.split(": ")[-1].strip()):
        loaded.snapshot().segments[0].verify()
    bad.write_bytes(raw[: len(raw) - 100])
    with pytest.raises(CorruptFileError, match="truncated"):
        HammingIndex.load(bad)


@pytest.mark.parametrize(
    ("section", "at"), [("s0.c.boff", 8 + 6), ("s0.c.lens", 2), ("s0.ef.dirs", 4 * 100 + 3)]
)
def test_inconsistent_arrays_are_refused_before_a_probe_reads_them(
    tmp_path, section: str, at: int
) -> None:
    """Loaded without verification, arrays that do not fit together (a block offset, a code
    length, a directory count far off) raise CorruptFileError on open, never reach a kernel."""
    idx, _ = _cindex("blocks" if ".c." in section else "ef")
    p = tmp_path / "c.idx"
    idx.save(p)
    # a flipped high bit (a block offset or a count of 2**28 more); a code length of 2 + 16
    (tmp_path / "bad.idx").write_bytes(_flip_in_section(p.read_bytes(), section, at))
    with pytest.raises(CorruptFileError, match="inconsistent"):
        HammingIndex.load(tmp_path / "bad.idx", mmap=True, verify=False)


@pytest.mark.parametrize("codec", CODECS)
def test_compressed_segment_build_matches_plan_arrays(codec: str) -> None:
    fps = make_set("duplicates", 2000, 64, seed=4)
    idx = HammingIndex(expected_size=2000)
    pa = plan_arrays(idx.plan)
    seg = CompressedSegment.build(fps.reshape(-1, 1), np.arange(2000), pa, 64, codec)
    np.testing.assert_array_equal(np.sort(seg.fps[:, 0]), np.sort(fps))
    rows = np.array([0, 5, 1999, 777])
    np.testing.assert_array_equal(seg.fps_at(rows), seg.fps[rows])


# ---------------------------------------------------------------------------- planner
def test_planner_weighs_compressed_layouts() -> None:
    from neardup.index import plan_index

    n = 10_000_000
    u = plan_index(64, 3, n, memory_budget=32 * n)
    for codec in CODECS:
        c = plan_index(64, 3, n, memory_budget=32 * n, compress=True, codec=codec)
        # compressed tables are smaller, so the same budget fits more tables (faster probes)
        assert c.n_tables > u.n_tables and c.est_bytes_per_fp <= 32
        lean = plan_index(64, 3, n, layout="tables", compress=True, codec=codec,
                          memory_budget=20 * n)  # fmt: skip
        assert c.est_query_ns < lean.est_query_ns
        same = plan_index(64, 3, n, blocks=4, prefix_blocks=1, compress=True, codec=codec)
        plain = plan_index(64, 3, n, blocks=4, prefix_blocks=1)
        assert same.tables == plain.tables
        assert same.est_bytes_per_fp < 0.7 * plain.est_bytes_per_fp
        assert same.est_query_ns > plain.est_query_ns  # each probe also decodes
        idx = HammingIndex(expected_size=n, memory_budget=32 * n, compress=True, codec=codec)
        assert idx.plan.tables == c.tables
    # without compression four tables would not fit 32 B/fp
    assert plan_index(64, 3, n, blocks=4, prefix_blocks=1).est_bytes_per_fp > 32
    ef = plan_index(64, 3, n, blocks=4, prefix_blocks=1, compress=True)
    blk = plan_index(64, 3, n, blocks=4, prefix_blocks=1, compress=True, codec="blocks")
    assert ef.est_query_ns < blk.est_query_ns  # no serial chain to the bucket


def test_compress_without_a_budget_does_not_spend_the_saving_on_more_bytes() -> None:
    from neardup.index import plan_index

    for n in (2_000_000, 10_000_000, 25_000_000, 50_000_000):
        c = plan_index(64, 3, n, compress=True)
        # the default plan is compressed to at most the compressed default cap, and is
        # never larger than the uncompressed default plan
        assert c.est_bytes_per_fp <= 32 < plan_index(64, 3, n).est_bytes_per_fp
        assert c.n_tables == 4  # the fast layout (at 50 M its 16-bit buckets hold ~760 keys)


# ---------------------------------------------------------------------------- IndexSet
def test_index_set_searches_compressed_and_plain_indexes_exactly() -> None:
    from neardup.index.multi import IndexSet

    fps = make_set("clustered", 4500, 64, seed=8)
    a = HammingIndex(expected_size=3000, layout="tables", compress=True)
    c = HammingIndex(expected_size=3000, layout="tables", compress=True, codec="blocks")
    b = HammingIndex(expected_size=3000, layout="tables")
    a.add(fps[:1500])
    b.add(fps[1500:3000], ids=np.arange(1500, 3000))
    c.add(fps[3000:], ids=np.arange(3000, 4500))
    for ix in (a, b, c):
        ix.flush()
    s = IndexSet([a, b, c])
    assert s._rest == [] and s._n_csegs == 2 and s.segments == 1
    q = queries_for(fps, 8, 3, nq=40)
    assert_same(s.search(q, 3), search_reference(fps, np.arange(4500), q, 3))
    s2 = IndexSet([b], sealed=[a])
    assert not s2.sealed_ok  # the set does not cover a compressed sealed index


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("bits", [64, 128])
def test_index_set_probes_compressed_segments_in_one_call(codec: str, bits: int) -> None:
    """IndexSet gathers compressed segments of several indexes (removed rows, narrow and
    wide ids, mmapped or not) into one typed list: the same as searching each and brute
    force."""
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
            ids[-1] = 2**62  # 63-bit id offsets
        ix = HammingIndex(bits=bits, max_distance=3, expected_size=hi - lo, compress=True,
                          codec=codec, layout="tables")  # fmt: skip
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
    # one segment's list search equals its kernel called with every array (rows -> ids,
    # dead rows dropped)
    seg = idxs[1].snapshot().segments[0]
    pa = idxs[1].snapshot().arrays
    q2 = q.reshape(len(q), -1)
    qi, r, d = seg.search_rows(q2, 3, pa)
    m = seg.alive[r] if seg.alive is not None else np.ones(len(r), bool)
    got = sorted(zip(*(a.tolist() for a in seg.search(q2, 3, pa)), strict=True))
    assert got == sorted(zip(qi[m].tolist(), seg.ids_at(r[m]).tolist(), d[m].tolist(),
                             strict=True))  # fmt: skip
