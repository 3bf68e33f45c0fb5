"""The purge pauses after each batch as long as the batch took (``retention.PAUSE_RATIO``), so
another tenant's calls are not kept waiting behind one batch after another (bench/RESULTS.md)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

import pytest

from adapter.domain.identity import Principal
from adapter.services import ImportService, ServiceContext, retention
from adapter.store.repositories import RetentionRepository
from tests.support.imports import staged


def finished_history(service: ImportService, alice: Principal, imports: int) -> None:
    for _ in range(imports):
        service.commit(alice, staged(service, alice, 2))


def test_each_batch_is_followed_by_a_pause_as_long_as_it_took(
    service: ImportService, ctx: ServiceContext, alice: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    finished_history(service, alice, 3)
    batches: list[tuple[float, float]] = []  # (the batch's own seconds, the pause asked after it)
    ended = [retention.time.perf_counter()]

    def pause(seconds: float) -> None:
        now = retention.time.perf_counter()
        batches.append((now - ended[0], seconds))
        ended[0] = now

    monkeypatch.setattr(retention, "_sleep", pause)

    report = retention.purge_finished(ctx, retention=timedelta(0), batch=1, pause_ratio=2.0)

    assert report.operations >= 3 * 3 and report.events >= 3 * 3 and report.staged_records == 3 * 2
    # One transaction per row (batch=1; the staged records are one row per import, added at once)
    # and one that finds nothing more of each kind: operations, staged records, imports in each
    # of the three final states, events, confirmation rounds.
    rows = report.operations + 3 + report.imports + report.events + report.confirmation_rounds
    assert len(batches) == rows + 7
    # Each pause is twice what its batch took, measured by the purge from inside: at most twice
    # what the test sees between the pauses, and never nothing.
    assert all(0 < asked <= 2 * took for took, asked in batches)


def test_no_pause_when_the_ratio_is_zero(
    service: ImportService, ctx: ServiceContext, alice: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    finished_history(service, alice, 1)
    asked: list[float] = []
    monkeypatch.setattr(retention, "_sleep", asked.append)

    report = retention.purge_finished(ctx, retention=timedelta(0), batch=10, pause_ratio=0)

    assert report.operations > 0 and asked == []


def test_the_default_batch_is_smaller_where_every_writer_waits_for_the_one_write_lock(
    service: ImportService, ctx: ServiceContext, alice: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    finished_history(service, alice, 1)
    asked: list[int] = []
    purge_operations = RetentionRepository.purge_operations

    def counted(self: RetentionRepository, finished: Collection[str], cutoff: datetime, limit: int) -> int:
        asked.append(limit)
        return purge_operations(self, finished, cutoff, limit)

    monkeypatch.setattr(RetentionRepository, "purge_operations", counted)

    report = retention.purge_finished(ctx, retention=timedelta(0), pause_ratio=0)

    sqlite = ctx.store.engine.dialect.name == "sqlite"
    assert report.operations == 3
    assert asked == [25 if sqlite else 100] * 2  # SQLite: retention.PURGE_BATCH_ONE_WRITER
