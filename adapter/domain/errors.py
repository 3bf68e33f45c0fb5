"""The kit's one exception tree.

Every business error a caller can see has a stable ``code``; each entry point maps these to its own
wire form in one place (an ``isError`` tool result whose text starts with ``code:``, an HTTP status,
a CLI exit code). Messages never contain record contents, tokens or handles.
"""

from __future__ import annotations

__all__ = [
    "AdapterError",
    "ConfirmationStale",
    "ConfirmationUsed",
    "HandleExpired",
    "HandleNotFound",
    "IdempotencyKeyReused",
    "InvalidRequest",
    "InvalidState",
    "LimitExceeded",
    "OperationNotFound",
]


class AdapterError(Exception):
    """Base of every business error; ``code`` is stable and safe to show to clients."""

    code: str = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class HandleNotFound(AdapterError):
    """Unknown handle, or a handle of another principal: both get the same answer on purpose."""

    code = "handle_not_found"

    def __init__(self) -> None:
        super().__init__("no import with this handle")


class HandleExpired(AdapterError):
    code = "handle_expired"

    def __init__(self) -> None:
        super().__init__("the import's handle has expired; begin a new import")


class IdempotencyKeyReused(AdapterError):
    code = "idempotency_key_reused"

    def __init__(self) -> None:
        super().__init__("this idempotency key was already used for a different request")


class InvalidState(AdapterError):
    code = "invalid_state"


class LimitExceeded(AdapterError):
    code = "limit_exceeded"


class InvalidRequest(AdapterError):
    code = "validation_error"


class OperationNotFound(AdapterError):
    """Unknown operation, or another principal's: the same answer on purpose."""

    code = "operation_not_found"

    def __init__(self) -> None:
        super().__init__("no operation with this id or idempotency key")


class ConfirmationStale(AdapterError):
    """The import changed after the person was asked: their answer does not cover what is staged now.

    ``current`` is what a new question would describe (a ``CommitSubject``), or None when the import
    can no longer be committed at all.
    """

    code = "confirmation_stale"

    def __init__(self, current: object | None) -> None:
        super().__init__("the import changed after the confirmation was asked; nothing was committed")
        self.current = current


class ConfirmationUsed(AdapterError):
    """A confirmation round was already answered otherwise: an answer cannot be changed by replaying it."""

    code = "confirmation_used"

    def __init__(self) -> None:
        super().__init__(
            "this confirmation round was already answered; nothing was committed; call commit_import again"
        )
