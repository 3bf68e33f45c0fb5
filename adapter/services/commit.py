"""The commit flow: replay the staged records into ONE legacy session and commit it.

The path of one commit (see docs/architecture.md):

1. **Claim** (one transaction): re-authorize the handle, answer replays from the record, or move the
   import from ``open`` to ``committing`` and the operation to ``in_progress`` with a lease. The
   import's version column makes two concurrent commits race on one row; the loser sees
   ``committing`` and answers ``in_progress``: one batch, never two.
2. **Replay**: open a legacy session, ``begin`` under the operation's batch reference, stream the
   staged records in bounded chunks (keyset reads, so memory does not grow with the import), report
   progress, stop if cancelled. A transient error or a lost session before COMMIT retries the whole
   replay in a new session (tenacity, bounded and jittered): nothing was applied, so nothing doubles.
3. **Recovery point, then COMMIT**: ``commit_sent`` is written durably *before* COMMIT goes out, and
   the cancellation token is checked one last time. A lost reply now makes the operation
   ``outcome_unknown`` (never ``failed``): only asking the legacy system can tell, which is what
   reconciliation does.
4. **Finish** (one transaction): record the outcome on the operation and the import, with events.
"""

from __future__ import annotations

import contextlib
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from adapter.domain.errors import HandleExpired, InvalidState
from adapter.domain.identity import Principal, fingerprint
from adapter.domain.states import ImportState, OperationKind, OperationState, transition
from adapter.domain.views import CommitResult
from adapter.ports.legacy import (
    CommittedBatch,
    LegacyError,
    LegacyFailed,
    LegacyOutcomeUnknown,
    LegacySession,
    LegacyTransient,
)
from adapter.services.access import effective_state, find_import
from adapter.services.context import CancelToken, ProgressCallback, ServiceContext
from adapter.services.findings import judge
from adapter.services.idempotency import check_fingerprint, new_operation, retry_on_conflict
from adapter.services.imports import validate_key
from adapter.services.late_commits import earlier_batch_committed, earlier_batch_refs
from adapter.services.leases import Heartbeat, new_lease_owner, take_lease
from adapter.store.tables import ImportRow, OperationRow
from adapter.store.unit_of_work import UnitOfWork

__all__ = ["batch_ref_for", "commit_import"]

log = logging.getLogger("adapter.commit")

# Operations whose commit never reached the legacy system: the same key may try again.
_RETRYABLE = frozenset({OperationState.FAILED.value, OperationState.CANCELLED.value})

_ANSWER_FOR_STATUS = {
    OperationState.SUCCEEDED.value: "committed",
    OperationState.PENDING.value: "in_progress",
    OperationState.IN_PROGRESS.value: "in_progress",
    OperationState.OUTCOME_UNKNOWN.value: "outcome_unknown",
    OperationState.NEEDS_OPERATOR.value: "outcome_unknown",
    OperationState.CANCELLED.value: "cancelled",
    OperationState.FAILED.value: "failed",
    OperationState.COMPENSATING.value: "committed",
    OperationState.COMPENSATED.value: "committed",
}


def batch_ref_for(operation_id: str) -> str:
    """The legacy batch reference of a commit operation: derived, opaque, unique."""
    return f"adp-{operation_id}"


@dataclass(slots=True)
class _Claim:
    handle: str
    operation_id: str
    import_id: str
    batch_ref: str
    total: int
    ask_first: bool = False
    lease_owner: str = ""  # this run's own lease owner (see leases.new_lease_owner)
    earlier_refs: tuple[str, ...] = ()  # the import's other commit operations (late_commits.py)


@dataclass(slots=True)
class _Run:
    """What one execution has done so far: decides how an unexpected error is recorded."""

    commit_sent: bool = False


class StagedRecordsMismatch(Exception):
    """The store returned a different number of records than the import counts: never commit that."""


class _LeaseLost(Exception):
    """Another worker (a reconciler) took the operation over: this one must not act on it."""


class _NeedsOperator(Exception):
    """The legacy system holds something a person must look at (found when asking before COMMIT)."""

    def __init__(self, finding: str, legacy_batch_id: str) -> None:
        super().__init__(finding)
        self.finding = finding
        self.legacy_batch_id = legacy_batch_id


