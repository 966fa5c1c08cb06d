"""``HammingIndex.search`` returns a named result (issue 33): ``SearchResult(lims, ids,
distances)``, still unpackable as that triple; the same arrays as the brute-force reference."""

from __future__ import annotations

import numpy as np

from neardup.index import HammingIndex
from neardup.index.hamming_index import SearchResult
from neardup.index.reference import search_reference


def test_search_returns_a_named_result_in_ids_then_distances_order():
    rng = np.random.default_rng(3)
    fps = rng.integers(0, 2**63, 500, dtype=np.uint64)
    queries = np.concatenate(
        [fps[:20] ^ np.uint64(0b101), rng.integers(0, 2**63, 5, dtype=np.uint64)]
    )
    index = HammingIndex(bits=64, max_distance=3, expected_size=500)
    index.add(fps)
    res = index.search(queries)
    assert isinstance(res, SearchResult) and isinstance(res, tuple)
    assert res._fields == ("lims", "ids", "distances")
    lims, ids, distances = res  # still a triple
    assert lims is res.lims and ids is res.ids and distances is res.distances
    assert res.lims.dtype == np.int64 and res.ids.dtype == np.int64
    assert res.distances.dtype == np.int32
    want = search_reference(fps, np.arange(fps.size), queries, 3)
    for got, ref in zip(res, want, strict=True):
        assert np.array_equal(got, ref)
    assert res.distances[res.lims[0] : res.lims[1]].tolist() == [2]  # fps[0] ^ 0b101
