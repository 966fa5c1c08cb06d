"""Bearer-token check for write requests.

When the service has a token, every write (insert, check-and-insert, delete, namespace creation)
must carry ``Authorization: Bearer <token>``; reads (check, get, list, health, metrics, OpenAPI)
stay open. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from .http_errors import AuthError

__all__ = ["AuthError", "check_write_token"]


def check_write_token(headers: Mapping[str, str], token: str | None) -> None:
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
        given.strip().encode("utf-8", "surrogatepass"), token.encode("utf-8", "surrogatepass")
    ):
        raise AuthError("the bearer token is wrong; send 'Authorization: Bearer <token>'")
