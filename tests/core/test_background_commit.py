"""A commit as the server's work: it runs on past the request, is stopped by its owner from anywhere,
and is handed over when its worker shuts down. Through the service layer, on a real store and the
simulator over TCP (the MCP side is in ``tests/mcp/test_long_commits.py`` and ``test_tasks.py``).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from sqlalchemy import update

from adapter.domain.identity import Principal
from adapter.legacy.forwarding import ForwardingPort, ForwardingSession
from adapter.services import CancelToken, CommitRun, ImportService, ServiceContext
from adapter.services.commit.runner import local_run
from adapter.services.operations import to_operation_view
from adapter.store.tables import OperationRow
from legacy_sim.engine import LegacyEngine
from tests.support.imports import staged
from tests.support.wait import wait_until


def started(service: ImportService, who: Principal, handle: str, **options: Any) -> CommitRun:
    run = service.start_commit(who, handle, **options)
    assert isinstance(run, CommitRun), run
    return run


def test_a_cancel_takes_effect_between_records_not_after_the_chunk(
    service: ImportService, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    """Issue 20: a cancel 1.5 s into a 60-record commit at 100 ms a record took effect at 6.2 s."""
    handle = staged(service, alice, 60)
    legacy_engine.update_faults(latency_ms=100)
    token = CancelToken()
    run = started(service, alice, handle, cancel=token)
    time.sleep(1.5)
    token.cancel()
    asked = time.monotonic()
    result = run.done.result(timeout=30)
    stopped_after = time.monotonic() - asked
    legacy_engine.update_faults(latency_ms=0)

    assert result.status == "cancelled"
    assert stopped_after < 1.0, f"took {stopped_after:.2f} s after the cancel"
    assert 5 <= run.sent < 30, run.sent
    assert service.status(alice, handle).status == "open"
    assert legacy_engine.committed_batches() == []


def test_the_same_key_or_import_during_a_background_run_answers_the_running_operation(
    service: ImportService, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle = staged(service, alice, 30)
    legacy_engine.update_faults(latency_ms=20)
    run = started(service, alice, handle, idempotency_key="k")

    same_key = service.start_commit(alice, handle, idempotency_key="k")
    same_import = service.start_commit(alice, handle)
    result = run.done.result(timeout=30)
    legacy_engine.update_faults(latency_ms=0)

    for repeat in (same_key, same_import):
        assert not isinstance(repeat, CommitRun), "never a second run"
        assert (repeat.status, repeat.operation_id, repeat.replayed) == (
            "in_progress",
            run.operation_id,
            True,
        )
    assert result.status == "committed"
    assert len(legacy_engine.committed_batches()) == 1


def test_a_stop_asked_through_the_row_reaches_a_run_of_another_process_with_its_lease_renewal(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    """Another worker's abort or tasks/cancel cannot signal this process's run: it writes the row,
    and the run's heartbeat brings it back (here every 0.3 s)."""
    ctx.commit_policy = dataclasses.replace(ctx.commit_policy, lease_seconds=0.9)
    handle = staged(service, alice, 80)
    legacy_engine.update_faults(latency_ms=50)
    run = started(service, alice, handle)
    wait_until(lambda: run.sent >= 5, what="the run to be under way")
    with ctx.store.unit_of_work() as uow:  # what request_stop on another worker writes
        uow.session.execute(
            update(OperationRow).where(OperationRow.id == run.operation_id).values(stop_requested="cancel")
        )
        uow.commit()
    result = run.done.result(timeout=30)
    legacy_engine.update_faults(latency_ms=0)

    assert result.status == "cancelled"
    assert run.sent < 80
    assert legacy_engine.committed_batches() == []


