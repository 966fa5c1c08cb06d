"""Tokenizers: the exact feature strings the SimHash pipeline hashes.

Every fingerprint feature is derived from :func:`prepare`'d text, whose definition is:

``words`` / ``shingles`` / ``chars``
    ASCII text is lower-cased. Other text: every non-word character (``re`` ``\\W``, including
    lone surrogates) becomes a space, then NFKC, casefold, and non-word characters -> space
    again. *Word characters* are ``[0-9a-z_]`` and every non-ASCII code point that survived
    (i.e. Unicode ``\\w``), so a token is a maximal run of word characters. Every ASCII
    character outside ``[0-9a-z_]`` separates tokens exactly like a space, so outside ``jieba``
    mode :func:`prepare` only rewrites the *non-ASCII* non-word characters and leaves ASCII
    punctuation in place (the same features, much faster on English text with a few curly
    quotes or accents: the ``en-long-typo`` case of ``benchmarks/bench_fingerprint.py``).
``jieba``
    as ``words``; then, if the text is not pure ASCII, it is segmented with ``rjieba.cut``
    (jieba-compatible, HMM on) and the pieces are joined with spaces.

Feature strings:

- words: the tokens;
- word shingles (n-grams): ``n`` consecutive tokens (after stop-word removal); a document with
  ``0 < tokens < n`` yields one shingle of all its tokens;
- char n-grams: the prepared text with each run of non-word characters replaced by one space
  and the ends stripped, then every window of ``n`` code points; a text shorter than ``n``
  yields one gram (the whole text).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Literal

import numpy as np

from .normalize import check_text, nfkc

__all__ = [
    "CJK_RE",
    "char_ngrams",
    "cjk_share",
    "detect_lang",
    "han_share",
    "jieba_words",
    "prepare",
    "prepare_many",
    "prepare_utf8",
    "prepare_utf8_many",
    "tokenize",
    "word_shingles",
    "words",
]

PrepareMode = Literal["words", "jieba", "chars"]

_NONWORD = re.compile(r"\W", re.UNICODE)
_NONWORD_RUN = re.compile(r"\W+", re.UNICODE)
#: non-word characters outside ASCII (ASCII ones already separate tokens in the kernels)
_NONWORD_NONASCII = re.compile(r"[^\w\x00-\x7f]", re.UNICODE)
#: token = maximal run of ASCII [0-9a-z_] or any non-ASCII code point (in prepared text)
_TOKEN = re.compile("[0-9a-z_\u0080-\U0010ffff]+")
_SEP_RUN = re.compile("[^0-9a-z_\u0080-\U0010ffff]+")
#: Han ideographs (CJK Unified + Ext A + compatibility + supplementary planes B-F)
CJK_RE = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]")


def prepare(text: str, mode: PrepareMode = "words") -> str:
    """The prepared text a fingerprint kernel tokenizes (see the module docstring).

    ASCII text: ``text.lower()`` (the kernel treats ASCII non-word bytes as separators).
    Other text: non-word characters -> space (outside ``jieba`` mode only the non-ASCII ones:
    ASCII ones already separate tokens); NFKC (skipped when ``is_normalized``); casefold;
    non-word characters -> space again (NFKC / casefold can create some, e.g. ``½`` -> ``1⁄2``).
    Replacing separators *before* NFKC lets full-width punctuation (common in Chinese text,
    and not NFKC-normalised) skip the slow ``unicodedata.normalize``; lone surrogates are
    non-word characters, so they become separators too.
    """
    # (either pattern is exact outside jieba; plain \W is the faster one on mostly non-ASCII
    # text such as Chinese, the ASCII-skipping one on mostly-ASCII text)
    plain = mode == "jieba" or not _mostly_ascii(text)
    s = _prepare_unsegmented(text, plain)
    if mode == "jieba" and not s.isascii():
        import rjieba

        s = " ".join(rjieba.cut(s))
    return s


def _prepare_unsegmented(text: str, plain: bool) -> str:
    """:func:`prepare` before jieba segmentation; ``plain``: rewrite every non-word character
    (required before jieba), else only the non-ASCII ones."""
    if text.isascii():
        return text.lower()
    # ASCII non-word characters separate tokens like a space (in the kernels, the reference,
    # han_share and char n-grams), and no ASCII character composes under NFKC with a following
    # word character (pinned in tests), so only jieba -- which segments the text itself --
    # needs them rewritten. Rewriting only non-ASCII ones avoids one regex match per space.
    nonword = _NONWORD if plain else _NONWORD_NONASCII
    s = nonword.sub(" ", text)
    n = nfkc(s)
    changed = n != s
    s = n
    folded = s.casefold()
    if folded.isascii():
        return folded
    if changed or folded != s:  # else s is still only word characters and spaces
        folded = nonword.sub(" ", folded)
    return folded


#: prepare_utf8's fast path: texts whose non-ASCII characters are at most this share of the
#: UTF-8 bytes (mostly-ASCII text: English with curly quotes, dashes, accents); a prefix of
#: _FAST_PROBE characters is checked first so that Chinese text bails out at once
_FAST_MAX_SHARE = 0.25
_FAST_PROBE = 512
#: up to this many non-ASCII characters are mapped in one Python pass; more, vectorised
_LOOP_MAX = 256
_FAST_MAX_NONASCII = 256


@functools.cache
def _composition_seconds() -> frozenset[int]:
    """Code points that can be the *second* half of a canonical composition (so NFKC may merge
    them with the character before), plus the Hangul medial / final jamo (composed
    algorithmically). Computed once from the running Python's Unicode database."""
    out = set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
    for cp in range(0x80, 0x30000):
        d = unicodedata.decomposition(chr(cp))
        if d and not d.startswith("<"):
            parts = d.split()
            if len(parts) == 2:
                out.add(int(parts[1], 16))
    return frozenset(out)


