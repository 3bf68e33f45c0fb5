"""Begin, add, status and abort: handles, idempotency, limits and authorization."""

from __future__ import annotations

import dataclasses
import threading
from datetime import timedelta

import pytest
from freezegun import freeze_time

from adapter.domain.errors import (
    HandleExpired,
    HandleNotFound,
    IdempotencyKeyReused,
    InvalidRequest,
    InvalidState,
    LimitExceeded,
    OperationNotFound,
)
from adapter.domain.identity import HandleCodec, Principal
from adapter.domain.quotas import QuotaExceeded
from adapter.services import ImportService, ServiceContext
from adapter.store.reads import STATUS_OPERATIONS
from adapter.store.tables import ImportRow, utcnow
from legacy_sim.engine import LegacyEngine
from tests.support.imports import staged


@pytest.fixture
def handle(service: ImportService, alice: Principal) -> str:
    """Alice's open import with one staged record."""
    return staged(service, alice)


def test_begin_returns_an_opaque_unguessable_handle_bound_to_the_caller(
    service: ImportService, alice: Principal
) -> None:
    first = service.begin(alice, "customers")
    second = service.begin(alice, "customers")

    assert first.handle != second.handle
    assert first.import_id not in first.handle
    assert len(first.handle) >= 4 + 32  # prefix + 192 bits in base64url
    assert (first.status, first.record_count, first.replayed) == ("open", 0, False)


def test_the_store_keeps_only_a_digest_of_the_handle(
    service: ImportService, ctx: ServiceContext, alice: Principal
) -> None:
    handle = service.begin(alice, "customers").handle

    with ctx.store.unit_of_work() as uow:
        [row] = uow.session.query(ImportRow).all()
        stored = [str(getattr(row, column.key)) for column in ImportRow.__table__.columns]
        digest = row.handle_digest
    assert all(handle not in value for value in stored)
    assert digest == HandleCodec.digest(handle)


def test_begin_replayed_with_same_key_returns_the_same_handle(
    service: ImportService, alice: Principal
) -> None:
    first = service.begin(alice, "customers", idempotency_key="b1")
    again = service.begin(alice, "customers", idempotency_key="b1")

    assert again.handle == first.handle
    assert again.replayed and not first.replayed
    with pytest.raises(IdempotencyKeyReused):
        service.begin(alice, "suppliers", idempotency_key="b1")


def test_begin_stores_its_import_operation_and_events_together_or_not_at_all(
    service: ImportService, ctx: ServiceContext, alice: Principal
) -> None:
    opened = service.begin(alice, "customers", idempotency_key="b-1")
    with ctx.store.unit_of_work() as uow:
        [operation] = uow.operations.for_import(opened.import_id)
        events = [(e.kind, e.state, e.detail) for e in uow.events.for_operation(operation.id)]
        imported = uow.imports.get(opened.import_id)
        assert imported is not None
        assert (imported.state, imported.record_count, imported.staged_bytes) == ("open", 0, 0)
    assert (operation.kind, operation.status, operation.idempotency_key) == ("begin", "succeeded", "b-1")
    assert operation.result == {
        "import_id": opened.import_id,
        "target": "customers",
        "expires_at": opened.expires_at.isoformat(),
    }
    assert events == [
        ("import.opened", "open", {"ttl_seconds": ctx.default_ttl_seconds}),
        ("operation.succeeded", "succeeded", {"kind": "begin"}),
    ]

    ctx.quotas = dataclasses.replace(ctx.quotas, max_open_imports_per_principal=1)
    with pytest.raises(QuotaExceeded):  # refused after the import's INSERT: it is rolled back
        ImportService(ctx).begin(alice, "customers", idempotency_key="b-2")
    with ctx.store.unit_of_work() as uow:
        assert len(uow.imports.page({"principal": alice.subject}, as_of=utcnow(), before=None, limit=9)) == 1
        assert uow.operations.by_key(alice.tenant, alice.subject, "begin", "b-2") is None


