"""Documents made ready for the writer, in the caller's thread: :class:`DocumentPreparer`
validates a batch (:class:`InputError` naming the field), fingerprints it, content-hashes it and,
with the MinHash channel, computes its signatures and band keys, into :class:`PreparedDocs`.

The writer (:mod:`.decide`) then only decides: nothing here touches the store.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import InputError, InputTypeError
from ..fingerprint.distance import as_fingerprints

__all__ = [
    "MAX_FUTURE_SECONDS",
    "MAX_METADATA_DEPTH",
    "DocumentPreparer",
    "PreparedDocs",
    "lsh_keys",
]

#: default of ``max_future_seconds``: a document's time may be at most this far past now
MAX_FUTURE_SECONDS = 86400.0
#: deepest nesting of arrays / objects accepted in ``metadata`` (the document itself is level 1)
MAX_METADATA_DEPTH = 64


@dataclass
class PreparedDocs:
    """A validated, fingerprinted batch."""

    ids: list[str]
    texts: list[str]
    times: npt.NDArray[np.float64]
    metadata: list[str | None]  # JSON text
    fps: npt.NDArray[np.uint64]
    empty: npt.NDArray[np.bool_]
    chash: list[bytes]
    #: MinHash channel: signatures (n, hashes) uint16, whether each has tokens, band entry keys
    #: (n, bands) uint64; None without the channel
    sig: npt.NDArray[np.uint16] | None = None
    usable: npt.NDArray[np.bool_] | None = None
    bands: npt.NDArray[np.uint64] | None = None


def _nesting_depth(value: Any, limit: int) -> int:
    """Nesting depth of dicts / lists in ``value`` (1 for a flat dict), without recursion;
    stops counting past ``limit``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if d > deepest:
            deepest = d
            if deepest > limit:
                return deepest
        if isinstance(v, Mapping):
            stack.extend((x, d + 1) for x in v.values() if isinstance(x, (Mapping, list, tuple)))
        elif isinstance(v, (list, tuple)):
            stack.extend((x, d + 1) for x in v if isinstance(x, (Mapping, list, tuple)))
    return deepest


def lsh_keys(
    verifier: Any, plan: Any, texts: Sequence[str | None]
) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.bool_], npt.NDArray[np.uint64]]:
    """(signatures (n, hashes), usable (n,), band entry keys (n, bands)) of ``texts`` as the
    batch pipeline computes them (``None`` texts: not usable)."""
    from ..batch import minhash_signatures
    from ..store.bands import band_entries

    n = len(texts)
    if n == 0:
        return (
            np.zeros((0, plan.hashes), np.uint16),
            np.zeros(0, bool),
            np.zeros((0, plan.bands), np.uint64),
        )
    given = [t if t is not None else "" for t in texts]
    sig, tokens = minhash_signatures(verifier, given, plan.hashes)
    usable = tokens > 0
    return sig, usable, band_entries(sig, usable, plan)


