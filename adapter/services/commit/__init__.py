"""The commit flow and the conversation that confirms it: one home.

| module | what it owns |
|---|---|
| ``confirmation.py`` | the conversation: who is asked, rounds, an answer counts once, the lifetime |
| ``claim.py`` | 1. claim the import for a run, or answer from the record; claim again to resume |
| ``run.py`` | 2. replay the staged records into one legacy session, 3. ``commit_sent``, then COMMIT |
| ``finish.py`` | 4. record the outcome on the operation and the import |
| ``runner.py`` | the background runner: a claimed commit runs on the server's threads, not the request's |
| ``stop.py`` | a stop asked of a running commit (cancel, abort), reaching it on any worker |
| ``bookkeeping.py`` | events, recovery points, the rows |

:func:`begin_commit` claims and starts a run and returns it at once (the request then waits as
long as it likes); :func:`commit_import` waits for the result (the CLI, tests, benchmarks).
"""

from __future__ import annotations

from typing import TypedDict, Unpack

from adapter.domain.confirmation import CommitSubject
from adapter.domain.identity import Principal, fingerprint
from adapter.domain.views import CommitResult
from adapter.services.commit.bookkeeping import Claim
from adapter.services.commit.claim import batch_ref_for, claim_import
from adapter.services.commit.run import StagedRecordsMismatch
from adapter.services.commit.runner import AfterRun, CommitRun, local_run, start_run
from adapter.services.context import CancelToken, ProgressCallback, ServiceContext
from adapter.services.idempotency import retry_on_conflict, validate_key
from adapter.services.quotas import CommitSlot

__all__ = [
    "Claim",
    "CommitOptions",
    "CommitRun",
    "StagedRecordsMismatch",
    "batch_ref_for",
    "begin_commit",
    "commit_import",
    "local_run",
    "wait_for_run",
]


class CommitOptions(TypedDict, total=False):
    """What a caller may add to a commit; listed once, for :func:`commit_import` and its facade."""

    idempotency_key: str | None
    progress: ProgressCallback | None
    cancel: CancelToken | None
    expect: CommitSubject | None


def begin_commit(
    ctx: ServiceContext,
    principal: Principal,
    handle: str,
    *,
    key: str | None = None,
    expect: CommitSubject | None = None,
    slot: CommitSlot | None = None,
    cancel: CancelToken | None = None,
    after: AfterRun | None = None,
) -> CommitRun | CommitResult:
    """Claim the import and start the run in the background; a repeat is answered from the record.

    ``expect`` is what a person confirmed: the commit starts only if the import still is exactly
    that (checked in the claim transaction, so no record can slip in between); ``NOTHING_CONFIRMED``
    lets it answer a replay or refuse, never start. ``slot`` is the legacy session slot the claim
    takes if, and only if, the commit starts; the run gives it back. ``cancel`` becomes the run's
    stop token.

    Raises HandleNotFound, HandleExpired, IdempotencyKeyReused, InvalidState, ConfirmationStale,
    QuotaExceeded. Every legacy outcome is a CommitResult status of the run, never raised.
    """
    key = validate_key(key)
    request = fingerprint("commit", {"handle": ctx.codec.digest(handle)})
    claim = retry_on_conflict(lambda: claim_import(ctx, principal, handle, key, request, expect, slot))
    if isinstance(claim, CommitResult):
        return claim  # a replay, answered from the record
    return start_run(ctx, claim, slot=slot, token=cancel, after=after)


def wait_for_run(run: CommitRun, progress: ProgressCallback | None = None) -> CommitResult:
    """Block until ``run`` has its result, forwarding its progress to ``progress`` meanwhile."""
    unwatch = run.watch(progress) if progress is not None else None
    try:
        return run.done.result()
    finally:
        if unwatch is not None:
            unwatch()


def commit_import(
    ctx: ServiceContext,
    principal: Principal,
    handle: str,
    *,
    slot: CommitSlot | None = None,
    after: AfterRun | None = None,
    **options: Unpack[CommitOptions],
) -> CommitResult:
    """Commit the import's staged records as one legacy batch, at most once, and wait for it."""
    started = begin_commit(
        ctx,
        principal,
        handle,
        key=options.get("idempotency_key"),
        expect=options.get("expect"),
        slot=slot,
        cancel=options.get("cancel"),
        after=after,
    )
    if isinstance(started, CommitResult):
        return started
    return wait_for_run(started, options.get("progress"))
