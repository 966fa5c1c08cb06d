"""The kernel's read-ahead on the segments' probed sections (``neardup.store.readahead``): off
once they outgrow the memory available, on while they fit, as ``NEARDUP_READ_AHEAD`` says
where it is set; the advice reaches the mappings (``/proc/self/smaps``) and changes no answer."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from doubles import mappings_of

from neardup.errors import ConfigError
from neardup.online import Deduplicator
from neardup.store import readahead

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="madvise flags are read from /proc/self/smaps"
)


def _flags(path: Path) -> list[tuple[int, bool]]:
    """(file offset, random-read flag) of each mapping of ``path`` in this process."""
    return sorted((off, "rr" in f["VmFlags"].split()) for off, f in mappings_of(path))


def _texts(n: int, tag: str) -> list[dict[str, str]]:
    return [{"id": f"{tag}{k}", "text": " ".join(f"w{k}x{j}" for j in range(40))} for k in range(n)]


def _store(path: Path) -> None:
    with Deduplicator.open(path, candidates="lsh") as d:
        d.add(_texts(400, "a"))
        d.flush()


def _segment_paths(d: Deduplicator) -> list[Path]:
    return [s.segment.path for s in d.store._state.segments]


def test_available_memory_is_the_lower_of_meminfo_and_a_cgroup_limit(tmp_path: Path) -> None:
    proc, cg = tmp_path / "proc", tmp_path / "cg"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text("MemTotal: 9000 kB\nMemAvailable: 4000 kB\n")
    (proc / "self" / "cgroup").write_text("5:memory:/box\n0::/unified\n")
    v1, v2 = cg / "memory" / "box", cg / "unified"
    v1.mkdir(parents=True)
    v2.mkdir(parents=True)
    (v2 / "memory.max").write_text("max\n")
    (v2 / "memory.stat").write_text("anon 1\nfile 5\n")
    # no cgroup limit (v1 writes it as a huge number): MemAvailable
    (v1 / "memory.limit_in_bytes").write_text(f"{2**63 - 4096}\n")
    (v1 / "memory.stat").write_text("cache 10\nrss 7\ntotal_rss 1000\n")
    assert readahead.available_memory(proc, cg) == 4000 * 1024
    # a v1 limit under it: the limit less the cgroup's anonymous memory
    (v1 / "memory.limit_in_bytes").write_text(f"{3000 * 1024}\n")
    assert readahead.available_memory(proc, cg) == 3000 * 1024 - 1000
    # a v2 limit lower still
    (v2 / "memory.max").write_text(f"{2000 * 1024}\n")
    (v2 / "memory.stat").write_text("anon 2048\nfile 5\n")
    assert readahead.available_memory(proc, cg) == 2000 * 1024 - 2048
    # nothing readable: unknown
    assert readahead.available_memory(tmp_path / "none", tmp_path / "none") is None


@pytest.mark.parametrize(
    ("env", "room", "on"),
    [({}, None, True), ({}, 10**12, True), ({}, 0, False), ({"NEARDUP_READ_AHEAD": "on"}, 0, True),
     ({"NEARDUP_READ_AHEAD": " OFF "}, 10**12, False), ({"NEARDUP_READ_AHEAD": ""}, 0, False)],
)  # fmt: skip
def test_decide_follows_the_rule_and_the_environment(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], room: int | None, on: bool
) -> None:
    class Seg:
        def probed_bytes(self) -> int:
            return 1000

    class Live:
        segment = Seg()

    monkeypatch.setattr(readahead, "available_memory", lambda: room)
    assert readahead.decide([Live()], env) is on


def test_a_bad_value_is_refused_before_the_store_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEARDUP_READ_AHEAD", "sometimes")
    with pytest.raises(ConfigError, match="NEARDUP_READ_AHEAD='sometimes': expected auto"):
        Deduplicator.open(tmp_path / "d", candidates="lsh")


@pytest.mark.parametrize("room", [0, 1 << 50])
def test_the_advice_reaches_the_probed_sections_and_changes_no_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, room: int
) -> None:
    path = tmp_path / "d"
    _store(path)
    monkeypatch.setattr(readahead, "available_memory", lambda: room)
    copies = [{"id": f"q{k}", "text": t["text"]} for k, t in enumerate(_texts(40, "a")[::10])]
    probes = copies + [{"id": f"new{k}", "text": f"an unrelated text number {k}"} for k in range(5)]
    with Deduplicator.open(path, candidates="lsh") as d:
        (seg,) = _segment_paths(d)
        flags = _flags(seg)
        # the rows' columns keep read-ahead (merges and retention read them in order); the
        # band keys and sketches after them are off exactly when they do not fit
        assert flags[0] == (0, False)
        assert any(rr for _, rr in flags) is (room == 0)
        assert d.store._state.read_ahead is (room != 0)
        got = [r.duplicate for r in d.check(probes)]
    assert got == [True] * 4 + [False] * 5


def test_new_and_merged_segments_get_the_advice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readahead, "available_memory", lambda: 0)
    with Deduplicator.open(tmp_path / "d", candidates="lsh") as d:
        for k in range(3):
            d.add(_texts(300, f"g{k}-"))
            d.flush()
        d.compact()  # (more than two segments in the partition: merged)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the writer's housekeeping advises new segments
            segs = _segment_paths(d)
            if segs and all(any(rr for _, rr in _flags(p)) for p in segs):
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"segments without the advice: {[(p, _flags(p)) for p in segs]}")
        assert d.store.stats()["compactions"] >= 1 and len(d) == 900
