"""The store's statements stay prepared, and their prepared plans read what the call needs (issue 25).

psycopg prepares a statement the kit runs on its driver (``store/driver.py``) at its first use on a
connection, and PostgreSQL soon plans such a statement once for any values (a generic plan). Two
things decide what that saves:

* a ROLLBACK makes psycopg drop every statement it prepared on the connection, so the steps that
  only read open ``store.reading()``, which ends with COMMIT (``store/unit_of_work.py``);
* a generic plan knows no values, so the add's rules must not offer the planner another index
  than the digest's (it read every open import along ``ix_imports_state_expires`` before).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import insert, text
from sqlalchemy.exc import InternalError

from adapter.store import Store
from adapter.store.driver import compiled_for, driver_value, run_on_driver
from adapter.store.migrate import upgrade
from adapter.store.probe import probe_write
from adapter.store.staging import _ADD_IF_ALLOWED
from adapter.store.tables import EventRow, ImportRow
from tests.support.postgres import postgres_schema, schema_url

NOW = datetime.now(UTC)
NAIVE = NOW.replace(tzinfo=None)  # as the driver takes a time (driver.py)


@contextlib.contextmanager
def _one_connection_store(options: str = "") -> Iterator[Store]:
    """A migrated PostgreSQL store with one pooled connection, so every block reuses it; ``options``
    are more of the server's settings for it (``%20-cNAME%3DVALUE``)."""
    with postgres_schema("prep") as (_, schema):
        upgrade(schema_url(schema))
        store = Store.from_url(schema_url(schema) + options, pool_size=1, max_overflow=0)
        try:
            yield store
        finally:
            store.dispose()


@pytest.fixture
def pg_store() -> Iterator[Store]:
    with _one_connection_store() as store:
        yield store


def _prepared(store: Store) -> int:
    """How many statements the pooled connection has prepared on the server."""
    with store.read() as connection:
        return int(connection.execute(text("SELECT count(*) FROM pg_prepared_statements")).scalar_one())


def _prepare_one(store: Store) -> None:
    with store.read() as connection:
        run_on_driver(connection, ImportRow.__table__.select().where(ImportRow.id == "none"), {})


@pytest.mark.postgres
def test_a_reading_unit_of_work_keeps_the_connections_prepared_statements(pg_store: Store) -> None:
    _prepare_one(pg_store)
    assert _prepared(pg_store) >= 1

    with pg_store.reading() as uow:
        uow.events.latest_id()

    assert _prepared(pg_store) >= 1


@pytest.mark.postgres
def test_the_connection_writes_again_after_a_read(pg_store: Store) -> None:
    """The one pooled connection was read-only for the read, not for the unit of work after it."""
    with pg_store.reading() as uow:
        uow.events.latest_id()

    with pg_store.unit_of_work() as uow:
        uow.session.execute(insert(EventRow).values(kind="k", state="s", created_at=NOW))
        uow.commit()

    with pg_store.reading() as uow:
        assert uow.events.latest_id() == 1


@pytest.mark.postgres
def test_a_database_made_read_only_stays_read_only_after_a_read() -> None:
    """What ``/readyz`` relies on: a read must not hand its connection back set to READ WRITE."""
    with _one_connection_store("%20-cdefault_transaction_read_only%3Don") as store:
        with store.reading() as uow:
            uow.events.latest_id()
        with pytest.raises(InternalError, match="read-only transaction"), store.unit_of_work() as uow:
            uow.session.execute(insert(EventRow).values(kind="k", state="s", created_at=NOW))
            uow.commit()


@pytest.mark.postgres
def test_a_unit_of_work_that_rolls_back_drops_them(pg_store: Store) -> None:
    """Why the reads end with COMMIT: the same read in a unit of work that rolls back."""
    _prepare_one(pg_store)

    with pg_store.unit_of_work() as uow:
        uow.events.latest_id()

    assert _prepared(pg_store) == 0


@pytest.mark.postgres
def test_the_readiness_probe_keeps_them(pg_store: Store) -> None:
    """/readyz writes (a read-only store must fail it) and commits: a probe every few seconds would
    otherwise drop a pooled connection's statements each time."""
    _prepare_one(pg_store)

    probe_write(pg_store)

    assert _prepared(pg_store) >= 1


