"""Reconciliation: turn every unknown outcome into a known, recorded one by asking the legacy system.

Candidates are commit operations in ``outcome_unknown`` and ``in_progress`` ones whose lease ran
out (their worker died or hung). For each, the reconciler takes the lease (so one reconciler acts),
asks ``batch_status(batch_ref)``, and records what it learns:

* one batch under the reference: the commit landed; operation ``succeeded``, import ``committed``;
* several batches: the same work landed twice (a COMMIT held past the grace period and the retry
  under the same key after its ``not_committed`` verdict). When each holds the import's records the
  oldest stays and the others are voided and counted (``late_commits.void_repeated_commit``), and
  the one left is judged; otherwise, or when a VOID fails, ``needs_operator`` with the reason, so
  a person voids the extra batch;
* no batch, and COMMIT was never sent (the recovery point says so): nothing landed; operation
  ``failed`` (``not_committed``), import back to ``open`` so it can be committed again;
* no batch, but COMMIT was sent: believed only after ``unknown_grace_seconds`` since it was sent,
  because a slow legacy system may still apply a COMMIT whose reply was lost. Until then the
  operation is left as it is and asked about again on the next pass.

A commit whose worker went away *before* COMMIT (``in_progress``, lease run out, no ``commit_sent``)
is not judged but resumed: the server owes it to the caller who was told ``in_progress``. The
reconciler hands it, under the lease it just took, to ``resume`` (``ImportService.resume_commit``),
which replays it from the start in a new legacy session, asking first whether its batch landed.

The reconciler itself never sends COMMIT. A later commit of the same operation asks first (see
``commit/run.py``), so nothing is ever committed twice. When the owner had asked to abort the
import meanwhile, "not committed" makes it ``aborted`` and "committed" is followed by a VOID
(``abort.settle_abort_request``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from adapter.domain.errors import InvalidState, StoreConflict
from adapter.domain.states import (
    OPERATION_AWAITING_RECONCILIATION,
    ImportState,
    OperationKind,
    OperationState,
    transition,
    transition_operation,
)
from adapter.domain.vocabulary import EventKind, Finding, RecoveryPoint, StopRequest
from adapter.ports.legacy import BatchStatus, LegacyError
from adapter.services.abort import settle_abort_request
from adapter.services.context import ServiceContext
from adapter.services.findings import judge
from adapter.services.idempotency import retry_on_conflict
from adapter.services.late_commits import void_repeated_commit
from adapter.services.leases import lease_is_free, new_lease_owner, release_lease, take_lease
from adapter.store.tables import EventRow

__all__ = ["Resolution", "Resume", "reconcile_operation", "reconcile_pass"]

log = logging.getLogger("adapter.reconcile")


Resume = Callable[[str, str, str], bool]
"""``(operation id, lease owner, by)``: run the commit again under that lease; False if it cannot now."""


@dataclass(frozen=True, slots=True)
class Resolution:
    """What one reconciliation found and recorded (``status`` is the operation's new status)."""

    operation_id: str
    import_id: str | None
    previous: str
    status: str
    finding: str
    abort_asked: bool = False
    """Its owner had asked to abort it meanwhile: the abort's follow-up is due."""


def reconcile_pass(
    ctx: ServiceContext, *, limit: int = 100, resume: Resume | None = None
) -> list[Resolution]:
    """Resolve what can be resolved now; returns the resolutions made (one line each for the CLI)."""
    resolutions = []
    for operation_id in _candidates(ctx, limit):
        try:
            resolution = reconcile_operation(ctx, operation_id, resume=resume)
        except LegacyError as exc:  # the legacy system is unreachable: try again next pass
            log.info("reconcile %s postponed: %s", operation_id, type(exc).__name__)
            continue
        if resolution is not None:
            resolutions.append(resolution)
    return resolutions


def _candidates(ctx: ServiceContext, limit: int) -> list[str]:
    now = ctx.clock()
    with ctx.store.reading() as uow:
        return uow.operations.reconcile_candidates(
            OperationKind.COMMIT.value,
            OperationState.OUTCOME_UNKNOWN.value,
            OperationState.IN_PROGRESS.value,
            now,
            limit,
        )


def reconcile_operation(
    ctx: ServiceContext, operation_id: str, *, by: str = "reconciler", resume: Resume | None = None
) -> Resolution | None:
    """Reconcile one operation if it needs it and nobody else holds it. Raises LegacyError.

    With ``resume``, a commit whose worker went away before COMMIT is run again instead of judged.
    """
    owner = new_lease_owner(ctx)
    claimed = _claim(ctx, operation_id, owner)
    if claimed is None:
        return None
    previous, batch_ref, commit_sent_at, import_id = claimed
    if previous == OperationState.IN_PROGRESS and commit_sent_at is None and resume is not None:
        if resume(operation_id, owner, by):
            log.info("commit %s resumed after its worker went away before COMMIT", operation_id)
            return Resolution(operation_id, import_id, previous, previous, Finding.RESUMED)
        _release(ctx, operation_id, owner)
        return None
    try:
        status = ctx.legacy.batch_status(batch_ref)
        if len(status.batches) > 1 and import_id is not None:
            status = void_repeated_commit(ctx, import_id, operation_id, status)
    except BaseException:
        _release(ctx, operation_id, owner)
        raise
    resolution = _record(ctx, operation_id, owner, previous, status, commit_sent_at, by)
    if resolution is not None and resolution.import_id is not None and resolution.abort_asked:
        settle_abort_request(ctx, resolution.import_id)  # an abort asked while it was unknown
    return resolution


def _claim(
    ctx: ServiceContext, operation_id: str, owner: str
) -> tuple[str, str, datetime | None, str | None] | None:
    now = ctx.clock()
    try:
        with ctx.store.unit_of_work() as uow:
            operation = uow.operations.get(operation_id)
            if (
                operation is None
                or operation.status not in OPERATION_AWAITING_RECONCILIATION
                or operation.batch_ref is None
            ):
                return None
            if not lease_is_free(operation, now):
                return None
            previous = operation.status
            take_lease(operation, owner, now, ctx.commit_policy.lease_seconds)
            sent_at = _commit_sent_at(uow.events.for_operation(operation_id))
            uow.commit()
            return previous, operation.batch_ref, sent_at, operation.import_id
    except StoreConflict:
        return None  # another reconciler or worker got there first


def _commit_sent_at(events: list[EventRow]) -> datetime | None:
    sent = [
        e.created_at
        for e in events
        if e.kind == EventKind.OPERATION_RECOVERY_POINT
        and (e.detail or {}).get("point") == RecoveryPoint.COMMIT_SENT
    ]
    return sent[-1] if sent else None


def _release(ctx: ServiceContext, operation_id: str, owner: str) -> None:
    def write() -> None:
        with ctx.store.unit_of_work() as uow:
            operation = uow.operations.get(operation_id)
            if operation is not None and operation.lease_owner == owner:
                release_lease(operation)
                uow.commit()

    retry_on_conflict(write)


def _record(
    ctx: ServiceContext,
    operation_id: str,
    owner: str,
    previous: str,
    status: BatchStatus,
    commit_sent_at: datetime | None,
    by: str,
) -> Resolution | None:
    now = ctx.clock()
    grace = timedelta(seconds=ctx.commit_policy.unknown_grace_seconds)
    if not status.committed and commit_sent_at is not None and now < commit_sent_at + grace:
        _release(ctx, operation_id, owner)
        return None  # too early to believe "not committed"

    def write() -> Resolution | None:
        with ctx.store.unit_of_work() as uow:
            operation = uow.operations.get(operation_id)
            if operation is None or operation.import_id is None:
                raise InvalidState(f"operation {operation_id} is gone or belongs to no import")
            if operation.lease_owner != owner or operation.status not in OPERATION_AWAITING_RECONCILIATION:
                return None  # the commit finished (or someone else acted) meanwhile: its record stands
            row = uow.imports.get(operation.import_id)
            if row is None:
                raise InvalidState(f"the import of operation {operation_id} is gone")
            finding, op_state, import_state = judge(status, row.record_count)
            if import_state is ImportState.OPEN and operation.stop_requested == StopRequest.ABORT:
                import_state = ImportState.ABORTED  # not committed, and its owner asked to abort it
            transition_operation(operation, op_state)
            release_lease(operation)
            if op_state is OperationState.SUCCEEDED:
                first = status.batches[0]
                operation.result = {
                    "legacy_batch_id": first.legacy_batch_id,
                    "record_count": first.record_count,
                }
                operation.error = None
                operation.recovery_point = RecoveryPoint.COMMITTED
                row.legacy_batch_id = first.legacy_batch_id
            else:
                operation.error = {"code": finding, "batches": [b.legacy_batch_id for b in status.batches]}
                if status.committed:  # it did land: the import names its (first) batch for the operator
                    row.legacy_batch_id = status.batches[0].legacy_batch_id
            if row.state != import_state.value:
                transition(row, import_state)
            detail = {"finding": finding, "batches": len(status.batches), "by": by, "previous": previous}
            uow.events.record(
                EventKind.OPERATION_RECONCILED,
                import_id=row.id,
                operation_id=operation.id,
                state=operation.status,
                detail=detail,
            )
            uow.events.record(
                EventKind.for_import(row.state), import_id=row.id, operation_id=operation.id, state=row.state
            )
            asked = operation.stop_requested == StopRequest.ABORT
            uow.commit()
            return Resolution(operation.id, row.id, previous, operation.status, finding, asked)

    resolution = retry_on_conflict(write)
    if resolution is None:
        return None
    log.info(
        "reconciled operation %s: %s -> %s (%s)",
        operation_id,
        previous,
        resolution.status,
        resolution.finding,
    )
    return resolution
