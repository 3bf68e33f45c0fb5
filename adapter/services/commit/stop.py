"""Asking a running commit to stop, wherever it runs.

A commit outlives the request that started it, so a stop is asked of the operation, not of a
request: ``stop_requested`` on its row (``cancel`` or ``abort``, see ``StopRequest``). The worker
that runs it learns it at once when that is this process (the runner's registry), else with its
next lease renewal; and the transaction that writes ``commit_sent`` reads it too, so a stop asked
before that point is never followed by a COMMIT, on whichever worker the request arrived.
After COMMIT was sent a stop changes nothing in the legacy system: the real outcome is recorded,
and for ``abort`` a batch that landed is then voided (``services/abort.py``).
"""

from __future__ import annotations

from adapter.domain.states import OperationKind, OperationState
from adapter.domain.vocabulary import EventKind, StopRequest
from adapter.services.commit.runner import local_run
from adapter.services.context import ServiceContext
from adapter.services.idempotency import retry_on_conflict

__all__ = ["STOPPABLE", "request_stop"]

STOPPABLE = frozenset({OperationState.IN_PROGRESS, OperationState.OUTCOME_UNKNOWN})
"""A stop can still matter: before COMMIT it stops the run; after, ``abort`` voids what landed."""


def request_stop(ctx: ServiceContext, operation_id: str, kind: StopRequest) -> str | None:
    """Record the stop on a commit operation and tell its run if it is here; returns the operation's
    status (None: no such commit operation). ``abort`` wins over an earlier ``cancel``."""

    def write() -> str | None:
        with ctx.store.unit_of_work() as uow:
            operation = uow.operations.get(operation_id)
            if operation is None or operation.kind != OperationKind.COMMIT:
                return None
            held = operation.stop_requested
            upgrade = held in (None, StopRequest.CANCEL) and held != kind
            if operation.status in STOPPABLE and upgrade:
                operation.stop_requested = kind
                uow.events.record(
                    EventKind.OPERATION_STOP_REQUESTED,
                    import_id=operation.import_id,
                    operation_id=operation.id,
                    state=operation.status,
                    detail={"stop": kind.value},
                )
                uow.commit()
            return operation.status

    status = retry_on_conflict(write)
    run = local_run(operation_id)
    if run is not None and status == OperationState.IN_PROGRESS:
        run.cancel()
    return status