class _Cancelled(Exception):
    """The caller went away before COMMIT; raised inside the flow, never to callers."""


def commit_import(
    ctx: ServiceContext,
    principal: Principal,
    handle: str,
    *,
    idempotency_key: str | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
) -> CommitResult:
    """Commit the import's staged records as one legacy batch, at most once.

    Raises HandleNotFound, HandleExpired, IdempotencyKeyReused, InvalidState. Every legacy outcome
    is returned as a CommitResult status, never raised.
    """
    key = validate_key(idempotency_key)
    request = fingerprint("commit", {"handle": ctx.codec.digest(handle)})
    claim = retry_on_conflict(lambda: _claim(ctx, principal, handle, key, request))
    if isinstance(claim, CommitResult):
        return claim
    return _execute(ctx, claim, progress, cancel)


# --- 1. claim ------------------------------------------------------------------------------------


def _claim(
    ctx: ServiceContext, principal: Principal, handle: str, key: str | None, request: str
) -> _Claim | CommitResult:
    with ctx.store.unit_of_work() as uow:
        row = find_import(uow, principal, handle)
        state = effective_state(row, ctx.clock())
        reuse: OperationRow | None = None
        if key is not None:
            existing = uow.operations.by_key(
                principal.tenant, principal.subject, OperationKind.COMMIT.value, key
            )
            if existing is not None:
                check_fingerprint(existing, request)
                if existing.status not in _RETRYABLE or state is not ImportState.OPEN:
                    return _answer(existing, row, handle)
                reuse = existing
        if state is ImportState.EXPIRED:
            raise HandleExpired()
        if state in (ImportState.COMMITTED, ImportState.COMMITTING, ImportState.OUTCOME_UNKNOWN):
            latest = uow.operations.latest_commit(row.id)
            if latest is None:  # its operations were purged after the retention period
                return _answer_from_import(row, handle)
            return _answer(latest, row, handle)
        if state is not ImportState.OPEN:
            raise InvalidState(f"an import that is {state.value} cannot be committed")
        if row.record_count == 0:
            raise InvalidState("the import has no records to commit")

        operation = reuse or new_operation(
            principal, OperationKind.COMMIT.value, key, request, status=OperationState.IN_PROGRESS
        )
        if reuse is None:
            operation.attempts = 0
            operation.batch_ref = batch_ref_for(operation.id)
            operation.import_id = row.id
            uow.operations.add(operation)
        operation.status = OperationState.IN_PROGRESS.value
        operation.error = None
        operation.recovery_point = "claimed"
        owner = new_lease_owner(ctx)
        take_lease(operation, owner, ctx.clock(), ctx.commit_policy.lease_seconds)
        transition(row, ImportState.COMMITTING)
        uow.flush()
        uow.events.record(
            "import.committing",
            import_id=row.id,
            operation_id=operation.id,
            state=row.state,
            detail={"record_count": row.record_count},
        )
        uow.events.record(
            "operation.in_progress",
            import_id=row.id,
            operation_id=operation.id,
            state=operation.status,
            detail={"kind": operation.kind, "retry_of_same_key": reuse is not None},
        )
        uow.commit()
        assert operation.batch_ref is not None
        return _Claim(
            handle,
            operation.id,
            row.id,
            operation.batch_ref,
            row.record_count,
            reuse is not None,
            owner,
            earlier_batch_refs(uow, row.id, operation.id),
        )


def _answer_from_import(row: ImportRow, handle: str) -> CommitResult:
    status = "committed" if row.state == ImportState.COMMITTED.value else "outcome_unknown"
    return CommitResult(handle, status, None, row.legacy_batch_id, row.record_count, replayed=True)


def _answer(operation: OperationRow, row: ImportRow, handle: str) -> CommitResult:
    """Answer a commit request from the record of an earlier one (a replay)."""
    if operation.status == OperationState.RESOLVED.value:  # an operator closed it: the import says how
        return _answer_from_import(row, handle)
    result = operation.result or {}
    error = operation.error or {}
    return CommitResult(
        handle=handle,
        status=_ANSWER_FOR_STATUS[operation.status],
        operation_id=operation.id,
        legacy_batch_id=result.get("legacy_batch_id"),
        record_count=result.get("record_count", row.record_count),
        replayed=True,
        error=error.get("code"),
    )


