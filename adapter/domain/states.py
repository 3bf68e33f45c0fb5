"""Import and operation states, and the transitions the service layer may make.

The transitions are data, not scattered ``if`` statements, so ``docs/state-matrix.md`` and the code
can be checked against each other (``tests/unit/test_domain.py``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from adapter.domain.errors import InvalidState

__all__ = [
    "IMPORT_TRANSITIONS",
    "OPERATION_TERMINAL",
    "ImportState",
    "OperationKind",
    "OperationState",
    "can_transition",
    "transition",
]


class ImportState(StrEnum):
    OPEN = "open"
    COMMITTING = "committing"
    COMMITTED = "committed"
    ABORTED = "aborted"
    OUTCOME_UNKNOWN = "outcome_unknown"
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"
    EXPIRED = "expired"


class OperationState(StrEnum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    OUTCOME_UNKNOWN = "outcome_unknown"
    CANCELLED = "cancelled"
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"
    NEEDS_OPERATOR = "needs_operator"
    RESOLVED = "resolved"
    """An operator looked at a ``needs_operator`` operation and closed it, with a recorded reason."""


class OperationKind(StrEnum):
    BEGIN = "begin"
    ADD = "add"
    COMMIT = "commit"
    ABORT = "abort"
    COMPENSATE = "compensate"


OPERATION_TERMINAL = frozenset(
    {
        OperationState.SUCCEEDED,
        OperationState.FAILED,
        OperationState.CANCELLED,
        OperationState.COMPENSATED,
        OperationState.NEEDS_OPERATOR,
        OperationState.RESOLVED,
    }
)

_I = ImportState
IMPORT_TRANSITIONS: dict[ImportState, frozenset[ImportState]] = {
    # OPEN -> COMMITTED only when a COMMIT reconciled as "not committed" turns out to have landed.
    _I.OPEN: frozenset({_I.COMMITTING, _I.ABORTED, _I.EXPIRED, _I.COMMITTED}),
    # A commit that ends without COMMIT being sent (cancelled, failed) returns the import to open.
    _I.COMMITTING: frozenset({_I.COMMITTED, _I.OPEN, _I.OUTCOME_UNKNOWN}),
    # Reconciliation resolves an unknown outcome one way or the other.
    _I.OUTCOME_UNKNOWN: frozenset({_I.COMMITTED, _I.OPEN}),
    _I.COMMITTED: frozenset({_I.COMPENSATING}),
    _I.COMPENSATING: frozenset({_I.COMPENSATED}),
    _I.ABORTED: frozenset(),
    _I.COMPENSATED: frozenset(),
    _I.EXPIRED: frozenset(),
}


def can_transition(current: ImportState, target: ImportState) -> bool:
    return target in IMPORT_TRANSITIONS[current]


class StateHolder(Protocol):
    state: str


def transition(row: StateHolder, target: ImportState) -> None:
    """Move ``row`` to ``target``, refusing any move the table above does not allow.

    Raises InvalidState. Staying in the same state is not a transition and is refused too, so a
    caller that expects to change something learns that it did not.
    """
    current = ImportState(row.state)
    if not can_transition(current, target):
        raise InvalidState(f"an import that is {current.value} cannot become {target.value}")
    row.state = target.value
