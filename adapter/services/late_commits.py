"""A COMMIT that lands late: finding it before it becomes a second batch, and after.

A COMMIT can reach the legacy system after the kit stopped waiting for it, even after the grace
period in which "not committed" is not believed (a hung network path, a proxy holding the line).
The kit then believes ``not_committed``, the import is open again, and a new commit would make a
second legacy batch. Two defences:

1. **Ask before every COMMIT** (:func:`earlier_batch_committed`, used by ``commit/run.py``): before any
   COMMIT of an import, ask ``batch_status`` for every earlier batch reference of that import (not
   only the operation's own); if one is committed, stop at ``needs_operator`` instead of sending.
2. **Keep watching recent verdicts** (:func:`watch_recent_verdicts`, run by maintenance): for
   ``WATCH_GRACE_PERIODS`` grace periods (at least ``MIN_WATCH_SECONDS``) after a commit operation
   last ended ``failed`` or ``succeeded``, if the reconciler ever judged it ``not_committed`` (its
   ``operation.reconciled`` event says so, whatever the operation's error says now: a retry under
   the same key that failed again, say with ``legacy_unavailable`` while the system was down, keeps
   the watch on), ask again about every batch reference of its import. Only such a verdict can be
   wrong this way, so nothing else is asked. A batch under a failed operation's reference is a late
   commit: recorded as ``succeeded`` when the import is still open and has no other batch; otherwise
   (a second batch, or the import moved on) the operation goes to ``needs_operator`` with an event
   ``operation.late_commit_found`` that the metrics count. A commit retried under the same key after
   its ``not_committed`` verdict that *succeeded* is watched too: the late COMMIT of its first
   attempt lands under the same reference as a second batch, which is voided (``duplicate_voided``,
   counted the same way; ``needs_operator`` if it still stands after its VOID failed). A VOID that
   failed may have been applied with its answer lost, so the legacy system is asked what stands
   before anything is recorded, and a voided batch the kit holds no record of voiding is voided
   again (a VOID is idempotent) and recorded. When the retry's own outcome was
   unknown too, the reconciler finds both batches and voids the repeat the same way
   (:func:`void_repeated_commit`). So one key yields one batch, or the duplicate is found, voided
   and counted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from adapter.domain.states import ImportState, OperationKind, OperationState, transition, transition_operation
from adapter.domain.vocabulary import EventKind, Finding
from adapter.ports.legacy import BatchStatus, LegacyError
from adapter.services.context import ServiceContext
from adapter.services.idempotency import retry_on_conflict
from adapter.services.retries import legacy_retrying
from adapter.store.quota_reads import event_details, not_committed_verdicts, recently_doubted_commits
from adapter.store.unit_of_work import UnitOfWork

__all__ = [
    "LATE_COMMIT_EVENT",
    "LateCommit",
    "earlier_batch_committed",
    "earlier_batch_refs",
    "late_commit_counts",
    "void_repeated_commit",
    "watch_recent_verdicts",
]

log = logging.getLogger("adapter.late_commits")

WATCH_GRACE_PERIODS = 3
MIN_WATCH_SECONDS = 60.0  # with a grace period of 0 (tests) the watch still covers a minute
LATE_COMMIT_EVENT = EventKind.OPERATION_LATE_COMMIT_FOUND


@dataclass(frozen=True, slots=True)
class LateCommit:
    operation_id: str
    import_id: str
    finding: Finding  # LATE_COMMIT_RECORDED, SECOND_BATCH or COMMITTED_AFTER_IMPORT_MOVED_ON
    status: str  # the operation's new status


def earlier_batch_refs(uow: UnitOfWork, import_id: str, operation_id: str) -> tuple[str, ...]:
    """Batch references of the import's other commit operations, oldest first."""
    refs = uow.operations.commit_batch_refs(import_id, OperationKind.COMMIT.value)
    return other_batch_refs(refs, operation_id)


def other_batch_refs(refs: Sequence[tuple[str, str]], operation_id: str) -> tuple[str, ...]:
    """The batch references of ``refs`` ((operation id, reference) pairs) but ``operation_id``'s."""
    return tuple(ref for op_id, ref in refs if op_id != operation_id)


def earlier_batch_committed(ctx: ServiceContext, refs: Sequence[str]) -> tuple[Finding, str] | None:
    """(finding, legacy batch id) when a batch under one of ``refs`` is committed, else None."""
    for ref in refs:
        known = ctx.legacy.batch_status(ref)
        if known.committed:
            return Finding.EARLIER_COMMIT_LANDED, known.batches[0].legacy_batch_id
    return None


def watch_recent_verdicts(ctx: ServiceContext, *, limit: int = 100) -> list[LateCommit]:
    """Ask again about recently settled commits; record what landed late. Raises nothing."""
    found: list[LateCommit] = []
    for import_id in _recent_imports(ctx, limit):
        try:
            found += _check_import(ctx, import_id)
        except LegacyError as exc:  # unreachable now: the next pass asks again
            log.info("late-commit check of import %s postponed: %s", import_id, type(exc).__name__)
    return found


