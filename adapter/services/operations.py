"""Looking up an operation: its status, result and history, for its owner only."""

from __future__ import annotations

from adapter.domain.errors import InvalidRequest, OperationNotFound
from adapter.domain.identity import Principal
from adapter.domain.text import require_storable
from adapter.domain.views import HistoryEntry, OperationView
from adapter.services.context import ServiceContext
from adapter.services.idempotency import validate_key
from adapter.services.rows import from_row
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
    require_storable(operation_id=operation_id)
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
    history = tuple(HistoryEntry(e.created_at, e.kind, e.state, e.detail) for e in events)
    return from_row(OperationView, row, {"operation_id": "id"}, history=history)
