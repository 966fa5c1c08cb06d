"""Tokenise and encode many texts for verification, ASCII runs in one numba pass.

:func:`encode_texts` returns exactly ``[encoder.encode(verifier.tokens(t)) for t in texts]``
(:func:`neardup.verify.tokenize` + :class:`~neardup.verify.TokenEncoder`: the same code points,
assigned in order of first appearance), which is its reference and what it is tested against.

For a run of ASCII texts the per-text Python work shrinks to ``lower()`` (and the social-marker
regex when a marker is present, as in :func:`~neardup.verify.tokenize`); splitting into tokens
(runs of ``[a-z0-9]``, which is what ``translate`` + ``split`` gives on lower-cased ASCII) and
mapping each token to its first-appearance number run in numba over one byte buffer, with an
open-addressing table keyed by the token bytes (exact: a hash hit is confirmed byte by byte).
Only each run's distinct tokens go through the encoder's dict.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from ..verify import _SOCIAL, _SOCIAL_MARKERS, TokenEncoder, Verifier

__all__ = ["encode_texts", "encode_texts_reference"]

#: text bytes per numba run (bounds the temporary token arrays)
RUN_BYTES = 64 << 20


def encode_texts_reference(
    verifier: Verifier, texts: Sequence[str], encoder: TokenEncoder
) -> list[str]:
    """The definition: tokenise and encode each text in order."""
    return [encoder.encode(verifier.tokens(t)) for t in texts]


@numba.njit(cache=True)
def _count_tokens(buf: np.ndarray) -> int:  # pragma: no cover - numba
    n = 0
    prev = False
    for i in range(buf.shape[0]):
        x = buf[i]
        w = (x >= 97 and x <= 122) or (x >= 48 and x <= 57)
        if w and not prev:
            n += 1
        prev = w
    return n


@numba.njit(cache=True)
def _fnv(buf: np.ndarray, s: int, length: int) -> np.uint64:  # pragma: no cover - numba
    h = np.uint64(14695981039346656037)
    for q in range(s, s + length):
        h = (h ^ np.uint64(buf[q])) * np.uint64(1099511628211)
    return h


@numba.njit(cache=True)
def _ascii_token_ids(
    buf: np.ndarray, doc_end: np.ndarray, ntok: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - numba
    # tokens = runs of [a-z0-9]; each gets the number of its first appearance. Open addressing
    # keyed by the token bytes (a slot hit is confirmed byte by byte); the table and the
    # distinct-token arrays double as they fill.
    cap = 1 << 16
    slots = np.full(cap, -1, np.int32)
    ucap = 1 << 15
    ustart = np.empty(ucap, np.int64)
    ulen = np.empty(ucap, np.int64)
    tok_ids = np.empty(ntok, np.int32)
    doc_tok_end = np.empty(doc_end.shape[0], np.int64)
    nu = 0
    t = 0
    i = 0
    for d in range(doc_end.shape[0]):
        end = doc_end[d]
        while i < end:
            x = buf[i]
            if not ((x >= 97 and x <= 122) or (x >= 48 and x <= 57)):
                i += 1
                continue
            s = i
            while i < end:
                x = buf[i]
                if not ((x >= 97 and x <= 122) or (x >= 48 and x <= 57)):
                    break
                i += 1
            length = i - s
            mask = np.uint64(cap - 1)
            slot = _fnv(buf, s, length) & mask
            while True:
                u = slots[slot]
                if u < 0:
                    if nu == ucap:
                        ucap *= 2
                        ns = np.empty(ucap, np.int64)
                        nl = np.empty(ucap, np.int64)
                        ns[:nu] = ustart[:nu]
                        nl[:nu] = ulen[:nu]
                        ustart = ns
                        ulen = nl
                    slots[slot] = nu
                    ustart[nu] = s
                    ulen[nu] = length
                    tok_ids[t] = nu
                    nu += 1
                    if 2 * nu > cap:  # rehash into a table twice the size
                        cap *= 2
                        mask = np.uint64(cap - 1)
                        slots = np.full(cap, -1, np.int32)
                        for v in range(nu):
                            q = _fnv(buf, ustart[v], ulen[v]) & mask
                            while slots[q] >= 0:
                                q = (q + np.uint64(1)) & mask
                            slots[q] = v
                    break
                if ulen[u] == length:
                    us = ustart[u]
                    same = True
                    for q in range(length):
                        if buf[us + q] != buf[s + q]:
                            same = False
                            break
                    if same:
                        tok_ids[t] = u
                        break
                slot = (slot + np.uint64(1)) & mask
            t += 1
        doc_tok_end[d] = t
    return tok_ids[:t], doc_tok_end, ustart[:nu], ulen[:nu]


def _encode_ascii_run(
    verifier: Verifier, texts: Sequence[str], encoder: TokenEncoder
) -> list[str] | None:
    """Encode a run of ASCII texts; ``None`` when the encoder's vocabulary could run out (the
    caller then takes the reference path, which handles that case)."""
    strip = verifier.config()["strip_social"]
    lowered = []
    for t in texts:
        t = t.lower()
        if strip and any(m in t for m in _SOCIAL_MARKERS):
            t = _SOCIAL.sub(" ", t)
        lowered.append(t)
    data = "\n".join(lowered).encode("ascii")
    buf = np.frombuffer(data, np.uint8)
    lens = np.fromiter((len(t) + 1 for t in lowered), np.int64, len(lowered))
    doc_end = np.cumsum(lens) - 1
    tok_ids, doc_tok_end, ustart, ulen = _ascii_token_ids(buf, doc_end, int(_count_tokens(buf)))
    vocab = encoder._vocab
    if len(vocab) + ustart.size + 1 >= encoder._LIMIT:
        return None
    codes = np.empty(ustart.size, np.uint32)
    for u, (s, n) in enumerate(zip(ustart.tolist(), ulen.tolist(), strict=True)):
        tok = data[s : s + n].decode("ascii")
        ch = vocab.get(tok)
        if ch is None:  # next free code point, in order of first appearance (as encode())
            k = len(vocab) + 1
            ch = vocab[tok] = chr(k if k < 0xD800 else k + 0x800)
        codes[u] = ord(ch)
    cps = codes[tok_ids]
    bounds = np.concatenate([[0], doc_tok_end]).tolist()
    raw = cps.astype("<u4").tobytes()
    return [raw[4 * bounds[i] : 4 * bounds[i + 1]].decode("utf-32-le") for i in range(len(texts))]


def encode_texts(
    verifier: Verifier, texts: Sequence[str], encoder: TokenEncoder | None = None
) -> list[str]:
    """``[encoder.encode(verifier.tokens(t)) for t in texts]``, runs of ASCII texts in numba.

    Parameters
    ----------
    verifier : Verifier
        Its tokenisation settings (``strip_social``) apply.
    texts : sequence of str
    encoder : TokenEncoder, optional
        Shared with other calls so that every text of a comparison uses one code table; a new
        one by default.

    Returns
    -------
    list of str
        One code point per token; identical to :func:`encode_texts_reference`.
    """
    enc = TokenEncoder() if encoder is None else encoder
    out: list[str] = []
    n = len(texts)
    i = 0
    while i < n:
        if not texts[i].isascii():
            out.append(enc.encode(verifier.tokens(texts[i])))
            i += 1
            continue
        j, size = i, 0
        while j < n and size < RUN_BYTES and texts[j].isascii():
            size += len(texts[j]) + 1
            j += 1
        run = texts[i:j] if isinstance(texts, list) else [texts[k] for k in range(i, j)]
        fast = _encode_ascii_run(verifier, run, enc) if j - i > 1 else None
        out.extend(fast if fast is not None else encode_texts_reference(verifier, run, enc))
        i = j
    return out
