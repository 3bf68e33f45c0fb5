"""Steps 2 and 3 of a commit: replay the staged records into ONE legacy session, then COMMIT.

* **Replay**: open a legacy session, ``begin`` under the operation's batch reference, stream the
  staged records in bounded chunks (keyset reads, so memory does not grow with the import), report
  progress, stop if asked. Records go to the legacy system in pieces sized to take about
  ``CommitPolicy.stop_check_seconds`` each, so a stop takes effect between records, not after a
  chunk of hundreds at a slow system's pace. A transient error or a lost session before COMMIT
  retries the whole replay in a new session (tenacity, bounded and jittered): nothing was applied,
  so nothing doubles.
* **Recovery point, then COMMIT**: ``commit_sent`` is written durably *before* COMMIT goes out, in
  the transaction that also reads the row's stop request; the token is checked one last time. A lost
  reply now makes the operation ``outcome_unknown`` (never ``failed``): only asking the legacy system
  can tell, which is what reconciliation does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from adapter.domain.errors import AdapterError, LegacyRejected, LegacyUnavailable
from adapter.domain.states import ImportState, OperationState
from adapter.domain.vocabulary import EventKind, Finding, RecoveryPoint
from adapter.ports.legacy import (
    CommittedBatch,
    LegacyError,
    LegacyFailed,
    LegacyOutcomeUnknown,
    LegacyRefused,
    LegacySession,
    LegacyTransient,
)
from adapter.ports.sessions import add_record_texts
from adapter.ports.targets import begin_batch
from adapter.services.commit.bookkeeping import (
    Claim,
    LeaseLost,
    StopRequested,
    get_operation,
    record_event,
    record_retry,
    set_recovery_point,
)
from adapter.services.commit.finish import Outcome, finish, unknown_outcome
from adapter.services.context import CancelToken, ServiceContext
from adapter.services.findings import judge
from adapter.services.idempotency import retry_on_conflict
from adapter.services.late_commits import earlier_batch_committed
from adapter.services.leases import Heartbeat, release_lease
from adapter.services.progress import ProgressReporter
from adapter.services.retries import legacy_retrying
from adapter.services.ticker import shared_pool
from adapter.store.staged import StagedWindow

__all__ = ["StagedRecordsMismatch", "run_commit"]

log = logging.getLogger("adapter.commit")


class StagedRecordsMismatch(Exception):
    """The store returned a different number of records than the import counts: never commit that."""


class _NeedsOperator(Exception):
    """The legacy system holds something a person must look at (found when asking before COMMIT)."""

    def __init__(self, finding: Finding, legacy_batch_id: str) -> None:
        super().__init__(finding)
        self.finding = finding
        self.legacy_batch_id = legacy_batch_id


class _Cancelled(Exception):
    """The run was told to stop before COMMIT; raised inside the flow, never to callers."""


class _HandOver(Exception):
    """The worker is shutting down: stop before COMMIT and leave the operation to another worker."""


@dataclass(slots=True)
class _Run:
    """What one execution has done so far: decides how an unexpected error is recorded."""

    commit_sent: bool = False


def run_commit(
    ctx: ServiceContext,
    claim: Claim,
    progress: ProgressReporter,
    stop: CancelToken,
    sent: Callable[[], int],
) -> Outcome | None:
    """Run the commit under a lease heartbeat, retrying transient errors before COMMIT.

    None when the run must not record an outcome: the lease was lost to another worker, or the run
    was handed over (its lease freed for the next worker). A bug or a store failure is recorded as
    well as can be, then propagates. The heartbeat also writes ``sent()`` as the row's progress
    and turns a stop request on the row into ``stop.cancel()``.
    """
    run = _Run()
    retrying = legacy_retrying(
        ctx.commit_policy,
        before_sleep=lambda state: record_retry(
            ctx, claim, state.outcome.exception() if state.outcome else None
        ),
    )
    try:
        with Heartbeat(ctx, claim.operation_id, claim.lease_owner, progress=sent, on_stop=stop.cancel):
            batch = retrying(lambda: _attempt(ctx, claim, run, progress, stop))
    except LeaseLost:
        log.warning("commit %s: lease lost before COMMIT; leaving it to its new owner", claim.operation_id)
        return None
    except _HandOver:
        _hand_over(ctx, claim)
        return None
    except _EXPECTED as exc:
        return _outcome_of(claim, exc)
    except BaseException as exc:
        if run.commit_sent and isinstance(exc, Exception):
            # COMMIT went out, then something failed (the store, most likely): only the legacy
            # system knows whether the batch is in, so the answer is outcome_unknown.
            log.error("commit %s: failed after COMMIT was sent (%s)", claim.operation_id, type(exc).__name__)
            return unknown_outcome()
        with contextlib.suppress(Exception):
            finish(ctx, claim, unknown_outcome() if run.commit_sent else _failed(AdapterError.code, exc))
        raise
    return Outcome(
        OperationState.SUCCEEDED,
        ImportState.COMMITTED,
        RecoveryPoint.COMMITTED,
        result={"legacy_batch_id": batch.legacy_batch_id, "record_count": batch.record_count},
        legacy_batch_id=batch.legacy_batch_id,
    )


_EXPECTED = (
    _Cancelled,
    StopRequested,
    _NeedsOperator,
    LegacyOutcomeUnknown,
    LegacyTransient,
    LegacyFailed,
    StagedRecordsMismatch,
)
"""The ways a run may end that are recorded as an outcome (``_outcome_of``) and not raised."""


def _outcome_of(claim: Claim, exc: BaseException) -> Outcome:
    """What an expected way of ending means for the operation and the import."""
    if isinstance(exc, _Cancelled | StopRequested):
        # ``finish`` makes the import ``aborted`` instead when the row holds an abort request.
        return Outcome(OperationState.CANCELLED, ImportState.OPEN, RecoveryPoint.CANCELLED_BEFORE_COMMIT)
    if isinstance(exc, _NeedsOperator):
        return Outcome(
            OperationState.NEEDS_OPERATOR,
            ImportState.COMMITTED,
            RecoveryPoint.ASKED_BEFORE_COMMIT,
            error={"code": exc.finding},
            legacy_batch_id=exc.legacy_batch_id,
        )
    if isinstance(exc, LegacyOutcomeUnknown):
        return unknown_outcome()
    if isinstance(exc, LegacyTransient):
        return _failed(LegacyUnavailable.code, exc)
    if isinstance(exc, LegacyRefused):  # the system said why: which record, which field
        refused = _failed(LegacyRejected.code, exc)
        assert refused.error is not None
        refusal = dataclasses.asdict(exc.refusal)
        log.warning(
            "commit %s refused: %s (record %s, field %s)",
            claim.operation_id,
            exc.refusal.code,
            exc.refusal.position,
            exc.refusal.field,
        )
        return dataclasses.replace(refused, error={**refused.error, "refusal": refusal})
    if isinstance(exc, LegacyFailed):
        return _failed(LegacyRejected.code, exc)
    log.error("commit %s: %s", claim.operation_id, exc)
    return _failed(AdapterError.code, exc)


def _failed(code: str, exc: BaseException) -> Outcome:
    error = {"code": code, "type": type(exc).__name__}
    return Outcome(OperationState.FAILED, ImportState.OPEN, RecoveryPoint.FAILED_BEFORE_COMMIT, error=error)


def _attempt(
    ctx: ServiceContext, claim: Claim, run: _Run, progress: ProgressReporter, stop: CancelToken
) -> CommittedBatch:
    """One legacy session: begin, add every staged record in order, then commit."""
    if claim.first_point_recorded:
        claim.first_point_recorded = False
    else:
        set_recovery_point(ctx, claim, RecoveryPoint.REPLAYING, attempt=True)
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
        _replay(ctx, claim, session, progress, stop)
        return _send_commit(ctx, claim, run, session, stop)
    except LegacyOutcomeUnknown as exc:
        if run.commit_sent:
            raise
        # Before COMMIT nothing can have been applied: an unknown BEGIN or ADD only lost the session.
        raise LegacyTransient(str(exc)) from exc
    except (_Cancelled, _HandOver, StopRequested, LeaseLost, _NeedsOperator, LegacyTransient, LegacyFailed):
        with contextlib.suppress(LegacyError):
            session.rollback()
        raise
    finally:
        session.close()


def _ask_first(ctx: ServiceContext, claim: Claim) -> CommittedBatch | None:
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
    ctx: ServiceContext, claim: Claim, session: LegacySession, progress: ProgressReporter, stop: CancelToken
) -> None:
    """Begin the batch under the operation's reference and add every staged record, in order."""
    begin_batch(session, claim.batch_ref, claim.target)
    sent = _replay_records(ctx, claim, session, progress, stop)
    if sent != claim.total:
        raise StagedRecordsMismatch(f"staged {claim.total} records but found {sent}")


