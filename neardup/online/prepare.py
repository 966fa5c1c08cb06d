"""Documents made ready for the writer, in the caller's thread: :class:`DocumentPreparer`
validates a batch (:class:`InputError` naming the field), fingerprints it, content-hashes it and,
with the MinHash channel, computes its signatures and band keys, into :class:`PreparedDocs`.

The writer (:mod:`.decide`) then only decides: nothing here touches the store.
"""

from __future__ import annotations

import json
import math
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import InputError, InputTypeError
from ..fingerprint.distance import as_fingerprints
from ..text.token_kernels import prepared_at
from ..verify.tokens import HIST_BITS

__all__ = [
    "HIST_DOCS",
    "ID_PATTERN",
    "ID_RULE",
    "MAX_FUTURE_SECONDS",
    "MAX_ID_LENGTH",
    "MAX_METADATA_DEPTH",
    "DocumentPreparer",
    "Op",
    "PreparedDocs",
    "add_lsh_keys",
    "histograms_room",
    "id_problem",
    "json_type_name",
    "lsh_keys",
]

#: default of ``max_future_seconds``: a document's time may be at most this far past now
MAX_FUTURE_SECONDS = 86400.0
#: deepest nesting of arrays / objects accepted in ``metadata`` (the document itself is level 1)
MAX_METADATA_DEPTH = 64
#: longest accepted document id, in characters
MAX_ID_LENGTH = 1024
#: an id's characters: anything but control characters (C0 U+0000-U+001F, DEL U+007F, C1
#: U+0080-U+009F) and lone surrogates. An id travels in URL paths (``GET {p}/docs/{id}``),
#: logs and line-oriented outputs, where a newline or NUL cannot be told from the end of it.
#: The same pattern is the ``id`` field's ``pattern`` in the service's OpenAPI document.
ID_PATTERN = r"^[^\u0000-\u001f\u007f-\u009f]+$"
#: the id rule in words (error messages, the OpenAPI description, docs/service.md)
ID_RULE = (
    f"1 to {MAX_ID_LENGTH} characters, none of them a control character (U+0000-U+001F, "
    "U+007F-U+009F: no newline, tab, carriage return or NUL) or a lone surrogate"
)
_BAD_ID_CHAR = re.compile("[\\x00-\\x1f\\x7f-\\x9f\\ud800-\\udfff]")


def surrogate_problem(value: str) -> str | None:
    """Why ``value`` (a text, or metadata as JSON) cannot be stored, or None: a lone surrogate
    (U+D800-U+DFFF, e.g. from a ``"\\ud800"`` JSON escape) has no UTF-8 form."""
    if value.isascii():  # (O(1): a flag of the str)
        return None
    try:
        value.encode("utf-8")  # (faster than a regular expression's scan)
    except UnicodeEncodeError as exc:
        return (
            f"holds a lone surrogate (U+{ord(value[exc.start]):04X} at character {exc.start}), "
            "which is not Unicode text and has no UTF-8 form to store; replace it (e.g. with "
            "U+FFFD)"
        )
    return None


