"""Retention: a document past the window is gone for good (issue 34 item 9) and the document
count is what is served.

A window that is shortened and widened again, at runtime (``set_retention``) or by reopening
(``allow_retention_change``, after a clean close or a kill), never brings back what had left the
window; rows past the window in a partition that has not ended are deleted (not only hidden),
so ``len()`` and ``/healthz`` count only the window.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from doubles import SimpleFingerprinter

from neardup.errors import NotFoundError
from neardup.online import Deduplicator
from neardup.store.maintenance import ROW_EXPIRY_STEP_S

HOUR = 3600.0
NOW = 1_790_000_000.0 - 1_790_000_000.0 % (6 * HOUR) + 5 * HOUR  # 1 h before a 6 h partition ends


class Clock:
    def __init__(self, t: float = NOW) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _dd(path: Path | None, clock: Clock, **kw: object) -> Deduplicator:
    kw.setdefault("verify", False)
    kw.setdefault("fingerprinter", SimpleFingerprinter())
    kw.setdefault("retention", "48h")
    return Deduplicator.open(path, clock=clock, **kw)  # type: ignore[arg-type]


def _text(i: int) -> str:
    return " ".join(f"t{i}w{k}" for k in range(30))


def _served(d: Deduplicator, doc_id: str, i: int) -> bool:
    """Whether ``doc_id`` is served: found by get and matched by a check of its own text."""
    try:
        d.get(doc_id)
    except NotFoundError:
        found = False
    else:
        found = True
    hit = d.check({"id": "probe", "text": _text(i)})
    assert found == hit.duplicate, (doc_id, found, hit)
    return found


def _fill(d: Deduplicator, clock: Clock) -> None:
    """``old`` 47 h old (still inside 48 h) and ``new`` 1 h old."""
    d.add([{"id": "old", "text": _text(1), "time": clock() - 47 * HOUR}])
    d.add([{"id": "new", "text": _text(2), "time": clock() - 1 * HOUR}])


@pytest.mark.parametrize("durable", [True, False])
def test_a_wider_window_at_runtime_does_not_bring_back_what_left(
    tmp_path: Path, durable: bool
) -> None:
    clock = Clock()
    with _dd(tmp_path / "d" if durable else None, clock) as d:
        _fill(d, clock)
        if durable:
            d.flush()  # in a segment whose partition has not ended
        assert _served(d, "old", 1) and len(d) == 2
        clock.t += 2 * HOUR  # "old" is 49 h old: past the window
        assert not _served(d, "old", 1)
        d.set_retention("72h")  # a wider window: it would be 49 h < 72 h old
        assert not _served(d, "old", 1) and _served(d, "new", 2)
        assert len(d) == 1
        # the id is free again: a new document with it is a new document
        assert d.add({"id": "old", "text": _text(1), "time": clock()}).added
        assert _served(d, "old", 1) and len(d) == 2


def _crash_after_fill(path: Path) -> None:
    """A child process fills the store and is killed (no close, no flush): the rows are only
    in the log and SQLite."""
    code = f"""
import os, sys
sys.path[:0] = [{str(Path(__file__).resolve().parent)!r}, {str(Path(__file__).resolve().parents[1])!r}]
from test_retention import Clock, _dd, _fill
clock = Clock()
d = _dd({str(path)!r}, clock)
_fill(d, clock)
d.store.sync_meta()
os._exit(0)
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


@pytest.mark.parametrize("how", ["close", "kill"])
def test_a_wider_window_on_reopen_does_not_bring_back_what_left(tmp_path: Path, how: str) -> None:
    path = tmp_path / "d"
    clock = Clock()
    if how == "close":
        with _dd(path, clock) as d:
            _fill(d, clock)
    else:
        _crash_after_fill(path)
    clock.t += 2 * HOUR
    # reopened with a wider window straight away: "old" had left the 48 h window
    with _dd(path, clock, retention="72h", allow_retention_change=True) as d:
        assert not _served(d, "old", 1) and _served(d, "new", 2)
        assert len(d) == 1
        assert "expire_before" not in (d.store.read_config(path) or {})["store"]
    with _dd(path, clock, retention="72h") as d:  # and stays gone
        assert not _served(d, "old", 1) and len(d) == 1


