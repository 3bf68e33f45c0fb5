"""A purge costs what it deletes, not what the store keeps (issue 25).

Every purge batch holds the write lock of a SQLite store while it runs, so a batch that reads rows
it then skips (too young for the cut-off, or never purged, as committed imports) makes every other
writer wait for the whole history: at a million imports a batch of 100 operations read 20 ms of
them, the last, empty batch of events every event (1 s), and another tenant's p99 grew 20x during a
purge (``bench/history.py``). Here two stores hold the same old imports past the retention under
histories four times apart in size; SQLite counts the virtual machine instructions each purge runs
(its progress handler), and the larger history may cost little more.

On PostgreSQL a batch that reads the history costs time rather than other writers' waits (a merge
anti-join over every operation took 36 ms a batch at a million imports). There the same comparison
counts the rows the purge's statements read (the server's table and index statistics), over histories
of 20,000 and 80,000 imports: below that the planner picks other indexes for small tables. It found
the staged records' query hashing every committed import (a whole read of imports each batch: 35,000
rows read against 93,000), where it now looks each chunk's import up by id (13,000-17,000 against 16,000).
"""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, text

from adapter.services import ServiceContext
from adapter.services.retention import PurgeReport, purge_finished
from tests.support.benches import kit_with_history, load_bench
from tests.support.postgres import postgres_schema, schema_url

history = load_bench("history")

OLD = 200  # imports past the retention in both stores
STEP = 100  # SQLite instructions per progress-handler call


def _at(ctx: ServiceContext, now: datetime) -> ServiceContext:
    """``ctx`` with its clock at the history's own ``now``: on the real clock the cut-off moves by
    the time the fill took, so the larger history's purge could take an operation more (a loaded run
    found one)."""
    return dataclasses.replace(ctx, clock=lambda: now)


def _purge_instructions(workdir: Path, imports: int) -> tuple[PurgeReport, int]:
    """A store with ``imports`` of history, the oldest :data:`OLD` past the retention: what its purge
    deleted, and about how many SQLite instructions it ran."""
    past = history.History(imports, datetime.now(UTC))
    retention = past.now - past.created(OLD)
    with kit_with_history(f"sqlite:///{workdir / 'kit.db'}", past, workdir) as kit:
        engine = kit.service.ctx.store.engine
        calls = [0]

        def count(connection: sqlite3.Connection, _record: Any) -> None:
            connection.set_progress_handler(lambda: calls.__setitem__(0, calls[0] + 1) or 0, STEP)

        event.listen(engine, "connect", count)
        engine.dispose()  # the connections the fill opened go; new ones count
        report = purge_finished(_at(kit.service.ctx, past.now), retention=retention, pause_ratio=0)
    return report, calls[0] * STEP


def test_a_purge_costs_what_it_deletes_not_the_history_it_keeps(tmp_path: Path) -> None:
    (small_dir := tmp_path / "small").mkdir()
    (large_dir := tmp_path / "large").mkdir()
    small, small_work = _purge_instructions(small_dir, 2_000)
    large, large_work = _purge_instructions(large_dir, 8_000)
    assert small.operations > 2 * OLD and small.events > 8 * OLD and small.imports > 0
    # the same old imports go in both: their operations, the final ones among them, their events
    assert (large.operations, large.imports) == (small.operations, small.imports)
    assert abs(large.events - small.events) <= 10
    assert large_work < 1.3 * small_work, (small_work, large_work)


# Rows read from the schema's tables: by sequential scans, and through their indexes (an index-only
# scan reads index entries alone, so heap fetches would miss it).
_ROWS_READ = text(
    "SELECT (SELECT coalesce(sum(seq_tup_read), 0) FROM pg_stat_user_tables WHERE schemaname = :schema)"
    " + (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes WHERE schemaname = :schema)"
)
_BACKENDS = text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :name")


def _rows_read(server: Engine, schema: str, name: str) -> int:
    """Rows read from ``schema`` so far, once every backend named ``name`` has gone: a backend reports
    its statistics when it exits (an idle one only every few seconds)."""
    deadline = time.monotonic() + 30
    with server.connect() as conn:
        while conn.execute(_BACKENDS, {"name": name}).scalar_one():
            assert time.monotonic() < deadline, f"backends named {name} did not exit"
            conn.rollback()  # the activity view is read once a transaction: a new one sees them go
            time.sleep(0.05)
        conn.execute(text("SELECT pg_stat_clear_snapshot()"))
        return int(conn.execute(_ROWS_READ, {"schema": schema}).scalar_one())


def _purge_rows_read(workdir: Path, imports: int) -> tuple[PurgeReport, int]:
    """The PostgreSQL counterpart of :func:`_purge_instructions`: rows the purge read."""
    past = history.History(imports, datetime.now(UTC))
    retention = past.now - past.created(OLD)
    with postgres_schema("purge") as (server, schema):
        name = f"purge-work-{schema}"
        with kit_with_history(schema_url(schema, application_name=name), past, workdir) as kit:
            store = kit.service.ctx.store
            store.dispose()  # its connections (the fill's, the notifier's) go, reporting what they read
            before = _rows_read(server, schema, name)
            report = purge_finished(_at(kit.service.ctx, past.now), retention=retention, pause_ratio=0)
            store.dispose()
            after = _rows_read(server, schema, name)
    return report, after - before


@pytest.mark.postgres  # skips without ADAPTER_TEST_POSTGRES_URL (require_postgres)
def test_a_postgres_purge_reads_what_it_deletes_not_the_history_it_keeps(tmp_path: Path) -> None:
    (small_dir := tmp_path / "small").mkdir()
    (large_dir := tmp_path / "large").mkdir()
    small, small_rows = _purge_rows_read(small_dir, 20_000)
    large, large_rows = _purge_rows_read(large_dir, 80_000)
    assert (large.operations, large.imports) == (small.operations, small.imports) and small.imports > 0
    assert abs(large.events - small.events) <= 10
    deleted = small.operations + small.imports + small.events + small.staged_records
    assert small_rows > deleted / 2  # the count sees the purge's own reads
    # 0.95-1.24x over runs (the planner's sampled statistics choose among the operations' indexes);
    # the staged records' hash join over every import gave 2.6x
    assert large_rows < 1.5 * small_rows, (small_rows, large_rows)
