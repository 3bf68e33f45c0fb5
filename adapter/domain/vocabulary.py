"""The kit's fixed words: what it stores in ``recovery_point``, ``events.kind`` and ``error.code``, what
an operator may do, and what a commit answers.

Every word is a ``StrEnum`` member whose value is the very string stored and sent on the wire, so a
member compares equal to its string and the store, the API and the events need no conversion. A typo
becomes an ``AttributeError`` at import time instead of a state nobody handles.
"""

from __future__ import annotations

from enum import StrEnum

from adapter.domain.states import ImportState, OperationState

__all__ = ["CommitAnswer", "EventKind", "Finding", "OperatorAction", "RecoveryPoint", "StopRequest"]


class RecoveryPoint(StrEnum):
    """How far a commit got (``operations.recovery_point``); ``commit_sent`` decides unknown outcomes."""

    CLAIMED = "claimed"
    REPLAYING = "replaying"
    COMMIT_SENT = "commit_sent"
    COMMITTED = "committed"
    CANCELLED_BEFORE_COMMIT = "cancelled_before_commit"
    FAILED_BEFORE_COMMIT = "failed_before_commit"
    ASKED_BEFORE_COMMIT = "asked_before_commit"


class StopRequest(StrEnum):
    """What the owner asked of a running commit (``operations.stop_requested``).

    Both stop it before COMMIT; they differ in what follows. ``cancel`` (a cancelled request or task)
    gives the import back ``open``, and a commit that landed anyway stays committed. ``abort``
    (``abort_import``) makes the import ``aborted``, and a commit that landed anyway is voided.
    """

    CANCEL = "cancel"
    ABORT = "abort"


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
    # Late commits found by asking again (adapter/services/late_commits.py):
    EARLIER_COMMIT_LANDED = "earlier_commit_landed"
    """Before a COMMIT: a batch under an earlier commit operation's reference of the same import."""
    LATE_COMMIT_RECORDED = "late_commit_recorded"
    """A batch appeared under a ``not_committed`` reference and is the import's only one: recorded."""
    SECOND_BATCH = "second_batch"
    """A batch appeared under a ``not_committed`` reference while the import has another batch."""
    COMMITTED_AFTER_IMPORT_MOVED_ON = "committed_after_import_moved_on"
    DUPLICATE_VOIDED = "duplicate_voided"
    """A commit retried under its key got the late COMMIT of its earlier attempt as a second batch
    under the same reference: the late batch was voided, the one the operation recorded stays."""
    RESUMED = "resumed"
    """Not a finding of the legacy system: a commit whose worker went away before COMMIT runs again."""
    """A batch appeared under a ``not_committed`` reference after the import was aborted or expired."""


class OperatorAction(StrEnum):
    """What an operator may do to an operation (admin API, dashboard, ops CLI); each is audited."""

    RECONCILE = "reconcile"
    COMPENSATE = "compensate"
    RESOLVE = "resolve"


class EventKind(StrEnum):
    """``events.kind``: the change feed and the operation history are made of these."""

    IMPORT_OPENED = "import.opened"
    IMPORT_RECORDS_STAGED = "import.records_staged"
    IMPORT_RECORDS_REPLACED = "import.records_replaced"
    IMPORT_OPEN = "import.open"
    IMPORT_COMMITTING = "import.committing"
    IMPORT_COMMITTED = "import.committed"
    IMPORT_ABORTED = "import.aborted"
    IMPORT_OUTCOME_UNKNOWN = "import.outcome_unknown"
    IMPORT_COMPENSATING = "import.compensating"
    IMPORT_COMPENSATED = "import.compensated"
    IMPORT_EXPIRED = "import.expired"
    IMPORT_PURGED = "import.purged"
    """Written by the purge for each import it deletes, with its owner in ``detail`` (list changes)."""
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
    OPERATION_LATE_COMMIT_FOUND = "operation.late_commit_found"
    OPERATION_STOP_REQUESTED = "operation.stop_requested"
    """The owner asked a running commit to stop (detail: ``cancel`` or ``abort``)."""
    OPERATION_RESUMED = "operation.resumed"
    """A commit whose worker went away before COMMIT is run again by another (detail: ``by``)."""
    OPERATION_HANDED_OVER = "operation.handed_over"
    """A worker shutting down stopped a commit before COMMIT and freed its lease for another."""
    COMPENSATION_ATTEMPT = "compensation.attempt"

    @classmethod
    def for_import(cls, state: ImportState | str) -> EventKind:
        """The event that says an import reached ``state``."""
        return cls(f"import.{ImportState(state).value}")

    @classmethod
    def for_operation(cls, state: OperationState | str) -> EventKind:
        """The event that says an operation reached ``state``."""
        return cls(f"operation.{OperationState(state).value}")
