"""The kit's one exception tree.

Every error a caller can see is a class with a stable ``code``; no code is a bare string raised or
returned ad hoc. Each entry point maps the classes to its own wire form in one place (MCP: an
``isError`` tool result whose text starts with ``code:``; admin API and dashboard: one HTTP status
table in ``adapter/entrypoints/admin/errors.py``; ops CLI: an exit status). Messages never contain
record contents, tokens or handles.

::

    AdapterError (internal_error)                     the base; ``code`` and ``message``
    |-- HandleNotFound (handle_not_found)              unknown handle, or another principal's
    |-- HandleExpired (handle_expired)
    |-- OperationNotFound (operation_not_found)        unknown operation, or another principal's
    |-- ImportNotFound (not_found)                     operators: no import with this id
    |-- IdempotencyKeyReused (idempotency_key_reused)
    |-- InvalidState (invalid_state)                   the action does not apply in this state
    |-- LimitExceeded (limit_exceeded)
    |-- QuotaExceeded (quota_exceeded)                 new work over a quota (adapter/domain/quotas.py)
    |-- InvalidRequest (validation_error)
    |   `-- InvalidBody (invalid_body)                 an HTTP body that is not JSON (admin API)
    |-- InvalidCursor (invalid_cursor)                 tampered, expired, another list's or principal's
    |-- LegacyUnavailable (legacy_unavailable)         the legacy system did not answer (from a LegacyError)
    |-- LegacyRejected (legacy_rejected)               the legacy system refused a commit
    |-- CompensationFailed (compensation_failed)       VOID failed; an operator must look
    |-- ConfirmationStale (confirmation_stale)         the import changed after the user was asked
    |-- ConfirmationUsed (confirmation_used)           a confirmation round replayed with another answer
    `-- StoreError                                     the database, translated once by the store
        |-- StoreConflict (store_conflict)             lost a race: unique key or optimistic version
        `-- StoreUnavailable (database_unavailable)    the database did not answer

    LegacyError (adapter/ports/legacy.py; the port's contract, imports nothing from the kit)
    |-- LegacyFailed
    |-- LegacyTransient
    `-- LegacyOutcomeUnknown

``StoreConflict`` is normally retried inside the service layer (``retry_on_conflict``); a caller sees
it only when the retries run out. A ``LegacyError`` that escapes a use case is shown to callers as
:class:`LegacyUnavailable` (see :func:`legacy_unavailable`). The codes of ``LegacyUnavailable``,
``LegacyRejected`` and ``CompensationFailed`` are also what a failed operation stores in its
``error`` (``{"code": ..., ...}``); :func:`error_for_code` turns such a stored code back into its class.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AdapterError",
    "CompensationFailed",
    "ConfirmationStale",
    "ConfirmationUsed",
    "HandleExpired",
    "HandleNotFound",
    "IdempotencyKeyReused",
    "ImportNotFound",
    "InvalidBody",
    "InvalidCursor",
    "InvalidRequest",
    "InvalidState",
    "LegacyRejected",
    "LegacyUnavailable",
    "LimitExceeded",
    "OperationNotFound",
    "QuotaExceeded",
    "StoreConflict",
    "StoreError",
    "StoreUnavailable",
    "error_for_code",
    "legacy_unavailable",
]


class AdapterError(Exception):
    """Base of every error a caller may see; ``code`` is stable and safe to show to clients.

    ``default`` is the message when none is given (most classes say the same thing every time).
    """

    code: str = "internal_error"
    default: str = "internal error"
    retry_helps: bool = True
    """Whether the same call again can succeed (a refusal of the request itself cannot)."""

    def __init__(self, message: str | None = None, *, details: dict[str, Any] | None = None) -> None:
        self.message = message if message is not None else self.default
        self.details = details
        """Safe-to-show facts a caller can act on (an operation id, which record was refused)."""
        super().__init__(self.message)

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class HandleNotFound(AdapterError):
    """Unknown handle, or a handle of another principal: both get the same answer on purpose."""

    code = "handle_not_found"
    default = "no import with this handle"


class HandleExpired(AdapterError):
    code = "handle_expired"
    default = "the import's handle has expired; begin a new import"


class IdempotencyKeyReused(AdapterError):
    code = "idempotency_key_reused"
    default = "this idempotency key was already used for a different request"


class InvalidState(AdapterError):
    code = "invalid_state"


class LimitExceeded(AdapterError):
    code = "limit_exceeded"


class QuotaExceeded(AdapterError):
    """New work refused because a quota is reached; ``setting`` names the ADAPTER_* variable.
    Nothing already accepted is touched (see adapter/services/quotas.py)."""

    code = "quota_exceeded"

    def __init__(self, what: str, setting: str, limit: int, *, retry_after: float | None = None) -> None:
        """``retry_after``: for a rate, the seconds until the caller may send again (in the message)."""
        when = f"; try again in {retry_after:.1f} s" if retry_after is not None else ""
        super().__init__(f"{what}{when} (ADAPTER_{setting.upper()}={limit})")
        self.setting = setting
        self.limit = limit
        self.retry_after = retry_after


class InvalidRequest(AdapterError):
    code = "validation_error"


class InvalidBody(InvalidRequest):
    code = "invalid_body"


class InvalidCursor(AdapterError):
    """A cursor that does not verify: one generic answer, whatever the reason (start the list again)."""

    code = "invalid_cursor"
    default = "Invalid cursor"


class OperationNotFound(AdapterError):
    """Unknown operation, or another principal's: the same answer on purpose."""

    code = "operation_not_found"
    default = "no operation with this id or idempotency key"


