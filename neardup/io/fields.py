"""Dotted field names: ``--text-field meta.text`` reads ``{"meta": {"text": ...}}``.

A name is first looked up as it is (a record may have a key ``"meta.text"``); when there is no
such key and the name has dots, it is a path through nested objects.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from typing import Any

__all__ = ["MISSING", "get_field", "missing_field", "unix_seconds"]

_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")

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


def unix_seconds(value: Any) -> float:
    """A record's time as unix seconds: a number (seconds since 1970-01-01 UTC; also as a
    string, as CSV cells are) or an ISO 8601 string with a UTC offset
    (``2026-11-29T12:00:00Z``, ``...+08:00``).

    Raises :class:`ValueError` saying why otherwise: a string without an offset is refused,
    not read as some local time.

    >>> unix_seconds("1970-01-02T00:00:00Z"), unix_seconds(5)
    (86400.0, 5.0)
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        t = float(value)
        if not math.isfinite(t):
            raise ValueError(f"{value!r} is not a finite number of seconds")
        return t
    if not isinstance(value, str):
        raise ValueError(
            f"expected unix seconds or an ISO 8601 string, got {type(value).__name__} {value!r}"
        )
    if _NUMBER.fullmatch(value.strip()):
        return unix_seconds(float(value))
    try:
        when = _dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(
            f"{value!r} is neither unix seconds nor an ISO 8601 time (e.g. 2026-11-29T12:00:00Z)"
        ) from None
    if when.tzinfo is None:
        raise ValueError(
            f"{value!r} has no UTC offset, so which instant it names is unknown; add one "
            "(Z or +08:00) or give unix seconds"
        )
    return when.timestamp()
