"""Text normalisation shared by fingerprints, content hashes and tokenizers.

The one normal form neardup uses (:func:`normalize`):

1. lone surrogates (``U+D800``-``U+DFFF``, which cannot be encoded as UTF-8) become
   ``U+FFFD`` (the replacement character) -- documented replacement, never a crash;
2. Unicode NFKC (full-width -> half-width, compatibility ligatures, composed accents);
3. ``str.casefold()`` (case-insensitive; ``ß`` -> ``ss``);
4. whitespace runs collapse to one ASCII space and the ends are stripped.

ASCII text skips steps 1-2 (they are the identity on ASCII) and uses ``str.lower()``, which
equals ``casefold()`` on ASCII; ``str.isascii()`` is O(1) in CPython, so the common English
case costs one C-level pass.
"""

from __future__ import annotations

import re
import unicodedata

from ..errors import InputTypeError

__all__ = ["casefold_nfkc", "check_text", "nfkc", "normalize", "replace_surrogates"]

_SURROGATES = re.compile("[\ud800-\udfff]")
#: full-width ASCII (U+FF01-FF5E) and the ideographic space: singleton compatibility mappings
#: to one ASCII character each, what usually fails the NFKC check in Chinese text
_FULLWIDTH = re.compile("[\uff01-\uff5e\u3000]")
_HALFWIDTH = {chr(cp): chr(cp - 0xFEE0) for cp in range(0xFF01, 0xFF5F)} | {"\u3000": " "}


def _halfwidth(m: re.Match[str]) -> str:
    return _HALFWIDTH[m.group()]


def nfkc(text: str) -> str:
    """``unicodedata.normalize("NFKC", text)``, without its slow path where only full-width
    punctuation and letters keep ``text`` from being NFKC already.

    A full-width ASCII character decomposes (NFKD) to exactly its ASCII twin, and both have
    combining class 0, so mapping them first leaves the text's full decomposition, and so its
    NFKC, as it was; CPython's ``normalize`` costs ~80 ns a character once its quick check
    fails, the mapping a fraction of that (``benchmarks/bench_word_kernel.py``). Equal to
    ``unicodedata.normalize`` on every input (``tests/text/test_text.py``).

    >>> nfkc("Ｈｅｌｌｏ，世界！ ﬁ")
    'Hello,世界! fi'
    """
    if unicodedata.is_normalized("NFKC", text):  # fast check; most text is normalised
        return text
    text = _FULLWIDTH.sub(_halfwidth, text)
    if unicodedata.is_normalized("NFKC", text):
        return text
    return unicodedata.normalize("NFKC", text)


def replace_surrogates(text: str) -> str:
    """Replace lone surrogates (not encodable as UTF-8) with ``U+FFFD``.

    >>> replace_surrogates("a\\ud800b")
    'a\\ufffdb'
    """
    return _SURROGATES.sub("\ufffd", text)


def check_text(text: object, position: int | None = None, name: str = "text") -> str:
    """Return ``text`` if it is a ``str``, else raise :class:`InputTypeError` naming its position."""
    if isinstance(text, str):
        return text
    where = f"{name}[{position}]" if position is not None else name
    hint = (
        " (decode bytes first, e.g. data.decode('utf-8', 'replace'))"
        if isinstance(text, (bytes, bytearray, memoryview))
        else ""
    )
    raise InputTypeError(f"{where} must be str, got {type(text).__name__}{hint}")


def casefold_nfkc(text: str) -> str:
    """Steps 1-3 of :func:`normalize` (no whitespace collapse): the fingerprint pipeline's form."""
    if text.isascii():
        return text.lower()
    if _SURROGATES.search(text) is not None:
        text = replace_surrogates(text)
    return nfkc(text).casefold()


def normalize(text: str) -> str:
    """NFKC + casefold + whitespace collapse (see the module docstring).

    Parameters
    ----------
    text : str
        Any string; lone surrogates are replaced with ``U+FFFD``.

    Returns
    -------
    str
        The normalised text.

    Raises
    ------
    InputTypeError
        If ``text`` is not a ``str``.

    Examples
    --------
    >>> normalize("  Ｈｅｌｌｏ\\u3000WORLD\\n ")
    'hello world'
    """
    check_text(text)
    # ``str.split()`` splits on exactly the characters ``\s`` matches (both use
    # ``Py_UNICODE_ISSPACE``; checked over every code point in tests/text/test_text.py) and drops
    # empty ends, so this equals ``re.sub(r"\s+", " ", t).strip()`` at a fraction of the cost.
    return " ".join(casefold_nfkc(text).split())
