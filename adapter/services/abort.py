"""Abort an import, and compensate (VOID) one that was already committed.

Aborting an open import drops its staged records. Aborting a committed import cannot undo the legacy
commit, so it writes a compensation record first and then asks the legacy system to VOID the batch.
Compensation is idempotent (a VOID of a voided batch is harmless, one compensation row per batch)
and resumable (a ``compensating`` import continues where it stopped). After a bounded number of
failed attempts it stops at ``needs_operator`` with the reason, for a person to look at.
"""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import timedelta

from adapter.domain.confirmation import Subject
from adapter.domain.errors import CompensationFailed, ConfirmationStale, InvalidState
from adapter.domain.identity import Principal, fingerprint, new_id
from adapter.domain.states import (
    IMPORT_FINAL,
    ImportState,
    OperationKind,
    OperationState,
    transition,
    transition_operation,
)
from adapter.domain.views import AbortResult
from adapter.domain.vocabulary import EventKind, StopRequest
from adapter.ports.legacy import LegacyError
from adapter.services.access import find_import
from adapter.services.commit.confirmation import void_subject_of
from adapter.services.commit.runner import local_run
from adapter.services.commit.stop import request_stop
from adapter.services.context import ServiceContext
from adapter.services.idempotency import new_operation, retry_on_conflict
from adapter.services.quotas import discard_in_batches
from adapter.services.retries import legacy_retrying
from adapter.store.tables import CompensationRow, ImportRow, OperationRow
from adapter.store.unit_of_work import UnitOfWork

__all__ = [
    "abort_import",
    "compensate_import",
    "resume_compensations",
    "settle_abort_request",
    "settle_abort_requests",
]


def abort_import(
    ctx: ServiceContext,
    principal: Principal,
    handle: str,
    *,
    wait_seconds: float = 0.0,
    expect: Subject | None = None,
) -> AbortResult:
    """Abort ``handle``'s import: drop an open one, compensate a committed one, stop a committing one.

    A commit still running (or whose outcome is still unknown) is asked to stop (``abort``, see
    ``commit/stop.py``): before COMMIT it stops and nothing lands (the import becomes ``aborted``);
    after COMMIT the real outcome is waited for, and a batch that landed is voided. This call waits
    up to ``wait_seconds`` for that; an answer before it says ``abort_requested``.

    ``expect`` is what a person confirmed (``commit/confirmation.py``): an abort that may void a batch
    acts only if the import still is exactly that (``NOTHING_CONFIRMED``: it acts only where nothing
    could be voided), checked in the transaction that acts. None: nobody was to be asked.
    Raises HandleNotFound, ConfirmationStale.
    """

    dropped: list[tuple[str, int, int]] = []
    stopping: list[tuple[str, str]] = []  # (import id, commit operation id)

    def step() -> str:
        with ctx.store.unit_of_work() as uow:
            row = find_import(uow, principal, handle)
            if row.state in IMPORT_FINAL:
                return row.state
            voids = void_subject_of(row)
            if expect is not None and voids is not None and voids != expect:
                raise ConfirmationStale(voids)  # it may void what the person was not shown: ask again
            if row.state == ImportState.OPEN.value:
                transition(row, ImportState.ABORTED)
                uow.events.record(EventKind.IMPORT_ABORTED, import_id=row.id, state=row.state)
                uow.commit()
                dropped.append((row.id, row.record_count, row.staged_bytes or 0))
                return row.state
            if row.state in (ImportState.COMMITTED.value, ImportState.COMPENSATING.value):
                return "compensate"
            latest = uow.operations.latest_commit(row.id)
            if latest is None:
                raise InvalidState(f"an import that is {row.state} cannot be aborted now")
            stopping.append((row.id, latest.id))
            return row.state

    outcome = retry_on_conflict(step)
    for import_id, count, size in dropped:  # after the state change, in short transactions (quotas.py)
        discard_in_batches(ctx, import_id, count, size)
    if stopping:
        import_id, operation_id = stopping[0]
        request_stop(ctx, operation_id, StopRequest.ABORT)
        outcome = _await_commit_end(ctx, import_id, operation_id, wait_seconds)
        if outcome not in _STILL_COMMITTING:
            settle_abort_request(ctx, import_id)
            outcome = _state_of(ctx, import_id)
        return AbortResult(handle=handle, status=outcome, abort_requested=outcome in _STILL_COMMITTING)
    if outcome == "compensate":
        with ctx.store.reading() as uow:
            import_id = find_import(uow, principal, handle).id
        outcome = compensate_import(ctx, import_id, reason="aborted by its owner", principal=principal)
    return AbortResult(handle=handle, status=outcome)


