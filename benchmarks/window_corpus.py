"""The seeds' window as generated text: posts and articles in English and Chinese, with planted
near-duplicates arriving over time (``benchmarks/bench_window.py`` builds and runs it).

Every document is a pure function of ``(seed, position)``: its language, kind, length, topics
and tokens come from a counter-based hash (splitmix64) of the seed, a field number, the position
and the token's index. So any chunk of the stream, any planted copy's source and any probe can
be generated on its own, in any process, in NumPy (vectorised over a chunk), without holding
the stream in memory: a copy at position ``j`` regenerates its source's tokens from the source's
position, whichever chunk that is in.

The model (what it is and is not)
---------------------------------
* Kinds (``--mix``, default 80 / 15 / 5 %): *posts* of 5-60 tokens (log-uniform: most are
  short), *news* of 100-400 tokens, *articles* of 600-1,500 tokens. Language Chinese for a
  share ``zh`` (default 40 %), else English-like.
* English-like tokens: made-up words (letters without ``q`` and ``x``) drawn from a topic
  mixture as in ``bench_dedup.TopicCorpus``: Zipfian function words, a main topic (topic
  popularity Zipfian over 400 topics, each a Zipfian vocabulary of 2,000 words), for longer
  texts a second topic, and a Zipfian background over 200,000 words; sentences end with a full
  stop (a token ends one with probability 1/17) and start capitalised.
* Chinese tokens: CJK ideographs (U+4E00-U+6D3F, one token each for the verifier), the same
  mixture over 100 function characters, 400 topics of 300 characters and an 8,000-character
  background; sentences end with ``。``. Not modelled: grammar, real words, real character
  frequencies, markup, numbers, names.
* Roles along the stream: a share ``dup_rate`` (default 5 %) of positions are *planted
  near-duplicates* of an earlier original (half of the sources within the last hour's
  documents, half anywhere earlier in the window); a share ``neg_rate`` (default 2 %) are
  *planted non-duplicates near the threshold*. The rest are originals.
* Planted near-duplicates, by the source's kind: posts are edited (``k`` scattered tokens
  replaced, ``1 <= k <= n // 5``: Indel ratio ``1 - k / n`` from exactly the 0.8 threshold up),
  reposted (``RT @user:`` / ``//@user:`` in front and a ``#hashtag`` / ``#话题#`` behind; the
  verifier strips both) or copied exactly; news and articles are edited (about 3 % of the tokens
  replaced and, for a third, a sentence of at most a tenth of the text dropped) or copied
  exactly. Planted non-duplicates replace ``n // 5 + 1`` to ``n // 5 + n // 10 + 1`` scattered
  tokens: Indel ratio just below 0.8, containment the same.
* Replacement tokens come from a reserved vocabulary the generator never draws otherwise
  (English words containing ``q`` and ``x``, Chinese characters U+9E00-U+9F8F), so a replaced
  token matches nothing and the planted pair's token ratio is exactly ``1 - k / n``: the labels
  hold by construction, at the project's definition of a near duplicate (Indel ratio >= 0.8 on
  the verifier's tokens).

Time: position ``i`` of a window of ``n`` arrives at ``t0 + (i + 0.5) * hours * 3600 / n``
(1 M documents an hour at 48 M; scaled down with ``n``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any

import numba
import numpy as np
import numpy.typing as npt

GENERATOR_VERSION = 2

U64 = np.uint64
_M = (1 << 64) - 1
I64 = npt.NDArray[np.int64]

#: kinds of document and their token counts
KINDS = ("post", "news", "article")
LENGTHS = {"post": (5, 60), "news": (100, 400), "article": (600, 1500)}
#: token shares by kind: function words, the main topic, a second topic (the rest: background)
SHARES = np.array([(0.45, 0.45, 0.0), (0.40, 0.35, 0.10), (0.40, 0.35, 0.10)])

# vocabulary sizes and the token-id layout
EN_FUNC, EN_LEX, EN_TOPICS, EN_TOPIC_WORDS = 150, 200_000, 400, 2_000
ZH_FUNC, ZH_CHARS, ZH_TOPICS, ZH_TOPIC_CHARS = 100, 8_000, 400, 300
EN_EDIT, ZH_EDIT = 20_000, 400
EN0 = 0  # English function words, then the lexicon
ZH0 = EN0 + EN_FUNC + EN_LEX  # Chinese characters, most frequent first
EE0 = ZH0 + ZH_CHARS  # reserved English replacement words
ZE0 = EE0 + EN_EDIT  # reserved Chinese replacement characters
N_TOKENS = ZE0 + ZH_EDIT
#: render pieces: 8 variants per token (bit 0: ends a sentence, bit 1: starts one, bit 2: the
#: document's last token, no space after it), then decorations, then a JSONL line's frame
N_USERS = 2_000  # repost handles and hashtags per language
DEC0 = 8 * N_TOKENS
DEC_EN_RT, DEC_ZH_RT, DEC_EN_TAG, DEC_ZH_TAG = (DEC0 + k * N_USERS for k in range(4))
DIGIT0 = DEC0 + 4 * N_USERS  # "0".."9"
DOT, HEAD, MID_TIME, MID_TEXT, TAIL, HEAD_TEXT = range(DIGIT0 + 10, DIGIT0 + 16)
N_PIECES = DIGIT0 + 16

ROLE_ORIGINAL, ROLE_DUP, ROLE_NEG = 0, 1, 2
#: how a planted copy was made
EDIT, REPOST, EXACT, NEAR = 1, 2, 3, 4
SUBKIND_NAMES = {0: "original", EDIT: "edit", REPOST: "repost", EXACT: "exact", NEAR: "near"}

#: where probe positions live (never a window or load position)
PROBE_BASE = 1 << 40

# hash fields
(F_LANG, F_KIND, F_LEN, F_T1, F_T2, F_TOK, F_SENT, F_ROLE, F_SRC, F_SRC2, F_SUB, F_K, F_EPOS,
 F_ETOK, F_DROP, F_DEC, F_PROBE, F_PSRC) = range(1, 19)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class WindowSpec:
    """What the stream is: every generated byte is a function of these fields."""

    n: int
    seed: int = 1
    t0: float = 0.0
    hours: int = 48
    zh: float = 0.4
    mix: tuple[float, float, float] = (0.80, 0.15, 0.05)
    dup_rate: float = 0.05
    neg_rate: float = 0.02

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if len(self.mix) != 3 or abs(sum(self.mix) - 1.0) > 1e-9 or min(self.mix) < 0:
            raise ValueError(f"mix must be three non-negative shares summing to 1, got {self.mix}")
        if not 0 <= self.zh <= 1:
            raise ValueError(f"zh must be in [0, 1], got {self.zh}")
        if self.dup_rate < 0 or self.neg_rate < 0 or self.dup_rate + self.neg_rate >= 0.5:
            raise ValueError("dup_rate and neg_rate must be >= 0 and together below 0.5")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "generator_version": GENERATOR_VERSION}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WindowSpec:
        d = {k: v for k, v in d.items() if k != "generator_version"}
        d["mix"] = tuple(d["mix"])
        return cls(**d)

    @property
    def seconds_per_doc(self) -> float:
        return self.hours * 3600.0 / self.n

    def times_ms(self, pos: I64) -> I64:
        """Arrival times of window positions, in unix milliseconds."""
        t = self.t0 + (pos.astype(np.float64) + 0.5) * self.seconds_per_doc
        return np.floor(t * 1000.0).astype(np.int64)


# ------------------------------------------------------------------------------------------
# counter-based randomness


def _mix(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """splitmix64's finaliser (a bijection of 64-bit words), element-wise."""
    x = x ^ (x >> U64(30))
    x = x * U64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> U64(27))
    x = x * U64(0x94D049BB133111EB)
    return x ^ (x >> U64(31))


