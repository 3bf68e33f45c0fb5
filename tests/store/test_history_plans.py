"""With a history loaded, every hot query's plan reads through an index, on PostgreSQL and on
SQLite (issue 25).

``bench/history.py`` fills the store with finished imports, their operations and events (20,000
here, enough that the planner prefers an index wherever one fits; ``VACUUM ANALYZE`` as autovacuum
would), runs one round of the hot calls (begin, add, commit, both status reads, the import list,
the admin operations list, a reconciler pass, a late-commit watch pass) capturing their SQL, and
EXPLAINs each SELECT, UPDATE and DELETE with the parameters it ran with. A sequential scan of
imports, operations, events or staged records costs in proportion to the history, so none may
appear.

SQLite plans without statistics (the kit never runs ``ANALYZE``), so its plans do not depend on how
much history there is: a few hundred imports show them. There the check is that the two reads that
once picked the status index and sorted every finished operation (the late-commit watch, the admin
list filtered by status: 86-101x at 200,000 imports) read in index order. The bench itself (a tiny
run) is smoke-tested here too, on SQLite.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from adapter.bootstrap import Kit
from tests.support.benches import kit_with_history, load_bench
from tests.support.constants import POSTGRES_URL
from tests.support.postgres import postgres_schema, schema_url

history = load_bench("history")

IMPORTS = 20_000

needs_postgres = pytest.mark.skipif(not POSTGRES_URL, reason="ADAPTER_TEST_POSTGRES_URL not set")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kit]:
    """A kit on a PostgreSQL schema holding :data:`IMPORTS` finished imports of history."""
    with (
        postgres_schema("hist") as (_, schema),
        kit_with_history(
            schema_url(schema), history.History(IMPORTS, datetime.now(UTC)), tmp_path_factory.mktemp("legacy")
        ) as kit,
    ):
        yield kit


@pytest.fixture(scope="module")
def loaded_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kit]:
    """A kit on a SQLite file holding a few hundred finished imports (enough: no statistics)."""
    workdir = tmp_path_factory.mktemp("sqlite-history")
    with kit_with_history(
        f"sqlite:///{workdir / 'kit.db'}", history.History(300, datetime.now(UTC)), workdir
    ) as kit:
        yield kit


def _plans(kit: Kit) -> list[tuple[str, list[str]]]:
    return [(sql, history.explain(kit, sql, params)) for sql, params in history.hot_statements(kit)]


def _scans(plans: list[tuple[str, Any]]) -> dict[str, list[str]]:
    return {" ".join(sql.split())[:200]: found for sql, plan in plans if (found := history.seq_scans(plan))}


@needs_postgres
@pytest.mark.postgres
def test_no_hot_query_reads_a_history_table_whole(loaded: Kit) -> None:
    plans = _plans(loaded)

    assert len(plans) >= 15  # every step ran and was captured
    assert _scans(plans) == {}


@needs_postgres
@pytest.mark.postgres
def test_no_hot_query_once_prepared_reads_a_history_table_whole(loaded: Kit) -> None:
    """psycopg prepares every statement by its fifth use on a connection, and PostgreSQL may then
    keep one plan for any parameters: the plan each settles on reads through an index too."""
    plans = [
        (sql, history.explain(loaded, sql, params, prepared=True))
        for sql, params in history.hot_statements(loaded)
    ]

    assert len(plans) >= 15
    assert _scans(plans) == {}


@needs_postgres
@pytest.mark.postgres
def test_once_prepared_the_read_by_key_finds_its_rows_by_the_whole_key(loaded: Kit) -> None:
    """``get_operation_status`` by key: with the kinds bound as parameters, or as one ``IN`` list,
    the plan PostgreSQL settled on found the principal's every operation by tenant and principal and
    filtered them by kind (``plan_terms.py``)."""
    key = "by-key-plan"
    handle = loaded.service.begin(history.PRINCIPAL, "customers", idempotency_key=key).handle
    with history.captured_sql(loaded) as seen:
        loaded.service.operation_status(history.PRINCIPAL, idempotency_key=key)
    loaded.service.abort(history.PRINCIPAL, handle)
    [(sql, params)] = [(sql, params) for sql, params in seen if "idempotency_key = " in sql]

    plan = history.explain(loaded, sql, params, prepared=True)

    reads = [line for line in plan if "uq_operations_tenant_principal_kind_idempotency_key" in line]
    assert reads, "\n".join(plan)
    assert not [line for line in plan if "Filter:" in line and "kind" in line], "\n".join(plan)


@needs_postgres
@pytest.mark.postgres
def test_the_add_reads_what_its_tenant_holds_by_key(loaded: Kit) -> None:
    """Not a sum over the tenant's imports (about 1,000 of them hold bytes here): its total, in a
    table of a row per tenant (21 here, which the planner reads whole), and its changes not folded."""
    add = next(plan for sql, plan in _plans(loaded) if "tenant_held_bytes" in sql)

    assert [line for line in add if "Scan" in line and " on imports" in line] == [
        next(line for line in add if "uq_imports_handle_digest" in line)
    ], "\n".join(add)
    assert any(" on tenant_held_bytes" in line for line in add), "\n".join(add)


@needs_postgres
@pytest.mark.postgres
def test_without_its_index_the_late_commit_watch_reads_every_operation(loaded: Kit) -> None:
    """The check can fail: drop one index (in a transaction rolled back) and its query scans."""
    watch = [(sql, params) for sql, params in history.hot_statements(loaded) if "operation.reconciled" in sql]
    assert watch
    connection = loaded.service.ctx.store.engine.raw_connection()
    try:
        driver: Any = connection.driver_connection
        with driver.cursor() as cursor:
            cursor.execute("DROP INDEX ix_operations_updated")
            cursor.execute("EXPLAIN " + watch[0][0], watch[0][1])
            plan = [row[0] for row in cursor.fetchall()]
    finally:
        driver.rollback()
        connection.close()

    assert history.seq_scans(plan), "\n".join(plan)


def _plan_of(plans: list[tuple[str, list[str]]], marker: str) -> list[str]:
    [plan] = [plan for sql, plan in plans if marker in " ".join(sql.split())]
    return plan


WATCH = "FROM operations WHERE +operations.status IN"
ADMIN_BY_STATUS = "AND operations.status = ? AND operations.tenant = ? ORDER BY operations.created_at DESC"


def test_on_sqlite_no_hot_query_reads_a_history_table_whole(loaded_sqlite: Kit) -> None:
    plans = _plans(loaded_sqlite)

    assert len(plans) >= 15
    assert _scans(plans) == {}


def test_on_sqlite_the_watch_and_the_admin_list_read_in_index_order(loaded_sqlite: Kit) -> None:
    plans = _plans(loaded_sqlite)

    watch, admin = _plan_of(plans, WATCH), _plan_of(plans, ADMIN_BY_STATUS)

    assert any("USING INDEX ix_operations_updated" in line for line in watch), watch
    assert any("USING INDEX ix_operations_status_created" in line for line in admin), admin
    assert not any("TEMP B-TREE" in line for line in watch + admin), watch + admin


def test_on_sqlite_without_filter_only_the_watch_sorts_every_finished_commit(loaded_sqlite: Kit) -> None:
    """The check can fail: the watch's statement with its status as an index key (no unary plus)
    is planned through a status index and a sort, as before."""
    [(sql, params)] = [
        (sql, p) for sql, p in history.hot_statements(loaded_sqlite) if WATCH in " ".join(sql.split())
    ]

    plan = history.explain(loaded_sqlite, sql.replace("+operations.status", "operations.status"), params)

    assert any("(status=?)" in line for line in plan) and any("TEMP B-TREE" in line for line in plan), plan


def test_the_bench_runs_tiny_on_sqlite(capsys: pytest.CaptureFixture[str]) -> None:
    """``bench/history.py`` end to end at 300 imports: every step measured on both databases, the
    purge measured against the other tenant's calls, and one JSON line last."""
    argv = ["--database", "sqlite", "--imports", "300", "--rounds", "2", "--warmup", "1"]
    assert history.main([*argv, "--purge-rows", "2000", "--probe-calls", "20"]) == 0

    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(summary["ratios"]) == set(history.STEPS)
    assert summary["rows"]["imports"] == 300
    assert summary["purge"]["rows_deleted"] > 0
