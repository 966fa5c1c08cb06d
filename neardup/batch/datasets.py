"""Hugging Face ``datasets``: dedup a :class:`datasets.Dataset` and get the kept rows back.

Needs the ``hf`` extra (``pip install 'neardup[hf]'``); ``datasets`` is imported only when a
function here is called. Files of a dataset on the Hub are read by the CLI through fsspec
instead: ``neardup dedup 'hf://datasets/OWNER/NAME/data/*.parquet' -o kept.parquet`` (needs
``huggingface_hub``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError, InputError, InputTypeError, RecordError, require

if TYPE_CHECKING:
    from ..rules.config import DedupConfig
    from .result import DedupResult

__all__ = ["dataset_column", "dedup_dataset"]


def _datasets() -> Any:
    return require("datasets", "hf", "deduplicating a Hugging Face Dataset")


def dataset_column(ds: Any, name: str) -> list[Any]:
    """The values of column ``name`` of a ``datasets.Dataset``, in row order (its indices
    mapping, e.g. after ``select`` or ``shuffle``, applied). A dotted name (``meta.text``)
    reads a field of a struct column; a column literally named so wins."""
    from ..io.formats import arrow_column

    names = list(ds.column_names)
    top = name if name in names or "." not in name else name.split(".", 1)[0]
    if top not in names:
        raise InputError(
            f"the Dataset has no column {name!r} (columns: {', '.join(names[:10])}); "
            "pass text_field= / id_field="
        )
    table = ds.select_columns([top]).with_format("arrow")[:]
    column = arrow_column(table, name)
    if column is None:
        raise InputError(
            f"the Dataset has no field {name!r} (column {top!r} is "
            f"{table.schema.field(top).type}); pass text_field= / id_field="
        )
    return column.to_pylist()


def dedup_dataset(
    ds: Any,
    text_field: str = "text",
    id_field: str | None = None,
    config: DedupConfig | None = None,
) -> tuple[Any, DedupResult]:
    """Deduplicate the rows of a ``datasets.Dataset`` on one text column.

    Parameters
    ----------
    ds : datasets.Dataset
        The rows (one split: pass ``dsdict["train"]``, not the ``DatasetDict``).
    text_field : str, default="text"
        Column holding the text (a dotted name reads a struct column's field: ``meta.text``).
    id_field : str, optional
        Column of unique ids for the result (``DedupResult.ids``, ``pair_rows()``); by default
        the row positions ``"0"``, ``"1"``, ...
    config : DedupConfig, optional
        As for :func:`neardup.dedup`.

    Returns
    -------
    (datasets.Dataset, DedupResult)
        The kept rows, every column, in their input order (``ds.select`` of the kept
        positions), and the full result (``keep``, clusters, pairs, stats) over all rows.

    Raises
    ------
    MissingDependencyError
        ``datasets`` is not installed (``pip install 'neardup[hf]'``).
    RecordError
        A text is not a string (e.g. ``None``): the message names the row.
    """
    datasets = _datasets()
    from .run import dedup

    if isinstance(ds, datasets.DatasetDict):
        splits = ", ".join(map(repr, ds))
        raise InputTypeError(
            f"dedup_dataset takes one split, got a DatasetDict ({splits}); pass e.g. ds['train']"
        )
    if not isinstance(ds, datasets.Dataset):
        what = type(ds).__name__
        hint = (
            "; an IterableDataset must be materialised first (Dataset.from_generator / "
            "load_dataset without streaming=True)"
            if isinstance(ds, datasets.IterableDataset)
            else ""
        )
        raise InputTypeError(f"dedup_dataset takes a datasets.Dataset, got {what}{hint}")
    if config is not None and not hasattr(config, "make_fingerprinter"):
        raise ConfigError(f"config must be a neardup.DedupConfig, got {type(config).__name__}")
    texts = dataset_column(ds, text_field)
    for row, text in enumerate(texts):
        if type(text) is not str:
            raise RecordError(
                f"row {row}: field {text_field!r} must be a string, got {type(text).__name__}; "
                "filter those rows first (ds.filter) or choose text_field="
            )
    ids: list[str] | None = None
    if id_field is not None:
        values = dataset_column(ds, id_field)
        for row, value in enumerate(values):
            if value is None or value == "":
                raise RecordError(f"row {row}: id field {id_field!r} is empty")
        ids = [str(v) for v in values]
    result = dedup(texts, ids=ids, config=config)
    kept = ds.select(np.flatnonzero(result.keep))
    return kept, result
