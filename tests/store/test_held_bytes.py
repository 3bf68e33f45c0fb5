"""What each tenant holds against its staged-bytes quota is kept as a total (migration ``0012``,
``adapter/store/held_bytes.py``), and the total is always the sum over the tenant's imports.

The total is moved by triggers on ``imports`` and folded by maintenance; every check here compares
it with the sum the add used to make (``recount_held_bytes``), after each step that moves it: the
kit's own calls, SQL that bypasses the kit, the migration of a store that already holds imports,
and, on PostgreSQL, concurrent writers and folds.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection, create_engine, delete, insert, inspect, select, text, update

from adapter.domain.identity import Principal
from adapter.services import ImportService, ServiceContext
from adapter.services.quotas import fold_held_bytes
from adapter.store import Store, held_bytes
from adapter.store.held_bytes import counted_held_bytes, has_changes_to_fold, recount_held_bytes
from adapter.store.migrate import downgrade, upgrade
from adapter.store.tables import HeldBytesChangeRow, ImportRow
from tests.support.constants import POSTGRES

NOW = datetime.now(UTC)
TRIGGERS = {"held_bytes_on_insert", "held_bytes_on_update", "held_bytes_on_delete"}
GLOBEX = Principal(subject="carol", tenant="globex")


def _counted_and_recounted(store: Store) -> tuple[dict[str, int], dict[str, int]]:
    with store.unit_of_work() as uow:
        return counted_held_bytes(uow.session), recount_held_bytes(uow.session)


def assert_kept(store: Store) -> dict[str, int]:
    counted, recounted = _counted_and_recounted(store)
    assert counted == recounted
    return counted


def _import_row(import_id: str, tenant: str, state: str, staged_bytes: int) -> dict[str, Any]:
    return {
        "id": import_id,
        "handle_digest": f"d-{import_id}",
        "principal": "p",
        "tenant": tenant,
        "target": "customers",
        "state": state,
        "record_count": 1,
        "staged_bytes": staged_bytes,
        "revision": 0,
        "expires_at": NOW + timedelta(hours=1),
        "created_at": NOW,
        "updated_at": NOW,
        "version": 1,
    }


def test_every_call_that_moves_what_a_tenant_holds_is_counted(
    service: ImportService, ctx: ServiceContext, alice: Principal, bob: Principal
) -> None:
    store = ctx.store
    mine = service.begin(alice, "customers").handle
    assert assert_kept(store) == {}  # a new import holds nothing
    service.add(alice, mine, [{"id": "1", "name": "a" * 500}])
    service.add(alice, mine, [{"id": "2", "name": "b"}] * 3)
    theirs = service.begin(bob, "customers").handle  # the same tenant (acme)
    service.add(bob, theirs, [{"id": "3", "name": "c" * 200}])
    other = service.begin(GLOBEX, "customers").handle
    service.add(GLOBEX, other, [{"id": "4", "name": "d" * 50}])
    held = assert_kept(store)
    assert set(held) == {alice.tenant, GLOBEX.tenant}

    service.replace(alice, mine, [(0, {"id": "1", "name": "a" * 900})])  # grows
    service.replace(alice, mine, [(1, {"id": "2", "name": ""})])  # shrinks
    assert assert_kept(store)[alice.tenant] > held[alice.tenant]
    assert service.commit(alice, mine).status == "committed"  # a committed import still holds
    assert assert_kept(store)[alice.tenant] > held[alice.tenant]
    assert service.abort(bob, theirs).status == "aborted"  # an aborted one holds nothing
    short = service.begin(GLOBEX, "customers", ttl_seconds=10).handle
    service.add(GLOBEX, short, [{"id": "5", "name": "e"}])
    assert_kept(store)

    real_clock = ctx.clock
    ctx.clock = lambda: real_clock() + timedelta(seconds=11)
    try:
        assert service.maintain().expired == 1  # neither does an expired one
    finally:
        ctx.clock = real_clock
    with store.reading() as uow:
        assert not has_changes_to_fold(uow.session)  # the pass folded what it moved
    mine_id = service.status(alice, mine).import_id
    assert assert_kept(store) == {
        alice.tenant: held_by(store, mine_id),
        GLOBEX.tenant: held_by(store, service.status(GLOBEX, other).import_id),
    }

    service.maintain(retention=timedelta(0))  # the purge: the committed import's records go
    assert alice.tenant not in assert_kept(store)


def held_by(store: Store, import_id: str) -> int:
    with store.reading() as uow:
        row = uow.session.get(ImportRow, import_id)
        assert row is not None
        return row.staged_bytes


def test_sql_that_bypasses_the_kit_is_counted_too(store: Store) -> None:
    """The triggers see every writer: an operator's SQL, a bulk load, a later migration's data fix."""
    with store.engine.begin() as connection:
        connection.execute(
            insert(ImportRow.__table__),
            [
                _import_row("a1", "acme", "open", 100),
                _import_row("a2", "acme", "committed", 200),
                _import_row("a3", "acme", "aborted", 400),  # dropped its records: holds nothing
                _import_row("g1", "globex", "open", 800),
            ],
        )
    assert assert_kept(store) == {"acme": 300, "globex": 800}

    imports = ImportRow.__table__
    with store.engine.begin() as connection:
        connection.execute(update(imports).where(imports.c.id == "a1").values(state="expired"))
        connection.execute(update(imports).where(imports.c.id == "a3").values(state="open"))  # holds again
        connection.execute(update(imports).where(imports.c.id == "g1").values(tenant="acme"))  # moved
        connection.execute(delete(imports).where(imports.c.id == "a2"))
    assert assert_kept(store) == {"acme": 1200}

    fold(store)
    assert assert_kept(store) == {"acme": 1200}
    with store.reading() as uow:
        assert not has_changes_to_fold(uow.session)


def fold(store: Store) -> int:
    """One fold, as maintenance runs it, in a transaction of its own."""
    with store.unit_of_work() as uow:
        moved = held_bytes.fold_held_bytes(uow.session)
        uow.commit()
        return moved


def test_the_migration_counts_what_a_store_already_holds(db_url: str) -> None:
    upgrade(db_url, "0011")
    engine = create_engine(db_url)
    try:
        with engine.begin() as connection:
            connection.execute(
                insert(ImportRow.__table__),
                [
                    _import_row("a1", "acme", "open", 100),
                    _import_row("a2", "acme", "committed", 250),
                    _import_row("a3", "acme", "expired", 400),
                    _import_row("g1", "globex", "committed", 0),
                ],
            )
        upgrade(db_url)
        with engine.connect() as connection:
            assert _triggers(connection) >= TRIGGERS
            totals = dict(connection.execute(text("SELECT tenant, bytes FROM tenant_held_bytes")).all())
            assert totals == {"acme": 350}
            assert connection.execute(select(HeldBytesChangeRow.tenant)).all() == []

        downgrade(db_url, "0011")  # and back: the sum's index again, no triggers
        with engine.connect() as connection:
            assert _triggers(connection) == set()
            assert "ix_imports_holding" in {ix["name"] for ix in inspect(connection).get_indexes("imports")}
    finally:
        engine.dispose()


def _triggers(connection: Connection) -> set[str]:
    if connection.dialect.name == "sqlite":
        query = "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'imports'"
    else:
        query = "SELECT tgname FROM pg_trigger WHERE tgrelid = 'imports'::regclass AND NOT tgisinternal"
    return {name for (name,) in connection.execute(text(query))}


def test_the_triggers_are_in_place_at_the_head_revision(store: Store) -> None:
    """A migration that rebuilds ``imports`` on SQLite (a batch copy) would drop them silently."""
    with store.engine.connect() as connection:
        assert _triggers(connection) >= TRIGGERS


_TENANTS = ("acme", "globex")
_STATES = ("open", "committing", "committed", "outcome_unknown", "aborted", "expired")
_STEPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("insert"),
            st.sampled_from(("acme", "globex")),
            st.sampled_from(_STATES),
            st.integers(0, 10**6),
        ),
        st.tuples(st.just("state"), st.integers(0, 9), st.sampled_from(_STATES)),
        st.tuples(st.just("bytes"), st.integers(0, 9), st.integers(0, 10**6)),
        st.tuples(st.just("tenant"), st.integers(0, 9), st.sampled_from(_TENANTS)),
        st.tuples(st.just("delete"), st.integers(0, 9)),
        st.tuples(st.just("fold")),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_STEPS)
def test_any_sequence_of_writes_and_folds_keeps_the_totals(
    store: Store, steps: list[tuple[Any, ...]]
) -> None:
    with store.engine.begin() as connection:  # each example starts from an empty store
        for table in ("imports", "held_bytes_changes", "tenant_held_bytes"):
            connection.execute(text(f"DELETE FROM {table}"))
    made = 0
    for kind, *args in steps:
        if kind == "fold":
            fold(store)
            continue
        with store.engine.begin() as connection:
            made += _write(connection, kind, args, made)
    assert_kept(store)
    fold(store)
    assert_kept(store)


def _write(connection: Connection, kind: str, args: list[Any], made: int) -> int:
    """One write of a generated step to ``imports``; how many imports it made."""
    imports = ImportRow.__table__
    if kind == "insert":
        connection.execute(insert(imports), [_import_row(f"i{made}", *args)])
        return 1
    one = imports.c.id == f"i{args[0] % max(made, 1)}"
    if kind == "delete":
        connection.execute(delete(imports).where(one))
    else:
        column = {"state": "state", "bytes": "staged_bytes", "tenant": "tenant"}[kind]
        connection.execute(update(imports).where(one).values({column: args[1]}))
    return 0


# --- PostgreSQL: concurrent writers and folds --------------------------------------------------


@pytest.mark.parametrize("db_url", [POSTGRES], indirect=True)
def test_two_adds_of_one_tenant_do_not_wait_for_each_other(store: Store) -> None:
    """Each change is a row of its own: a counter row that every add updated would make the second
    add wait for the first one's transaction (here: fail its one-second lock timeout)."""
    with store.engine.begin() as connection:
        connection.execute(
            insert(ImportRow.__table__),
            [_import_row("a", "acme", "open", 0), _import_row("b", "acme", "open", 0)],
        )
    imports = ImportRow.__table__
    with store.engine.connect() as first, store.engine.connect() as second:
        first.execute(update(imports).where(imports.c.id == "a").values(staged_bytes=100))  # not committed
        second.execute(text("SET lock_timeout = '1s'"))
        second.execute(update(imports).where(imports.c.id == "b").values(staged_bytes=200))
        second.commit()
        first.commit()
    assert assert_kept(store) == {"acme": 300}


