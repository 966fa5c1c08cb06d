"""Small array helpers shared by the pipeline, the index and the store.

``read_only``: the one way kernels' inputs are made read-only. numba compiles a kernel once per
signature, and a read-only array is another type than a writable one: a segment's arrays are
read-only maps, so every array a kernel of the same family sees goes through it (one
signature, one compile, whoever made the array).

``unique_sorted``: numpy 2.3+ answers ``np.unique(a)`` (no ``return_*`` options) with a hash
table, and ``np.union1d`` goes through it. On this project's arrays (millions of int64
positions or uint64 prefixes) that path is many times slower than sort + neighbour compare
(``python benchmarks/bench_unique.py`` measures both). Same result, always sorted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["concat_ascii", "read_only", "same_objects", "unique_sorted"]


def read_only(a: npt.NDArray[Any], dtype: Any = None) -> npt.NDArray[Any]:
    """``a`` as a C-contiguous read-only array (of ``dtype``, when given; a view where it
    already is one).

    >>> read_only(np.arange(3)).flags.writeable
    False
    """
    out = np.ascontiguousarray(a, dtype).view()
    out.flags.writeable = False
    return out


def same_objects(a: Sequence[object], b: Sequence[object]) -> bool:
    """Whether ``a`` and ``b`` hold the same objects (by identity) in the same order: a cache
    made over a list of segments or sections is still good (``==`` could compare their
    arrays, and equal contents would not mean the same mapped files).

    >>> x, y = [1], [1]
    >>> same_objects([x, y], [x, y]), same_objects([x], [y])
    (True, False)
    """
    return len(a) == len(b) and all(p is q for p, q in zip(a, b, strict=True))


def unique_sorted(a: npt.ArrayLike) -> np.ndarray:
    """The distinct values of ``a`` (flattened), ascending: ``np.unique(a)`` by sorting.

    For integer (NaN-free) arrays, which is all this project passes; ``np.unique`` also folds
    NaNs together, this does not.

    >>> unique_sorted([3, 1, 3, 2]).tolist()
    [1, 2, 3]
    """
    s = np.sort(np.asarray(a).reshape(-1))
    if s.size < 2:
        return s
    keep = np.empty(s.size, bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


#: mean text length (characters) from which :func:`concat_ascii` copies text by text into the
#: reused buffer instead of ``"".join(...).encode()``
CONCAT_PER_TEXT_MIN_CHARS = 512


def concat_ascii(
    texts: list[str], out: np.ndarray | None = None
) -> tuple[np.ndarray, npt.NDArray[np.int64], np.ndarray]:
    """ASCII ``texts`` concatenated as bytes: ``(data uint8 (total,), lens int64 (n,), buffer)``.

    ``data`` is a view of ``buffer`` (``out`` when it is large enough, else a new array the
    caller can pass back next time), or, for short texts, a read-only array of its own.

    ``"".join(texts).encode("ascii")`` builds a fresh string and a fresh bytes object per call;
    for multi-megabyte chunks both are fresh memory, a page fault per 4 KiB, where text-by-text
    copies into a reused buffer touch memory already mapped (``benchmarks/bench_fingerprint.py``
    measures the tokenizer path that uses it). Short texts (mean below
    ``CONCAT_PER_TEXT_MIN_CHARS``) still go through one join, whose per-text cost is
    lower. Raises ``UnicodeEncodeError`` for a non-ASCII text, as ``encode("ascii")`` does.
    """
    lens = np.fromiter(map(len, texts), np.int64, len(texts))
    total = int(lens.sum())
    if total < CONCAT_PER_TEXT_MIN_CHARS * len(texts) or not texts:
        data = np.frombuffer("".join(texts).encode("ascii"), np.uint8)
        return data, lens, (out if out is not None else np.empty(0, np.uint8))
    if out is None or out.size < total:
        out = np.empty(total, np.uint8)
    mv = out.data
    o = 0
    for t, m in zip(texts, lens.tolist(), strict=True):
        mv[o : o + m] = t.encode("ascii")
        o += m
    return out[:total], lens, out
