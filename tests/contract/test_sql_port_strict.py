"""The SQL port is as strict as its database: what the database would refuse is refused at ``add``
time, and what only the database can refuse (foreign keys, unique keys) is a ``LegacyRefused`` naming
the record and the field, never a value. A VOID removes every row of its batch or nothing.

Everything runs through the real port on SQLite and PostgreSQL (``legacy_db`` parameters); the
service-level tests run the kit (``build`` with a SQLite store) over the port.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from adapter.bootstrap import Kit, build
from adapter.config import ConfigError, load_settings
from adapter.domain.identity import Principal
from adapter.legacy import sql
from adapter.legacy.sql import SqlPort
from adapter.ports.legacy import LegacyRefused
from adapter.services.targets import RecordInvalid, TargetRules
from adapter.store.migrate import upgrade
from tests.contract.conftest import BOTH_DATABASES, LegacyDatabase, legacy_database
from tests.support.constants import SECRET

KEY = {"sqlite": "INTEGER PRIMARY KEY", "postgres": "SERIAL PRIMARY KEY"}
WHEN = {"sqlite": "DATETIME", "postgres": "TIMESTAMP"}


def _ddl(kind: str) -> list[str]:
    return [
        f"""CREATE TABLE customers (id {KEY[kind]}, name VARCHAR(20) NOT NULL, balance NUMERIC(10, 2),
            born DATE, seen {WHEN[kind]}, visits SMALLINT, points INTEGER, total BIGINT)""",
        f"""CREATE TABLE orders (id {KEY[kind]}, customer_id INTEGER NOT NULL REFERENCES customers (id),
            amount NUMERIC(10, 2) NOT NULL, due DATE)""",
        "CREATE TABLE codes (code TEXT PRIMARY KEY, label TEXT)",  # SQLite lets this key be NULL
    ]


@pytest.fixture(params=BOTH_DATABASES)
def erp(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LegacyDatabase]:
    with legacy_database(request.param, tmp_path, _ddl(request.param)) as database:
        yield database


@pytest.fixture
def port(erp: LegacyDatabase) -> Iterator[SqlPort]:
    port = SqlPort(erp.url, schema=erp.schema)
    yield port
    port.close()


def _kind(erp: LegacyDatabase) -> str:
    return "postgres" if erp.schema else "sqlite"


def _sql(erp: LegacyDatabase, statement: str, **params: Any) -> list[Any]:
    with erp.engine.begin() as conn:
        if erp.schema:
            conn.execute(text(f'SET LOCAL search_path TO "{erp.schema}"'))
        result = conn.execute(text(statement), params)
        return list(result.all()) if result.returns_rows else []


def _refused_at_add(port: SqlPort, target: str, record: dict[str, Any]) -> str:
    with pytest.raises(RecordInvalid) as refused:
        TargetRules(port.targets()).require(target).check(
            [{"name": "ok"}, record] if target == "customers" else [record]
        )
    return str(refused.value)


# --- refused at add time --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"name": "Ada", "born": "yesterday"}, "born"),
        ({"name": "Ada", "born": "2023-02-30"}, "born"),  # no such day
        ({"name": "Ada", "born": "2023-02-29"}, "born"),  # not a leap year
        ({"name": "Ada", "seen": "2024-01-31T25:00:00"}, "seen"),
        ({"name": "Ada", "balance": 1e12}, "balance"),  # numeric(10, 2) holds less than 10**8
        ({"name": "Ada", "balance": 99999999.999}, "balance"),  # rounds up to 10**8
        ({"name": "Ada", "visits": 40000}, "visits"),  # smallint
        ({"name": "Ada", "total": 2**63}, "total"),  # bigint
        ({"name": "A" * 21}, "name"),  # varchar(20)
        ({"name": None}, "name"),  # NOT NULL
    ],
)
def test_what_the_database_would_refuse_is_refused_at_add_time(
    port: SqlPort, record: dict[str, Any], field: str
) -> None:
    message = _refused_at_add(port, "customers", record)

    assert message.startswith(f"validation_error: record 1: field '{field}'")


def test_an_integer_column_holds_what_its_type_holds(port: SqlPort, erp: LegacyDatabase) -> None:
    """3000000000 does not fit PostgreSQL's integer; SQLite's INTEGER is 64 bits and takes it."""
    rules = TargetRules(port.targets()).require("customers")
    if _kind(erp) == "postgres":
        assert "field 'points'" in _refused_at_add(
            port, "customers", {"name": "Ada", "points": 3_000_000_000}
        )
        rules.check([{"name": "Ada", "points": 2**31 - 1}])
    else:
        rules.check([{"name": "Ada", "points": 3_000_000_000}])
        assert "field 'points'" in _refused_at_add(port, "customers", {"name": "Ada", "points": 2**63})


def test_values_at_the_edges_of_their_types_are_accepted_and_land(port: SqlPort, erp: LegacyDatabase) -> None:
    edge = {
        "name": "A" * 20,
        "balance": 99999999.99,
        "born": "2024-02-29",
        "seen": "2024-01-31T23:59:59.999999",
        "visits": -32768,
        "total": 2**63 - 1,
        "points": 7.0,  # JSON Schema's integer; the database's integer input needs 7
    }
    TargetRules(port.targets()).require("customers").check([edge])
    session = port.open_session()
    session.begin("ref-edges", "customers")
    session.add([edge])
    session.commit()
    session.close()

    assert _sql(erp, "SELECT visits, points FROM customers") == [(-32768, 7)]


def test_a_primary_key_is_required_even_where_sqlite_would_store_null(port: SqlPort) -> None:
    assert _refused_at_add(port, "codes", {"label": "no key"}) == (
        "validation_error: record 0: field 'code' is required"
    )
    assert "field 'code'" in _refused_at_add(port, "codes", {"code": None, "label": "null key"})
    customers = {t.name: t.schema for t in port.targets()}["customers"]
    assert "id" not in customers["required"]  # a generated key stays optional


# --- refused at commit: which record, which field, never the value --------------------------------


def _add_refused(port: SqlPort, target: str, *batches: list[dict[str, Any]]) -> LegacyRefused:
    session = port.open_session()
    session.begin("ref-refused", target)
    try:
        with pytest.raises(LegacyRefused) as refused:
            for records in batches:
                session.add(records)
            session.commit()
    finally:
        session.close()
    assert port.batch_status("ref-refused").batches == ()
    return refused.value


def test_a_missing_foreign_key_names_the_record_and_the_field(port: SqlPort, erp: LegacyDatabase) -> None:
    """SQLite enforces the foreign key too: the port turns it on for every connection."""
    [(customer,)] = _sql(erp, "INSERT INTO customers (name) VALUES ('Ada') RETURNING id")
    good = {"customer_id": customer, "amount": 10}
    refused = _add_refused(port, "orders", [good, good], [good, {"customer_id": 987654, "amount": 1}, good])

    assert refused.refusal.code == "foreign_key_violation"
    assert (refused.refusal.position, refused.refusal.field) == (3, "customer_id")
    assert "in customers" in refused.refusal.message
    assert "987654" not in str(refused)
    assert _sql(erp, "SELECT count(*) FROM orders") == [(0,)]


def test_a_duplicate_key_names_the_record_even_across_add_calls(port: SqlPort) -> None:
    first = [{"code": "A1", "label": "secret label"}, {"code": "B2"}]
    refused = _add_refused(port, "codes", first, [{"code": "C3"}, {"code": "A1", "label": "again"}])

    assert (refused.refusal.code, refused.refusal.position) == ("unique_violation", 3)
    assert "A1" not in str(refused) and "secret" not in str(refused)


def test_a_number_the_column_cannot_hold_names_the_field(port: SqlPort, erp: LegacyDatabase) -> None:
    """Past the kit's check (the port called directly): PostgreSQL refuses the overflow; the port
    says which record and which field, on both of its insert paths. SQLite stores any number."""
    if _kind(erp) == "sqlite":
        pytest.skip("SQLite stores any number in a NUMERIC column")
    for copy in (True, False):
        for target in port._targets.values():
            target.copy_ok = copy
        rows = [{"name": f"n{i}", "balance": 1.5} for i in range(4)] + [{"name": "big", "balance": 1e12}]
        refused = _add_refused(port, "customers", rows)

        assert refused.refusal.code == "numeric_value_out_of_range"
        assert (refused.refusal.position, refused.refusal.field) == (4, "balance")
        assert "1e" not in str(refused) and "1000000000000" not in str(refused)


def test_a_row_without_a_key_is_refused_before_the_ledger_could_lose_it(port: SqlPort) -> None:
    """Past the kit's check: SQLite would store a NULL key (PostgreSQL refuses it); either way the
    batch is refused, naming the key, instead of a ledger entry that cannot find its row."""
    refused = _add_refused(port, "codes", [{"code": "K1"}, {"label": "keyless"}])

    assert refused.refusal.code in ("row_key_missing", "not_null_violation")
    assert (refused.refusal.position, refused.refusal.field) == (1, "code")


def test_a_value_its_column_cannot_read_is_refused_with_its_field(port: SqlPort) -> None:
    refused = _add_refused(port, "customers", [{"name": "Ada", "born": "31.12.2023"}])

    assert (refused.refusal.position, refused.refusal.field) == (0, "born")
    assert "31.12" not in str(refused)


# --- VOID removes every row of its batch, or nothing ---------------------------------------------


def _commit(port: SqlPort, ref: str, target: str, records: list[dict[str, Any]]) -> str:
    session = port.open_session()
    session.begin(ref, target)
    session.add(records)
    batch = session.commit()
    session.close()
    return batch.legacy_batch_id


def test_a_void_that_cannot_remove_every_row_removes_none(port: SqlPort, erp: LegacyDatabase) -> None:
    batch = _commit(port, "ref-void", "codes", [{"code": "V1"}, {"code": "V2"}])
    _sql(erp, "DELETE FROM codes WHERE code = 'V1'")  # someone else removed one row meanwhile

    with pytest.raises(LegacyRefused) as refused:
        port.void_batch(batch)

    assert refused.value.refusal.code == "batch_rows_missing"
    assert _sql(erp, "SELECT code FROM codes") == [("V2",)]  # nothing removed
    assert [b.voided for b in port.batch_status("ref-void").batches] == [False]


def test_a_void_whose_rows_others_refer_to_is_refused(port: SqlPort, erp: LegacyDatabase) -> None:
    batch = _commit(port, "ref-parent", "customers", [{"name": "Ada"}])
    [(customer,)] = _sql(erp, "SELECT id FROM customers")
    _sql(erp, "INSERT INTO orders (customer_id, amount) VALUES (:c, 1)", c=customer)

    with pytest.raises(LegacyRefused) as refused:
        port.void_batch(batch)

    assert refused.value.refusal.code == "foreign_key_violation"
    assert _sql(erp, "SELECT count(*) FROM customers") == [(1,)]


def test_keys_of_every_type_are_found_again_by_void(erp: LegacyDatabase, tmp_path: Path) -> None:
    """A date key goes through the ledger's JSON as text; VOID must still find (and count) its row."""
    _sql(erp, "CREATE TABLE days (day DATE PRIMARY KEY, note TEXT)")
    port = SqlPort(erp.url, schema=erp.schema, tables=["days"])
    try:
        batch = _commit(port, "ref-days", "days", [{"day": "2024-02-29"}, {"day": "2024-03-01"}])
        assert port.void_batch(batch).already_voided is False
    finally:
        port.close()
    assert _sql(erp, "SELECT count(*) FROM days") == [(0,)]