class ImportNotFound(AdapterError):
    """Operators only (they look imports up by id, never by handle)."""

    code = "not_found"
    default = "no import with this id"


class LegacyUnavailable(AdapterError):
    """The legacy system did not answer (or not usefully); nothing was applied, or it is being found out."""

    code = "legacy_unavailable"
    default = "the legacy system did not answer"


class LegacyRejected(AdapterError):
    """The legacy system refused the work; retrying the same request will not help."""

    code = "legacy_rejected"
    default = "the legacy system refused the batch"
    retry_helps = False


class CompensationFailed(AdapterError):
    """VOID of a committed batch did not succeed; the operation waits for an operator."""

    code = "compensation_failed"
    default = "the legacy system did not void the batch"


class ConfirmationStale(AdapterError):
    """The import changed after the person was asked: their answer does not cover what is staged now.

    ``current`` is what a new question would describe (a ``CommitSubject``, or a ``VoidSubject`` for
    an abort), or None when there is nothing to ask about any more.
    """

    code = "confirmation_stale"
    default = "the import changed after the confirmation was asked; nothing was committed"

    def __init__(self, current: object | None) -> None:
        super().__init__()
        self.current = current


class ConfirmationUsed(AdapterError):
    """A confirmation round was already answered otherwise: an answer cannot be changed by replaying it."""

    code = "confirmation_used"
    default = "this confirmation round was already answered; nothing was committed; call commit_import again"


class StoreError(AdapterError):
    """The database failed; raised by the store in place of the driver's errors (never a driver class)."""

    code = "store_error"
    default = "the database failed"


class StoreConflict(StoreError):
    """Another transaction changed or inserted the same row first; rerun the step on fresh state."""

    code = "store_conflict"
    default = "another request changed the same data at the same time"


class StoreUnavailable(StoreError):
    """The database did not answer (down, unreachable, unreadable, out of connections)."""

    code = "database_unavailable"
    default = "the database did not answer"


def legacy_unavailable(exc: BaseException) -> LegacyUnavailable:
    """A port's ``LegacyError`` as callers see it: the error's kind, never its text (it may echo input)."""
    return LegacyUnavailable(f"the legacy system did not answer ({type(exc).__name__})")


_STORED_CODES: dict[str, type[AdapterError]] = {
    cls.code: cls for cls in (LegacyUnavailable, LegacyRejected, CompensationFailed, AdapterError)
}


def error_for_code(code: str | None) -> type[AdapterError]:
    """The class of an error code stored in an operation's ``error``; ``AdapterError`` if unknown."""
    return _STORED_CODES.get(code or "", AdapterError)
