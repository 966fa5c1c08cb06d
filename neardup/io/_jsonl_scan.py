"""A numba pre-scan of JSONL lines: the records simple enough to read without building them.

:func:`scan_lines` walks the lines of a byte range and, for every line that is a *flat* JSON
object of ASCII strings without escapes, plain numbers and literals, reports where the text
field's value lies in the buffer and what the id field holds. Such a line is ``FAST``: its text
is exactly those bytes (ASCII, no escapes: the JSON string's characters are its bytes), so the
reader keeps a span instead of a Python string. Every other line is ``SLOW`` and goes to the
existing per-line path (orjson, then the standard library for anything unusual), which decides
it exactly as before.

The grammar accepted here is a strict subset of JSON (RFC 8259) on which orjson and the
standard library agree:

* ``ws { ws "key" ws : ws value ( ws , ws "key" ws : ws value )* ws } ws`` with ``ws`` any of
  space, tab, carriage return (the line has no newline);
* strings: bytes 0x20-0x7E except ``"`` and ``\\``, and in values (not keys, not a string id)
  the escapes ``\\" \\\\ \\/ \\b \\f \\n \\r \\t`` and ``\\u0000``-``\\u007F`` (ASCII);
  nothing non-ASCII;
* values: such a string, ``true``, ``false``, ``null``, or a number ``-?(0|[1-9][0-9]*)``
  with an optional ``.[0-9]+`` fraction (no exponent; at most 18 integer digits);
* the text field present exactly once with a string value; the id field (``"id"`` unless the
  reader names one) at most once, a non-empty string or an integer.

Anything else (nesting, other escapes, escapes in keys or in a string id, non-ASCII,
exponents, blank or malformed lines, duplicate text or id keys, an empty object, a non-string
text) makes the line ``SLOW``; never an error here. Tested against orjson and the reference
reader with Hypothesis (``tests/io/test_io_scan.py``).
"""

from __future__ import annotations

import numpy as np

from .._jit import compiled_or_cached, kernel

__all__ = [
    "FAST",
    "ID_ABSENT",
    "ID_INT",
    "ID_STR",
    "SLOW",
    "gather_spans",
    "gather_spans_at",
    "scan_lines",
    "unescape_spans",
]

SLOW, FAST = 0, 1
#: the id field of a FAST line: absent, a non-empty string, an integer
ID_ABSENT, ID_STR, ID_INT = 0, 1, 2


@kernel(forceinline=True)
def _ws(buf: np.ndarray, i: int, e: int) -> int:  # pragma: no cover - numba
    while i < e and (buf[i] == 32 or buf[i] == 9 or buf[i] == 13):
        i += 1
    return i


def _string_table() -> np.ndarray:
    """byte -> 0 for a plain string byte (0x20-0x7E but ``"`` and ``\\``), 1 for ``"``, 2 for
    anything a FAST line may not have in a string (escapes, control bytes, non-ASCII)."""
    t = np.full(256, 2, np.uint8)
    t[32:127] = 0
    t[34] = 1
    t[92] = 2
    return t


_STRING = _string_table()


_L = np.uint64(0x0101010101010101)
_H = np.uint64(0x8080808080808080)


@kernel(forceinline=True)
def _plain_word(w: np.uint64) -> bool:  # pragma: no cover - numba
    # whether none of the 8 bytes of w is special (see _string_table), by the usual SWAR
    # tests, each exact for "some byte is": >= 0x80, < 0x20, == 0x22, == 0x5C, == 0x7F
    hz = np.uint64(0)
    for c in (np.uint64(0x22), np.uint64(0x5C), np.uint64(0x7F)):
        v = w ^ (c * _L)
        hz |= (v - _L) & ~v
    low = (w - np.uint64(0x20) * _L) & ~w
    return ((w | hz | low) & _H) == 0


@kernel(forceinline=True)
def _hex(c: int) -> int:  # pragma: no cover - numba
    if c >= 48 and c <= 57:
        return c - 48
    if c >= 97 and c <= 102:
        return c - 87
    if c >= 65 and c <= 70:
        return c - 55
    return -1


