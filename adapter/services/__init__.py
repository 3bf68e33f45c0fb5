"""The service layer: the only place business rules live.

Transports (MCP, admin HTTP, CLI) call :class:`ImportService`; it delegates each use case to the
module that owns it, so "where is the commit flow" is answered by ``services/commit.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Unpack

from adapter.domain.confirmation import CommitSubject
from adapter.domain.identity import Principal
from adapter.domain.views import AbortResult, AddResult, BeginResult, CommitResult, ImportView, OperationView
from adapter.services.abort import abort_import, compensate_import
from adapter.services.commit import CommitOptions, commit_import
from adapter.services.confirmation import Decision, commit_subject, mark_stale, record_decision
from adapter.services.context import CancelToken, CommitPolicy, ProgressCallback, ServiceContext
from adapter.services.imports import add_records, begin_import, import_status, import_status_async
from adapter.services.listing import ChangeFollower, ImportPage, list_imports
from adapter.services.maintenance import MaintenanceReport, run_maintenance
from adapter.services.operations import operation_status
from adapter.services.quotas import CommitSlot, Slots, StagingRates
from adapter.services.reconcile import Resolution, reconcile_operation, reconcile_pass

__all__ = [
    "CancelToken",
    "CommitPolicy",
    "Decision",
    "ImportPage",
    "ImportService",
    "ProgressCallback",
    "ServiceContext",
]


class ImportService:
    """The use cases of one import transaction, each re-authorizing the caller on every call."""

    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        # Each commit holds a legacy session for its whole replay: bounded per tenant and in all.
        self.commit_slots = Slots(
            ctx.quotas.max_commits_per_tenant,
            "max_commits_per_tenant",
            total=ctx.quotas.legacy_sessions,
            total_setting="legacy_sessions",
        )
        # Bytes and records staged a second, per principal and per tenant (services/quotas.py).
        self.staging_rates = StagingRates(ctx.quotas, clock=lambda: ctx.clock().timestamp())

    def begin(
        self,
        principal: Principal,
        target: str,
        *,
        idempotency_key: str | None = None,
        ttl_seconds: int | None = None,
    ) -> BeginResult:
        return begin_import(
            self.ctx, principal, target, idempotency_key=idempotency_key, ttl_seconds=ttl_seconds
        )

    def add(
        self, principal: Principal, handle: str, records: Sequence[Any], *, idempotency_key: str | None = None
    ) -> AddResult:
        return add_records(
            self.ctx, principal, handle, records, idempotency_key=idempotency_key, rates=self.staging_rates
        )

    def commit(self, principal: Principal, handle: str, **options: Unpack[CommitOptions]) -> CommitResult:
        with CommitSlot(self.commit_slots, principal.tenant, "commits of this tenant") as slot:
            return commit_import(self.ctx, principal, handle, slot=slot, **options)

    def confirmation_subject(self, principal: Principal, handle: str) -> CommitSubject | None:
        """What a commit confirmation would describe now (None: nothing to confirm)."""
        return commit_subject(self.ctx, principal, handle)

    def record_confirmation(
        self, principal: Principal, round_id: str, subject: CommitSubject, decision: Decision
    ) -> Decision:
        """Store the first answer of a confirmation round; refuse a different later one."""
        return record_decision(self.ctx, principal, round_id, subject, decision)

    def confirmation_stale(self, round_id: str) -> None:
        """Mark an accepted round whose import changed before the commit: it never commits."""
        mark_stale(self.ctx, round_id)

    def abort(self, principal: Principal, handle: str) -> AbortResult:
        return abort_import(self.ctx, principal, handle)

    def status(self, principal: Principal, handle: str) -> ImportView:
        return import_status(self.ctx, principal, handle)

    async def status_async(self, principal: Principal, handle: str) -> ImportView:
        """``status`` for callers on an event loop (the MCP tool): no thread hop where avoidable."""
        return await import_status_async(self.ctx, principal, handle)

    def operation_status(
        self, principal: Principal, *, operation_id: str | None = None, idempotency_key: str | None = None
    ) -> OperationView:
        return operation_status(
            self.ctx, principal, operation_id=operation_id, idempotency_key=idempotency_key
        )

    def list_imports(self, principal: Principal, *, cursor: str | None, limit: int) -> ImportPage:
        return list_imports(self.ctx, principal, cursor=cursor, limit=limit)

    def follow_changes(self) -> ChangeFollower:
        """A follower of the event table that names changed imports (the subscription feed)."""
        return ChangeFollower(self.ctx)

    def reconcile(self, operation_id: str | None = None) -> list[Resolution]:
        """Reconcile one operation, or every candidate when ``operation_id`` is None."""
        if operation_id is None:
            return reconcile_pass(self.ctx)
        resolution = reconcile_operation(self.ctx, operation_id)
        return [] if resolution is None else [resolution]

    def maintain(self, *, retention: timedelta | None = None, purge_batch: int = 500) -> MaintenanceReport:
        return run_maintenance(self.ctx, retention=retention, purge_batch=purge_batch)

    def compensate(self, import_id: str, *, reason: str) -> str:
        """Operator action: VOID the legacy batch of a committed import."""
        return compensate_import(self.ctx, import_id, reason=reason)
