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

Without a vocabulary, :func:`token_hashes` (sorted 32-bit token hashes per text) and
:func:`token_histograms` (token counts per hash bucket) give the multiset bounds of verification
(:mod:`neardup.verify.overlap`), and :func:`token_bytes` the kernel input of its exact LCS; their
kernels run on the shared byte-level tokeniser of :mod:`neardup.text.token_kernels`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .._jit import kernel
from .._threads import kernel_threads, run_ranges
from ..text.social import SOCIAL, SOCIAL_MARKERS
from ..text.token_kernels import (
    BUCKET_MIX,
    MARK_LUT,
    RAW,
    SPACE_LUT,
    TOKEN_RANGE_DOCS,
    WORD_LUT,
    Prepared,
    chunk_bytes,
    hash_tokens,
    is_spans,
    run_token_kernel,
    strip_flagged,
    token_chunks,
)
from .sequences import TokenEncoder

if TYPE_CHECKING:  # pragma: no cover - for type checkers only
    from .rule import Verifier

__all__ = [
    "encode_texts",
    "token_bytes",
    "token_counts",
    "token_hashes",
    "token_histograms",
]

#: text bytes per numba run (bounds the temporary token arrays)
RUN_BYTES = 64 << 20


@kernel
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


@kernel
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


@kernel
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
        markers = [m for m in SOCIAL_MARKERS if m in joined]
        if markers:
            lowered = [SOCIAL.sub(" ", t) if any(m in t for m in markers) else t for t in lowered]
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
        One code point per token; identical to
        :func:`neardup.verify.reference.encode_texts_reference`.
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
        out.extend(fast if fast is not None else [enc.encode(verifier.tokens(t)) for t in run])
        i = j
    return out


# ---------------------------------------------------------------------------------------------
# token hashes: the multiset bound of verification without a vocabulary

#: :func:`token_histograms` counts tokens in ``2**HIST_BITS`` buckets (the top bits of the hash,
#: :data:`~neardup.text.token_kernels.BUCKET_MIX`; the MinHash pass's coarse bucket of a token,
#: :data:`~neardup.text.token_kernels.MASK_BITS` of them, is this one shifted right). 1,024
#: buckets, not 512: long texts share frequent tokens, and at 512 buckets the bound let through
#: several times the pairs the token hashes then turn down (``benchmarks/bench_candidates.py``)
HIST_BITS = 10
#: a bucket's count saturates here (uint8)
HIST_MAX = 255


@kernel
def _heapsort(a: np.ndarray) -> None:  # pragma: no cover - numba
    """Sort ``a`` ascending in place: a heapsort (one sift loop builds the heap, then takes
    its largest out to the end, one at a time)."""
    n = a.shape[0]
    start = n // 2
    end = n
    while end > 1:
        if start > 0:  # building the heap
            start -= 1
        else:  # the heap's largest to the end
            end -= 1
            t = a[end]
            a[end] = a[0]
            a[0] = t
        root = start
        v = a[root]
        while True:
            c = 2 * root + 1
            if c >= end:
                break
            if c + 1 < end and a[c + 1] > a[c]:
                c += 1
            if not a[c] > v:
                break
            a[root] = a[c]
            root = c
        a[root] = v


@kernel
def _sort_hashes(a: np.ndarray) -> None:  # pragma: no cover - numba
    # In-place sort of uint32 hashes: a counting sort on the top bits (about one bucket per
    # element), then an insertion sort, which only has the few inversions inside buckets left
    # (equal hashes never move). Past a budget of moves (adversarial hashes) it hands over to
    # a heapsort, so it is a sort in O(n log n) whatever the input (ndarray.sort here compiled
    # numba's quicksort into the kernel: about a second of a first run's compile).
    n = a.shape[0]
    if n < 2:
        return
    tmp = a
    if n > 32:
        bits = 5
        while (1 << bits) < n and bits < 16:
            bits += 1
        shift = np.uint32(32 - bits)
        cnt = np.zeros((1 << bits) + 1, np.int64)
        for q in range(n):
            cnt[(a[q] >> shift) + 1] += 1
        for q in range(1 << bits):
            cnt[q + 1] += cnt[q]
        tmp = np.empty(n, np.uint32)
        for q in range(n):
            b = a[q] >> shift
            tmp[cnt[b]] = a[q]
            cnt[b] += 1
    budget = 4 * n
    for q in range(1, n):
        x = tmp[q]
        j = q - 1
        while j >= 0 and tmp[j] > x:
            tmp[j + 1] = tmp[j]
            j -= 1
        tmp[j + 1] = x
        budget -= q - 1 - j
        if budget < 0:
            _heapsort(tmp)
            break
    if n > 32:
        for q in range(n):  # a loop: a slice assignment compiles its shape error path too
            a[q] = tmp[q]


