"""MinHash sketches kept beside band keys (neardup.store.sketches): the memtable's table, the
segment section, flushes, merges, bulk loads and reopens; and the decisions they speed up equal
the decisions made without them (every band candidate read and filtered on its signature)."""

from __future__ import annotations

import itertools
import random
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.errors import CorruptFileError
from neardup.online.decide import Decider
from neardup.online.deduplicator import Deduplicator
from neardup.online.prepare import lsh_keys
from neardup.rules.lsh import sketches, token_masks
from neardup.store.segment import open_segment, write_segment
from neardup.store.sketches import SegmentSketches, SketchTable

_WORDS = [
    *("river", "stone", "market", "winter", "garden", "signal", "copper", "window"),
    *("silver", "yellow", "morning", "letter", "engine", "harbor", "forest", "candle"),
    *("mirror", "orange", "planet", "rocket", "summer", "thunder", "valley", "wonder"),
]


def _stream(seed: int, n: int) -> list[str]:
    """Short texts over a small vocabulary (many shared band keys that the agreement filter
    turns down) and edited copies of earlier ones (pairs it lets by)."""
    rng = random.Random(seed)
    out: list[str] = []
    for _ in range(n):
        if out and rng.random() < 0.3:
            w = rng.choice(out).split()
            for _ in range(rng.randint(1, 2)):
                w[rng.randrange(len(w))] = rng.choice(_WORDS)
            out.append(" ".join(w))
        else:
            out.append(" ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 24))))
    return out


def test_sketch_table_keeps_rows_by_row_id() -> None:
    t = SketchTable(3)
    t.put(np.arange(10, 2010), np.full((2000, 3), 7, np.uint8))  # grows past its first slab
    t.put(np.array([5]), np.ones((1, 3), np.uint8))  # below the first row id: not kept
    t.put(np.array([3000]), np.full((1, 3), 9, np.uint8))  # a gap: rows between have none
    present, sk = t.lookup(np.array([10, 2009, 2010, 2999, 3000, 5, -1]))
    assert present.tolist() == [True, True, False, False, True, False, False]
    assert sk[present].tolist() == [[7, 7, 7], [7, 7, 7], [9, 9, 9]]
    assert (sk[~present] == 0).all()
    t.drop(np.array([10, 99999]))
    assert t.lookup(np.array([10, 11]))[0].tolist() == [False, True]
    with pytest.raises(ValueError, match="sketches"):
        t.put(np.array([1, 2]), np.zeros((2, 4), np.uint8))
    assert SketchTable(2).lookup(np.array([1]))[0].tolist() == [False]


def test_segment_sketch_section_round_trip(tmp_path) -> None:
    n = 5
    fps = np.arange(n, dtype=np.uint64)
    rids = np.array([3, 4, 7, 9, 10], np.int64)
    ts = np.zeros(n)
    present = np.array([1, 0, 1, 1, 0], bool)
    sk = np.arange(n * 119, dtype=np.uint64).astype(np.uint8).reshape(n, 119)
    sk[~present] = 0
    path = tmp_path / "s.nds"
    write_segment(path, fps, rids, ts, partition=0, sketches=(present, sk))
    s = open_segment(path)
    assert s.sketch_present is not None and s.sketches is not None
    assert s.sketch_present.tolist() == present.tolist()
    assert np.array_equal(s.sketches, sk)
    s.close()
    # the empty band section and its head, then the sketch head, flags and rows padded to 8
    assert path.stat().st_size == 64 + n * 24 + 16 + 8 + 8 + 8 + (n * 119 + 5)
    plain = tmp_path / "p.nds"
    write_segment(plain, fps, rids, ts, partition=0)
    s = open_segment(plain)
    assert s.sketches is None and s.sketch_present is None
    s.close()
    raw = bytearray(path.read_bytes())
    raw[64 + n * 24 + 16 + 8 + 8 + 1] = 2  # a presence flag that is not 0 or 1
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptFileError):
        open_segment(path)
    with pytest.raises(CorruptFileError, match="presence flags"):
        open_segment(path, verify=False)
    with pytest.raises(ValueError, match="sketches"):
        write_segment(tmp_path / "x.nds", fps, rids, ts, partition=0, sketches=(present, sk[:3]))


