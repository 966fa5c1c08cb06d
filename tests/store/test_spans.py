"""Ended partitions merged into blocks (``neardup.store.maintenance.span_sizes``).

A store with narrow partitions (hourly, for an hour-by-hour drop) would otherwise keep a
segment per hour, and every query searches every segment. Compaction merges the segments of
ended partitions into nested blocks of a few partitions; a block's rows leave the window one
by one (they stop matching, and leave SQLite) and its file goes when its last partition ends.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from doubles import SimpleFingerprinter

from neardup.errors import ConfigError, NotFoundError
from neardup.online import Deduplicator
from neardup.store.maintenance import span_block, span_sizes

HOUR = 3600.0
BASE = 1_790_000_000.0 - 1_790_000_000.0 % (6 * HOUR)  # the start of a 6-hour block
HOURS = 30


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class _Settings:
    def __init__(self, width: float, retention: float | None) -> None:
        self.partition_seconds = width
        self.retention = retention


class _State:
    def __init__(self, width: float, retention: float | None) -> None:
        self.settings = _Settings(width, retention)


@pytest.mark.parametrize(
    ("width", "retention", "sizes"),
    [
        (HOUR, 48 * HOUR, [1, 3, 6]),
        (HOUR, 64 * HOUR, [1, 2, 4, 8]),
        (HOUR, 96 * HOUR, [1, 3, 6, 12]),
        (6 * HOUR, 48 * HOUR, [1]),  # the default width for 48 h: nothing to merge
        (HOUR, None, [1]),
        (HOUR, 7 * HOUR, [1]),
    ],
)
def test_span_sizes_nest_up_to_an_eighth_of_the_window(
    width: float, retention: float | None, sizes: list[int]
) -> None:
    got = span_sizes(_State(width, retention))  # type: ignore[arg-type]
    assert got == sizes
    assert all(b % a == 0 for a, b in itertools.pairwise(got))


def test_a_block_is_used_only_once_it_has_ended() -> None:
    sizes = [1, 3, 6]
    assert span_block(0, 5, sizes) == (3, 0)  # 0-2 ended, 0-5 holds the newest
    assert span_block(0, 6, sizes) == (6, 0)
    assert span_block(5, 6, sizes) == (6, 0)
    assert span_block(5, 5, sizes) == (1, 5)
    assert span_block(-1, 0, sizes) == (6, -1)  # times before 1970: -6..-1
    assert span_block(-4, -3, sizes) == (3, -2)  # -6..-4 has ended, -6..-1 has not


def _text(i: int) -> str:
    return " ".join(f"t{i}w{k}" for k in range(30))


def _served(d: Deduplicator, i: int) -> bool:
    try:
        d.get(f"d{i}")
    except NotFoundError:
        found = False
    else:
        found = True
    assert found == d.check({"id": "probe", "text": _text(i)}).duplicate, i
    return found


def _fill(path: Path, clock: Clock) -> None:
    """Two documents an hour over ``HOURS`` hourly partitions, one segment each, compacted."""
    with Deduplicator.open(
        path,
        clock=clock,
        verify=False,
        fingerprinter=SimpleFingerprinter(),
        retention="48h",
        partition_seconds=HOUR,
    ) as d:
        for h in range(HOURS):
            d.add([{"id": f"d{2 * h + j}", "text": _text(2 * h + j), "time": BASE + h * HOUR + 60 * j} for j in range(2)])  # fmt: skip
            d.flush()
        d.compact()


def _spans(d: Deduplicator) -> list[tuple[int, int]]:
    p0 = int(BASE // HOUR)
    return sorted((s.partition - p0, s.last_partition - p0) for s in d.store._state.segments)


def test_ended_hours_are_merged_into_blocks_and_every_row_is_still_served(tmp_path: Path) -> None:
    clock = Clock(BASE + HOURS * HOUR)
    path = tmp_path / "d"
    _fill(path, clock)
    # the newest partition is hour 29: the 6-blocks up to hour 23 have ended, 24-26 has
    expected = [(0, 5), (6, 11), (12, 17), (18, 23), (24, 26), (27, 27), (28, 28), (29, 29)]
    with Deduplicator.open(path, clock=clock, verify=False, fingerprinter=SimpleFingerprinter()) as d:  # fmt: skip
        assert _spans(d) == expected  # and the reopened store accepts the spans
        assert d.store.stats()["partitions"] == HOURS
        assert len(d) == 2 * HOURS
        assert all(_served(d, i) for i in range(2 * HOURS))


def test_a_block_leaves_the_window_row_by_row_and_its_file_with_its_last_hour(
    tmp_path: Path,
) -> None:
    clock = Clock(BASE + HOURS * HOUR)
    path = tmp_path / "d"
    _fill(path, clock)
    with Deduplicator.open(path, clock=clock, verify=False, fingerprinter=SimpleFingerprinter()) as d:  # fmt: skip
        # the cutoff halfway through the first block (hours 0-5): hours 0-2 have left
        clock.t = BASE + 48 * HOUR + 3 * HOUR
        d.store.expire(clock.t - 48 * HOUR)
        assert not any(_served(d, i) for i in range(6))
        assert all(_served(d, i) for i in range(6, 2 * HOURS))
        assert len(d) == 2 * HOURS - 6
        assert _spans(d)[0] == (0, 5)  # the file stays until its last hour ends
        assert d.store.stats()["dropped_partitions"] == 0
        clock.t = BASE + 48 * HOUR + 6 * HOUR
        d.store.expire(clock.t - 48 * HOUR)
        assert _spans(d)[0] == (6, 11)
        assert d.store.stats()["dropped_partitions"] == 6
        assert len(d) == 2 * HOURS - 12
        assert all(_served(d, i) for i in range(12, 2 * HOURS))


def test_a_late_row_of_an_ended_block_joins_it(tmp_path: Path) -> None:
    clock = Clock(BASE + HOURS * HOUR)
    path = tmp_path / "d"
    _fill(path, clock)
    with Deduplicator.open(path, clock=clock, verify=False, fingerprinter=SimpleFingerprinter(), max_segments_per_partition=1) as d:  # fmt: skip
        for k in range(4):  # late rows in hour 7, a segment each: more than 1 + 2 merge
            d.add({"id": f"late{k}", "text": _text(1000 + k), "time": BASE + 7 * HOUR + k})
            d.flush()
        d.compact()
        # the late rows' segments are grouped with the block they belong to and merged
        # size-tiered (small ones wait until they are a quarter of the block or too many):
        # the block keeps at most 1 + 2 segments, its 12 rows and the 4 late ones
        p0 = int(BASE // HOUR)
        block = [s for s in d.store._state.segments if 6 <= s.partition - p0 <= 11]
        assert len(block) <= 3 and sum(len(s.segment) for s in block) == 16
        assert _spans(d).count((6, 11)) == 1
        assert all(_served(d, i) for i in range(2 * HOURS))
        assert all(d.check({"id": "p", "text": _text(1000 + k)}).duplicate for k in range(4))


def test_a_segment_outside_its_span_is_refused(tmp_path: Path) -> None:
    from neardup.store.layout import read_json_file, write_json_file

    clock = Clock(BASE + HOURS * HOUR)
    path = tmp_path / "d"
    _fill(path, clock)
    manifest = read_json_file(path / "MANIFEST.json")
    entry = next(e for e in manifest["segments"] if e.get("last_partition") is not None)
    entry["last_partition"] = entry["partition"] + 1  # a block's rows outside what it names
    write_json_file(path / "MANIFEST.json", manifest)
    with pytest.raises(ConfigError, match=r"partitions .* to .* holds times"):
        Deduplicator.open(path, clock=clock, verify=False, fingerprinter=SimpleFingerprinter())
