"""The online MinHash channel: a document checked online decides like ``neardup dedup`` on the
window plus that document; atomicity; band keys survive close/reopen, flushes, merges and a
torn log; segments with and without the band-key section; the stored mode."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.batch.run import dedup
from neardup.errors import ConfigError, CorruptFileError, UnsupportedVersionError
from neardup.index.bands import BandIndex, BandSection, lookup, sort_entries
from neardup.index.reference import lookup_reference
from neardup.online.deduplicator import Deduplicator
from neardup.store.layout import read_json_file, write_json_file
from neardup.store.segment import open_segment, write_segment

_WORDS = [
    "river",
    "stone",
    "market",
    "winter",
    "garden",
    "signal",
    "copper",
    "window",
    "silver",
    "yellow",
    "morning",
    "letter",
    "engine",
    "harbor",
    "forest",
    "candle",
    "mirror",
    "thunder",
    "orange",
    "pocket",
    "castle",
    "bridge",
    "shadow",
    "ticket",
    "planet",
    "muscle",
    "rabbit",
    "violin",
    "meadow",
    "canvas",
    "kettle",
    "lantern",
    "anchor",
    "basket",
    "feather",
    "island",
]
_CJK = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可也你"


def _corpus(seed: int, n_base: int = 60) -> list[str]:
    """Base texts (English words, some Chinese) and edited copies of many of them: swapped,
    dropped and inserted words, so many copies are beyond SimHash distance 3."""
    rng = random.Random(seed)
    out: list[str] = []
    for _ in range(n_base):
        if rng.random() < 0.25:
            base = "".join(rng.choice(_CJK) for _ in range(rng.randint(20, 60)))
            out.append(base)
            for _ in range(rng.randint(0, 2)):
                chars = list(base)
                for _ in range(rng.randint(1, 4)):
                    chars[rng.randrange(len(chars))] = rng.choice(_CJK)
                out.append("".join(chars))
            continue
        words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 60))]
        out.append(" ".join(words))
        for _ in range(rng.randint(0, 3)):
            w = list(words)
            for _ in range(rng.randint(1, max(1, len(w) // 6))):
                k = rng.randrange(len(w))
                op = rng.random()
                if op < 0.4:
                    w[k] = rng.choice(_WORDS)
                elif op < 0.7 and len(w) > 3:
                    del w[k]
                else:
                    w.insert(k, rng.choice(_WORDS))
            out.append(" ".join(w))
    rng.shuffle(out)
    return out


def _batch_pairs(texts: list[str]) -> dict[int, set[int]]:
    r = dedup(texts)
    found: dict[int, set[int]] = {}
    for a, b in zip(r.pairs.a.tolist(), r.pairs.b.tolist(), strict=True):
        found.setdefault(a, set()).add(b)
        found.setdefault(b, set()).add(a)
    return found


def _online_pairs(texts: list[str], d: Deduplicator) -> dict[int, set[int]]:
    """Add every text (``add``: kept whatever it matches), then check each under a new id;
    a document's pairs are its matches other than its own stored copy."""
    d.add([{"id": str(i), "text": t} for i, t in enumerate(texts)])
    got = d.check([{"id": f"q{i}", "text": t} for i, t in enumerate(texts)])
    return {
        i: {int(m.id) for m in dec.matches} - {i}
        for i, dec in enumerate(got)
        if {int(m.id) for m in dec.matches} - {i}
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_window_decides_like_batch(seed: int) -> None:
    texts = _corpus(seed)
    batch = _batch_pairs(texts)
    with Deduplicator.open(max_matches=len(texts)) as d:
        assert d.candidates == "lsh"
        online = _online_pairs(texts, d)
    assert online == batch
    # the channel matters here: pairs beyond SimHash distance 3 are found
    with Deduplicator.open(max_matches=len(texts), candidates="simhash") as d:
        classic = _online_pairs(texts, d)
    assert sum(map(len, classic.values())) < sum(map(len, batch.values()))


def test_a_store_with_compressed_texts_decides_like_batch(tmp_path, monkeypatch) -> None:
    """Verification reads the stored texts: once the store has trained its text dictionary
    (after 40 texts here) they are compressed in SQLite, and the decisions stay the batch's,
    before and after a reopen (every candidate's text then comes from SQLite)."""
    import sqlite3

    from neardup.store import textcodec

    monkeypatch.setattr(textcodec, "TRAIN_MIN_TEXTS", 40)
    texts = _corpus(4)
    batch = _batch_pairs(texts)
    with Deduplicator.open(tmp_path, max_matches=len(texts)) as d:
        assert _online_pairs(texts, d) == batch
    db = sqlite3.connect(tmp_path / "meta.sqlite3")
    packed = db.execute(
        "SELECT count(*) FROM docs WHERE flags & ? AND typeof(text) = 'blob'",
        (textcodec.TEXT_ZSTD_FLAG,),
    ).fetchone()[0]
    db.close()
    assert packed > len(texts) // 2
    with Deduplicator.open(tmp_path) as d:
        got = d.check([{"id": f"q{i}", "text": t} for i, t in enumerate(texts)])
        again = {
            i: {int(m.id) for m in dec.matches} - {i}
            for i, dec in enumerate(got)
            if {int(m.id) for m in dec.matches} - {i}
        }
        assert again == batch
        assert d.get(str(len(texts) - 1))["text"] == texts[-1]


@pytest.mark.shared
@pytest.mark.slow
def test_dev_slice_decides_like_batch(dev_data) -> None:
    texts = []
    with (dev_data / "docs.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            texts.append(json.loads(line)["text"])
            if len(texts) == 2000:
                break
    batch = _batch_pairs(texts)
    with Deduplicator.open(max_matches=len(texts)) as d:
        online = _online_pairs(texts, d)
    assert online == batch
    assert sum(map(len, batch.values())) > 100  # the slice holds near duplicates


def _lsh_only_pair() -> tuple[str, str]:
    """Two texts that verify as near duplicates at SimHash distance > 3."""
    from neardup.fingerprint.simhash import Fingerprinter

    fpr = Fingerprinter()
    rng = random.Random(7)
    for _ in range(500):
        words = [rng.choice(_WORDS) for _ in range(30)]
        a = " ".join(words)
        w = list(words)
        for k in rng.sample(range(30), 3):
            w[k] = rng.choice(_WORDS)
        b = " ".join(w)
        fa, fb = fpr.fingerprint_many([a, b])
        if (int(fa) ^ int(fb)).bit_count() > 6:
            r = dedup([a, b])
            if len(r.pairs):
                return a, b
    raise AssertionError("no pair found")


def test_atomic_group_keeps_one_of_far_simhash_duplicates() -> None:
    a, b = _lsh_only_pair()
    with Deduplicator.open() as d:
        got = d.check_and_add([{"id": "a", "text": a}, {"id": "b", "text": b}])
        assert [x.added for x in got] == [True, False]
        assert got[1].matches[0].id == "a" and got[1].matches[0].distance > 3
    with Deduplicator.open(candidates="simhash") as d:  # the classic mode misses it
        got = d.check_and_add([{"id": "a", "text": a}, {"id": "b", "text": b}])
        assert [x.added for x in got] == [True, True]


def test_a_groups_own_pairs_count_only_after_a_document_it_may_add(monkeypatch) -> None:
    """Keep-first within a write group: a check adds nothing, so a group of checks looks for
    no pairs inside itself (each document is decided against the store alone), and in a mixed
    group only documents of adding ops match later ones, in both channels."""
    from neardup.online.decide import Op

    a, b = _lsh_only_pair()
    with Deduplicator.open() as d:
        decider = d._decider

        def group(*ops: tuple[str, str, str]) -> list[list[tuple[str, bool, bool, list[str]]]]:
            batch = [Op(kind, d.prepare([{"id": i, "text": t}])) for kind, i, t in ops]
            out, _ = decider.decide(batch, None)
            return [
                [(x.id, x.duplicate, x.added, [m.id for m in x.matches]) for x in r] for r in out
            ]

        # checks only: nothing to pair (the pair searches are not even run)
        with monkeypatch.context() as m:
            for name in ("intra_pairs", "_lsh_intra"):
                m.setattr(decider, name, lambda *args, n=name: pytest.fail(f"{n} ran for checks"))
            got = group(("check", "x", a), ("check", "y", a), ("check", "z", b))
        assert [r[0][1] for r in got] == [False, False, False]
        # a check before the add does not count; the add does, for a later check and add
        got = group(
            ("check", "c", a), ("add", "k", a), ("check", "e", a), ("check_and_add", "f", b)
        )
        assert got == [
            [("c", False, False, [])],
            [("k", False, True, [])],
            [("e", True, False, ["k"])],
            [("f", True, False, ["k"])],
        ]


def test_band_keys_survive_reopen_flush_merge_and_torn_log(tmp_path) -> None:
    a, b = _lsh_only_pair()
    texts = _corpus(5, 40)
    path = tmp_path / "store"
    with Deduplicator.open(path, memtable_size=50) as d:
        d.add([{"id": f"w{i}", "text": t} for i, t in enumerate(texts)])
        d.add({"id": "a", "text": a})
    # reopen: the memtable's band keys come back from the log's texts
    with Deduplicator.open(path) as d:
        assert d.candidates == "lsh"
        m = d.check({"id": "b", "text": b})
        assert m.duplicate and m.matches[0].id == "a"
        d.flush()  # now in a segment's band-key section
        assert d.check({"id": "b", "text": b}).duplicate
        d.add([{"id": f"v{i}", "text": t + " again"} for i, t in enumerate(texts)])
        d.flush()
        d.compact()  # merges carry the section
        assert d.check({"id": "b", "text": b}).duplicate
        assert d.store._state.segments and all(
            s.segment.band_keys is not None for s in d.store._state.segments
        )
        d.add({"id": "c", "text": a + " extra words at the end"})
    # a torn tail on the live log: the record before it and its band keys are recovered
    wal = max(path.glob("wal-*.log"), key=lambda p: p.stat().st_mtime)
    with wal.open("ab") as fh:
        fh.write(b"\x07garbage-tail")
    with Deduplicator.open(path) as d:
        got = d.check({"id": "b2", "text": b})
        assert {m.id for m in got.matches} >= {"a"}
        assert d.get("c")["text"].startswith(a)


def test_a_merge_keeps_exactly_the_surviving_rows_band_entries(tmp_path) -> None:
    """Compaction merges the segments' band sections as sorted runs (``merge_mapped``): the
    merged section is the inputs' (key, row id) entries less the deleted rows', sorted, and the
    deleted documents' keys find nothing afterwards."""
    from neardup.index.bands import sort_entries

    texts = _corpus(11, 60)
    with Deduplicator.open(tmp_path / "s", max_segments_per_partition=1) as d:
        d._writer._compacting = True  # keep the background compactor out: compact() merges
        for c in range(3):
            d.add([{"id": f"c{c}-{i}", "text": t} for i, t in enumerate(texts)])
            d.flush()
        gone = [f"c{c}-{i}" for c in range(3) for i in range(0, len(texts), 7)]
        rids = d.store.lookup_ids(gone)
        for x in gone:
            d.delete(x)
        d.flush()
        segs = d.store._state.segments
        assert len(segs) >= 3
        runs = [tuple(run) for s in segs for run in s.segment.band_runs()]
        k = np.concatenate([x for x, _ in runs])
        r = np.concatenate([y for _, y in runs])
        alive = ~np.isin(r, np.array(list(rids.values()), np.int64))
        want_k, want_r = sort_entries(k[alive], r[alive])
        d._writer._compacting = False
        assert d.compact() >= 1
        [merged] = d.store._state.segments
        got_k, got_r = merged.segment.band_keys
        assert got_k.tolist() == want_k.tolist() and got_r.tolist() == want_r.tolist()
        for i in (0, 7, 14):
            assert not {m.id for m in d.check({"id": "q", "text": texts[i]}).matches} & set(gone)


def test_stored_mode_is_kept(tmp_path) -> None:
    a, b = _lsh_only_pair()
    old = tmp_path / "old"
    with Deduplicator.open(old, candidates="simhash") as d:
        d.add({"id": "a", "text": a})
    with Deduplicator.open(old) as d:  # the stored mode, not the default
        assert d.candidates == "simhash"
        assert not d.check({"id": "b", "text": b}).duplicate
    with pytest.raises(ConfigError, match="candidates='simhash'"):
        Deduplicator.open(old, candidates="lsh")
    cfg = read_json_file(old / "config.json")
    assert cfg["candidates"] == "simhash"
    # a config from before the option is not read (nothing was released with it)
    del cfg["candidates"]
    write_json_file(old / "config.json", cfg)
    with pytest.raises(UnsupportedVersionError, match=r"config\.json.*without candidates"):
        Deduplicator.open(old)
    new = tmp_path / "new"
    with Deduplicator.open(new) as d:
        d.add({"id": "a", "text": a})
    assert read_json_file(new / "config.json")["lsh"]["bands"] == d.lsh_plan.bands
    with pytest.raises(ConfigError, match="store_text"):
        Deduplicator.open(candidates="lsh", store_text=False)
    with Deduplicator.open(verify=False) as d:  # nothing to verify on: the classic mode
        assert d.candidates == "simhash"


def test_segment_band_section_roundtrip_and_empty(tmp_path) -> None:
    fps = np.arange(5, dtype=np.uint64)
    rids = np.array([3, 4, 7, 9, 10], np.int64)
    ts = np.zeros(5)
    empty = tmp_path / "empty.nds"
    write_segment(empty, fps, rids, ts, partition=0)
    s = open_segment(empty)
    assert s.band_keys is None and s.band_runs() == []
    s.close()
    # an empty section: its 16-byte head and one group offset; no sketches: an 8-byte head
    assert empty.stat().st_size == 64 + 5 * 24 + 16 + 8 + 8
    v3 = tmp_path / "v3.nds"
    # compact keys: group (band) in the top 32 bits
    keys = np.array([9, 5, 5, 1, (2 << 32) | 5, (1 << 32) | 7], np.uint64)
    rows = np.array([10, 7, 3, 4, 9, 3], np.int64)
    write_segment(v3, fps, rids, ts, partition=0, band_keys=(keys, rows))
    s = open_segment(v3)
    [sec] = s.band_runs()
    k, r = sec
    assert k.tolist() == [1, 5, 5, 9, (1 << 32) | 7, (2 << 32) | 5]
    assert r.tolist() == [4, 3, 7, 10, 3, 9]
    assert sec.offsets.tolist() == [0, 4, 5, 6]
    # packed: groups this small take no directory, 32-bit keys, 3-bit rows (5 rows), each
    # part padded to 8 bytes after a 16-byte section head and the group offsets
    assert (sec.dbits, sec.kbits, sec.rbits) == (0, 32, 3)
    assert v3.stat().st_size == 64 + 5 * 24 + 16 + 8 * 4 + 24 + 8 + 8
    got = lookup([sec], np.array([[5, 7], [(2 << 32) | 5, 9]], np.uint64), 10)
    assert [g.tolist() for g in got] == [[3, 7], [9, 10]]
    s.close()
    raw = bytearray(v3.read_bytes())
    raw[-9] ^= 1
    v3.write_bytes(bytes(raw))
    with pytest.raises(CorruptFileError):
        open_segment(v3)
    with pytest.raises(ValueError, match="not in the segment"):
        write_segment(tmp_path / "x.nds", fps, rids, ts, partition=0, band_keys=(keys, rows + 1))


def _write_v2(path, fps, rids, ts, full_keys, rows) -> None:
    """A version-2 segment as an earlier build wrote it (64-bit entry keys, u32 rows)."""
    import struct
    import zlib

    import xxhash

    pos = np.searchsorted(rids, rows)
    order = np.lexsort((pos, full_keys))
    k = np.ascontiguousarray(full_keys[order], "<u8")
    p = np.ascontiguousarray(pos[order], "<u4")
    body = (
        fps.astype("<u8").tobytes()
        + rids.astype("<i8").tobytes()
        + ts.astype("<f8").tobytes()
        + struct.pack("<Q", len(k))
        + k.tobytes()
        + p.tobytes()
        + bytes((-4 * len(p)) % 8)
    )
    head = struct.pack(
        "<8sIIQqddQI",
        b"NDUPSEG\x00",
        2,
        64,
        len(rids),
        0,
        0.0,
        0.0,
        xxhash.xxh64_intdigest(body),
        0,
    )
    path.write_bytes(head + struct.pack("<I", zlib.crc32(head)) + body)


def test_segments_of_earlier_formats_are_refused(tmp_path) -> None:
    """Segment files of earlier builds (a version-2 band-key section, or none at all) are
    refused with UnsupportedVersionError naming the file; nothing reads them."""
    import struct
    import zlib

    import xxhash

    fps = np.arange(4, dtype=np.uint64)
    rids = np.array([1, 2, 5, 8], np.int64)
    full = np.array([(0 << 48) | 77, (0 << 48) | 77, (3 << 48) | 12, (1 << 48) | 9], np.uint64)
    rows = np.array([2, 8, 5, 1], np.int64)
    _write_v2(tmp_path / "v2.nds", fps, rids, np.zeros(4), full, rows)
    with pytest.raises(UnsupportedVersionError, match=r"v2\.nds: segment version 2"):
        open_segment(tmp_path / "v2.nds")
    # the earlier version 1: the rows and no band-key section
    body = fps.astype("<u8").tobytes() + rids.astype("<i8").tobytes() + bytes(8 * 4)
    head = struct.pack(
        "<8sIIQqddQI", b"NDUPSEG\x00", 1, 64, 4, 0, 0.0, 0.0, xxhash.xxh64_intdigest(body), 0
    )
    (tmp_path / "old.nds").write_bytes(head + struct.pack("<I", zlib.crc32(head)) + body)
    with pytest.raises(UnsupportedVersionError, match=r"old\.nds: a segment without a band-key"):
        open_segment(tmp_path / "old.nds")
    # the build before the sketches: the band-key section ends the file
    write_segment(tmp_path / "now.nds", fps, rids, np.zeros(4), partition=0)
    raw = (tmp_path / "now.nds").read_bytes()[:-8]  # less the (empty) sketch section's head
    body = raw[64:]
    head = struct.pack(
        "<8sIIQqddQI", b"NDUPSEG\x00", 1, 64, 4, 0, 0.0, 0.0, xxhash.xxh64_intdigest(body), 0
    )
    (tmp_path / "pre.nds").write_bytes(head + struct.pack("<I", zlib.crc32(head)) + body)
    with pytest.raises(UnsupportedVersionError, match=r"pre\.nds: a segment without a sketch"):
        open_segment(tmp_path / "pre.nds")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 200)), max_size=120),
    st.lists(st.integers(0, 7), min_size=1, max_size=4),
    st.integers(1, 4),
)
def test_band_lookup_equals_brute_force(entries, queries, cap) -> None:
    # a row has one key per band; rows arrive in row-id order (as the writer allocates them)
    entries = sorted(dict.fromkeys(entries), key=lambda e: e[1])
    br = BandIndex(buffer=7)
    for key, rid in entries:
        br.insert_many(np.array([rid], np.int64), np.array([[key]], np.uint64))
    got = br.query_many(np.array(queries, np.uint64)[:, None], cap)
    for q, g in zip(queries, got, strict=True):
        members = sorted({r for k, r in entries if k == q})
        allm = sorted(r for k, r in entries if k == q)
        if len(allm) > 2 * cap:
            uniq = sorted(set(allm))
            want = sorted(set(uniq[:cap]) | set(uniq[-cap:]))
        else:
            want = members
        assert g.tolist() == want
    k, r = sort_entries(
        np.array([e[0] for e in entries], np.uint64), np.array([e[1] for e in entries], np.int64)
    )
    assert [x.tolist() for x in lookup([(k, r)], np.array(queries, np.uint64)[:, None], 10**6)] == [
        sorted({rr for kk, rr in entries if kk == q}) for q in queries
    ]


