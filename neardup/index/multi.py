"""One search call over many read-only indexes: :class:`IndexSet`.

An online store keeps its fingerprints in a dozen or so immutable segments (one
:class:`~neardup.index.HammingIndex` each). Searching them one by one pays a fixed Python and
numba-dispatch overhead per index and call that outweighs the probes themselves for a small
query batch (see ``benchmarks/bench_store.py``). :class:`IndexSet` gathers
the table segments of all its indexes once (a numba typed list of per-segment array tuples,
made and filled by cached kernels, so a new process compiles nothing here) and probes them
all in **one** kernel call, so a small query batch pays the fixed cost once.

The answer is exactly that of searching every index and merging (CSR, per query sorted by
(distance, id)); ``tests/index/test_index_multi.py`` checks it against that and against brute force.
Compressed segments (:mod:`neardup.index.compressed`) of the indexes are gathered the same way
into a :class:`~neardup.index.compressed.CompressedList`, probed in one call per codec.
Indexes that do not fit these paths (rows still in an append buffer, removed rows in
uncompressed segments) are searched on their own and merged, so every index is accepted.

Build an :class:`IndexSet` when the set of indexes changes (a cost per segment, paid once),
not per query.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._jit import kernel
from .._typed import typed_list_append, typed_list_like
from ..errors import ConfigError
from . import _kernels as K
from .compressed import CompressedList, CompressedSegment
from .hamming_index import HammingIndex
from .tables import _ro, _ro_empty

SearchResult = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]

_I64 = np.int64
_U64 = np.uint64


@kernel(nogil=True)
def _search_list(q, k, segs, xfps, xids, xalive, qk, stack, out_q, out_r, out_d):
    """Probe every segment of ``segs`` for the queries ``q``, then compare them with the
    extra rows ``xfps`` / ``xids`` whose ``xalive`` is set (an append buffer); writes (query,
    id, distance).

    Same output protocol as :func:`neardup.index._kernels.search_tables`: returns the total
    count; when it exceeds the outputs' length only the first ones were written (ids mapped)
    and the caller retries with larger outputs.
    """
    cap = out_q.shape[0]
    cnt = 0
    W = q.shape[1]
    kk = np.int64(k)
    for qi in range(q.shape[0]):
        for i in range(xfps.shape[0]):
            if not xalive[i]:
                continue
            d = K._pc(xfps[i, 0] ^ q[qi, 0])
            if W == 2:
                d += K._pc(xfps[i, 1] ^ q[qi, 1])
            if d <= kk:
                if cnt < cap:
                    out_q[cnt] = qi
                    out_r[cnt] = xids[i]
                    out_d[cnt] = d
                cnt += 1
    for s in range(len(segs)):
        brute, ids, arrays = segs[s]  # arrays: search_tables' from keys to sub
        lo = min(cnt, cap)
        if brute:
            c = K.search_brute(q, arrays[2], k, out_q[lo:], out_r[lo:], out_d[lo:])
        else:
            scratch = (qk, stack, out_q[lo:], out_r[lo:], out_d[lo:])
            c = K.search_tables(q, k, *(arrays + scratch))
        for j in range(lo, lo + min(c, cap - lo)):
            out_r[j] = ids[out_r[j]]
        cnt += c
    return cnt


@kernel
def _search_list_gil(q, k, segs, xfps, xids, xalive, qk, stack, out_q, out_r, out_d):
    """:func:`_search_list` holding the GIL (a few queries: see ``_kernels.search_tables_gil``)."""
    return _search_list(q, k, segs, xfps, xids, xalive, qk, stack, out_q, out_r, out_d)


_ENTRY_PROTO: Any = None


def _entry_proto() -> tuple[Any, ...]:
    """A segment tuple of :meth:`IndexSet._entry`'s numba type (empty arrays): the item type of
    the set's typed list (an empty set still needs a typed list)."""
    global _ENTRY_PROTO
    if _ENTRY_PROTO is None:
        u64_2, i64_1, i64_2 = _ro_empty(_U64, 2), _ro_empty(_I64, 1), _ro_empty(_I64, 2)
        _ENTRY_PROTO = (
            True,
            i64_1,
            (
                u64_2, _ro_empty(np.uint32, 2), u64_2, i64_2, 0, _ro_empty(_I64, 3), u64_2,
                i64_1, i64_1, i64_1, u64_2, i64_2, i64_1, u64_2, u64_2, i64_1, i64_2,
                i64_1,
            ),
        )  # fmt: skip
    return _ENTRY_PROTO


#: no extra rows, per fingerprint width in words
_NO_ROWS = {
    w: (np.zeros((0, w), np.uint64), np.zeros(0, np.int64), np.zeros(0, np.bool_)) for w in (1, 2)
}