def _all_could_pass(self, buckets, q_t, q_of, *a):
    return np.ones(len(q_of), np.bool_)


def _decide_all(
    path, texts, monkeypatch, *, reference: bool, masks: bool = True
) -> tuple[list, Deduplicator]:
    """check_and_add ``texts`` in groups of 50 through flushes, a merge and a reopen; with
    ``reference`` every band candidate is read and filtered on its signature (no sketch
    filter, no token-mask bound); without ``masks`` the token-mask bound turns nothing down.
    Returns ([the candidates of every group's documents after the agreement filter], then
    (duplicate, match ids) per text; the last deduplicator, closed)."""
    monkeypatch.undo()
    if reference:
        monkeypatch.setattr(Decider, "_sketch_filter", lambda self, rids, *a: rids.tolist())
    if reference or not masks:
        monkeypatch.setattr(Decider, "_mask_bound", _all_could_pass)
    seen: list[list[list[int]]] = []  # each group's candidates per document, after the filter
    union = Decider._lsh_union

    def spy(self, *args):
        lims, rids, ds = union(self, *args)
        seen.append([sorted(rids[a:b].tolist()) for a, b in itertools.pairwise(lims)])
        return lims, rids, ds

    monkeypatch.setattr(Decider, "_lsh_union", spy)
    out: list = [seen]
    third = len(texts) // 3
    d = Deduplicator.open(path, memtable_size=120)
    for lo in range(0, 2 * third, 50):
        part = texts[lo : min(lo + 50, 2 * third)]
        got = d.check_and_add([{"id": str(lo + k), "text": t} for k, t in enumerate(part)])
        out += [(g.duplicate, sorted(m.id for m in g.matches)) for g in got]
        if lo % 200 == 0:
            d.flush()
    d.compact()
    # the directory as a process killed now leaves it: the memtable's rows are replayed from
    # the log on the next open, their sketches with them
    assert d.store._state.applier is not None
    d.store._state.applier.drain()
    shutil.copytree(path, f"{path}-killed", ignore=shutil.ignore_patterns("LOCK"))
    d.close()
    d = Deduplicator.open(f"{path}-killed", memtable_size=120)
    mem = d.store._state.memtable.arrays()[1]
    assert len(mem) and d.store.sketches(mem)[0].all()
    for lo in range(2 * third, len(texts), 50):
        part = texts[lo : lo + 50]
        got = d.check_and_add([{"id": str(lo + k), "text": t} for k, t in enumerate(part)])
        out += [(g.duplicate, sorted(m.id for m in g.matches)) for g in got]
    d.close()
    return out, d


def test_decisions_equal_the_decisions_without_sketches(tmp_path, monkeypatch) -> None:
    texts = _stream(11, 1500)
    want, _ = _decide_all(tmp_path / "ref", texts, monkeypatch, reference=True)
    got, d = _decide_all(tmp_path / "sketch", texts, monkeypatch, reference=False, masks=False)
    # the sketch test alone: the same candidates after the agreement filter (first item),
    # the same decisions
    assert got[0] == want[0] and sum(len(c) for g in got[0] for c in g) > 100
    assert got[1:] == want[1:]
    assert sum(dup for dup, _ in got[1:]) > 100  # the stream has near duplicates to find
    dec = d._decider
    # the filter had work: most rows with a sketch were never read, some were
    assert dec.sketch_checked > 5 * dec.sketch_passed > 0
    assert dec.mask_rejected == dec.mask_rejected_rows == 0
    # and the token-mask bound: fewer candidates, only ones verification rejects
    fast, d = _decide_all(tmp_path / "fast", texts, monkeypatch, reference=False)
    assert fast[1:] == want[1:]
    assert len(fast[0]) == len(want[0])
    spared = 0
    for g, w in zip(fast[0], want[0], strict=True):
        for c, r in zip(g, w, strict=True):
            assert set(c) <= set(r)
            spared += len(r) - len(c)
    dec = d._decider
    assert spared > 0 and dec.mask_rejected + dec.mask_rejected_rows > 0