def test_service_config_passes_the_mode(tmp_path) -> None:
    from neardup.online.settings import DedupSettings
    from neardup.service.config import ServiceConfig
    from neardup.service.namespaces import NamespaceRegistry

    with pytest.raises(ConfigError, match="candidates"):
        DedupSettings(candidates="minhash")
    simhash = DedupSettings(candidates="simhash")
    reg = NamespaceRegistry(ServiceConfig(data_dir=str(tmp_path / "svc"), dedup=simhash))
    reg.open()
    try:
        assert reg.get("default").candidates == "simhash"
    finally:
        reg.close()
    reg = NamespaceRegistry(ServiceConfig(data_dir=str(tmp_path / "svc2")))
    reg.open()
    try:
        assert reg.get("default").candidates == "lsh"
    finally:
        reg.close()


def test_writer_uses_the_preparers_band_keys() -> None:
    """The writer never tokenises for the channel: the band keys come from the preparer (a
    batch prepared without the channel gets them in the writer, once)."""
    from neardup.online.deduplicator import DocumentPreparer

    a, b = _lsh_only_pair()
    with Deduplicator.open() as d:

        def refuse(texts):
            raise AssertionError("band keys recomputed in the writer")

        d.store._state.band_keys_of = refuse
        d.check_and_add({"id": "a", "text": a})
        plain = DocumentPreparer(d.fingerprinter, d.bits, d.clock)
        got = d.submit_prepared("check", plain.prepare([{"id": "b", "text": b}]))
        dec = got.result() if hasattr(got, "result") else got
        assert dec[0].duplicate and dec[0].matches[0].id == "a"


