"""Pure references of the batch's own fast paths, for tests (not in any ``__all__`` of the
package): the first of equal hash rows by ``np.unique``. The rules' references are in
:mod:`neardup.rules.reference`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__: list[str] = []


def first_of_equal_rows_reference(h: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """Reference for :func:`~neardup.batch.exact.first_of_equal_rows`: ``np.unique`` over the
    rows as bytes."""
    h = np.ascontiguousarray(h, dtype=np.uint64)
    if h.shape[0] == 0:
        return np.zeros(0, np.int64)
    key = h.view(np.dtype((np.void, h.dtype.itemsize * h.shape[1]))).ravel()
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return first[inverse].astype(np.int64)
