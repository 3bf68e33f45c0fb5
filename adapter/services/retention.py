"""Retention: close expired handles, and purge what no longer needs keeping, in bounded batches.

* An open import past its expiry becomes ``expired`` and its staged records are deleted (the handle
  already refused changes; this frees the space and tells subscribers).
* Finished operations (and so their idempotency keys), final imports, the staged records of
  committed imports and old events are kept ``retention`` long (default 7 days), then deleted a
  bounded batch at a time so a purge never holds a long transaction, with a pause after each batch
  as long as the batch took (:data:`PAUSE_RATIO`), so the purge, which can wait, leaves the store
  to the calls that cannot for at least half the time.
Operations that are not finished (in progress, outcome unknown, compensating, needs_operator) are
never purged: they still need someone.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from adapter.domain.states import IMPORT_FINAL, OPERATION_FINISHED, ImportState, transition
from adapter.domain.vocabulary import EventKind
from adapter.services.context import ServiceContext
from adapter.services.idempotency import retry_on_conflict
from adapter.services.quotas import discard_in_batches
from adapter.store.repositories import RetentionRepository
from adapter.store.tables import new_event

__all__ = ["PURGE_BATCH", "PurgeReport", "expire_open_imports", "purge_finished"]

_FINISHED_OPERATIONS = sorted(state.value for state in OPERATION_FINISHED)
_FINAL_IMPORTS = sorted(state.value for state in IMPORT_FINAL)

PURGE_BATCH = 100
"""Rows a purge transaction deletes (``ADAPTER_PURGE_BATCH_SIZE``): small, so a call that writes
waits for little (on SQLite, for the one batch that holds the write lock). With batches of 500 and the
pause below, another tenant's p99 during a purge was 6.3x-6.7x its p99 before on SQLite and
2.3x-2.7x on PostgreSQL; with 100, 2.7x-3.1x and 1.7x-1.9x, the purge taking about three times as
long (``bench/history.py --imports 30000 --purge-rows 200000``)."""

PAUSE_RATIO = 1.0
"""Seconds of pause after a purge batch per second the batch took. Without a pause the batches
followed each other at once, and another tenant's call waited behind them: during a purge of
154,450 rows (``bench/history.py --imports 30000 --purge-rows 200000``) its p99 was 35 ms on SQLite
against 9.4 ms with the pause (1.8 and 1.7 ms before the purge); the purge took 2.2 s against 3.7 s."""


@dataclass(frozen=True, slots=True)
class PurgeReport:
    """How many rows one purge deleted, by table: the finished operations and final imports past the
    retention, and the staged records, events and confirmation rounds that went with them."""

    operations: int = 0
    imports: int = 0
    staged_records: int = 0
    events: int = 0
    confirmation_rounds: int = 0


def expire_open_imports(ctx: ServiceContext, *, limit: int = 500) -> int:
    """Mark open imports past their expiry as expired and drop their staged records."""

    def step() -> list[tuple[str, int, int]]:
        with ctx.store.unit_of_work() as uow:
            rows = uow.imports.past_expiry(ImportState.OPEN.value, ctx.clock(), limit)
            for row in rows:
                transition(row, ImportState.EXPIRED)
                uow.events.record(EventKind.IMPORT_EXPIRED, import_id=row.id, state=row.state)
            uow.commit()
            return [(row.id, row.record_count, row.staged_bytes or 0) for row in rows]

    expired = retry_on_conflict(step)
    for import_id, count, size in expired:  # after the state change, in short transactions (quotas.py)
        discard_in_batches(ctx, import_id, count, size)
    return len(expired)


def purge_finished(
    ctx: ServiceContext, *, retention: timedelta, batch: int = PURGE_BATCH, pause_ratio: float = PAUSE_RATIO
) -> PurgeReport:
    """Delete what is older than ``retention`` and finished, ``batch`` rows per transaction, pausing
    ``pause_ratio`` times as long as each transaction took before the next."""
    cutoff = ctx.clock() - retention
    paced = _Paced(pause_ratio)
    operations = _purge(paced, ctx, lambda r: r.purge_operations(_FINISHED_OPERATIONS, cutoff, batch))
    staged = _purge(paced, ctx, lambda r: r.purge_staged_records(ImportState.COMMITTED.value, cutoff, batch))
    imports = _purge_imports(paced, ctx, cutoff, batch)
    events = _purge(paced, ctx, lambda r: r.purge_events(cutoff, batch))
    rounds = _purge(paced, ctx, lambda r: r.purge_confirmation_rounds(cutoff, batch))
    return PurgeReport(
        operations=operations,
        imports=imports,
        staged_records=staged,
        events=events,
        confirmation_rounds=rounds,
    )


_sleep = time.sleep  # the pause (a test records it)


class _Paced:
    """Times each batch and then pauses ``ratio`` times as long (:data:`PAUSE_RATIO`)."""

    def __init__(self, ratio: float) -> None:
        self._ratio = ratio

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        started = time.perf_counter()
        yield
        if self._ratio > 0:
            _sleep(self._ratio * (time.perf_counter() - started))


def _purge_imports(paced: _Paced, ctx: ServiceContext, cutoff: datetime, batch: int) -> int:
    """Purge final imports a batch at a time, each with an ``import.purged`` event naming its owner.

    The event is how listen streams learn that their owner's import list changed.
    """
    total = 0
    while True:
        with paced.batch(), ctx.store.unit_of_work() as uow:
            owners = uow.retention.purgeable_import_owners(
                _FINAL_IMPORTS, _FINISHED_OPERATIONS, cutoff, batch
            )
            uow.events.record_many(
                [
                    new_event(EventKind.IMPORT_PURGED, import_id, None, None, {"principal": p, "tenant": t})
                    for import_id, p, t in owners
                ]
            )
            deleted = uow.retention.purge_imports_by_id([import_id for import_id, _, _ in owners])
            uow.commit()
        if not deleted:
            return total
        total += deleted


def _purge(paced: _Paced, ctx: ServiceContext, one_batch: Callable[[RetentionRepository], int]) -> int:
    """Run ``one_batch`` in its own transaction until it deletes nothing; the total deleted."""
    total = 0
    while True:
        with paced.batch(), ctx.store.unit_of_work() as uow:
            deleted = one_batch(uow.retention)
            uow.commit()
        if not deleted:
            return total
        total += deleted
