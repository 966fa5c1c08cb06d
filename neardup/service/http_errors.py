"""Errors that exist only in the HTTP layer, subclasses of the one tree in :mod:`neardup.errors`.

Their statuses (401, 413; 422 for :class:`RequestValidationFailed`) are set in
:mod:`neardup.service.app`; :class:`neardup.Client` raises the same classes from error answers.
This module imports nothing heavy, so the client can use it.
"""

from __future__ import annotations

from ..errors import InputError, NeardupError

__all__ = ["AuthError", "PayloadTooLargeError", "RequestValidationFailed"]


class RequestValidationFailed(InputError):
    """A request body does not have the documented shape; ``field`` names the offending field.

    ``field`` uses dotted/bracket notation relative to the body, e.g. ``documents[3].text``.
    """

    code = "invalid_request"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field


class PayloadTooLargeError(InputError):
    """The request body or the batch is larger than the server accepts (HTTP 413)."""

    code = "payload_too_large"


class AuthError(NeardupError, PermissionError):
    """A write was sent without the right bearer token (HTTP 401)."""

    code = "unauthorized"
