"""The kit's fixed words: what it stores in ``recovery_point``, ``events.kind`` and ``error.code``, what
an operator may do, and what a commit answers.

Every word is a ``StrEnum`` member whose value is the very string stored and sent on the wire, so a
member compares equal to its string and the store, the API and the events need no conversion. A typo
becomes an ``AttributeError`` at import time instead of a state nobody handles.
"""

from __future__ import annotations

from enum import StrEnum

from adapter.domain.states import ImportState, OperationState

__all__ = ["CommitAnswer", "EventKind", "Finding", "OperatorAction", "RecoveryPoint"]


class RecoveryPoint(StrEnum):
    """How far a commit got (``operations.recovery_point``); ``commit_sent`` decides unknown outcomes."""

    CLAIMED = "claimed"
    REPLAYING = "replaying"
    COMMIT_SENT = "commit_sent"
    COMMITTED = "committed"
    CANCELLED_BEFORE_COMMIT = "cancelled_before_commit"
    FAILED_BEFORE_COMMIT = "failed_before_commit"
    ASKED_BEFORE_COMMIT = "asked_before_commit"


class CommitAnswer(StrEnum):
    """The ``status`` of a commit result, as the caller sees it."""

    COMMITTED = "committed"
    IN_PROGRESS = "in_progress"
    OUTCOME_UNKNOWN = "outcome_unknown"
    CANCELLED = "cancelled"
    FAILED = "failed"


class Finding(StrEnum):
    """What asking the legacy system about a batch reference showed (reconciliation, ask-first)."""

    COMMITTED = "committed"
    NOT_COMMITTED = "not_committed"
    COMMITTED_MORE_THAN_ONCE = "committed_more_than_once"
    COMMITTED_WITH_WRONG_RECORD_COUNT = "committed_with_wrong_record_count"
    COMMITTED_AFTER_RECONCILED_NOT_COMMITTED = "committed_after_reconciled_not_committed"
    """A worker's COMMIT landed after the reconciler had recorded ``not_committed``, and the import
    had moved on meanwhile: a person must decide."""


class OperatorAction(StrEnum):
    """What an operator may do to an operation (admin API, dashboard, ops CLI); each is audited."""

    RECONCILE = "reconcile"
    COMPENSATE = "compensate"
    RESOLVE = "resolve"


class EventKind(StrEnum):
    """``events.kind``: the change feed and the operation history are made of these."""

    IMPORT_OPENED = "import.opened"
    IMPORT_RECORDS_STAGED = "import.records_staged"
    IMPORT_OPEN = "import.open"
    IMPORT_COMMITTING = "import.committing"
    IMPORT_COMMITTED = "import.committed"
    IMPORT_ABORTED = "import.aborted"
    IMPORT_OUTCOME_UNKNOWN = "import.outcome_unknown"
    IMPORT_COMPENSATING = "import.compensating"
    IMPORT_COMPENSATED = "import.compensated"
    IMPORT_EXPIRED = "import.expired"
    OPERATION_IN_PROGRESS = "operation.in_progress"
    OPERATION_SUCCEEDED = "operation.succeeded"
    OPERATION_FAILED = "operation.failed"
    OPERATION_OUTCOME_UNKNOWN = "operation.outcome_unknown"
    OPERATION_CANCELLED = "operation.cancelled"
    OPERATION_COMPENSATING = "operation.compensating"
    OPERATION_COMPENSATED = "operation.compensated"
    OPERATION_NEEDS_OPERATOR = "operation.needs_operator"
    OPERATION_RESOLVED = "operation.resolved"
    OPERATION_RECOVERY_POINT = "operation.recovery_point"
    OPERATION_ATTEMPT_FAILED = "operation.attempt_failed"
    OPERATION_LATE_COMMIT_RECORDED = "operation.late_commit_recorded"
    OPERATION_RECONCILED = "operation.reconciled"
    COMPENSATION_ATTEMPT = "compensation.attempt"

    @classmethod
    def for_import(cls, state: ImportState | str) -> EventKind:
        """The event that says an import reached ``state``."""
        return cls(f"import.{ImportState(state).value}")

    @classmethod
    def for_operation(cls, state: OperationState | str) -> EventKind:
        """The event that says an operation reached ``state``."""
        return cls(f"operation.{OperationState(state).value}")