def _seed_start(seed: int) -> int:
    """Where ``seed``'s hashes start in the counter space that positions step through.

    Version 1 started seed ``s`` at ``s * 0x9E37...``, the very step a position adds, so seed
    ``s`` at position ``p`` read seed 1 at position ``p + s - 1``: two seeds gave one stream
    shifted by their difference (``trace_stalls.py``'s warm-up, seed + 1000, then held 4,000
    of the 5,000 texts it measured). A seed now starts at its splitmix64 hash, ~2**63 positions
    from any other seed's start in expectation (every position a run generates is far below
    that). Seed 1 keeps version 1's start, so its corpora (``bench_window.py``'s default, which
    its figures in the docs were measured on) are byte for byte the same."""
    if seed == 1:
        return 0x9E3779B97F4A7C15
    return int(_mix(np.array([seed & _M], dtype=U64))[0])


def _key(seed: int, field: int) -> np.uint64:
    return U64((_seed_start(seed) + field * 0xD1B54A32D192ED03 + 0x632BE59BD9B4E019) & _M)


def hashes(seed: int, field: int, pos: I64) -> npt.NDArray[np.uint64]:
    """One 64-bit hash per position for ``field``."""
    return _mix(_mix(pos.astype(np.uint64) * U64(0x9E3779B97F4A7C15) + _key(seed, field)))


def uniform(seed: int, field: int, pos: I64) -> npt.NDArray[np.float64]:
    """One uniform in [0, 1) per position for ``field``."""
    return (hashes(seed, field, pos) >> U64(11)).astype(np.float64) * 2.0**-53


def _token_index(lens: I64) -> I64:
    """Each token's index inside its document (documents of ``lens`` tokens, flat)."""
    starts = np.cumsum(lens) - lens
    return np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(starts, lens)


def _per_token(base: npt.NDArray[np.uint64], lens: I64, j: I64) -> npt.NDArray[np.uint64]:
    """One hash per token: its document's ``base`` mixed with its index ``j``."""
    return _mix(np.repeat(base, lens) + j.astype(np.uint64) * U64(0xD6E8FEB86659FD93))


def _u32(h: npt.NDArray[np.uint64], high: bool) -> npt.NDArray[np.float64]:
    """A uniform in [0, 1) from 32 bits of ``h``."""
    v = (h >> U64(32)) if high else (h & U64(0xFFFFFFFF))
    return v.astype(np.float64) * 2.0**-32


# ------------------------------------------------------------------------------------------
# kernels (numba); FAST = False runs their NumPy twins (the reference the tests compare with)

FAST = True


@numba.njit(inline="always")
def _mix64(x: Any) -> Any:  # pragma: no cover - numba
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@numba.njit(inline="always")
def _rank(table: Any, u: Any) -> int:  # pragma: no cover - numba
    """How many entries of the sorted ``table`` are <= ``u``."""
    lo, hi = 0, table.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if table[mid] <= u:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(cache=True, nogil=True)