# --- through the kit -------------------------------------------------------------------------------


@pytest.fixture
def kit(port: SqlPort, tmp_path: Path) -> Iterator[Kit]:
    url = f"sqlite:///{tmp_path / 'adapter.db'}"
    upgrade(url)
    settings = load_settings(database_url=url, secret=SECRET, secret_file=str(tmp_path / "unused"))
    kit = build(settings, legacy=port)
    yield kit
    kit.close()


ALICE = Principal(subject="alice", tenant="acme")


def test_the_kit_refuses_a_bad_record_at_add_and_commits_the_good_ones(kit: Kit, erp: LegacyDatabase) -> None:
    handle = kit.service.begin(ALICE, "customers").handle
    with pytest.raises(RecordInvalid, match="record 1: field 'balance'"):
        kit.service.add(ALICE, handle, [{"name": "Ada"}, {"name": "Bob", "balance": 1e12}])
    kit.service.add(ALICE, handle, [{"name": "Ada", "balance": 12.5, "born": "1815-12-10"}])

    result = kit.service.commit(ALICE, handle)

    assert result.status == "committed"
    assert _sql(erp, "SELECT name FROM customers") == [("Ada",)]


def test_an_abort_whose_void_could_not_remove_the_rows_is_not_compensated(
    kit: Kit, erp: LegacyDatabase
) -> None:
    handle = kit.service.begin(ALICE, "codes").handle
    kit.service.add(ALICE, handle, [{"code": "X1"}, {"code": "X2"}])
    assert kit.service.commit(ALICE, handle).status == "committed"
    _sql(erp, "DELETE FROM codes WHERE code = 'X2'")

    aborted = kit.service.abort(ALICE, handle)

    assert aborted.status == "compensating"  # held for an operator, never "compensated"
    assert _sql(erp, "SELECT code FROM codes") == [("X1",)]


