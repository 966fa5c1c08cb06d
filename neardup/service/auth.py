"""Who may do what: bearer tokens, their access (read or write) and their namespaces.

The service's one access rule, asked by the document hot path
(:class:`~neardup.service.documents.DocumentRoutes`), the FastAPI routes (through
:class:`fastapi.security.HTTPBearer`, which also puts the scheme in the OpenAPI document) and
the per-client rate limit:

* **reads** (``POST {p}/check`` -- a similarity oracle over the stored texts --, ``GET
  {p}/docs/{id}``, ``GET {p}/export``, ``GET /v1/ns``, ``GET /v1/ns/{namespace}``, ``GET
  /metrics``) need a token that may read the namespace, unless reads are open
  (``--open-reads``);
* **writes** (``{p}/insert``, ``{p}/check-and-insert``, ``DELETE {p}/docs/{id}``, ``PUT
  /v1/ns/{namespace}``) need a token that may write it;
* a server without any token (``neardup serve --no-auth``) is open to everyone.

A token may *write* (which includes reading) or only *read*, in every namespace (``*``) or in
the ones listed. ``--token`` / ``NEARDUP_TOKEN`` is a write token for every namespace (what the
cluster's nodes and router send each other), ``--read-token`` a read token for every namespace,
and ``--token-file`` lists any number of tokens (:func:`read_token_file`, format below).

A missing or unknown token is :class:`~neardup.errors.AuthError` (HTTP 401, ``WWW-Authenticate:
Bearer``); a known token that may not do this is :class:`~neardup.errors.ForbiddenError` (403).
Tokens are compared as bytes (the header's bytes as sent against the token's UTF-8, so a
non-ASCII token works) in constant time: the presented token's SHA-256 digest selects the
candidate and :func:`hmac.compare_digest` confirms it, so neither the lookup nor the comparison
depends on how much of a guess was right.

Token file (``neardup serve --token-file FILE``), UTF-8, one token per line::

    neardup-tokens 1
    # token                            access   namespaces
    9c1d4e...                          write    *
    0b7a31...                          read     tenant-a,tenant-b

The first line that is not blank or a ``#`` comment must be ``neardup-tokens 1`` (the format's
version). Each other line is a token (no spaces), ``read`` or ``write``, and ``*`` or a
comma-separated list of namespace names. A token appears once. Errors name the file and line.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..errors import ConfigError, ForbiddenError, UnsupportedVersionError
from .config import validate_namespace
from .http_errors import AuthError

__all__ = [
    "TOKEN_FILE_VERSION",
    "AuthError",
    "Authenticator",
    "ForbiddenError",
    "Grant",
    "authenticator_for",
    "header_bytes",
    "is_anonymous",
    "read_token_file",
]

#: the version of the token file format this build reads (its first line)
TOKEN_FILE_VERSION = 1
_HEADER = re.compile(r"^neardup-tokens\s+(\S+)$")
_ACCESS = ("read", "write")


def header_bytes(value: str) -> bytes:
    """The bytes of a header value as sent: ASGI servers decode them as latin-1 (which maps
    every byte to one character, so this is exact); a ``str`` that is not latin-1 (built by
    hand, e.g. in tests) is taken as UTF-8."""
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class Grant:
    """What one token may do: read (``write=False``) or write and read, in ``namespaces``
    (None: every namespace)."""

    write: bool
    namespaces: frozenset[str] | None = None

    @property
    def everywhere(self) -> bool:
        """Whether the grant covers every namespace (server-wide reads: ``/metrics``, the full
        ``/healthz``)."""
        return self.namespaces is None

    def allows(self, namespace: str, write: bool) -> bool:
        """Whether this grant may read (or, with ``write``, write) ``namespace``."""
        return (self.write or not write) and (
            self.namespaces is None or namespace in self.namespaces
        )

    def describe(self) -> str:
        where = "every namespace" if self.namespaces is None else ", ".join(sorted(self.namespaces))
        return f"{'read and write' if self.write else 'read'} in {where}"


#: the grants of requests without a (valid) token: everything on a server without tokens,
#: reads with ``--open-reads`` (:func:`is_anonymous` tells them from a token's grant)
OPEN = Grant(write=True)
_OPEN_READS = Grant(write=False)


def is_anonymous(grant: Grant) -> bool:
    """Whether ``grant`` is that of a request without a valid token (rate limited)."""
    return grant is OPEN or grant is _OPEN_READS


class _HeaderSource(Protocol):
    def get(self, name: str, /) -> str | None: ...


def _digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


class Authenticator:
    """The access rule of one server (see the module docstring).

    Parameters
    ----------
    tokens : mapping of str to Grant
        Every token and what it may do (empty: no authentication at all, everything open).
    open_reads : bool, default=False
        Reads need no token (``--open-reads``); writes still do.

    >>> a = Authenticator({"w": Grant(write=True), "r": Grant(False, frozenset({"a"}))})
    >>> a.authorize("Bearer r", "a", write=False).describe()
    'read in a'
    >>> a.authorize("Bearer r", "b", write=False)
    Traceback (most recent call last):
    ...
    neardup.errors.ForbiddenError: this token may read in a, not read namespace 'b'
    """

    def __init__(self, tokens: Mapping[str, Grant], *, open_reads: bool = False) -> None:
        self._grants: dict[bytes, tuple[bytes, Grant]] = {}
        for token, grant in tokens.items():
            raw = token.encode("utf-8", "surrogatepass")
            d = _digest(raw)
            self._grants[d] = (d, grant)
        self.enabled = bool(self._grants)
        self.open_reads = bool(open_reads) or not self.enabled
        #: whether any request may go without a token (the per-client rate limit applies)
        self.anonymous_reads = self.open_reads

    def grant(self, authorization: str | bytes | None) -> Grant | None:
        """The grant of an ``Authorization`` header value (``Bearer <token>``; the raw bytes
        of the header, or the ``str`` an ASGI server decoded as latin-1), or None when it
        carries no known token."""
        if not authorization or not self.enabled:
            return None
        if isinstance(authorization, bytes):  # the hot path hands the header's bytes over
            if authorization.startswith(b"Bearer "):
                return self.grant_of_token(authorization[7:].strip())
            authorization = authorization.decode("latin-1")
        if authorization.startswith("Bearer "):  # the usual spelling: no split, no lower()
            given = authorization[7:]
        else:
            scheme, _, given = authorization.partition(" ")
            if scheme.lower() != "bearer":
                return None
        return self.grant_of_token(header_bytes(given.strip()))

    def grant_of_token(self, token: bytes) -> Grant | None:
        """The grant of a presented token's bytes, or None (constant-time confirmation)."""
        d = _digest(token)
        hit = self._grants.get(d)
        if hit is None or not hmac.compare_digest(hit[0], d):
            return None
        return hit[1]

    def authorize(
        self, authorization: str | bytes | None, namespace: str | None, write: bool
    ) -> Grant:
        """The grant that allows a request to read (or ``write``) ``namespace`` (None: a
        server-wide read or write, which needs a grant for every namespace).

        Raises
        ------
        AuthError
            No valid token where one is needed (HTTP 401).
        ForbiddenError
            A valid token that may not do this (HTTP 403).
        """
        if not self.enabled:
            return OPEN
        grant = self.grant(authorization)
        if grant is None:
            if not write and self.open_reads:
                return _OPEN_READS
            raise AuthError(_missing(authorization, write))
        covers = (
            grant.everywhere and (grant.write or not write)
            if namespace is None
            else grant.allows(namespace, write)
        )
        if not covers and not write and self.open_reads:
            # reads are open: a token that does not cover this read reads as anyone may (it
            # was refused 403 where a request without a token was answered)
            return _OPEN_READS
        if namespace is None:
            if not grant.everywhere or (write and not grant.write):
                raise ForbiddenError(
                    f"this token may {grant.describe()}; this needs a token that may "
                    f"{'write' if write else 'read'} every namespace"
                )
        elif not grant.allows(namespace, write):
            raise ForbiddenError(
                f"this token may {grant.describe()}, not {'write' if write else 'read'} "
                f"namespace {namespace!r}"
            )
        return grant

    def readable(self, authorization: str | None, names: Iterable[str]) -> list[str] | None:
        """Of ``names``, those the request may read; None when it may read none of them for
        want of a valid token (the caller answers 401)."""
        if self.open_reads:
            return list(names)
        grant = self.grant(authorization)
        if grant is None:
            return None
        return [n for n in names if grant.allows(n, write=False)]


