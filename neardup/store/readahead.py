"""The kernel's read-ahead on the segments' probed sections: on while they fit in memory, off
once they outgrow it.

A check probes every segment's band-key section (and reads sketches) at random, a few bytes a
probe. Where a probed page is not in the page cache, the fault reads the device's read-ahead
window around it (``/sys/block/*/queue/read_ahead_kb``: 8 MB on this project's VMs, 128 KB on
many machines). While the sections fit in the page cache that is a cheap way to load them;
once they outgrow it, every such read evicts pages other probes need, and the store reads
from disk many times its size: on a 1 M window held to less memory than its sections
(``python benchmarks/bench_read_ahead.py``), each check read ~175 MB and took ~330 ms. Without
read-ahead (``MADV_RANDOM``) a fault reads its page only; where the sections fit, that makes
warming slower and the checks no faster, so it is off only where they do not fit.

:func:`decide` compares the probed sections' bytes with :func:`available_memory` (what the page
cache may hold for this process: ``MemAvailable``, or a cgroup's limit less its anonymous
memory where that is lower). ``NEARDUP_READ_AHEAD`` (``auto``, the default; ``on``; ``off``)
sets it instead. :func:`apply` runs where a store opens and when its segments change (the
writer's housekeeping); a merge turns it on for its inputs while it reads them in order.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError

__all__ = ["ENV", "apply", "available_memory", "choice", "decide", "probed_bytes"]

#: the environment variable that sets read-ahead instead of :func:`decide`'s rule
ENV = "NEARDUP_READ_AHEAD"
_CHOICES = ("auto", "on", "off")


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _stat(path: Path, key: str) -> int | None:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    except OSError:
        return None
    return None


def available_memory(
    proc: Path = Path("/proc"), cgroup: Path = Path("/sys/fs/cgroup")
) -> int | None:
    """Bytes the page cache may hold for this process: ``MemAvailable`` (which counts the page
    cache that can be reclaimed), or, where this process's memory cgroup (v1 or v2) has a lower
    limit, that limit less the cgroup's anonymous memory. None where unknown (not Linux)."""
    best: int | None = None
    try:
        for line in (proc / "meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                best = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        lines = (proc / "self" / "cgroup").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, where = parts
        rel = where.lstrip("/")
        if controllers == "":  # cgroup v2
            base = cgroup / rel
            limit, anon = _read_int(base / "memory.max"), _stat(base / "memory.stat", "anon")
        elif "memory" in controllers.split(","):  # cgroup v1
            base = cgroup / "memory" / rel
            limit = _read_int(base / "memory.limit_in_bytes")
            anon = _stat(base / "memory.stat", "total_rss")
        else:
            continue
        if limit is not None and limit < 1 << 60:  # v1 writes "no limit" as a huge number
            room = max(0, limit - (anon or 0))
            best = room if best is None else min(best, room)
    return best


def probed_bytes(segments: Sequence[Any]) -> int:
    """Bytes of the live segments' probed sections (band keys and sketches)."""
    return sum(s.segment.probed_bytes() for s in segments)


def choice(env: Mapping[str, str] | None = None) -> str:
    """``NEARDUP_READ_AHEAD``: ``auto`` (also where unset or empty), ``on`` or ``off``;
    :class:`ConfigError` for another value (a store checks it before it opens)."""
    raw = (os.environ if env is None else env).get(ENV, "")
    value = raw.strip().lower() or "auto"
    if value not in _CHOICES:
        raise ConfigError(
            f"{ENV}={raw!r}: expected auto (the default: off once the segments' probed "
            "sections outgrow the memory available), on or off"
        )
    return value


def decide(segments: Sequence[Any], env: Mapping[str, str] | None = None) -> bool:
    """Whether read-ahead stays on for ``segments``' probed sections: as
    ``NEARDUP_READ_AHEAD`` says where it is ``on`` or ``off``, else (``auto``) while they fit
    in :func:`available_memory` (on where that is unknown)."""
    value = choice(env)
    if value != "auto":
        return value == "on"
    room = available_memory()
    return room is None or probed_bytes(segments) <= room


def apply(st: Any) -> None:
    """Decide for the store's segments and advise each, once for each set of segments (a new
    segment gets the advice, and the decision is taken again for the new total)."""
    layout = tuple(s.segment.path for s in st.segments)
    if st.read_ahead_layout == layout:
        return
    on = decide(st.segments)
    for s in st.segments:
        s.segment.read_ahead(on)
    st.read_ahead, st.read_ahead_layout = on, layout
