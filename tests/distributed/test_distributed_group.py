"""The ``group`` step's fast grouping (a plain sort of the keys picks the records whose key occurs
twice, the 4-key lexsort runs over those only) equals grouping by brute force; the shuffle's
16-bit bucket sort keeps each bucket's rows in their input order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.distributed import _store
from neardup.distributed.candidates import KEYS_SCHEMA, _group_rows, _size_hist


def brute_groups(
    kind: Any, sub: Any, key: Any, pos: Any, fp: Any
) -> list[tuple[int, int, int, int, int]]:
    groups: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    for r in zip(kind, sub, key, pos, fp, strict=True):
        groups.setdefault((int(r[0]), int(r[1]), int(r[2])), []).append((int(r[3]), int(r[4])))
    rows = []
    g = 0
    for k in sorted(groups):
        members = sorted(groups[k])
        if len(members) < 2:
            continue
        rows += [(k[0], k[1], p, f, g) for p, f in members]
        g += 1
    return rows


def keys_table(rng: np.random.Generator, docs: int, subs: int, key_range: int) -> pa.Table:
    """Each document emits one record per (kind, sub), as the keys step does; keys drawn from
    ``key_range`` values (small: many shared keys, also across subs) or anywhere (alone)."""
    pos = np.sort(rng.choice(1 << 45, docs, replace=False)).astype(np.int64)
    cols: dict[str, list[np.ndarray]] = {c: [] for c in ("kind", "sub", "key", "pos", "fp")}
    fp = rng.integers(0, 2**63, docs).astype(np.uint64)
    for kind in (0, 1):
        for sub in range(subs):
            small = rng.random(docs) < 0.5
            key = np.where(
                small,
                rng.integers(0, key_range, docs).astype(np.uint64),
                rng.integers(0, 2**63, docs).astype(np.uint64),
            )
            cols["kind"].append(np.full(docs, kind, np.uint8))
            cols["sub"].append(np.full(docs, sub, np.int32))
            cols["key"].append(key)
            cols["pos"].append(pos)
            cols["fp"].append(fp)
    t = pa.table({c: np.concatenate(v) for c, v in cols.items()}, schema=KEYS_SCHEMA)
    return t.take(rng.permutation(t.num_rows))  # any record order


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    docs=st.integers(0, 60),
    subs=st.integers(1, 4),
    key_range=st.integers(1, 40),
)
def test_group_rows_equal_brute_force(seed: int, docs: int, subs: int, key_range: int) -> None:
    t = keys_table(np.random.default_rng(seed), docs, subs, key_range)
    got = _group_rows(t)
    want = brute_groups(*(t[c].to_numpy() for c in ("kind", "sub", "key", "pos", "fp")))
    rows = list(
        zip(*(got[c].tolist() for c in ("kind", "sub", "pos", "fp", "g")), strict=True)
    ) if got["pos"].size else []  # fmt: skip
    assert rows == want
    # the band histogram: one row per (band, size) of the MinHash (kind 0) groups
    lsh = got["kind"] == 0
    g = got["g"][lsh]
    bounds = np.flatnonzero(np.r_[True, g[1:] != g[:-1], True]) if g.size else np.zeros(1, int)
    hist = _size_hist(bounds, got["sub"][lsh][bounds[:-1]].astype(np.int64))
    band_of: dict[int, int] = {}
    size_of: dict[int, int] = {}
    for kind, sub, _, _, gid in want:
        if kind == 0:
            band_of[gid] = sub
            size_of[gid] = size_of.get(gid, 0) + 1
    per: dict[tuple[int, int], int] = {}
    for gid, band in band_of.items():
        per[(band, size_of[gid])] = per.get((band, size_of[gid]), 0) + 1
    assert hist == [[b, s, n] for (b, s), n in sorted(per.items())]


def test_shuffle_keeps_row_order_per_bucket(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    n = 5000
    bucket = rng.integers(0, 300, n).astype(np.int64)
    t = pa.table({"x": np.arange(n, dtype=np.int64)})
    _store.shuffle_write(str(tmp_path), "s", 0, t, bucket)
    for b in range(300):
        got = _store.read_bucket(str(tmp_path), "s", b, t.schema)["x"].to_numpy()
        assert np.array_equal(got, np.flatnonzero(bucket == b))
