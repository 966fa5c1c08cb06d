"""Stored texts compressed with a dictionary trained on the store's own texts (zstd).

A store keeps every document's text in SQLite for verification. Short posts compress poorly
one by one (a zstd frame has little history to draw on), so each store trains one zstd
dictionary on the first texts it stores (:data:`TRAIN_MIN_TEXTS`, at most
:data:`TRAIN_MAX_BYTES` of them) and compresses every later text with it, in a magicless frame
without checksum or dictionary id (the row's checksum covers the stored bytes; the store has
one dictionary). A text is kept compressed only where that is shorter. The dictionary is kept
in the database itself (table ``text_dict``, with its xxh64), written in the transaction of the
first rows that use it, so a row never names a dictionary the database lacks; it never
changes afterwards (the rows stored before it stay plain).

Measured: ``benchmarks/bench_window.py`` (the generated window, texts in SQLite per document)
and the dev corpus (docs/store.md, "Stored texts").
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from typing import cast

import xxhash
import zstandard as zstd

__all__ = [
    "DICT_BYTES",
    "LEVEL",
    "TEXT_ZSTD_FLAG",
    "TRAIN_MAX_BYTES",
    "TRAIN_MIN_TEXTS",
    "TextCodec",
    "dict_checksum",
    "load_codec",
    "train",
]

log = logging.getLogger("neardup.store")

#: ``flags`` bit of a SQLite row whose ``text`` column holds the zstd frame of the text's UTF-8
#: bytes (with the store's dictionary). Above the log's 8 flag bits, so no logged flag is it;
#: :class:`~neardup.store.meta.Row` never shows it.
TEXT_ZSTD_FLAG = 1 << 8
#: texts a store samples before it trains its dictionary (rows stored before stay plain)
TRAIN_MIN_TEXTS = 5_000
#: the most bytes of texts a dictionary is trained on (the first texts, up to this)
TRAIN_MAX_BYTES = 8 << 20
#: the dictionary's size; zstd's guidance is samples of ~100x it, which TRAIN_MAX_BYTES gives
DICT_BYTES = 64 << 10
#: zstd level: the store's trade of the applier's CPU for bytes on disk and in the page cache
#: (``python benchmarks/bench_textcodec.py`` measures the levels on real and generated texts)
LEVEL = 3


def dict_checksum(data: bytes) -> int:
    """xxh64 of the dictionary's bytes, as SQLite's signed 64-bit integer."""
    v = xxhash.xxh64_intdigest(data)
    return v - (1 << 64) if v >= 1 << 63 else v


def train(samples: list[bytes]) -> bytes | None:
    """A zstd dictionary trained on ``samples`` (UTF-8 texts), or None where zstd cannot make
    one of them (too few, too alike or too short): the texts then stay plain."""
    total = sum(len(s) for s in samples)
    size = max(4096, min(DICT_BYTES, total // 20))
    try:
        d = zstd.train_dictionary(
            size, cast("list[bytes | bytearray | memoryview]", samples), level=LEVEL
        )
    except zstd.ZstdError as exc:
        log.info("no text dictionary from %d texts (%s); texts stay plain", len(samples), exc)
        return None
    return bytes(d.as_bytes())


def _if_shorter(packed: bytes, raw: bytes) -> bytes | None:
    """A text's compressed bytes where they are shorter than its UTF-8 bytes, else None (the
    text is stored as it is)."""
    return packed if len(packed) < len(raw) else None


class TextCodec:
    """Compress and decompress stored texts with one dictionary. Not thread-safe: the
    database calls :meth:`encode` under its write lock and :meth:`decode` under its read
    lock. ``level``: the zstd level it compresses at (a store's is :data:`LEVEL`; another
    one is what ``benchmarks/bench_textcodec.py`` compares it with); decoding does not
    depend on it."""

    def __init__(self, data: bytes, *, level: int = LEVEL) -> None:
        self.data = data
        d = zstd.ZstdCompressionDict(data, dict_type=zstd.DICT_TYPE_FULLDICT)
        d.precompute_compress(level=level)
        params = zstd.ZstdCompressionParameters.from_level(
            level,
            format=zstd.FORMAT_ZSTD1_MAGICLESS,
            write_checksum=0,
            write_content_size=1,
            write_dict_id=0,
        )
        self._c = zstd.ZstdCompressor(dict_data=d, compression_params=params)
        self._d = zstd.ZstdDecompressor(dict_data=d, format=zstd.FORMAT_ZSTD1_MAGICLESS)

    def encode(self, raw: bytes) -> bytes | None:
        """The stored bytes of ``raw`` (a text's UTF-8 bytes), or None where compressing does
        not make it shorter (it is then stored as it is)."""
        return _if_shorter(self._c.compress(raw), raw)

    def encode_many(self, raws: Sequence[bytes], threads: int = 1) -> list[bytes | None]:
        """:meth:`encode` of each of ``raws``, the same bytes; with ``threads`` > 1 compressed
        by zstd's own threads, without the GIL (a bulk load's rows: the database's writer
        thread is a load's critical path, ``benchmarks/bench_seed.py --whole``)."""
        if threads < 2 or len(raws) < 2:
            return [self.encode(r) for r in raws]
        full = [k for k, r in enumerate(raws) if r]  # (zstd's batch refuses empty inputs)
        out: list[bytes | None] = [None] * len(raws)
        if not full:
            return out
        got = self._c.multi_compress_to_buffer([raws[k] for k in full], threads=threads)
        if len(got) != len(full):  # pragma: no cover (zstd's contract)
            raise RuntimeError(f"zstd compressed {len(got)} of {len(full)} texts")
        for j, k in enumerate(full):
            out[k] = _if_shorter(got[j].tobytes(), raws[k])
        return out

    def decode(self, stored: bytes) -> bytes:
        """The UTF-8 bytes of a compressed text (:class:`zstd.ZstdError` when damaged)."""
        return self._d.decompress(stored)


def load_codec(db: sqlite3.Connection) -> tuple[TextCodec | None, str | None]:
    """The text codec of the database ``db`` (None before it has trained one) and, where its
    dictionary fails its checksum, what is wrong (the codec is then None)."""
    try:
        row = db.execute("SELECT dict, csum FROM text_dict WHERE k = 0").fetchone()
    except sqlite3.OperationalError:  # no such table: a database without compressed texts
        return None, None
    if row is None:
        return None, None
    data, csum = row
    if not isinstance(data, bytes) or dict_checksum(data) != csum:
        return None, "the store's text dictionary fails its checksum"
    try:
        return TextCodec(data), None
    except Exception as exc:  # zstd refuses the bytes: damaged beyond the checksum's reach
        return None, f"the store's text dictionary cannot be loaded ({exc})"
