"""Looking up an operation: its status, result and history, for its owner only."""

from __future__ import annotations

from adapter.domain.errors import InvalidRequest, OperationNotFound
from adapter.domain.identity import Principal
from adapter.domain.views import HistoryEntry, OperationView
from adapter.services.context import ServiceContext
from adapter.services.idempotency import validate_key
from adapter.store.tables import EventRow, OperationRow

__all__ = ["operation_status", "to_operation_view"]


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
    with ctx.store.unit_of_work() as uow:
        if operation_id is not None:
            row = uow.operations.get(operation_id) if isinstance(operation_id, str) else None
        else:
            row = uow.operations.latest_by_key(
                principal.tenant, principal.subject, validate_key(idempotency_key) or ""
            )
        if row is None or row.principal != principal.subject or row.tenant != principal.tenant:
            raise OperationNotFound()
        return to_operation_view(row, uow.events.for_operation(row.id))


def to_operation_view(row: OperationRow, events: list[EventRow]) -> OperationView:
    return OperationView(
        operation_id=row.id,
        kind=row.kind,
        status=row.status,
        import_id=row.import_id,
        recovery_point=row.recovery_point,
        attempts=row.attempts,
        result=row.result,
        error=row.error,
        created_at=row.created_at,
        updated_at=row.updated_at,
        history=tuple(
            HistoryEntry(at=e.created_at, event=e.kind, state=e.state, detail=e.detail) for e in events
        ),
    )