def id_problem(id_: str) -> str | None:
    """What is wrong with the string ``id_`` as a document id (:data:`ID_RULE`), or None.

    The one id rule of the store: the service's validation and :class:`DocumentPreparer` both
    ask it.

    >>> id_problem("https://example.com/a b?c=1#d ü") is None
    True
    >>> id_problem("a" + chr(10) + "b")[:51]
    'contains the control character U+000A at position 1'
    """
    n = len(id_)
    if not 0 < n <= MAX_ID_LENGTH:
        return f"must be 1 to {MAX_ID_LENGTH} characters long, got {n} characters"
    bad = _BAD_ID_CHAR.search(id_)
    if bad is None:
        return None
    c = bad.group()
    what = "a lone surrogate" if "\ud800" <= c <= "\udfff" else "the control character"
    return f"contains {what} U+{ord(c):04X} at position {bad.start()}; ids are {ID_RULE}"


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
    #: token counts (n,) int64 (``Verifier.tokens``, counted by the signatures' pass; usable is
    #: tokens > 0): what a batch run's keep rule takes beside the signatures
    tokens: npt.NDArray[np.int64] | None = None
    #: tokens counted in the coarse hash buckets, (n, 64) uint8, by the same pass: the token
    #: masks stored in the sketches and the queries' side of their bound; None where not made
    #: (signatures given by a batch run: their rows' masks are unknown)
    buckets: npt.NDArray[np.uint8] | None = None
    #: tokens counted in the verifier's histogram buckets, (n, 2**HIST_BITS) uint8, by the same
    #: pass (:func:`~neardup.verify.tokens.token_histograms`' rows): the queries' side of the
    #: histogram bound, the long rows' summaries and verification's first step, not tokenised
    #: again in the writer; None where not made (a bulk load's, or signatures a batch run gave)
    hists: npt.NDArray[np.uint8] | None = None
    #: beside ``hists``, the texts that pass needed Python work for (non-ASCII texts
    #: pre-tokenised, social markers stripped; by position), in the form verification's
    #: kernels take (:data:`~neardup.text.token_kernels.Prepared`): verification takes them
    #: with the histograms instead of doing that work again
    special: dict[int, tuple[bytes, int]] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, idx: npt.NDArray[np.int64]) -> PreparedDocs:
        """The documents at positions ``idx``, in that order (a new batch)."""
        pos = np.asarray(idx, np.int64)
        at = pos.tolist()
        return PreparedDocs(
            [self.ids[i] for i in at],
            [self.texts[i] for i in at],
            self.times[pos],
            [self.metadata[i] for i in at],
            self.fps[pos],
            self.empty[pos],
            [self.chash[i] for i in at],
            None if self.sig is None else self.sig[pos],
            None if self.usable is None else self.usable[pos],
            None if self.bands is None else self.bands[pos],
            None if self.tokens is None else self.tokens[pos],
            None if self.buckets is None else self.buckets[pos],
            None if self.hists is None else self.hists[pos],
            None if self.special is None else prepared_at(self.special, at),
        )

    @staticmethod
    def concat(parts: Sequence[PreparedDocs]) -> PreparedDocs:
        """The batches ``parts`` one after another (made by one preparer: the same channel)."""
        if len(parts) == 1:
            return parts[0]

        def cat(arrays: list[Any]) -> Any:
            return None if any(a is None for a in arrays) else np.concatenate(arrays)

        return PreparedDocs(
            [x for p in parts for x in p.ids],
            [x for p in parts for x in p.texts],
            np.concatenate([p.times for p in parts]),
            [x for p in parts for x in p.metadata],
            np.concatenate([p.fps for p in parts]),
            np.concatenate([p.empty for p in parts]),
            [x for p in parts for x in p.chash],
            cat([p.sig for p in parts]),
            cat([p.usable for p in parts]),
            cat([p.bands for p in parts]),
            cat([p.tokens for p in parts]),
            cat([p.buckets for p in parts]),
            cat([p.hists for p in parts]),
            PreparedDocs.specials(parts),
        )

    @staticmethod
    def specials(parts: Sequence[PreparedDocs]) -> dict[int, tuple[bytes, int]] | None:
        """The ``special`` entries of the batches ``parts`` one after another, keyed by
        position in them all (None where a part has none): :meth:`concat`'s, alone."""
        if any(p.special is None for p in parts):
            return None
        if len(parts) == 1:
            return parts[0].special
        out: dict[int, tuple[bytes, int]] = {}
        base = 0
        for p in parts:
            out.update({base + k: v for k, v in p.special.items()})  # type: ignore[union-attr]
            base += len(p)
        return out


@dataclass
class Op:
    """One operation queued for the writer."""

    kind: str  # check | add | check_and_add | delete | flush | bulk | install | recover |
    # retention | stop
    docs: PreparedDocs | None = None
    arg: Any = None
    future: Future[Any] = field(default_factory=Future)

    @property
    def n(self) -> int:
        return len(self.docs.ids) if self.docs is not None else 1


