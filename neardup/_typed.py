"""numba typed lists made and filled by cached kernels.

numba.typed.List's own Python-side methods (``empty_list``, ``append``, ``len``) are numba
functions that numba never caches: every new process compiled them again for each item type,
about a second of every store open (a segment set's band sections and sketch sections) and
seconds of a restart. So the typed lists the kernels take (the index's segment sets, the
store's band and sketch sections) are made and filled by the cached kernels below
(``tests/index/test_index_startup.py`` and ``tests/store/test_store_startup.py`` check that a
warm kernel cache compiles nothing). Python code keeps its own count of a list's items
instead of calling ``len()`` on it. (Not in :mod:`neardup._jit`: a kernel decorated there
would read the package's sources for its cache stamp when ``_jit`` is imported.)
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from numba.typed import List

from ._arrays import read_only
from ._jit import kernel

__all__ = ["typed_list", "typed_list_append", "typed_list_like"]


@kernel
def typed_list_like(proto: Any) -> Any:  # pragma: no cover (numba)
    """An empty ``numba.typed.List`` whose items have the numba type of ``proto``."""
    out = List()
    out.append(proto)
    out.pop()
    return out


@kernel
def typed_list_append(lst: Any, item: Any) -> None:  # pragma: no cover (numba)
    """``lst.append(item)`` for a typed list made by :func:`typed_list_like`."""
    lst.append(item)


def typed_list(items: Any, dtype: Any) -> Any:
    """A ``numba.typed.List`` of ``items``, read-only C-contiguous 1-D arrays of ``dtype``
    (:func:`neardup._arrays.read_only`), made by cached kernels: typed so even when ``items``
    is empty."""
    out = typed_list_like(_proto(np.dtype(dtype)))
    for item in items:
        typed_list_append(out, item)
    return out


@functools.cache
def _proto(dtype: np.dtype[Any]) -> Any:
    """An empty read-only array of ``dtype``: the item type of :func:`typed_list`'s lists."""
    return read_only(np.zeros(0, dtype))
