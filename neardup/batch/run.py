"""Corpus deduplication: exact + near duplicates, verified, clustered, with a keep policy.

The pipeline is a chain of small named stages, each a function of arrays::

    normalize + exact content hash   stage_exact        (content_hash_many)
    fingerprints                      stage_fingerprint  (Fingerprinter.fingerprint_batch)
    candidate pairs                   stage_candidates_lsh (MinHash bands + small-k SimHash)
                                      stage_candidates   (candidates="simhash": SimHash only)
    verification                      stage_verify       (Verifier: token similarity)
    keep policy                       stage_representatives (greedy against kept documents:
                                                         no chaining; keep="none": components)

Exact duplicates are found first; only the first copy of each text goes through the near-duplicate
stages, and its copies join its cluster. Every decision is traceable: :attr:`DedupResult.pairs`
lists each matched pair with its SimHash distance, similarity score and stage.

The result is deterministic: the same input gives the same output for any ``workers`` (ties are
broken by input order).

Examples
--------
>>> r = dedup(["the cat sat on the mat today", "The cat  sat on the mat today", "a dog",
...            "the cat sat on the mat today!"])
>>> r.keep.tolist()
[True, False, True, False]
>>> r.stats["exact_duplicates"], r.stats["near_duplicates"], r.stats["clusters"]
(1, 1, 1)
>>> r.pair_rows()[:2]
[(0, 1, 0, 1.0, 'exact'), (0, 3, 0, 1.0, 'near')]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from .._arrays import concat_ascii, unique_sorted
from ..errors import ConfigError, InputError, InputTypeError
from ..io.texts import SpanTexts, UniqueIds
from ..verify.rule import TokenEncoder, Verifier
from .cluster import cluster_ids, connected_components

if TYPE_CHECKING:
    from .groups import ExactGroups
    from .minhash import LshPlan

__all__ = [
    "DedupConfig",
    "DedupResult",
    "ExactFingerprintPass",
    "PairTable",
    "dedup",
    "stage_candidates",
    "stage_cluster",
    "stage_exact",
    "stage_exact_fingerprint",
    "stage_fingerprint",
    "stage_policy",
    "stage_verify",
]

Keep = Literal["first", "longest", "none"]
Progress = Callable[[str, int, int], None]
STAGE_EXACT, STAGE_NEAR = 0, 1
STAGE_NAMES = ("exact", "near")


@dataclass(frozen=True)
class DedupConfig:
    """Parameters of :func:`dedup` (all keyword, validated on construction).

    Parameters
    ----------
    max_distance : int or None, default=None
        SimHash candidate distance for every text. ``None`` uses the verifier's
        length-dependent distances (``Verifier.candidate_distance``: larger for short texts).
    keep : {"first", "longest", "none"}, default="first"
        Which member of each cluster to keep: the first in input order, the longest (ties: the
        first), or none (drop every member of a cluster of two or more).
    verify : bool, default=True
        Decide candidates with the :class:`~neardup.verify.Verifier`. ``False`` accepts every pair
        within the candidate distance (pure SimHash; fast, much less precise for short texts).
    verifier : dict or None, default=None
        :meth:`Verifier.config` overrides; ``None`` uses the documented defaults.
    fingerprinter : dict or None, default=None
        :meth:`Fingerprinter.config` for the fingerprints; ``None`` uses ``Fingerprinter()``.
    exact : bool, default=True
        Find exact duplicates (same normalised content hash) first.
    workers : int, default=1
        Worker threads for fingerprinting and the candidate scan; results do not depend on it.
    expand_pairs : int, default=10_000
        Only the first copy of an exact-duplicate group is compared with other texts. A near
        pair found between two groups is reported for every member of both groups (and every
        pair inside an exact group is reported) when that is at most this many pairs;
        otherwise only the pairs with the groups' first members are reported. Clusters are the
        same either way.
    max_candidates_per_doc : int or None, default=64
        Safety valve for the wide (brute-force) candidate scans: at most this many candidate
        pairs per document of a pass. When a corpus's fingerprints are so concentrated that
        more pairs fall within the candidate distance, that pass's distance is lowered until
        they fit, and ``stats["candidate_passes"]`` records it. ``None`` disables the bound.
    candidate_work_per_doc_ns : int or None, default=32_000
        Work budget of each candidate pass with the default (length-dependent) distances:
        ``candidate_work_per_doc_ns * docs`` *modelled* single-core nanoseconds
        (:func:`neardup.pipeline.candidates.plan_pass`: the brute-force scan costs
        ``docs^2 / 2`` pair checks, the permuted tables the index planner's cost model plus the
        sampled pair count). When the scan does not fit (above ~23,700 documents per pass), the
        pass searches the largest distance whose table search fits, and
        ``stats["candidate_passes"]`` records requested vs used distance and the reason.
        Deterministic (a model, never a timer). ``None`` searches the full distances whatever
        they cost (O(docs^2) above distance 6). An explicit ``max_distance`` is always searched
        as asked (only ``max_candidates_per_doc`` applies). With ``candidates="lsh"`` it bounds
        the SimHash pass only; the budget is a safety valve that ordinary corpora never reach.
    threshold : float or None, default=None
        Intent: texts at least this similar (token edit similarity, 0-1) are near duplicates.
        It plans the MinHash channel (pairs at this similarity become candidates with
        probability >= 0.99 where the hash budget allows; ``stats["lsh"]["probability"]``) and
        becomes the verifier's threshold (unless ``verifier`` sets one). ``None``: the channel
        is planned for 0.8 and the verifier keeps its own threshold (0.675).
    candidates : {"lsh", "simhash"}, default="lsh"
        ``"lsh"``: MinHash banding over token bigrams (:mod:`neardup.pipeline.minhash`; recall
        of a pair depends on its similarity, not on the corpus size) plus a SimHash pass at a
        small distance (``max_distance``, default ``LSH_SIMHASH_DISTANCE``). ``"simhash"``:
        SimHash only, at the verifier's length-dependent distances under the work budget (the
        previous default: exact on small corpora, recall falls as the budget narrows).
    lsh_bands, lsh_rows : int or None, default=None
        Expert overrides of the MinHash plan (:func:`~neardup.pipeline.minhash.plan_lsh`).
    lsh_bucket_cap : int, default=32
        A band bucket with more members than this pairs each member with the bucket's first
        ``lsh_bucket_cap`` members and its ``lsh_bucket_cap`` predecessors instead of with all
        of them (pathological inputs: a template repeated with small changes);
        ``stats["lsh"]["pairs_skipped"]`` counts the pairs given up.
    components : bool, default=False
        Also report the connected components of the matched pairs
        (:attr:`DedupResult.components`; the transitive closure, which the keep policy does not
        use).
    """

    max_distance: int | None = None
    keep: Keep = "first"
    verify: bool = True
    verifier: dict[str, Any] | None = None
    fingerprinter: dict[str, Any] | None = None
    exact: bool = True
    workers: int = 1
    expand_pairs: int = 10_000
    max_candidates_per_doc: int | None = 64
    candidate_work_per_doc_ns: int | None = 32_000
    threshold: float | None = None
    candidates: Literal["lsh", "simhash"] = "lsh"
    lsh_bands: int | None = None
    lsh_rows: int | None = None
    lsh_bucket_cap: int = 32
    components: bool = False

    def __post_init__(self) -> None:
        if self.max_distance is not None and (
            isinstance(self.max_distance, bool)
            or not isinstance(self.max_distance, int)
            or not 0 <= self.max_distance <= 64
        ):
            raise ConfigError(
                f"max_distance must be an int in [0, 64] or None (length-dependent default), "
                f"got {self.max_distance!r}"
            )
        if self.keep not in ("first", "longest", "none"):
            raise ConfigError(f"keep must be 'first', 'longest' or 'none', got {self.keep!r}")
        if (
            isinstance(self.expand_pairs, bool)
            or not isinstance(self.expand_pairs, int)
            or self.expand_pairs < 0
        ):
            raise ConfigError(f"expand_pairs must be an int >= 0, got {self.expand_pairs!r}")
        if self.max_candidates_per_doc is not None and (
            isinstance(self.max_candidates_per_doc, bool)
            or not isinstance(self.max_candidates_per_doc, int)
            or self.max_candidates_per_doc < 1
        ):
            raise ConfigError(
                f"max_candidates_per_doc must be an int >= 1 or None, got {self.max_candidates_per_doc!r}"
            )
        if self.candidate_work_per_doc_ns is not None and (
            isinstance(self.candidate_work_per_doc_ns, bool)
            or not isinstance(self.candidate_work_per_doc_ns, int)
            or self.candidate_work_per_doc_ns < 1
        ):
            raise ConfigError(
                "candidate_work_per_doc_ns must be an int >= 1 (modelled ns per document) or "
                f"None (no work budget), got {self.candidate_work_per_doc_ns!r}"
            )
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ConfigError(f"workers must be an int >= 1, got {self.workers!r}")
        if self.candidates not in ("lsh", "simhash"):
            raise ConfigError(f"candidates must be 'lsh' or 'simhash', got {self.candidates!r}")
        self.lsh_plan()  # validates threshold, lsh_bands, lsh_rows, lsh_bucket_cap
        self.make_verifier()  # validates the verifier overrides

    def make_verifier(self) -> Verifier:
        overrides = dict(self.verifier or {})
        if self.threshold is not None:
            overrides.setdefault("threshold", self.threshold)
        return Verifier.from_config(overrides)

    def lsh_plan(self) -> LshPlan:
        """The MinHash channel's plan (:func:`~neardup.pipeline.minhash.plan_lsh`)."""
        from .minhash import DEFAULT_THRESHOLD, plan_lsh

        return plan_lsh(
            DEFAULT_THRESHOLD if self.threshold is None else self.threshold,
            bands=self.lsh_bands,
            rows=self.lsh_rows,
            bucket_cap=self.lsh_bucket_cap,
        )

    def make_fingerprinter(self) -> Any:
        from ..fingerprint.simhash import Fingerprinter

        if self.fingerprinter is None:
            return Fingerprinter()
        return Fingerprinter.from_config(self.fingerprinter)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PairTable:
    """Matched pairs: positions ``a < b`` (int64), ``distance`` (int32, SimHash; 0 for exact),
    ``score`` (float64 similarity in [0, 1]), ``stage`` (uint8: 0 exact, 1 near)."""

    a: npt.NDArray[np.int64]
    b: npt.NDArray[np.int64]
    distance: npt.NDArray[np.int32]
    score: npt.NDArray[np.float64]
    stage: npt.NDArray[np.uint8]

    def __len__(self) -> int:
        return int(self.a.size)

    @classmethod
    def empty(cls) -> PairTable:
        return cls(
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            np.zeros(0, np.int32),
            np.zeros(0, np.float64),
            np.zeros(0, np.uint8),
        )

    @classmethod
    def concat(cls, tables: Sequence[PairTable]) -> PairTable:
        t = cls(
            *(
                np.concatenate([getattr(x, f) for x in tables])
                for f in ("a", "b", "distance", "score", "stage")
            )
        )
        order = np.lexsort((t.b, t.a))
        return cls(t.a[order], t.b[order], t.distance[order], t.score[order], t.stage[order])