class DocumentPreparer:
    """Validate, fingerprint and content-hash a batch of documents: the part of
    :meth:`Deduplicator.submit` that runs in the caller's thread, apart from the writer (so a
    batch can be prepared in one thread or process and decided by
    :meth:`Deduplicator.submit_prepared` in another).

    Parameters
    ----------
    fingerprinter
        The deduplicator's fingerprinter.
    bits : int
        Fingerprint width (64 or 128).
    clock : callable
        Unix seconds; the time of documents that carry none.
    retention : float or None
        Seconds; a document whose time is older than ``now - retention`` is refused (it would
        be expired at once, so nothing acknowledged could be found).
    max_future_seconds : float
        A document whose time is more than this past now is refused.
    lsh : (Verifier, LshPlan) or None
        The MinHash channel: each document's signature and band keys are computed here too
        (:func:`neardup.batch.minhash.minhash_signatures`, the batch pipeline's tokens,
        shingles and seeds; :func:`neardup.store.bands.band_entries`).
    """

    def __init__(
        self,
        fingerprinter: Any,
        bits: int,
        clock: Callable[[], float],
        *,
        retention: float | None = None,
        max_future_seconds: float = MAX_FUTURE_SECONDS,
        lsh: tuple[Any, Any] | None = None,
    ) -> None:
        self.lsh = lsh
        self.fingerprinter = fingerprinter
        self.bits = int(bits)
        self.clock = clock
        self.retention = retention
        self.max_future_seconds = float(max_future_seconds)
        self._hash_many, self._digest_one = self._content_hashers()

    @staticmethod
    def _content_hashers() -> tuple[
        Callable[[list[str]], npt.NDArray[np.uint64]], Callable[[str], bytes]
    ]:
        """(content hashes of many texts, the big-endian digest of one text): those of
        :mod:`neardup.fingerprint`."""
        from ..fingerprint.simhash import content_digest, content_hash_many

        return (lambda texts: np.asarray(content_hash_many(texts), dtype=np.uint64)), content_digest

    def prepare(self, docs: Sequence[Mapping[str, Any]]) -> PreparedDocs:
        """Validate ``docs`` (:class:`InputError` naming the field) and fingerprint them."""
        now = self.clock()
        ids: list[str] = []
        texts: list[str] = []
        times: list[float] = []
        metas: list[str | None] = []
        seen: dict[str, int] = {}
        for i, doc in enumerate(docs):
            # fast path: a plain dict with a valid id and text, no time and no metadata
            if type(doc) is dict:
                id_ = doc.get("id")
                text = doc.get("text")
                if (
                    type(id_) is str
                    and type(text) is str
                    and 0 < len(id_) <= 1024
                    and doc.get("time") is None
                    and doc.get("metadata") is None
                    and id_ not in seen
                ):
                    seen[id_] = i
                    ids.append(id_)
                    texts.append(text)
                    times.append(now)
                    metas.append(None)
                    continue
            id_, text, t, meta_s = self._check_doc(i, doc, now, seen)
            if t != now:
                self.check_time(f"documents[{i}].time", t, now)
            seen[id_] = i
            ids.append(id_)
            texts.append(text)
            times.append(t)
            metas.append(meta_s)
        fps, empty = self._fingerprint(texts)
        # 16 bytes per document: high word then low word, each little-endian
        if len(texts) == 1:  # the service's usual request
            d = self._digest_one(texts[0])  # big-endian
            chash = [d[7::-1] + d[:7:-1]]
        else:
            ch = self._hash_many(texts) if texts else np.zeros((0, 2), np.uint64)
            raw = np.ascontiguousarray(ch, dtype="<u8").tobytes()
            chash = [raw[k : k + 16] for k in range(0, len(raw), 16)]
        out = PreparedDocs(ids, texts, np.array(times, dtype=np.float64), metas, fps, empty, chash)
        if self.lsh is not None:
            out.sig, out.usable, out.bands = lsh_keys(*self.lsh, texts)
        return out

    def check_time(self, where: str, t: float, now: float) -> None:
        """Refuse a time the store could not keep: before 0, older than the retention window
        (it would be dropped at once) or more than ``max_future_seconds`` ahead of now."""
        oldest = 0.0 if self.retention is None else max(0.0, now - self.retention)
        newest = now + self.max_future_seconds
        if oldest <= t <= newest:
            return
        if t < 0:
            raise InputError(f"{where} must be unix seconds >= 0, got {t!r}")
        if t < oldest:
            raise InputError(
                f"{where} is {t!r}, older than the retention window of {self.retention:g} s "
                f"(now - retention = {oldest:.0f}): it would be dropped at once. Send documents "
                "from inside the window, or omit time (now)"
            )
        raise InputError(
            f"{where} is {t!r}, more than {self.max_future_seconds:g} s in the future (now = "
            f"{now:.0f}); times must be unix seconds up to now + max_future_seconds"
        )

    @staticmethod
    def _check_doc(
        i: int, doc: Any, now: float, seen: dict[str, int]
    ) -> tuple[str, str, float, str | None]:
        """Validate one document (every rule, with the message naming the field)."""
        where = f"documents[{i}]"
        if not isinstance(doc, Mapping):
            raise InputTypeError(
                f"{where} must be a mapping like {{'id': str, 'text': str}}, got {type(doc).__name__}"
            )
        if "id" not in doc:
            raise InputError(f"{where}.id is missing; every document needs a string id")
        id_ = doc["id"]
        if not isinstance(id_, str):
            raise InputTypeError(f"{where}.id must be a str, got {type(id_).__name__}")
        if not id_ or len(id_) > 1024:
            raise InputError(f"{where}.id must be 1 to 1024 characters, got {len(id_)}")
        if "text" not in doc:
            raise InputError(f"{where}.text is missing; every document needs a text")
        text = doc["text"]
        if not isinstance(text, str):
            raise InputTypeError(f"{where}.text must be a str, got {type(text).__name__}")
        t = doc.get("time")
        if t is None:
            t = now
        elif isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(float(t)):
            raise InputTypeError(
                f"{where}.time must be unix seconds (a finite number) or null, got {t!r}"
            )
        meta = doc.get("metadata")
        if meta is not None:
            if not isinstance(meta, Mapping):
                raise InputTypeError(
                    f"{where}.metadata must be an object (dict) or null, got {type(meta).__name__}"
                )
            depth = _nesting_depth(meta, MAX_METADATA_DEPTH)
            if depth > MAX_METADATA_DEPTH:
                raise InputError(
                    f"{where}.metadata is nested more than {MAX_METADATA_DEPTH} levels deep; "
                    "flatten it"
                )
            try:
                meta_s: str | None = json.dumps(meta, ensure_ascii=False, allow_nan=False)
            except (TypeError, ValueError, RecursionError) as exc:
                raise InputError(f"{where}.metadata must be JSON-serialisable: {exc}") from exc
        else:
            meta_s = None
        if id_ in seen:
            raise InputError(
                f"{where}.id {id_!r} repeats documents[{seen[id_]}].id; ids in one batch must be unique"
            )
        return id_, text, float(t), meta_s

    def _fingerprint(
        self, texts: list[str]
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
        fpr = self.fingerprinter
        if not texts:
            shape = (0,) if self.bits == 64 else (0, 2)
            return np.zeros(shape, np.uint64), np.zeros(0, bool)
        if hasattr(fpr, "fingerprint_batch"):
            b = fpr.fingerprint_batch(texts)
            fps, empty = b.fingerprints, np.asarray(b.empty, dtype=bool)
        else:
            fps = fpr.fingerprint_many(texts)
            empty = np.array([not t.strip() for t in texts], dtype=bool)
        return as_fingerprints(fps, bits=self.bits), empty
