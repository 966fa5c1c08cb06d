"""Text processing for fingerprints: normalisation, language detection, tokenizers, weights.

Public helpers (all pure functions of their inputs, deterministic across runs):

- :func:`normalize` -- NFKC + casefold + whitespace collapse;
- :func:`detect_lang` -- ``"zh"``, ``"en"`` or ``"other"`` by script share;
- tokenizers :func:`words`, :func:`jieba_words`, :func:`char_ngrams`, :func:`word_shingles`,
  :func:`tokenize` -- the exact feature strings the SimHash pipeline hashes;
- :func:`stopwords` and IDF tables in :mod:`neardup.text.weights`.

The pure TextRank the fast one is tested against is in :mod:`neardup.text.reference` (tests).
"""

from __future__ import annotations

from .normalize import check_text, normalize
from .stopwords import stopwords
from .tokenize import (
    char_ngrams,
    cjk_share,
    detect_lang,
    jieba_words,
    prepare,
    tokenize,
    word_shingles,
    words,
)

__all__ = [
    "char_ngrams",
    "check_text",
    "cjk_share",
    "detect_lang",
    "jieba_words",
    "normalize",
    "prepare",
    "stopwords",
    "tokenize",
    "word_shingles",
    "words",
]
