"""Bearer-token check for write requests.

When the service has a token, every write (insert, check-and-insert, delete, namespace creation)
must carry ``Authorization: Bearer <token>``; reads (check, get, list, health, metrics, OpenAPI)
stay open. Tokens are compared in constant time, as bytes: the token's UTF-8 encoding against
the header's bytes as they came over the wire (ASGI servers hand header values over decoded as
latin-1, which :func:`header_bytes` undoes), so a non-ASCII token matches what a client sends
as UTF-8.
"""

from __future__ import annotations

import hmac
from typing import Protocol

from .http_errors import AuthError

__all__ = ["AuthError", "check_write_token", "header_bytes"]


def header_bytes(value: str) -> bytes:
    """The bytes of a header value as sent: ASGI servers decode them as latin-1 (which maps
    every byte to one character, so this is exact); a ``str`` that is not latin-1 (built by
    hand, e.g. in tests) is taken as UTF-8."""
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass")


class _HeaderSource(Protocol):
    def get(self, name: str, /) -> str | None: ...


def check_write_token(headers: _HeaderSource, token: str | None) -> None:
    """Raise :class:`AuthError` unless ``headers`` carry the bearer ``token`` (no-op when None).

    >>> check_write_token({}, None)
    >>> check_write_token({"authorization": "Bearer s3cret"}, "s3cret")
    """
    if token is None:
        return
    value = headers.get("authorization")
    if not value:
        raise AuthError(
            "this server requires a bearer token for writes; send the header "
            "'Authorization: Bearer <token>' (the token given to neardup serve --token / NEARDUP_TOKEN)"
        )
    scheme, _, given = value.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        header_bytes(given.strip()), token.encode("utf-8", "surrogatepass")
    ):
        raise AuthError("the bearer token is wrong; send 'Authorization: Bearer <token>'")
