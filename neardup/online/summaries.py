"""Stored token summaries of long rows: what lets the decider turn down a long row's SimHash hit
without reading, decompressing and tokenising its text.

A long text's SimHash neighbours in a large window are many rows of other long texts drawn
from the same vocabulary, and nearly all fail verification's first step, the histogram bound
(:func:`~neardup.verify.overlap.histogram_bound_decisions`). The decider already keeps the
histograms of rows it has read (:class:`~neardup.online.rowcache.HistogramCache`), but a query
meets mostly rows it has never read: ``benchmarks/bench_candidates.py`` counts them, and how
many a stored summary turns down. So each added row of at least :data:`SUMMARY_MIN_TOKENS`
tokens is stored with a summary: its token histogram at 4 bits a bucket (:func:`_pack`: counts
up to 11 as they are, larger ones by the upper end of a range, 15, 23 or 47, which the bound
takes in their place, and 48 or more as unbounded), its token count and content hash (what the
cache holds beside a histogram), and a digest of the row's MinHash sketch. The summary is
derived data, never needed: a row without one (a short row, a row replayed from the log after
a crash, a summary that does not check) is read as before, and the decisions are the same
either way (a bound turns down only pairs verification would reject).

A summary is used only where its digest equals that of the row's current sketch (kept in the
segments, read for the token-count bound anyway) and its checksum holds, so one left behind
by a deleted row whose row id was allocated again, or damaged on disk, is never taken for
another text's.

Layout (little-endian, :data:`SUMMARY_BYTES`): ``u32`` sketch digest, 16-byte content hash,
``u32`` token count, ``2**(HIST_BITS - 1)`` bytes of 4-bit count codes (bucket ``2k`` in the
low nibble of byte ``k``), ``u32`` CRC-32 of everything before it. A summary of another size
(an earlier layout) is set aside as a damaged one is: the row is read.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..verify.tokens import HIST_BITS, HIST_MAX, token_histograms

__all__ = [
    "SUMMARY_BYTES",
    "SUMMARY_MIN_TOKENS",
    "added_summaries",
    "cache_summaries",
    "decode_summaries",
    "make_summaries",
    "sketch_digest",
]

#: the token count from which an added row is stored with a summary. Making one costs about as
#: much as tokenising the text again, and its bytes; what it spares grows with the text's
#: length. In ``bench_window.py``'s 10 M window, rows of 512 tokens or more (5 % of them) were
#: the stored side of 85 % of the long pairs verified, and those of 256-511 (7 %) of the rest
#: (``bench_candidates.py`` counts both); a corpus of posts and news makes none
SUMMARY_MIN_TOKENS = 512
_BUCKETS = 1 << HIST_BITS
_HEAD = struct.Struct("<I16sI")
#: bytes of one summary
SUMMARY_BYTES = _HEAD.size + _BUCKETS // 2 + 4
#: what each 4-bit code stands for: codes 0-11 the count itself, 12-14 any count up to 15, 23
#: and 47 (an upper bound, which is all the histogram bound needs of the stored side), 15 any
#: count at all (:data:`HIST_MAX`, the bound's mark of a bucket it cannot bound). A long
#: text's frequent tokens fill buckets past 15; read as unbounded, each such bucket let the
#: query's whole count through, and most long pairs passed (``benchmarks/bench_candidates.py``)
_DECODE = np.array([*range(12), 15, 23, 47, HIST_MAX], np.uint8)
#: the code of each count 0..255: the least code whose value is at least the count
_ENCODE = np.searchsorted(_DECODE, np.arange(256)).astype(np.uint8)
#: each packed byte's two counts as one little-endian u16 (the low nibble's count first): a
#: summary is unpacked by one table look-up a byte
_DECODE_PAIR = _DECODE[np.arange(256) & 0x0F].astype("<u2") | (
    _DECODE[np.arange(256) >> 4].astype("<u2") << 8
)


def sketch_digest(sketch: npt.NDArray[np.uint8]) -> int:
    """The digest of one row's MinHash sketch bytes that its summary carries."""
    return zlib.crc32(np.ascontiguousarray(sketch).tobytes())


