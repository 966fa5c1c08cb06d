"""Exact duplicates and the first copies' fingerprints, in one pass over the text bytes.

:func:`stage_exact` gives each text's first copy (same normalised content hash:
:func:`content_hashes`, grouped by :func:`first_of_equal_rows`); :func:`stage_fingerprint`
fingerprints texts. :class:`ExactFingerprintPass` (and :func:`stage_exact_fingerprint`) does
both for the first copies at once, chunk by chunk, and can be fed while the texts are being
read (:func:`~neardup.batch.files.dedup_files`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._arrays import concat_ascii
from ..errors import InputError
from ..io.texts import SpanTexts

__all__ = [
    "EXACT_CHUNK_BYTES",
    "EXACT_NUMBA_MIN_CHARS",
    "EXACT_SEEN_MIN_CHARS",
    "ExactFingerprintPass",
    "content_hashes",
    "first_of_equal_rows",
    "stage_exact",
    "stage_exact_fingerprint",
    "stage_fingerprint",
]


def stage_exact(texts: Sequence[str], workers: int = 1) -> npt.NDArray[np.int64]:
    """Position of the first document with the same normalised content hash, shape (n,) int64."""
    n = len(texts)
    if n == 0:
        return np.zeros(0, np.int64)
    return first_of_equal_rows(content_hashes(texts, workers=workers))


#: text bytes per :func:`content_hashes` chunk
EXACT_CHUNK_BYTES = 8 << 20
#: below this many characters in all, :func:`content_hashes` calls ``content_hash_many``
EXACT_NUMBA_MIN_CHARS = 4 << 20
#: mean characters per text of an :class:`ExactFingerprintPass` chunk from which copies seen
#: in earlier chunks are looked up (a dict lookup per text, under the GIL) rather than
#: fingerprinted again (for ~100-character posts the lookup costs more than the fingerprint)
EXACT_SEEN_MIN_CHARS = 512


def content_hashes(texts: Sequence[str], *, workers: int = 1) -> npt.NDArray[np.uint64]:
    """``content_hash_many(texts, normalize=True)`` (uint64 (n, 2), the same values), with
    fewer passes over ASCII text.

    ``content_hash_many`` hashes an ASCII text's lower-cased bytes directly when its whitespace
    collapse is the identity (printable, no double space, no space at an end), checking that
    with four passes over the text (``encode``, ``lower``, ``find``, ``translate``). Here
    chunks of ASCII texts are joined and encoded once, and one numba pass
    (:func:`~neardup.text.ascii.lower_ascii_clean`) lower-cases them and decides the same
    condition; clean texts are hashed from the lowered buffer (``xxh3_128``), the other ASCII
    texts after their whitespace is collapsed in numba
    (:func:`~neardup.text.ascii.normalized_ascii_digests`, not ``" ".join(t.lower().split())``
    per text: long documents with a newline each made that most of a run; see
    benchmarks/bench_dedup.py), non-ASCII texts by ``content_hash_many`` itself. Tested equal
    (Hypothesis).
    """
    import xxhash

    from ..fingerprint.simhash import content_hash_many
    from ..text.ascii import lower_ascii_clean, normalized_ascii_digests

    n = len(texts)
    if sum(map(len, texts)) < EXACT_NUMBA_MIN_CHARS:  # not worth starting numba threads
        return np.asarray(content_hash_many(texts, normalize=True), np.uint64).reshape(n, 2)
    out = np.empty((n, 2), np.uint64)
    digest = xxhash.xxh3_128_digest
    is_ascii = np.fromiter((t.isascii() for t in texts), np.bool_, n)
    other = np.flatnonzero(~is_ascii)
    if other.size:
        out[other] = content_hash_many([texts[k] for k in other.tolist()], normalize=True)
    idx = np.flatnonzero(is_ascii).tolist()
    scratch = np.empty(0, np.uint8)
    i = 0
    while i < len(idx):  # chunks of ASCII texts, wherever they are
        j, size = i, 0
        while j < len(idx) and size < EXACT_CHUNK_BYTES:
            size += len(texts[idx[j]])
            j += 1
        run = [texts[k] for k in idx[i:j]]
        lens = np.fromiter(map(len, run), np.int64, j - i)
        data = "".join(run).encode("ascii")
        if scratch.size < len(data):
            scratch = np.empty(len(data), np.uint8)
        lowered, starts, clean = lower_ascii_clean(data, lens, workers=workers, out=scratch)
        mv = lowered.data  # a memoryview of the lowered bytes
        parts = [
            digest(mv[s : s + m]) if c else b"\0" * 16
            for s, m, c in zip(starts.tolist(), lens.tolist(), clean.tolist(), strict=True)
        ]
        pos = np.asarray(idx[i:j], np.int64)
        out[pos] = np.frombuffer(b"".join(parts), dtype=">u8").reshape(-1, 2)
        if not clean.all():  # whitespace to collapse (in numba) before hashing
            rest = np.flatnonzero(~clean)
            digests = normalized_ascii_digests(lowered, starts[rest], starts[rest] + lens[rest])
            out[pos[rest]] = np.frombuffer(digests, dtype=">u8").reshape(-1, 2)
        i = j
    return out


def stage_exact_fingerprint(
    texts: Sequence[str],
    fingerprinter: Any,
    workers: int = 1,
    timings: dict[str, float] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
    """:func:`stage_exact` and :func:`stage_fingerprint` of the first copies in one pass over
    the text bytes: ``(first, fps_u, empty_u)``, equal to ::

        first = stage_exact(texts, workers)
        unique = np.flatnonzero(first == np.arange(len(texts)))
        fps_u, empty_u = stage_fingerprint(fingerprinter, [texts[i] for i in unique], workers)

    (tested). See :class:`ExactFingerprintPass`, which does the work (and can be fed the texts
    while they are being read). ``timings`` (optional) receives ``exact`` and ``fingerprint``.
    """
    p = ExactFingerprintPass(fingerprinter, workers)
    try:
        p.feed(texts)
        return p.finish(texts, timings)
    finally:
        p.close()


class ExactFingerprintPass:
    """Exact content hashes and first-copy fingerprints, computed chunk by chunk as texts come.

    ``feed(texts)`` hands over the texts appended to ``texts`` since the last call (the list
    may keep growing, e.g. while a reader fills it; positions never change); ``finish(texts)``
    returns ``(first, fps_u, empty_u)`` exactly as :func:`stage_exact` +
    :func:`stage_fingerprint` of the first copies give them; ``close()`` stops the threads
    (always call it, e.g. when reading fails).

    How: chunks of ASCII texts (``EXACT_CHUNK_BYTES``) are joined and encoded once; one nogil
    numba pass lower-cases them and checks their whitespace (:func:`content_hashes`: the same
    values as ``content_hash_many``), and the same lowered bytes are fingerprinted
    (:meth:`~neardup.fingerprint.Fingerprinter.fingerprint_lowered_ascii`): the fingerprint
    stage's own join, ``lower`` and ``encode`` are gone. ``workers`` threads run whole chunks
    (the kernels release the GIL), so a reader that feeds as it goes overlaps with them. A text
    is fingerprinted unless an earlier text (in input order) of an already hashed chunk has the
    same content hash, i.e. unless it is certainly not a first copy; first copies that were not
    fingerprinted here (non-ASCII, longer than ``CHUNK_CHARS``) go through
    ``fingerprint_batch`` in ``finish``. Fingerprints depend only on the text, so which extra
    copies get fingerprinted never changes a result.

    Small inputs (below ``EXACT_NUMBA_MIN_CHARS`` characters, no chunk started) and
    fingerprinter settings without an ASCII kernel path run the two stages instead.
    """

    def __init__(self, fingerprinter: Any, workers: int = 1) -> None:
        import threading

        self.fp = fingerprinter
        self.workers = max(1, int(workers))
        self.kernel = bool(
            hasattr(fingerprinter, "lowered_ascii_ok") and fingerprinter.lowered_ascii_ok()
        )
        self.n = 0  # texts fed so far
        self.t_first: float | None = None
        self._lens: list[npt.NDArray[np.int64]] = []
        self._ascii: list[npt.NDArray[np.bool_]] = []
        self._pending: list[npt.NDArray[np.int64]] = []  # ASCII positions not in a chunk yet
        self._pending_size = 0
        self._futures: list[Any] = []
        self._pool: Any = None
        self._seen: dict[bytes, int] = {}  # content hash -> smallest position registered
        self._lock = threading.Lock()
        self._local = threading.local()
        self._busy = [0.0, 0.0]  # thread seconds in all, in the fingerprint kernel
        #: every text's content hash (uint64 (n, 2), as ``content_hash_many``), once
        #: :meth:`finish` has returned: what an online store keeps for each document, so a
        #: seed stores the run's instead of hashing every kept text again
        self.hashes: npt.NDArray[np.uint64] | None = None

    # -- feeding
    def feed(self, texts: Sequence[str]) -> None:
        """Take ``texts[self.n:]`` (texts appended since the last call)."""
        n = len(texts)
        if n <= self.n:
            return
        if self.t_first is None:
            self.t_first = time.perf_counter()
        if isinstance(texts, SpanTexts):  # no str made for the spans
            lens = texts.lengths(self.n, n)
            asc = texts.ascii_mask(self.n, n)
        else:
            new = (
                texts[self.n : n]
                if isinstance(texts, list)
                else [texts[k] for k in range(self.n, n)]
            )
            lens = np.fromiter(map(len, new), np.int64, len(new))
            asc = np.fromiter((t.isascii() for t in new), np.bool_, len(new))
        self._lens.append(lens)
        self._ascii.append(asc)
        if self.kernel:
            pos = np.flatnonzero(asc) + self.n
            sizes = np.cumsum(lens[asc])
            start = 0  # cut where the pending chunk reaches EXACT_CHUNK_BYTES
            while start < pos.size:
                need = EXACT_CHUNK_BYTES - self._pending_size
                base = int(sizes[start - 1]) if start else 0
                k = int(np.searchsorted(sizes, base + need, side="left"))
                if k >= pos.size:  # not enough for a chunk yet
                    self._pending.append(pos[start:])
                    self._pending_size += int(sizes[-1]) - base
                    break
                self._pending.append(pos[start : k + 1])
                self._submit(texts)
                start = k + 1
        self.n = n

    def _submit(self, texts: Sequence[str]) -> None:
        if not self._pending:
            return
        from concurrent.futures import ThreadPoolExecutor

        pos = np.concatenate(self._pending)
        self._pending, self._pending_size = [], 0
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers)
        self._futures.append(self._pool.submit(self._chunk, texts, pos))

    def _chunk(self, texts: Sequence[str], pos: npt.NDArray[np.int64]) -> tuple[Any, ...]:
        import xxhash

        from ..fingerprint.simhash import CHUNK_CHARS
        from ..text.ascii import lower_ascii_clean_serial, normalized_ascii_digests

        c0 = time.perf_counter()
        raw = getattr(self._local, "raw", None)
        got = texts.gather_ascii(pos, raw) if isinstance(texts, SpanTexts) else None
        if got is None:
            run = [texts[k] for k in pos.tolist()]
            data, ln, self._local.raw = concat_ascii(run, raw)
        else:  # straight from the mapped input, without the GIL
            data, ln, self._local.raw = got
        scratch = getattr(self._local, "scratch", None)
        if scratch is None or scratch.size < len(data):
            scratch = np.empty(max(len(data), EXACT_CHUNK_BYTES + 1), np.uint8)
            self._local.scratch = scratch
        lowered, starts, clean = lower_ascii_clean_serial(data, ln, out=scratch)
        mv = lowered.data
        digest = xxhash.xxh3_128_digest
        zero = b"\0" * 16
        keys = b"".join(
            [
                digest(mv[s : s + m]) if c else zero
                for s, m, c in zip(starts.tolist(), ln.tolist(), clean.tolist(), strict=True)
            ]
        )
        h = np.frombuffer(keys, dtype=">u8").reshape(-1, 2).astype(np.uint64)
        if not clean.all():  # whitespace to collapse (in numba) before hashing
            rest = np.flatnonzero(~clean)
            digests = normalized_ascii_digests(lowered, starts[rest], starts[rest] + ln[rest])
            h[rest] = np.frombuffer(digests, dtype=">u8").reshape(-1, 2)
            keys = h.astype(">u8").tobytes()
        if int(ln.sum()) >= EXACT_SEEN_MIN_CHARS * pos.size:
            todo = []
            with self._lock:  # fingerprint unless an earlier equal text is known
                seen = self._seen
                get = seen.get
                for q, p in enumerate(pos.tolist()):
                    key = keys[16 * q : 16 * q + 16]
                    v = get(key)
                    if v is None or p < v:
                        seen[key] = p
                        todo.append(q)
            sel = np.asarray(todo, np.int64)
        else:  # short texts: fingerprinting a copy costs less than a dict lookup per text
            sel = np.flatnonzero(first_of_equal_rows(h) == np.arange(pos.size))
        sel = sel[ln[sel] <= CHUNK_CHARS]
        words = self.fp.bits // 64
        f = np.zeros((sel.size, words), np.uint64)
        nf = np.zeros(sel.size, np.int64)
        k0 = time.perf_counter()
        if sel.size:
            self.fp.fingerprint_lowered_ascii(lowered, starts[sel], starts[sel] + ln[sel], f, nf)
        k1 = time.perf_counter()
        with self._lock:
            self._busy[0] += k1 - c0
            self._busy[1] += k1 - k0
        return pos, h, pos[sel], f, nf

    # -- results
    def finish(
        self,
        texts: Sequence[str],
        timings: dict[str, float] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
        """Feed the rest of ``texts`` and return ``(first, fps_u, empty_u)``.
        ``progress(texts done)`` (optional) is called as the chunks' results are collected."""
        from ..fingerprint.simhash import content_hash_many

        t0 = time.perf_counter()
        self.feed(texts)
        n = len(texts)
        if n != self.n:
            raise InputError(f"finish() got {n} texts, {self.n} were fed")
        lens = np.concatenate(self._lens) if self._lens else np.zeros(0, np.int64)
        if not self.kernel or n == 0 or (not self._futures and lens.sum() < EXACT_NUMBA_MIN_CHARS):
            self.close()
            self.hashes = content_hashes(texts, workers=self.workers)
            first = first_of_equal_rows(self.hashes)
            t1 = time.perf_counter()
            unique = np.flatnonzero(first == np.arange(n))
            fps_u, empty_u = stage_fingerprint(
                self.fp, [texts[i] for i in unique.tolist()], self.workers
            )
            if timings is not None:
                timings["exact"] = round(t1 - t0, 4)
                timings["fingerprint"] = round(time.perf_counter() - t1, 4)
            return first, fps_u, empty_u
        self._submit(texts)
        words = self.fp.bits // 64
        hashes = np.empty((n, 2), np.uint64)
        fps = np.zeros((n, words), np.uint64)
        nfeat = np.zeros(n, np.int64)
        done = np.zeros(n, np.bool_)
        other = np.flatnonzero(~np.concatenate(self._ascii))
        if other.size:  # overlaps with the chunks still running
            hashes[other] = content_hash_many([texts[k] for k in other.tolist()], normalize=True)
        collected = int(other.size)
        for fut in self._futures:
            pos, h, rows, f, nf = fut.result()
            hashes[pos] = h
            fps[rows] = f
            nfeat[rows] = nf
            done[rows] = True
            collected += int(pos.size)
            if progress is not None:
                progress(collected)
        self.close()
        self.hashes = hashes
        first = first_of_equal_rows(hashes)
        unique = np.flatnonzero(first == np.arange(n))
        t1 = time.perf_counter()
        missing = unique[~done[unique]]
        if missing.size:
            batch = self.fp.fingerprint_batch(
                [texts[i] for i in missing.tolist()], workers=self.workers
            )
            fps[missing] = np.asarray(batch.fingerprints, np.uint64).reshape(missing.size, words)
            nfeat[missing] = np.asarray(batch.n_features, np.int64)
        t2 = time.perf_counter()
        fps_u = fps[unique, 0].copy() if words == 1 else fps[unique]
        empty_u = nfeat[unique] == 0
        if timings is not None:  # the wall time of finish, split by the kernel's share
            share = self._busy[1] / self._busy[0] if self._busy[0] > 0 else 0.0
            timings["exact"] = round((t1 - t0) * (1 - share), 4)
            timings["fingerprint"] = round((t1 - t0) * share + (t2 - t1), 4)
        return first, fps_u, empty_u

    def close(self) -> None:
        """Stop the threads (chunks not started are dropped); idempotent."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def first_of_equal_rows(h: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """For each row of ``h`` (uint64 (n, w)), the position of the first equal row (int64 (n,)).

    An (unstable, vectorised) sort on the first column, then the smallest position of each
    group of equal rows; rows whose first words tie but differ later (for 128-bit hashes:
    practically never) make it fall back to a full lexicographic sort. Equals
    :func:`neardup.batch.reference.first_of_equal_rows_reference` (tested).
    """
    n = h.shape[0]
    if n == 0:
        return np.zeros(0, np.int64)
    o = np.argsort(h[:, 0])
    hs = h[o]
    tie = hs[1:, 0] == hs[:-1, 0]
    if not tie.any():  # no two rows share a first word: every row is its own first
        return np.arange(n, dtype=np.int64)
    same = np.all(hs[1:] == hs[:-1], axis=1)
    if np.any(tie & ~same):
        o = np.lexsort(h.T[::-1])
        hs = h[o]
        same = np.all(hs[1:] == hs[:-1], axis=1)
    new = np.ones(n, bool)
    new[1:] = ~same
    group_start = np.flatnonzero(new)
    smallest = np.minimum.reduceat(o, group_start)  # the first position of every group
    first = np.empty(n, np.int64)
    first[o] = smallest[np.cumsum(new) - 1]
    return first


def stage_fingerprint(
    fingerprinter: Any, texts: Sequence[str], workers: int = 1
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
    """Fingerprints (uint64 (n,) or (n, 2)) and the empty flags (bool (n,))."""
    batch = fingerprinter.fingerprint_batch(texts, workers=workers)
    return np.asarray(batch.fingerprints, dtype=np.uint64), np.asarray(batch.empty, dtype=bool)
