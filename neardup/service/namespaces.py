"""Namespaces: independent indexes, one :class:`~neardup.online.Deduplicator` each.

On disk a namespace ``NAME`` lives in ``DATA_DIR/namespaces/NAME/``. At startup the registry opens
every namespace found there plus the configured ones (``default`` always). Other namespaces are
created explicitly (``PUT /v1/ns/{name}``), so a typo in a namespace name is a 404, never a new
empty index.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import (
    ConfigError,
    IndexStateError,
    NeardupError,
    NotFoundError,
    ServiceUnavailableError,
    StorageError,
)
from .config import NAMESPACE_PATTERN, ServiceConfig, validate_namespace

__all__ = ["NamespaceRegistry"]

log = logging.getLogger("neardup.service")

#: sub-directory of the data directory that holds one directory per namespace
NAMESPACES_DIR = "namespaces"


def _default_factory(config: ServiceConfig, path: Path | None) -> Any:
    from ..online.deduplicator import Deduplicator

    return Deduplicator.open(path, config.dedup)


def _say_stopped_load(name: str, path: Path) -> None:
    """Warn when a load into the namespace stopped part way (its journal is there): the
    namespace holds only what the load had stored, and ``--resume`` finishes it."""
    from ..errors import NeardupError
    from ..incremental.journal import DEDUP_SAVE, JOURNAL_NAME, LoadJournal

    if not (path / JOURNAL_NAME).exists():
        return
    try:
        stopped = LoadJournal.read(path)
    except NeardupError as exc:  # a damaged journal: said, the namespace served as it is
        log.warning("namespace %r: %s", name, exc)
        return
    if stopped is None:  # (removed since)
        return
    finish = (
        f"neardup dedup INPUT... --save {path} --resume"
        if stopped.command == DEDUP_SAVE
        else f"neardup store load DATA INPUT... --namespace {name} --resume"
    )
    log.warning(
        "namespace %r: in %s, %s (%s): it holds only what that run had stored; stop the "
        "server and finish it with %s (the same inputs and options)",
        name, path, stopped.said(), path / JOURNAL_NAME, finish,
    )  # fmt: skip


#: a served data folder's lock file: the server holds it exclusively while it runs; the store
#: commands that write (load, repair) take it shared, so each refuses the other whole, where
#: the namespaces' own locks covered only the namespaces the server had opened (a load into a
#: new namespace of a served folder went ahead)
SERVING_LOCK = ".serving.lock"


def _lock_serving(data: Path, exclusive: bool) -> int | None:
    """The descriptor holding ``data``'s serving lock (None: not lockable here, e.g. no
    ``fcntl``); :class:`IndexStateError` when the other side holds it."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return None
    try:
        fd = os.open(data / SERVING_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return None  # a read-only folder: the namespaces' own locks still apply
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise IndexStateError(
            f"data directory {data} is served by a running neardup serve; stop the server first"
            if not exclusive
            else f"data directory {data} is being written by a neardup store command (load, "
            "repair) or served by another server; wait for it or stop it first"
        ) from None
    return fd


@contextlib.contextmanager
def not_served(data: Path) -> Any:
    """Hold ``data``'s serving lock shared for a block that writes its stores with the server
    stopped (``neardup store load``, ``store repair``): :class:`IndexStateError` (exit 5) when a
    server runs on it."""
    fd = _lock_serving(Path(data), exclusive=False) if Path(data).is_dir() else None
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


class NamespaceRegistry:
    """Maps namespace names to open deduplicators.

    Parameters
    ----------
    config : ServiceConfig
        Data directory and the settings each namespace's deduplicator is opened with.
    factory : callable, optional
        ``factory(config, path_or_None) -> Deduplicator``; tests may pass their own.

    The constructor does no I/O; call :meth:`open` to open the stores and :meth:`close` to
    flush and close them.
    """

    def __init__(
        self,
        config: ServiceConfig,
        *,
        factory: Callable[[ServiceConfig, Path | None], Any] | None = None,
    ) -> None:
        self.config = config
        self._factory = factory or _default_factory
        self._lock = threading.Lock()
        self._stores: dict[str, Any] = {}
        self._closed = False
        self._opened = False
        self._serving: int | None = None  # the data folder's serving lock, while open

    # -- lifecycle ---------------------------------------------------------------------------
    def _root(self) -> Path | None:
        path = self.config.data_path
        return None if path is None else path / NAMESPACES_DIR

    def discover(self) -> list[str]:
        """Names of the namespaces present in the data directory (sorted)."""
        root = self._root()
        if root is None or not root.is_dir():
            return []
        return sorted(
            p.name for p in root.iterdir() if p.is_dir() and NAMESPACE_PATTERN.fullmatch(p.name)
        )

    def open(self) -> None:
        """Open every existing and configured namespace; on any failure close what was opened.

        Raises
        ------
        ConfigError
            The data directory is not a directory.
        StorageError
            The data directory cannot be created.
        FormatError
            A store is corrupt or of an unsupported version (from the deduplicator).
        """
        if self._opened:
            return
        data = self.config.data_path
        if data is not None:
            if data.exists() and not data.is_dir():
                raise ConfigError(
                    f"--data {str(data)!r} exists and is not a directory; pass a directory"
                )
            try:
                (data / NAMESPACES_DIR).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                if not (data / NAMESPACES_DIR).is_dir():
                    raise StorageError(
                        f"cannot create the data directory {str(data / NAMESPACES_DIR)!r}: {exc.strerror}; "
                        "check the path and its permissions"
                    ) from exc
            self._serving = _lock_serving(data, exclusive=True)
        names = list(dict.fromkeys([*self.config.namespaces, *self.discover()]))
        try:
            for name in names:
                self._open_one(name)
        except BaseException:
            self.close()
            raise
        self._opened = True

    def _open_one(self, name: str) -> Any:
        root = self._root()
        path = None if root is None else root / name
        if path is not None:
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                if not path.is_dir():
                    raise StorageError(
                        f"cannot create namespace directory {str(path)!r}: {exc.strerror}"
                    ) from exc
        try:
            store = self._factory(self.config, path)
        except NeardupError as exc:
            # say which namespace failed; keep the class (status / exit code) of the error
            exc.args = (f"namespace {name!r} ({path}): {exc}",)
            raise
        self._stores[name] = store
        _warm_up(store)
        log.info("opened namespace %r (%d documents)", name, _safe_len(store))
        if path is not None:
            _say_stopped_load(name, path)
        return store

    def close(self) -> None:
        """Flush and close every deduplicator (idempotent). Errors are logged, not raised."""
        with self._lock:
            self._closed = True
            stores, self._stores = self._stores, {}
        for name, store in stores.items():
            try:
                store.close()
                log.info("closed namespace %r", name)
            except Exception:  # keep closing the others
                log.exception("error while closing namespace %r", name)
        fd, self._serving = self._serving, None
        if fd is not None:
            os.close(fd)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called (the server is shutting down)."""
        return self._closed

    # -- lookup ------------------------------------------------------------------------------
    def get(self, name: str) -> Any:
        """The deduplicator of namespace ``name``.

        Raises
        ------
        NotFoundError
            No such namespace.
        ServiceUnavailableError
            The registry is closed (the server is shutting down).
        """
        store = self._stores.get(name)
        if store is not None:
            return store
        if self._closed:
            raise ServiceUnavailableError(
                "the server is shutting down; retry against a running server"
            )
        raise NotFoundError(
            f"namespace {name!r} does not exist; create it with PUT /v1/ns/{name} "
            "(needs the write token) or start the server with --namespace " + name
        )

    def create(self, name: str) -> bool:
        """Create (and open) namespace ``name``; return False when it already existed."""
        validate_namespace(name)
        with self._lock:
            if self._closed:
                raise ServiceUnavailableError(
                    "the server is shutting down; retry against a running server"
                )
            if name in self._stores:
                return False
            self._open_one(name)
            return True

    def names(self) -> list[str]:
        """Open namespace names, sorted."""
        return sorted(self._stores)

    def items(self) -> list[tuple[str, Any]]:
        """``(name, deduplicator)`` pairs, sorted by name."""
        return sorted(self._stores.items())

    def __contains__(self, name: object) -> bool:
        return name in self._stores

    def __len__(self) -> int:
        return len(self._stores)

    def stats(self) -> dict[str, dict[str, Any]]:
        """``{namespace: deduplicator.stats()}``; a failing ``stats()`` yields ``{}``."""
        out: dict[str, dict[str, Any]] = {}
        for name, store in self.items():
            try:
                out[name] = dict(store.stats())
            except Exception:
                log.exception("stats() failed for namespace %r", name)
                out[name] = {}
        return out

    def total_documents(self) -> int:
        """Documents over all namespaces."""
        return sum(_safe_len(s) for _, s in self.items())


def _warm_up(store: Any) -> None:
    """One read-only check, so that JIT compilation / cache loading happens before serving."""
    try:
        store.check([{"id": "__neardup_warmup__", "text": "warm up the fingerprinter 预热"}])
    except Exception:  # never fail startup because of the warm-up itself
        log.debug("warm-up check failed", exc_info=True)


def _safe_len(store: Any) -> int:
    try:
        return len(store)
    except Exception:
        return -1