def test_a_text_containing_a_stored_excerpt_is_kept_as_in_batch() -> None:
    """The batch keep rule: a verified pair never drops a text more than (2 - t) / t times
    longer than the kept one (it contains it); online reports the match and keeps the text."""
    rng = random.Random(3)
    short = " ".join(rng.choice(_WORDS) for _ in range(25))
    long_ = short + " " + " ".join(rng.choice(_WORDS) for _ in range(35))
    r = dedup([short, long_])
    assert len(r.pairs) == 1 and r.keep.tolist() == [True, True]
    with Deduplicator.open() as d:
        d.add({"id": "s", "text": short})
        got = d.check_and_add({"id": "l", "text": long_})
        assert [m.id for m in got.matches] == ["s"]
        assert not got.duplicate and got.added
        # the other way round the shorter text is a duplicate, as in batch
        again = d.check({"id": "s2", "text": short})
        assert again.duplicate
    with Deduplicator.open(candidates="simhash", candidate_radius=18) as d:  # classic: any match
        d.add({"id": "s", "text": short})
        got = d.check_and_add({"id": "l", "text": long_})
        assert got.duplicate == bool(got.matches)


def test_bulk_segments_beside_band_sections(tmp_path) -> None:
    """``bulk_load`` rows (no text) land in segments with an empty band-key section, searched by
    SimHash only; a merge with segments that have band keys keeps the keys of those rows."""
    a, b = _lsh_only_pair()
    with Deduplicator.open(tmp_path / "s", max_segments_per_partition=1) as d:
        n = d.bulk_load([f"bulk{i}" for i in range(300)], np.arange(300, dtype=np.uint64) << 20)
        assert n == 300
        assert [s.segment.band_keys for s in d.store._state.segments] == [None]
        d.add({"id": "a", "text": a})
        d.flush()
        assert sorted(s.segment.band_keys is None for s in d.store._state.segments) == [False, True]
        for k in range(3):  # more segments than the size-tiered policy lets stand
            d.add({"id": f"x{k}", "text": f"filler number {k} " + "padding words " * k})
            d.flush()
        d.compact()
        [merged] = d.store._state.segments
        assert len(merged.segment) == 304 and merged.segment.band_keys is not None
        # only the text rows' keys (4 documents with tokens)
        assert len(merged.segment.band_keys) == 4 * d.lsh_plan.bands
        got = d.check({"id": "b", "text": b})
        assert got.duplicate and got.matches[0].id == "a"


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 9), st.integers(0, 60)), max_size=80),
        min_size=1,
        max_size=4,
    ),
    st.lists(st.lists(st.integers(0, 10), min_size=3, max_size=3), min_size=1, max_size=6),
    st.integers(1, 3),
)
def test_vectorised_lookup_equals_reference(runs, queries, cap) -> None:
    """The vectorised lookup (distinct keys once, buckets gathered by array arithmetic) gives
    what the per-entry reference gives, over several runs, bands and capped buckets, for a
    batch of queries and for each query alone."""
    from neardup.index.bands import BandSection

    def ck(x):  # compact keys in three groups (bands)
        x = np.asarray(x, np.uint64)
        return ((x % np.uint64(3)) << np.uint64(32)) | x

    arr = []
    for n, run in enumerate(runs):
        k, r = sort_entries(ck([e[0] for e in run]), np.array([e[1] for e in run], np.int64))
        if n % 2 and len(k):  # a section with row offsets, as the memtable seals them
            arr.append(BandSection.from_sorted(k, (r - 0).astype(np.uint32), base=0))
        else:
            arr.append((k, r))
    q = ck(queries)
    q[np.array(queries) == 10] = np.uint64(0xFFFFFFFFFFFFFFFF)  # rows without keys: nothing
    got = lookup(arr, q, cap)
    want = lookup_reference(arr, q, cap)
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    # one query alone (a single request's path: the union of its keys' rows)
    for i in range(len(q)):
        assert [g.tolist() for g in lookup(arr, q[i : i + 1], cap)] == [want[i].tolist()]
    # the memtable's runs: rows added in row-id order, some removed again
    br = BandIndex(buffer=5)
    entries = sorted({(int(ck([e[0]])[0]), e[1]) for run in runs for e in run}, key=lambda e: e[1])
    added = []
    for rid in sorted({e[1] for e in entries}):
        keys = [k for k, r in entries if r == rid]
        br.insert_many(np.array([rid], np.int64), np.array(keys, np.uint64)[None, :1])
        added.append((keys[0], rid))
    flat = br.entries()
    resorted = sort_entries(*flat)
    assert flat[0].tolist() == resorted[0].tolist() and flat[1].tolist() == resorted[1].tolist()
    assert sorted(zip(flat[0].tolist(), flat[1].tolist(), strict=True)) == sorted(added)
    assert [g.tolist() for g in br.query_many(q, cap)] == [
        w.tolist() for w in lookup_reference([flat], q, cap)
    ]
    gone = np.array(sorted({e[1] for e in entries})[::3], np.int64)
    br.remove_many(gone)
    assert not np.isin(br.entries()[1], gone).any()


