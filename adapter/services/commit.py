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
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

from adapter.domain.confirmation import CommitSubject
from adapter.domain.errors import (
    AdapterError,
    ConfirmationStale,
    HandleExpired,
    InvalidState,
    LegacyRejected,
    LegacyUnavailable,
)
from adapter.domain.identity import Principal, fingerprint
from adapter.domain.states import (
    OPERATION_RETRYABLE,
    ImportState,
    OperationKind,
    OperationState,
    transition,
    transition_operation,
)
from adapter.domain.views import CommitResult
from adapter.domain.vocabulary import CommitAnswer, EventKind, Finding, RecoveryPoint
from adapter.ports.legacy import (
    CommittedBatch,
    LegacyError,
    LegacyFailed,
    LegacyOutcomeUnknown,
    LegacySession,
    LegacyTransient,
)
from adapter.ports.sessions import add_record_texts
from adapter.ports.targets import begin_batch
from adapter.services.access import effective_state, find_import
from adapter.services.context import CancelToken, ProgressCallback, ServiceContext
from adapter.services.findings import judge
from adapter.services.idempotency import check_fingerprint, new_operation, retry_on_conflict, validate_key
from adapter.services.late_commits import earlier_batch_committed, earlier_batch_refs
from adapter.services.leases import Heartbeat, new_lease_owner, release_lease, take_lease
from adapter.services.progress import ProgressReporter
from adapter.services.quotas import CommitSlot
from adapter.services.retries import legacy_retrying
from adapter.services.ticker import shared_pool
from adapter.store.tables import ImportRow, OperationRow
from adapter.store.unit_of_work import UnitOfWork

__all__ = ["CommitOptions", "StagedRecordsMismatch", "batch_ref_for", "commit_import"]

log = logging.getLogger("adapter.commit")

_ANSWER_FOR_STATUS = {
    OperationState.SUCCEEDED: CommitAnswer.COMMITTED,
    OperationState.IN_PROGRESS: CommitAnswer.IN_PROGRESS,
    OperationState.OUTCOME_UNKNOWN: CommitAnswer.OUTCOME_UNKNOWN,
    OperationState.NEEDS_OPERATOR: CommitAnswer.OUTCOME_UNKNOWN,
    OperationState.CANCELLED: CommitAnswer.CANCELLED,
    OperationState.FAILED: CommitAnswer.FAILED,
    OperationState.COMPENSATING: CommitAnswer.COMMITTED,
    OperationState.COMPENSATED: CommitAnswer.COMMITTED,
}
"""A stored commit operation's status as a commit answer (``resolved`` answers from the import)."""


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
    lease_owner: str  # this run's own lease owner (see leases.new_lease_owner)
    ask_first: bool = False  # the operation ran before: ask whether its batch landed before committing
    target: str = ""  # the import's target, passed to the legacy session's begin
    earlier_refs: tuple[str, ...] = ()  # the import's other commit operations (late_commits.py)


@dataclass(slots=True)
class _Run:
    """What one execution has done so far: decides how an unexpected error is recorded."""

    commit_sent: bool = False
    first_point_recorded: bool = True  # the claim wrote the first attempt's ``replaying`` point


@dataclass(frozen=True, slots=True)
class _Outcome:
    """How a run ended, to be written by ``_finish`` in one transaction."""

    status: OperationState
    import_state: ImportState
    point: RecoveryPoint
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    legacy_batch_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


class StagedRecordsMismatch(Exception):
    """The store returned a different number of records than the import counts: never commit that."""


class _LeaseLost(Exception):
    """Another worker (a reconciler) took the operation over: this one must not act on it."""


class _NeedsOperator(Exception):
    """The legacy system holds something a person must look at (found when asking before COMMIT)."""

    def __init__(self, finding: Finding, legacy_batch_id: str) -> None:
        super().__init__(finding)
        self.finding = finding
        self.legacy_batch_id = legacy_batch_id


class _Cancelled(Exception):
    """The caller went away before COMMIT; raised inside the flow, never to callers."""


class _MissingRow(Exception):
    """A row the claim created is gone: the store was changed behind the kit's back."""


