"""Pure NumPy brute force and plain-Python twins: the references every fast path of the index
is tested against (not in any ``__all__`` of the package).

Set ``NEARDUP_REFERENCE=index`` to make :class:`~neardup.index.HammingIndex` answer every
search with :func:`search_reference` (slow, but obviously right). The band index's sections,
merges and capped lookup have their NumPy twins here too, and the batch-mode probe its
plain-Python one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._jit import kernel
from ..fingerprint.distance import as_fingerprints
from ..fingerprint.minhash import NO_KEYS
from ._batch_kernels import QueryTables
from ._kernels import _insertion_sort_by
from .bands import BandSection, PackedSection, SectionGroup, Unsorted

__all__: list[str] = []

Run = Any  # a sorted (compact keys, row ids) pair of arrays, or a BandSection
_LOW32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)


def _dist_block(q: np.ndarray, f: np.ndarray) -> npt.NDArray[np.int32]:
    x = np.bitwise_count(q[:, None] ^ f[None, :])
    if x.ndim == 3:
        return x.sum(axis=-1, dtype=np.int32)
    return x.astype(np.int32)


def search_reference(
    fingerprints: np.ndarray,
    ids: np.ndarray,
    queries: np.ndarray,
    max_distance: int,
    *,
    block: int = 256,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """Brute-force range search with the index's output contract.

    Returns ``(lims, ids, distances)``: results of query ``i`` are
    ``ids[lims[i]:lims[i+1]]``, sorted by (distance, id).
    """
    f = as_fingerprints(fingerprints)
    q = as_fingerprints(queries, name="queries")
    ids = np.asarray(ids, dtype=np.int64)
    lims = [0]
    out_i: list[np.ndarray] = []
    out_d: list[np.ndarray] = []
    for s in range(0, len(q), block):
        d = (
            _dist_block(q[s : s + block], f)
            if len(f)
            else np.zeros((len(q[s : s + block]), 0), np.int32)
        )
        for row in d:
            hit = np.nonzero(row <= max_distance)[0]
            hid, hd = ids[hit], row[hit]
            o = np.lexsort((hid, hd))
            out_i.append(hid[o])
            out_d.append(hd[o].astype(np.int32))
            lims.append(lims[-1] + len(hit))
    return (
        np.asarray(lims, dtype=np.int64),
        np.concatenate(out_i) if out_i else np.empty(0, np.int64),
        np.concatenate(out_d) if out_d else np.empty(0, np.int32),
    )


def all_pairs_reference(
    fingerprints: np.ndarray, max_distance: int, *, block: int = 256
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """Every pair of positions ``a < b`` within ``max_distance``, sorted by (a, b)."""
    f = as_fingerprints(fingerprints)
    A: list[np.ndarray] = []
    B: list[np.ndarray] = []
    D: list[np.ndarray] = []
    for s in range(0, len(f), block):
        d = _dist_block(f[s : s + block], f)
        a, b = np.nonzero(d <= max_distance)
        a = a + s
        keep = a < b
        A.append(a[keep])
        B.append(b[keep])
        D.append(d[a[keep] - s, b[keep]])
    if not A:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int32)
    a, b, d = np.concatenate(A), np.concatenate(B), np.concatenate(D)
    o = np.lexsort((b, a))
    return a[o].astype(np.int64), b[o].astype(np.int64), d[o].astype(np.int32)


def merge_sections_reference(a: BandSection, b: BandSection) -> BandSection:
    """NumPy twin of :func:`~neardup.index.band_merge.merge_sections`: both materialised, one stable
    sort by key."""
    ka, ra = a
    kb, rb = b
    k, r = by_key_reference(np.concatenate([ka, kb]), np.concatenate([ra, rb]))
    return BandSection.from_sorted(k, (r - a.base).astype(np.uint32), base=a.base)


def merge_mapped_reference(
    sections: Sequence[BandSection], maps: Sequence[npt.NDArray[np.int64]]
) -> BandSection:
    """NumPy twin of :func:`~neardup.index.band_merge.merge_mapped`: every section materialised,
    its rows renamed by its map, the negative ones dropped, one sort by (key, row)."""
    ks, rs = [np.zeros(0, np.uint64)], [np.zeros(0, np.int64)]
    for sec, m in zip(sections, maps, strict=True):
        k, _ = sec
        r = np.asarray(m, np.int64)[sec.rows.astype(np.int64)]
        ks.append(k[r >= 0])
        rs.append(r[r >= 0])
    k, r = np.concatenate(ks), np.concatenate(rs)
    o = np.lexsort((r, k))
    return BandSection.from_sorted(k[o], r[o].astype(np.uint32))


def section_search_reference(
    offsets: npt.NDArray[np.uint64], keys: npt.NDArray[np.uint32], uk: npt.NDArray[np.uint64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """NumPy twin of the section search: one ``searchsorted`` pair per group present in the
    sorted keys ``uk``."""
    lo = np.zeros(uk.size, np.int64)
    hi = np.zeros(uk.size, np.int64)
    groups, starts = np.unique(uk >> _SHIFT32, return_index=True)
    ends = [*starts[1:].tolist(), uk.size]
    for g, a, b in zip(groups.tolist(), starts.tolist(), ends, strict=True):
        if g + 1 >= len(offsets):
            continue
        o0, o1 = int(offsets[g]), int(offsets[g + 1])
        low = (uk[a:b] & _LOW32).astype(np.uint32)
        lo[a:b] = o0 + np.searchsorted(keys[o0:o1], low, "left")
        hi[a:b] = o0 + np.searchsorted(keys[o0:o1], low, "right")
    return lo, hi


def _sorted_run(run: Run) -> Run:
    """An :class:`~neardup.index.bands.Unsorted` buffer as the sorted run it stands for (by
    key, then row); any other run as it is."""
    if not isinstance(run, Unsorted):
        return run
    o = np.lexsort((run.rids, run.keys))
    return run.keys[o], run.rids[o]


def lookup_reference(
    runs: Sequence[Run],
    queries: npt.NDArray[np.uint64],
    cap: int,
) -> list[npt.NDArray[np.int64]]:
    """:func:`~neardup.index.bands.lookup`, one query entry at a time (the twin the tests
    compare it with)."""
    q, nb = queries.shape if queries.ndim == 2 else (0, 0)
    out: list[list[npt.NDArray[np.int64]]] = [[] for _ in range(q)]
    if q == 0:
        return []
    # a group of sections (a BandIndex's, a store's segments) as its sections, materialised
    runs = [s for r in runs for s in (r.sections if isinstance(r, SectionGroup) else [r])]
    runs = [tuple(r) if isinstance(r, BandSection | PackedSection) else r for r in runs]
    runs = [_sorted_run(r) for r in runs]
    flat = queries.ravel()
    valid = flat != NO_KEYS
    found: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], Any]] = []
    total = np.zeros(flat.size, np.int64)
    for keys, rids in runs:
        if not len(keys):
            continue
        lo = np.searchsorted(keys, flat, "left")
        hi = np.searchsorted(keys, flat, "right")
        hi[~valid] = lo[~valid]
        total += hi - lo
        found.append((lo, hi, rids))
    hits = np.flatnonzero(total)
    for e in hits.tolist():
        qi = e // nb
        big = total[e] > 2 * cap
        parts = []
        for lo, hi, rids in found:
            a, b = int(lo[e]), int(hi[e])
            if a == b:
                continue
            if big and b - a > 2 * cap:
                parts.append(rids[a : a + cap])
                parts.append(rids[b - cap : b])
            else:
                parts.append(rids[a:b])
        got = np.concatenate(parts) if len(parts) > 1 else parts[0]
        if big:
            got = np.unique(got)
            got = np.concatenate([got[:cap], got[-cap:]]) if got.size > 2 * cap else got
        out[qi].append(np.asarray(got, np.int64))
    return [np.unique(np.concatenate(p)) if p else np.zeros(0, np.int64) for p in out]


def columns_are_groups_reference(ent: npt.NDArray[np.uint64]) -> bool:
    """NumPy twin of :func:`neardup.index.band_section.columns_are_groups`: every key's group
    (its high 32 bits) is its column, or the key is ``NO_KEYS``."""
    cols = np.arange(ent.shape[1], dtype=np.uint64) << np.uint64(32)
    return bool((((ent & ~np.uint64(0xFFFFFFFF)) == cols) | (ent == NO_KEYS)).all())


def by_key_reference(
    keys: npt.NDArray[np.uint64], rids: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    """NumPy twin of the band index's key sort: one stable argsort of the keys."""
    order = np.argsort(keys, kind="stable")
    return keys[order], rids[order]


