"""Small array helpers shared by the pipeline, the index and the store.

``read_only``: the one way kernels' inputs are made read-only. numba compiles a kernel once per
signature, and a read-only array is another type than a writable one: a segment's arrays are
read-only maps, so every array a kernel of the same family sees goes through it (one
signature, one compile, whoever made the array).

``unique_sorted``: numpy 2.3+ answers ``np.unique(a)`` (no ``return_*`` options) with a hash
table, and ``np.union1d`` goes through it. On this project's arrays (millions of int64
positions or uint64 prefixes) that path is many times slower than sort + neighbour compare
(``python benchmarks/bench_unique.py`` measures both). Same result, always sorted.

``find_sorted``: where each value is (or would go) in a sorted array, clipped to an index that
can be read, and whether it is there: the one spelling of the searchsorted + clip + equality
look-up the pipeline and the index do against sorted keys (an empty array answers "nowhere"
instead of an ``IndexError``).
``in_sorted``: ``np.isin(a, s)`` where ``s`` is already sorted, by binary search (its ``hit``);
``merge_disjoint``: two sorted arrays with no value in common, merged by inserting one into the
other (what ``np.concatenate`` and a stable ``argsort`` give).
``np.isin`` and ``np.setdiff1d`` sort (or hash, for ``np.unique``) both sides again; on a
batch run's candidate codes, tens of millions of int64 pairs, that was a third of a run over a
corpus with a large cluster of near copies.

``unique_inverse`` / ``sorted_pairs``: ``np.unique(a, return_inverse=True)`` and
``np.lexsort`` go through a stable argsort; where the values and their positions (or the two
halves of a pair) fit in 64 bits, one plain sort of the packed words gives the same answer
in a third to a half of the time for the former and a twenty-fifth for the latter on a
check's band keys and candidate pairs (``python benchmarks/bench_unique.py``).

``advise``: ``madvise`` over the tail of a file mapping (a segment's probed sections, a JSONL
file read in order), where the platform has it.
"""

from __future__ import annotations

import contextlib
import mmap
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "advise",
    "concat_ascii",
    "find_sorted",
    "in_sorted",
    "merge_disjoint",
    "read_only",
    "same_objects",
    "sort_long_runs",
    "sorted_pairs",
    "span",
    "unique_inverse",
    "unique_sorted",
]


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


#: below this many values :func:`span` reads them as Python ints: NumPy's two reductions
#: cost a single-document write more than the values themselves
_SMALL_SPAN = 64


def span(a: npt.NDArray[np.integer[Any]]) -> tuple[int, int]:
    """``(min, max)`` of a non-empty integer array, as Python ints.

    >>> span(np.array([5, 2, 9]))
    (2, 9)
    """
    if a.size <= _SMALL_SPAN:
        v = a.ravel().tolist()
        return min(v), max(v)
    return int(a.min()), int(a.max())


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


def sort_long_runs(
    keys: npt.NDArray[Any], longer_than: int, *vals: npt.NDArray[Any], by: npt.NDArray[Any]
) -> None:
    """In place: within every run of more than ``longer_than`` equal ``keys`` (sorted), order
    ``by`` (int64) and ``vals`` (arrays of the same length) by ``by`` ascending, equal ``by``
    keeping their order (a stable sort); shorter runs are left as they are. One stable sort over the
    long runs' entries, in NumPy: where a kernel sorts its short runs itself, a sort inside it
    would compile numba's own (about a second of a first run, ``benchmarks/bench_compile.py``).

    >>> k = np.array([1, 2, 2, 2, 3]); r = np.array([9, 7, 5, 6, 0])
    >>> sort_long_runs(k, 2, by=r); r.tolist()
    [9, 5, 6, 7, 0]
    """
    n = keys.size
    if n <= longer_than:
        return
    edge = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    starts = np.concatenate(([0], edge))
    counts = np.diff(np.concatenate((starts, [n])))
    big = counts > longer_than
    if not big.any():
        return
    starts, counts = starts[big], counts[big]
    ends = np.cumsum(counts)
    at = np.repeat(starts - ends + counts, counts) + np.arange(int(ends[-1]), dtype=np.int64)
    b = by[at]
    lo, hi = span(b)
    width = hi - lo + 1
    if counts.size * width >= 1 << 62:  # (no room for one int64 key: the run, then ``by``)
        order = at[np.lexsort((b, keys[at]))]  # (stable)
        for a in (by, *vals):
            a[at] = a[order]
        return
    # one int64 key per entry: its run, then ``by`` (the runs lie in order already)
    key = np.repeat(np.arange(counts.size, dtype=np.int64) * width, counts) + (b - lo)
    if not vals:  # entries of equal ``by`` are alike: any sort of the keys will do
        key.sort()
        by[at] = key % width + lo
        return
    order = at[np.argsort(key, kind="stable")]
    for a in (by, *vals):
        a[at] = a[order]


def find_sorted(
    sorted_arr: npt.ArrayLike, values: npt.ArrayLike
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.bool_]]:
    """``(pos, hit)`` for each of ``values`` in ``sorted_arr`` (sorted ascending; flattened):
    ``pos`` is ``np.searchsorted(sorted_arr, values)`` (side ``"left"``: the first equal entry)
    clipped to the last index, so ``sorted_arr[pos]`` and any array parallel to it can be read
    for every value, and ``hit`` is ``sorted_arr[pos] == values``. Callers index with ``pos``
    only where ``hit`` holds; a value past the end gets the last index, not a valid position.
    An empty ``sorted_arr`` gives ``pos`` all 0 and ``hit`` all False (nothing is indexed).
    Both have ``values``' shape.

    >>> pos, hit = find_sorted([1, 3, 5], [5, 0, 4, 9, 3])
    >>> pos.tolist(), hit.tolist()
    ([2, 0, 2, 2, 1], [True, False, False, False, True])
    """
    s = np.asarray(sorted_arr).reshape(-1)
    v = np.asarray(values)
    if s.size == 0:
        return np.zeros(v.shape, np.intp), np.zeros(v.shape, bool)
    pos = np.asarray(np.searchsorted(s, v))
    np.minimum(pos, s.size - 1, out=pos)
    return pos, np.asarray(s[pos] == v, dtype=bool)


