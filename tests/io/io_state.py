"""A corpus as read, for comparing the fast readers with the reference reader in tests."""

from __future__ import annotations

from typing import Any

from neardup.io import read_corpus


def read_state(
    path: Any, monkeypatch: Any, *, reference: bool, texts_type: type | None = None, **kwargs: Any
) -> tuple[Any, ...]:
    """``read_corpus([path], **kwargs)`` through the reference reader (``reference``) or the
    fast one, as a comparable tuple (ids, texts, skipped, errors, lines, spans), or
    ``("error", type, message)``. ``texts_type``: the fast reader's texts must be one."""
    with monkeypatch.context() as m:
        if reference:
            m.setenv("NEARDUP_REFERENCE", "io")
        else:
            m.delenv("NEARDUP_REFERENCE", raising=False)
        try:
            c = read_corpus([str(path)], **kwargs)
        except Exception as exc:  # compared as (type, message)
            return ("error", type(exc).__name__, str(exc))
        s = c.sources[0]
        if texts_type is not None and not reference:
            assert isinstance(c.texts, texts_type)
        return (c.ids, list(c.texts), c.skipped, c.errors, s.lines.tolist(), s.starts.tolist(),
                s.ends.tolist())  # fmt: skip
