"""One exception tree for neardup, and the one place that maps it to exit codes and HTTP statuses.

::

    NeardupError
    ├── ConfigError (ValueError)            bad parameter or option: says the rule, the value, the fix
    ├── InputError (ValueError)             bad data handed to the library (``field`` names it, if known)
    │   ├── InputTypeError (TypeError)      wrong type (e.g. a non-str text), names the position
    │   ├── RecordError                     a malformed record in a file: names file and line
    │   └── PayloadTooLargeError            a request body or batch over the configured limit
    ├── NotFoundError (KeyError)            unknown id or namespace
    ├── IndexStateError                     the operation is not valid in the object's current state
    ├── FormatError                         an on-disk file neardup cannot use
    │   ├── CorruptFileError                checksum / length / magic mismatch, truncated file
    │   │   └── CorruptRecordError          one stored document fails its checksum: names the store and id
    │   └── UnsupportedVersionError         a format version this build does not read
    ├── StorageError                        disk full, read-only directory, fsync failure: nothing acknowledged
    ├── ServiceUnavailableError             a shard / node / service cannot be reached
    ├── AuthError (PermissionError)         no valid bearer token (HTTP 401)
    │   └── ForbiddenError                  a valid token without the right to this (HTTP 403)
    └── MissingDependencyError (ImportError) an optional extra is not installed; says what to pip install

The CLI (:mod:`neardup.cli.main`) and the HTTP service (:mod:`neardup.service`) both call
:func:`exit_code_for` / :func:`http_status_for`; no other module decides those numbers.
"""

from __future__ import annotations

from types import ModuleType

__all__ = [
    "AuthError",
    "ConfigError",
    "CorruptFileError",
    "CorruptRecordError",
    "ForbiddenError",
    "FormatError",
    "IndexStateError",
    "InputError",
    "InputTypeError",
    "MissingDependencyError",
    "NeardupError",
    "NotFoundError",
    "PayloadTooLargeError",
    "RecordError",
    "ServiceUnavailableError",
    "StorageError",
    "UnsupportedVersionError",
    "error_code",
    "exit_code_for",
    "http_status_for",
    "require",
]


class NeardupError(Exception):
    """Base class of every error neardup raises on purpose."""

    #: short machine-readable code used in HTTP error bodies and CLI output
    code: str = "neardup_error"


class ConfigError(NeardupError, ValueError):
    """A parameter or option is invalid. The message states the rule, the value and the fix."""

    code = "invalid_config"


class InputError(NeardupError, ValueError):
    """Data handed to neardup cannot be used as it is.

    ``field``, when known, names the offending field relative to what was handed over, e.g.
    ``documents[3].id`` (the HTTP service answers it in ``error.field``).
    """

    code = "invalid_input"
    field: str | None = None

    def __init__(self, *args: object, field: str | None = None) -> None:
        super().__init__(*args)
        self.field = field


class InputTypeError(InputError, TypeError):
    """An input has the wrong type (for example a non-str text); the message names its position."""

    code = "invalid_type"


class RecordError(InputError):
    """A record in an input file is malformed; carries the file name and line (or record) number."""

    code = "invalid_record"

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(f"{where}{message}")
        self.path = path
        self.line = line


class PayloadTooLargeError(InputError):
    """A request body or batch is larger than the server accepts (HTTP 413)."""

    code = "payload_too_large"


class NotFoundError(NeardupError, KeyError):
    """An id, namespace or file does not exist."""

    code = "not_found"

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "not found"


class IndexStateError(NeardupError):
    """The operation is not valid in the object's current state (e.g. writing to a read-only index)."""

    code = "invalid_state"


class FormatError(NeardupError):
    """An on-disk file is not one neardup can use."""

    code = "bad_format"


class CorruptFileError(FormatError):
    """A file failed a checksum, length or magic check; it is never silently used."""

    code = "corrupt_file"


class CorruptRecordError(CorruptFileError):
    """One stored document (its text, metadata or id) fails its checksum: it is never served
    changed. Names the store and the document; ``neardup store repair`` salvages the store.
    HTTP 503: another replica (or a repaired store) can answer."""

    code = "corrupt_record"

    def __init__(
        self, message: str, *, doc_id: str | None = None, rowid: int | None = None
    ) -> None:
        super().__init__(message)
        self.doc_id = doc_id
        self.rowid = rowid


class UnsupportedVersionError(FormatError):
    """A file's format version is newer (or older) than this build reads."""

    code = "unsupported_version"


class StorageError(NeardupError):
    """The store cannot durably write (disk full, read-only directory, fsync failure).

    Nothing was acknowledged for the failed write; earlier acknowledged writes are intact.
    """

    code = "storage_unavailable"


class ServiceUnavailableError(NeardupError):
    """A shard, node or the service itself cannot be reached or is shutting down."""

    code = "service_unavailable"


class AuthError(NeardupError, PermissionError):
    """A request that needs a bearer token came without a valid one (HTTP 401)."""

    code = "unauthorized"


class ForbiddenError(AuthError):
    """A valid bearer token that does not allow this request: a read-only token writing, or a
    token scoped to other namespaces (HTTP 403)."""

    code = "forbidden"


class MissingDependencyError(NeardupError, ImportError):
    """An optional dependency is missing; the message says which extra to install."""

    code = "missing_dependency"


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import an optional dependency or raise :class:`MissingDependencyError` with an install hint.

    >>> require("json", "core", "JSON output").__name__
    'json'
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{feature} needs the '{module}' package; install it with "
            f"`pip install 'neardup[{extra}]'`"
        ) from exc


# ---------------------------------------------------------------------------------------------
# The one mapping from errors to exit codes and HTTP statuses.
# Order matters: the first matching class wins, so subclasses come before their bases.
_MAPPING: tuple[tuple[type[BaseException], int, int], ...] = (
    # (class, CLI exit code, HTTP status)
    (InputTypeError, 2, 422),
    (RecordError, 3, 422),
    (PayloadTooLargeError, 3, 413),
    (ConfigError, 2, 422),
    (InputError, 3, 422),
    (NotFoundError, 4, 404),
    (IndexStateError, 5, 409),
    (CorruptRecordError, 6, 503),
    (CorruptFileError, 6, 500),
    (UnsupportedVersionError, 6, 500),
    (FormatError, 6, 500),
    (StorageError, 7, 503),
    (ServiceUnavailableError, 8, 503),
    (ForbiddenError, 10, 403),
    (AuthError, 10, 401),
    (MissingDependencyError, 9, 501),
    (NeardupError, 1, 500),
)


def exit_code_for(exc: BaseException) -> int:
    """CLI exit code for an exception (1 for anything that is not a :class:`NeardupError`)."""
    for cls, code, _status in _MAPPING:
        if isinstance(exc, cls):
            return code
    return 1


def http_status_for(exc: BaseException) -> int:
    """HTTP status for an exception (500 for anything that is not a :class:`NeardupError`)."""
    for cls, _code, status in _MAPPING:
        if isinstance(exc, cls):
            return status
    return 500


def error_code(exc: BaseException) -> str:
    """Machine-readable error code for JSON error bodies."""
    return exc.code if isinstance(exc, NeardupError) else "internal_error"
