"""``neardup.service.testing.ServerProcess`` runs the neardup its caller names: a
``PYTHONPATH`` in ``env`` wins over a checkout in the working directory, which ``python -m``
would otherwise put first on the path (benchmarks that compared two trees from one of them
ran that one twice)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neardup.service.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2]


def _fake_tree(tmp_path: Path, marker: Path) -> Path:
    pkg = tmp_path / "tree" / "neardup"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(f"open({str(marker)!r}, 'w').write(__file__)\n")
    return pkg.parent


def test_a_named_tree_runs_even_from_another_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "ran"
    tree = _fake_tree(tmp_path, marker)
    monkeypatch.chdir(ROOT)  # a neardup checkout as the working directory
    srv = ServerProcess(tmp_path / "data", env={"PYTHONPATH": str(tree)})
    assert srv.command()[1] == "-P"
    srv.start(wait=False)
    assert srv.wait(timeout=60) == 0
    assert marker.read_text() == str(tree / "neardup" / "__main__.py")


def test_without_a_named_tree_the_command_is_plain(tmp_path: Path) -> None:
    assert ServerProcess(tmp_path).command()[1:3] == ["-m", "neardup"]
