"""A consistent-hash ring with virtual nodes: which machine holds a key, and its replicas.

Every client that reads the same cluster file maps every key to the same nodes, so the mapping
is defined here exactly (no Python ``hash()``, nothing that depends on insertion order):

Key hash ``h(key)`` (64 bits, xxh64 with seed 0, as in :mod:`neardup.hashing`)
    ``str``: ``xxh64(key.encode("utf-8"))``; ``bytes``: ``xxh64(key)``; ``int`` in
    ``[0, 2**64)`` (and a ``uint64`` array in the batch calls): ``xxh64`` of its 8
    little-endian bytes.
Virtual node points
    node ``N`` with weight ``w`` has ``c = max(1, round(vnodes * w))`` points; point ``i`` sits
    at ``xxh64(i as 8 little-endian bytes, seed=xxh64(N.encode("utf-8")))``. A node's points
    depend on its own name and weight only, so adding, removing or re-weighting one node never
    moves a key between two other nodes (monotonicity), and a node with a smaller weight has a
    prefix of the points it would have with a larger one.
Owner
    the node of the first point at or after ``h`` going clockwise (wrapping past ``2**64 - 1``
    to the smallest point); equal points are ordered by node name.
Replicas
    :meth:`RingSnapshot.nodes_for` walks clockwise from the owner's point and collects the
    first ``n`` *distinct* physical nodes.

Balance comes from the number of points: a node's share of the ring is a sum of ``c`` random
arcs, so its relative spread falls as ``1/sqrt(c)``; ``DEFAULT_VNODES`` is chosen from the
measured curve in ``benchmarks/bench_ring.py`` (docs/cluster.md) to keep max/mean load within
the target at 100 nodes.

Reads are lock-free: a :class:`HashRing` holds an immutable :class:`RingSnapshot` and swaps in a
new one on every change (writers serialize on a lock); a reader that needs several lookups to
agree takes :meth:`HashRing.snapshot` once.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import xxhash

from ..errors import ConfigError, InputTypeError, NotFoundError

__all__ = [
    "DEFAULT_VNODES",
    "MAX_POINTS",
    "HashRing",
    "KeyRange",
    "RingSnapshot",
    "key_hash",
    "key_hash_many",
]

#: points per node of weight 1.0 (see docs/cluster.md for the balance curve that sets it)
DEFAULT_VNODES = 6144
#: upper bound on the total number of points (a snapshot's tables grow with it: docs/cluster.md)
MAX_POINTS = 1 << 23

_M64 = (1 << 64) - 1
_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)
_xxh64 = xxhash.xxh64_intdigest


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _xxh64_u64(values: np.ndarray, seed: int = 0) -> np.ndarray:
    """xxh64 of each value's 8 little-endian bytes (the short-input path of xxh64), vectorized.

    Equal bit for bit to ``xxhash.xxh64_intdigest(int(v).to_bytes(8, "little"), seed)``
    (tests/cluster/test_ring.py checks it).
    """
    v = np.asarray(values, dtype=np.uint64)
    with np.errstate(over="ignore"):
        k1 = _rotl(v * _P2, 31) * _P1
        h = np.uint64((seed + 0x27D4EB2F165667C5 + 8) & _M64) ^ k1
        h = _rotl(h, 27) * _P1 + _P4
        h ^= h >> np.uint64(33)
        h *= _P2
        h ^= h >> np.uint64(29)
        h *= _P3
        h ^= h >> np.uint64(32)
    return h


def key_hash(key: str | bytes | int) -> int:
    """The ring position of one key (see the module docstring for the definition)."""
    if type(key) is str:
        return _xxh64(key.encode("utf-8"))
    if isinstance(key, (bytes, bytearray, memoryview)):
        return _xxh64(bytes(key))
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        k = int(key)
        if 0 <= k <= _M64:
            return _xxh64(k.to_bytes(8, "little"))
        raise ConfigError(f"an int ring key must be in [0, 2**64), got {k}; hash larger keys first")
    if isinstance(key, str):  # a str subclass
        return _xxh64(str(key).encode("utf-8"))
    raise InputTypeError(
        f"a ring key must be str, bytes or an int in [0, 2**64), got {type(key).__name__}"
    )


def key_hash_many(keys: np.ndarray | Sequence[str | bytes | int]) -> np.ndarray:
    """Ring positions of many keys as a ``uint64`` array (vectorized for integer arrays)."""
    if isinstance(keys, np.ndarray):
        if keys.dtype.kind == "u" or (
            keys.dtype.kind == "i" and (keys.size == 0 or keys.min() >= 0)
        ):
            return _xxh64_u64(keys.astype(np.uint64, copy=False))
        if keys.dtype.kind == "i":
            raise ConfigError("integer ring keys must be non-negative (they are read as uint64)")
        if keys.dtype.kind not in "OUS":
            raise InputTypeError(
                f"ring keys must be strings, bytes or integers, got dtype {keys.dtype}"
            )
    return np.fromiter((key_hash(k) for k in keys), dtype=np.uint64, count=len(keys))


def _as_uint64_keys(keys: object) -> np.ndarray | None:
    """An integer key array as contiguous uint64 (validated), else None."""
    if isinstance(keys, np.ndarray) and keys.dtype.kind in "iu":
        if keys.dtype.kind == "i" and keys.size and keys.min() < 0:
            raise ConfigError("integer ring keys must be non-negative (they are read as uint64)")
        return np.ascontiguousarray(keys, dtype=np.uint64)
    return None


def _node_points(name: str, count: int) -> np.ndarray:
    return _xxh64_u64(np.arange(count, dtype=np.uint64), seed=_xxh64(name.encode("utf-8")))


def _points_for(weight: float, vnodes: int) -> int:
    return max(1, round(vnodes * weight))


@dataclass(frozen=True)
class KeyRange:
    """Ring positions ``lo..hi`` (both inclusive, ``lo <= hi``) whose owner set changes.

    ``src`` / ``dst`` are the replica sets before and after (tuples of node names, the owner
    first); with one replica they hold one name each. A range wrapping past ``2**64 - 1`` is
    reported as two ranges.
    """

    lo: int
    hi: int
    src: tuple[str, ...]
    dst: tuple[str, ...]

    def __contains__(self, position: object) -> bool:
        return isinstance(position, int) and self.lo <= position <= self.hi

    @property
    def size(self) -> int:
        """Number of ring positions in the range."""
        return self.hi - self.lo + 1

    @property
    def fraction(self) -> float:
        """Share of the whole ring (``size / 2**64``)."""
        return self.size / 2.0**64


class _NoNodes:
    """The lookup table of an empty ring: every lookup says how to fix it."""

    def __getitem__(self, _b: int) -> None:
        raise ConfigError("the ring has no nodes; add one with add_node(name)")


class RingSnapshot:
    """One immutable state of a ring: every read method, no writer. Safe to share across threads."""

    __slots__ = (
        "_bucket_lo",
        "_bucket_lo_np",
        "_fast",
        "_fast_np",
        "_names_ext",
        "_owner",
        "_owner_ext",
        "_plist",
        "_replicas",
        "_shift",
        "nodes",
        "points",
        "vnodes",
        "weights",
    )

    def __init__(self, weights: Mapping[str, float], vnodes: int) -> None:
        #: node names, sorted; the indices returned by the batch calls index this tuple
        self.nodes: tuple[str, ...] = tuple(sorted(weights))
        self.weights: dict[str, float] = {n: float(weights[n]) for n in self.nodes}
        self.vnodes = vnodes
        self._replicas: dict[int, np.ndarray] = {}
        if not self.nodes:
            self.points = np.zeros(0, np.uint64)
            self._owner = np.zeros(0, np.int32)
            self._shift = 0
            self._fast: list[str | None] | _NoNodes = _NoNodes()
            return
        counts = [_points_for(self.weights[n], vnodes) for n in self.nodes]
        pts = np.concatenate([_node_points(n, c) for n, c in zip(self.nodes, counts, strict=True)])
        own = np.repeat(np.arange(len(self.nodes), dtype=np.int32), counts)
        order = np.lexsort((own, pts))  # equal points: by node index (= by name)
        self.points = pts[order]
        self._owner = own[order]
        self.points.flags.writeable = False
        self._owner.flags.writeable = False
        n_pts = len(self.points)
        # owners with the wrap-around point appended: position n_pts means "past the last point"
        self._owner_ext = np.append(self._owner, self._owner[0])
        # single-lookup tables: 2**b buckets of the hash space by the top bits; a bucket whose
        # positions all map to one node answers directly, others bisect only their own points
        bits = min(20, max(10, math.ceil(math.log2(n_pts)) + 1))
        self._shift = 64 - bits
        edges = np.arange(1 << bits, dtype=np.uint64) << np.uint64(self._shift)
        lo = np.searchsorted(self.points, edges, side="left")
        bucket_lo = np.append(lo, n_pts)
        changes = np.concatenate(([0], np.cumsum(self._owner_ext[1:] != self._owner_ext[:-1])))
        uniform = changes[bucket_lo[1:]] == changes[bucket_lo[:-1]]
        # compact tables (array.array: a few bytes per entry, ints made only when read)
        fast = np.where(uniform, self._owner_ext[bucket_lo[:-1]], -1).astype(np.int32)
        self._fast_np = fast
        self._bucket_lo_np = bucket_lo.astype(np.int64)
        self._fast = [self.nodes[i] if i >= 0 else None for i in fast.tolist()]
        # memoryviews of the arrays (no copies): indexing them gives Python ints, so bisect
        # works on them as on lists
        self._bucket_lo = self._bucket_lo_np.data
        self._plist = self.points.data
        self._names_ext: list[str] = [self.nodes[i] for i in self._owner_ext.tolist()]

    # -- scalar reads -----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, node: object) -> bool:
        return node in self.weights

    def _require_nodes(self) -> None:
        if not self.nodes:
            raise ConfigError("the ring has no nodes; add one with add_node(name)")

    def node_for(self, key: str | bytes | int) -> str:
        """The node that owns ``key``."""
        h = _xxh64(key.encode("utf-8")) if type(key) is str else key_hash(key)
        b = h >> self._shift
        name = self._fast[b]
        if name is not None:
            return name
        lo = self._bucket_lo
        return self._names_ext[bisect_left(self._plist, h, lo[b], lo[b + 1])]

    def node_for_hash(self, h: int) -> str:
        """The node that owns ring position ``h`` (a value of :func:`key_hash`)."""
        b = h >> self._shift
        name = self._fast[b]
        if name is not None:
            return name
        lo = self._bucket_lo
        return self._names_ext[bisect_left(self._plist, h, lo[b], lo[b + 1])]

    def nodes_for(self, key: str | bytes | int, n: int) -> tuple[str, ...]:
        """The first ``n`` distinct nodes clockwise from ``key`` (the owner first): its replicas."""
        return self.nodes_for_hash(key_hash(key), n)

    def nodes_for_hash(self, h: int, n: int) -> tuple[str, ...]:
        """:meth:`nodes_for` for a ring position."""
        self._check_n(n)
        table = self._replica_table(n)
        pos = bisect_left(self._plist, h)
        if pos == len(self._plist):
            pos = 0
        return tuple(self.nodes[i] for i in table[pos])

    def _check_n(self, n: int) -> None:
        self._require_nodes()
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ConfigError(f"the replica count must be a positive integer, got {n!r}")
        if n > len(self.nodes):
            raise ConfigError(
                f"asked for {n} distinct nodes but the ring has only {len(self.nodes)} "
                f"({', '.join(self.nodes)}); lower the replication factor or add nodes"
            )

    def _replica_table(self, n: int) -> np.ndarray:
        """For every point, the ``n`` distinct nodes clockwise from it (built once per ``n``)."""
        table = self._replicas.get(n)
        if table is not None:
            return table
        own = self._owner
        n_pts = len(own)
        table = np.full((n_pts, n), -1, dtype=np.int32)
        table[:, 0] = own
        if n > 1:
            # walk clockwise in vectorized steps: each step looks one point further for every
            # row that still lacks replicas; rows finish after a few steps on a balanced ring
            filled = np.ones(n_pts, dtype=np.int32)
            rows = np.arange(n_pts)
            step = 1
            while len(rows):
                cand = own[(rows + step) % n_pts]
                sub = table[rows]
                new = ~(sub == cand[:, None]).any(axis=1)
                r_new = rows[new]
                table[r_new, filled[r_new]] = cand[new]
                filled[r_new] += 1
                rows = rows[filled[rows] < n]
                step += 1
                if step > n_pts:  # cannot happen with n <= len(nodes); guards a bug
                    raise AssertionError("replica walk did not finish")
        table.flags.writeable = False
        self._replicas[n] = table
        return table

    # -- batch reads -------------------------------------------------------------------------
    def positions_for_hashes(self, hashes: np.ndarray) -> np.ndarray:
        """Index of the owning point for each ring position (``searchsorted`` with wrap)."""
        return self._kernel(np.ascontiguousarray(hashes, dtype=np.uint64), True, True)

    def _kernel(self, keys: np.ndarray, hashed: bool, want_pos: bool) -> np.ndarray:
        self._require_nodes()
        from ._numba import lookup_many

        return lookup_many(
            keys,
            hashed,
            self._shift,
            self._fast_np,
            self._bucket_lo_np,
            self.points,
            self._owner_ext,
            want_pos,
        )

    def _positions_for_keys(self, keys: np.ndarray | Sequence[str | bytes | int]) -> np.ndarray:
        u = _as_uint64_keys(keys)
        if u is not None:
            return self._kernel(u, False, True)
        return self.positions_for_hashes(key_hash_many(keys))

    def index_for_many(self, keys: np.ndarray | Sequence[str | bytes | int]) -> np.ndarray:
        """Owner of each key as an index into :attr:`nodes`; integer arrays are hashed and
        looked up in one compiled loop (no Python per key)."""
        u = _as_uint64_keys(keys)
        if u is not None:
            return self._kernel(u, False, False)
        return self._kernel(key_hash_many(keys), True, False)

    def indices_for_many(
        self, keys: np.ndarray | Sequence[str | bytes | int], n: int
    ) -> np.ndarray:
        """The ``n`` distinct replicas of each key, as an ``(len(keys), n)`` ``int32`` array of
        indices into :attr:`nodes`, the owner in column 0."""
        self._check_n(n)
        return self._replica_table(n)[self._positions_for_keys(keys)]

    def node_for_many(self, keys: np.ndarray | Sequence[str | bytes | int]) -> list[str]:
        """Owner names for many keys (convenience over :meth:`index_for_many`)."""
        names = self.nodes
        return [names[i] for i in self.index_for_many(keys).tolist()]

    # -- shares and differences --------------------------------------------------------------
    def shares(self) -> dict[str, float]:
        """Each node's share of the ring positions (sums to 1)."""
        self._require_nodes()
        pts = self.points.astype(np.float64)
        arcs = np.diff(pts, prepend=pts[-1] - 2.0**64)
        share = np.bincount(self._owner, weights=arcs, minlength=len(self.nodes)) / 2.0**64
        return dict(zip(self.nodes, share.tolist(), strict=True))

    def diff(self, new: RingSnapshot, replicas: int = 1) -> list[KeyRange]:
        """The ranges of ring positions whose replica set differs between ``self`` and ``new``.

        Exact: every position not inside a returned range has the same ``replicas`` nodes, in
        the same order, in both snapshots. Adjacent ranges with the same change are merged.
        """
        if not self.nodes or not new.nodes:
            raise ConfigError("diff needs two non-empty rings")
        bounds = np.union1d(self.points, new.points)  # sorted, unique
        # both snapshots' node indices translated into one name order before comparing
        union = sorted(set(self.nodes) | set(new.nodes))
        to_u_old = np.array([union.index(n) for n in self.nodes], dtype=np.int32)
        to_u_new = np.array([union.index(n) for n in new.nodes], dtype=np.int32)
        old_sets = to_u_old[self._replica_table(replicas)[self.positions_for_hashes(bounds)]]
        new_sets = to_u_new[new._replica_table(replicas)[new.positions_for_hashes(bounds)]]
        changed = (old_sets != new_sets).any(axis=1)
        out: list[KeyRange] = []
        idx = np.flatnonzero(changed)
        # interval ending at bounds[k] starts just after bounds[k-1]; k = 0 also covers the
        # wrap-around part past the last bound
        prev_hi = -2
        for k in idx.tolist():
            src = tuple(union[i] for i in old_sets[k])
            dst = tuple(union[i] for i in new_sets[k])
            hi = int(bounds[k])
            if k == 0:
                last = int(bounds[-1])
                lo = 0
                if last < _M64:
                    out.append(KeyRange(last + 1, _M64, src, dst))
            else:
                lo = int(bounds[k - 1]) + 1
            if out and prev_hi == lo - 1 and out[-1].src == src and out[-1].dst == dst:
                out[-1] = KeyRange(out[-1].lo, hi, src, dst)
            else:
                out.append(KeyRange(lo, hi, src, dst))
            prev_hi = hi
        out.sort(key=lambda r: r.lo)
        return out


