"""``neardup serve``: run the HTTP service on one data directory (one writer, one process).

The port is bound first (a busy port is one ``neardup: error:`` line and exit code 2 at once,
before a long store open), then every store is opened, and only then does the server listen:
a corrupt or unreadable store is reported as a normal CLI error (message on stderr, non-zero
exit code from :mod:`neardup.cli.main`) and the server never serves from it. SIGTERM / SIGINT
stop accepting connections, let in-flight requests finish (``--graceful-timeout``), then flush
and close every store.

Authentication (:mod:`neardup.service.auth`): a server needs a token (``--token`` /
``NEARDUP_TOKEN``, ``--read-token``, ``--token-file``) unless ``--no-auth`` says to serve
without one (logged as a warning).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

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

__all__ = ["SERVE_GC_THRESHOLDS", "register", "serve"]

#: ``gc.set_threshold`` while serving: CPython's young-generation defaults, and a full
#: collection only every 1,000 second-generation collections (default 10)
SERVE_GC_THRESHOLDS = (700, 10, 1000)


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
    graceful_timeout: float = typer.Option(
        30.0, "--graceful-timeout", help="Seconds to let in-flight requests finish at shutdown."
    ),
    repair: bool = typer.Option(
        False,
        "--repair",
        help="Open a store whose log is damaged mid-way by truncating it at the damage (loses what follows).",
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
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error."),
) -> None:
    """Serve check / insert / check-and-insert over HTTP (FastAPI + uvicorn, one worker)."""
    import gc
    import logging
    import signal
    import sys
    import time

    t0 = time.perf_counter()
    from ..errors import ConfigError, require

    uvicorn = require("uvicorn", "service", "neardup serve")
    from ..service.app import create_app
    from ..service.config import ServiceConfig, parse_size
    from ..service.metrics import process_rss_bytes
    from ..service.namespaces import NamespaceRegistry

    level = log_level.lower()
    if level not in ("debug", "info", "warning", "error"):
        raise ConfigError(f"--log-level must be debug, info, warning or error, got {log_level!r}")
    # configure neardup's own loggers only (a root DEBUG level would make numba very chatty)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    pkg_log = logging.getLogger("neardup")
    pkg_log.setLevel(level.upper())
    pkg_log.addHandler(handler)
    pkg_log.propagate = False
    log = logging.getLogger("neardup.service")

    token, read_token = auth_settings(token, read_token, token_file, open_reads, no_auth)
    from ..service.connections import raise_fd_limit, uvicorn_config

    fd_limit = raise_fd_limit()
    config = ServiceConfig(
        data_dir=data,
        host=host,
        port=port,
        token=token,
        read_token=read_token,
        token_file=token_file,
        open_reads=open_reads,
        retention=retention,
        max_distance=max_distance,
        candidate_radius=candidate_radius,
        candidates=candidates,
        compress_tables=compress_tables,
        verify=verify,
        store_text=store_text,
        max_body_bytes=parse_size(max_body_bytes),
        max_batch=max_batch,
        namespaces=tuple(namespace),
        commit_interval_ms=commit_interval_ms,
        graceful_timeout_s=graceful_timeout,
        repair=repair,
        max_connections=max_connections,
        header_timeout_s=header_timeout,
        body_timeout_s=body_timeout,
        keep_alive_timeout_s=keep_alive_timeout,
        read_rate=read_rate,
        read_burst=read_burst,
        allow_retention_change=allow_retention_change,
    )
    require_a_token(getattr(config, "authenticated", False), no_auth, "neardup serve")
    # the token file is read (and refused with the file and line named) before anything else
    from ..service.auth import authenticator_for, token_file_is_private

    authenticator_for(token, read_token, token_file, open_reads=open_reads)
    if token_file is not None and not token_file_is_private(token_file):
        log.warning("%s: the token file can be read by other users; chmod 600 it", token_file)
    sock = bind_socket(host, port)  # a busy port fails here, before the stores are opened
    try:
        registry = NamespaceRegistry(config)
        registry.open()  # raises CorruptFileError / StorageError / ... before anything is served
    except BaseException:
        sock.close()
        raise
    log.info(
        "opened %s in %.2f s: namespaces %s, %d documents, RSS %.1f MiB (pid %d)",
        data,
        time.perf_counter() - t0,
        ", ".join(registry.names()),
        registry.total_documents(),
        process_rss_bytes() / 2**20,
        os.getpid(),
    )
    # Everything allocated so far (modules, stores, warm-up) lives as long as the server: move
    # it out of the cyclic garbage collector's generations, so that a full collection while
    # serving scans only the objects created since (a full collection over the start-up
    # objects holds the GIL long enough to be a latency spike for every request in flight;
    # the single-document tail of benchmarks/bench_service.py shows it).
    gc.collect()
    gc.freeze()
    # While serving, garbage is acyclic or dies young (full collections found next to nothing
    # to free), but each full collection walks every tracked object created since start-up
    # and holds the GIL meanwhile: the single-document tail (benchmarks/bench_service.py).
    # Young collections stay as they are; full ones become rare.
    gc.set_threshold(*SERVE_GC_THRESHOLDS)
    if no_auth:
        log.warning(
            "--no-auth: serving without authentication on %s:%d; anyone who can connect can "
            "read every stored text and write",
            host,
            port,
        )
    elif open_reads:
        log.warning(
            "--open-reads: reads (stored texts, checks, exports, namespace statistics) need no "
            "token on %s:%d",
            host,
            port,
        )
    app = create_app(config, registry=registry)
    loop_impl, http_impl = _fast_implementations()
    log.info("event loop: %s, HTTP parser: %s", loop_impl, http_impl)
    from ..service.connections import default_max_connections

    log.info(
        "limits: %d connections (descriptor limit %d), head %.0f s, body %.0f s, keep-alive "
        "%.0f s, %s",
        config.max_connections or default_max_connections(fd_limit),
        fd_limit,
        config.header_timeout_s,
        config.body_timeout_s,
        config.keep_alive_timeout_s,
        f"{config.read_rate:g}/s (burst {config.read_burst:g}) per client without a token"
        if config.read_rate > 0
        else "no per-client rate limit",
    )
    server = uvicorn.Server(
        uvicorn_config(
            app,
            config,
            host=host,
            port=port,
            loop=loop_impl,
            http=http_impl,
            # loopback by default and no client address is used: skip the X-Forwarded-* layer
            proxy_headers=False,
            workers=1,
            log_level=level,
            access_log=level == "debug",
            lifespan="on",
            timeout_graceful_shutdown=int(max(1, graceful_timeout)),
            server_header=False,
        )
    )
    # uvicorn re-raises the signal that stopped it after its graceful shutdown; with this
    # handler in place a SIGTERM'd server exits 0 once everything is flushed and closed.
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        registry.close()  # idempotent: the app's shutdown normally did it already
    if not server.started:
        from ..errors import ServiceUnavailableError

        raise ServiceUnavailableError(
            f"the server on {host}:{port} stopped before it started serving; see the log above"
        )


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (not listening yet), or a :class:`ConfigError` that
    names the address and says what to do (a busy port: another server, or --port)."""
    from ..errors import ConfigError

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(f"--host {host!r} cannot be resolved ({exc.strerror})") from None
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        import errno

        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"cannot listen on {host}:{port}: the address is already in use (another "
                "neardup serve?); stop that process or pick another --port"
            ) from None
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; check --host and --port"
        ) from None
    sock.set_inheritable(True)
    return sock


def _fast_implementations() -> tuple[str, str]:
    """uvicorn's event loop and HTTP parser: ``uvloop`` and ``httptools`` when installed
    (faster per request, see ``benchmarks/bench_service.py``; ``pip install
    'neardup[service]'`` brings them), else the
    pure-Python ``asyncio`` loop and ``h11`` parser."""
    import importlib.util

    loop_impl = "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"
    http_impl = "httptools" if importlib.util.find_spec("httptools") is not None else "h11"
    return loop_impl, http_impl


def register(app: typer.Typer) -> None:
    """Add ``neardup serve`` to the CLI."""
    app.command("serve")(serve)