@functools.lru_cache(maxsize=1 << 16)
def _char_utf8(c: str) -> bytes | None:
    """UTF-8 of :func:`prepare` (words / chars mode) applied to the one non-ASCII character
    ``c`` alone, or ``None`` when ``c`` could interact with its neighbours under NFKC (its
    compatibility decomposition starts with a non-starter or a composition second), in which
    case the caller takes the whole-text path."""
    if _NONWORD.fullmatch(c) is not None:
        return b" "
    first = unicodedata.normalize("NFKD", c)[:1]
    if unicodedata.combining(first) or ord(first) in _composition_seconds():
        return None
    s = nfkc(c).casefold()
    return _NONWORD_NONASCII.sub(" ", s).encode("utf-8")


def _mostly_ascii(text: str) -> bool:
    """Whether the first :data:`_FAST_PROBE` characters are mostly ASCII (cheap: one encode)."""
    probe = text[:_FAST_PROBE]
    return len(probe.encode("utf-8", "surrogatepass")) <= len(probe) * (1 + _FAST_MAX_SHARE)


def _prepare_utf8_mostly_ascii(text: str) -> bytes | None:
    """:func:`prepare_utf8`'s per-character path (``None`` when it does not apply)."""
    try:
        b = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: the whole-text path replaces them
        return None
    buf = np.frombuffer(b, np.uint8)
    lead = np.flatnonzero(buf >= 0xC0)  # first byte of every non-ASCII character
    if lead.size > _FAST_MAX_SHARE * buf.size:
        return None
    out = b.lower()  # changes ASCII bytes only (UTF-8 sequences are all >= 0x80)
    if lead.size <= _LOOP_MAX:  # few: one Python pass over them is the cheapest
        parts: list[bytes] = []
        prev = 0
        for p, lb in zip(lead.tolist(), buf[lead].tolist(), strict=True):
            e = p + (4 if lb >= 0xF0 else 3 if lb >= 0xE0 else 2)
            q = b[p:e]
            m = _char_utf8(q.decode("utf-8"))
            if m is None:
                return None  # may compose with a neighbour under NFKC
            if m != q:
                parts += (out[prev:p], m)
                prev = e
        parts.append(out[prev:])
        return b"".join(parts)
    # many: find the distinct characters without a Python step per character; each
    # character's UTF-8 bytes as one big-endian uint32 (zero-padded), to find the
    # distinct characters without a Python loop over all of them
    pad = np.zeros(buf.size + 3, np.uint32)
    pad[: buf.size] = buf
    lb = pad[lead]
    width = np.where(lb >= 0xF0, 4, np.where(lb >= 0xE0, 3, 2))
    code = (lb << 24) | (pad[lead + 1] << 16)
    code |= np.where(width >= 3, pad[lead + 2] << 8, 0).astype(np.uint32)
    code |= np.where(width >= 4, pad[lead + 3], 0).astype(np.uint32)
    _, first = np.unique(code, return_index=True)
    changed: dict[bytes, bytes] = {}
    for p, w in zip(lead[first].tolist(), width[first].tolist(), strict=True):
        q = b[p : p + w]
        m = _char_utf8(q.decode("utf-8"))
        if m is None:
            return None  # may compose with a neighbour under NFKC
        if m != q:
            changed[q] = m
    if any(q2 in m for m in changed.values() for q2 in changed):
        return None  # a replacement would be re-replaced by a later one (rare): whole text
    for q, m in changed.items():
        out = out.replace(q, m)  # whole UTF-8 sequences: self-synchronising, never partial
    return out


