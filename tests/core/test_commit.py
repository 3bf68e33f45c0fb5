"""The commit flow against the simulator over TCP, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from adapter.domain.confirmation import NOTHING_CONFIRMED, CommitSubject
from adapter.domain.errors import ConfirmationStale, HandleExpired, IdempotencyKeyReused, InvalidState
from adapter.domain.identity import Principal
from adapter.services import CancelToken, CommitPolicy, ImportService, ServiceContext
from adapter.services.commit.confirmation import commit_subject
from legacy_sim.engine import LegacyEngine
from tests.support.imports import staged


def make_records(n: int) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"customer {i}"} for i in range(n)]


def batches(engine: LegacyEngine) -> list[dict[str, Any]]:
    return engine.committed_batches()


def test_commit_lands_exactly_the_staged_records_in_order_in_one_batch(
    service: ImportService, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    records = make_records(1234)
    handle = staged(service, alice, records)

    result = service.commit(alice, handle)

    assert result.status == "committed"
    assert result.record_count == 1234
    assert not result.replayed
    [batch] = batches(legacy_engine)
    assert batch["legacy_batch_id"] == result.legacy_batch_id
    assert batch["records"] == records
    assert service.status(alice, handle).status == "committed"


def test_commit_retried_with_same_key_returns_first_result_and_one_batch(
    service: ImportService, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle = staged(service, alice, make_records(10))

    first = service.commit(alice, handle, idempotency_key="commit-1")
    second = service.commit(alice, handle, idempotency_key="commit-1")

    assert second.replayed and not first.replayed
    assert (second.status, second.operation_id, second.legacy_batch_id) == (
        first.status,
        first.operation_id,
        first.legacy_batch_id,
    )
    assert len(batches(legacy_engine)) == 1


def test_second_commit_of_a_committed_handle_answers_the_recorded_result(
    service: ImportService, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle = staged(service, alice, make_records(3))
    first = service.commit(alice, handle)

    again = service.commit(alice, handle)

    assert again.replayed
    assert again.legacy_batch_id == first.legacy_batch_id
    assert len(batches(legacy_engine)) == 1


def test_commit_key_reused_for_another_import_is_refused(service: ImportService, alice: Principal) -> None:
    first = staged(service, alice, make_records(2))
    other = staged(service, alice, make_records(2))
    service.commit(alice, first, idempotency_key="k")

    with pytest.raises(IdempotencyKeyReused):
        service.commit(alice, other, idempotency_key="k")
    assert service.status(alice, other).status == "open"


def test_drop_after_commit_gives_outcome_unknown_never_failed(
    service: ImportService, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle = staged(service, alice, make_records(5))
    legacy_engine.update_faults(drop_after_commit=1.0)

    result = service.commit(alice, handle, idempotency_key="c")

    assert result.status == "outcome_unknown"
    assert result.legacy_batch_id is None
    operation = service.operation_status(alice, operation_id=result.operation_id)
    assert (operation.status, operation.recovery_point) == ("outcome_unknown", "commit_sent")
    assert service.status(alice, handle).status == "outcome_unknown"
    # The commit did land: only asking the legacy system (reconciliation) can know that.
    assert len(batches(legacy_engine)) == 1
    # A retry with the same key does not send COMMIT again.
    legacy_engine.update_faults(drop_after_commit=0.0)
    assert service.commit(alice, handle, idempotency_key="c").status == "outcome_unknown"
    assert service.commit(alice, handle).status == "outcome_unknown"
    assert len(batches(legacy_engine)) == 1


def test_cancellation_before_commit_leaves_no_legacy_batch(
    service: ImportService, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle = staged(service, alice, make_records(1200))
    token = CancelToken()

    def cancel_midway(sent: int, total: int) -> None:
        if sent >= 500:
            token.cancel()

    result = service.commit(alice, handle, progress=cancel_midway, cancel=token)

    assert result.status == "cancelled"
    assert batches(legacy_engine) == []
    assert service.status(alice, handle).status == "open"
    operation = service.operation_status(alice, operation_id=result.operation_id)
    assert operation.recovery_point == "cancelled_before_commit"
    # The import stays usable: a new commit lands one complete batch.
    assert service.commit(alice, handle).status == "committed"
    [batch] = batches(legacy_engine)
    assert batch["record_count"] == 1200


def test_cancelled_commit_retried_with_same_key_commits_once(
    service: ImportService, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle = staged(service, alice, make_records(20))
    token = CancelToken()
    token.cancel()
    cancelled = service.commit(alice, handle, idempotency_key="k", cancel=token)

    retried = service.commit(alice, handle, idempotency_key="k")

    assert cancelled.status == "cancelled"
    assert retried.status == "committed"
    assert retried.operation_id == cancelled.operation_id
    assert len(batches(legacy_engine)) == 1


def test_two_concurrent_commits_of_one_handle_produce_one_batch(
    service: ImportService, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle = staged(service, alice, make_records(300))
    legacy_engine.update_faults(latency_ms=5)
    results = []
    barrier = threading.Barrier(2)

    def commit() -> None:
        barrier.wait()
        results.append(service.commit(alice, handle))

    threads = [threading.Thread(target=commit) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(r.status for r in results) == ["committed", "in_progress"]
    assert len(batches(legacy_engine)) == 1
    assert service.commit(alice, handle).status == "committed"


def test_same_key_while_first_commit_runs_answers_in_progress(
    service: ImportService, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle = staged(service, alice, make_records(50))
    legacy_engine.update_faults(latency_ms=20)
    answers = []

    def on_progress(sent: int, total: int) -> None:
        if not answers:
            answers.append(service.commit(alice, handle, idempotency_key="same"))

    service.commit(alice, handle, idempotency_key="same", progress=on_progress)

    assert answers[0].status == "in_progress"
    assert len(batches(legacy_engine)) == 1


def test_transient_errors_are_retried_without_doubling(
    service: ImportService, ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    records = make_records(40)
    handle = staged(service, alice, records)
    ctx.commit_policy = CommitPolicy(
        chunk_size=10, max_attempts=30, retry_wait_initial=0.001, retry_wait_max=0.005
    )
    legacy_engine.update_faults(error_rate=0.05, seed=7)

    result = service.commit(alice, handle)

    legacy_engine.update_faults(error_rate=0.0)
    assert result.status == "committed"
    [batch] = batches(legacy_engine)
    assert batch["records"] == records
    operation = service.operation_status(alice, operation_id=result.operation_id)
    assert operation.attempts > 1
    assert any(entry.event == "operation.attempt_failed" for entry in operation.history)


def test_legacy_unavailable_fails_honestly_with_nothing_committed(
    service: ImportService, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle = staged(service, alice, make_records(5))
    legacy_engine.update_faults(error_rate=1.0)

    result = service.commit(alice, handle)

    legacy_engine.update_faults(error_rate=0.0)
    assert (result.status, result.error) == ("failed", "legacy_unavailable")
    assert batches(legacy_engine) == []
    assert service.status(alice, handle).status == "open"
    assert service.commit(alice, handle).status == "committed"


def test_progress_is_reported_in_increasing_steps_up_to_the_total(
    service: ImportService, alice: Principal
) -> None:
    handle = staged(service, alice, make_records(1100))
    seen: list[tuple[int, int]] = []

    service.commit(alice, handle, progress=lambda sent, total: seen.append((sent, total)))

    assert [sent for sent, _ in seen] == sorted({sent for sent, _ in seen})
    assert seen[-1] == (1100, 1100)
    assert len(seen) >= 3


def test_expired_handle_cannot_be_committed(service: ImportService, alice: Principal) -> None:
    from datetime import timedelta

    from freezegun import freeze_time

    with freeze_time("2026-01-01 12:00:00") as frozen:
        handle = service.begin(alice, "customers", ttl_seconds=60).handle
        service.add(alice, handle, make_records(2))
        frozen.tick(timedelta(seconds=61))
        with pytest.raises(HandleExpired):
            service.commit(alice, handle)
        assert service.status(alice, handle).status == "expired"


def test_an_empty_import_cannot_be_committed(service: ImportService, alice: Principal) -> None:
    handle = service.begin(alice, "customers").handle
    with pytest.raises(InvalidState):
        service.commit(alice, handle)


# --- what a person confirmed: ``expect`` ---------------------------------------------------------------


def test_a_commit_expecting_what_was_confirmed_starts_only_while_the_import_still_is_that(
    service: ImportService, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    handle = staged(service, alice, make_records(3))
    shown = commit_subject(service.ctx, alice, handle)
    assert shown is not None and shown.record_count == 3
    service.add(alice, handle, make_records(1))

    with pytest.raises(ConfirmationStale) as stale:
        service.commit(alice, handle, expect=shown)

    assert stale.value.current == CommitSubject(shown.import_id, shown.target, 4)
    view = service.status(alice, handle)
    assert (view.status, view.record_count) == ("open", 4)
    assert [o for o in view.operations if o.kind == "commit"] == []
    assert batches(legacy_engine) == []
    assert service.commit(alice, handle, expect=stale.value.current).status == "committed"
    [batch] = batches(legacy_engine)
    assert batch["record_count"] == 4


def test_nothing_confirmed_answers_a_replay_or_refuses_but_never_starts_a_commit(
    service: ImportService, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    """A question was due but the import had nothing to ask about; if it became committable since
    (records arrived, a commit in flight gave it back), the commit must not start unasked."""
    empty = service.begin(alice, "customers").handle
    with pytest.raises(InvalidState):
        service.commit(alice, empty, expect=NOTHING_CONFIRMED)
    service.add(alice, empty, make_records(2))  # records arrived after the import was read
    with pytest.raises(ConfirmationStale) as stale:
        service.commit(alice, empty, expect=NOTHING_CONFIRMED)
    assert stale.value.current == commit_subject(service.ctx, alice, empty)
    assert [o for o in service.status(alice, empty).operations if o.kind == "commit"] == []
    assert batches(legacy_engine) == []

    done = staged(service, alice, make_records(2))
    first = service.commit(alice, done)
    again = service.commit(alice, done, expect=NOTHING_CONFIRMED)
    assert (again.status, again.operation_id, again.replayed) == ("committed", first.operation_id, True)
    assert len(batches(legacy_engine)) == 1
