"""neardup._threads: how kernels spread their items over threads (run_ranges, kernel_threads),
and the pin that no kernel is a numba parallel region (they compile a second function each and
made a first run's compile about 30 % longer; benchmarks/bench_compile.py)."""

from __future__ import annotations

import ast
import contextlib
import itertools
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import _threads
from neardup._threads import kernel_threads, max_threads, run_ranges, threads_now

PACKAGE = Path(__file__).resolve().parents[1] / "neardup"


def _recorder() -> tuple[list[tuple[int, int, int]], object]:
    seen: list[tuple[int, int, int]] = []
    lock = threading.Lock()

    def kernel(lo: int, hi: int, out: np.ndarray) -> None:
        out[lo:hi] += 1
        with lock:
            seen.append((lo, hi, threading.get_ident()))

    return seen, kernel


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 500),
    workers=st.integers(1, 4),
    min_items=st.integers(1, 64),
    per_thread=st.integers(1, 8),
)
def test_every_item_runs_once_in_contiguous_ranges(
    n: int, workers: int, min_items: int, per_thread: int
) -> None:
    seen, kernel = _recorder()
    out = np.zeros(n, np.int64)
    with kernel_threads(workers):
        run_ranges(kernel, n, out, min_items=min_items, tasks_per_thread=per_thread)
    assert (out == 1).all()
    ranges = sorted((lo, hi) for lo, hi, _ in seen)
    assert all(hi > lo for lo, hi in ranges)
    if n:
        assert ranges[0][0] == 0 and ranges[-1][1] == n
        assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
        if len(ranges) > 1:  # ranges of at least min_items each
            assert min(hi - lo for lo, hi in ranges) >= min_items
    else:
        assert seen == []


def test_few_items_or_one_thread_run_on_the_calling_thread() -> None:
    me = threading.get_ident()
    for workers, n, min_items in ((1, 1000, 1), (4, 10, 16), (4, 1, 1)):
        seen, kernel = _recorder()
        with kernel_threads(workers):
            run_ranges(kernel, n, np.zeros(n, np.int64), min_items=min_items)
        assert [(lo, hi) for lo, hi, _ in seen] == [(0, n)]
        assert {t for _, _, t in seen} == {me}


@pytest.mark.skipif(max_threads() < 2, reason="one CPU: a second thread is never used")
def test_ranges_run_on_more_than_one_thread() -> None:
    seen: list[int] = []

    def kernel(lo: int, hi: int) -> None:
        time.sleep(0.02)  # (releases the GIL, as a nogil kernel does)
        seen.append(threading.get_ident())

    with kernel_threads(2):
        run_ranges(kernel, 8, min_items=1, tasks_per_thread=4)
    assert len(seen) == 8
    assert len(set(seen)) == 2


def test_an_exception_in_a_range_is_raised_once_every_range_has_stopped() -> None:
    done: list[int] = []

    def kernel(lo: int, hi: int) -> None:
        if lo == 0:
            raise ValueError("bad range")
        time.sleep(0.01)
        done.append(lo)

    with kernel_threads(2), pytest.raises(ValueError, match="bad range"):
        run_ranges(kernel, 8, min_items=1, tasks_per_thread=4)
    finished = len(done)
    time.sleep(0.05)
    assert len(done) == finished  # nothing still running after the raise
    assert finished < 7  # and the ranges not yet started were not run


def test_a_busy_pool_does_not_hold_a_call_up() -> None:
    """Every pool thread busy with another call's long range: a call runs its ranges on its
    own thread and returns, without waiting for a pool thread to come free."""
    pool = _threads._get_pool(max_threads())
    release = threading.Event()
    blockers = [pool.submit(release.wait, 30) for _ in range(max_threads())]
    try:
        seen, kernel = _recorder()
        out = np.zeros(64, np.int64)
        t0 = time.perf_counter()
        with kernel_threads(2):
            run_ranges(kernel, 64, out, min_items=1)
        assert time.perf_counter() - t0 < 5.0
        assert (out == 1).all()
        assert {t for _, _, t in seen} == {threading.get_ident()}
    finally:
        release.set()
        for b in blockers:
            b.result(timeout=30)


