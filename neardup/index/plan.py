"""The planner: choose a table layout for exact k-bit Hamming search from (f, k, N, memory).

Why the layouts are exact (the pigeonhole argument)
---------------------------------------------------
Split the ``f`` bits of a fingerprint into ``r`` disjoint blocks. If two fingerprints differ in at
most ``k`` bits, the per-block distances ``d_1 .. d_r`` are non-negative integers summing to at
most ``k``. The sum of the ``m`` *smallest* of them is then at most ``rho(r, k, m)``, the value
reached when ``k`` is spread as evenly as possible over the ``r`` blocks::

    k = q * r + s  (0 <= s < r):  rho = m * q                     if m <= r - s
                                  rho = (r - s) * q + (m - r + s) * (q + 1)   otherwise

So among the ``C(r, m)`` ways to choose ``m`` blocks, at least one choice differs in at most
``rho`` bits. A *table* stores every fingerprint under a permuted key whose leading ``pb`` bits
(the *prefix*) are the chosen blocks; a query probes every prefix within ``rho`` bit flips of its
own (``rho = 0``: one probe, Manku et al.'s one-level scheme, e.g. 4 tables of 16-bit prefixes for
f=64, k=3; ``rho > 0``: multi-index hashing) and checks each candidate's full distance. Every pair
within ``k`` is therefore found by at least one table: the search is exact, not approximate.
Two-level layouts (Manku et al.'s 4 x 16 then 4 x 12 for f=64, k=3) apply the same argument
twice: one of the first-level blocks matches exactly and, among the remaining bits, one of the
second-level blocks also matches.

A match found by several tables is reported once: table ``t`` keeps a candidate only if no earlier
table's prefix lies within that table's probe radius of the query (that earlier table would have
found it).

The cost model
--------------
This module is the index's one cost model: the search's (below), and the self-join's and the
scan's work (at its end: what :func:`neardup.all_pairs` and the brute-force scan of
:mod:`neardup.index.scan` are modelled to cost, which the candidate pass planner
:func:`neardup.rules.passes.plan_pass` budgets with). Per query and table: ``probes * (probe_ns + candidates_per_probe * scan_ns)`` with
``candidates_per_probe = N / 2**pb`` (uniform fingerprints; skewed buckets are bounded by the
descent in :mod:`neardup.index._kernels`). Brute force costs ``N * brute_ns``. Memory per
fingerprint: 8 B id + 8 B per 64-bit word + 12 B (8 B key + 4 B row) per extra table. The planner
picks the cheapest layout whose memory fits the budget (default :data:`DEFAULT_BYTES_PER_FP`
bytes per fingerprint), or the leanest one when none fits.

With ``compress=True`` (compressed tables, :mod:`neardup.index.compressed`) a 64-bit table
costs about ``64 - log2 N + 2.5`` bits in the Elias–Fano code (``codec="ef"``), or
``64 - log2 N + 2`` plus its blocks' in-memory keys, positions and CRCs in the block code
(``codec="blocks"``), and no row array (ids packed in about ``log2 N + 1`` bits besides); a
128-bit index keeps its fingerprints and rows. An Elias–Fano probe reads each key of its
bucket at ``EF_KEY_NS``; a block probe decodes, on average, half a block before its bucket and
the bucket itself (``DECODE_NS`` per key): more tables fit a budget, each probe costs more, and
the same "cheapest that fits" rule decides.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ..errors import ConfigError

__all__ = [
    "DEFAULT_BYTES_PER_FP",
    "DEFAULT_EXPECTED_SIZE",
    "SCAN_PAIR_NS",
    "TABLES_PAIR_NS",
    "Plan",
    "TableSpec",
    "candidate_plans",
    "plan_index",
    "radius_for",
    "scan_work_ns",
]

#: memory cap per fingerprint used when no ``memory_budget`` is given (bytes)
DEFAULT_BYTES_PER_FP = 64.0
#: the default cap with ``compress=True``: asking for compression asks for memory, so without a
#: ``memory_budget`` the planner does not spend the saving on more tables than the uncompressed
#: default would hold (at 10 M it otherwise picked 10 compressed tables: more bytes than 4 plain)
DEFAULT_COMPRESSED_BYTES_PER_FP = 32.0
#: N assumed by the cost model when ``expected_size`` is not given
DEFAULT_EXPECTED_SIZE = 10_000_000
#: cost model constants (nanoseconds per operation, fitted to benchmarks/bench_index.py
#: timings; only their ratios matter)
PROBE_NS = 60.0
SCAN_NS = 0.6
BRUTE_NS = 0.35
VERIFY_NS = 2.0
#: per key decoded from a compressed block (a serial chain of two loads and a table look-up)
DECODE_NS = 5.0
#: per key of an Elias–Fano bucket (a set bit of the unary part and two loads of low bits)
EF_KEY_NS = 1.0
#: a bucket larger than this is searched by the pruned sorted-descent instead of a scan
HEAVY_BUCKET = 256
MAX_TABLES = 256
MAX_PROBES = 200_000


@dataclass(frozen=True)
class TableSpec:
    """One permuted sorted table.

    Attributes
    ----------
    order : tuple of (start, width)
        Bit ranges of the fingerprint (MSB-first positions) in the order they form the key;
        together they cover all ``bits`` bits exactly once.
    prefix_bits : int
        The leading ``prefix_bits`` of the key are probed (with up to ``radius`` flips).
    radius : int
        Probe radius: every prefix within this many bit flips of the query's is probed (the
        ``"radius"`` key of :meth:`Plan.to_dict` and of a saved index's plan). Not the search
        distance: that is ``max_distance`` (``k``); the pigeonhole bound ties the two
        (:func:`radius_for`). Compiled for the kernels as ``PlanArrays.probe_radius``.
    """

    order: tuple[tuple[int, int], ...]
    prefix_bits: int
    radius: int


@dataclass(frozen=True)
class Plan:
    """A table layout for :class:`~neardup.index.HammingIndex`, with its estimated cost.

    Build one with :func:`plan_index`; pass it as ``HammingIndex(..., plan=plan)`` to override
    the planner. ``kind="brute"`` scans every fingerprint (exact for any distance).
    """

    bits: int
    max_distance: int
    kind: Literal["tables", "brute"]
    name: str
    tables: tuple[TableSpec, ...] = ()
    expected_size: int = DEFAULT_EXPECTED_SIZE
    est_query_ns: float = 0.0
    est_bytes_per_fp: float = 0.0
    heavy_bucket: int = HEAVY_BUCKET
    notes: tuple[str, ...] = field(default=())

    @property
    def n_tables(self) -> int:
        """Number of permuted tables (0 for brute force)."""
        return len(self.tables)

    @property
    def probes_per_query(self) -> int:
        """Directory probes per query over all tables."""
        return sum(_n_probes(t.prefix_bits, min(t.radius, self.max_distance)) for t in self.tables)

    def describe(self) -> str:
        """Human-readable summary: layout, why it is exact, estimated cost and limits."""
        lines = [
            f"plan {self.name!r}: {self.bits}-bit fingerprints, exact up to k={self.max_distance}"
        ]
        if self.kind == "brute":
            lines.append(
                "  brute force: every fingerprint is compared (exact for any k <= planned k)"
            )
        else:
            pbs = sorted({t.prefix_bits for t in self.tables})
            radii = sorted({t.radius for t in self.tables})
            lines.append(
                f"  {self.n_tables} permuted sorted tables, prefix bits {pbs}, probe radius {radii},"
                f" {self.probes_per_query} probes/query"
            )
        lines.append(
            f"  cost model at N={self.expected_size:,}: ~{self.est_query_ns / 1000:.2f} µs/query,"
            f" ~{self.est_bytes_per_fp:.0f} bytes/fingerprint"
        )
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict; :meth:`from_dict` round-trips it exactly."""
        d = asdict(self)
        d["tables"] = [
            {"order": [list(p) for p in t.order], "prefix_bits": t.prefix_bits, "radius": t.radius}
            for t in self.tables
        ]
        d["notes"] = list(self.notes)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        """Inverse of :meth:`to_dict`; validates the layout."""
        try:
            tables = tuple(
                TableSpec(
                    order=tuple((int(a), int(b)) for a, b in t["order"]),
                    prefix_bits=int(t["prefix_bits"]),
                    radius=int(t["radius"]),
                )
                for t in d.get("tables", ())
            )
            plan = cls(
                bits=int(d["bits"]),
                max_distance=int(d["max_distance"]),
                kind=d["kind"],
                name=str(d["name"]),
                tables=tables,
                expected_size=int(d.get("expected_size", DEFAULT_EXPECTED_SIZE)),
                est_query_ns=float(d.get("est_query_ns", 0.0)),
                est_bytes_per_fp=float(d.get("est_bytes_per_fp", 0.0)),
                heavy_bucket=int(d.get("heavy_bucket", HEAVY_BUCKET)),
                notes=tuple(d.get("notes", ())),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(
                f"not a valid plan dict ({exc!r}); build one with plan_index()"
            ) from exc
        plan.validate()
        return plan

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def validate(self) -> None:
        """Check structural soundness (bit ranges cover the fingerprint; sane sizes)."""
        if self.bits not in (64, 128):
            raise ConfigError(f"bits must be 64 or 128, got {self.bits}")
        if self.kind not in ("tables", "brute"):
            raise ConfigError(f"plan kind must be 'tables' or 'brute', got {self.kind!r}")
        if self.kind == "tables" and not self.tables:
            raise ConfigError("a 'tables' plan needs at least one table")
        if not self.heavy_bucket >= 1:
            raise ConfigError(f"heavy_bucket must be >= 1, got {self.heavy_bucket}")
        for i, t in enumerate(self.tables):
            covered = sorted(b for s, w in t.order for b in range(s, s + w))
            if covered != list(range(self.bits)):
                raise ConfigError(f"table {i}: bit ranges must cover bits 0..{self.bits - 1} once")
            if not 1 <= t.prefix_bits <= 64:
                raise ConfigError(f"table {i}: prefix_bits must be in 1..64, got {t.prefix_bits}")
            if t.radius < 0:
                raise ConfigError(f"table {i}: radius must be >= 0, got {t.radius}")


def radius_for(r: int, k: int, m: int) -> int:
    """Largest possible sum of the ``m`` smallest of ``r`` non-negative ints summing to <= k.

    >>> radius_for(4, 3, 1), radius_for(6, 3, 3), radius_for(2, 3, 1), radius_for(4, 10, 1)
    (0, 0, 1, 2)
    """
    q, s = divmod(k, r)
    if m <= r - s:
        return m * q
    return (r - s) * q + (m - r + s) * (q + 1)


def _split(start: int, total: int, r: int) -> list[tuple[int, int]]:
    """``r`` contiguous blocks covering ``total`` bits from ``start``, widths as equal as possible."""
    base, extra = divmod(total, r)
    out, pos = [], start
    for i in range(r):
        w = base + (1 if i < extra else 0)
        out.append((pos, w))
        pos += w
    return out


def _n_probes(pb: int, rho: int) -> int:
    return sum(math.comb(pb, j) for j in range(min(rho, pb) + 1))


@functools.lru_cache(maxsize=1024)
def _one_level_geometry(
    bits: int, r: int, m: int
) -> tuple[tuple[tuple[tuple[int, int], ...], int], ...]:
    """(bit order as ranges, prefix bits) of every table of "``r`` blocks choose ``m``", in
    ``itertools.combinations`` order: what :func:`_one_level` needs that does not depend on
    ``k`` (computed once per process; the work planner asks for many ``k``)."""
    blocks = _split(0, bits, r)
    out = []
    for combo in itertools.combinations(range(r), m):
        order = [blocks[i] for i in combo] + [blocks[i] for i in range(r) if i not in combo]
        out.append((_merge_ranges(order), sum(blocks[i][1] for i in combo)))
    return tuple(out)


def _one_level(bits: int, k: int, r: int, m: int) -> tuple[str, tuple[TableSpec, ...]] | None:
    """The layout "``r`` blocks choose ``m``" for distance ``k`` (None when it cannot work)."""
    if m > r:
        return None
    return _one_level_radius(bits, r, m, radius_for(r, k, m))


@functools.lru_cache(maxsize=4096)
def _one_level_radius(
    bits: int, r: int, m: int, rho: int
) -> tuple[str, tuple[TableSpec, ...]] | None:
    # depends on k only through the probe radius, which many distances share
    tables = []
    for order, pb in _one_level_geometry(bits, r, m):
        if pb > 64 or rho >= pb:
            return None
        tables.append(TableSpec(order=order, prefix_bits=pb, radius=rho))
    name = f"{r} blocks choose {m}" + (f", radius {rho}" if rho else "")
    return name, tuple(tables)


def _two_level(bits: int, k: int, r1: int, r2: int) -> tuple[str, tuple[TableSpec, ...]] | None:
    """Manku's two-level layout: one of r1 blocks matches, then one of r2 sub-blocks of the rest."""
    if r1 <= k or r2 <= k or r1 < 2 or r2 < 2:
        return None
    blocks = _split(0, bits, r1)
    tables = []
    for i in range(r1):
        rest = [b for j, b in enumerate(blocks) if j != i]
        # the remaining bits, as one virtual run, are split into r2 sub-blocks
        rest_bits = [b for s, w in rest for b in range(s, s + w)]
        sub = _split(0, len(rest_bits), r2)
        for j in range(r2):
            s_pos, s_w = sub[j]
            chosen = rest_bits[s_pos : s_pos + s_w]
            others = rest_bits[:s_pos] + rest_bits[s_pos + s_w :]
            order_bits = list(range(blocks[i][0], blocks[i][0] + blocks[i][1])) + chosen + others
            pb = blocks[i][1] + s_w
            if pb > 64:
                return None
            tables.append(TableSpec(order=_bits_to_ranges(order_bits), prefix_bits=pb, radius=0))
    return f"two-level {r1} x {r2}", tuple(tables)


def _bits_to_ranges(order_bits: list[int]) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for b in order_bits:
        if out and out[-1][0] + out[-1][1] == b:
            out[-1][1] += 1
        else:
            out.append([b, 1])
    return tuple((s, w) for s, w in out)


def _merge_ranges(order: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    return _bits_to_ranges([b for s, w in order for b in range(s, s + w)])


def _bytes_per_fp(bits: int, n_tables: int) -> float:
    words = bits // 64
    base = 8.0 + 8.0 * words  # ids + fingerprints (the first table's keys for 64-bit)
    if n_tables == 0:
        return base
    extra_first = 0.0 if words == 1 else 8.0  # 128-bit: the first table's keys are a copy
    return base + extra_first + 12.0 * (n_tables - 1)


def _compressed_key_bits(n: int, block_bytes: int) -> float:
    """Bits per key of a compressed table of ``n`` random keys: ``block_bytes`` > 0, the block
    code (the gap code, about ``64 - log2 n + 2``, plus per block its 16 bytes in memory and
    half an entry of slack); 0, the Elias–Fano code (low bits, ones and zeros of the unary
    part, about half a bit of directory)."""
    if not block_bytes:
        lg = math.log2(max(n, 2))
        return min(64 - h + 1 + 2.0**h / max(n, 1) for h in {math.floor(lg), math.ceil(lg)}) + 0.5
    entry = max(64.0 - math.log2(max(n, 2)) + 2.0, 3.0)
    per_block = block_bytes * 8 / entry
    return entry + (16 * 8 + entry / 2) / per_block


def _compressed_bytes_per_fp(bits: int, n_tables: int, n: int, block_bytes: int) -> float:
    key = _compressed_key_bits(n, block_bytes) / 8
    ids = (math.log2(max(n, 2)) + 1) / 8  # packed offsets: a bit or so over log2 n each
    if bits == 64:  # ids + tables (the fingerprints are table 0; rows come from table 0)
        return ids + n_tables * key
    return ids + 16.0 + n_tables * key + 4.0 * (n_tables - 1)  # + fingerprints and rows


def _cost_ns(
    tables: tuple[TableSpec, ...], k: int, n: int, heavy: int, block_bytes: int = -1
) -> float:
    """Estimated ns per query; ``block_bytes`` > 0: tables in the block code with such blocks;
    0: in the Elias–Fano code; < 0: uncompressed."""
    total = 0.0
    per_block = block_bytes * 8 / _compressed_key_bits(n, block_bytes) if block_bytes > 0 else 0
    for t in tables:
        probes = _n_probes(t.prefix_bits, min(t.radius, k))
        cand = n / 2.0**t.prefix_bits
        if block_bytes > 0:  # compressed buckets are decoded through: no pruned descent
            total += probes * (2 * PROBE_NS + (per_block / 2 + cand) * DECODE_NS)
            total += probes * (cand * SCAN_NS + VERIFY_NS * min(cand, 1.0))
            continue
        if block_bytes == 0:  # Elias-Fano: a directory read and a skip, then the bucket
            total += probes * (1.5 * PROBE_NS + cand * EF_KEY_NS + VERIFY_NS * min(cand, 1.0))
            continue
        if cand > heavy:  # the descent prunes heavy buckets; a rough log-shaped bound
            cand = heavy + math.log2(cand / heavy) * 32
        total += probes * (PROBE_NS + cand * SCAN_NS + VERIFY_NS * min(cand, 1.0))
    return total


def candidate_plans(bits: int, k: int, n: int, *, heavy_bucket: int = HEAVY_BUCKET) -> list[Plan]:
    """Every layout the planner considers, with estimated cost and memory (unsorted)."""
    return list(_candidate_plans(int(bits), int(k), max(int(n), 1), int(heavy_bucket)))


@functools.lru_cache(maxsize=32)
def _layouts(bits: int, k: int) -> tuple[tuple[str, tuple[TableSpec, ...]], ...]:
    layouts: list[tuple[str, tuple[TableSpec, ...]]] = []
    if k == 0 and bits == 64:
        lay0 = _one_level(bits, k, 1, 1)
        if lay0 is not None:
            layouts.append(lay0)
    for r in range(2, min(bits, 24) + 1):
        for m in range(1, r):
            if math.comb(r, m) > MAX_TABLES:
                break
            lay = _one_level(bits, k, r, m)
            if lay is not None:
                layouts.append(lay)
    for r1, r2 in ((4, 4), (5, 4), (4, 5), (k + 1, k + 1)):
        lay = _two_level(bits, k, r1, r2)
        if lay is not None and lay[0] not in {name for name, _ in layouts}:
            layouts.append(lay)
    return tuple(
        (name, tables)
        for name, tables in layouts
        if sum(_n_probes(t.prefix_bits, min(t.radius, k)) for t in tables) <= MAX_PROBES
    )


def _tables_plan(
    bits: int,
    k: int,
    n: int,
    heavy_bucket: int,
    name: str,
    tables: tuple[TableSpec, ...],
    notes: tuple[str, ...] = (),
) -> Plan:
    """A table-layout plan with the cost model's estimates filled in."""
    return Plan(
        bits=bits,
        max_distance=k,
        kind="tables",
        name=name,
        tables=tables,
        expected_size=n,
        est_query_ns=_cost_ns(tables, k, n, heavy_bucket),
        est_bytes_per_fp=_bytes_per_fp(bits, len(tables)),
        heavy_bucket=heavy_bucket,
        notes=notes,
    )


@functools.lru_cache(maxsize=256)
def _candidate_plans(bits: int, k: int, n: int, heavy_bucket: int) -> tuple[Plan, ...]:
    out = [
        Plan(
            bits=bits,
            max_distance=k,
            kind="brute",
            name="brute force",
            expected_size=n,
            est_query_ns=n * BRUTE_NS * (bits // 64) + PROBE_NS,
            est_bytes_per_fp=_bytes_per_fp(bits, 0),
            heavy_bucket=heavy_bucket,
        )
    ]
    for name, tables in _layouts(bits, k):
        out.append(_tables_plan(bits, k, n, heavy_bucket, name, tables))
    return tuple(out)


def plan_index(
    bits: int = 64,
    max_distance: int = 3,
    expected_size: int | None = None,
    *,
    memory_budget: float | None = None,
    layout: str | None = None,
    blocks: int | None = None,
    prefix_blocks: int | None = None,
    heavy_bucket: int = HEAVY_BUCKET,
    compress: bool = False,
    codec: str = "ef",
    block_bytes: int = 256,
) -> Plan:
    """Choose the cheapest exact layout for ``bits``-bit fingerprints and distance ``max_distance``.

    Parameters
    ----------
    bits : {64, 128}, default=64
    max_distance : int, default=3
        Largest distance the index must answer exactly (``k``).
    expected_size : int or None, default=None
        Expected number of fingerprints ``N``; ``None`` assumes :data:`DEFAULT_EXPECTED_SIZE`.
    memory_budget : float or None, default=None
        Bytes the index may use at ``expected_size``; ``None`` means
        :data:`DEFAULT_BYTES_PER_FP` bytes per fingerprint
        (:data:`DEFAULT_COMPRESSED_BYTES_PER_FP` with ``compress``).
    layout : {"brute", "tables", "two-level"} or None, default=None
        Force a family of layouts (the cheapest of that family is chosen).
    blocks, prefix_blocks : int or None
        Force a one-level layout: ``blocks`` blocks, tables keyed by ``prefix_blocks`` of them
        (``C(blocks, prefix_blocks)`` tables; the probe radius follows from the pigeonhole bound).
    heavy_bucket : int, default=256
        Buckets larger than this are searched by pruned descent instead of a linear scan.
    compress : bool, default=False
        Estimate memory and cost for compressed tables (``HammingIndex(compress=True)``):
        smaller tables, dearer probes, so a budget may fit more tables.
    codec : {"ef", "blocks"}, default="ef"
        The code assumed for ``compress`` (Elias–Fano or the paper's block code).
    block_bytes : int, default=256
        Block size assumed for ``codec="blocks"``.

    Returns
    -------
    Plan

    Examples
    --------
    >>> p = plan_index(64, 3, 10_000_000)
    >>> p.name, p.n_tables, p.tables[0].prefix_bits
    ('4 blocks choose 1', 4, 16)
    """
    if bits not in (64, 128):
        raise ConfigError(f"bits must be 64 or 128, got {bits!r}; use 64 or 128-bit fingerprints")
    if isinstance(max_distance, bool) or not isinstance(max_distance, int) or max_distance < 0:
        raise ConfigError(f"max_distance must be an int >= 0, got {max_distance!r}")
    if max_distance >= bits:
        raise ConfigError(
            f"max_distance ({max_distance}) must be smaller than bits ({bits}); every pair is within {bits}"
        )
    if expected_size is not None and (
        isinstance(expected_size, bool) or not isinstance(expected_size, int) or expected_size < 0
    ):
        raise ConfigError(
            f"expected_size must be a non-negative int or None, got {expected_size!r}"
        )
    n = DEFAULT_EXPECTED_SIZE if expected_size is None else max(expected_size, 1)
    if memory_budget is not None and (
        isinstance(memory_budget, bool)
        or not isinstance(memory_budget, (int, float))
        or memory_budget <= 0
    ):
        raise ConfigError(
            f"memory_budget must be a positive number of bytes, got {memory_budget!r}"
        )
    if isinstance(heavy_bucket, bool) or not isinstance(heavy_bucket, int) or heavy_bucket < 1:
        raise ConfigError(f"heavy_bucket must be an int >= 1, got {heavy_bucket!r}")
    if codec not in ("ef", "blocks"):
        raise ConfigError(f"codec must be 'ef' or 'blocks', got {codec!r}")
    cblock = block_bytes if codec == "blocks" else 0  # the cost model's switch
    k = max_distance
    if blocks is not None or prefix_blocks is not None:
        r = blocks if blocks is not None else k + 1
        m = prefix_blocks if prefix_blocks is not None else max(r - k, 1)
        if not (isinstance(r, int) and isinstance(m, int) and 1 <= m < r <= bits):
            raise ConfigError(
                f"need 1 <= prefix_blocks < blocks <= bits, got blocks={blocks}, prefix_blocks={prefix_blocks}"
            )
        lay = _one_level(bits, k, r, m)
        if lay is None:
            raise ConfigError(
                f"blocks={r}, prefix_blocks={m} gives prefixes over 64 bits or a probe radius"
                f" ({radius_for(r, k, m)}) as large as the prefix; choose more blocks or more prefix_blocks"
            )
        name, tables = lay
        forced = _tables_plan(
            bits, k, n, heavy_bucket, name, tables, ("layout forced by blocks/prefix_blocks",)
        )
        return _compressed(forced, n, cblock) if compress else forced
    cands = candidate_plans(bits, k, n, heavy_bucket=heavy_bucket)
    if compress:
        cands = [_compressed(c, n, cblock) for c in cands]
    if layout is not None:
        if layout not in ("brute", "tables", "two-level"):
            raise ConfigError(f"layout must be 'brute', 'tables' or 'two-level', got {layout!r}")
        if layout == "brute":
            cands = [c for c in cands if c.kind == "brute"]
        elif layout == "two-level":
            cands = [c for c in cands if c.name.startswith("two-level")]
        else:
            cands = [c for c in cands if c.kind == "tables"]
        if not cands:
            raise ConfigError(
                f"no {layout!r} layout exists for bits={bits}, k={k}; use layout=None"
            )
    if memory_budget is not None:
        cap = memory_budget / n
    else:
        cap = DEFAULT_COMPRESSED_BYTES_PER_FP if compress else DEFAULT_BYTES_PER_FP
    fitting = [c for c in cands if c.est_bytes_per_fp <= cap]
    notes: list[str] = []
    if fitting:
        best = min(fitting, key=lambda c: (c.est_query_ns, c.est_bytes_per_fp))
    else:
        best = min(cands, key=lambda c: (c.est_bytes_per_fp, c.est_query_ns))
        notes.append(f"no layout fits {cap:.0f} B/fingerprint; chose the leanest")
    if best.kind == "brute" and n > 50_000:
        notes.append(f"brute force at N={n:,} is slow (~{best.est_query_ns / 1e6:.1f} ms/query)")
    if k > 0 and best.kind == "tables" and best.est_query_ns > 1e6:
        notes.append(
            "large k for this width: queries cost milliseconds; consider a lower max_distance"
        )
    return Plan(**{**best.__dict__, "notes": tuple(notes)})


def _compressed(p: Plan, n: int, block_bytes: int) -> Plan:
    """``p`` with the cost model's estimates for compressed tables (brute plans as is):
    ``block_bytes`` > 0 the block code, 0 the Elias–Fano code."""
    if p.kind != "tables":
        return p
    return Plan(
        **{
            **p.__dict__,
            "est_query_ns": _cost_ns(p.tables, p.max_distance, n, p.heavy_bucket, block_bytes),
            "est_bytes_per_fp": _compressed_bytes_per_fp(p.bits, len(p.tables), n, block_bytes),
        }
    )


# ---------------------------------------------------------------------------------------------
# the self-join and scan work model (a candidate pass's budget: neardup.rules.passes)

#: modelled cost of one pair compared by the brute-force scan (count/histogram pass + fill
#: pass), nanoseconds on one core (calibrated with benchmarks/bench_dedup.py; a constant,
#: never timed)
SCAN_PAIR_NS = 2.7
#: work model of the permuted-table self-join at a distance (:func:`neardup.all_pairs`, as the
#: candidate pass planner counts it: :func:`neardup.index.allpairs.tables_work_ns`), single-core ns,
#: calibrated once against runs of benchmarks/bench_index.py (uniform fingerprints) and
#: benchmarks/bench_dedup.py (generated short texts), k = 3..7; constants, never timed:
#: per document and table (permute + sort)
TABLES_BUILD_NS = 40.0
#: per probe of a table with probe radius >= 1 (directory lookup)
TABLES_PROBE_NS = 80.0
#: per candidate compared in a probed bucket (radius >= 1: random access; skewed buckets use
#: the slower descent, so this is set from the skewed short-text run, above the uniform one)
TABLES_CAND_NS = 25.0
#: per pair compared inside a light bucket of a radius-0 table (contiguous self-join)
TABLES_JOIN_NS = 1.2
#: buckets larger than this are modelled as joined by descent ... (all_pairs now descends
#: only above 16,384, and the direct join is faster between the two: the model kept its
#: calibration, so it overestimates such buckets, i.e. it stays on the safe side)
TABLES_HEAVY = 1024
#: ... which costs about this per pair of the bucket: between the two regimes of skewed
#: fingerprints in benchmarks/bench_dedup.py -- generated short posts at k=4 (costlier per
#: pair) and generated long documents at k=2 (much cheaper); the short posts' cost would
#: narrow the long pass to k=1 and lose recall there
TABLES_HEAVY_PAIR_NS = 4.0
#: per pair within the distance (output arrays, sort)
TABLES_PAIR_NS = 300.0
#: the self-join's own layout choice (:func:`neardup.index.allpairs._join_plan`, between the
#: planner's layout and ``k + 2`` blocks choose 2): per fingerprint and table (permute, sort and
#: the join's walk over the keys), and per pair compared inside a bucket; fitted to
#: ``all_pairs`` timings (see ``benchmarks/bench_index.py --allpairs-size``): only their ratio
#: decides the layout. (The pass planner's TABLES_* terms above model the same kernel with an
#: older calibration; the distances a budget affords depend on them, so they are kept as they
#: are until a measured change.)
JOIN_BUILD_NS = 50.0
JOIN_PAIR_NS = 0.45


def scan_work_ns(n: int) -> float:
    """Modelled single-core cost of the brute-force scan over ``n`` fingerprints (ns)."""
    return n * (n - 1) / 2.0 * SCAN_PAIR_NS
