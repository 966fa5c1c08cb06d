"""The band candidates' merge by array operations (neardup.online.union.union_arrays, for large
write groups) against the decider's loop (small groups): the same candidates in the same
order, the same distances, the same signature cache after, and the same decisions."""

from __future__ import annotations

import copy
import random

import numpy as np
import pytest
from test_online_lsh import _WORDS

import neardup.online.decide as decide_mod
from neardup.online.decide import Decider
from neardup.online.deduplicator import Deduplicator
from neardup.online.union import BandKeys, union_arrays


def _texts(seed: int, n: int, like: list[str] | None = None) -> list[str]:
    """Short posts from a small vocabulary (many share band keys by chance), a third of them
    edited copies of earlier ones (or of ``like``'s)."""
    rng = random.Random(seed)
    out: list[str] = []
    for _ in range(n):
        if (out or like) and rng.random() < 0.35:
            w = rng.choice(like or out).split()
            for _ in range(rng.randint(1, 3)):
                w[rng.randrange(len(w))] = rng.choice(_WORDS)
            out.append(" ".join(w))
        else:
            out.append(" ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 30))))
    return out


def _cache_state(d: Decider) -> tuple[dict[int, int], list[list[int]]]:
    c = d.signatures
    slots = dict(c._slot)
    return slots, [c._slab[s].tolist() for s in sorted(slots.values())]


@pytest.mark.parametrize("bits", [64, 128])
def test_array_merge_equals_the_loop_on_every_group(monkeypatch, bits: int) -> None:
    stored = _texts(1, 600)
    new = _texts(2, 300, like=stored)
    seen = {"calls": 0, "band_rows": 0, "added": 0, "made": 0}
    loop = Decider._lsh_union

    def spy(self, fps, sig, lims, hit_rids, hit_d, lsh_rids, rows, cached, keys=None):
        # the loop answers; the array merge is run on the inputs and cache as the loop found
        # them (copies) and must give the same candidates and leave the same cache
        cache, rows_before = copy.deepcopy(self.signatures), dict(rows)
        cached_before = set(cache._slot)
        want = loop(self, fps, sig, lims, hit_rids, hit_d, lsh_rids, rows, cached, keys)
        after_loop, kept = _cache_state(self), self.signatures
        self.signatures = cache
        try:
            keys = BandKeys.of(lsh_rids)
            got = union_arrays(self, fps, sig, lims, hit_rids, hit_d, keys, rows_before, cached)
            assert got is not None
            for g, w in zip(got, want, strict=True):
                assert g.dtype == w.dtype and g.tolist() == w.tolist()
            assert _cache_state(self) == after_loop
        finally:
            self.signatures = kept
        seen["calls"] += 1
        seen["band_rows"] += sum(len(a) for a in lsh_rids)
        seen["added"] += len(want[1]) - len(hit_rids)
        seen["made"] += len(set(after_loop[0]) - cached_before)
        return want

    monkeypatch.setattr(decide_mod, "ARRAY_UNION_MIN", 10**9)  # the loop decides
    monkeypatch.setattr(Decider, "_lsh_union", spy)
    # a small cache, so that made signatures replace cached ones
    with Deduplicator.open(fingerprinter={"bits": bits}, signature_cache_rows=64) as d:
        d.add([{"id": f"s{i}", "text": t} for i, t in enumerate(stored[:300])])
        d.delete("s3")
        d.add([{"id": f"s{i}", "text": t} for i, t in enumerate(stored[300:], 300)])
        d.check([{"id": f"n{i}", "text": t} for i, t in enumerate(new)])
        d.check_and_add([{"id": f"m{i}", "text": t} for i, t in enumerate(new)])
    assert seen["calls"] >= 3
    # band candidates to merge, some of them added, signatures made for some
    assert seen["band_rows"] > 500 and seen["added"] > 50 and seen["made"] > 0, (
        seen
    )  # the groups had band candidates to merge


def test_large_groups_decide_as_small_ones(monkeypatch) -> None:
    stored = _texts(3, 500)
    new = _texts(4, 400, like=stored)

    def run(limit: int) -> list[tuple]:
        monkeypatch.setattr(decide_mod, "ARRAY_UNION_MIN", limit)
        with Deduplicator.open() as d:
            d.add([{"id": f"s{i}", "text": t} for i, t in enumerate(stored)])
            got = d.check([{"id": f"n{i}", "text": t} for i, t in enumerate(new)])
            got += d.check_and_add([{"id": f"m{i}", "text": t} for i, t in enumerate(new)])
        return [(x.id, x.duplicate, x.added, x.matches) for x in got]

    arrays, loop = run(1), run(10**9)
    assert arrays == loop
    assert sum(x[1] for x in loop) > 100


def test_row_ids_too_large_to_pack_fall_back_to_the_loop() -> None:
    with Deduplicator.open() as d:
        fps = np.zeros(2, np.uint64)
        rids = [np.array([2**62], np.int64), np.zeros(0, np.int64)]
        assert (
            union_arrays(
                d._decider,
                fps,
                np.zeros((2, 4), np.uint16),
                np.zeros(3, np.int64),
                np.zeros(0, np.int64),
                np.zeros(0, np.int32),
                BandKeys.of(rids),
                {},
                {},
            )
            is None
        )
