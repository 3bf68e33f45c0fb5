"""The store's side of quotas and of bounded deletes (see adapter/services/quotas.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, delete, exists, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

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


class filter_only(FunctionElement[Any]):
    """A column as a filter the query planner does not turn into an index key.

    SQLite plans without statistics (the kit never runs ``ANALYZE``) and takes an equality on an
    indexed column for a selective one: ``status IN ('failed', 'succeeded')`` walked every finished
    operation through the status index and sorted them, instead of reading the last minutes through
    ``ix_operations_updated`` (101x at 200,000 imports, bench/history.py). SQLite's unary ``+``
    keeps a term out of index selection and changes no value; PostgreSQL, which plans from
    statistics, gets the column as it is.
    """

    name = "filter_only"
    inherit_cache = True

    def __init__(self, column: ColumnElement[Any] | InstrumentedAttribute[Any]) -> None:
        super().__init__(column)
        self.type = column.type  # values compared with it are bound as the column's own


@compiles(filter_only)
def _filter_only(element: filter_only, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(element.clauses, **kw)


@compiles(filter_only, "sqlite")
def _filter_only_sqlite(element: filter_only, compiler: SQLCompiler, **kw: Any) -> str:
    return "+" + compiler.process(element.clauses, **kw)


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
        .where(EventRow.operation_id == OperationRow.id, EventRow.kind == reconciled)
        .exists()
    )
    query = (
        select(OperationRow.import_id, OperationRow.id)
        .where(
            filter_only(OperationRow.status).in_(("failed", "succeeded")),
            OperationRow.kind == "commit",
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