# --- 2./3. replay and commit ---------------------------------------------------------------------


def _execute(
    ctx: ServiceContext, claim: _Claim, progress: ProgressCallback | None, cancel: CancelToken | None
) -> CommitResult:
    policy = ctx.commit_policy
    run = _Run()
    retrying = Retrying(
        retry=retry_if_exception_type(LegacyTransient),
        stop=stop_after_attempt(policy.max_attempts),
        wait=wait_random_exponential(multiplier=policy.retry_wait_initial, max=policy.retry_wait_max),
        before_sleep=lambda state: _record_retry(
            ctx, claim, state.outcome.exception() if state.outcome else None
        ),
        reraise=True,
    )
    try:
        with Heartbeat(ctx, claim.operation_id, claim.lease_owner):
            batch = retrying(lambda: _attempt(ctx, claim, run, progress, cancel))
    except _Cancelled:
        return _finish(
            ctx, claim, OperationState.CANCELLED, ImportState.OPEN, point="cancelled_before_commit"
        )
    except _NeedsOperator as exc:
        return _finish(
            ctx,
            claim,
            OperationState.NEEDS_OPERATOR,
            ImportState.COMMITTED,
            point="asked_before_commit",
            error={"code": exc.finding},
            legacy_batch_id=exc.legacy_batch_id,
        )
    except _LeaseLost:
        log.warning("commit %s: lease lost before COMMIT; leaving it to its new owner", claim.operation_id)
        return _current_answer(ctx, claim)
    except LegacyOutcomeUnknown:
        return _finish(
            ctx, claim, OperationState.OUTCOME_UNKNOWN, ImportState.OUTCOME_UNKNOWN, point="commit_sent"
        )
    except LegacyTransient as exc:
        return _finish_failed(ctx, claim, "legacy_unavailable", exc)
    except LegacyFailed as exc:
        return _finish_failed(ctx, claim, "legacy_rejected", exc)
    except StagedRecordsMismatch as exc:
        log.error("commit %s: %s", claim.operation_id, exc)
        return _finish_failed(ctx, claim, "internal_error", exc)
    except BaseException as exc:
        if run.commit_sent and isinstance(exc, Exception):
            return _unknown_after_commit_sent(ctx, claim, exc)
        # A bug or a store failure before COMMIT: record the truth we know, then let it propagate.
        with contextlib.suppress(Exception):
            _finish_failed(ctx, claim, "internal_error", exc)
        raise
    try:
        return _finish(
            ctx,
            claim,
            OperationState.SUCCEEDED,
            ImportState.COMMITTED,
            point="committed",
            result={"legacy_batch_id": batch.legacy_batch_id, "record_count": batch.record_count},
            legacy_batch_id=batch.legacy_batch_id,
        )
    except Exception as exc:  # the batch is in, but the store did not take the record of it
        log.error("commit %s: committed, recording it failed (%s)", claim.operation_id, type(exc).__name__)
        return _unknown_answer(claim)


def _unknown_after_commit_sent(ctx: ServiceContext, claim: _Claim, exc: Exception) -> CommitResult:
    """COMMIT went out and then something failed (the store, most likely): only the legacy system
    knows whether the batch is in. Record ``outcome_unknown`` if the store takes it; either way the
    caller gets ``outcome_unknown`` with its operation id, never an internal error. If nothing could
    be recorded, the operation stays ``in_progress`` at ``commit_sent``; once its lease runs out the
    reconciler asks the legacy system and records the truth."""
    log.error("commit %s: failed after COMMIT was sent (%s)", claim.operation_id, type(exc).__name__)
    try:
        return _finish(
            ctx, claim, OperationState.OUTCOME_UNKNOWN, ImportState.OUTCOME_UNKNOWN, point="commit_sent"
        )
    except Exception:
        return _unknown_answer(claim)


def _unknown_answer(claim: _Claim) -> CommitResult:
    return CommitResult(
        handle=claim.handle,
        status="outcome_unknown",
        operation_id=claim.operation_id,
        legacy_batch_id=None,
        record_count=claim.total,
        replayed=False,
    )


