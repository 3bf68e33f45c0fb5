"""Step 4 of a commit: record how the run ended, on the operation and the import, in one transaction.

The operation's stop request decides what a stop before COMMIT means for the import: ``cancel``
gives it back ``open`` (it can be committed again), ``abort`` makes it ``aborted`` (the runner then
drops its staged records). A commit that landed although an abort was asked is recorded as what it
is, ``committed``; the runner's follow-up then voids it (``services/abort.py``).

On PostgreSQL the common case (the run still holds its operation, nobody asked it to stop) is
first written without reading the rows, by one statement that checks exactly that; anything else
takes the transaction, which reads both rows and decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adapter.domain.states import (
    ImportState,
    OperationKind,
    OperationState,
    can_transition,
    can_transition_operation,
    transition,
    transition_operation,
)
from adapter.domain.views import CommitResult
from adapter.domain.vocabulary import EventKind, Finding, RecoveryPoint, StopRequest
from adapter.services.commit.bookkeeping import Claim, get_both, record_event
from adapter.services.commit.claim import ANSWER_FOR_STATUS, answer_from_record
from adapter.services.context import ServiceContext
from adapter.services.idempotency import retry_on_conflict
from adapter.services.leases import release_lease
from adapter.store.repositories import CommitFinish
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
    """Record the outcome on the operation and the import, with events (one transaction; on
    PostgreSQL first one statement on its own, :func:`_finish_held`)."""
    if ctx.store.writes_alone:
        written = _finish_held(ctx, claim, outcome)
        if written is not None:
            return written

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
            events = _events(claim, outcome, import_state, row.record_count)
            uow.operations.write_finished(operation, row, events)  # one statement on PostgreSQL
            uow.commit()
            return _answer(claim, outcome, row.record_count)

    return retry_on_conflict(write)


def _finish_held(ctx: ServiceContext, claim: Claim, outcome: Outcome) -> CommitResult | None:
    """PostgreSQL: the finish as one statement outside any transaction, nothing read first, written
    only while this run still holds the operation (its lease, ``in_progress``, no stop asked) and the
    import is ``committing`` with the records the run claimed: what the checked transaction would
    then write, in one round trip instead of four. None where it wrote nothing: the transaction
    reads the rows and decides (a reconciler took over, a stop was asked, a late commit)."""
    if not (
        can_transition_operation(OperationState.IN_PROGRESS, outcome.status)
        and can_transition(ImportState.COMMITTING, outcome.import_state)
    ):
        return None  # the checked path refuses it as it always did
    finish = CommitFinish(
        operation_id=claim.operation_id,
        owner=claim.lease_owner,
        status=outcome.status.value,
        recovery_point=str(outcome.point),
        result=outcome.result,
        error=outcome.error,
        import_id=claim.import_id,
        record_count=claim.total,
        import_state=outcome.import_state.value,
        legacy_batch_id=outcome.legacy_batch_id,
        events=_events(claim, outcome, outcome.import_state, claim.total),
    )
    if not ctx.store.finish_if_held(finish):
        return None
    claim.abort_asked = False  # written only where no stop was asked
    return _answer(claim, outcome, claim.total)


def _events(
    claim: Claim, outcome: Outcome, import_state: ImportState, record_count: int
) -> list[dict[str, Any]]:
    """The finish's two events: the operation's outcome (where and why a refusal, without its
    message: the history is for everyone) and the import's new state."""
    refusal = (outcome.error or {}).get("refusal")
    detail: dict[str, Any] = {"kind": OperationKind.COMMIT.value}
    if outcome.error:
        detail["error"] = outcome.error["code"]
    if refusal is not None:
        detail["refusal"] = {k: refusal[k] for k in ("code", "position", "field")}
    return [
        new_event(
            EventKind.for_operation(outcome.status),
            claim.import_id,
            claim.operation_id,
            outcome.status,
            detail,
        ),
        new_event(
            EventKind.for_import(import_state),
            claim.import_id,
            claim.operation_id,
            import_state,
            {"record_count": record_count},
        ),
    ]


def _answer(claim: Claim, outcome: Outcome, record_count: int) -> CommitResult:
    """The commit's answer as this run recorded it."""
    return CommitResult(
        handle=claim.handle,
        status=ANSWER_FOR_STATUS[outcome.status],
        operation_id=claim.operation_id,
        legacy_batch_id=outcome.legacy_batch_id,
        record_count=record_count,
        replayed=False,
        error=outcome.error["code"] if outcome.error else None,
        refusal=(outcome.error or {}).get("refusal"),
    )


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
