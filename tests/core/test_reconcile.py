"""Reconciliation, leases, compensation and retention, against the simulator over TCP."""

from __future__ import annotations

import dataclasses
import threading
from datetime import timedelta
from typing import Any

import pytest
from freezegun import freeze_time
from sqlalchemy import text

from adapter.domain.errors import HandleExpired
from adapter.domain.identity import Principal, fingerprint
from adapter.domain.states import ImportState, OperationState
from adapter.domain.vocabulary import RecoveryPoint
from adapter.legacy.simulator import SimulatorPort
from adapter.services import ImportService, ServiceContext
from adapter.services import abort as abort_flow
from adapter.services.admin import act
from adapter.services.commit import bookkeeping, finish
from adapter.services.commit import claim as claiming
from legacy_sim.engine import LegacyEngine
from tests.support.imports import records, staged
from tests.support.wait import wait_until


def use_policy(ctx: ServiceContext, **changes: Any) -> None:
    ctx.commit_policy = dataclasses.replace(ctx.commit_policy, **changes)


def events(ctx: ServiceContext, operation_id: str, kind: str) -> list[Any]:
    with ctx.store.unit_of_work() as uow:
        return [e for e in uow.events.for_operation(operation_id) if e.kind == kind]


def test_drop_after_commit_is_reconciled_to_committed_with_one_batch(
    service: ImportService, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle = staged(service, alice, 5)
    legacy_engine.update_faults(drop_after_commit=1.0)
    unknown = service.commit(alice, handle, idempotency_key="c1")
    legacy_engine.update_faults(drop_after_commit=0.0)
    assert unknown.status == "outcome_unknown"

    [resolution] = service.reconcile()

    assert (resolution.previous, resolution.status, resolution.finding) == (
        "outcome_unknown",
        "succeeded",
        "committed",
    )
    [batch] = legacy_engine.committed_batches()
    view = service.status(alice, handle)
    assert (view.status, view.legacy_batch_id) == ("committed", batch["legacy_batch_id"])
    again = service.commit(alice, handle, idempotency_key="c1")
    assert (again.status, again.legacy_batch_id, again.replayed) == (
        "committed",
        batch["legacy_batch_id"],
        True,
    )
    operation = service.operation_status(alice, operation_id=unknown.operation_id)
    assert [e.detail["finding"] for e in operation.history if e.event == "operation.reconciled"] == [
        "committed"
    ]
    assert service.reconcile() == []
    assert len(legacy_engine.committed_batches()) == 1


def test_a_slow_commit_is_not_believed_lost_before_the_grace_period(
    service: ImportService,
    ctx: ServiceContext,
    alice: Principal,
    legacy_engine: LegacyEngine,
    legacy_address: tuple[str, int],
) -> None:
    """A COMMIT whose reply timed out may still land: "not committed" is believed only later."""
    ctx.legacy = SimulatorPort.tcp(*legacy_address, timeout=0.3)
    use_policy(ctx, unknown_grace_seconds=30.0)
    handle = staged(service, alice, 3)

    def slow_down_commit(sent: int, total: int) -> None:
        if sent == total:
            legacy_engine.update_faults(latency_ms=800)

    unknown = service.commit(alice, handle, progress=slow_down_commit)
    assert unknown.status == "outcome_unknown"
    assert service.reconcile() == []  # too early: the legacy system has not answered "committed" yet
    assert service.status(alice, handle).status == "outcome_unknown"

    legacy_engine.update_faults(latency_ms=0)
    wait_until(legacy_engine.committed_batches, what="the slow COMMIT to land")
    [resolution] = service.reconcile()
    assert resolution.status == "succeeded"
    assert len(legacy_engine.committed_batches()) == 1


def crash_during_replay(ctx: ServiceContext, who: Principal, handle: str, key: str | None = None) -> str:
    """Leave what a worker killed in the middle of its replay leaves: a claimed operation, no COMMIT."""
    return claim_during_replay(ctx, who, handle, key).operation_id


def claim_during_replay(
    ctx: ServiceContext, who: Principal, handle: str, key: str | None = None
) -> bookkeeping.Claim:
    claim = claiming.claim_import(
        ctx,
        who,
        handle,
        key,
        fingerprint("commit", {"handle": ctx.codec.digest(handle)}),
    )
    assert isinstance(claim, bookkeeping.Claim)
    bookkeeping.set_recovery_point(ctx, claim, RecoveryPoint.REPLAYING, attempt=True)
    return claim


def crash_and_reconcile(
    service: ImportService, ctx: ServiceContext, who: Principal, key: str | None = None
) -> tuple[str, str, list[Any]]:
    """An import of 5 records whose worker dies with COMMIT sent and no reply; once its lease and the
    grace period have run out, the reconciler finds no batch: (handle, operation id, resolutions)."""
    handle = staged(service, who, 5)
    with freeze_time(ctx.clock()) as frozen:
        claim = claim_during_replay(ctx, who, handle, key=key)
        bookkeeping.set_recovery_point(ctx, claim, RecoveryPoint.COMMIT_SENT)  # then the worker died
        policy = ctx.commit_policy
        frozen.tick(timedelta(seconds=max(policy.lease_seconds, policy.unknown_grace_seconds) + 1))
        return handle, claim.operation_id, service.reconcile()


def test_a_crash_before_commit_is_resumed_and_commits_once(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    """The worker died mid-replay: its lease runs out and a reconciler runs the commit again (the
    server owes it to a caller who may have been told in_progress), in a new legacy session."""
    handle = staged(service, alice, 5)
    with freeze_time(ctx.clock()) as frozen:
        operation_id = crash_during_replay(ctx, alice, handle, key="k")
        assert service.reconcile() == []  # the lease is still held: the worker may be alive
        frozen.tick(timedelta(seconds=ctx.commit_policy.lease_seconds + 1))

        [resolution] = service.reconcile(wait=True)

    assert (resolution.previous, resolution.finding) == ("in_progress", "resumed")
    operation = service.operation_status(alice, operation_id=operation_id)
    assert operation.status == "succeeded"
    assert "operation.resumed" in [entry.event for entry in operation.history]
    assert service.status(alice, handle).status == "committed"
    again = service.commit(alice, handle, idempotency_key="k")
    assert (again.status, again.operation_id, again.replayed) == ("committed", operation_id, True)
    [batch] = legacy_engine.committed_batches()
    assert batch["record_count"] == 5


def test_a_commit_sent_without_a_reply_is_judged_not_committed_after_the_grace_period(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle, operation_id, [resolution] = crash_and_reconcile(service, ctx, alice, key="k")

    assert (resolution.previous, resolution.status, resolution.finding) == (
        "in_progress",
        "failed",
        "not_committed",
    )
    assert service.status(alice, handle).status == "open"
    retried = service.commit(alice, handle, idempotency_key="k")
    assert (retried.status, retried.operation_id) == ("committed", operation_id)
    assert service.commit(alice, handle).status == "committed"
    assert len(legacy_engine.committed_batches()) == 1


def test_a_retried_operation_asks_before_committing_again(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    """If a 'failed' commit did land after all, the retry adopts its batch instead of making a second."""
    handle, operation_id, _ = crash_and_reconcile(service, ctx, alice, key="k")
    # The batch lands late under the operation's reference (a COMMIT the crashed worker had queued).
    late = legacy_engine.commit_batch(claiming.batch_ref_for(operation_id), records(5))

    retried = service.commit(alice, handle, idempotency_key="k")

    assert (retried.status, retried.legacy_batch_id) == ("committed", late["legacy_batch_id"])
    assert len(legacy_engine.committed_batches()) == 1


def test_two_reconcilers_at_once_act_once(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle = staged(service, alice, 5)
    legacy_engine.update_faults(drop_after_commit=1.0)
    unknown = service.commit(alice, handle)
    legacy_engine.update_faults(drop_after_commit=0.0, latency_ms=50)
    other = ImportService(dataclasses.replace(ctx, worker_id="second-worker"))
    results: list[Any] = []
    barrier = threading.Barrier(2)

    def run(svc: ImportService) -> None:
        barrier.wait()
        results.append(svc.reconcile())

    threads = [threading.Thread(target=run, args=(svc,)) for svc in (service, other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(len(r) for r in results) == [0, 1]
    assert len(events(ctx, unknown.operation_id, "operation.reconciled")) == 1
    assert service.status(alice, handle).status == "committed"


def test_a_commit_does_not_send_commit_after_losing_its_lease(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle = staged(service, alice, 3)
    stolen = []

    def steal_lease(sent: int, total: int) -> None:
        with ctx.store.unit_of_work() as uow:
            operation = uow.operations.latest_commit(service.status(alice, handle).import_id)
            operation.lease_owner = "someone-else"
            uow.commit()
        stolen.append(True)

    result = service.commit(alice, handle, progress=steal_lease)

    assert stolen and result.status == "in_progress"
    assert legacy_engine.committed_batches() == []


def test_compensation_resumes_after_an_interruption(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    """A crash between writing the compensation record and the VOID leaves it compensating."""
    handle = staged(service, alice, 5)
    service.commit(alice, handle)
    import_id = service.status(alice, handle).import_id
    abort_flow._start(ctx, import_id, "aborted by its owner", alice)  # the first of the two steps
    assert service.status(alice, handle).status == "compensating"

    with freeze_time(ctx.clock() + timedelta(minutes=5)):
        report = service.maintain()

    assert report.compensations == ["compensated"]
    assert legacy_engine.committed_batches()[0]["voided"] is True


def test_expired_open_imports_are_closed_and_their_records_dropped(
    service: ImportService, ctx: ServiceContext, alice: Principal
) -> None:
    with freeze_time("2026-06-01 09:00:00") as frozen:
        handle = service.begin(alice, "customers", ttl_seconds=60).handle
        service.add(alice, handle, records(4))
        other = service.begin(alice, "suppliers", ttl_seconds=60).handle
        frozen.tick(timedelta(seconds=61))
        service.begin(alice, "fresh")  # not expired: untouched

        report = service.maintain()

        assert report.expired == 2
        view = service.status(alice, handle)
        assert view.status == "expired"
        with ctx.store.unit_of_work() as uow:
            assert uow.records.count(view.import_id) == 0
        with pytest.raises(HandleExpired):
            service.add(alice, other, records(1))


def test_finished_records_are_purged_after_retention_and_unfinished_ones_kept(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    with freeze_time("2026-06-01 09:00:00") as frozen:
        done = staged(service, alice, 5)
        service.commit(alice, done, idempotency_key="old")
        unknown = staged(service, alice, 5)
        legacy_engine.update_faults(drop_after_commit=1.0)
        pending = service.commit(alice, unknown)
        legacy_engine.update_faults(drop_after_commit=0.0)
        frozen.tick(timedelta(days=8))
        legacy_engine.update_faults(error_rate=1.0)  # the unknown outcome cannot be resolved today

        report = service.maintain(retention=timedelta(days=7), purge_batch=2)
        legacy_engine.update_faults(error_rate=0.0)

        assert report.purged is not None and report.purged.operations >= 3
        assert report.purged.staged_records == 5
        # The key's record is gone, so the key could be used again; the unfinished one stays.
        with ctx.store.unit_of_work() as uow:
            assert uow.operations.get(pending.operation_id) is not None
            assert uow.operations.by_key(alice.tenant, alice.subject, "commit", "old") is None
            # No foreign key guards staged records (migration 0006): none may outlive its import.
            orphans = uow.session.scalar(
                text(
                    "SELECT count(*) FROM staged_chunks s"
                    " WHERE NOT EXISTS (SELECT 1 FROM imports i WHERE i.id = s.import_id)"
                )
            )
            assert orphans == 0


def test_a_resolved_operation_is_purged_after_retention_and_one_still_needing_an_operator_kept(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    """``resolved`` is final (an operator closed it; the audit record keeps why), so retention purges
    it like any finished operation; ``needs_operator`` waits for a person however old it is."""
    with freeze_time("2026-06-01 09:00:00") as frozen:
        stuck = []
        for key in ("first", "second"):  # a retry finds the old COMMIT landed with other records
            handle, operation_id, _ = crash_and_reconcile(service, ctx, alice, key=key)
            service.add(alice, handle, records(2))
            legacy_engine.commit_batch(claiming.batch_ref_for(operation_id), records(5))
            service.commit(alice, handle, idempotency_key=key)
            assert service.operation_status(alice, operation_id=operation_id).status == "needs_operator"
            stuck.append(operation_id)
        resolved = act(ctx, stuck[0], "resolve", actor="ops", reason="checked by hand")
        assert resolved.status == "resolved"
        frozen.tick(timedelta(days=8))

        service.maintain(retention=timedelta(days=7))

    with ctx.store.reading() as uow:
        assert uow.operations.get(stuck[0]) is None
        assert uow.operations.get(stuck[1]) is not None


def test_a_commit_that_lands_after_being_reconciled_as_not_committed_is_recorded_as_committed(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    """The worker lost its lease, the reconciler saw no batch yet, then the worker's COMMIT landed."""
    handle, operation_id, [resolution] = crash_and_reconcile(service, ctx, alice)
    assert (resolution.status, service.status(alice, handle).status) == ("failed", "open")
    late = legacy_engine.commit_batch(claiming.batch_ref_for(operation_id), records(5))
    claim = bookkeeping.Claim(
        handle,
        operation_id,
        service.status(alice, handle).import_id,
        claiming.batch_ref_for(operation_id),
        5,
        lease_owner="the-worker-that-lost-its-lease",
    )

    answer = finish.finish(
        ctx,
        claim,
        finish.Outcome(
            OperationState.SUCCEEDED,
            ImportState.COMMITTED,
            RecoveryPoint.COMMITTED,
            result={"legacy_batch_id": late["legacy_batch_id"], "record_count": 5},
            legacy_batch_id=late["legacy_batch_id"],
        ),
    )

    assert (answer.status, answer.legacy_batch_id) == ("committed", late["legacy_batch_id"])
    view = service.status(alice, handle)
    assert (view.status, view.legacy_batch_id) == ("committed", late["legacy_batch_id"])
    assert service.commit(alice, handle).legacy_batch_id == late["legacy_batch_id"]
    assert len(legacy_engine.committed_batches()) == 1


def test_a_retry_that_finds_a_batch_of_other_records_stops_for_an_operator(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle, operation_id, _ = crash_and_reconcile(service, ctx, alice, key="k")
    service.add(alice, handle, records(2))  # open again, so more records may come
    legacy_engine.commit_batch(claiming.batch_ref_for(operation_id), records(5))  # the old COMMIT landed

    retried = service.commit(alice, handle, idempotency_key="k")

    operation = service.operation_status(alice, operation_id=operation_id)
    assert (operation.status, operation.error["code"]) == (
        "needs_operator",
        "committed_with_wrong_record_count",
    )
    assert retried.status == "outcome_unknown"
    assert service.status(alice, handle).status == "committed"
    assert len(legacy_engine.committed_batches()) == 1