def late_commit_counts(ctx: ServiceContext) -> dict[str, int]:
    """{finding: events} of late commits found (what the metric shows)."""
    counts: dict[str, int] = {}
    with ctx.store.reading() as uow:
        for detail in event_details(uow.session, LATE_COMMIT_EVENT):
            finding = str((detail or {}).get("finding", "unknown"))
            counts[finding] = counts.get(finding, 0) + 1
    return counts


def _watch_window(ctx: ServiceContext) -> timedelta:
    grace = ctx.commit_policy.unknown_grace_seconds
    return timedelta(seconds=max(WATCH_GRACE_PERIODS * grace, MIN_WATCH_SECONDS))


def _recent_imports(ctx: ServiceContext, limit: int) -> list[str]:
    """Imports with a recently failed commit operation that the reconciler once judged
    ``not_committed``, newest first.

    Only such a verdict can be wrong in the way this watch looks for; an import whose commits all
    succeeded (the common case) costs the legacy system nothing here, and does not crowd a doubted
    one out of ``limit``.
    """
    since = ctx.clock() - _watch_window(ctx)
    with ctx.store.reading() as uow:
        settled = recently_doubted_commits(uow.session, since, limit, EventKind.OPERATION_RECONCILED)
        doubted = not_committed_verdicts(
            uow.session, [operation_id for _, operation_id in settled], EventKind.OPERATION_RECONCILED
        )
    return list(dict.fromkeys(import_id for import_id, operation_id in settled if operation_id in doubted))


def _check_import(ctx: ServiceContext, import_id: str) -> list[LateCommit]:
    with ctx.store.reading() as uow:
        operations = [
            (op.id, op.batch_ref, op.status, (op.result or {}).get("legacy_batch_id"))
            for op in uow.operations.for_import(import_id)
            if op.kind == OperationKind.COMMIT.value and op.batch_ref is not None
        ]
        recorded = {
            op_id: _recorded_voids(uow, op_id)
            for op_id, _, status, _ in operations
            if status == OperationState.SUCCEEDED.value
        }
    if any(status == OperationState.NEEDS_OPERATOR.value for _, _, status, _ in operations):
        return []  # a person already has it
    answers = {ref: ctx.legacy.batch_status(ref) for _, ref, _, _ in operations}
    total = sum(len(answer.batches) for answer in answers.values())
    late = [
        (op_id, answers[ref])
        for op_id, ref, status, _ in operations
        if status == OperationState.FAILED.value and answers[ref].committed
    ]
    found = [r for op_id, answer in late if (r := _record(ctx, import_id, op_id, answer, total)) is not None]
    for op_id, ref, status, kept in operations:
        if status != OperationState.SUCCEEDED.value or kept is None:
            continue
        # A voided batch the kit has no record of voiding is one whose VOID's answer was lost: it
        # is voided again (a VOID is idempotent) and recorded now.
        extra = [
            b.legacy_batch_id
            for b in answers[ref].batches
            if b.legacy_batch_id != kept and b.legacy_batch_id not in recorded[op_id]
        ]
        if extra and (voided := _void_duplicates(ctx, import_id, op_id, ref, kept, extra)) is not None:
            found.append(voided)
    return found


def _recorded_voids(uow: UnitOfWork, operation_id: str) -> set[str]:
    """The batches the kit recorded voiding as duplicates of ``operation_id``'s (its late-commit events)."""
    return {
        str(batch_id)
        for event in uow.events.for_operation(operation_id)
        if event.kind == LATE_COMMIT_EVENT
        for batch_id in (event.detail or {}).get("voided", [])
    }


def _void(ctx: ServiceContext, batch_ref: str, batch_ids: list[str]) -> list[str]:
    """VOID each duplicate, retrying a transient failure as every VOID is (a VOID is idempotent);
    returns those still standing (none: all voided).

    A VOID whose answer was lost may have been applied, so after a VOID that failed the legacy
    system is asked what stands before anything is recorded. Raises LegacyError when it cannot be
    asked either: the caller records nothing and a later pass tries again."""
    try:
        for batch_id in batch_ids:
            legacy_retrying(ctx.commit_policy)(ctx.legacy.void_batch, batch_id)
        return []
    except LegacyError as exc:
        log.warning("voiding a duplicate under %s failed (%s): asking", batch_ref, type(exc).__name__)
    voided = {b.legacy_batch_id for b in ctx.legacy.batch_status(batch_ref).batches if b.voided}
    return [batch_id for batch_id in batch_ids if batch_id not in voided]


