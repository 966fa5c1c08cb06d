"""``--threshold`` through the real console script (issue 33, item 8): one meaning (what
similarity counts as a near duplicate), the shown default passed explicitly gives byte-identical
outputs, a run on defaults warns about nothing, and a threshold whose plan cannot find pairs at
it with probability 0.99 says so on stderr and in summary.json."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[2] / "neardup" / "data" / "sample" / "sample.jsonl"


def _console_script() -> list[str]:
    script = Path(sys.executable).with_name("neardup")
    if script.exists():
        return [str(script)]
    found = shutil.which("neardup")
    return [found] if found else [sys.executable, "-m", "neardup"]


def _dedup(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    out.mkdir()
    return subprocess.run(
        [*_console_script(), "dedup", str(SAMPLE), "-o", str(out / "kept.jsonl"),
         "--pairs-out", str(out / "pairs.csv"), "--clusters-out", str(out / "clusters.csv"),
         "--summary-json", str(out / "summary.json"), *extra],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def test_the_shown_default_is_the_default_and_defaults_warn_about_nothing(tmp_path):
    plain = _dedup(tmp_path / "plain")
    assert plain.returncode == 0, plain.stderr
    assert "warning" not in plain.stderr + plain.stdout
    explicit = _dedup(tmp_path / "explicit", "--threshold", "0.8")
    assert explicit.returncode == 0, explicit.stderr
    for name in ("kept.jsonl", "pairs.csv", "clusters.csv"):
        assert (tmp_path / "plain" / name).read_bytes() == (
            tmp_path / "explicit" / name
        ).read_bytes()
    a = json.loads((tmp_path / "plain" / "summary.json").read_text(encoding="utf-8"))
    b = json.loads((tmp_path / "explicit" / "summary.json").read_text(encoding="utf-8"))
    assert a["config"]["threshold"] == b["config"]["threshold"] == 0.8
    assert a["config"]["verifier"]["threshold"] == 0.8
    assert a["promise"]["kept"] is True and a["warnings"] == []
    # the SimHash pass is planned, not narrowed: the summary states its distance, no warning
    assert all(p["distance_used"] == p["distance"] for p in a["candidate_passes"].values())
    # the help shows the default
    helped = subprocess.run(
        [*_console_script(), "dedup", "-h"], capture_output=True, text=True, timeout=60, check=False
    )
    assert "default: 0.8" in " ".join(helped.stdout.split())


def test_a_threshold_the_plan_cannot_keep_warns_and_the_summary_says_so(tmp_path):
    low = _dedup(tmp_path / "low", "--threshold", "0.5")
    assert low.returncode == 0, low.stderr
    warnings = [x for x in low.stderr.splitlines() if x.startswith("neardup: warning: ")]
    assert len(warnings) == 1 and "probability 0.000" in warnings[0], low.stderr
    s = json.loads((tmp_path / "low" / "summary.json").read_text(encoding="utf-8"))
    assert s["promise"]["kept"] is False and s["promise"]["probability"] == 0.0
    assert s["warnings"] == [warnings[0].removeprefix("neardup: warning: ")]
    assert s["config"]["verifier"]["threshold"] == 0.5  # what counts as a duplicate
