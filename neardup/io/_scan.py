"""numba JSONL block scanner: validate each line and locate its text and id values.

:func:`scan_block` walks a block of ``\\n``-separated lines once. For every line it decides
whether the line is *simple* — one JSON object, valid by the JSON grammar (RFC 8259: no
``NaN``/``Infinity``, nesting ≤ ``MAX_DEPTH``), strings valid UTF-8 without raw control
characters, the text field's (last) value a string, the id field's value a non-empty string,
an integer, ``null`` or absent, no escaped key — and for a simple line where the two values
lie. Everything else is ``SLOW``: the caller hands it to orjson / the standard library, which
decide exactly as the reference reader does. A simple line is by construction accepted by
:func:`json.loads` with the same text and id, so the scanner only ever *saves* work; the
Hypothesis tests in ``tests/test_io.py`` compare every line kind against the reference.

String values with escapes are unescaped into ``out`` (UTF-8; surrogate pairs combined; a lone
surrogate makes the line ``SLOW``, since it cannot be UTF-8).
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

__all__ = ["ID_INT", "ID_NONE", "ID_STR", "MAX_DEPTH", "SIMPLE", "SLOW", "scan_block"]

SIMPLE, SLOW = 0, 1
ID_NONE, ID_STR, ID_INT = 0, 1, 2  # absent or null / string / integer
MAX_DEPTH = 64

# value kinds
_K_STR, _K_INT, _K_NULL, _K_OTHER = 1, 2, 3, 4
# parser states
_VALUE, _AFTER, _KEY = 0, 1, 2
_OBJ, _ARR = 1, 2
_TRUE = np.frombuffer(b"true", np.uint8)
_FALSE = np.frombuffer(b"false", np.uint8)
_NULL = np.frombuffer(b"null", np.uint8)


@numba.njit(cache=True, nogil=True, inline="always")
def _ws(buf: npt.NDArray[np.uint8], i: int, e: int) -> int:
    while i < e:
        c = buf[i]
        if c != 32 and c != 9 and c != 13 and c != 10:
            break
        i += 1
    return i


@numba.njit(cache=True, nogil=True, inline="always")
def _is_hex(c: int) -> bool:
    return (48 <= c <= 57) or (65 <= c <= 70) or (97 <= c <= 102)


@numba.njit(cache=True, nogil=True, inline="always")
def _hex(c: int) -> int:
    if c <= 57:
        return c - 48
    if c <= 70:
        return c - 55
    return c - 87


@numba.njit(cache=True, nogil=True)
def _utf8_len(buf: npt.NDArray[np.uint8], i: int, e: int) -> int:
    """Length of the valid UTF-8 sequence at ``i`` (strict: as Python decodes), or 0."""
    c = buf[i]
    if 0xC2 <= c <= 0xDF:
        if i + 1 < e and 0x80 <= buf[i + 1] <= 0xBF:
            return 2
        return 0
    if 0xE0 <= c <= 0xEF:
        if i + 2 >= e:
            return 0
        c1 = buf[i + 1]
        lo, hi = 0x80, 0xBF
        if c == 0xE0:
            lo = 0xA0
        elif c == 0xED:
            hi = 0x9F
        if lo <= c1 <= hi and 0x80 <= buf[i + 2] <= 0xBF:
            return 3
        return 0
    if 0xF0 <= c <= 0xF4:
        if i + 3 >= e:
            return 0
        c1 = buf[i + 1]
        lo, hi = 0x80, 0xBF
        if c == 0xF0:
            lo = 0x90
        elif c == 0xF4:
            hi = 0x8F
        if lo <= c1 <= hi and 0x80 <= buf[i + 2] <= 0xBF and 0x80 <= buf[i + 3] <= 0xBF:
            return 4
        return 0
    return 0


@numba.njit(cache=True, nogil=True)
def _string(buf: npt.NDArray[np.uint8], i: int, e: int) -> tuple[int, bool]:
    """``buf[i]`` is ``"``: index after the closing quote (-1 if invalid) and has-escapes."""
    i += 1
    esc = False
    while i < e:
        c = buf[i]
        if c == 34:
            return i + 1, esc
        if c == 92:
            esc = True
            if i + 1 >= e:
                return -1, esc
            d = buf[i + 1]
            if d == 117:
                if i + 5 >= e:
                    return -1, esc
                for k in range(2, 6):
                    if not _is_hex(buf[i + k]):
                        return -1, esc
                i += 6
            elif d in (34, 92, 47, 98, 102, 110, 114, 116):  # " \ / b f n r t
                i += 2
            else:
                return -1, esc
        elif c < 0x20:
            return -1, esc
        elif c < 0x80:
            i += 1
        else:
            n = _utf8_len(buf, i, e)
            if n == 0:
                return -1, esc
            i += n
    return -1, esc


