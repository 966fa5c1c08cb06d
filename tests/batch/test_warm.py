"""The first run's compile on two processes (neardup.batch.warm): the helper compiles the same
specialisations a run needs (a run after it compiles none of them), the CLI starts it at its
first compile, and it never starts itself again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from doubles import compiled_in_a_process


@pytest.mark.slow
def test_a_run_after_the_helper_compiles_none_of_its_kernels(tmp_path: Path) -> None:
    warmed = compiled_in_a_process(
        "from neardup.batch.warm import warm_kernels; warm_kernels()", tmp_path / "c"
    )
    assert any(k.endswith("_lcs_kernel") for k in warmed)  # the verification's largest
    assert any(k.endswith("_group_agreement_kernel") for k in warmed)
    run = compiled_in_a_process(
        "from neardup.cli.main import main\n"
        f"main(['dedup', '--sample', '-o', {str(tmp_path / 'kept.jsonl')!r}, '--quiet'])",
        tmp_path / "c",
    )
    assert run, "a cold cache for the first stages: the run compiles those itself"
    assert not set(run) & set(warmed), set(run) & set(warmed)
    again = compiled_in_a_process(
        "from neardup.batch.warm import warm_kernels; warm_kernels()", tmp_path / "c"
    )
    assert again == []  # everything loads from the cache now


def test_no_helper_inside_a_helper_when_turned_off_or_for_a_private_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from neardup import _jit
    from neardup.batch import warm

    started: list[list[str]] = []
    monkeypatch.setattr(_jit.subprocess, "Popen", lambda args, **kw: started.append(args))
    monkeypatch.setattr(warm, "_helper", None)
    monkeypatch.setenv(warm.NO_WARM_ENV, "1")
    warm.start_warming()
    assert started == []
    monkeypatch.delenv(warm.NO_WARM_ENV)
    monkeypatch.setattr(_jit.atexit, "register", lambda *a: None)
    where = _jit.cache_location()
    monkeypatch.setattr(_jit, "_location", _jit.CacheLocation(where.path, "process"))
    warm.start_warming()  # a cache of this process only: nothing to share
    assert started == []
    monkeypatch.setattr(_jit, "_location", where)
    warm.start_warming()
    assert started == [[sys.executable, "-P", "-m", "neardup.batch.warm"]]


def test_the_helper_imports_the_neardup_this_process_runs(tmp_path: Path) -> None:
    """Started from a folder that holds another ``neardup`` (a source checkout that was
    installed with ``pip install .``), the helper still imports this process's copy: another
    copy's kernels are other files to numba's cache, and its compile would be lost (CI's
    command 1 measured 21 s of compile where 12 s was expected)."""
    import neardup
    from neardup.batch import warm

    decoy = tmp_path / "neardup"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise SystemExit('the decoy was imported')\n")
    cmd = warm.helper_command()
    assert cmd[-2:] == ["-m", "neardup.batch.warm"]
    probe = [*cmd[:-2], "-c", "import neardup; print(neardup.__file__)"]
    out = subprocess.run(
        probe, cwd=tmp_path, env=warm.helper_env(), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).resolve() == Path(neardup.__file__).resolve()
    assert warm.helper_env()[warm.NO_WARM_ENV] == "1"


def test_the_cli_starts_the_helper_at_its_first_compile(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``neardup dedup``'s first-compile hook (called by neardup._jit only when a kernel
    compiles: a cold cache) prints the notice and starts the helper."""
    from neardup.batch import warm
    from neardup.cli import dedup_cmd

    started: list[int] = []
    monkeypatch.setattr(warm, "start_warming", lambda: started.append(1))
    dedup_cmd._first_compile("neardup: compiling kernels")
    assert started == [1]
    assert "compiling kernels" in capsys.readouterr().err
