"""The byte-level tokeniser shared by verification and MinHash: numba kernels read texts as
bytes and hash their tokens exactly as the reference tokenizer (:func:`neardup.verify.tokenize`,
through ``Tokeniser.tokens``) splits them.

Texts are read in chunks (:func:`chunk_bounds`: about :data:`HASH_CHUNK_BYTES` characters) into
one byte buffer per chunk (:func:`chunk_bytes`); document ``d`` is ``buf[starts[d]:ends[d]]``
and has a mode:

- :data:`RAW_CHECK` / :data:`RAW`: ASCII text; its tokens are the runs of ``[A-Za-z0-9]``
  (:data:`WORD_LUT`), lower-cased: what ``tokenize`` gives on ASCII text (``lower()``,
  ``translate`` + ``split``). :data:`RAW_CHECK` also looks for the social markers ``tokenize``
  looks for (:data:`MARK_LUT` and "www."); a text that has one is flagged, and the caller strips
  it with the same regex (:func:`strip_flagged`) and runs it again as :data:`RAW`.
- :data:`PRETOK`: pre-tokenised text (:func:`pretokenise`: non-ASCII texts go through
  ``Tokeniser.joined_tokens``, the kernel of :mod:`neardup.text.word_kernel`), tokens (any UTF-8)
  separated by single spaces (:data:`SPACE_LUT`).

:func:`token_chunks` is the chunk loop of every driver (verification's token hashes, counts and
histograms in :mod:`neardup.verify.tokens`, MinHash signatures in
:mod:`neardup.fingerprint.minhash`), :func:`run_token_kernel` runs a kernel on one chunk and
again on its flagged texts, stripped; :func:`hash_tokens` is the per-document token loop their
kernels inline. The texts that needed Python work are kept in a :data:`Prepared` dict
(position -> (bytes, mode)) that a later pass over the same texts reuses.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeGuard, runtime_checkable

import numpy as np
import numpy.typing as npt

from .._arrays import concat_ascii, read_only
from .._jit import kernel
from .._threads import run_ranges
from .social import SOCIAL

__all__ = [
    "BUCKET_MIX",
    "FEW_TEXTS",
    "FEW_TEXTS_CHARS",
    "HASH_CHUNK_BYTES",
    "MARK_LUT",
    "MASK_BITS",
    "PRETOK",
    "RAW",
    "RAW_CHECK",
    "SPACE_LUT",
    "TOKEN_RANGE_DOCS",
    "WORD_LUT",
    "KernelInput",
    "Prepared",
    "SpanSource",
    "Tokeniser",
    "chunk_bounds",
    "chunk_bytes",
    "hash_tokens",
    "is_spans",
    "prepared_at",
    "pretokenise",
    "run_token_kernel",
    "run_token_kernel_few",
    "strip_flagged",
    "token_chunks",
]

#: a token's bucket in the kernels that count tokens by hash (verification's histograms,
#: :mod:`neardup.verify.tokens`; the MinHash pass's coarse counts, :mod:`neardup.fingerprint.minhash`):
#: the top bits of ``fnv1a64(token) * BUCKET_MIX`` (mod 2**64), so a coarser count's bucket
#: is a finer one's shifted right
BUCKET_MIX = 0x9E3779B97F4A7C15
#: bits of the coarse buckets the MinHash pass counts a text's tokens in (a stored row keeps
#: which are used, a 64-bit mask: :func:`neardup.rules.lsh.sketches`)
MASK_BITS = 6
#: text characters per chunk (bounds the kernels' temporary buffers; cache-sized)
HASH_CHUNK_BYTES = 8 << 20
#: per-document modes of the kernels (see the module docstring)
RAW_CHECK, RAW, PRETOK = 0, 1, 2

#: texts that needed Python work, by position: (kernel bytes, mode)
Prepared = dict[int, tuple[bytes, int]]


def prepared_at(prepared: Prepared, at: Sequence[int]) -> Prepared:
    """The entries of ``prepared`` at the positions ``at``, keyed by their place in ``at``:
    the kernel forms of ``[texts[i] for i in at]`` where ``prepared`` holds those of ``texts``.

    >>> prepared_at({1: (b"a", 2), 4: (b"b", 1)}, [4, 0, 1])
    {0: (b'b', 1), 2: (b'a', 2)}
    """
    return {k: prepared[i] for k, i in enumerate(at) if i in prepared}


#: a chunk as the kernels read it: (buffer uint8, starts int64, ends int64, mode uint8)
KernelInput = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class Tokeniser(Protocol):
    """What the kernels need of a verifier (:class:`neardup.verify.Verifier`): its reference
    tokens and its settings (``config()["strip_social"]``)."""

    def tokens(self, text: str) -> list[str]: ...

    def joined_tokens(self, texts: Sequence[str]) -> list[bytes]: ...

    def config(self) -> dict[str, Any]: ...


@runtime_checkable
class SpanSource(Protocol):
    """Texts held as spans of one buffer (:class:`neardup.io.texts.SpanTexts`): their lengths,
    which are ASCII, and the ASCII ones gathered as bytes, without making a ``str`` of each."""

    def lengths(self, lo: int = 0, hi: int | None = None) -> npt.NDArray[np.int64]: ...

    def ascii_mask(self, lo: int = 0, hi: int | None = None) -> npt.NDArray[np.bool_]: ...

    def gather_ascii(
        self, idx: npt.NDArray[np.int64], out: np.ndarray | None = None
    ) -> tuple[np.ndarray, npt.NDArray[np.int64], np.ndarray] | None: ...


def is_spans(texts: object) -> TypeGuard[SpanSource]:
    """``isinstance(texts, SpanSource)``, answered at once for lists and tuples: a
    runtime-checkable protocol looks up every member on each check (three checks cost a single
    online request ~0.08 ms)."""
    return not isinstance(texts, (list, tuple)) and isinstance(texts, SpanSource)


def _word_table() -> np.ndarray:
    """byte -> 1 for ``[A-Za-z0-9]`` (a token byte of ASCII text), 0 for every other byte."""
    lut = np.zeros(256, np.uint8)
    for c in b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789":
        lut[c] = 1
    return lut


def _space_table() -> np.ndarray:
    """byte -> 1 for every byte but the space (a token byte of pre-tokenised text)."""
    lut = np.ones(256, np.uint8)
    lut[32] = 0
    return lut


def _mark_table() -> np.ndarray:
    """byte -> 1 for ``@ # /`` (the kernels look for "www." themselves).

    ``SOCIAL`` can only match a text that has "@", "#", "/" or "www." (lower-cased). Its
    alternatives: ``rt @user:``, ``//@user:`` and ``@mention`` need "@"; ``https?://...`` and
    the short links ``t.cn/``, ``t.co/``, ``bit.ly/`` need "/"; ``www....`` needs "www."; the
    hashtags need "#". A text without them is left as it is by ``SOCIAL.sub``, whatever other
    marker (e.g. a bare "http") made ``tokenize`` run it."""
    lut = np.zeros(256, np.uint8)
    for c in b"@#/":
        lut[c] = 1
    return lut


WORD_LUT, SPACE_LUT, MARK_LUT = _word_table(), _space_table(), _mark_table()


@kernel(inline="always")
def hash_tokens(
    buf: np.ndarray,
    s: int,
    e: int,
    pretok: bool,
    check: bool,
    word: np.ndarray,
    space: np.ndarray,
    mark: np.ndarray,
    tmp: np.ndarray,
) -> tuple[int | np.int64, bool]:  # pragma: no cover - numba
    # The token loop of every hashing kernel (verification's token hashes and histograms,
    # MinHash signatures): one branch-free pass over buf[s:e],
    # FNV-1a of the current token, restarted where a token starts; where one ends its hash is
    # left in tmp[k] (tmp[ke] is overwritten until then). Returns (token count, whether mode 0
    # saw a social marker: "@", "#", "/" or "www.").
    fnv = np.uint64(0xCBF29CE484222325)
    prime = np.uint64(0x100000001B3)
    www = np.uint64(0x7777772E)  # "www."
    m32 = np.uint64(0xFFFFFFFF)
    lut = space if pretok else word
    low = 0 if pretok else 32  # ASCII token bytes are [A-Za-z0-9]: OR 0x20 lower-cases
    # (int64 in numba: the annotations only tell type checkers that numpy scalars flow in)
    n: int | np.int64 = 0
    ke: int | np.int64 = 0
    prev: int | np.int64 = 0
    h = fnv
    hit = np.uint64(0)
    win = np.uint64(0)
    for i in range(s, e):
        y = buf[i]
        w = np.int64(lut[y])
        n += w & (prev ^ 1)
        tmp[ke] = h
        ke += prev & (w ^ 1)
        hb = fnv if w > prev else h
        hn = (hb ^ np.uint64(y | low)) * prime
        h = hn if w else hb
        prev = w
        if check:
            win = ((win << np.uint64(8)) | np.uint64(y | 32)) & m32
            hit |= np.uint64(mark[y]) | np.uint64(win == www)
    tmp[ke] = h
    return n, hit != 0


def chunk_bounds(texts: Sequence[str]) -> list[int]:
    """Chunk boundaries: about ``HASH_CHUNK_BYTES`` characters of text per chunk."""
    n = len(texts)
    # (spans: the lengths without making a str of every text)
    lens = texts.lengths().tolist() if is_spans(texts) else map(len, texts)
    bounds = [0]
    size = 0
    for k, m in enumerate(lens):
        size += m
        if size >= HASH_CHUNK_BYTES:
            bounds.append(k + 1)
            size = 0
    if bounds[-1] != n:
        bounds.append(n)
    return bounds


def chunk_bytes(
    texts: Sequence[str],
    special: dict[int, tuple[bytes, int]],
    i: int,
    j: int,
    ascii_mode: int,
    reuse: list[np.ndarray | None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bytes of ``texts[i:j]`` for the kernel: (buffer uint8, starts, ends, mode); documents in
    ``special`` (stripped or pre-tokenised) contribute their stored bytes and mode.

    ``reuse``: a one-item list holding a buffer (or ``None``) that a chunk loop passes on every
    call; an all-ASCII chunk is copied into it (:func:`~neardup._arrays.concat_ascii`), so the
    returned buffer is only valid until the next call with the same list. The buffer is
    read-only on every path (``np.frombuffer`` of bytes is), so each token kernel is compiled
    for one signature (:func:`~neardup._arrays.read_only`)."""
    mode = np.full(j - i, ascii_mode, np.uint8)
    plain = not special or not any(k in special for k in range(i, j))
    if plain and is_spans(texts):  # straight from the mapped input
        got = texts.gather_ascii(np.arange(i, j), None if reuse is None else reuse[0])
        if got is not None:
            buf, lens, kept = got
            if reuse is not None:
                reuse[0] = kept
            ends = np.cumsum(lens)
            return read_only(buf), ends - lens, ends, mode
    chunk = texts[i:j] if isinstance(texts, list) else [texts[k] for k in range(i, j)]
    if plain:
        if reuse is None:
            data = "".join(chunk).encode("ascii")
            lens = np.fromiter(map(len, chunk), np.int64, j - i)
        else:
            buf, lens, reuse[0] = concat_ascii(chunk, reuse[0])
            ends = np.cumsum(lens)
            return read_only(buf), ends - lens, ends, mode
    else:
        parts: list[bytes] = []
        for k, t in enumerate(chunk, start=i):
            sp = special.get(k)
            if sp is None:
                parts.append(t.encode("ascii"))
            else:
                parts.append(sp[0])
                mode[k - i] = sp[1]
        data = b"".join(parts)
        lens = np.fromiter(map(len, parts), np.int64, j - i)
    ends = np.cumsum(lens)
    return np.frombuffer(data, np.uint8), ends - lens, ends, mode