class IndexSet:
    """Several read-only :class:`HammingIndex` objects searched as one (see the module doc).

    Parameters
    ----------
    indexes : sequence of HammingIndex
        Same ``bits``; ids should be distinct across indexes (they are reported as stored).
        The set reflects the indexes' contents *at construction*: build a new one after adding
        to or removing from any of them.

    Examples
    --------
    >>> import numpy as np
    >>> from neardup.index import HammingIndex
    >>> a = HammingIndex(bits=64, max_distance=3); _ = a.add(np.array([0b1011], np.uint64), ids=[7])
    >>> b = HammingIndex(bits=64, max_distance=3); _ = b.add(np.array([0b1000], np.uint64), ids=[9])
    >>> lims, ids, d = IndexSet([a, b]).search(np.array([0b1010], np.uint64), 3)
    >>> ids.tolist(), d.tolist()
    ([7, 9], [1, 1])
    """

    def __init__(
        self, indexes: Sequence[HammingIndex], *, sealed: Sequence[HammingIndex] = ()
    ) -> None:
        indexes = list(indexes)
        sealed = list(sealed)
        bits = {ix.bits for ix in [*indexes, *sealed]}
        if len(bits) > 1:
            raise ConfigError(f"an IndexSet takes indexes of one width, got bits {sorted(bits)}")
        self.bits = bits.pop() if bits else 64
        self.words = 1 if self.bits == 64 else 2
        self.max_distance = min((ix.max_distance for ix in [*indexes, *sealed]), default=64)
        self._rest: list[HammingIndex] = []  # searched one by one
        #: False when a ``sealed`` index has removed rows: the set then does not cover it
        self.sealed_ok = True
        # typed lists made and filled by cached kernels (numba compiles typed.List's own
        # methods in every process: _typed.typed_list_like); counted here, not with len()
        segs = typed_list_like(_entry_proto())
        # compressed segments: one typed list and call per codec (neardup.index.compressed)
        csegs = CompressedList()
        n_segs = n_csegs = 0
        n_tables = 1
        n = 0
        for ix, whole in [(ix, True) for ix in indexes] + [(ix, False) for ix in sealed]:
            snap = ix.snapshot()
            seg_list, n_buf = snap.segments, len(snap.buffer_ids)
            comp = [isinstance(s, CompressedSegment) for s in seg_list]
            # compressed segments (their own kernel, which drops dead rows itself) are taken
            # from whole indexes only: a sealed index's set must cover all of it
            if (
                any(s.n_dead for s, c in zip(seg_list, comp, strict=True) if not c)
                or (whole and n_buf)
                or (any(comp) and not whole)
            ):
                if whole:
                    self._rest.append(ix)
                else:
                    self.sealed_ok = False
                continue
            pa = snap.arrays
            for s in seg_list:
                if s.n == 0:
                    continue
                if isinstance(s, CompressedSegment):
                    csegs.append(s, pa)
                    n_csegs += 1
                else:
                    n_tables = max(n_tables, pa.n_tables)
                    typed_list_append(segs, self._entry(s, pa))
                    n_segs += 1
                n += s.n
        self._segs = segs
        self._csegs = csegs
        self._n_csegs = n_csegs
        self._n_segs = n_segs
        self._n_tables = n_tables
        self._n = n + sum(len(ix) for ix in self._rest)

    def _entry(self, s: Any, pa: Any) -> tuple[Any, ...]:
        # (search_tables' arguments from keys to sub, read-only: the types a segment searched
        # alone passes too, so the kernel compiles once)
        return (s.keys is None, _ro(s.ids, _I64, 1), s.search_arrays(pa))

    def __len__(self) -> int:
        """Fingerprints in the set (at construction)."""
        return self._n

    @property
    def segments(self) -> int:
        """Table segments probed in the one kernel call."""
        return self._n_segs

    def search(
        self,
        queries: npt.ArrayLike,
        max_distance: int,
        *,
        extra: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> SearchResult:
        """Every fingerprint within ``max_distance`` of each query, as :meth:`HammingIndex.search`.

        ``extra``: more rows compared in the same call, ``(fingerprints uint64 (m, words),
        ids int64 (m,), alive bool (m,))`` (e.g. the append buffer of a ``sealed`` index, see
        :meth:`HammingIndex.buffer_rows`).

        Returns ``(lims, ids, distances)``: CSR, per query sorted by (distance, id).
        """
        k = int(max_distance)
        if not 0 <= k <= self.max_distance:
            raise ConfigError(
                f"max_distance must be in [0, {self.max_distance}] (the smallest max_distance "
                f"of the set's indexes), got {max_distance}"
            )
        q = np.ascontiguousarray(queries, dtype=np.uint64).reshape(-1, self.words)
        nq = len(q)
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        if extra is None:
            xf, xi, xa = _NO_ROWS[self.words]
        else:
            xf = np.ascontiguousarray(extra[0], dtype=np.uint64).reshape(-1, self.words)
            xi = np.ascontiguousarray(extra[1], dtype=np.int64)
            xa = np.ascontiguousarray(extra[2], dtype=np.bool_)
        if (self._n_segs or len(xi)) and nq:
            qk = np.empty(8 * self._n_tables, dtype=np.uint64)
            stack = np.empty((4, 256), dtype=np.int64)
            cap = 4 * nq + 64
            while True:
                out_q = np.empty(cap, dtype=np.int64)
                out_r = np.empty(cap, dtype=np.int64)
                out_d = np.empty(cap, dtype=np.int32)
                probe = _search_list_gil if nq <= 8 else _search_list
                cnt = probe(q, k, self._segs, xf, xi, xa, qk, stack, out_q, out_r, out_d)
                if cnt <= cap:
                    break
                cap = int(cnt)
            parts.append((out_q[:cnt], out_r[:cnt], out_d[:cnt]))
        if self._n_csegs and nq:
            parts.append(self._csegs.search(q, k))
        for ix in self._rest:
            lims, ids, d = ix.search(q if self.words == 2 else q[:, 0], k)
            parts.append((np.repeat(np.arange(nq, dtype=np.int64), np.diff(lims)), ids, d))
        if not parts:
            return np.zeros(nq + 1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32)
        qi = np.concatenate([p[0] for p in parts]) if len(parts) > 1 else parts[0][0]
        ids = np.concatenate([p[1] for p in parts]) if len(parts) > 1 else parts[0][1]
        d = np.concatenate([p[2] for p in parts]) if len(parts) > 1 else parts[0][2]
        csr = K.csr_sort_gil if nq <= 8 else K.csr_sort
        return csr(nq, qi, ids, d.astype(np.int32, copy=False), k)