@kernel(forceinline=True)
def _escape_len(buf: np.ndarray, i: int, e: int) -> int:  # pragma: no cover - numba
    # buf[i] is a backslash: the length of the escape there when a FAST line may have it (2
    # for \" \\ \/ \b \f \n \r \t, 6 for \u0000-\u007F), else 0
    if i + 1 >= e:
        return 0
    c = buf[i + 1]
    if c == 34 or c == 92 or c == 47 or c == 98 or c == 102 or c == 110 or c == 114 or c == 116:
        return 2
    if (
        c == 117
        and i + 6 <= e
        and buf[i + 2] == 48
        and buf[i + 3] == 48
        and buf[i + 4] >= 48
        and buf[i + 4] <= 55
        and _hex(buf[i + 5]) >= 0
    ):
        return 6
    return 0


@kernel(forceinline=True)
def _string_end(
    buf: np.ndarray, i: int, e: int, cls: np.ndarray, w64: np.ndarray, escapes: bool
) -> tuple[int, int]:  # pragma: no cover - numba
    # i is just after the opening quote; returns (the closing quote's position, or -1 - where
    # the scan stopped when the string is not one a FAST line may have; the bytes its escapes
    # save once decoded). escapes: whether the escapes of _escape_len are allowed. w64: buf as
    # aligned little-endian words (empty: byte by byte only); whole words without a special
    # byte are skipped at once.
    words = w64.shape[0] > 0
    saved = 0
    while i < e:
        if words and (i & 7) == 0 and i + 8 <= e and _plain_word(w64[i >> 3]):
            i += 8
            continue
        c = cls[buf[i]]
        if c == 0:
            i += 1
            continue
        if c == 1:
            return i, saved
        if escapes and buf[i] == 92:
            n = _escape_len(buf, i, e)
            if n:
                saved += n - 1
                i += n
                continue
        return -1 - i, 0
    return -1 - i, 0


_BS = np.uint64(0x5C5C5C5C5C5C5C5C)


@kernel(forceinline=True)
def _backslash(buf: np.ndarray, w64: np.ndarray, j: int, e: int) -> int:  # pragma: no cover
    # the first backslash in buf[j:e], or e; whole aligned words without one are skipped
    words = w64.shape[0] > 0
    while j < e:
        if words and (j & 7) == 0 and j + 8 <= e:
            v = w64[j >> 3] ^ _BS
            if ((v - _L) & ~v & _H) == 0:
                j += 8
                continue
        if buf[j] == 92:
            return j
        j += 1
    return e


@kernel(nogil=True)
def _unescape_kernel(
    buf: np.ndarray,
    w64: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    out: np.ndarray,
    at: np.ndarray,
) -> None:  # pragma: no cover - numba
    for k in range(starts.shape[0]):
        i = starts[k]
        e = ends[k]
        o = at[k]
        while i < e:
            j = _backslash(buf, w64, i, e)
            for q in range(i, j):  # a loop, not a slice assignment: a fraction of its compile
                out[o] = buf[q]
                o += 1
            if j >= e:
                break
            c = buf[j + 1]
            if c == 117:
                out[o] = _hex(buf[j + 4]) * 16 + _hex(buf[j + 5])
                i = j + 6
            else:
                if c == 110:
                    c = 10
                elif c == 116:
                    c = 9
                elif c == 114:
                    c = 13
                elif c == 98:
                    c = 8
                elif c == 102:
                    c = 12
                out[o] = c  # otherwise the escaped byte itself: " \\ /
                i = j + 2
            o += 1


def unescape_spans(
    buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, out: np.ndarray, at: np.ndarray
) -> None:
    """Decode the JSON string bodies ``buf[starts[k]:ends[k]]`` of FAST lines (only the
    escapes :func:`scan_lines` accepts; a body without any is copied as it is) into
    ``out[at[k]:]``, for every k. Runs without a backslash are found a word at a time and
    copied whole. Releases the GIL."""
    _unescape_kernel(
        buf,
        _words(buf),
        np.ascontiguousarray(starts, np.int64),
        np.ascontiguousarray(ends, np.int64),
        out,
        np.ascontiguousarray(at, np.int64),
    )


@kernel(forceinline=True)
def _same(buf: np.ndarray, s: int, e: int, key: np.ndarray) -> bool:  # pragma: no cover
    if e - s != key.shape[0]:
        return False
    for q in range(key.shape[0]):  # noqa: SIM110 - numba: no generators
        if buf[s + q] != key[q]:
            return False
    return True


