"""Operator use cases: find out what happened to a call, and act on it.

Operators see every principal's operations and imports, by import id; they never see handles (only a
digest of a handle is stored). Every action (reconcile, compensate, resolve) is idempotent and
writes an audit record: who, what, when, why and how it ended, whatever the outcome.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, func, select, tuple_

from adapter.domain.cursors import InvalidCursor
from adapter.domain.errors import AdapterError, InvalidRequest, InvalidState, OperationNotFound
from adapter.domain.states import OPERATION_UNRESOLVED, OperationState, transition_operation
from adapter.domain.vocabulary import EventKind, OperatorAction
from adapter.ports.legacy import LegacyError
from adapter.services.abort import compensate_import
from adapter.services.context import ServiceContext
from adapter.services.leases import release_lease
from adapter.services.reconcile import reconcile_operation
from adapter.store.tables import AuditRow, CompensationRow, ImportRow, OperationRow

__all__ = [
    "ActionResult",
    "AdminPage",
    "AdminService",
    "AuditEntry",
    "ImportFilter",
    "ImportRecord",
    "NotFound",
    "OperationDetail",
    "OperationFilter",
    "OperationRecord",
    "act",
    "get_import",
    "get_operation",
    "list_imports",
    "list_operations",
    "status_counts",
    "unresolved_age_seconds",
]

MAX_PAGE = 200


class NotFound(AdapterError):
    code = "not_found"

    def __init__(self, what: str) -> None:
        super().__init__(f"no {what} with this id")


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


@dataclass(frozen=True, slots=True)
class Step:
    at: datetime
    event: str
    state: str | None
    detail: dict[str, Any] | None


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


@dataclass(frozen=True, slots=True)
class ActionResult:
    operation_id: str
    action: str
    outcome: str
    status: str
    detail: dict[str, Any] = field(default_factory=dict)


# --- reading ---------------------------------------------------------------------------------------


def _operation_record(row: OperationRow) -> OperationRecord:
    return OperationRecord(
        operation_id=row.id,
        kind=row.kind,
        status=row.status,
        principal=row.principal,
        tenant=row.tenant,
        import_id=row.import_id,
        idempotency_key=row.idempotency_key,
        recovery_point=row.recovery_point,
        attempts=row.attempts,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _import_record(row: ImportRow) -> ImportRecord:
    return ImportRecord(
        import_id=row.id,
        principal=row.principal,
        tenant=row.tenant,
        target=row.target,
        status=row.state,
        record_count=row.record_count,
        legacy_batch_id=row.legacy_batch_id,
        expires_at=row.expires_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _filter_digest(filters: Any) -> str:
    return hashlib.sha256(json.dumps(asdict(filters), default=str, sort_keys=True).encode()).hexdigest()[:16]


def _page(
    ctx: ServiceContext,
    query: Select[Any],
    model: Any,
    purpose: str,
    filters: Any,
    limit: int,
    cursor: str | None,
) -> tuple[list[Any], str | None]:
    """Keyset pagination, newest first, frozen at the first page so arrivals cause no duplicates or gaps."""
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidRequest(f"limit must be from 1 to {MAX_PAGE}")
    now = ctx.clock()
    owner = "admin:" + _filter_digest(filters)  # a cursor is only valid with the filters it came from
    as_of, before = now, None
    if cursor is not None:
        position = ctx.cursors.open(cursor, purpose, owner, now)
        try:
            as_of = datetime.fromisoformat(position["as_of"])
            before = (datetime.fromisoformat(position["created_at"]), str(position["id"]))
        except (KeyError, TypeError, ValueError):
            raise InvalidCursor() from None
    query = query.where(model.created_at <= as_of)
    if before is not None:
        query = query.where(tuple_(model.created_at, model.id) < tuple_(*before))
    query = query.order_by(model.created_at.desc(), model.id.desc()).limit(limit + 1)
    with ctx.store.unit_of_work() as uow:
        rows = list(uow.session.scalars(query))
    next_cursor = None
    if len(rows) > limit:
        last = rows[limit - 1]
        position = {"as_of": as_of.isoformat(), "created_at": last.created_at.isoformat(), "id": last.id}
        next_cursor = ctx.cursors.seal(purpose, owner, position, now)
    return rows[:limit], next_cursor


def list_operations(
    ctx: ServiceContext, filters: OperationFilter, *, limit: int = 50, cursor: str | None = None
) -> AdminPage:
    query = select(OperationRow)
    for name in ("status", "kind", "principal", "tenant", "idempotency_key", "import_id"):
        value = getattr(filters, name)
        if value is not None:
            query = query.where(getattr(OperationRow, name) == value)
    if filters.since is not None:
        query = query.where(OperationRow.created_at >= filters.since)
    if filters.until is not None:
        query = query.where(OperationRow.created_at < filters.until)
    rows, next_cursor = _page(ctx, query, OperationRow, "admin/operations", filters, limit, cursor)
    return AdminPage([_operation_record(r) for r in rows], next_cursor)


def list_imports(
    ctx: ServiceContext, filters: ImportFilter, *, limit: int = 50, cursor: str | None = None
) -> AdminPage:
    query = select(ImportRow)
    if filters.status is not None:
        query = query.where(ImportRow.state == filters.status)
    for name in ("principal", "tenant", "target"):
        value = getattr(filters, name)
        if value is not None:
            query = query.where(getattr(ImportRow, name) == value)
    if filters.since is not None:
        query = query.where(ImportRow.created_at >= filters.since)
    if filters.until is not None:
        query = query.where(ImportRow.created_at < filters.until)
    rows, next_cursor = _page(ctx, query, ImportRow, "admin/imports", filters, limit, cursor)
    return AdminPage([_import_record(r) for r in rows], next_cursor)


def get_operation(ctx: ServiceContext, operation_id: str) -> OperationDetail:
    with ctx.store.unit_of_work() as uow:
        row = uow.operations.get(operation_id)
        if row is None:
            raise OperationNotFound()
        steps = [Step(e.created_at, e.kind, e.state, e.detail) for e in uow.events.for_operation(row.id)]
        audit = [
            AuditEntry(a.created_at, a.actor, a.action, a.reason, a.outcome)
            for a in uow.session.scalars(
                select(AuditRow).where(AuditRow.operation_id == row.id).order_by(AuditRow.id)
            )
        ]
        compensation = None
        if row.import_id is not None:
            found = uow.session.scalars(
                select(CompensationRow).where(CompensationRow.import_id == row.import_id)
            ).one_or_none()
            if found is not None:
                compensation = {
                    "legacy_batch_id": found.legacy_batch_id,
                    "status": found.status,
                    "reason": found.reason,
                    "attempts": found.attempts,
                    "last_error": found.last_error,
                }
        import_row = uow.imports.get(row.import_id) if row.import_id else None
        return OperationDetail(
            operation=_operation_record(row),
            result=row.result,
            error=row.error,
            batch_ref=row.batch_ref,
            lease_owner=row.lease_owner,
            lease_expires_at=row.lease_expires_at,
            steps=steps,
            compensation=compensation,
            audit=audit,
            import_record=_import_record(import_row) if import_row is not None else None,
        )


def get_import(ctx: ServiceContext, import_id: str) -> tuple[ImportRecord, list[OperationRecord]]:
    with ctx.store.unit_of_work() as uow:
        row = uow.imports.get(import_id)
        if row is None:
            raise NotFound("import")
        return _import_record(row), [_operation_record(o) for o in uow.operations.for_import(row.id)]


def status_counts(ctx: ServiceContext) -> dict[str, int]:
    with ctx.store.unit_of_work() as uow:
        rows = uow.session.execute(select(OperationRow.status, func.count()).group_by(OperationRow.status))
        return {status: count for status, count in rows}


def unresolved_age_seconds(ctx: ServiceContext) -> float:
    """Reconciliation lag: how long the oldest operation that still needs resolving has waited."""
    with ctx.store.unit_of_work() as uow:
        oldest = uow.session.scalar(
            select(func.min(OperationRow.updated_at)).where(
                OperationRow.status.in_(sorted(s.value for s in OPERATION_UNRESOLVED))
            )
        )
    if oldest is None:
        return 0.0
    if oldest.tzinfo is None:  # an aggregate may come back without the column's type
        oldest = oldest.replace(tzinfo=UTC)
    return max(0.0, (ctx.clock() - oldest).total_seconds())


# --- acting ------------------------------------------------------------------------------------------


def act(
    ctx: ServiceContext, operation_id: str, action: str, *, actor: str, reason: str | None = None
) -> ActionResult:
    """Run an operator action and audit it. Raises OperationNotFound, InvalidRequest, InvalidState."""
    if action not in set(OperatorAction):
        raise InvalidRequest(f"unknown action {action!r}")
    if action == OperatorAction.RESOLVE and not (reason and reason.strip()):
        raise InvalidRequest("resolving an operation needs a reason")
    if reason is not None and "\x00" in reason:
        raise InvalidRequest("the reason may not contain NUL characters")
    with ctx.store.unit_of_work() as uow:
        row = uow.operations.get(operation_id)
        if row is None:
            raise OperationNotFound()
        import_id = row.import_id
    try:
        outcome, detail = _ACTIONS[OperatorAction(action)](ctx, operation_id, import_id, actor, reason)
    except (AdapterError, LegacyError) as exc:
        _audit(ctx, operation_id, actor, action, reason, f"refused: {type(exc).__name__}")
        raise
    _audit(ctx, operation_id, actor, action, reason, outcome)
    with ctx.store.unit_of_work() as uow:
        row = uow.operations.get(operation_id)
        if row is None:  # purged while the action ran
            raise OperationNotFound()
        status = row.status
    return ActionResult(operation_id, action, outcome, status, detail)


def _reconcile(
    ctx: ServiceContext, operation_id: str, import_id: str | None, actor: str, reason: str | None
) -> tuple[str, dict[str, Any]]:
    resolution = reconcile_operation(ctx, operation_id, by=f"operator:{actor}")
    if resolution is None:
        return "nothing to reconcile (already resolved, held by a worker, or too early to tell)", {}
    return f"reconciled: {resolution.finding}", {"finding": resolution.finding}


def _compensate(
    ctx: ServiceContext, operation_id: str, import_id: str | None, actor: str, reason: str | None
) -> tuple[str, dict[str, Any]]:
    if import_id is None:
        raise InvalidState("this operation belongs to no import")
    state = compensate_import(ctx, import_id, reason=reason or f"compensated by operator {actor}")
    return f"import {state}", {"import_status": state}


def _resolve(
    ctx: ServiceContext, operation_id: str, import_id: str | None, actor: str, reason: str | None
) -> tuple[str, dict[str, Any]]:
    with ctx.store.unit_of_work() as uow:
        row = uow.operations.get(operation_id)
        if row is None:
            raise OperationNotFound()
        if row.status == OperationState.RESOLVED.value:
            return "already resolved", {}
        if row.status != OperationState.NEEDS_OPERATOR.value:
            raise InvalidState(
                f"only an operation that needs an operator can be resolved; this one is {row.status}"
            )
        transition_operation(row, OperationState.RESOLVED)
        release_lease(row)
        uow.events.record(
            EventKind.OPERATION_RESOLVED,
            import_id=row.import_id,
            operation_id=row.id,
            state=row.status,
            detail={"by": actor},
        )
        uow.commit()
    return "resolved", {}


_ACTIONS = {
    OperatorAction.RECONCILE: _reconcile,
    OperatorAction.COMPENSATE: _compensate,
    OperatorAction.RESOLVE: _resolve,
}


def _audit(
    ctx: ServiceContext, operation_id: str, actor: str, action: str, reason: str | None, outcome: str
) -> None:
    with ctx.store.unit_of_work() as uow:
        uow.session.add(
            AuditRow(
                operation_id=operation_id,
                actor=actor[:200],
                action=action,
                reason=(reason or None) and reason[:1000],
                outcome=outcome[:200],
            )
        )
        uow.commit()


class AdminService:
    """The operator use cases, as one object for the admin API, the ops CLI and the dashboard."""

    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx

    def list_operations(
        self, filters: OperationFilter, *, limit: int = 50, cursor: str | None = None
    ) -> AdminPage:
        return list_operations(self.ctx, filters, limit=limit, cursor=cursor)

    def list_imports(self, filters: ImportFilter, *, limit: int = 50, cursor: str | None = None) -> AdminPage:
        return list_imports(self.ctx, filters, limit=limit, cursor=cursor)

    def get_operation(self, operation_id: str) -> OperationDetail:
        return get_operation(self.ctx, operation_id)

    def get_import(self, import_id: str) -> tuple[ImportRecord, list[OperationRecord]]:
        return get_import(self.ctx, import_id)

    def act(self, operation_id: str, action: str, *, actor: str, reason: str | None = None) -> ActionResult:
        return act(self.ctx, operation_id, action, actor=actor, reason=reason)

    def status_counts(self) -> dict[str, int]:
        return status_counts(self.ctx)

    def unresolved_age_seconds(self) -> float:
        return unresolved_age_seconds(self.ctx)

    def check_ready(self) -> list[str]:
        """What keeps the kit from serving: an empty list when the database and legacy system answer."""
        problems = []
        try:
            with self.ctx.store.unit_of_work() as uow:
                uow.session.execute(select(1))
        except Exception as exc:
            problems.append(f"database unreachable: {type(exc).__name__}")
        try:
            self.ctx.legacy.batch_status("readiness-probe")
        except Exception as exc:
            problems.append(f"legacy system unreachable: {type(exc).__name__}")
        return problems