@pytest.mark.postgres
def test_a_reading_unit_of_work_refuses_a_write(pg_store: Store) -> None:
    with pytest.raises(InternalError, match="read-only transaction"), pg_store.reading() as uow:
        uow.session.execute(insert(EventRow).values(kind="k", state="s", created_at=NOW))

    with pg_store.reading() as uow:
        assert uow.events.latest_id() == 0


def test_on_sqlite_reading_does_not_wait_for_this_process_writer(tmp_path: Any) -> None:
    """A read is not queued behind the writer of the same process (SQLite's one write lock)."""
    url = f"sqlite:///{tmp_path / 'adapter.db'}"
    upgrade(url)
    store = Store.from_url(url)
    try:
        with store.unit_of_work() as writer:
            writer.session.execute(insert(EventRow).values(kind="k", state="s", created_at=NOW))
            with store.reading() as reader:  # the writer holds the queue: a unit of work would wait
                assert reader.events.latest_id() == 0  # not committed yet
            writer.commit()
        with store.reading() as reader:
            assert reader.events.latest_id() == 1
    finally:
        store.dispose()


def _add_values(digest: str) -> dict[str, Any]:
    params = {
        "digest": digest,
        "of_tenant": "t",
        "records": 10,
        "size": 100,
        "now": NOW,
        "valid_at": NOW,
        "open_state": "open",
        "max_records": 10**6,
        "max_bytes": 10**9,
        "max_tenant_bytes": 10**12,
        "a_count": 10,
        "a_data": "[]",
        "a_operation_id": "op",
        "a_kind": "add",
        "a_principal": "p",
        "a_key": "k",
        "a_fingerprint": "f",
        "a_status": "succeeded",
        "a_now": NOW,
        "a_staged_kind": "import.records_staged",
        "a_staged_state": "open",
        "a_done_kind": "operation.succeeded",
        "a_done_state": "succeeded",
        "a_done_detail": {"kind": "add"},
    }
    return {name: driver_value(value) for name, value in params.items()}


@pytest.mark.postgres
def test_the_adds_generic_plan_finds_the_import_by_its_digest(pg_store: Store) -> None:
    """A young store (a few hundred imports, just analyzed, as after a start): the plan PostgreSQL
    keeps for any values reads one import by its digest and what its tenant holds once, by key."""
    columns = "id, handle_digest, principal, tenant, target, state, record_count, staged_bytes, revision"
    columns += ", expires_at, created_at, updated_at, version"
    row = "%s, 'p', 't', 'customers', %s, 10, 1000, 0, %s, %s, %s, 1"
    with pg_store.engine.begin() as connection:
        cursor: Any = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
        finished = [(f"c{i}", f"dc{i}", "committed", NAIVE, NAIVE, NAIVE) for i in range(350)]
        cursor.executemany(f"INSERT INTO imports ({columns}) VALUES (%s, {row})", finished)
        cursor.execute("ANALYZE imports")
        later = NAIVE + timedelta(hours=1)
        opened = [(f"o{i}", f"do{i}", "open", later, NAIVE, NAIVE) for i in range(300)]
        cursor.executemany(f"INSERT INTO imports ({columns}) VALUES (%s, {row})", opened)
        sql, constants = compiled_for(_ADD_IF_ALLOWED, connection.dialect)
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute("EXPLAIN " + sql, constants | _add_values("do7"), prepare=True)
        plan = [line for (line,) in cursor.fetchall()]
        connection.rollback()

    shown = "\n".join(plan)
    assert any("uq_imports_handle_digest on imports " in line for line in plan), shown
    assert not any("ix_imports_state_expires" in line for line in plan), shown
    scans_of_imports = [line for line in plan if "Scan" in line and " on imports" in line]
    assert len(scans_of_imports) == 1, shown  # the import itself, no sum over the tenant's others
    assert sum("pk_tenant_held_bytes on tenant_held_bytes" in line for line in plan) == 1, shown