def in_sorted(a: npt.ArrayLike, s: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Whether each value of ``a`` is in ``s``, which must be sorted ascending (and is
    usually unique): ``np.isin(a, s)`` without sorting ``s`` again (:func:`find_sorted`'s
    ``hit``).

    >>> in_sorted([5, 1, 7, 3], [1, 3, 5]).tolist()
    [True, True, False, True]
    """
    return find_sorted(s, a)[1]


def merge_disjoint(
    a: npt.NDArray[Any], b: npt.NDArray[Any]
) -> tuple[npt.NDArray[Any], npt.NDArray[np.bool_]]:
    """The values of ``a`` and ``b``, both sorted ascending with no value in both, sorted; and
    whether each came from ``b``.

    >>> m, from_b = merge_disjoint(np.array([1, 4, 9]), np.array([2, 3, 10]))
    >>> m.tolist(), from_b.tolist()
    ([1, 2, 3, 4, 9, 10], [False, True, True, False, False, True])
    """
    at = np.searchsorted(a, b)
    return np.insert(a, at, b), np.insert(np.zeros(a.size, bool), at, True)


def unique_inverse(a: npt.ArrayLike) -> tuple[np.ndarray, npt.NDArray[np.intp]]:
    """``np.unique(a, return_inverse=True)`` of a flattened integer array, by one sort: each
    value shifted up with its position in the low bits, where both fit in 64 bits (non-negative
    values), so the sort carries the positions and no argsort is needed: a third to a half of
    numpy's time on the MinHash band keys of a check, about the same on unordered values
    (``benchmarks/bench_unique.py``). Other arrays go to ``np.unique``.

    >>> u, inv = unique_inverse([30, 10, 30, 20])
    >>> u.tolist(), inv.tolist()
    ([10, 20, 30], [2, 0, 2, 1])
    """
    arr = np.asarray(a).reshape(-1)
    n = arr.size
    if n < 2 or arr.dtype.kind not in "ui":
        u, inv = np.unique(arr, return_inverse=True)
        return u, inv.reshape(-1).astype(np.intp, copy=False)
    lo, hi = int(arr.min()), int(arr.max())
    ibits = (n - 1).bit_length()
    if lo < 0 or hi.bit_length() + ibits > 64:
        u, inv = np.unique(arr, return_inverse=True)
        return u, inv.reshape(-1).astype(np.intp, copy=False)
    shift = np.uint64(ibits)
    comb = arr.astype(np.uint64)
    comb <<= shift
    comb |= np.arange(n, dtype=np.uint64)
    comb.sort()
    keys = comb >> shift
    new = np.empty(n, np.bool_)
    new[0] = True
    np.not_equal(keys[1:], keys[:-1], out=new[1:])
    inv = np.empty(n, np.intp)
    comb &= np.uint64((1 << ibits) - 1)
    inv[comb.astype(np.intp)] = np.cumsum(new) - 1
    return keys[new].astype(arr.dtype), inv


def sorted_pairs(
    major: npt.NDArray[np.int64], minor: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The pairs ``(major[i], minor[i])`` in ascending order (by ``major``, then ``minor``), as
    ``np.lexsort((minor, major))`` orders them: by one sort of ``major << b | minor`` where
    both are non-negative and fit in 64 bits together (a lexsort is a stable argsort per key;
    ``benchmarks/bench_unique.py`` times both), else by the lexsort.

    >>> a, b = sorted_pairs(np.array([2, 1, 2]), np.array([5, 9, 0]))
    >>> a.tolist(), b.tolist()
    ([1, 2, 2], [9, 0, 5])
    """
    major = np.asarray(major, np.int64).reshape(-1)
    minor = np.asarray(minor, np.int64).reshape(-1)
    if major.size != minor.size:
        raise ValueError(f"{major.size} major values for {minor.size} minor ones")
    if major.size < 2:
        return major.copy(), minor.copy()
    lo = min(int(major.min()), int(minor.min()))
    bbits = int(minor.max()).bit_length()
    if lo < 0 or int(major.max()).bit_length() + bbits > 63:
        order = np.lexsort((minor, major))
        return major[order], minor[order]
    comb = major << np.int64(bbits)
    comb |= minor
    comb.sort()
    return comb >> np.int64(bbits), comb & np.int64((1 << bbits) - 1)


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


def advise(mm: mmap.mmap, advice: str, start: int = 0) -> None:
    """``madvise`` the file mapping ``mm`` from ``start`` (rounded down to a page) to its end;
    ``advice`` names ``mmap.MADV_*`` in lower case (``"random"``, ``"normal"``,
    ``"sequential"``, ``"dontneed"``). A platform without ``madvise`` or that advice, or a
    closed mapping, is left as it is: advice changes what the kernel reads ahead or keeps
    mapped, never what a read returns (``"dontneed"`` on a read-only file mapping unmaps its
    pages, which stay in the page cache: the next read maps them again)."""
    flag = getattr(mmap, f"MADV_{advice.upper()}", None)
    if flag is None:
        return
    with contextlib.suppress(OSError, ValueError):
        at = start - start % mmap.PAGESIZE
        if at < len(mm):
            mm.madvise(flag, at, len(mm) - at)
