"""The verifier's tokens of normalised text: runs of alphanumeric characters, and each CJK
character on its own (:func:`neardup.verify.tokenize`, after its NFKC, case folding and
social-marker stripping).

:func:`neardup.text.wordsplit.split_words` gives them as a list of ``str`` by two regular
expressions (the words, runs of ``[^\\W_]``, Python's ``str.isalnum``; each non-ASCII word
split by ``[CJK]|[^\\W_CJK]+``). :func:`joined_words` gives what the token kernels read
instead (:data:`PRETOK` in :mod:`neardup.text.token_kernels`: the tokens as UTF-8 joined by
single spaces), for many texts in one numba kernel call, without a match object or a ``str``
per token. On Chinese text the regular expressions make one of each per character (30-40 µs a
short post, joined), and every non-ASCII text went through them each time a MinHash signature,
a token histogram or a token hash needed its tokens (``benchmarks/bench_word_kernel.py``). A
list of ``str`` costs about as much made either way (each token is a new object), so
``split_words`` keeps the regular expressions.

The kernel reads the texts' code points (UTF-32, lone surrogates passed through) against a class
table over every code point (:func:`char_classes`: made once per process from the running
Python's ``str.isalnum``, which is what its ``\\w`` matches besides ``_``). Tested against
``wordsplit.joined_words_reference`` on every code point and on generated text
(``tests/text/test_word_kernel.py``); ``NEARDUP_REFERENCE=text`` makes the verifier use that
instead. This module imports numba: the verifier imports it on first use.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._arrays import read_only
from .._jit import kernel
from .wordsplit import CJK_RANGES

__all__ = ["char_classes", "joined_words"]

#: a code point's class: between tokens, inside a word, a token of its own
SEP, WORD, SINGLE = 0, 1, 2
_UNICODE = 0x110000

_classes: npt.NDArray[np.uint8] | None = None
_classes_lock = threading.Lock()


def char_classes() -> npt.NDArray[np.uint8]:
    """Every code point's class (:data:`SEP`, :data:`WORD`, :data:`SINGLE`), uint8
    ``(0x110000,)``, read-only; made on first use (~0.2 s) from ``str.isalnum``, which is what
    the running Python's ``\\w`` matches (besides ``_``)."""
    global _classes
    if _classes is None:
        with _classes_lock:
            if _classes is None:
                alnum = np.fromiter((chr(c).isalnum() for c in range(_UNICODE)), np.bool_, _UNICODE)
                cls = alnum.astype(np.uint8)
                for a, b in CJK_RANGES:
                    cls[a : b + 1] *= SINGLE
                _classes = read_only(cls)
    return _classes


@kernel(nogil=True)
def _join_kernel(
    cps: Any, starts: Any, ends: Any, cls: Any, out: Any, out_ends: Any
) -> None:  # pragma: no cover (numba)
    """Each text ``cps[starts[t]:ends[t]]``'s tokens, UTF-8, joined by single spaces, into
    ``out``; text ``t``'s end there in ``out_ends[t]``."""
    o = 0
    for t in range(starts.size):
        first = True
        inword = False
        for i in range(starts[t], ends[t]):
            c = np.int64(cps[i])
            k = cls[c] if c < cls.size else 0
            if k == 0:
                inword = False
                continue
            if k == 2 or not inword:
                if not first:
                    out[o] = 32
                    o += 1
                first = False
                inword = k == 1
            if c < 0x80:
                out[o] = c
                o += 1
            elif c < 0x800:
                out[o] = 0xC0 | (c >> 6)
                out[o + 1] = 0x80 | (c & 0x3F)
                o += 2
            elif c < 0x10000:
                out[o] = 0xE0 | (c >> 12)
                out[o + 1] = 0x80 | ((c >> 6) & 0x3F)
                out[o + 2] = 0x80 | (c & 0x3F)
                o += 3
            else:
                out[o] = 0xF0 | (c >> 18)
                out[o + 1] = 0x80 | ((c >> 12) & 0x3F)
                out[o + 2] = 0x80 | ((c >> 6) & 0x3F)
                out[o + 3] = 0x80 | (c & 0x3F)
                o += 4
        out_ends[t] = o


def joined_words(texts: Sequence[str]) -> list[bytes]:
    """Each normalised text's tokens (``wordsplit.split_words``'), UTF-8 and joined by single
    spaces: ``" ".join(split_words(t)).encode()`` for every ``t``, in one kernel call.

    >>> joined_words(["héllo, 世界!", "", "a_b"])
    [b'h\\xc3\\xa9llo \\xe4\\xb8\\x96 \\xe7\\x95\\x8c', b'', b'a b']
    """
    n = len(texts)
    if n == 0:
        return []
    lens = np.fromiter(map(len, texts), np.int64, n)
    ends = np.cumsum(lens)
    starts = ends - lens
    # one code point a unit; lone surrogates are separators and never reach the output
    cps = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), np.uint32)
    out = np.empty(max(5 * cps.size, 1), np.uint8)  # <= 4 bytes a code point + 1 space a token
    out_ends = np.empty(n, np.int64)
    _join_kernel(cps, starts, ends, char_classes(), out, out_ends)
    buf = out[: int(out_ends[-1])].tobytes()
    if n == 1:
        return [buf]
    res: list[bytes] = []
    prev = 0
    for e in out_ends.tolist():
        res.append(buf[prev:e])
        prev = e
    return res
