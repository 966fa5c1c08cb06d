"""``neardup index plan|info`` print the planner's layout and describe saved indexes."""

from __future__ import annotations

import numpy as np

from neardup.cli.main import main
from neardup.index import HammingIndex


def test_index_plan_and_info(tmp_path, capsys) -> None:
    assert (
        main(
            [
                "index",
                "plan",
                "--bits",
                "64",
                "-k",
                "3",
                "-n",
                "50000000",
                "--memory",
                "4GB",
                "--all",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "4 blocks choose 1" in out and "candidates" in out and "B/fp" in out
    assert main(["index", "plan", "-k", "3", "--memory", "four"]) == 2
    assert "--memory must look like" in capsys.readouterr().err
    idx = HammingIndex(expected_size=100)
    idx.add(np.arange(100, dtype=np.uint64))
    idx.save(tmp_path / "i.idx")
    assert main(["index", "info", str(tmp_path / "i.idx")]) == 0
    assert "100 fingerprints" in capsys.readouterr().out
    (tmp_path / "bad.idx").write_bytes(b"garbage" * 10)
    assert main(["index", "info", str(tmp_path / "bad.idx")]) == 6
    assert "not a neardup index file" in capsys.readouterr().err
    assert main(["index", "info", str(tmp_path)]) == 3  # a folder (it was a traceback)
    assert "is a folder, not an index file" in capsys.readouterr().err