def test_sketches_follow_their_rows_through_flush_merge_and_bulk_load(tmp_path) -> None:
    texts = _stream(3, 400)
    path = tmp_path / "store"
    with Deduplicator.open(path, memtable_size=100) as d:
        d.add([{"id": f"a{i}", "text": t} for i, t in enumerate(texts[:250])])
        d.load([{"id": f"b{i}", "text": t} for i, t in enumerate(texts[250:])])
        d.flush()
        d.compact()
        plan, verifier = d.lsh_plan, d.verifier
    with Deduplicator.open(path) as d:
        segs = d.store._state.segments
        assert segs and all(s.segment.sketches is not None for s in segs)
        rows = d.store.fetch(
            np.concatenate([s.segment.rowids for s in segs]).tolist(), with_text=True
        )
        rids = np.array(sorted(rows), np.int64)
        present, got = d.store.sketches(rids)
        assert present.all() and len(rids) == 400
        sig, _, _, tokens, buckets = lsh_keys(verifier, plan, [rows[r].text for r in rids.tolist()])
        assert np.array_equal(got, sketches(sig, tokens, token_masks(buckets)))
        # a row id no segment holds has none
        assert d.store.sketches(np.array([10**9]))[0].tolist() == [False]
    with Deduplicator.open(candidates="simhash", verify=False) as d:  # no channel, no sketches
        d.add({"id": "x", "text": "a text"})
        assert d.store.sketches(np.array([0]))[0].tolist() == [False]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(0, 300), min_size=1, max_size=120, unique=True),
    st.integers(1, 4),
    st.lists(st.integers(-5, 310), max_size=60),
    st.integers(0, 2**32 - 1),
)
def test_segment_sketch_lookup_equals_a_dict(rowids, parts, asked, seed) -> None:
    """The segments' sketches found by row id in one call (each segment's positions guessed
    from consecutive row ids, a binary search where gaps make the guess wrong; segments whose
    row id ranges interleave, one of another width and one without sketches left out) equal
    a dictionary's answer; rows found nowhere keep what the caller had."""
    rng = np.random.default_rng(seed)
    ids = np.array(rowids, np.int64)
    owner = rng.integers(0, parts, len(ids))  # ranges interleave: rows dealt at random
    segs, want = [], {}
    for p in range(parts):
        seg = np.sort(ids[owner == p])
        present = rng.random(len(seg)) < 0.8
        sk = rng.integers(0, 256, (len(seg), 3), dtype=np.uint8)
        segs.append(_Seg(seg, present, sk))
        want.update({r: sk[k] for k, r in enumerate(seg.tolist()) if present[k]})
    other = _Seg(ids[:1], np.ones(1, bool), np.full((1, 5), 9, np.uint8))  # another width
    bare = _Seg(ids[:1], None, None)  # no sketch section
    group = SegmentSketches([other, *segs, bare], 3)
    q = np.array(asked, np.int64)
    got_p = np.zeros(len(q), np.bool_)
    got = np.full((len(q), 3), 7, np.uint8)
    group.lookup(q, got_p, got)
    assert got_p.tolist() == [r in want for r in asked]
    for k, r in enumerate(asked):
        assert got[k].tolist() == (want[r].tolist() if r in want else [7, 7, 7])


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_segment_sketch_lookup_across_directory_blocks_equals_a_dict(parts, seed) -> None:
    """Segments of thousands of rows (many directory blocks), each row ids in runs with large
    gaps between them (late rows of an old partition, a merge's): every stored row is found
    whatever block it is in, rows in the gaps and past the ends are not; a group made again
    with one segment less reuses the others' directories and answers the same."""
    from neardup.store.sketches import DIRECTORY_STEP

    rng = np.random.default_rng(seed)
    segs, want = [], {}
    start = 0
    for _ in range(parts):
        runs = []
        for _ in range(int(rng.integers(1, 5))):
            start += int(rng.integers(1, 50_000))
            n = int(rng.integers(1, 3 * DIRECTORY_STEP + 7))
            runs.append(start + np.cumsum(rng.integers(1, 3, n)))
            start = int(runs[-1][-1])
        ids = np.concatenate(runs)
        present = rng.random(len(ids)) < 0.9
        sk = rng.integers(0, 256, (len(ids), 2), dtype=np.uint8)
        segs.append(_Seg(ids, present, sk))
        want.update({r: sk[k] for k, r in enumerate(ids.tolist()) if present[k]})
    stored = np.concatenate([x.rowids for x in segs])
    q = np.concatenate(
        [stored, stored + 1, stored - 1, [0, start + 10], rng.integers(0, start, 500)]
    )
    group = SegmentSketches(segs, 2)
    for g in (group, SegmentSketches(segs[1:], 2, group)):
        held = {
            r: v for r, v in want.items() if g is group or r not in set(segs[0].rowids.tolist())
        }
        got_p = np.zeros(len(q), np.bool_)
        got = np.zeros((len(q), 2), np.uint8)
        g.lookup(q, got_p, got)
        assert got_p.tolist() == [int(r) in held for r in q]
        assert all(
            got[k].tolist() == held[int(r)].tolist() for k, r in enumerate(q) if int(r) in held
        )
    assert all(
        a is b
        for a, b in zip(
            group.directories[1:], SegmentSketches(segs[1:], 2, group).directories, strict=True
        )
    )


