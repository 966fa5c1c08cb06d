"""SimHash fingerprints (Charikar 2002) for English and Chinese text, batch first.

Pipeline (each step is defined exactly in the module named, so results are reproducible by the
pure reference :mod:`neardup.fingerprint.reference` and across runs, processes, machines and
worker counts):

1. normalise: NFKC + casefold; lone surrogates -> U+FFFD (:mod:`neardup.text.normalize`);
2. features (:mod:`neardup.text.tokenize`): ``words``, ``shingles`` (word n-grams), ``chars``
   (code point n-grams), ``jieba`` (rjieba segmentation, optionally shingled), ``auto`` (per
   document: ``zh`` settings when Han ideographs are at least ``zh_threshold`` of the word
   characters, else ``en`` settings), or a user callable;
3. stable 64-bit feature hashes (:mod:`neardup.hashing`; xxh64 with seed 0 by default);
4. integral weights (:mod:`neardup.text.weights`): ``tf``, ``tfidf``, ``keywords``, or user
   weights via :meth:`Fingerprinter.fingerprint_features`;
5. per bit, ``+w`` if the feature hash has the bit set else ``-w``; bit = 1 iff the sum > 0.

Empty input -- a text without any feature (``""``, whitespace or punctuation only) -- gets
fingerprint 0 and ``empty=True`` in :class:`FingerprintBatch`; it never raises.
Non-``str`` input raises :class:`~neardup.errors.InputTypeError` naming the position.

Fingerprints are ``uint64`` arrays of shape ``(n,)`` (64 bits) or ``(n, 2)`` (128 bits, column 0
the high word, which equals the 64-bit fingerprint with the same settings).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash

from .._reference import use_reference
from ..errors import ConfigError, InputError, InputTypeError
from ..text.hashing import DEFAULT_SEED, HASH_FUNCTIONS, HASH_IDS, feature_hash
from ..text.normalize import casefold_nfkc, check_text, normalize
from ..text.tokenize import han_share, prepare
from . import reference as ref

__all__ = [
    "AUTO_EN",
    "AUTO_ZH",
    "FEATURES",
    "WEIGHTS",
    "FingerprintBatch",
    "Fingerprinter",
    "content_hash",
    "content_hash_many",
]

FEATURES = ("auto", "words", "shingles", "chars", "jieba")
WEIGHTS = ("tf", "tfidf", "keywords", "textrank")
#: (features, ngram) that ``features="auto"`` uses per language (chosen from the dev-set study in
#: docs/fingerprints.md)
AUTO_EN: tuple[str, int] = ("words", 1)
AUTO_ZH: tuple[str, int] = ("chars", 2)
_KMODE = {"words": 0, "shingles": 0, "jieba": 0, "chars": 1}  # kernel modes (words / chars)
_DEFAULT_NGRAM = {"words": 1, "shingles": 2, "chars": 3, "jieba": 1}
#: texts longer than this many characters are fingerprinted in chunks (bounded memory)
CHUNK_CHARS = 1 << 22
#: a single text at most this long is fingerprinted by one GIL-holding kernel call
#: (:meth:`Fingerprinter._one_ascii`); microseconds of work, see ``neardup.fingerprint._numba.GIL_BYTES``
ONE_TEXT_CHARS = 16_384
_ZERO1 = np.zeros(1, np.int64)
# texts per kernel call: at most this many documents / characters
_BLOCK_DOCS = 1 << 16
_BLOCK_CHARS = 1 << 23
_CONFIG_VERSION = 1
_FORCE_REFERENCE = use_reference("fingerprint")

FeatureFunc = Callable[[str], Iterable[Any]]


@dataclass(frozen=True)
class FingerprintBatch:
    """Result of :meth:`Fingerprinter.fingerprint_batch`.

    Attributes
    ----------
    fingerprints : numpy.ndarray
        ``uint64``, shape ``(n,)`` for 64 bits or ``(n, 2)`` for 128 bits (column 0 = high word).
    empty : numpy.ndarray
        ``bool`` ``(n,)``: the text had no features (its fingerprint is 0).
    n_features : numpy.ndarray
        ``int32`` ``(n,)``: feature occurrences that contributed (after stop-word removal).
    """

    fingerprints: npt.NDArray[np.uint64]
    empty: npt.NDArray[np.bool_]
    n_features: npt.NDArray[np.int32]

    def __len__(self) -> int:
        return len(self.empty)


def _words_from_int(fp: int, bits: int) -> tuple[int, ...]:
    return (fp,) if bits == 64 else (fp >> 64, fp & 0xFFFFFFFFFFFFFFFF)


class Fingerprinter:
    """SimHash fingerprinter.

    Parameters
    ----------
    bits : {64, 128}, default=64
        Fingerprint width.
    features : {"auto", "words", "shingles", "chars", "jieba"} or callable, default="auto"
        Feature extraction (module docstring). A callable takes the original ``str`` and returns
        feature strings, or ``(feature, weight)`` pairs with integer weights >= 0.
    ngram : int or None, default=None
        Shingle size for ``words``/``shingles``/``jieba`` (1 = single tokens) or the char n-gram
        size for ``chars``. None: words 1, shingles 2, jieba 1, chars 3. Ignored by ``auto``,
        which uses :data:`AUTO_EN` / :data:`AUTO_ZH`.
    weights : {"tf", "tfidf", "keywords", "textrank"}, default="tf"
        Integral feature weights (:mod:`neardup.text.weights`). ``tfidf``/``keywords`` apply IDF
        to word tokens; char n-grams always weigh 1 (tf) with them. ``textrank``: each distinct
        feature (word, shingle or char n-gram) weighs its TextRank level 1-8
        (:func:`~neardup.text.weights.textrank_weights`); computed in Python (slower), like
        ``keywords``.
    hash : {"xxh64", "jenkins-lookup2", "jenkins-oaat", "fnv1a", "md5"}, default="xxh64"
        Feature hash (:mod:`neardup.hashing`). ``md5`` runs in Python (slow; compatibility only).
    seed : int, default=0
        Feature hash seed (0 <= seed < 2**63).
    stopwords : bool, default=False
        Drop the shipped en + zh stop words before weighting/shingling (word modes only).
    idf : str or None, default=None
        IDF table file for ``tfidf``/``keywords`` (``neardup idf build``); None uses the shipped
        jieba Chinese table (English tokens then get its median IDF).
    top_n : int, default=20
        Number of keywords kept by ``weights="keywords"``.
    zh_threshold : float, default=0.3
        ``auto``: Han share of word characters from which a text is treated as Chinese.

    Examples
    --------
    >>> fp = Fingerprinter()
    >>> a = fp.fingerprint("The quick brown fox jumps over the lazy dog")
    >>> b = fp.fingerprint("The quick brown fox jumped over the lazy dog")
    >>> 0 < a < 2**64, fp.fingerprint("   ")
    (True, 0)
    """

    def __init__(
        self,
        bits: int = 64,
        *,
        features: str | FeatureFunc = "auto",
        ngram: int | None = None,
        weights: str = "tf",
        hash: str = "xxh64",
        seed: int = DEFAULT_SEED,
        stopwords: bool = False,
        idf: str | None = None,
        top_n: int = 20,
        zh_threshold: float = 0.3,
    ) -> None:
        if isinstance(bits, bool) or bits not in (64, 128):
            raise ConfigError(f"bits must be 64 or 128, got {bits!r}")
        if not callable(features) and features not in FEATURES:
            raise ConfigError(f"features must be one of {FEATURES} or a callable, got {features!r}")
        if ngram is not None and (
            isinstance(ngram, bool) or not isinstance(ngram, int) or not 1 <= ngram <= 16
        ):
            raise ConfigError(f"ngram must be an int in 1..16 or None, got {ngram!r}")
        if weights not in WEIGHTS:
            raise ConfigError(
                f"weights must be one of {WEIGHTS}, got {weights!r}; for your own "
                "weights use fingerprint_features() or a features callable returning (feature, weight)"
            )
        if hash not in HASH_FUNCTIONS:
            raise ConfigError(f"hash must be one of {HASH_FUNCTIONS}, got {hash!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
            raise ConfigError(f"seed must be an int in [0, 2**63), got {seed!r}")
        if features == "chars" and stopwords:
            raise ConfigError(
                "stopwords=True needs word features; char n-grams keep every character "
                "(use features='words', 'shingles' or 'jieba')"
            )
        if isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1:
            raise ConfigError(f"top_n must be a positive int, got {top_n!r}")
        if not isinstance(zh_threshold, (int, float)) or not 0.0 < zh_threshold <= 1.0:
            raise ConfigError(f"zh_threshold must be in (0, 1], got {zh_threshold!r}")
        if idf is not None and not isinstance(idf, (str, os.PathLike)):
            raise ConfigError(
                f"idf must be a path to an IDF file or None, got {type(idf).__name__}"
            )
        self.bits = bits
        self.features = features
        self.ngram = ngram
        self.weights = weights
        self.hash = hash
        self.seed = seed
        self.stopwords = stopwords
        self.idf = os.fspath(idf) if idf is not None else None
        self.top_n = top_n
        self.zh_threshold = float(zh_threshold)
        self._tables: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}

    # ------------------------------------------------------------------ config
    def config(self) -> dict[str, Any]:
        """JSON-serialisable settings; :meth:`from_config` rebuilds an identical fingerprinter."""
        if callable(self.features):
            raise ConfigError(
                "a Fingerprinter with a callable features= cannot be serialised; "
                "use a named feature mode"
            )
        return {
            "version": _CONFIG_VERSION,
            "bits": self.bits,
            "features": self.features,
            "ngram": self.ngram,
            "weights": self.weights,
            "hash": self.hash,
            "seed": self.seed,
            "stopwords": self.stopwords,
            "idf": self.idf,
            "top_n": self.top_n,
            "zh_threshold": self.zh_threshold,
            "auto_en": list(AUTO_EN),
            "auto_zh": list(AUTO_ZH),
        }

    @classmethod
    def from_config(cls, d: dict[str, Any]) -> Fingerprinter:
        """Inverse of :meth:`config`; raises :class:`ConfigError` on unknown keys or versions."""
        if not isinstance(d, dict):
            raise ConfigError(f"from_config takes a dict, got {type(d).__name__}")
        d = dict(d)
        version = d.pop("version", _CONFIG_VERSION)
        if version != _CONFIG_VERSION:
            raise ConfigError(
                f"fingerprinter config version {version} is not supported (this build reads {_CONFIG_VERSION})"
            )
        auto_en, auto_zh = d.pop("auto_en", None), d.pop("auto_zh", None)
        if (auto_en is not None and tuple(auto_en) != AUTO_EN) or (
            auto_zh is not None and tuple(auto_zh) != AUTO_ZH
        ):
            raise ConfigError(
                f"config was made with auto settings en={auto_en} zh={auto_zh}, but this "
                f"build uses en={list(AUTO_EN)} zh={list(AUTO_ZH)}; fingerprints would differ"
            )
        allowed = {
            "bits",
            "features",
            "ngram",
            "weights",
            "hash",
            "seed",
            "stopwords",
            "idf",
            "top_n",
            "zh_threshold",
        }
        unknown = set(d) - allowed
        if unknown:
            raise ConfigError(
                f"unknown fingerprinter config keys {sorted(unknown)}; allowed: {sorted(allowed)}"
            )
        bits = d.pop("bits", 64)
        return cls(bits, **d)

    def __repr__(self) -> str:
        f = (
            self.features
            if isinstance(self.features, str)
            else getattr(self.features, "__name__", "callable")
        )
        return (
            f"Fingerprinter(bits={self.bits}, features={f!r}, ngram={self.ngram}, "
            f"weights={self.weights!r}, hash={self.hash!r}, seed={self.seed})"
        )

    def __eq__(self, other: object) -> bool:
        if (
            not isinstance(other, Fingerprinter)
            or callable(self.features)
            or callable(other.features)
        ):
            return NotImplemented if not isinstance(other, Fingerprinter) else self is other
        return self.config() == other.config()

    __hash__ = None  # type: ignore[assignment]

    # ------------------------------------------------------------------ plan
    def _mode_for(self, lang: str) -> tuple[str, int]:
        """(kernel mode 'words'|'chars', n, prepare mode) for a language group."""
        if self.features == "auto":
            feat, n = AUTO_ZH if lang == "zh" else AUTO_EN
        else:
            feat = self.features  # type: ignore[assignment]
            n = self.ngram or _DEFAULT_NGRAM[feat]
        return feat, n

    def _table(self, feat: str) -> tuple[np.ndarray, np.ndarray, int]:
        """Token weight table (sorted uint64 hashes, int64 weights, default weight)."""
        key = "chars" if feat == "chars" else "words"
        if key in self._tables:
            return self._tables[key]
        empty = (np.zeros(0, np.uint64), np.zeros(0, np.int64), 1)
        if key == "chars":
            tab = empty
        else:
            hs, ws, default = empty
            if self.weights in ("tfidf", "keywords"):
                from ..text.weights import IdfTable, shipped_zh_idf

                table = IdfTable.load(self.idf) if self.idf else shipped_zh_idf()
                hs, ws, default = table.hash_table(self.hash, self.seed)
            if self.stopwords:
                from ..text.hashing import hash64
                from ..text.stopwords import stopwords

                sw = sorted(stopwords("en") | stopwords("zh"))
                sh = np.array([hash64(w.encode(), self.hash, self.seed) for w in sw], np.uint64)
                hs = np.concatenate([sh, hs])
                ws = np.concatenate([np.zeros(len(sh), np.int64), ws])
                order = np.argsort(hs, kind="stable")  # stop words first among equal hashes
                hs, ws = hs[order], ws[order]
                keep = np.ones(len(hs), bool)
                keep[1:] = hs[1:] != hs[:-1]
                hs, ws = hs[keep], ws[keep]
            tab = (np.ascontiguousarray(hs), np.ascontiguousarray(ws), int(default))
        self._tables[key] = tab
        return tab

    # ------------------------------------------------------------------ public API
    def fingerprint(self, text: str) -> int:
        """Fingerprint of one text as a Python int (< 2**bits); 0 for a text without features."""
        check_text(text)
        fps = self.fingerprint_batch([text]).fingerprints
        if self.bits == 64:
            return int(fps[0])
        return (int(fps[0, 0]) << 64) | int(fps[0, 1])

    def fingerprint_many(self, texts: Iterable[str], workers: int = 1) -> npt.NDArray[np.uint64]:
        """Fingerprints of many texts: ``uint64`` ``(n,)`` (64 bits) or ``(n, 2)`` (128 bits).

        Identical results for any ``workers`` (threads running nogil kernels).
        """
        return self.fingerprint_batch(texts, workers=workers).fingerprints

    def fingerprint_batch(self, texts: Iterable[str], workers: int = 1) -> FingerprintBatch:
        """Fingerprints plus ``empty`` flags and feature counts (:class:`FingerprintBatch`)."""
        if isinstance(texts, (str, bytes)):
            raise InputTypeError(
                "texts must be an iterable of str, not a single "
                f"{type(texts).__name__}; wrap it in a list"
            )
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ConfigError(f"workers must be a positive int, got {workers!r}")
        texts = texts if isinstance(texts, list) else list(texts)
        if len(texts) == 1 and type(texts[0]) is str:
            one = self._one_ascii(texts[0])
            if one is not None:
                return one
        if set(map(type, texts)) - {str}:
            for i, t in enumerate(texts):
                check_text(t, i, "texts")
        n = len(texts)
        words = self.bits // 64
        fps = np.zeros((n, words), np.uint64)
        nfeat = np.zeros(n, np.int64)
        if n:
            if workers == 1 or n < 2 * workers:
                self._run(texts, 0, n, fps, nfeat)
            else:
                bounds = np.linspace(0, n, workers * 4 + 1).astype(int)
                with ThreadPoolExecutor(workers) as ex:
                    futs = [
                        ex.submit(self._run, texts, int(a), int(b), fps, nfeat)
                        for a, b in itertools.pairwise(bounds)
                        if b > a
                    ]
                    for f in futs:
                        f.result()
        out = fps[:, 0].copy() if words == 1 else fps
        return FingerprintBatch(out, nfeat == 0, nfeat.astype(np.int32))

    def _one_ascii(self, text: str) -> FingerprintBatch | None:
        """One ASCII text of at most ``ONE_TEXT_CHARS``: the kernel call of the batch path's
        ASCII block (:meth:`_run_ascii`) without its per-block bookkeeping, or None when that
        path does not apply. The service fingerprints most requests one text at a time, where
        that bookkeeping (a dozen small array operations) cost more than the kernel. The same
        values (tested)."""
        n_chars = len(text)
        if n_chars > ONE_TEXT_CHARS or n_chars > CHUNK_CHARS:  # (longer: streamed in chunks)
            return None
        if not text.isascii() or not self.lowered_ascii_ok():
            return None
        from . import _numba as nb

        buf = np.frombuffer(text.encode("ascii").lower(), np.uint8)
        words = self.bits // 64
        fps = np.zeros((1, words), np.uint64)
        nfeat = np.zeros(1, np.int64)
        ends = np.array([buf.size], np.int64)
        self._lowered_kernel(nb._simhash_docs_gil, buf, _ZERO1, ends, fps, nfeat)
        return FingerprintBatch(
            fps[:, 0] if words == 1 else fps, nfeat == 0, nfeat.astype(np.int32)
        )

    def _run(
        self, texts: list[str], start: int, stop: int, fps: np.ndarray, nfeat: np.ndarray
    ) -> None:
        """Fingerprint texts[start:stop] into fps/nfeat rows (thread-safe: disjoint rows)."""
        if callable(self.features):
            for i in range(start, stop):
                fps[i], nfeat[i] = self._callable_one(texts[i], i)
            return
        fast = not self._python_path()
        a = start
        while a < stop:  # blocks of bounded size
            b = min(stop, a + _BLOCK_DOCS)
            sl = texts[a:b]
            lens = np.fromiter(map(len, sl), np.int64, len(sl))
            csum = np.cumsum(lens)
            if csum[-1] > _BLOCK_CHARS and len(sl) > 1:
                b = a + max(1, int(np.searchsorted(csum, _BLOCK_CHARS)))
                sl, lens = sl[: b - a], lens[: b - a]
            if fast and int(lens.max()) <= CHUNK_CHARS:
                joined = "\n".join(sl)
                if joined.isascii():
                    self._run_ascii(joined, lens, fps[a:b], nfeat[a:b])
                    a = b
                    continue
            self._run_mixed(texts, a, b, fps, nfeat)
            a = b

    def _run_ascii(self, joined: str, lens: np.ndarray, fps: np.ndarray, nfeat: np.ndarray) -> None:
        """All-ASCII block: one lower(), one encode(), one kernel call (English settings)."""
        from . import _numba as nb

        feat, n = self._mode_for("en")
        hs, ws, default = self._table(feat)
        plan = (_KMODE[feat], n, _KMODE[feat], n, 2.0)
        nb.run_ascii(
            joined,
            lens,
            plan,
            HASH_IDS[self.hash],
            self.seed,
            self.bits,
            hs,
            ws,
            default,
            fps,
            nfeat,
        )

    # ------------------------------------------------------------------ lowered ASCII bytes
    def lowered_ascii_ok(self) -> bool:
        """True when :meth:`fingerprint_lowered_ascii` applies to this configuration: the
        numba kernels fingerprint ASCII text (not a callable, the reference, md5 or keywords)."""
        return not (callable(self.features) or self._python_path())

    def fingerprint_lowered_ascii(
        self,
        buf: npt.NDArray[np.uint8],
        starts: npt.NDArray[np.int64],
        ends: npt.NDArray[np.int64],
        fps: npt.NDArray[np.uint64],
        nfeat: npt.NDArray[np.int64],
    ) -> None:
        """Fingerprint ASCII texts given as their **lower-cased** bytes ``buf[starts[i]:ends[i]]``
        into ``fps[i]`` (uint64 ``(m, bits // 64)``) and ``nfeat[i]`` (int64 ``(m,)``).

        The values are those of :meth:`fingerprint_batch` for the original texts (the same
        kernel call as its ASCII path, which lower-cases, encodes and calls it per block; tested
        equal), for texts of at most ``CHUNK_CHARS`` characters (longer texts are streamed in
        chunks by :meth:`fingerprint_batch`; pass those there). Lets a caller that already has
        the lowered bytes (the dedup pipeline's exact-hash pass) skip the join / ``lower`` /
        ``encode``. Releases the GIL; one thread. Needs :meth:`lowered_ascii_ok`.
        """
        from . import _numba as nb

        if not self.lowered_ascii_ok():
            raise ConfigError(
                "fingerprint_lowered_ascii needs the numba path (not a callable feature "
                "function, NEARDUP_REFERENCE=fingerprint, hash md5 or keywords weights)"
            )
        self._lowered_kernel(nb.simhash_docs, buf, starts, ends, fps, nfeat)

    def _lowered_kernel(
        self,
        kernel: Any,
        buf: npt.NDArray[np.uint8],
        starts: npt.NDArray[np.int64],
        ends: npt.NDArray[np.int64],
        fps: npt.NDArray[np.uint64],
        nfeat: npt.NDArray[np.int64],
    ) -> None:
        """Call a SimHash kernel (``simhash_docs`` or its GIL-holding twin) on lowered ASCII
        texts with this fingerprinter's English settings."""
        from . import _numba as nb

        feat, n = self._mode_for("en")
        hs, ws, default = self._table(feat)
        mode = _KMODE[feat]
        kernel(
            buf, starts, ends, mode, n, mode, n, 2.0, HASH_IDS[self.hash], np.uint64(self.seed),
            self.bits == 128, hs, ws, default, nb.ISWORD, fps, nfeat,
        )  # fmt: skip

    def _native_auto(self) -> bool:
        """auto whose en and zh settings share one preparation (no jieba): one kernel pass."""
        return self.features == "auto" and "jieba" not in (AUTO_EN[0], AUTO_ZH[0])

    def _run_mixed(
        self, texts: list[str], start: int, stop: int, fps: np.ndarray, nfeat: np.ndarray
    ) -> None:
        idx = list(range(start, stop))
        if self.features != "auto":
            feat, n = self._mode_for("en")
            self._run_group(texts, idx, feat, n, fps, nfeat)
            return
        (fe, ne), (fz, nz) = AUTO_EN, AUTO_ZH
        if self._native_auto() and not self._python_path():
            plan = (_KMODE[fe], ne, _KMODE[fz], nz, self.zh_threshold)
            self._run_native(texts, idx, "words", plan, self._table("words"), fps, nfeat)
            return
        groups: dict[str, list[int]] = {"en": [], "zh": []}
        for i in idx:
            t = texts[i]
            zh = not t.isascii() and han_share(prepare(t, "words")) >= self.zh_threshold
            groups["zh" if zh else "en"].append(i)
        for lang, members in groups.items():
            if members:
                feat, n = self._mode_for(lang)
                self._run_group(texts, members, feat, n, fps, nfeat)

    def _python_path(self) -> bool:
        return _FORCE_REFERENCE or self.hash == "md5" or self.weights in ("keywords", "textrank")

    def _run_group(
        self,
        texts: list[str],
        idx: list[int],
        feat: str,
        n: int,
        fps: np.ndarray,
        nfeat: np.ndarray,
    ) -> None:
        pmode = "jieba" if feat == "jieba" else ("chars" if feat == "chars" else "words")
        hs, ws, default = self._table(feat)
        if self._python_path():
            kmode = "chars" if feat == "chars" else "words"
            self._run_group_python(texts, idx, pmode, kmode, n, (hs, ws, default), fps, nfeat)
            return
        plan = (_KMODE[feat], n, _KMODE[feat], n, 2.0)
        self._run_native(texts, idx, pmode, plan, (hs, ws, default), fps, nfeat)

    def _run_native(
        self,
        texts: list[str],
        idx: list[int],
        pmode: str,
        plan: tuple[Any, ...],
        table: tuple[Any, Any, Any],
        fps: np.ndarray,
        nfeat: np.ndarray,
    ) -> None:
        """One numba pass over ``texts[idx]``: ``plan`` = (en mode, en n, zh mode, zh n, Han share)."""
        from . import _numba as nb

        hs, ws, default = table
        nb.run_group(
            texts,
            idx,
            pmode,
            plan,
            HASH_IDS[self.hash],
            self.seed,
            self.bits,
            hs,
            ws,
            default,
            fps,
            nfeat,
            CHUNK_CHARS,
        )

    def _run_group_python(self, texts, idx, pmode, kmode, n, table, fps, nfeat) -> None:
        hs, ws, default = table
        tab = dict(zip(hs.tolist(), ws.tolist(), strict=True))
        for i in idx:
            feats = ref.doc_features(
                prepare(texts[i], pmode),
                kmode,
                n,
                hash=self.hash,
                seed=self.seed,
                bits=self.bits,
                table=tab,
                default_weight=default,
            )
            if self.weights == "keywords":
                feats = self._keywords(feats)
            elif self.weights == "textrank":
                feats = self._textrank(feats)
            nfeat[i] = len(feats)
            fps[i] = _words_from_int(ref.simhash_from_features(feats, self.bits), self.bits)

    def _keywords(self, feats: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        from ..text.weights import keyword_weights

        if not feats:
            return feats
        score: dict[tuple[int, int], int] = {}
        for hi, lo, w in feats:
            score[(hi, lo)] = score.get((hi, lo), 0) + w
        keys = sorted(score)
        sc = np.array([score[k] for k in keys], np.int64)
        hh = np.array([k[0] for k in keys], np.uint64)
        kw = keyword_weights(sc, hh, self.top_n)
        return [(k[0], k[1], int(w)) for k, w in zip(keys, kw.tolist(), strict=True) if w > 0]

    def _textrank(self, feats: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        """Each distinct feature once, weighing its TextRank level (:mod:`neardup.text.weights`;
        the pure :mod:`neardup.text.reference` under ``NEARDUP_REFERENCE=fingerprint``)."""
        from ..text.weights import textrank_weights

        if not feats:
            return feats
        if _FORCE_REFERENCE:
            from ..text.reference import textrank_weights_reference

            keys = [(hi, lo) for hi, lo, _ in feats]
            ref_w = textrank_weights_reference(keys)  # type: ignore[arg-type]
            return [(k[0], k[1], w) for k, w in sorted(ref_w.items())]  # type: ignore[index]
        arr = np.array([(hi, lo) for hi, lo, _ in feats], np.uint64)
        nodes, weights = textrank_weights(arr)
        return [
            (int(k[0]), int(k[1]), int(w))
            for k, w in zip(nodes.tolist(), weights.tolist(), strict=True)
        ]

    def _callable_one(self, text: str, pos: int) -> tuple[tuple[int, ...], int]:
        feats = self.features(text)  # type: ignore[operator]
        return self._features_to_words(feats, pos)

    def _features_to_words(
        self, feats: Iterable[Any], pos: int | None = None
    ) -> tuple[tuple[int, ...], int]:
        items = self._feature_items(feats, pos)
        return _words_from_int(ref.simhash_from_features(items, self.bits), self.bits), len(items)

    def _feature_items(
        self, feats: Iterable[Any], pos: int | None = None
    ) -> list[tuple[int, int, int]]:
        """``(hash hi, hash lo, weight)`` of each feature of weight > 0, every rule checked."""
        if isinstance(feats, str | bytes | bytearray):
            where = "a features= callable must return" if pos is not None else "features must be"
            raise InputTypeError(
                f"{where} an iterable of features (str/bytes, or (feature, weight) pairs), not "
                f"one {type(feats).__name__}: its characters would be the features; wrap it in a "
                "list"
            )
        items = []
        for j, f in enumerate(feats):
            if isinstance(f, tuple):
                if len(f) != 2:
                    raise InputError(
                        f"feature {j}{'' if pos is None else f' of text {pos}'} must be a "
                        f"str/bytes or a (feature, weight) pair, got a {len(f)}-tuple"
                    )
                f, w = f
                if isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < 0:
                    raise InputError(
                        f"feature weight must be an integer >= 0 (weights stay integral so "
                        f"fingerprints do not depend on summation order), got {w!r} for {f!r}"
                    )
                w = int(w)
            else:
                w = 1
            if isinstance(f, str):
                data = f.encode("utf-8", "surrogatepass")
            elif isinstance(f, (bytes, bytearray)):
                data = bytes(f)
            else:
                raise InputTypeError(f"feature {j} must be str or bytes, got {type(f).__name__}")
            if w == 0:
                continue
            hi, lo = feature_hash(data, self.hash, self.seed, self.bits)
            items.append((hi, lo, w))
        return items

    def fingerprint_features(
        self, features: Iterable[str | bytes | tuple[str | bytes, int]]
    ) -> int:
        """SimHash of user-given features: ``str``/``bytes`` (weight 1) or ``(feature, weight)``
        pairs with integer weights >= 0. Features are hashed as UTF-8 bytes, as is.

        >>> Fingerprinter().fingerprint_features([("美国", 4), ("飞碟", 5)]) > 0
        True
        """
        words, _ = self._features_to_words(features)
        return words[0] if self.bits == 64 else (words[0] << 64) | words[1]

    def bit_sums(self, features: Iterable[str | bytes | tuple[str | bytes, int]]) -> list[int]:
        """Per-bit weighted sums (most significant bit first) for user features -- for teaching
        and golden tests: bit ``i`` of :meth:`fingerprint_features` is ``sums[i] > 0``
        (the same features and weights taken, the same refused)."""
        return ref.bit_sums(self._feature_items(features), self.bits)


# ---------------------------------------------------------------------- exact content hashes
def content_hash(text: str, *, normalize: bool = True) -> int:
    """128-bit exact-duplicate hash: ``xxh3_128`` of the UTF-8 of :func:`neardup.text.normalize`
    (or of the raw text with ``normalize=False``; lone surrogates -> U+FFFD either way).

    >>> content_hash("Hello  World") == content_hash("hello world")
    True
    """
    check_text(text)
    return _content_hash_one(text, normalize)


_norm = normalize


def _content_hash_one(text: str, norm: bool) -> int:
    s = _norm(text) if norm else text
    try:
        data = s.encode("utf-8")
    except UnicodeEncodeError:
        from ..text.normalize import replace_surrogates

        data = replace_surrogates(s).encode("utf-8")
    return xxhash.xxh3_128_intdigest(data)


_ASCII_PRINTABLE = bytes(range(32, 127))


def content_hash_many(
    texts: Sequence[str] | Iterable[str], *, normalize: bool = True
) -> npt.NDArray[np.uint64]:
    """:func:`content_hash` of many texts as ``uint64`` ``(n, 2)`` (column 0 = high word)."""
    if isinstance(texts, (str, bytes)):
        raise InputTypeError("texts must be an iterable of str; wrap a single text in a list")
    texts = list(texts)
    for i, t in enumerate(texts):
        if type(t) is not str:
            check_text(t, i, "texts")
    if normalize:
        parts = [content_digest(t) for t in texts]
    else:
        digest = xxhash.xxh3_128_digest
        parts = [digest(t.encode("ascii")) if t.isascii() else _digest_one(t) for t in texts]
    if not parts:
        return np.zeros((0, 2), np.uint64)
    return np.frombuffer(b"".join(parts), dtype=">u8").reshape(-1, 2).astype(np.uint64)


def content_digest(text: str) -> bytes:
    """:func:`content_hash` of a str (not checked) as its 16 big-endian bytes, high word first:
    one row of :func:`content_hash_many`."""
    if text.isascii():  # ASCII: normalize() is lower() + whitespace collapse
        b = text.encode("ascii").lower()
        # the collapse is the identity when the only whitespace is single inner spaces (every
        # other ASCII whitespace character is a control: none left after deleting the
        # printable bytes)
        if (
            b.find(b"  ") < 0
            and b[:1] != b" "
            and b[-1:] != b" "
            and not b.translate(None, _ASCII_PRINTABLE)
        ):
            return xxhash.xxh3_128_digest(b)
        # str.split: its whitespace includes \x1c-\x1f, bytes.split's does not
        return xxhash.xxh3_128_digest(" ".join(text.lower().split()).encode("ascii"))
    return _digest_one(" ".join(casefold_nfkc(text).split()))


def _digest_one(s: str) -> bytes:
    try:
        data = s.encode("utf-8")
    except UnicodeEncodeError:
        from ..text.normalize import replace_surrogates

        data = replace_surrogates(s).encode("utf-8")
    return xxhash.xxh3_128_digest(data)
