"""The engine never lets record contents into error messages (which end up in logs), and the unit of
work hands out the kit's own store errors, never a driver's."""

from __future__ import annotations

import secrets
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from sqlalchemy import create_engine, event, text

from adapter.domain.errors import StoreConflict, StoreUnavailable
from adapter.domain.identity import Principal
from adapter.domain.views import ImportView
from adapter.services import ImportService
from adapter.store import Store
from adapter.store import engine as engine_module
from adapter.store.reads import IMPORT_WITH_OPERATIONS, ImportFields
from adapter.store.staging import FinishedOperation, NewImport, NewRecords
from adapter.store.tables import new_event


def test_a_database_error_does_not_carry_record_contents(store: Store) -> None:
    # The sqlite3 driver's IntegrityError on SQLite; psycopg's on PostgreSQL (staging runs on the
    # driver). Either way the unit of work raises StoreConflict, with the driver's error as its cause.
    # A position staged twice breaks the primary key (import_id, seq).
    records = NewRecords("some-import", 1, ['{"card":"s3cret-4111"}'])
    with pytest.raises(StoreConflict) as caught, store.unit_of_work() as uow:
        now = datetime.now(UTC)
        expires = now + timedelta(hours=1)
        new = NewImport("some-import", "some-digest", "alice", "acme", "customers", "open", expires)
        uow.staging.open_import(new, now)
        for operation_id in ("op-1", "op-2"):
            staged = new_event("import.records_staged", "some-import", operation_id, "open", {})
            operation = FinishedOperation(
                operation_id, "add", "alice", "acme", "some-import", None, "f", "succeeded", {}, [staged]
            )
            uow.staging.record_outcome(operation, records)
        uow.commit()

    cause = caught.value.__cause__
    assert cause is not None
    assert any(word in str(cause).lower() for word in ("unique", "duplicate key")), cause
    for error in (caught.value, cause):
        assert "s3cret" not in str(error) and "s3cret" not in repr(error)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("where", ["sqlite-missing-dir", "postgres-closed-port"])
def test_a_database_that_does_not_answer_is_store_unavailable_on_both_paths(
    where: str, tmp_path: Path
) -> None:
    if where == "sqlite-missing-dir":
        url = f"sqlite:///{tmp_path / 'gone' / 'adapter.db'}"
    else:
        url = f"postgresql+psycopg://postgres@127.0.0.1:{_closed_port()}/adapter?connect_timeout=5"
    store = Store.from_url(url)
    try:
        with pytest.raises(StoreUnavailable) as unit, store.unit_of_work() as uow:
            uow.ping()
        with pytest.raises(StoreUnavailable) as read:
            store.import_with_operations("x")

        async def on_a_loop() -> None:
            async with store.async_reads(max_size=1, timeout=2.0):
                await store.import_with_operations_async("x")

        with pytest.raises(StoreUnavailable) as read_on_loop:
            anyio.run(on_a_loop)
    finally:
        store.dispose()
    for caught in (unit, read, read_on_loop):
        assert caught.value.code == "database_unavailable" and caught.value.__cause__ is not None


def test_a_url_no_driver_understands_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a usable database URL"):
        Store.from_url("nosuchdialect://x")


def _drop_connections(db_url: str, application_name: str) -> None:
    """Terminate this test's connections (the server side of a failover), no one else's."""
    if not db_url.startswith("postgresql"):
        return
    killer = create_engine(db_url)
    with killer.begin() as conn:
        dropped = conn.execute(
            text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = :name AND pid <> pg_backend_pid()"
            ),
            {"name": application_name},
        ).scalar_one()
    killer.dispose()
    assert dropped >= 1


@pytest.mark.parametrize("path", ["thread", "event loop"])
def test_the_status_read_survives_a_connection_the_database_dropped(
    path: str, service: ImportService, alice: Principal, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hot read path pings no connection before use (a round trip per call): a pooled connection
    the server closed meanwhile is found dead by the read itself, thrown away, and the read runs once
    more on a fresh one, so the caller never sees the failover. Both paths: the blocking one and
    the async one a server's event loop uses (``Store.async_reads``)."""
    name = f"t-{secrets.token_hex(4)}"
    monkeypatch.setenv("PGAPPNAME", name)  # libpq names every connection this test makes from here on
    handle = service.begin(alice, "customers").handle
    service.add(alice, handle, [{"n": 1}])

    async def on_a_loop() -> tuple[ImportView, ImportView]:
        async with service.ctx.store.async_reads(max_size=2):
            first = await service.status_async(alice, handle)
            _drop_connections(db_url, name)
            return first, await service.status_async(alice, handle)

    if path == "event loop":
        before, after = anyio.run(on_a_loop)
    else:
        before = service.status(alice, handle)
        _drop_connections(db_url, name)
        after = service.status(alice, handle)
    assert (after.import_id, after.record_count, after.status) == (before.import_id, 1, "open")
    assert after.expires_at == before.expires_at and after.expires_at.tzinfo is not None
    assert after.operations == before.operations == service.status(alice, handle).operations


def test_the_status_read_names_the_columns_of_its_statement() -> None:
    """``ImportFields`` and the four ``op_*`` columns are read by position: a column added to the
    imports table must be added to ``ImportFields`` in the same place."""
    columns = tuple(c.key for c in IMPORT_WITH_OPERATIONS.selected_columns)
    assert columns == (*ImportFields._fields, "op_id", "op_kind", "op_status", "op_created_at")


def test_a_connection_that_sat_idle_is_pinged_before_a_transaction_gets_it(
    store: Store, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes ping only connections idle longer than ``IDLE_PING_SECONDS`` (not every checkout, a
    round trip each): one the server dropped meanwhile is replaced before the transaction runs."""
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite has no server to drop a connection")
    name = f"t-{secrets.token_hex(4)}"
    monkeypatch.setenv("PGAPPNAME", name)
    with store.unit_of_work() as uow:
        uow.ping()
    _drop_connections(db_url, name)
    monkeypatch.setattr(engine_module, "IDLE_PING_SECONDS", 0.0)  # every pooled connection counts as idle
    with store.unit_of_work() as uow:
        uow.ping()  # on a fresh connection: the dead one failed its ping and was thrown away


def test_sqlite_hands_a_call_the_connection_that_wrote_last(
    service: ImportService, alice: Principal, db_url: str
) -> None:
    """In WAL mode a SQLite connection drops its page cache when another connection wrote since its
    last transaction. With two connections pooled, a host's write-then-poll must not alternate
    between them (every poll starting with a cold cache, at a million imports 1.36x the empty
    database's time): each call gets the connection returned last, the one that wrote."""
    if not db_url.startswith("sqlite"):
        pytest.skip("PostgreSQL keeps no page cache per connection")
    engine = service.ctx.store.engine
    first, second = engine.connect(), engine.connect()  # two connections in the pool from here on
    first.close()
    second.close()
    handed_out: list[int] = []
    event.listen(engine, "checkout", lambda dbapi, _record, _proxy: handed_out.append(id(dbapi)))
    handle = service.begin(alice, "customers").handle
    service.status(alice, handle)
    service.add(alice, handle, [{"n": 1}])
    service.status(alice, handle)
    assert len(handed_out) >= 4
    assert len(set(handed_out)) == 1, "every call on the connection that wrote last"
