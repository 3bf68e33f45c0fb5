"""Import and operation states, the named sets of them, and the transitions the service layer may make.

The transitions are data, not scattered ``if`` statements, so ``docs/state-matrix.md`` and the code
can be checked against each other (``tests/unit/test_domain.py``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from adapter.domain.errors import InvalidState

__all__ = [
    "IMPORT_FINAL",
    "IMPORT_TRANSITIONS",
    "OPERATION_AWAITING_RECONCILIATION",
    "OPERATION_FINISHED",
    "OPERATION_RETRYABLE",
    "OPERATION_TERMINAL",
    "OPERATION_TRANSITIONS",
    "OPERATION_UNRESOLVED",
    "ImportState",
    "OperationKind",
    "OperationState",
    "can_transition",
    "can_transition_operation",
    "transition",
    "transition_operation",
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
    REPLACE = "replace"
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

# --- named state sets: one definition each, so "unresolved" means the same everywhere ---------------

_O = OperationState

OPERATION_AWAITING_RECONCILIATION = frozenset({_O.OUTCOME_UNKNOWN, _O.IN_PROGRESS})
"""Commit operations the reconciler may take over (``in_progress`` only once its lease ran out)."""

OPERATION_UNRESOLVED = frozenset({_O.OUTCOME_UNKNOWN, _O.IN_PROGRESS, _O.NEEDS_OPERATOR, _O.COMPENSATING})
"""Not finished: a worker, the reconciler or a person still has to act. Never purged."""

OPERATION_FINISHED = frozenset(OperationState) - OPERATION_UNRESOLVED
"""Nothing more will happen unless someone starts it again; retention may purge these."""

OPERATION_RETRYABLE = frozenset({_O.FAILED, _O.CANCELLED})
"""Commits that never reached the legacy system: the same idempotency key may run them again."""

IMPORT_FINAL = frozenset({ImportState.ABORTED, ImportState.EXPIRED, ImportState.COMPENSATED})
"""Imports nothing can change any more."""

OPERATION_TRANSITIONS: dict[OperationState, frozenset[OperationState]] = {
    # A commit ends one way or the other; needs_operator when asking first found a surprise.
    _O.IN_PROGRESS: frozenset({_O.SUCCEEDED, _O.FAILED, _O.CANCELLED, _O.OUTCOME_UNKNOWN, _O.NEEDS_OPERATOR}),
    # Reconciliation decides an unknown outcome (judge() in services/findings.py).
    _O.OUTCOME_UNKNOWN: frozenset({_O.SUCCEEDED, _O.FAILED, _O.NEEDS_OPERATOR}),
    # Failed or cancelled before COMMIT: the same key runs it again. A failed one is also corrected
    # when a COMMIT reconciled as not committed turns out to have landed (succeeded / needs_operator).
    _O.FAILED: frozenset({_O.IN_PROGRESS, _O.SUCCEEDED, _O.NEEDS_OPERATOR}),
    _O.CANCELLED: frozenset({_O.IN_PROGRESS}),
    _O.COMPENSATING: frozenset({_O.COMPENSATED, _O.NEEDS_OPERATOR}),
    # An operator resolves it, or compensation runs again and succeeds.
    _O.NEEDS_OPERATOR: frozenset({_O.RESOLVED, _O.COMPENSATED}),
    # A resolved compensation that runs again (abort or operator compensate) records its new outcome.
    _O.RESOLVED: frozenset({_O.COMPENSATED, _O.NEEDS_OPERATOR}),
    # A duplicate batch a late COMMIT made under a succeeded commit's key could not be voided.
    _O.SUCCEEDED: frozenset({_O.NEEDS_OPERATOR}),
    _O.COMPENSATED: frozenset(),
}

_I = ImportState
IMPORT_TRANSITIONS: dict[ImportState, frozenset[ImportState]] = {
    # OPEN -> COMMITTED only when a COMMIT reconciled as "not committed" turns out to have landed.
    _I.OPEN: frozenset({_I.COMMITTING, _I.ABORTED, _I.EXPIRED, _I.COMMITTED}),
    # A commit that ends without COMMIT being sent (cancelled, failed) returns the import to open,
    # or to aborted when its owner asked to abort it while it ran (services/abort.py).
    _I.COMMITTING: frozenset({_I.COMMITTED, _I.OPEN, _I.OUTCOME_UNKNOWN, _I.ABORTED}),
    # Reconciliation resolves an unknown outcome one way or the other (aborted: "not committed", and
    # the owner had asked to abort).
    _I.OUTCOME_UNKNOWN: frozenset({_I.COMMITTED, _I.OPEN, _I.ABORTED}),
    _I.COMMITTED: frozenset({_I.COMPENSATING}),
    _I.COMPENSATING: frozenset({_I.COMPENSATED}),
    _I.ABORTED: frozenset(),
    _I.COMPENSATED: frozenset(),
    _I.EXPIRED: frozenset(),
}


def can_transition(current: ImportState, target: ImportState) -> bool:
    return target in IMPORT_TRANSITIONS[current]


def can_transition_operation(current: OperationState, target: OperationState) -> bool:
    return target in OPERATION_TRANSITIONS[current]


class StateHolder(Protocol):
    state: str


class StatusHolder(Protocol):
    status: str


def transition(row: StateHolder, target: ImportState) -> None:
    """Move ``row`` to ``target``, refusing any move the table above does not allow.

    Raises InvalidState. Staying in the same state is not a transition and is refused too, so a
    caller that expects to change something learns that it did not.
    """
    current = ImportState(row.state)
    if not can_transition(current, target):
        raise InvalidState(f"an import that is {current.value} cannot become {target.value}")
    row.state = target.value


def transition_operation(row: StatusHolder, target: OperationState) -> None:
    """Move operation ``row`` to ``target`` if OPERATION_TRANSITIONS allows it; else InvalidState.

    As for imports, staying in the same state is refused: a caller that may find the operation
    already there checks first.
    """
    current = OperationState(row.status)
    if not can_transition_operation(current, target):
        raise InvalidState(f"an operation that is {current.value} cannot become {target.value}")
    row.status = target.value
