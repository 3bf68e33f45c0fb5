"""The store's side of quotas and of bounded deletes (see adapter/services/quotas.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, select
from sqlalchemy.orm import Session

from adapter.store.plan_terms import constant, filter_only
from adapter.store.tables import EventRow, ImportRow, OperationRow, StagedChunkRow

__all__ = [
    "delete_staged_range",
    "event_details",
    "imports_with_leftover_records",
    "not_committed_verdicts",
    "recently_doubted_commits",
]


def delete_staged_range(session: Session, import_id: str, after_seq: int, up_to_seq: int) -> int:
    """Delete the chunks of records that end at positions ``after_seq < last_seq <= up_to_seq`` (the
    primary key's order; a chunk that starts before ``after_seq`` goes with the range it ends in);
    how many records they held."""
    chunks = StagedChunkRow
    deleted = session.execute(
        delete(chunks)
        .where(chunks.import_id == import_id, chunks.last_seq > after_seq, chunks.last_seq <= up_to_seq)
        .returning(chunks.last_seq - chunks.first_seq + 1)
    )
    return sum(deleted.scalars())


def imports_with_leftover_records(
    session: Session, states: tuple[str, ...], limit: int
) -> list[tuple[str, int, int]]:
    """(import id, record count, staged bytes) of imports in ``states`` that still have staged records."""
    query = (
        select(ImportRow.id, ImportRow.record_count, ImportRow.staged_bytes)
        .where(ImportRow.state.in_(states), exists().where(StagedChunkRow.import_id == ImportRow.id))
        .limit(limit)
    )
    return [(row.id, row.record_count, row.staged_bytes or 0) for row in session.execute(query)]


def event_details(session: Session, kind: str) -> list[dict[str, Any] | None]:
    """The ``detail`` of every event of ``kind`` (the late-commit metric counts them by finding)."""
    return list(session.scalars(select(EventRow.detail).where(EventRow.kind == kind)))


def recently_doubted_commits(
    session: Session, since: datetime, limit: int, reconciled: str
) -> list[tuple[str, str]]:
    """(import id, operation id) of commit operations that ended ``failed`` or ``succeeded`` since
    ``since`` and that the reconciler judged at least once (events of kind ``reconciled``), newest
    first: the only ones a late COMMIT can still surprise. A failed one may have landed after all;
    a succeeded one, retried under its key after a ``not_committed`` verdict, may get the late
    COMMIT as a second batch. Commits nobody reconciled never crowd them out of ``limit``."""
    judged = (
        select(EventRow.id)
        .where(EventRow.operation_id == OperationRow.id, EventRow.kind == constant(reconciled))
        .exists()
    )
    query = (
        select(OperationRow.import_id, OperationRow.id)
        .where(
            filter_only(OperationRow.status).in_([constant("failed"), constant("succeeded")]),
            OperationRow.kind == constant("commit"),
            OperationRow.updated_at >= since,
            OperationRow.import_id.is_not(None),
            judged,
        )
        .order_by(OperationRow.updated_at.desc())
        .limit(limit)
    )
    return [(str(import_id), str(operation_id)) for import_id, operation_id in session.execute(query)]


def not_committed_verdicts(session: Session, operation_ids: list[str], kind: str) -> set[str]:
    """Which of ``operation_ids`` the reconciler ever judged ``not_committed`` (events of ``kind``)."""
    if not operation_ids:
        return set()
    query = select(EventRow.operation_id, EventRow.detail).where(
        EventRow.operation_id.in_(operation_ids), EventRow.kind == kind
    )
    return {
        str(operation_id)
        for operation_id, detail in session.execute(query)
        if (detail or {}).get("finding") == "not_committed"
    }
