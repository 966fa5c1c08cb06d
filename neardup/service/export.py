"""One page of a namespace's stored documents in id order: the server side of ``GET
{prefix}/export``, which :func:`neardup.cluster.rebalance` pages through to move documents
between nodes (docs/cluster.md).

Lives in the service wing (the route is the service's); :mod:`neardup.cluster` re-exports
:func:`export_page` for its callers.
"""

from __future__ import annotations

from typing import Any

from ..errors import NotFoundError

__all__ = ["export_page"]


def export_page(store: Any, after: str, limit: int) -> dict[str, Any]:
    """Documents of one namespace with id > ``after`` in id order, at most ``limit``.

    ``store`` is a :class:`neardup.online.Deduplicator`; its store lists the ids
    (:meth:`neardup.store.Store.list_ids`: those in SQLite and those acknowledged but not
    applied to it yet). ``next`` is the id to pass as ``after`` for the next page, or None at
    the end.
    """
    ids = store.store.list_ids(after, limit)
    docs = []
    for i in ids:
        try:
            docs.append(store.get(i))
        except NotFoundError:  # deleted or expired since it was listed
            continue
    return {"documents": docs, "next": ids[-1] if len(ids) == limit else None}
