"""The service layer: the only place business rules live.

Transports (MCP, admin HTTP, CLI) call :class:`ImportService`; it delegates each use case to the
module that owns it, so "where is the commit flow" is answered by ``services/commit/``.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent import futures
from datetime import timedelta
from typing import Any, Unpack

import anyio.to_thread

from adapter.domain.confirmation import CommitSubject, Subject
from adapter.domain.identity import Principal
from adapter.domain.states import IMPORT_FINAL, OperationState
from adapter.domain.views import (
    AbortResult,
    AddResult,
    BeginResult,
    CommitResult,
    ImportView,
    OperationView,
    ReplaceResult,
)
from adapter.domain.vocabulary import StopRequest
from adapter.services.abort import abort_import, compensate_import, settle_abort_request
from adapter.services.commit import CommitOptions, CommitRun, begin_commit, wait_for_run
from adapter.services.commit.claim import resume_claim
from adapter.services.commit.confirmation import Conversation, Decision, commit_subject, void_subject
from adapter.services.commit.runner import hand_over_all, start_run
from adapter.services.commit.stop import request_stop
from adapter.services.context import CancelToken, CommitPolicy, ProgressCallback, ServiceContext
from adapter.services.imports import add_records, begin_import, import_status, import_status_async
from adapter.services.listing import ChangeFollower, ImportPage, list_imports
from adapter.services.maintenance import MaintenanceReport, run_maintenance
from adapter.services.operations import CommitState, commit_state, operation_status
from adapter.services.quotas import CommitSlot, Slots, StagingRates
from adapter.services.reconcile import Resolution, Resume, reconcile_operation, reconcile_pass
from adapter.services.repair import replace_records
from adapter.services.review import ImportReview, review_import
from adapter.services.waiting import wait_budget, wait_for_change

__all__ = [
    "CancelToken",
    "CommitPolicy",
    "CommitRun",
    "CommitState",
    "Decision",
    "ImportPage",
    "ImportReview",
    "ImportService",
    "ProgressCallback",
    "ServiceContext",
]

_FOLLOWED = frozenset(
    {OperationState.IN_PROGRESS, OperationState.OUTCOME_UNKNOWN, OperationState.COMPENSATING}
)
"""Operation states that change by themselves (a run, the reconciler, a VOID): worth waiting on."""


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
        self.conversation = Conversation(ctx)
        """The confirmation of a commit, step by step (``commit/confirmation.py``)."""
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

    def replace(
        self,
        principal: Principal,
        handle: str,
        replacements: Sequence[tuple[int, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> ReplaceResult:
        """Put records in place of staged ones by position (repairing what the system refused)."""
        rates = self.staging_rates
        return replace_records(
            self.ctx, principal, handle, replacements, idempotency_key=idempotency_key, rates=rates
        )

    # --- the commit -----------------------------------------------------------------------------

    def start_commit(
        self,
        principal: Principal,
        handle: str,
        *,
        idempotency_key: str | None = None,
        expect: CommitSubject | None = None,
        cancel: CancelToken | None = None,
    ) -> CommitRun | CommitResult:
        """Claim and start the commit in the background (the run), or answer from the record."""
        slot = self._slot(principal.tenant)
        try:
            started = begin_commit(
                self.ctx,
                principal,
                handle,
                key=idempotency_key,
                expect=expect,
                slot=slot,
                cancel=cancel,
                after=settle_abort_request,
            )
        except BaseException:
            slot.release()
            raise
        if isinstance(started, CommitResult):
            slot.release()  # never taken: nothing started
        return started

    def commit(self, principal: Principal, handle: str, **options: Unpack[CommitOptions]) -> CommitResult:
        """Commit and wait for the outcome (the CLI, tests and benchmarks; MCP waits a bounded time)."""
        started = self.start_commit(
            principal,
            handle,
            idempotency_key=options.get("idempotency_key"),
            expect=options.get("expect"),
            cancel=options.get("cancel"),
        )
        if isinstance(started, CommitResult):
            return started
        return wait_for_run(started, options.get("progress"))

    def cancel_commit(self, principal: Principal, operation_id: str) -> CommitState:
        """The owner's stop of a commit operation (a task's cancel): before COMMIT it stops and the
        import is open again; after, the real outcome stands. OperationNotFound for anything else."""
        commit_state(self.ctx, principal, operation_id)  # authorizes: the owner's commit, or not found
        request_stop(self.ctx, operation_id, StopRequest.CANCEL)
        return commit_state(self.ctx, principal, operation_id)

    def commit_state(self, principal: Principal, operation_id: str) -> CommitState:
        """A commit operation and the answer ``commit_import`` would give now (a task's state)."""
        return commit_state(self.ctx, principal, operation_id)

    def resume_commit(self, operation_id: str, owner: str, by: str, *, wait: bool = False) -> bool:
        """Run again, under ``owner``'s lease, a commit whose worker went away before COMMIT.

        False when it is not to be run now (finished meanwhile, or no legacy session slot free).
        ``wait``: return only once it ended (a one-shot ``python -m adapter reconcile``).
        """
        resumed = resume_claim(self.ctx, operation_id, owner, by=by, slot_for=self._slot)
        if resumed is None:
            return False
        claim, slot = resumed
        token = CancelToken()
        if claim.stopped:
            token.cancel()  # its owner asked it to stop while nobody ran it: record that
        run = start_run(self.ctx, claim, slot=slot, token=token, after=settle_abort_request)
        if wait:
            run.done.exception()  # wait; the outcome is recorded by the run
        return True

    def hand_over(self, *, wait_seconds: float = 10.0) -> int:
        """Shutdown: commits running here stop before COMMIT and free their lease for another worker
        (one past COMMIT finishes); waits up to ``wait_seconds`` for them to end. Returns how many."""
        runs = hand_over_all(self.ctx)
        futures.wait([run.done for run in runs], timeout=wait_seconds)
        return len(runs)

    def _slot(self, tenant: str) -> CommitSlot:
        return CommitSlot(self.commit_slots, tenant, "commits of this tenant")

    # --- abort, status ----------------------------------------------------------------------------

    def abort(
        self, principal: Principal, handle: str, *, wait_seconds: float = 0.0, expect: Subject | None = None
    ) -> AbortResult:
        """Abort; a committing import is stopped (waited for at most ``wait_seconds``, the budget).
        ``expect``: what a person confirmed before a void (``abort_import``)."""
        return abort_import(
            self.ctx, principal, handle, wait_seconds=wait_budget(self.ctx, wait_seconds), expect=expect
        )

    def status(self, principal: Principal, handle: str) -> ImportView:
        return import_status(self.ctx, principal, handle)

    async def status_async(
        self, principal: Principal, handle: str, *, wait_seconds: float = 0.0
    ) -> ImportView:
        """``status`` for callers on an event loop (the MCP tool): no thread hop where avoidable.

        With ``wait_seconds`` it answers once the import or one of its operations changed (at most
        the wait budget)."""

        def shown(view: ImportView) -> object:
            return (
                view.status,
                view.record_count,
                tuple((o.operation_id, o.status) for o in view.operations),
            )

        def running(view: ImportView) -> str | None:
            return next((o.operation_id for o in view.operations if o.status in _FOLLOWED), None)

        return await wait_for_change(
            lambda: import_status_async(self.ctx, principal, handle),
            shown,
            wait_budget(self.ctx, wait_seconds),
            settled=lambda view: view.status in IMPORT_FINAL,
            running=running,
        )

    def review(self, principal: Principal, handle: str, *, after: int = 0, size: int = 20) -> ImportReview:
        """The import as a person reviews it before a commit or a void (``review.py``): a page of
        its staged records, per-field missing counts, and the question a confirmation would ask
        now, read as the commit conversation reads it."""
        asked = commit_subject(self.ctx, principal, handle) or void_subject(self.ctx, principal, handle)
        return review_import(self.ctx, principal, handle, asked=asked, after=after, size=size)

    def operation_status(
        self, principal: Principal, *, operation_id: str | None = None, idempotency_key: str | None = None
    ) -> OperationView:
        return operation_status(
            self.ctx, principal, operation_id=operation_id, idempotency_key=idempotency_key
        )

    async def operation_status_async(
        self,
        principal: Principal,
        *,
        operation_id: str | None = None,
        idempotency_key: str | None = None,
        wait_seconds: float = 0.0,
    ) -> OperationView:
        """``operation_status`` on an event loop; with ``wait_seconds``, answered once its status
        changed (at most the wait budget) or at once when it cannot change by itself."""

        async def read() -> OperationView:
            return await anyio.to_thread.run_sync(
                lambda: operation_status(
                    self.ctx, principal, operation_id=operation_id, idempotency_key=idempotency_key
                )
            )

        return await wait_for_change(
            read,
            lambda view: view.status,
            wait_budget(self.ctx, wait_seconds),
            settled=lambda view: view.status not in _FOLLOWED,
            running=lambda view: view.operation_id,
        )

    def list_imports(self, principal: Principal, *, cursor: str | None, limit: int) -> ImportPage:
        return list_imports(self.ctx, principal, cursor=cursor, limit=limit)

    def follow_changes(self) -> ChangeFollower:
        """A follower of the event table that names changed imports (the subscription feed)."""
        return ChangeFollower(self.ctx)

    # --- maintenance ------------------------------------------------------------------------------

    def reconcile(self, operation_id: str | None = None, *, wait: bool = False) -> list[Resolution]:
        """Reconcile one operation, or every candidate when ``operation_id`` is None; a commit whose
        worker went away before COMMIT is resumed (``wait``: and waited for)."""
        resume = self.resumer(wait=wait)
        if operation_id is None:
            return reconcile_pass(self.ctx, resume=resume)
        resolution = reconcile_operation(self.ctx, operation_id, resume=resume)
        return [] if resolution is None else [resolution]

    def maintain(
        self, *, retention: timedelta | None = None, purge_batch: int | None = None, wait: bool = False
    ) -> MaintenanceReport:
        """One maintenance pass; resumed commits run in the background unless ``wait``."""
        return run_maintenance(
            self.ctx, retention=retention, purge_batch=purge_batch, resume=self.resumer(wait=wait)
        )

    def resumer(self, *, wait: bool) -> Resume:
        """``resume_commit`` as the reconciler calls it (``wait``: until the resumed commit ended)."""
        return lambda operation_id, owner, by: self.resume_commit(operation_id, owner, by, wait=wait)

    def compensate(self, import_id: str, *, reason: str) -> str:
        """Operator action: VOID the legacy batch of a committed import."""
        return compensate_import(self.ctx, import_id, reason=reason)