# --- what the model reads, set without Python --------------------------------------------------------


def test_descriptions_come_from_the_setting_else_the_table_comment(
    erp: LegacyDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    if erp.schema:
        _sql(erp, "COMMENT ON TABLE orders IS 'Orders of existing customers.'")
        _sql(erp, "COMMENT ON COLUMN orders.due IS 'When it is due.'")
    monkeypatch.setenv("ADAPTER_SQL_URL", erp.url)
    monkeypatch.setenv("ADAPTER_SQL_DESCRIPTIONS", '{"customers": "Customer master data."}')
    if erp.schema:
        monkeypatch.setenv("ADAPTER_SQL_SCHEMA_NAME", erp.schema)
    port = sql.from_settings(load_settings())
    try:
        targets = {t.name: t for t in port.targets()}
    finally:
        port.close()

    assert targets["customers"].description == "Customer master data."
    assert targets["codes"].description == "rows of the table codes"
    if erp.schema:
        assert targets["orders"].description == "Orders of existing customers."
        assert targets["orders"].schema["properties"]["due"]["description"] == "When it is due."


def test_a_descriptions_setting_that_is_not_a_json_object_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ADAPTER_SQL_URL", "sqlite://")
    monkeypatch.setenv("ADAPTER_SQL_DESCRIPTIONS", "customers=Customers")

    with pytest.raises(ConfigError, match="invalid setting ADAPTER_SQL_DESCRIPTIONS: expected a JSON object"):
        sql.from_settings(load_settings())


def test_a_column_the_database_always_generates_is_no_field(erp: LegacyDatabase) -> None:
    if not erp.schema:
        pytest.skip("GENERATED ALWAYS AS IDENTITY is PostgreSQL's")
    _sql(erp, "CREATE TABLE tickets (id INT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, title TEXT NOT NULL)")
    port = SqlPort(erp.url, schema=erp.schema, tables=["tickets"])
    try:
        [tickets] = port.targets()
    finally:
        port.close()

    assert tickets.schema["properties"].keys() == {"title"} and tickets.schema["required"] == ["title"]
