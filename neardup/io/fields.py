"""Dotted field names: ``--text-field meta.text`` reads ``{"meta": {"text": ...}}``.

A name is first looked up as it is (a record may have a key ``"meta.text"``); when there is no
such key and the name has dots, it is a path through nested objects.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MISSING", "get_field", "missing_field"]

MISSING: Any = object()  # what get_field returns for a field the record does not have


def get_field(obj: dict[str, Any], name: str) -> Any:
    """The value of field ``name`` of ``obj`` (see the module docstring), or :data:`MISSING`."""
    value = obj.get(name, MISSING)
    if value is not MISSING or "." not in name:
        return value
    cur: Any = obj
    for part in name.split("."):
        if type(cur) is not dict:
            return MISSING
        cur = cur.get(part, MISSING)
        if cur is MISSING:
            return MISSING
    return cur


def _fields(obj: dict[str, Any]) -> str:
    return ", ".join(list(map(str, obj))[:10]) or "none"


def missing_field(obj: dict[str, Any], name: str, what: str) -> str:
    """Why ``obj`` has no field ``name``: ``record has no <what> field 'a.b' (...)``."""
    head = f"record has no {what} field {name!r}"
    if "." not in name:
        return f"{head} (its fields: {_fields(obj)})"
    cur: Any = obj
    walked: list[str] = []
    for part in name.split("."):
        if type(cur) is not dict:
            return f"{head} ({'.'.join(walked)!r} is {type(cur).__name__}, not an object)"
        if part not in cur:
            where = f"{'.'.join(walked)!r} has" if walked else "its"
            return f"{head} ({where} fields: {_fields(cur)})"
        cur = cur[part]
        walked.append(part)
    return head