def test_narrow_then_wide_again_keeps_what_the_narrow_window_dropped(tmp_path: Path) -> None:
    clock = Clock()
    with _dd(tmp_path / "d", clock) as d:
        _fill(d, clock)
        d.flush()
        d.set_retention("24h")  # "old" (47 h) leaves at once
        assert not _served(d, "old", 1) and len(d) == 1
        d.set_retention("48h")
        assert not _served(d, "old", 1) and _served(d, "new", 2) and len(d) == 1


def test_rows_past_the_window_are_deleted_and_no_longer_counted(tmp_path: Path) -> None:
    """In a partition that has not ended: deleted from SQLite once the cutoff has moved on
    (the count is what is served), and not again after a reopen."""
    clock = Clock()
    path = tmp_path / "d"
    with _dd(path, clock) as d:
        _fill(d, clock)
        d.flush()
        clock.t += 2 * HOUR
        d.store.expire(clock() - 48 * HOUR)  # what the writer's housekeeping does each second
        assert len(d) == 1 == d.store._state.meta.count()
        assert d.store._state.meta.get("old") is None  # gone from the metadata, not only hidden
        clock.t += ROW_EXPIRY_STEP_S / 2
        assert d.store.expire(clock() - 48 * HOUR) == 0
    with _dd(path, clock) as d:
        assert len(d) == 1 and not _served(d, "old", 1)