@numba.njit(cache=True, nogil=True)
def _number(buf: npt.NDArray[np.uint8], i: int, e: int) -> tuple[int, bool]:
    """JSON number at ``i``: index after it (-1 if invalid) and whether it is an integer."""
    if buf[i] == 45:
        i += 1
    if i >= e:
        return -1, False
    c = buf[i]
    if c == 48:
        i += 1
    elif 49 <= c <= 57:
        while i < e and 48 <= buf[i] <= 57:
            i += 1
    else:
        return -1, False
    is_int = True
    if i < e and buf[i] == 46:
        i += 1
        if i >= e or not (48 <= buf[i] <= 57):
            return -1, False
        while i < e and 48 <= buf[i] <= 57:
            i += 1
        is_int = False
    if i < e and (buf[i] == 101 or buf[i] == 69):
        i += 1
        if i < e and (buf[i] == 43 or buf[i] == 45):
            i += 1
        if i >= e or not (48 <= buf[i] <= 57):
            return -1, False
        while i < e and 48 <= buf[i] <= 57:
            i += 1
        is_int = False
    return i, is_int


@numba.njit(cache=True, nogil=True)
def _literal(buf: npt.NDArray[np.uint8], i: int, e: int, word: npt.NDArray[np.uint8]) -> int:
    n = word.size
    if i + n > e:
        return -1
    for k in range(n):
        if buf[i + k] != word[k]:
            return -1
    return i + n


@numba.njit(cache=True, nogil=True)
def _key_is(buf: npt.NDArray[np.uint8], s: int, e: int, key: npt.NDArray[np.uint8]) -> bool:
    if e - s != key.size:
        return False
    for k in range(key.size):  # noqa: SIM110 (numba: no generators)
        if buf[s + k] != key[k]:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _unescape(
    buf: npt.NDArray[np.uint8], s: int, e: int, out: npt.NDArray[np.uint8], o: int
) -> int:
    """Unescape the validated string content ``buf[s:e]`` into ``out[o:]`` (UTF-8).

    Returns the end in ``out``, or -1 for a lone surrogate.
    """
    i = s
    while i < e:
        c = buf[i]
        if c != 92:
            out[o] = c
            o += 1
            i += 1
            continue
        d = buf[i + 1]
        if d != 117:
            if d == 98:
                out[o] = 8
            elif d == 102:
                out[o] = 12
            elif d == 110:
                out[o] = 10
            elif d == 114:
                out[o] = 13
            elif d == 116:
                out[o] = 9
            else:
                out[o] = d  # " \ /
            o += 1
            i += 2
            continue
        cp = 0
        for k in range(2, 6):
            cp = cp * 16 + _hex(buf[i + k])
        i += 6
        if 0xD800 <= cp <= 0xDBFF:
            if i + 5 < e and buf[i] == 92 and buf[i + 1] == 117:
                lo = 0
                for k in range(2, 6):
                    lo = lo * 16 + _hex(buf[i + k])
                if 0xDC00 <= lo <= 0xDFFF:
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                    i += 6
                else:
                    return -1
            else:
                return -1
        elif 0xDC00 <= cp <= 0xDFFF:
            return -1
        if cp < 0x80:
            out[o] = cp
            o += 1
        elif cp < 0x800:
            out[o] = 0xC0 | (cp >> 6)
            out[o + 1] = 0x80 | (cp & 0x3F)
            o += 2
        elif cp < 0x10000:
            out[o] = 0xE0 | (cp >> 12)
            out[o + 1] = 0x80 | ((cp >> 6) & 0x3F)
            out[o + 2] = 0x80 | (cp & 0x3F)
            o += 3
        else:
            out[o] = 0xF0 | (cp >> 18)
            out[o + 1] = 0x80 | ((cp >> 12) & 0x3F)
            out[o + 2] = 0x80 | ((cp >> 6) & 0x3F)
            out[o + 3] = 0x80 | (cp & 0x3F)
            o += 4
    return o