def prepare_utf8(text: str, mode: PrepareMode = "words") -> bytes:
    """UTF-8 bytes of :func:`prepare` -- the same tokens, faster on mostly-ASCII text.

    For ``words`` / ``chars`` mode, a text with a few non-ASCII characters is prepared
    character by character on its UTF-8 bytes: ``bytes.lower()`` for the ASCII part and a
    cached per-character mapping for each distinct non-ASCII character. That equals the
    whole-text definition whenever no character can compose with a neighbour under NFKC (checked
    per character; otherwise, and for ``jieba`` mode, mostly non-ASCII text or lone
    surrogates, this is ``prepare(text, mode).encode()``). The result may keep ASCII
    punctuation where :func:`prepare` has spaces; both separate tokens identically.
    """
    if text.isascii():
        return text.lower().encode("ascii")
    if mode != "jieba":
        if not _mostly_ascii(text):
            return _prepare_unsegmented(text, True).encode("utf-8")
        b = _prepare_utf8_mostly_ascii(text)
        if b is not None:
            return b
    return prepare(text, mode).encode("utf-8")


#: a code point's entry in :func:`_cp_table` not made yet, and one whose character the
#: per-character path cannot map to one code point (it may compose with a neighbour under NFKC,
#: or it becomes several characters): a text holding one takes :func:`prepare_utf8`
_CP_UNKNOWN = np.uint32(0xFFFFFFFE)
_CP_WHOLE = np.uint32(0xFFFFFFFF)
#: code points of texts that :func:`prepare_utf8_many` maps in one go (16 MiB of UTF-32 at most)
_MANY_CHARS = 1 << 22
#: fewer non-ASCII texts than this are prepared one by one (a single request's): mapping them
#: as an array costs a dozen NumPy calls, more than :func:`prepare_utf8` of a few posts
#: (``benchmarks/bench_prepare.py``)
_MANY_MIN = 8


@functools.cache
def _cp_table() -> np.ndarray:
    """Code point -> the one code point :func:`prepare_utf8`'s per-character path makes of it
    (``bytes.lower`` for ASCII, :func:`_char_utf8` for the others), or :data:`_CP_WHOLE`; the
    entries of non-ASCII code points are made as texts meet them (:data:`_CP_UNKNOWN` until
    then), so a corpus pays for its own alphabet only. Entries are only ever set to the value
    they always have, so threads that fill the same one race harmlessly."""
    table = np.full(0x110000, _CP_UNKNOWN, np.uint32)
    table[:0x80] = np.arange(0x80, dtype=np.uint32)
    table[ord("A") : ord("Z") + 1] += 32
    return table


def _fill_cp_table(table: np.ndarray, cps: np.ndarray) -> None:
    """Make the entries of the code points ``cps`` (that have none yet)."""
    for cp in np.unique(cps).tolist():
        c = chr(cp)
        if 0xD800 <= cp <= 0xDFFF:  # a lone surrogate: the whole-text path replaces it
            table[cp] = _CP_WHOLE
            continue
        m = _char_utf8(c)
        one = None if m is None else m.decode("utf-8")
        table[cp] = ord(one) if one is not None and len(one) == 1 else _CP_WHOLE