def json_type_name(value: object) -> str:
    """The JSON name of a value's type (``null``, ``boolean``, ``number``, ``string``, ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


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


#: the most documents a preparation counts the verifier's histograms of (:attr:`PreparedDocs.hists`:
#: 1 KiB a document): a service request's; a bulk load's make none (its long rows' summaries
#: tokenise those texts alone)
HIST_DOCS = 4096

#: (signatures (n, hashes), usable (n,), band entry keys (n, bands), token counts (n,), coarse
#: token buckets (n, 64)): what :func:`lsh_keys` makes
LshKeys = tuple[
    npt.NDArray[np.uint16],
    npt.NDArray[np.bool_],
    npt.NDArray[np.uint64],
    npt.NDArray[np.int64],
    npt.NDArray[np.uint8],
]


def lsh_keys(
    verifier: Any,
    plan: Any,
    texts: Sequence[str | None],
    workers: int = 1,
    *,
    histograms: npt.NDArray[np.uint8] | None = None,
    prepared: dict[int, tuple[bytes, int]] | None = None,
) -> LshKeys:
    """(signatures (n, hashes), usable (n,), band entry keys (n, bands), token counts (n,),
    tokens counted in the coarse hash buckets (n, 64)) of ``texts`` as the batch pipeline
    computes them (``None`` texts: not usable), the signatures on ``workers`` threads.
    ``histograms`` (optional, (n, 2**HIST_BITS) uint8) receives the texts' token histograms
    from the same pass (:func:`~neardup.fingerprint.minhash.minhash_signatures`), and
    ``prepared`` (optional) the texts it needed Python work for, as that function fills it."""
    from ..fingerprint.minhash import band_entries, minhash_signatures
    from ..text.token_kernels import MASK_BITS

    n = len(texts)
    buckets = np.zeros((n, 1 << MASK_BITS), np.uint8)
    if n == 0:
        return (
            np.zeros((0, plan.hashes), np.uint16),
            np.zeros(0, bool),
            np.zeros((0, plan.bands), np.uint64),
            np.zeros(0, np.int64),
            buckets,
        )
    given = [t if t is not None else "" for t in texts]
    sig, tokens = minhash_signatures(
        verifier, given, plan.hashes, workers=workers, buckets=buckets,
        histograms=histograms, prepared=prepared,
    )  # fmt: skip
    usable = tokens > 0
    return sig, usable, band_entries(sig, usable, plan), tokens, buckets


def histograms_room(n: int) -> npt.NDArray[np.uint8] | None:
    """Room for the token histograms of ``n`` documents that :func:`lsh_keys` fills where a
    preparation keeps them (:attr:`PreparedDocs.hists`: up to :data:`HIST_DOCS`, a service
    request's), else None."""
    return np.empty((n, 1 << HIST_BITS), np.uint8) if n <= HIST_DOCS else None


def add_lsh_keys(docs: PreparedDocs, verifier: Any, plan: Any, workers: int = 1) -> None:
    """Fill the MinHash channel's fields of ``docs`` by one pass over its texts
    (:func:`lsh_keys`): signatures, usable flags, band keys, token counts and coarse buckets,
    and, where :func:`histograms_room` makes room (a request's), the token histograms and the
    kernel forms of the texts that needed Python work."""
    docs.hists = histograms_room(len(docs.texts))
    docs.special = None if docs.hists is None else {}
    docs.sig, docs.usable, docs.bands, docs.tokens, docs.buckets = lsh_keys(
        verifier, plan, docs.texts, workers, histograms=docs.hists, prepared=docs.special
    )


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
        (:func:`neardup.fingerprint.minhash.minhash_signatures`, the batch pipeline's tokens,
        shingles and seeds; :func:`neardup.fingerprint.minhash.band_entries`).
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

    def prepare(self, docs: Sequence[Mapping[str, Any]], workers: int = 1) -> PreparedDocs:
        """Validate ``docs`` (:class:`InputError` naming the field) and fingerprint them
        (MinHash signatures on ``workers`` threads: a bulk load's; a request's stay on one)."""
        ids, texts, times, metas = self._validate(docs)
        fps, empty = self._fingerprint(texts)
        out = self._assemble(ids, texts, times, metas, fps, empty)
        if self.lsh is not None:
            add_lsh_keys(out, *self.lsh, workers)
        return out

    def prepare_signed(
        self,
        docs: Sequence[Mapping[str, Any]],
        fps: npt.NDArray[np.uint64],
        empty: npt.NDArray[np.bool_],
        sig: npt.NDArray[np.uint16] | None,
        tokens: npt.NDArray[np.int64] | None,
        buckets: npt.NDArray[np.uint8] | None = None,
        chash: npt.NDArray[np.uint64] | None = None,
    ) -> PreparedDocs:
        """:meth:`prepare` of ``docs`` whose fingerprints, empty flags, MinHash signatures and
        token counts a batch run already made with this preparer's fingerprinter, verifier and
        plan (:func:`neardup.batch.dedup`'s ``work_out``; the caller checks that they are the
        same): validated as :meth:`prepare` validates and keyed, not fingerprinted or signed
        again. ``sig`` and ``tokens`` are None without the channel; ``buckets`` (the same
        pass's coarse token counts, (n, 64)) may be None: the rows' token masks are then
        unknown. ``chash``: the texts' content hashes from the same run ((n, 2), as
        ``content_hash_many`` makes them; the batch's exact stage), else None: hashed here."""
        ids, texts, times, metas = self._validate(docs)
        n = len(ids)
        fps = as_fingerprints(fps, bits=self.bits)
        if len(fps) != n or len(empty) != n:
            raise ValueError(f"{len(fps)} fingerprints and {len(empty)} flags for {n} documents")
        if chash is not None and np.shape(chash) != (n, 2):
            raise ValueError(f"content hashes of shape {np.shape(chash)} for {n} documents")
        out = self._assemble(ids, texts, times, metas, fps, np.asarray(empty, bool), chash)
        if self.lsh is not None:
            from ..fingerprint.minhash import band_entries

            plan = self.lsh[1]
            if sig is None or tokens is None or sig.shape != (n, plan.hashes) or len(tokens) != n:
                raise ValueError(f"signatures ({plan.hashes} a document) and token counts needed")
            out.tokens = np.asarray(tokens, np.int64)
            out.sig, out.usable = sig, out.tokens > 0
            out.bands = band_entries(sig, out.usable, plan)
            if buckets is not None:
                if buckets.shape != (n, 64):
                    raise ValueError(
                        f"coarse token buckets (64 a document) needed, got {buckets.shape}"
                    )
                out.buckets = np.asarray(buckets, np.uint8)
        return out

    def _validate(
        self, docs: Sequence[Mapping[str, Any]]
    ) -> tuple[list[str], list[str], list[float], list[str | None]]:
        """Ids, texts, times and metadata (JSON text) of ``docs``, every rule checked."""
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
                    and (text.isascii() or surrogate_problem(text) is None)
                    and 0 < len(id_) <= MAX_ID_LENGTH
                    and _BAD_ID_CHAR.search(id_) is None
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
        return ids, texts, times, metas

    def _assemble(
        self,
        ids: list[str],
        texts: list[str],
        times: list[float],
        metas: list[str | None],
        fps: npt.NDArray[np.uint64],
        empty: npt.NDArray[np.bool_],
        hashes: npt.NDArray[np.uint64] | None = None,
    ) -> PreparedDocs:
        """The batch with its content hashes (``hashes``: made already, (n, 2); the channel's
        columns are the caller's)."""
        # 16 bytes per document: high word then low word, each little-endian
        if len(texts) == 1 and hashes is None:  # the service's usual request
            d = self._digest_one(texts[0])  # big-endian
            chash = [d[7::-1] + d[:7:-1]]
        else:
            if hashes is not None:
                ch = hashes
            else:
                ch = self._hash_many(texts) if texts else np.zeros((0, 2), np.uint64)
            raw = np.ascontiguousarray(ch, dtype="<u8").tobytes()
            chash = [raw[k : k + 16] for k in range(0, len(raw), 16)]
        return PreparedDocs(ids, texts, np.array(times, dtype=np.float64), metas, fps, empty, chash)

    def time_window(self, now: float) -> tuple[float, float]:
        """``(oldest, newest)``: the times a document may carry at ``now`` (inclusive)."""
        oldest = 0.0 if self.retention is None else max(0.0, now - self.retention)
        return oldest, now + self.max_future_seconds

    def check_time(self, where: str, t: float, now: float) -> None:
        """Refuse a time the store could not keep: before 0, older than the retention window
        (it would be dropped at once) or more than ``max_future_seconds`` ahead of now."""
        oldest, newest = self.time_window(now)
        if oldest <= t <= newest:
            return
        if t < 0:
            raise InputError(f"{where}: must be unix seconds >= 0, got {t!r}", field=where)
        if t < oldest:
            raise InputError(
                f"{where}: {t!r} is older than the retention window of {self.retention:g} s "
                f"(now - retention = {oldest:.0f}): it would be dropped at once. Send documents "
                "from inside the window, or omit time (now)",
                field=where,
            )
        raise InputError(
            f"{where}: {t!r} is more than {self.max_future_seconds:g} s in the future (now = "
            f"{now:.0f}); times must be unix seconds up to now + max_future_seconds",
            field=where,
        )

    @staticmethod
    def _check_doc(
        i: int, doc: Any, now: float, seen: dict[str, int]
    ) -> tuple[str, str, float, str | None]:
        """Validate one document: every rule, each error naming its field (``field`` and the
        message's start, e.g. ``documents[3].id: ...``)."""
        where = f"documents[{i}]"
        if not isinstance(doc, Mapping):
            raise InputTypeError(
                f"{where}: a document must be a mapping like {{'id': str, 'text': str}}, got "
                f"{json_type_name(doc)}",
                field=where,
            )
        f = f"{where}.id"
        if "id" not in doc:
            raise InputError(f"{f}: field required (every document needs a string id)", field=f)
        id_ = doc["id"]
        if not isinstance(id_, str):
            raise InputTypeError(f"{f}: must be a string, got {json_type_name(id_)}", field=f)
        problem = id_problem(id_)
        if problem is not None:
            raise InputError(f"{f}: {problem}", field=f)
        f = f"{where}.text"
        if "text" not in doc:
            raise InputError(f"{f}: field required (a string)", field=f)
        text = doc["text"]
        if not isinstance(text, str):
            raise InputTypeError(f"{f}: must be a string, got {json_type_name(text)}", field=f)
        problem = surrogate_problem(text)
        if problem is not None:
            raise InputError(f"{f}: {problem}", field=f)
        t = doc.get("time")
        if t is None:
            t = now
        elif isinstance(t, bool) or not isinstance(t, numbers.Real) or not math.isfinite(float(t)):
            f = f"{where}.time"
            raise InputTypeError(
                f"{f}: must be unix seconds (a finite number) or null, got {t!r:.40}", field=f
            )
        meta = doc.get("metadata")
        if meta is not None:
            f = f"{where}.metadata"
            if not isinstance(meta, Mapping):
                raise InputTypeError(
                    f"{f}: must be an object or null, got {json_type_name(meta)}", field=f
                )
            depth = _nesting_depth(meta, MAX_METADATA_DEPTH)
            if depth > MAX_METADATA_DEPTH:
                raise InputError(
                    f"{f}: nested more than {MAX_METADATA_DEPTH} levels deep; flatten it", field=f
                )
            try:
                meta_json = json.dumps(meta, ensure_ascii=False, allow_nan=False)
            except (TypeError, ValueError, RecursionError) as exc:
                raise InputError(f"{f}: must be JSON-serialisable: {exc}", field=f) from exc
            problem = surrogate_problem(meta_json)
            if problem is not None:
                raise InputError(
                    f"{f}: {problem.replace('at character', 'in its JSON at')}", field=f
                )
            meta_s: str | None = meta_json
        else:
            meta_s = None
        if id_ in seen:
            f = f"{where}.id"
            raise InputError(
                f"{f}: {id_!r} repeats documents[{seen[id_]}].id; ids in one batch must be unique",
                field=f,
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