@numba.njit(cache=True, nogil=True)
def _line(
    buf: npt.NDArray[np.uint8],
    s: int,
    e: int,
    tkey: npt.NDArray[np.uint8],
    ikey: npt.NDArray[np.uint8],
    stack: npt.NDArray[np.uint8],
    info: npt.NDArray[np.int64],
) -> int:
    """Scan one line ``buf[s:e]``; fill ``info`` = (text_s, text_e, text_esc, id_kind_raw,
    id_s, id_e, id_esc). Returns SIMPLE or SLOW."""
    i = _ws(buf, s, e)
    if i >= e or buf[i] != 123:
        return SLOW
    text_kind = 0
    id_kind = 0
    cur = 0  # key of the current top-level member: 1 text, 2 id, 3 both, 0 other
    depth = 0
    state = _VALUE
    while True:
        i = _ws(buf, i, e)
        if i >= e:
            return SLOW
        c = buf[i]
        vkind = 0
        vs = i
        ve = i
        vesc = False
        if state == _VALUE:
            if c == 123 or c == 91:
                if depth >= MAX_DEPTH:
                    return SLOW
                stack[depth] = _OBJ if c == 123 else _ARR
                depth += 1
                i = _ws(buf, i + 1, e)
                if i < e and buf[i] == (125 if c == 123 else 93):
                    depth -= 1
                    i += 1
                    vkind = _K_OTHER
                else:
                    state = _KEY if c == 123 else _VALUE
                    continue
            elif c == 34:
                j, vesc = _string(buf, i, e)
                if j < 0:
                    return SLOW
                vkind = _K_STR
                vs, ve = i + 1, j - 1
                i = j
            elif c == 45 or 48 <= c <= 57:
                j, is_int = _number(buf, i, e)
                if j < 0:
                    return SLOW
                vkind = _K_INT if is_int else _K_OTHER
                vs, ve = i, j
                i = j
            elif c == 116 or c == 102 or c == 110:
                if c == 116:
                    j = _literal(buf, i, e, _TRUE)
                elif c == 102:
                    j = _literal(buf, i, e, _FALSE)
                else:
                    j = _literal(buf, i, e, _NULL)
                if j < 0:
                    return SLOW
                vkind = _K_NULL if c == 110 else _K_OTHER
                i = j
            else:
                return SLOW
        elif state == _AFTER:
            top = stack[depth - 1]
            if c == 44:
                i += 1
                state = _KEY if top == _OBJ else _VALUE
                continue
            if (c == 125 and top == _OBJ) or (c == 93 and top == _ARR):
                depth -= 1
                i += 1
                if depth == 0:
                    break
                vkind = _K_OTHER  # a container closed: it is the value just completed
            else:
                return SLOW
        else:  # _KEY
            if c != 34:
                return SLOW
            j, kesc = _string(buf, i, e)
            if j < 0:
                return SLOW
            if depth == 1:
                if kesc:
                    return SLOW
                cur = 0
                if _key_is(buf, i + 1, j - 1, tkey):
                    cur |= 1
                if _key_is(buf, i + 1, j - 1, ikey):
                    cur |= 2
            i = _ws(buf, j, e)
            if i >= e or buf[i] != 58:
                return SLOW
            i += 1
            state = _VALUE
            continue
        # a value completed at the current depth
        if depth == 1 and cur != 0:
            if cur & 1:
                text_kind = vkind
                info[0] = vs
                info[1] = ve
                info[2] = 1 if vesc else 0
            if cur & 2:
                id_kind = vkind
                info[4] = vs
                info[5] = ve
                info[6] = 1 if vesc else 0
        state = _AFTER
    if _ws(buf, i, e) != e or text_kind != _K_STR:
        return SLOW
    if id_kind == 0 or id_kind == _K_NULL:
        info[3] = ID_NONE
    elif id_kind == _K_STR and info[5] > info[4]:
        info[3] = ID_STR
    elif id_kind == _K_INT:
        info[3] = ID_INT
    else:
        return SLOW
    return SIMPLE