def test_group_verification_ahead_decides_like_one_by_one() -> None:
    """The decide loop's verifications done ahead for the whole group (one call) give the same
    decisions as verifying each document's candidates on its own, also when max_matches stops
    verification early."""
    from neardup.online.decide import Decider

    texts = _corpus(5)
    for mm in (1, 2, 10):
        with Deduplicator.open(max_matches=mm) as d:
            d.add([{"id": f"s{i}", "text": t} for i, t in enumerate(texts[::2])])
            fast = d.check_and_add([{"id": f"q{i}", "text": t} for i, t in enumerate(texts)])
        orig = Decider._prefetch
        Decider._prefetch = lambda self, *a, **k: {}  # type: ignore[method-assign]
        try:
            with Deduplicator.open(max_matches=mm) as d:
                d.add([{"id": f"s{i}", "text": t} for i, t in enumerate(texts[::2])])
                slow = d.check_and_add([{"id": f"q{i}", "text": t} for i, t in enumerate(texts)])
        finally:
            Decider._prefetch = orig  # type: ignore[method-assign]
        assert [x.to_dict() for x in fast] == [x.to_dict() for x in slow]
        assert sum(x.duplicate for x in fast) > 0


def test_documents_of_many_candidates_are_verified_in_a_few_group_calls() -> None:
    """Texts made mostly of one frequent token share band keys with hundreds of stored texts
    and are duplicates of few of them: each verifies nearly all of its candidates. The group's
    verification ahead takes them in a few calls for the whole group (the first chunk, then
    the rest :data:`_REST_PAIRS` at a time), not a call per document and chunk; the decisions
    equal verifying each document's candidates on its own, whatever the round size."""
    from typing import Any
    from unittest import mock

    from neardup.online import decide as decide_mod
    from neardup.online.decide import Decider

    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(300)]

    def text() -> str:
        return " ".join("tuc" if rng.random() < 0.6 else rng.choice(vocab) for _ in range(14))

    stored = [text() for _ in range(400)]
    queries = [text() for _ in range(60)] + [f"RT @a: {s}" for s in stored[:5]]

    def run(rest: int | None, ahead: bool) -> tuple[list[dict[str, Any]], dict[str, int]]:
        calls = {"group": 0, "document": 0, "most_candidates": 0}
        verify, pairs, cands = Decider.verify, Decider._verify_pairs, Decider._candidates

        def count_doc(self: Any, *a: Any) -> Any:
            calls["document"] += 1
            return verify(self, *a)

        def count_group(self: Any, *a: Any) -> Any:
            calls["group"] += 1
            return pairs(self, *a)

        def no_memo(self: Any, *a: Any) -> dict[Any, Any]:
            return {}

        def candidates(self: Any, *a: Any) -> Any:
            found, pending = cands(self, *a)
            calls["most_candidates"] = max(calls["most_candidates"], len(pending))
            return found, pending

        with (
            mock.patch.object(decide_mod, "_REST_PAIRS", rest or decide_mod._REST_PAIRS),
            mock.patch.object(Decider, "verify", count_doc),
            mock.patch.object(Decider, "_verify_pairs", count_group),
            mock.patch.object(Decider, "_candidates", candidates),
            mock.patch.object(Decider, "_prefetch", Decider._prefetch if ahead else no_memo),
            Deduplicator.open(max_matches=2) as d,
        ):
            d.add([{"id": f"s{i}", "text": t} for i, t in enumerate(stored)])
            for k in calls:
                calls[k] = 0
            out = d.check_and_add([{"id": f"q{i}", "text": t} for i, t in enumerate(queries)])
        return [x.to_dict() for x in out], calls

    one_by_one, _ = run(None, ahead=False)
    assert sum(x["duplicate"] for x in one_by_one) >= 5
    default, calls = run(None, ahead=True)
    assert default == one_by_one
    # some document verifies hundreds of candidates, yet the group makes two calls
    assert calls["most_candidates"] > 300
    assert calls["group"] == 2 and calls["document"] == 0
    for rest in (1, 7, 100):
        got, calls = run(rest, ahead=True)
        assert got == one_by_one
        assert calls["document"] == 0


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 30)), max_size=60),
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 31)), min_size=1, max_size=20),
    st.sampled_from([None, 0, 8, 16]),
)
def test_section_search_kernel_equals_numpy_twin(entries, queries, dbits) -> None:
    """The forward gallop (a batch's search) on an unpacked section's bytes (``dbits`` None)
    and on packed ones of each directory width, keys spread over the buckets."""
    from neardup.index.band_packed import pack_section
    from neardup.index.bands import BandSection
    from neardup.index.reference import section_search_reference
    from neardup.index.section_search import _section_search_kernel

    def spread(h: int) -> int:  # keys over the buckets, their low bits not in their order
        return (h * 0x9E37_79B9) & 0xFFFF_FFFF

    k = np.array([(g << 32) | spread(h) for g, h in entries], np.uint64)
    k, r = sort_entries(k, np.arange(len(k), dtype=np.int64))
    sec = BandSection.from_sorted(k, r.astype(np.uint32))
    uk = np.unique(np.array([(g << 32) | spread(h) for g, h in queries], np.uint64))
    if dbits is None:
        no_dirs = np.zeros(0, np.uint32)
        lo, hi = _section_search_kernel(sec.offsets, 0, no_dirs, sec.keys.view(np.uint8), 32, uk)
    else:
        p = pack_section(sec.offsets, sec.keys, sec.rows, max(len(k), 1), dbits=dbits)
        lo, hi = _section_search_kernel(p.offsets, p.dbits, p.dirs, p.kbytes, p.kbits, uk)
    lo2, hi2 = section_search_reference(sec.offsets, sec.keys, uk)
    assert lo.tolist() == lo2.tolist() and hi.tolist() == hi2.tolist()
    for x, a, b in zip(uk.tolist(), lo.tolist(), hi.tolist(), strict=True):
        assert list(range(a, b)) == [i for i, kk in enumerate(k.tolist()) if kk == x]


