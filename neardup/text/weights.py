"""Feature weights: IDF tables (shipped for Chinese, buildable from a corpus) and keywords.

All weights that reach SimHash are integers, so fingerprints never depend on summation order.

- ``tf``: every occurrence of a feature adds weight 1 (so a feature weighs its count).
- ``tfidf``: an occurrence of token ``t`` adds ``quantize_idf(idf[t])`` = ``max(1, round(idf))``;
  tokens missing from the table use the table's median IDF (jieba's convention).
- ``keywords``: per document, each distinct feature scores ``sum`` of its tf-idf weights; only the
  ``top_n`` best (ties broken by hash) are kept and get integer weights 1-5:
  ``1 + (4 * score) // max_score`` -- the "keywords with weights 1-5" idea.
- ``textrank``: per document, each distinct feature weighs its TextRank score (PageRank over the
  features' co-occurrence graph within a window), in integer levels 1-8
  (:func:`textrank_weights`; integer fixed point, so the same on every machine).

IDF file format (UTF-8 text, jieba's ``idf.txt`` layout): one ``token<whitespace>idf`` per line;
the token is everything before the last whitespace run.
"""

from __future__ import annotations

import gzip
import io
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from ..errors import ConfigError, FormatError, InputError

__all__ = [
    "TEXTRANK_DAMPING",
    "TEXTRANK_ITERATIONS",
    "TEXTRANK_LEVELS",
    "TEXTRANK_SCALE",
    "TEXTRANK_WINDOW",
    "IdfTable",
    "build_idf",
    "keyword_weights",
    "quantize_idf",
    "shipped_zh_idf",
    "textrank_weights",
]


def quantize_idf(idf: float) -> int:
    """Integral token weight for an IDF value: ``max(1, round(idf))``."""
    return max(1, round(idf))


@dataclass(frozen=True)
class IdfTable:
    """Token -> IDF mapping plus the default used for unknown tokens (the median)."""

    idf: Mapping[str, float]
    default: float
    source: str = "<memory>"
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_mapping(cls, idf: Mapping[str, float], source: str = "<memory>") -> IdfTable:
        if not idf:
            raise InputError("an IDF table needs at least one token")
        med = float(np.median(np.fromiter(idf.values(), dtype=np.float64, count=len(idf))))
        return cls(dict(idf), med, source)

    @classmethod
    def load(cls, path: str | Path) -> IdfTable:
        """Read an IDF file (plain or ``.gz``); raises :class:`FormatError` naming the line."""
        p = Path(path)
        try:
            raw = p.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read IDF table {p}: {exc}") from exc
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return cls._parse(raw.decode("utf-8"), str(p))

    @classmethod
    def _parse(cls, text: str, source: str) -> IdfTable:
        idf: dict[str, float] = {}
        for i, line in enumerate(io.StringIO(text), 1):
            line = line.rstrip("\r\n")
            if not line.strip() or line.startswith("#"):
                continue
            if "\t" in line:
                tok, _, val = line.rpartition("\t")
            else:
                tok, _, val = line.rpartition(" ")
            try:
                idf[tok] = float(val)
            except ValueError:
                raise FormatError(
                    f"{source}:{i}: expected 'token idf', got {line[:60]!r}"
                ) from None
        return cls.from_mapping(idf, source)

    def save(self, path: str | Path) -> None:
        """Write ``token<TAB>idf`` lines sorted by token (deterministic bytes)."""
        lines = [f"{t}\t{v:.6f}\n" for t, v in sorted(self.idf.items())]
        Path(path).write_text("".join(lines), encoding="utf-8")

    def hash_table(self, hash: str, seed: int) -> tuple[np.ndarray, np.ndarray, int]:
        """Sorted token hashes (uint64), their integral weights (int64) and the default weight."""
        key = (hash, seed)
        if key not in self._cache:
            from .hashing import hash64

            hs = np.fromiter(
                (hash64(t.encode("utf-8", "surrogatepass"), hash, seed) for t in self.idf),
                dtype=np.uint64,
                count=len(self.idf),
            )
            ws = np.fromiter((quantize_idf(v) for v in self.idf.values()), np.int64, len(self.idf))
            order = np.argsort(hs, kind="stable")
            hs, ws = hs[order], ws[order]
            keep = np.ones(len(hs), bool)
            keep[1:] = hs[1:] != hs[:-1]
            self._cache[key] = (hs[keep], ws[keep], quantize_idf(self.default))
        return self._cache[key]


@cache
def shipped_zh_idf() -> IdfTable:
    """jieba's MIT-licensed Chinese IDF table (``neardup/data/text/idf_zh_jieba.txt.gz``)."""
    path = resources.files("neardup") / "data" / "text" / "idf_zh_jieba.txt.gz"
    return IdfTable._parse(gzip.decompress(path.read_bytes()).decode("utf-8"), "jieba idf.txt")


