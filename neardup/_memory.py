"""The process's memory as the kernel reports it: one reader for the store's open and stats
(``rss_mib``), the service's ``/healthz`` and start-up log, and the tests that bound a
structure's resident cost."""

from __future__ import annotations

__all__ = ["process_rss_bytes"]


def process_rss_bytes() -> int:
    """Resident set size of this process in bytes (``VmRSS``); where ``/proc`` cannot be
    read, the peak (``ru_maxrss``), and 0 where neither can."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    except (ImportError, OSError):  # pragma: no cover - non-POSIX
        return 0
