"""Pure references of the io wing's fast paths, for tests (not in any ``__all__`` of the
package): the ``--pairs-out`` and ``--clusters-out`` CSVs written row by row with :mod:`csv`
(:mod:`neardup.io.csvout` builds them column by column and is tested equal to these).

The reference JSONL reader, :func:`neardup.io.jsonl.read_lines_reference`, is not here: it
also reads every non-UTF-8 file in production (see :mod:`neardup.io.jsonl`).
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from .csvout import CLUSTERS_HEADER, PAIRS_HEADER, csv_writer

__all__: list[str] = []


def pairs_csv_reference(
    ids: Sequence[str],
    a: npt.NDArray[np.int64],
    b: npt.NDArray[np.int64],
    distance: npt.NDArray[np.integer],
    score: npt.NDArray[np.float64],
    stage: npt.NDArray[np.integer],
    stage_names: Sequence[str],
    rule: npt.NDArray[np.integer],
    rule_names: Sequence[str],
) -> str:
    """The pairs CSV built row by row with :func:`~neardup.io.csvout.csv_writer`: the reference
    of :func:`~neardup.io.csvout.write_pairs_csv`."""
    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(PAIRS_HEADER)
    for x, y, d, s, st, ru in zip(
        np.asarray(a).tolist(),
        np.asarray(b).tolist(),
        np.asarray(distance).tolist(),
        np.asarray(score).tolist(),
        np.asarray(stage).tolist(),
        np.asarray(rule).tolist(),
        strict=True,
    ):
        w.writerow([ids[x], ids[y], int(d), round(float(s), 4), stage_names[st], rule_names[ru]])
    return buf.getvalue()


def clusters_csv_reference(
    ids: Sequence[str],
    cluster: npt.NDArray[np.int64],
    root: npt.NDArray[np.int64],
    keep: npt.NDArray[np.bool_],
) -> str:
    """The clusters CSV built row by row with :func:`~neardup.io.csvout.csv_writer`: the
    reference of :func:`~neardup.io.csvout.write_clusters_csv`."""
    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(CLUSTERS_HEADER)
    root = np.asarray(root)
    sizes = np.bincount(root, minlength=len(ids))
    for i, doc_id in enumerate(ids):
        r = int(root[i])
        w.writerow([doc_id, int(cluster[i]), int(sizes[r]), ids[r], int(keep[i])])
    return buf.getvalue()
