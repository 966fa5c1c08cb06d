"""The console script sets its process's garbage collector (neardup._gc); ``main`` and the
library leave a caller's process as it is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from neardup._gc import LONG_RUN_THRESHOLDS

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, json, sys
gc.set_threshold(700, 10, 10)
import neardup, neardup.online
from neardup.cli.main import main, run
before = (gc.get_threshold(), gc.get_freeze_count())
rc = {call}(["--version"])
print(json.dumps([before, [gc.get_threshold(), gc.get_freeze_count()], rc]))
"""


def _probe(call: str) -> list:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(call=call)],
        capture_output=True, text=True, check=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_console_script_freezes_imports_and_makes_full_collections_rare() -> None:
    before, after, rc = _probe("run")
    assert rc == 0
    assert before == [[700, 10, 10], 0]  # importing neardup changed nothing
    assert after[0] == list(LONG_RUN_THRESHOLDS)
    assert after[1] > 10_000  # the imports (numpy, numba, neardup) left the generations


def test_main_leaves_the_callers_collector_alone() -> None:
    before, after, rc = _probe("main")
    assert rc == 0
    assert before == after == [[700, 10, 10], 0]


MODULE_PROBE = """
import gc, json, runpy, sys
gc.set_threshold(700, 10, 10)
sys.argv = ["neardup", "--version"]
try:
    runpy.run_module("neardup", run_name="__main__")
except SystemExit as exc:
    rc = exc.code
print(json.dumps([gc.get_threshold(), gc.get_freeze_count(), rc]))
"""


def test_python_m_neardup_runs_the_console_script() -> None:
    out = subprocess.run(
        [sys.executable, "-c", MODULE_PROBE],
        capture_output=True, text=True, check=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    threshold, frozen, rc = json.loads(out.stdout.strip().splitlines()[-1])
    assert rc == 0
    assert threshold == list(LONG_RUN_THRESHOLDS) and frozen > 10_000


def test_the_installed_command_is_the_console_script() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert 'neardup = "neardup.cli.main:run"' in text