def _attempt(
    ctx: ServiceContext,
    claim: _Claim,
    run: _Run,
    progress: ProgressCallback | None,
    cancel: CancelToken | None,
) -> CommittedBatch:
    """One legacy session: begin, add every staged record in order, then commit."""
    _set_recovery_point(ctx, claim, "replaying", attempt=True)
    # An earlier commit of this import may have landed late (after it was judged not_committed):
    # a COMMIT now would make a second batch.
    landed = earlier_batch_committed(ctx, claim.earlier_refs)
    if landed is not None:
        raise _NeedsOperator(*landed)
    if claim.ask_first:
        # This operation ran before: never send COMMIT again without asking whether it landed.
        known = ctx.legacy.batch_status(claim.batch_ref)
        if known.committed:
            finding, _, _ = judge(known, claim.total)
            if finding != "committed":  # landed twice, or with other records than are staged now
                raise _NeedsOperator(finding, known.batches[0].legacy_batch_id)
            first = known.batches[0]
            return CommittedBatch(first.legacy_batch_id, first.record_count)
    session = ctx.legacy.open_session()
    try:
        session.begin(claim.batch_ref)
        sent = _replay_records(ctx, claim, run, session, progress, cancel)
        if sent != claim.total:
            raise StagedRecordsMismatch(f"staged {claim.total} records but found {sent}")
        _check_cancel(cancel)  # the last moment the commit can still be stopped
        _set_recovery_point(ctx, claim, "commit_sent")
        run.commit_sent = True
        try:
            return session.commit()
        except LegacyTransient:
            run.commit_sent = False  # the system said it did not apply it
            raise
    except LegacyOutcomeUnknown as exc:
        if run.commit_sent:
            raise
        # Before COMMIT nothing can have been applied: an unknown BEGIN or ADD only lost the session.
        raise LegacyTransient(str(exc)) from exc
    except (_Cancelled, _LeaseLost, _NeedsOperator, LegacyTransient, LegacyFailed):
        with contextlib.suppress(LegacyError):
            session.rollback()
        raise
    finally:
        session.close()


def _replay_records(
    ctx: ServiceContext,
    claim: _Claim,
    run: _Run,
    session: LegacySession,
    progress: ProgressCallback | None,
    cancel: CancelToken | None,
) -> int:
    """Send the staged records in chunks, reading the next chunk while the legacy system works.

    At most two chunks are in memory at once, whatever the size of the import.
    """
    size = ctx.commit_policy.chunk_size

    def read(after: int) -> tuple[int, list[dict[str, Any]]]:
        with ctx.store.unit_of_work() as uow:
            rows = uow.records.chunk(claim.import_id, after, size)
        return (rows[-1][0] if rows else after), [json.loads(data) for _, data in rows]

    sent = 0
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="read-ahead") as reader:
        pending = reader.submit(read, 0)
        while True:
            _check_cancel(cancel)
            last_seq, records = pending.result()
            if not records:
                return sent
            pending = reader.submit(read, last_seq)
            session.add(records)
            sent += len(records)
            _report(progress, sent, claim.total)


def _check_cancel(cancel: CancelToken | None) -> None:
    if cancel is not None and cancel.cancelled:
        raise _Cancelled()


def _report(progress: ProgressCallback | None, sent: int, total: int) -> None:
    """Progress is a courtesy: a failing callback (a gone client) must not break the commit."""
    if progress is None:
        return
    try:
        progress(sent, total)
    except Exception:
        log.debug("progress callback failed", exc_info=True)


# --- durable bookkeeping ---------------------------------------------------------------------------


def _set_recovery_point(ctx: ServiceContext, claim: _Claim, point: str, *, attempt: bool = False) -> None:
    """Write a recovery point; also the proof that this worker still holds the operation's lease."""

    def write() -> None:
        with ctx.store.unit_of_work() as uow:
            operation = _get_operation(uow, claim)
            if (
                operation.lease_owner != claim.lease_owner
                or operation.status != OperationState.IN_PROGRESS.value
            ):
                raise _LeaseLost()
            operation.recovery_point = point
            if attempt:
                operation.attempts += 1
            uow.events.record(
                "operation.recovery_point",
                import_id=claim.import_id,
                operation_id=claim.operation_id,
                state=operation.status,
                detail={"point": point, "attempt": operation.attempts},
            )
            uow.commit()

    retry_on_conflict(write)