@numba.njit(cache=True, nogil=True)
def _scan(
    buf: npt.NDArray[np.uint8], tkey: npt.NDArray[np.uint8], ikey: npt.NDArray[np.uint8]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    n_bytes = buf.size
    n = 0
    for k in range(n_bytes):
        if buf[k] == 10:
            n += 1
    if n_bytes and buf[n_bytes - 1] != 10:
        n += 1
    # per line: start, end (no \n), content end (no trailing \r), kind, text_s, text_e,
    # id_kind, id_s, id_e  (text/id offsets are into `out` when escaped: flagged by bit 62)
    res = np.zeros((n, 9), np.int64)
    out = np.empty(n_bytes, np.uint8)
    stack = np.empty(MAX_DEPTH, np.uint8)
    info = np.zeros(7, np.int64)
    o = 0
    s = 0
    for li in range(n):
        e = s
        while e < n_bytes and buf[e] != 10:
            e += 1
        ce = e
        while ce > s and buf[ce - 1] == 13:
            ce -= 1
        res[li, 0] = s
        res[li, 1] = e
        res[li, 2] = ce
        kind = _line(buf, s, e, tkey, ikey, stack, info)
        if kind == SIMPLE:
            ts, te = info[0], info[1]
            if info[2]:
                o2 = _unescape(buf, ts, te, out, o)
                if o2 < 0:
                    kind = SLOW
                else:
                    ts, te = o | (1 << 62), o2 | (1 << 62)
                    o = o2
            ids, ide = info[4], info[5]
            if kind == SIMPLE and info[3] == ID_STR and info[6]:
                o2 = _unescape(buf, ids, ide, out, o)
                if o2 < 0:
                    kind = SLOW
                else:
                    ids, ide = o | (1 << 62), o2 | (1 << 62)
                    o = o2
            res[li, 4] = ts
            res[li, 5] = te
            res[li, 6] = info[3]
            res[li, 7] = ids
            res[li, 8] = ide
        res[li, 3] = kind
        s = e + 1
    return res, out[:o]


def scan_block(
    block: bytes, text_key: bytes, id_key: bytes
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    """Scan a block of lines.

    Parameters
    ----------
    block : bytes
        Lines separated by ``\\n`` (the last may lack it; an ending ``\\n`` adds no line).
    text_key, id_key : bytes
        UTF-8 names of the text and id fields.

    Returns
    -------
    res : numpy.ndarray of int64, shape (n_lines, 9)
        Per line: start, end (before ``\\n``), content end (before trailing ``\\r``), kind
        (``SIMPLE``/``SLOW``), text start, text end, id kind (``ID_*``), id start, id end.
        Offsets with bit 62 set point into ``out`` (unescaped), else into ``block``.
    out : numpy.ndarray of uint8
        Unescaped string values.
    """
    buf = np.frombuffer(block, np.uint8)
    tk = np.frombuffer(text_key, np.uint8)
    ik = np.frombuffer(id_key, np.uint8)
    return _scan(buf, tk, ik)