_STILL_COMMITTING = (ImportState.COMMITTING.value, ImportState.OUTCOME_UNKNOWN.value)


def _await_commit_end(ctx: ServiceContext, import_id: str, operation_id: str, seconds: float) -> str:
    """The import's state once its commit ended, or as it is after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        state = _state_of(ctx, import_id)
        remaining = deadline - time.monotonic()
        if state not in _STILL_COMMITTING or remaining <= 0:
            return state
        run = local_run(operation_id)
        if run is not None:  # here: wake when it ends
            with contextlib.suppress(FutureTimeout, Exception):
                run.done.result(timeout=min(remaining, _POLL_SECONDS * 4))
        else:
            time.sleep(min(remaining, _POLL_SECONDS))


_POLL_SECONDS = 0.25


def _state_of(ctx: ServiceContext, import_id: str) -> str:
    with ctx.store.reading() as uow:
        return _import(uow, import_id).state


def settle_abort_request(ctx: ServiceContext, import_id: str) -> None:
    """What an abort asked while the import was committing means once its commit ended.

    Stopped before COMMIT: the import is ``aborted``; its staged records are dropped here. The
    commit landed anyway: the batch is voided (compensation). Nothing asked, or still running:
    nothing to do. Safe to call again; the runner calls it after each run, the reconciler after
    each resolution, and maintenance for imports a crash left behind.
    """
    with ctx.store.reading() as uow:
        row = _import(uow, import_id)
        asked = uow.operations.abort_requested(import_id)
        state, count, size = row.state, row.record_count, row.staged_bytes or 0
    if not asked:
        return
    if state == ImportState.ABORTED.value:
        discard_in_batches(ctx, import_id, count, size)
    elif state == ImportState.COMMITTED.value:
        compensate_import(ctx, import_id, reason="aborted by its owner while it was committing")


def settle_abort_requests(ctx: ServiceContext, *, limit: int = 50) -> list[str]:
    """Maintenance: committed imports whose owner asked to abort them while they committed, and
    whose compensation a crash kept from starting. Returns their import ids."""
    with ctx.store.reading() as uow:
        import_ids = uow.operations.abort_requested_imports(ImportState.COMMITTED.value, limit)
    for import_id in import_ids:
        settle_abort_request(ctx, import_id)
    return import_ids


def compensate_import(
    ctx: ServiceContext, import_id: str, *, reason: str, principal: Principal | None = None
) -> str:
    """VOID the legacy batch of a committed import; returns the import's resulting state.

    Used by abort and by operators. Safe to call again at any point.
    """
    compensation_id = retry_on_conflict(lambda: _start(ctx, import_id, reason, principal))
    if compensation_id is None:
        with ctx.store.reading() as uow:
            return _import(uow, import_id).state
    return _void(ctx, import_id, compensation_id)


def _start(ctx: ServiceContext, import_id: str, reason: str, principal: Principal | None) -> str | None:
    """Write the compensation record (once) and move the import to compensating."""
    with ctx.store.unit_of_work() as uow:
        row = uow.imports.get(import_id)
        if row is None:
            raise InvalidState("no such import")
        existing = uow.compensations.for_import(import_id)
        if row.state == ImportState.COMPENSATED.value:
            return None
        if row.state not in (ImportState.COMMITTED.value, ImportState.COMPENSATING.value):
            raise InvalidState(f"an import that is {row.state} has no committed batch to compensate")
        if existing is not None:
            return existing.id
        if row.legacy_batch_id is None:
            raise InvalidState("the import records no legacy batch to void")
        owner = principal or Principal(subject=row.principal, tenant=row.tenant)
        operation = new_operation(
            owner,
            OperationKind.COMPENSATE.value,
            None,
            fingerprint("compensate", {"import": import_id}),
            status=OperationState.COMPENSATING,
        )
        operation.import_id = import_id
        operation.attempts = 0
        uow.operations.add(operation)
        uow.flush()  # the compensation row refers to the operation row
        compensation = CompensationRow(
            id=new_id(),
            import_id=import_id,
            operation_id=operation.id,
            legacy_batch_id=row.legacy_batch_id,
            status=OperationState.COMPENSATING.value,
            reason=reason[:500],
        )
        uow.compensations.add(compensation)
        transition(row, ImportState.COMPENSATING)
        uow.events.record(
            EventKind.IMPORT_COMPENSATING, import_id=import_id, operation_id=operation.id, state=row.state
        )
        uow.commit()
        return compensation.id


def _void(ctx: ServiceContext, import_id: str, compensation_id: str) -> str:
    with ctx.store.reading() as uow:
        compensation = _compensation(uow, import_id)
        if compensation.id != compensation_id:
            raise InvalidState(f"import {import_id} has another compensation than {compensation_id}")
        batch_id, operation_id = compensation.legacy_batch_id, compensation.operation_id

    def attempt() -> None:
        _count_attempt(ctx, import_id)
        ctx.legacy.void_batch(batch_id)

    try:
        legacy_retrying(ctx.commit_policy)(attempt)
    except LegacyError as exc:
        return _close(
            ctx,
            import_id,
            operation_id,
            OperationState.NEEDS_OPERATOR,
            ImportState.COMPENSATING,
            error=f"{type(exc).__name__}: VOID of the legacy batch kept failing",
        )
    return _close(ctx, import_id, operation_id, OperationState.COMPENSATED, ImportState.COMPENSATED)


def _count_attempt(ctx: ServiceContext, import_id: str) -> None:
    def write() -> None:
        with ctx.store.unit_of_work() as uow:
            compensation = _compensation(uow, import_id)
            compensation.attempts += 1
            operation = _operation(uow, compensation.operation_id)
            operation.attempts += 1
            uow.events.record(
                EventKind.COMPENSATION_ATTEMPT,
                import_id=import_id,
                operation_id=operation.id,
                state=operation.status,
                detail={"attempt": compensation.attempts},
            )
            uow.commit()

    retry_on_conflict(write)


def _close(
    ctx: ServiceContext,
    import_id: str,
    operation_id: str,
    status: OperationState,
    import_state: ImportState,
    *,
    error: str | None = None,
) -> str:
    def write() -> str:
        with ctx.store.unit_of_work() as uow:
            row = _import(uow, import_id)
            operation = _operation(uow, operation_id)
            compensation = _compensation(uow, import_id)
            if operation.status != status:  # a VOID that fails again leaves it at needs_operator
                transition_operation(operation, status)
            operation.error = {"code": CompensationFailed.code, "reason": error} if error else None
            operation.result = {"legacy_batch_id": compensation.legacy_batch_id} if not error else None
            compensation.status = status.value
            compensation.last_error = error
            if row.state != import_state.value:
                transition(row, import_state)
            uow.events.record(
                EventKind.for_operation(status),
                import_id=import_id,
                operation_id=operation_id,
                state=status.value,
                detail={"kind": operation.kind},
            )
            uow.events.record(
                EventKind.for_import(import_state),
                import_id=import_id,
                operation_id=operation_id,
                state=import_state.value,
            )
            uow.commit()
            return row.state

    return retry_on_conflict(write)


def _import(uow: UnitOfWork, import_id: str) -> ImportRow:
    row = uow.imports.get(import_id)
    if row is None:
        raise InvalidState("no such import")
    return row


def _operation(uow: UnitOfWork, operation_id: str) -> OperationRow:
    operation = uow.operations.get(operation_id)
    if operation is None:
        raise InvalidState(f"operation {operation_id} is gone")
    return operation


def _compensation(uow: UnitOfWork, import_id: str) -> CompensationRow:
    compensation = uow.compensations.for_import(import_id)
    if compensation is None:
        raise InvalidState(f"import {import_id} has no compensation record")
    return compensation


def resume_compensations(ctx: ServiceContext, *, limit: int = 50) -> list[str]:
    """Finish compensations a crashed worker left in ``compensating`` (not those at needs_operator)."""
    stale = ctx.clock() - timedelta(seconds=ctx.commit_policy.lease_seconds)
    with ctx.store.reading() as uow:
        import_ids = uow.operations.stalled_imports(
            OperationKind.COMPENSATE.value, OperationState.COMPENSATING.value, stale, limit
        )
    return [
        compensate_import(ctx, import_id, reason="resumed after an interruption") for import_id in import_ids
    ]
