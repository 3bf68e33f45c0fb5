"""Staging rates, on SQLite and PostgreSQL with the simulator over TCP: bytes and records staged a
second, per principal and per tenant. A caller over its rate is refused at once with
``quota_exceeded`` saying when to try again; another principal or tenant is not slowed by it."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

import pytest

from adapter.domain.identity import Principal
from adapter.domain.quotas import QuotaExceeded
from adapter.services import ImportService, ServiceContext
from tests.support.constants import CAROL


class Clock:
    """The service's clock, moved by the test (the rates refill by it)."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock(ctx: ServiceContext) -> Clock:
    clock = Clock(ctx.clock())
    ctx.clock = clock
    return clock


def metered(ctx: ServiceContext, **rates: Any) -> ImportService:
    ctx.quotas = dataclasses.replace(ctx.quotas, **rates)
    return ImportService(ctx)


def blob(size: int) -> list[dict[str, str]]:
    """One record of about ``size`` bytes as compact JSON (``{"b":"..."}`` is 8 bytes more)."""
    return [{"b": "x" * (size - 8)}]


def test_a_principal_over_its_byte_rate_is_told_when_to_try_again(
    ctx: ServiceContext, clock: Clock, alice: Principal
) -> None:
    service = metered(ctx, max_stage_bytes_per_second_per_principal=2000)
    handle = service.begin(alice, "a").handle
    service.add(alice, handle, blob(1500))
    service.add(alice, handle, blob(1500))  # a second's allowance was not used up: admitted, in debt
    with pytest.raises(
        QuotaExceeded, match="ADAPTER_MAX_STAGE_BYTES_PER_SECOND_PER_PRINCIPAL=2000"
    ) as refused:
        service.add(alice, handle, blob(100))
    assert refused.value.code == "quota_exceeded"
    assert refused.value.retry_after == pytest.approx(0.5, abs=0.01)  # 1000 bytes of debt at 2000/s
    assert "try again in 0.5 s" in refused.value.message
    assert service.status(alice, handle).record_count == 2  # the refused add staged nothing
    clock.advance(0.4)
    with pytest.raises(QuotaExceeded):
        service.add(alice, handle, blob(100))
    clock.advance(0.11)
    assert service.add(alice, handle, blob(100)).record_count == 3


def test_the_record_rate_holds_for_small_records_too(
    ctx: ServiceContext, clock: Clock, alice: Principal
) -> None:
    service = metered(ctx, max_stage_records_per_second_per_principal=100)
    handle = service.begin(alice, "a").handle
    service.add(alice, handle, [{"n": n} for n in range(150)])
    with pytest.raises(QuotaExceeded, match="ADAPTER_MAX_STAGE_RECORDS_PER_SECOND_PER_PRINCIPAL=100"):
        service.add(alice, handle, [{"n": 1}])
    clock.advance(0.51)
    assert service.add(alice, handle, [{"n": 1}]).record_count == 151


def test_one_principal_at_its_rate_does_not_slow_another(
    ctx: ServiceContext, clock: Clock, alice: Principal, bob: Principal
) -> None:
    service = metered(ctx, max_stage_bytes_per_second_per_principal=2000)
    mine = service.begin(alice, "a").handle
    theirs = service.begin(bob, "b").handle  # same tenant, another principal
    service.add(alice, mine, blob(4000))
    with pytest.raises(QuotaExceeded):
        service.add(alice, mine, blob(100))
    assert service.add(bob, theirs, blob(1500)).record_count == 1


def test_a_tenant_has_one_rate_for_all_its_principals(
    ctx: ServiceContext, clock: Clock, alice: Principal, bob: Principal
) -> None:
    service = metered(ctx, max_stage_bytes_per_second_per_tenant=3000)
    mine = service.begin(alice, "a").handle
    theirs = service.begin(bob, "b").handle  # acme, like alice
    other_tenant = service.begin(CAROL, "c").handle  # globex
    service.add(alice, mine, blob(2000))
    service.add(bob, theirs, blob(2000))
    with pytest.raises(
        QuotaExceeded, match=r"this tenant .*ADAPTER_MAX_STAGE_BYTES_PER_SECOND_PER_TENANT=3000"
    ):
        service.add(alice, mine, blob(100))
    assert service.add(CAROL, other_tenant, blob(2000)).record_count == 1


def test_a_refused_add_is_refused_before_it_costs_anything(
    ctx: ServiceContext, clock: Clock, alice: Principal
) -> None:
    """Refused while in debt, whatever the call holds: not even a bad record is looked at, and a
    refusal charges nothing (the caller is not pushed further back by asking)."""
    service = metered(ctx, max_stage_bytes_per_second_per_principal=2000)
    handle = service.begin(alice, "a").handle
    service.add(alice, handle, blob(3000))
    for _ in range(5):
        with pytest.raises(QuotaExceeded) as refused:
            service.add(alice, handle, ["not an object"])  # would be a validation_error
    assert refused.value.retry_after == pytest.approx(0.5, abs=0.01)


def test_a_replay_waits_its_turn_and_then_is_answered_from_the_record(
    ctx: ServiceContext, clock: Clock, alice: Principal
) -> None:
    service = metered(ctx, max_stage_bytes_per_second_per_principal=2000)
    handle = service.begin(alice, "a").handle
    first = service.add(alice, handle, blob(3000), idempotency_key="add-1")
    with pytest.raises(QuotaExceeded):
        service.add(alice, handle, blob(3000), idempotency_key="add-1")
    clock.advance(0.6)
    again = service.add(alice, handle, blob(3000), idempotency_key="add-1")
    assert again.replayed and again.record_count == first.record_count == 1
    # A replay staged nothing, so it charged nothing: the next new add is admitted at once.
    assert service.add(alice, handle, blob(100)).record_count == 2