class CommitOptions(TypedDict, total=False):
    """What a caller may add to a commit; listed once, for :func:`commit_import` and its facade."""

    idempotency_key: str | None
    progress: ProgressCallback | None
    cancel: CancelToken | None
    expect: CommitSubject | None


def commit_import(
    ctx: ServiceContext,
    principal: Principal,
    handle: str,
    *,
    slot: CommitSlot | None = None,
    **options: Unpack[CommitOptions],
) -> CommitResult:
    """Commit the import's staged records as one legacy batch, at most once.

    ``expect`` is what a person confirmed: the commit starts only if the import still is exactly
    that (checked in the claim transaction, so no record can slip in between); ``NOTHING_CONFIRMED``
    lets it answer a replay or refuse, never start. ``slot`` is the
    legacy session slot the claim takes if, and only if, the commit starts (the caller frees it).

    Raises HandleNotFound, HandleExpired, IdempotencyKeyReused, InvalidState, ConfirmationStale,
    QuotaExceeded.
    Every legacy outcome is returned as a CommitResult status, never raised.
    """
    key, expect = validate_key(options.get("idempotency_key")), options.get("expect")
    request = fingerprint("commit", {"handle": ctx.codec.digest(handle)})
    claim = retry_on_conflict(lambda: _claim(ctx, principal, handle, key, request, expect, slot))  # 1. claim
    if isinstance(claim, CommitResult):
        return claim  # a replay, answered from the record
    pulse = ctx.commit_policy.progress_pulse_seconds
    reporter = ProgressReporter(options.get("progress"), claim.total, pulse)
    reporter(0)  # the commit has started: 0 of N
    try:
        with reporter.pulsing():  # a slow legacy system still shows signs of life
            # 2. replay, 3. recovery point, COMMIT
            outcome = _run(ctx, claim, reporter, options.get("cancel"))
    finally:
        reporter.close()  # the last report comes before the result
    if outcome is None:
        return _current_answer(ctx, claim)  # a reconciler took over and records the outcome
    try:
        return _finish(ctx, claim, outcome)  # 4. finish
    except Exception as exc:
        if outcome.status not in (OperationState.SUCCEEDED, OperationState.OUTCOME_UNKNOWN):
            raise  # COMMIT was not sent: nothing to be unsure about
        # COMMIT was sent but the store did not take the record of it: the caller gets
        # outcome_unknown with its operation id; once the lease runs out the reconciler asks the
        # legacy system and records the truth.
        log.error("commit %s: recording the outcome failed (%s)", claim.operation_id, type(exc).__name__)
        return _unknown_answer(claim)


def _unknown_answer(claim: _Claim) -> CommitResult:
    return CommitResult(
        handle=claim.handle,
        status=CommitAnswer.OUTCOME_UNKNOWN,
        operation_id=claim.operation_id,
        legacy_batch_id=None,
        record_count=claim.total,
        replayed=False,
    )


# --- 1. claim ------------------------------------------------------------------------------------


