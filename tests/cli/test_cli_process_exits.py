"""How a real ``neardup`` process ends when its surroundings fail it: SIGTERM (``kill``,
``timeout``, Slurm, ``docker stop``) stops a command as ^C does, what it staged or spooled
removed, exit 143 (it had no handler: an uncompressed copy of a compressed input and staged
outputs stayed behind); a stdout that cannot be written is exit 7 and one line (it was a
traceback and exit 1)."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neardup.cli.main import _serves

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def test_sigterm_removes_the_spooled_copy_and_staged_outputs(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl.gz"
    with gzip.open(src, "wt", encoding="utf-8") as fh:
        for i in range(60_000):
            fh.write(json.dumps({"id": str(i), "text": f"record {i} " + "word " * 30}) + "\n")
    spool = tmp_path / "tmp"
    spool.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "TMPDIR": str(spool)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "neardup", "dedup", str(src), "-o", str(out / "kept.parquet")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not any(spool.iterdir()) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)  # until the input's uncompressed copy is being written
    if proc.poll() is not None:
        pytest.skip("the run finished before it could be stopped")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM)" in err and "Traceback" not in err
    assert list(spool.iterdir()) == [] and list(out.iterdir()) == []


def test_servers_keep_their_own_sigterm() -> None:
    assert _serves(["serve", "--data", "d"]) and _serves(["cluster", "router", "-c", "c"])
    assert not _serves(["dedup", "x"]) and not _serves(["cluster", "status"])


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_stdout_is_one_line_and_exit_7(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": str(i), "text": f"t {i}"}) + "\n" for i in range(9)))
    for args in (["-o", "-", "-q"], ["-o", str(tmp_path / "kept.jsonl")]):
        with open("/dev/full", "w") as full:
            run = subprocess.run(
                [sys.executable, "-m", "neardup", "dedup", str(src), *args],
                stdout=full, stderr=subprocess.PIPE, text=True, timeout=300,
            )  # fmt: skip
        assert run.returncode == 7, run.stderr
        assert "No space left on device" in run.stderr and "Traceback" not in run.stderr
