"""The ``neardup`` command: one Typer app; each subcommand lives in its own module.

Every subcommand module exposes ``register(app: typer.Typer) -> None`` and imports heavy
dependencies inside its command functions, so ``neardup --help`` stays fast.
Errors are mapped to exit codes in exactly one place: :func:`main`, via
:func:`neardup.errors.exit_code_for`. Usage errors (unknown option, missing value, missing
required option, a value of the wrong type or outside its choices) print click's usage line, a
hint and one ``Error:`` line on stderr and exit 2; ``neardup`` alone prints the help on stderr
and exits 2 as well (click's convention for a command group called without a command).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import importlib
import os
import sys
from typing import Annotated, Any

import typer

from .._gc import settle
from ..errors import NeardupError, exit_code_for

app = typer.Typer(
    name="neardup",
    help="Find near-duplicate text: SimHash fingerprints, exact k-bit search, dedup, service.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's plain help: typer 0.29's rich panels print a <bool> placeholder after every flag
    # (flags take no value) and wrap each option's help into a narrow column
    rich_markup_mode=None,
    # inherited by every subcommand and command group (click passes it down the contexts)
    context_settings={"help_option_names": ["-h", "--help"]},
)

# Subcommand modules, registered in this order. A module that does not exist yet is skipped.
_COMMAND_MODULES = (
    "neardup.cli.fingerprint_cmd",  # neardup fingerprint, neardup idf build
    "neardup.cli.index_cmd",  # neardup index ...
    "neardup.cli.dedup_cmd",  # neardup dedup
    "neardup.cli.eval_cmd",  # neardup eval
    "neardup.cli.serve_cmd",  # neardup serve
    "neardup.cli.batch_cmd",  # neardup batch-query
    "neardup.cli.cluster_cmd",  # neardup cluster status | add-node | remove-node | rebalance
    "neardup.cli.explain_cmd",  # neardup explain
    "neardup.cli.report_cmd",  # neardup report
    "neardup.cli.store_cmd",  # neardup store verify | repair
)


def _register_all() -> None:
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(app)


def package_version() -> str:
    """The installed distribution's version (the source tree's when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("neardup")
    except PackageNotFoundError:
        from .. import __version__

        return __version__


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"neardup {package_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """neardup: near-duplicate detection for English and Chinese text."""


@functools.cache
def _build() -> Any:
    """The click command tree of :data:`app`, with every subcommand registered: built once per
    process (registering again would add every command a second time, and each later build
    would walk all the copies: in-process callers such as the tests grew slower with every
    call)."""
    _register_all()
    return typer.main.get_command(app)


def command_tree() -> Any:
    """The click command of ``neardup`` with every subcommand (a group of groups), built once
    per process: what tests walk to check every command's options against the docs."""
    return _build()


def _deepest_context(command: Any, argv: list[str]) -> Any:
    """The context of the (sub)command ``argv`` names, parsed leniently (as shell completion
    does), or None. Click raises some usage errors without a context (an option missing its
    value), and without one it cannot print the usage line."""
    try:
        ctx = command.make_context("neardup", list(argv), resilient_parsing=True)
        while isinstance(ctx.command, typer.core.TyperGroup):
            rest = [*getattr(ctx, "_protected_args", ()), *ctx.args]  # typer._click's name
            if not rest:
                break
            name, sub, rest = ctx.command.resolve_command(ctx, rest)
            if sub is None:
                break
            ctx = sub.make_context(name, rest, parent=ctx, resilient_parsing=True)
        return ctx
    except Exception:  # the error itself is reported; the usage line is a courtesy
        return None


#: options whose value is optional (``--report [PATH]``): given without one, they get this
#: value. typer 0.29's bundled click has no optional option values, so the command line is
#: completed here as click would: the option is last, or the next word is another option.
_OPTIONAL_VALUE = {"--report": ""}