def test_a_range_does_not_split_again() -> None:
    inner: list[int] = []

    def kernel(lo: int, hi: int) -> None:
        inner.append(threads_now())

    def outer(lo: int, hi: int) -> None:
        run_ranges(kernel, 100, min_items=1)

    with kernel_threads(2):
        run_ranges(outer, 4, min_items=1)
    assert inner and set(inner) == {1}


def test_kernel_threads_clamps_and_restores() -> None:
    before = threads_now()
    assert before == max_threads()
    with kernel_threads(0):
        assert threads_now() == 1
        with kernel_threads(10**6):
            assert threads_now() == max_threads()
        assert threads_now() == 1
    assert threads_now() == before


def test_a_forked_child_makes_a_new_pool() -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    with kernel_threads(2):
        run_ranges(lambda lo, hi: None, 8, min_items=1)  # the parent's pool exists
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            out = np.zeros(64, np.int64)

            def kernel(lo: int, hi: int) -> None:
                out[lo:hi] += 1

            with kernel_threads(2):
                run_ranges(kernel, 64, min_items=1)
            os.write(w, b"ok" if (out == 1).all() else b"bad")
        finally:
            os._exit(0)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    assert os.read(r, 8) == b"ok"
    os.close(r)
    assert status == 0


def test_results_do_not_depend_on_the_thread_count() -> None:
    """A real kernel through run_ranges: the verification's LCS and bounds, the signatures."""
    from neardup.fingerprint.minhash import minhash_signatures
    from neardup.rules.config import DedupConfig
    from neardup.verify.overlap import lcs_many
    from neardup.verify.tokens import token_bytes

    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(50)]
    texts = [" ".join(rng.choice(words, int(rng.integers(1, 80)))) for _ in range(600)]
    cfg = DedupConfig()
    v = cfg.make_verifier()
    ia = rng.integers(0, len(texts), 3000)
    ib = rng.integers(0, len(texts), 3000)
    got = []
    for workers in (1, 2, 3):
        sig, counts = minhash_signatures(v, texts, cfg.lsh_plan().hashes, workers=workers)
        lcs = lcs_many(token_bytes(v, texts), ia, ib, workers=workers)
        got.append((sig, counts, lcs))
    for sig, counts, lcs in got[1:]:
        assert np.array_equal(sig, got[0][0])
        assert np.array_equal(counts, got[0][1])
        assert np.array_equal(lcs, got[0][2])


def _parallel_kernels() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "parallel":
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} parallel=")
            if isinstance(node, ast.Attribute) and node.attr == "prange":
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} prange")
    return found


def test_no_kernel_is_a_numba_parallel_region() -> None:
    assert _parallel_kernels() == []


def test_the_pool_is_one_per_process() -> None:
    with kernel_threads(2):
        run_ranges(lambda lo, hi: None, 8, min_items=1)
    pool = _threads._pools.get(0)
    with kernel_threads(2):
        run_ranges(lambda lo, hi: None, 8, min_items=1)
    assert _threads._pools.get(0) is pool or max_threads() < 2


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="no thread priorities here")
def test_a_background_threads_ranges_run_at_its_priority() -> None:
    """A thread that lowered its priority (a background flush or merge) has its ranges run on
    pool threads as low as it; a normal thread's ranges run on threads at normal priority,
    whichever thread started a pool first."""
    if max_threads() < 2:
        pytest.skip("one CPU: every range runs on the calling thread")
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def ranges_priorities() -> set[int]:
        seen: set[int] = set()
        gate = threading.Barrier(2, timeout=10)

        def kernel(lo: int, hi: int) -> None:
            seen.add(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
            if lo == 0 or hi == 2:
                with contextlib.suppress(threading.BrokenBarrierError):
                    gate.wait()  # the first two ranges meet: two threads took them

        with kernel_threads(2):
            run_ranges(kernel, 2, min_items=1)
        return seen

    got: list[set[int]] = []

    def background() -> None:
        _threads.lower_thread_priority(base + 7)
        got.append(ranges_priorities())

    t = threading.Thread(target=background)
    t.start()
    t.join(30)
    assert got == [{base + 7}]
    assert ranges_priorities() == {base}
