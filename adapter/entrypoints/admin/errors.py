"""How the admin side answers an error: one table for the JSON API and the dashboard alike.

Both call the same service layer and must agree on what a failure means: the API sends
``{"code", "detail"}`` with the status, the dashboard renders a page (or a refused-action notice) with
the same status and the message once. The table is keyed by the classes of the error tree
(``adapter/domain/errors.py``); a port's ``LegacyError`` is shown as ``LegacyUnavailable``.
"""

from __future__ import annotations

from adapter.domain.errors import (
    AdapterError,
    HandleNotFound,
    ImportNotFound,
    InvalidCursor,
    InvalidRequest,
    InvalidState,
    LegacyUnavailable,
    LimitExceeded,
    OperationNotFound,
    StoreConflict,
    StoreUnavailable,
    legacy_unavailable,
)
from adapter.ports.legacy import LegacyError

__all__ = ["MAPPED", "as_adapter_error", "error_body", "error_status"]

MAPPED = (AdapterError, LegacyError)
"""What the admin side turns into an answer; anything else is a bug (500)."""

_STATUS: list[tuple[type[AdapterError], int]] = [
    (OperationNotFound, 404),
    (ImportNotFound, 404),
    (HandleNotFound, 404),
    (InvalidCursor, 400),
    (InvalidRequest, 400),
    (LimitExceeded, 400),
    (InvalidState, 409),
    (StoreConflict, 409),
    (LegacyUnavailable, 503),
    (StoreUnavailable, 503),
]


def as_adapter_error(exc: BaseException) -> AdapterError | None:
    """``exc`` as a class of the error tree, or ``None`` when it is not one the admin side answers."""
    if isinstance(exc, AdapterError):
        return exc
    if isinstance(exc, LegacyError):
        return legacy_unavailable(exc)
    return None


def error_status(exc: BaseException) -> int | None:
    """The HTTP status of a business or availability error; ``None`` for anything else (a 500)."""
    error = as_adapter_error(exc)
    if error is None:
        return None
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return status
    return 400


def error_body(exc: BaseException) -> dict[str, str]:
    """The JSON body of an error answer: its stable code and its message (never the code twice)."""
    error = as_adapter_error(exc) or AdapterError("internal error")
    return {"code": error.code, "detail": error.message}