def _void_duplicates(
    ctx: ServiceContext, import_id: str, operation_id: str, batch_ref: str, kept: str, extra: list[str]
) -> LateCommit | None:
    """A commit retried under its key after a ``not_committed`` verdict landed, and then the late
    COMMIT of its earlier attempt landed too, under the same reference: one key, two batches. The
    batch the operation recorded stays; the late one is voided (a VOID is idempotent), and the event
    is counted like every late commit. A duplicate still standing after its VOID failed leaves it to
    a person (``needs_operator``); None when the legacy system could not say (nothing recorded)."""
    try:
        standing = _void(ctx, batch_ref, extra)
    except LegacyError as exc:
        log.info(
            "operation %s: its duplicate's fate is asked again next pass (%s)",
            operation_id,
            type(exc).__name__,
        )
        return None
    voided = [batch_id for batch_id in extra if batch_id not in standing]
    if standing:
        finding, status = Finding.SECOND_BATCH, OperationState.NEEDS_OPERATOR
    else:
        finding, status = Finding.DUPLICATE_VOIDED, OperationState.SUCCEEDED

    def write() -> None:
        with ctx.store.unit_of_work() as uow:
            operation = uow.operations.get(operation_id)
            assert operation is not None
            if status is OperationState.NEEDS_OPERATOR and operation.status != status.value:
                transition_operation(operation, status)
                operation.error = {"code": finding, "legacy_batch_id": kept, "duplicates": extra}
            uow.events.record(
                LATE_COMMIT_EVENT,
                import_id=import_id,
                operation_id=operation_id,
                state=operation.status,
                detail={"finding": finding, "batches": 1 + len(extra), "voided": voided},
            )
            uow.commit()

    retry_on_conflict(write)
    log.warning("late COMMIT made a second batch under operation %s: %s", operation_id, finding)
    return LateCommit(operation_id, import_id, finding, status.value)


def void_repeated_commit(
    ctx: ServiceContext, import_id: str, operation_id: str, status: BatchStatus
) -> BatchStatus:
    """The reconciler found several batches under one commit's reference: its COMMIT was held past
    the grace period, judged ``not_committed``, retried under the same key, and both landed. When
    every one holds exactly the import's records they are the same work: the oldest stays, the rest
    are voided and counted (``duplicate_voided``), and the status of the one left is returned to be
    judged. Otherwise, or when a repeat still stands after its VOID failed, ``status`` comes back as
    it was (``needs_operator``). Raises LegacyError when a VOID failed and the legacy system cannot
    say what stands: nothing is recorded, and the reconciler asks again next pass."""
    with ctx.store.reading() as uow:
        row = uow.imports.get(import_id)
        staged = row.record_count if row is not None else None
        recorded = _recorded_voids(uow, operation_id)
    first, *extra = status.batches
    if not extra or first.voided or any(b.record_count != staged for b in status.batches):
        return status
    # A repeat voided without a record is one whose VOID's answer was lost: voided again, recorded.
    to_void = [b.legacy_batch_id for b in extra if b.legacy_batch_id not in recorded]
    if not to_void:
        return BatchStatus(status.batch_ref, (first,))
    standing = _void(ctx, status.batch_ref, to_void)
    voided = [batch_id for batch_id in to_void if batch_id not in standing]

    def write() -> None:
        with ctx.store.unit_of_work() as uow:
            operation = uow.operations.get(operation_id)
            uow.events.record(
                LATE_COMMIT_EVENT,
                import_id=import_id,
                operation_id=operation_id,
                state=operation.status if operation is not None else None,
                detail={
                    "finding": Finding.DUPLICATE_VOIDED,
                    "batches": len(status.batches),
                    "voided": voided,
                },
            )
            uow.commit()

    if voided:
        retry_on_conflict(write)
    if standing:
        log.warning("operation %s: a repeated batch still stands after its VOID failed", operation_id)
        return status
    log.warning("operation %s committed more than once: the repeats were voided", operation_id)
    return BatchStatus(status.batch_ref, (first,))


def _record(
    ctx: ServiceContext, import_id: str, operation_id: str, answer: BatchStatus, total: int
) -> LateCommit | None:
    batch = answer.batches[0]

    def write() -> LateCommit | None:
        with ctx.store.unit_of_work() as uow:
            operation = uow.operations.get(operation_id)
            row = uow.imports.get(import_id)
            assert operation is not None and row is not None
            if operation.status != OperationState.FAILED.value:
                return None  # it moved on meanwhile
            if total == 1 and row.state == ImportState.OPEN.value:
                finding = Finding.LATE_COMMIT_RECORDED
                transition_operation(operation, OperationState.SUCCEEDED)
                operation.result = {
                    "legacy_batch_id": batch.legacy_batch_id,
                    "record_count": batch.record_count,
                }
                operation.error = None
                transition(row, ImportState.COMMITTED)
                row.legacy_batch_id = batch.legacy_batch_id
            else:
                finding = Finding.SECOND_BATCH if total > 1 else Finding.COMMITTED_AFTER_IMPORT_MOVED_ON
                transition_operation(operation, OperationState.NEEDS_OPERATOR)
                operation.error = {"code": finding, "legacy_batch_id": batch.legacy_batch_id}
            uow.events.record(
                LATE_COMMIT_EVENT,
                import_id=row.id,
                operation_id=operation.id,
                state=operation.status,
                detail={"finding": finding, "batches": total},
            )
            uow.commit()
            return LateCommit(operation.id, row.id, finding, operation.status)

    result = retry_on_conflict(write)
    if result is not None:
        log.warning(
            "late COMMIT found: operation %s of import %s -> %s (%s)",
            result.operation_id,
            result.import_id,
            result.status,
            result.finding,
        )
    return result
