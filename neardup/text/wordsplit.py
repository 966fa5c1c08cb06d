"""The verifier's words of normalised text, by its regular expressions: runs of alphanumeric
characters (``[^\\W_]``, Python's ``str.isalnum``), each non-ASCII run split into its CJK
characters and the runs between them (``[CJK]|[^\\W_CJK]+``). :func:`split_words` gives the
tokens as ``str`` (what :func:`neardup.verify.tokenize` returns after normalising);
:func:`joined_words_reference` joins them as the token kernels read pre-tokenised text, the
pure twin of :func:`neardup.text.word_kernel.joined_words`. No numba here: importing the
verifier stays cheap.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["CJK_CLASS", "CJK_RANGES", "split_words"]

#: the code point ranges (inclusive) whose alphanumeric characters are a token each: kana,
#: CJK ideographs (extension A, unified, compatibility), Hangul syllables
CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x3040, 0x30FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
)
#: :data:`CJK_RANGES` as the body of a regular-expression character class
CJK_CLASS = "".join(f"{chr(a)}-{chr(b)}" for a, b in CJK_RANGES)

_TOKEN = re.compile(rf"[{CJK_CLASS}]|[^\W_{CJK_CLASS}]+", re.UNICODE)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def split_words(text: str) -> list[str]:
    """The tokens of a normalised text, by the regular expressions.

    >>> split_words("héllo wörld_2 世界abc")
    ['héllo', 'wörld', '2', '世', '界', 'abc']
    """
    out: list[str] = []
    for w in _WORD.findall(text):
        if w.isascii():
            out.append(w)
        else:
            out.extend(_TOKEN.findall(w))
    return out


def joined_words_reference(texts: Sequence[str]) -> list[bytes]:
    """The pure twin of :func:`neardup.text.word_kernel.joined_words`:
    ``" ".join(split_words(t)).encode()`` for each text."""
    return [" ".join(split_words(t)).encode("utf-8") for t in texts]