def test_healthz_counts_the_documents_in_the_window(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    import httpx

    from neardup.service.app import create_app
    from neardup.service.config import ServiceConfig
    from neardup.service.namespaces import NamespaceRegistry
    from neardup.service.testing import serve_in_thread

    clock = Clock()

    def factory(config: ServiceConfig, p: Path | None) -> Deduplicator:
        return _dd(p, clock)

    config = ServiceConfig(data_dir=tmp_path, token="t")
    app = create_app(config, registry=NamespaceRegistry(config, factory=factory))
    auth = {"Authorization": "Bearer t"}
    with serve_in_thread(app) as url, httpx.Client(base_url=url, headers=auth) as c:
        docs = [
            {"id": "old", "text": _text(1), "time": NOW - 47 * HOUR},
            {"id": "new", "text": _text(2), "time": NOW - HOUR},
        ]
        assert c.post("/v1/insert", json={"documents": docs}).status_code == 200
        assert c.get("/healthz").json()["documents"] == 2
        clock.t += 2 * HOUR
        deadline = time.monotonic() + 20
        while c.get("/healthz").json()["documents"] != 1 and time.monotonic() < deadline:
            time.sleep(0.1)  # the writer's housekeeping runs about once a second
        assert c.get("/healthz").json()["documents"] == 1
        assert c.get("/v1/ns/default").json()["documents"] == 1
        assert c.get("/v1/docs/old").status_code == 404


def test_a_partition_drop_deletes_only_what_the_moving_cutoff_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the clock moves on, the rows past the window are deleted a step at a time; the
    partition's drop then deletes only the rows the last step had not reached (not every row
    of the partition again), and the window holds what it should."""
    from neardup.store.meta import MetaDB

    clock = Clock(NOW - 5 * HOUR)  # the start of a 6 h partition
    path = tmp_path / "d"
    deleted: list[int] = []
    real = MetaDB.delete_rowids

    def spy(self: MetaDB, rowids: list[int]) -> int:
        deleted.append(len(rowids))
        return real(self, rowids)

    with _dd(path, clock, partition_seconds=6 * HOUR) as d:
        start = clock() - 48 * HOUR  # documents an hour over the oldest partition's six hours
        docs = [{"id": f"o{k}", "text": _text(k), "time": start + k * 360.0} for k in range(60)]
        d.add(docs)
        d.add({"id": "new", "text": _text(999), "time": clock() - HOUR})
        d.flush()
        monkeypatch.setattr(MetaDB, "delete_rowids", spy)
        for _ in range(6 * 6 + 6):  # seven hours of the cutoff moving, 10 minutes a step
            clock.t += 600.0
            d.store.expire(clock() - 48 * HOUR)
        assert d.store.stats()["dropped_partitions"] == 1
        assert len(d) == 1 and _served(d, "new", 999) and not _served(d, "o59", 59)
    # every step deleted a few rows; no call deleted the partition's 60 rows again
    assert sum(deleted) <= 60 + 12 and max(deleted) < 60


@pytest.mark.parametrize("order", ["in time order", "shuffled"])
def test_each_step_deletes_exactly_the_rows_the_cutoff_passed(tmp_path: Path, order: str) -> None:
    """A retention pass finds a segment's rows past the cutoff by binary search over their
    times (sorted once, or already in time order): whatever the order the rows came in, after
    every step exactly the rows at or past the cutoff are left."""
    import random

    clock = Clock(NOW - 5 * HOUR)
    with _dd(tmp_path / "d", clock, partition_seconds=6 * HOUR) as d:
        start = clock() - 48 * HOUR
        times = [start + k * 300.0 + 7.0 for k in range(72)]
        if order == "shuffled":
            random.Random(3).shuffle(times)
        d.add([{"id": f"o{k}", "text": _text(k), "time": t} for k, t in enumerate(times)])
        d.add({"id": "new", "text": _text(999), "time": clock() - HOUR})
        d.flush()
        for _ in range(40):
            clock.t += 480.0
            cutoff = clock() - 48 * HOUR
            d.store.expire(cutoff)
            left = sum(t >= cutoff for t in times)
            assert len(d) == left + 1
        assert not _served(d, "o0", 0) and _served(d, "new", 999)


def test_a_clock_jump_is_worked_off_a_batch_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clock that jumps (a restart after hours down, a paused process) puts many rows past
    the window at once: each retention call deletes at most ``EXPIRY_BATCH_ROWS`` of them,
    oldest first, so no request waits behind one large delete; none of them matches
    meanwhile, and the passes that follow (at the same clock) delete the rest and drop the
    partition once it is empty."""
    from neardup.store import maintenance
    from neardup.store.meta import MetaDB

    monkeypatch.setattr(maintenance, "EXPIRY_BATCH_ROWS", 25)
    clock = Clock(NOW - 5 * HOUR)
    deleted: list[int] = []
    real = MetaDB.delete_rowids

    def spy(self: MetaDB, rowids: list[int]) -> int:
        deleted.append(len(rowids))
        return real(self, rowids)

    with _dd(tmp_path / "d", clock, partition_seconds=6 * HOUR) as d:
        start = clock() - 48 * HOUR
        d.add([{"id": f"o{k}", "text": _text(k), "time": start + k * 60.0} for k in range(100)])
        d.add({"id": "new", "text": _text(999), "time": clock() - HOUR})
        d.flush()
        monkeypatch.setattr(MetaDB, "delete_rowids", spy)
        clock.t += 7 * HOUR  # every "o" row is past the window, their partition has ended
        cutoff = clock() - 48 * HOUR
        assert not any(_served(d, f"o{k}", k) for k in range(0, 100, 9))
        calls = 0
        while d.store.stats()["dropped_partitions"] == 0:
            d.store.expire(cutoff)
            calls += 1
            assert calls < 10
        assert d.store.stats()["retention_behind"] == 0
        assert len(d) == 1 and _served(d, "new", 999)
    # (the writer's own once-a-second pass may take one of the turns)
    assert max(deleted) <= 25 and sum(deleted) == 100 and len([n for n in deleted if n]) == 4


def test_a_backlog_reads_as_behind_throughout_its_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``retention_behind`` (stats, /metrics, a caller waiting for a backlog) is set once, at
    the end of a pass: it never reads 0 in the middle of a pass while a backlog is left (a
    benchmark polling it stopped waiting during a long pass that had cleared it first)."""
    import numpy as np

    from neardup.store import maintenance

    monkeypatch.setattr(maintenance, "EXPIRY_BATCH_ROWS", 25)
    clock = Clock(NOW - 5 * HOUR)
    with _dd(tmp_path / "d", clock, partition_seconds=6 * HOUR) as d:
        start = clock() - 48 * HOUR
        d.add([{"id": f"o{k}", "text": _text(k), "time": start + k * 60.0} for k in range(100)])
        d.flush()
        seen: list[int] = []
        real = np.partition

        def spy(*a: object, **kw: object) -> object:  # the budget's cut, inside a pass
            seen.append(d.store.stats()["retention_behind"])
            return real(*a, **kw)  # type: ignore[call-overload]

        monkeypatch.setattr(np, "partition", spy)
        clock.t += 7 * HOUR
        for _ in range(4):
            d.store.expire(clock() - 48 * HOUR)
        monkeypatch.setattr(np, "partition", real)
        assert len(seen) >= 3 and seen[0] == 0 and all(seen[1:])
        assert len(d) == 0 and d.store.stats()["retention_behind"] == 0


def test_rows_of_one_time_cannot_stop_the_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows that share a time (a bulk load's) go in one pass even past the batch size: a pass
    that could not split them would leave them forever."""
    from neardup.store import maintenance

    monkeypatch.setattr(maintenance, "EXPIRY_BATCH_ROWS", 10)
    clock = Clock(NOW - 5 * HOUR)
    with _dd(tmp_path / "d", clock, partition_seconds=6 * HOUR) as d:
        t = clock() - 47 * HOUR
        d.add([{"id": f"o{k}", "text": _text(k), "time": t} for k in range(30)])
        d.add([{"id": f"p{k}", "text": _text(100 + k), "time": t + 60} for k in range(5)])
        d.flush()
        clock.t += 2 * HOUR
        d.store.expire(clock() - 48 * HOUR)
        assert len(d) == 5 and d.store.stats()["retention_behind"] == 1
        d.store.expire(clock() - 48 * HOUR)
        assert len(d) == 0 and d.store.stats()["retention_behind"] == 0


