"""The store's side of quotas and of bounded deletes (see adapter/services/quotas.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, select
from sqlalchemy.orm import Session

from adapter.store.tables import EventRow, ImportRow, OperationRow, StagedRecordRow

__all__ = [
    "delete_staged_range",
    "event_details",
    "failed_commits_of",
    "imports_with_leftover_records",
    "recently_settled_commits",
]

# Imports whose staged records no longer count against the tenant: those that drop them (at once,
# in bounded batches). Every other state keeps them, so a committed import counts until the purge
# removes its records (after ADAPTER_RETENTION_DAYS) and a commit does not free room to stage again
# at once. The add path sums the rest in its own statement (``staging.py``), over the tenant's rows
# it reads anyway.
RELEASED_STATES = ("aborted", "expired")


def delete_staged_range(session: Session, import_id: str, after_seq: int, up_to_seq: int) -> int:
    """Delete the records at positions ``after_seq < seq <= up_to_seq`` (the unique index's order)."""
    result = session.execute(
        delete(StagedRecordRow).where(
            StagedRecordRow.import_id == import_id,
            StagedRecordRow.seq > after_seq,
            StagedRecordRow.seq <= up_to_seq,
        )
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def imports_with_leftover_records(
    session: Session, states: tuple[str, ...], limit: int
) -> list[tuple[str, int, int]]:
    """(import id, record count, staged bytes) of imports in ``states`` that still have staged records."""
    query = (
        select(ImportRow.id, ImportRow.record_count, ImportRow.staged_bytes)
        .where(ImportRow.state.in_(states), exists().where(StagedRecordRow.import_id == ImportRow.id))
        .limit(limit)
    )
    return [(row.id, row.record_count, row.staged_bytes or 0) for row in session.execute(query)]


def event_details(session: Session, kind: str) -> list[dict[str, Any] | None]:
    """The ``detail`` of every event of ``kind`` (the late-commit metric counts them by finding)."""
    return list(session.scalars(select(EventRow.detail).where(EventRow.kind == kind)))


def failed_commits_of(session: Session, import_ids: list[str]) -> list[tuple[str, dict[str, Any] | None]]:
    """(import id, error) of the failed commit operations of ``import_ids``."""
    if not import_ids:
        return []
    query = select(OperationRow.import_id, OperationRow.error).where(
        OperationRow.kind == "commit",
        OperationRow.status == "failed",
        OperationRow.import_id.in_(import_ids),
    )
    return [(str(i), e) for i, e in session.execute(query)]


def recently_settled_commits(
    session: Session, statuses: tuple[str, ...], since: datetime, limit: int
) -> list[str]:
    """Import ids of commit operations in ``statuses`` changed since ``since``, newest first, each once."""
    query = (
        select(OperationRow.import_id)
        .where(
            OperationRow.kind == "commit",
            OperationRow.status.in_(statuses),
            OperationRow.updated_at >= since,
            OperationRow.import_id.is_not(None),
        )
        .order_by(OperationRow.updated_at.desc())
        .limit(limit)
    )
    return list(dict.fromkeys(str(import_id) for import_id in session.scalars(query)))
