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

    ``store`` is a :class:`neardup.online.Deduplicator`. Ids come from SQLite and from the
    records the background applier has not written there yet, so an acknowledged document is
    listed even before SQLite has it. ``next`` is the id to pass as ``after`` for the next
    page, or None at the end.
    """
    engine = store.store
    pending = engine.pending
    with pending.lock:
        pend = [i for i in pending.by_id if i > after]
    meta = engine.meta
    with meta._rlock:  # the metadata DB's read connection (meta.py owns it; read-only use)
        rows = meta._rdb.execute(
            "SELECT id FROM docs WHERE id > ? ORDER BY id LIMIT ?", (after, limit)
        ).fetchall()
    ids = sorted({r[0] for r in rows} | set(pend))[:limit]
    docs = []
    for i in ids:
        try:
            docs.append(store.get(i))
        except NotFoundError:  # deleted or expired since it was listed
            continue
    return {"documents": docs, "next": ids[-1] if len(ids) == limit else None}