def prepare_utf8_many(texts: list[str], mode: PrepareMode = "words") -> list[bytes]:
    """:func:`prepare_utf8` of many texts, the same bytes or the same tokens, without a Python
    step per character: for ``words`` / ``chars`` mode, the non-ASCII texts are mapped character
    by character as one array of code points (each character alone, as
    :func:`prepare_utf8`'s per-character path maps it; a text holding a character that path
    cannot map to one character, or a lone surrogate, is prepared by :func:`prepare_utf8`);
    ``jieba`` mode segments them in one :func:`prepare_many` call.
    That is what mostly non-ASCII text (Chinese) gains: :func:`prepare_utf8` prepares it as a
    whole, a regular expression pass and NFKC over every character
    (``benchmarks/bench_prepare.py``)."""
    if mode == "jieba":  # one rjieba call for them all
        return [p.encode("utf-8") for p in prepare_many(texts, "jieba")]
    if len(texts) < _MANY_MIN:
        return [prepare_utf8(t, mode) for t in texts]
    out: list[bytes] = [b""] * len(texts)
    wide: list[int] = []
    for i, t in enumerate(texts):
        if t.isascii():
            out[i] = t.lower().encode("ascii")
        else:
            wide.append(i)
    if len(wide) < _MANY_MIN:  # a few: the array's fixed costs would outweigh them
        for i in wide:
            out[i] = prepare_utf8(texts[i], mode)
        return out
    lo = 0
    while lo < len(wide):
        hi, size = lo, 0
        while hi < len(wide) and (hi == lo or size + len(texts[wide[hi]]) <= _MANY_CHARS):
            size += len(texts[wide[hi]])
            hi += 1
        _map_many(texts, wide[lo:hi], mode, out)
        lo = hi
    return out


def _map_many(texts: list[str], idx: list[int], mode: PrepareMode, out: list[bytes]) -> None:
    """:func:`prepare_utf8_many` of the non-ASCII texts ``texts[i]``, ``i`` in ``idx``, into
    ``out[i]``."""
    # (a lone surrogate passes as its code point, whose entry sends its text to prepare_utf8)
    joined = "".join(texts[i] for i in idx)
    cps = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), np.uint32)
    table = _cp_table()
    mapped = table[cps]
    unknown = mapped == _CP_UNKNOWN
    if unknown.any():  # characters met for the first time
        _fill_cp_table(table, cps[unknown])
        mapped = table[cps]
    ends = np.cumsum(np.fromiter((len(texts[i]) for i in idx), np.int64, len(idx)))
    whole = set(np.searchsorted(ends, np.flatnonzero(mapped == _CP_WHOLE), side="right").tolist())
    # one character a character: the texts' offsets in the mapped string are their own
    s = mapped.tobytes().decode("utf-32-le", "replace") if len(whole) < len(idx) else ""
    a = 0
    for k, (i, b) in enumerate(zip(idx, ends.tolist(), strict=True)):
        out[i] = prepare_utf8(texts[i], mode) if k in whole else s[a:b].encode("utf-8")
        a = b


def prepare_many(texts: list[str], mode: PrepareMode = "words") -> list[str]:
    """:func:`prepare` of many texts; same result, but ``jieba`` segments all non-ASCII texts in
    one ``rjieba.cut`` call (joined with ``"\\n"``, which jieba never joins across and which
    prepared text cannot contain), which saves per-call overhead (the ``zh-long`` jieba case of
    ``benchmarks/bench_fingerprint.py``)."""
    if mode != "jieba":
        return [prepare(t, mode) for t in texts]
    pre = [_prepare_unsegmented(t, True) for t in texts]
    idx = [i for i, s in enumerate(pre) if not s.isascii()]
    if idx:
        import rjieba

        parts = " ".join(rjieba.cut("\n".join(pre[i] for i in idx))).split("\n")
        if len(parts) != len(idx):  # never expected; stay exact by segmenting one by one
            parts = [" ".join(rjieba.cut(pre[i])) for i in idx]
        for i, part in zip(idx, parts, strict=True):
            pre[i] = part
    return pre


