"""Quotas and fairness, on SQLite and PostgreSQL with the simulator over TCP: each refuses new work
with quota_exceeded naming its setting, and never fails what was already accepted."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event

from adapter.domain.errors import IdempotencyKeyReused
from adapter.domain.identity import Principal
from adapter.domain.quotas import QuotaExceeded
from adapter.services import ImportService, ServiceContext
from legacy_sim.engine import LegacyEngine


def with_quotas(ctx: ServiceContext, **changes: Any) -> ImportService:
    ctx.quotas = dataclasses.replace(ctx.quotas, **changes)
    return ImportService(ctx)


def staged_rows(service: ImportService, import_id: str) -> int:
    """How many records the store holds for the import (in its chunks)."""
    with service.ctx.store.unit_of_work() as uow:
        return uow.records.count(import_id)


@contextlib.contextmanager
def deleted_ranges(ctx: ServiceContext) -> Iterator[list[tuple[int, int]]]:
    """The position range ``(after, up_to]`` of each delete of staged chunks while the block runs."""
    ranges: list[tuple[int, int]] = []

    def after(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE FROM STAGED_CHUNKS"):
            values = parameters.values() if isinstance(parameters, dict) else parameters
            low, high = [v for v in values if type(v) is int][:2]  # the WHERE's, before RETURNING's
            ranges.append((low, high))

    event.listen(ctx.store.engine, "after_cursor_execute", after)
    try:
        yield ranges
    finally:
        event.remove(ctx.store.engine, "after_cursor_execute", after)


def test_records_per_import(ctx: ServiceContext, alice: Principal) -> None:
    service = with_quotas(ctx, max_records_per_import=5)
    handle = service.begin(alice, "customers").handle
    service.add(alice, handle, [{"n": i} for i in range(4)])
    with pytest.raises(QuotaExceeded, match="ADAPTER_MAX_RECORDS_PER_IMPORT=5") as refused:
        service.add(alice, handle, [{"n": 4}, {"n": 5}])
    assert refused.value.code == "quota_exceeded"
    assert service.status(alice, handle).record_count == 4  # nothing of the refused call, all of before
    assert service.add(alice, handle, [{"n": 4}]).record_count == 5
    assert service.commit(alice, handle).status == "committed"


def test_bytes_per_import(ctx: ServiceContext, alice: Principal) -> None:
    service = with_quotas(ctx, max_import_bytes=1000)
    handle = service.begin(alice, "customers").handle
    service.add(alice, handle, [{"blob": "x" * 400}])
    with pytest.raises(QuotaExceeded, match="ADAPTER_MAX_IMPORT_BYTES=1000"):
        service.add(alice, handle, [{"blob": "y" * 700}])
    assert service.status(alice, handle).record_count == 1


def test_open_imports_per_principal(ctx: ServiceContext, alice: Principal, bob: Principal) -> None:
    service = with_quotas(ctx, max_open_imports_per_principal=2)
    first = service.begin(alice, "a", idempotency_key="k1")
    service.begin(alice, "b")
    with pytest.raises(QuotaExceeded, match="ADAPTER_MAX_OPEN_IMPORTS_PER_PRINCIPAL=2"):
        service.begin(alice, "c")
    assert service.begin(alice, "a", idempotency_key="k1").replayed  # a replay is not new work
    assert service.begin(bob, "b").status == "open"  # another principal has its own share
    service.abort(alice, first.handle)
    assert service.begin(alice, "c").status == "open"


def test_staged_bytes_per_tenant(ctx: ServiceContext, alice: Principal, bob: Principal) -> None:
    service = with_quotas(ctx, max_staged_bytes_per_tenant=2000)
    mine = service.begin(alice, "a").handle
    theirs = service.begin(bob, "b").handle  # same tenant (acme)
    service.add(alice, mine, [{"blob": "x" * 900}])
    service.add(bob, theirs, [{"blob": "x" * 900}])
    with pytest.raises(QuotaExceeded, match="ADAPTER_MAX_STAGED_BYTES_PER_TENANT=2000"):
        service.add(bob, theirs, [{"blob": "x" * 300}])
    # A commit does not free the tenant's share: the committed records stay staged until the purge,
    # so staging, committing and staging again cannot fill the disk.
    assert service.commit(alice, mine).status == "committed"
    with pytest.raises(QuotaExceeded, match="ADAPTER_MAX_STAGED_BYTES_PER_TENANT=2000"):
        service.add(bob, theirs, [{"blob": "x" * 300}])
    service.maintain(retention=timedelta(0))  # the purge, once the retention period is over
    assert service.add(bob, theirs, [{"blob": "x" * 300}]).record_count == 2


def test_records_purged_from_a_kept_import_stop_counting(
    ctx: ServiceContext, alice: Principal, bob: Principal
) -> None:
    """A committed import whose records the purge removed, while the import itself must stay (its
    commit still needs an operator, say), holds nothing against its tenant any more."""
    service = with_quotas(ctx, max_staged_bytes_per_tenant=2000)
    mine = service.begin(alice, "a").handle
    service.add(alice, mine, [{"blob": "x" * 1500}])
    assert service.commit(alice, mine).status == "committed"
    theirs = service.begin(bob, "b").handle
    with pytest.raises(QuotaExceeded):
        service.add(bob, theirs, [{"blob": "x" * 900}])
    cutoff = ctx.clock() + timedelta(seconds=1)
    with ctx.store.unit_of_work() as uow:
        assert uow.retention.purge_staged_records("committed", cutoff, 100) == 1
        uow.commit()
    assert service.status(alice, mine).status == "committed"  # the import is still there
    assert service.add(bob, theirs, [{"blob": "x" * 900}]).record_count == 1


def test_concurrent_commits_per_tenant_are_refused_not_queued(
    ctx: ServiceContext, alice: Principal, bob: Principal, legacy_engine: LegacyEngine
) -> None:
    service = with_quotas(ctx, max_commits_per_tenant=1)
    slow = service.begin(alice, "a").handle
    service.add(alice, slow, [{"n": 1}])
    other = service.begin(bob, "b").handle
    service.add(bob, other, [{"n": 1}])
    legacy_engine.update_faults(latency_ms=400)  # each legacy command takes 0.4 s
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(service.commit(alice, slow)))
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while service.commit_slots.held("acme") == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(QuotaExceeded, match="ADAPTER_MAX_COMMITS_PER_TENANT=1"):
            service.commit(bob, other)
        assert service.status(bob, other).status == "open"  # refused before anything changed
    finally:
        worker.join(30)
        legacy_engine.update_faults(latency_ms=0)
    assert results[0].status == "committed"
    assert service.commit(bob, other).status == "committed"
    assert service.commit_slots.held("acme") == 0


def test_a_repeat_of_a_running_commit_is_answered_even_when_every_slot_is_taken(
    ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    service = with_quotas(ctx, legacy_sessions=1, max_commits_per_tenant=1)
    handle = service.begin(alice, "a").handle
    service.add(alice, handle, [{"n": 1}])
    legacy_engine.update_faults(latency_ms=400)
    results: list[Any] = []
    worker = threading.Thread(
        target=lambda: results.append(service.commit(alice, handle, idempotency_key="k1"))
    )
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while service.status(alice, handle).status != "committing" and time.monotonic() < deadline:
            time.sleep(0.01)
        repeat = service.commit(alice, handle, idempotency_key="k1")  # the same request again
        assert repeat.status == "in_progress"
        other = service.begin(alice, "b").handle
        service.add(alice, other, [{"n": 1}])
        with pytest.raises(QuotaExceeded):  # a commit that would start still needs a slot
            service.commit(alice, other)
        assert service.status(alice, other).status == "open"
    finally:
        worker.join(30)
        legacy_engine.update_faults(latency_ms=0)
    assert results[0].status == "committed"
    assert repeat.operation_id == results[0].operation_id
    assert service.commit_slots.held("acme") == 0


def test_legacy_sessions_per_process(
    ctx: ServiceContext, alice: Principal, legacy_engine: LegacyEngine
) -> None:
    service = with_quotas(ctx, legacy_sessions=1, max_commits_per_tenant=5)
    globex = Principal(subject="carol", tenant="globex")
    slow = service.begin(alice, "a").handle
    service.add(alice, slow, [{"n": 1}])
    other = service.begin(globex, "b").handle
    service.add(globex, other, [{"n": 1}])
    legacy_engine.update_faults(latency_ms=400)
    worker = threading.Thread(target=service.commit, args=(alice, slow))
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while service.commit_slots.held("acme") == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(QuotaExceeded, match="ADAPTER_LEGACY_SESSIONS=1"):
            service.commit(globex, other)
    finally:
        worker.join(30)
        legacy_engine.update_faults(latency_ms=0)
    assert service.commit(globex, other).status == "committed"


def test_abort_deletes_staged_records_in_bounded_batches(ctx: ServiceContext, alice: Principal) -> None:
    service = with_quotas(ctx, delete_batch_size=300)
    handle = service.begin(alice, "big").handle
    for start in range(0, 2000, 100):  # twenty chunks of 100 records
        service.add(alice, handle, [{"n": start + i} for i in range(100)])
    import_id = service.status(alice, handle).import_id

    with deleted_ranges(ctx) as ranges:
        assert service.abort(alice, handle).status == "aborted"

    assert staged_rows(service, import_id) == 0
    # Each transaction deletes the chunks that end in a range of 300 positions: at most 300 records.
    assert ranges == [(after, after + 300) for after in range(0, 2000, 300)]


def test_expiry_deletes_in_batches(ctx: ServiceContext, alice: Principal) -> None:
    service = with_quotas(ctx, delete_batch_size=100)
    handle = service.begin(alice, "big", ttl_seconds=10).handle
    service.add(alice, handle, [{"n": i} for i in range(450)])
    import_id = service.status(alice, handle).import_id
    real_clock = ctx.clock
    ctx.clock = lambda: real_clock() + timedelta(seconds=11)
    try:
        assert service.maintain().expired == 1
    finally:
        ctx.clock = real_clock
    assert service.status(alice, handle).status == "expired"
    assert staged_rows(service, import_id) == 0


def test_maintenance_finishes_a_delete_that_a_crash_interrupted(
    ctx: ServiceContext, alice: Principal
) -> None:
    service = with_quotas(ctx, delete_batch_size=100)
    handle = service.begin(alice, "big").handle
    service.add(alice, handle, [{"n": i} for i in range(450)])
    import_id = service.status(alice, handle).import_id
    # An abort whose process stopped right after the state change: the records are still there.
    with ctx.store.unit_of_work() as uow:
        row = uow.imports.get(import_id)
        assert row is not None
        row.state = "aborted"
        uow.commit()
    assert staged_rows(service, import_id) == 450
    service.maintain()
    assert staged_rows(service, import_id) == 0


def test_large_records_make_short_delete_batches(ctx: ServiceContext, alice: Principal) -> None:
    service = with_quotas(ctx, delete_batch_size=100_000)
    handle = service.begin(alice, "big").handle
    blob = "x" * (60 * 1024)
    for _ in range(5):
        service.add(alice, handle, [{"b": blob}] * 40)  # 200 records, about 12 MB
    import_id = service.status(alice, handle).import_id

    with deleted_ranges(ctx) as ranges:
        service.abort(alice, handle)

    assert staged_rows(service, import_id) == 0
    # Ranges of about 1 MB of records (17 of these); a transaction deletes the chunks (of 40
    # records) that end in its range: at most the range and one add's records.
    [width] = {high - low for low, high in ranges}
    assert width == 17
    chunks = [len([end for end in range(40, 201, 40) if low < end <= high]) for low, high in ranges]
    assert sum(chunks) == 5 and max(chunks) == 1


def test_a_replayed_add_is_never_refused_by_a_quota(ctx: ServiceContext, alice: Principal) -> None:
    service = with_quotas(ctx, max_staged_bytes_per_tenant=2000)
    handle = service.begin(alice, "a").handle
    first = service.add(alice, handle, [{"blob": "x" * 1500}], idempotency_key="add-1")
    again = service.add(alice, handle, [{"blob": "x" * 1500}], idempotency_key="add-1")
    assert again.replayed and again.record_count == first.record_count == 1
    with pytest.raises(QuotaExceeded):
        service.add(alice, handle, [{"blob": "x" * 1500}], idempotency_key="add-2")


def test_the_tenant_quota_is_read_in_the_adds_own_transaction(
    ctx: ServiceContext, alice: Principal, bob: Principal
) -> None:
    """One connection checkout per add (no read of its own before it). The import's own bytes count
    once (the sum is as of before this add), and a refused add leaves no bytes behind."""
    service = with_quotas(ctx, max_staged_bytes_per_tenant=2000)
    mine = service.begin(alice, "a").handle
    checkouts: list[object] = []

    def checkout(*args: object) -> None:
        checkouts.append(args)

    event.listen(ctx.store.engine, "checkout", checkout)
    try:
        service.add(alice, mine, [{"blob": "x" * 880}])  # 891 bytes
    finally:
        event.remove(ctx.store.engine, "checkout", checkout)
    assert len(checkouts) == 1
    service.add(alice, mine, [{"blob": "x" * 880}])  # 1782 of 2000: not counted twice
    theirs = service.begin(bob, "b").handle  # same tenant (acme)
    with pytest.raises(QuotaExceeded, match="ADAPTER_MAX_STAGED_BYTES_PER_TENANT=2000"):
        service.add(bob, theirs, [{"blob": "x" * 300}])  # 2093
    assert service.status(bob, theirs).record_count == 0
    assert service.add(bob, theirs, [{"blob": "x" * 207}]).record_count == 1  # exactly 2000
    with pytest.raises(QuotaExceeded):
        service.add(alice, mine, [{"n": 1}])


def test_a_replay_is_answered_while_the_tenant_is_over_quota(
    ctx: ServiceContext, alice: Principal, bob: Principal
) -> None:
    service = with_quotas(ctx, max_staged_bytes_per_tenant=2000)
    mine = service.begin(alice, "a").handle
    first = service.add(alice, mine, [{"blob": "x" * 900}], idempotency_key="add-1")
    theirs = service.begin(bob, "b").handle  # same tenant: now 1800 of 2000
    service.add(bob, theirs, [{"blob": "x" * 900}])
    again = service.add(alice, mine, [{"blob": "x" * 900}], idempotency_key="add-1")
    assert again.replayed and again.record_count == first.record_count == 1
    with pytest.raises(IdempotencyKeyReused):  # not quota_exceeded: the key answers first
        service.add(alice, mine, [{"blob": "y" * 900}], idempotency_key="add-1")
    with pytest.raises(QuotaExceeded):
        service.add(alice, mine, [{"blob": "x" * 900}], idempotency_key="add-2")
    assert service.status(alice, mine).record_count == 1
