"""``SpanTexts``: a corpus's texts, most of them kept as byte spans of the memory-mapped input.

A JSONL record whose text is plain ASCII without escapes (:mod:`neardup.io._jsonl_scan`) has
that text's exact bytes in the file. :func:`~neardup.io.read_corpus` then keeps only its span
``[start, end)`` in the file's read-only memory map instead of a Python ``str``: no per-record
string (3.6 GB of them for 1 M long documents, each a fresh page of memory on first touch), and
the pipeline's byte kernels read the spans straight from the map
(:meth:`SpanTexts.gather_ascii`). An ASCII text with simple JSON escapes (``\\n``, ``\\"``,
``\\u0041``, ...) stays a span too, of its escaped bytes, with its decoded length: it is
decoded where it is copied anyway (:meth:`SpanTexts.gather_ascii`, without the GIL) or turned
into a ``str``, never stored decoded. Every other text (non-ASCII, other escapes, other
formats) is stored as a ``str``.

It is a read-only :class:`~collections.abc.Sequence` of ``str`` that can grow: indexing
decodes a span into a new ``str`` on demand, so code that only needs ``texts[i]``, ``len``,
iteration or slices works unchanged. Fast paths ask for :meth:`lengths`, :meth:`ascii_mask`,
:meth:`take` and :meth:`gather_ascii`.

The input file must not be truncated while the texts are in use: a mapped page past the new
end of the file faults (``SIGBUS``) when read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from .._arrays import unique_sorted

__all__ = ["SpanTexts"]

I64 = npt.NDArray[np.int64]
_AT0 = np.zeros(1, np.int64)


class UniqueIds(list[str]):
    """The ids of a corpus read by :func:`neardup.io.read_corpus`: str, checked unique as they
    were read (a plain ``list`` otherwise). :func:`neardup.batch.run.dedup` takes such a list as
    it is instead of converting and checking every id again; a caller who changes it
    afterwards passes it as ``list(ids)``."""


class SpanTexts(Sequence[str]):
    """Texts as spans of read-only byte buffers (ASCII, JSON escapes allowed) or as ``str``.

    ``_buf[i]`` is the buffer index of text ``i`` (into ``_bufs``), or -1 when the text is a
    ``str`` in ``_str``; its span is ``_start[i]:_end[i]`` (for a ``str``: ``0:len``) and its
    length in characters ``_len[i]``: shorter than the span when the span is the body of a
    JSON string with escapes (:func:`~neardup.io._jsonl_scan.unescape_spans` decodes it)."""

    def __init__(self) -> None:
        self._bufs: list[np.ndarray] = []
        self._n = 0
        self._start = np.empty(1024, np.int64)
        self._end = np.empty(1024, np.int64)
        self._buf = np.empty(1024, np.int16)
        self._len = np.empty(1024, np.int64)
        self._str: dict[int, str] = {}

    # -- growing
    def _room(self, extra: int) -> None:
        need = self._n + extra
        if need <= self._start.size:
            return
        cap = max(need, 2 * self._start.size)
        for name in ("_start", "_end", "_buf", "_len"):
            old = getattr(self, name)
            new = np.empty(cap, old.dtype)
            new[: self._n] = old[: self._n]
            setattr(self, name, new)

    def add_buffer(self, buf: np.ndarray) -> int:
        """Register a read-only uint8 buffer (e.g. a file's memory map); returns its index."""
        if len(self._bufs) >= np.iinfo(np.int16).max:
            raise ValueError("too many buffers")
        self._bufs.append(buf)
        return len(self._bufs) - 1

    def append(self, text: str) -> None:
        """Add a text kept as a ``str``."""
        self._room(1)
        i = self._n
        self._start[i] = 0
        self._end[i] = self._len[i] = len(text)
        self._buf[i] = -1
        self._str[i] = text
        self._n = i + 1

    def extend_spans(
        self, buf_index: int, starts: I64, ends: I64, lengths: I64 | None = None
    ) -> None:
        """Add texts ``buf[starts[k]:ends[k]]`` of buffer ``buf_index``: ASCII bytes (the
        caller guarantees it), the texts' characters, or where ``lengths[k]`` is shorter than
        the span the body of a JSON string whose escapes decode to ``lengths[k]`` characters
        (those :func:`~neardup.io._jsonl_scan.scan_lines` accepts)."""
        m = int(starts.size)
        self._room(m)
        lo = self._n
        self._start[lo : lo + m] = starts
        self._end[lo : lo + m] = ends
        self._len[lo : lo + m] = ends - starts if lengths is None else lengths
        self._buf[lo : lo + m] = buf_index
        self._n = lo + m

    # -- Sequence
    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self._text(k) for k in range(*i.indices(self._n))]
        k = int(i)
        if k < 0:
            k += self._n
        if not 0 <= k < self._n:
            raise IndexError("text index out of range")
        return self._text(k)

    def _text(self, k: int) -> str:
        b = int(self._buf[k])
        if b < 0:
            return self._str[k]
        s, e, n = int(self._start[k]), int(self._end[k]), int(self._len[k])
        if n == e - s:
            return self._bufs[b][s:e].tobytes().decode("ascii")
        from ._jsonl_scan import unescape_spans

        out = np.empty(n, np.uint8)
        unescape_spans(self._bufs[b], self._start[k : k + 1], self._end[k : k + 1], out, _AT0)
        return out.tobytes().decode("ascii")

    def __iter__(self) -> Iterator[str]:
        for k in range(self._n):
            yield self._text(k)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (SpanTexts, list, tuple)):
            return len(other) == self._n and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SpanTexts({self._n} texts, {self._n - len(self._str)} as spans)"

    # -- fast paths
    def lengths(self, lo: int = 0, hi: int | None = None) -> I64:
        """Characters of texts ``lo:hi`` (int64)."""
        hi = self._n if hi is None else hi
        return self._len[lo:hi].copy()

    def ascii_mask(self, lo: int = 0, hi: int | None = None) -> npt.NDArray[np.bool_]:
        """Whether each of texts ``lo:hi`` is ASCII (spans always are)."""
        hi = self._n if hi is None else hi
        mask = self._buf[lo:hi] >= 0
        for k in np.flatnonzero(~mask).tolist():
            mask[k] = self._str[lo + k].isascii()
        return mask

    def take(self, idx: Sequence[int] | I64) -> SpanTexts:
        """The texts at positions ``idx``, in that order, as a new :class:`SpanTexts` sharing
        the buffers."""
        pos = np.asarray(idx, np.int64)
        out = SpanTexts()
        out._bufs = self._bufs
        m = int(pos.size)
        out._start = self._start[pos].copy() if m else np.empty(1, np.int64)
        out._end = self._end[pos].copy() if m else np.empty(1, np.int64)
        out._buf = self._buf[pos].copy() if m else np.empty(1, np.int16)
        out._len = self._len[pos].copy() if m else np.empty(1, np.int64)
        out._n = m
        strs = np.flatnonzero(out._buf[:m] < 0)
        out._str = {j: self._str[int(pos[j])] for j in strs.tolist()}
        return out

    def gather_ascii(
        self, idx: I64, out: np.ndarray | None = None
    ) -> tuple[np.ndarray, I64, np.ndarray] | None:
        """The ASCII texts at ``idx`` back to back as bytes, like
        :func:`~neardup._arrays.concat_ascii`: ``(data, lens, buffer)``. Spans are copied
        straight from their buffers (without the GIL), ``str`` texts encoded into their place;
        None when one of them is not ASCII."""
        from ._jsonl_scan import gather_spans, gather_spans_at, unescape_spans

        pos = np.asarray(idx, np.int64)
        b = self._buf[pos]
        s = self._start[pos]
        e = self._end[pos]
        lens = self._len[pos]
        total = int(lens.sum())
        if out is None or out.size < total:
            out = np.empty(max(total, 1), np.uint8)
        esc = lens != e - s  # spans of escaped JSON strings: decoded into place
        if b.size and b[0] >= 0 and (b == b[0]).all() and not esc.any():
            gather_spans(self._bufs[int(b[0])], s, e, out)  # the common case: one plain file
            return out[:total], lens, out
        at = np.cumsum(lens) - lens
        for bb in unique_sorted(b[b >= 0]).tolist():
            sel = b == bb
            plain = sel & ~esc
            gather_spans_at(self._bufs[bb], s[plain], e[plain], at[plain], out)
            sel &= esc
            if sel.any():
                unescape_spans(self._bufs[bb], s[sel], e[sel], out, at[sel])
        mv = out.data
        for q in np.flatnonzero(b < 0).tolist():
            try:
                data = self._str[int(pos[q])].encode("ascii")
            except UnicodeEncodeError:
                return None
            o = int(at[q])
            mv[o : o + len(data)] = data
        return out[:total], lens, out