class _Seg:
    """What SegmentSketches reads of a segment."""

    def __init__(self, rowids, present, sketches) -> None:
        self.rowids, self.sketch_present, self.sketches = rowids, present, sketches


def _flood(seed: int, n: int) -> list[str]:
    """Texts of one frequent token and a few others, 3 to 40 tokens long: their SimHash
    fingerprints gather within the radius whatever their length (a short post's flood of
    SimHash hits, docs/service.md), and some are near or exact copies of each other."""
    rng = random.Random(seed)
    out: list[str] = []
    for _ in range(n):
        if out and rng.random() < 0.2:
            w = rng.choice(out).split()
            w[rng.randrange(len(w))] = rng.choice(_WORDS[:4])
            out.append(" ".join(w))
        else:
            k = rng.randint(3, 40)
            out.append(" ".join(rng.choices(["catu", *_WORDS[:3]], [12, 1, 1, 1], k=k)))
    return out


@pytest.mark.parametrize("min_hits", [1, None], ids=["any-hits", "default-min-hits"])
def test_the_length_bound_changes_no_decision(tmp_path, monkeypatch, min_hits) -> None:
    """SimHash hits turned down by the token counts kept in the rows' sketches (before their
    rows are read) are hits verification would reject: one at a time and in groups, through a
    flush and a reopen (the counts from the segments' sketch sections and the log), the
    decisions and their matches equal those made with every hit read and verified; with the
    bound run for any number of hits, and from ``BOUND_MIN_HITS`` as it is."""
    import neardup.online.decide as decide_module

    texts = _flood(5, 700)

    def run(path, bound: bool) -> tuple[list, int]:
        monkeypatch.undo()
        if min_hits is not None:
            monkeypatch.setattr(decide_module, "BOUND_MIN_HITS", min_hits)
        if not bound:
            monkeypatch.setattr(Decider, "_length_bound", lambda self, *a: a[:3])
        out: list = []
        rejected = 0
        d = Deduplicator.open(path, memtable_size=150)
        for i, t in enumerate(texts[:300]):  # single documents, as the service decides them
            g = d.check_and_add({"id": str(i), "text": t})
            out.append((g.duplicate, g.added, [(m.id, m.distance, m.score) for m in g.matches]))
        d.flush()
        rejected += d._decider.length_rejected
        d.close()
        d = Deduplicator.open(path, memtable_size=150)
        for lo in range(300, len(texts), 40):  # groups, after a reopen
            part = [{"id": str(lo + k), "text": t} for k, t in enumerate(texts[lo : lo + 40])]
            for g in d.check_and_add(part):
                out.append((g.duplicate, g.added, [(m.id, m.distance, m.score) for m in g.matches]))
        rejected += d._decider.length_rejected
        d.close()
        return out, rejected

    want, none = run(tmp_path / "every-hit-read", bound=False)
    got, rejected = run(tmp_path / "bounded", bound=True)
    assert got == want
    assert none == 0 and rejected > 1000  # the bound had work
    assert sum(dup for dup, _, _ in got) > 100  # and the stream has duplicates to find