@kernel(forceinline=True)
def _literal(buf: np.ndarray, i: int, e: int, c: int) -> int:  # pragma: no cover - numba
    # null / true / false starting at i (its first byte is c); the end, or -1
    if c == 110 and i + 4 <= e and buf[i + 1] == 117 and buf[i + 2] == 108 and buf[i + 3] == 108:
        return i + 4
    if c == 116 and i + 4 <= e and buf[i + 1] == 114 and buf[i + 2] == 117 and buf[i + 3] == 101:
        return i + 4
    if (
        c == 102
        and i + 5 <= e
        and buf[i + 1] == 97
        and buf[i + 2] == 108
        and buf[i + 3] == 115
        and buf[i + 4] == 101
    ):
        return i + 5
    return -1


@kernel
def _scan_line(
    buf: np.ndarray,
    a: int,
    hi: int,
    tkey: np.ndarray,
    ikey: np.ndarray,
    out: np.ndarray,
    cls: np.ndarray,
    w64: np.ndarray,
) -> int:  # pragma: no cover - numba
    # Parse the line starting at a (it ends at the next newline, or hi). FAST: returns the
    # position of its end (the newline or hi) with out[0:6] = text start, text end, id kind,
    # id start, id end, the text's length once its escapes are decoded. Otherwise -1 - p, p a
    # position of the line where parsing stopped (the caller finds the newline from there). A
    # newline byte is never whitespace or string content here, so parsing cannot run past the
    # line.
    e = hi
    i = _ws(buf, a, e)
    if i >= e or buf[i] != 123:  # {
        return -1 - i
    i = _ws(buf, i + 1, e)
    have_text = False
    have_id = False
    out[2] = 0
    while True:
        if i >= e or buf[i] != 34:  # a key (an empty object is left to the slow path too)
            return -1 - i
        ks = i + 1
        ke, _ = _string_end(buf, ks, e, cls, w64, False)  # keys: no escapes
        if ke < 0:
            return ke
        i = _ws(buf, ke + 1, e)
        if i >= e or buf[i] != 58:  # :
            return -1 - i
        i = _ws(buf, i + 1, e)
        if i >= e:
            return -1 - i
        is_text = _same(buf, ks, ke, tkey)
        is_id = not is_text and _same(buf, ks, ke, ikey)
        c = buf[i]
        kind = 0  # 1 string, 2 integer, 3 other number, 4 null, 5 true/false
        vs = i
        ve = i
        saved = 0
        if c == 34:
            vs = i + 1
            # a string id is taken from its bytes: no escapes
            ve, saved = _string_end(buf, vs, e, cls, w64, not is_id)
            if ve < 0:
                return ve
            i = ve + 1
            kind = 1
        elif c == 45 or (c >= 48 and c <= 57):
            j = i + 1 if c == 45 else i
            if j >= e or buf[j] < 48 or buf[j] > 57:
                return -1 - j
            d0 = j
            if buf[j] == 48:
                j += 1
            else:
                while j < e and buf[j] >= 48 and buf[j] <= 57:
                    j += 1
            if j - d0 > 18:
                return -1 - j
            kind = 2
            if j < e and buf[j] == 46:  # .
                j += 1
                f0 = j
                while j < e and buf[j] >= 48 and buf[j] <= 57:
                    j += 1
                if j == f0:
                    return -1 - j
                kind = 3
            if j < e and (buf[j] == 101 or buf[j] == 69):  # exponents: slow path
                return -1 - j
            ve = j
            i = j
        elif c == 110 or c == 116 or c == 102:
            j = _literal(buf, i, e, c)
            if j < 0:
                return -1 - i
            ve = j
            i = j
            kind = 4 if c == 110 else 5
        else:
            return -1 - i
        if is_text:
            if have_text or kind != 1:
                return -1 - i
            have_text = True
            out[0] = vs
            out[1] = ve
            out[5] = ve - vs - saved
        elif is_id:
            if have_id:
                return -1 - i
            have_id = True
            if kind == 1:
                if ve == vs:
                    return -1 - i
                out[2] = 1
            elif kind == 2:
                out[2] = 2
            else:  # a null id (refused by the general path), a float, a literal
                return -1 - i
            out[3] = vs
            out[4] = ve
        i = _ws(buf, i, e)
        if i >= e:
            return -1 - i
        if buf[i] == 44:  # ,
            i = _ws(buf, i + 1, e)
            continue
        if buf[i] != 125:  # }
            return -1 - i
        i = _ws(buf, i + 1, e)
        if not have_text or (i < e and buf[i] != 10):
            return -1 - i
        return i


