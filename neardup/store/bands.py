"""The MinHash-LSH candidate channel of the store: band keys per row, searchable by key.

Each document with tokens has ``plan.bands`` band keys (:func:`band_entries`: the batch
pipeline's :mod:`neardup.fingerprint.minhash` signatures and band keys, so a key here is the key
``neardup dedup`` groups by). A key is stored as one uint64 *entry key* that also names its band:
``key | band << 48`` when the band's ``rows`` 16-bit values fit 48 bits (``rows <= 3``, the
default plan; exact), else ``mix64(key) ^ mix64(band)`` (two different (band, key) pairs share
an entry key with probability 2**-64; a false collision only adds a candidate that the
agreement filter and verification then reject).

:class:`BandRuns` (the memtable's part) keeps (entry key, row id) pairs in sorted runs of
doubling sizes (an append buffer sealed every ``buffer`` entries, runs merged like a binary
counter), so adds cost O(log n) amortised and a lookup is one ``searchsorted`` per run.
Segments keep theirs sorted in a section of the segment file (:mod:`neardup.store.segment`).

:func:`lookup` bounds the work per query: of a bucket (one band key) with more than
``2 * cap`` rows only the ``cap`` oldest and ``cap`` newest rows are candidates, as the batch
pipeline pairs a late member of a large bucket with the bucket's first ``cap`` members and its
``cap`` predecessors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["BandRuns", "band_entries", "entry_keys", "lookup", "lookup_reference"]

_BAND_SHIFT = np.uint64(48)


def entry_keys(keys: npt.NDArray[np.uint64], rows: int) -> npt.NDArray[np.uint64]:
    """Entry keys of band keys ``keys`` (bands, n): the band folded into the key (see module)."""
    from ..fingerprint.minhash import mix64

    nb = keys.shape[0]
    band = np.arange(nb, dtype=np.uint64)[:, None]
    if rows * 16 <= 48 and nb < (1 << 16):
        return keys | (band << _BAND_SHIFT)
    return mix64(keys) ^ mix64(band + np.uint64(0x9E3779B97F4A7C15))


def band_entries(
    sig: npt.NDArray[np.uint16], usable: npt.NDArray[np.bool_], plan: Any
) -> npt.NDArray[np.uint64]:
    """Entry keys (n, bands) of signatures ``sig`` (n, hashes) under ``plan``; rows that are not
    ``usable`` (no tokens: never candidates, as in the batch pipeline) get an empty key set,
    marked by :data:`NO_KEYS` in every column."""
    from ..fingerprint.minhash import BAND_BLOCK, band_key_block, band_keys

    n = sig.shape[0]
    out = np.empty((plan.bands, n), np.uint64)
    for b0 in range(0, plan.bands, BAND_BLOCK):
        b1 = min(plan.bands, b0 + BAND_BLOCK)
        if plan.rows <= 4:
            out[b0:b1] = band_key_block(sig, b0, b1, plan.rows)
        else:
            for b in range(b0, b1):
                out[b] = band_keys(sig, b, plan.rows)
    ent = entry_keys(out, plan.rows).T.copy()
    ent[~np.asarray(usable, bool)] = NO_KEYS
    return ent


#: entry key of a row without band keys (no tokens; never stored, never looked up)
NO_KEYS = np.uint64(0xFFFFFFFFFFFFFFFF)


def flatten(
    ent: npt.NDArray[np.uint64], rowids: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    """(entry keys, row ids) of the rows' usable entries, flat (unsorted)."""
    if ent.size == 0:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    nb = ent.shape[1]
    k = ent.ravel()
    r = np.repeat(np.asarray(rowids, np.int64), nb)
    ok = k != NO_KEYS
    return k[ok], r[ok]


