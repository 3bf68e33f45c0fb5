"""Retention: close expired handles, and purge what no longer needs keeping, in bounded batches.

* An open import past its expiry becomes ``expired`` and its staged records are deleted (the handle
  already refused changes; this frees the space and tells subscribers).
* Finished operations (and so their idempotency keys), final imports, the staged records of
  committed imports and old events are kept ``retention`` long (default 7 days), then deleted a
  bounded batch at a time so a purge never holds a long transaction.
Operations that are not finished (in progress, outcome unknown, compensating, needs_operator) are
never purged: they still need someone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import Select, delete, exists, select
from sqlalchemy.orm import InstrumentedAttribute

from adapter.domain.states import IMPORT_FINAL, OPERATION_FINISHED, ImportState, transition
from adapter.domain.vocabulary import EventKind
from adapter.services.context import ServiceContext
from adapter.services.idempotency import retry_on_conflict
from adapter.store.tables import EventRow, ImportRow, OperationRow, StagedRecordRow

__all__ = ["PurgeReport", "expire_open_imports", "purge_finished"]

_FINISHED_OPERATIONS = sorted(state.value for state in OPERATION_FINISHED)
_FINAL_IMPORTS = sorted(state.value for state in IMPORT_FINAL)


@dataclass(frozen=True, slots=True)
class PurgeReport:
    operations: int = 0
    imports: int = 0
    staged_records: int = 0
    events: int = 0


def expire_open_imports(ctx: ServiceContext, *, limit: int = 500) -> int:
    """Mark open imports past their expiry as expired and drop their staged records."""

    def step() -> int:
        with ctx.store.unit_of_work() as uow:
            rows = list(
                uow.session.scalars(
                    select(ImportRow)
                    .where(ImportRow.state == ImportState.OPEN.value, ImportRow.expires_at <= ctx.clock())
                    .limit(limit)
                )
            )
            for row in rows:
                transition(row, ImportState.EXPIRED)
                uow.records.discard(row.id)
                uow.events.record(EventKind.IMPORT_EXPIRED, import_id=row.id, state=row.state)
            uow.commit()
            return len(rows)

    return retry_on_conflict(step)


def purge_finished(ctx: ServiceContext, *, retention: timedelta, batch: int = 500) -> PurgeReport:
    """Delete what is older than ``retention`` and finished, ``batch`` rows per transaction."""
    cutoff = ctx.clock() - retention
    operations = _purge(
        ctx,
        select(OperationRow.id).where(
            OperationRow.status.in_(_FINISHED_OPERATIONS), OperationRow.updated_at < cutoff
        ),
        OperationRow.id,
        batch,
    )
    staged = _purge(
        ctx,
        select(StagedRecordRow.id)
        .join(ImportRow, ImportRow.id == StagedRecordRow.import_id)
        .where(ImportRow.state == ImportState.COMMITTED.value, ImportRow.updated_at < cutoff),
        StagedRecordRow.id,
        batch,
    )
    imports = _purge(
        ctx,
        select(ImportRow.id).where(
            ImportRow.state.in_(_FINAL_IMPORTS),
            ImportRow.updated_at < cutoff,
            ~exists().where(
                OperationRow.import_id == ImportRow.id, OperationRow.status.not_in(_FINISHED_OPERATIONS)
            ),
        ),
        ImportRow.id,
        batch,
    )
    events = _purge(ctx, select(EventRow.id).where(EventRow.created_at < cutoff), EventRow.id, batch)
    return PurgeReport(operations=operations, imports=imports, staged_records=staged, events=events)


def _purge(
    ctx: ServiceContext, ids_query: Select[Any], column: InstrumentedAttribute[Any], batch: int
) -> int:
    total = 0
    while True:
        with ctx.store.unit_of_work() as uow:
            ids = list(uow.session.scalars(ids_query.limit(batch)))
            if not ids:
                return total
            if column.table.name == "imports":
                uow.session.execute(delete(StagedRecordRow).where(StagedRecordRow.import_id.in_(ids)))
                uow.session.execute(delete(OperationRow).where(OperationRow.import_id.in_(ids)))
            uow.session.execute(delete(column.table).where(column.in_(ids)))
            uow.commit()
            total += len(ids)