def _send_commit(
    ctx: ServiceContext, claim: Claim, run: _Run, session: LegacySession, stop: CancelToken
) -> CommittedBatch:
    """Write the ``commit_sent`` recovery point durably, then send COMMIT."""
    _check_stop(stop)  # the last moment the commit can still be stopped
    set_recovery_point(ctx, claim, RecoveryPoint.COMMIT_SENT)  # StopRequested if asked on any worker
    run.commit_sent = True
    try:
        return session.commit()
    except LegacyTransient:
        run.commit_sent = False  # the system said it did not apply it
        raise


def _replay_records(
    ctx: ServiceContext, claim: Claim, session: LegacySession, progress: ProgressReporter, stop: CancelToken
) -> int:
    """Send the staged records a window of positions at a time, as the JSON texts they were stored
    as, reading the next window (on the shared read-ahead pool) while the legacy system takes the
    current one.

    At most two windows of records are in memory at once, whatever the size of the import. The last
    window also says whether the store holds any record past the import's count, so a store holding
    more is caught before COMMIT; one holding fewer ends the replay short of it (``_replay``).
    """
    size, total = ctx.commit_policy.chunk_size, claim.total

    def read(after: int) -> StagedWindow:
        return ctx.store.staged_window(claim.import_id, after, min(after + size, total))

    pieces = _Pieces(ctx.commit_policy.stop_check_seconds, size)
    sent = 0
    window = read(0)
    while True:
        _check_stop(stop)
        texts = window.texts
        following = sent + len(texts)
        if following == total and window.beyond:
            raise StagedRecordsMismatch(f"staged {total} records but found more")
        if not texts:
            return sent
        whole = following < total and len(texts) == min(size, total - sent)
        pending = _read_ahead().submit(read, following) if whole else None
        try:
            sent = pieces.send(session, texts, sent, progress, stop)
        except BaseException:
            if pending is not None:
                pending.cancel()  # a read not yet started is not needed any more
            raise
        if pending is None:
            return sent
        window = pending.result()