def _record_retry(ctx: ServiceContext, claim: _Claim, error: BaseException | None) -> None:
    with ctx.store.unit_of_work() as uow:
        uow.events.record(
            "operation.attempt_failed",
            import_id=claim.import_id,
            operation_id=claim.operation_id,
            state=OperationState.IN_PROGRESS.value,
            detail={"error": type(error).__name__ if error else None, "retrying": True},
        )
        uow.commit()


def _finish_failed(ctx: ServiceContext, claim: _Claim, code: str, exc: BaseException) -> CommitResult:
    error = {"code": code, "type": type(exc).__name__}
    return _finish(
        ctx, claim, OperationState.FAILED, ImportState.OPEN, point="failed_before_commit", error=error
    )


def _finish(
    ctx: ServiceContext,
    claim: _Claim,
    status: OperationState,
    import_state: ImportState,
    *,
    point: str,
    result: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    legacy_batch_id: str | None = None,
) -> CommitResult:
    def write() -> CommitResult:
        with ctx.store.unit_of_work() as uow:
            operation = _get_operation(uow, claim)
            row = uow.imports.get(claim.import_id)
            assert row is not None
            if operation.status != OperationState.IN_PROGRESS.value:
                if status is OperationState.SUCCEEDED and operation.status == OperationState.FAILED.value:
                    # A reconciler believed "not committed" but our COMMIT did land: the record
                    # must say so, or a later commit would make a second batch.
                    _record_late_commit(uow, operation, row, result or {}, legacy_batch_id)
                    uow.commit()
                # Otherwise a reconciler took over and already recorded the outcome (it asked the
                # legacy system): answer from that record rather than fail on a state it changed.
                return _answer(operation, row, claim.handle)
            operation.status = status.value
            operation.recovery_point = point
            operation.result = result
            operation.error = error
            operation.lease_owner = None
            operation.lease_expires_at = None
            transition(row, import_state)
            if legacy_batch_id is not None:
                row.legacy_batch_id = legacy_batch_id
            uow.events.record(
                f"operation.{status.value}",
                import_id=row.id,
                operation_id=operation.id,
                state=status.value,
                detail={"kind": operation.kind, **({"error": error["code"]} if error else {})},
            )
            uow.events.record(
                f"import.{import_state.value}",
                import_id=row.id,
                operation_id=operation.id,
                state=import_state.value,
                detail={"record_count": row.record_count},
            )
            uow.commit()
            return CommitResult(
                handle=claim.handle,
                status=_ANSWER_FOR_STATUS[status.value],
                operation_id=operation.id,
                legacy_batch_id=legacy_batch_id,
                record_count=row.record_count,
                replayed=False,
                error=error["code"] if error else None,
            )

    return retry_on_conflict(write)


def _record_late_commit(
    uow: UnitOfWork, operation: OperationRow, row: ImportRow, result: dict[str, Any], batch_id: str | None
) -> None:
    """Correct a ``not_committed`` verdict with the proof in hand: the legacy system took the batch."""
    if row.state == ImportState.OPEN.value:
        operation.status = OperationState.SUCCEEDED.value
        operation.result = result
        operation.error = None
        transition(row, ImportState.COMMITTED)
        row.legacy_batch_id = batch_id
    else:  # the import moved on meanwhile (aborted, or committing again): a person must decide
        operation.status = OperationState.NEEDS_OPERATOR.value
        operation.error = {"code": "committed_after_reconciled_not_committed", "legacy_batch_id": batch_id}
    uow.events.record(
        "operation.late_commit_recorded",
        import_id=row.id,
        operation_id=operation.id,
        state=operation.status,
        detail={"legacy_batch_id": batch_id},
    )


def _current_answer(ctx: ServiceContext, claim: _Claim) -> CommitResult:
    with ctx.store.unit_of_work() as uow:
        operation = _get_operation(uow, claim)
        row = uow.imports.get(claim.import_id)
        assert row is not None
        return _answer(operation, row, claim.handle)


def _get_operation(uow: UnitOfWork, claim: _Claim) -> OperationRow:
    operation = uow.operations.get(claim.operation_id)
    assert operation is not None
    return operation