def _claim(
    ctx: ServiceContext,
    principal: Principal,
    handle: str,
    key: str | None,
    request: str,
    expect: CommitSubject | None = None,
    slot: CommitSlot | None = None,
) -> _Claim | CommitResult:
    """Answer from the record, or take the import and an operation for this run (one transaction)."""
    with ctx.store.unit_of_work() as uow:
        row = find_import(uow, principal, handle)
        state = effective_state(row, ctx.clock())
        reuse: OperationRow | None = None
        if key is not None:
            existing = uow.operations.by_key(principal.tenant, principal.subject, OperationKind.COMMIT, key)
            if existing is not None:
                check_fingerprint(existing, request)
                if existing.status not in OPERATION_RETRYABLE or state is not ImportState.OPEN:
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
        if expect is not None and CommitSubject(row.id, row.target, row.record_count) != expect:
            raise ConfirmationStale(CommitSubject(row.id, row.target, row.record_count))
        if slot is not None:
            slot.take()  # QuotaExceeded here: refused before anything changed

        if reuse is None:
            operation = new_operation(
                principal, OperationKind.COMMIT, key, request, status=OperationState.IN_PROGRESS
            )
            operation.attempts = 0
            operation.batch_ref = batch_ref_for(operation.id)
            operation.import_id = row.id
            uow.operations.add(operation)
        else:
            operation = reuse
            transition_operation(operation, OperationState.IN_PROGRESS)
        operation.error = None
        # The first attempt's recovery point goes in this transaction (the lease was just taken, so
        # there is nothing to check yet): one store round trip fewer per commit. Later attempts
        # write their own (_attempt).
        operation.recovery_point = RecoveryPoint.REPLAYING
        operation.attempts += 1
        owner = new_lease_owner(ctx)
        take_lease(operation, owner, ctx.clock(), ctx.commit_policy.lease_seconds)
        transition(row, ImportState.COMMITTING)
        uow.flush()
        _record_event(
            uow,
            EventKind.IMPORT_COMMITTING,
            row,
            operation,
            state=row.state,
            detail={"record_count": row.record_count},
        )
        _record_event(
            uow,
            EventKind.OPERATION_IN_PROGRESS,
            row,
            operation,
            detail={"kind": operation.kind, "retry_of_same_key": reuse is not None},
        )
        _record_event(
            uow,
            EventKind.OPERATION_RECOVERY_POINT,
            row,
            operation,
            detail={"point": RecoveryPoint.REPLAYING, "attempt": operation.attempts},
        )
        uow.commit()
        if operation.batch_ref is None:  # every commit operation gets one when it is created
            raise _MissingRow(f"commit operation {operation.id} has no batch reference")
        return _Claim(
            handle,
            operation.id,
            row.id,
            operation.batch_ref,
            row.record_count,
            lease_owner=owner,
            ask_first=reuse is not None,
            target=row.target,
            earlier_refs=earlier_batch_refs(uow, row.id, operation.id),
        )


def _answer_from_import(row: ImportRow, handle: str) -> CommitResult:
    committed = row.state == ImportState.COMMITTED
    status = CommitAnswer.COMMITTED if committed else CommitAnswer.OUTCOME_UNKNOWN
    return CommitResult(handle, status, None, row.legacy_batch_id, row.record_count, replayed=True)


def _answer(operation: OperationRow, row: ImportRow, handle: str) -> CommitResult:
    """Answer a commit request from the record of an earlier one (a replay)."""
    status = OperationState(operation.status)
    if status not in _ANSWER_FOR_STATUS:  # resolved by an operator: the import says how it ended
        return _answer_from_import(row, handle)
    result = operation.result or {}
    error = operation.error or {}
    return CommitResult(
        handle=handle,
        status=_ANSWER_FOR_STATUS[status],
        operation_id=operation.id,
        legacy_batch_id=result.get("legacy_batch_id"),
        record_count=result.get("record_count", row.record_count),
        replayed=True,
        error=error.get("code"),
    )


# --- 2./3. replay, recovery point and commit ----------------------------------------------------------


def _run(
    ctx: ServiceContext, claim: _Claim, progress: ProgressReporter, cancel: CancelToken | None
) -> _Outcome | None:
    """Run the commit under a lease heartbeat, retrying transient errors before COMMIT; None if the
    lease was lost. A bug or a store failure is recorded as well as can be, then propagates."""
    run = _Run()
    retrying = legacy_retrying(
        ctx.commit_policy,
        before_sleep=lambda state: _record_retry(
            ctx, claim, state.outcome.exception() if state.outcome else None
        ),
    )
    try:
        with Heartbeat(ctx, claim.operation_id, claim.lease_owner):
            batch = retrying(lambda: _attempt(ctx, claim, run, progress, cancel))
    except _LeaseLost:
        log.warning("commit %s: lease lost before COMMIT; leaving it to its new owner", claim.operation_id)
        return None
    except _EXPECTED as exc:
        return _outcome_of(claim, exc)
    except BaseException as exc:
        if run.commit_sent and isinstance(exc, Exception):
            # COMMIT went out, then something failed (the store, most likely): only the legacy
            # system knows whether the batch is in, so the answer is outcome_unknown.
            log.error("commit %s: failed after COMMIT was sent (%s)", claim.operation_id, type(exc).__name__)
            return _unknown()
        with contextlib.suppress(Exception):
            _finish(ctx, claim, _unknown() if run.commit_sent else _failed(AdapterError.code, exc))
        raise
    return _Outcome(
        OperationState.SUCCEEDED,
        ImportState.COMMITTED,
        RecoveryPoint.COMMITTED,
        result={"legacy_batch_id": batch.legacy_batch_id, "record_count": batch.record_count},
        legacy_batch_id=batch.legacy_batch_id,
    )