def band_hashes(rng: np.random.Generator, kind: str, m: int) -> np.ndarray:
    """``m`` 32-bit keys of one band group (uint64): uniform (the hash mix the searches are
    made for), clustered in a narrow range, or runs of equal keys ("repeated")."""
    if kind == "uniform":
        h = rng.integers(0, 2**32, m)
    elif kind == "clustered":
        h = rng.integers(2**31, 2**31 + 5 * m + 1, m)
    else:
        h = rng.choice(rng.integers(0, 2**32, 8), m)
    return h.astype(np.uint64)


def _group_keys(
    rng: np.random.Generator, kind: str, sizes: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (compact key, row) entries of band groups of ``sizes`` entries of
    :func:`band_hashes`."""
    parts = [
        (np.uint64(g) << np.uint64(32)) | band_hashes(rng, kind, m) for g, m in enumerate(sizes)
    ]
    k = np.concatenate(parts)
    return sort_entries(k, np.arange(len(k), dtype=np.int64))


def _section_and_queries(
    seed: int, kind: str, sizes: list[int], nq: int, *, neighbours: bool
) -> tuple[np.ndarray, BandSection, np.ndarray]:
    """(entries' keys, their section, sorted distinct query keys) of a section search property
    test: groups of :func:`band_hashes`, ``nq`` present keys, (``neighbours``) each one's key
    or the next, and ``nq`` random keys over the groups and one past them (misses)."""
    rng = np.random.default_rng(seed)
    k, r = _group_keys(rng, kind, sizes)
    sec = BandSection.from_sorted(k, r.astype(np.uint32))
    present = k[rng.integers(0, len(k), nq)] if len(k) else np.zeros(0, np.uint64)
    g = rng.integers(0, len(sizes) + 1, nq).astype(np.uint64)
    parts = [present]
    if neighbours:
        parts.append(present + rng.integers(0, 2, len(present)).astype(np.uint64))
    parts.append((g << np.uint64(32)) | rng.integers(0, 2**32, nq).astype(np.uint64))
    return k, sec, np.unique(np.concatenate(parts))


@settings(max_examples=100, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.lists(st.integers(0, 3000), min_size=1, max_size=4),
    st.sampled_from(["uniform", "clustered", "repeated"]),
    st.integers(1, 40),
    st.sampled_from([None, 0, 8, 16]),
)
def test_interpolating_section_search_equals_numpy_twin(seed, sizes, kind, nq, dbits) -> None:
    """The search for few keys in large groups (interpolation, then a binary search) finds the
    same entries as the NumPy twin whatever the keys: uniform (the hash mix it is made for),
    clustered in a narrow range, or runs of equal keys; queries hit present keys and miss. On
    the unpacked section (``dbits`` None) and packed ones of every directory width."""
    from neardup.index.band_packed import pack_section
    from neardup.index.reference import section_search_reference
    from neardup.index.section_search import _section_interp_kernel, packed_search

    k, sec, uk = _section_and_queries(seed, kind, sizes, nq, neighbours=False)
    if dbits is None:
        no_dirs = np.zeros(0, np.uint32)
        lo, hi = _section_interp_kernel(sec.offsets, 0, no_dirs, sec.keys.view(np.uint8), 32, uk)
    else:
        packed = pack_section(sec.offsets, sec.keys, sec.rows, max(len(k), 1), dbits=dbits)
        lo, hi = packed_search(packed, uk)
    lo2, hi2 = section_search_reference(sec.offsets, sec.keys, uk)
    assert lo.tolist() == lo2.tolist() and hi.tolist() == hi2.tolist()


@settings(max_examples=100, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.lists(st.integers(0, 3000), min_size=1, max_size=4),
    st.sampled_from(["uniform", "clustered", "repeated"]),
    st.integers(1, 600),
    st.sampled_from([None, 0, 8, 16]),
)
def test_batch_section_search_equals_numpy_twin(seed, sizes, kind, nq, dbits) -> None:
    """A batch's search (many sorted keys: the forward gallop in each key's bucket from the
    previous key's run) finds the same entries as the NumPy twin on large groups: uniform
    keys, clustered ones and long runs of equal keys, on the unpacked section and packed ones
    of every directory width; queries hit present keys, their neighbours, and miss."""
    from neardup.index.band_packed import pack_section
    from neardup.index.reference import section_search_reference
    from neardup.index.section_search import _section_search_kernel

    k, sec, uk = _section_and_queries(seed, kind, sizes, nq, neighbours=True)
    if dbits is None:
        no_dirs = np.zeros(0, np.uint32)
        lo, hi = _section_search_kernel(sec.offsets, 0, no_dirs, sec.keys.view(np.uint8), 32, uk)
    else:
        p = pack_section(sec.offsets, sec.keys, sec.rows, max(len(k), 1), dbits=dbits)
        lo, hi = _section_search_kernel(p.offsets, p.dbits, p.dirs, p.kbytes, p.kbits, uk)
    lo2, hi2 = section_search_reference(sec.offsets, sec.keys, uk)
    assert lo.tolist() == lo2.tolist() and hi.tolist() == hi2.tolist()


@pytest.mark.parametrize("dbits", [None, 0, 8])
def test_a_search_that_lands_in_a_long_run_of_one_key_finds_its_ends(dbits) -> None:
    """The interpolated guess of a search lands inside a run of one key far longer than the
    walk from it (boilerplate: many rows with one band key): searches for that key, for keys
    just below and above it, and for keys the run hides from the guess find the same entries
    as the NumPy twin."""
    from neardup.index.band_packed import pack_section
    from neardup.index.bands import BandSection
    from neardup.index.reference import section_search_reference
    from neardup.index.section_search import _section_interp_kernel

    rng = np.random.default_rng(5)
    run_key = 2**31
    h = np.concatenate(
        [
            rng.integers(0, run_key, 200),
            np.full(600, run_key),
            rng.integers(run_key + 1, 2**32, 200),
        ]
    ).astype(np.uint64)
    k, r = sort_entries(
        np.concatenate([h, (np.uint64(1) << np.uint64(32)) | h]), np.arange(2 * h.size)
    )
    sec = BandSection.from_sorted(k, r.astype(np.uint32))
    q = [run_key - 1, run_key, run_key + 1, 0, 2**32 - 1, int(h[7]), int(h[-3])]
    uk = np.unique(np.array([(g << 32) | x for g in (0, 1, 2) for x in q], np.uint64))
    if dbits is None:
        no_dirs = np.zeros(0, np.uint32)
        lo, hi = _section_interp_kernel(sec.offsets, 0, no_dirs, sec.keys.view(np.uint8), 32, uk)
    else:  # (the interpolating search itself: packed_search would gallop for so many keys)
        p = pack_section(sec.offsets, sec.keys, sec.rows, len(k), dbits=dbits)
        lo, hi = _section_interp_kernel(p.offsets, p.dbits, p.dirs, p.kbytes, p.kbits, uk)
    lo2, hi2 = section_search_reference(sec.offsets, sec.keys, uk)
    assert lo.tolist() == lo2.tolist() and hi.tolist() == hi2.tolist()
    assert (hi - lo).max() == 600


def test_band_runs_rows_out_of_order_rebase() -> None:
    """Rows below the memtable's first row id (re-added after a take-back) move its base; the
    entries stay sorted by (key, row) and lookups find every row."""
    br = BandIndex(buffer=4)
    for rid in (10, 11, 12, 13, 14, 15):
        br.insert_many(np.array([rid], np.int64), np.array([[7, rid % 2]], np.uint64))
    br.insert_many(np.array([5], np.int64), np.array([[7, 1]], np.uint64))
    br.insert_many(np.array([30], np.int64), np.array([[7, 0]], np.uint64))
    k, r = br.entries()
    assert list(zip(k.tolist(), r.tolist(), strict=True)) == sorted(
        zip(k.tolist(), r.tolist(), strict=True)
    )
    assert br.query_many(np.array([[7, 1]], np.uint64), 100)[0].tolist() == [
        5,
        10,
        11,
        12,
        13,
        14,
        15,
        30,
    ]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 20)), max_size=60),
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 20)), max_size=60),
)
def test_merge_sections_kernel_equals_numpy_twin(a, b) -> None:
    """The memtable's one-pass section merge equals materialising and sorting; rows of ``a``
    (older) come first among equal keys."""
    from neardup.index.bands import BandSection, merge_sections
    from neardup.index.reference import merge_sections_reference

    def section(entries, first_row):
        k = np.array([(g << 32) | h for g, h in entries], np.uint64)
        r = np.arange(first_row, first_row + len(k), dtype=np.int64)
        k, r = sort_entries(k, r)
        return BandSection.from_sorted(k, (r - 100).astype(np.uint32), base=100)

    sa, sb = section(a, 100), section(b, 100 + len(a))
    got, want = merge_sections(sa, sb), merge_sections_reference(sa, sb)
    gk, gr = got
    wk, wr = want
    assert gk.tolist() == wk.tolist() and gr.tolist() == wr.tolist()
    if len(got):
        assert got.offsets[-1] == len(got)
        assert (
            got.offsets.tolist()[: len(want.offsets)] == want.offsets.tolist()[: len(got.offsets)]
        )


@settings(max_examples=80, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.lists(st.integers(0, 400), min_size=1, max_size=6),
    st.integers(1, 30),
    st.sampled_from([None, 1, 3, 32]),
    st.booleans(),
)
def test_a_section_group_looks_up_as_its_sections(seed, sizes, nq, cap, few_values) -> None:
    """Sections searched and gathered as one SectionGroup (a store's segments) give what the
    same sections passed one by one give, and what the reference gives, beside a memtable run:
    with buckets over the cap (few distinct values), keys found in several sections and keys
    found nowhere; few keys in large sections take the interpolating search."""
    from neardup.index.bands import BandSection, SectionGroup

    rng = np.random.default_rng(seed)
    hi_val = 6 if few_values else 2**32
    sections, row = [], 0
    for m in sizes:
        k = (rng.integers(0, 4, m).astype(np.uint64) << np.uint64(32)) | rng.integers(
            0, hi_val, m
        ).astype(np.uint64)
        rowids = np.arange(row, row + m, dtype=np.int64) * 3 + 1  # as a segment's: sorted
        row += m
        k, pos = sort_entries(k, np.arange(m, dtype=np.int64))
        sections.append(BandSection.from_sorted(k, pos.astype(np.uint32), rowids=rowids))
    mem = BandIndex()
    mem.insert_many(np.arange(10**6, 10**6 + 5), rng.integers(0, 6, (5, 4)).astype(np.uint64))
    present = [s.compact()[rng.integers(0, len(s), 2)] for s in sections if len(s)]
    queries = np.concatenate(
        [*present, (rng.integers(0, 4, nq).astype(np.uint64) << np.uint64(32)) | 5]
    )
    queries = queries[: (len(queries) // 4) * 4].reshape(-1, 4) if len(queries) >= 4 else None
    if queries is None:
        return
    runs = [*mem.runs(), *sections]
    want = lookup(runs, queries, cap)
    got = lookup([*mem.runs(), SectionGroup(sections)], queries, cap)
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    if cap is not None:
        ref = lookup_reference(runs, queries, cap)
        assert [g.tolist() for g in got] == [r.tolist() for r in ref]


def _hits(hits) -> list[tuple[int, int, int, int]]:
    """A group's buckets as (section, key index, first, end) tuples, in their order."""
    cols = (hits.section, hits.key, hits.lo, hits.hi)
    return list(zip(*(c.tolist() for c in cols), strict=True))


def _hits_as_reference(group, uk) -> list[tuple[int, int, int, int]]:
    """The non-empty buckets of ``uk`` in each of ``group``'s sections by the NumPy reference,
    section by section and keys in order: what ``SectionGroup.search`` answers."""
    from neardup.index.reference import section_search_reference

    out = []
    for s, sec in enumerate(group.sections):
        lo, hi = section_search_reference(sec.offsets, sec.keys, uk)
        out += [(s, q, int(lo[q]), int(hi[q])) for q in np.flatnonzero(hi > lo).tolist()]
    return out


@pytest.mark.parametrize("threads", [1, 2])
def test_a_batch_searches_a_group_on_the_kernel_threads_as_the_reference(threads) -> None:
    """A batch's keys (past ``_PARALLEL_KEYS``) search a group's sections on the kernel threads,
    a range of sections each: the same entries as the NumPy reference, section by section, on
    one thread or two."""
    from unittest import mock

    from neardup._threads import kernel_threads
    from neardup.index.bands import BandSection, SectionGroup

    rng = np.random.default_rng(threads)
    sections = []
    for m in (300, 1, 900, 40, 2500, 700, 5):
        k, r = _group_keys(rng, "uniform", [m, m // 2 + 1, 3])
        sections.append(BandSection.from_sorted(k, r.astype(np.uint32), rowids=np.arange(len(k))))
    keys = np.concatenate([s.compact() for s in sections])
    g = rng.integers(0, 4, 400).astype(np.uint64)
    uk = np.unique(
        np.concatenate(
            [
                keys[rng.integers(0, len(keys), 400)],
                (g << np.uint64(32)) | rng.integers(0, 2**32, 400).astype(np.uint64),
            ]
        )
    )
    group = SectionGroup(sections)
    with (
        mock.patch("neardup.index.section_search._PARALLEL_KEYS", 16),
        kernel_threads(threads),
    ):
        hits = group.search(uk)
    assert _hits_as_reference(group, uk) == _hits(hits)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.lists(st.integers(0, 6000), min_size=1, max_size=5),
    st.lists(st.booleans(), min_size=1, max_size=5),
    st.sampled_from(["uniform", "clustered", "repeated"]),
    st.integers(1, 6),
)
def test_a_section_group_searches_few_keys_in_lockstep_as_the_reference(
    seed, sizes, dense, kind, nq
) -> None:
    """Few keys in large sections (a single request against a store's segments): the group's
    lockstep interpolation, beside sections searched by the forward gallop, finds the same
    entries as the NumPy reference, section by section, whatever the keys."""
    from neardup.index.bands import BandSection, SectionGroup

    rng = np.random.default_rng(seed)
    sections = []
    for j, m in enumerate(sizes):
        k, r = _group_keys(rng, kind, np.bincount(rng.integers(0, 3, m), minlength=3).tolist())
        if dense[j % len(dense)]:  # a small section: searched by the gallop
            k, r = k[:40], r[:40]
        rowids = np.arange(len(k), dtype=np.int64)
        sections.append(BandSection.from_sorted(k, r.astype(np.uint32), rowids=rowids))
    keys = np.concatenate([s.compact() for s in sections])
    present = keys[rng.integers(0, len(keys), nq)] if len(keys) else np.zeros(0, np.uint64)
    g = rng.integers(0, 4, nq).astype(np.uint64)
    uk = np.unique(
        np.concatenate(
            [present, (g << np.uint64(32)) | rng.integers(0, 2**32, nq).astype(np.uint64)]
        )
    )
    group = SectionGroup(sections)
    from unittest import mock

    # sections of 64 entries a key or more take the lockstep interpolation (a store's
    # threshold is higher; these sections are small enough to search by reference)
    with mock.patch("neardup.index.section_search._SPARSE_GAP", 64):
        hits = group.search(uk)
    assert _hits_as_reference(group, uk) == _hits(hits)


@pytest.mark.parametrize("seed", [1, 2])
def test_single_requests_decide_like_batch(seed: int) -> None:
    """Documents checked one at a time, the groups the array union does not take: a band
    candidate that is also the query's SimHash hit is read and verified as a hit, neither
    sketch-filtered nor signed again, and the store's bounds wait for a few hits; the pairs
    are still batch's."""
    texts = _corpus(seed)
    batch = _batch_pairs(texts)
    with Deduplicator.open(max_matches=len(texts)) as d:
        d.add([{"id": str(i), "text": t} for i, t in enumerate(texts)])
        online = {}
        for i, t in enumerate(texts):
            found = {int(m.id) for m in d.check({"id": f"q{i}", "text": t}).matches} - {i}
            if found:
                online[i] = found
    assert online == batch


def test_a_near_duplicate_both_channels_find_is_not_signed_again(tmp_path, monkeypatch) -> None:
    """A single request whose near duplicate is both a SimHash hit and a band candidate reads
    and verifies it as a hit: its MinHash signature is not made again from its text (after a
    reopen no signature is cached), and the decision is the same."""
    import neardup.online.decide as decide_module

    with Deduplicator.open(tmp_path / "d") as d:
        for seed in range(100):  # a one-word edit within the SimHash radius
            rng = random.Random(seed)
            words = [rng.choice(_WORDS) for _ in range(60)]
            a = " ".join(words)
            words[30] = "zeppelin"
            b = " ".join(words)
            fa, fb = (int(d.prepare([{"id": "x", "text": t}]).fps[0]) for t in (a, b))
            if (fa ^ fb).bit_count() <= d.radius:
                break
        else:
            raise AssertionError("no one-word edit within the SimHash radius")
        d.add({"id": "a", "text": a})
    signed: list[int] = []
    real = decide_module.minhash_signatures

    def spy(verifier, texts, *args, **kw):
        signed.append(len(texts))
        return real(verifier, texts, *args, **kw)

    monkeypatch.setattr(decide_module, "minhash_signatures", spy)
    with Deduplicator.open(tmp_path / "d") as d:
        st = d.store._state
        prepared = d.prepare([{"id": "b", "text": b}])
        hits = d.store.search(prepared.fps, d.radius)[1]
        assert hits.tolist() == [d.store.lookup_ids(["a"])["a"]]  # a SimHash hit
        assert d.store.search_bands(prepared.bands, 1000)[0].tolist() == hits.tolist()  # a band's
        got = d.check({"id": "b", "text": b})
        assert got.duplicate and [m.id for m in got.matches] == ["a"]
        assert st is d.store._state
    assert signed == []