class HashRing:
    """A thread-safe consistent-hash ring: lock-free reads, serialized writers.

    >>> ring = HashRing(["a", "b", "c"], vnodes=64)
    >>> ring.node_for("doc-1") in {"a", "b", "c"}
    True
    >>> len(set(ring.nodes_for("doc-1", 2)))
    2
    """

    def __init__(
        self,
        nodes: Iterable[str] = (),
        vnodes: int = DEFAULT_VNODES,
        weights: Mapping[str, float] | None = None,
    ) -> None:
        if isinstance(vnodes, bool) or not isinstance(vnodes, (int, np.integer)) or vnodes < 1:
            raise ConfigError(f"vnodes must be a positive integer, got {vnodes!r}")
        if isinstance(nodes, (str, bytes)):
            raise ConfigError("nodes must be a list of node names, not one string")
        self._vnodes = int(vnodes)
        names = list(nodes)
        weights = dict(weights or {})
        unknown = sorted(set(weights) - set(names))
        if unknown:
            raise ConfigError(
                f"weights given for nodes that are not in the ring: {', '.join(map(str, unknown))}"
            )
        table: dict[str, float] = {}
        for name in names:
            _check_name(name)
            if name in table:
                raise ConfigError(f"duplicate node name {name!r}: every node needs its own name")
            table[name] = _check_weight(name, weights.get(name, 1.0))
        _check_total(table, self._vnodes)
        self._lock = threading.Lock()
        self._snap = RingSnapshot(table, self._vnodes)

    # reads: one attribute load, then the immutable snapshot
    def snapshot(self) -> RingSnapshot:
        """The current immutable state (take it once when several lookups must agree)."""
        return self._snap

    @property
    def nodes(self) -> tuple[str, ...]:
        return self._snap.nodes

    @property
    def weights(self) -> dict[str, float]:
        return dict(self._snap.weights)

    @property
    def vnodes(self) -> int:
        return self._vnodes

    def __len__(self) -> int:
        return len(self._snap.nodes)

    def __contains__(self, node: object) -> bool:
        return node in self._snap.weights

    def node_for(self, key: str | bytes | int) -> str:
        """The node that owns ``key`` (the snapshot's lookup, inlined: this is the hot call)."""
        s = self._snap
        h = _xxh64(key.encode("utf-8")) if type(key) is str else key_hash(key)
        b = h >> s._shift
        name = s._fast[b]
        if name is not None:
            return name
        lo = s._bucket_lo
        return s._names_ext[bisect_left(s._plist, h, lo[b], lo[b + 1])]

    def nodes_for(self, key: str | bytes | int, n: int) -> tuple[str, ...]:
        """``n`` distinct nodes for ``key``'s replicas, the owner first."""
        return self._snap.nodes_for(key, n)

    def index_for_many(self, keys: np.ndarray | Sequence[str | bytes | int]) -> np.ndarray:
        """See :meth:`RingSnapshot.index_for_many` (indices into ``snapshot().nodes``: take the
        snapshot first when the ring may change meanwhile)."""
        return self._snap.index_for_many(keys)

    def node_for_many(self, keys: np.ndarray | Sequence[str | bytes | int]) -> list[str]:
        return self._snap.node_for_many(keys)

    def shares(self) -> dict[str, float]:
        return self._snap.shares()

    # writers
    def add_node(self, name: str, weight: float = 1.0, *, replicas: int = 1) -> list[KeyRange]:
        """Add a node; returns exactly the ranges that change owner (every ``dst`` holds ``name``)."""
        _check_name(name)
        w = _check_weight(name, weight)
        with self._lock:
            old = self._snap
            if name in old.weights:
                raise ConfigError(
                    f"node {name!r} is already in the ring; remove it first or pick another name"
                )
            table = {**old.weights, name: w}
            _check_total(table, self._vnodes)
            return self._swap(old, table, replicas)

    def remove_node(self, name: str, *, replicas: int = 1) -> list[KeyRange]:
        """Remove a node; returns exactly the ranges it owned (every ``src`` holds ``name``)."""
        with self._lock:
            old = self._snap
            if name not in old.weights:
                raise NotFoundError(
                    f"node {name!r} is not in the ring (nodes: {', '.join(old.nodes) or 'none'})"
                )
            table = {k: v for k, v in old.weights.items() if k != name}
            return self._swap(old, table, replicas)

    def set_weight(self, name: str, weight: float, *, replicas: int = 1) -> list[KeyRange]:
        """Change a node's weight; only ranges to or from ``name`` move."""
        w = _check_weight(name, weight)
        with self._lock:
            old = self._snap
            if name not in old.weights:
                raise NotFoundError(f"node {name!r} is not in the ring")
            table = {**old.weights, name: w}
            _check_total(table, self._vnodes)
            return self._swap(old, table, replicas)

    def _swap(self, old: RingSnapshot, table: dict[str, float], replicas: int) -> list[KeyRange]:
        new = RingSnapshot(table, self._vnodes)
        if replicas > 1 and new.nodes:
            new._check_n(replicas)
        moves = old.diff(new, replicas) if old.nodes and new.nodes else []
        self._snap = new  # one reference assignment: readers see the old or the new snapshot
        return moves

    def __repr__(self) -> str:
        return f"HashRing(nodes={list(self.nodes)!r}, vnodes={self._vnodes})"


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not name:
        raise ConfigError(f"a node name must be a non-empty string, got {name!r}")


def _check_weight(name: str, weight: object) -> float:
    if isinstance(weight, bool) or not isinstance(weight, (int, float, np.integer, np.floating)):
        raise ConfigError(f"weight of node {name!r} must be a number, got {weight!r}")
    w = float(weight)
    if not math.isfinite(w) or w <= 0:
        raise ConfigError(
            f"weight of node {name!r} must be a finite number > 0, got {weight!r}; "
            "remove the node instead of giving it weight 0"
        )
    return w


def _check_total(table: Mapping[str, float], vnodes: int) -> None:
    total = sum(_points_for(w, vnodes) for w in table.values())
    if total > MAX_POINTS:
        raise ConfigError(
            f"the ring would have {total} points (limit {MAX_POINTS}); lower vnodes ({vnodes}) "
            "or the weights"
        )