def _optional_values(args: list[str]) -> list[str]:
    out: list[str] = []
    for i, a in enumerate(args):
        out.append(a)
        if a == "--":
            out.extend(args[i + 1 :])
            break
        if a in _OPTIONAL_VALUE:
            nxt = args[i + 1] if i + 1 < len(args) else None
            if nxt is None or (nxt.startswith("-") and nxt != "-"):
                out.append(_OPTIONAL_VALUE[a])
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    command = _build()
    try:
        args = _optional_values(sys.argv[1:] if argv is None else list(argv))
        rv = command.main(args=args, prog_name="neardup", standalone_mode=False)
    except NeardupError as exc:
        typer.echo(f"neardup: error: {exc}", err=True)
        return exit_code_for(exc)
    except KeyboardInterrupt:
        if not _terminated:  # (run() says SIGTERM's own line)
            typer.echo("neardup: interrupted", err=True)
        return 130
    except typer.TyperException as exc:
        # click's usage errors (typer >= 0.29 bundles click as typer._click, so these are not
        # ``click.ClickException``s): usage line, hint and one error line on stderr
        if getattr(exc, "ctx", False) is None and hasattr(exc, "cmd"):  # a UsageError
            setattr(exc, "ctx", _deepest_context(command, args))  # noqa: B010 (not typed)
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        else:
            typer.echo(f"Error: {exc.format_message()}", err=True)
        return exc.exit_code
    except typer.Abort:
        typer.echo("neardup: aborted", err=True)
        return 1
    except typer.Exit as exc:
        return exc.exit_code
    except SystemExit as exc:  # sys.exit() inside a command
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    except OSError as exc:
        if exc.errno not in _WRITE_ERRNOS:
            raise
        # printing to a full disk or a closed pipe (the summary after `> /dev/full`): one
        # line and StorageError's exit code, not a traceback and 1
        _quiet_stdout()
        typer.echo(f"neardup: error: cannot write: {exc.strerror or exc}", err=True)
        return 7
    if rv == 130 and not _terminated:  # typer turns ^C inside a command into Exit(130)
        typer.echo("neardup: interrupted", err=True)
    return rv if isinstance(rv, int) else 0


#: errors of a write to stdout that the user's setup causes, not neardup
_WRITE_ERRNOS = frozenset(
    getattr(errno, name)
    for name in ("ENOSPC", "EDQUOT", "EPIPE", "EIO", "EFBIG")
    if hasattr(errno, name)
)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's flush at exit does not fail again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)


def run(argv: list[str] | None = None) -> int:
    """The console script (``neardup``, ``python -m neardup``): :func:`main` in a process
    that is neardup's own, so its garbage collector is set for it first
    (:func:`neardup._gc.settle`; the imports frozen, full collections rare). Tests and
    library users call :func:`main`, which leaves their process's collector as it is."""
    settle(collect=False)
    args = sys.argv[1:] if argv is None else list(argv)
    if not _serves(args):
        _terminate_as_interrupt()
    rc = main(argv)
    if _terminated:
        typer.echo("neardup: terminated (SIGTERM)", err=True)
        return 143
    return rc


#: set when SIGTERM stopped the command (:func:`_terminate_as_interrupt`)
_terminated = False


def _serves(args: list[str]) -> bool:
    """Whether the command is a server (``serve``, ``cluster router``): those handle SIGTERM
    themselves (a graceful stop, docs/service.md)."""
    words = [a for a in args if not a.startswith("-")][:2]
    return words[:1] == ["serve"] or words == ["cluster", "router"]


def _terminate_as_interrupt() -> None:
    """SIGTERM (``kill``, ``timeout``, Slurm, ``docker stop``) unwinds the command as ^C does:
    its staged outputs, spooled stdin and uncompressed copies of inputs are removed (they were
    left behind: SIGTERM had no handler), then exit 143."""
    import signal

    def stop(signum: int, frame: object) -> None:
        global _terminated
        _terminated = True
        raise KeyboardInterrupt

    with contextlib.suppress(ValueError):  # (not the main thread: left as it is)
        signal.signal(signal.SIGTERM, stop)


if __name__ == "__main__":
    sys.exit(run())
