"""Operator actions: reconcile, compensate and resolve one operation, each audited.

Every action is idempotent and writes an audit record (who, what, when, why and how it ended),
whatever the outcome: also when it is refused for the operation's state or fails on the legacy system.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adapter.domain.errors import AdapterError, InvalidRequest, InvalidState, OperationNotFound
from adapter.domain.states import OperationState, transition_operation
from adapter.domain.text import require_storable
from adapter.domain.vocabulary import EventKind, OperatorAction
from adapter.ports.legacy import LegacyError
from adapter.services.abort import compensate_import
from adapter.services.context import ServiceContext
from adapter.services.leases import release_lease
from adapter.services.reconcile import Resume, reconcile_operation

__all__ = ["ActionResult", "act"]


@dataclass(frozen=True, slots=True)
class ActionResult:
    operation_id: str
    action: str
    outcome: str
    status: str
    detail: dict[str, Any] = field(default_factory=dict)


def act(
    ctx: ServiceContext,
    operation_id: str,
    action: str,
    *,
    actor: str,
    reason: str | None = None,
    resume: Resume | None = None,
) -> ActionResult:
    """Run an operator action and audit it. Raises OperationNotFound, InvalidRequest, InvalidState.

    ``resume`` lets ``reconcile`` run again a commit whose worker went away before COMMIT (the
    server's own reconciler does the same), instead of judging it."""
    if action not in set(OperatorAction):
        raise InvalidRequest(f"unknown action {action!r}")
    if action == OperatorAction.RESOLVE and not (reason and reason.strip()):
        raise InvalidRequest("resolving an operation needs a reason")
    if reason is not None and "\x00" in reason:
        raise InvalidRequest("the reason may not contain NUL characters")
    require_storable(operation_id=operation_id, reason=reason)
    with ctx.store.reading() as uow:
        row = uow.operations.get(operation_id)
        if row is None:
            raise OperationNotFound()
        import_id = row.import_id
    try:
        chosen = OperatorAction(action)
        if chosen is OperatorAction.RECONCILE:
            outcome, detail = _reconcile(ctx, operation_id, actor, resume)
        else:
            outcome, detail = _ACTIONS[chosen](ctx, operation_id, import_id, actor, reason)
    except (AdapterError, LegacyError) as exc:
        _audit(ctx, operation_id, actor, action, reason, f"refused: {type(exc).__name__}")
        raise
    _audit(ctx, operation_id, actor, action, reason, outcome)
    with ctx.store.reading() as uow:
        row = uow.operations.get(operation_id)
        if row is None:  # purged while the action ran
            raise OperationNotFound()
        status = row.status
    return ActionResult(operation_id, action, outcome, status, detail)


def _reconcile(
    ctx: ServiceContext, operation_id: str, actor: str, resume: Resume | None
) -> tuple[str, dict[str, Any]]:
    resolution = reconcile_operation(ctx, operation_id, by=f"operator:{actor}", resume=resume)
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
    OperatorAction.COMPENSATE: _compensate,
    OperatorAction.RESOLVE: _resolve,
}


def _audit(
    ctx: ServiceContext, operation_id: str, actor: str, action: str, reason: str | None, outcome: str
) -> None:
    with ctx.store.unit_of_work() as uow:
        uow.audit.record(operation_id, actor, action, reason, outcome)
        uow.commit()