@pytest.mark.parametrize("db_url", [POSTGRES], indirect=True)
def test_concurrent_folds_move_each_change_once(store: Store) -> None:
    """A fold skips the rows another fold holds (and moves them never twice), without waiting."""
    imports = ImportRow.__table__
    with store.engine.begin() as connection:
        rows = [_import_row(f"i{n}", f"t{n % 3}", "open", 10 * (n + 1)) for n in range(30)]
        connection.execute(insert(imports), rows)
    expected = assert_kept(store)
    with store.unit_of_work() as first:
        assert held_bytes.fold_held_bytes(first.session) == 3  # holds the rows it took until it commits
        assert _fold_waiting_at_most_a_second(store) == 0  # the second finds nothing free
        first.commit()
    assert assert_kept(store) == expected
    assert fold(store) == 0


@pytest.mark.parametrize("db_url", [POSTGRES], indirect=True)
def test_a_fold_leaves_an_add_in_flight_for_the_next_one(store: Store) -> None:
    """The row of a connection whose add has not committed is skipped, not waited for: a fold never
    stalls behind a request, and the change is moved once it has committed."""
    imports = ImportRow.__table__
    with store.engine.begin() as connection:
        connection.execute(insert(imports), [_import_row("a", "acme", "open", 100)])
        connection.execute(insert(imports), [_import_row("g", "globex", "open", 50)])
    fold(store)
    with store.engine.connect() as adding:
        adding.execute(update(imports).where(imports.c.id == "a").values(staged_bytes=300))  # in flight
        with store.engine.begin() as other:  # another connection, committed
            other.execute(update(imports).where(imports.c.id == "g").values(staged_bytes=70))
        assert _fold_waiting_at_most_a_second(store) == 1  # globex only
        adding.commit()
    assert assert_kept(store) == {"acme": 300, "globex": 70}
    assert fold(store) == 1  # acme, now
    with store.reading() as uow:
        assert counted_held_bytes(uow.session) == {"acme": 300, "globex": 70}
        assert not has_changes_to_fold(uow.session)


def _fold_waiting_at_most_a_second(store: Store) -> int:
    with store.unit_of_work() as uow:
        uow.session.execute(text("SET LOCAL lock_timeout = '1s'"))
        moved = held_bytes.fold_held_bytes(uow.session)
        uow.commit()
        return moved


def test_maintenance_folds_without_a_write_when_nothing_changed(ctx: ServiceContext) -> None:
    assert fold_held_bytes(ctx) == 0
