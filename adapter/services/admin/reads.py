"""Operator reads: find out what happened to a call.

Operators see every principal's operations and imports, by import id; they never see handles (only a
digest of a handle is stored). Lists are filtered keyset pages (``adapter.services.paging``); a
cursor is bound to the filters it was issued with.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from adapter.domain.errors import ImportNotFound, InvalidRequest, OperationNotFound
from adapter.domain.states import OPERATION_UNRESOLVED
from adapter.domain.text import require_storable, require_storable_values
from adapter.domain.views import HistoryEntry
from adapter.services.context import ServiceContext
from adapter.services.paging import K, Window, keyset_page
from adapter.services.rows import from_row
from adapter.store.probe import probe_write
from adapter.store.tables import ImportRow, OperationRow

__all__ = [
    "MAX_PAGE",
    "AdminPage",
    "AuditEntry",
    "ImportFilter",
    "ImportRecord",
    "OperationDetail",
    "OperationFilter",
    "OperationRecord",
    "Step",
    "check_ready",
    "get_import",
    "get_operation",
    "list_imports",
    "list_operations",
    "status_counts",
    "unresolved_age_seconds",
]

MAX_PAGE = 200
_OPERATION_COLUMNS = ("status", "kind", "principal", "tenant", "idempotency_key", "import_id")


@dataclass(frozen=True, slots=True)
class OperationFilter:
    status: str | None = None
    kind: str | None = None
    principal: str | None = None
    tenant: str | None = None
    idempotency_key: str | None = None
    import_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True, slots=True)
class ImportFilter:
    status: str | None = None
    principal: str | None = None
    tenant: str | None = None
    target: str | None = None
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True, slots=True)
class OperationRecord:
    operation_id: str
    kind: str
    status: str
    principal: str
    tenant: str
    import_id: str | None
    idempotency_key: str | None
    recovery_point: str | None
    attempts: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class ImportRecord:
    import_id: str
    principal: str
    tenant: str
    target: str
    status: str
    record_count: int
    legacy_batch_id: str | None
    expires_at: datetime
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class AuditEntry:
    at: datetime
    actor: str
    action: str
    reason: str | None
    outcome: str


Step = HistoryEntry
"""One event of an operation: the same fact a caller's ``get_operation_status`` history shows."""


@dataclass(frozen=True, slots=True)
class OperationDetail:
    operation: OperationRecord
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    batch_ref: str | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    steps: list[Step]
    compensation: dict[str, Any] | None
    audit: list[AuditEntry]
    import_record: ImportRecord | None


@dataclass(frozen=True, slots=True)
class AdminPage:
    items: list[Any]
    next_cursor: str | None


def _operation_record(row: OperationRow) -> OperationRecord:
    return from_row(OperationRecord, row, {"operation_id": "id"})


def _import_record(row: ImportRow) -> ImportRecord:
    return from_row(ImportRecord, row, {"import_id": "id", "status": "state"})


def _filter_digest(filters: Any) -> str:
    return hashlib.sha256(json.dumps(asdict(filters), default=str, sort_keys=True).encode()).hexdigest()[:16]


def _page(
    ctx: ServiceContext,
    purpose: str,
    filters: OperationFilter | ImportFilter,
    limit: int,
    cursor: str | None,
    fetch: Callable[[Window], Sequence[K]],
) -> tuple[list[K], str | None]:
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidRequest(f"limit must be from 1 to {MAX_PAGE}")
    owner = "admin:" + _filter_digest(filters)  # a cursor is only valid with the filters it came from
    return keyset_page(ctx, purpose, owner, cursor, limit, fetch)


def list_operations(
    ctx: ServiceContext, filters: OperationFilter, *, limit: int = 50, cursor: str | None = None
) -> AdminPage:
    """Every principal's operations, newest first, filtered. Raises InvalidRequest, InvalidCursor."""
    require_storable_values("a filter", asdict(filters).values())
    equal = {name: getattr(filters, name) for name in _OPERATION_COLUMNS}
    with ctx.store.reading() as uow:
        rows, next_cursor = _page(
            ctx,
            "admin/operations",
            filters,
            limit,
            cursor,
            lambda window: uow.operations.page(equal, since=filters.since, until=filters.until, **window),
        )
        return AdminPage([_operation_record(r) for r in rows], next_cursor)


