"""``neardup store load``: a namespace of a data directory seeded from files (a thin shell over
:func:`neardup.incremental.load_files`; docs/store.md, "Bulk loads").

``neardup store verify`` / ``neardup store repair``: damaged rows of the stores of a data
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
from typing import Any, Literal

import typer

from .plan_options import LSH_BANDS, LSH_ROWS

__all__ = ["register"]

_DATA = typer.Argument(
    ...,
    help="The --data directory of neardup serve (every namespace under DATA/namespaces/), or "
    "one store's directory.",
    metavar="DATA",
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
    from ..service.namespaces import not_served
    from ..store.integrity import find_stores, repair_store

    with not_served(data):  # a running server on DATA: exit 5, before anything is touched
        reports = [(name, repair_store(path)) for name, path in find_stores(data)]
    _print(reports, as_json, "repair")


def load_cmd(
    data: Path = typer.Argument(
        ...,
        help="The --data directory of neardup serve (the server stopped); the namespace's store "
        "is created when missing.",
        metavar="DATA",
    ),
    inputs: list[str] = typer.Argument(
        ...,
        help="Files, folders, globs or URLs, read as neardup dedup reads them.",
        metavar="INPUT",
    ),
    namespace: str = typer.Option("default", "--namespace", help="Namespace to load into."),
    as_is: bool = typer.Option(
        False,
        "--as-is",
        help="Load every document as it is (a corpus already deduplicated, e.g. neardup dedup's "
        "output); default: keep-first, as check-and-insert one by one would.",
    ),
    time_field: str | None = typer.Option(
        None,
        "--time-field",
        help="Field holding each record's time (unix seconds, or ISO 8601 with a UTC offset); "
        "default: every document gets the load's time.",
    ),
    drop_expired: bool = typer.Option(
        False,
        "--drop-expired",
        help="Leave out documents older than the retention window (default: refuse them).",
    ),
    retention: str | None = typer.Option(
        None,
        "--retention",
        help="A new store's time window, e.g. 48h (as neardup serve --retention); an existing "
        "store keeps its own, and another one is refused without --allow-retention-change.",
    ),
    allow_retention_change: bool = typer.Option(
        False,
        "--allow-retention-change",
        help="Store and apply a --retention other than an existing store's (a shorter window "
        "drops the documents outside it; logged), as neardup serve's.",
    ),
    candidates: str | None = typer.Option(
        None, "--candidates", help="A new store's candidate mode: lsh (default) or simhash."
    ),
    lsh_bands: int | None = LSH_BANDS,
    lsh_rows: int | None = LSH_ROWS,
    input_format: str | None = typer.Option(
        None, "--input-format", help="Read every input as: jsonl, json, csv, tsv, parquet."
    ),
    text_field: str = typer.Option("text", "--text-field", help="Field holding the text."),
    id_field: str | None = typer.Option(
        None, "--id-field", help="Field holding a unique id (default: 'id', else path:line)."
    ),
    generate_ids: bool = typer.Option(
        False, "--generate-ids", help="Ignore the inputs' ids: number the records path:line."
    ),
    on_error: Literal["fail", "skip"] = typer.Option(
        "fail", "--on-error", help="On a malformed record or time: fail, or skip it."
    ),
    encoding: str = typer.Option("utf-8", "--encoding", help="Input text encoding."),
    chunk_docs: int | None = typer.Option(
        None,
        "--chunk-docs",
        min=1,
        help="Documents decided at once (default 1,000,000): inputs holding more are checked "
        "file by file first, then loaded a group at a time (whole files, a larger file in "
        "slices), so a group's work, not the corpus, is held in memory.",
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Finish a load into this namespace that stopped part way (killed, out of "
        "memory), from where it stopped: the same inputs and options (a load notes where "
        "each group starts in LOAD-JOURNAL.json in the store until it is done).",
    ),
    as_json: bool = _JSON,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress and no summary."),
) -> None:
    """Seed a namespace from files in bulk: keep-first (or --as-is), at the store's rule."""
    from .. import _jit
    from ..errors import ConfigError
    from ..incremental import load_files
    from ..incremental.seed import CHUNK_DOCS
    from ..online.settings import DedupSettings
    from ..service.config import validate_namespace
    from ..service.namespaces import NAMESPACES_DIR, not_served
    from ..store import StoreSettings, parse_duration
    from .dedup_cmd import _bar_callback, _first_compile, warn
    from .progress import StageProgress

    if generate_ids and id_field is not None:
        raise ConfigError(
            "--generate-ids ignores the records' ids, --id-field names them: pass one"
        )
    store = data / NAMESPACES_DIR / validate_namespace(namespace)
    settings = DedupSettings(
        candidates=candidates,
        lsh_bands=lsh_bands,
        lsh_rows=lsh_rows,
        store=StoreSettings(
            retention=parse_duration(retention, name="--retention"),
            allow_retention_change=allow_retention_change,
        ),
    )
    progress = StageProgress.for_stderr(quiet or as_json)
    # a cold kernel cache: say so when the first compile starts (whatever -q says), and start
    # the batch's compile helper, as neardup dedup does
    _jit.announce_compiles(_first_compile, "load")
    with progress, not_served(data):  # (a running server on DATA: exit 5, nothing loaded)
        stats = load_files(
            inputs, store, settings=settings, dedup=not as_is, time_field=time_field,
            drop_expired=drop_expired, input_format=input_format, text_field=text_field,
            id_field=id_field, encoding=encoding, on_error=on_error, generate_ids=generate_ids,
            progress=_bar_callback(progress),
            chunk_docs=CHUNK_DOCS if chunk_docs is None else chunk_docs, resume=resume,
        )  # fmt: skip
    if not stats["documents"]:  # (whatever -q says: as neardup dedup warns)
        skipped = stats["skipped_records"]
        warn(
            f"every record was skipped ({skipped:,}): nothing was loaded"
            if skipped
            else "the inputs hold no documents: nothing was loaded"
        )
    if as_json:
        typer.echo(json.dumps(stats, indent=1))
    elif not quiet:
        typer.echo(
            f"namespace {namespace!r}: {stats['documents']:,} read, {stats['loaded']:,} loaded, "
            f"{stats['dropped']:,} near duplicates dropped, {stats['expired']:,} expired, "
            f"{stats['skipped_records']:,} skipped ({stats['path']}"
            + (f", {stats['groups']:,} groups" if stats.get("groups", 1) > 1 else "")
            + "); "
            f"{stats['store_documents_before']:,} -> {stats['store_documents_after']:,} stored "
            f"in {stats['elapsed_s']:.1f} s"
        )
        if "resumed" in stats:
            r = stats["resumed"]
            typer.echo(
                f"resumed a load that had decided {r['documents']:,} documents in "
                f"{r['groups']:,} groups ({r['loaded']:,} kept; {r['removed']:,} documents of "
                "the group it stopped in removed and decided again)"
            )


def register(app: typer.Typer) -> None:
    """Add the ``store`` command group to the main app."""
    group = typer.Typer(
        help="Seed, check and salvage the stores of a data directory (docs/store.md).",
        no_args_is_help=True,
    )
    group.command("load")(load_cmd)
    group.command("verify")(verify_cmd)
    group.command("repair")(repair_cmd)
    app.add_typer(group, name="store")
