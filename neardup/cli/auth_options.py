"""The authentication options ``neardup serve`` and ``neardup cluster router`` share, and
the rule both start by: a server needs a token unless ``--no-auth`` says otherwise."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

__all__ = [
    "NO_AUTH",
    "OPEN_READS",
    "READ_TOKEN",
    "TOKEN",
    "TOKEN_FILE",
    "auth_settings",
    "require_a_token",
]

TOKEN: Any = typer.Option(
    None,
    "--token",
    envvar="NEARDUP_TOKEN",
    show_envvar=True,
    help="The write token: reads and writes in every namespace (what cluster nodes and "
    "routers send). Prefer the env var. An empty value is refused.",
)
#: what a reading token may do on a node (``neardup serve``) and on a router
SERVER_READS = "check, get, export, namespace list and statistics, metrics"
ROUTER_READS = "check, get, and the nodes' document counts in /healthz"


def read_token_option(reads: str) -> Any:
    """The ``--read-token`` option of a server that serves ``reads``."""
    return typer.Option(
        None,
        "--read-token",
        envvar="NEARDUP_READ_TOKEN",
        show_envvar=True,
        help=f"A read-only token for every namespace ({reads}).",
    )


def open_reads_option(reads: str) -> Any:
    """The ``--open-reads`` option of a server that serves ``reads``."""
    return typer.Option(
        False,
        "--open-reads",
        help=f"Serve reads ({reads}) without a token; writes still need one.",
    )


READ_TOKEN: Any = read_token_option(SERVER_READS)
TOKEN_FILE: Any = typer.Option(
    None,
    "--token-file",
    envvar="NEARDUP_TOKEN_FILE",
    show_envvar=True,
    help="A file of tokens, each read or write, in every namespace or the ones it lists "
    "(format: docs/service.md, 'Auth').",
)
OPEN_READS: Any = open_reads_option(SERVER_READS)
NO_AUTH: Any = typer.Option(
    False,
    "--no-auth",
    help="Serve reads and writes without any token, on purpose (logged as a warning). "
    "Without a token the server refuses to start unless this is given.",
)


def auth_settings(
    token: str | None,
    read_token: str | None,
    token_file: Path | None,
    open_reads: bool,
    no_auth: bool,
) -> tuple[str | None, str | None]:
    """The write and read tokens to serve with, or a :class:`ConfigError` that says how to
    start: a server needs a token unless ``--no-auth`` is given (and then no token at all)."""
    from ..errors import ConfigError

    # click ignores an empty environment variable: see it here, so that an empty token is
    # refused instead of leaving the server without one
    if token is None and os.environ.get("NEARDUP_TOKEN") is not None:
        token = os.environ["NEARDUP_TOKEN"]
    if read_token is None and os.environ.get("NEARDUP_READ_TOKEN") is not None:
        read_token = os.environ["NEARDUP_READ_TOKEN"]
    given = [
        name
        for name, value in (
            ("--token / NEARDUP_TOKEN", token),
            ("--read-token / NEARDUP_READ_TOKEN", read_token),
            ("--token-file / NEARDUP_TOKEN_FILE", token_file),
        )
        if value is not None
    ]
    if no_auth:
        if given or open_reads:
            extra = given + (["--open-reads"] if open_reads else [])
            raise ConfigError(
                f"--no-auth serves without any token, but {' and '.join(extra)} "
                f"{'was' if len(extra) == 1 else 'were'} given too; drop one or the other"
            )
        return None, None
    for name, value in (("--token / NEARDUP_TOKEN", token), ("--read-token", read_token)):
        if value is not None and not value.strip():
            raise ConfigError(
                f"the token given by {name} is empty; set a token (or, to serve without any "
                "on purpose, unset it and pass --no-auth)"
            )
    return token, read_token


def require_a_token(authenticated: bool, no_auth: bool, command: str) -> None:
    """Refuse to serve without any token unless ``--no-auth`` says so."""
    from ..errors import ConfigError

    if not no_auth and not authenticated:
        raise ConfigError(
            f"{command} needs a token: set NEARDUP_TOKEN (the write token; or --token, "
            "--read-token, --token-file FILE), or pass --no-auth to serve reads and writes "
            "without one"
        )
