"""Leases: who may act on an operation right now.

An operation that is being worked on carries ``lease_owner`` and ``lease_expires_at``. A worker
takes a lease only when none is held or the holder's has run out, and renews it while it works (a
heartbeat), so two workers or two reconcilers never act on one operation at once, while the
operation of a worker that died is taken over within one lease period, not held by a lock that stays.
The optimistic version column makes taking a lease a compare-and-set.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from types import TracebackType

from adapter.services.context import ServiceContext
from adapter.services.ticker import Repeating, every
from adapter.store.tables import OperationRow

__all__ = ["Heartbeat", "lease_is_free", "new_lease_owner", "release_lease", "renew_lease", "take_lease"]

log = logging.getLogger("adapter.leases")


def new_lease_owner(ctx: ServiceContext) -> str:
    """A lease owner for ONE piece of work (a commit run, a reconciliation), not for the process.

    A server reconciles in the same process (same ``worker_id``) as the commits it may take over; if
    the owner were only the process, a commit whose lease was taken over would still find its own
    name on the lease and go on to send COMMIT.
    """
    return f"{ctx.worker_id}/{secrets.token_hex(4)}"


def lease_is_free(operation: OperationRow, now: datetime) -> bool:
    expires = operation.lease_expires_at
    return operation.lease_owner is None or expires is None or expires <= now


def take_lease(operation: OperationRow, owner: str, now: datetime, seconds: float) -> None:
    operation.lease_owner = owner
    operation.lease_expires_at = now + timedelta(seconds=seconds)


def release_lease(operation: OperationRow) -> None:
    """Let go of the operation: the next worker or reconciler may take it at once."""
    operation.lease_owner = None
    operation.lease_expires_at = None


def renew_lease(ctx: ServiceContext, operation_id: str, owner: str, records_sent: int | None = None) -> bool:
    """Extend our lease; False if it is no longer ours (taken over, or released)."""
    return _renew(ctx, operation_id, owner, records_sent)[0]


def _renew(
    ctx: ServiceContext, operation_id: str, owner: str, records_sent: int | None
) -> tuple[bool, str | None]:
    """One compare-and-set UPDATE: there is no read before the write, so a concurrent write to the
    row (often our own worker's recovery point) cannot make a live lease look lost. The version
    still moves, so a writer that read the row before the renewal retries its own write. It also
    stores the run's progress and returns the row's stop request, in the same statement."""
    expires = ctx.clock() + timedelta(seconds=ctx.commit_policy.lease_seconds)
    with ctx.store.unit_of_work() as uow:
        renewed = uow.operations.extend_lease(operation_id, owner, expires, records_sent)
        uow.commit()
    return renewed


class Heartbeat:
    """Renews a lease every third of its length while a block of work runs (on the process's
    ticker, ``ticker.py``: no thread of its own).

    A commit's heartbeat also carries its progress to the row (``progress()``: records sent, what
    another worker reports) and brings back a stop its owner asked for on another worker
    (``on_stop()``)."""

    def __init__(
        self,
        ctx: ServiceContext,
        operation_id: str,
        owner: str,
        *,
        progress: Callable[[], int] | None = None,
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        self._ctx = ctx
        self._operation_id = operation_id
        self._owner = owner
        self._progress = progress
        self._on_stop = on_stop
        self._beats: Repeating | None = None

    def _beat(self) -> bool:
        """One renewal; False (no more beats) once the lease is no longer ours."""
        try:
            sent = self._progress() if self._progress is not None else None
            renewed, stop = _renew(self._ctx, self._operation_id, self._owner, sent)
        except Exception:  # the store is briefly unavailable: try again next beat
            log.warning("lease renewal failed", exc_info=True)
            return True
        if renewed:
            if stop is not None and self._on_stop is not None:
                self._on_stop()
            return True
        if self._beats is not None and not self._beats.cancelled:  # not just our own release
            log.warning("lease on operation %s was lost", self._operation_id)
        return False

    def __enter__(self) -> Heartbeat:
        self._beats = every(self._ctx.commit_policy.lease_seconds / 3, self._beat)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._beats is not None:
            self._beats.cancel()