def _missing(authorization: str | bytes | None, write: bool) -> str:
    what = "writes" if write else "reads"
    if not authorization:
        return (
            f"this server requires a bearer token for {what}; send the header 'Authorization: "
            "Bearer <token>' (a token given to neardup serve: --token / NEARDUP_TOKEN, "
            "--read-token, --token-file)"
        )
    return "the bearer token is not valid on this server; send 'Authorization: Bearer <token>'"


def read_token_file(path: str | os.PathLike[str]) -> dict[str, Grant]:
    """The tokens of a token file (format in the module docstring).

    Raises
    ------
    ConfigError
        The file cannot be read, or a line is not valid (the message names the file and line).
    UnsupportedVersionError
        The file is of another version of the format.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{p}: token file not found (--token-file)") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: the token file is not UTF-8 text ({exc})") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the token file: {exc.strerror or exc}") from None
    tokens: dict[str, Grant] = {}
    seen: dict[str, int] = {}
    version_line = 0
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{p}:{no}"
        if not version_line:
            m = _HEADER.match(line)
            if m is None:
                raise ConfigError(
                    f"{where}: not a neardup token file: its first line must be "
                    f"'neardup-tokens {TOKEN_FILE_VERSION}', got {line[:40]!r}"
                )
            if m.group(1) != str(TOKEN_FILE_VERSION):
                raise UnsupportedVersionError(
                    f"{where}: token file version {m.group(1)!r}; this build reads version "
                    f"{TOKEN_FILE_VERSION} ('neardup-tokens {TOKEN_FILE_VERSION}')"
                )
            version_line = no
            continue
        parts = line.split()
        if len(parts) != 3:
            raise ConfigError(
                f"{where}: expected 'TOKEN ACCESS NAMESPACES' (three fields separated by "
                f"spaces: access read or write, namespaces * or a,b,c), got {len(parts)} fields"
            )
        token, access, spaces = parts
        if access not in _ACCESS:
            raise ConfigError(f"{where}: access must be 'read' or 'write', got {access!r}")
        namespaces: frozenset[str] | None = None
        if spaces != "*":
            names = [n for n in spaces.split(",") if n]
            if not names or len(names) != spaces.count(",") + 1:
                raise ConfigError(
                    f"{where}: namespaces must be '*' or a comma-separated list of names, got "
                    f"{spaces!r}"
                )
            for n in names:
                try:
                    validate_namespace(n)
                except ConfigError as exc:
                    raise ConfigError(f"{where}: {exc}") from None
            namespaces = frozenset(names)
        if token in seen:
            raise ConfigError(
                f"{where}: this token is already on line {seen[token]}; give each token once"
            )
        seen[token] = no
        tokens[token] = Grant(write=access == "write", namespaces=namespaces)
    if not version_line:
        raise ConfigError(
            f"{p}: the token file is empty; its first line must be "
            f"'neardup-tokens {TOKEN_FILE_VERSION}', then one 'TOKEN ACCESS NAMESPACES' per line"
        )
    return tokens


def token_file_is_private(path: str | os.PathLike[str]) -> bool:
    """Whether only the owner may read ``path`` (no group or other permission bits)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return True
    return not mode & (stat.S_IRWXG | stat.S_IRWXO)


