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
def _token_kernel(
    buf: np.ndarray,
    doc_end: np.ndarray,
    state: np.ndarray,
    slots: np.ndarray,
    ustart: np.ndarray,
    uoff: np.ndarray,
    ubytes: np.ndarray,
    tok_ids: np.ndarray,
    doc_tok_end: np.ndarray,
) -> int:  # pragma: no cover - numba
    # tokens = runs of [a-z0-9]; each gets the number of its first appearance. Open addressing
    # with one 16-byte slot per distinct token: (key, id + 1 << 32 | length). A token of at
    # most 8 bytes is its own key (its bytes packed, exact, no further look-up); a longer one is
    # keyed by its FNV hash and confirmed byte by byte against its copy in a compact store.
    # Resumable: returns 1 (saving [doc, pos, tokens, distinct, pending length] in ``state``)
    # when the table or a store is full; the caller grows them and calls again; 0 when done.
    # (No array is reassigned in here: numba would refcount it on every iteration.)
    d, i, t, nu = state[0], state[1], state[2], state[3]
    cap = slots.shape[0]
    mask = np.uint64(cap - 1)
    while d < doc_end.shape[0]:
        end = doc_end[d]
        while i < end:
            x = buf[i]
            if not ((x >= 97 and x <= 122) or (x >= 48 and x <= 57)):
                i += 1
                continue
            s = i
            key = np.uint64(0)
            h = np.uint64(14695981039346656037)
            e = i
            while e < end:
                x = buf[e]
                if not ((x >= 97 and x <= 122) or (x >= 48 and x <= 57)):
                    break
                if e - s < 8:
                    key |= np.uint64(x) << np.uint64(8 * (e - s))
                h = (h ^ np.uint64(x)) * np.uint64(1099511628211)
                e += 1
            length = e - s
            if length > 8:
                key = h
            slot = ((key * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(20)) & mask
            meta_len = np.uint64(length)
            while True:
                meta = slots[slot, 1]
                if meta == 0:
                    o = uoff[nu]
                    if (
                        2 * (nu + 1) > cap
                        or nu + 1 >= ustart.shape[0]
                        or (o + length > ubytes.shape[0])
                    ):
                        state[0], state[1], state[2], state[3] = d, s, t, nu
                        state[4] = length
                        return 1
                    for q in range(length):
                        ubytes[o + q] = buf[s + q]
                    uoff[nu + 1] = o + length
                    ustart[nu] = s
                    slots[slot, 0] = key
                    slots[slot, 1] = (np.uint64(nu + 1) << np.uint64(32)) | meta_len
                    tok_ids[t] = nu
                    nu += 1
                    break
                if slots[slot, 0] == key and (meta & np.uint64(0xFFFFFFFF)) == meta_len:
                    u = np.int64(meta >> np.uint64(32)) - 1
                    same = True
                    if length > 8:
                        o = uoff[u]
                        for q in range(length):
                            if ubytes[o + q] != buf[s + q]:
                                same = False
                                break
                    if same:
                        tok_ids[t] = u
                        break
                slot = (slot + np.uint64(1)) & mask
            t += 1
            i = e
        doc_tok_end[d] = t
        d += 1
        i = end
    state[0], state[1], state[2], state[3] = d, i, t, nu
    return 0


@numba.njit(cache=True)
def _rehash(slots: np.ndarray, cap: int) -> np.ndarray:  # pragma: no cover - numba
    new = np.zeros((cap, 2), np.uint64)
    mask = np.uint64(cap - 1)
    for q0 in range(slots.shape[0]):
        if slots[q0, 1] != 0:
            key = slots[q0, 0]
            q = ((key * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(20)) & mask
            while new[q, 1] != 0:
                q = (q + np.uint64(1)) & mask
            new[q, 0] = key
            new[q, 1] = slots[q0, 1]
    return new


def _ascii_token_ids(
    buf: np.ndarray, doc_end: np.ndarray, ntok: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(token ids int32 (ntok,), tokens before each doc's end int64 (docs,), first-appearance
    position int64 (distinct,), length int64 (distinct,)) of the ``[a-z0-9]`` runs of ``buf``."""
    state = np.zeros(5, np.int64)
    slots = np.zeros((1 << 16, 2), np.uint64)
    ustart = np.empty(1 << 15, np.int64)
    uoff = np.zeros((1 << 15) + 1, np.int64)
    ubytes = np.empty(1 << 18, np.uint8)
    tok_ids = np.empty(ntok, np.int32)
    doc_tok_end = np.empty(doc_end.shape[0], np.int64)
    while _token_kernel(buf, doc_end, state, slots, ustart, uoff, ubytes, tok_ids, doc_tok_end):
        nu = int(state[3])
        if 2 * (nu + 1) > slots.shape[0]:
            slots = _rehash(slots, 2 * slots.shape[0])
        if nu + 1 >= ustart.size:
            ustart = np.concatenate([ustart, np.empty(ustart.size, np.int64)])
            uoff = np.concatenate([uoff, np.zeros(uoff.size - 1, np.int64)])
        need = int(uoff[nu]) + int(state[4])
        if need > ubytes.size:
            ubytes = np.concatenate([ubytes, np.empty(max(ubytes.size, need), np.uint8)])
    nu = int(state[3])
    return tok_ids[: int(state[2])], doc_tok_end, ustart[:nu], np.diff(uoff[: nu + 1])


def _encode_ascii_run(
    verifier: Verifier, texts: Sequence[str], encoder: TokenEncoder
) -> list[str] | None:
    """Encode a run of ASCII texts; ``None`` when the encoder's vocabulary could run out (the
    caller then takes the reference path, which handles that case)."""
    lowered = [t.lower() for t in texts]
    if verifier.config()["strip_social"]:
        # markers absent from the whole run need no per-text check
        joined = "\n".join(lowered)
        markers = [m for m in _SOCIAL_MARKERS if m in joined]
        if markers:
            lowered = [_SOCIAL.sub(" ", t) if any(m in t for m in markers) else t for t in lowered]
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
