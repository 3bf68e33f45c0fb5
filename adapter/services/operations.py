"""Looking up an operation: its status, result and history, for its owner only.

A running commit's progress is read live from its run when this process runs it, and from the row
(as of its last lease renewal) when another worker does. The run is looked up before the row is read:
a run that ends in between has already written its end, but the read may still see the row as
running, and the run's count keeps the progress from falling back to the last renewal's.
:func:`commit_state` adds what the commit would answer now, which the Tasks extension inlines as a
task's result.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from adapter.domain.errors import InvalidRequest, OperationNotFound
from adapter.domain.identity import Principal
from adapter.domain.states import OperationKind
from adapter.domain.text import require_storable
from adapter.domain.views import CommitResult, HistoryEntry, OperationView
from adapter.services.commit.claim import answer_from_record
from adapter.services.commit.runner import CommitRun, local_run
from adapter.services.context import ServiceContext
from adapter.services.idempotency import validate_key
from adapter.services.rows import from_row
from adapter.store.tables import EventRow, ImportRow, OperationRow
from adapter.store.unit_of_work import UnitOfWork

__all__ = ["CommitState", "commit_state", "operation_status", "to_operation_view"]


@dataclass(frozen=True, slots=True)
class CommitState:
    """A commit operation as its owner sees it now, and the answer ``commit_import`` would give."""

    view: OperationView
    answer: CommitResult
    handle: str


def operation_status(
    ctx: ServiceContext,
    principal: Principal,
    *,
    operation_id: str | None = None,
    idempotency_key: str | None = None,
) -> OperationView:
    """Find an operation by id or by idempotency key. Another principal's gets OperationNotFound."""
    if (operation_id is None) == (idempotency_key is None):
        raise InvalidRequest("give exactly one of operation_id and idempotency_key")
    require_storable(operation_id=operation_id)
    run = local_run(operation_id) if isinstance(operation_id, str) else None  # before the read (module doc)
    with ctx.store.reading() as uow:
        if operation_id is not None:
            row = uow.operations.get(operation_id) if isinstance(operation_id, str) else None
        else:
            row = uow.operations.latest_by_key(
                principal.tenant, principal.subject, validate_key(idempotency_key) or ""
            )
        row = _owned(row, principal)
        return to_operation_view(row, uow.events.for_operation(row.id), _import_of(uow, row), run)


def commit_state(ctx: ServiceContext, principal: Principal, operation_id: str) -> CommitState:
    """The commit operation ``operation_id`` of ``principal``; OperationNotFound for anything else
    (unknown, another principal's, not a commit, its import purged): one answer for all."""
    require_storable(operation_id=operation_id)
    run = local_run(operation_id) if isinstance(operation_id, str) else None  # before the read (module doc)
    with ctx.store.reading() as uow:
        row = _owned(uow.operations.get(operation_id) if isinstance(operation_id, str) else None, principal)
        imported = _import_of(uow, row)
        if row.kind != OperationKind.COMMIT or imported is None:
            raise OperationNotFound()
        handle = ctx.codec.handle_for(imported.id)
        view = to_operation_view(row, uow.events.for_operation(row.id), imported, run)
        answer = answer_from_record(row, imported, handle)
    running = answer.status == "in_progress"
    answer = replace(answer, replayed=False, records_sent=view.records_sent if running else None)
    return CommitState(view, answer, handle)


def _owned(row: OperationRow | None, principal: Principal) -> OperationRow:
    if row is None or row.principal != principal.subject or row.tenant != principal.tenant:
        raise OperationNotFound()
    return row


def _import_of(uow: UnitOfWork, row: OperationRow) -> ImportRow | None:
    return uow.imports.get(row.import_id) if row.import_id is not None else None


def to_operation_view(
    row: OperationRow,
    events: list[EventRow],
    imported: ImportRow | None = None,
    run: CommitRun | None = None,
) -> OperationView:
    """``row`` as its owner sees it; ``run``: this process's run of it, looked up before ``row`` was
    read (else it is looked up now, which a run ending in between can miss: the module doc)."""
    history = tuple(HistoryEntry(e.created_at, e.kind, e.state, e.detail) for e in events)
    view = from_row(
        OperationView,
        row,
        {"operation_id": "id"},
        history=history,
        record_count=imported.record_count
        if imported is not None and row.kind == OperationKind.COMMIT
        else None,
    )
    run = run if run is not None and run.operation_id == row.id else local_run(row.id)
    if run is not None and row.status == "in_progress":  # this process runs it: its live count
        view = replace(view, records_sent=max(run.sent, view.records_sent or 0))
    return view