def test_the_heartbeat_writes_the_runs_progress_for_other_workers_to_read(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    ctx.commit_policy = dataclasses.replace(ctx.commit_policy, lease_seconds=0.9)
    handle = staged(service, alice, 60)
    legacy_engine.update_faults(latency_ms=50)
    run = started(service, alice, handle)

    def stored() -> int:
        with ctx.store.unit_of_work() as uow:
            row = uow.operations.get(run.operation_id)
            assert row is not None
            return row.records_sent or 0

    wait_until(lambda: stored() >= 10, what="a renewal to carry the progress")
    assert stored() <= run.sent
    run.done.result(timeout=30)
    legacy_engine.update_faults(latency_ms=0)


def test_a_run_that_ends_while_its_row_is_read_keeps_its_count(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    # The read saw the row still running (records_sent from the last renewal: none in a short run),
    # but the run ended and left the process before the view was made: the count it had stands.
    handle = staged(service, alice, 20)
    run = started(service, alice, handle)
    assert run.done.result(timeout=30).status == "committed" and local_run(run.operation_id) is None
    with ctx.store.reading() as uow:
        row = uow.operations.get(run.operation_id)
        assert row is not None and row.records_sent == 0
        as_read = OperationRow(**{c.key: getattr(row, c.key) for c in OperationRow.__table__.columns})
    as_read.status = "in_progress"

    assert to_operation_view(as_read, [], None, run).records_sent == 20


class _HeldCommit(ForwardingPort):
    """COMMIT waits for ``release`` (a legacy system slow to answer it)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.reached = threading.Event()
        self.release = threading.Event()

    def open_session(self) -> Any:
        port = self

        class Session(ForwardingSession):
            def commit(self) -> Any:
                port.reached.set()
                port.release.wait(timeout=30)
                return super().commit()

        return Session(self._inner.open_session())


def test_an_abort_after_commit_was_sent_waits_for_the_outcome_then_voids_the_batch(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    held = _HeldCommit(ctx.legacy)
    ctx.legacy = held
    handle = staged(service, alice, 5)
    run = started(service, alice, handle)
    assert held.reached.wait(timeout=10)

    early = service.abort(alice, handle, wait_seconds=0.2)  # COMMIT is out: it cannot be stopped
    held.release.set()
    run.done.result(timeout=30)
    wait_until(lambda: service.status(alice, handle).status == "compensated", what="the VOID")

    assert (early.status, early.abort_requested) == ("committing", True)
    [batch] = legacy_engine.committed_batches()
    assert batch["voided"], "the batch that landed although the owner aborted is voided"


def test_an_abort_a_crash_kept_from_its_void_is_finished_by_maintenance(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    """The commit landed with an abort asked, and the worker died before the follow-up VOID."""
    handle = staged(service, alice, 3)
    result = service.commit(alice, handle)
    with ctx.store.unit_of_work() as uow:
        uow.session.execute(
            update(OperationRow).where(OperationRow.id == result.operation_id).values(stop_requested="abort")
        )
        uow.commit()
    assert service.status(alice, handle).status == "committed"

    service.maintain()

    assert service.status(alice, handle).status == "compensated"
    [batch] = legacy_engine.committed_batches()
    assert batch["voided"]


def test_a_worker_shutting_down_hands_its_running_commit_to_the_next_one(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle = staged(service, alice, 60)
    legacy_engine.update_faults(latency_ms=50)
    run = started(service, alice, handle, idempotency_key="k")
    wait_until(lambda: run.sent >= 5, what="the run to be under way")

    assert service.hand_over(wait_seconds=10) == 1
    answered = run.done.result(timeout=1)
    with ctx.store.unit_of_work() as uow:
        row = uow.operations.get(run.operation_id)
        assert row is not None
        free, status = row.lease_owner is None, row.status
    legacy_engine.update_faults(latency_ms=0)
    next_worker = ImportService(dataclasses.replace(ctx, worker_id="the-next-worker"))
    [resolution] = next_worker.reconcile(wait=True)  # a free lease: taken over at once

    assert (answered.status, status, free) == ("in_progress", "in_progress", True)
    assert resolution.finding == "resumed"
    assert service.commit(alice, handle, idempotency_key="k").status == "committed"
    history = [h.event for h in service.operation_status(alice, operation_id=run.operation_id).history]
    assert "operation.handed_over" in history and "operation.resumed" in history
    [batch] = legacy_engine.committed_batches()
    assert batch["record_count"] == 60