@dataclass(repr=False)
class DedupResult:
    """What :func:`dedup` found.

    Attributes
    ----------
    ids : list of str
        Document ids in input order (``"0", "1", ...`` when none were passed).
    keep : numpy.ndarray of bool, shape (n,)
        True for documents kept by the policy.
    cluster : numpy.ndarray of int64, shape (n,)
        Dense cluster number (0, 1, ... in order of first member): the documents that share a
        ``root``; singletons have their own.
    root : numpy.ndarray of int64, shape (n,)
        With ``keep="first"`` / ``"longest"``: the position of the kept document each document
        is a verified (near or exact) duplicate of; its own position when kept. Every dropped
        document is paired with its root directly (no chaining through intermediates). With
        ``keep="none"``: the first member of its connected component.
    pairs : PairTable
        Every matched pair (exact copies are paired with the first copy).
    stats : dict
        documents, exact_duplicates, near_duplicates, clusters (of two or more), kept, dropped,
        candidates, verified, elapsed_s, docs_per_s, timings per stage, ``lsh`` (the MinHash
        channel's plan and counts).
    components : numpy.ndarray of int64 or None
        With ``DedupConfig(components=True)``: the first member of each document's connected
        component of the matched pairs (the transitive closure; a report, not used to drop).
    labelled : bool
        Whether ids were passed (else :meth:`pair_rows` gives positions as ints).

    Examples
    --------
    >>> r = dedup(["a b c d e f", "a b c d e f", "x y"])
    >>> r
    DedupResult(documents=3, kept=2, dropped=1, exact_duplicates=1, near_duplicates=0, clusters=1, pairs=1)
    >>> r.kept_indices().tolist(), r.kept_texts(["a b c d e f", "a b c d e f", "x y"])
    ([0, 2], ['a b c d e f', 'x y'])
    """

    ids: list[str]
    keep: npt.NDArray[np.bool_]
    cluster: npt.NDArray[np.int64]
    root: npt.NDArray[np.int64]
    pairs: PairTable
    stats: dict[str, Any] = field(default_factory=dict)
    components: npt.NDArray[np.int64] | None = None
    labelled: bool = True

    def __repr__(self) -> str:
        """A one-line summary (the arrays are in the attributes)."""
        s = self.stats
        keys = ("exact_duplicates", "near_duplicates", "clusters")
        parts = [
            f"documents={len(self.ids)}",
            f"kept={int(self.keep.sum())}",
            f"dropped={int(self.keep.size - self.keep.sum())}",
            *(f"{k}={s[k]}" for k in keys if k in s),
            f"pairs={len(self.pairs)}",
        ]
        return f"DedupResult({', '.join(parts)})"

    def kept_indices(self) -> npt.NDArray[np.int64]:
        """Positions of the kept documents, ascending (int64)."""
        return np.flatnonzero(self.keep).astype(np.int64)

    def kept_texts(self, texts: Sequence[str]) -> list[str]:
        """The kept documents of ``texts`` (the sequence passed to :func:`dedup`), in order.

        Raises
        ------
        InputError
            ``texts`` does not have one entry per document.
        """
        if len(texts) != self.keep.size:
            raise InputError(
                f"kept_texts() got {len(texts)} texts for a result over {self.keep.size} "
                "documents; pass the same texts given to dedup()"
            )
        return [texts[i] for i in self.kept_indices().tolist()]

    def pair_rows(self) -> list[tuple[str | int, str | int, int, float, str]]:
        """Pairs as ``(id_a, id_b, distance, score, stage)`` rows; ``id_a``/``id_b`` are the ids
        passed to :func:`dedup`, or int positions when none were passed."""
        p = self.pairs
        a, b = p.a.tolist(), p.b.tolist()
        if self.labelled:
            a = [self.ids[x] for x in a]
            b = [self.ids[x] for x in b]
        return [
            (x, y, int(d), round(float(sc), 4), STAGE_NAMES[st])
            for x, y, d, sc, st in zip(
                a, b, p.distance.tolist(), p.score.tolist(), p.stage.tolist(), strict=True
            )
        ]


# ---------------------------------------------------------------------------------------------
# stages


def stage_exact(texts: Sequence[str], workers: int = 1) -> npt.NDArray[np.int64]:
    """Position of the first document with the same normalised content hash, shape (n,) int64."""
    n = len(texts)
    if n == 0:
        return np.zeros(0, np.int64)
    return first_of_equal_rows(content_hashes(texts, workers=workers))


#: text bytes per :func:`content_hashes` chunk
EXACT_CHUNK_BYTES = 8 << 20
#: below this many characters in all, :func:`content_hashes` calls ``content_hash_many``
EXACT_NUMBA_MIN_CHARS = 4 << 20
#: mean characters per text of an :class:`ExactFingerprintPass` chunk from which copies seen
#: in earlier chunks are looked up (a dict lookup per text, under the GIL) rather than
#: fingerprinted again (for ~100-character posts the lookup costs more than the fingerprint)
EXACT_SEEN_MIN_CHARS = 512


def content_hashes(texts: Sequence[str], *, workers: int = 1) -> npt.NDArray[np.uint64]:
    """``content_hash_many(texts, normalize=True)`` (uint64 (n, 2), the same values), with
    fewer passes over ASCII text.

    ``content_hash_many`` hashes an ASCII text's lower-cased bytes directly when its whitespace
    collapse is the identity (printable, no double space, no space at an end), checking that
    with four passes over the text (``encode``, ``lower``, ``find``, ``translate``). Here
    chunks of ASCII texts are joined and encoded once, and one numba pass
    (:func:`~neardup.pipeline.tokens.lower_ascii_clean`) lower-cases them and decides the same
    condition; clean texts are hashed from the lowered buffer (``xxh3_128``), the other ASCII
    texts after their whitespace is collapsed in numba
    (:func:`~neardup.pipeline.tokens.normalized_ascii_digests`; was ``" ".join(t.lower().split())``
    per text: 10 s of a 23 s run on 200 k long documents with a newline each), non-ASCII texts
    by ``content_hash_many`` itself. Tested equal (Hypothesis).
    """
    import xxhash

    from ..fingerprint.simhash import content_hash_many
    from ..verify.tokens import lower_ascii_clean, normalized_ascii_digests

    n = len(texts)
    if sum(map(len, texts)) < EXACT_NUMBA_MIN_CHARS:  # not worth starting numba threads
        return np.asarray(content_hash_many(texts, normalize=True), np.uint64).reshape(n, 2)
    out = np.empty((n, 2), np.uint64)
    digest = xxhash.xxh3_128_digest
    is_ascii = np.fromiter((t.isascii() for t in texts), np.bool_, n)
    other = np.flatnonzero(~is_ascii)
    if other.size:
        out[other] = content_hash_many([texts[k] for k in other.tolist()], normalize=True)
    idx = np.flatnonzero(is_ascii).tolist()
    scratch = np.empty(0, np.uint8)
    i = 0
    while i < len(idx):  # chunks of ASCII texts, wherever they are
        j, size = i, 0
        while j < len(idx) and size < EXACT_CHUNK_BYTES:
            size += len(texts[idx[j]])
            j += 1
        run = [texts[k] for k in idx[i:j]]
        lens = np.fromiter(map(len, run), np.int64, j - i)
        data = "".join(run).encode("ascii")
        if scratch.size < len(data):
            scratch = np.empty(len(data), np.uint8)
        lowered, starts, clean = lower_ascii_clean(data, lens, workers=workers, out=scratch)
        mv = lowered.data  # a memoryview of the lowered bytes
        parts = [
            digest(mv[s : s + m]) if c else b"\0" * 16
            for s, m, c in zip(starts.tolist(), lens.tolist(), clean.tolist(), strict=True)
        ]
        pos = np.asarray(idx[i:j], np.int64)
        out[pos] = np.frombuffer(b"".join(parts), dtype=">u8").reshape(-1, 2)
        if not clean.all():  # whitespace to collapse (in numba) before hashing
            rest = np.flatnonzero(~clean)
            digests = normalized_ascii_digests(lowered, starts[rest], starts[rest] + lens[rest])
            out[pos[rest]] = np.frombuffer(digests, dtype=">u8").reshape(-1, 2)
        i = j
    return out


