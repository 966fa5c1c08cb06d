"""``neardup store verify`` / ``neardup store repair``: damaged rows of the stores of a data
directory (thin shells over :mod:`neardup.store.integrity`; docs/store.md, "Checksums").

``verify`` reads every row of every store (read-only: the server may be running) and lists
the rows whose checksum does not match; it exits 0 when every store is intact and 6 (a damaged
file) otherwise. ``repair`` (server stopped) restores each damaged row from the live log when
the log still holds it, else quarantines it (moved into ``quarantine-<time>.sqlite3`` beside the
store, then deleted) and lists what it did.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

__all__ = ["register"]

_DATA = typer.Argument(
    ...,
    help="The --data directory of neardup serve (every namespace under DATA/namespaces/), or "
    "one store's directory.",
)
_JSON = typer.Option(False, "--json", help="Print the report as JSON.")


def _print(reports: list[tuple[str, Any]], as_json: bool, verb: str) -> None:
    if as_json:
        typer.echo(json.dumps([{"namespace": n, **r.to_dict()} for n, r in reports], indent=1))
        return
    for name, r in reports:
        parts = [f"{r.rows:,} rows checked", f"{len(r.damaged)} damaged"]
        if verb == "repair" and r.damaged:
            parts += [f"{r.restored} restored from the log", f"{r.quarantined} quarantined"]
        typer.echo(f"namespace {name!r} ({r.path}): " + ", ".join(parts))
        for d in r.damaged:
            action = f" -> {d.action}" if d.action else ""
            typer.echo(f"  row {d.rowid} id {d.id!r}: {d.problem}{action}")
        for u in r.unreadable:
            typer.echo(f"  unreadable: {u}")
        if getattr(r, "quarantine_file", None) is not None:
            typer.echo(f"  quarantined rows kept in {r.quarantine_file}")


def verify_cmd(data: Path = _DATA, as_json: bool = _JSON) -> None:
    """Check every stored row against its checksum (read-only; exit 6 when any is damaged)."""
    from ..errors import CorruptFileError
    from ..store.integrity import find_stores, verify_store

    reports = [(name, verify_store(path)) for name, path in find_stores(data)]
    _print(reports, as_json, "verify")
    bad = [name for name, r in reports if not r.ok]
    if bad:
        n = sum(len(r.damaged) for _, r in reports)
        raise CorruptFileError(
            f"{n} damaged row(s) in namespace(s) {', '.join(bad)} (listed above); stop the "
            f"server and run `neardup store repair {data}`"
            + (
                " (unreadable pages: `neardup serve --repair`)"
                if any(r.unreadable for _, r in reports)
                else ""
            )
        )


def repair_cmd(data: Path = _DATA, as_json: bool = _JSON) -> None:
    """Restore damaged rows from the live log, or quarantine them (the server must be stopped)."""
    from ..store.integrity import find_stores, repair_store

    reports = [(name, repair_store(path)) for name, path in find_stores(data)]
    _print(reports, as_json, "repair")


def register(app: typer.Typer) -> None:
    """Add the ``store`` command group to the main app."""
    group = typer.Typer(
        help="Check and salvage the stores of a data directory (docs/store.md, 'Checksums').",
        no_args_is_help=True,
    )
    group.command("verify")(verify_cmd)
    group.command("repair")(repair_cmd)
    app.add_typer(group, name="store")
