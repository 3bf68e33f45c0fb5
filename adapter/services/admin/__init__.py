"""Operator use cases: find out what happened to a call (``reads``), and act on it (``actions``).

:class:`AdminService` is the one facade the admin API, the dashboard and the ops CLI call.
"""

from __future__ import annotations

from adapter.services.admin.actions import ActionResult as ActionResult
from adapter.services.admin.actions import act
from adapter.services.admin.reads import MAX_PAGE as MAX_PAGE
from adapter.services.admin.reads import AdminPage as AdminPage
from adapter.services.admin.reads import AuditEntry as AuditEntry
from adapter.services.admin.reads import ImportFilter as ImportFilter
from adapter.services.admin.reads import ImportRecord as ImportRecord
from adapter.services.admin.reads import OperationDetail as OperationDetail
from adapter.services.admin.reads import OperationFilter as OperationFilter
from adapter.services.admin.reads import OperationRecord as OperationRecord
from adapter.services.admin.reads import Step as Step
from adapter.services.admin.reads import (
    check_ready,
    get_import,
    get_operation,
    list_imports,
    list_operations,
    status_counts,
    unresolved_age_seconds,
)
from adapter.services.context import ServiceContext
from adapter.services.reconcile import Resume

# The facade; ``X as X`` above re-exports the types and constants of ``reads`` and ``actions`` its
# callers need.


class AdminService:
    """The operator use cases, as one object for the admin API, the ops CLI and the dashboard."""

    def __init__(
        self, ctx: ServiceContext, *, resume: Resume | None = None, min_free_disk_bytes: int = 0
    ) -> None:
        self.ctx = ctx
        self._resume = resume  # the import service's: a reconcile runs again a commit left before COMMIT
        self.min_free_disk_bytes = min_free_disk_bytes  # below it the readiness check says not ready

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
        return act(self.ctx, operation_id, action, actor=actor, reason=reason, resume=self._resume)

    def status_counts(self) -> dict[str, int]:
        return status_counts(self.ctx)

    def unresolved_age_seconds(self) -> float:
        return unresolved_age_seconds(self.ctx)

    def check_ready(self) -> list[str]:
        """What keeps the kit from serving: an empty list when the database and legacy system answer."""
        return check_ready(self.ctx, self.min_free_disk_bytes)
