"""Step 1 of a commit: claim the import for one run, or answer from the record.

One transaction re-authorizes the handle, answers a repeat from the operation it names (a replay),
or moves the import from ``open`` to ``committing`` and the operation to ``in_progress`` with a
lease. The import's version column makes two concurrent commits race on one row; the loser sees
``committing`` and answers ``in_progress``: one batch, never two.

A worker that takes over a commit whose worker went away before COMMIT (``resume_claim``) claims it
again from the row, under the lease the reconciler took.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapter.domain.confirmation import CommitSubject
from adapter.domain.errors import ConfirmationStale, HandleExpired, InvalidState
from adapter.domain.identity import Principal
from adapter.domain.quotas import QuotaExceeded
from adapter.domain.states import (
    OPERATION_RETRYABLE,
    ImportState,
    OperationKind,
    OperationState,
    transition,
    transition_operation,
)
from adapter.domain.views import CommitResult
from adapter.domain.vocabulary import CommitAnswer, EventKind, RecoveryPoint
from adapter.services.access import effective_state, find_import
from adapter.services.commit.bookkeeping import Claim, MissingRow, record_event
from adapter.services.context import ServiceContext
from adapter.services.idempotency import check_fingerprint, new_operation
from adapter.services.late_commits import earlier_batch_refs, other_batch_refs
from adapter.services.leases import new_lease_owner, take_lease
from adapter.services.quotas import CommitSlot
from adapter.store.tables import ImportRow, OperationRow, new_event

__all__ = ["ANSWER_FOR_STATUS", "answer_from_record", "batch_ref_for", "claim_import", "resume_claim"]

ANSWER_FOR_STATUS = {
    OperationState.SUCCEEDED: CommitAnswer.COMMITTED,
    OperationState.IN_PROGRESS: CommitAnswer.IN_PROGRESS,
    OperationState.OUTCOME_UNKNOWN: CommitAnswer.OUTCOME_UNKNOWN,
    OperationState.NEEDS_OPERATOR: CommitAnswer.OUTCOME_UNKNOWN,
    OperationState.CANCELLED: CommitAnswer.CANCELLED,
    OperationState.FAILED: CommitAnswer.FAILED,
    OperationState.COMPENSATING: CommitAnswer.COMMITTED,
    OperationState.COMPENSATED: CommitAnswer.COMMITTED,
}
"""A stored commit operation's status as a commit answer (``resolved`` answers from the import)."""


def batch_ref_for(operation_id: str) -> str:
    """The legacy batch reference of a commit operation: derived, opaque, unique."""
    return f"adp-{operation_id}"


def claim_import(
    ctx: ServiceContext,
    principal: Principal,
    handle: str,
    key: str | None,
    request: str,
    expect: CommitSubject | None = None,
    slot: CommitSlot | None = None,
) -> Claim | CommitResult:
    """Answer from the record, or take the import and an operation for this run (one transaction)."""
    with ctx.store.unit_of_work() as uow:
        row = find_import(uow, principal, handle)
        state = effective_state(row, ctx.clock())
        reuse: OperationRow | None = None
        if key is not None:
            existing = uow.operations.by_key(principal.tenant, principal.subject, OperationKind.COMMIT, key)
            if existing is not None:
                check_fingerprint(existing, request)
                if existing.status not in OPERATION_RETRYABLE or state is not ImportState.OPEN:
                    return answer_from_record(existing, row, handle)
                reuse = existing
        if state is ImportState.EXPIRED:
            raise HandleExpired()
        if state in (ImportState.COMMITTED, ImportState.COMMITTING, ImportState.OUTCOME_UNKNOWN):
            latest = uow.operations.latest_commit(row.id)
            if latest is None:  # its operations were purged after the retention period
                return _answer_from_import(row, handle)
            return answer_from_record(latest, row, handle)
        if state is not ImportState.OPEN:
            raise InvalidState(f"an import that is {state.value} cannot be committed")
        if row.record_count == 0:
            raise InvalidState("the import has no records to commit")
        current = CommitSubject(row.id, row.target, row.record_count, row.revision)
        if expect is not None and current != expect:
            raise ConfirmationStale(current)
        if reuse is None:
            operation = new_operation(
                principal, OperationKind.COMMIT, key, request, status=OperationState.IN_PROGRESS
            )
            operation.attempts = 0
            operation.batch_ref = batch_ref_for(operation.id)
            operation.import_id = row.id
        else:
            operation = reuse
            transition_operation(operation, OperationState.IN_PROGRESS)
        operation.error = None
        operation.stop_requested = None
        operation.records_sent = 0
        owner = new_lease_owner(ctx)
        take_lease(operation, owner, ctx.clock(), ctx.commit_policy.lease_seconds)
        # The first attempt's recovery point goes in this transaction (the lease was just taken, so
        # there is nothing to check yet), set before the flush so a new operation is inserted with
        # it: one statement and one store round trip fewer per commit. Later attempts write their
        # own (run.py).
        _start_first_attempt(operation)
        transition(row, ImportState.COMMITTING)
        events = [
            new_event(
                EventKind.IMPORT_COMMITTING,
                row.id,
                operation.id,
                row.state,
                {"record_count": row.record_count},
            ),
            new_event(
                EventKind.OPERATION_IN_PROGRESS,
                row.id,
                operation.id,
                operation.status,
                {"kind": operation.kind, "retry_of_same_key": reuse is not None},
            ),
            _first_attempt_event(row.id, operation),
        ]
        # One statement on PostgreSQL for a new operation; a concurrent claim of this import
        # conflicts here, before it takes a slot. The earlier batch references are read in it too.
        refs = uow.operations.write_claimed(operation, row, events, new=reuse is None)
        if slot is not None:
            # After the write, so the losers of a race for one import (duplicates of one commit,
            # answered from the record on their retry) never hold a slot, not even for a moment.
            slot.take()  # QuotaExceeded here: the transaction rolls back, nothing changed
        earlier_refs = other_batch_refs(refs, operation.id)
        uow.commit()
        if operation.batch_ref is None:  # every commit operation gets one when it is created
            raise MissingRow(f"commit operation {operation.id} has no batch reference")
        return Claim(
            handle,
            operation.id,
            row.id,
            operation.batch_ref,
            row.record_count,
            lease_owner=owner,
            ask_first=reuse is not None,
            target=row.target,
            earlier_refs=earlier_refs,
        )


