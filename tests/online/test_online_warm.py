"""A server's first start on two processes (neardup.online.warm): the helper, opened with the
server's settings, runs the warm-up's steps last first into the shared kernel cache, so that a
store opened after it compiles none of its kernels; it runs the same steps as the store's own
warm-up, only reversed."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from doubles import compiled_in_a_process

from neardup import _jit
from neardup.online import Deduplicator
from neardup.online.deduplicator import WARM_LAST_FIRST_ENV
from neardup.online.settings import DedupSettings
from neardup.online.warm import SCRATCH_PREFIX, settings_options, start_serve_helper, warm_like


@pytest.mark.slow
def test_a_store_opened_after_the_helper_compiles_none_of_its_kernels(tmp_path: Path) -> None:
    # (the SimHash mode: the fewest steps, the index and fingerprint kernels, for a test's time)
    options = settings_options(DedupSettings().with_options(candidates="simhash", retention=3600.0))
    code = "import json; from neardup.online.warm import warm_like; warm_like(json.loads({}), {})"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    helper = compiled_in_a_process(
        code.format(repr(json.dumps(options)), repr(str(scratch))), tmp_path / "c"
    )
    assert not scratch.exists(), "the helper leaves its throwaway store behind"
    assert helper, "the helper compiled nothing on an empty cache"
    store = tmp_path / "store"
    opened = compiled_in_a_process(
        "from neardup.online import Deduplicator; from neardup.online.settings import "
        f"DedupSettings; Deduplicator.open({str(store)!r}, DedupSettings().with_options("
        "candidates='simhash', retention=3600.0)).close()",
        tmp_path / "c",
    )
    assert opened == [], opened


def test_the_helper_runs_the_warm_up_steps_last_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[list[str]] = []
    steps = ["_warm_index", "_warm_prepare", "_warm_lsh", "_warm_verify", "_warm_bands"]
    for name in steps:  # each step records that it ran (the real _warm_up orders them)

        def step(self: Deduplicator, name: str = name) -> None:
            ran[-1].append(name)

        monkeypatch.setattr(Deduplicator, name, step)
    ran.append([])
    Deduplicator.open(
        tmp_path / "a", DedupSettings().with_options(candidates="lsh", retention=3600.0)
    ).close()
    monkeypatch.setenv(WARM_LAST_FIRST_ENV, "1")
    ran.append([])
    Deduplicator.open(
        tmp_path / "b", DedupSettings().with_options(candidates="lsh", retention=3600.0)
    ).close()
    assert ran == [steps, steps[::-1]]
    options = settings_options(DedupSettings(lsh_bands=30, lsh_rows=3))
    assert DedupSettings().with_options(**options).lsh_bands == 30


def test_a_stopped_helper_leaves_no_scratch_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the server stops its helper (SIGTERM, then SIGKILL) while it compiles: the helper cannot
    # remove its throwaway store then, so the server does (a real process, stopped at once)
    monkeypatch.delenv(_jit.NO_WARM_ENV, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    if _jit.cache_location().source == "process":
        pytest.skip("kernels cached for this process only: no helper starts")
    helper = start_serve_helper(DedupSettings().with_options(candidates="lsh", retention=3600.0))
    assert helper is not None and helper.scratch is not None
    assert os.path.dirname(helper.scratch) == str(tmp_path)
    assert os.path.basename(helper.scratch).startswith(SCRATCH_PREFIX)
    assert os.path.isdir(helper.scratch)
    _jit.stop_helper(helper)
    assert helper.process.returncode is not None
    assert list(tmp_path.iterdir()) == []
    _jit.stop_helper(helper)  # again (at exit): nothing left to do


def test_a_helper_that_ends_on_its_own_removes_its_scratch_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (warm_like sets the helper's order in the environment: put back after the test)
    monkeypatch.setenv(WARM_LAST_FIRST_ENV, "0")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    warm_like(settings_options(DedupSettings().with_options(candidates="simhash")), str(scratch))
    assert not scratch.exists()