# The kernels below read chunks of neardup.text.token_kernels (documents, modes, lookup tables
# and the social-marker flag are described there).


@kernel(nogil=True)
def _count_kernel(
    lo: int,
    hi: int,
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    mode: np.ndarray,
    word: np.ndarray,
    space: np.ndarray,
    mark: np.ndarray,
    counts: np.ndarray,
    flags: np.ndarray,
) -> None:  # pragma: no cover - numba
    # token counts (branch-free: a token starts where a token byte follows another byte)
    www = np.uint64(0x7777772E)  # "www."
    m32 = np.uint64(0xFFFFFFFF)
    for d in range(lo, hi):
        s = starts[d]
        e = ends[d]
        lut = space if mode[d] == 2 else word
        c: int | np.int64 = 0
        prev: int | np.int64 = 0
        flag = False
        if mode[d] == 0:  # branch-free: "www." by a window of the last 4 bytes OR 0x20
            hit = np.uint64(0)
            win = np.uint64(0)
            for i in range(s, e):
                y = buf[i]
                w = np.int64(lut[y])
                c += w & (prev ^ 1)
                prev = w
                win = ((win << np.uint64(8)) | np.uint64(y | 32)) & m32
                hit |= np.uint64(mark[y]) | np.uint64(win == www)
            flag = hit != 0
        else:
            for i in range(s, e):
                w = np.int64(lut[buf[i]])
                c += w & (prev ^ 1)
                prev = w
        counts[d] = c
        flags[d] = flag


