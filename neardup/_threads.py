"""Thread settings shared by the wings: how many workers a corpus run uses by default
(:func:`default_workers`), how many threads the kernels use (:func:`kernel_threads`) and how
a kernel's documents or pairs are spread over them (:func:`run_ranges`), and a lower CPU
priority for background threads (:func:`lower_thread_priority`).

Why neardup's kernels are not numba ``parallel=True``: a parallel region compiles a second
function (the gufunc of its loop) beside the kernel, which made a first run's compile about 30 %
longer (``python benchmarks/bench_compile.py``); numba's pool threads spin after every region
(as much CPU as a single request's work); and waking them costs more than a request's few rows.
Each kernel instead takes a range ``lo, hi`` of its items and runs without the GIL
(``nogil=True``); :func:`run_ranges` splits the items into contiguous ranges and runs them on
the calling thread and a shared pool. The items are the same and every item writes its own
output rows, so the output does not depend on the thread count (``tests/test_threads.py``).

Write a kernel's loops out: a parallel region turned array expressions (``a[i, :] = b[j, :]``)
into loops, a plain kernel runs numba's generic slice assignment, several times slower.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = [
    "default_workers",
    "kernel_threads",
    "lower_thread_priority",
    "made_ahead",
    "max_threads",
    "run_ranges",
    "threads_now",
]


def default_workers() -> int:
    """The default worker count of a corpus run (``DedupConfig.workers``, ``--workers``):
    every CPU this process may run on (its affinity mask, which ``taskset`` and cgroup cpusets
    narrow; a CPU *quota*, e.g. ``docker --cpus``, is not seen), else ``os.cpu_count()``, at
    least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux (macOS, Windows): no affinity call
        return max(1, os.cpu_count() or 1)


_max_threads: int | None = None


def max_threads() -> int:
    """The most threads a kernel call uses: :func:`default_workers` when first asked in this
    process (a larger ``workers`` is clamped to it). Read once: the affinity call is a system
    call, and kernels ask on every call (a decision makes several)."""
    global _max_threads
    if _max_threads is None:
        _max_threads = default_workers()
    return _max_threads


_local = threading.local()


def threads_now() -> int:
    """The threads a kernel call on this thread uses: the innermost :func:`kernel_threads`,
    else :func:`max_threads`; 1 inside a range that :func:`run_ranges` is running (no nested
    splitting)."""
    if getattr(_local, "in_range", False):
        return 1
    workers = getattr(_local, "workers", None)
    return max_threads() if workers is None else int(workers)


@contextlib.contextmanager
def kernel_threads(workers: int) -> Iterator[None]:
    """Run the kernels called inside (on this thread) on ``workers`` threads (clamped to
    1..:func:`max_threads`); the previous count is restored on the way out."""
    prev = getattr(_local, "workers", None)
    _local.workers = max(1, min(int(workers), max_threads()))
    try:
        yield
    finally:
        _local.workers = prev


# one pool per CPU priority (niceness -> (pool, its size)): a background flush's or merge's
# ranges run on threads as low as it, a request's or the writer's on threads at its own. (A
# new thread takes the priority of the thread that starts it, so one shared pool ran the
# background kernels at the priority of whichever thread had started it, beside the requests.)
_pools: dict[int, tuple[ThreadPoolExecutor, int]] = {}
_pool_lock = threading.Lock()


def _get_pool(size: int, nice: int = 0) -> ThreadPoolExecutor:
    with _pool_lock:
        got = _pools.get(nice)
        if got is None or got[1] < size:
            pool = ThreadPoolExecutor(
                max_workers=size,
                thread_name_prefix=f"neardup-kernel-nice{nice}" if nice else "neardup-kernel",
                initializer=_pool_thread,
                initargs=(nice,),
            )
            _pools[nice] = (pool, size)
            if got is not None:
                got[0].shutdown(wait=False)
            return pool
        return got[0]


def _pool_thread(nice: int) -> None:
    if nice:
        lower_thread_priority(nice)