def resume_claim(
    ctx: ServiceContext, operation_id: str, owner: str, *, by: str, slot_for: Callable[[str], CommitSlot]
) -> tuple[Claim, CommitSlot] | None:
    """Claim a commit again whose worker went away before COMMIT, under the lease ``owner`` holds.

    None when it is not this owner's to run any more (finished, taken over, the import gone), or
    when the tenant's legacy session slot (``slot_for(tenant)``) is not free now: the next pass
    tries again. The run asks the legacy system first (``ask_first``), as every run of an
    operation that ran before.
    """
    with ctx.store.unit_of_work() as uow:
        operation = uow.operations.get(operation_id)
        if (
            operation is None
            or operation.status != OperationState.IN_PROGRESS
            or operation.lease_owner != owner
            or operation.import_id is None
            or operation.batch_ref is None
        ):
            return None
        row = uow.imports.get(operation.import_id)
        if row is None or row.state != ImportState.COMMITTING:
            return None
        slot = slot_for(operation.tenant)
        try:
            slot.take()
        except QuotaExceeded:
            return None
        record_event(uow, EventKind.OPERATION_RESUMED, row, operation, detail={"by": by})
        _start_first_attempt(operation)
        uow.events.record(**_first_attempt_event(row.id, operation))
        earlier_refs = earlier_batch_refs(uow, row.id, operation.id)
        try:
            uow.commit()
        except BaseException:
            slot.release()
            raise
        claim = Claim(
            ctx.codec.handle_for(row.id),
            operation.id,
            row.id,
            operation.batch_ref,
            row.record_count,
            lease_owner=owner,
            ask_first=True,
            target=row.target,
            earlier_refs=earlier_refs,
            stopped=operation.stop_requested is not None,
        )
        return claim, slot


def _start_first_attempt(operation: OperationRow) -> None:
    """A run's first attempt starts in the claim's transaction: its ``replaying`` recovery point."""
    operation.recovery_point = RecoveryPoint.REPLAYING
    operation.attempts += 1


def _first_attempt_event(import_id: str, operation: OperationRow) -> dict[str, Any]:
    """The event of :func:`_start_first_attempt`, after the claim's own events."""
    return new_event(
        EventKind.OPERATION_RECOVERY_POINT,
        import_id,
        operation.id,
        operation.status,
        {"point": RecoveryPoint.REPLAYING, "attempt": operation.attempts},
    )


def _answer_from_import(row: ImportRow, handle: str) -> CommitResult:
    committed = row.state == ImportState.COMMITTED
    status = CommitAnswer.COMMITTED if committed else CommitAnswer.OUTCOME_UNKNOWN
    return CommitResult(handle, status, None, row.legacy_batch_id, row.record_count, replayed=True)


def answer_from_record(operation: OperationRow, row: ImportRow, handle: str) -> CommitResult:
    """Answer a commit request from the record of an earlier one (a replay)."""
    status = OperationState(operation.status)
    if status not in ANSWER_FOR_STATUS:  # resolved by an operator: the import says how it ended
        return _answer_from_import(row, handle)
    result = operation.result or {}
    error = operation.error or {}
    return CommitResult(
        handle=handle,
        status=ANSWER_FOR_STATUS[status],
        operation_id=operation.id,
        legacy_batch_id=result.get("legacy_batch_id"),
        record_count=result.get("record_count", row.record_count),
        replayed=True,
        error=error.get("code"),
        records_sent=operation.records_sent if status is OperationState.IN_PROGRESS else None,
        refusal=error.get("refusal"),
    )
