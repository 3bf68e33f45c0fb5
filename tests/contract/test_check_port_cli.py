"""``python -m adapter check-port`` passes for the SQL port (SQLite, PostgreSQL), also on a table with
numeric, date and foreign-key columns given sample records, and for the Acme ERP example; what goes
wrong is one line that says what to do."""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.contract.conftest import BOTH_DATABASES, LegacyDatabase, legacy_database
from tests.support.cli import run_adapter, without_adapter_settings
from tests.support.servers import serve_in_thread

pytestmark = pytest.mark.slow  # subprocesses

REPO = Path(__file__).resolve().parents[2]


def _check_port(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_adapter("check-port", *args, cwd=cwd, env={**without_adapter_settings(), **env}, timeout=180)


SQL_HOOKS = (
    "--lose-commit-reply",
    "adapter.legacy.sql:lose_commit_reply",
    "--system-down",
    "adapter.legacy.sql:database_down",
)
KEY = {"sqlite": "INTEGER PRIMARY KEY", "postgres": "SERIAL PRIMARY KEY"}


def _shop_ddl(kind: str) -> list[str]:
    """An ordinary schema: numeric and date columns, and a table whose rows refer to another's."""
    return [
        f"""CREATE TABLE customers (id {KEY[kind]}, name VARCHAR(100) NOT NULL, balance NUMERIC(10, 2),
            born DATE, visits SMALLINT)""",
        f"""CREATE TABLE orders (id {KEY[kind]}, customer_id INTEGER NOT NULL REFERENCES customers (id),
            amount NUMERIC(10, 2) NOT NULL, due DATE, placed TIMESTAMP)""",
        "INSERT INTO customers (name) VALUES ('first'), ('second')",
    ]


@pytest.fixture(params=BOTH_DATABASES)
def shop_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LegacyDatabase]:
    with legacy_database(request.param, tmp_path, _shop_ddl(request.param)) as database:
        yield database


def _sql_env(database: Any) -> dict[str, str]:
    env = {"ADAPTER_SQL_URL": database.url}
    if database.schema:
        env["ADAPTER_SQL_SCHEMA_NAME"] = database.schema
    return env


def _all_hold(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stdout + done.stderr
    assert "10 of 10 rules hold" in done.stdout
    assert "FAIL" not in done.stdout and "SKIP" not in done.stdout


def test_the_sql_port_passes_check_port(legacy_db: Any, tmp_path: Path) -> None:
    done = _check_port(tmp_path, _sql_env(legacy_db), "adapter.legacy.sql:from_settings", *SQL_HOOKS)
    _all_hold(done)
    assert "(target 'customers')" in done.stdout


def test_numeric_and_date_columns_pass_with_generated_records(
    shop_db: LegacyDatabase, tmp_path: Path
) -> None:
    """The generated records stay within numeric(10, 2), smallint and real calendar days."""
    done = _check_port(tmp_path, _sql_env(shop_db), "adapter.legacy.sql:from_settings", *SQL_HOOKS)

    _all_hold(done)
    assert "(target 'customers')" in done.stdout  # the table others refer to comes first


def test_a_foreign_key_table_passes_with_sample_records_from_a_file(
    shop_db: LegacyDatabase, tmp_path: Path
) -> None:
    (tmp_path / "orders.samples.json").write_text('[{"customer_id": 1}, {"customer_id": 2}]')
    check = ("adapter.legacy.sql:from_settings", *SQL_HOOKS, "--target", "orders")

    without = _check_port(tmp_path, _sql_env(shop_db), *check)
    given = _check_port(tmp_path, _sql_env(shop_db), *check, "--records", "orders.samples.json")

    assert without.returncode == 1
    assert "field 'customer_id': foreign_key_violation" in without.stdout
    assert "give sample records: check-port --records FILE.json" in without.stdout
    _all_hold(given)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "invalid --records: cannot read missing.json: FileNotFoundError"),
        ("{not json", "invalid --records: cannot read missing.json: JSONDecodeError"),
        ('{"customer_id": 1}', "invalid --records: missing.json must hold a non-empty JSON list of objects"),
    ],
)
def test_a_records_file_that_cannot_be_used_is_one_line(
    tmp_path: Path, content: str | None, message: str
) -> None:
    if content is not None:
        (tmp_path / "missing.json").write_text(content)

    done = _check_port(tmp_path, {}, "adapter.legacy.sql:from_settings", "--records", "missing.json")

    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().startswith(f"adapter: {message}")


def test_a_factory_on_the_command_line_is_not_called_a_setting(tmp_path: Path) -> None:
    done = _check_port(tmp_path, {}, "shop_port:make_port")

    [line] = done.stderr.splitlines()
    assert done.returncode == 2
    assert line.startswith(
        "adapter: invalid check-port factory: cannot import 'shop_port': ModuleNotFoundError"
    )
    assert "ADAPTER_LEGACY_PORT" not in line
    assert f"looked in the working directory {tmp_path}" in line and "PYTHONPATH" in line


@pytest.fixture
def fake_erp() -> Iterator[tuple[str, str]]:
    sys.path.insert(0, str(REPO / "examples"))
    from acme_erp.fake_server import create_app

    token = secrets.token_hex(8)
    with serve_in_thread(create_app(token)) as url:
        yield url, token


def test_the_acme_erp_example_passes_check_port(fake_erp: tuple[str, str]) -> None:
    url, token = fake_erp
    done = _check_port(
        REPO / "examples",  # the user's folder: acme_erp/ is found from the current directory
        {"ACME_ERP_URL": url, "ACME_ERP_TOKEN": token},
        "acme_erp.port:make_port",
        "--lose-commit-reply",
        "acme_erp.port:lose_commit_reply",
        "--system-down",
        "acme_erp.port:system_down",
    )
    _all_hold(done)


def test_a_factory_that_needs_settings_says_which_one(tmp_path: Path) -> None:
    done = _check_port(tmp_path, {}, "adapter.legacy.sql:from_settings")

    assert done.returncode == 2
    assert done.stderr.strip() == "adapter: invalid setting ADAPTER_SQL_URL: Field required"
