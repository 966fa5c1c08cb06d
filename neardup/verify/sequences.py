"""Token sequences as comparable strings, and the cost cap on comparing them.

:class:`TokenEncoder` turns a token sequence into a string of one code point per token, which
rapidfuzz compares as a string; :data:`DEFAULT_MAX_LCS_CELLS` is the size above which a pair is
decided on the multiset token overlap instead of the LCS. Shared by the rule
(:mod:`neardup.verify.rule`), the many-text encoders (:mod:`neardup.verify.tokens`) and the
bounds and exact LCS (:mod:`neardup.verify.overlap`).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["DEFAULT_MAX_LCS_CELLS", "TokenEncoder"]

#: pairs whose token counts multiply to more than this are decided on the multiset token
#: overlap (linear) instead of the LCS (quadratic): 10,000 x 10,000 tokens
DEFAULT_MAX_LCS_CELLS = 100_000_000


class TokenEncoder:
    """Maps tokens to single code points so rapidfuzz compares token sequences as strings.

    rapidfuzz compares ``str`` much faster than lists of ints. Each distinct token gets the
    next free code point (surrogates skipped); past the ~1.1 M code points a token is hashed into
    the supplementary planes instead (a collision can only raise a similarity slightly).
    """

    _LIMIT = 0x10FFFF - 0x800

    def __init__(self) -> None:
        self._vocab: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._vocab)

    def encode(self, tokens: Sequence[str]) -> str:
        """Return one character per token."""
        vocab = self._vocab
        if len(vocab) + len(tokens) < self._LIMIT:
            try:  # usually every token is known already
                return "".join(map(vocab.__getitem__, tokens))
            except KeyError:
                pass
            # new tokens get code points in order of first appearance, like the loop below
            for tok in dict.fromkeys(tokens):
                if tok not in vocab:
                    n = len(vocab) + 1
                    vocab[tok] = chr(n if n < 0xD800 else n + 0x800)
            return "".join(map(vocab.__getitem__, tokens))
        out = []
        for tok in tokens:
            ch = vocab.get(tok)
            if ch is None:
                n = len(vocab) + 1
                if n < self._LIMIT:
                    ch = chr(n if n < 0xD800 else n + 0x800)
                    vocab[tok] = ch
                else:  # vocabulary exhausted: hash into planes 1-16, not stored
                    ch = chr(0x10000 + (hash(tok) % 0xFFFFF))
            out.append(ch)
        return "".join(out)
