"""The background runner: a confirmed commit is the server's work, not the request's.

A commit's claim runs in the request that asked for it; the run (replay, COMMIT, finish) runs here,
on a thread of the process's commit pool, under the operation's lease. The request may wait for it
and watch its progress (the MCP tool waits ``CommitPolicy.wait_seconds``), then answers whatever
the commit has reached; the run goes on without it. Nothing a run needs lives in the request: its
state is the operation row (lease, recovery point, progress, stop request), so if this process
dies, another worker resumes the commit from its recovery point (``reconcile.py``).

Runs of this process are registered by operation id, so a stop asked here (``abort_import``,
``tasks/cancel``) reaches the run at once, and a shutdown hands every run over before COMMIT.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future

from adapter.domain.states import OperationState
from adapter.domain.views import CommitResult
from adapter.services.commit.bookkeeping import Claim
from adapter.services.commit.finish import current_answer, finish
from adapter.services.commit.run import run_commit
from adapter.services.context import CancelToken, ProgressCallback, ServiceContext
from adapter.services.progress import ProgressReporter
from adapter.services.quotas import CommitSlot
from adapter.services.ticker import shared_pool

__all__ = ["AfterRun", "CommitRun", "hand_over_all", "local_run", "start_run"]

log = logging.getLogger("adapter.commit")

AfterRun = Callable[[ServiceContext, str], None]
"""Called with the import id once a run has recorded its outcome, when its owner had asked to abort
it (``finish`` saw the request on the row): the abort's follow-up."""

_POOL_THREADS = 256
"""Threads of the commit pool (started as needed). Every run holds a legacy session slot, so the
slots (``ADAPTER_LEGACY_SESSIONS`` per process) bound how many run at once; this only must not."""


class CommitRun:
    """One commit running in this process: its result to come, its progress, its stop token."""

    def __init__(self, ctx: ServiceContext, claim: Claim, token: CancelToken | None = None) -> None:
        self.ctx = ctx
        self.claim = claim
        self.token = token or CancelToken()
        self.done: Future[CommitResult] = Future()
        self._sent = 0
        self._last: tuple[float, int] | None = None
        self._watchers: dict[object, ProgressCallback] = {}
        self._lock = threading.Lock()

    @property
    def operation_id(self) -> str:
        return self.claim.operation_id

    @property
    def sent(self) -> int:
        """Records the legacy system has taken so far in the current attempt."""
        return self._sent

    def watch(self, callback: ProgressCallback) -> Callable[[], None]:
        """Forward progress to ``callback``, the latest report at once, until the returned function is
        called. Reports reach each watcher in order (they are delivered under one lock, so a watcher
        must only queue them)."""
        key = object()
        with self._lock:
            self._watchers[key] = callback
            if self._last is not None:
                _deliver(callback, *self._last)
        return lambda: self._unwatch(key)

    def _unwatch(self, key: object) -> None:
        with self._lock:
            self._watchers.pop(key, None)

    def report(self, value: float, total: int) -> None:
        """The run's progress callback (from its ``ProgressReporter``)."""
        with self._lock:
            self._sent = max(self._sent, int(value))
            self._last = (value, total)
            for watcher in self._watchers.values():
                _deliver(watcher, value, total)

    def cancel(self) -> None:
        """Stop before COMMIT and record it (the caller went away, or its owner asked to stop)."""
        self.token.cancel()


def _deliver(watcher: ProgressCallback, value: float, total: int) -> None:
    try:
        watcher(value, total)
    except Exception:  # a watcher that is gone must not break the commit
        log.debug("progress watcher failed", exc_info=True)


_runs: dict[str, CommitRun] = {}
_runs_lock = threading.Lock()


def local_run(operation_id: str) -> CommitRun | None:
    """The run of ``operation_id`` if this process runs it now."""
    return _runs.get(operation_id)


def start_run(
    ctx: ServiceContext,
    claim: Claim,
    *,
    slot: CommitSlot | None = None,
    token: CancelToken | None = None,
    after: AfterRun | None = None,
) -> CommitRun:
    """Run a claimed commit on the commit pool; ``slot`` (the legacy session slot the claim took) is
    given back when the run ends, then ``after`` is called."""
    run = CommitRun(ctx, claim, token)
    with _runs_lock:
        _runs[claim.operation_id] = run
    try:
        shared_pool("commit-run", _POOL_THREADS).submit(_execute, ctx, run, slot, after)
    except BaseException:
        _forget(run, slot)
        raise
    return run


def _execute(ctx: ServiceContext, run: CommitRun, slot: CommitSlot | None, after: AfterRun | None) -> None:
    claim = run.claim
    try:
        run.done.set_result(_run_and_finish(ctx, claim, run))
    except BaseException as exc:
        run.done.set_exception(exc)
    finally:
        _forget(run, slot)
    if after is not None and claim.abort_asked:  # only an abort asked while it ran needs one
        try:
            after(ctx, claim.import_id)
        except Exception:  # maintenance finishes what this could not (abort.settle_abort_requests)
            log.warning("commit %s: the follow-up after the run failed", claim.operation_id, exc_info=True)


def _forget(run: CommitRun, slot: CommitSlot | None) -> None:
    with _runs_lock:
        if _runs.get(run.operation_id) is run:
            del _runs[run.operation_id]
    if slot is not None:
        slot.release()


def _run_and_finish(ctx: ServiceContext, claim: Claim, run: CommitRun) -> CommitResult:
    reporter = ProgressReporter(run.report, claim.total, ctx.commit_policy.progress_pulse_seconds)
    reporter(0)  # the commit has started: 0 of N
    try:
        with reporter.pulsing():  # a slow legacy system still shows signs of life
            outcome = run_commit(ctx, claim, reporter, run.token, lambda: run.sent)
    finally:
        reporter.close()  # the last report comes before the result
    if outcome is None:
        return current_answer(ctx, claim)  # taken over by another worker, or handed over
    try:
        return finish(ctx, claim, outcome)
    except Exception as exc:
        if outcome.status not in (OperationState.SUCCEEDED, OperationState.OUTCOME_UNKNOWN):
            raise  # COMMIT was not sent: nothing to be unsure about
        # COMMIT was sent but the store did not take the record of it: the caller gets
        # outcome_unknown with its operation id; once the lease runs out the reconciler asks the
        # legacy system and records the truth.
        log.error("commit %s: recording the outcome failed (%s)", claim.operation_id, type(exc).__name__)
        return CommitResult(
            handle=claim.handle,
            status="outcome_unknown",
            operation_id=claim.operation_id,
            legacy_batch_id=None,
            record_count=claim.total,
            replayed=False,
        )


def hand_over_all(ctx: ServiceContext) -> list[CommitRun]:
    """Shutdown: every run of ``ctx`` stops before COMMIT and frees its lease for another worker
    (a run past COMMIT finishes as usual). Returns the runs told."""
    with _runs_lock:
        runs = [run for run in _runs.values() if run.ctx is ctx]
    for run in runs:
        run.token.hand_over()
    return runs
