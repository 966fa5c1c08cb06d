"""``neardup serve``: the options of the HTTP service on one data directory (one writer, one
process), parsed into a :class:`~neardup.service.ServiceConfig` and run by
:func:`neardup.service.server.run_server` (which binds the port, opens every store, serves,
and flushes and closes them on SIGTERM / SIGINT).

Authentication (:mod:`neardup.service.auth`): a server needs a token (``--token`` /
``NEARDUP_TOKEN``, ``--read-token``, ``--token-file``) unless ``--no-auth`` says to serve
without one (logged as a warning).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from .auth_options import (
    NO_AUTH,
    OPEN_READS,
    READ_TOKEN,
    TOKEN,
    TOKEN_FILE,
    auth_settings,
    require_a_token,
)
from .plan_options import LSH_BANDS, LSH_ROWS

__all__ = ["register", "serve"]


def serve(
    data: Path = typer.Option(
        ..., "--data", help="Data directory (one store per namespace under DATA/namespaces/)."
    ),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Interface to bind (loopback by default)."
    ),
    port: int = typer.Option(8080, "--port", help="TCP port."),
    token: str | None = TOKEN,
    read_token: str | None = READ_TOKEN,
    token_file: Path | None = TOKEN_FILE,
    open_reads: bool = OPEN_READS,
    no_auth: bool = NO_AUTH,
    retention: str | None = typer.Option(
        None,
        "--retention",
        help="Time window, e.g. 48h; older partitions are dropped whole. Default: the one each "
        "store was created with; a different one is refused without --allow-retention-change.",
    ),
    allow_retention_change: bool = typer.Option(
        False,
        "--allow-retention-change",
        help="Store and apply a --retention other than the stored one (a shorter window drops "
        "the documents outside it; logged).",
    ),
    max_distance: int = typer.Option(3, "--max-distance", help="SimHash Hamming distance."),
    candidate_radius: int | None = typer.Option(
        None,
        "--candidate-radius",
        help="Search radius for verification candidates (default: --max-distance); e.g. 18 "
        "catches edited short texts, at a steep cost per query in large windows.",
    ),
    candidates: str | None = typer.Option(
        None,
        "--candidates",
        help="Candidate mode: 'lsh' (MinHash band keys plus SimHash, verified: neardup dedup's "
        "recall; the default for a new store that verifies stored texts) or 'simhash' (the "
        "classic SimHash-only mode, k = --max-distance). Default: the mode the store was "
        "created with.",
    ),
    lsh_bands: int | None = LSH_BANDS,
    lsh_rows: int | None = LSH_ROWS,
    compress_tables: bool | None = typer.Option(
        None,
        "--compress-tables/--no-compress-tables",
        help="Segment indexes with block-compressed tables: about half their memory, slower "
        "probes (docs/store.md). Default: the setting each store was created with (off).",
    ),
    max_body_bytes: str = typer.Option(
        "32MiB",
        "--max-body-bytes",
        help="Largest request body (e.g. 1048576, 512k, 32MiB); 413 above.",
    ),
    max_batch: int = typer.Option(
        10_000, "--max-batch", help="Most documents per batch; 413 above."
    ),
    namespace: list[str] = typer.Option(
        [],
        "--namespace",
        help="Namespace to create at startup (repeatable); 'default' always exists.",
    ),
    verify: bool = typer.Option(
        True, "--verify/--no-verify", help="Verify SimHash candidates on their text."
    ),
    store_text: bool = typer.Option(
        True, "--store-text/--no-store-text", help="Keep document text (needed by --verify)."
    ),
    commit_interval_ms: float = typer.Option(
        0.0,
        "--commit-interval-ms",
        help="Extra wait for requests to join a log group commit (0: natural grouping).",
    ),
    signature_cache_rows: int = typer.Option(
        262_144,
        "--signature-cache-rows",
        min=0,
        help="MinHash channel: stored rows whose signatures are cached in memory for its "
        "filter (~0.5 KB each; 0: none). Decisions do not depend on it.",
    ),
    histogram_cache_rows: int = typer.Option(
        131_072,
        "--histogram-cache-rows",
        min=0,
        help="MinHash channel: verified stored rows whose token histograms are cached in "
        "memory to turn SimHash hits down unread (1,044 bytes each; 0: none). Decisions do not "
        "depend on it.",
    ),
    graceful_timeout: float = typer.Option(
        30.0, "--graceful-timeout", help="Seconds to let in-flight requests finish at shutdown."
    ),
    repair: bool = typer.Option(
        False,
        "--repair",
        help="Open a store whose log is damaged mid-way by truncating it at the damage (loses what follows).",
    ),
    verify_meta: bool | None = typer.Option(
        None,
        "--verify-meta/--no-verify-meta",
        help="Run SQLite's quick_check of each namespace's metadata database, and read the "
        "segments' checksums, on every open (all of it: minutes once it outgrows the page "
        "cache); off: no quick_check (neardup store verify checks it offline). Default: "
        "unless the files passed since the machine started, so a restart after a crash skips "
        "them and one after a reboot runs them.",
    ),
    read_threads: int = typer.Option(
        4,
        "--read-threads",
        help="Connections to each namespace's metadata database that a read of many rows (a "
        "batch's candidates) is spread over, each on its own thread: rows read from the disk "
        "come in sooner once the database outgrows the page cache (1..64; 1: one after "
        "another).",
    ),
    resident_summaries: bool = typer.Option(
        False,
        "--resident-summaries/--no-resident-summaries",
        help="Hold each namespace's long rows' summaries in memory (loaded in the background "
        "after the open; ~630 bytes a row of 512+ tokens), so that a long text's SimHash "
        "neighbours are turned down without reading SQLite (off by default: that memory comes "
        "out of the page cache).",
    ),
    max_connections: int | None = typer.Option(
        None,
        "--max-connections",
        help="Connections open at once; one more is answered 503 and closed (default: the "
        "descriptor limit less 256, at most 4096).",
    ),
    header_timeout: float = typer.Option(
        10.0, "--header-timeout", help="Seconds for a request head to arrive (0: no limit)."
    ),
    body_timeout: float = typer.Option(
        60.0, "--body-timeout", help="Seconds for a request body to arrive (0: no limit)."
    ),
    keep_alive_timeout: float = typer.Option(
        5.0, "--keep-alive-timeout", help="Seconds an idle keep-alive connection is kept."
    ),
    read_rate: float = typer.Option(
        50.0,
        "--read-rate",
        help="Per client address: cost units/s for reads without a valid token (a request "
        "costs 1 + 1 per 64 KiB of body); 429 beyond. 0 disables.",
    ),
    read_burst: float = typer.Option(
        200.0, "--read-burst", help="Per client address: units a client may spend at once."
    ),
    seed: list[str] = typer.Option(
        [],
        "--seed",
        help="Files to seed the default namespace with before serving, keep-first, when it "
        "holds no documents (repeatable; as neardup store load reads them).",
    ),
    seed_time_field: str | None = typer.Option(
        None,
        "--seed-time-field",
        help="Field holding each seed record's time (unix seconds or ISO 8601 with an offset); "
        "default: the seed's time. Records older than the window are left out.",
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error."),
) -> None:
    """Serve check / insert / check-and-insert over HTTP (FastAPI + uvicorn, one worker)."""
    from ..errors import ConfigError
    from ..online.settings import DedupSettings
    from ..service.config import ServiceConfig, parse_size
    from ..service.server import run_server
    from ..store import StoreSettings, parse_duration

    token, read_token = auth_settings(token, read_token, token_file, open_reads, no_auth)
    if verify and not store_text:
        typer.echo(
            "neardup: warning: --no-store-text keeps no texts to verify stored documents "
            "against: a new namespace's candidates among stored documents are decided by the "
            "SimHash distance alone (only documents of one request are verified on their "
            "texts); pass --no-verify to say so, or drop --no-store-text",
            err=True,
        )
    store = StoreSettings(
        retention=parse_duration(retention, name="--retention"),
        allow_retention_change=allow_retention_change,
        compress_tables=compress_tables,
        repair=repair,
        verify_meta=verify_meta,
        read_threads=read_threads,
        resident_summaries=resident_summaries,
    )
    dedup = DedupSettings(
        max_distance=max_distance,
        candidate_radius=candidate_radius,
        candidates=candidates,
        verify=verify,
        store_text=store_text,
        commit_interval_ms=commit_interval_ms,
        signature_cache_rows=signature_cache_rows,
        histogram_cache_rows=histogram_cache_rows,
        lsh_bands=lsh_bands,
        lsh_rows=lsh_rows,
        store=store,
    )
    config = ServiceConfig(
        data_dir=data,
        host=host,
        port=port,
        token=token,
        read_token=read_token,
        token_file=token_file,
        open_reads=open_reads,
        dedup=dedup,
        max_body_bytes=parse_size(max_body_bytes),
        max_batch=max_batch,
        namespaces=tuple(namespace),
        graceful_timeout_s=graceful_timeout,
        max_connections=max_connections,
        header_timeout_s=header_timeout,
        body_timeout_s=body_timeout,
        keep_alive_timeout_s=keep_alive_timeout,
        read_rate=read_rate,
        read_burst=read_burst,
    )
    require_a_token(config.authenticated, no_auth, "neardup serve")
    if seed:
        _seed(config, seed, seed_time_field)
    elif seed_time_field is not None:
        raise ConfigError("--seed-time-field names a field of the --seed files: pass --seed")
    run_server(config, log_level=log_level)


def _seed(config: Any, inputs: list[str], time_field: str | None) -> None:
    """``--seed``: :func:`neardup.incremental.load_files` into the default namespace (when it
    holds no documents, or a seed into it stopped part way: that one is finished), before the
    port is bound."""
    from .. import _jit
    from ..incremental import load_files
    from ..service.namespaces import NAMESPACES_DIR
    from .dedup_cmd import _first_compile

    store = config.data_path / NAMESPACES_DIR / "default"
    # a cold kernel cache: the seed says it compiles, as neardup store load does
    _jit.announce_compiles(_first_compile, "load")
    try:
        stats = load_files(
            inputs, store, settings=config.dedup, time_field=time_field,
            drop_expired=time_field is not None, if_empty=True,
        )  # fmt: skip
    finally:
        _jit.announce_compiles(None)
    if stats["path"] is None:
        typer.echo(
            f"--seed: namespace 'default' already holds {stats['store_documents_before']:,} "
            "documents; not seeded again",
            err=True,
        )
    else:
        resumed = stats.get("resumed")
        typer.echo(
            f"--seed: {stats['loaded']:,} of {stats['documents']:,} documents loaded into "
            f"namespace 'default' ({stats['dropped']:,} near duplicates, {stats['expired']:,} "
            f"expired) in {stats['elapsed_s']:.1f} s"
            + (
                ""
                if resumed is None
                else f", finishing a seed that had stopped after {resumed['documents']:,} "
                f"documents ({resumed['loaded']:,} kept)"
            ),
            err=True,
        )


def register(app: typer.Typer) -> None:
    """Add ``neardup serve`` to the CLI."""
    app.command("serve")(serve)