def pretokenise(source: Tokeniser, texts: Sequence[str], i: int, j: int, special: Prepared) -> None:
    """Record ``texts[i:j]`` that are not ASCII in ``special``, tokenised as the reference
    tokeniser splits them and joined by spaces (mode 2), all in one call of
    ``source.joined_tokens``; entries already there are kept."""
    if is_spans(texts):  # (spans are ASCII: no str made for them)
        todo = [
            k for k in (np.flatnonzero(~texts.ascii_mask(i, j)) + i).tolist() if k not in special
        ]
    else:
        todo = [k for k in range(i, j) if k not in special and not texts[k].isascii()]
    if todo:
        joined = source.joined_tokens([texts[k] for k in todo])
        for k, data in zip(todo, joined, strict=True):
            special[k] = (data, PRETOK)


def strip_flagged(
    texts: Sequence[str], flagged: np.ndarray, special: Prepared
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The texts at positions ``flagged`` (a kernel saw a social marker) stripped as
    ``tokenize`` strips them, recorded in ``special`` (mode 1); returns their kernel input
    ``(buffer, starts, ends, mode)``."""
    done = [SOCIAL.sub(" ", texts[k].lower()).encode("ascii") for k in flagged.tolist()]
    for k, data in zip(flagged.tolist(), done, strict=True):
        special[k] = (data, RAW)
    lens = np.fromiter(map(len, done), np.int64, len(done))
    ends = np.cumsum(lens)
    buf = np.frombuffer(b"".join(done), np.uint8)
    return buf, ends - lens, ends, np.full(len(done), RAW, np.uint8)


def _ascii_mode(source: Tokeniser) -> int:
    """The mode ASCII texts are read in: :data:`RAW_CHECK` when ``source`` strips social
    markers (the kernel flags a text that has one), else :data:`RAW`."""
    return RAW_CHECK if source.config()["strip_social"] else RAW


def token_chunks(
    source: Tokeniser, texts: Sequence[str], special: Prepared
) -> Iterator[tuple[int, int, KernelInput]]:
    """The chunk loop of the token kernels' drivers: for each chunk ``i:j`` of
    :func:`chunk_bounds`, its non-ASCII texts pre-tokenised into ``special``
    (:func:`pretokenise`), then ``(i, j, chunk_bytes(...))``, ASCII texts in mode
    :data:`RAW_CHECK` when ``source`` strips social markers, else :data:`RAW`. The chunk's
    buffer is reused: valid until the next chunk is asked for."""
    ascii_mode = _ascii_mode(source)
    reuse: list[np.ndarray | None] = [None]
    for i, j in itertools.pairwise(chunk_bounds(texts)):
        pretokenise(source, texts, i, j, special)
        yield i, j, chunk_bytes(texts, special, i, j, ascii_mode, reuse)


#: documents per range of a token kernel (fewer: the calling thread alone)
TOKEN_RANGE_DOCS = 16


def run_token_kernel(
    kernel: Callable[..., None],
    texts: Sequence[str],
    special: Prepared,
    i: int,
    j: int,
    chunk: KernelInput,
    params: tuple[Any, ...],
    outs: tuple[np.ndarray, ...],
) -> None:
    """Run a token kernel on chunk ``i:j`` of ``texts`` (``chunk``, from :func:`token_chunks`)
    into rows ``i:j`` of each array of ``outs``, then again on the texts it flagged (a social
    marker), stripped as ``tokenize`` strips them (:func:`strip_flagged`, mode :data:`RAW`),
    whose rows are replaced.

    The kernel's arguments are ``(lo, hi, buf, starts, ends, mode, WORD_LUT, SPACE_LUT,
    MARK_LUT, *params, *rows of outs, flags)``; it fills the rows of its documents ``lo..hi-1``
    (the stripped texts' rows start at zero) and sets ``flags[d]`` where a :data:`RAW_CHECK`
    document has a marker. The documents are spread over the kernel threads
    (:func:`neardup._threads.run_ranges`)."""
    luts = (WORD_LUT, SPACE_LUT, MARK_LUT)
    flags = np.empty(j - i, np.bool_)
    run_ranges(kernel, j - i, *chunk, *luts, *params, *(o[i:j] for o in outs), flags,
               min_items=TOKEN_RANGE_DOCS)  # fmt: skip
    flagged = np.flatnonzero(flags) + i
    if flagged.size:
        redo = [np.zeros((flagged.size, *o.shape[1:]), o.dtype) for o in outs]
        run_ranges(
            kernel, flagged.size, *strip_flagged(texts, flagged, special), *luts, *params,
            *redo, np.empty(flagged.size, np.bool_), min_items=TOKEN_RANGE_DOCS,
        )  # fmt: skip
        for o, r in zip(outs, redo, strict=True):
            o[flagged] = r


#: characters :func:`run_token_kernel_few` takes in one call (more: the chunk loop)
FEW_TEXTS_CHARS = 1 << 16
#: texts :func:`run_token_kernel_few` takes in one call (more: the chunk loop)
FEW_TEXTS = 64


def run_token_kernel_few(
    kernel: Callable[..., None],
    source: Tokeniser,
    texts: Sequence[str],
    params: tuple[Any, ...],
    outs: tuple[np.ndarray, ...],
) -> bool:
    """:func:`run_token_kernel` of a few ASCII texts (a service request, or the few requests
    the server decides together) into the rows of ``outs``: their bytes as one chunk
    (:func:`chunk_bytes`), the kernel on this thread, without the chunk loop (bounds,
    pre-tokenising, the thread pool); False (nothing done, or rows to be overwritten) when it
    does not apply: more than :data:`FEW_TEXTS` texts or :data:`FEW_TEXTS_CHARS` characters, a
    text that is not ASCII or one with a social marker to strip. For a few texts that loop
    cost more than the kernel; the same values (tested against the chunk loop)."""
    n = len(texts)
    if not 0 < n <= FEW_TEXTS:
        return False
    if sum(map(len, texts)) > FEW_TEXTS_CHARS or not all(t.isascii() for t in texts):
        return False
    chunk = chunk_bytes(texts, {}, 0, n, _ascii_mode(source))
    flags = np.zeros(n, np.bool_)
    kernel(0, n, *chunk, WORD_LUT, SPACE_LUT, MARK_LUT, *params, *outs, flags)
    return not flags.any()