def _forget_pool() -> None:  # a forked child has the pool objects but none of their threads
    global _max_threads
    _pools.clear()
    _max_threads = None  # (and may run on other CPUs)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _run_tasks(
    kernel: Callable[..., Any],
    bounds: list[int],
    counter: Iterator[int],
    failed: list[bool],
    args: tuple[Any, ...],
) -> None:
    prev = getattr(_local, "in_range", False)
    _local.in_range = True
    try:
        last = len(bounds) - 1
        # (next() on a count is atomic under the GIL; after a failure no range starts)
        while not failed[0] and (t := next(counter)) < last:
            kernel(bounds[t], bounds[t + 1], *args)
    except BaseException:
        failed[0] = True
        raise
    finally:
        _local.in_range = prev


def run_ranges(
    kernel: Callable[..., Any],
    n: int,
    *args: Any,
    min_items: int = 1,
    tasks_per_thread: int = 4,
) -> None:
    """Run ``kernel(lo, hi, *args)`` over the items ``[0, n)``, split into contiguous ranges
    on :func:`threads_now` threads (the calling one and a shared pool's).

    The kernel must release the GIL (``nogil=True``) and each item must write only its own
    outputs. Ranges of at least ``min_items`` items (a call with fewer runs on the calling
    thread alone: a thread's wake-up costs more than a few items), ``tasks_per_thread`` per
    thread, taken in turn by whichever thread is free, so items of uneven cost still keep every
    thread busy; while the pool is busy with other calls' ranges, the calling thread runs them
    all rather than wait. An exception in any range is raised here once every range has
    stopped."""
    n = int(n)
    if n <= 0:
        return
    threads = threads_now()
    tasks = min(threads * max(1, int(tasks_per_thread)), n // max(1, int(min_items)))
    if threads <= 1 or tasks <= 1:
        prev = getattr(_local, "in_range", False)
        _local.in_range = True
        try:
            kernel(0, n, *args)
        finally:
            _local.in_range = prev
        return
    bounds = [n * t // tasks for t in range(tasks + 1)]
    counter = itertools.count()
    failed = [False]
    helpers = min(threads, tasks) - 1
    pool = _get_pool(max_threads(), getattr(_local, "nice", 0))
    futures: list[Future[None]] = [
        pool.submit(_run_tasks, kernel, bounds, counter, failed, args) for _ in range(helpers)
    ]
    try:
        _run_tasks(kernel, bounds, counter, failed, args)
    finally:
        # a helper still queued (the pool busy with another call's ranges) would find no range
        # left: cancelled, not waited for; one that started is waited for (it may be writing)
        errors = [f.exception() for f in futures if not f.cancel()]
    for err in errors:
        if err is not None:
            raise err


def lower_thread_priority(niceness: int = 10) -> None:
    """Lower the calling thread's CPU priority (Linux: nice per thread id), for background
    flushes and merges, so the writer and the request threads get the CPU first; the kernel
    ranges it hands to :func:`run_ranges` run on a pool of threads at the same priority."""
    _local.nice = int(niceness)
    with contextlib.suppress(AttributeError, OSError):  # not Linux / not permitted: as is
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)


_T = TypeVar("_T")


def made_ahead(rows: Iterator[_T], block: int) -> Generator[_T, None, None]:
    """``rows``, in order, made on a helper thread ``block`` at a time, one block ahead of the
    caller: a bulk insert's rows (their tuples, compressed texts and checksums: Python that
    holds the GIL) are made while SQLite inserts the rows before them (``sqlite3_step`` runs
    without the GIL), where made in turn the two add up (``benchmarks/bench_seed.py
    --whole``). An error making them is raised here; a caller that stops early (an error
    inserting) closes it: that waits for the block in the making, and no helper is left
    running."""

    def take() -> list[_T]:
        return list(itertools.islice(rows, block))

    with ThreadPoolExecutor(1, thread_name_prefix="neardup-rows-ahead") as ahead:
        nxt = ahead.submit(take)
        while got := nxt.result():
            nxt = ahead.submit(take)
            yield from got
