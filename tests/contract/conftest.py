"""A legacy SQL database for the SQL port: SQLite in a file, or a schema of its own in PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text

from tests.support.constants import POSTGRES_URL
from tests.support.postgres import postgres_schema, require_postgres

LEGACY_TABLES = {
    "sqlite": [
        """CREATE TABLE customers (id INTEGER PRIMARY KEY, name VARCHAR(100) NOT NULL, email TEXT,
           balance NUMERIC(12, 2) DEFAULT 0, born DATE)""",
        "CREATE TABLE order_lines (order_no INTEGER NOT NULL, line INTEGER NOT NULL, sku TEXT NOT NULL,"
        " PRIMARY KEY (order_no, line))",
        "CREATE TABLE audit_log (message TEXT)",  # no primary key: not a target
    ],
    "postgres": [
        """CREATE TABLE customers (id SERIAL PRIMARY KEY, name VARCHAR(100) NOT NULL, email TEXT,
           balance NUMERIC(12, 2) DEFAULT 0, born DATE)""",
        "CREATE TABLE order_lines (order_no INTEGER NOT NULL, line INTEGER NOT NULL, sku TEXT NOT NULL,"
        " PRIMARY KEY (order_no, line))",
        "CREATE TABLE audit_log (message TEXT)",
    ],
}


@dataclass
class LegacyDatabase:
    url: str
    schema: str | None
    engine: Engine


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param(
            "postgres",
            marks=[
                pytest.mark.postgres,
                pytest.mark.skipif(not POSTGRES_URL, reason="ADAPTER_TEST_POSTGRES_URL not set"),
            ],
        ),
    ]
)
def legacy_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LegacyDatabase]:
    """A legacy database with customers, order_lines (composite key) and audit_log (no key)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'erp.db'}"
        engine = create_engine(url)
        with engine.begin() as conn:
            for ddl in LEGACY_TABLES["sqlite"]:
                conn.execute(text(ddl))
        yield LegacyDatabase(url, None, engine)
        engine.dispose()
        return
    with postgres_schema("legacy") as (engine, schema):  # skips where PostgreSQL is not configured
        with engine.begin() as conn:
            conn.execute(text(f'SET search_path TO "{schema}"'))
            for ddl in LEGACY_TABLES["postgres"]:
                conn.execute(text(ddl))
        yield LegacyDatabase(require_postgres(), schema, engine)