_EXPECTED = (
    _Cancelled,
    _NeedsOperator,
    LegacyOutcomeUnknown,
    LegacyTransient,
    LegacyFailed,
    StagedRecordsMismatch,
)
"""The ways a run may end that are recorded as an outcome (``_outcome_of``) and not raised."""


def _outcome_of(claim: _Claim, exc: BaseException) -> _Outcome:
    """What an expected way of ending means for the operation and the import."""
    if isinstance(exc, _Cancelled):
        return _Outcome(OperationState.CANCELLED, ImportState.OPEN, RecoveryPoint.CANCELLED_BEFORE_COMMIT)
    if isinstance(exc, _NeedsOperator):
        return _Outcome(
            OperationState.NEEDS_OPERATOR,
            ImportState.COMMITTED,
            RecoveryPoint.ASKED_BEFORE_COMMIT,
            error={"code": exc.finding},
            legacy_batch_id=exc.legacy_batch_id,
        )
    if isinstance(exc, LegacyOutcomeUnknown):
        return _unknown()
    if isinstance(exc, LegacyTransient):
        return _failed(LegacyUnavailable.code, exc)
    if isinstance(exc, LegacyFailed):
        return _failed(LegacyRejected.code, exc)
    log.error("commit %s: %s", claim.operation_id, exc)
    return _failed(AdapterError.code, exc)


def _unknown() -> _Outcome:
    return _Outcome(OperationState.OUTCOME_UNKNOWN, ImportState.OUTCOME_UNKNOWN, RecoveryPoint.COMMIT_SENT)


def _failed(code: str, exc: BaseException) -> _Outcome:
    error = {"code": code, "type": type(exc).__name__}
    return _Outcome(OperationState.FAILED, ImportState.OPEN, RecoveryPoint.FAILED_BEFORE_COMMIT, error=error)


def _attempt(
    ctx: ServiceContext,
    claim: _Claim,
    run: _Run,
    progress: ProgressReporter,
    cancel: CancelToken | None,
) -> CommittedBatch:
    """One legacy session: begin, add every staged record in order, then commit."""
    if run.first_point_recorded:
        run.first_point_recorded = False
    else:
        _set_recovery_point(ctx, claim, RecoveryPoint.REPLAYING, attempt=True)
    # An earlier commit of this import may have landed late (after it was judged not_committed):
    # a COMMIT now would make a second batch.
    earlier = earlier_batch_committed(ctx, claim.earlier_refs)
    if earlier is not None:
        raise _NeedsOperator(*earlier)
    if claim.ask_first:
        landed = _ask_first(ctx, claim)
        if landed is not None:
            return landed
    session = ctx.legacy.open_session()
    try:
        _replay(ctx, claim, session, progress, cancel)
        return _send_commit(ctx, claim, run, session, cancel)
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


def _ask_first(ctx: ServiceContext, claim: _Claim) -> CommittedBatch | None:
    """This operation ran before: never send COMMIT again without asking whether it landed."""
    known = ctx.legacy.batch_status(claim.batch_ref)
    if not known.committed:
        return None
    finding, _, _ = judge(known, claim.total)
    first = known.batches[0]
    if finding is not Finding.COMMITTED:  # landed twice, or with other records than are staged now
        raise _NeedsOperator(finding, first.legacy_batch_id)
    return CommittedBatch(first.legacy_batch_id, first.record_count)


def _replay(
    ctx: ServiceContext,
    claim: _Claim,
    session: LegacySession,
    progress: ProgressReporter,
    cancel: CancelToken | None,
) -> None:
    """Begin the batch under the operation's reference and add every staged record, in order."""
    begin_batch(session, claim.batch_ref, claim.target)
    sent = _replay_records(ctx, claim, session, progress, cancel)
    if sent != claim.total:
        raise StagedRecordsMismatch(f"staged {claim.total} records but found {sent}")