def test_begin_and_add_store_utc_times_whatever_the_sessions_time_zone(
    ctx: ServiceContext, alice: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their operations and events are written as driver SQL (one statement each): an aware time
    bound there must not be cast to ``timestamp`` in the session's time zone."""
    if ctx.store.engine.dialect.name != "postgresql":
        pytest.skip("only a PostgreSQL session has a time zone")
    monkeypatch.setenv("PGTZ", "Asia/Tokyo")  # libpq: every new session starts at UTC+9
    ctx.store.engine.dispose()
    service = ImportService(ctx)
    before = utcnow() - timedelta(seconds=5)
    opened = service.begin(alice, "customers")
    service.add(alice, opened.handle, [{"n": 1}])
    after = utcnow() + timedelta(seconds=5)
    with ctx.store.unit_of_work() as uow:
        operations = uow.operations.for_import(opened.import_id)
        events = [event for op in operations for event in uow.events.for_operation(op.id)]
        times = [op.created_at for op in operations] + [op.updated_at for op in operations]
        times += [event.created_at for event in events]
    assert [op.kind for op in operations] == ["begin", "add"] and len(events) == 4
    assert all(before <= time <= after for time in times), times


def test_the_same_key_is_independent_per_principal(
    service: ImportService, alice: Principal, bob: Principal
) -> None:
    mine = service.begin(alice, "customers", idempotency_key="same")
    theirs = service.begin(bob, "customers", idempotency_key="same")

    assert mine.handle != theirs.handle
    assert not theirs.replayed


def test_add_stages_records_in_order_across_calls(
    service: ImportService, ctx: ServiceContext, alice: Principal
) -> None:
    handle = service.begin(alice, "customers").handle

    service.add(alice, handle, [{"n": 1}, {"n": 2}])
    result = service.add(alice, handle, [{"n": 3}])

    assert (result.accepted, result.record_count) == (1, 3)
    with ctx.store.unit_of_work() as uow:
        import_id = service.status(alice, handle).import_id
        staged = uow.records.chunk(import_id, 0, 10)
    assert [(seq, data) for seq, data in staged] == [(1, '{"n":1}'), (2, '{"n":2}'), (3, '{"n":3}')]


def test_status_shows_the_latest_operations_and_says_when_there_are_earlier_ones(
    service: ImportService, ctx: ServiceContext, alice: Principal
) -> None:
    handle = service.begin(alice, "customers").handle
    service.add(alice, handle, [{"n": 0}])
    few = service.status(alice, handle)
    for n in range(1, STATUS_OPERATIONS + 2):
        service.add(alice, handle, [{"n": n}])

    many = service.status(alice, handle)

    with ctx.store.unit_of_work() as uow:
        every = [op.id for op in uow.operations.for_import(many.import_id)]
    assert len(every) == STATUS_OPERATIONS + 3  # begin and the adds
    assert [o.kind for o in few.operations] == ["begin", "add"] and not few.earlier_operations
    assert [o.operation_id for o in many.operations] == every[-STATUS_OPERATIONS:]
    assert many.earlier_operations and many.record_count == STATUS_OPERATIONS + 2


def test_add_replayed_with_same_key_stages_once(service: ImportService, alice: Principal) -> None:
    handle = service.begin(alice, "customers").handle

    first = service.add(alice, handle, [{"n": 1}], idempotency_key="a1")
    again = service.add(alice, handle, [{"n": 1}], idempotency_key="a1")

    assert again.replayed and again.record_count == first.record_count == 1
    assert service.status(alice, handle).record_count == 1
    with pytest.raises(IdempotencyKeyReused):
        service.add(alice, handle, [{"n": 2}], idempotency_key="a1")


def test_concurrent_adds_to_one_import_keep_every_record_at_its_own_position(
    service: ImportService, ctx: ServiceContext, alice: Principal
) -> None:
    handle = service.begin(alice, "customers").handle
    errors: list[BaseException] = []

    def add(worker: int) -> None:
        try:
            for i in range(5):
                service.add(alice, handle, [{"worker": worker, "i": i}] * 3)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert service.status(alice, handle).record_count == 4 * 5 * 3
    with ctx.store.unit_of_work() as uow:
        staged = uow.records.chunk(service.status(alice, handle).import_id, 0, 1000)
    assert [seq for seq, _ in staged] == list(range(1, 61))


@pytest.mark.parametrize(
    ("records", "error"),
    [
        ([], InvalidRequest),
        ([1], InvalidRequest),
        ("not a list", InvalidRequest),
        ([{"x": float("nan")}], InvalidRequest),
        ([{"n": i} for i in range(1001)], LimitExceeded),
        ([{"blob": "x" * (64 * 1024)}], LimitExceeded),
    ],
)
def test_bad_records_are_refused_with_a_clear_error_and_nothing_staged(
    service: ImportService, alice: Principal, records: object, error: type[Exception]
) -> None:
    handle = service.begin(alice, "customers").handle

    with pytest.raises(error):
        service.add(alice, handle, records)  # type: ignore[arg-type]
    assert service.status(alice, handle).record_count == 0


def test_another_principals_handle_is_indistinguishable_from_an_unknown_one(
    service: ImportService, alice: Principal, bob: Principal, handle: str
) -> None:
    other_tenant = Principal(subject="alice", tenant="other")

    errors = []
    for who, attempt in [
        (bob, lambda p: service.status(p, handle)),
        (bob, lambda p: service.add(p, handle, [{"n": 2}])),
        (bob, lambda p: service.commit(p, handle)),
        (bob, lambda p: service.abort(p, handle)),
        (other_tenant, lambda p: service.status(p, handle)),
        (alice, lambda p: service.status(p, "imp_" + "A" * 32)),
        (alice, lambda p: service.status(p, "garbage")),
    ]:
        with pytest.raises(HandleNotFound) as caught:
            attempt(who)
        errors.append(str(caught.value))

    assert len(set(errors)) == 1
    assert service.status(alice, handle).record_count == 1


def test_expired_handle_is_refused_for_changes(service: ImportService, alice: Principal) -> None:
    with freeze_time("2026-03-01 08:00:00") as frozen:
        handle = service.begin(alice, "customers", ttl_seconds=30).handle
        service.add(alice, handle, [{"n": 1}])
        frozen.tick(timedelta(seconds=29))
        service.add(alice, handle, [{"n": 2}])
        frozen.tick(timedelta(seconds=2))

        with pytest.raises(HandleExpired):
            service.add(alice, handle, [{"n": 3}])
        view = service.status(alice, handle)
    assert (view.status, view.record_count) == ("expired", 2)


@pytest.mark.parametrize("ttl", [0, 5, 10**9, True, "60"])
def test_begin_refuses_a_ttl_out_of_bounds(service: ImportService, alice: Principal, ttl: object) -> None:
    with pytest.raises(InvalidRequest):
        service.begin(alice, "customers", ttl_seconds=ttl)  # type: ignore[arg-type]


@pytest.mark.parametrize("target", ["", "   ", "x" * 201])
def test_begin_refuses_a_bad_target(service: ImportService, alice: Principal, target: str) -> None:
    with pytest.raises(InvalidRequest):
        service.begin(alice, target)


def test_abort_of_an_open_import_drops_staged_records_and_is_repeatable(
    service: ImportService, ctx: ServiceContext, alice: Principal, handle: str
) -> None:
    assert service.abort(alice, handle).status == "aborted"
    assert service.abort(alice, handle).status == "aborted"
    with ctx.store.unit_of_work() as uow:
        assert uow.records.count(service.status(alice, handle).import_id) == 0
    with pytest.raises(InvalidState):
        service.add(alice, handle, [{"n": 2}])
    with pytest.raises(InvalidState):
        service.commit(alice, handle)


def test_abort_of_a_committed_import_voids_exactly_its_batch_once(
    service: ImportService, alice: Principal, legacy_engine: LegacyEngine, handle: str
) -> None:
    committed = service.commit(alice, handle)

    assert service.abort(alice, handle).status == "compensated"
    assert service.abort(alice, handle).status == "compensated"

    [batch] = legacy_engine.committed_batches()
    assert (batch["legacy_batch_id"], batch["voided"]) == (committed.legacy_batch_id, True)
    kinds = [op.kind for op in service.status(alice, handle).operations]
    assert kinds.count("compensate") == 1


def test_compensation_that_keeps_failing_stops_at_needs_operator(
    service: ImportService, alice: Principal, legacy_engine: LegacyEngine, handle: str
) -> None:
    service.commit(alice, handle)
    legacy_engine.update_faults(error_rate=1.0)

    assert service.abort(alice, handle).status == "compensating"

    view = service.status(alice, handle)
    [compensation] = [op for op in view.operations if op.kind == "compensate"]
    operation = service.operation_status(alice, operation_id=compensation.operation_id)
    assert operation.status == "needs_operator"
    assert operation.error and "VOID" in operation.error["reason"]
    # Resumable: once the legacy system recovers, the same abort finishes the compensation.
    legacy_engine.update_faults(error_rate=0.0)
    assert service.abort(alice, handle).status == "compensated"
    assert legacy_engine.committed_batches()[0]["voided"] is True


def test_operation_status_by_id_and_key_only_for_its_owner(
    service: ImportService, alice: Principal, bob: Principal, handle: str
) -> None:
    committed = service.commit(alice, handle, idempotency_key="ck")

    by_id = service.operation_status(alice, operation_id=committed.operation_id)
    by_key = service.operation_status(alice, idempotency_key="ck")

    assert by_id.operation_id == by_key.operation_id == committed.operation_id
    assert (by_id.kind, by_id.status) == ("commit", "succeeded")
    assert by_id.result == {"legacy_batch_id": committed.legacy_batch_id, "record_count": 1}
    points = [e.detail["point"] for e in by_id.history if e.event == "operation.recovery_point"]
    assert points == ["replaying", "commit_sent"]
    with pytest.raises(OperationNotFound):
        service.operation_status(bob, operation_id=committed.operation_id)
    with pytest.raises(OperationNotFound):
        service.operation_status(bob, idempotency_key="ck")
    with pytest.raises(InvalidRequest):
        service.operation_status(alice)


def test_operation_status_by_key_answers_the_newest_of_its_kinds(
    service: ImportService, alice: Principal
) -> None:
    """A key is unique per kind, so one key may name a begin and then its commit: by key, the
    newest of them (one lookup per kind, ``OperationRepository.latest_by_key``)."""
    handle = service.begin(alice, "customers", idempotency_key="both").handle
    assert service.operation_status(alice, idempotency_key="both").kind == "begin"
    service.add(alice, handle, [{"email": "a@example.com", "name": "A"}])

    committed = service.commit(alice, handle, idempotency_key="both")

    by_key = service.operation_status(alice, idempotency_key="both")
    assert (by_key.kind, by_key.operation_id) == ("commit", committed.operation_id)


def test_the_same_key_is_independent_per_tenant(service: ImportService, alice: Principal) -> None:
    namesake = Principal(subject=alice.subject, tenant="globex")

    mine = service.begin(alice, "customers", idempotency_key="shared")
    theirs = service.begin(namesake, "customers", idempotency_key="shared")

    assert mine.handle != theirs.handle
    assert not theirs.replayed