def sort_entries(
    keys: npt.NDArray[np.uint64], rids: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    """Sorted by (key, row id): a bucket's rows are contiguous, oldest first."""
    order = np.lexsort((rids, keys))
    return keys[order], rids[order]


def lookup(
    runs: Sequence[tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]],
    queries: npt.NDArray[np.uint64],
    cap: int,
) -> list[npt.NDArray[np.int64]]:
    """Row ids sharing a band key with each query (``queries`` (q, bands) entry keys; rows of
    :data:`NO_KEYS` find nothing), unique and sorted per query. ``runs``: sorted (key, row id)
    arrays (row ids may be global row ids or anything the caller maps). A bucket of more than
    ``2 * cap`` rows over all runs gives its ``cap`` smallest and ``cap`` largest row ids.

    Vectorised over the queries: each distinct query key is searched once per run, in sorted
    order (neighbouring searches touch the same cache lines), the buckets are gathered with
    array arithmetic and only buckets over the cap are walked in Python; equal to
    :func:`lookup_reference` (tests/test_online_lsh.py)."""
    q, nb = queries.shape if queries.ndim == 2 else (0, 0)
    if q == 0:
        return []
    empty = np.zeros(0, np.int64)
    flat = queries.ravel()
    valid = np.flatnonzero(flat != NO_KEYS)
    if not valid.size:
        return [empty] * q
    uk, inv = np.unique(flat[valid], return_inverse=True)  # sorted distinct query keys
    inv = inv.ravel()
    nu = uk.size
    found: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], Any]] = []
    total = np.zeros(nu, np.int64)
    for keys, rids in runs:
        if not len(keys):
            continue
        lo = np.searchsorted(keys, uk, "left")
        hi = np.searchsorted(keys, uk, "right")
        total += hi - lo
        found.append((lo, hi, rids))
    big = total > 2 * cap
    seg_u: list[npt.NDArray[np.int64]] = []  # distinct key index of each gathered row
    seg_r: list[npt.NDArray[np.int64]] = []
    for lo, hi, rids in found:
        cnt = hi - lo
        cnt[big] = 0
        sel = np.flatnonzero(cnt)
        if not sel.size:
            continue
        c = cnt[sel]
        at = _ranges(lo[sel], c)
        seg_u.append(np.repeat(sel, c))
        seg_r.append(np.asarray(rids[at], np.int64))
    for u in np.flatnonzero(big).tolist():
        parts = []
        for lo, hi, rids in found:
            a, b = int(lo[u]), int(hi[u])
            if a == b:
                continue
            if b - a > 2 * cap:
                parts.append(rids[a : a + cap])
                parts.append(rids[b - cap : b])
            else:
                parts.append(rids[a:b])
        got = np.unique(np.concatenate(parts))
        if got.size > 2 * cap:
            got = np.concatenate([got[:cap], got[-cap:]])
        seg_u.append(np.full(got.size, u, np.int64))
        seg_r.append(np.asarray(got, np.int64))
    if not seg_u:
        return [empty] * q
    ku = np.concatenate(seg_u)
    kr = np.concatenate(seg_r)
    order = np.argsort(ku, kind="stable")
    kr = kr[order]
    ustart = np.searchsorted(ku[order], np.arange(nu + 1))
    # every valid query entry gets its key's rows
    c = np.diff(ustart)[inv]
    sel = np.flatnonzero(c)
    if not sel.size:
        return [empty] * q
    c = c[sel]
    qi = np.repeat(valid[sel] // nb, c)
    rr = kr[_ranges(ustart[inv[sel]], c)]
    order = np.lexsort((rr, qi))
    qi, rr = qi[order], rr[order]
    keep = np.ones(qi.size, bool)
    keep[1:] = (qi[1:] != qi[:-1]) | (rr[1:] != rr[:-1])
    qi, rr = qi[keep], rr[keep]
    bounds = np.searchsorted(qi, np.arange(q + 1)).tolist()
    return [rr[bounds[k] : bounds[k + 1]] for k in range(q)]


def _ranges(starts: npt.NDArray[np.int64], counts: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Concatenated ``arange(starts[k], starts[k] + counts[k])`` (counts > 0)."""
    ends = np.cumsum(counts)
    return np.repeat(starts - ends + counts, counts) + np.arange(int(ends[-1]), dtype=np.int64)


def lookup_reference(
    runs: Sequence[tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]],
    queries: npt.NDArray[np.uint64],
    cap: int,
) -> list[npt.NDArray[np.int64]]:
    """:func:`lookup`, one query entry at a time (the twin the tests compare it with)."""
    q, nb = queries.shape if queries.ndim == 2 else (0, 0)
    out: list[list[npt.NDArray[np.int64]]] = [[] for _ in range(q)]
    if q == 0:
        return []
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


def _by_key(
    keys: npt.NDArray[np.uint64], rids: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
    """Sorted by key, stably: rows arrive in row-id order (the writer allocates them
    ascending, the log replays them so), so a bucket stays oldest first; one stable sort of the
    keys costs less than half a lexsort of (key, row id)."""
    order = np.argsort(keys, kind="stable")
    return keys[order], rids[order]


class BandRuns:
    """In-memory (entry key, row id) pairs in sorted runs (the memtable's band keys)."""

    def __init__(self, buffer: int = 1 << 15) -> None:
        self.buffer = int(buffer)
        self.runs: list[tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]] = []
        self._buf_k: list[npt.NDArray[np.uint64]] = []
        self._buf_r: list[npt.NDArray[np.int64]] = []
        self._buf_n = 0
        self._sealed_buf: tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]] | None = None

    def __len__(self) -> int:
        return sum(len(k) for k, _ in self.runs) + self._buf_n

    @property
    def nbytes(self) -> int:
        return 16 * len(self)

    def add(self, ent: npt.NDArray[np.uint64], rowids: npt.NDArray[np.int64]) -> None:
        """Add the entry keys ``ent`` (n, bands) of rows ``rowids``."""
        k, r = flatten(ent, rowids)
        if not len(k):
            return
        self._buf_k.append(k)
        self._buf_r.append(r)
        self._buf_n += len(k)
        self._sealed_buf = None
        if self._buf_n >= self.buffer:
            self._seal()

    def _buffer(self) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
        if self._sealed_buf is None:
            if not self._buf_n:
                self._sealed_buf = (np.zeros(0, np.uint64), np.zeros(0, np.int64))
            else:
                self._sealed_buf = _by_key(np.concatenate(self._buf_k), np.concatenate(self._buf_r))
        return self._sealed_buf

    def _seal(self) -> None:
        run = self._buffer()
        self._buf_k, self._buf_r, self._buf_n, self._sealed_buf = [], [], 0, None
        # binary counter: merge while the last run is not more than twice the new one
        while self.runs and len(self.runs[-1][0]) <= 2 * len(run[0]):
            k0, r0 = self.runs.pop()
            run = _by_key(np.concatenate([k0, run[0]]), np.concatenate([r0, run[1]]))
        self.runs.append(run)

    def all_runs(self) -> list[tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]]:
        return [*self.runs, self._buffer()]

    def lookup(self, queries: npt.NDArray[np.uint64], cap: int) -> list[npt.NDArray[np.int64]]:
        return lookup(self.all_runs(), queries, cap)

    def entries(self) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64]]:
        """Every (entry key, row id), sorted."""
        runs = [r for r in self.all_runs() if len(r[0])]
        if not runs:
            return np.zeros(0, np.uint64), np.zeros(0, np.int64)
        return sort_entries(
            np.concatenate([k for k, _ in runs]), np.concatenate([r for _, r in runs])
        )

    def remove_rows(self, rowids: npt.NDArray[np.int64]) -> None:
        """Drop the entries of ``rowids`` (a failed sync's undo; retention in memory)."""
        if not len(rowids):
            return
        k, r = self.entries()
        keep = ~np.isin(r, np.asarray(rowids, np.int64))
        self.clear()
        if keep.any():
            self.runs = [(k[keep], r[keep])]

    def clear(self) -> None:
        self.runs = []
        self._buf_k, self._buf_r, self._buf_n, self._sealed_buf = [], [], 0, None