def _send_commit(
    ctx: ServiceContext, claim: _Claim, run: _Run, session: LegacySession, cancel: CancelToken | None
) -> CommittedBatch:
    """Write the ``commit_sent`` recovery point durably, then send COMMIT."""
    _check_cancel(cancel)  # the last moment the commit can still be stopped
    _set_recovery_point(ctx, claim, RecoveryPoint.COMMIT_SENT)
    run.commit_sent = True
    try:
        return session.commit()
    except LegacyTransient:
        run.commit_sent = False  # the system said it did not apply it
        raise


def _replay_records(
    ctx: ServiceContext,
    claim: _Claim,
    session: LegacySession,
    progress: ProgressReporter,
    cancel: CancelToken | None,
) -> int:
    """Send the staged records in keyset chunks, as the JSON texts they were stored as, reading the
    next chunk (on the shared read-ahead pool) while the legacy system takes the current one.

    At most two chunks are in memory at once, whatever the size of the import. The last read asks
    for one record more than the import counts, so a store holding more is caught before COMMIT
    without a read that only finds nothing.
    """
    size, total = ctx.commit_policy.chunk_size, claim.total

    def read(after: int, sent: int) -> tuple[int, list[str]]:
        remaining = total - sent
        return ctx.store.staged_chunk(claim.import_id, after, remaining + 1 if remaining <= size else size)

    sent = 0
    chunk = read(0, 0)
    while True:
        _check_cancel(cancel)
        last_seq, texts = chunk
        if not texts:
            return sent
        if sent + len(texts) > total:
            raise StagedRecordsMismatch(f"staged {total} records but found more")
        following = sent + len(texts)
        pending = _read_ahead().submit(read, last_seq, following) if following < total else None
        try:
            add_record_texts(session, texts)
        except BaseException:
            if pending is not None:
                pending.cancel()  # a read not yet started is not needed any more
            raise
        sent = following
        progress(sent, total)
        if pending is None:
            return sent
        chunk = pending.result()


_READ_AHEAD_THREADS = 8
"""Read-ahead threads shared by all commits; a read waits for a free one (reads take milliseconds)."""


def _read_ahead() -> ThreadPoolExecutor:
    """One small pool for every commit's read-ahead: a commit does not start a thread of its own."""
    return shared_pool("read-ahead", _READ_AHEAD_THREADS)


def _check_cancel(cancel: CancelToken | None) -> None:
    if cancel is not None and cancel.cancelled:
        raise _Cancelled()


# --- durable bookkeeping ---------------------------------------------------------------------------


def _set_recovery_point(
    ctx: ServiceContext, claim: _Claim, point: RecoveryPoint, *, attempt: bool = False
) -> None:
    """Write a recovery point; also the proof that this worker still holds the operation's lease."""

    def write() -> None:
        with ctx.store.unit_of_work() as uow:
            operation = _get_operation(uow, claim)
            if operation.lease_owner != claim.lease_owner or operation.status != OperationState.IN_PROGRESS:
                raise _LeaseLost()
            operation.recovery_point = point
            if attempt:
                operation.attempts += 1
            _record_event(
                uow,
                EventKind.OPERATION_RECOVERY_POINT,
                claim,
                operation,
                detail={"point": point, "attempt": operation.attempts},
            )
            uow.commit()

    retry_on_conflict(write)


def _record_retry(ctx: ServiceContext, claim: _Claim, error: BaseException | None) -> None:
    with ctx.store.unit_of_work() as uow:
        _record_event(
            uow,
            EventKind.OPERATION_ATTEMPT_FAILED,
            claim,
            claim.operation_id,
            state=OperationState.IN_PROGRESS,
            detail={"error": type(error).__name__ if error else None, "retrying": True},
        )
        uow.commit()


# --- 4. finish ---------------------------------------------------------------------------------------