class _Pieces:
    """Hands a chunk to the legacy session in pieces that each take about ``target`` seconds.

    The first piece is one record; each next one is sized from how fast the last went (growing at
    most eightfold, up to the whole chunk), so a fast system takes whole chunks in one pipelined call
    after three pieces while a slow one (40 ms a record) gets a few records at a time, and a stop is
    noticed within about ``target`` seconds (or one record, if a record takes longer).
    """

    _FIRST = 1

    def __init__(self, target: float, largest: int) -> None:
        self._target = target
        self._largest = max(1, largest)
        self._size = min(self._FIRST, self._largest)

    def send(
        self,
        session: LegacySession,
        texts: list[str],
        sent: int,
        progress: ProgressReporter,
        stop: CancelToken,
    ) -> int:
        start = 0
        while start < len(texts):
            if start:
                _check_stop(stop)
            piece = texts[start : start + self._size]
            began = time.monotonic()
            add_record_texts(session, piece)
            self._resize(len(piece), time.monotonic() - began)
            start += len(piece)
            sent += len(piece)
            progress(sent)
        return sent

    def _resize(self, count: int, seconds: float) -> None:
        per_record = seconds / count
        wanted = self._largest if per_record <= 0 else int(self._target / per_record)
        self._size = max(1, min(self._largest, wanted, self._size * 8))


_READ_AHEAD_THREADS = 8
"""Read-ahead threads shared by all commits; a read waits for a free one (reads take milliseconds)."""


def _read_ahead() -> ThreadPoolExecutor:
    """One small pool for every commit's read-ahead: a commit does not start a thread of its own."""
    return shared_pool("read-ahead", _READ_AHEAD_THREADS)


def _check_stop(stop: CancelToken) -> None:
    if stop.handing_over:
        raise _HandOver()
    if stop.cancelled:
        raise _Cancelled()


def _hand_over(ctx: ServiceContext, claim: Claim) -> None:
    """Free the lease of a commit this worker stops for shutdown: the next worker resumes it at once."""

    def write() -> None:
        with ctx.store.unit_of_work() as uow:
            operation = get_operation(uow, claim)
            if operation.lease_owner != claim.lease_owner or operation.status != OperationState.IN_PROGRESS:
                return
            release_lease(operation)
            record_event(uow, EventKind.OPERATION_HANDED_OVER, claim, operation, detail={"by": ctx.worker_id})
            uow.commit()

    try:
        retry_on_conflict(write)
    except Exception:  # the lease simply runs out instead
        log.warning("commit %s: could not free its lease on hand-over", claim.operation_id, exc_info=True)
    log.info("commit %s handed over before COMMIT (worker shutting down)", claim.operation_id)
