"""Configuration of the HTTP service: one frozen dataclass, validated in one place.

:class:`ServiceConfig` only stores and checks values; it does no I/O. It holds the service's
own settings and, in :attr:`ServiceConfig.dedup`, the
:class:`~neardup.online.settings.DedupSettings` every namespace's deduplicator is opened with
(the store's settings inside those). ``neardup serve`` builds them from its flags,
:func:`neardup.service.app.create_app` takes one.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from ..online.settings import DedupSettings

__all__ = [
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_BODY_BYTES",
    "NAMESPACE_PATTERN",
    "ServiceConfig",
    "parse_size",
    "validate_namespace",
]

#: default request body limit (bytes); a 10,000-document batch of 1 KiB texts fits
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
#: default largest number of documents in one ``{"documents": [...]}`` body
DEFAULT_MAX_BATCH = 10_000
#: namespace names: lower-case letters, digits, ``_``, ``-`` and ``.``; 1-64 characters,
#: starting with a letter or digit (they become directory names)
NAMESPACE_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")  # whole names: fullmatch

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "m": 1000**2, "g": 1000**3}


def parse_size(value: int | str) -> int:
    """Parse a byte size such as ``1048576``, ``"512k"``, ``"32MiB"`` or ``"1g"``.

    ``k``/``m``/``g`` are powers of 1000, ``ki``/``mi``/``gi`` (optionally followed by ``b``)
    powers of 1024.

    >>> parse_size("32MiB"), parse_size("1k"), parse_size(7)
    (33554432, 1000, 7)
    """
    if isinstance(value, bool):
        raise ConfigError(
            f"a size must be a number of bytes or a string like '32MiB', got {value!r}"
        )
    if isinstance(value, int):
        return value
    m = _SIZE_RE.match(str(value))
    if not m:
        raise ConfigError(
            f"cannot read the size {value!r}; use a number of bytes or a string like "
            "'512k', '32MiB' or '1g'"
        )
    number, unit = float(m.group(1)), (m.group(2) or "").lower()
    base = unit[:1] if unit != "b" else "b"
    mult = _SIZE_UNITS[base] if "i" not in unit else 1024 ** {"k": 1, "m": 2, "g": 3}[base]
    return int(number * mult)


def validate_namespace(name: object) -> str:
    """Return ``name`` if it is a valid namespace name, else raise :class:`ConfigError`."""
    if not isinstance(name, str) or not NAMESPACE_PATTERN.fullmatch(name):
        raise ConfigError(
            f"namespace {name!r} is not a valid name: use 1-64 characters from a-z, 0-9, "
            "'_', '-' and '.', starting with a letter or digit"
        )
    return name


@dataclass(frozen=True)
class ServiceConfig:
    """Everything ``neardup serve`` needs to know.

    Parameters
    ----------
    data_dir : str or Path or None
        Directory holding one store per namespace (``DIR/namespaces/<name>/``).
        ``None`` keeps everything in memory (tests only: nothing is durable).
    host : str, default="127.0.0.1"
        Interface to bind; loopback by default.
    port : int, default=8080
        TCP port (0 lets the OS choose one).
    token : str or None, default=None
        The write token (it reads too, in every namespace): writes (insert, check-and-insert,
        delete, namespace creation) need ``Authorization: Bearer <token>`` of a token that may
        write, reads (check, get, export, namespace list and statistics, metrics) one that may
        read (:mod:`neardup.service.auth`).
    read_token : str or None, default=None
        A read-only token for every namespace (``neardup serve --read-token``).
    token_file : str or Path or None, default=None
        A token file (``neardup serve --token-file``): tokens with read or write access,
        each in every namespace or in the ones it lists (format: :mod:`neardup.service.auth`).
    open_reads : bool, default=False
        Reads need no token (``neardup serve --open-reads``); writes still need one.

    A configuration without any token (``token``, ``read_token`` and ``token_file`` all None)
    serves everything without authentication: ``neardup serve`` only builds one with
    ``--no-auth``, and :func:`~neardup.service.app.create_app` logs a warning.
    dedup : DedupSettings, default=DedupSettings()
        How each namespace's :class:`~neardup.online.Deduplicator` decides and its store is
        opened (candidate mode, distances, verification, group commit; retention, table
        compression, repair in ``dedup.store``).
    max_body_bytes : int, default=32 MiB
        Largest request body; larger bodies get 413 before they are parsed.
    max_batch : int, default=10,000
        Largest number of documents in one batch body; larger batches get 413.
    namespaces : tuple of str, default=("default",)
        Namespaces created at startup (``default`` is always there). Namespaces found in the
        data directory are opened too.
    graceful_timeout_s : float, default=30.0
        How long shutdown waits for in-flight requests before closing the stores.
    max_connections : int or None, default=None
        Connections open at once; one more is answered 503 and closed. None: the descriptor
        limit less a reserve, at most 4,096 (:func:`neardup.service.connections.default_max_connections`).
    header_timeout_s : float, default=10.0
        Seconds for a request head to arrive (from the connection, or its first byte); 0: none.
    body_timeout_s : float, default=60.0
        Seconds for a request body to arrive once its head is in; 0: none.
    keep_alive_timeout_s : float, default=5.0
        Seconds an idle keep-alive connection is kept open after a response.
    read_rate : float, default=50.0
        Per client address: cost units per second refilled for requests that carry no valid
        token (reads, and writes on a server without a token); a request costs 1 plus 1 per
        64 KiB of body. 0 disables the limit.
    read_burst : float, default=200.0
        Per client address: the bucket size (units a client may spend at once).
    """

    data_dir: str | Path | None
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None
    read_token: str | None = None
    token_file: str | Path | None = None
    open_reads: bool = False
    dedup: DedupSettings = field(default_factory=DedupSettings)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_batch: int = DEFAULT_MAX_BATCH
    namespaces: tuple[str, ...] = field(default=("default",))
    graceful_timeout_s: float = 30.0
    max_connections: int | None = None
    header_timeout_s: float = 10.0
    body_timeout_s: float = 60.0
    keep_alive_timeout_s: float = 5.0
    read_rate: float = 50.0
    read_burst: float = 200.0

    def __post_init__(self) -> None:
        if self.data_dir is not None and not isinstance(self.data_dir, str | Path):
            raise ConfigError(f"data_dir must be a path or None, got {self.data_dir!r}")
        if not isinstance(self.host, str) or not self.host:
            raise ConfigError(f"host must be a non-empty string, got {self.host!r}")
        if self.host not in ("localhost",):
            try:
                ipaddress.ip_address(self.host)
            except ValueError:
                if not re.fullmatch(r"[A-Za-z0-9.-]+", self.host):
                    raise ConfigError(
                        f"host {self.host!r} is neither an IP address nor a host name; "
                        "use e.g. 127.0.0.1 (default) or 0.0.0.0 to listen on all interfaces"
                    ) from None
        if (
            isinstance(self.port, bool)
            or not isinstance(self.port, int)
            or not 0 <= self.port <= 65535
        ):
            raise ConfigError(f"port must be an integer in [0, 65535], got {self.port!r}")
        for name in ("token", "read_token"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ConfigError(f"{name} must be a non-empty string or None, got {value!r}")
        if self.token_file is not None and not isinstance(self.token_file, str | Path):
            raise ConfigError(f"token_file must be a path or None, got {self.token_file!r}")
        if not isinstance(self.dedup, DedupSettings):
            raise ConfigError(
                "dedup must be a neardup.online.settings.DedupSettings, got "
                f"{type(self.dedup).__name__}"
            )
        for name, value, low in (
            ("max_body_bytes", self.max_body_bytes, 1024),
            ("max_batch", self.max_batch, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
        if not isinstance(self.namespaces, tuple):
            object.__setattr__(self, "namespaces", tuple(self.namespaces))
        for ns in self.namespaces:
            validate_namespace(ns)
        if "default" not in self.namespaces:
            object.__setattr__(self, "namespaces", ("default", *self.namespaces))
        if not isinstance(self.graceful_timeout_s, int | float) or self.graceful_timeout_s < 0:
            raise ConfigError(
                f"graceful_timeout_s must be a number >= 0, got {self.graceful_timeout_s!r}"
            )

        if self.max_connections is not None and (
            isinstance(self.max_connections, bool)
            or not isinstance(self.max_connections, int)
            or self.max_connections < 1
        ):
            raise ConfigError(
                f"max_connections must be a positive integer or None, got {self.max_connections!r}"
            )
        for name in (
            "header_timeout_s",
            "body_timeout_s",
            "keep_alive_timeout_s",
            "read_rate",
            "read_burst",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"{name} must be a number >= 0, got {value!r}")
        if self.read_rate > 0 and self.read_burst < 1:
            raise ConfigError(
                f"read_burst must be >= 1 when read_rate is set, got {self.read_burst!r}"
            )

    @property
    def authenticated(self) -> bool:
        """Whether any token is configured (False: everything is served without one)."""
        return self.token is not None or self.read_token is not None or self.token_file is not None

    @property
    def data_path(self) -> Path | None:
        """``data_dir`` as a :class:`~pathlib.Path` (``None`` when in memory)."""
        return None if self.data_dir is None else Path(self.data_dir)
