"""Usage errors, ``--version`` and ``-h`` through the real console script.

Every usage error prints click's usage line, a ``Try '... -h' for help.`` hint and one
``Error:`` line on stderr, exits 2 and shows no traceback (typer >= 0.29 raises its bundled
``typer._click`` exceptions, which ``click``'s handlers never caught: each was a traceback with
exit status 1).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from neardup.cli.main import main


def _console_script() -> list[str]:
    """The installed ``neardup`` entry point next to this interpreter (else ``-m neardup``)."""
    script = Path(sys.executable).with_name("neardup")
    if script.exists():
        return [str(script)]
    found = shutil.which("neardup")
    return [found] if found else [sys.executable, "-m", "neardup"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_console_script(), *args], capture_output=True, text=True, timeout=60, check=False
    )


def assert_usage_error(proc: subprocess.CompletedProcess[str], usage: str, error: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == f"Usage: {usage}"
    assert re.fullmatch(r"Try 'neardup( [a-z]+)* -h' for help\.", lines[1])
    errors = [x for x in lines if x.startswith("Error: ")]
    assert len(errors) == 1 and error in errors[0], proc.stderr
    assert lines[-1] == errors[0]


def test_unknown_option_root_and_subcommand() -> None:
    assert_usage_error(run("--bogus"), "neardup [OPTIONS] COMMAND [ARGS]...", "--bogus")
    assert_usage_error(
        run("dedup", "--outptu", "x"), "neardup dedup [OPTIONS] [INPUT]...", "--outptu"
    )


def test_unknown_command() -> None:
    assert_usage_error(run("dedpu"), "neardup [OPTIONS] COMMAND [ARGS]...", "dedpu")


def test_missing_value() -> None:
    # click raises this one without a context; main() finds the command to print its usage
    assert_usage_error(
        run("dedup", "in.jsonl", "--output"),
        "neardup dedup [OPTIONS] [INPUT]...",
        "Option '--output' requires an argument",
    )
    assert_usage_error(
        run("index", "plan", "--memory"),
        "neardup index plan [OPTIONS]",
        "Option '--memory' requires an argument",
    )


def test_missing_required_option() -> None:
    assert_usage_error(run("serve"), "neardup serve [OPTIONS]", "Missing option '--data'")


def test_bad_choice_and_bad_int(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "a"}\n', encoding="utf-8")
    usage = "neardup dedup [OPTIONS] [INPUT]..."
    proc = run("dedup", str(src), "-o", str(tmp_path / "o.jsonl"), "--keep", "all")
    assert_usage_error(proc, usage, "'all' is not one of 'first', 'longest', 'none'")
    proc = run("dedup", str(src), "-o", str(tmp_path / "o.jsonl"), "--on-error", "ignore")
    assert_usage_error(proc, usage, "'ignore' is not one of 'fail', 'skip'")
    proc = run("dedup", str(src), "-o", str(tmp_path / "o.jsonl"), "--workers", "two")
    assert_usage_error(proc, usage, "Invalid value for '--workers'")
    assert_usage_error(
        run("index", "plan", "--bits", "x"), "neardup index plan [OPTIONS]", "'--bits'"
    )
    # out of range: named by the option, not by the library's parameter (``workers must be``)
    for option, value in (("--workers", "0"), ("--max-distance", "-1"), ("--max-distance", "65")):
        proc = run("dedup", str(src), "-o", str(tmp_path / "o.jsonl"), option, value)
        assert_usage_error(proc, usage, f"Invalid value for '{option}'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
    for size in ("0", "1.5", "inf"):
        proc = run("index", "plan", "-n", size)
        assert proc.returncode == 2 and "-n/--size must be a whole number" in proc.stderr


def test_no_arguments_prints_help_and_exits_2() -> None:
    """``neardup`` alone: the help on stderr, exit 2 (click's rule for a group without a
    command: it did not do what was asked). ``neardup -h`` is the way to exit 0."""
    proc = run()
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("Usage: neardup [OPTIONS] COMMAND [ARGS]...")
    assert "Commands:" in proc.stderr and "dedup" in proc.stderr
    assert "Traceback" not in proc.stderr
    group = run("index")
    assert group.returncode == 2 and "plan" in group.stderr and "info" in group.stderr


def test_version() -> None:
    proc = run("--version")
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout == f"neardup {version('neardup')}\n"


@pytest.mark.parametrize(
    "args", [(), ("dedup",), ("index",), ("index", "plan"), ("serve",), ("fingerprint",)]
)
def test_short_help_everywhere_long_help_works(args: tuple[str, ...]) -> None:
    short, long_ = run(*args, "-h"), run(*args, "--help")
    assert short.returncode == 0 and short.stderr == ""
    assert short.stdout == long_.stdout
    assert short.stdout.startswith(f"Usage: {' '.join(('neardup', *args))} ")
    assert "-h, --help" in short.stdout


def test_flags_show_no_placeholder() -> None:
    """Typer 0.29's rich help printed ``<bool>`` after every flag, though flags take no value."""
    text = run("dedup", "-h").stdout
    assert "<bool>" not in text
    assert re.search(r"^\s+--sample\s+Dedup the bundled", text, re.M)
    assert re.search(r"^\s+-q, --quiet\s+", text, re.M)
    assert re.search(r"^\s+-o, --output <str>\s+", text, re.M)  # options keep their value's type