def authenticator_for(
    token: str | None,
    read_token: str | None = None,
    token_file: str | os.PathLike[str] | None = None,
    *,
    open_reads: bool = False,
) -> Authenticator:
    """The :class:`Authenticator` of a server's settings (``neardup serve --token``,
    ``--read-token``, ``--token-file``, ``--open-reads``); reads the token file.

    Raises
    ------
    ConfigError
        A token given twice (say, ``--token`` also in the file), or a bad token file.
    """
    tokens: dict[str, Grant] = {}
    sources: dict[str, str] = {}

    def put(t: str, grant: Grant, source: str) -> None:
        if t != t.strip():  # the header's token is read without it: never a match
            raise ConfigError(
                f"the token given by {source} starts or ends with whitespace (a newline from "
                "echo or a file?); a bearer token is compared without it: remove it"
            )
        if t in tokens:
            raise ConfigError(
                f"the same token is given by {sources[t]} and by {source}; give each token once"
            )
        tokens[t] = grant
        sources[t] = source

    if token is not None:
        put(token, Grant(write=True), "--token / NEARDUP_TOKEN")
    if read_token is not None:
        put(read_token, Grant(write=False), "--read-token / NEARDUP_READ_TOKEN")
    if token_file is not None:
        for t, grant in read_token_file(token_file).items():
            put(t, grant, f"the token file {token_file}")
    return Authenticator(tokens, open_reads=open_reads)
