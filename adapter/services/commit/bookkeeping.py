"""The commit flow's durable bookkeeping: its events, its recovery points, its two rows.

Every step of a commit that must survive the process writes through here, so the history an
operation shows (``get_operation_status``) and the facts reconciliation relies on (``commit_sent``
written *before* COMMIT) come from one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adapter.domain.states import OperationState
from adapter.domain.vocabulary import EventKind, RecoveryPoint
from adapter.services.context import ServiceContext
from adapter.services.idempotency import retry_on_conflict
from adapter.store.tables import ImportRow, OperationRow
from adapter.store.unit_of_work import UnitOfWork

__all__ = [
    "Claim",
    "LeaseLost",
    "MissingRow",
    "StopRequested",
    "get_both",
    "get_import",
    "get_operation",
    "record_event",
    "record_retry",
    "set_recovery_point",
]


@dataclass(slots=True)
class Claim:
    """What a commit run works on: taken by the claim transaction, or by a worker that resumes it."""

    handle: str
    operation_id: str
    import_id: str
    batch_ref: str
    total: int
    lease_owner: str  # this run's own lease owner (see leases.new_lease_owner)
    ask_first: bool = False  # the operation ran before: ask whether its batch landed before committing
    target: str = ""  # the import's target, passed to the legacy session's begin
    earlier_refs: tuple[str, ...] = ()  # the import's other commit operations (late_commits.py)
    first_point_recorded: bool = True  # the claim wrote the first attempt's ``replaying`` point
    stopped: bool = False  # resumed with a stop already asked: the run stops at its first check
    abort_asked: bool = False  # seen by ``finish`` on the row: the owner asked to abort (a follow-up is due)


class LeaseLost(Exception):
    """Another worker (a reconciler) took the operation over: this one must not act on it."""


class StopRequested(Exception):
    """The owner asked the commit to stop (``stop_requested`` on its row) before COMMIT went out."""


class MissingRow(Exception):
    """A row the claim created is gone: the store was changed behind the kit's back."""


def set_recovery_point(
    ctx: ServiceContext, claim: Claim, point: RecoveryPoint, *, attempt: bool = False
) -> None:
    """Write a recovery point; also the proof that this worker still holds the operation's lease.

    In the same transaction the row's stop request is read: a stop asked for before this write
    (on any worker) raises ``StopRequested``, so a commit never sends COMMIT after its owner asked it
    to stop, whichever worker the request reached. On PostgreSQL the write is first tried as one
    statement on its own that writes only while all of that holds; where it wrote nothing, the
    checked transaction below says why.
    """

    def write() -> None:
        if ctx.store.writes_alone and ctx.store.move_recovery_point_if_held(
            claim.operation_id,
            claim.lease_owner,
            OperationState.IN_PROGRESS,
            point,
            attempt=attempt,
            event_kind=EventKind.OPERATION_RECOVERY_POINT,
        ):
            return
        with ctx.store.unit_of_work() as uow:
            # One statement writes the point and its event and reads what decides whether they may
            # stand; a refusal below leaves the unit of work uncommitted, so it rolls back.
            found = uow.operations.move_recovery_point(
                claim.operation_id, point, attempt=attempt, event_kind=EventKind.OPERATION_RECOVERY_POINT
            )
            if found is None:
                raise MissingRow(f"commit operation {claim.operation_id} is gone")
            lease_owner, status, stop_requested, _ = found
            if lease_owner != claim.lease_owner or status != OperationState.IN_PROGRESS:
                raise LeaseLost()
            if stop_requested is not None:
                raise StopRequested()
            uow.commit()

    retry_on_conflict(write)


def record_retry(ctx: ServiceContext, claim: Claim, error: BaseException | None) -> None:
    with ctx.store.unit_of_work() as uow:
        record_event(
            uow,
            EventKind.OPERATION_ATTEMPT_FAILED,
            claim,
            claim.operation_id,
            state=OperationState.IN_PROGRESS,
            detail={"error": type(error).__name__ if error else None, "retrying": True},
        )
        uow.commit()


def record_event(
    uow: UnitOfWork,
    kind: EventKind,
    subject: ImportRow | Claim,
    operation: OperationRow | str,
    *,
    state: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    """The one way the flow writes an event: about the import and operation of the commit, with the
    operation's status as the state unless another is given (an import event carries the import's)."""
    import_id = subject.id if isinstance(subject, ImportRow) else subject.import_id
    if isinstance(operation, OperationRow):
        operation_id, status = operation.id, operation.status
    else:
        operation_id, status = operation, None
    uow.events.record(
        kind, import_id=import_id, operation_id=operation_id, state=state or status, detail=detail
    )


def get_operation(uow: UnitOfWork, claim: Claim) -> OperationRow:
    operation = uow.operations.get(claim.operation_id)
    if operation is None:
        raise MissingRow(f"commit operation {claim.operation_id} is gone")
    return operation


def get_both(uow: UnitOfWork, claim: Claim) -> tuple[OperationRow, ImportRow]:
    """The claim's operation and import, in one read."""
    found = uow.operations.with_import(claim.operation_id)
    if found is None or found[1].id != claim.import_id:
        return get_operation(uow, claim), get_import(uow, claim)  # raises MissingRow, naming which
    return found


def get_import(uow: UnitOfWork, claim: Claim) -> ImportRow:
    row = uow.imports.get(claim.import_id)
    if row is None:
        raise MissingRow(f"import {claim.import_id} of commit operation {claim.operation_id} is gone")
    return row