def test_in_process_entry_maps_usage_errors_too(capsys: pytest.CaptureFixture[str]) -> None:
    """``main([...])`` (what the console script calls) returns the status instead of raising."""
    assert main(["dedup", "--no-such-flag"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Usage: neardup dedup ") and err.rstrip().endswith(
        "Error: No such option: --no-such-flag"
    )
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("neardup ")
    assert main(["index", "plan", "-h"]) == 0
    assert "Usage: neardup index plan" in capsys.readouterr().out


def test_interrupt_exits_130_with_one_line(monkeypatch, capsys) -> None:
    import neardup.index.plan as plan

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(plan, "plan_index", interrupted)
    assert main(["index", "plan"]) == 130
    assert capsys.readouterr().err == "neardup: interrupted\n"


def test_in_process_calls_register_the_commands_once(capsys) -> None:
    """``main()`` called again in one process (as the tests and embedding programs do) reuses
    its command tree: registering the commands on every call once added them again each time,
    and every later call walked all the copies (the suite slowed to a crawl)."""
    from neardup.cli import main as cli

    main(["--version"])
    groups, commands = len(cli.app.registered_groups), len(cli.app.registered_commands)
    for _ in range(3):
        assert main(["--version"]) == 0
        assert main(["store", "--help"]) == 0
    assert (len(cli.app.registered_groups), len(cli.app.registered_commands)) == (groups, commands)
    assert {g.name for g in cli.app.registered_groups} >= {"cluster", "store"}
    assert len(cli.app.registered_groups) == len({g.name for g in cli.app.registered_groups})
    capsys.readouterr()


def test_serve_cache_defaults_are_the_settings_defaults() -> None:
    """``neardup serve`` spells its cache sizes' and readers' defaults out (the CLI imports no
    online code to build its help); they must stay those of ``DedupSettings``."""
    import typer

    from neardup.cli import main as cli
    from neardup.online import DedupSettings

    main(["--version"])  # registers the commands
    serve = typer.main.get_command(cli.app).commands["serve"]  # type: ignore[attr-defined]
    defaults = {p.name: p.default for p in serve.params}
    s = DedupSettings()
    assert defaults["signature_cache_rows"] == s.signature_cache_rows
    assert defaults["histogram_cache_rows"] == s.histogram_cache_rows
    assert defaults["read_threads"] == s.store.read_threads
    assert defaults["resident_summaries"] == s.store.resident_summaries
