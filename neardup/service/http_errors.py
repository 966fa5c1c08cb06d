"""Errors that exist only in the HTTP layer, subclasses of the one tree in :mod:`neardup.errors`.

:class:`AuthError` (401) and :class:`PayloadTooLargeError` (413) live in :mod:`neardup.errors`,
whose one mapping gives every status; they are re-exported here for the service modules.
:class:`neardup.Client` raises the same classes from error answers.
This module imports nothing heavy, so the client can use it.
"""

from __future__ import annotations

from ..errors import AuthError, InputError, PayloadTooLargeError

__all__ = ["AuthError", "PayloadTooLargeError", "RequestValidationFailed"]


class RequestValidationFailed(InputError):
    """A request body does not have the documented shape; ``field`` names the offending field.

    ``field`` uses dotted/bracket notation relative to the body, e.g. ``documents[3].text``.
    """

    code = "invalid_request"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
