"""Corpus input and output: JSONL, JSON arrays, CSV/TSV, Parquet, plain text, stdin.

See :mod:`neardup.io.formats` for the formats, :mod:`neardup.io.remote` for compressed inputs,
globs and fsspec URLs, :mod:`neardup.batch.datasets` for Hugging Face datasets and
:mod:`neardup.io.atomic` for atomic writes.
"""

from __future__ import annotations

from .atomic import atomic_dir, atomic_open, check_not_input, check_output, staged_outputs
from .formats import (
    FORMATS,
    Corpus,
    SkippedRecord,
    Source,
    detect_format,
    read_corpus,
    write_kept,
)

__all__ = [
    "FORMATS",
    "Corpus",
    "SkippedRecord",
    "Source",
    "atomic_dir",
    "atomic_open",
    "check_not_input",
    "check_output",
    "detect_format",
    "read_corpus",
    "staged_outputs",
    "write_kept",
]
