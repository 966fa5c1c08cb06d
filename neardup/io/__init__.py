"""Corpus input and output: JSONL, JSON arrays, CSV/TSV, Parquet, plain text, stdin.

See :mod:`neardup.io.plan` for which files an input names and where outputs go (decided before
reading), :mod:`neardup.io.formats` for the readers, :mod:`neardup.io.writers` for the writers,
:mod:`neardup.io.remote` for compressed inputs, globs and fsspec URLs,
:mod:`neardup.batch.datasets` for Hugging Face datasets and :mod:`neardup.io.atomic` for atomic
writes; :mod:`neardup.io.reference` holds the pure references of the CSV writers (tests).
"""

from __future__ import annotations

from .atomic import atomic_dir, atomic_open, check_not_input, check_output, staged_outputs
from .formats import Corpus, SkippedRecord, Source, read_corpus
from .plan import (
    FORMATS,
    InputFile,
    OutputPlan,
    check_outputs,
    detect_format,
    plan_inputs,
    plan_output,
)
from .writers import record_values, write_kept

__all__ = [
    "FORMATS",
    "Corpus",
    "InputFile",
    "OutputPlan",
    "SkippedRecord",
    "Source",
    "atomic_dir",
    "atomic_open",
    "check_not_input",
    "check_output",
    "check_outputs",
    "detect_format",
    "plan_inputs",
    "plan_output",
    "read_corpus",
    "record_values",
    "staged_outputs",
    "write_kept",
]
