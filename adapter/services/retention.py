"""Retention: close expired handles, and purge what no longer needs keeping, in bounded batches.

* An open import past its expiry becomes ``expired`` and its staged records are deleted (the handle
  already refused changes; this frees the space and tells subscribers).
* Finished operations (and so their idempotency keys), final imports, the staged records of
  committed imports and old events are kept ``retention`` long (default 7 days), then deleted a
  bounded batch at a time so a purge never holds a long transaction, with a pause after each batch
  as long as the batch took (:data:`PAUSE_RATIO`), so the purge, which can wait, leaves the store
  to the calls that cannot for at least half the time. A batch reads about what it deletes, however
  much history the store keeps (``RetentionRepository``).
Operations that are not finished (in progress, outcome unknown, compensating, needs_operator) are
never purged: they still need someone.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from adapter.domain.states import (
    IMPORT_FINAL,
    OPERATION_FINISHED,
    OPERATION_UNRESOLVED,
    ImportState,
    transition,
)
from adapter.domain.vocabulary import EventKind
from adapter.services.context import ServiceContext
from adapter.services.idempotency import retry_on_conflict
from adapter.services.quotas import discard_in_batches
from adapter.store.repositories import RetentionRepository
from adapter.store.tables import new_event

__all__ = ["PURGE_BATCH", "PURGE_BATCH_ONE_WRITER", "PurgeReport", "expire_open_imports", "purge_finished"]

_FINISHED_OPERATIONS = sorted(state.value for state in OPERATION_FINISHED)
_UNFINISHED_OPERATIONS = sorted(state.value for state in OPERATION_UNRESOLVED)
_FINAL_IMPORTS = sorted(state.value for state in IMPORT_FINAL)

PURGE_BATCH = 100
"""Rows a purge transaction deletes on PostgreSQL unless ``ADAPTER_PURGE_BATCH_SIZE`` says
otherwise: there writers do not wait for each other, and each transaction's commit costs a flush
of the log. During a purge of 772,000 rows at a million finished imports (``bench/history.py
--imports 1000000``, 2026-12-05) another tenant's p99 was 2.2x its p99 before with batches of 100,
the purge taking 88 s, and 2.65x with 25, taking 253 s."""

PURGE_BATCH_ONE_WRITER = 25
"""The same on SQLite (:attr:`Store.one_writer`), fewer: a call that writes waits for the one batch
that holds the write lock (a batch of operations held it about 1.4 ms plus 0.013 ms a row, each row
in ten indexes). During the same purge another tenant's p99 was 1.2x-1.7x its p99 before with
batches of 25, 2.1x with 50 and 2.8x-3.7x with 100, the purge taking 98-111 s, 58 s and 30 s."""

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
    ctx: ServiceContext,
    *,
    retention: timedelta,
    batch: int | None = None,
    pause_ratio: float = PAUSE_RATIO,
) -> PurgeReport:
    """Delete what is older than ``retention`` and finished, ``batch`` rows per transaction (None:
    :data:`PURGE_BATCH`, or :data:`PURGE_BATCH_ONE_WRITER` on SQLite), pausing ``pause_ratio`` times
    as long as each transaction took before the next."""
    if batch is None:
        batch = PURGE_BATCH_ONE_WRITER if ctx.store.one_writer else PURGE_BATCH
    cutoff = ctx.clock() - retention
    paced = _Paced(pause_ratio)
    operations = _purge(paced, ctx, lambda r: r.purge_operations(_FINISHED_OPERATIONS, cutoff, batch))
    staged = _purge(paced, ctx, lambda r: r.purge_staged_records(ImportState.COMMITTED.value, cutoff, batch))
    imports = sum(_purge_imports(paced, ctx, state, cutoff, batch) for state in _FINAL_IMPORTS)
    events = _purge_events(paced, ctx, cutoff, batch)
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


def _purge_imports(paced: _Paced, ctx: ServiceContext, state: str, cutoff: datetime, batch: int) -> int:
    """Purge final imports in ``state`` a batch at a time, each with an ``import.purged`` event
    naming its owner.

    The event is how listen streams learn that their owner's import list changed.
    """
    expires_before = cutoff + timedelta(seconds=ctx.limits.max_ttl_seconds)
    total = 0
    while True:
        with paced.batch(), ctx.store.unit_of_work() as uow:
            owners = uow.retention.purgeable_import_owners(
                state, _UNFINISHED_OPERATIONS, cutoff, batch, expires_before=expires_before
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


def _purge_events(paced: _Paced, ctx: ServiceContext, cutoff: datetime, batch: int) -> int:
    """Purge events older than ``cutoff``, oldest first, each batch reading on after the last one
    the batch before it deleted (on PostgreSQL a deleted row stays in the index until a vacuum:
    a batch that started from the first event again stepped over every one deleted before it)."""
    with ctx.store.reading() as uow:
        after, below = uow.retention.event_span(cutoff)

    def one_batch(retention: RetentionRepository) -> int:
        nonlocal after
        deleted = retention.purge_events(cutoff, after, below, batch)
        after = max(deleted, default=after)
        return len(deleted)

    return _purge(paced, ctx, one_batch)


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