def stage_exact_fingerprint(
    texts: Sequence[str],
    fingerprinter: Any,
    workers: int = 1,
    timings: dict[str, float] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
    """:func:`stage_exact` and :func:`stage_fingerprint` of the first copies in one pass over
    the text bytes: ``(first, fps_u, empty_u)``, equal to ::

        first = stage_exact(texts, workers)
        unique = np.flatnonzero(first == np.arange(len(texts)))
        fps_u, empty_u = stage_fingerprint(fingerprinter, [texts[i] for i in unique], workers)

    (tested). See :class:`ExactFingerprintPass`, which does the work (and can be fed the texts
    while they are being read). ``timings`` (optional) receives ``exact`` and ``fingerprint``.
    """
    p = ExactFingerprintPass(fingerprinter, workers)
    try:
        p.feed(texts)
        return p.finish(texts, timings)
    finally:
        p.close()


class ExactFingerprintPass:
    """Exact content hashes and first-copy fingerprints, computed chunk by chunk as texts come.

    ``feed(texts)`` hands over the texts appended to ``texts`` since the last call (the list
    may keep growing, e.g. while a reader fills it; positions never change); ``finish(texts)``
    returns ``(first, fps_u, empty_u)`` exactly as :func:`stage_exact` +
    :func:`stage_fingerprint` of the first copies give them; ``close()`` stops the threads
    (always call it, e.g. when reading fails).

    How: chunks of ASCII texts (``EXACT_CHUNK_BYTES``) are joined and encoded once; one nogil
    numba pass lower-cases them and checks their whitespace (:func:`content_hashes`: the same
    values as ``content_hash_many``), and the same lowered bytes are fingerprinted
    (:meth:`~neardup.fingerprint.Fingerprinter.fingerprint_lowered_ascii`): the fingerprint
    stage's own join, ``lower`` and ``encode`` are gone. ``workers`` threads run whole chunks
    (the kernels release the GIL), so a reader that feeds as it goes overlaps with them. A text
    is fingerprinted unless an earlier text (in input order) of an already hashed chunk has the
    same content hash, i.e. unless it is certainly not a first copy; first copies that were not
    fingerprinted here (non-ASCII, longer than ``CHUNK_CHARS``) go through
    ``fingerprint_batch`` in ``finish``. Fingerprints depend only on the text, so which extra
    copies get fingerprinted never changes a result.

    Small inputs (below ``EXACT_NUMBA_MIN_CHARS`` characters, no chunk started) and
    fingerprinter settings without an ASCII kernel path run the two stages instead.
    """

    def __init__(self, fingerprinter: Any, workers: int = 1) -> None:
        import threading

        self.fp = fingerprinter
        self.workers = max(1, int(workers))
        self.kernel = bool(
            hasattr(fingerprinter, "lowered_ascii_ok") and fingerprinter.lowered_ascii_ok()
        )
        self.n = 0  # texts fed so far
        self.t_first: float | None = None
        self._lens: list[npt.NDArray[np.int64]] = []
        self._ascii: list[npt.NDArray[np.bool_]] = []
        self._pending: list[npt.NDArray[np.int64]] = []  # ASCII positions not in a chunk yet
        self._pending_size = 0
        self._futures: list[Any] = []
        self._pool: Any = None
        self._seen: dict[bytes, int] = {}  # content hash -> smallest position registered
        self._lock = threading.Lock()
        self._local = threading.local()
        self._busy = [0.0, 0.0]  # thread seconds in all, in the fingerprint kernel

    # -- feeding
    def feed(self, texts: Sequence[str]) -> None:
        """Take ``texts[self.n:]`` (texts appended since the last call)."""
        n = len(texts)
        if n <= self.n:
            return
        if self.t_first is None:
            self.t_first = time.perf_counter()
        if isinstance(texts, SpanTexts):  # no str made for the spans
            lens = texts.lengths(self.n, n)
            asc = texts.ascii_mask(self.n, n)
        else:
            new = (
                texts[self.n : n]
                if isinstance(texts, list)
                else [texts[k] for k in range(self.n, n)]
            )
            lens = np.fromiter(map(len, new), np.int64, len(new))
            asc = np.fromiter((t.isascii() for t in new), np.bool_, len(new))
        self._lens.append(lens)
        self._ascii.append(asc)
        if self.kernel:
            pos = np.flatnonzero(asc) + self.n
            sizes = np.cumsum(lens[asc])
            start = 0  # cut where the pending chunk reaches EXACT_CHUNK_BYTES
            while start < pos.size:
                need = EXACT_CHUNK_BYTES - self._pending_size
                base = int(sizes[start - 1]) if start else 0
                k = int(np.searchsorted(sizes, base + need, side="left"))
                if k >= pos.size:  # not enough for a chunk yet
                    self._pending.append(pos[start:])
                    self._pending_size += int(sizes[-1]) - base
                    break
                self._pending.append(pos[start : k + 1])
                self._submit(texts)
                start = k + 1
        self.n = n

    def _submit(self, texts: Sequence[str]) -> None:
        if not self._pending:
            return
        from concurrent.futures import ThreadPoolExecutor

        pos = np.concatenate(self._pending)
        self._pending, self._pending_size = [], 0
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers)
        self._futures.append(self._pool.submit(self._chunk, texts, pos))

    def _chunk(self, texts: Sequence[str], pos: npt.NDArray[np.int64]) -> tuple[Any, ...]:
        import xxhash

        from ..fingerprint.simhash import CHUNK_CHARS
        from ..verify.tokens import lower_ascii_clean_serial, normalized_ascii_digests

        c0 = time.perf_counter()
        raw = getattr(self._local, "raw", None)
        got = texts.gather_ascii(pos, raw) if isinstance(texts, SpanTexts) else None
        if got is None:
            run = [texts[k] for k in pos.tolist()]
            data, ln, self._local.raw = concat_ascii(run, raw)
        else:  # straight from the mapped input, without the GIL
            data, ln, self._local.raw = got
        scratch = getattr(self._local, "scratch", None)
        if scratch is None or scratch.size < len(data):
            scratch = np.empty(max(len(data), EXACT_CHUNK_BYTES + 1), np.uint8)
            self._local.scratch = scratch
        lowered, starts, clean = lower_ascii_clean_serial(data, ln, out=scratch)
        mv = lowered.data
        digest = xxhash.xxh3_128_digest
        zero = b"\0" * 16
        keys = b"".join(
            [
                digest(mv[s : s + m]) if c else zero
                for s, m, c in zip(starts.tolist(), ln.tolist(), clean.tolist(), strict=True)
            ]
        )
        h = np.frombuffer(keys, dtype=">u8").reshape(-1, 2).astype(np.uint64)
        if not clean.all():  # whitespace to collapse (in numba) before hashing
            rest = np.flatnonzero(~clean)
            digests = normalized_ascii_digests(lowered, starts[rest], starts[rest] + ln[rest])
            h[rest] = np.frombuffer(digests, dtype=">u8").reshape(-1, 2)
            keys = h.astype(">u8").tobytes()
        if int(ln.sum()) >= EXACT_SEEN_MIN_CHARS * pos.size:
            todo = []
            with self._lock:  # fingerprint unless an earlier equal text is known
                seen = self._seen
                get = seen.get
                for q, p in enumerate(pos.tolist()):
                    key = keys[16 * q : 16 * q + 16]
                    v = get(key)
                    if v is None or p < v:
                        seen[key] = p
                        todo.append(q)
            sel = np.asarray(todo, np.int64)
        else:  # short texts: fingerprinting a copy costs less than a dict lookup per text
            sel = np.flatnonzero(first_of_equal_rows(h) == np.arange(pos.size))
        sel = sel[ln[sel] <= CHUNK_CHARS]
        words = self.fp.bits // 64
        f = np.zeros((sel.size, words), np.uint64)
        nf = np.zeros(sel.size, np.int64)
        k0 = time.perf_counter()
        if sel.size:
            self.fp.fingerprint_lowered_ascii(lowered, starts[sel], starts[sel] + ln[sel], f, nf)
        k1 = time.perf_counter()
        with self._lock:
            self._busy[0] += k1 - c0
            self._busy[1] += k1 - k0
        return pos, h, pos[sel], f, nf

    # -- results
    def finish(
        self,
        texts: Sequence[str],
        timings: dict[str, float] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
        """Feed the rest of ``texts`` and return ``(first, fps_u, empty_u)``.
        ``progress(texts done)`` (optional) is called as the chunks' results are collected."""
        from ..fingerprint.simhash import content_hash_many

        t0 = time.perf_counter()
        self.feed(texts)
        n = len(texts)
        if n != self.n:
            raise InputError(f"finish() got {n} texts, {self.n} were fed")
        lens = np.concatenate(self._lens) if self._lens else np.zeros(0, np.int64)
        if not self.kernel or n == 0 or (not self._futures and lens.sum() < EXACT_NUMBA_MIN_CHARS):
            self.close()
            first = stage_exact(texts, self.workers)
            t1 = time.perf_counter()
            unique = np.flatnonzero(first == np.arange(n))
            fps_u, empty_u = stage_fingerprint(
                self.fp, [texts[i] for i in unique.tolist()], self.workers
            )
            if timings is not None:
                timings["exact"] = round(t1 - t0, 4)
                timings["fingerprint"] = round(time.perf_counter() - t1, 4)
            return first, fps_u, empty_u
        self._submit(texts)
        words = self.fp.bits // 64
        hashes = np.empty((n, 2), np.uint64)
        fps = np.zeros((n, words), np.uint64)
        nfeat = np.zeros(n, np.int64)
        done = np.zeros(n, np.bool_)
        other = np.flatnonzero(~np.concatenate(self._ascii))
        if other.size:  # overlaps with the chunks still running
            hashes[other] = content_hash_many([texts[k] for k in other.tolist()], normalize=True)
        collected = int(other.size)
        for fut in self._futures:
            pos, h, rows, f, nf = fut.result()
            hashes[pos] = h
            fps[rows] = f
            nfeat[rows] = nf
            done[rows] = True
            collected += int(pos.size)
            if progress is not None:
                progress(collected)
        self.close()
        first = first_of_equal_rows(hashes)
        unique = np.flatnonzero(first == np.arange(n))
        t1 = time.perf_counter()
        missing = unique[~done[unique]]
        if missing.size:
            batch = self.fp.fingerprint_batch(
                [texts[i] for i in missing.tolist()], workers=self.workers
            )
            fps[missing] = np.asarray(batch.fingerprints, np.uint64).reshape(missing.size, words)
            nfeat[missing] = np.asarray(batch.n_features, np.int64)
        t2 = time.perf_counter()
        fps_u = fps[unique, 0].copy() if words == 1 else fps[unique]
        empty_u = nfeat[unique] == 0
        if timings is not None:  # the wall time of finish, split by the kernel's share
            share = self._busy[1] / self._busy[0] if self._busy[0] > 0 else 0.0
            timings["exact"] = round((t1 - t0) * (1 - share), 4)
            timings["fingerprint"] = round((t1 - t0) * share + (t2 - t1), 4)
        return first, fps_u, empty_u

    def close(self) -> None:
        """Stop the threads (chunks not started are dropped); idempotent."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def first_of_equal_rows(h: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """For each row of ``h`` (uint64 (n, w)), the position of the first equal row (int64 (n,)).

    An (unstable, vectorised) sort on the first column, then the smallest position of each
    group of equal rows; rows whose first words tie but differ later (for 128-bit hashes:
    practically never) make it fall back to a full lexicographic sort. Equals
    :func:`first_of_equal_rows_reference` (tested).
    """
    n = h.shape[0]
    if n == 0:
        return np.zeros(0, np.int64)
    o = np.argsort(h[:, 0])
    hs = h[o]
    tie = hs[1:, 0] == hs[:-1, 0]
    if not tie.any():  # no two rows share a first word: every row is its own first
        return np.arange(n, dtype=np.int64)
    same = np.all(hs[1:] == hs[:-1], axis=1)
    if np.any(tie & ~same):
        o = np.lexsort(h.T[::-1])
        hs = h[o]
        same = np.all(hs[1:] == hs[:-1], axis=1)
    new = np.ones(n, bool)
    new[1:] = ~same
    group_start = np.flatnonzero(new)
    smallest = np.minimum.reduceat(o, group_start)  # the first position of every group
    first = np.empty(n, np.int64)
    first[o] = smallest[np.cumsum(new) - 1]
    return first


def first_of_equal_rows_reference(h: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """Reference for :func:`first_of_equal_rows`: ``np.unique`` over the rows as bytes."""
    h = np.ascontiguousarray(h, dtype=np.uint64)
    if h.shape[0] == 0:
        return np.zeros(0, np.int64)
    key = h.view(np.dtype((np.void, h.dtype.itemsize * h.shape[1]))).ravel()
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return first[inverse].astype(np.int64)


def _exact_groups(first: npt.NDArray[np.int64]) -> dict[int, list[int]]:
    """Members (in input order) of every exact group of two or more, keyed by the first member
    (the references' form; :class:`~neardup.pipeline.groups.ExactGroups` is the pipeline's)."""
    groups: dict[int, list[int]] = {}
    for i in np.flatnonzero(first != np.arange(first.size)).tolist():
        f = int(first[i])
        groups.setdefault(f, [f]).append(i)
    return groups


def stage_exact_pairs(groups: ExactGroups, expand_pairs: int) -> PairTable:
    """Exact pairs: every pair inside a group when at most ``expand_pairs``, else first-to-rest
    (:func:`~neardup.pipeline.groups.exact_pairs`; equals :func:`stage_exact_pairs_reference`,
    tested)."""
    from .groups import exact_pairs

    a, b = exact_pairs(groups, expand_pairs)
    k = a.size
    return PairTable(
        a,
        b,
        np.zeros(k, np.int32),
        np.ones(k, np.float64),
        np.full(k, STAGE_EXACT, np.uint8),
    )


def stage_exact_pairs_reference(groups: dict[int, list[int]], expand_pairs: int) -> PairTable:
    """Reference for :func:`stage_exact_pairs`, over :func:`_exact_groups`' dict."""
    a: list[int] = []
    b: list[int] = []
    for members in groups.values():
        m = len(members)
        if m * (m - 1) // 2 <= expand_pairs:
            for x in range(m):
                for y in range(x + 1, m):
                    a.append(members[x])
                    b.append(members[y])
        else:
            a.extend([members[0]] * (m - 1))
            b.extend(members[1:])
    k = len(a)
    return PairTable(
        np.array(a, np.int64),
        np.array(b, np.int64),
        np.zeros(k, np.int32),
        np.ones(k, np.float64),
        np.full(k, STAGE_EXACT, np.uint8),
    )


def stage_expand(
    groups: ExactGroups,
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    d: npt.NDArray[np.int32],
    score: npt.NDArray[np.float64],
    expand_pairs: int,
) -> PairTable:
    """Near pairs between first copies, repeated for the other members of their exact groups
    (:func:`~neardup.pipeline.groups.expanded_pairs`; equals :func:`stage_expand_reference`,
    tested)."""
    from .groups import expanded_pairs

    ea, eb, ed, es = expanded_pairs(groups, a, b, d, score, expand_pairs)
    aa = np.concatenate([a, ea])
    return PairTable(
        aa,
        np.concatenate([b, eb]),
        np.concatenate([d, ed]),
        np.concatenate([score, es]),
        np.full(aa.size, STAGE_NEAR, np.uint8),
    )


def stage_expand_reference(
    groups: dict[int, list[int]],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    d: npt.NDArray[np.int32],
    score: npt.NDArray[np.float64],
    expand_pairs: int,
) -> PairTable:
    """Reference for :func:`stage_expand`, over :func:`_exact_groups`' dict."""
    out_a, out_b, out_d, out_s = [a], [b], [d], [score]
    if groups:
        ea: list[int] = []
        eb: list[int] = []
        ed: list[int] = []
        es: list[float] = []
        for x, y, dist, sc in zip(a.tolist(), b.tolist(), d.tolist(), score.tolist(), strict=True):
            gx, gy = groups.get(x, [x]), groups.get(y, [y])
            if len(gx) * len(gy) == 1 or len(gx) * len(gy) > expand_pairs:
                continue
            for u in gx:
                for w in gy:
                    if (u, w) != (x, y):
                        ea.append(min(u, w))
                        eb.append(max(u, w))
                        ed.append(dist)
                        es.append(sc)
        out_a.append(np.array(ea, np.int64))
        out_b.append(np.array(eb, np.int64))
        out_d.append(np.array(ed, np.int32))
        out_s.append(np.array(es, np.float64))
    aa = np.concatenate(out_a)
    return PairTable(
        aa,
        np.concatenate(out_b),
        np.concatenate(out_d),
        np.concatenate(out_s),
        np.full(aa.size, STAGE_NEAR, np.uint8),
    )


def stage_fingerprint(
    fingerprinter: Any, texts: Sequence[str], workers: int = 1
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
    """Fingerprints (uint64 (n,) or (n, 2)) and the empty flags (bool (n,))."""
    batch = fingerprinter.fingerprint_batch(texts, workers=workers)
    return np.asarray(batch.fingerprints, dtype=np.uint64), np.asarray(batch.empty, dtype=bool)


def _pairs_within(
    fps: npt.NDArray[np.uint64],
    k: int,
    subset: npt.NDArray[np.int64],
    workers: int,
    per_doc: int | None = None,
    info: dict[str, Any] | None = None,
    name: str = "pass",
    work_ns: int | None = None,
    lengths: npt.NDArray[np.int64] | None = None,
) -> tuple[Any, Any, Any]:
    from .candidates import pair_work_ns, planned_pairs

    if subset.size < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32)
    max_pairs = None if per_doc is None else per_doc * int(subset.size)
    mean_chars = float(lengths[subset].mean()) if lengths is not None else 0.0
    a, b, d, plan = planned_pairs(
        fps[subset],
        k,
        work_ns_per_doc=work_ns,
        max_pairs=max_pairs,
        workers=workers,
        pair_ns=pair_work_ns(mean_chars),
    )
    if info is not None:
        info[name] = plan
    return subset[a], subset[b], d


def stage_candidates(
    fps: npt.NDArray[np.uint64],
    lengths: npt.NDArray[np.int64],
    usable: npt.NDArray[np.bool_],
    verifier: Verifier,
    max_distance: int | None = None,
    workers: int = 1,
    max_candidates_per_doc: int | None = None,
    info: dict[str, Any] | None = None,
    work_per_doc_ns: int | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """Candidate pairs ``(a, b, distance)``, a < b, sorted, among ``usable`` documents.

    With ``max_distance`` set, one pass at that distance. Otherwise a pair is a candidate when
    its distance is within the short-text distance if its shorter text has fewer than
    ``short_chars`` characters and its longer one fewer than ``2 * short_chars``, else within the
    long-text distance. (A text more than twice as long as a short one can only match it by
    containment — the short text wrapped in more content — and then the long text's content
    dominates its fingerprint.) Every pair is scanned once whatever the mix of lengths.

    With ``max_candidates_per_doc``, a brute-force pass never yields more than that many pairs
    per document of the pass: when the fingerprints are so concentrated that more pairs fall
    within the distance, the distance is lowered until they fit (recorded in ``info``).

    With ``work_per_doc_ns`` (default distances only), each pass searches the largest distance
    whose modelled work fits ``work_per_doc_ns * docs`` (:func:`~neardup.pipeline.candidates.plan_pass`);
    ``info[pass]`` records requested and used distance, method and reason.
    """
    idx = np.flatnonzero(usable).astype(np.int64)
    if max_distance is not None:
        return _pairs_within(fps, max_distance, idx, workers, max_candidates_per_doc, info, "all")
    w = work_per_doc_ns
    k_long = verifier.candidate_distance(1 << 62)
    k_short = verifier.candidate_distance(0)
    if k_short <= k_long:
        return _pairs_within(
            fps, k_long, idx, workers, max_candidates_per_doc, info, "all", w, lengths
        )
    # Each pair is scanned once: S = texts that can be in a short pair (< 2 * short_chars),
    # S_short = texts < short_chars, L = the rest.  A: S x S at k_short; B: pairs touching L
    # among L + (S - S_short) at k_long; C: S_short x L at k_long.
    cut = verifier.short_chars
    li = lengths[idx]
    in_s = li < 2 * cut
    s_all, big = idx[in_s], idx[~in_s]
    s_short = idx[li < cut]
    parts = []
    a, b, d = _pairs_within(
        fps, k_short, s_all, workers, max_candidates_per_doc, info, "short", w, lengths
    )
    keep = (d <= k_long) | (np.minimum(lengths[a], lengths[b]) < cut)
    parts.append((a[keep], b[keep], d[keep]))
    if big.size:
        pool = idx[li >= cut]  # big + (S - S_short), ascending as idx is
        a, b, d = _pairs_within(
            fps, k_long, pool, workers, max_candidates_per_doc, info, "long", w, lengths
        )
        keep = (lengths[a] >= 2 * cut) | (lengths[b] >= 2 * cut)
        parts.append((a[keep], b[keep], d[keep]))
        if s_short.size:
            pool = idx[(li >= 2 * cut) | (li < cut)]  # big + S_short
            a, b, d = _pairs_within(
                fps, k_long, pool, workers, max_candidates_per_doc, info, "cross", w, lengths
            )
            la, lb = lengths[a] < cut, lengths[b] < cut
            keep = la != lb
            parts.append((a[keep], b[keep], d[keep]))
    if len(parts) == 1:  # one pass over an increasing subset: already sorted by (a, b)
        return parts[0]
    a = np.concatenate([p[0] for p in parts])
    b = np.concatenate([p[1] for p in parts])
    d = np.concatenate([p[2] for p in parts])
    order = np.lexsort((b, a))
    return a[order], b[order], d[order]


#: SimHash distance of the ``candidates="lsh"`` mode's SimHash pass (exact and small-k near
#: duplicates: the permuted tables, linear in practice; the MinHash channel covers wider edits)
LSH_SIMHASH_DISTANCE = 3
#: ... for pairs of two texts shorter than the verifier's ``short_chars``: short posts crowd
#: SimHash space (pairs within 3 bits grew ~18x from 1 M to 4 M generated posts), and the
#: MinHash channel already finds their edited copies (dev set: no short pair found only by
#: distances 1-3)
LSH_SIMHASH_SHORT_DISTANCE = 0


#: :func:`dedup` verifies the deferred pairs lazily only when there are more than this many per
#: first copy (a concentrated corpus: a shared boilerplate gives ~80; ordinary corpora ~0.01)
LAZY_MIN_PAIRS_PER_DOC = 4
#: a SimHash pair of the ``candidates="lsh"`` mode is verified lazily (:func:`verify_in_chunks`)
#: when both its texts have more partners than this in the SimHash pass
LAZY_SIMHASH_PARTNERS = 8


def stage_candidates_lsh(
    texts: Sequence[str],
    fps: npt.NDArray[np.uint64],
    lengths: npt.NDArray[np.int64],
    usable: npt.NDArray[np.bool_],
    verifier: Verifier,
    plan: LshPlan,
    simhash_distance: int = LSH_SIMHASH_DISTANCE,
    workers: int = 1,
    max_candidates_per_doc: int | None = None,
    info: dict[str, Any] | None = None,
    lsh_info: dict[str, Any] | None = None,
    work_per_doc_ns: int | None = None,
    prepared: dict[int, tuple[bytes, int]] | None = None,
    deferred_out: list[npt.NDArray[np.bool_]] | None = None,
    progress: Callable[[int], None] | None = None,
    short_distance: int | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """Candidate pairs ``(a, b, distance)``, a < b, sorted, unique: the union of

    * the MinHash channel (:func:`~neardup.pipeline.minhash.lsh_pairs` over the texts' token
      bigrams, ``plan``): a pair's candidate probability depends on its similarity only;
    * a SimHash pass at ``simhash_distance`` among ``usable`` fingerprints (the permuted tables;
      the work budget ``work_per_doc_ns`` stays as a safety valve, recorded in ``info["simhash"]``).

    ``distance`` is the pair's SimHash distance. ``lsh_info`` receives the channel's plan and
    counts (``raw_pairs``, ``pairs``, ``capped_buckets``, ``pairs_skipped``) and timings;
    ``prepared`` the texts' Python tokenisation (:func:`~neardup.pipeline.minhash.minhash_signatures`),
    for :func:`stage_verify`.

    ``deferred_out`` (optional) receives a bool mask over the pairs: True for a pair that only a
    concentrated corpus produced (met only in capped MinHash buckets, or in the SimHash pass
    when the per-document pair valve lowered its distance or both texts have more than
    ``LAZY_SIMHASH_PARTNERS`` partners there); :func:`dedup` verifies those lazily
    (:func:`verify_in_chunks`).

    ``progress(k)`` (optional) reports texts done, ``k`` of ``len(texts)``, weighted by phase
    (SimHash pass 20 %, signatures 40 %, band pairs 40 %: their shares on short posts).
    """
    from ..fingerprint.distance import hamming_many
    from .minhash import lsh_pairs, minhash_signatures

    n = len(texts)
    idx = np.flatnonzero(usable).astype(np.int64)
    if short_distance is None or short_distance >= simhash_distance:
        sa, sb, _ = _pairs_within(
            fps, simhash_distance, idx, workers, max_candidates_per_doc, info, "simhash",
            work_per_doc_ns, lengths,
        )  # fmt: skip
    else:  # texts of short_chars or more at simhash_distance, every text at short_distance
        long_idx = idx[lengths[idx] >= verifier.short_chars]
        a1, b1, _ = _pairs_within(
            fps, simhash_distance, long_idx, workers, max_candidates_per_doc, info, "simhash",
            work_per_doc_ns, lengths,
        )  # fmt: skip
        a2, b2, _ = _pairs_within(
            fps, short_distance, idx, workers, max_candidates_per_doc, info, "simhash_short",
            work_per_doc_ns, lengths,
        )  # fmt: skip
        m0 = max(n, 1)
        code = unique_sorted(np.concatenate([a1 * m0 + b1, a2 * m0 + b2]))
        sa, sb = code // m0, code % m0
    tell = progress or (lambda k: None)
    tell(n // 5)
    t0 = time.perf_counter()
    sig, tokens = minhash_signatures(
        verifier,
        texts,
        plan.hashes,
        workers=workers,
        prepared=prepared,
        progress=lambda j: tell(n // 5 + 2 * n * j // (5 * max(n, 1))),
    )
    t1 = time.perf_counter()
    capped: list[npt.NDArray[np.bool_]] = []
    la, lb = lsh_pairs(
        sig,
        tokens > 0,
        plan,
        lsh_info,
        workers,
        capped,
        lambda band: tell(3 * n // 5 + 2 * n * band // (5 * plan.bands)),
    )
    del sig
    if lsh_info is not None:
        lsh_info["signatures_s"] = round(t1 - t0, 4)
        lsh_info["pairs_s"] = round(time.perf_counter() - t1, 4)
    m = max(n, 1)
    code = unique_sorted(np.concatenate([sa * m + sb, la * m + lb]))
    a, b = code // m, code % m
    if deferred_out is not None:
        plans = [(info or {}).get(k, {}) for k in ("simhash", "simhash_short")]
        if any(  # the pair valve acted
            p.get("distance_used", 0) < p.get("distance_planned", 0) for p in plans
        ):
            dense = np.ones(sa.size, bool)
        else:  # both texts in a dense patch of SimHash space (a template and its copies)
            deg = np.bincount(np.concatenate([sa, sb]), minlength=m)
            dense = (deg[sa] > LAZY_SIMHASH_PARTNERS) & (deg[sb] > LAZY_SIMHASH_PARTNERS)
        lazy = np.concatenate([la[capped[0]] * m + lb[capped[0]], sa[dense] * m + sb[dense]])
        ordinary = np.concatenate(
            [la[~capped[0]] * m + lb[~capped[0]], sa[~dense] * m + sb[~dense]]
        )
        lazy_code = np.setdiff1d(lazy, ordinary)
        deferred_out.append(np.isin(code, lazy_code, assume_unique=True))
    d = hamming_many(fps[a], fps[b]) if a.size else np.zeros(0, np.int32)
    if lsh_info is not None:
        lsh_info["simhash_pairs"] = int(sa.size)
        lsh_info["union_pairs"] = int(a.size)
    return a, b, d.astype(np.int32)


def stage_representatives(
    first: npt.NDArray[np.int64],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int64],
    keep: Keep,
    threshold: float,
) -> npt.NDArray[np.int64]:
    """Keep policy without chaining: ``root`` int64 (n,), ``root[i] == i`` for kept documents,
    else the kept document ``i`` is a verified near (or exact) duplicate of.

    Exact-duplicate groups (``first``: position of each document's first copy) act as units;
    ``a, b`` are the verified near pairs between first copies. Units are visited in input
    order (``keep="first"``) or longest first (``"longest"``; ties: input order), and a unit is
    dropped only for a pair with a unit already kept
    (:func:`~neardup.cluster.greedy_representatives`). A pair never drops a document more than
    ``(2 - threshold) / threshold`` times longer (in characters) than the kept one: at that
    length ratio no pair reaches ``threshold`` by similarity, so the match is containment (the
    kept text is an excerpt of it) and the longer text is kept. Within a unit the first copy
    (or, for ``"longest"``, the longest copy; ties: first) stands for it.
    """
    from .cluster import greedy_representatives

    n = first.size
    units = np.flatnonzero(first == np.arange(n))
    unit_of = np.searchsorted(units, first)
    ulen = np.zeros(units.size, np.int64)
    np.maximum.at(ulen, unit_of, lengths)
    ua, ub = np.searchsorted(units, a), np.searchsorted(units, b)
    if keep == "longest":
        order = np.lexsort((np.arange(units.size), -ulen))
        rank = np.empty(units.size, np.int64)
        rank[order] = np.arange(units.size)
        o = np.lexsort((np.arange(n), -lengths, unit_of))  # each unit's longest member first
        head = np.ones(n, bool)
        head[1:] = unit_of[o][1:] != unit_of[o][:-1]
        member = np.empty(units.size, np.int64)
        member[unit_of[o[head]]] = o[head]
    else:
        rank = np.arange(units.size, dtype=np.int64)
        member = units
    ratio = (2.0 - threshold) / threshold
    la, lb = ulen[ua].astype(np.float64), ulen[ub].astype(np.float64)
    may_drop = np.concatenate([lb <= ratio * la, la <= ratio * lb])
    rep = greedy_representatives(units.size, ua, ub, rank, may_drop)
    return member[rep[unit_of]]


def stage_verify(
    verifier: Verifier,
    texts: Sequence[str],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    d: npt.NDArray[np.int32],
    workers: int = 1,
    tokenised: dict[int, tuple[bytes, int]] | None = None,
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
    """Decide candidate pairs ``(texts[a[m]], texts[b[m]])``; same decisions as
    :func:`stage_verify_reference` (tested). ``tokenised``: texts already tokenised in Python
    (position in ``texts`` -> kernel bytes and mode, as the candidate stage leaves them).

    1. Every text of a pair: its tokens counted in 512 hash buckets and its exact token count
       (:func:`~neardup.pipeline.tokens.token_histograms`: one pass over the bytes, nothing
       sorted); per pair, the sum of the smaller bucket counts, an upper bound on the multiset
       overlap, rejects the pairs that cannot pass
       (:func:`~neardup.pipeline.overlap.histogram_bound_decisions`; unrelated long texts:
       nearly all of them).
    2. The texts of the pairs left: their tokens as sorted 32-bit hashes
       (:func:`~neardup.pipeline.tokens.token_hashes`, no vocabulary); per pair, the multiset
       overlap of the hashes, an upper bound on the LCS (equal tokens hash equal; collisions
       only merge counts), decides the pairs that cannot pass
       (:func:`~neardup.pipeline.overlap.bound_decisions`, the same formulas as
       :meth:`Verifier.decide`).
    3. The rest: the exact LCS per pair from those texts' bytes
       (:func:`~neardup.pipeline.tokens.token_bytes`,
       :func:`~neardup.pipeline.overlap.lcs_many`: tokenised per pair, a per-pair token table
       confirmed byte by byte, bit-parallel LCS), decided by :meth:`Verifier.decide`.

    Returns (ok bool (m,), score float64 (m,)). The score of a pair that passes (or reaches
    step 3) is its exact similarity; a pair rejected in step 1 or 2 reports that bound's ratio.
    """
    from ..verify.overlap import bound_decisions, histogram_bound_decisions, lcs_many
    from ..verify.tokens import token_bytes, token_hashes, token_histograms

    if a.size == 0:
        return np.zeros(0, bool), np.zeros(0, np.float64)
    pos = np.full(len(texts), -1, np.int64)
    pos[a] = 0
    pos[b] = 0
    docs = np.flatnonzero(pos == 0)
    pos[docs] = np.arange(docs.size)
    ia, ib = pos[a], pos[b]
    sub = _subset(texts, docs)
    prepared: dict[int, tuple[bytes, int]] = {}
    if tokenised:
        prepared = {x: tokenised[g] for x, g in enumerate(docs.tolist()) if g in tokenised}
    c = verifier.config()
    rule = {
        "threshold": c["threshold"],
        "containment": c["containment"],
        "min_containment_tokens": c["min_containment_tokens"],
    }
    hist, lens = token_histograms(verifier, sub, workers=workers, prepared=prepared)
    could, score = histogram_bound_decisions(hist, lens, ia, ib, **rule, workers=workers)
    del hist
    left = np.flatnonzero(could)  # lens: exact token counts
    if left.size:
        need = unique_sorted(np.concatenate([ia[left], ib[left]]))
        local = np.empty(docs.size, np.int64)
        local[need] = np.arange(need.size)
        again = {x: prepared[j] for x, j in enumerate(need.tolist()) if j in prepared}
        values, offsets = token_hashes(
            verifier, _subset(sub, need), workers=workers, prepared=again
        )
        could[left], score[left] = bound_decisions(
            values,
            offsets,
            local[ia[left]],
            local[ib[left]],
            **rule,
            workers=workers,
            early_exit=True,
        )
        del values, offsets
    ok = np.zeros(a.size, bool)
    todo = np.flatnonzero(could)
    if todo.size:
        need = unique_sorted(np.concatenate([ia[todo], ib[todo]]))
        local = np.empty(docs.size, np.int64)
        local[need] = np.arange(need.size)
        again = {x: prepared[j] for x, j in enumerate(need.tolist()) if j in prepared}
        data = token_bytes(verifier, _subset(sub, need), prepared=again)
        lcs = lcs_many(
            data,
            local[ia[todo]],
            local[ib[todo]],
            workers=workers,
            max_cells=verifier.max_lcs_cells,
        )
        ok[todo], score[todo] = verifier.decide(lcs, lens[ia[todo]], lens[ib[todo]])
    return _trusted(verifier, texts, a, b, d, ok, score)


#: candidate pairs per :func:`stage_verify` call in :func:`verify_in_chunks` (progress counts
#: advance per chunk; a text in pairs of several chunks is tokenised once per chunk) ...
VERIFY_CHUNK_PAIRS = 1 << 18
#: ... but at most this many chunks (larger chunks beyond): 44 chunks of 11.4 M pairs over 1 M
#: short posts verified ~30 % slower than one call, from tokenising texts again
VERIFY_MAX_CHUNKS = 8
#: pairs of the first round of :func:`verify_in_chunks`' deferred pairs (doubling after)
DEFERRED_ROUND_PAIRS = 1 << 12


def verify_in_chunks(
    verifier: Verifier,
    texts: Sequence[str],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    d: npt.NDArray[np.int32],
    workers: int = 1,
    tokenised: dict[int, tuple[bytes, int]] | None = None,
    *,
    deferred: npt.NDArray[np.bool_] | None = None,
    skippable: Callable[[npt.NDArray[np.bool_]], npt.NDArray[np.bool_]] | None = None,
    order: npt.NDArray[np.int64] | None = None,
    progress: Progress | None = None,
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """:func:`stage_verify` in chunks of ``VERIFY_CHUNK_PAIRS`` pairs (at most
    ``VERIFY_MAX_CHUNKS`` chunks), reporting
    ``progress("verify", pairs done, pairs)`` after each; the decisions are per pair, so they do
    not depend on the chunks. Returns ``(ok, score, skipped)``.

    ``deferred`` marks the pairs only a pathological case produced (``deferred_out`` of
    :func:`stage_candidates_lsh`). They are verified after the others, in rounds of
    ``DEFERRED_ROUND_PAIRS`` (doubling), in increasing ``order`` (a key per pair: the keep
    policy's visit rank of its earlier-visited text; ties and ``None``: (a, b)); before each round
    ``skippable(ok)`` (a mask over all pairs, from the pairs verified so far) says which pairs can
    no longer change the outcome, and the first pairs of the others are verified; the pairs
    still skippable when no other is left are not verified (``skipped``; ``ok`` False). With
    :func:`dedup`'s ``skippable`` the outcome is the one verifying every pair would give: a pair
    between two texts dropped (for verified pairs with kept texts) never changes the greedy keep
    policy, one inside a connected component never changes the components. E.g. a corpus where
    every text shares a 2 KB boilerplate: each text's pair with the first text decides it, and
    the other pairs of its capped buckets are skipped.
    """
    m = a.size
    ok = np.zeros(m, bool)
    score = np.zeros(m, np.float64)
    skipped = np.zeros(m, bool)
    report = progress or (lambda stage, done, total: None)
    done = 0

    step = max(VERIFY_CHUNK_PAIRS, -(-m // VERIFY_MAX_CHUNKS))

    def run(sel: npt.NDArray[np.int64]) -> None:
        nonlocal done
        for s0 in range(0, sel.size, step):
            part = sel[s0 : s0 + step]
            if part.size == m:  # one chunk of everything: no index copies
                ok[:], score[:] = stage_verify(verifier, texts, a, b, d, workers, tokenised)
            else:
                ok[part], score[part] = stage_verify(
                    verifier, texts, a[part], b[part], d[part], workers, tokenised
                )
            done += int(part.size)
            report("verify", done, m)

    if deferred is None or skippable is None or not deferred.any():
        run(np.arange(m, dtype=np.int64))
        return ok, score, skipped
    run(np.flatnonzero(~deferred))
    pool = np.flatnonzero(deferred)
    if order is not None:
        pool = pool[np.argsort(order[pool], kind="stable")]
    size = DEFERRED_ROUND_PAIRS
    while pool.size:  # until every pair left is skippable in the current state
        skip = skippable(ok)[pool]
        report("verify", done + int(skip.sum()), m)
        take = np.flatnonzero(~skip)[:size]
        if not take.size:
            break
        run(pool[take])
        keep = np.ones(pool.size, bool)
        keep[take] = False
        pool = pool[keep]
        size *= 2
    skipped[pool] = True
    return ok, score, skipped


def _longest_first(
    lengths: npt.NDArray[np.int64], a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Per pair, the earlier rank of its two texts in longest-first order (ties: input order)."""
    rank = np.empty(lengths.size, np.int64)
    rank[np.lexsort((np.arange(lengths.size), -lengths))] = np.arange(lengths.size)
    return np.minimum(rank[a], rank[b])


def _subset(texts: Sequence[str], idx: npt.NDArray[np.int64]) -> Sequence[str]:
    """``texts`` at positions ``idx``: spans stay spans (:meth:`SpanTexts.take`: no ``str`` is
    made, escaped ones are not decoded here), other sequences give a list."""
    if isinstance(texts, SpanTexts):
        return texts.take(idx)
    return [texts[i] for i in idx.tolist()]


def stage_verify_reference(
    verifier: Verifier,
    texts: Sequence[str],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    d: npt.NDArray[np.int32],
    workers: int = 1,
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
    """Reference for :func:`stage_verify`: the exact LCS of every pair (no bound)."""
    from ..verify.tokens import encode_texts_reference

    if a.size == 0:
        return np.zeros(0, bool), np.zeros(0, np.float64)
    encoded = encode_texts_reference(verifier, texts, TokenEncoder())
    ok, score = verifier.compare_indexed(encoded, a, b, workers=workers)
    return _trusted(verifier, texts, a, b, d, ok, score)


def _trusted(
    verifier: Verifier,
    texts: Sequence[str],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    d: npt.NDArray[np.int32],
    ok: npt.NDArray[np.bool_],
    score: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
    """``trust_distance``: long pairs at a small SimHash distance pass whatever their score."""
    cfg = verifier.config()
    if cfg["trust_distance"] < 0:
        return ok, score
    la = np.fromiter((len(texts[i]) for i in a.tolist()), np.int64, a.size)
    lb = np.fromiter((len(texts[i]) for i in b.tolist()), np.int64, b.size)
    trusted = (d <= cfg["trust_distance"]) & (np.minimum(la, lb) >= cfg["short_chars"])
    return ok | trusted, np.where(trusted, 1.0 - d / 64.0, score)


def stage_cluster(n: int, pairs: PairTable) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Union-find over the matched pairs: (root position, dense cluster id), both int64 (n,)."""
    roots = connected_components(n, pairs.a, pairs.b)
    return roots, cluster_ids(roots)


def stage_policy(
    roots: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64], keep: Keep
) -> npt.NDArray[np.bool_]:
    """Keep mask for the policy: first member, longest member (ties: first), or none of a cluster."""
    n = roots.size
    if keep == "first":
        return roots == np.arange(n)
    sizes = np.bincount(roots, minlength=n)
    if keep == "none":
        return sizes[roots] == 1
    # longest: sort by (root, -length, position) and keep the first row of each root
    order = np.lexsort((np.arange(n), -lengths, roots))
    first = np.ones(n, bool)
    first[1:] = roots[order][1:] != roots[order][:-1]
    mask = np.zeros(n, bool)
    mask[order[first]] = True
    return mask


# ---------------------------------------------------------------------------------------------


def _check_texts(texts: Sequence[str]) -> Sequence[str]:
    if isinstance(texts, str):
        raise InputTypeError("dedup() takes a sequence of texts, not one str; wrap it in a list")
    if isinstance(texts, SpanTexts):  # read by neardup.io: every text is a str or ASCII span
        return texts
    out = list(texts)
    if set(map(type, out)) - {str}:  # (a C-level pass when every text is a str)
        for i, t in enumerate(out):
            if not isinstance(t, str):
                raise InputTypeError(f"texts[{i}] is {type(t).__name__}, expected str")
    return out


def dedup(
    texts: Sequence[str],
    *,
    ids: Sequence[str] | None = None,
    config: DedupConfig | None = None,
    progress: Progress | None = None,
    exact_pass: ExactFingerprintPass | None = None,
    **overrides: Any,
) -> DedupResult:
    """Deduplicate a corpus: exact duplicates, then verified near-duplicates, then clusters.

    Parameters
    ----------
    texts : sequence of str
        The documents, in input order.
    ids : sequence of str, optional
        Unique document ids; default ``"0", "1", ...``.
    config : DedupConfig, optional
        Parameters; keyword ``overrides`` (e.g. ``keep="longest"``) replace its fields.
    progress : callable, optional
        Called as ``progress(stage, done, total)`` as stages start and finish.
    exact_pass : ExactFingerprintPass, optional
        A pass already fed (some of) these texts, e.g. while they were read (the CLI does
        this), made with the same fingerprinter settings: its work is used instead of starting
        over (the results are the same). Ignored, and closed, when ``exact`` is off or its
        fingerprinter differs from the configured one.

    Returns
    -------
    DedupResult

    Raises
    ------
    InputTypeError
        A text is not a str (names its position).
    InputError
        ``ids`` has the wrong length or repeats an id.
    ConfigError
        Invalid parameters.
    """
    cfg = config or DedupConfig()
    if overrides:
        unknown = set(overrides) - set(cfg.to_dict())
        if unknown:
            raise ConfigError(f"unknown dedup() options {sorted(unknown)}; see DedupConfig")
        cfg = DedupConfig(**{**cfg.to_dict(), **overrides})
    texts = _check_texts(texts)
    n = len(texts)
    if ids is None:
        id_list = [str(i) for i in range(n)]
    elif type(ids) is UniqueIds and len(ids) == n:  # read by neardup.io: str, checked unique
        id_list = ids
    else:
        id_list = [str(x) for x in ids]
        if len(id_list) != n:
            raise InputError(f"ids has {len(id_list)} entries for {n} texts; pass one id per text")
        if len(set(id_list)) != n:
            seen: set[str] = set()
            dup = next(x for x in id_list if x in seen or seen.add(x))  # type: ignore[func-returns-value]
            raise InputError(f"ids must be unique; {dup!r} appears more than once")
    verifier = cfg.make_verifier()
    report = progress or (lambda stage, done, total: None)
    timings: dict[str, float] = {}
    t_start = time.perf_counter()
    lengths = (
        texts.lengths()
        if isinstance(texts, SpanTexts)
        else np.fromiter(map(len, texts), dtype=np.int64, count=n)
    )

    def timed(name: str, total: int | None = None) -> Callable[[], None]:
        """Time a stage; report its start and end (in ``total`` items when it reports counts
        as it goes, else as 0/1 and 1/1)."""
        t0 = time.perf_counter()
        report(name, 0, 1 if total is None else total)

        def done() -> None:
            timings[name] = round(time.perf_counter() - t0, 4)
            report(name, *((1, 1) if total is None else (total, total)))

        return done

    from .groups import ExactGroups

    fp = cfg.make_fingerprinter()
    if cfg.exact:  # one pass: exact hashes and the first copies' fingerprints
        report("exact", 0, n)
        report("fingerprint", 0, n)

        def texts_done(k: int) -> None:
            report("exact", k, n)
            report("fingerprint", k, n)

        if exact_pass is None or exact_pass.fp != fp or exact_pass.n > n:
            if exact_pass is not None:
                exact_pass.close()
            exact_pass = ExactFingerprintPass(fp, cfg.workers)
        try:
            first, fps_u, empty_u = exact_pass.finish(texts, timings, texts_done)
        finally:
            exact_pass.close()
        t1 = time.perf_counter()
        is_dup = first != np.arange(n)
        groups = ExactGroups.from_first(first)
        exact = stage_exact_pairs(groups, cfg.expand_pairs)
        timings["exact"] = round(timings["exact"] + time.perf_counter() - t1, 4)
        report("exact", n, n)
        report("fingerprint", n, n)
        unique = np.flatnonzero(~is_dup).astype(np.int64)
    else:
        if exact_pass is not None:
            exact_pass.close()
        done = timed("exact")
        first = np.arange(n, dtype=np.int64)
        is_dup = first != np.arange(n)
        groups = ExactGroups.from_first(first)
        exact = stage_exact_pairs(groups, cfg.expand_pairs)
        done()

        done = timed("fingerprint")
        unique = np.flatnonzero(~is_dup).astype(np.int64)
        fps_u, empty_u = stage_fingerprint(fp, [texts[i] for i in unique.tolist()], cfg.workers)
        done()

    # counted in the corpus's documents, like the other document stages (the candidate stage
    # works on the first copies: k of them done reports k * n / first copies)
    done = timed("candidates", n)
    passes: dict[str, Any] = {}
    lsh_info: dict[str, Any] = {}
    tokenised: dict[int, tuple[bytes, int]] = {}
    deferred: list[npt.NDArray[np.bool_]] = []
    if cfg.candidates == "lsh":
        ca, cb, cd = stage_candidates_lsh(
            _subset(texts, unique),
            fps_u,
            lengths[unique],
            ~empty_u,
            verifier,
            cfg.lsh_plan(),
            LSH_SIMHASH_DISTANCE if cfg.max_distance is None else cfg.max_distance,
            cfg.workers,
            cfg.max_candidates_per_doc,
            passes,
            lsh_info,
            # an explicit distance is searched as asked, as in the SimHash mode
            cfg.candidate_work_per_doc_ns if cfg.max_distance is None else None,
            tokenised,
            deferred,
            lambda k: report("candidates", k * n // max(int(unique.size), 1), n),
            LSH_SIMHASH_SHORT_DISTANCE if cfg.max_distance is None else None,
        )
        if tokenised:  # those in a pair, re-keyed from position among first copies to texts
            involved = set(ca.tolist()) | set(cb.tolist())
            tokenised = {int(unique[k]): v for k, v in tokenised.items() if k in involved}
    else:
        ca, cb, cd = stage_candidates(
            fps_u,
            lengths[unique],
            ~empty_u,
            verifier,
            cfg.max_distance,
            cfg.workers,
            cfg.max_candidates_per_doc,
            passes,
            cfg.candidate_work_per_doc_ns,
        )
    ca, cb = unique[ca], unique[cb]
    done()

    done = timed("verify", ca.size if cfg.verify else None)
    if cfg.verify:

        def skippable(ok: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
            """Pairs that can no longer change the outcome: both texts already in one
            component (keep="none"), or both already dropped for a verified pair with a kept
            text (a pair between two dropped texts never changes the greedy keep)."""
            if cfg.keep == "none":
                comp = connected_components(n, ca[ok], cb[ok])
                return comp[ca] == comp[cb]
            rep = stage_representatives(
                first, ca[ok], cb[ok], lengths, cfg.keep, verifier.threshold
            )
            dropped = rep != np.arange(n)
            return dropped[ca] & dropped[cb]

        # lazily only when a concentrated corpus made many such pairs: otherwise every
        # candidate is verified and every matched pair reported
        lazy = deferred[0] if deferred else None
        if lazy is not None and lazy.sum() <= LAZY_MIN_PAIRS_PER_DOC * unique.size:
            lazy = None
        ok, score, skipped = verify_in_chunks(
            verifier,
            texts,
            ca,
            cb,
            cd,
            cfg.workers,
            tokenised,
            deferred=lazy,
            skippable=skippable,
            order=_longest_first(lengths, ca, cb) if cfg.keep == "longest" else None,
            progress=progress,
        )
        if deferred:
            lsh_info["deferred_pairs"] = int(deferred[0].sum())
            lsh_info["deferred_lazy"] = lazy is not None
            lsh_info["deferred_skipped"] = int(skipped.sum())
    else:
        bits = 128 if fps_u.ndim == 2 else 64
        ok, score = np.ones(ca.size, bool), 1.0 - cd / bits
    tokenised.clear()
    near = stage_expand(groups, ca[ok], cb[ok], cd[ok], score[ok], cfg.expand_pairs)
    done()

    done = timed("cluster")
    pairs = PairTable.concat([exact, near])
    components = None
    if cfg.keep == "none" or cfg.components:
        components, _ = stage_cluster(n, pairs)
    if cfg.keep == "none":  # every member of a connected cluster is dropped
        roots = components
        keep = stage_policy(roots, lengths, cfg.keep)
    else:
        roots = stage_representatives(first, ca[ok], cb[ok], lengths, cfg.keep, verifier.threshold)
        keep = roots == np.arange(n)
    clusters = cluster_ids(roots)
    done()

    elapsed = time.perf_counter() - t_start
    sizes = np.bincount(roots, minlength=n)
    in_cluster = int((sizes[roots] > 1).sum())
    n_clusters = int((sizes > 1).sum())
    exact_dups = int(is_dup.sum())
    stats = {
        "documents": n,
        "exact_duplicates": exact_dups,
        "near_duplicates": in_cluster - n_clusters - exact_dups,
        "clusters": n_clusters,
        "kept": int(keep.sum()),
        "dropped": int(n - keep.sum()),
        "candidates": int(ca.size),
        "candidate_passes": passes,
        **({"lsh": lsh_info} if lsh_info else {}),
        "verified": int(ok.sum()),
        "pairs": len(pairs),
        "elapsed_s": round(elapsed, 3),
        "docs_per_s": round(n / elapsed, 1) if elapsed > 0 else None,
        "timings_s": timings,
        "config": {
            **cfg.to_dict(),
            "verifier": verifier.config(),
            "fingerprinter": fp.config() if hasattr(fp, "config") else None,
        },
    }
    return DedupResult(
        ids=id_list,
        keep=keep,
        cluster=clusters,
        root=roots,
        pairs=pairs,
        stats=stats,
        components=components if cfg.components else None,
        labelled=ids is not None,
    )