def list_imports(
    ctx: ServiceContext, filters: ImportFilter, *, limit: int = 50, cursor: str | None = None
) -> AdminPage:
    """Every principal's imports, newest first, filtered. Raises InvalidRequest, InvalidCursor."""
    require_storable_values("a filter", asdict(filters).values())
    equal = {
        "state": filters.status,
        "principal": filters.principal,
        "tenant": filters.tenant,
        "target": filters.target,
    }
    with ctx.store.reading() as uow:
        rows, next_cursor = _page(
            ctx,
            "admin/imports",
            filters,
            limit,
            cursor,
            lambda window: uow.imports.page(equal, since=filters.since, until=filters.until, **window),
        )
        return AdminPage([_import_record(r) for r in rows], next_cursor)


def get_operation(ctx: ServiceContext, operation_id: str) -> OperationDetail:
    require_storable(operation_id=operation_id)
    with ctx.store.reading() as uow:
        row = uow.operations.get(operation_id)
        if row is None:
            raise OperationNotFound()
        steps = [Step(e.created_at, e.kind, e.state, e.detail) for e in uow.events.for_operation(row.id)]
        audit = [
            AuditEntry(a.created_at, a.actor, a.action, a.reason, a.outcome)
            for a in uow.audit.for_operation(row.id)
        ]
        compensation = None
        if row.import_id is not None:
            found = uow.compensations.for_import(row.import_id)
            if found is not None:
                compensation = {
                    "legacy_batch_id": found.legacy_batch_id,
                    "status": found.status,
                    "reason": found.reason,
                    "attempts": found.attempts,
                    "last_error": found.last_error,
                }
        import_row = uow.imports.get(row.import_id) if row.import_id else None
        return from_row(
            OperationDetail,
            row,  # result, error, batch_ref and the lease are the row's
            operation=_operation_record(row),
            steps=steps,
            compensation=compensation,
            audit=audit,
            import_record=_import_record(import_row) if import_row is not None else None,
        )


def get_import(ctx: ServiceContext, import_id: str) -> tuple[ImportRecord, list[OperationRecord]]:
    require_storable(import_id=import_id)
    with ctx.store.reading() as uow:
        row = uow.imports.get(import_id)
        if row is None:
            raise ImportNotFound()
        return _import_record(row), [_operation_record(o) for o in uow.operations.for_import(row.id)]


def status_counts(ctx: ServiceContext) -> dict[str, int]:
    with ctx.store.reading() as uow:
        return uow.operations.count_by_status()


def unresolved_age_seconds(ctx: ServiceContext) -> float:
    """Reconciliation lag: how long the oldest operation that still needs resolving has waited."""
    with ctx.store.reading() as uow:
        oldest = uow.operations.oldest_update(sorted(s.value for s in OPERATION_UNRESOLVED))
    if oldest is None:
        return 0.0
    if oldest.tzinfo is None:  # an aggregate may come back without the column's type
        oldest = oldest.replace(tzinfo=UTC)
    return max(0.0, (ctx.clock() - oldest).total_seconds())


def check_ready(ctx: ServiceContext, min_free_disk_bytes: int = 0) -> list[str]:
    """What keeps the kit from serving: an empty list when the database takes a write, its disk is
    not full (a probe that rolls back needs no space, so the store says what it saw) and the legacy
    system answers."""
    problems = []
    try:
        probe_write(ctx.store)
    except Exception as exc:
        problems.append(f"database unreachable or read-only: {type(exc).__name__}")
    disk = ctx.store.disk_problem(min_free_disk_bytes)
    if disk is not None:
        problems.append(disk)
    try:
        ctx.legacy.batch_status("readiness-probe")
    except Exception as exc:
        problems.append(f"legacy system unreachable: {type(exc).__name__}")
    return problems
