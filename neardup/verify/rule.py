"""Precise verification of SimHash candidate pairs.

SimHash narrows a corpus down to *candidate* pairs cheaply, but a 64-bit fingerprint of a short
text carries few bits of content: two tweets that differ by one word can be 15 bits apart while
two unrelated long documents can be 8 bits apart. :class:`Verifier` therefore

1. tells the pipeline how far to look (:meth:`Verifier.candidate_distance`, larger for short
   texts), and
2. decides each candidate pair with a similarity on normalised token sequences
   (:meth:`Verifier.verify`).

Similarity
----------
Texts are normalised (NFKC, casefold), social decorations are stripped (``RT @user:``,
``//@用户:``, ``@mentions``, URLs, ``#hashtags#``; emoji and punctuation never become tokens)
and tokenised into lower-cased words, with every CJK ideograph, kana or hangul syllable a token
of its own. Two similarities are computed with rapidfuzz on the token sequences:

``ratio``
    Indel (LCS) similarity ``2 * LCS / (len_a + len_b)`` — the same family as difflib's
    Ratcliff/Obershelp ratio (it is never below it).
``containment``
    ``LCS / len(shorter)`` — how much of the shorter text survives inside the longer one. It makes
    the decision robust to site chrome (a header and footer wrapped around the same text). It is
    only used when the shorter text has at least ``min_containment_tokens`` tokens, so that a
    five-word sentence is not "contained" in every long page that uses those words.

A pair is a near-duplicate when ``ratio >= threshold`` or (eligible and
``containment >= containment``).

Bounded cost
------------
The LCS costs ``O(len_a * len_b / 64)`` word operations (bit-parallel); above
``max_lcs_cells`` (the product of the two token counts, default ``DEFAULT_MAX_LCS_CELLS``:
10,000 x 10,000 tokens) a pair is decided on the multiset token overlap
``sum_t min(count_a(t), count_b(t))`` instead, in linear time. The overlap is an upper bound on
the LCS, so such a pair is never rejected where the LCS would accept it; it can accept the same
words in another order (a reordered copy of a long text). Texts of ``LONG_CHARS`` characters or
more are tokenised once into token-hash arrays, kept in a small per-verifier cache
(:meth:`Verifier.prepare` fills it ahead of time, e.g. before a request reaches the online
store's writer), so verifying a pair of long texts is linear in their length and, when both are
cached, needs no tokenising (``tests/verify/test_verify_bounds.py`` checks the warm path).
``threshold=0.8`` (:data:`DEFAULT_THRESHOLD`) is what counts as a near duplicate everywhere: the
usual definition (near-duplicate at ratio >= 0.80), the one the MinHash candidates are planned
for (:func:`neardup.rules.plan.plan_lsh`); ``containment=0.85`` asks that 85 % of the shorter
text appears, in order, in the longer one.

Examples
--------
>>> v = Verifier()
>>> v.verify("RT @bob: The quick brown fox jumps over the lazy dog", "the quick brown fox jumped over the lazy dog!", 9)
(True, 0.8888888888888888)
>>> v.candidate_distance(50) > v.candidate_distance(5000)
True
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from .._reference import use_reference
from ..errors import ConfigError, InputError, InputTypeError
from ..text.normalize import nfkc
from ..text.social import SOCIAL, has_social_marker
from ..text.wordsplit import joined_words_reference, split_words
from .sequences import DEFAULT_MAX_LCS_CELLS, TokenEncoder

__all__ = [
    "DEFAULT_MAX_LCS_CELLS",
    "DEFAULT_THRESHOLD",
    "LONG_CHARS",
    "RULE_BELOW",
    "RULE_BOUND",
    "RULE_CONTAINMENT",
    "RULE_EXACT",
    "RULE_NAMES",
    "RULE_SIMILARITY",
    "RULE_TRUSTED",
    "RULE_UNVERIFIED",
    "TokenEncoder",
    "Verifier",
    "tokenize",
]

#: what counts as a near duplicate (token similarity, ``ratio`` below): the default of the
#: verifier and of every front-end's ``threshold`` (the MinHash plan is made for it)
DEFAULT_THRESHOLD = 0.8

#: texts at least this long (characters) are verified through cached token-hash arrays; below
#: it a text has at most this many tokens, so two such texts never exceed the LCS cap
LONG_CHARS = 8192
#: most tokens the long-text cache of one verifier holds (~24 bytes each at most)
CACHE_TOKENS = 2_000_000

# What decided a pair (uint8 codes; names in RULE_NAMES): set by :meth:`Verifier.decide_rules`
# (below / similarity / containment), by the batch verify stage's bounds (bound) and
# trust_distance (trusted), and by the batch pipeline for exact copies and unverified runs. The
# pairs CSV's ``rule`` column and ``neardup explain`` name them; they are recorded by the code
# that decides, never recomputed.
#: rejected: neither the similarity nor the containment reaches its threshold (or a side has
#: no tokens)
RULE_BELOW = 0
#: rejected by an upper bound on the LCS (the token overlap) before the exact LCS was computed
RULE_BOUND = 1
#: accepted: ``ratio >= threshold``
RULE_SIMILARITY = 2
#: accepted: ``containment >= containment`` (the shorter text has ``min_containment_tokens``)
RULE_CONTAINMENT = 3
#: accepted on the SimHash distance alone (``trust_distance``)
RULE_TRUSTED = 4
#: exact copies (same normalised content hash)
RULE_EXACT = 5
#: accepted without verification (``DedupConfig(verify=False)``)
RULE_UNVERIFIED = 6
RULE_NAMES = ("below", "bound", "similarity", "containment", "trusted", "exact", "unverified")

_ASCII_NON_ALNUM = {c: " " for c in range(128) if not chr(c).isalnum()}
#: ``NEARDUP_REFERENCE=text``: the token kernels' pre-tokenised text joined in Python
_PURE_WORDS = use_reference("text")


def _normalised(text: str, strip_social: bool) -> str:
    """``text`` as :func:`tokenize` reads it: NFKC, case-folded, social markers blanked."""
    # ASCII: NFKC is the identity and casefold() equals lower()
    t = text.lower() if text.isascii() else nfkc(text).casefold()
    if strip_social and has_social_marker(t):
        t = SOCIAL.sub(" ", t)
    return t


def tokenize(text: str, *, strip_social: bool = True) -> list[str]:
    """Normalised tokens of a text: words, and single CJK characters.

    Parameters
    ----------
    text : str
        Any text.
    strip_social : bool, default=True
        Remove repost markers, mentions, URLs and hashtags first.

    Returns
    -------
    list of str

    Examples
    --------
    >>> tokenize("RT @x: Hello, 世界! http://t.co/abc #news")
    ['hello', '世', '界']
    """
    t = _normalised(text, strip_social)
    if t.isascii():  # words on ASCII = runs of [a-z0-9]: blank everything else, split
        return t.translate(_ASCII_NON_ALNUM).split()
    return split_words(t)


def joined_tokens(texts: Sequence[str], *, strip_social: bool = True) -> list[bytes]:
    """``" ".join(tokenize(t)).encode()`` for each text, split and joined in one kernel call
    (:func:`neardup.text.word_kernel.joined_words`): the pre-tokenised form the token kernels
    read."""
    norm = [_normalised(t, strip_social) for t in texts]
    if _PURE_WORDS:
        return joined_words_reference(norm)
    # numba is imported with the kernel, on first use: importing the verifier stays cheap
    from ..text import word_kernel

    return word_kernel.joined_words(norm)


@dataclass(frozen=True)
class _VerifierConfig:
    threshold: float = DEFAULT_THRESHOLD
    containment: float = 0.85
    min_containment_tokens: int = 20
    short_chars: int = 200
    short_distance: int = 18
    long_distance: int = 14
    trust_distance: int = -1
    strip_social: bool = True
    max_lcs_cells: int = DEFAULT_MAX_LCS_CELLS


class _Long:
    """A long text's tokens as hashes: in order (for the LCS), and as a multiset (sorted
    distinct hashes and their counts, for the overlap)."""

    __slots__ = ("counts", "seq", "uniq")

    def __init__(self, tokens: Sequence[str]) -> None:
        self.seq = np.fromiter(map(hash, tokens), dtype=np.int64, count=len(tokens))
        self.uniq, counts = np.unique(self.seq, return_counts=True)
        self.counts = counts.astype(np.int32)

    def __len__(self) -> int:
        return int(self.seq.size)


def _overlap_long(a: _Long, b: _Long) -> int:
    """Multiset overlap of two token-hash multisets (an upper bound on their LCS)."""
    _, ia, ib = np.intersect1d(a.uniq, b.uniq, assume_unique=True, return_indices=True)
    return int(np.minimum(a.counts[ia], b.counts[ib]).sum())


def _lcs_long(a: _Long, b: _Long) -> int:
    """Exact LCS of two token-hash sequences (one code point per distinct hash)."""
    from rapidfuzz.distance import LCSseq

    _, inv = np.unique(np.concatenate([a.seq, b.seq]), return_inverse=True)
    codes = inv.astype(np.uint32) + 1
    codes[codes >= 0xD800] += 0x800  # no surrogates
    sa = codes[: a.seq.size].tobytes().decode("utf-32-le")
    sb = codes[a.seq.size :].tobytes().decode("utf-32-le")
    return int(LCSseq.similarity(sa, sb))


def _overlap_encoded(a: str, b: str) -> int:
    """Multiset overlap of two :class:`TokenEncoder` strings, in linear time."""
    from collections import Counter

    return sum((Counter(a) & Counter(b)).values())


class Verifier:
    """Decides SimHash candidate pairs with a token-sequence similarity.

    Parameters
    ----------
    threshold : float, default=0.8
        Minimum Indel ratio on normalised tokens for a near-duplicate, in (0, 1]
        (:data:`DEFAULT_THRESHOLD`).
    containment : float, default=0.85
        Minimum share of the shorter text found, in order, in the longer one (LCS / shorter);
        catches the same text wrapped in site chrome. Set to 1.0 to require full containment,
        or above 1 to disable.
    min_containment_tokens : int, default=20
        The shorter text needs at least this many tokens for containment to count.
    short_chars : int, default=200
        Texts shorter than this (in characters) are *short*.
    short_distance : int, default=18
        SimHash distance within which candidates are fetched when the shorter text of a pair is
        short.
    long_distance : int, default=14
        SimHash distance within which candidates are fetched for long texts.
    trust_distance : int, default=-1
        Pairs of long texts at a SimHash distance <= this are accepted without computing the
        similarity (their score is reported as ``1 - distance / 64``). -1 verifies every pair.
    strip_social : bool, default=True
        Strip repost markers, mentions, URLs and hashtags before comparing.
    max_lcs_cells : int, default=DEFAULT_MAX_LCS_CELLS
        Pairs whose token counts multiply to more than this are decided on the multiset token
        overlap (linear time, an upper bound on the LCS) instead of the LCS; bounds the cost of
        one pair (see "Bounded cost" in the module documentation).

    Raises
    ------
    ConfigError
        When a parameter is out of range; the message says which, the value and the fix.
    """

    def __init__(
        self,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        containment: float = 0.85,
        min_containment_tokens: int = 20,
        short_chars: int = 200,
        short_distance: int = 18,
        long_distance: int = 14,
        trust_distance: int = -1,
        strip_social: bool = True,
        max_lcs_cells: int = DEFAULT_MAX_LCS_CELLS,
    ) -> None:
        self._cache: OrderedDict[tuple[int, int], _Long] = OrderedDict()
        self._cache_tokens = 0
        self._cache_lock = threading.Lock()
        self._cfg = _VerifierConfig(
            threshold=threshold,
            containment=containment,
            min_containment_tokens=min_containment_tokens,
            short_chars=short_chars,
            short_distance=short_distance,
            long_distance=long_distance,
            trust_distance=trust_distance,
            strip_social=strip_social,
            max_lcs_cells=max_lcs_cells,
        )
        self._validate()
        self._config = asdict(self._cfg)
        if self._config["max_lcs_cells"] == DEFAULT_MAX_LCS_CELLS:
            del self._config["max_lcs_cells"]

    def _validate(self) -> None:
        c = self._cfg
        if not isinstance(c.threshold, (int, float)) or not 0.0 < c.threshold <= 1.0:
            raise ConfigError(
                f"threshold must be in (0, 1], got {c.threshold!r}; {DEFAULT_THRESHOLD} is the "
                "default"
            )
        if not isinstance(c.containment, (int, float)) or c.containment <= 0.0:
            raise ConfigError(
                f"containment must be > 0 (values above 1 disable it), got {c.containment!r}"
            )
        if (
            isinstance(c.max_lcs_cells, bool)
            or not isinstance(c.max_lcs_cells, int)
            or c.max_lcs_cells < 1
        ):
            raise ConfigError(
                f"max_lcs_cells must be a positive int, got {c.max_lcs_cells!r}; "
                f"{DEFAULT_MAX_LCS_CELLS} is the default"
            )
        for name in ("min_containment_tokens", "short_chars", "short_distance", "long_distance"):
            value = getattr(c, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be a non-negative int, got {value!r}")
        if c.short_distance > 64 or c.long_distance > 64:
            raise ConfigError(
                f"candidate distances must be <= 64, got short_distance={c.short_distance}, "
                f"long_distance={c.long_distance}"
            )
        if isinstance(c.trust_distance, bool) or not isinstance(c.trust_distance, int):
            raise ConfigError(
                f"trust_distance must be an int (-1 disables), got {c.trust_distance!r}"
            )
        if c.trust_distance > c.long_distance:
            raise ConfigError(
                f"trust_distance ({c.trust_distance}) must not exceed long_distance "
                f"({c.long_distance}); lower trust_distance or use -1 to verify every pair"
            )

    # -- configuration ---------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """JSON-serialisable parameters; ``Verifier.from_config(v.config())`` rebuilds it.

        ``max_lcs_cells`` appears only when it is not the default, so configurations stored
        before it existed (online stores) still compare equal."""
        # the settings are frozen: built once in __init__ (asdict per call cost a single online
        # request ~0.03 ms); a copy handed out so a caller's edit cannot change the verifier
        return dict(self._config)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Verifier:
        """Build a verifier from :meth:`config` output; unknown keys raise ConfigError."""
        known = {f.name for f in fields(_VerifierConfig)}
        unknown = set(config) - known
        if unknown:
            raise ConfigError(
                f"unknown Verifier config keys {sorted(unknown)}; known keys: {sorted(known)}"
            )
        return cls(**config)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items())
        return f"Verifier({args})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Verifier) and other._cfg == self._cfg

    def __hash__(self) -> int:
        return hash(self._cfg)

    @property
    def threshold(self) -> float:
        return self._cfg.threshold

    @property
    def short_chars(self) -> int:
        return self._cfg.short_chars

    @property
    def max_lcs_cells(self) -> int:
        return self._cfg.max_lcs_cells

    # -- candidate distances ---------------------------------------------------------------
    def candidate_distance(self, text_len: int) -> int:
        """SimHash distance within which candidates are fetched for a text of ``text_len`` chars.

        Short texts (``text_len < short_chars``) get ``short_distance``, others ``long_distance``.
        For a pair, pass the length of the shorter text.
        """
        return (
            self._cfg.short_distance
            if text_len < self._cfg.short_chars
            else self._cfg.long_distance
        )

    @property
    def max_candidate_distance(self) -> int:
        """The largest value :meth:`candidate_distance` returns (size indexes with it)."""
        return max(self._cfg.short_distance, self._cfg.long_distance)

    # -- similarity ------------------------------------------------------------------------
    def tokens(self, text: str) -> list[str]:
        """Normalised tokens used for comparison (see :func:`tokenize`)."""
        return tokenize(text, strip_social=self._cfg.strip_social)

    def joined_tokens(self, texts: Sequence[str]) -> list[bytes]:
        """Each text's :meth:`tokens` joined by single spaces, UTF-8, in one call (see
        :func:`joined_tokens`)."""
        return joined_tokens(texts, strip_social=self._cfg.strip_social)

    def compare_encoded(self, a: str, b: str) -> tuple[bool, float]:
        """Decide two token sequences encoded by one :class:`TokenEncoder`."""
        from rapidfuzz.distance import LCSseq

        la, lb = len(a), len(b)
        if la == 0 or lb == 0:
            return False, 0.0
        if la * lb > self._cfg.max_lcs_cells:
            lcs = _overlap_encoded(a, b)
        else:
            lcs = LCSseq.similarity(a, b)
        ratio = 2.0 * lcs / (la + lb)
        c = self._cfg
        if ratio >= c.threshold:
            return True, ratio
        shorter = min(la, lb)
        if shorter >= c.min_containment_tokens and c.containment <= 1.0:
            cont = lcs / shorter
            if cont >= c.containment:
                return True, cont
        return False, ratio

    def decide(
        self,
        lcs: npt.NDArray[np.integer[Any]],
        len_a: npt.NDArray[np.integer[Any]],
        len_b: npt.NDArray[np.integer[Any]],
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
        """Vectorised decision from LCS lengths and token counts; agrees with
        :meth:`compare_encoded` (its scalar reference). :meth:`decide_rules` without the rule."""
        ok, score, _ = self.decide_rules(lcs, len_a, len_b)
        return ok, score

    def cannot_pass(
        self, len_a: npt.NDArray[np.integer[Any]], len_b: npt.NDArray[np.integer[Any]]
    ) -> npt.NDArray[np.bool_]:
        """The pairs of texts of ``len_a`` and ``len_b`` tokens (both above 0) that
        :meth:`decide_rules` rejects whatever their LCS: rejected even at the largest LCS there
        can be, the shorter length (both the similarity and the containment grow with the LCS).
        Decided from the lengths alone, before the texts are read (a store's SimHash hits;
        ``tests/verify/test_verify_rules.py`` checks it against every LCS); a side of 0 tokens is
        never reported."""
        la = np.asarray(len_a, np.int64)
        lb = np.asarray(len_b, np.int64)
        ok, _, _ = self.decide_rules(np.minimum(la, lb), la, lb)
        return ~ok & (la > 0) & (lb > 0)

    def decide_rules(
        self,
        lcs: npt.NDArray[np.integer[Any]],
        len_a: npt.NDArray[np.integer[Any]],
        len_b: npt.NDArray[np.integer[Any]],
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64], npt.NDArray[np.uint8]]:
        """:meth:`decide` and which rule decided each pair: ``(ok, score, rule)``, ``rule``
        uint8 ``RULE_SIMILARITY`` (``ratio >= threshold``; score = ratio),
        ``RULE_CONTAINMENT`` (not by ratio, but the shorter text has
        ``min_containment_tokens`` and ``containment`` of it is in the other; score =
        containment) or ``RULE_BELOW`` (rejected; score = ratio)."""
        c = self._cfg
        lcs_f = np.asarray(lcs, dtype=np.float64)
        la = np.asarray(len_a, dtype=np.float64)
        lb = np.asarray(len_b, dtype=np.float64)
        total = la + lb
        shorter = np.minimum(la, lb)
        valid = shorter > 0
        ratio = np.where(valid, 2.0 * lcs_f / np.where(total > 0, total, 1.0), 0.0)
        ok = valid & (ratio >= c.threshold)
        rule = np.where(ok, RULE_SIMILARITY, RULE_BELOW).astype(np.uint8)
        score = ratio.copy()
        if c.containment <= 1.0:
            cont = np.where(valid, lcs_f / np.where(shorter > 0, shorter, 1.0), 0.0)
            by_cont = valid & ~ok & (shorter >= c.min_containment_tokens) & (cont >= c.containment)
            ok |= by_cont
            score = np.where(by_cont, cont, score)
            rule[by_cont] = RULE_CONTAINMENT
        return ok, score, rule

    def compare_encoded_many(
        self, a: Sequence[str], b: Sequence[str], *, workers: int = 1
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
        """Decide many pairs of encoded token sequences (rapidfuzz ``cpdist``, ``workers`` threads)."""
        from rapidfuzz import process
        from rapidfuzz.distance import LCSseq

        n = len(a)
        if n == 0:
            return np.zeros(0, bool), np.zeros(0, np.float64)
        la = np.fromiter((len(x) for x in a), dtype=np.int64, count=n)
        lb = np.fromiter((len(x) for x in b), dtype=np.int64, count=n)
        big = la * lb > self._cfg.max_lcs_cells
        if not big.any():
            lcs = process.cpdist(a, b, scorer=LCSseq.similarity, workers=workers, dtype=np.int64)
        else:  # over the cap: the linear overlap
            lcs = np.zeros(n, np.int64)
            small = np.flatnonzero(~big).tolist()
            if small:
                lcs[small] = process.cpdist(
                    [a[i] for i in small],
                    [b[i] for i in small],
                    scorer=LCSseq.similarity,
                    workers=workers,
                    dtype=np.int64,
                )
            for i in np.flatnonzero(big).tolist():
                lcs[i] = _overlap_encoded(a[i], b[i])
        return self.decide(lcs, la, lb)

    def compare_indexed(
        self,
        encoded: Sequence[str],
        ia: npt.NDArray[np.integer[Any]],
        ib: npt.NDArray[np.integer[Any]],
        *,
        workers: int = 1,
        prune: bool = False,
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
        """Decide pairs ``(encoded[ia[m]], encoded[ib[m]])``: like :meth:`compare_encoded_many`,
        but each sequence's length is taken once, not once per pair it is in.

        With ``prune=True`` the LCS is computed only for pairs whose multiset token overlap (an
        upper bound on the LCS, :mod:`neardup.verify.overlap`) could pass; the decisions are
        the same, but a pair rejected by the bound reports its *bound* ratio as its score.
        """
        from rapidfuzz import process
        from rapidfuzz.distance import LCSseq

        ia = np.asarray(ia, dtype=np.int64)
        ib = np.asarray(ib, dtype=np.int64)
        if ia.size == 0:
            return np.zeros(0, bool), np.zeros(0, np.float64)
        lens: npt.NDArray[np.int64] = np.fromiter(map(len, encoded), np.int64, len(encoded))
        la, lb = lens[ia], lens[ib]
        if prune:
            from .overlap import bound_decisions, encode_sorted

            values, offsets = encode_sorted(encoded)
            c = self._cfg
            could, score = bound_decisions(
                values,
                offsets,
                ia,
                ib,
                threshold=c.threshold,
                containment=c.containment,
                min_containment_tokens=c.min_containment_tokens,
                workers=workers,
            )
            todo = np.flatnonzero(could)
        else:
            todo = np.arange(ia.size)
            score = np.zeros(ia.size, np.float64)
        ok = np.zeros(ia.size, bool)
        if todo.size:
            big = la[todo] * lb[todo] > self._cfg.max_lcs_cells
            exact = todo[~big]
            lcs = np.zeros(todo.size, np.int64)
            if exact.size:
                seq_a = [encoded[i] for i in ia[exact].tolist()]
                seq_b = [encoded[i] for i in ib[exact].tolist()]
                lcs[~big] = process.cpdist(
                    seq_a, seq_b, scorer=LCSseq.similarity, workers=workers, dtype=np.int64
                )
            for q, m in zip(np.flatnonzero(big).tolist(), todo[big].tolist(), strict=True):
                lcs[q] = _overlap_encoded(encoded[ia[m]], encoded[ib[m]])
            ok[todo], score[todo] = self.decide(lcs, la[todo], lb[todo])
        return ok, score

    def similarity(self, text_a: str, text_b: str) -> float:
        """Indel ratio of the normalised token sequences, in [0, 1] (0 when either is empty)."""
        enc = TokenEncoder()
        a, b = enc.encode(self.tokens(text_a)), enc.encode(self.tokens(text_b))
        if not a or not b:
            return 0.0
        from rapidfuzz.distance import LCSseq

        return 2.0 * LCSseq.similarity(a, b) / (len(a) + len(b))

    def trusted(self, len_a: int, len_b: int, distance: int) -> bool:
        """Whether a pair is accepted on its SimHash distance alone (long texts, tiny distance)."""
        return distance <= self._cfg.trust_distance and min(len_a, len_b) >= self._cfg.short_chars

    # -- long texts ----------------------------------------------------------------------------
    def prepare(self, texts: Iterable[str]) -> int:
        """Tokenise the long texts (``LONG_CHARS`` characters or more) of ``texts`` into this
        verifier's cache, so that verifying them later costs no tokenisation; returns how many
        were added. Thread-safe; the cache keeps the most recently used ``CACHE_TOKENS`` tokens.
        """
        added = 0
        for t in texts:
            if isinstance(t, str) and len(t) >= LONG_CHARS and self._cached(t) is None:
                self._long(t)
                added += 1
        return added

    def clear_cache(self) -> None:
        """Forget every cached long text."""
        with self._cache_lock:
            self._cache.clear()
            self._cache_tokens = 0

    def _cached(self, text: str) -> _Long | None:
        key = (len(text), hash(text))
        with self._cache_lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
            return hit

    def _long(self, text: str) -> _Long:
        """``text``'s token hashes: from the cache, or computed (and cached when long)."""
        hit = self._cached(text) if len(text) >= LONG_CHARS else None
        if hit is not None:
            return hit
        data = _Long(self.tokens(text))
        if len(text) >= LONG_CHARS and len(data) <= CACHE_TOKENS:
            with self._cache_lock:
                key = (len(text), hash(text))
                if key not in self._cache:
                    self._cache[key] = data
                    self._cache_tokens += len(data)
                while self._cache_tokens > CACHE_TOKENS:
                    _, old = self._cache.popitem(last=False)
                    self._cache_tokens -= len(old)
        return data

    def _compare_long(self, a: _Long, b: _Long) -> tuple[bool, float]:
        """:meth:`compare_encoded` on token-hash arrays: LCS up to the cap, else the overlap."""
        la, lb = len(a), len(b)
        if la == 0 or lb == 0:
            return False, 0.0
        lcs = _overlap_long(a, b) if la * lb > self._cfg.max_lcs_cells else _lcs_long(a, b)
        ok, score = self.decide(np.array([lcs]), np.array([la]), np.array([lb]))
        return bool(ok[0]), float(score[0])

    def verify(self, text_a: str, text_b: str, distance: int) -> tuple[bool, float]:
        """Decide one candidate pair.

        Parameters
        ----------
        text_a, text_b : str
            The two texts.
        distance : int
            Their SimHash distance (used only by ``trust_distance``).

        Returns
        -------
        (bool, float)
            The decision and the similarity score in [0, 1].
        """
        for pos, t in enumerate((text_a, text_b)):
            if not isinstance(t, str):
                raise InputTypeError(f"verify() text {pos} is {type(t).__name__}, expected str")
        if self.trusted(len(text_a), len(text_b), int(distance)):
            return True, 1.0 - int(distance) / 64.0
        if len(text_a) >= LONG_CHARS or len(text_b) >= LONG_CHARS:
            return self._compare_long(self._long(text_a), self._long(text_b))
        enc = TokenEncoder()
        return self.compare_encoded(
            enc.encode(self.tokens(text_a)), enc.encode(self.tokens(text_b))
        )

    def verify_many(
        self,
        texts_a: Sequence[str],
        texts_b: Sequence[str],
        distances: Sequence[int] | npt.NDArray[np.integer[Any]],
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
        """Decide many pairs: ``(decisions bool (n,), scores float64 (n,))``."""
        n = len(texts_a)
        if len(texts_b) != n or len(distances) != n:
            raise InputError(
                f"verify_many() needs equal lengths, got {n} texts_a, {len(texts_b)} texts_b "
                f"and {len(distances)} distances"
            )
        enc = TokenEncoder()
        cache: dict[str, str] = {}
        ea: list[str] = []
        eb: list[str] = []
        short: list[int] = []  # pairs compared as encoded strings
        long_: list[int] = []  # pairs with a long text: through token-hash arrays
        trusted = np.zeros(n, dtype=np.bool_)
        dist = np.zeros(n, dtype=np.int64)
        for i in range(n):
            a, b = texts_a[i], texts_b[i]
            for side, t in (("texts_a", a), ("texts_b", b)):
                if not isinstance(t, str):
                    raise InputTypeError(f"{side}[{i}] is {type(t).__name__}, expected str")
            dist[i] = int(distances[i])
            trusted[i] = self.trusted(len(a), len(b), int(dist[i]))
            if trusted[i]:
                continue
            if len(a) >= LONG_CHARS or len(b) >= LONG_CHARS:
                long_.append(i)
                continue
            short.append(i)
            for t, out in ((a, ea), (b, eb)):
                e = cache.get(t)
                if e is None:
                    e = cache[t] = enc.encode(self.tokens(t))
                out.append(e)
        ok = np.zeros(n, np.bool_)
        score = np.zeros(n, np.float64)
        if short:
            ok[short], score[short] = self.compare_encoded_many(ea, eb)
        for i in long_:
            ok[i], score[i] = self._compare_long(self._long(texts_a[i]), self._long(texts_b[i]))
        ok = ok | trusted
        score = np.where(trusted, 1.0 - dist / 64.0, score)
        return ok, score
