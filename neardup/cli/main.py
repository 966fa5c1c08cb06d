"""The ``neardup`` command: one Typer app; each subcommand lives in its own module.

Every subcommand module exposes ``register(app: typer.Typer) -> None`` and imports heavy
dependencies inside its command functions, so ``neardup --help`` stays fast.
Errors are mapped to exit codes in exactly one place: :func:`main`, via
:func:`neardup.errors.exit_code_for`.
"""

from __future__ import annotations

import importlib
import sys

import typer

from ..errors import NeardupError, exit_code_for

app = typer.Typer(
    name="neardup",
    help="Find near-duplicate text: SimHash fingerprints, exact k-bit search, dedup, service.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Subcommand modules, registered in this order. A module that does not exist yet is skipped.
_COMMAND_MODULES = (
    "neardup.cli.fingerprint_cmd",  # neardup fingerprint, neardup idf build
    "neardup.cli.index_cmd",  # neardup index ...
    "neardup.cli.dedup_cmd",  # neardup dedup, neardup eval
    "neardup.cli.serve_cmd",  # neardup serve
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


@app.callback()
def _root() -> None:
    """neardup: near-duplicate detection for English and Chinese text."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    _register_all()
    try:
        rv = app(args=argv, standalone_mode=False)
    except NeardupError as exc:
        typer.echo(f"neardup: error: {exc}", err=True)
        return exit_code_for(exc)
    except KeyboardInterrupt:
        typer.echo("neardup: interrupted", err=True)
        return 130
    except SystemExit as exc:  # typer.Exit inside commands
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    except Exception as exc:  # click usage errors
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            return exc.exit_code
        if isinstance(exc, click.exceptions.Abort):
            typer.echo("neardup: aborted", err=True)
            return 1
        if isinstance(exc, click.exceptions.Exit):
            return exc.exit_code
        raise
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    sys.exit(main())