def _pack(hist: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """(n, 2**HIST_BITS) counts as (n, 2**(HIST_BITS - 1)) bytes of 4-bit codes (:data:`_DECODE`).

    >>> _unpack(_pack(np.array([[0, 11, 12, 15, 16, 47, 48, 255] * (_BUCKETS // 8)], np.uint8)))[0, :8].tolist()
    [0, 11, 15, 15, 23, 47, 255, 255]
    """
    h = _ENCODE[hist]
    return (h[:, 0::2] | (h[:, 1::2] << 4)).astype(np.uint8)


def _unpack(packed: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """(n, 2**(HIST_BITS - 1)) bytes of 4-bit codes as (n, 2**HIST_BITS) counts, each at least
    the count it was made from (:data:`HIST_MAX` where it may be any)."""
    return _DECODE_PAIR[packed].view(np.uint8).reshape(packed.shape[0], _BUCKETS)


def make_summaries(
    verifier: Any,
    texts: Sequence[str],
    sketches: npt.NDArray[np.uint8],
    chash: Sequence[bytes],
    tokens: npt.NDArray[np.integer[Any]],
    hists: npt.NDArray[np.uint8] | None = None,
) -> list[bytes | None]:
    """The summary of each text of at least :data:`SUMMARY_MIN_TOKENS` tokens (``tokens``: the
    verifier's token counts, as the MinHash channel counts them), None for the others:
    ``sketches`` are the rows' stored sketches, ``chash`` their content hashes; ``hists``
    (optional): the texts' token histograms, as :func:`~neardup.verify.tokens.token_histograms`
    makes them (the MinHash pass's: :attr:`neardup.online.prepare.PreparedDocs.hists`),
    else the long texts are tokenised here."""
    out: list[bytes | None] = [None] * len(texts)
    long = np.flatnonzero(np.asarray(tokens) >= SUMMARY_MIN_TOKENS)
    if not long.size:
        return out
    if hists is not None:
        hist, counts = hists[long], np.asarray(tokens, np.int64)[long]
    else:
        hist, counts = token_histograms(verifier, [texts[i] for i in long.tolist()])
    packed = _pack(hist)
    for k, i in enumerate(long.tolist()):
        body = (
            _HEAD.pack(sketch_digest(sketches[i]), chash[i], int(counts[k])) + packed[k].tobytes()
        )
        out[i] = body + struct.pack("<I", zlib.crc32(body))
    return out


def decode_summaries(
    blobs: dict[int, bytes], digests: dict[int, int]
) -> tuple[list[int], npt.NDArray[np.uint8], npt.NDArray[np.int64], list[bytes], int]:
    """The usable summaries of ``blobs`` (row id -> stored summary): those of the right size
    whose checksum holds and whose sketch digest is ``digests[row id]`` (the row's current
    sketch). Returns (row ids, histograms (k, 2**HIST_BITS) uint8, token counts, content
    hashes, how many were set aside)."""
    rids: list[int] = []
    packed: list[bytes] = []
    counts: list[int] = []
    chashes: list[bytes] = []
    bad = 0
    for rid, blob in blobs.items():
        if (
            len(blob) != SUMMARY_BYTES
            or zlib.crc32(blob[:-4]) != struct.unpack_from("<I", blob, SUMMARY_BYTES - 4)[0]
        ):
            bad += 1
            continue
        digest, ch, n = _HEAD.unpack_from(blob)
        if digests.get(rid) != digest:
            bad += 1
            continue
        rids.append(rid)
        chashes.append(ch)
        counts.append(n)
        packed.append(blob[_HEAD.size : -4])
    if not rids:
        return [], np.zeros((0, _BUCKETS), np.uint8), np.zeros(0, np.int64), [], bad
    arr = np.frombuffer(b"".join(packed), np.uint8).reshape(len(rids), _BUCKETS // 2)
    return rids, _unpack(arr), np.array(counts, np.int64), chashes, bad


def added_summaries(
    verifier: Any,
    texts: Sequence[str | None],
    sketches: npt.NDArray[np.uint8],
    chash: Sequence[bytes],
    tokens: npt.NDArray[np.integer[Any]],
    adds: Sequence[bool],
    hists: npt.NDArray[np.uint8] | None = None,
) -> list[bytes | None] | None:
    """The summaries a write group's documents would be stored with (by position; None for
    a short one, or one of a ``check``: ``adds`` False), or None when none is long;
    ``hists``: the documents' token histograms where prepared (:func:`make_summaries`)."""
    long = [i for i in np.flatnonzero(np.asarray(tokens) >= SUMMARY_MIN_TOKENS).tolist() if adds[i]]
    if not long or verifier is None:
        return None
    out: list[bytes | None] = [None] * len(adds)
    made = make_summaries(
        verifier,
        [texts[i] or "" for i in long],
        sketches[long],
        [chash[i] for i in long],
        np.asarray(tokens)[long],
        None if hists is None else hists[long],
    )
    for i, b in zip(long, made, strict=True):
        out[i] = b
    return out


def cache_summaries(
    store: Any,
    cache: Any,
    uniq: npt.NDArray[np.int64],
    stored: npt.NDArray[np.uint8],
    row_t: npt.NDArray[np.int64],
) -> tuple[int, int]:
    """Put into ``cache`` (a :class:`~neardup.online.rowcache.HistogramCache`) the stored
    summaries of the long rows among ``uniq`` (ascending row ids; ``stored`` their sketches,
    ``row_t`` their token counts, 0 where unknown) that it lacks, read from ``store``
    (:meth:`neardup.store.Store.summaries`). Returns (summaries put, summaries set aside)."""
    if not cache.capacity:
        return 0, 0
    long = np.flatnonzero(row_t >= SUMMARY_MIN_TOKENS)
    if not long.size:
        return 0, 0
    cached = cache.slots(uniq[long].tolist())
    want = {int(uniq[k]): k for k in long.tolist() if int(uniq[k]) not in cached}
    if not want:
        return 0, 0
    blobs = store.summaries(want)
    if not blobs:
        return 0, 0
    digests = {rid: sketch_digest(stored[want[rid]]) for rid in blobs}
    rids, hist, counts, chashes, bad = decode_summaries(blobs, digests)
    if rids:
        cache.put(rids, hist, counts, chashes)
    return len(rids), bad