def probe_reference(
    stored: npt.NDArray[np.uint64], tables: QueryTables, base: int = 0
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """The batch-mode probe (:func:`neardup.index.batch_join.probe`) in plain Python: a dict per
    table from block value to queries."""
    s = np.asarray(stored, dtype=np.uint64).reshape(-1)
    k = tables.max_distance
    out: list[tuple[int, int, int]] = []
    for t in range(len(tables.shifts)):
        sh, m = int(tables.shifts[t]), int(tables.masks[t])
        groups: dict[int, list[tuple[int, int]]] = {}
        for f, p in zip(tables.fps[t].tolist(), tables.pos[t].tolist(), strict=True):
            groups.setdefault((f >> sh) & m, []).append((f, p))
        for i, v in enumerate(s.tolist()):
            for f, p in groups.get((v >> sh) & m, ()):
                x = v ^ f
                d = x.bit_count()
                earlier = any(
                    (x >> int(tables.shifts[u])) & int(tables.masks[u]) == 0 for u in range(t)
                )
                if d <= k and not earlier:
                    out.append((i + base, p, d))
    if not out:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32)
    a = np.array(out, dtype=np.int64)
    return a[:, 0].copy(), a[:, 1].copy(), a[:, 2].astype(np.int32)


@kernel(nogil=True)
def sort_with_rows_reference(keys, sbits):
    """Sort uint64 ``keys`` -> (sorted keys, int64 permutation): one counting-sort pass on the
    top ``sbits`` bits, then a comparison sort inside each (small) bucket (the previous
    :func:`neardup.index._kernels.sort_with_rows`; equal to it except in the order of tied keys' rows, which this
    one leaves to a quicksort in buckets of more than 16)."""
    n = keys.shape[0]
    nb = np.int64(1) << np.int64(sbits)
    shift = np.uint64(64 - sbits)
    start = np.zeros(nb + 1, dtype=np.int64)
    for i in range(n):
        start[np.int64(keys[i] >> shift) + 1] += 1
    for j in range(nb):
        start[j + 1] += start[j]
    pos = start[:-1].copy()
    out_k = np.empty(n, dtype=np.uint64)
    out_r = np.empty(n, dtype=np.int64)
    for i in range(n):
        b = np.int64(keys[i] >> shift)
        p = pos[b]
        out_k[p] = keys[i]
        out_r[p] = i
        pos[b] = p + 1
    for j in range(nb):
        a = start[j]
        b = start[j + 1]
        m = b - a
        if m <= 1:
            continue
        if m <= 16:
            _insertion_sort_by(out_k, out_r, a, b)
        else:
            o = np.argsort(out_k[a:b])
            tk = out_k[a:b][o]
            tr = out_r[a:b][o]
            for q in range(m):  # not a slice assignment (tests/test_jit_cache.py)
                out_k[a + q] = tk[q]
                out_r[a + q] = tr[q]
    return out_k, out_r