def build_idf(token_lists: Iterable[Iterable[str]], *, min_df: int = 1) -> IdfTable:
    """IDF from tokenized documents: ``idf(t) = ln(N / df(t))`` (jieba's definition).

    >>> t = build_idf([["a", "b"], ["a"]])
    >>> round(t.idf["b"], 3), t.idf["a"]
    (0.693, 0.0)
    """
    if min_df < 1:
        raise ConfigError(f"min_df must be >= 1, got {min_df}")
    df: dict[str, int] = {}
    n = 0
    for toks in token_lists:
        n += 1
        for t in set(toks):
            df[t] = df.get(t, 0) + 1
    if n == 0:
        raise InputError("cannot build an IDF table from an empty corpus")
    idf = {t: math.log(n / c) for t, c in df.items() if c >= min_df}
    if not idf:
        raise InputError(f"no token reaches min_df={min_df}; lower min_df")
    return IdfTable.from_mapping(idf, f"<built from {n} documents>")


def keyword_weights(scores: np.ndarray, hashes: np.ndarray, top_n: int) -> np.ndarray:
    """Indices and 1-5 weights of the ``top_n`` best-scoring distinct features.

    ``scores`` int64 (m,), ``hashes`` uint64 (m,) (distinct). Returns int64 (m,) weights where
    non-selected features get 0. Ranking: score descending, then hash ascending.
    """
    m = len(scores)
    out = np.zeros(m, np.int64)
    if m == 0:
        return out
    order = np.lexsort((hashes, -scores))[:top_n]
    top = scores[order]
    mx = int(top.max())
    out[order] = 1 + (4 * top) // max(mx, 1)
    return out


# ---------------------------------------------------------------------------------------------
# TextRank (Mihalcea & Tarau 2004): the seeds' keyword weights (seed 003)

#: features at most this many positions apart (in text order) co-occur: an edge of the graph
TEXTRANK_WINDOW = 4
#: PageRank iterations (fixed: no convergence test, so the result never depends on a tolerance)
TEXTRANK_ITERATIONS = 30
#: damping factor, in percent
TEXTRANK_DAMPING = 85
#: fixed-point scale of the scores (integer arithmetic: the same weights on every machine)
TEXTRANK_SCALE = 1 << 20
#: weights are 1 .. TEXTRANK_LEVELS
TEXTRANK_LEVELS = 8


def textrank_weights(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TextRank weights of a document's features: ``keys`` are its features in text order
    (uint64 ``(m,)``, or ``(m, 2)`` for 128-bit ``(hi, lo)``); returns the distinct features
    (sorted ascending, rows for 2-D keys) and their integer weights (int64, 1 ..
    ``TEXTRANK_LEVELS``).

    The graph: one node per distinct feature; two distinct features at most
    ``TEXTRANK_WINDOW`` positions apart co-occur, and each co-occurrence adds 1 to their
    (undirected) edge. PageRank in integer fixed point (``TEXTRANK_SCALE``): every node starts
    at ``S``; each of ``TEXTRANK_ITERATIONS`` rounds sets
    ``s'(v) = (100 - d) * S // 100 + (d * sum_u (w(u, v) * s(u) // W(u))) // 100``
    (``d = TEXTRANK_DAMPING``, ``W(u)`` the sum of ``u``'s edge weights; a node without edges
    keeps ``(100 - d) * S // 100``). The weight is ``1 + (LEVELS - 1) * s // max(s)``. Only
    integer operations: the weights are the same on every machine, in every order, and equal
    :func:`neardup.text.reference.textrank_weights_reference` (tested).
    """
    k = np.asarray(keys, np.uint64)
    m = k.shape[0]
    if m == 0:
        return k.copy(), np.zeros(0, np.int64)
    if k.ndim == 2:
        nodes, node = np.unique(k, axis=0, return_inverse=True)
    else:
        nodes, node = np.unique(k, return_inverse=True)
    node = np.asarray(node, np.int64).reshape(-1)
    n = nodes.shape[0]
    src_l, dst_l = [], []
    for gap in range(1, min(TEXTRANK_WINDOW, m - 1) + 1):
        a, b = node[:-gap], node[gap:]
        keep = a != b
        src_l += [a[keep], b[keep]]  # both directions of the undirected edge
        dst_l += [b[keep], a[keep]]
    src = np.concatenate(src_l) if src_l else np.zeros(0, np.int64)
    dst = np.concatenate(dst_l) if dst_l else np.zeros(0, np.int64)
    # co-occurrence counts per directed edge: sorted by (dst, src), run lengths
    code = np.sort(dst * n + src)
    edge, w = np.unique(code, return_counts=True)
    e_dst, e_src = edge // n, edge % n
    w = w.astype(np.int64)
    deg = np.zeros(n, np.int64)
    np.add.at(deg, e_src, w)
    base = (100 - TEXTRANK_DAMPING) * TEXTRANK_SCALE // 100
    s = np.full(n, TEXTRANK_SCALE, np.int64)
    starts = np.flatnonzero(np.r_[True, e_dst[1:] != e_dst[:-1]]) if edge.size else edge
    heads = e_dst[starts] if edge.size else edge
    for _ in range(TEXTRANK_ITERATIONS):
        new = np.full(n, base, np.int64)
        if edge.size:
            terms = (w * s[e_src]) // deg[e_src]
            new[heads] += (TEXTRANK_DAMPING * np.add.reduceat(terms, starts)) // 100
        s = new
    top = int(s.max())
    return nodes, 1 + ((TEXTRANK_LEVELS - 1) * s) // top