@kernel(nogil=True)
def _write_kernel(
    lo: int,
    hi: int,
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    mode: np.ndarray,
    word: np.ndarray,
    space: np.ndarray,
    mark: np.ndarray,
    out: np.ndarray,
    region: np.ndarray,
    counts: np.ndarray,
    flags: np.ndarray,
) -> None:  # pragma: no cover - numba
    # Document d's token count (counts[d]) and its sorted token hashes (token_hash_reference,
    # in verify/reference.py) in out[region[d]:region[d] + counts[d]] (room for (len + 1) // 2:
    # a token takes a byte and is followed by a separator). Mode 0 also flags the social
    # markers as _count_kernel does (a flagged document is left unsorted: the caller strips and
    # redoes it in mode 1).
    mix = np.uint64(0x9E3779B97F4A7C15)
    s32 = np.uint64(32)
    for d in range(lo, hi):
        s = starts[d]
        e = ends[d]
        o = region[d]
        tmp = np.empty((e - s + 1) // 2 + 1, np.uint64)
        n, hit = hash_tokens(buf, s, e, mode[d] == 2, mode[d] == 0, word, space, mark, tmp)
        for q in range(n):
            out[o + q] = np.uint32((tmp[q] * mix) >> s32)
        counts[d] = n
        flags[d] = hit
        if not hit:
            _sort_hashes(out[o : o + n])


@kernel(nogil=True)
def _gather_rows(
    lo: int,
    hi: int,
    src: np.ndarray,
    src_start: np.ndarray,
    counts: np.ndarray,
    dst: np.ndarray,
    dst_start: np.ndarray,
) -> None:  # pragma: no cover - numba
    for d in range(lo, hi):
        a = src_start[d]
        b = dst_start[d]
        for q in range(counts[d]):
            dst[b + q] = src[a + q]


def _hash_chunk(
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    mode: np.ndarray,
    scratch: np.ndarray,
    counts: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run :func:`_write_kernel` on one chunk: (scratch (maybe grown), region, flags)."""
    cap = (ends - starts + 1) // 2
    region = np.cumsum(cap) - cap
    if scratch.size < int(cap.sum()):
        scratch = np.empty(int(cap.sum()), np.uint32)
    flags = np.empty(starts.size, np.bool_)
    run_ranges(
        _write_kernel, starts.size, buf, starts, ends, mode, WORD_LUT, SPACE_LUT, MARK_LUT,
        scratch, region, counts, flags, min_items=TOKEN_RANGE_DOCS,
    )  # fmt: skip
    return scratch, region, flags


def token_hashes(
    verifier: Verifier,
    texts: Sequence[str],
    *,
    workers: int = 1,
    prepared: Prepared | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Every text's tokens as sorted 32-bit hashes: ``(values uint32 (total,), offsets int64
    (n + 1,))``, equal to :func:`neardup.verify.reference.token_hashes_reference`.

    The tokens are exactly ``verifier.tokens(text)`` (so ``offsets`` give exact token counts),
    each hashed by :func:`neardup.verify.reference.token_hash_reference`. ASCII texts are
    tokenised and hashed by a numba kernel over their bytes (a text with a social marker is
    first stripped by the same regex as :func:`~neardup.verify.tokenize`); other texts go
    through ``verifier.tokens`` and only the hashing runs in numba. No vocabulary is built. One
    pass over cache-sized chunks into a reused scratch buffer, compacted into the output, which
    is sized from the tokens per character seen so far (untouched room costs no memory).

    Equal tokens get equal hashes, so the multiset overlap of two rows is an upper bound on the
    multiset overlap of the token sequences (hash collisions can only merge counts:
    ``min(a1 + a2, b1 + b2) >= min(a1, b1) + min(a2, b2)``), hence on their LCS.

    Parameters
    ----------
    verifier : Verifier
        Its tokenisation settings (``strip_social``) apply.
    texts : sequence of str
    workers : int, default=1
        numba threads.
    prepared : dict, optional
        Filled with the texts that needed Python work (pre-tokenised non-ASCII, stripped
        social markers: position -> (bytes, mode)); pass it (re-keyed) to
        :func:`token_bytes` so that they are not tokenised twice.

    Returns
    -------
    values : numpy.ndarray of uint32
    offsets : numpy.ndarray of int64, shape (n + 1,)
    """
    n = len(texts)
    special = {} if prepared is None else prepared
    counts = np.zeros(n, np.int64)
    # (spans: the lengths without making a str of every text)
    lens = texts.lengths() if is_spans(texts) else np.fromiter(map(len, texts), np.int64, n)
    total_chars = int(lens.sum())
    done_chars = 0
    values = np.empty(0, np.uint32)
    pos = 0
    scratch = np.empty(0, np.uint32)
    with kernel_threads(workers):
        for i, j, (buf, starts, ends, mode) in token_chunks(verifier, texts, special):
            scratch, region, flags = _hash_chunk(buf, starts, ends, mode, scratch, counts[i:j])
            flagged = np.flatnonzero(flags)
            if flagged.size:  # strip as ``tokenize`` does, then hash again (mode 1)
                s_counts = np.empty(flagged.size, np.int64)
                s_out, s_region, _ = _hash_chunk(
                    *strip_flagged(texts, flagged + i, special), np.empty(0, np.uint32), s_counts
                )
                # a stripped text is no longer than the text: it fits the text's region
                run_ranges(
                    _gather_rows, s_counts.size, s_out, s_region, s_counts, scratch,
                    region[flagged], min_items=TOKEN_RANGE_DOCS,
                )  # fmt: skip
                counts[i + flagged] = s_counts
            c = counts[i:j]
            m = int(c.sum())
            done_chars += int(lens[i:j].sum())
            if pos + m > values.size:  # room for the rest at the rate seen so far (+ 10 %)
                rest = max(0, total_chars - done_chars) * (pos + m) / max(done_chars, 1)
                grown = np.empty(pos + m + int(1.1 * rest) + 1024, np.uint32)
                grown[:pos] = values[:pos]
                values = grown
            run_ranges(
                _gather_rows, c.size, scratch, region, c, values, pos + np.cumsum(c) - c,
                min_items=TOKEN_RANGE_DOCS,
            )  # fmt: skip
            pos += m
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    return values[:pos], offsets


@kernel(nogil=True)
def _hist_kernel(
    lo: int,
    hi: int,
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    mode: np.ndarray,
    word: np.ndarray,
    space: np.ndarray,
    mark: np.ndarray,
    hist: np.ndarray,
    counts: np.ndarray,
    flags: np.ndarray,
) -> None:  # pragma: no cover - numba
    # _write_kernel's tokens and hashes (the same loop, hash_tokens), counted into hist[d]
    # by the top HIST_BITS bits of each token's 32-bit hash (saturating at HIST_MAX) instead
    # of being written out and sorted. Mode 0 flags the social markers as _write_kernel does.
    mix = np.uint64(BUCKET_MIX)
    shift = np.uint64(64 - HIST_BITS)
    top = np.uint8(HIST_MAX)
    for d in range(lo, hi):
        s = starts[d]
        e = ends[d]
        tmp = np.empty((e - s + 1) // 2 + 1, np.uint64)
        n, hit = hash_tokens(buf, s, e, mode[d] == 2, mode[d] == 0, word, space, mark, tmp)
        row = hist[d]
        for q in range(n):  # branch-free saturating increments
            b = (tmp[q] * mix) >> shift
            row[b] += np.uint8(row[b] < top)
        counts[d] = n
        flags[d] = hit


def token_histograms(
    verifier: Verifier,
    texts: Sequence[str],
    *,
    workers: int = 1,
    prepared: Prepared | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Every text's tokens counted in ``2**HIST_BITS`` hash buckets: ``(hist uint8 (n,
    2**HIST_BITS), counts int64 (n,))``, equal to
    :func:`neardup.verify.reference.token_histograms_reference`.

    The same tokens and hashes as :func:`token_hashes` (the same byte loop, the same handling of
    non-ASCII texts and social markers), but nothing is written out or sorted: one pass over
    the bytes fills a fixed-size row per text. ``sum(min(row_a, row_b))`` bounds the multiset
    overlap of two texts' tokens from above (equal tokens share a bucket, and per bucket the
    smaller total is at least the sum of the smaller counts), hence their LCS; a bucket full on
    both sides (``HIST_MAX``) is not a bound, and the caller must treat it as unbounded.

    ``prepared`` is filled as :func:`token_hashes` fills it.
    """
    n = len(texts)
    special = {} if prepared is None else prepared
    hist = np.zeros((n, 1 << HIST_BITS), np.uint8)
    counts = np.zeros(n, np.int64)
    with kernel_threads(workers):
        for i, j, chunk in token_chunks(verifier, texts, special):
            run_token_kernel(_hist_kernel, texts, special, i, j, chunk, (), (hist, counts))
    return hist, counts


def _count_tokens_and_strip(
    verifier: Verifier, texts: Sequence[str], special: Prepared
) -> np.ndarray:
    """Pass 1: exact token counts (int64 (n,)); fills ``special`` with the texts whose kernel
    bytes are not their own ASCII: non-ASCII texts pre-tokenised by ``verifier.tokens``
    (mode 2), texts with a social marker stripped by the same regex as ``tokenize`` (mode 1).
    Entries already in ``special`` are used as they are."""
    counts = np.zeros(len(texts), np.int64)
    for i, j, chunk in token_chunks(verifier, texts, special):
        run_token_kernel(_count_kernel, texts, special, i, j, chunk, (), (counts,))
    return counts


def token_counts(
    verifier: Verifier, texts: Sequence[str], *, prepared: Prepared | None = None
) -> np.ndarray:
    """Every text's exact token count, ``len(verifier.tokens(text))`` (int64 (n,)): one pass of
    the byte-level token loop; ``prepared`` (position -> kernel bytes, as :func:`token_hashes`
    fills it) spares tokenising non-ASCII texts again and is filled as it goes."""
    return _count_tokens_and_strip(verifier, texts, {} if prepared is None else prepared)


def token_bytes(
    verifier: Verifier, texts: Sequence[str], *, prepared: Prepared | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The bytes the token kernels read for ``texts``: ``(buf uint8, starts int64 (n,), ends
    int64 (n,), mode uint8 (n,))``. Text ``i``'s tokens are the ``[A-Za-z0-9]`` runs of
    ``buf[starts[i]:ends[i]]`` lower-cased (mode 1: ASCII, social markers already stripped) or
    its space-separated UTF-8 tokens (mode 2: pre-tokenised), exactly ``verifier.tokens``.

    ``prepared`` (as filled by :func:`token_hashes`, re-keyed to positions in ``texts``) spares
    tokenising non-ASCII texts and stripping markers again; without it they are redone here.
    """
    special = {} if prepared is None else dict(prepared)
    if prepared is None:
        _count_tokens_and_strip(verifier, texts, special)
    return chunk_bytes(texts, special, 0, len(texts), RAW)
