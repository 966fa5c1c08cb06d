"""ASCII normalisation for the exact-duplicate stage, in numba over one byte buffer.

:func:`lower_ascii_clean` lower-cases ASCII texts and tells which are already single-spaced
(their whitespace collapse is the identity); :func:`collapse_ascii_spaces` collapses the
whitespace of the others; :func:`normalized_ascii_digests` hashes the result as
:func:`neardup.fingerprint.content_hash_many` (``normalize=True``) hashes those texts, so the
batch pipeline's exact stage gets the same digests without a Python string per text.
"""

from __future__ import annotations

import numpy as np

from .._jit import kernel
from .._threads import kernel_threads, run_ranges

__all__ = [
    "collapse_ascii_spaces",
    "lower_ascii_clean",
    "lower_ascii_clean_serial",
    "normalized_ascii_digests",
]


@kernel(nogil=True)
def _lower_clean_kernel(
    lo: int,
    hi: int,
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    out: np.ndarray,
    clean: np.ndarray,
) -> None:  # pragma: no cover - numba
    for d in range(lo, hi):
        s = starts[d]
        e = ends[d]
        bad: int | np.int64 = 0
        prev: int | np.int64 = 0
        for i in range(s, e):
            y = buf[i]
            out[i] = y + 32 if 65 <= y <= 90 else y
            sp = np.int64(y == 32)
            bad |= np.int64(y < 32) | np.int64(y > 126) | (sp & prev)
            prev = sp
        clean[d] = bad == 0 and (e == s or (buf[s] != 32 and buf[e - 1] != 32))


def lower_ascii_clean(
    data: bytes, lens: np.ndarray, *, workers: int = 1, out: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Lower-case the ASCII texts ``data`` (concatenated; ``lens`` bytes each) in one pass and
    tell which are *clean*: printable only (bytes 32..126), no two spaces in a row, no space
    at either end -- the texts whose whitespace collapse (``" ".join(t.split())``) is the
    identity.

    Returns ``(lowered uint8 (len(data),), starts int64 (n,), clean bool (n,))``; text ``i``
    is ``lowered[starts[i]:starts[i] + lens[i]]`` and equals ``data[...].lower()``. ``out``
    (uint8, at least ``len(data)``) is written instead of a new array: reusing one buffer
    across calls spares the page faults of fresh memory, which cost more than the pass itself.
    """
    lens = np.asarray(lens, np.int64)
    ends = np.cumsum(lens)
    starts = ends - lens
    if out is None or out.size < len(data):
        out = np.empty(len(data), np.uint8)
    out = out[: len(data)]
    clean = np.empty(lens.size, np.bool_)
    with kernel_threads(workers):
        run_ranges(
            _lower_clean_kernel, lens.size, np.frombuffer(data, np.uint8), starts, ends, out,
            clean, min_items=64,
        )  # fmt: skip
    return out, starts, clean


@kernel(nogil=True)
def _lower_clean_serial_kernel(
    buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, out: np.ndarray, clean: np.ndarray
) -> None:  # pragma: no cover - numba
    # _lower_clean_kernel on one thread, without the GIL; per document over slices (indices
    # from 0: no wraparound checks) with uint8 arithmetic and no loop-carried "previous byte
    # was a space" (it reads b[i - 1]), so that both loops vectorise (the exact stage of
    # benchmarks/bench_dedup.py measures it)
    for d in range(starts.shape[0]):
        b = buf[starts[d] : ends[d]]
        o = out[starts[d] : ends[d]]
        m = b.shape[0]
        bad = np.uint8(0)
        for i in range(m):
            y = b[i]
            upper = np.uint8(np.uint8(y - np.uint8(65)) < np.uint8(26))  # A-Z
            o[i] = y + (upper << np.uint8(5))
            bad |= np.uint8(np.uint8(y - np.uint8(32)) > np.uint8(94))  # < 32 or > 126
        for i in range(1, m):
            bad |= np.uint8(b[i] == 32) & np.uint8(b[i - 1] == 32)
        clean[d] = bad == 0 and (m == 0 or (b[0] != 32 and b[m - 1] != 32))


def lower_ascii_clean_serial(
    data: bytes | np.ndarray, lens: np.ndarray, *, out: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`lower_ascii_clean` on the calling thread, releasing the GIL (for callers that
    run many chunks on their own threads); the same results (tested)."""
    lens = np.asarray(lens, np.int64)
    ends = np.cumsum(lens)
    starts = ends - lens
    buf = np.frombuffer(data, np.uint8) if not isinstance(data, np.ndarray) else data
    if out is None or out.size < buf.size:
        out = np.empty(buf.size, np.uint8)
    out = out[: buf.size]
    clean = np.empty(lens.size, np.bool_)
    _lower_clean_serial_kernel(buf, starts, ends, out, clean)
    return out, starts, clean


def _ascii_space_table() -> np.ndarray:
    """byte -> 1 for the ASCII characters ``str.split()`` splits on (space, ``\\t \\n \\v \\f
    \\r`` and ``\\x1c``-``\\x1f``; ``bytes.split`` leaves out the last four)."""
    lut = np.zeros(256, np.uint8)
    for c in b" \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f":
        lut[c] = 1
    return lut


_ASCII_SPACE = _ascii_space_table()


@kernel(nogil=True)
def _collapse_kernel(
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    space: np.ndarray,
    out: np.ndarray,
    out_end: np.ndarray,
) -> None:  # pragma: no cover - numba
    # each document's words joined by single spaces, back to back in out
    o = 0
    for d in range(starts.shape[0]):
        pending = False
        for i in range(starts[d], ends[d]):
            y = buf[i]
            if space[y]:
                pending = o > 0 and (d == 0 or o > out_end[d - 1])
                continue
            if pending:
                out[o] = 32
                o += 1
                pending = False
            out[o] = y
            o += 1
        out_end[d] = o


def collapse_ascii_spaces(
    buf: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``" ".join(text.split())`` of ASCII texts ``buf[starts[d]:ends[d]]``, in numba without
    the GIL: ``(bytes uint8, ends int64)``, document ``d`` being ``out[ends[d-1]:ends[d]]``.

    The whitespace normalisation of :func:`neardup.fingerprint.content_hash_many` for ASCII
    text that is not already single-spaced (tested against it)."""
    s = np.asarray(starts, np.int64)
    e = np.asarray(ends, np.int64)
    out = np.empty(max(int((e - s).sum()), 1), np.uint8)
    out_end = np.empty(s.size, np.int64)
    _collapse_kernel(buf, s, e, _ASCII_SPACE, out, out_end)
    return out, out_end


def normalized_ascii_digests(lowered: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> bytes:
    """xxh3-128 digests (16 bytes each, concatenated) of the lower-cased ASCII texts
    ``lowered[starts[d]:ends[d]]`` with their whitespace collapsed: what
    :func:`~neardup.fingerprint.content_hash_many` (``normalize=True``) hashes for them."""
    import xxhash

    out, out_end = collapse_ascii_spaces(lowered, starts, ends)
    mv = out.data
    digest = xxhash.xxh3_128_digest
    bounds = [0, *out_end.tolist()]
    return b"".join(digest(mv[bounds[k] : bounds[k + 1]]) for k in range(len(bounds) - 1))
