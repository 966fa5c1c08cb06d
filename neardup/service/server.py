"""Running the service: :func:`run_server` binds the port, opens every namespace, serves until
SIGTERM / SIGINT, then flushes and closes the stores. ``neardup serve`` is a thin shell over it
(it parses the options into a :class:`~neardup.service.ServiceConfig`).

The port is bound first (a busy port is a :class:`ConfigError` at once, before a long store
open), then every store is opened, and only then does the server listen: a corrupt or
unreadable store is raised as its :class:`NeardupError` and the server never serves from it.
SIGTERM / SIGINT stop accepting connections, let in-flight requests finish
(``graceful_timeout_s``), then flush and close every store (the application's lifespan,
:func:`neardup.service.app.create_app`).
"""

from __future__ import annotations

import errno
import importlib.util
import logging
import os
import signal
import socket
import sys
import time
from typing import Any

from .._gc import settle
from ..errors import ConfigError, ServiceUnavailableError, require
from .config import ServiceConfig

__all__ = ["LOG_LEVELS", "bind_socket", "run_server"]

#: the log levels :func:`run_server` takes
LOG_LEVELS = ("debug", "info", "warning", "error")


def run_server(config: ServiceConfig, *, log_level: str = "info") -> None:
    """Serve ``config`` until SIGTERM / SIGINT (the module docs), logging at ``log_level``
    (``debug``, ``info``, ``warning`` or ``error``) to stderr.

    Raises
    ------
    ConfigError
        A bad log level, token file, host or busy port (before any store is opened).
    NeardupError
        A store that cannot be opened (corrupt, unsupported, the disk refuses).
    ServiceUnavailableError
        The server stopped before it started serving.
    """
    t0 = time.perf_counter()
    uvicorn = require("uvicorn", "service", "neardup serve")
    level = log_level.lower()
    if level not in LOG_LEVELS:
        raise ConfigError(f"--log-level must be debug, info, warning or error, got {log_level!r}")
    log = _configure_logging(level)
    from .._jit import announce_compiles, compile_seconds, stop_helper
    from ..online.warm import start_serve_helper
    from .app import create_app
    from .auth import authenticator_for, token_file_is_private
    from .connections import default_max_connections, raise_fd_limit, uvicorn_config
    from .metrics import process_rss_bytes
    from .namespaces import NamespaceRegistry

    fd_limit = raise_fd_limit()
    # the token file is read (and refused with the file and line named) before anything else
    authenticator_for(
        config.token, config.read_token, config.token_file, open_reads=config.open_reads
    )
    if config.token_file is not None and not token_file_is_private(config.token_file):
        log.warning(
            "%s: the token file can be read by other users; chmod 600 it", config.token_file
        )
    host, port = config.host, config.port
    sock = bind_socket(host, port)  # a busy port fails here, before the stores are opened
    # a cold kernel cache: the warm-up of every namespace compiles what requests need before
    # anything is served (a minute on a small machine); say so when it starts, not silence,
    # and start a helper that compiles the same kernels last first (neardup.online.warm)
    helper: list[Any] = []

    def compiling(notice: str) -> None:
        log.warning(notice)
        helper.append(start_serve_helper(config.dedup))

    announce_compiles(compiling, "serve")
    try:
        registry = NamespaceRegistry(config)
        registry.open()  # raises CorruptFileError / StorageError / ... before anything is served
    except BaseException:
        sock.close()
        raise
    finally:
        announce_compiles(None)
        for h in helper:
            stop_helper(h)
    if compile_seconds():
        log.info("compiled kernels in %.1f s (cached for the next start)", compile_seconds())
    log.info(
        "opened %s in %.2f s: namespaces %s, %d documents, RSS %.1f MiB (pid %d)",
        config.data_dir,
        time.perf_counter() - t0,
        ", ".join(registry.names()),
        registry.total_documents(),
        process_rss_bytes() / 2**20,
        os.getpid(),
    )
    # Everything allocated so far (modules, stores, warm-up) lives as long as the server: out
    # of the collector's generations, and full collections made rare (neardup._gc: each one
    # holds the GIL long enough to be a latency spike for every request in flight; the
    # single-document tail of benchmarks/bench_service.py shows it)
    settle()
    if not config.authenticated:
        log.warning(
            "--no-auth: serving without authentication on %s:%d; anyone who can connect can "
            "read every stored text and write",
            host,
            port,
        )
    elif config.open_reads:
        log.warning(
            "--open-reads: reads (stored texts, checks, exports, namespace statistics) need no "
            "token on %s:%d",
            host,
            port,
        )
    app = create_app(config, registry=registry)
    loop_impl, http_impl = _fast_implementations()
    log.info("event loop: %s, HTTP parser: %s", loop_impl, http_impl)
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
            timeout_graceful_shutdown=int(max(1, config.graceful_timeout_s)),
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
        raise ServiceUnavailableError(
            f"the server on {host}:{port} stopped before it started serving; see the log above"
        )


def _configure_logging(level: str) -> logging.Logger:
    """neardup's own loggers to stderr at ``level`` (a root DEBUG level would make numba very
    chatty); returns the service's logger."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    pkg_log = logging.getLogger("neardup")
    pkg_log.setLevel(level.upper())
    pkg_log.addHandler(handler)
    pkg_log.propagate = False
    return logging.getLogger("neardup.service")


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (not listening yet), or a :class:`ConfigError` that
    names the address and says what to do (a busy port: another server, or --port)."""
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
    'neardup[service]'`` brings them), else the pure-Python ``asyncio`` loop and ``h11``
    parser."""
    loop_impl = "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"
    http_impl = "httptools" if importlib.util.find_spec("httptools") is not None else "h11"
    return loop_impl, http_impl
