"""Fast CSV writers for ``--pairs-out`` and ``--clusters-out``.

Both build the CSV text column by column from NumPy arrays and joined strings, in chunks of
``chunk`` rows, instead of one :class:`csv.writer` call per row. The text is byte-identical to
:func:`csv_writer` (``QUOTE_MINIMAL``, rows ending in ``\\n``): every id that contains a
character the writer may quote (``,`` ``"`` ``\\r`` ``\\n``) is escaped by :mod:`csv` itself,
so the quoting rules are exactly those of the running Python. Their references, the per-row
:mod:`csv` writers, are in :mod:`neardup.io.reference` (tested equal: ``tests/io/test_io.py``).

Every CSV neardup writes goes through :func:`csv_writer`: Python 3.11's :class:`csv.writer`
with ``lineterminator="\\n"`` leaves a lone ``\\r`` unquoted, and a reader then ends the row
there (a value ``"\\r"`` read back as two rows).

Formats
-------
pairs:    ``id_a,id_b,distance,score,stage,rule`` — score as ``repr(round(score, 4))``.
clusters: ``id,cluster,cluster_size,representative,kept``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from operator import itemgetter
from typing import IO, TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from _csv import Writer as _csv_writer

__all__ = [
    "CLUSTERS_HEADER",
    "PAIRS_HEADER",
    "csv_dict_writer",
    "csv_fields",
    "csv_writer",
    "write_clusters_csv",
    "write_pairs_csv",
]

PAIRS_HEADER = ("id_a", "id_b", "distance", "score", "stage", "rule")
CLUSTERS_HEADER = ("id", "cluster", "cluster_size", "representative", "kept")
_SPECIAL = (",", '"', "\r", "\n")
_CHUNK = 262_144


class _LineFeedRows:
    """A text stream that writes each row ``csv`` hands it with ``\\n`` for its ``\\r\\n``.

    The writer is built with ``lineterminator="\\r\\n"`` so that it quotes every field that
    holds ``\\r`` or ``\\n`` (it quotes the terminator's characters); the C writer calls
    ``write`` once per row, ending in the terminator, which is replaced here.
    """

    __slots__ = ("_write",)

    def __init__(self, fh: IO[str]) -> None:
        self._write = fh.write

    def write(self, row: str) -> int:
        return self._write(row[:-2] + "\n")


def csv_writer(fh: IO[str], delimiter: str = ",") -> _csv_writer:
    """A :func:`csv.writer` on ``fh`` whose rows end with ``\\n`` and whose fields holding
    ``\\r`` or ``\\n`` are quoted (``QUOTE_MINIMAL``), so every value reads back as written.

    >>> buf = io.StringIO()
    >>> csv_writer(buf).writerows([["id", "text"], ["a", "\\r"], ["b", "x,y"]])
    >>> buf.getvalue()
    'id,text\\na,"\\r"\\nb,"x,y"\\n'
    """
    return csv.writer(_LineFeedRows(fh), delimiter=delimiter, lineterminator="\r\n")


def csv_dict_writer(
    fh: IO[str], fields: Sequence[str], delimiter: str = ","
) -> csv.DictWriter[str]:
    """:func:`csv_writer`'s rows from dicts (missing fields empty, extra fields ignored)."""
    return csv.DictWriter(
        _LineFeedRows(fh),
        fieldnames=list(fields),
        delimiter=delimiter,
        lineterminator="\r\n",
        restval="",
        extrasaction="ignore",
    )


def _escape_one(value: str) -> str:
    buf = io.StringIO()
    csv_writer(buf).writerow([value, "x"])
    return buf.getvalue()[:-3]  # drop ",x\n"


def csv_fields(values: Sequence[str]) -> list[str]:
    """``values`` as CSV fields, exactly as :class:`csv.writer` would write them.

    Parameters
    ----------
    values : sequence of str

    Returns
    -------
    list of str
        The same list when no value needs quoting (the common case: one C-level scan).
    """
    values = list(values)
    joined = "".join(values)
    if not any(c in joined for c in _SPECIAL):
        return values
    return [_escape_one(v) if any(c in v for c in _SPECIAL) else v for v in values]


def _take(fields: list[str], index: npt.NDArray[np.int64]) -> list[str]:
    if index.size == 0:
        return []
    if index.size == 1:
        return [fields[int(index[0])]]
    return list(itemgetter(*index.tolist())(fields))


_SCORE_TABLE: list[str] = []


def _scores_as_text(score: npt.NDArray[np.float64]) -> list[str]:
    """``str(round(float(s), 4))`` for every score.

    For ``s`` in [0, 1], ``round(s, 4)`` is the double nearest to ``k / 10**4`` with ``k`` the
    exact half-even rounding of ``s * 10**4``, and ``k / 10000.0`` is that same double (IEEE
    division is correctly rounded); so the text comes from a table of the 10,001 values. ``k``
    is ``rint(s * 10000.0)`` except within 1e-6 of a tie, where the float product could round
    the other way: those (and anything outside [0, 1], NaN) are rounded by Python itself.
    """
    if score.size == 0:
        return []
    if not _SCORE_TABLE:
        _SCORE_TABLE.extend(str(k / 10000.0) for k in range(10001))
    x = score * 10000.0
    k = np.rint(x)
    with np.errstate(invalid="ignore"):
        sure = (score >= 0.0) & (score <= 1.0) & (np.abs(x - np.floor(x) - 0.5) > 1e-6)
    idx = np.where(sure, k, 0).astype(np.int64)
    out = _take(_SCORE_TABLE, idx)
    for j in np.flatnonzero(~sure).tolist():
        out[j] = str(round(float(score[j]), 4))
    return out


def _small_ints_as_text(values: npt.NDArray[np.integer]) -> list[str]:
    """``str(v)`` for int arrays, via a lookup table when the range is small."""
    if values.size == 0:
        return []
    lo, hi = int(values.min()), int(values.max())
    if lo >= 0 and hi < 4096:
        table = [str(v) for v in range(hi + 1)]
        return _take(table, values.astype(np.int64))
    return list(map(str, values.tolist()))


def _write_rows(fh: IO[bytes], columns: list[list[str]]) -> None:
    text = "\n".join(map(",".join, zip(*columns, strict=True)))
    if text:
        fh.write(text.encode("utf-8"))
        fh.write(b"\n")


def write_pairs_csv(
    fh: IO[bytes],
    ids: Sequence[str],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    distance: npt.NDArray[np.integer],
    score: npt.NDArray[np.float64],
    stage: npt.NDArray[np.integer],
    stage_names: Sequence[str],
    *,
    rule: npt.NDArray[np.integer],
    rule_names: Sequence[str],
    chunk: int = _CHUNK,
) -> int:
    """Write the pairs CSV (header + one row per pair) as UTF-8 bytes to ``fh``.

    Parameters
    ----------
    fh : binary file
    ids : sequence of str, length n
        Document ids; ``a`` and ``b`` index into it.
    a, b : numpy.ndarray of int64, shape (m,)
    distance : numpy.ndarray of int, shape (m,)
    score : numpy.ndarray of float64, shape (m,)
    stage : numpy.ndarray of int, shape (m,)
        Index into ``stage_names``.
    stage_names : sequence of str
    rule : numpy.ndarray of int, shape (m,)
        What decided each pair: index into ``rule_names``.
    rule_names : sequence of str
    chunk : int, default=262144
        Rows formatted per write (bounds the memory of the text being built).

    Returns
    -------
    int
        Rows written (without the header).
    """
    fields = csv_fields(ids)
    names = csv_fields(stage_names)
    rules = csv_fields(rule_names)
    fh.write((",".join(PAIRS_HEADER) + "\n").encode("utf-8"))
    m = int(np.asarray(a).size)
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    distance = np.asarray(distance)
    score = np.asarray(score, np.float64)
    stage = np.asarray(stage)
    rule = np.asarray(rule)
    for lo in range(0, m, chunk):
        hi = min(m, lo + chunk)
        cols = [
            _take(fields, a[lo:hi]),
            _take(fields, b[lo:hi]),
            _small_ints_as_text(distance[lo:hi]),
            _scores_as_text(score[lo:hi]),
            _take(names, stage[lo:hi].astype(np.int64)),
            _take(rules, rule[lo:hi].astype(np.int64)),
        ]
        _write_rows(fh, cols)
    return m


def write_clusters_csv(
    fh: IO[bytes],
    ids: Sequence[str],
    cluster: npt.NDArray[np.int64],
    root: npt.NDArray[np.int64],
    keep: npt.NDArray[np.bool_],
    *,
    rows: npt.NDArray[np.int64] | None = None,
    chunk: int = _CHUNK,
) -> int:
    """Write the clusters CSV (``id,cluster,cluster_size,representative,kept``) to ``fh``.

    Parameters
    ----------
    fh : binary file
    ids : sequence of str, length n
    cluster : numpy.ndarray of int64, shape (n,)
        Dense cluster number of each document.
    root : numpy.ndarray of int64, shape (n,)
        Position of the representative (first member) of each document's cluster.
    keep : numpy.ndarray of bool, shape (n,)
    rows : numpy.ndarray of int64, optional
        The positions to write a row for, in order (default: every document); sizes and
        representatives count every document (an incremental run's stored ones).
    chunk : int, default=262144

    Returns
    -------
    int
        Rows written (without the header).
    """
    fields = csv_fields(ids)
    n = len(fields)
    root = np.asarray(root, np.int64)
    cluster = np.asarray(cluster, np.int64)
    keep = np.asarray(keep, bool)
    sizes = np.bincount(root, minlength=n)[root] if n else np.zeros(0, np.int64)
    at = np.arange(n, dtype=np.int64) if rows is None else np.asarray(rows, np.int64)
    fh.write((",".join(CLUSTERS_HEADER) + "\n").encode("utf-8"))
    flags = ["0", "1"]
    for lo in range(0, at.size, chunk):
        sel = at[lo : lo + chunk]
        cols = [
            fields[lo : lo + chunk] if rows is None else _take(fields, sel),
            list(map(str, cluster[sel].tolist())),
            list(map(str, sizes[sel].tolist())),
            _take(fields, root[sel]),
            _take(flags, keep[sel].astype(np.int64)),
        ]
        _write_rows(fh, cols)
    return int(at.size)