def words(text: str) -> list[str]:
    """Unicode word tokens of ``text`` (NFKC, casefolded).

    >>> words("Hello, WORLD! Ｆｕｌｌ-width")
    ['hello', 'world', 'full', 'width']
    """
    return _TOKEN.findall(prepare(check_text(text), "words"))


def jieba_words(text: str) -> list[str]:
    """Chinese word segmentation (rjieba) of ``text``; ASCII words stay whole.

    >>> jieba_words("我们在北京 Hello")
    ['我们', '在', '北京', 'hello']
    """
    return _TOKEN.findall(prepare(check_text(text), "jieba"))


def word_shingles(tokens: list[str], n: int = 2) -> list[str]:
    """Space-joined ``n``-token shingles; fewer than ``n`` tokens give one shingle of all.

    >>> word_shingles(["a", "b", "c"], 2)
    ['a b', 'b c']
    >>> word_shingles(["a"], 3)
    ['a']
    """
    if not tokens:
        return []
    if len(tokens) < n:
        return [" ".join(tokens)]
    return [" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def compact_chars(text: str) -> str:
    """Prepared text with non-word runs replaced by one space and the ends stripped."""
    return _SEP_RUN.sub(" ", prepare(check_text(text), "chars")).strip(" ")


def char_ngrams(text: str, n: int = 3) -> list[str]:
    """Character ``n``-grams over :func:`compact_chars` of ``text``.

    >>> char_ngrams("Ab, c", 3)
    ['ab ', 'b c']
    >>> char_ngrams("中文", 3)
    ['中文']
    """
    s = compact_chars(text)
    if not s:
        return []
    if len(s) < n:
        return [s]
    return [s[i : i + n] for i in range(len(s) - n + 1)]


def cjk_share(text: str) -> float:
    """Share of Han ideographs among the word characters (``\\w``) of ``text``; 0.0 for none."""
    if text.isascii():
        return 0.0
    n_word = len(_NONWORD_RUN.sub("", text))
    if n_word == 0:
        return 0.0
    n_cjk = len(text) - len(CJK_RE.sub("", text))
    return n_cjk / n_word


def han_share(prepared: str) -> float:
    """Han ideographs / word characters of *prepared* text (:func:`prepare`, words mode): the
    quantity ``features="auto"`` compares with ``zh_threshold``. Word characters are the token
    characters ``[0-9a-z_]`` and every non-ASCII code point; 0.0 when there are none.

    >>> han_share(prepare("中文 ab"))
    0.5
    """
    if prepared.isascii():
        return 0.0
    n_word = len(_SEP_RUN.sub("", prepared))
    if n_word == 0:
        return 0.0
    n_han = len(prepared) - len(CJK_RE.sub("", prepared))
    return n_han / n_word


def detect_lang(text: str, *, zh_threshold: float = 0.3) -> str:
    """``"zh"`` if Han ideographs are at least ``zh_threshold`` of the word characters;
    ``"en"`` if most word characters are ASCII letters/digits; else ``"other"``.

    >>> detect_lang("今天天气很好 ok"), detect_lang("Hello there"), detect_lang("Привет мир")
    ('zh', 'en', 'other')
    """
    check_text(text)
    if text.isascii():
        return "en"
    if cjk_share(text) >= zh_threshold:
        return "zh"
    word_chars = _NONWORD_RUN.sub("", text)
    if not word_chars:
        return "en"
    n_ascii = sum(1 for c in word_chars if c < "\x80")
    return "en" if n_ascii * 2 >= len(word_chars) else "other"


def tokenize(
    text: str, features: str = "words", ngram: int | None = None, *, zh_threshold: float = 0.3
) -> list[str]:
    """Feature strings of ``text`` for ``features`` in ``words``, ``shingles``, ``jieba``,
    ``chars`` (``auto`` picks ``jieba`` for Chinese, ``words`` otherwise). Stop words are kept.

    >>> tokenize("a b c", "shingles", 2)
    ['a b', 'b c']
    """
    if features == "auto":
        features = "jieba" if detect_lang(text, zh_threshold=zh_threshold) == "zh" else "words"
    if features == "chars":
        return char_ngrams(text, ngram or 3)
    toks = jieba_words(text) if features == "jieba" else words(text)
    n = ngram or (2 if features == "shingles" else 1)
    return toks if n == 1 else word_shingles(toks, n)