def _finish(ctx: ServiceContext, claim: _Claim, outcome: _Outcome) -> CommitResult:
    """Record the outcome on the operation and the import, with events (one transaction)."""

    def write() -> CommitResult:
        with ctx.store.unit_of_work() as uow:
            operation = _get_operation(uow, claim)
            row = _get_import(uow, claim)
            if operation.status != OperationState.IN_PROGRESS:
                if outcome.status is OperationState.SUCCEEDED and operation.status == OperationState.FAILED:
                    # A reconciler believed "not committed" but our COMMIT did land: the record
                    # must say so, or a later commit would make a second batch.
                    _record_late_commit(uow, operation, row, outcome.result or {}, outcome.legacy_batch_id)
                    uow.commit()
                # Otherwise a reconciler took over and already recorded the outcome (it asked the
                # legacy system): answer from that record rather than fail on a state it changed.
                return _answer(operation, row, claim.handle)
            transition_operation(operation, outcome.status)
            operation.recovery_point = outcome.point
            operation.result = outcome.result
            operation.error = outcome.error
            release_lease(operation)
            transition(row, outcome.import_state)
            if outcome.legacy_batch_id is not None:
                row.legacy_batch_id = outcome.legacy_batch_id
            error_code = outcome.error["code"] if outcome.error else None
            detail = {"kind": operation.kind, **({"error": error_code} if error_code else {})}
            _record_event(uow, EventKind.for_operation(outcome.status), row, operation, detail=detail)
            _record_event(
                uow,
                EventKind.for_import(outcome.import_state),
                row,
                operation,
                state=row.state,
                detail={"record_count": row.record_count},
            )
            uow.commit()
            return CommitResult(
                handle=claim.handle,
                status=_ANSWER_FOR_STATUS[outcome.status],
                operation_id=operation.id,
                legacy_batch_id=outcome.legacy_batch_id,
                record_count=row.record_count,
                replayed=False,
                error=error_code,
            )

    return retry_on_conflict(write)


def _record_late_commit(
    uow: UnitOfWork, operation: OperationRow, row: ImportRow, result: dict[str, Any], batch_id: str | None
) -> None:
    """Correct a ``not_committed`` verdict with the proof in hand: the legacy system took the batch."""
    if row.state == ImportState.OPEN:
        transition_operation(operation, OperationState.SUCCEEDED)
        operation.result = result
        operation.error = None
        transition(row, ImportState.COMMITTED)
        row.legacy_batch_id = batch_id
    else:  # the import moved on meanwhile (aborted, or committing again): a person must decide
        transition_operation(operation, OperationState.NEEDS_OPERATOR)
        finding = Finding.COMMITTED_AFTER_RECONCILED_NOT_COMMITTED
        operation.error = {"code": finding, "legacy_batch_id": batch_id}
    _record_event(
        uow, EventKind.OPERATION_LATE_COMMIT_RECORDED, row, operation, detail={"legacy_batch_id": batch_id}
    )


def _current_answer(ctx: ServiceContext, claim: _Claim) -> CommitResult:
    with ctx.store.unit_of_work() as uow:
        return _answer(_get_operation(uow, claim), _get_import(uow, claim), claim.handle)


def _record_event(
    uow: UnitOfWork,
    kind: EventKind,
    subject: ImportRow | _Claim,
    operation: OperationRow | str,
    *,
    state: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    """The one way this flow writes an event: about the import and operation of the commit, with the
    operation's status as the state unless another is given (an import event carries the import's)."""
    import_id = subject.id if isinstance(subject, ImportRow) else subject.import_id
    if isinstance(operation, OperationRow):
        operation_id, status = operation.id, operation.status
    else:
        operation_id, status = operation, None
    uow.events.record(
        kind, import_id=import_id, operation_id=operation_id, state=state or status, detail=detail
    )


def _get_operation(uow: UnitOfWork, claim: _Claim) -> OperationRow:
    operation = uow.operations.get(claim.operation_id)
    if operation is None:
        raise _MissingRow(f"commit operation {claim.operation_id} is gone")
    return operation


def _get_import(uow: UnitOfWork, claim: _Claim) -> ImportRow:
    row = uow.imports.get(claim.import_id)
    if row is None:
        raise _MissingRow(f"import {claim.import_id} of commit operation {claim.operation_id} is gone")
    return row
