"""Step 4 of a commit: record how the run ended, on the operation and the import, in one transaction.

The operation's stop request decides what a stop before COMMIT means for the import: ``cancel``
gives it back ``open`` (it can be committed again), ``abort`` makes it ``aborted`` (the runner then
drops its staged records). A commit that landed although an abort was asked is recorded as what it
is, ``committed``; the runner's follow-up then voids it (``services/abort.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adapter.domain.states import ImportState, OperationState, transition, transition_operation
from adapter.domain.views import CommitResult
from adapter.domain.vocabulary import EventKind, Finding, RecoveryPoint, StopRequest
from adapter.services.commit.bookkeeping import Claim, get_both, record_event
from adapter.services.commit.claim import ANSWER_FOR_STATUS, answer_from_record
from adapter.services.context import ServiceContext
from adapter.services.idempotency import retry_on_conflict
from adapter.services.leases import release_lease
from adapter.store.tables import ImportRow, OperationRow, new_event
from adapter.store.unit_of_work import UnitOfWork

__all__ = ["Outcome", "current_answer", "finish", "unknown_outcome"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a run ended, to be written by :func:`finish` in one transaction."""

    status: OperationState
    import_state: ImportState
    point: RecoveryPoint
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    legacy_batch_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


def unknown_outcome() -> Outcome:
    return Outcome(OperationState.OUTCOME_UNKNOWN, ImportState.OUTCOME_UNKNOWN, RecoveryPoint.COMMIT_SENT)


def finish(ctx: ServiceContext, claim: Claim, outcome: Outcome) -> CommitResult:
    """Record the outcome on the operation and the import, with events (one transaction)."""

    def write() -> CommitResult:
        with ctx.store.unit_of_work() as uow:
            operation, row = get_both(uow, claim)
            claim.abort_asked = operation.stop_requested == StopRequest.ABORT  # the runner's follow-up
            if operation.status != OperationState.IN_PROGRESS:
                if outcome.status is OperationState.SUCCEEDED and operation.status == OperationState.FAILED:
                    # A reconciler believed "not committed" but our COMMIT did land: the record
                    # must say so, or a later commit would make a second batch.
                    _record_late_commit(uow, operation, row, outcome.result or {}, outcome.legacy_batch_id)
                    uow.commit()
                # Otherwise a reconciler took over and already recorded the outcome (it asked the
                # legacy system): answer from that record rather than fail on a state it changed.
                return answer_from_record(operation, row, claim.handle)
            import_state = outcome.import_state
            if import_state is ImportState.OPEN and operation.stop_requested == StopRequest.ABORT:
                import_state = ImportState.ABORTED  # stopped before COMMIT because its owner aborted it
            transition_operation(operation, outcome.status)
            operation.recovery_point = outcome.point
            operation.result = outcome.result
            operation.error = outcome.error
            release_lease(operation)
            transition(row, import_state)
            if outcome.legacy_batch_id is not None:
                row.legacy_batch_id = outcome.legacy_batch_id
            error_code = outcome.error["code"] if outcome.error else None
            refusal = (outcome.error or {}).get("refusal")
            detail = {"kind": operation.kind, **({"error": error_code} if error_code else {})}
            if refusal is not None:  # where and why, without its message: the history is for everyone
                detail["refusal"] = {k: refusal[k] for k in ("code", "position", "field")}
            events = [
                new_event(
                    EventKind.for_operation(outcome.status), row.id, operation.id, operation.status, detail
                ),
                new_event(
                    EventKind.for_import(import_state),
                    row.id,
                    operation.id,
                    row.state,
                    {"record_count": row.record_count},
                ),
            ]
            uow.operations.write_finished(operation, row, events)  # one statement on PostgreSQL
            uow.commit()
            return CommitResult(
                handle=claim.handle,
                status=ANSWER_FOR_STATUS[outcome.status],
                operation_id=operation.id,
                legacy_batch_id=outcome.legacy_batch_id,
                record_count=row.record_count,
                replayed=False,
                error=error_code,
                refusal=refusal,
            )

    return retry_on_conflict(write)


def _record_late_commit(
    uow: UnitOfWork, operation: OperationRow, row: ImportRow, result: dict[str, Any], batch_id: str | None
) -> None:
    """Correct a ``not_committed`` verdict with the proof in hand: the legacy system took the batch."""
    if row.state == ImportState.OPEN:
        transition_operation(operation, OperationState.SUCCEEDED)
        operation.result = result
        operation.error = None
        transition(row, ImportState.COMMITTED)
        row.legacy_batch_id = batch_id
    else:  # the import moved on meanwhile (aborted, or committing again): a person must decide
        transition_operation(operation, OperationState.NEEDS_OPERATOR)
        finding = Finding.COMMITTED_AFTER_RECONCILED_NOT_COMMITTED
        operation.error = {"code": finding, "legacy_batch_id": batch_id}
    record_event(
        uow, EventKind.OPERATION_LATE_COMMIT_RECORDED, row, operation, detail={"legacy_batch_id": batch_id}
    )


def current_answer(ctx: ServiceContext, claim: Claim) -> CommitResult:
    """The commit's answer as the store has it now (after another worker took it over or was handed it)."""
    with ctx.store.reading() as uow:
        return answer_from_record(*get_both(uow, claim), claim.handle)