def test_the_writer_works_off_a_jump_while_the_clock_stands_still(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer runs retention once a second of the store's clock; a backlog left by a
    jump is worked off once a second of real time too, so a clock that then stands still (a
    test's, a paused simulation's) does not leave it half done."""
    from neardup.store import maintenance

    monkeypatch.setattr(maintenance, "EXPIRY_BATCH_ROWS", 40)
    clock = Clock(NOW - 5 * HOUR)
    with _dd(tmp_path / "d", clock, partition_seconds=6 * HOUR) as d:
        start = clock() - 48 * HOUR
        d.add([{"id": f"o{k}", "text": _text(k), "time": start + k * 60.0} for k in range(100)])
        d.add({"id": "new", "text": _text(999), "time": clock() - HOUR})
        d.flush()
        clock.t += 7 * HOUR  # then the clock stands still
        deadline = time.monotonic() + 20
        while (len(d) > 1 or d.store.retention_behind) and time.monotonic() < deadline:
            d.check({"id": "probe", "text": _text(999)})  # the writer's turns
            time.sleep(0.05)
        assert len(d) == 1 and not d.store.retention_behind
        assert d.store.stats()["dropped_partitions"] == 1


@pytest.mark.parametrize("budget", [7, 25])
def test_a_budgeted_pass_reads_only_the_oldest_rows_of_each_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: int
) -> None:
    """A pass over a backlog deletes exactly the oldest ``EXPIRY_BATCH_ROWS`` rows of the
    store (rows flushed in three groups whose times interleave) and reads no more than one
    more than that from a segment: an hour that is leaving costs each pass what the pass
    deletes, not the rest of the hour (a pass over a 50 M window's leaving hour once read and
    partitioned all of its million rows' times, once a second)."""
    from neardup.online.writer import Writer
    from neardup.store import maintenance
    from neardup.store.state import LiveSegment

    monkeypatch.setattr(maintenance, "EXPIRY_BATCH_ROWS", budget)
    clock = Clock(NOW - 5 * HOUR)
    start = clock() - 48 * HOUR
    n = 120  # minute k holds row k, flushed with group k % 3
    # no merge of the three segments: it installs on the writer thread, and these passes run
    # on the test's (a merge closed a segment under one: a failed run)
    with _dd(tmp_path / "d", clock, partition_seconds=6 * HOUR, max_segments_per_partition=8) as d:
        for g in range(3):
            d.add(
                [
                    {"id": f"o{k}", "text": _text(k), "time": start + k * 60.0}
                    for k in range(g, n, 3)
                ]
            )
            d.flush()
        d.add({"id": "new", "text": _text(999), "time": clock() - HOUR})
        assert d.store.stats()["segment_rows"] == n
        reads: list[int] = []
        real = LiveSegment.rows_in_time

        def spy(self: LiveSegment, lo: float, hi: float, limit: int | None = None) -> object:
            out = real(self, lo, hi, limit)
            reads.append(len(out[0]))
            return out

        monkeypatch.setattr(LiveSegment, "rows_in_time", spy)
        # the passes are this test's calls alone (the writer's own would race them)
        monkeypatch.setattr(Writer, "_housekeeping", lambda self: None)
        clock.t += 7 * HOUR  # every "o" row is past the window
        gone = 0
        for _ in range(n // budget + 4):
            d.store.expire(clock() - 48 * HOUR)
            # the oldest rows leave first, ``budget`` a pass
            left = [k for k in range(n) if d.store.get_row(f"o{k}") is not None]
            assert left == list(range(n - len(left), n)) and n - len(left) in (gone, gone + budget, n)  # fmt: skip
            gone = n - len(left)
            if not left:
                break
        assert gone == n and _served(d, "new", 999)
        assert d.store.stats()["retention_behind"] == 0
        assert reads and max(reads) <= budget + 1


@pytest.mark.parametrize("slow", [True, False])
def test_a_slow_pass_makes_the_next_ones_smaller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow: bool
) -> None:
    """Each retention call deletes what the last one's rate fits in ``EXPIRY_PASS_SECONDS``
    (between ``EXPIRY_MIN_ROWS`` and ``EXPIRY_BATCH_ROWS``): where deletes are slow (SQLite's
    pages read from disk), the writer's stall per call stays bounded; where they are fast,
    the calls stay at the cap. Every row past the window leaves either way."""
    from neardup.online.writer import Writer
    from neardup.store import maintenance
    from neardup.store.meta import MetaDB

    monkeypatch.setattr(maintenance, "EXPIRY_BATCH_ROWS", 200)
    monkeypatch.setattr(maintenance, "EXPIRY_MIN_ROWS", 50)
    monkeypatch.setattr(maintenance, "EXPIRY_PASS_SECONDS", 1e-9 if slow else 1e9)
    deleted: list[int] = []
    real = MetaDB.delete_rowids

    def spy(self: MetaDB, rowids: list[int]) -> int:
        gone = real(self, rowids)
        deleted.append(gone)
        return gone

    clock = Clock(NOW - 5 * HOUR)
    n = 600
    with _dd(tmp_path / "d", clock, partition_seconds=6 * HOUR) as d:
        start = clock() - 48 * HOUR
        d.add([{"id": f"o{k}", "text": _text(k), "time": start + k * 6.0} for k in range(n)])
        d.add({"id": "new", "text": _text(9999), "time": clock() - HOUR})
        d.flush()
        monkeypatch.setattr(MetaDB, "delete_rowids", spy)
        monkeypatch.setattr(Writer, "_housekeeping", lambda self: None)  # these calls alone
        clock.t += 7 * HOUR
        for _ in range(20):
            d.store.expire(clock() - 48 * HOUR)
            if len(d) == 1 and not d.store.retention_behind:
                break
        assert len(d) == 1 and _served(d, "new", 9999)
    sizes = [k for k in deleted if k]
    assert sum(sizes) == n
    assert sizes == ([200] + [50] * 8 if slow else [200, 200, 200])


@pytest.mark.parametrize("writes_after", [False, True])
def test_a_reopen_does_not_walk_the_deleted_rows_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writes_after: bool
) -> None:
    """How far retention got in each segment is made durable at close, whether or not the
    close flushes (``writes_after``: rows in the log, so it does): the next open's passes
    start where the last ones stopped, and delete by row id only the rows the cutoff passed
    since. Before, a close with nothing to flush left the marks of the last flush, and the
    reopened store walked every row deleted since, a pass a second."""
    from neardup.online.writer import Writer
    from neardup.store.meta import MetaDB

    clock = Clock(NOW - 5 * HOUR)  # the start of a 6 h partition
    path = tmp_path / "d"
    start = clock() - 48 * HOUR
    with _dd(path, clock, partition_seconds=6 * HOUR) as d:
        d.add([{"id": f"o{k}", "text": _text(k), "time": start + k * 360.0} for k in range(60)])
        d.add({"id": "new", "text": _text(999), "time": clock() - HOUR})
        d.flush()
        clock.t += 3 * HOUR  # half of the oldest partition's rows leave
        d.store.expire(clock() - 48 * HOUR)
        assert len(d) == 31
        if writes_after:
            d.add({"id": "newer", "text": _text(998), "time": clock()})
    passed: list[int] = []
    real = MetaDB.delete_rowids

    def spy(self: MetaDB, rowids: list[int]) -> int:
        passed.append(len(rowids))
        return real(self, rowids)

    monkeypatch.setattr(MetaDB, "delete_rowids", spy)
    monkeypatch.setattr(Writer, "_housekeeping", lambda self: None)  # these calls alone
    with _dd(path, clock, partition_seconds=6 * HOUR) as d:
        d.store.expire(clock() - 48 * HOUR)
        assert sum(passed) == 0
        clock.t += 1800.0  # five more rows leave: only they are deleted
        d.store.expire(clock() - 48 * HOUR)
        assert sum(passed) == 5 and len(d) == 26 + writes_after
        assert not _served(d, "o34", 34) and _served(d, "o35", 35)


def test_a_pass_during_a_flush_does_not_count_its_rows_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows that leave the window while their memtable is being flushed are left out of the
    flush's segments and deleted by its install; a retention pass that ran during the build
    deleted (and counted) them already, so the install counts only what it deletes: the
    document count stays the window's. Before, the count went one flush's expired rows too
    low (here 0 with one document stored)."""
    from neardup.online.writer import Writer
    from neardup.store import maintenance

    monkeypatch.setattr(Writer, "_housekeeping", lambda self: None)  # these calls alone
    clock = Clock(NOW - 5 * HOUR)
    with _dd(tmp_path / "d", clock, partition_seconds=6 * HOUR) as d:
        st = d.store._state
        edge = clock() - 48 * HOUR + 60.0  # just inside the window
        d.add([{"id": f"o{k}", "text": _text(k), "time": edge + k} for k in range(20)])
        d.add({"id": "new", "text": _text(999), "time": clock() - HOUR})
        clock.t += 300.0  # the 20 have left the window, still in the memtable
        cutoff = clock() - 48 * HOUR
        frozen = maintenance.begin_flush(st)
        assert maintenance.expire(st, cutoff) == 20 and len(d) == 1  # a pass, mid-flush
        maintenance.build_flush(st, frozen, cutoff)
        assert len(frozen.expired) == 20  # the build left them out too
        maintenance.finish_flush(st, wait=True)
        assert len(d) == 1 and d.stats()["documents"] == 1
        assert _served(d, "new", 999) and not _served(d, "o5", 5)
    with _dd(tmp_path / "d", clock, partition_seconds=6 * HOUR) as d:
        assert len(d) == 1


def test_a_flush_of_many_rows_past_the_window_leaves_them_to_the_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memtable flushed after a clock jump holds more rows past the window than a retention
    call deletes: they are written to the segments with the rest, answer nothing, and leave
    SQLite over the next passes, at most ``EXPIRY_BATCH_ROWS`` a call, the store reading as
    behind until they are gone; not in one delete inside the flush."""
    from neardup.online.writer import Writer
    from neardup.store import maintenance
    from neardup.store.meta import MetaDB

    monkeypatch.setattr(maintenance, "EXPIRY_BATCH_ROWS", 5)
    monkeypatch.setattr(maintenance, "EXPIRY_MIN_ROWS", 5)
    monkeypatch.setattr(Writer, "_housekeeping", lambda self: None)  # these calls alone
    deleted: list[int] = []
    real = MetaDB.delete_rowids

    def spy(self: MetaDB, rowids: list[int]) -> int:
        deleted.append(len(rowids))
        return real(self, rowids)

    clock = Clock(NOW - 5 * HOUR)
    with _dd(tmp_path / "d", clock, partition_seconds=6 * HOUR) as d:
        edge = clock() - 48 * HOUR + 60.0
        d.add([{"id": f"o{k}", "text": _text(k), "time": edge + k} for k in range(20)])
        d.add({"id": "new", "text": _text(999), "time": clock() - HOUR})
        d.store.expire(clock() - 48 * HOUR)  # a pass before the jump: nothing past the window
        clock.t += 300.0
        monkeypatch.setattr(MetaDB, "delete_rowids", spy)
        d.flush()
        assert deleted == [] and d.store.stats()["segment_rows"] == 21
        assert d.store.retention_behind and not _served(d, "o5", 5)
        for _ in range(10):
            d.store.expire(clock() - 48 * HOUR)
            if not d.store.retention_behind:
                break
        assert len(d) == 1 and _served(d, "new", 999)
        assert all(d.store.get_row(f"o{k}") is None for k in range(20))
    assert sum(deleted) >= 20 and max(deleted) <= 5
