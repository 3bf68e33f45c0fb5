"""The SQL port: targets by reflection, one transaction per batch, the ledger, and the contract kit."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from adapter.legacy import sql
from adapter.legacy.sql import SqlPort
from adapter.ports.legacy import LegacyFailed, LegacyOutcomeUnknown, LegacyTransient
from adapter.services.targets import RecordInvalid, TargetRules
from adapter.testing import PortContract


@pytest.fixture
def sql_port(legacy_db: Any) -> Iterator[SqlPort]:
    port = SqlPort(legacy_db.url, schema=legacy_db.schema)
    yield port
    port.close()


class TestSqlPortContract(PortContract):
    @pytest.fixture
    def port(self, sql_port: SqlPort) -> SqlPort:
        return sql_port

    @pytest.fixture
    def lose_commit_reply(self):  # type: ignore[no-untyped-def]
        return sql.lose_commit_reply

    @pytest.fixture
    def system_down(self):  # type: ignore[no-untyped-def]
        return sql.database_down


class TestSqlPortContractOnACompositeKey(TestSqlPortContract):
    @pytest.fixture
    def contract_target(self) -> str:
        return "order_lines"


def _count(legacy_db: Any, table: str) -> int:
    prefix = f'"{legacy_db.schema}".' if legacy_db.schema else ""
    with legacy_db.engine.connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {prefix}{table}")).scalar_one())


def test_targets_are_the_tables_with_a_key_and_their_schemas_come_from_the_columns(sql_port: SqlPort) -> None:
    targets = {t.name: t for t in sql_port.targets()}

    assert sorted(targets) == ["customers", "order_lines"]  # audit_log has no primary key
    schema = targets["customers"].schema
    assert schema["required"] == ["name"]  # id is generated, the rest nullable or defaulted
    assert schema["additionalProperties"] is False
    assert schema["properties"]["name"] == {"type": "string", "maxLength": 100}
    assert schema["properties"]["born"]["type"] == ["string", "null"]
    assert schema["properties"]["born"]["format"] == "date"
    assert schema["properties"]["balance"]["type"] == ["number", "null"]
    assert targets["order_lines"].schema["required"] == ["order_no", "line", "sku"]


def test_records_are_checked_against_the_reflected_schema(sql_port: SqlPort) -> None:
    rules = TargetRules(sql_port.targets())
    rules.require("customers").check([{"name": "Ada", "born": "1815-12-10", "balance": 1.5}])
    with pytest.raises(RecordInvalid) as missing:
        rules.require("customers").check([{"name": "Ada"}, {"email": "x@y"}])
    assert str(missing.value) == "validation_error: record 1: field 'name' is required"
    with pytest.raises(RecordInvalid) as long:
        rules.require("customers").check([{"name": "A" * 101}])
    assert "field 'name'" in str(long.value) and "maxLength" in str(long.value)


def test_one_batch_is_one_transaction_rows_and_ledger_together(sql_port: SqlPort, legacy_db: Any) -> None:
    session = sql_port.open_session()
    session.begin("ref-1", "customers")
    session.add([{"name": "Ada", "born": "1815-12-10"}, {"name": "Grace"}])
    assert _count(legacy_db, "customers") == 0  # nothing visible before COMMIT
    batch = session.commit()
    session.close()

    assert _count(legacy_db, "customers") == 2
    assert [b.legacy_batch_id for b in sql_port.batch_status("ref-1").batches] == [batch.legacy_batch_id]
    assert sql_port.void_batch(batch.legacy_batch_id).already_voided is False
    assert _count(legacy_db, "customers") == 0
    assert sql_port.void_batch(batch.legacy_batch_id).already_voided is True


def test_a_refused_row_fails_the_session_and_leaves_nothing(sql_port: SqlPort, legacy_db: Any) -> None:
    session = sql_port.open_session()
    session.begin("ref-dup", "order_lines")
    session.add([{"order_no": 1, "line": 1, "sku": "A"}])
    with pytest.raises(LegacyFailed):
        session.add([{"order_no": 1, "line": 1, "sku": "B"}])  # duplicate key
    session.close()
    assert _count(legacy_db, "order_lines") == 0
    assert sql_port.batch_status("ref-dup").batches == ()


@pytest.mark.parametrize("copy", [True, False], ids=["copy", "pipelined"])
def test_each_insert_path_lands_the_rows_and_their_keys(
    sql_port: SqlPort, legacy_db: Any, copy: bool
) -> None:
    """PostgreSQL inserts by COPY into a temporary table, or pipelined (without the TEMP privilege);
    SQLite through SQLAlchemy. Every path must keep the keys that VOID deletes by."""
    for target in sql_port._targets.values():
        target.copy_ok = target.copy_ok and copy
    session = sql_port.open_session()
    session.begin("ref-paths", "customers")
    session.add([{"name": f"n{i}", "born": "2001-02-03", "balance": 2.5} for i in range(700)])
    session.add([{"name": "short"}])  # another set of fields: another statement (another temp table)
    session.add([{"name": f"m{i}", "born": "2001-02-03", "balance": 1} for i in range(5)])
    batch = session.commit()
    session.close()

    assert batch.record_count == 706 and _count(legacy_db, "customers") == 706
    sql_port.void_batch(batch.legacy_batch_id)
    assert _count(legacy_db, "customers") == 0


def test_an_unknown_table_is_refused_at_begin(sql_port: SqlPort) -> None:
    with pytest.raises(LegacyFailed):
        sql_port.open_session().begin("ref", "audit_log")


def test_a_lost_commit_reply_leaves_the_batch_committed_and_listed(sql_port: SqlPort, legacy_db: Any) -> None:
    session = sql_port.open_session()
    session.begin("ref-lost", "customers")
    session.add([{"name": "Ada"}])
    with sql.lose_commit_reply(sql_port), pytest.raises(LegacyOutcomeUnknown):
        session.commit()
    assert sql_port.batch_status("ref-lost").committed
    assert _count(legacy_db, "customers") == 1


def test_an_unreachable_database_is_transient(sql_port: SqlPort) -> None:
    sql_port.engine = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2")
    with pytest.raises(LegacyTransient):
        sql_port.open_session().begin("ref", "customers")
    with pytest.raises(LegacyTransient):
        sql_port.batch_status("ref")
    with pytest.raises(LegacyTransient):
        sql_port.void_batch("sql-1")