def _tokens_kernel(
    tok, sent, lens, zh, thr, t1, t2, en_topics, zh_topics,
    en_func, en_topic, en_bg, zh_func, zh_topic, zh_bg, ids, var,
):  # type: ignore[no-untyped-def]  # pragma: no cover - numba  # fmt: skip
    c_tok = np.uint64(0xD6E8FEB86659FD93)
    mask = np.uint64(0xFFFFFFFF)
    sent_end = np.uint64(2**32 // 17)
    k = 0
    for d in range(lens.shape[0]):
        n = lens[d]
        prev_end = True
        for j in range(n):
            ju = np.uint64(j) * c_tok
            h = _mix64(tok[d] + ju)
            hi = h >> np.uint64(32)
            lo = h & mask
            cat = (hi >= thr[d, 0]) + (hi >= thr[d, 1]) + (hi >= thr[d, 2])
            if zh[d]:
                if cat == 0:
                    v = ZH0 + _rank(zh_func, lo)
                elif cat == 1:
                    v = zh_topics[t1[d], _rank(zh_topic, lo)]
                elif cat == 2:
                    v = zh_topics[t2[d], _rank(zh_topic, lo)]
                else:
                    v = ZH0 + _rank(zh_bg, lo)
            else:
                if cat == 0:
                    v = EN0 + _rank(en_func, lo)
                elif cat == 1:
                    v = en_topics[t1[d], _rank(en_topic, lo)]
                elif cat == 2:
                    v = en_topics[t2[d], _rank(en_topic, lo)]
                else:
                    v = EN0 + EN_FUNC + _rank(en_bg, lo)
            ids[k] = v
            end = ((_mix64(sent[d] + ju) >> np.uint64(32)) < sent_end) or j == n - 1
            var[k] = (1 if end else 0) | (2 if prev_end else 0)
            prev_end = end
            k += 1


@numba.njit(cache=True, nogil=True)
def _render_kernel(pieces, start, length, buf, out):  # type: ignore[no-untyped-def]  # pragma: no cover - numba  # fmt: skip
    o = 0
    for i in range(pieces.shape[0]):
        p = pieces[i]
        s = start[p]
        for b in range(length[p]):
            out[o + b] = buf[s + b]
        o += length[p]


# ------------------------------------------------------------------------------------------
# vocabulary and the render pool (built once per process, independent of the seed)


def _made_up(rng: np.random.Generator, n: int, lo: int, hi: int) -> list[str]:
    """``n`` pronounceable made-up words of ``lo..hi`` letters (never a q or an x)."""
    c = np.array([ord(x) for x in "bcdfghjklmnprstvwyz"], np.uint32)
    v = np.array([ord(x) for x in "aeiou"], np.uint32)
    lens = rng.integers(lo, hi + 1, n)
    pos = np.arange(hi)
    is_v = (pos[None, :] % 2 == 1) ^ (rng.random(n) < 0.3)[:, None]
    chars = np.where(is_v, v[rng.integers(0, v.size, (n, hi))], c[rng.integers(0, c.size, (n, hi))])
    chars[pos[None, :] >= lens[:, None]] = 0
    return list(np.ascontiguousarray(chars).view(f"<U{hi}").ravel().tolist())


def _word_pieces(w: str) -> list[bytes]:
    c = w.capitalize()
    return [
        ((c if v & 2 else w) + ("." if v & 1 else "") + ("" if v & 4 else " ")).encode()
        for v in range(8)
    ]


def _char_pieces(ch: str) -> list[bytes]:
    return [(ch + ("。" if v & 1 else "")).encode() for v in range(8)]


class Pool:
    """Every piece of text a document is made of, as bytes in one buffer (see ``N_PIECES``)."""

    def __init__(self) -> None:
        rng = np.random.default_rng(20261129)
        en = _made_up(rng, EN_FUNC, 1, 4) + _made_up(rng, EN_LEX, 3, 11)
        zh = [chr(int(c)) for c in 0x4E00 + rng.permutation(ZH_CHARS)]
        # reserved replacements: never drawn otherwise (no q or x in the lexicon; U+9E00..)
        en_edit = ["q" + w + "x" for w in _made_up(rng, EN_EDIT, 2, 6)]
        zh_edit = [chr(0x9E00 + k) for k in range(ZH_EDIT)]
        pieces: list[bytes] = []
        for w in en:
            pieces += _word_pieces(w)
        for ch in zh:
            pieces += _char_pieces(ch)
        for w in en_edit:
            pieces += _word_pieces(w)
        for ch in zh_edit:
            pieces += _char_pieces(ch)
        users = _made_up(rng, N_USERS, 3, 8)
        handles = [
            f"{w}{int(d)}" for w, d in zip(users, rng.integers(0, 1000, N_USERS), strict=True)
        ]
        names = ["".join(zh[int(k)] for k in rng.integers(0, 2000, int(m))) for m in rng.integers(2, 5, N_USERS)]  # fmt: skip
        tags = _made_up(rng, N_USERS, 4, 10)
        pieces += [f"RT @{h}: ".encode() for h in handles]
        pieces += [f"//@{h}: ".encode() for h in names]
        pieces += [f" #{t}".encode() for t in tags]
        pieces += [f" #{h}#".encode() for h in names]
        pieces += [str(d).encode() for d in range(10)]
        pieces += [b".", b'{"id":"w', b'","time":', b',"text":"', b'"}\n', b'{"text":"']
        assert len(pieces) == N_PIECES, (len(pieces), N_PIECES)
        # narrow types: the render kernel's lookups are cache misses, fewer lines fit more
        self.length = np.fromiter((len(p) for p in pieces), np.uint8, len(pieces))
        self.start = (np.cumsum(self.length, dtype=np.int64) - self.length).astype(np.int32)
        self.buf = np.frombuffer(b"".join(pieces), np.uint8)
        self.en_topics = (
            EN0 + EN_FUNC + rng.integers(0, EN_LEX, (EN_TOPICS, EN_TOPIC_WORDS))
        ).astype(np.int32)
        self.zh_topics = (ZH0 + rng.integers(0, ZH_CHARS, (ZH_TOPICS, ZH_TOPIC_CHARS))).astype(
            np.int32
        )
        # Zipf laws as integer tables (a 32-bit uniform's rank: the count of entries <= it), so
        # the kernel and the NumPy reference draw the same ranks bit for bit
        self.zipf = {
            name: _zipf_table(n, s_)
            for name, n, s_ in (
                ("en_func", EN_FUNC, 1.0),
                ("en_topic", EN_TOPIC_WORDS, 1.0),
                ("en_bg", EN_LEX, 1.05),
                ("zh_func", ZH_FUNC, 1.0),
                ("zh_topic", ZH_TOPIC_CHARS, 1.0),
                ("zh_bg", ZH_CHARS, 1.05),
                ("topics", EN_TOPICS, 0.8),
            )
        }

    def render(self, pieces: I64, counts: I64) -> tuple[bytes, I64]:
        """The bytes of documents made of ``pieces`` (``counts`` per document, in order): one
        buffer and each document's end offset in it."""
        lens = self.length[pieces].astype(np.int64)
        cum = np.cumsum(lens)
        ends = np.zeros(len(counts), np.int64)
        if not len(cum):
            return b"", ends
        ends = cum[np.maximum(np.cumsum(counts) - 1, 0)]
        ends[counts == 0] = 0
        ends = np.maximum.accumulate(ends)
        if FAST:
            out = np.empty(int(cum[-1]), np.uint8)
            _render_kernel(pieces, self.start, self.length, self.buf, out)
            return out.tobytes(), ends
        return self.render_reference(pieces, lens, cum), ends

    def render_reference(self, pieces: I64, lens: I64, cum: I64) -> bytes:
        """NumPy twin of the render kernel: one gather of every output byte."""
        ps = self.start[pieces].astype(np.int64)
        step = np.ones(int(cum[-1]), np.int64)
        step[0] = ps[0]
        step[cum[:-1]] = ps[1:] - (ps[:-1] + lens[:-1] - 1)
        np.cumsum(step, out=step)
        return bytes(self.buf[step].tobytes())


def _zipf_table(n: int, s: float) -> npt.NDArray[np.uint64]:
    """Rank boundaries of the continuous Zipf law ``p(x) ~ x^-s`` on [1, n + 1), scaled to
    32 bits: rank ``r`` covers ``x`` in [r + 1, r + 2)."""
    x = np.arange(2, n + 1, dtype=np.float64)
    if abs(s - 1.0) < 1e-9:
        cdf = np.log(x) / np.log(n + 1.0)
    else:
        cdf = (x ** (1.0 - s) - 1.0) / ((n + 1.0) ** (1.0 - s) - 1.0)
    return np.minimum(np.floor(cdf * 2.0**32), 2.0**32 - 1).astype(np.uint32)


@lru_cache(maxsize=1)
def pool() -> Pool:
    return Pool()


# ------------------------------------------------------------------------------------------
# the stream: roles, sources, documents


@dataclasses.dataclass
class Attrs:
    """Per document: Chinese or not, kind (index into KINDS), token count."""

    zh: npt.NDArray[np.bool_]
    kind: I64
    length: I64


def attrs(spec: WindowSpec, pos: I64) -> Attrs:
    """Language, kind and length of the original document at each position."""
    s = spec.seed
    zh = uniform(s, F_LANG, pos) < spec.zh
    u = uniform(s, F_KIND, pos)
    kind = (u >= spec.mix[0]).astype(np.int64) + (u >= spec.mix[0] + spec.mix[1])
    ul = uniform(s, F_LEN, pos)
    length = np.empty(len(pos), np.int64)
    for k, name in enumerate(KINDS):
        sel = kind == k
        lo, hi = LENGTHS[name]
        if name == "post":  # log-uniform: most posts are short
            v = np.exp(np.log(lo) + ul[sel] * (np.log(hi + 1) - np.log(lo)))
        else:
            v = lo + ul[sel] * (hi - lo + 1)
        length[sel] = np.clip(v.astype(np.int64), lo, hi)
    return Attrs(zh, kind, length)


_C_TOK = U64(0xD6E8FEB86659FD93)
_SENT_END = U64(2**32 // 17)  # a token ends a sentence with probability 1/17


def _token_inputs(spec: WindowSpec, pos: I64, a: Attrs) -> tuple[Any, ...]:
    """Per document: the token and sentence hash bases, category thresholds, topics."""
    p = pool()
    thr = np.floor(np.cumsum(SHARES[a.kind], axis=1) * 2.0**32).astype(np.uint64)
    topics = p.zipf["topics"]
    t1 = np.searchsorted(topics, hashes(spec.seed, F_T1, pos) >> U64(32), side="right")
    t2 = np.searchsorted(topics, hashes(spec.seed, F_T2, pos) >> U64(32), side="right")
    return (
        hashes(spec.seed, F_TOK, pos),
        hashes(spec.seed, F_SENT, pos),
        thr,
        t1.astype(np.int64),
        t2.astype(np.int64),
    )


def original_tokens(spec: WindowSpec, pos: I64, a: Attrs) -> tuple[I64, I64]:
    """Token ids and variants (bit 0: ends a sentence, bit 1: starts one) of the original
    documents at ``pos``, flat (``a.length`` per document).

    Each token draws one 64-bit hash of its document's base and its index: the high 32 bits
    pick the category (function word, main topic, second topic, background) by the kind's
    shares, the low 32 bits the rank in that category's Zipf law."""
    if not len(pos):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if not FAST:
        return original_tokens_reference(spec, pos, a)
    p = pool()
    tok, sent, thr, t1, t2 = _token_inputs(spec, pos, a)
    total = int(a.length.sum())
    ids = np.empty(total, np.int64)
    var = np.empty(total, np.int64)
    z = p.zipf
    _tokens_kernel(
        tok, sent, a.length, a.zh, thr, t1, t2, p.en_topics, p.zh_topics,
        z["en_func"], z["en_topic"], z["en_bg"], z["zh_func"], z["zh_topic"], z["zh_bg"],
        ids, var,
    )  # fmt: skip
    return ids, var


def original_tokens_reference(spec: WindowSpec, pos: I64, a: Attrs) -> tuple[I64, I64]:
    """NumPy twin of :func:`original_tokens`'s kernel (the same tokens, vectorised)."""
    p = pool()
    tok, sent, thr, t1, t2 = _token_inputs(spec, pos, a)
    lens = a.length
    j = _token_index(lens).astype(np.uint64)
    h = _mix(np.repeat(tok, lens) + j * _C_TOK)
    hi, lo = h >> U64(32), h & U64(0xFFFFFFFF)
    cat = sum((hi >= np.repeat(thr[:, c], lens)).astype(np.int64) for c in range(3))
    zh = np.repeat(a.zh, lens)
    tt1, tt2 = np.repeat(t1, lens), np.repeat(t2, lens)
    z = p.zipf
    ids = np.empty(len(h), np.int64)
    langs = (
        (~zh, "en", p.en_topics, EN0, EN0 + EN_FUNC),
        (zh, "zh", p.zh_topics, ZH0, ZH0),
    )
    for lang, name, topics, f0, bg0 in langs:
        sel = lang & (cat == 0)
        ids[sel] = f0 + np.searchsorted(z[name + "_func"], lo[sel], side="right")
        for tt, c in ((tt1, 1), (tt2, 2)):
            sel = lang & (cat == c)
            ids[sel] = topics[tt[sel], np.searchsorted(z[name + "_topic"], lo[sel], side="right")]
        sel = lang & (cat == 3)
        ids[sel] = bg0 + np.searchsorted(z[name + "_bg"], lo[sel], side="right")
    ends = (_mix(np.repeat(sent, lens) + j * _C_TOK) >> U64(32)) < _SENT_END
    ends[np.cumsum(lens) - 1] = True
    starts = np.empty(len(ids), bool)
    starts[0] = True
    starts[1:] = ends[:-1]
    return ids, ends.astype(np.int64) | (starts.astype(np.int64) << 1)


def roles(spec: WindowSpec, pos: I64) -> I64:
    """ROLE_ORIGINAL / ROLE_DUP / ROLE_NEG of stream positions (from the hash alone)."""
    u = uniform(spec.seed, F_ROLE, pos)
    out = np.where(u < spec.dup_rate, ROLE_DUP, ROLE_ORIGINAL)
    out[(u >= spec.dup_rate) & (u < spec.dup_rate + spec.neg_rate)] = ROLE_NEG
    return out.astype(np.int64)


def _walk_to_original(spec: WindowSpec, src: I64, step: int, hi: int) -> I64:
    """Each ``src`` moved by ``step`` until it is an original in [0, hi); -1 where none is
    within 32 steps."""
    src = src.copy()
    todo = np.flatnonzero(src >= 0)
    for _ in range(32):
        if not len(todo):
            break
        todo = todo[roles(spec, src[todo]) != ROLE_ORIGINAL]
        src[todo] += step
        out = (src[todo] < 0) | (src[todo] >= hi)
        src[todo[out]] = -1
        todo = todo[~out]
    src[todo] = -1
    return src


def plan(spec: WindowSpec, pos: I64) -> tuple[I64, I64]:
    """(role, source) of stream positions: the earlier original a planted copy is made from
    (-1 for originals; a copy with no original before it becomes an original)."""
    role = roles(spec, pos)
    src = np.full(len(pos), -1, np.int64)
    copy = np.flatnonzero(role != ROLE_ORIGINAL)
    if len(copy):
        p = pos[copy]
        hour = max(1, spec.n // spec.hours)
        recent = uniform(spec.seed, F_SRC, p) < 0.5  # half within the last hour's documents
        span = np.where(recent, np.minimum(p, hour), p)
        back = 1 + (uniform(spec.seed, F_SRC2, p) * span).astype(np.int64)
        src[copy] = _walk_to_original(spec, np.where(p > 0, p - back, -1), -1, int(p.max()))
    role[src < 0] = ROLE_ORIGINAL
    return role, src


def subkinds(spec: WindowSpec, pos: I64, role: I64, kind: I64) -> I64:
    """How each planted copy is made (EDIT, REPOST, EXACT for near duplicates, NEAR for
    non-duplicates; 0 for originals), from its own position and its source's kind."""
    u = uniform(spec.seed, F_SUB, pos)
    dup = np.where(
        kind == 0,
        np.where(u < 0.45, EDIT, np.where(u < 0.80, REPOST, EXACT)),
        np.where(u < 0.70, EDIT, EXACT),
    )
    return np.where(role == ROLE_DUP, dup, np.where(role == ROLE_NEG, NEAR, 0)).astype(np.int64)


def describe(spec: WindowSpec, pos: I64) -> dict[str, I64]:
    """What the stream positions ``pos`` are, without generating their texts: role, source
    (-1 for originals), how a copy was made (subkind), kind and language of the text."""
    role, src = plan(spec, pos)
    a = attrs(spec, np.where(src >= 0, src, pos))
    return {
        "role": role,
        "source": src,
        "subkind": subkinds(spec, pos, role, a.kind),
        "kind": a.kind,
        "zh": a.zh.astype(np.int64),
    }


def slice_name(label: bool, how: int, kind: int, zh: bool) -> str:
    """``dup|non-dup / kind / how / language``: the slices recall and precision are given by."""
    what = SUBKIND_NAMES[how] if how else "random"
    return f"{'dup' if label else 'non-dup'}/{KINDS[kind]}/{what}/{'zh' if zh else 'en'}"


def documents(spec: WindowSpec, pos: I64, src: I64, role: I64) -> tuple[I64, I64, dict[str, Any]]:
    """The documents at ``pos`` (copies of ``src`` where ``role`` says so) as render pieces:
    (pieces, pieces per document, info: each one's zh / kind / subkind / token count)."""
    s = spec.seed
    m = len(pos)
    tp = np.where(src >= 0, src, pos)  # whose original tokens a text starts from
    a = attrs(spec, tp)
    lens = a.length
    ids, var = original_tokens(spec, tp, a)
    sub = subkinds(spec, pos, role, a.kind)
    uk = uniform(s, F_K, pos)
    k = np.zeros(m, np.int64)
    post_edit = (sub == EDIT) & (a.kind == 0)
    long_edit = (sub == EDIT) & (a.kind != 0)
    near = sub == NEAR
    # Indel ratio 1 - k/n: posts from exactly 0.8 up, long texts ~3 %, non-duplicates just below
    k[post_edit] = 1 + (uk[post_edit] * np.maximum(1, lens[post_edit] // 5)).astype(np.int64)
    k[long_edit] = 1 + (uk[long_edit] * np.maximum(1, 3 * lens[long_edit] // 100)).astype(np.int64)
    k[near] = lens[near] // 5 + 1 + (uk[near] * (lens[near] // 10 + 1)).astype(np.int64)
    k = np.minimum(k, lens)
    ends = np.cumsum(lens)
    starts = ends - lens
    edited = np.flatnonzero(k > 0)
    keep: npt.NDArray[np.bool_] | None = None
    if len(edited):
        # the k tokens of a document with the smallest keys are replaced (scattered)
        el = lens[edited]
        tok = np.repeat(starts[edited], el) + _token_index(el)
        ej = _token_index(el)
        key = _per_token(hashes(s, F_EPOS, pos[edited]), el, ej)
        d = np.repeat(np.arange(len(edited)), el)
        order = np.lexsort((key, d))
        rank = np.empty(len(tok), np.int64)
        rank[order] = np.arange(len(tok)) - np.repeat(np.cumsum(el) - el, el)[order]
        hit = rank < np.repeat(k[edited], el)
        rep = _per_token(hashes(s, F_ETOK, pos[edited]), el, ej)[hit]
        zh_hit = np.repeat(a.zh[edited], el)[hit]
        ids[tok[hit]] = np.where(
            zh_hit,
            ZE0 + (rep % U64(ZH_EDIT)).astype(np.int64),
            EE0 + (rep % U64(EN_EDIT)).astype(np.int64),
        )
        # a third of long edits drop a "sentence": a span of at most a tenth of the text
        drop = long_edit[edited] & (uniform(s, F_DROP, pos[edited]) < 1 / 3)
        if drop.any():
            ud = hashes(s, F_DROP, pos[edited])
            span = np.minimum(4 + (_u32(ud, True) * 27).astype(np.int64), el // 10)
            first = (_u32(ud, False) * (el - span + 1)).astype(np.int64)
            gone = (
                np.repeat(drop, el)
                & (ej >= np.repeat(first, el))
                & (ej < np.repeat(first + span, el))
            )
            keep = np.ones(len(ids), bool)
            keep[tok[gone]] = False
            lens = lens.copy()
            lens[edited[drop]] -= span[drop]
    if keep is not None:
        ids, var = ids[keep], var[keep]
    pieces = 8 * ids + var
    pieces[np.cumsum(lens) - 1] |= 4  # the last token: no space after it
    # reposts: a handle in front, a hashtag behind
    repost = np.flatnonzero(sub == REPOST)
    if not len(repost):
        return pieces, lens, {"zh": a.zh, "kind": a.kind, "subkind": sub, "tokens": lens}
    hd = hashes(s, F_DEC, pos[repost])
    zr = a.zh[repost]
    pre = np.where(zr, DEC_ZH_RT, DEC_EN_RT) + (hd % U64(N_USERS)).astype(np.int64)
    suf = np.where(zr, DEC_ZH_TAG, DEC_EN_TAG) + ((hd >> U64(32)) % U64(N_USERS)).astype(np.int64)
    counts = lens.copy()
    counts[repost] += 2
    out = np.empty(int(counts.sum()), np.int64)
    shift = np.zeros(m, np.int64)
    shift[repost] = 1
    out_start = np.cumsum(counts) - counts
    tok_start = np.cumsum(lens) - lens
    doc = np.repeat(np.arange(m), lens)
    out[np.arange(len(pieces)) - tok_start[doc] + out_start[doc] + shift[doc]] = pieces
    out[out_start[repost]] = pre
    out[out_start[repost] + counts[repost] - 1] = suf
    return out, counts, {"zh": a.zh, "kind": a.kind, "subkind": sub, "tokens": lens}


def frame(pieces: I64, counts: I64, before: I64, after: I64) -> tuple[I64, I64]:
    """Pieces ``before`` (m, a) and ``after`` (m, b) each document's pieces."""
    m = len(counts)
    nb, na = before.shape[1], after.shape[1]
    total = counts + nb + na
    out = np.empty(int(total.sum()), np.int64)
    start = np.cumsum(total) - total
    out[(start[:, None] + np.arange(nb)[None, :]).ravel()] = before.ravel()
    doc = np.repeat(np.arange(m), counts)
    inner = np.arange(len(pieces)) - np.repeat(np.cumsum(counts) - counts, counts)
    out[start[doc] + nb + inner] = pieces
    out[(start[:, None] + nb + counts[:, None] + np.arange(na)[None, :]).ravel()] = after.ravel()
    return out, total


def _digits(values: I64, width: int) -> I64:
    """Zero-padded decimal digits as digit pieces, (len(values), width)."""
    p = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return DIGIT0 + (values[:, None] // p[None, :]) % 10


ID_WIDTH = 10


def doc_id(pos: int) -> str:
    """The id of stream position ``pos`` (what the JSONL chunks carry)."""
    return f"w{pos:0{ID_WIDTH}d}"


def _const(m: int, *pieces: int) -> I64:
    return np.broadcast_to(np.array(pieces, np.int64), (m, len(pieces)))


def jsonl(spec: WindowSpec, pos: I64) -> tuple[bytes, dict[str, Any]]:
    """``{"id":"w..","time":..,"text":".."}`` lines of window positions ``pos`` (fixed-width
    ids, times in seconds to the millisecond; generated texts need no JSON escaping), rendered
    in one pass; and what they hold."""
    role, src = plan(spec, pos)
    pieces, counts, info = documents(spec, pos, src, role)
    m = len(pos)
    ms = spec.times_ms(pos)
    before = np.concatenate(
        [
            _const(m, HEAD),
            _digits(pos, ID_WIDTH),
            _const(m, MID_TIME),
            _digits(ms // 1000, 10),
            _const(m, DOT),
            _digits(ms % 1000, 3),
            _const(m, MID_TEXT),
        ],
        axis=1,
    )
    pieces, counts = frame(pieces, counts, before, _const(m, TAIL))
    buf, _ = pool().render(pieces, counts)
    text_bytes = len(buf) - m * int(pool().length[before[0]].sum() + pool().length[TAIL])
    stats = {
        "docs": m,
        "text_bytes": text_bytes,
        "roles": np.bincount(role, minlength=3),
        "kinds": np.bincount(info["kind"], minlength=3),
        "zh": int(info["zh"].sum()),
        "subkinds": np.bincount(info["subkind"], minlength=5),
    }
    return buf, stats


def texts(spec: WindowSpec, pos: I64, src: I64, role: I64) -> tuple[list[str], dict[str, Any]]:
    """The documents at ``pos`` (see :func:`documents`) as Python strings."""
    pieces, counts, info = documents(spec, pos, src, role)
    buf, ends = pool().render(pieces, counts)
    b = ends.tolist()
    return [buf[x:y].decode() for x, y in zip([0, *b[:-1]], b, strict=True)], info


# ------------------------------------------------------------------------------------------
# the window as JSONL chunks

#: documents rendered at once (bounds the temporary arrays: ~25 bytes per text byte)
RENDER_BATCH = 20_000


def write_chunk(spec: WindowSpec, lo: int, hi: int, path: str, level: int = 3) -> dict[str, Any]:
    """Write window positions [lo, hi) as a zstd-compressed JSONL file (temp + rename)."""
    import zstandard

    t0 = time.perf_counter()
    c0 = time.process_time()
    agg: dict[str, Any] = {}
    render_s = 0.0
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh, zstandard.ZstdCompressor(level=level).stream_writer(fh) as zw:
        for a in range(lo, hi, RENDER_BATCH):
            r0 = time.process_time()
            lines, stats = jsonl(spec, np.arange(a, min(hi, a + RENDER_BATCH), dtype=np.int64))
            render_s += time.process_time() - r0
            zw.write(lines)
            for key, v in stats.items():
                agg[key] = agg.get(key, 0) + v
    os.replace(tmp, path)
    out = {key: (v.tolist() if isinstance(v, np.ndarray) else int(v)) for key, v in agg.items()}
    out.update(
        path=path,
        lo=lo,
        hi=hi,
        file_bytes=os.path.getsize(path),
        seconds=time.perf_counter() - t0,
        render_cpu_s=render_s,
        cpu_s=time.process_time() - c0,
    )
    return out


def _write_chunk_job(job: tuple[dict[str, Any], int, int, str]) -> dict[str, Any]:
    d, lo, hi, path = job
    return write_chunk(WindowSpec.from_dict(d), lo, hi, path)


def as_json(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists): a spec compared with a
    manifest's."""
    return json.loads(json.dumps(value))


def generate(spec: WindowSpec, out: Path, *, chunk: int = 250_000, workers: int = 1) -> dict[str, Any]:  # fmt: skip
    """Write the window as ``out/window-NNNNN.jsonl.zst`` chunks, ``workers`` processes at a
    time, and ``out/corpus.json`` (the spec, the chunks, what they hold, how fast). A folder
    whose corpus.json has the same spec and all its chunks is reused as it is."""
    out.mkdir(parents=True, exist_ok=True)
    manifest = out / "corpus.json"
    if manifest.exists():
        old = json.loads(manifest.read_text())
        if old.get("spec") == as_json(spec.to_dict()) and all(
            Path(c["path"]).exists() for c in old["chunks"]
        ):
            return {**old, "reused": True}
    bounds = [(lo, min(spec.n, lo + chunk)) for lo in range(0, spec.n, chunk)]
    jobs = [
        (spec.to_dict(), lo, hi, str(out / f"window-{i:05d}.jsonl.zst"))
        for i, (lo, hi) in enumerate(bounds)
    ]
    t0 = time.perf_counter()
    if workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as ex:
            chunks = list(ex.map(_write_chunk_job, jobs))
    else:
        chunks = [_write_chunk_job(j) for j in jobs]
    wall = time.perf_counter() - t0

    def total(key: str) -> Any:
        return sum(np.asarray(c[key]) for c in chunks)

    cpu, render = float(total("cpu_s")), float(total("render_cpu_s"))
    res = {
        "spec": spec.to_dict(),
        "chunks": [
            {"path": c["path"], "lo": c["lo"], "hi": c["hi"], "file_bytes": c["file_bytes"]}
            for c in chunks
        ],
        "docs": int(total("docs")),
        "text_bytes": int(total("text_bytes")),
        "file_bytes": int(total("file_bytes")),
        "roles": dict(
            zip(
                ("original", "near_duplicate", "non_duplicate"),
                total("roles").tolist(),
                strict=True,
            )
        ),
        "kinds": dict(zip(KINDS, total("kinds").tolist(), strict=True)),
        "zh_docs": int(total("zh")),
        "copies_by_how": {
            SUBKIND_NAMES[i]: int(v) for i, v in enumerate(total("subkinds").tolist())
        },
        "generation": {
            "workers": min(workers, len(jobs)),
            "wall_s": wall,
            "docs_per_s": spec.n / wall if wall > 0 else None,
            "cpu_s": cpu,
            "cpu_us_per_doc": 1e6 * cpu / spec.n,
            "render_cpu_s": render,
            "render_docs_per_cpu_s": spec.n / render if render > 0 else None,
            "format": f"JSONL (id, time, text), zstd level 3, chunks of up to {chunk:,} documents",
        },
        "reused": False,
    }
    tmp = manifest.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(res, indent=1) + "\n")
    os.replace(tmp, manifest)
    return res


def read_chunk(path: str) -> Iterator[bytes]:
    """The lines of one chunk file."""
    import zstandard

    with open(path, "rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as r:
        rest = b""
        while block := r.read(1 << 22):
            lines = (rest + block).split(b"\n")
            rest = lines.pop()
            yield from lines
        if rest:
            yield rest


# ------------------------------------------------------------------------------------------
# the documents after the window, and probes


def stream_texts(spec: WindowSpec, lo: int, count: int) -> list[str]:
    """The texts of stream positions [lo, lo + count): past the window, the next hour's
    documents (with their planted copies of earlier ones)."""
    out: list[str] = []
    for a in range(lo, lo + count, RENDER_BATCH):
        pos = np.arange(a, min(lo + count, a + RENDER_BATCH), dtype=np.int64)
        role, src = plan(spec, pos)
        out += texts(spec, pos, src, role)[0]
    return out


def texts_by_length(
    spec: WindowSpec, bands: Sequence[tuple[int, int | None]], per_band: int, limit: int
) -> list[list[str]]:
    """Up to ``per_band`` texts of each length band (``[lo, hi)`` characters, ``hi`` None: no
    bound), the stream's first ones from position 0, scanning at most ``limit`` positions."""
    out: list[list[str]] = [[] for _ in bands]
    lo = 0
    while lo < limit and any(len(v) < per_band for v in out):
        for t in stream_texts(spec, lo, min(50_000, limit - lo)):
            n = len(t)
            for (a, b), got in zip(bands, out, strict=True):
                if a <= n and (b is None or n < b) and len(got) < per_band:
                    got.append(t)
        lo += 50_000
    return out


@dataclasses.dataclass
class Probes:
    """Documents to ``check`` against the built window, each paired with a window original:
    planted near duplicates and near-threshold non-duplicates of it, and fresh documents
    (label False: random pairs)."""

    texts: list[str]
    source: I64  # the window position each is paired with
    label: npt.NDArray[np.bool_]  # True: a near duplicate of its source
    how: I64  # subkind (0: a random pair)
    kind: I64
    zh: npt.NDArray[np.bool_]

    def slices(self) -> list[str]:
        """:func:`slice_name` of each probe."""
        return [
            slice_name(lab, h, k, z)
            for lab, h, k, z in zip(
                self.label.tolist(),
                self.how.tolist(),
                self.kind.tolist(),
                self.zh.tolist(),
                strict=True,
            )
        ]


def probes(
    spec: WindowSpec,
    m: int,
    *,
    shares: Sequence[float] = (0.7, 0.2),
    among: tuple[int, int] | None = None,
    offset: int = 0,
) -> Probes:
    """``m`` probes (shares of near duplicates and of near-threshold non-duplicates; the rest
    random pairs) whose sources are window originals drawn uniformly from positions ``among``
    (default the whole window). ``offset``: another set of probes."""
    lo, hi = among or (0, spec.n)
    pos = PROBE_BASE + offset + np.arange(m, dtype=np.int64)
    u = uniform(spec.seed, F_PROBE, pos)
    role = np.where(u < shares[0], ROLE_DUP, ROLE_ORIGINAL)
    role[(u >= shares[0]) & (u < shares[0] + shares[1])] = ROLE_NEG
    start = lo + (uniform(spec.seed, F_PSRC, pos) * (hi - lo)).astype(np.int64)
    src = _walk_to_original(spec, start, 1, hi)
    src = np.where(src < 0, _walk_to_original(spec, start, -1, hi), src)
    if (src < 0).any():
        raise ValueError("no window original to pair a probe with: the window is too small")
    text_src = np.where(role == ROLE_ORIGINAL, -1, src)  # random pairs: a fresh text
    out: list[str] = []
    infos = []
    for a in range(0, m, RENDER_BATCH):
        sl = slice(a, min(m, a + RENDER_BATCH))
        t, info = texts(spec, pos[sl], text_src[sl], role[sl])
        out += t
        infos.append(info)
    cat = {key: np.concatenate([i[key] for i in infos]) for key in ("zh", "kind", "subkind")}
    return Probes(out, src, role == ROLE_DUP, cat["subkind"], cat["kind"], cat["zh"].astype(bool))


def mean_text_bytes(spec: WindowSpec, sample: int = 20_000) -> float:
    """Mean UTF-8 bytes of a window document's text (from a sample of the stream)."""
    pos = np.unique(np.linspace(0, spec.n - 1, min(sample, spec.n)).astype(np.int64))
    role, src = plan(spec, pos)
    return float(np.mean([len(t.encode()) for t in texts(spec, pos, src, role)[0]]))