@kernel(nogil=True)
def _scan_kernel(
    buf: np.ndarray,
    lo: int,
    hi: int,
    tkey: np.ndarray,
    ikey: np.ndarray,
    cls: np.ndarray,
    w64: np.ndarray,
    line_s: np.ndarray,
    line_e: np.ndarray,
    status: np.ndarray,
    fields: np.ndarray,
) -> tuple[int, int]:  # pragma: no cover - numba
    # lines from lo until hi or until the output arrays are full: (lines written, next start)
    n = 0
    a = lo
    cap = line_s.shape[0]
    out = np.zeros(6, np.int64)
    while a < hi and n < cap:
        r = _scan_line(buf, a, hi, tkey, ikey, out, cls, w64)
        line_s[n] = a
        if r >= 0:
            e = r
            status[n] = 1
            for q in range(6):
                fields[n, q] = out[q]
        else:
            e = max(-1 - r, a)
            while e < hi and buf[e] != 10:
                e += 1
            status[n] = 0
        line_e[n] = e
        n += 1
        a = e + 1
    return n, a


def _words(buf: np.ndarray) -> np.ndarray:
    """``buf`` as little-endian uint64 words (a view) when it is contiguous and 8-byte aligned,
    else an empty array (the kernel then goes byte by byte)."""
    if buf.flags.c_contiguous and buf.ctypes.data % 8 == 0 and np.little_endian and buf.size >= 8:
        return buf[: buf.size - buf.size % 8].view(np.uint64)
    return np.zeros(0, np.uint64)


def scanner_ready() -> bool:
    """Whether :func:`scan_lines` runs without compiling first (it ran in this process, or
    its kernel is cached): see ``neardup.io.jsonl.SCAN_COMPILE_BYTES``."""
    return compiled_or_cached(_scan_kernel)


def scan_lines(
    buf: np.ndarray, lo: int, hi: int, text_key: bytes, id_key: bytes
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The lines of ``buf[lo:hi]`` (split on ``\n``; the last one may lack it).

    Returns ``(line_start, line_end, status, fields)``: each line's span (newline excluded),
    ``FAST`` / ``SLOW``, and for FAST lines ``fields[:, 0:2]`` the text value's span (the JSON
    string's body: :func:`unescape_spans` decodes it), ``fields[:, 2:5]`` the id kind
    (``ID_ABSENT`` / ``ID_STR`` / ``ID_INT``) and its span, ``fields[:, 5]`` the text's length
    once decoded (the span's length when it has no escapes).
    ``text_key`` / ``id_key`` are the field names, ASCII bytes. Releases the GIL.
    """
    tk = np.frombuffer(text_key, np.uint8)
    ik = np.frombuffer(id_key, np.uint8)
    w64 = _words(buf)
    parts = []
    a = lo
    cap = 4096
    while True:
        line_s = np.empty(cap, np.int64)
        line_e = np.empty(cap, np.int64)
        status = np.empty(cap, np.uint8)
        fields = np.empty((cap, 6), np.int64)
        m, a = _scan_kernel(buf, a, hi, tk, ik, _STRING, w64, line_s, line_e, status, fields)
        parts.append((line_s[:m], line_e[:m], status[:m], fields[:m]))
        if a >= hi:
            break
        cap = min(4 * cap, 1 << 20)
    if len(parts) == 1:
        return parts[0]
    line_s, line_e, status, fields = (np.concatenate(col) for col in zip(*parts, strict=True))
    return line_s, line_e, status, fields


@kernel(nogil=True)
def gather_spans(
    buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, out: np.ndarray
) -> int:  # pragma: no cover - numba
    """Copy ``buf[starts[k]:ends[k]]`` for every k, back to back, into ``out``; returns the
    bytes written (the caller sizes ``out``)."""
    o = 0
    for k in range(starts.shape[0]):
        s = starts[k]
        for q in range(s, ends[k]):  # a loop: a slice assignment compiles its error path
            out[o] = buf[q]
            o += 1
    return o


@kernel(nogil=True)
def gather_spans_at(
    buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, at: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover - numba
    """Copy ``buf[starts[k]:ends[k]]`` to ``out[at[k]:]`` for every k."""
    for k in range(starts.shape[0]):
        s = starts[k]
        o = at[k]
        for q in range(s, ends[k]):  # a loop: a slice assignment compiles its error path
            out[o] = buf[q]
            o += 1
