"""Stop-word lists shipped in ``neardup/data/text`` (``stopwords_en.txt``, ``stopwords_zh.txt``).

Stop words are compared with tokens *after* normalisation (NFKC + casefold), so the lists are
lower-case. Removing them is optional (``Fingerprinter(stopwords=True)``).
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from ..errors import ConfigError

__all__ = ["LANGS", "stopwords"]

LANGS = ("en", "zh")


@cache
def stopwords(lang: str) -> frozenset[str]:
    """The shipped stop words for ``lang`` (``"en"`` or ``"zh"``).

    >>> "the" in stopwords("en"), "的" in stopwords("zh")
    (True, True)
    """
    if lang not in LANGS:
        raise ConfigError(f"stop words exist for {LANGS}, got {lang!r}; pass one of those")
    path = resources.files("neardup") / "data" / "text" / f"stopwords_{lang}.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    return frozenset(w.strip() for w in lines if w.strip() and not w.startswith("#"))
